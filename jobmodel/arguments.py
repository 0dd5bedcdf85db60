"""HTCondor's V2 ("new") argument syntax, as stored in the ``Arguments`` attribute.

Arguments are separated by white space; single quotes group text, and inside them two single quotes stand for
one.  The canonical form quotes only the arguments that need it.
"""

from __future__ import annotations


class ArgumentSyntaxError(ValueError):
    pass


def parse_v2(text: str) -> list[str]:
    args: list[str] = []
    current: list[str] = []
    in_arg = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "'":
            in_arg = True
            i += 1
            while True:
                if i >= len(text):
                    raise ArgumentSyntaxError(f"unterminated single quote in arguments: {text!r}")
                if text[i] == "'":
                    if text[i + 1:i + 2] == "'":
                        current.append("'")
                        i += 2
                        continue
                    i += 1
                    break
                current.append(text[i])
                i += 1
            continue
        if char.isspace():
            if in_arg:
                args.append("".join(current))
                current, in_arg = [], False
        else:
            current.append(char)
            in_arg = True
        i += 1
    if in_arg:
        args.append("".join(current))
    return args


def join_v2(args: list[str]) -> str:
    return " ".join(_quote(arg) for arg in args)


def _quote(arg: str) -> str:
    if arg and not any(c.isspace() or c == "'" for c in arg):
        return arg
    return "'" + arg.replace("'", "''") + "'"


def parse_v1(text: str) -> list[str]:
    """V1 ("old") arguments: separated by white space; a backslash-escaped double quote is a literal quote."""
    return [arg.replace('\\"', '"') for arg in text.split()]


def parse_environment_v2(text: str) -> dict[str, str]:
    """V2 environment: ``NAME=value`` entries separated by white space, quoted like V2 arguments."""
    return _assignments(parse_v2(text), text)


def parse_environment_v1(text: str) -> dict[str, str]:
    """V1 environment: ``NAME=value`` entries separated by semicolons."""
    return _assignments([entry for entry in text.split(";") if entry.strip()], text)


def _assignments(entries: list[str], text: str) -> dict[str, str]:
    environment: dict[str, str] = {}
    for entry in entries:
        name, equals, value = entry.strip().partition("=")
        if not equals or not name:
            raise ArgumentSyntaxError(f"environment entry {entry!r} is not NAME=value (in {text!r})")
        environment[name] = value
    return environment
