"""The server pool's entries: a parsed server URL (credentials kept out of every repr and
message) and what the client remembers about that server between connects."""

from __future__ import annotations

import urllib.parse
from typing import Optional

from . import errors

__all__ = ["Server", "parse_url", "redact"]


class Server:
    """One entry of the server pool. Its repr never shows credentials."""

    __slots__ = (
        "host",
        "implicit",
        "lame_until",
        "last_attempt",
        "password",
        "port",
        "reconnects",
        "scheme",
        "token",
        "user",
    )

    def __init__(
        self,
        scheme: str,
        host: str,
        port: int,
        user: Optional[str] = None,
        password: Optional[str] = None,
        token: Optional[str] = None,
        implicit: bool = False,
    ) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.token = token
        self.implicit = implicit
        self.reconnects = 0
        self.last_attempt = -1e9
        self.lame_until = 0.0  # monotonic time until which reconnects prefer other servers

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __repr__(self) -> str:
        return f"<server {self.url}>"


def parse_url(url: str, implicit: bool = False) -> Server:
    if not isinstance(url, str) or not url.strip():
        raise errors.InvalidArgumentError(f"server URL must be a non-empty str, got {url!r}")
    text = url.strip()
    if "://" not in text:
        text = "nats://" + text
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port or 4222
    except ValueError as exc:
        raise errors.InvalidArgumentError(f"bad server URL {redact(url)!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("nats", "tls"):
        raise errors.InvalidArgumentError(
            f"bad server URL {redact(url)!r}: scheme must be nats:// or tls://"
        )
    user = urllib.parse.unquote(parts.username) if parts.username else None
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    token = None
    if user is not None and password is None:
        token, user = user, None  # nats://TOKEN@host carries a token
    return Server(scheme, parts.hostname or "127.0.0.1", port, user, password, token, implicit)


def redact(url: str) -> str:
    """The URL without any user info, for messages."""
    if "@" in url:
        scheme, sep, rest = url.rpartition("://")
        return (scheme + sep if sep else "") + "***@" + rest.rpartition("@")[2]
    return url
