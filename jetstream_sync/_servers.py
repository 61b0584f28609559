"""The server pool and the reconnect policy: parsed server URLs (credentials kept out of
every repr and message), what the client remembers about each server between connects,
servers learnt from INFO, and which server to try next and when."""

from __future__ import annotations

import random
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional

from . import errors

__all__ = ["Server", "ServerPool", "parse_url", "redact"]


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


class ServerPool:
    """The servers a client may connect to, and the reconnect policy over them.

    Each server gets ``max_reconnect_attempts`` tries in a row (-1: no limit; a successful
    connect resets its count); between two tries of the same server at least
    ``reconnect_wait`` passes, plus up to ``jitter``. Servers in lame duck mode come last.
    """

    def __init__(
        self,
        servers: List[Server],
        randomize: bool,
        max_reconnect_attempts: int,
        reconnect_wait: float,
        jitter: float,
    ) -> None:
        self.servers = servers
        if randomize and len(servers) > 1:
            random.shuffle(self.servers)
        self.max_reconnect_attempts = max_reconnect_attempts
        self.reconnect_wait = reconnect_wait
        self.jitter = jitter
        self._lock = threading.Lock()

    def learn(self, info: Dict[str, Any], server: Server) -> None:
        """Add the servers an INFO's ``connect_urls`` names that the pool lacks."""
        with self._lock:
            known = {(s.host, s.port) for s in self.servers}
            urls = info.get("connect_urls")
            for url in urls if isinstance(urls, list) else ():
                if not isinstance(url, str):  # a malformed INFO: ignore what is not a URL
                    continue
                try:
                    new = parse_url(
                        url if "://" in url else f"{server.scheme}://{url}", implicit=True
                    )
                except errors.InvalidArgumentError:
                    continue
                if (new.host, new.port) not in known:
                    known.add((new.host, new.port))
                    self.servers.append(new)

    def next_server(self) -> Optional[Server]:
        """The next server with attempts left; it moves to the back of the pool. Servers in
        lame duck mode come last. None when every server has used its attempts."""
        now = time.monotonic()
        with self._lock:
            limit = self.max_reconnect_attempts
            for lame_ok in (False, True):
                for i, server in enumerate(self.servers):
                    if (limit < 0 or server.reconnects < limit) and (
                        lame_ok or server.lame_until <= now
                    ):
                        self.servers.append(self.servers.pop(i))
                        return server
        return None

    def wait_turn(self, server: Server, stop: threading.Event) -> bool:
        """Wait until ``server`` may be tried again (False: ``stop`` was set meanwhile),
        then count the attempt."""
        delay = server.last_attempt + self.reconnect_wait - time.monotonic()
        if delay > 0:
            delay += random.uniform(0, self.jitter)
            if stop.wait(delay):
                return False
        server.last_attempt = time.monotonic()
        server.reconnects += 1
        return True

    def others_than(self, server: Server) -> bool:
        """Whether the pool knows a server besides ``server``."""
        return any(s is not server for s in self.servers)
