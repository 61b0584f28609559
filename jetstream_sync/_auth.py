"""NKey and JWT (decentralised) authentication: proving who we are by signing a nonce.

A server that accepts nkeys or JWTs sends a random ``nonce`` in its INFO. The client signs it
with the user's ed25519 seed and answers, in CONNECT, with the public key (``nkey``) or the
user JWT (``jwt``), plus the signature (``sig``, base64url without padding).

Where the key material comes from, one of:

* ``nkeys_seed``: a seed string (``SU...``) or the path of a file that holds one;
* ``user_credentials``: the path of a ``.creds`` file, a user JWT block followed by the
  user's seed block, as ``nsc`` writes them;
* ``user_jwt_cb`` with ``signature_cb``: the application hands out the JWT and signs the
  nonce itself (the seed never enters this process).

Signing needs the optional ``nkeys`` package (``pip install jetstream-sync[nkeys]``), imported
only when a seed is actually used. Files are read again at every (re)connect, so credentials
rotated on disk are picked up without a restart.

Seeds are secrets: no repr, log line or exception message made here ever contains one (nor
the content of a credentials file); messages name the option or the file path instead.
"""

from __future__ import annotations

import base64
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import errors

__all__ = ["NKEYS_INSTALL_HINT", "UserAuth", "parse_creds", "sign_nonce"]

NKEYS_INSTALL_HINT = "pip install jetstream-sync[nkeys]"

SignatureCallback = Callable[[str], Union[bytes, str]]
JWTCallback = Callable[[], Union[bytes, str]]
PathOrSeed = Union[str, "os.PathLike[str]"]

# An encoded nkey seed: 'S', the role letter, then base32 (58 characters in all).
_SEED_RE = re.compile(r"S[A-Z2-7]{50,}")
# Something meant as a seed string rather than a path (a damaged seed must not be quoted
# back in a "file does not exist" message).
_SEED_LIKE_RE = re.compile(r"S[A-Za-z0-9]{30,}")
# A JWT: three base64url parts separated by dots.
_JWT_RE = re.compile(r"[A-Za-z0-9_=\-]+\.[A-Za-z0-9_=\-]+\.[A-Za-z0-9_=\-]+")
# The dashed banner lines around a block (-----BEGIN NATS USER JWT----- and the like).
_BANNER_RE = re.compile(r"-{3,}[^\r\n]*-{3,}")
# What may stand between two banners.
_BLOCK_BODY_RE = re.compile(r"[A-Za-z0-9_.=\-]+")


def _import_nkeys() -> Any:
    try:
        import nkeys  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise errors.InvalidArgumentError(
            f"nkey and JWT authentication needs the optional 'nkeys' package: {NKEYS_INSTALL_HINT}"
        ) from None
    return nkeys


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _blocks(text: str) -> List[str]:
    """The bodies of the ``---banner---`` / body / ``---banner---`` blocks of ``text``."""
    lines = [ln.strip() for ln in text.splitlines()]
    found: List[str] = []
    i = 0
    while i + 2 < len(lines):
        if (
            _BANNER_RE.fullmatch(lines[i])
            and _BLOCK_BODY_RE.fullmatch(lines[i + 1])
            and _BANNER_RE.fullmatch(lines[i + 2])
        ):
            found.append(lines[i + 1])
            i += 3
        else:
            i += 1
    return found


def parse_creds(text: str, where: str = "credentials") -> Tuple[str, bytes]:
    """Split the text of a ``.creds`` file into ``(user JWT, seed)``.

    The first block is the JWT, the second the seed. Raises InvalidArgumentError naming
    ``where`` (never quoting the content) when either is missing or malformed.
    """
    blocks = _blocks(text)
    if not blocks:
        raise errors.InvalidUserCredentialsError(
            f"{where}: no user JWT block found (expected -----BEGIN NATS USER JWT----- ...)"
        )
    if not _JWT_RE.fullmatch(blocks[0]):
        raise errors.InvalidUserCredentialsError(f"{where}: the first block is not a JWT")
    if len(blocks) < 2:
        raise errors.InvalidUserCredentialsError(
            f"{where}: no nkey seed block found after the user JWT "
            "(expected -----BEGIN USER NKEY SEED----- ...)"
        )
    if not _SEED_RE.fullmatch(blocks[1]):
        raise errors.InvalidUserCredentialsError(f"{where}: the second block is not an nkey seed")
    return blocks[0], blocks[1].encode("ascii")


def _seed_from_text(text: str, where: str) -> bytes:
    """The seed in a seed file: a bare ``S...`` line, or the seed block of a creds file."""
    for candidate in [*_blocks(text), *(ln.strip() for ln in text.splitlines())]:
        if _SEED_RE.fullmatch(candidate):
            return candidate.encode("ascii")
    raise errors.InvalidUserCredentialsError(f"{where}: no nkey seed found in the file")


def _read_file(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise errors.InvalidUserCredentialsError(f"{what} file {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise errors.InvalidUserCredentialsError(
            f"{what} file {path!r} cannot be read: {reason}"
        ) from None


def _crc16(data: bytes) -> int:
    """CRC-16/XMODEM, the checksum nkeys append to their encoded keys."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def _seed_checksum_ok(seed: bytes) -> bool:
    """Whether ``seed`` decodes and its checksum matches (the nkeys package does not check)."""
    try:
        raw = base64.b32decode(seed + b"=" * (-len(seed) % 8))
    except ValueError:
        return False
    return len(raw) == 36 and _crc16(raw[:-2]) == int.from_bytes(raw[-2:], "little")


def sign_nonce(seed: bytes, nonce: bytes, where: str = "nkey seed") -> Tuple[str, str]:
    """Sign ``nonce`` with ``seed``: ``(public key, signature as base64url without padding)``."""
    nkeys = _import_nkeys()
    try:
        if not _seed_checksum_ok(seed):
            raise ValueError("checksum")
        kp = nkeys.from_seed(bytearray(seed))
    except Exception:
        # nkeys' own errors say little; and nothing about the seed may leak from here.
        raise errors.InvalidUserCredentialsError(f"{where}: not a valid nkey seed") from None
    try:
        public = kp.public_key
        return (
            public.decode("ascii") if isinstance(public, bytes) else str(public),
            _b64url(bytes(kp.sign(nonce))),
        )
    finally:
        try:
            kp.wipe()
        except Exception:  # pragma: no cover - best effort only
            pass


class UserAuth:
    """The nkey/JWT part of the connect options. Its repr shows where keys come from, never
    a key."""

    __slots__ = ("_creds_path", "_jwt_cb", "_kind", "_seed", "_seed_path", "_sig_cb")

    def __init__(
        self,
        *,
        nkeys_seed: Optional[PathOrSeed] = None,
        user_credentials: Optional[PathOrSeed] = None,
        signature_cb: Optional[SignatureCallback] = None,
        user_jwt_cb: Optional[JWTCallback] = None,
    ) -> None:
        self._seed: Optional[bytes] = None
        self._seed_path: Optional[str] = None
        self._creds_path: Optional[str] = None
        self._sig_cb = signature_cb
        self._jwt_cb = user_jwt_cb
        given = [
            name
            for name, value in (
                ("nkeys_seed", nkeys_seed),
                ("user_credentials", user_credentials),
                ("user_jwt_cb", user_jwt_cb),
            )
            if value is not None
        ]
        if len(given) > 1:
            raise errors.InvalidArgumentError(
                f"give only one of {', '.join(given)}: they are different ways to authenticate"
            )
        for name, cb in (("signature_cb", signature_cb), ("user_jwt_cb", user_jwt_cb)):
            if cb is not None and not callable(cb):
                raise errors.InvalidArgumentError(
                    f"{name} must be callable, got {type(cb).__name__}"
                )
        if (signature_cb is None) != (user_jwt_cb is None):
            raise errors.InvalidArgumentError(
                "user_jwt_cb and signature_cb go together: give both or neither"
            )
        if nkeys_seed is not None:
            self._kind = "nkey"
            if (
                isinstance(nkeys_seed, str)
                and _SEED_LIKE_RE.fullmatch(nkeys_seed.strip())
                and not os.path.exists(nkeys_seed)
            ):
                self._seed = nkeys_seed.strip().encode("ascii")
            else:
                self._seed_path = _check_path(nkeys_seed, "nkeys_seed")
        elif user_credentials is not None:
            self._kind = "creds"
            self._creds_path = _check_path(user_credentials, "user_credentials")
        elif user_jwt_cb is not None:
            self._kind = "callbacks"
        else:
            raise errors.InvalidArgumentError("UserAuth needs a seed, a creds file or callbacks")
        if self._kind != "callbacks":
            # Fail now, at connect(), on a missing package, a missing file or a bad seed.
            self.connect_fields("validate")

    @classmethod
    def from_options(
        cls,
        nkeys_seed: Optional[PathOrSeed] = None,
        user_credentials: Optional[PathOrSeed] = None,
        signature_cb: Optional[SignatureCallback] = None,
        user_jwt_cb: Optional[JWTCallback] = None,
    ) -> Optional[UserAuth]:
        """A UserAuth for these connect options, or None when none of them is given."""
        if all(v is None for v in (nkeys_seed, user_credentials, signature_cb, user_jwt_cb)):
            return None
        return cls(
            nkeys_seed=nkeys_seed,
            user_credentials=user_credentials,
            signature_cb=signature_cb,
            user_jwt_cb=user_jwt_cb,
        )

    def _material(self) -> Tuple[Optional[str], bytes, str]:
        """``(user JWT or None, seed, where)`` for the seed-holding kinds."""
        if self._creds_path is not None:
            where = f"user_credentials file {self._creds_path!r}"
            jwt, seed = parse_creds(_read_file(self._creds_path, "user_credentials"), where)
            return jwt, seed, where
        if self._seed_path is not None:
            where = f"nkeys_seed file {self._seed_path!r}"
            return None, _seed_from_text(_read_file(self._seed_path, "nkeys_seed"), where), where
        assert self._seed is not None
        return None, self._seed, "nkeys_seed"

    def connect_fields(self, nonce: Optional[str]) -> Dict[str, str]:
        """The CONNECT fields (``nkey`` or ``jwt``, and ``sig`` when there is a nonce)."""
        fields: Dict[str, str] = {}
        nonce_bytes = nonce.encode("utf-8") if nonce is not None else b""
        if self._kind == "callbacks":
            assert self._jwt_cb is not None and self._sig_cb is not None
            jwt = _call(self._jwt_cb, "user_jwt_cb")
            fields["jwt"] = jwt.decode("ascii") if isinstance(jwt, bytes) else str(jwt)
            if nonce is not None:
                sig = _call(self._sig_cb, "signature_cb", nonce)
                fields["sig"] = _encode_sig(sig)
            return fields
        jwt_text, seed, where = self._material()
        public, sig = sign_nonce(seed, nonce_bytes, where)
        if jwt_text is not None:
            fields["jwt"] = jwt_text
        else:
            fields["nkey"] = public
        if nonce is not None:
            fields["sig"] = sig
        return fields

    def __repr__(self) -> str:
        if self._creds_path is not None:
            source = f"user_credentials={self._creds_path!r}"
        elif self._seed_path is not None:
            source = f"nkeys_seed={self._seed_path!r}"
        elif self._kind == "nkey":
            source = "nkeys_seed=<hidden>"
        else:
            source = "user_jwt_cb, signature_cb"
        return f"<UserAuth {source}>"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("UserAuth holds secrets and is not picklable")


def _check_path(value: Any, what: str) -> str:
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise errors.InvalidArgumentError(
            f"{what} must be a str or a path, got {type(value).__name__}"
        )
    path = os.fspath(value)
    if not isinstance(path, str) or not path.strip():
        raise errors.InvalidArgumentError(f"{what} must be a non-empty path or seed")
    return path


def _call(cb: Callable[..., Any], name: str, *args: Any) -> Any:
    try:
        value = cb(*args)
    except Exception as exc:
        raise errors.AuthorizationError(f"{name} raised {type(exc).__name__}") from exc
    if not isinstance(value, (bytes, str)):
        raise errors.AuthorizationError(
            f"{name} must return bytes or str, got {type(value).__name__}"
        )
    return value


def _encode_sig(sig: Union[bytes, str]) -> str:
    """A signature from ``signature_cb``: raw 64 bytes are encoded here; anything else is
    taken as already encoded (nats-py's callbacks return base64 text)."""
    if isinstance(sig, bytes):
        return _b64url(sig) if len(sig) == 64 else sig.decode("ascii").strip()
    return sig.strip()
