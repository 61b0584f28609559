"""Nkey/JWT authentication pieces without a server: signing, creds parsing, secrecy."""

from __future__ import annotations

import base64
import os
import pickle
import sys
from pathlib import Path
from typing import Tuple

import pytest

import jetstream_sync as nats
from jetstream_sync import _auth

nkeys = pytest.importorskip("nkeys")

JWT = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQUJDIn0.c2lnbmF0dXJl"


def _keypair() -> Tuple[str, str]:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER).decode()
    public = nkeys.from_seed(bytearray(seed.encode())).public_key.decode()
    return seed, public


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _creds(jwt: str, seed: str) -> str:
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


def _verifies(public: str, nonce: bytes, sig: str) -> bool:
    # The public key alone (no seed) checks the signature: decode the U... key to raw bytes.
    import nacl.signing

    raw = base64.b32decode(public + "=" * (-len(public) % 8))[1:-2]
    try:
        nacl.signing.VerifyKey(raw).verify(nonce, _unb64url(sig))
    except Exception:
        return False
    return True


# --- signing ------------------------------------------------------------------------------


def test_signature_verifies_with_public_key() -> None:
    seed, public = _keypair()
    got_public, sig = _auth.sign_nonce(seed.encode(), b"a-nonce-from-INFO")
    assert got_public == public
    assert "=" not in sig and "+" not in sig and "/" not in sig  # base64url, no padding
    assert len(_unb64url(sig)) == 64
    assert _verifies(public, b"a-nonce-from-INFO", sig)
    assert not _verifies(public, b"another nonce", sig)


def test_known_seed_gives_deterministic_signature() -> None:
    # ed25519 is deterministic: the same seed and nonce always give the same signature.
    seed = nkeys.encode_seed(bytes(range(32)), nkeys.PREFIX_BYTE_USER).decode()
    a = _auth.sign_nonce(seed.encode(), b"nonce")
    b = _auth.sign_nonce(seed.encode(), b"nonce")
    assert a == b and a[0].startswith("U")


def test_nkey_connect_fields_from_string_and_file(tmp_path: Path) -> None:
    seed, public = _keypair()
    for source in (seed, str(tmp_path / "user.nk"), tmp_path / "user.nk"):
        (tmp_path / "user.nk").write_text(seed + "\n")
        fields = _auth.UserAuth(nkeys_seed=source).connect_fields("n0nce")
        assert set(fields) == {"nkey", "sig"} and fields["nkey"] == public
        assert _verifies(public, b"n0nce", fields["sig"])
    # No nonce in INFO: the key is still sent, without a signature.
    assert _auth.UserAuth(nkeys_seed=seed).connect_fields(None) == {"nkey": public}


def test_creds_connect_fields_send_jwt_not_nkey(tmp_path: Path) -> None:
    seed, public = _keypair()
    creds = tmp_path / "user.creds"
    creds.write_text(_creds(JWT, seed))
    fields = _auth.UserAuth(user_credentials=str(creds)).connect_fields("xyz")
    assert set(fields) == {"jwt", "sig"} and fields["jwt"] == JWT
    assert _verifies(public, b"xyz", fields["sig"])


def test_creds_reread_on_each_connect(tmp_path: Path) -> None:
    seed1, pub1 = _keypair()
    seed2, pub2 = _keypair()
    creds = tmp_path / "user.creds"
    creds.write_text(_creds(JWT, seed1))
    auth = _auth.UserAuth(user_credentials=creds)
    assert _verifies(pub1, b"n", auth.connect_fields("n")["sig"])
    creds.write_text(_creds(JWT, seed2))  # rotated on disk
    assert _verifies(pub2, b"n", auth.connect_fields("n")["sig"])


def test_callbacks() -> None:
    seed, public = _keypair()
    kp = nkeys.from_seed(bytearray(seed.encode()))
    raw = _auth.UserAuth(
        user_jwt_cb=lambda: JWT.encode(), signature_cb=lambda n: kp.sign(n.encode())
    )
    fields = raw.connect_fields("abc")
    assert fields["jwt"] == JWT and _verifies(public, b"abc", fields["sig"])
    # nats-py style: the callback returns the signature already base64-encoded.
    encoded = _auth.UserAuth(
        user_jwt_cb=lambda: JWT,
        signature_cb=lambda n: base64.b64encode(kp.sign(n.encode())),
    )
    assert _unb64url_or_std(encoded.connect_fields("abc")["sig"]) == kp.sign(b"abc")

    def broken(_nonce: str) -> bytes:
        raise RuntimeError("boom " + seed)

    with pytest.raises(nats.AuthorizationError, match="signature_cb raised RuntimeError") as info:
        _auth.UserAuth(user_jwt_cb=lambda: JWT, signature_cb=broken).connect_fields("n")
    assert seed not in str(info.value)


def _unb64url_or_std(text: str) -> bytes:
    return base64.b64decode(text)


# --- creds parsing ------------------------------------------------------------------------


def test_parse_good_creds_with_crlf_and_padding() -> None:
    seed, _ = _keypair()
    jwt, got = _auth.parse_creds(_creds(JWT, seed).replace("\n", "\r\n"))
    assert jwt == JWT and got == seed.encode()
    jwt, got = _auth.parse_creds("\n   " + _creds(JWT, seed).replace("\n", "\n   "))
    assert jwt == JWT and got == seed.encode()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "no user JWT block"),
        ("this is not a creds file at all\n\x00\x01", "no user JWT block"),
        (
            "-----BEGIN NATS USER JWT-----\n" + JWT + "\n------END NATS USER JWT------\n",
            "no nkey seed",
        ),
        ("-----BEGIN X-----\nnotajwt\n-----END X-----\n", "first block is not a JWT"),
        (
            "-----BEGIN NATS USER JWT-----\n" + JWT + "\n------END NATS USER JWT------\n"
            "-----BEGIN USER NKEY SEED-----\nSUNOTBASE32!!\n------END USER NKEY SEED------\n",
            "no nkey seed block",
        ),
        (
            "-----BEGIN NATS USER JWT-----\n" + JWT + "\n------END NATS USER JWT------\n"
            "-----BEGIN USER NKEY SEED-----\n" + JWT + "\n------END USER NKEY SEED------\n",
            "second block is not an nkey seed",
        ),
    ],
)
def test_parse_bad_creds(text: str, match: str) -> None:
    with pytest.raises(nats.InvalidArgumentError, match=match):
        _auth.parse_creds(text, "user_credentials file 'x.creds'")


def test_bad_creds_file_errors_name_path_not_content(tmp_path: Path) -> None:
    seed, _ = _keypair()
    missing = tmp_path / "nope.creds"
    with pytest.raises(nats.InvalidArgumentError, match="does not exist") as info:
        _auth.UserAuth(user_credentials=missing)
    assert str(missing) in str(info.value)
    half = tmp_path / "half.creds"
    half.write_text(_creds(JWT, seed).split("***")[0])  # JWT only
    with pytest.raises(nats.InvalidArgumentError, match="no nkey seed") as info:
        _auth.UserAuth(user_credentials=half)
    assert str(half) in str(info.value) and JWT not in str(info.value)
    # A well-formed but invalid seed (bad checksum) is refused without being quoted.
    bad_seed = seed[:-4] + ("AAAA" if not seed.endswith("AAAA") else "BBBB")
    damaged = tmp_path / "damaged.creds"
    damaged.write_text(_creds(JWT, bad_seed))
    with pytest.raises(nats.InvalidArgumentError, match="not a valid nkey seed") as info:
        _auth.UserAuth(user_credentials=damaged)
    assert bad_seed not in str(info.value) and info.value.__cause__ is None
    binary = tmp_path / "binary.creds"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(nats.InvalidArgumentError, match=r"cannot be read|no user JWT"):
        _auth.UserAuth(user_credentials=binary)


def test_bad_seed_arguments() -> None:
    seed, _ = _keypair()
    damaged = seed[:10] + "A" * (len(seed) - 10)
    with pytest.raises(nats.InvalidArgumentError, match="not a valid nkey seed") as info:
        _auth.UserAuth(nkeys_seed=damaged)
    assert damaged not in str(info.value)
    with pytest.raises(nats.InvalidArgumentError, match="does not exist"):
        _auth.UserAuth(nkeys_seed="/no/such/dir/user.nk")
    with pytest.raises(nats.InvalidArgumentError, match="must be a str or a path"):
        _auth.UserAuth(nkeys_seed=seed.encode())  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="only one of"):
        _auth.UserAuth(nkeys_seed=seed, user_credentials="x.creds")
    with pytest.raises(nats.InvalidArgumentError, match="go together"):
        _auth.UserAuth(user_jwt_cb=lambda: JWT)
    with pytest.raises(nats.InvalidArgumentError, match="callable"):
        _auth.UserAuth(user_jwt_cb=JWT, signature_cb=lambda n: b"")  # type: ignore[arg-type]
    assert _auth.UserAuth.from_options() is None


def test_connect_validates_before_dialing(tmp_path: Path) -> None:
    # Port 1: nothing listens, so only argument checking can produce these errors.
    with pytest.raises(nats.InvalidArgumentError, match="does not exist"):
        nats.connect("nats://127.0.0.1:1", user_credentials=str(tmp_path / "missing.creds"))
    with pytest.raises(nats.InvalidArgumentError, match="go together"):
        nats.connect("nats://127.0.0.1:1", signature_cb=lambda n: b"")


def test_missing_nkeys_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    seed, _ = _keypair()
    monkeypatch.setitem(sys.modules, "nkeys", None)  # import nkeys -> ImportError
    with pytest.raises(nats.InvalidArgumentError, match=r"pip install jetstream-sync\[nkeys\]"):
        _auth.UserAuth(nkeys_seed=seed)


# --- secrecy ------------------------------------------------------------------------------


def test_repr_and_pickle_hide_the_seed(tmp_path: Path) -> None:
    seed, _ = _keypair()
    creds = tmp_path / "u.creds"
    creds.write_text(_creds(JWT, seed))
    for auth in (
        _auth.UserAuth(nkeys_seed=seed),
        _auth.UserAuth(user_credentials=creds),
        _auth.UserAuth(user_jwt_cb=lambda: JWT, signature_cb=lambda n: b""),
    ):
        for text in (repr(auth), str(auth), f"{auth}", repr([auth])):
            assert seed not in text and JWT not in text, text
        with pytest.raises(TypeError, match="not picklable"):
            pickle.dumps(auth)
        assert not hasattr(auth, "__dict__")  # nothing in vars() either
    assert "<hidden>" in repr(_auth.UserAuth(nkeys_seed=seed))
    assert str(creds) in repr(_auth.UserAuth(user_credentials=creds))
