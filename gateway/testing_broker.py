"""A private RabbitMQ broker for tests: Debian's ``rabbitmq-server`` run in the foreground with its own node name,
ports (AMQP, distribution, epmd) and directories, so it clashes with no other broker on the machine (the one the
package may have started included), and stopped at the end.  Users are loaded from a definitions file made here.

The three ports are held (:class:`~gateway.testing_ports.HeldPort`) from the broker's making to its
:meth:`~RabbitBroker.close`: no socket of the tests running beside it can take one meanwhile, whatever the kernel's
ephemeral range, and a restart finds its ports free."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from gateway.testing_ports import HeldPort

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
EPMD = "epmd"


def password_hash(password: str, salt: bytes | None = None) -> str:
    """RabbitMQ's ``rabbit_password_hashing_sha256``: base64 of a 4-byte salt and SHA-256(salt + password)."""
    salt = salt if salt is not None else os.urandom(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


class RabbitBroker:
    """``start()``, ``stop()``, ``restart()``; ``port`` is its AMQP port (on every interface)."""

    def __init__(self, directory: Path, users: dict[str, str] | None = None) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.users = {"guest": "guest", **(users or {})}
        self._held = [HeldPort() for _ in range(3)]  # (the broker binds them with SO_REUSEADDR, as Erlang does)
        self.port, self.dist_port, self.epmd_port = (held.port for held in self._held)
        self.node = f"bbtest{os.getpid()}x{self.port}@localhost"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = directory / "broker.out"
        self._write_config()

    def _write_config(self) -> None:
        definitions = {
            "users": [{"name": name, "password_hash": password_hash(password), "tags": "administrator",
                       "hashing_algorithm": "rabbit_password_hashing_sha256"} for name, password in self.users.items()],
            "vhosts": [{"name": "/"}],
            "permissions": [{"user": name, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
                            for name in self.users],
        }
        (self.directory / "definitions.json").write_text(json.dumps(definitions))
        (self.directory / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = {self.port}\nloopback_users = none\n"
            f"load_definitions = {self.directory / 'definitions.json'}\n")
        (self.directory / "enabled_plugins").write_text("[].\n")

    def environment(self) -> dict[str, str]:
        return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.directory), "LANG": "C.UTF-8",
                "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_PORT": str(self.port),
                "RABBITMQ_DIST_PORT": str(self.dist_port), "ERL_EPMD_PORT": str(self.epmd_port),
                "RABBITMQ_MNESIA_BASE": str(self.directory / "mnesia"), "RABBITMQ_LOG_BASE": str(self.directory / "log"),
                "RABBITMQ_CONFIG_FILE": str(self.directory / "rabbitmq.conf"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.directory / "enabled_plugins"),
                "RABBITMQ_PID_FILE": str(self.directory / "broker.pid")}

    def start(self, timeout: float = 90) -> RabbitBroker:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([str(SERVER)], env=self.environment(), stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"rabbitmq-server exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"rabbitmq-server did not start:\n{self.log()}")
            time.sleep(0.2)
        return self

    def _ready(self) -> bool:
        """Accepting AMQP connections and answering the protocol header (the port opens a little before)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as connection:
                connection.sendall(b"AMQP\x00\x00\x09\x01")
                return bool(connection.recv(8))
        except OSError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the server's process group (the script and the Erlang VM it runs), then wait."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def restart(self) -> RabbitBroker:
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the broker and the epmd it started on its own port, then let their ports go."""
        self.stop()
        subprocess.run([_epmd(), "-port", str(self.epmd_port), "-kill"], capture_output=True, timeout=30,
                       check=False)
        for held in self._held:
            held.close()

    def url(self, user: str = "guest") -> str:
        return f"amqp://{user}:{self.users[user]}@127.0.0.1:{self.port}/%2F"


def _epmd() -> str:
    found = sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))
    return str(found[-1]) if found else EPMD


def available() -> bool:
    return SERVER.exists()
