"""What a worker must read as the core read it: the configuration file, and the files it names that front ends read
once, at their start (with TLS on: the server's key, the authorities, the certificate map, the password file).

One process reads them once, at its start: an edit applies at the next restart.  A worker reads them when it
starts, which for a worker started again after its death is later than the core did; an edit made meanwhile would
give that worker other rules than the core and the other workers (an invalid one, a worker that can never start).
So the core gives each worker the digest of what it read (:func:`inputs_digest`: the configuration file's bytes as
it parsed them, then the other files as its front ends read them), and a worker whose reading differs refuses to
serve (:class:`InputsChanged`), checking the configuration file before it parses it: its slot stays empty, the
gateway serves on with the others (or the core serves), says so in its log and in ``birdbath_workers_refused``, and
a restart applies the edit everywhere at once.

Files read at each use are left out: the token signing keys (``sec_password_directory``, the POOL key) apply at
once in every process.  The authorities count as the certificates loaded, not the directory's bytes: a CA directory
also holds revocation lists that other tools rewrite, which the gateway passes over.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cryptography.hazmat.primitives import hashes

from gateway.config import ConfigError, GatewayConfig, content_digest
from gateway.identity.tls import TlsError, load_authorities

#: a worker's exit status when it refuses to serve for what it read (birdbath-gateway's own for a configuration it
#: refuses, ``cli.EXIT_CONFIG``): the core does not start it again
EXIT_REFUSED = 2

#: with TLS on, the settings naming a file the front ends read once
TLS_FILES = ("soap_ssl_server_keyfile", "certificate_mapfile", "password_file")


class InputsChanged(ConfigError):
    """What a starting worker read is not what the core read at its start."""


def file_digest(path: Path | None) -> str:
    """The digest of a file's bytes ("none" for no file; an unreadable one counts as such)."""
    if path is None:
        return "none"
    try:
        return content_digest(path.read_bytes())
    except OSError as exc:
        return f"unreadable {exc.errno}"


def files_digest(config: GatewayConfig) -> str:
    """The digest of the files the configuration names that front ends read once (none with TLS off)."""
    digest = hashlib.sha256()
    if config.enable_soap_ssl:
        for name in TLS_FILES:
            digest.update(f"{name}={file_digest(getattr(config, name))}\n".encode())
        try:
            authorities = sorted(certificate.fingerprint(hashes.SHA256())
                                 for certificate in load_authorities(config.soap_ssl_ca_file, config.soap_ssl_ca_dir))
            digest.update(b"authorities=" + b"".join(authorities))
        except TlsError as exc:
            digest.update(f"authorities unreadable: {exc}".encode())
    return digest.hexdigest()


def inputs_digest(config: GatewayConfig) -> str:
    """What the core read: its configuration file's digest (taken as it parsed it), then the other files'."""
    return f"{config.source_digest or 'none'}:{files_digest(config)}"


def check_configuration_file(path: Path | None, expected: str) -> None:
    """Before a worker parses its configuration: raise :class:`InputsChanged` when the file is not the core's."""
    if file_digest(path) != expected.partition(":")[0]:
        raise InputsChanged(f"the configuration file {path} changed since the gateway started: restart the gateway "
                            f"to apply it")


def check_inputs(read: str, expected: str) -> None:
    """Before a worker's front ends read what the configuration names (``read``, its :func:`inputs_digest`; one
    edited invalid would raise there, as a fault to retry): raise :class:`InputsChanged` when it is not what the
    core's read."""
    if read.partition(":")[0] != expected.partition(":")[0]:
        raise InputsChanged("the configuration file changed since the gateway started: restart the gateway to apply it")
    if read != expected:
        raise InputsChanged("a file the configuration names (TLS key or authorities, certificate map, password file) "
                            "changed since the gateway started: restart the gateway to apply it")
