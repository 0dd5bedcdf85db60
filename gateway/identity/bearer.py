"""``Authorization: Bearer TOKEN``: which kind of token it is, whether it is valid, and which user it is.

The token's issuer (``iss``, read before anything is verified) says which way it is checked: the gateway's own
``trust_domain`` means an IDTOKEN signed with one of its keys (:mod:`.idtokens`); an issuer of
``scitokens_trusted_issuers`` a SciToken (:mod:`.scitoken`); any other issuer is refused, unchecked.

The user: a SciToken's ``ISSUER,SUBJECT`` must be mapped by a ``SCITOKENS`` rule of the map file.  An IDTOKEN's
subject is its user as it is (``alice@example.org``, whose jobs' owner is ``alice``), as HTCondor takes it; an
``IDTOKENS`` rule of the map file that matches the subject maps it to another user.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import classad2

from gateway.core.auth import Authentication, Caller

from . import scopes
from .idtokens import POOL, IdTokens, InvalidToken, SigningKeys, TokenPolicy, split
from .mapfile import CertificateMap

if TYPE_CHECKING:  # the scitokens library is imported only by gateways that accept SciTokens
    from .scitoken import SciTokens

#: the map file's methods for tokens, as HTCondor names them
IDTOKENS = "IDTOKENS"
SCITOKENS = "SCITOKENS"


class Unmapped(Exception):
    """A valid token whose identity no rule of the map file maps to a user."""


@dataclass(frozen=True)
class Verified:
    """A valid token's caller, and when the token expires (seconds since the epoch; None: never)."""

    caller: Caller
    expires: float | None


def bearer_token(header: bytes | None) -> str | None:
    """The token of an ``Authorization: Bearer`` header (None for another scheme or none; raises InvalidToken for a
    Bearer header that holds no token, or one that is not ASCII)."""
    if not header:
        return None
    scheme, _, rest = header.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    try:
        token = rest.strip().decode("ascii")
    except UnicodeDecodeError:
        raise InvalidToken("the token is not ASCII") from None
    if not token or any(char.isspace() for char in token):
        raise InvalidToken("expected Authorization: Bearer TOKEN")
    return token


def claimed_subject(token: str) -> str:
    """The subject a token claims, unverified (for the throttle's record of failures per user): '-' for none."""
    try:
        subject = split(token)[1].get("sub")
    except InvalidToken:
        return "-"
    return subject if isinstance(subject, str) and subject else "-"


class BearerTokens:
    """The gateway's ways of checking bearer tokens (either may be None) and its map file."""

    def __init__(self, idtokens: IdTokens | None, scitokens: SciTokens | None,
                 mapfile: CertificateMap | None) -> None:
        self.idtokens = idtokens
        self.scitokens = scitokens
        self.mapfile = mapfile

    def verify(self, token: str, host: str) -> Verified:
        """The caller a token proves (raises InvalidToken, or Unmapped for a valid token no rule maps)."""
        issuer = split(token)[1].get("iss")
        if self.idtokens is not None and issuer == self.idtokens.policy.trust_domain:
            claims = self.idtokens.verify(token)
            user = self._mapped(IDTOKENS, claims.subject) or claims.subject
            permissions = scopes.permissions(claims.scopes, bounded=False)
            authentication = Authentication.IDTOKEN
        elif self.scitokens is not None and isinstance(issuer, str) and self.scitokens.trusts(issuer):
            claims = self.scitokens.verify(token)
            identity = f"{claims.issuer},{claims.subject}"
            user = self._mapped(SCITOKENS, identity)
            if user is None:
                raise Unmapped(f"the SciToken identity {identity} is not mapped to a user (no SCITOKENS rule of "
                               f"certificate_mapfile matches it)")
            permissions = scopes.permissions(claims.scopes, bounded=True)
            authentication = Authentication.SCITOKEN
        else:
            raise InvalidToken(f"the token's issuer {issuer!r} is not trusted by this gateway (neither its "
                               f"trust_domain nor one of scitokens_trusted_issuers)")
        return Verified(Caller(host, user, authentication, permissions), claims.expires)

    def _mapped(self, method: str, identity: str) -> str | None:
        return self.mapfile.canonicalize(method, identity) if self.mapfile is not None else None


@dataclass(frozen=True)
class TokenSettings:
    """The token knobs (HTCondor's names), as the configuration gives them."""

    trust_domain: str = ""  # "": this host's fully qualified name (HTCondor's default is $(CONDOR_HOST))
    pool_signing_key_file: Path | None = None  # sec_token_pool_signing_key_file
    password_directory: Path | None = None  # sec_password_directory
    max_age: int = -1  # sec_token_max_age
    revocation_expr: str = ""  # sec_token_revocation_expr
    scitokens_issuers: tuple[str, ...] = ()  # scitokens_trusted_issuers (the gateway's own knob)
    scitokens_audience: tuple[str, ...] = ()  # scitokens_server_audience

    def domain(self) -> str:
        return self.trust_domain or socket.getfqdn()

    def signing_keys(self) -> SigningKeys:
        return SigningKeys(self.pool_signing_key_file, self.password_directory)

    def described(self) -> str:
        """The kinds of bearer token accepted, for the start-up line."""
        kinds = []
        if self.pool_signing_key_file or self.password_directory:
            kinds.append(f"IDTOKENs of trust domain {self.domain()} (keys {', '.join(self.signing_keys().known())})")
        if self.scitokens_issuers:
            kinds.append(f"SciTokens of {', '.join(self.scitokens_issuers)}")
        return "bearer tokens: " + " and ".join(kinds)

    def enabled(self) -> bool:
        return bool(self.pool_signing_key_file or self.password_directory or self.scitokens_issuers)

    def build(self, mapfile: CertificateMap | None, cache_dir: Path) -> BearerTokens | None:
        """The token checks these knobs ask for, their files checked now (raises ValueError saying what is wrong);
        None when no knob asks for any."""
        if not self.enabled():
            return None
        idtokens = None
        if self.pool_signing_key_file or self.password_directory:
            keys = self.signing_keys()
            if self.pool_signing_key_file is not None:
                keys.key(POOL)  # readable and private, or the gateway does not start
            if self.password_directory is not None and not self.password_directory.is_dir():
                raise ValueError(f"sec_password_directory {self.password_directory} is not a directory")
            if any(char in self.domain() for char in ", \t"):
                raise ValueError(f"trust_domain {self.domain()!r} may not contain blanks or commas")
            idtokens = IdTokens(keys, TokenPolicy(self.domain(), self.max_age, self._revocation()))
        sci = None
        if self.scitokens_issuers:
            for issuer in self.scitokens_issuers:
                if not issuer.startswith("https://"):
                    raise ValueError(f"scitokens_trusted_issuers: {issuer!r} is not an https:// URL (keys are "
                                     f"fetched from the issuer over HTTPS only)")
            from .scitoken import SciTokens, SciTokenSettings, configure

            configure(cache_dir)
            sci = SciTokens(SciTokenSettings(self.scitokens_issuers, self.scitokens_audience))
        return BearerTokens(idtokens, sci, mapfile)

    def _revocation(self) -> classad2.ExprTree | None:
        if not self.revocation_expr.strip():
            return None
        try:
            return classad2.ExprTree(self.revocation_expr)
        except classad2.ClassAdException:
            raise ValueError(f"sec_token_revocation_expr is not a ClassAd expression: "
                             f"{self.revocation_expr!r}") from None
