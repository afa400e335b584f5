"""The conversion webhook's TLS material: a self-signed CA and a serving certificate it signs.

The one module that uses ``cryptography``. The CA's PEM becomes the CRDs'
``spec.conversion.webhook.clientConfig.caBundle``; the serving certificate names the Service's DNS
names (``<service>.<namespace>.svc`` and friends) and, for a URL client config such as
``https://127.0.0.1:8443/convert``, the IP address.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True, slots=True)
class CertBundle:
    """PEM-encoded CA certificate, serving certificate and serving key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def not_after(self) -> dt.datetime:
        return not_after(self.cert_pem)


def not_after(cert_pem: bytes) -> dt.datetime:
    """When a PEM certificate expires (UTC)."""
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def _spki(key: PublicKeyTypes) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def check_bundle(bundle: CertBundle) -> None:
    """Raise ValueError (saying what is wrong) unless the bundle can serve and be trusted: the
    serving certificate parses, the key is an unencrypted PEM private key of that certificate,
    and one of the CA certificates issued it."""
    try:
        cert = x509.load_pem_x509_certificate(bundle.cert_pem)
    except ValueError as err:
        raise ValueError(f"tls.crt: {err}") from None
    try:
        key = serialization.load_pem_private_key(bundle.key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as err:
        raise ValueError(f"tls.key: {err}") from None
    if _spki(key.public_key()) != _spki(cert.public_key()):
        raise ValueError("tls.key is not the key of tls.crt")
    try:
        cas = x509.load_pem_x509_certificates(bundle.ca_pem)
    except ValueError as err:
        raise ValueError(f"ca.crt: {err}") from None
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return
    raise ValueError("no certificate in ca.crt issued tls.crt")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def make_bundle(hosts: Sequence[str], *, now: dt.datetime, validity: dt.timedelta) -> CertBundle:
    """A fresh CA and a serving certificate for ``hosts`` (DNS names or IPs), both valid from a
    minute before ``now`` for ``validity``."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    start = now - dt.timedelta(minutes=1)
    end = now + validity
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"karpenter-py-webhook-ca@{int(now.timestamp())}")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return CertBundle(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
