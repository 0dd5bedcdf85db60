"""The REST face's OpenAPI document (``openapi.json`` beside this module, written once) and the routes read from it:
each path template and method names an ``operationId``, and the resources serve exactly the operations it names
(:meth:`Contract.check`), so the document and the handlers cannot drift apart."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

DOCUMENT = "openapi.json"


@dataclass(frozen=True)
class Route:
    method: bytes
    pattern: re.Pattern[str]
    operation: str


class Contract:
    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.text = json.dumps(document).encode()
        self.routes = [Route(method.upper().encode(), _pattern(path), operation["operationId"])
                       for path, methods in document["paths"].items() for method, operation in methods.items()]

    @classmethod
    def load(cls) -> Contract:
        return cls(json.loads(resources.files(__package__).joinpath(DOCUMENT).read_text()))

    @property
    def operations(self) -> set[str]:
        return {route.operation for route in self.routes}

    def check(self, served: Iterable[str]) -> None:
        """Refuse to start unless the handlers serve exactly the documented operations."""
        served = set(served)
        if served != self.operations:
            raise RuntimeError(f"the REST handlers and {DOCUMENT} differ: undocumented {sorted(served - self.operations)}, "
                               f"not served {sorted(self.operations - served)}")

    def match(self, method: bytes, path: str) -> tuple[str, dict[str, str]] | list[bytes] | None:
        """The operation and path parameters for a request; the methods the path has when the method is not one
        of them; None when no path matches."""
        allowed = []
        for route in self.routes:
            found = route.pattern.fullmatch(path)
            if found is None:
                continue
            if route.method == method or (method == b"HEAD" and route.method == b"GET"):
                return route.operation, found.groupdict()
            allowed.append(route.method)
        return allowed or None


def _pattern(template: str) -> re.Pattern[str]:
    """``/api/v1/jobs/{job}`` as a regular expression with a named group per parameter (one path segment each)."""
    parts = re.split(r"\{(\w+)\}", template)
    return re.compile("".join(re.escape(part) if index % 2 == 0 else f"(?P<{part}>[^/]+)"
                              for index, part in enumerate(parts)))
