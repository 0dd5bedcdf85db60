"""Who the caller of a request is, from what its connection and its request prove.

On the plain port and the local (Unix-domain) socket, decided once, when the connection is accepted:
  - a peer on this machine (on loopback, on one of the host's own addresses, or on the local socket) is the local
    user owning its socket (:mod:`.peers`); when the kernel cannot prove that owner (the client closed its socket,
    its end is not an established socket of a process, our end is not the connection we accepted) or its uid has no
    name, every request on the connection is refused: a local client must never become root, nor make itself
    anonymous, and so default_owner;
  - any other peer is anonymous (``default_owner`` gets its jobs);
  - HTTP Basic credentials are refused without being looked at: a password sent in clear text must not be taken
    as proof of anything, and the client should learn at once that it is sending one.
On the SSL port:
  - a client certificate (verified by the handshake) is mapped to a user by the certificate map file; a subject
    no rule maps is refused (403), even when the request also carries a password;
  - without a certificate, HTTP Basic credentials are checked against the password file; wrong ones get 401;
  - or an ``Authorization: Bearer`` token (an HTCondor IDTOKEN or a SciToken, :mod:`.bearer`) is verified; an
    invalid one gets 401 with ``WWW-Authenticate: Bearer error="invalid_token"`` and counts as a failed login for
    the throttle, a valid one no map file rule maps gets 403; a token sent on the plain port is refused unchecked
    (403), as a password is;
  - a request with neither is refused (401 with a Basic and/or Bearer challenge, for the ways accepted).
"""

from __future__ import annotations

import binascii
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from gateway.core.auth import Authentication, Caller
from gateway.identity import peers
from gateway.identity.bearer import BearerTokens, Unmapped, Verified, bearer_token, claimed_subject
from gateway.identity.idtokens import InvalidToken
from gateway.identity.mapfile import SSL, CertificateMap
from gateway.identity.passwords import PasswordFile, RememberedPasswords
from gateway.identity.throttle import LoginThrottle, Throttled, check
from gateway.identity.tls import subject_oneline

#: runs a slow, blocking check (a bcrypt comparison) away from the reactor thread
Offload = Callable[..., Awaitable[bool]]

class Refusal(Exception):
    """A request refused for who its caller is (or is not): the HTTP status and the reason to send back."""

    def __init__(self, code: int, message: str, challenge: bool = False, retry_after: int | None = None,
                 bearer: bool = False, token_error: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        #: whether to answer with ``WWW-Authenticate: Basic`` (the client may try again with a password)
        self.challenge = challenge
        #: seconds to send in ``Retry-After`` (a login refused during a penalty, :mod:`.throttle`)
        self.retry_after = retry_after
        #: whether to answer with ``WWW-Authenticate: Bearer`` (the client may try again with a token), and whether
        #: it names the token sent invalid (RFC 6750's ``error="invalid_token"``, the message its description)
        self.bearer = bearer or token_error
        self.token_error = token_error

    def challenges(self) -> list[bytes]:
        """The ``WWW-Authenticate`` values to answer with (none, Basic, Bearer, or both)."""
        found = [BASIC_CHALLENGE] if self.challenge else []
        if self.bearer:
            found.append(bearer_challenge(self.message if self.token_error else None))
        return found


BASIC_CHALLENGE = b'Basic realm="birdbath", charset="UTF-8"'


def bearer_challenge(description: str | None) -> bytes:
    """RFC 6750's challenge; with a description, for an invalid token (quoted as its grammar allows: printable
    ASCII without double quotes or backslashes)."""
    if description is None:
        return b'Bearer realm="birdbath"'
    shown = "".join(char if " " <= char <= "~" and char not in '"\\' else "'" if char == '"' else "?"
                    for char in description)
    return f'Bearer realm="birdbath", error="invalid_token", error_description="{shown}"'.encode("ascii")


@dataclass
class Connection:
    """What one connection says about its client, kept for every request it carries."""

    secure: bool
    peer_host: str
    peer_port: int
    local_host: str
    local_port: int
    certificate: x509.Certificate | None = None
    #: a connection to the local (Unix-domain) socket
    unix: bool = False
    #: who the connection itself proves the caller is (its certificate or its socket), once worked out
    caller: Caller | None = None
    #: why no request on this connection is served (its local peer could not be proven), decided when accepted
    refusal: Refusal | None = None
    #: the last ``Authorization`` header that passed the password check on this connection, and its caller
    basic: tuple[bytes, Caller] | None = None
    #: the last bearer token that passed on this connection, its caller, and when the token expires
    bearer: tuple[bytes, Verified] | None = None


def describe(caller: Caller) -> str:
    """``alice by certificate``, ``bob by socket``, or ``anonymous``: for the request log."""
    if caller.user is None or caller.authentication is Authentication.NONE:
        return "anonymous"
    return f"{caller.user} by {caller.authentication.value}"


def is_basic(header: bytes | None) -> bool:
    """Whether an ``Authorization`` header uses the Basic scheme (whatever follows)."""
    return bool(header) and header.strip().partition(b" ")[0].lower() == b"basic"  # type: ignore[union-attr]


def basic_credentials(header: bytes | None) -> tuple[str, str] | None:
    """The user and password of an ``Authorization: Basic`` header; None when there is no such header."""
    if header is None or not is_basic(header):
        return None
    encoded = header.strip().partition(b" ")[2]
    try:
        decoded = binascii.a2b_base64(encoded.strip(), strict_mode=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise Refusal(401, "Malformed HTTP Basic credentials", challenge=True) from None
    user, colon, password = decoded.partition(":")
    if not colon or not user:
        raise Refusal(401, "Malformed HTTP Basic credentials (expected user:password)", challenge=True)
    return user, password


async def _inline(check: Callable[..., bool], *args: Any) -> bool:
    return check(*args)


class Identification:
    """The gateway's way of telling callers apart: its map file and password file (either may be absent).

    ``offload`` runs a password check (the reactor's thread pool in the gateway; inline when not given)."""

    def __init__(self, certificates: CertificateMap | None = None, passwords: PasswordFile | None = None,
                 offload: Offload | None = None, throttle: LoginThrottle | None = None, tokens: BearerTokens | None = None) -> None:
        self.certificates = certificates
        #: how bearer tokens are checked (none: they are refused)
        self.tokens = tokens
        #: slows password guessing down (none: every attempt is checked at once)
        self.throttle = throttle
        self.passwords = passwords
        self._offload = offload or _inline
        self._remembered = RememberedPasswords()

    def accepted(self, connection: Connection, owner: peers.PeerOwner) -> None:
        """Decide who the peer of a plain or local-socket connection is from what the kernel said of it as it was
        accepted (``owner``, :func:`.peers.owner_of`), before a byte of it was read: its caller, or the refusal
        every request on it gets.  Asking later would ask about a client that may have closed its socket by then,
        and whose ports another socket may hold."""
        if connection.secure:
            return
        if owner.problem is not None:
            connection.refusal = Refusal(403, owner.problem)
        elif not owner.local:
            connection.caller = Caller(host=connection.peer_host)
        else:
            connection.caller = Caller(connection.peer_host, owner.name, Authentication.SOCKET)

    async def caller(self, connection: Connection, authorization: bytes | None) -> Caller:
        """The caller of one request on ``connection`` (raises :class:`Refusal`)."""
        token = self._token(authorization)
        if not connection.secure:
            if is_basic(authorization):
                raise Refusal(403, "HTTP Basic authentication is accepted only on the SSL port (enable_soap_ssl); "
                                   "the credentials sent in clear text were not checked")
            if token is not None:
                raise Refusal(403, "Bearer tokens are accepted only on the SSL port (enable_soap_ssl); "
                                   "the token sent in clear text was not checked")
            if connection.refusal is not None:
                raise connection.refusal
            if connection.caller is None:
                raise Refusal(403, "The caller of this connection was not identified when it was accepted")
            return connection.caller
        if connection.certificate is not None and self.certificates is not None:
            if connection.caller is None:
                connection.caller = self._certificate_caller(connection)
            return connection.caller
        if token is not None and self.tokens is not None:
            assert authorization is not None
            return await self._token_caller(connection, token, authorization)
        return await self._password_caller(connection, authorization)

    def _token(self, authorization: bytes | None) -> str | None:
        """The bearer token the request carries (None: none); a Bearer header holding none is refused."""
        try:
            return bearer_token(authorization)
        except InvalidToken as exc:
            raise Refusal(401, f"Invalid bearer token: {exc}", token_error=True) from None

    def _certificate_caller(self, connection: Connection) -> Caller:
        assert connection.certificate is not None and self.certificates is not None
        subject = subject_oneline(connection.certificate)
        user = self.certificates.canonicalize(SSL, subject)
        if user is None:
            raise Refusal(403, f"The certificate subject {subject} is not mapped to a user "
                               f"(no SSL rule of certificate_mapfile matches it)")
        return Caller(connection.peer_host, user, Authentication.CERTIFICATE)

    async def _password_caller(self, connection: Connection, authorization: bytes | None) -> Caller:
        credentials = basic_credentials(authorization) if self.passwords is not None else None
        if credentials is None:
            ways = ["a client certificate"] if self.certificates is not None else []
            ways += ["HTTP Basic credentials"] if self.passwords is not None else []
            ways += ["a bearer token"] if self.tokens is not None else []
            unused = (" (bearer tokens are not accepted by this gateway: it has no sec_token_pool_signing_key_file, "
                      "sec_password_directory or scitokens_trusted_issuers)") if self.tokens is None \
                and bearer_token(authorization) is not None else ""
            raise Refusal(401, "Authentication required: " + " or ".join(ways or ["a client certificate"]) + unused,
                          challenge=self.passwords is not None, bearer=self.tokens is not None)
        assert self.passwords is not None and authorization is not None
        if connection.basic is not None and connection.basic[0] == authorization:
            return connection.basic[1]
        if credentials not in self._remembered:
            if not await self._password_matches(connection.peer_host, *credentials):
                raise Refusal(401, "Wrong user name or password", challenge=True)
            self._remembered.remember(*credentials)
        caller = Caller(connection.peer_host, credentials[0], Authentication.PASSWORD)
        connection.basic = (authorization, caller)
        return caller

    async def _password_matches(self, host: str, user: str, password: str) -> bool:
        assert self.passwords is not None
        if self.throttle is None:
            return await self._offload(self.passwords.check, user, password)
        try:
            return await check(self.throttle, host, user, self._offload, self.passwords.check, user, password)
        except Throttled as exc:
            raise Refusal(429, str(exc), retry_after=exc.retry_after) from None

    async def _token_caller(self, connection: Connection, token: str, authorization: bytes) -> Caller:
        """The caller a bearer token proves; a token that passed on this connection is not checked again until it
        expires."""
        assert self.tokens is not None
        if connection.bearer is not None and connection.bearer[0] == authorization:
            expires = connection.bearer[1].expires
            if expires is None or time.time() <= expires:
                return connection.bearer[1].caller
        outcome: list[Verified | Exception] = []
        tokens = self.tokens

        def verify(token: str) -> bool:
            """Whether the token is valid (an unmapped identity is: it is refused, not counted as a failure)."""
            try:
                outcome.append(tokens.verify(token, connection.peer_host))
            except (InvalidToken, Unmapped) as exc:
                outcome.append(exc)
            return not isinstance(outcome[-1], InvalidToken)

        if self.throttle is None:
            await self._offload(verify, token)
        else:
            try:
                await check(self.throttle, connection.peer_host, claimed_subject(token), self._offload, verify, token,
                            kind="Bearer token")
            except Throttled as exc:
                raise Refusal(429, str(exc), retry_after=exc.retry_after) from None
        result = outcome[0]
        if isinstance(result, InvalidToken):
            raise Refusal(401, f"Invalid bearer token: {result}", token_error=True)
        if isinstance(result, Exception):
            raise Refusal(403, str(result))
        connection.bearer = (authorization, result)
        return result.caller
