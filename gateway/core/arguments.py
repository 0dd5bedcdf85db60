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
