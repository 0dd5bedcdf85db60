"""Reading the files the identity knobs name (map file, password file): UTF-8 text, or the knob's own error."""

from __future__ import annotations

from pathlib import Path


def read_text(path: Path, what: str, error: type[ValueError]) -> str:
    """The file's text; a missing, unreadable or non-UTF-8 file raises ``error`` naming ``what`` it was to be."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from None
