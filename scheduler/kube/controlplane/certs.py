"""Certificates for the local control plane, made in-process with `cryptography`.

Why not let kube-apiserver self-sign into ``--cert-dir``: clients need a CA they can trust, and
client-certificate users (CN = user, O = groups) are the cheapest way to give later tests
identities with restricted RBAC. One small CA signs everything here.

Why the extra X.509 care (critical basicConstraints and keyUsage on the CA, SKI/AKI everywhere):
Python 3.13 turns on ``VERIFY_X509_STRICT`` by default, and OpenSSL's strict mode rejects CA
certificates without them (kubernetes-asyncio #349). Certificates made here pass that check on
every Python version we support.

EC P-256 keys are used throughout: generation takes microseconds (RSA-2048 takes tens of
milliseconds) and both Go's TLS stack and kube-apiserver's service-account signer accept them.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "KeyPair", "generate_service_account_key"]

_CA_LIFETIME = dt.timedelta(days=3650)
_LEAF_LIFETIME = dt.timedelta(days=365)
_BACKDATE = dt.timedelta(hours=1)  # tolerate small clock differences between processes


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        """Write ``<stem>.crt`` and ``<stem>.key`` (mode 0600) into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        cert_path = directory / f"{stem}.crt"
        key_path = directory / f"{stem}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.touch(mode=0o600, exist_ok=True)
        key_path.chmod(0o600)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _certificate(subject: x509.Name, public: ec.EllipticCurvePublicKey, issuer: x509.Name,
                 issuer_public: ec.EllipticCurvePublicKey, *, ca: bool) -> x509.CertificateBuilder:
    """What the CA and every leaf share: validity from an hour ago, critical basicConstraints and
    keyUsage (signing certificates only for the CA), SKI and AKI (see the module docstring)."""
    now = dt.datetime.now(dt.timezone.utc)
    usage = x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                          encipher_only=False, decipher_only=False)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + (_CA_LIFETIME if ca else _LEAF_LIFETIME))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_public), critical=False)
    )


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self._key = key
        self.cert = cert

    @classmethod
    def generate(cls, common_name: str = "tessera-local-ca") -> CertificateAuthority:
        """Make a fresh CA key and self-signed certificate."""
        key = _new_key()
        name = _name(common_name)
        cert = _certificate(name, key.public_key(), name, key.public_key(), ca=True).sign(key, hashes.SHA256())
        return cls(key, cert)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self._key)

    def as_key_pair(self) -> KeyPair:
        return KeyPair(self.cert_pem, self.key_pem)

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: Sequence[x509.GeneralName] = (),
    ) -> KeyPair:
        key = _new_key()
        builder = _certificate(subject, key.public_key(), self.cert.subject, self._key.public_key(), ca=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def issue_serving(
        self,
        common_name: str = "kube-apiserver",
        ips: Sequence[str] = ("127.0.0.1",),
        dns_names: Sequence[str] = ("localhost",),
    ) -> KeyPair:
        """A TLS server certificate (EKU serverAuth) for the given IP and DNS SANs."""
        sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        return self._issue(_name(common_name), ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def issue_client(self, user: str, groups: Sequence[str] = ()) -> KeyPair:
        """A client certificate: kube-apiserver reads CN as the user name and O as groups."""
        return self._issue(_name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)


def generate_service_account_key() -> KeyPair:
    """A key for signing service-account tokens (ES256).

    Returned as a :class:`KeyPair` whose ``cert_pem`` holds the PEM *public* key, because
    ``--service-account-key-file`` does not accept a PKCS#8 private key, while
    ``--service-account-signing-key-file`` takes ``key_pem``.
    """
    key = _new_key()
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(public_pem, _key_pem(key))
