"""The control plane's credentials: a CA, kube-apiserver's serving certificate, the
service-account signing key, and one bearer token per identity (static token file).

The project's own certificates (the extender's, kube-scheduler's client certificate)
are not made here: `k8s/make-secrets.sh` makes them, as a deployment does.
"""

from __future__ import annotations

import csv
import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ADMIN = "e2e-admin"
SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class Identity:
    """A user the apiserver authenticates by `token` (a service account's user name when
    `user` starts with ``system:serviceaccount:``)."""

    user: str
    groups: tuple[str, ...]
    token: str


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _certificate(subject: str, key, issuer: x509.Name, signer, *, ca: bool,  # noqa: ANN001
                 sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(signer, hashes.SHA256())


class ControlPlanePki:
    """Files in `directory`: ca.crt/.key, apiserver.crt/.key, sa.key/sa.pub, tokens.csv."""

    def __init__(self, directory: Path, identities: dict[str, Identity]) -> None:
        self.directory = directory
        self.identities = identities
        directory.mkdir(parents=True, exist_ok=True)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "e2e-ca")])
        ca = _certificate("e2e-ca", ca_key, ca_name, ca_key, ca=True)
        server_key = ec.generate_private_key(ec.SECP256R1())
        server = _certificate("kube-apiserver", server_key, ca_name, ca_key, ca=False, sans=[
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.server_cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
        _write_key(server_key, self.server_key)
        sa_key = ec.generate_private_key(ec.SECP256R1())
        _write_key(sa_key, self.sa_key)
        self.sa_pub.write_bytes(sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        with self.token_file.open("w", newline="") as out:
            writer = csv.writer(out)
            for ident in identities.values():  # token,user,uid,"group1,group2"
                writer.writerow([ident.token, ident.user, ident.user, ",".join(ident.groups)])

    ca_file = property(lambda self: self.directory / "ca.crt")
    server_cert = property(lambda self: self.directory / "apiserver.crt")
    server_key = property(lambda self: self.directory / "apiserver.key")
    sa_key = property(lambda self: self.directory / "sa.key")
    sa_pub = property(lambda self: self.directory / "sa.pub")
    token_file = property(lambda self: self.directory / "tokens.csv")

    def kubeconfig(self, name: str, server: str) -> Path:
        """A kubeconfig for identity `name` (its token) against `server`."""
        path = self.directory / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {
                "server": server, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": name, "user": {"token": self.identities[name].token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": name}}],
        }))
        return path


def identities(service_accounts: list[tuple[str, str]]) -> dict[str, Identity]:
    """The admin (system:masters) and one identity per (namespace, name) service account,
    keyed by the account's name, each with a fresh random token."""
    found = {ADMIN: Identity(ADMIN, ("system:masters",), secrets.token_hex(16))}
    for namespace, name in service_accounts:
        found[name] = Identity(f"{SA_PREFIX}{namespace}:{name}",
                               ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                "system:authenticated"), secrets.token_hex(16))
    return found
