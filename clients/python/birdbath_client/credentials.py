"""How the client proves who it is to a gateway served over HTTPS: a client certificate, or a user name and password
(HTTP Basic, which the gateway accepts over TLS only), and the CA that vouches for the gateway's own certificate.

Over plain HTTP on loopback none of this is needed: the gateway asks the kernel which local user owns the socket.
"""

from __future__ import annotations

import base64
import os
import ssl
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Credentials:
    cert: str | None = None  # PEM client certificate (may hold the key too)
    key: str | None = None  # PEM private key, when not in ``cert``
    ca: str | None = None  # PEM file of the CA(s) that signed the gateway's certificate; None: the system's
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> "Credentials":
        """``BIRDBATH_CERT``, ``BIRDBATH_KEY``, ``BIRDBATH_CA``, ``BIRDBATH_USER`` and ``BIRDBATH_PASSWORD``."""
        return cls(*(environ.get(f"BIRDBATH_{name}") or None for name in ("CERT", "KEY", "CA", "USER", "PASSWORD")))

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
        return session

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context for ``urllib`` that presents the certificate and trusts ``ca``."""
        context = ssl.create_default_context(cafile=self.ca)
        if self.cert:
            context.load_cert_chain(self.cert, self.key)
        return context

    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header of HTTP Basic, when a user name is set."""
        if self.username is None:
            return {}
        token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
        return {"Authorization": f"Basic {token}"}
