"""Configuration: a TOML file, overridden by command-line flags.

```toml
[gateway]
listen = "127.0.0.1"          # --listen
port = 1984                   # --port
state_dir = "/var/lib/birdbath-gateway"   # --state-dir
backend = "local"             # --backend
max_request_bytes = 16777216

[birdbath]                    # HTCondor's knobs of the same names, in lower case
allow_soap = ["127.0.0.0/8", "::1"]
allow_read = ["*"]
allow_write = ["*"]
queue_all_users_trusted = false
queue_super_users = ["root", "condor"]
default_owner = "alice"       # Owner of anonymous submissions (default: the user running the gateway)
max_soap_transaction_duration = -1
soap_leave_in_queue = ""

[submission]                  # the simplified submission API
staging_lifetime = 3600       # seconds an unused staging area (create/send) lives
output_retention = 86400      # seconds a finished staged job stays queued so its output can be fetched

[backends.local]              # passed to the selected backend as keyword arguments
```
"""

from __future__ import annotations

import getpass
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.core.auth import LOOPBACK, AccessPolicy, HostList
from gateway.core.schedd import ScheddSettings


class ConfigError(ValueError):
    pass


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "birdbath-gateway"


@dataclass
class GatewayConfig:
    listen: str = "127.0.0.1"
    port: int = 1984
    state_dir: Path = field(default_factory=default_state_dir)
    backend: str = "local"
    max_request_bytes: int = 16 * 1024 * 1024
    allow_soap: list[str] = field(default_factory=lambda: list(LOOPBACK))
    allow_read: list[str] = field(default_factory=lambda: ["*"])
    allow_write: list[str] = field(default_factory=lambda: ["*"])
    queue_all_users_trusted: bool = False
    queue_super_users: list[str] = field(default_factory=lambda: ["root", "condor"])
    default_owner: str = field(default_factory=getpass.getuser)
    max_soap_transaction_duration: int = -1
    soap_leave_in_queue: str = ""
    staging_lifetime: int = 3600
    output_retention: int = 86400
    backend_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def policy(self) -> AccessPolicy:
        try:
            return AccessPolicy(
                allow_soap=HostList(self.allow_soap), allow_read=HostList(self.allow_read),
                allow_write=HostList(self.allow_write), queue_all_users_trusted=self.queue_all_users_trusted,
                queue_super_users=frozenset(self.queue_super_users), default_owner=self.default_owner)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def schedd_settings(self) -> ScheddSettings:
        return ScheddSettings(max_transaction_duration=self.max_soap_transaction_duration,
                              leave_in_queue=self.soap_leave_in_queue or None)


_SECTIONS = {
    "gateway": ("listen", "port", "state_dir", "backend", "max_request_bytes"),
    "submission": ("staging_lifetime", "output_retention"),
    "birdbath": ("allow_soap", "allow_read", "allow_write", "queue_all_users_trusted", "queue_super_users",
                 "default_owner", "max_soap_transaction_duration", "soap_leave_in_queue"),
}


def load(path: Path | None) -> GatewayConfig:
    config = GatewayConfig()
    if path is None:
        return config
    try:
        with open(path, "rb") as stream:
            data = tomllib.load(stream)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read configuration {path}: {exc}") from None
    for section, keys in _SECTIONS.items():
        values = data.pop(section, {})
        unknown = set(values) - set(keys)
        if unknown:
            raise ConfigError(f"{path}: unknown setting(s) in [{section}]: {', '.join(sorted(unknown))}")
        for key, value in values.items():
            _set(config, key, value, f"{path} [{section}] {key}")
    config.backend_options = data.pop("backends", {})
    if data:
        raise ConfigError(f"{path}: unknown section(s): {', '.join(sorted(data))}")
    return config


def _set(config: GatewayConfig, key: str, value: Any, where: str) -> None:
    current = getattr(config, key)
    if isinstance(current, Path):
        value = Path(os.path.expanduser(str(value)))
    elif type(current) is not type(value):
        raise ConfigError(f"{where}: expected {type(current).__name__}, got {value!r}")
    setattr(config, key, value)
