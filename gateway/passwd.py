"""``birdbath-passwd FILE USER``: set (or with ``-D`` remove) a user's password in the gateway's password file.

The file is the one ``password_file`` names, in the format ``htpasswd -B`` writes (``user:bcrypt-hash``), so either
tool may maintain it; this one needs nothing beyond the gateway's own dependencies.  The password is read from the
terminal (twice), or as one line from standard input when that is not a terminal (for scripts).  The file is
replaced atomically and created readable by its owner only; the gateway reads it when it starts.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import tempfile
from pathlib import Path

import bcrypt

from gateway.identity.passwords import PasswordFile, PasswordFileError, bcrypt_input

#: bcrypt's cost factor: about a quarter of a second per check on current hardware (checks are remembered)
ROUNDS = 12


def read_password(user: str) -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    password = getpass.getpass(f"New password for {user}: ")
    if getpass.getpass("Again: ") != password:
        raise ValueError("the passwords differ")
    return password


def updated(text: str, user: str, hashed: str | None) -> str:
    """The file's text with ``user``'s line replaced, appended or (``hashed`` None) removed; other lines kept."""
    lines = [line for line in text.splitlines() if line.partition(":")[0].strip() != user]
    if hashed is not None:
        lines.append(f"{user}:{hashed}")
    return "".join(line + "\n" for line in lines)


def write_atomically(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def main(argv: list[str] | None = None) -> int:
    # the module's first paragraph without its reStructuredText literals: the help is read as plain text
    parser = argparse.ArgumentParser(prog="birdbath-passwd", description=__doc__.split("\n\n")[0].replace("``", ""))
    parser.add_argument("file", type=Path, help="the password file (created if missing)")
    parser.add_argument("user", help="the user name (user or user@domain; the owner of its jobs is the part before @)")
    parser.add_argument("-D", "--delete", action="store_true", help="remove the user instead")
    args = parser.parse_args(argv)
    if not args.user or ":" in args.user or any(c.isspace() for c in args.user):
        parser.error(f"not a user name: {args.user!r} (no colon or white space)")
    try:
        text = args.file.read_text(encoding="utf-8") if args.file.exists() else ""
        PasswordFile.parse(text, str(args.file))  # never rewrite a file the gateway would refuse
        if args.delete:
            if args.user not in PasswordFile.parse(text).hashes:
                raise ValueError(f"{args.user!r} is not in {args.file}")
            hashed = None
        else:
            password = read_password(args.user)
            if not password:
                raise ValueError("an empty password is not allowed")
            hashed = bcrypt.hashpw(bcrypt_input(password), bcrypt.gensalt(ROUNDS)).decode()
        write_atomically(args.file, updated(text, args.user, hashed))
    except (OSError, ValueError, PasswordFileError) as exc:
        print(f"birdbath-passwd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
