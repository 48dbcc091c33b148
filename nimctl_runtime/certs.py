"""X.509 helpers: a throwaway CA and serving certificates signed by it.

Used by localcluster (its HTTPS endpoint), by ``nimctl local`` (the webhook
server's certificate and the ``caBundle`` registered with the API server) and by
tests that stand up their own TLS webhooks. Keys are ECDSA P-256: fast to make,
accepted by Go's and Python's TLS stacks alike.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class CertPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(
        self, directory: str | Path, cert_name: str = "tls.crt", key_name: str = "tls.key"
    ) -> tuple[Path, Path]:
        """Write ``tls.crt``/``tls.key`` (cert-manager's names) into *directory*."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = d / cert_name, d / key_name
        cert_path.write_bytes(self.cert_pem)
        _write_private(key_path, self.key_pem)
        return cert_path, key_path


def _write_private(path: Path, data: bytes) -> None:
    """Write *data* to *path* readable by the owner only, from the moment it exists.

    The file is created 0600 (never world-readable, not even briefly) and, when it
    already existed with wider bits, narrowed before the new key is written into it.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
    finally:
        os.close(fd)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate_ca(common_name: str = "nimctl-ca", days: int = 365) -> CertPair:
    """Make a self-signed CA certificate that can sign serving certificates."""
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def generate_serving_cert(
    ca: CertPair, hosts: list[str], common_name: str | None = None, days: int = 365
) -> CertPair:
    """Make a server certificate for *hosts* (DNS names or IP addresses) signed by *ca*."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host name or IP address")
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC key made by generate_ca")
    key = _key()
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return CertPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def server_ssl_context(pair: CertPair) -> ssl.SSLContext:
    """An SSLContext serving *pair* (files are written to a private temp dir and read back)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = pair.write(tmp)
        ctx.load_cert_chain(cert_path, key_path)
    return ctx


def client_ssl_context(ca_pem: bytes) -> ssl.SSLContext:
    """An SSLContext that trusts only *ca_pem* (hostname checking on)."""
    return ssl.create_default_context(cadata=ca_pem.decode())
