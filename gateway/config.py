"""Configuration: a TOML file, overridden by command-line flags.

```toml
[gateway]
listen = "127.0.0.1"          # --listen
port = 1984                   # --port: 0 switches the plain HTTP port off, "auto" picks a free one
state_dir = "/var/lib/birdbath-gateway"   # --state-dir
local_socket = "/var/lib/birdbath-gateway/birdbath.sock"   # Unix socket for local clients (SO_PEERCRED);
                              # default: birdbath.sock in the state directory; "" switches it off
backend = "local"             # --backend
max_request_bytes = 16777216
max_expression_length = 65536   # characters of one ClassAd expression a client sends (constraint, attribute value)
max_expression_depth = 1000     # levels it may nest (operators chained, brackets)
query_workers = 4             # queries (getJobAds, summaries, history) that run at once, apart from job control
max_queries_per_caller = 2    # of those, how many one caller runs at once (more wait their turn)
max_query_seconds = 20        # a query still evaluating then is stopped and answers FAIL
workers = 4                   # processes doing the protocol work (HTTP, TLS, XML, JSON) around the core
                              # (default: the CPUs this process may run on, within its cgroup's CPU quota, 0 on
                              # one; 0: one process)
lone_connection_in_core = true   # with workers: a connection that arrives while no other is open is served by the
                              # core itself, as with workers = 0 (a lone client's calls cross to no other process)
log_file = "/var/log/birdbath-gateway.log"   # --log-file (default: standard error)
log_level = "info"            # --log-level: debug, info, warn or error
max_file_descriptors = 0      # the open files limit set at start (HTCondor's MAX_FILE_DESCRIPTORS); 0: the hard limit
max_connections = 0           # connections served at once; 0: three quarters of the open files limit
max_connections_per_caller = 0   # of those, held by one caller (local user or host); 0: an eighth, at most 1024
reserved_connections = 0      # of those, kept for root and queue_super_users on this machine; 0: a sixteenth, <= 64
max_header_seconds = 30       # a request's headers must arrive within this many seconds of its first byte
max_body_seconds = 120        # and its body within this many seconds of its headers (else 408, connection closed)
metrics_port = 0              # /metrics, /healthz, /readyz on a port of their own too (e.g. 9101); 0: only on
                              # the gateway's port

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
enable_soap_ssl = false       # the SSL port: HTTPS with client certificates and/or HTTP Basic
soap_ssl_port = 0             # --ssl-port (which also enables it); 0 picks a free port
soap_ssl_server_keyfile = "/etc/birdbath/server.pem"   # --ssl-keyfile: certificate, chain and private key
soap_ssl_server_keyfile_password = ""                   # when the key is encrypted
soap_ssl_ca_file = "/etc/birdbath/ca.pem"              # --ssl-ca-file: CAs client certificates chain to
soap_ssl_ca_dir = "/etc/grid-security/certificates"     # or a directory of them
certificate_mapfile = "/etc/birdbath/certificate_mapfile"   # SSL "<regex on the subject>" user
password_file = "/etc/birdbath/passwords"               # user:bcrypt-hash lines (htpasswd -B); off when unset
password_failure_delay = 1    # seconds a failed login's answer waits (per source and user), doubled per failure
max_password_failure_delay = 60   # up to this; attempts during the wait get 429 with Retry-After
trust_domain = "pool.example.org"   # the issuer (iss) of the gateway's IDTOKENs (default: this host's name)
sec_token_pool_signing_key_file = "/etc/birdbath/tokens/POOL"   # the POOL key IDTOKENs (Bearer) are signed with
sec_password_directory = "/etc/birdbath/tokens"   # the other signing keys, a file per key id (kid)
sec_token_max_age = -1        # refuse IDTOKENs issued longer ago than this (seconds); -1: no limit
sec_token_revocation_expr = ""   # ClassAd expression over a token's claims: true revokes it
scitokens_trusted_issuers = ["https://issuer.example.org"]   # SciTokens (Bearer) accepted from these issuers
scitokens_server_audience = ["https://birdbath.example.org"]   # a SciToken's aud must name one of these
collector_port = 0            # condorCollector on a port of its own too (e.g. 9618); 0: only on the gateway's port

[submission]                  # the simplified submission API
staging_lifetime = 3600       # seconds an unused staging area (create/send) lives
output_retention = 86400      # seconds a finished staged job stays queued so its output can be fetched
max_staging_areas_per_caller = 20   # staging areas one caller (host and user) may hold at once

[daemon]                      # running under condor_master and behind condor_shared_port (HTCondor's knobs)
use_shared_port = false       # also serve the connections condor_shared_port passes (port = 0: only those)
daemon_socket_dir = "/var/lock/condor/daemon_sock"   # condor_config_val DAEMON_SOCKET_DIR
shared_port_id = "birdbath"   # the named socket there; clients use <host:9618?sock=birdbath>
not_responding_timeout = 0    # DC_CHILDALIVE's timeout; 0: BIRDBATH_NOT_RESPONDING_TIMEOUT or
                              # NOT_RESPONDING_TIMEOUT from HTCondor's configuration, else 3600
master_keepalive = ""         # --master-keepalive HOST:PORT: the 2009 datagram to a master not our parent

[carod]                       # low-latency jobs over AMQP (README, "Low-latency jobs over AMQP")
enable_carod = false
carod_broker_ip = "127.0.0.1"
carod_broker_queue = "grid"

[qmf]                         # the gateway as a QMF agent on a Qpid broker (README, "QMF")
enable_qmf = false
qmf_broker_host = "localhost"
qmf_broker_port = 5672

[backends.local]              # passed to the selected backend as keyword arguments
```
"""

from __future__ import annotations

import getpass
import hashlib
import inspect
import os
import pwd
import tomllib
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from twisted.internet.interfaces import IReactorTime

from backends import registry
from gateway.connections import ConnectionLimits, RequestDeadlines
from gateway.core.auth import LOOPBACK, AccessPolicy, HostList
from gateway.core.queries import QuerySettings
from gateway.core.schedd import ScheddSettings
from gateway.daemon import keepalive, sharedport
from gateway.identity.bearer import TokenSettings
from gateway.identity.callers import Identification, Offload
from gateway.identity.mapfile import CertificateMap, MapFileError
from gateway.identity.passwords import PasswordFile, PasswordFileError
from gateway.identity.peers import is_loopback
from gateway.identity.throttle import LoginThrottle, ThrottleSettings
from gateway.identity.tls import ClientCertificates, ServerContextFactory, TlsError, TlsSettings
from gateway.localsocket import LOCAL_SOCKET_NAME, UnsafeSocketPath, check_path
from gateway.logging import LEVELS
from jobmodel.expressions import ExpressionLimits

#: ``port = "auto"``: the plain port on any free port (``port = 0`` switches the plain port off)
AUTO = "auto"


class ConfigError(ValueError):
    pass


#: root's state directory: a system service's place, which other users can traverse to reach their jobs' spool
#: (root's home is closed to them, and a root gateway runs each job as its owner)
SYSTEM_STATE_DIR = Path("/var/lib/birdbath-gateway")


def default_state_dir() -> Path:
    if os.geteuid() == 0:
        return SYSTEM_STATE_DIR
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "birdbath-gateway"


def content_digest(data: bytes) -> str:
    """The digest a file's content is known by (the configuration file's, which workers compare with theirs)."""
    return hashlib.sha256(data).hexdigest()


#: the most worker processes (``workers``)
MAX_WORKERS = 256


def default_workers() -> int:
    """``workers``' default: one per CPU the gateway may run on (its affinity, as ``taskset`` sets it, within its
    cgroup's CPU quota, as ``docker --cpus`` sets it), none on a single CPU, where the workers would only add their
    crossings to the core."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = quota_cpus()
    if quota is not None:
        cpus = min(cpus, quota)
    return min(cpus, MAX_WORKERS) if cpus > 1 else 0


def quota_cpus(root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")) -> int | None:
    """The CPUs this process's cgroups let it use, rounded up: the smallest quota of its cgroup and their ancestors
    (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``); None without a quota or a cgroup to read.
    In a container whose cgroups are not its own namespace, /proc names the host's path, not found under the mount:
    the mount's root is then the container's cgroup."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    quotas: list[int] = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        controllers, path = fields[1], fields[2]
        if controllers == "":
            base, read = root, _v2_quota
        elif "cpu" in controllers.split(","):
            base, read = root / controllers, _v1_quota
        else:
            continue
        directory = base / path.lstrip("/")
        if not directory.is_dir():
            directory = base
        while True:  # the cgroup, then its ancestors up to the mount's root
            quota = read(directory)
            if quota is not None:
                quotas.append(quota)
            if directory == base or directory.parent == directory:
                break
            directory = directory.parent
    return min(quotas) if quotas else None


def _v2_quota(directory: Path) -> int | None:
    try:
        quota, period = (directory / "cpu.max").read_text().split()
        return None if quota == "max" else max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        return None


def _v1_quota(directory: Path) -> int | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 else max(1, -(-quota // period))
    except (OSError, ValueError):
        return None


@dataclass
class GatewayConfig:
    listen: str = "127.0.0.1"
    port: int | str = 1984  # a number, 0 (no plain port) or AUTO
    state_dir: Path = field(default_factory=default_state_dir)
    #: the local (Unix-domain) socket: None for the default (in the state directory), "" for none
    local_socket: Path | str | None = None
    backend: str = "local"
    max_request_bytes: int = 16 * 1024 * 1024
    max_expression_length: int = ExpressionLimits.max_length
    max_expression_depth: int = ExpressionLimits.max_depth
    query_workers: int = QuerySettings.workers
    max_queries_per_caller: int = QuerySettings.per_caller
    max_query_seconds: int = int(QuerySettings.budget)
    #: worker processes serving the front ends around this (the core) process; 0: one process does everything
    workers: int = field(default_factory=default_workers)
    #: with workers: a connection that arrives while the gateway has no other open is served by the core process
    #: itself (a lone client's calls then cost what they cost in one process: nothing crosses between processes)
    lone_connection_in_core: bool = True
    log_file: Path | None = None  # None: standard error
    log_level: str = "info"
    max_file_descriptors: int = 0  # 0: the hard limit
    max_connections: int = 0  # 0: computed from the open files limit (ConnectionLimits.computed), as the next two
    max_connections_per_caller: int = 0
    reserved_connections: int = 0
    max_header_seconds: int = int(RequestDeadlines.headers)
    max_body_seconds: int = int(RequestDeadlines.body)
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
    enable_soap_ssl: bool = False
    soap_ssl_port: int = 0  # 0: any free port, as in HTCondor
    soap_ssl_server_keyfile: Path | None = None
    soap_ssl_server_keyfile_password: str = ""
    soap_ssl_ca_file: Path | None = None
    soap_ssl_ca_dir: Path | None = None
    certificate_mapfile: Path | None = None
    password_file: Path | None = None
    password_failure_delay: int = int(ThrottleSettings.first_delay)
    max_password_failure_delay: int = int(ThrottleSettings.max_delay)
    trust_domain: str = ""  # "": this host's fully qualified name
    sec_token_pool_signing_key_file: Path | None = None
    sec_password_directory: Path | None = None
    sec_token_max_age: int = -1
    sec_token_revocation_expr: str = ""
    scitokens_trusted_issuers: list[str] = field(default_factory=list)
    scitokens_server_audience: list[str] = field(default_factory=list)
    use_shared_port: bool = False
    daemon_socket_dir: Path = Path("/var/lock/condor/daemon_sock")
    shared_port_id: str = "birdbath"
    not_responding_timeout: int = 0  # 0: from HTCondor's configuration (keepalive.resolve_timeout)
    master_keepalive: str = ""  # HOST:PORT, or "" for none
    collector_port: int = 0  # 0: the collector is served on the gateway's own port only
    metrics_port: int = 0  # 0: the monitoring pages are served on the gateway's own port only
    backend_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the front ends' own sections ([carod], [qmf]) by name, each read by its front end (gateway/frontend.py)
    sections: dict[str, Any] = field(default_factory=dict)
    #: the file the settings were read from (None: the defaults), and the digest of the bytes read
    source: Path | None = None
    source_digest: str | None = None

    @property
    def plain_port(self) -> int | None:
        """The port to bind for plain HTTP (0: any free one), or None when it is switched off."""
        if self.port == AUTO:
            return 0
        assert isinstance(self.port, int)
        return self.port if self.port != 0 else None

    def local_socket_path(self) -> Path | None:
        """Where the local socket is made (``birdbath.sock`` in the state directory unless set), or None when
        ``local_socket = ""`` switches it off."""
        if self.local_socket == "":
            return None
        return Path(self.local_socket) if self.local_socket is not None else self.state_dir / LOCAL_SOCKET_NAME

    def named_socket(self) -> Path:
        """The Unix socket condor_shared_port passes connections to (raises ConfigError)."""
        try:
            return sharedport.socket_path(self.daemon_socket_dir, self.shared_port_id)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def policy(self) -> AccessPolicy:
        try:
            return AccessPolicy(
                allow_soap=HostList(self.allow_soap), allow_read=HostList(self.allow_read),
                allow_write=HostList(self.allow_write), queue_all_users_trusted=self.queue_all_users_trusted,
                queue_super_users=frozenset(self.queue_super_users), default_owner=self.default_owner)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def tls_settings(self) -> TlsSettings:
        """The SSL port's TLS settings (certificates are asked for only when a map file can map them)."""
        if self.soap_ssl_server_keyfile is None:
            raise ConfigError("enable_soap_ssl needs soap_ssl_server_keyfile (--ssl-keyfile): the server's "
                              "certificate, its chain and its private key in one PEM file")
        if self.certificate_mapfile is None:
            asked = ClientCertificates.NOT_ASKED
        else:
            other_ways = self.password_file is not None or self.token_settings().enabled()
            asked = ClientCertificates.OPTIONAL if other_ways else ClientCertificates.REQUIRED
        return TlsSettings(self.soap_ssl_server_keyfile, self.soap_ssl_server_keyfile_password or None,
                           self.soap_ssl_ca_file, self.soap_ssl_ca_dir, asked)

    def server_tls(self) -> ServerContextFactory:
        """The SSL port's TLS context, its files read and checked (raises ConfigError)."""
        try:
            return ServerContextFactory(self.tls_settings())
        except TlsError as exc:
            raise ConfigError(str(exc)) from None

    def identification(self, offload: Offload | None = None, clock: IReactorTime | None = None) -> Identification:
        """How callers are told apart: the map file and the password file, read and checked (raises ConfigError);
        with a ``clock``, failed logins are throttled on it.

        They serve the SSL port only, so without it none is read (nor are the token knobs' files)."""
        certificates = passwords = tokens = None
        try:
            if self.enable_soap_ssl and self.certificate_mapfile is not None:
                certificates = CertificateMap.load(self.certificate_mapfile)
            if self.enable_soap_ssl and self.password_file is not None:
                passwords = PasswordFile.load(self.password_file)
            if self.enable_soap_ssl:
                tokens = self.token_settings().build(certificates, self.state_dir / "scitokens")
        except (MapFileError, PasswordFileError) as exc:
            raise ConfigError(str(exc)) from None
        except ValueError as exc:
            raise ConfigError(f"bearer tokens: {exc}") from None
        throttle = None
        if (passwords is not None or tokens is not None) and clock is not None:
            throttle = LoginThrottle(clock, ThrottleSettings(first_delay=float(self.password_failure_delay),
                                                            max_delay=float(self.max_password_failure_delay)))
        return Identification(certificates, passwords, offload, throttle=throttle, tokens=tokens)

    def token_settings(self) -> TokenSettings:
        return TokenSettings(self.trust_domain, self.sec_token_pool_signing_key_file, self.sec_password_directory,
                             self.sec_token_max_age, self.sec_token_revocation_expr,
                             tuple(self.scitokens_trusted_issuers), tuple(self.scitokens_server_audience))

    def connection_limits(self, descriptors: int) -> ConnectionLimits:
        """The connection caps for a process allowed ``descriptors`` open files (the knobs left at 0 computed)."""
        return ConnectionLimits.computed(descriptors, self.max_connections, self.max_connections_per_caller,
                                         self.reserved_connections)

    def request_deadlines(self) -> RequestDeadlines:
        return RequestDeadlines(headers=float(self.max_header_seconds), body=float(self.max_body_seconds))

    def expression_limits(self) -> ExpressionLimits:
        return ExpressionLimits(max_length=self.max_expression_length, max_depth=self.max_expression_depth)

    def query_settings(self) -> QuerySettings:
        return QuerySettings(workers=self.query_workers, per_caller=self.max_queries_per_caller,
                             budget=float(self.max_query_seconds), limits=self.expression_limits())

    def schedd_settings(self) -> ScheddSettings:
        return ScheddSettings(max_transaction_duration=self.max_soap_transaction_duration,
                              leave_in_queue=self.soap_leave_in_queue or None,
                              max_transactions_per_caller=self.max_transactions_per_caller,
                              limits=self.expression_limits(), max_read_bytes=self.max_request_bytes)


_SECTIONS = {
    "gateway": ("listen", "port", "state_dir", "local_socket", "backend", "max_request_bytes",
                "max_expression_length", "max_expression_depth", "query_workers", "max_queries_per_caller",
                "max_query_seconds", "workers", "lone_connection_in_core", "log_file", "log_level",
                "max_file_descriptors", "max_connections", "max_connections_per_caller", "reserved_connections",
                "max_header_seconds", "max_body_seconds", "metrics_port"),
    "submission": ("staging_lifetime", "output_retention", "max_staging_areas_per_caller"),
    "birdbath": ("allow_soap", "allow_read", "allow_write", "queue_all_users_trusted", "queue_super_users",
                 "default_owner", "max_soap_transaction_duration", "soap_leave_in_queue", "max_transactions_per_caller",
                 "enable_soap_ssl", "soap_ssl_port", "soap_ssl_server_keyfile", "soap_ssl_server_keyfile_password",
                 "soap_ssl_ca_file", "soap_ssl_ca_dir", "certificate_mapfile", "password_file", "password_failure_delay",
                 "max_password_failure_delay", "collector_port", "trust_domain", "sec_token_pool_signing_key_file",
                 "sec_password_directory", "sec_token_max_age", "sec_token_revocation_expr",
                 "scitokens_trusted_issuers", "scitokens_server_audience"),
    "daemon": ("use_shared_port", "daemon_socket_dir", "shared_port_id", "not_responding_timeout",
               "master_keepalive"),
}


def load(path: Path | None) -> GatewayConfig:
    config = GatewayConfig()
    if path is None:
        return config
    config.source = Path(path).absolute()
    try:
        text = Path(path).read_bytes()
        config.source_digest = content_digest(text)  # (of the bytes parsed: workers check theirs)
        data = tomllib.loads(text.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read configuration {path}: {exc}") from None
    for section, keys in _SECTIONS.items():
        values = data.pop(section, {})
        unknown = set(values) - set(keys)
        if unknown:
            raise ConfigError(f"{path}: unknown setting(s) in [{section}]: {', '.join(sorted(unknown))}")
        for key, value in values.items():
            _set(config, key, value, f"{path} [{section}] {key}")
    from gateway.frontend import installed  # (each front end knows its section; it imports the transport)

    try:
        for front_end in installed():
            if front_end.section is not None:
                config.sections[front_end.section] = front_end.read_section(data.pop(front_end.section, {}),
                                                                            str(path))
    except ValueError as exc:  # a knob of a front end's section; no front end installed
        raise ConfigError(str(exc)) from None
    config.backend_options = data.pop("backends", {})
    if data:
        raise ConfigError(f"{path}: unknown section(s): {', '.join(sorted(data))}")
    return config


#: settings that name a file or directory (given as strings, ``~`` expanded)
_PATHS = frozenset({"state_dir", "local_socket", "log_file", "soap_ssl_server_keyfile", "soap_ssl_ca_file",
                    "soap_ssl_ca_dir", "certificate_mapfile", "password_file", "daemon_socket_dir",
                    "sec_token_pool_signing_key_file", "sec_password_directory"})


def _set(config: GatewayConfig, key: str, value: Any, where: str) -> None:
    if key == "port":
        if not (type(value) is int or value == AUTO):
            raise ConfigError(f'{where}: expected a port number, 0 (off) or "{AUTO}", got {value!r}')
        config.port = value
        return
    expected = str if key in _PATHS else type(getattr(config, key))
    if type(value) is not expected:
        raise ConfigError(f"{where}: expected {expected.__name__}, got {value!r}")
    if key == "local_socket" and value == "":  # switched off
        config.local_socket = value
        return
    setattr(config, key, Path(os.path.expanduser(value)) if key in _PATHS else value)


def parse_port(text: str) -> int | str:
    """``--port``'s value: a number, or ``auto``."""
    return AUTO if text == AUTO else int(text)


# -- checking a configuration before anything is started ---------------------------------------------------
#: inclusive bounds of the numeric settings (None: unbounded)
_RANGES: dict[str, tuple[int, int | None]] = {
    "soap_ssl_port": (0, 65535), "collector_port": (0, 65535), "metrics_port": (0, 65535),
    "max_request_bytes": (1, None), "staging_lifetime": (1, None), "output_retention": (0, None),
    "max_transactions_per_caller": (1, None), "max_staging_areas_per_caller": (1, None),
    "max_expression_length": (16, None), "max_expression_depth": (8, 100000), "query_workers": (1, 64),
    "workers": (0, MAX_WORKERS),
    "max_queries_per_caller": (1, None), "max_query_seconds": (1, None), "not_responding_timeout": (0, None),
    "max_file_descriptors": (0, None), "max_connections": (0, None), "max_connections_per_caller": (0, None),
    "reserved_connections": (0, None), "max_header_seconds": (1, None), "max_body_seconds": (1, None),
    "password_failure_delay": (1, None), "max_password_failure_delay": (1, None)}


def validate(config: GatewayConfig) -> None:
    """Raise ConfigError for anything that would make the gateway fail later, once flags are applied.

    Nothing is created here: a refused start must leave no state directory or log file behind."""
    if config.port != AUTO and not 0 <= config.port <= 65535:
        raise ConfigError(f'port must be between 0 (off) and 65535, or "{AUTO}", not {config.port}')
    for key, (low, high) in _RANGES.items():
        number = getattr(config, key)
        if number < low or (high is not None and number > high):
            raise ConfigError(f"{key} must be {_bounds(low, high)}, not {number}")
    if config.log_level not in LEVELS:
        raise ConfigError(f"log_level must be one of {', '.join(LEVELS)}, not {config.log_level!r}")
    config.policy()
    check_limits(config)
    check_ports(config)
    if config.enable_soap_ssl:
        check_ssl(config)
    check_anonymous_owner(config, os.geteuid())
    check_backend_options(config.backend, config.backend_options.get(config.backend, {}))
    check_daemon(config)
    check_directory(config.state_dir, "state directory")
    check_local_socket(config)
    if config.log_file is not None:
        check_file(config.log_file, "log file")


def check_limits(config: GatewayConfig) -> None:
    """A total of connections set leaves room for one caller's and for the operators' reserve, and the login
    penalties grow from the first to the longest."""
    if config.password_failure_delay > config.max_password_failure_delay:
        raise ConfigError(f"password_failure_delay ({config.password_failure_delay}) cannot exceed "
                          f"max_password_failure_delay ({config.max_password_failure_delay})")
    total = config.max_connections
    if total and config.reserved_connections >= total:
        raise ConfigError(f"reserved_connections ({config.reserved_connections}) must be less than max_connections "
                          f"({total}): the reserve is part of the total")
    if total and config.max_connections_per_caller > total:
        raise ConfigError(f"max_connections_per_caller ({config.max_connections_per_caller}) cannot exceed "
                          f"max_connections ({total})")


def check_ports(config: GatewayConfig) -> None:
    """Something must listen, and the two ports cannot be one."""
    if config.plain_port is None and not config.enable_soap_ssl and not config.use_shared_port \
            and config.local_socket_path() is None:
        raise ConfigError('nothing would listen: port = 0 switches the plain port off, local_socket = "" the local '
                          'socket, and enable_soap_ssl and use_shared_port are false')
    if config.enable_soap_ssl and config.plain_port and config.plain_port == config.soap_ssl_port:
        raise ConfigError(f"port and soap_ssl_port are both {config.port}; the SSL port needs a port of its own")
    if config.collector_port and config.collector_port in (config.plain_port,
                                                            config.soap_ssl_port if config.enable_soap_ssl else None):
        raise ConfigError(f"collector_port {config.collector_port} is the gateway's own port; the collector is "
                          f"served there anyway (collector_port = 0), or give it a port of its own")
    if config.metrics_port and config.metrics_port in (config.plain_port, config.collector_port,
                                                        config.soap_ssl_port if config.enable_soap_ssl else None):
        raise ConfigError(f"metrics_port {config.metrics_port} is another of the gateway's ports; the monitoring "
                          f"pages are served on the gateway's own port anyway (metrics_port = 0), or give them a "
                          f"port of their own")


def check_local_socket(config: GatewayConfig) -> None:
    """The local socket can be made safely (its directory only writable by its owner, nothing but a stale socket
    of ours at its path): checked now, so that a planted link stops the start before anything is created."""
    path = config.local_socket_path()
    if path is None:
        return
    try:
        check_path(path, created_with=config.state_dir)
    except UnsafeSocketPath as exc:
        raise ConfigError(str(exc)) from None


def check_daemon(config: GatewayConfig) -> None:
    """The [daemon] knobs: a usable named socket when the shared port is on, a HOST:PORT keepalive target."""
    if config.use_shared_port:
        check_directory(config.named_socket().parent, "daemon socket directory (daemon_socket_dir)")
        try:
            sharedport.check_directory(config.named_socket().parent)
        except sharedport.UnsafeSocketPlace as exc:
            raise ConfigError(str(exc)) from None
    if config.master_keepalive:
        try:
            keepalive.parse_address(config.master_keepalive)
        except ValueError as exc:
            raise ConfigError(f"master_keepalive: {exc}") from None


def check_ssl(config: GatewayConfig) -> None:
    """The SSL port's knobs are complete and their files usable (read, not kept: the gateway reads them again)."""
    if config.certificate_mapfile is None and config.password_file is None and not config.token_settings().enabled():
        raise ConfigError("enable_soap_ssl needs certificate_mapfile (client certificates), password_file "
                          "(HTTP Basic), bearer tokens (sec_token_pool_signing_key_file, sec_password_directory or "
                          "scitokens_trusted_issuers), or several: otherwise no caller could be identified on the "
                          "SSL port")
    if config.certificate_mapfile is not None and config.soap_ssl_ca_file is None and config.soap_ssl_ca_dir is None:
        raise ConfigError("client certificates (certificate_mapfile) need soap_ssl_ca_file (--ssl-ca-file) or "
                          "soap_ssl_ca_dir: the authorities they must chain to")
    config.identification()
    config.server_tls()


#: the name HTCondor and Unix give the account that may do anything
ROOT = 0


def check_anonymous_owner(config: GatewayConfig, euid: int) -> None:
    """Refuse a gateway running as root whose anonymous remote callers (the plain port beyond loopback, or
    condor_shared_port's, which listens on every interface) would get jobs owned by root: anyone on the network
    could run anything as root."""
    plain_remote = config.plain_port is not None and not _loopback_only(config.listen)
    if euid != ROOT or not (plain_remote or config.use_shared_port) \
            or not HostList(config.allow_soap).beyond_loopback():
        return
    try:
        privileged = pwd.getpwnam(config.default_owner).pw_uid == ROOT
    except KeyError:
        privileged = False
    if privileged:
        raise ConfigError(
            f"default_owner is {config.default_owner!r} (uid 0) while the gateway runs as root and remote callers "
            f"reach the plain port anonymously (listen = {config.listen!r}, allow_soap = {config.allow_soap}): set "
            f"[birdbath] default_owner to an unprivileged account such as \"nobody\", or restrict allow_soap to "
            f"loopback, or listen on 127.0.0.1, or switch the plain port off (port = 0) and use the SSL port")


def _loopback_only(listen: str) -> bool:
    return listen == "localhost" or is_loopback(listen)


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
