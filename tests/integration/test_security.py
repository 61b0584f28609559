"""Security against a real nats-server: TLS with a test-made CA, mutual TLS, nkeys, JWT
credentials, permission violations, and secrets kept out of messages, reprs and logs.

test_connection.py already covers plain server TLS (openssl-made certs), user/password and
token logins, and permission errors reaching error_cb; this file covers the rest.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import logging
import os
import ssl
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until
from jetstream_sync.testpki import PKI

ServerFactory = Callable[..., NATSServer]


def _errors_chain(exc: BaseException) -> Iterator[BaseException]:
    seen: List[int] = []
    cur: Any = exc
    while cur is not None and id(cur) not in seen:
        seen.append(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _all_text(exc: BaseException) -> str:
    return " ".join(f"{e!s} {e!r}" for e in _errors_chain(exc))


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    if importlib.util.find_spec("cryptography") is None:
        pytest.skip("the test PKI needs the cryptography package")
    return PKI(tmp_path)


def _round_trip(nc: nats.Client, subject: str = "sec.echo") -> None:
    sub = nc.subscribe(subject)
    nc.publish(subject, b"over tls")
    assert sub.next_msg(timeout=5).data == b"over tls"
    sub.unsubscribe()


# --- TLS ------------------------------------------------------------------------------------


def test_tls_verified_against_test_ca(server_factory: ServerFactory, pki: PKI) -> None:
    srv = server_factory(jetstream=False, config=pki.server_config())
    with nats.connect(f"tls://127.0.0.1:{srv.port}", tls=pki.context()) as nc:
        _round_trip(nc)
        assert nc.is_connected
    # The same server under its DNS name: tls_hostname picks the name checked on the cert.
    with nats.connect(srv.url, tls=pki.context(), tls_hostname="nats.test") as nc:
        _round_trip(nc)
    # A name the certificate does not carry is refused by hostname verification.
    with pytest.raises(nats.SecureConnectionRequiredError, match="certificate verif") as info:
        nats.connect(srv.url, tls=pki.context(), tls_hostname="other.test")
    assert "other.test" in str(info.value) or "mismatch" in str(info.value).lower()
    # A client that does not trust the CA: a clear verification error, not a timeout.
    other = ssl.create_default_context()  # system roots only
    with pytest.raises(nats.SecureConnectionRequiredError, match="certificate verif"):
        nats.connect(srv.url, tls=other, connect_timeout=5)


def test_mutual_tls(server_factory: ServerFactory, pki: PKI) -> None:
    srv = server_factory(jetstream=False, config=pki.server_config(verify=True))
    with nats.connect(srv.url, tls=pki.context(client_cert=True)) as nc:
        _round_trip(nc)
    # Without a client certificate the server refuses the handshake: a TLS error that says
    # so, raised at once (SecureConnectionRequiredError is not retried on other servers).
    with pytest.raises(nats.SecureConnectionRequiredError) as info:
        nats.connect(srv.url, tls=pki.context(), connect_timeout=5, allow_reconnect=False)
    assert "TLS" in str(info.value) and "certificate" in str(info.value).lower()


def test_tls_handshake_first(server_factory: ServerFactory, pki: PKI) -> None:
    srv = server_factory(jetstream=False, config=pki.server_config(handshake_first=True))
    url = f"tls://127.0.0.1:{srv.port}"
    with nats.connect(url, tls=pki.context(), tls_handshake_first=True) as nc:
        _round_trip(nc)
        assert nc.server_info.get("tls_required")
        srv.restart()  # the reconnect does TLS first again
        wait_until(lambda: nc.is_connected and nc.stats["reconnects"] >= 1, 20, "reconnect")
        _round_trip(nc)
    # A client that waits for INFO in the clear gets none: an error, not a hang.
    with pytest.raises(nats.NATSError):
        nats.connect(url, tls=pki.context(), connect_timeout=2, allow_reconnect=False)
    with pytest.raises(nats.InvalidArgumentError, match="tls_handshake_first must be a bool"):
        nats.connect(url, tls_handshake_first="yes")


def test_tls_required_server_and_plain_client(server_factory: ServerFactory, pki: PKI) -> None:
    srv = server_factory(jetstream=False, config=pki.server_config())
    # Like nats.go, a nats:// client upgrades when the server requires TLS, with a default
    # (verifying) context: a server certificate the system does not trust is a clear error.
    with pytest.raises(nats.SecureConnectionRequiredError) as info:
        nats.connect(srv.url, connect_timeout=5)
    assert "TLS" in str(info.value) and "certificate verif" in str(info.value)
    # A client that wants TLS from a server without it is refused before any credentials go.
    plain = server_factory(jetstream=False)
    for kwargs in ({"tls": pki.context()}, {}):
        url = plain.url if kwargs else f"tls://127.0.0.1:{plain.port}"
        with pytest.raises(nats.SecureConnectionRequiredError, match="does not offer it"):
            nats.connect(url, connect_timeout=5, **kwargs)


# --- nkeys and JWTs ---------------------------------------------------------------------------


def _nkeys() -> Any:
    return pytest.importorskip("nkeys")


def _keypair(prefix_name: str = "PREFIX_BYTE_USER") -> Tuple[str, str]:
    """A new ``(seed, public key)``, as strings."""
    nk = _nkeys()
    seed = nk.encode_seed(os.urandom(32), getattr(nk, prefix_name)).decode()
    return seed, nk.from_seed(bytearray(seed.encode())).public_key.decode()


def test_nkey_user(server_factory: ServerFactory, tmp_path: Path) -> None:
    seed, public = _keypair()
    srv = server_factory(
        jetstream=False, config=f"authorization {{ users = [ {{ nkey: {public} }} ] }}"
    )
    with nats.connect(srv.url, nkeys_seed=seed) as nc:
        _round_trip(nc)
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed + "\n")
    with nats.connect(srv.url, nkeys_seed=str(seed_file)) as nc:
        _round_trip(nc)
    wrong, _ = _keypair()
    with pytest.raises(nats.AuthorizationError, match="Authorization Violation") as info:
        nats.connect(srv.url, nkeys_seed=wrong)
    assert wrong not in _all_text(info.value) and seed not in _all_text(info.value)
    with pytest.raises(nats.AuthorizationError):
        nats.connect(srv.url)  # no credentials at all


def test_nkey_user_reconnects_with_a_fresh_signature(server_factory: ServerFactory) -> None:
    seed, public = _keypair()
    srv = server_factory(
        jetstream=False, config=f"authorization {{ users = [ {{ nkey: {public} }} ] }}"
    )
    reconnected = threading.Event()
    with nats.connect(
        srv.url,
        nkeys_seed=seed,
        reconnect_time_wait=0.05,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected.set,
    ) as nc:
        _round_trip(nc)
        srv.restart()  # a new server process: a new nonce to sign
        assert reconnected.wait(20)
        _round_trip(nc)


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _jwt(claims: Dict[str, Any], issuer_seed: str) -> str:
    """A NATS (v2) JWT: header and claims in base64url, signed by the issuer's nkey."""
    nk = _nkeys()
    header = _b64url(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing = f"{header}.{body}".encode()
    kp = nk.from_seed(bytearray(issuer_seed.encode()))
    return f"{header}.{body}.{_b64url(kp.sign(signing))}"


def _claims(iss: str, sub: str, name: str, nats_claims: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "jti": _b64url(os.urandom(24)).upper(),
        "iat": int(time.time()) - 10,
        "iss": iss,
        "sub": sub,
        "name": name,
        "nats": {**nats_claims, "version": 2},
    }


class Operator:
    """An operator, one account and a way to mint that account's users, as nsc would."""

    def __init__(self) -> None:
        self.op_seed, self.op_pub = _keypair("PREFIX_BYTE_OPERATOR")
        self.acc_seed, self.acc_pub = _keypair("PREFIX_BYTE_ACCOUNT")
        self.op_jwt = _jwt(
            _claims(self.op_pub, self.op_pub, "test-op", {"type": "operator"}), self.op_seed
        )
        limits = {
            "subs": -1,
            "data": -1,
            "payload": -1,
            "imports": -1,
            "exports": -1,
            "wildcards": True,
            "conn": -1,
            "leaf": -1,
        }
        self.acc_jwt = _jwt(
            _claims(self.op_pub, self.acc_pub, "test-acc", {"type": "account", "limits": limits}),
            self.op_seed,
        )

    def server_config(self) -> str:
        return (
            f"operator: {self.op_jwt}\n"
            "resolver: MEMORY\n"
            f"resolver_preload: {{\n  {self.acc_pub}: {self.acc_jwt}\n}}\n"
        )

    def user_creds(self, path: Path, signer_seed: str = "") -> Tuple[str, str]:
        """Write a .creds file for a new user; returns ``(user seed, user JWT)``."""
        seed, public = _keypair()
        nats_claims = {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1}
        jwt = _jwt(
            _claims(self.acc_pub, public, "test-user", nats_claims), signer_seed or self.acc_seed
        )
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{jwt}\n"
            "------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{seed}\n"
            "------END USER NKEY SEED------\n\n"
            "*************************************************************\n"
        )
        return seed, jwt


def test_jwt_credentials_file(server_factory: ServerFactory, tmp_path: Path) -> None:
    op = Operator()
    srv = server_factory(jetstream=False, config=op.server_config())
    creds = tmp_path / "user.creds"
    seed, jwt = op.user_creds(creds)
    with nats.connect(srv.url, user_credentials=str(creds)) as nc:
        _round_trip(nc)
        assert seed not in repr(nc)
    # The same JWT and seed through the callbacks (the seed stays with the application).
    kp = _nkeys().from_seed(bytearray(seed.encode()))
    with nats.connect(
        srv.url,
        user_jwt_cb=lambda: jwt,
        signature_cb=lambda nonce: kp.sign(nonce.encode()),
    ) as nc:
        _round_trip(nc)
    # A user signed by a key the account does not know is refused.
    forged = tmp_path / "forged.creds"
    rogue_seed, _ = _keypair("PREFIX_BYTE_ACCOUNT")
    op.user_creds(forged, signer_seed=rogue_seed)
    with pytest.raises(nats.AuthorizationError):
        nats.connect(srv.url, user_credentials=forged)
    # A creds file whose seed is not the JWT's subject: the signature does not verify.
    mismatched = tmp_path / "mismatched.creds"
    other_seed, _ = _keypair()
    mismatched.write_text(creds.read_text().replace(seed, other_seed))
    with pytest.raises(nats.AuthorizationError) as info:
        nats.connect(srv.url, user_credentials=mismatched)
    assert other_seed not in _all_text(info.value)


# --- permissions ----------------------------------------------------------------------------

PERMISSIONS_CONFIG = """
authorization { users = [
  { user: carol, password: pw,
    permissions: { publish: { deny: ["secret.>"] }, subscribe: { deny: ["hidden.>"] } } }
] }
"""


def test_denied_subscription_reported_by_the_subscription_itself(
    server_factory: ServerFactory,
) -> None:
    srv = server_factory(jetstream=False, config=PERMISSIONS_CONFIG)
    errs: List[Exception] = []
    disconnected = threading.Event()
    with nats.connect(
        srv.url,
        user="carol",
        password="pw",
        error_cb=errs.append,
        disconnected_cb=disconnected.set,
    ) as nc:
        denied = nc.subscribe("hidden.stuff")
        queued = nc.subscribe("hidden.>", queue="workers")
        got: List[nats.Msg] = []
        with_cb = nc.subscribe("hidden.cb", cb=got.append)
        nc.flush(timeout=5)  # the server's -ERRs come before this PONG
        with pytest.raises(nats.PermissionsError, match=r"hidden\.stuff"):
            denied.next_msg(timeout=5)
        with pytest.raises(nats.PermissionsError, match=r"hidden\.>.*workers"):
            queued.next_msg(timeout=5)
        assert not denied.is_valid and not queued.is_valid and not with_cb.is_valid
        # Iterating a denied subscription ends with the error too, rather than hanging.
        with pytest.raises(nats.PermissionsError):
            next(iter(denied))
        wait_until(lambda: len([e for e in errs if isinstance(e, nats.PermissionsError)]) >= 3)
        # A publish the account may not make: error_cb, and nothing else breaks.
        nc.publish("secret.plans", b"x")
        wait_until(lambda: any("secret.plans" in str(e) for e in errs), 10, "publish denial")
        # A request to a denied subject fails with that error, not after its whole timeout;
        # a request in flight elsewhere is untouched.
        nc.subscribe("svc.slow", cb=lambda m: m.respond(b"late"))
        with pytest.raises(nats.PermissionsError, match=r"secret\.ask") as denial:
            nc.request("secret.ask", b"?", timeout=30)
        assert "Publish" in str(denial.value)
        assert nc.request("svc.slow", b"?", timeout=5).data == b"late"
        # The connection is fine: subscriptions and request/reply still work.
        nc.subscribe("svc.echo", cb=lambda m: m.respond(b"re:" + m.data))
        assert nc.request("svc.echo", b"ping", timeout=5).data == b"re:ping"
        _round_trip(nc, "open.topic")
        assert nc.is_connected and not disconnected.is_set()
        assert got == []
        # An allowed subscription on a similar subject is unaffected by the denials.
        ok = nc.subscribe("hidden_not.stuff")
        nc.publish("hidden_not.stuff", b"fine")
        assert ok.next_msg(timeout=5).data == b"fine" and ok.is_valid


# --- secrets ------------------------------------------------------------------------------------


def test_secrets_never_in_messages_reprs_or_logs(
    server_factory: ServerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seed, public = _keypair()
    password, token = "pa55-Wörd-xyzzy", "t0ken-plugh-42"
    srv = server_factory(
        jetstream=False,
        config=f"""authorization {{ users = [
            {{ user: dave, password: "right-password" }},
            {{ nkey: {public} }}
        ] }}""",
    )
    wrong_seed, _ = _keypair()
    creds = tmp_path / "u.creds"
    Operator().user_creds(creds)  # valid shape, wrong server: refused
    creds_seed = next(
        ln for ln in creds.read_text().splitlines() if ln.startswith("SU") and len(ln) > 50
    )
    secrets = [password, token, wrong_seed, seed, creds_seed]
    attempts: List[Dict[str, Any]] = [
        {"user": "dave", "password": password},
        {"token": token},
        {"nkeys_seed": wrong_seed},
        {"user_credentials": str(creds)},
    ]
    texts: List[str] = []
    for kwargs in attempts:
        client = nats.Client()
        with pytest.raises(nats.AuthorizationError) as info:
            client.connect(srv.url, connect_timeout=5, **kwargs)
        texts += [_all_text(info.value), repr(client)]
    for url in (f"nats://dave:{password}@127.0.0.1:{srv.port}", f"nats://{token}@127.0.0.1:1"):
        with pytest.raises(nats.NATSError) as info:
            nats.connect(url, connect_timeout=2, allow_reconnect=False)
        texts.append(_all_text(info.value))
    # A bad argument next to secrets names the argument, not the secret.
    with pytest.raises(nats.InvalidArgumentError) as info:
        nats.connect(srv.url, nkeys_seed=seed, user_credentials=str(creds))
    texts.append(_all_text(info.value))
    # A working nkey connection, logging at DEBUG all along.
    with nats.connect(srv.url, nkeys_seed=seed) as nc:
        _round_trip(nc)
        texts += [repr(nc), str(nc), repr(nc.servers)]
    texts += [r.getMessage() for r in caplog.records]
    texts += [str(r.exc_info) for r in caplog.records if r.exc_info]
    blob = "\n".join(texts)
    for secret in secrets:
        assert secret not in blob, f"a secret leaked: {secret[:3]}..."
    assert "Authorization Violation" in blob  # the texts checked are the real ones
