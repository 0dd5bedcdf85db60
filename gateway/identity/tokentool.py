"""``birdbath token create``: an IDTOKEN signed with one of the gateway's keys, as ``condor_token_create`` makes one.

    birdbath token create -identity USER@DOMAIN [-key KEYID] [-authz AUTHZ]... [-lifetime SECONDS]
                          [-token NAME | -file NAME] [-config FILE]

It reads the gateway's configuration (``-config``, the TOML file the gateway runs with) for the keys
(``sec_token_pool_signing_key_file``, ``sec_password_directory``) and the issuer (``trust_domain``), so it runs where
the gateway does, as the user that may read its keys.  The token goes to standard output, or to the file ``-file``
names, or into the user's token directory with ``-token NAME`` (``_CONDOR_SEC_TOKEN_DIRECTORY``, else
``~/.condor/tokens.d``, where the client looks for tokens).  Files are created readable by their owner only.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gateway.config import ConfigError, load

from .idtokens import POOL, InvalidToken, create

#: the environment variable HTCondor's tools read SEC_TOKEN_DIRECTORY from, and its default
TOKEN_DIRECTORY_VARIABLE = "_CONDOR_SEC_TOKEN_DIRECTORY"
DEFAULT_TOKEN_DIRECTORY = Path("~/.condor/tokens.d")


def token_directory() -> Path:
    """The user's token directory (HTCondor's ``SEC_TOKEN_DIRECTORY``, ``~/.condor/tokens.d`` by default)."""
    return Path(os.path.expanduser(os.environ.get(TOKEN_DIRECTORY_VARIABLE) or str(DEFAULT_TOKEN_DIRECTORY)))


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(prog="birdbath token create", allow_abbrev=False, add_help=False,
                                    description="Make an IDTOKEN signed with one of the gateway's keys "
                                                "(condor_token_create).")
    found.add_argument("-help", "--help", action="help", help="show this help and exit")
    found.add_argument("-identity", "--identity", required=True, metavar="USER@DOMAIN",
                       help="the token's subject: the user it identifies (the jobs' owner is USER)")
    found.add_argument("-key", "--key", default=POOL, metavar="KEYID",
                       help="the signing key: POOL (sec_token_pool_signing_key_file, the default) or a file of "
                            "sec_password_directory")
    found.add_argument("-authz", "--authz", "-scope", "--scope", action="append", default=[], metavar="AUTHZ",
                       dest="authz", help="limit the token to this authorization (READ, WRITE...; repeatable; "
                                          "none: the token does what its user may do)")
    found.add_argument("-lifetime", "--lifetime", type=int, default=-1, metavar="SECONDS",
                       help="the token expires this many seconds from now (default: never)")
    where = found.add_mutually_exclusive_group()
    where.add_argument("-token", "--token", metavar="NAME", help="write it to NAME in the token directory")
    where.add_argument("-file", "--file", type=Path, metavar="NAME", help="write it to the file NAME")
    found.add_argument("-config", "--config", type=Path, metavar="FILE",
                       help="the gateway's configuration file (its keys and trust_domain)")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = load(args.config).token_settings()
        if settings.pool_signing_key_file is None and settings.password_directory is None:
            raise ConfigError("the configuration names no signing key (sec_token_pool_signing_key_file or "
                              "sec_password_directory)")
        authz = tuple(name.removeprefix("condor:/") for name in args.authz)
        token = create(settings.signing_keys(), args.key, settings.domain(), args.identity,
                       lifetime=args.lifetime, authorizations=authz)
        if args.token is not None:
            if Path(args.token).name != args.token or args.token in (".", ".."):
                raise ValueError(f"-token {args.token!r} is not a plain file name")
            directory = token_directory()
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_private(directory / args.token, token)
        elif args.file is not None:
            write_private(args.file, token)
        else:
            print(token)
    except (ConfigError, InvalidToken, ValueError, OSError) as exc:
        print(f"birdbath token create: {exc}", file=sys.stderr)
        return 1
    return 0


def write_private(path: Path, token: str) -> None:
    """The token and a newline, in a file only its owner may read (replaced if it exists)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        os.fchmod(stream.fileno(), 0o600)
        stream.write(token + "\n")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
