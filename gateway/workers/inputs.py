"""What a worker must read as the core read it: the configuration file, and the files it names that a worker reads
itself (the password file, the certificate map, the token signing keys, the TLS key and authorities).

One process reads them once, at its start: an edit applies at the next restart.  A worker reads them when it
starts, which for a worker started again after its death is later than the core did; an edit made meanwhile would
give that worker other rules than the core and the other workers (an invalid one, a worker that can never start).
So the core gives each worker the digest of what it read (:func:`inputs_digest`, taken once its own front ends
have read them), and a worker whose reading differs refuses to serve (:class:`InputsChanged`): its slot stays
empty, the gateway serves on with the others and says why in its log and /readyz, and a restart applies the edit
everywhere at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from gateway.config import ConfigError, GatewayConfig

#: a worker's exit status when it refuses to serve for what it read (birdbath-gateway's own for a configuration it
#: refuses, ``cli.EXIT_CONFIG``): the core does not start it again
EXIT_REFUSED = 2

#: the settings naming a file a worker reads, and those naming a directory of such files
FILES = ("soap_ssl_server_keyfile", "soap_ssl_ca_file", "certificate_mapfile", "password_file",
         "sec_token_pool_signing_key_file")
DIRECTORIES = ("soap_ssl_ca_dir", "sec_password_directory")


class InputsChanged(ConfigError):
    """What a starting worker read is not what the core read at its start."""


def input_files(config: GatewayConfig) -> Iterator[Path]:
    """The configuration file, then each file its settings name (a directory's files in name order)."""
    if config.source is not None:
        yield config.source
    for name in FILES:
        path = getattr(config, name)
        if path is not None:
            yield path
    for name in DIRECTORIES:
        directory = getattr(config, name)
        if directory is not None and directory.is_dir():
            yield from sorted(path for path in directory.iterdir() if path.is_file())


def inputs_digest(config: GatewayConfig) -> str:
    """One digest of every input file's name and content (a file that cannot be read counts as such)."""
    digest = hashlib.sha256()
    for path in input_files(config):
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError as exc:
            digest.update(f"unreadable: {exc.errno}".encode())
    return digest.hexdigest()


def check_inputs(config: GatewayConfig, expected: str) -> None:
    """Raise :class:`InputsChanged` when what this worker read differs from what the core read."""
    if inputs_digest(config) != expected:
        names = ", ".join(str(path) for path in input_files(config))
        raise InputsChanged(f"the configuration or a file it names ({names}) changed since the gateway started: this "
                            f"worker would serve other rules than the gateway's; restart the gateway to apply it")
