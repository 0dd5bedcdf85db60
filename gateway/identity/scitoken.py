"""SciTokens: JWTs signed by an issuer's own key, verified with the maintained ``scitokens`` library.

- only issuers named in ``scitokens_trusted_issuers`` are looked at: the issuer's keys are fetched from it (OIDC
  discovery, ``https://ISSUER/.well-known/openid-configuration``, then its ``jwks_uri``, over HTTPS only), so a
  token from anywhere else is refused before anything is fetched;
- the library checks the signature (RS256 or ES256), ``exp``, ``nbf``, ``iat`` and ``iss``, and the audience: a token
  with an ``aud`` claim must name one of ``scitokens_server_audience`` (HTCondor's ``SCITOKENS_SERVER_AUDIENCE``)
  or ``ANY``;
- its ``condor:/LEVEL`` scopes bound what the bearer may do (:mod:`.scopes`; none: nothing at all, as in HTCondor);
- the identity is ``ISSUER,SUBJECT``, which a ``SCITOKENS`` rule of the map file must map to a user (HTCondor's own
  map file lines, e.g. ``SCITOKENS /^https:\\/\\/issuer\\.example,(.*)$/ \\1``); a token no rule maps is refused.

The issuers' keys are kept in the library's cache (a SQLite file under ``scitokens_cache_dir``) as long as the
issuer's answer allows.  Verifying may fetch keys, so it runs off the reactor thread; each fetch waits at most
:data:`ISSUER_TIMEOUT` seconds for the issuer to connect and answer (the library sets no limit, and an issuer that
never answers would hold a thread forever), and a token whose keys could not be had in time is refused.
"""

from __future__ import annotations

import configparser
import io
import urllib.error
import urllib.request
import urllib.response
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import scitokens
from scitokens.scitokens import EnforcementError, ValidationFailure
from scitokens.utils import errors as scitoken_errors
from scitokens.utils import keycache

from .idtokens import Claims, InvalidToken, split

#: claims that say something about the token and restrict nothing; the library refuses claims it has no
#: validator for, and HTCondor's library does not
INFORMATIONAL = ("wlcg.ver", "wlcg.groups", "client_id", "auth_time", "azp", "sid")


#: seconds a trusted issuer has to accept a connection and to send each part of its OIDC metadata or keys (HTCondor
#: has no knob for this)
ISSUER_TIMEOUT = 10.0


def configure(directory: Path, fetch_timeout: float = ISSUER_TIMEOUT) -> None:
    """Keep the library's key cache under ``directory`` (its default is the user's ~/.cache), its log quiet, and its
    fetches from the issuers bounded by ``fetch_timeout`` seconds (the library's settings are the process's)."""
    config = configparser.ConfigParser()
    config["scitokens"] = {"cache_location": str(directory), "log_file": "", "log_level": "WARNING"}
    scitokens.set_config(config)
    if not isinstance(keycache.request, BoundedFetches) and keycache.request is not urllib.request:
        raise RuntimeError("the scitokens library no longer fetches keys with urllib.request: its fetches cannot be "
                           "bounded")
    keycache.request = BoundedFetches(fetch_timeout)


class BoundedFetches:
    """``urllib.request`` as the library's key cache uses it (``Request``, ``urlopen``), each fetch bounded: the
    library passes no timeout.  Only the key cache's fetches see it; no other socket of the process is touched.

    A fetch that runs out of time is a URLError saying so, which the library passes on as it does an issuer it
    cannot reach (and caches no refusal: the next token tries again)."""

    Request = urllib.request.Request

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def urlopen(self, request: urllib.request.Request) -> urllib.response.addinfourl:
        """The issuer's answer, read whole within the timeout (each connect, send and receive waits at most that)."""
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
                return urllib.response.addinfourl(io.BytesIO(body), response.headers, response.url, response.status)
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise self._late(request) from None
            raise
        except TimeoutError:
            raise self._late(request) from None

    def _late(self, request: urllib.request.Request) -> urllib.error.URLError:
        return urllib.error.URLError(f"{request.full_url} did not answer within {self.timeout:g} s")


@dataclass(frozen=True)
class SciTokenSettings:
    issuers: tuple[str, ...]
    audience: tuple[str, ...] = ()


class SciTokens:
    """Verifies SciTokens from the trusted issuers."""

    def __init__(self, settings: SciTokenSettings) -> None:
        self.settings = settings

    def trusts(self, issuer: str) -> bool:
        return issuer in self.settings.issuers

    def verify(self, token: str) -> Claims:
        """The claims of a valid SciToken from a trusted issuer (raises InvalidToken saying why not)."""
        _, payload, _, _ = split(token)
        issuer = payload.get("iss")
        if not isinstance(issuer, str) or not self.trusts(issuer):
            raise InvalidToken(f"the token's issuer {issuer!r} is not trusted (scitokens_trusted_issuers)")
        try:
            verified = scitokens.SciToken.deserialize(token)
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet (nbf)") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken(f"the token's signature does not match the keys of {issuer}") from None
        except jwt.InvalidAlgorithmError:
            raise InvalidToken("the token's algorithm is not accepted (SciTokens are signed with RS256 or ES256)") \
                from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InvalidToken(f"the keys of issuer {issuer} could not be had: {_reason(exc)}") from None
        except (jwt.PyJWTError, scitoken_errors.SciTokensException, NotImplementedError) as exc:
            # NotImplementedError: the token names no key (kid) and the issuer has several
            raise InvalidToken(f"the token is not a valid SciToken of {issuer}: {exc}") from None
        enforcer = scitokens.Enforcer(issuer, audience=list(self.settings.audience) or None)
        for claim in INFORMATIONAL:
            enforcer.add_validator(claim, lambda value: True)
        try:
            acls = enforcer.generate_acls(verified)
        except (ValidationFailure, EnforcementError) as exc:
            raise InvalidToken(f"the token's claims were refused: {enforcer.last_failure or exc}") from None
        subject = verified.get("sub")
        if not isinstance(subject, str) or not subject:
            raise InvalidToken("the token has no subject (sub)")
        scopes = tuple(f"condor:/{path.lstrip('/')}" for authz, path in acls if authz == "condor" and path.strip("/"))
        claims: dict[str, Any] = dict(verified.claims())
        expires = claims.get("exp")
        return Claims(issuer, subject, str(claims.get("jti", "")), scopes,
                      float(expires) if isinstance(expires, (int, float)) else None, claims)


def _reason(exc: Exception) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc)
