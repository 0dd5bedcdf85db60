"""Configuration: a TOML file, overridden by command-line flags.

```toml
[gateway]
listen = "127.0.0.1"          # --listen
port = 1984                   # --port
state_dir = "/var/lib/birdbath-gateway"   # --state-dir
backend = "local"             # --backend
max_request_bytes = 16777216
log_file = "/var/log/birdbath-gateway.log"   # --log-file (default: standard error)
log_level = "info"            # --log-level: debug, info, warn or error

[birdbath]                    # HTCondor's knobs of the same names, in lower case
allow_soap = ["127.0.0.0/8", "::1"]
allow_read = ["*"]
allow_write = ["*"]
queue_all_users_trusted = false
queue_super_users = ["root", "condor"]
default_owner = "alice"       # Owner of anonymous submissions (default: the user running the gateway)
max_soap_transaction_duration = -1
soap_leave_in_queue = ""
max_transactions_per_caller = 20   # open transactions one caller (host and user) may hold at once

[submission]                  # the simplified submission API
staging_lifetime = 3600       # seconds an unused staging area (create/send) lives
output_retention = 86400      # seconds a finished staged job stays queued so its output can be fetched
max_staging_areas_per_caller = 20   # staging areas one caller (host and user) may hold at once

[backends.local]              # passed to the selected backend as keyword arguments
```
"""

from __future__ import annotations

import getpass
import inspect
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Union

from backends import registry
from gateway.core.auth import LOOPBACK, AccessPolicy, HostList
from gateway.core.schedd import ScheddSettings
from gateway.logging import LEVELS


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
    log_file: Path | None = None  # None: standard error
    log_level: str = "info"
    allow_soap: list[str] = field(default_factory=lambda: list(LOOPBACK))
    allow_read: list[str] = field(default_factory=lambda: ["*"])
    allow_write: list[str] = field(default_factory=lambda: ["*"])
    queue_all_users_trusted: bool = False
    queue_super_users: list[str] = field(default_factory=lambda: ["root", "condor"])
    default_owner: str = field(default_factory=getpass.getuser)
    max_soap_transaction_duration: int = -1
    soap_leave_in_queue: str = ""
    max_transactions_per_caller: int = 20
    staging_lifetime: int = 3600
    output_retention: int = 86400
    max_staging_areas_per_caller: int = 20
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
                              leave_in_queue=self.soap_leave_in_queue or None,
                              max_transactions_per_caller=self.max_transactions_per_caller)


_SECTIONS = {
    "gateway": ("listen", "port", "state_dir", "backend", "max_request_bytes", "log_file", "log_level"),
    "submission": ("staging_lifetime", "output_retention", "max_staging_areas_per_caller"),
    "birdbath": ("allow_soap", "allow_read", "allow_write", "queue_all_users_trusted", "queue_super_users",
                 "default_owner", "max_soap_transaction_duration", "soap_leave_in_queue", "max_transactions_per_caller"),
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


#: settings that name a file or directory (given as strings, ``~`` expanded)
_PATHS = frozenset({"state_dir", "log_file"})


def _set(config: GatewayConfig, key: str, value: Any, where: str) -> None:
    expected = str if key in _PATHS else type(getattr(config, key))
    if type(value) is not expected:
        raise ConfigError(f"{where}: expected {expected.__name__}, got {value!r}")
    setattr(config, key, Path(os.path.expanduser(value)) if key in _PATHS else value)


# -- checking a configuration before anything is started ---------------------------------------------------
#: inclusive bounds of the numeric settings (None: unbounded)
_RANGES: dict[str, tuple[int, int | None]] = {
    "port": (0, 65535), "max_request_bytes": (1, None), "staging_lifetime": (1, None), "output_retention": (0, None),
    "max_transactions_per_caller": (1, None), "max_staging_areas_per_caller": (1, None)}


def validate(config: GatewayConfig) -> None:
    """Raise ConfigError for anything that would make the gateway fail later, once flags are applied.

    Nothing is created here: a refused start must leave no state directory or log file behind."""
    for key, (low, high) in _RANGES.items():
        number = getattr(config, key)
        if number < low or (high is not None and number > high):
            raise ConfigError(f"{key} must be {_bounds(low, high)}, not {number}")
    if config.log_level not in LEVELS:
        raise ConfigError(f"log_level must be one of {', '.join(LEVELS)}, not {config.log_level!r}")
    config.policy()
    check_backend_options(config.backend, config.backend_options.get(config.backend, {}))
    check_directory(config.state_dir, "state directory")
    if config.log_file is not None:
        check_file(config.log_file, "log file")


def _bounds(low: int, high: int | None) -> str:
    return f"between {low} and {high}" if high is not None else f"at least {low}"


def check_directory(path: Path, what: str) -> None:
    """Fail unless ``path`` is a directory we can write in, or one we could create: its nearest existing
    ancestor is a writable directory.  (As root ``os.access`` says yes to nearly everything, but not to a path
    under a regular file or on a read-only file system, the cases that matter.)"""
    existing = path.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"cannot use {path} as the {what}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot use {path} as the {what}: {existing} is not writable")


def check_file(path: Path, what: str) -> None:
    """Fail unless ``path`` is a writable file, or can be created in its (existing) directory."""
    if path.is_dir():
        raise ConfigError(f"cannot use {path} as the {what}: it is a directory")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise ConfigError(f"cannot use {path} as the {what}: it is not writable")
    elif not path.absolute().parent.is_dir():
        raise ConfigError(f"cannot use {path} as the {what}: {path.absolute().parent} is not a directory")
    elif not os.access(path.absolute().parent, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot use {path} as the {what}: {path.absolute().parent} is not writable")


def check_backend_options(name: str, options: Any) -> None:
    """Fail if ``name`` is not an installed backend, or ``[backends.NAME]`` has a setting its factory does not
    take or a value of the wrong type: found now, before the backend creates its state, not at its first use."""
    found = registry.available()
    if name not in found:
        raise ConfigError(f"no backend named {name!r}; installed backends: {', '.join(sorted(found)) or 'none'}")
    where = f"[backends.{name}]"
    if not isinstance(options, dict):
        raise ConfigError(f"{where} must be a table of settings")
    factory = found[name].load()
    parameters = list(inspect.signature(factory).parameters.values())[1:]  # the first is the state directory
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    accepted = {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    unknown = set(options) - accepted
    if unknown:
        raise ConfigError(f"unknown setting(s) in {where}: {', '.join(sorted(unknown))}")
    hints = _type_hints(factory)
    for key, value in options.items():
        allowed = _toml_types(hints.get(key))
        if allowed and not _is_one_of(value, allowed):
            names = " or ".join(kind.__name__ for kind in allowed)
            raise ConfigError(f"{where} {key}: expected {names}, got {value!r}")


def _type_hints(factory: Callable[..., Any]) -> dict[str, Any]:
    """The factory's parameter annotations, or none when they cannot be resolved (then values are not checked)."""
    try:
        return typing.get_type_hints(factory.__init__ if isinstance(factory, type) else factory)
    except Exception:  # an annotation naming something only imported for type checkers
        return {}


def _toml_types(hint: Any) -> tuple[type, ...]:
    """The TOML value types an annotation admits; empty when it says nothing checkable (Any, callables, ...)."""
    members = typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else (hint,)
    admitted: list[type] = []
    for member in members:
        if member is type(None):
            continue  # TOML has no null
        if member in (bool, int, str, list, dict):
            admitted.append(member)
        elif member is float:
            admitted += [float, int]
        elif member is Path:
            admitted.append(str)
        else:
            return ()
    return tuple(admitted)


def _is_one_of(value: Any, allowed: tuple[type, ...]) -> bool:
    """isinstance, except that a bool is not a number (TOML ``true`` is no slot count)."""
    if isinstance(value, bool):
        return bool in allowed
    return isinstance(value, allowed)
