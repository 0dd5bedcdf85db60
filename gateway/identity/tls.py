"""The SSL port's TLS context, built from HTCondor's ``soap_ssl_*`` knobs with Twisted's CertificateOptions.

As gSOAP's ``soap_ssl_server_context`` read them:

- ``soap_ssl_server_keyfile``: one PEM file with the server's certificate first, then the chain up to (not
  necessarily including) the root, and the private key, in any order;
- ``soap_ssl_server_keyfile_password``: the key's passphrase when it is encrypted (ignored when it is not);
- ``soap_ssl_ca_file`` / ``soap_ssl_ca_dir``: the authorities client certificates must chain to, a PEM file of
  certificates or a directory of PEM files (OpenSSL's hashed ``c_rehash`` directories are such directories).

Client certificates are verified by OpenSSL during the handshake (chain, validity dates); a client that must
present one and does not, or presents one that does not verify, fails the handshake.  The session cache is off, as
it was in HTCondor.  :func:`subject_oneline` names a certificate's subject the way HTCondor matched it against the
map file: OpenSSL's ``X509_NAME_oneline`` form, ``/C=US/O=Example/CN=alice``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.hashes import SHA256
from OpenSSL import SSL, crypto
from twisted.internet.interfaces import IOpenSSLContextFactory
from twisted.internet.ssl import CertificateOptions
from zope.interface import implementer


class TlsError(ValueError):
    """The TLS knobs name something unusable: a missing file, no key, a key that is not the certificate's..."""


class ClientCertificates(enum.Enum):
    """What the SSL port asks of clients during the handshake."""

    REQUIRED = "required"  # certificates are the only way in: no certificate, no connection
    OPTIONAL = "optional"  # asked for and verified when sent; HTTP Basic is the other way in
    NOT_ASKED = "not asked"  # passwords only


@dataclass(frozen=True)
class TlsSettings:
    keyfile: Path
    keyfile_password: str | None = None
    ca_file: Path | None = None
    ca_dir: Path | None = None
    client_certificates: ClientCertificates = ClientCertificates.REQUIRED


@implementer(IOpenSSLContextFactory)
class ServerContextFactory:
    """The one OpenSSL context every connection of the SSL port uses (Twisted's ``getContext`` interface).

    Built, and so checked (the key matches the certificate), when the factory is made, not at the first client."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        keyfile = _read(settings.keyfile, "soap_ssl_server_keyfile")  # certificates and key in one file
        certificates = _certificates(keyfile, settings.keyfile, "soap_ssl_server_keyfile")
        self.certificate = certificates[0]
        key = _private_key(keyfile, settings.keyfile, settings.keyfile_password)
        authorities = load_authorities(settings.ca_file, settings.ca_dir)
        asks = settings.client_certificates is not ClientCertificates.NOT_ASKED
        if asks and not authorities:
            raise TlsError("client certificates need soap_ssl_ca_file or soap_ssl_ca_dir")
        options = CertificateOptions(
            privateKey=key, certificate=self.certificate, extraCertChain=certificates[1:], verify=asks,
            caCerts=[crypto.X509.from_cryptography(ca) for ca in authorities] if asks else None,
            requireCertificate=settings.client_certificates is ClientCertificates.REQUIRED, enableSessions=False)
        try:
            self._context = options.getContext()
        except SSL.Error as exc:
            raise TlsError(f"soap_ssl_server_keyfile {settings.keyfile}: the private key does not belong to its "
                           f"certificate ({openssl_reason(exc)})") from None
        if asks:  # the authorities a client's certificate should come from, for clients holding several
            for authority in authorities:
                self._context.add_client_ca(authority)

    def getContext(self) -> SSL.Context:
        return self._context


def _read(path: Path, knob: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsError(f"cannot read {knob} {path}: {exc.strerror or exc}") from None


def _certificates(data: bytes, path: Path, knob: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsError(f"{knob} {path} holds no PEM certificate") from None


def _private_key(data: bytes, path: Path, password: str | None) -> PrivateKeyTypes:
    secret = password.encode("utf-8") if password else None
    try:
        return serialization.load_pem_private_key(data, secret)
    except TypeError:
        if secret is None:
            raise TlsError(f"soap_ssl_server_keyfile {path}: the private key is encrypted; "
                           f"set soap_ssl_server_keyfile_password") from None
        # a password for a key that is not encrypted: gSOAP ignored it, and so do we
        return serialization.load_pem_private_key(data, None)
    except ValueError as exc:
        reason = "wrong soap_ssl_server_keyfile_password" if secret is not None else "no private key in PEM form"
        raise TlsError(f"soap_ssl_server_keyfile {path}: {reason} ({exc})") from None


def load_authorities(ca_file: Path | None, ca_dir: Path | None) -> list[x509.Certificate]:
    """The certificates of the CA file and of every file of the CA directory that holds any (others, such as
    revocation lists or notes, are passed over), each once."""
    found: dict[bytes, x509.Certificate] = {}

    def add(certificates: list[x509.Certificate]) -> None:
        for certificate in certificates:
            found.setdefault(certificate.fingerprint(SHA256()), certificate)

    if ca_file is not None:
        add(_certificates(_read(ca_file, "soap_ssl_ca_file"), ca_file, "soap_ssl_ca_file"))
    if ca_dir is not None:
        try:
            entries = sorted(entry for entry in ca_dir.iterdir() if entry.is_file())
        except OSError as exc:
            raise TlsError(f"cannot read soap_ssl_ca_dir {ca_dir}: {exc.strerror or exc}") from None
        in_dir = 0
        for entry in entries:
            try:
                certificates = x509.load_pem_x509_certificates(entry.read_bytes())
            except (OSError, ValueError):
                continue
            in_dir += len(certificates)
            add(certificates)
        if not in_dir:
            raise TlsError(f"soap_ssl_ca_dir {ca_dir} holds no PEM certificate")
    return list(found.values())


def openssl_reason(exc: SSL.Error) -> str:
    """OpenSSL's reasons (``peer did not return a certificate``...) without its library and function names."""
    reasons = [part[2] for part in exc.args[0] if isinstance(part, tuple) and len(part) == 3] if exc.args else []
    return "; ".join(reasons) or str(exc)


# -- the subject as HTCondor saw it ------------------------------------------------------------------------
#: OpenSSL's short names of the attributes that appear in subject names (``OBJ_nid2sn``); others are written as
#: their dotted OID, as ``X509_NAME_oneline`` writes an attribute OpenSSL has no name for
SHORT_NAMES = {
    "2.5.4.3": "CN", "2.5.4.4": "SN", "2.5.4.5": "serialNumber", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST",
    "2.5.4.9": "street", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.12": "title", "2.5.4.13": "description",
    "2.5.4.15": "businessCategory", "2.5.4.17": "postalCode", "2.5.4.41": "name", "2.5.4.42": "GN",
    "2.5.4.43": "initials", "2.5.4.44": "generationQualifier", "2.5.4.45": "x500UniqueIdentifier",
    "2.5.4.46": "dnQualifier", "2.5.4.65": "pseudonym", "2.5.4.72": "role", "2.5.4.97": "organizationIdentifier",
    "1.2.840.113549.1.9.1": "emailAddress", "0.9.2342.19200300.100.1.1": "UID",
    "0.9.2342.19200300.100.1.25": "DC", "1.3.6.1.4.1.311.60.2.1.1": "jurisdictionL",
    "1.3.6.1.4.1.311.60.2.1.2": "jurisdictionST", "1.3.6.1.4.1.311.60.2.1.3": "jurisdictionC",
}


def subject_oneline(certificate: x509.Certificate) -> str:
    """``/C=US/O=Example/CN=alice``: each attribute in the certificate's order, as OpenSSL 3's
    ``X509_NAME_oneline`` writes it: ``/`` and ``+`` in a value escaped with a backslash, bytes outside printable
    ASCII as ``\\xHH`` (a UTF-8 value byte by byte)."""
    parts = []
    for attribute in certificate.subject:
        name = SHORT_NAMES.get(attribute.oid.dotted_string, attribute.oid.dotted_string)
        value = attribute.value if isinstance(attribute.value, bytes) else attribute.value.encode("utf-8")
        parts.append(f"/{name}={_escape(value)}")
    return "".join(parts)


def _escape(value: bytes) -> str:
    out = []
    for byte in value:
        if byte < 0x20 or byte > 0x7E:
            out.append(f"\\x{byte:02X}")
        elif chr(byte) in "/+":
            out.append("\\" + chr(byte))
        else:
            out.append(chr(byte))
    return "".join(out)


def peer_certificate(transport: object) -> x509.Certificate | None:
    """The verified certificate a TLS client presented on this transport, or None (no TLS, or none sent)."""
    get = getattr(transport, "getPeerCertificate", None)
    certificate = get() if get is not None else None
    return certificate.to_cryptography() if certificate is not None else None
