"""What the SOAP benchmarks share: the servers they compare (the gateway, the bare Twisted + lxml baseline, the
gSOAP anchor), raw SOAP requests, and ``wrk`` as the load generator.

The anchor is built from ``bench/gsoap/`` into a cache directory the first time it is needed, when Debian's gsoap
tools and g++ are installed (``apt-get install gsoap libgsoap-dev g++``); without them :func:`gsoap_anchor` says why
and the benchmarks print the gateway's figures against the bare baseline only.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from gateway.testing import GatewayProcess  # noqa: E402

ENVELOPE = ('<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><c:{op} xmlns:c="urn:condor">'
            '{inner}</c:{op}></s:Body></s:Envelope>')
SOAP_HEADERS = {"Content-Type": "text/xml; charset=utf-8", "SOAPAction": '""'}
NUMBER = re.compile(rb"<(?:integer|id)>(\d+)</")
STATUS = re.compile(rb"<code>([A-Z_]+)</code>")
#: where the anchor is built (rebuilt when its source is newer)
ANCHOR_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "birdbath-bench" / "gsoap"


def envelope(op: str, inner: str = "") -> bytes:
    return ENVELOPE.format(op=op, inner=inner).encode()


def item(name: str, kind: str, value: str) -> str:
    return f"<item><name>{name}</name><type>{kind}-ATTR</type><value>{value}</value></item>"


def transaction(txn: int) -> str:
    return f"<transaction><id>{txn}</id><duration>600</duration></transaction>"


class Soap:
    """One kept-alive connection posting raw envelopes; ``call`` checks the status is SUCCESS."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def post(self, op: str, inner: str = "") -> bytes:
        self.connection.request("POST", "/", envelope(op, inner), SOAP_HEADERS)
        response = self.connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{op}: HTTP {response.status}: {body[:300]!r}")
        return body

    def call(self, op: str, inner: str = "") -> bytes:
        body = self.post(op, inner)
        status = STATUS.search(body)
        if status is None or status.group(1) != b"SUCCESS":
            raise RuntimeError(f"{op}: {body[:400]!r}")
        return body

    def number(self, op: str, inner: str = "") -> int:
        return int(NUMBER.search(self.call(op, inner)).group(1))

    def close(self) -> None:
        self.connection.close()


def gateway(tmp: Path, config: str = "", workers: int = 0, tree: Path | None = None) -> GatewayProcess:
    """A gateway on a loopback port whose local backend runs nothing (jobs stay queued as submitted), in one process
    or with ``workers`` (the lone connection the core's, as by default); ``tree``: another checkout's."""
    layout = ("--workers", str(workers)) + (("--lone-connection-in-core", "yes") if workers else ())
    config = "[backends.local]\nslots = 0\n" + config
    if tree is None:
        return GatewayProcess(tmp / "state", config, tmp=tmp, extra_args=layout).start()
    return TreeGateway(tree, tmp / "state", config, tmp, extra_args=layout).start()


class TreeGateway(GatewayProcess):
    """The gateway of another checkout (its code on the path and as the working directory ``-m`` puts first), to
    measure a change against the tree before it."""

    def __init__(self, tree: Path, state_dir: Path, config: str, tmp: Path, **options: Any) -> None:
        super().__init__(state_dir, config, tmp=tmp, **options)
        self.tree = tree

    def command(self, port_files: dict[str, Path]) -> list[str]:
        return ["env", "-C", str(self.tree), f"PYTHONPATH={self.tree}", *super().command(port_files)]


class Process:
    """A server process the benchmark started, on a loopback port."""

    def __init__(self, name: str, command: list[str], port: int | None = None, port_file: Path | None = None) -> None:
        self.name = name
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
        self.port = port if port is not None else _wait_for_port_file(self.process, port_file)
        _wait_for_listener(self.process, self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def bare_server(answers: dict[str, bytes], tmp: Path, tuned: bool = False) -> Process:
    """The bare Twisted + lxml baseline answering these bytes per operation (``bench/bare_server.py``)."""
    directory = tmp / "bare-answers"
    directory.mkdir(exist_ok=True)
    for operation, body in answers.items():
        (directory / f"{operation}.xml").write_bytes(body)
    port_file = tmp / f"bare-port-{tuned}"
    return Process("bare Twisted+lxml" + (", tuned" if tuned else ""),
                   [sys.executable, str(BENCH / "bare_server.py"), str(directory), str(port_file)]
                   + (["--tuned"] if tuned else []), port_file=port_file)


def gsoap_anchor() -> tuple[Path | None, str]:
    """The anchor's binary (built now if needed), or None and why not."""
    missing = [tool for tool in ("wsdl2h", "soapcpp2", "g++") if shutil.which(tool) is None]
    if missing:
        return None, f"gSOAP anchor skipped: {', '.join(missing)} not installed (apt-get install gsoap libgsoap-dev g++)"
    binary = ANCHOR_CACHE / "gsoap_ref_server"
    sources = [BENCH / "gsoap" / "gsoap_ref_server.cpp", BENCH / "gsoap" / "build.sh", ROOT / "wsdl" / "condorSchedd.wsdl"]
    if not binary.exists() or binary.stat().st_mtime < max(source.stat().st_mtime for source in sources):
        built = subprocess.run(["bash", str(BENCH / "gsoap" / "build.sh"), str(ANCHOR_CACHE)], capture_output=True,
                               text=True)
        if built.returncode != 0:
            return None, f"gSOAP anchor skipped: build failed: {built.stderr.strip()[-500:]}"
    return binary, "gSOAP anchor: " + str(binary)


def gsoap_server(binary: Path, ads: int = 100) -> Process:
    """The anchor on a free loopback port; ``getJobAds`` answers ``ads`` ads of 40 attributes."""
    port = free_port()
    return Process("gSOAP", [str(binary), str(port), str(ads)], port=port)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_port_file(process: subprocess.Popen, port_file: Path | None) -> int:
    deadline = time.monotonic() + 30
    while not (port_file and port_file.exists() and port_file.read_text().strip()):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"server did not start: {process.stderr.read().decode(errors='replace')[-2000:]}")
        time.sleep(0.05)
    return int(port_file.read_text())


def _wait_for_listener(process: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server on port {port} did not start") from None
            time.sleep(0.05)


# -- wrk ------------------------------------------------------------------------------------------------------------
WRK_SCRIPT = """wrk.method = "POST"
wrk.headers["Content-Type"] = "text/xml; charset=utf-8"
wrk.headers["SOAPAction"] = '""'
local file = io.open("{body}", "rb")
wrk.body = file:read("*a")
file:close()
"""
RATE = re.compile(r"Requests/sec:\s+([\d.]+)")
PROBLEMS = re.compile(r"(Non-2xx or 3xx responses|Socket errors):.*")


def wrk_missing() -> str | None:
    return None if shutil.which("wrk") else "wrk is not installed (apt-get install wrk): no request rates measured"


def wrk_rate(url: str, body: bytes, seconds: float, connections: int = 16) -> float:
    """Requests per second ``wrk`` gets posting ``body`` on ``connections`` kept-alive connections (one wrk thread,
    so the server has the other core).  Non-2xx answers or socket errors make the figure worthless: raise."""
    with tempfile.TemporaryDirectory() as tmp:
        body_file, script = Path(tmp) / "body.xml", Path(tmp) / "post.lua"
        body_file.write_bytes(body)
        script.write_text(WRK_SCRIPT.format(body=body_file))
        run = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "-s", str(script), url],
                             capture_output=True, text=True, check=True)
    problems = PROBLEMS.search(run.stdout)
    if problems:
        raise RuntimeError(f"wrk against {url}: {problems.group(0)}\n{run.stdout}")
    return float(RATE.search(run.stdout).group(1))
