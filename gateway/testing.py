"""Test fixtures that run the real gateway in its own process on a loopback port.

Both test suites import them (a conftest that imports ``start_gateway`` has the fixture): the gateway's own tests
and the client library's in ``clients/python/tests``, which must not reach into the other suite's package.  The
module ships with the gateway so that a third-party backend or client can test against a real server the same way.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

#: the directory that holds the ``gateway`` package (the repository in a checkout)
SOURCE_ROOT = Path(__file__).resolve().parents[1]
#: how long a test waits for a gateway to write its port files: generous, as a loaded CI machine (several test
#: processes, each gateway with its workers importing the whole stack) takes tens of seconds; a gateway that fails
#: exits, which is seen at once
START_SECONDS = 120
#: ``BIRDBATH_TEST_WORKERS=2``: every gateway the tests start runs with that many worker processes (``--workers``),
#: so that the same end-to-end tests run against both process layouts (0, one process, unless set, whatever the
#: machine's default; a test that names ``--workers`` has its own); with workers, ``lone_connection_in_core`` is
#: off (what those tests are about is what crosses between the processes).  ``default``: the gateway's own defaults
#: (a worker per CPU, the lone connection the core's), as a user's gateway runs (the README's examples)
TEST_WORKERS = os.environ.get("BIRDBATH_TEST_WORKERS", "0")

#: the mark of a test that starts a gateway process: only such a test differs between the process layouts, so the
#: suite's ``workers`` environment runs these alone (``pytest -m gateway``) rather than everything twice.  The
#: fixtures below give it to the tests that use them (:func:`starts_gateway`); a test that makes its own
#: :class:`GatewayProcess` carries it by hand, and one that forgets fails in the first environment (:class:`MarkCheck`).
GATEWAY_MARK = "gateway"
#: the fixture functions that start gateways (their tests are marked at collection)
_STARTING_FIXTURES: set[Callable[..., Any]] = set()


def starting_fixture(function: Callable[..., Any]) -> Callable[..., Any]:
    """Note a fixture function as one that starts gateways, before ``pytest.fixture`` wraps it."""
    _STARTING_FIXTURES.add(function)
    return function


def starts_gateway(item: pytest.Item) -> bool:
    """Whether a collected test starts a gateway: marked, or using (maybe through other fixtures) one that does."""
    if item.get_closest_marker(GATEWAY_MARK):
        return True
    info = getattr(item, "_fixtureinfo", None)  # the closure of fixtures the test uses, resolved at collection
    return info is not None and any(definition.func in _STARTING_FIXTURES
                                    for definitions in info.name2fixturedefs.values() for definition in definitions)


class MarkCheck:
    """A pytest plugin: marks the tests that start gateways, and fails one that starts a gateway unmarked (which the
    ``workers`` environment would never run)."""

    def __init__(self) -> None:
        self.running: pytest.Item | None = None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if starts_gateway(item) and not item.get_closest_marker(GATEWAY_MARK):
                item.add_marker(GATEWAY_MARK)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.running = item

    def check(self) -> None:
        if self.running is not None and not self.running.get_closest_marker(GATEWAY_MARK):
            raise RuntimeError(f"{self.running.nodeid} starts a gateway without the mark "
                               f"@pytest.mark.{GATEWAY_MARK}, so the workers environment would skip it: mark it")


#: the check of the running suite, when its conftest installed one
MARK_CHECK: MarkCheck | None = None

#: a gateway whose local backend has no slots: vanilla jobs stay idle, as in a pool without matching machines,
#: so tests of the queue itself see jobs exactly as submitted
QUEUE_ONLY = "[backends.local]\nslots = 0\n"


class GatewayProcess:
    """``birdbath-gateway`` running in its own process, started and stopped by a test.

    ``ssl`` adds the SSL port (``--ssl-port``, on a free port; the TLS knobs come with ``config``, e.g. from
    :meth:`TestPki.config`); ``plain=False`` switches the plain port off; ``python_path``: directories it imports
    from too (a front end a test installs there).  A restart keeps the ports."""

    def __init__(self, state_dir: Path, config: str | None = None, tmp: Path | None = None,
                 extra_args: tuple[str, ...] = (), *, ssl: bool = False, plain: bool = True,
                 python_path: tuple[Path, ...] = ()) -> None:
        self.state_dir = state_dir
        self.tmp = tmp or state_dir.parent
        self.config_text = config
        self.extra_args = extra_args
        self.ssl = ssl
        self.plain = plain
        #: directories the gateway imports from besides the source tree (a package a test installs there)
        self.python_path = python_path
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.ssl_port: int | None = None
        self.log_path = self.tmp / f"gateway-{id(self)}.log"

    @property
    def config_path(self) -> Path:
        """The configuration file written from ``config`` (a test may edit it while the gateway runs)."""
        return self.tmp / f"config-{id(self)}.toml"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def https_url(self) -> str:
        return f"https://127.0.0.1:{self.ssl_port}/"

    def _port_files(self) -> dict[str, Path]:
        """The files the gateway writes its ports to, by attribute."""
        files = {"port": self.tmp / f"port-{id(self)}"} if self.plain else {}
        if self.ssl:
            files["ssl_port"] = self.tmp / f"ssl-port-{id(self)}"
        return files

    def command(self, port_files: dict[str, Path]) -> list[str]:
        args = [sys.executable, "-m", "gateway.cli", "--state-dir", str(self.state_dir)]
        if self.plain:
            args += ["--port", str(self.port or "auto"), "--port-file", str(port_files["port"])]
        else:
            args += ["--port", "0"]
        if self.ssl:
            args += ["--ssl-port", str(self.ssl_port or 0), "--ssl-port-file", str(port_files["ssl_port"])]
        args += self.extra_args
        if "--workers" not in self.extra_args and TEST_WORKERS != "default":
            args += ["--workers", TEST_WORKERS]
            if TEST_WORKERS != "0":
                args += ["--lone-connection-in-core", "no"]
        if self.config_text is not None:
            self.config_path.write_text(self.config_text)
            args += ["--config", str(self.config_path)]
        return args

    def start(self) -> "GatewayProcess":
        if MARK_CHECK is not None:
            MARK_CHECK.check()
        port_files = self._port_files()
        for port_file in port_files.values():
            port_file.unlink(missing_ok=True)
        env = dict(os.environ, CONDOR_CONFIG="/dev/null",
                   PYTHONPATH=os.pathsep.join(map(str, (SOURCE_ROOT, *self.python_path))))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command(port_files), cwd=SOURCE_ROOT, env=env, stdout=log,
                                            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_SECONDS
        while not all(port_file.exists() and port_file.read_text().strip() for port_file in port_files.values()):
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.kill()  # never left running behind the failure, taking the machine's time from later tests
                raise RuntimeError(f"gateway did not start in {START_SECONDS} s:\n{self.log()}")
            time.sleep(0.05)
        for attribute, port_file in port_files.items():
            setattr(self, attribute, int(port_file.read_text()))
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
@starting_fixture
def start_gateway(tmp_path: Path) -> Iterator[Callable[..., GatewayProcess]]:
    """Start gateways with their own state directory (and optional TOML configuration)."""
    started: list[GatewayProcess] = []

    def start(config: str | None = None, state_dir: Path | None = None, **options: bool) -> GatewayProcess:
        gateway = GatewayProcess(state_dir or tmp_path / f"state{len(started)}", config, tmp_path, **options)
        started.append(gateway.start())
        return gateway

    yield start
    for gateway in started:
        gateway.stop()


def module_gateway(config: str | None, scope: str = "module", **options: bool):
    """A fixture running one gateway with this configuration, shared by a module's (or the session's) tests
    (``options``: GatewayProcess's ``ssl`` and ``plain``)."""

    @pytest.fixture(scope=scope)
    @starting_fixture
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
        tmp = tmp_path_factory.mktemp("gateway")
        process = GatewayProcess(tmp / "state", config, tmp=tmp, **options).start()
        yield process
        process.stop()

    return fixture


@dataclass(frozen=True)
class ClientCertificate:
    """A client's certificate and key, as separate PEM files and as one (certificate chain, then key)."""

    certificate: Path
    key: Path
    combined: Path
    subject: str


class TestPki:
    """A certificate authority made at test time (``trustme``), the gateway's server key signed by it, client
    certificates, a certificate map file and a password file, and the ``[birdbath]`` TOML naming them.

    Clients are issued with the subject ``/O=Birdbath Test/OU=People/CN=<name>``, which :data:`MAP_FILE` maps to
    the user ``<name>``; :meth:`passwords` hashes with bcrypt's least cost, to keep tests fast."""

    __test__ = False  # not a test class, whatever pytest makes of its name

    ORGANIZATION = "Birdbath Test"
    MAP_FILE = 'SSL "^/O=Birdbath Test/OU=People/CN=([a-z]+)$" \\1\n'

    def __init__(self, directory: Path) -> None:
        import trustme

        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name=self.ORGANIZATION)
        self.ca_file = directory / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        server = self.ca.issue_cert("127.0.0.1", "localhost", common_name="localhost",
                                    organization_name=self.ORGANIZATION)
        self.server_keyfile = directory / "server.pem"
        server.private_key_and_cert_chain_pem.write_to_path(str(self.server_keyfile))
        self.mapfile = directory / "certificate_mapfile"
        self.mapfile.write_text(self.MAP_FILE)
        self.password_file = directory / "passwords"

    def client(self, name: str, *, not_after: datetime.datetime | None = None, unit: str = "People",
               ca: object | None = None) -> ClientCertificate:
        """A client certificate for ``name`` (signed by this CA, or by another trustme ``ca``)."""
        issuer = ca or self.ca
        leaf = issuer.issue_cert(common_name=name, organization_name=self.ORGANIZATION,  # type: ignore[attr-defined]
                                 organization_unit_name=unit, not_after=not_after)
        stem = self.directory / f"{name}-{unit}-{id(leaf)}"
        files = ClientCertificate(stem.with_suffix(".crt"), stem.with_suffix(".key"), stem.with_suffix(".pem"),
                                  f"/O={self.ORGANIZATION}/OU={unit}/CN={name}")
        leaf.cert_chain_pems[0].write_to_path(str(files.certificate))
        leaf.private_key_pem.write_to_path(str(files.key))
        leaf.private_key_and_cert_chain_pem.write_to_path(str(files.combined))
        return files

    def passwords(self, users: dict[str, str]) -> Path:
        """Write the password file with these users and passwords."""
        import bcrypt

        self.password_file.write_text("".join(
            f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()}\n"
            for user, password in users.items()))
        return self.password_file

    def config(self, *, certificates: bool = True, passwords: bool = False, extra: str = "") -> str:
        """The ``[birdbath]`` section for the SSL port (``extra``: more lines of that section)."""
        lines = ["[birdbath]", "enable_soap_ssl = true", f'soap_ssl_server_keyfile = "{self.server_keyfile}"']
        if certificates:
            lines += [f'soap_ssl_ca_file = "{self.ca_file}"', f'certificate_mapfile = "{self.mapfile}"']
        if passwords:
            lines.append(f'password_file = "{self.password_file}"')
        return "\n".join(lines) + "\n" + extra


def zeep_client(wsdl: str, address: str):
    """A zeep condorSchedd service from any copy of the WSDL, sent to ``address``."""
    import zeep

    client = zeep.Client(wsdl)
    return client.create_service("{urn:condor}condorSchedd", address)
