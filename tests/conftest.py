"""Fixtures that start the real gateway (a separate process on a loopback port) and SOAP clients for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
LEGACY_WSDL = SHARED / "legacy" / "condorSchedd-7.2.4.wsdl"
WIRE = SHARED / "wire"

#: a gateway whose local backend has no slots: vanilla jobs stay idle, as in a pool without matching machines,
#: so tests of the queue itself see jobs exactly as submitted
QUEUE_ONLY = "[backends.local]\nslots = 0\n"


class GatewayProcess:
    """``birdbath-gateway`` running in its own process, started and stopped by a test."""

    def __init__(self, state_dir: Path, config: str | None = None, tmp: Path | None = None) -> None:
        self.state_dir = state_dir
        self.tmp = tmp or state_dir.parent
        self.config_text = config
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.log_path = self.tmp / f"gateway-{id(self)}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> "GatewayProcess":
        port_file = self.tmp / f"port-{id(self)}"
        port_file.unlink(missing_ok=True)
        args = [sys.executable, "-m", "gateway.cli", "--port", str(self.port or 0), "--port-file", str(port_file),
                "--state-dir", str(self.state_dir)]
        if self.config_text is not None:
            config = self.tmp / f"config-{id(self)}.toml"
            config.write_text(self.config_text)
            args += ["--config", str(config)]
        env = dict(os.environ, CONDOR_CONFIG="/dev/null", PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=open(self.log_path, "ab"),
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"gateway did not start:\n{self.log()}")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """SIGKILL: the crash a durable queue must survive."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> "GatewayProcess":
        self.stop()
        return self.start()


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator:
    """Start gateways with their own state directory (and optional TOML configuration)."""
    started: list[GatewayProcess] = []

    def start(config: str | None = None, state_dir: Path | None = None) -> GatewayProcess:
        gateway = GatewayProcess(state_dir or tmp_path / f"state{len(started)}", config, tmp_path)
        started.append(gateway.start())
        return gateway

    yield start
    for gateway in started:
        gateway.stop()


def module_gateway(config: str | None, scope: str = "module"):
    """A fixture running one gateway with this configuration, shared by a module's (or the session's) tests."""

    @pytest.fixture(scope=scope)
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
        tmp = tmp_path_factory.mktemp("gateway")
        process = GatewayProcess(tmp / "state", config, tmp=tmp).start()
        yield process
        process.stop()

    return fixture


#: the default shared gateway: each test uses its own clusters, and no vanilla job runs
gateway = module_gateway(QUEUE_ONLY)


def zeep_client(wsdl: str, address: str):
    import zeep

    client = zeep.Client(wsdl)
    return client.create_service("{urn:condor}condorSchedd", address)


@pytest.fixture(scope="module")
def schedd(gateway: GatewayProcess):
    """A zeep client built from the WSDL the gateway serves."""
    import zeep

    return zeep.Client(gateway.url + "condorSchedd.wsdl").service


@pytest.fixture(scope="module", params=["served", "legacy"])
def any_schedd(request: pytest.FixtureRequest, gateway: GatewayProcess):
    """zeep clients from the served WSDL and from the shipped 7.2.4 WSDL (location overridden)."""
    wsdl = gateway.url + "condorSchedd.wsdl" if request.param == "served" else str(LEGACY_WSDL)
    return zeep_client(wsdl, gateway.url)
