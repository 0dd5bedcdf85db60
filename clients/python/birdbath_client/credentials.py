"""How the client proves who it is to a gateway served over HTTPS: a client certificate, a user name and password
(HTTP Basic, which the gateway accepts over TLS only) or a bearer token (an HTCondor IDTOKEN or a SciToken, sent
over HTTPS only), and the CA that vouches for the gateway's own certificate.

A token is found as HTCondor's tools find one: ``BEARER_TOKEN`` (the token itself), else the file
``BEARER_TOKEN_FILE`` names, else the first token in the token directory (``_CONDOR_SEC_TOKEN_DIRECTORY``, else
``~/.condor/tokens.d``; files in name order, lines starting with ``#`` skipped).  A password login, when set, is
sent instead.

Over plain HTTP on loopback none of this is needed: the gateway asks the kernel which local user owns the socket.
"""

from __future__ import annotations

import base64
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

#: HTCondor's token directory (``SEC_TOKEN_DIRECTORY``) as its tools read it from the environment, and its default
TOKEN_DIRECTORY_VARIABLE = "_CONDOR_SEC_TOKEN_DIRECTORY"
DEFAULT_TOKEN_DIRECTORY = "~/.condor/tokens.d"


def discover_token(environ: Mapping[str, str] = os.environ) -> str | None:
    """The bearer token the environment gives, as described above (None: none)."""
    if environ.get("BEARER_TOKEN", "").strip():
        return environ["BEARER_TOKEN"].strip()
    if environ.get("BEARER_TOKEN_FILE"):
        return _first_token(Path(environ["BEARER_TOKEN_FILE"]))
    directory = Path(os.path.expanduser(environ.get(TOKEN_DIRECTORY_VARIABLE) or DEFAULT_TOKEN_DIRECTORY))
    try:
        files = sorted(entry for entry in directory.iterdir() if entry.is_file())
    except OSError:
        return None
    return next((token for token in map(_first_token, files) if token), None)


def _first_token(path: Path) -> str | None:
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")), None)


def _secure(url: str) -> bool:
    return url.lower().startswith("https:")


@dataclass(frozen=True)
class Credentials:
    cert: str | None = None  # PEM client certificate (may hold the key too)
    key: str | None = None  # PEM private key, when not in ``cert``
    ca: str | None = None  # PEM file of the CA(s) that signed the gateway's certificate; None: the system's
    username: str | None = None
    password: str | None = None
    token: str | None = None  # a bearer token, sent over HTTPS when no user name is set

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> "Credentials":
        """``BIRDBATH_CERT``, ``BIRDBATH_KEY``, ``BIRDBATH_CA``, ``BIRDBATH_USER``, ``BIRDBATH_PASSWORD``, and a
        bearer token found as HTCondor finds one (:func:`discover_token`)."""
        return cls(*(environ.get(f"BIRDBATH_{name}") or None for name in ("CERT", "KEY", "CA", "USER", "PASSWORD")),
                   token=discover_token(environ))

    def session(self) -> Any:
        """A ``requests`` session (zeep's transport) with these credentials."""
        import requests

        class Session(requests.Session):
            """A session whose own CA wins: requests lets ``REQUESTS_CA_BUNDLE`` override ``Session.verify``
            for every request that does not pass ``verify`` itself, as zeep's do not."""

            def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any,
                                           cert: Any) -> Any:
                return super().merge_environment_settings(url, proxies, stream,
                                                          self.verify if verify is None else verify, cert)

        session = Session()
        if self.cert:
            session.cert = (self.cert, self.key) if self.key else self.cert
        if self.ca:
            session.verify = self.ca
        if self.username is not None:
            session.auth = (self.username, self.password or "")
        elif self.token is not None:
            token = self.token

            def bearer(request: Any) -> Any:
                if _secure(request.url):
                    request.headers["Authorization"] = f"Bearer {token}"
                return request

            session.auth = bearer
        return session

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context for ``urllib`` that presents the certificate and trusts ``ca``."""
        context = ssl.create_default_context(cafile=self.ca)
        if self.cert:
            context.load_cert_chain(self.cert, self.key)
        return context

    def headers(self, url: str = "") -> dict[str, str]:
        """The ``Authorization`` header of HTTP Basic, when a user name is set, else of the bearer token for an
        ``https`` ``url``."""
        if self.username is None:
            return {"Authorization": f"Bearer {self.token}"} if self.token is not None and _secure(url) else {}
        token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
        return {"Authorization": f"Basic {token}"}
