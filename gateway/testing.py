"""Test fixtures that run the real gateway in its own process on a loopback port.

Both test suites import them (a conftest that imports ``start_gateway`` has the fixture): the gateway's own tests
and the client library's in ``clients/python/tests``, which must not reach into the other suite's package.  The
module ships with the gateway so that a third-party backend or client can test against a real server the same way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

#: the directory that holds the ``gateway`` package (the repository in a checkout)
SOURCE_ROOT = Path(__file__).resolve().parents[1]

#: a gateway whose local backend has no slots: vanilla jobs stay idle, as in a pool without matching machines,
#: so tests of the queue itself see jobs exactly as submitted
QUEUE_ONLY = "[backends.local]\nslots = 0\n"


class GatewayProcess:
    """``birdbath-gateway`` running in its own process, started and stopped by a test."""

    def __init__(self, state_dir: Path, config: str | None = None, tmp: Path | None = None,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.state_dir = state_dir
        self.tmp = tmp or state_dir.parent
        self.config_text = config
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.log_path = self.tmp / f"gateway-{id(self)}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def command(self, port_file: Path) -> list[str]:
        args = [sys.executable, "-m", "gateway.cli", "--port", str(self.port or 0), "--port-file", str(port_file),
                "--state-dir", str(self.state_dir), *self.extra_args]
        if self.config_text is not None:
            config = self.tmp / f"config-{id(self)}.toml"
            config.write_text(self.config_text)
            args += ["--config", str(config)]
        return args

    def start(self) -> "GatewayProcess":
        port_file = self.tmp / f"port-{id(self)}"
        port_file.unlink(missing_ok=True)
        env = dict(os.environ, CONDOR_CONFIG="/dev/null", PYTHONPATH=str(SOURCE_ROOT))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command(port_file), cwd=SOURCE_ROOT, env=env, stdout=log,
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
def start_gateway(tmp_path: Path) -> Iterator[Callable[..., GatewayProcess]]:
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


def zeep_client(wsdl: str, address: str):
    """A zeep condorSchedd service from any copy of the WSDL, sent to ``address``."""
    import zeep

    client = zeep.Client(wsdl)
    return client.create_service("{urn:condor}condorSchedd", address)
