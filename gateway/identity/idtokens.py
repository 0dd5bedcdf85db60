"""HTCondor IDTOKENs: JWTs signed with a key of the pool, made and checked the way HTCondor makes and checks them.

What HTCondor does (``src/condor_io/condor_auth_passwd.cpp``, ``src/condor_utils/store_cred.cpp``,
``src/condor_utils/secure_file.cpp``), and so what this module does:

- a token names its signing key by the ``kid`` of its header (required, never empty); ``POOL`` is the key file
  ``sec_token_pool_signing_key_file`` names, any other ``kid`` a file of that name in ``sec_password_directory``;
- a key file is read as HTCondor reads password files: its bytes XORed with ``DE AD BE EF`` repeated (the "simple
  scramble" every HTCondor key file is written with), and the POOL key doubled (its bytes twice over, as HTCondor
  has done since 8.9.12 so that older tokens keep verifying); the file must belong to the user reading it and be
  closed to group and others;
- the HMAC key is HKDF-SHA256 of those bytes, salt ``htcondor``, info ``master jwt``, 32 bytes long;
- a token is ``header.payload.signature``, signed with HMAC-SHA256 (``HS256``, what condor_token_create writes;
  ``HS384`` and ``HS512`` are accepted as HTCondor accepts them, nothing else: ``alg: none`` is refused);
- its claims: ``iss`` (the trust domain, ``TRUST_DOMAIN``), ``sub`` (the identity, ``user@domain``), ``iat``,
  ``exp`` (optional: a token made with a negative lifetime never expires), ``jti`` (required), ``scope`` (optional:
  ``condor:/READ condor:/WRITE``... bounds what the token may do, :mod:`.scopes`); a token without ``sub`` is a
  capability, which only a schedd's token database can resolve, and is refused here;
- ``sec_token_max_age`` refuses tokens issued longer ago than that many seconds, and
  ``sec_token_revocation_expr`` (a ClassAd expression over the claims) revokes those for which it is true, or for
  which it is anything but a boolean or a number (as HTCondor errs on the side of caution).

The checks are made in the order HTCondor makes them, and each refusal says which failed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import classad2
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

#: the key id of the pool's signing key (``sec_token_pool_signing_key_file``)
POOL = "POOL"
#: the bytes every HTCondor password and key file is XORed with (``simple_scramble``)
SCRAMBLE = bytes((0xDE, 0xAD, 0xBE, 0xEF))
#: what condor_token_create signs with; the others HTCondor verifies
SIGNING_ALGORITHM = "HS256"
ALGORITHMS = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}
#: HKDF's parameters for the JWT key (``AUTH_PW_KEY_STRENGTH`` bytes)
HKDF_SALT = b"htcondor"
HKDF_INFO = b"master jwt"
KEY_LENGTH = 32


class InvalidToken(ValueError):
    """A token refused; the message says why (it goes into ``error_description``)."""


class SigningKeyUnavailable(InvalidToken):
    """The key a token names cannot be had (no such file, not readable, not private)."""


def scramble(data: bytes) -> bytes:
    """HTCondor's ``simple_scramble`` (its own inverse): each byte XORed with ``DE AD BE EF`` in turn."""
    return bytes(byte ^ SCRAMBLE[index % 4] for index, byte in enumerate(data))


def jwt_key(signing_key: bytes) -> bytes:
    """The HMAC key of the JWTs signed with ``signing_key`` (the key file's bytes, unscrambled, doubled for POOL)."""
    return HKDF(algorithm=SHA256(), length=KEY_LENGTH, salt=HKDF_SALT, info=HKDF_INFO).derive(signing_key)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str, part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InvalidToken(f"the token's {part} is not base64url") from None


def _json(data: bytes, part: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise InvalidToken(f"the token's {part} is not JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"the token's {part} is not a JSON object")
    return value


def split(token: str) -> tuple[dict[str, Any], dict[str, Any], str, bytes]:
    """A compact JWT's header and payload (unverified), the signed text and the signature (raises InvalidToken)."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts[:2]):
        raise InvalidToken("not a JSON Web Token (expected header.payload.signature)")
    header = _json(_unb64(parts[0], "header"), "header")
    payload = _json(_unb64(parts[1], "payload"), "payload")
    return header, payload, f"{parts[0]}.{parts[1]}", _unb64(parts[2], "signature")


@dataclass(frozen=True)
class SigningKeys:
    """Where the signing keys are: the POOL key file, and the directory of the others (either may be None)."""

    pool_file: Path | None = None
    directory: Path | None = None

    def path(self, kid: str) -> Path:
        if kid == POOL:
            if self.pool_file is None:
                raise SigningKeyUnavailable("no POOL signing key is set up (sec_token_pool_signing_key_file)")
            return self.pool_file
        if self.directory is None:
            raise SigningKeyUnavailable(f"no signing key {kid!r}: sec_password_directory is not set")
        if not kid or "/" in kid or kid in (".", "..") or "\0" in kid:
            raise SigningKeyUnavailable(f"no signing key {kid!r}: not a key name")
        return self.directory / kid

    def key(self, kid: str) -> bytes:
        """The signing key named ``kid``, as HTCondor's ``getTokenSigningKey`` returns it (raises SigningKeyUnavailable)."""
        path = self.path(kid)
        data = read_private(path)
        plain = scramble(data)
        return plain + plain if kid == POOL else plain

    def known(self) -> list[str]:
        """The key names there are (POOL first when set up), for the log."""
        names = [POOL] if self.pool_file is not None else []
        if self.directory is not None:
            try:
                names += sorted(entry.name for entry in self.directory.iterdir() if entry.is_file())
            except OSError:
                pass
        return names


def read_private(path: Path) -> bytes:
    """A key file's bytes, if it belongs to this process's user and no one else may read or write it (HTCondor's
    ``read_secure_file``)."""
    try:
        with open(path, "rb") as stream:
            info = os.fstat(stream.fileno())
            data = stream.read()
    except FileNotFoundError:
        raise SigningKeyUnavailable(f"no signing key file {path}") from None
    except OSError as exc:
        raise SigningKeyUnavailable(f"cannot read signing key file {path}: {exc.strerror or exc}") from None
    if info.st_uid != os.geteuid():
        raise SigningKeyUnavailable(f"signing key file {path} does not belong to the gateway's user (uid {os.geteuid()})")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningKeyUnavailable(f"signing key file {path} may be read or written by others (mode "
                        f"{stat.S_IMODE(info.st_mode):o}; chmod 600 it)")
    if not data:
        raise SigningKeyUnavailable(f"signing key file {path} is empty")
    return data


def create_key_file(path: Path) -> None:
    """A new signing key file as HTCondor's collector makes one: 64 random bytes, scrambled, mode 0600 (refuses to
    replace an existing file)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(scramble(secrets.token_bytes(64)))


@dataclass(frozen=True)
class Claims:
    """A verified token's claims that the gateway uses."""

    issuer: str
    subject: str
    token_id: str
    scopes: tuple[str, ...]
    expires: float | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class TokenPolicy:
    """What a token must satisfy beyond its signature: its issuer, and HTCondor's age and revocation knobs."""

    trust_domain: str
    max_age: int = -1  # sec_token_max_age: -1 no limit
    revocation: classad2.ExprTree | None = None  # sec_token_revocation_expr


def scope_words(scope: Any) -> tuple[str, ...]:
    """The words of a ``scope`` claim (blank- or comma-separated, as HTCondor's StringTokenIterator reads it)."""
    if not isinstance(scope, str):
        raise InvalidToken("the token's scope claim is not a string")
    return tuple(word for word in scope.replace(",", " ").split() if word)


class IdTokens:
    """Verifies IDTOKENs against the gateway's signing keys (``clock``: seconds since the epoch)."""

    def __init__(self, keys: SigningKeys, policy: TokenPolicy, clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self.policy = policy
        self._clock = clock

    def verify(self, token: str) -> Claims:
        """The claims of a valid token (raises InvalidToken saying why it is not)."""
        header, payload, signed, signature = split(token)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
            raise InvalidToken(f"the token's algorithm {algorithm!r} is not accepted (IDTOKENs are signed with "
                               f"HS256, HS384 or HS512)")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise InvalidToken("the token names no signing key (kid)")
        if not hmac.compare_digest(sign(self.keys, kid, signed, algorithm), signature):
            raise InvalidToken(f"the token's signature does not match signing key {kid!r}")
        return self._checked(payload)

    def _checked(self, payload: dict[str, Any]) -> Claims:
        now = self._clock()
        issued = _number(payload, "iat")
        if issued is not None and self.policy.max_age >= 0 and now - issued > self.policy.max_age:
            raise InvalidToken(f"the token was issued {int(now - issued)} s ago, more than sec_token_max_age "
                               f"({self.policy.max_age} s)")
        expires = _number(payload, "exp")
        if expires is not None and now > expires:
            raise InvalidToken(f"the token expired {int(now - expires)} s ago")
        issuer = payload.get("iss")
        if not isinstance(issuer, str) or not issuer:
            raise InvalidToken("the token has no issuer (iss)")
        if issuer != self.policy.trust_domain:
            raise InvalidToken(f"the token's issuer {issuer!r} is not this gateway's trust_domain "
                               f"{self.policy.trust_domain!r}")
        token_id = payload.get("jti")
        if not isinstance(token_id, str) or not token_id:
            raise InvalidToken("the token has no id (jti)")
        subject = payload.get("sub")
        if not isinstance(subject, str) or not subject:
            raise InvalidToken("the token has no subject (sub): capability tokens are not accepted")
        scopes = scope_words(payload["scope"]) if "scope" in payload else ()
        if self.revoked(payload):
            raise InvalidToken(f"the token {token_id} is revoked (sec_token_revocation_expr)")
        return Claims(issuer, subject, token_id, scopes, expires, payload)

    def revoked(self, payload: dict[str, Any]) -> bool:
        """Whether ``sec_token_revocation_expr`` revokes a token with these claims (claims that are booleans, numbers
        or strings; others are left out): true, or anything but a boolean or a number, revokes."""
        if self.policy.revocation is None:
            return False
        ad = classad2.ClassAd()
        for name, value in payload.items():
            if isinstance(value, (bool, int, float, str)):
                ad[name] = value
        try:
            verdict = self.policy.revocation.eval(ad)
        except classad2.ClassAdException:
            return True
        if isinstance(verdict, (bool, int, float)):
            return bool(verdict)
        return True


def sign(keys: SigningKeys, kid: str, signed: str, algorithm: str = SIGNING_ALGORITHM) -> bytes:
    """The signature of ``header.payload`` with key ``kid``: what HTCondor computes to check a token (it signs the
    token's first two parts again and compares)."""
    return hmac.new(jwt_key(keys.key(kid)), signed.encode("ascii"), ALGORITHMS[algorithm]).digest()


def _number(payload: dict[str, Any], claim: str) -> float | None:
    value = payload.get(claim)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"the token's {claim} claim is not a number")
    return float(value)


def create(keys: SigningKeys, kid: str, issuer: str, subject: str, *, lifetime: int = -1,
           authorizations: tuple[str, ...] = (), now: float | None = None) -> str:
    """A token as condor_token_create makes one: HS256 under key ``kid``, ``iss`` ``issuer``, ``sub`` ``subject``,
    ``iat`` now, ``exp`` ``lifetime`` seconds later (never, when negative), a random ``jti``, and ``scope``
    ``condor:/A condor:/B`` for the authorizations given (none: the token is not bounded).  The claims are written
    as HTCondor's JSON writer writes them (keys sorted, no blanks, ``/`` escaped), so the token reads the same."""
    if not issuer or any(char in issuer for char in ", \t"):
        raise ValueError("the issuer (trust_domain) must be set and may not contain blanks or commas")
    issued = int(time.time() if now is None else now)
    payload: dict[str, Any] = {"iat": issued, "iss": issuer, "jti": secrets.token_hex(16), "sub": subject}
    if lifetime >= 0:
        payload["exp"] = issued + lifetime
    if authorizations:
        payload["scope"] = " ".join(f"condor:/{name}" for name in authorizations)
    header = {"alg": SIGNING_ALGORITHM, "kid": kid}
    signed = (_b64(json.dumps(header, separators=(",", ":")).encode()) + "."
              + _b64(json.dumps(payload, sort_keys=True, separators=(",", ":")).replace("/", "\\/").encode()))
    return f"{signed}.{_b64(sign(keys, kid, signed))}"
