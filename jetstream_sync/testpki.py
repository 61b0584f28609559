"""A throwaway public key infrastructure for tests and examples: a CA, a server certificate
(for ``nats.test`` and 127.0.0.1) and a client certificate, written as PEM files into a
directory, with the nats-server ``tls {}`` block and client ``ssl.SSLContext`` that use them.

Needs the ``cryptography`` package (in the test extra); imported only when a PKI is made.
Not for production: the keys are unencrypted files and the certificates last one day.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path
from typing import Any, List, Tuple

__all__ = ["PKI"]


class PKI:
    """A CA, a server certificate for ``nats.test`` + 127.0.0.1, and a client certificate."""

    def __init__(self, d: Path, server_names: Tuple[str, ...] = ("nats.test",)) -> None:
        try:
            from cryptography import x509
        except ImportError:
            raise ImportError(
                "jetstream_sync.testpki makes certificates with the 'cryptography' package: "
                "pip install cryptography"
            ) from None
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = datetime.datetime.now(datetime.timezone.utc)

        def name(cn: str) -> Any:
            return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

        def write(stem: str, key: Any, cert: Any) -> Tuple[Path, Path]:
            kp, cp = d / f"{stem}.key", d / f"{stem}.pem"
            kp.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
            cp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            return kp, cp

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name("jetstream-sync test CA"))
            .issuer_name(name("jetstream-sync test CA"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_key, self.ca = write("ca", ca_key, ca_cert)

        def leaf(cn: str, sans: List[Any], usage: Any) -> Tuple[Path, Path]:
            key = ec.generate_private_key(ec.SECP256R1())
            cert = (
                x509.CertificateBuilder()
                .subject_name(name(cn))
                .issuer_name(ca_cert.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .add_extension(
                    x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
                )
                .add_extension(
                    x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                    critical=False,
                )
                .sign(ca_key, hashes.SHA256())
            )
            return write(cn, key, cert)

        server_sans: List[Any] = [x509.DNSName(n) for n in server_names]
        server_sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
        self.server_key, self.server = leaf("server", server_sans, ExtendedKeyUsageOID.SERVER_AUTH)
        self.client_key, self.client = leaf(
            "client", [x509.DNSName("client.test")], ExtendedKeyUsageOID.CLIENT_AUTH
        )

    def server_config(self, *, verify: bool = False, handshake_first: bool = False) -> str:
        """A ``tls { ... }`` block for a nats-server config with the server certificate and the
        CA; ``verify`` asks for client certificates, ``handshake_first`` makes TLS come before
        INFO."""
        lines = [
            f'cert_file: "{self.server}"',
            f'key_file: "{self.server_key}"',
            f'ca_file: "{self.ca}"',
            f"verify: {'true' if verify else 'false'}",
            "timeout: 5",
        ]
        if handshake_first:
            lines.append("handshake_first: true")
        return "tls {\n  " + "\n  ".join(lines) + "\n}\n"

    def context(self, *, client_cert: bool = False) -> ssl.SSLContext:
        """A client SSLContext that trusts the CA; with ``client_cert``, it presents the client
        certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        if client_cert:
            ctx.load_cert_chain(str(self.client), str(self.client_key))
        return ctx
