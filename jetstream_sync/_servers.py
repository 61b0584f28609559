"""The server pool and the reconnect policy: parsed server URLs (credentials kept out of
every repr and message), what the client remembers about each server between connects,
servers learnt from INFO, and which server to try next and when."""

from __future__ import annotations

import functools
import random
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import errors

__all__ = [
    "PoolServer",
    "ReconnectHandler",
    "Server",
    "ServerPool",
    "ServerVersion",
    "parse_url",
    "redact",
]


@dataclass(frozen=True)
class PoolServer:
    """What ``reconnect_to_server_handler`` sees of one server (nats-py's ``Server``):
    ``uri`` (a ``urllib.parse.ParseResult``, no credentials) and its failed ``reconnects``
    in a row."""

    uri: urllib.parse.ParseResult
    reconnects: int = 0


class ServerURL(str):
    """A server's URL (no credentials): a ``str`` as before, with the attributes of the
    ``urllib.parse.ParseResult`` nats-py gives for ``connected_url`` and ``servers``
    (``scheme``, ``hostname``, ``port``, ``netloc``, ``geturl()``), so code from either reads it."""

    __slots__ = ()

    def _parts(self) -> urllib.parse.SplitResult:
        return urllib.parse.urlsplit(str(self))

    @property
    def scheme(self) -> str:
        """The URL's scheme (``nats`` or ``tls``)."""
        return self._parts().scheme

    @property
    def hostname(self) -> Optional[str]:
        """The host name or address."""
        return self._parts().hostname

    @property
    def port(self) -> Optional[int]:
        """The port, or None when the URL has none."""
        return self._parts().port

    @property
    def netloc(self) -> str:
        """The network location: host and port."""
        return self._parts().netloc

    @property
    def path(self) -> str:
        """The URL's path (usually empty)."""
        return self._parts().path

    @property
    def username(self) -> Optional[str]:
        """Always None: the URL never carries credentials."""
        return None  # credentials are never in it

    @property
    def password(self) -> Optional[str]:
        """Always None: the URL never carries credentials."""
        return None

    def geturl(self) -> str:
        """The URL as a plain str."""
        return str(self)


# nats-py 2.x: (eligible servers, the last INFO) -> (the server to dial or None, seconds to
# wait first). Called on the network thread before each reconnect attempt: it must not block.
ReconnectHandler = Callable[[List[PoolServer], Dict[str, Any]], Tuple[Optional[PoolServer], float]]

_SEMVER = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?")


@functools.total_ordering
class ServerVersion:
    """A server's version (``nc.connected_server_version``), like nats-py's: ``major``,
    ``minor``, ``patch``, ``prerelease``, ``build``, ``dev``; compares with another
    ServerVersion, a ``"2.10.3"`` string or a ``(2, 10, 3)`` tuple, by (major, minor, patch)
    and a release above its pre-releases."""

    __slots__ = ("build", "major", "minor", "patch", "prerelease", "text")

    def __init__(self, text: str) -> None:
        match = _SEMVER.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise errors.InvalidArgumentError(f"{text!r} is not a semantic version")
        self.text = text
        self.major, self.minor, self.patch = (int(g) for g in match.groups()[:3])
        self.prerelease = match.group(4) or ""
        self.build = match.group(5) or ""

    @property
    def dev(self) -> str:
        """The pre-release and build parts, joined by ``+`` when there is a build (``""`` for a
        release)."""
        return "+".join((self.prerelease, self.build)) if self.build else self.prerelease

    def _key(self) -> Tuple[int, int, int, int, str]:
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, self.prerelease)

    @staticmethod
    def _other(other: object) -> Optional[Tuple[int, int, int, int, str]]:
        if isinstance(other, str):
            other = ServerVersion(other)
        if isinstance(other, ServerVersion):
            return other._key()
        if isinstance(other, tuple) and all(isinstance(x, int) for x in other):
            padded = (*other, 0, 0, 0)
            return (padded[0], padded[1], padded[2], 1, "")
        return None

    def __eq__(self, other: object) -> bool:
        key = self._other(other)
        return NotImplemented if key is None else self._key() == key

    def __lt__(self, other: object) -> bool:
        key = self._other(other)
        return NotImplemented if key is None else self._key() < key

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<nats server v{self.text}>"


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
        """The server's URL without credentials: ``scheme://host:port`` (an IPv6 host in
        brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __repr__(self) -> str:
        return f"<server {self.url}>"


def parse_url(url: str, implicit: bool = False) -> Server:
    """The Server a URL names (``nats://`` or ``tls://``; no scheme means ``nats://``, no port
    4222, ``user@`` alone a token). ``implicit`` marks a server learned from the cluster
    rather than given. InvalidArgumentError for a bad URL."""
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
    connect resets its count), then leaves the pool; between two tries of the same server at
    least ``reconnect_wait`` passes, plus up to ``jitter``, but another server whose wait has
    passed is tried at once. Servers in lame duck mode come last.
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
        self.randomize = randomize
        if randomize and len(servers) > 1:
            random.shuffle(self.servers)
        self.max_reconnect_attempts = max_reconnect_attempts
        self.reconnect_wait = reconnect_wait
        self.jitter = jitter
        self.chooser: Optional[ReconnectHandler] = None
        self._lock = threading.Lock()

    def learn(self, info: Dict[str, Any], server: Server) -> int:
        """Add the servers an INFO's ``connect_urls`` names that the pool lacks; returns
        how many were added."""
        added = 0
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
                    added += 1
        return added

    def next_server(self) -> Optional[Server]:
        """The server to dial next; it moves to the back of the pool. The wait is per
        server (as nats.go and nats-py): the first server whose reconnect wait has passed
        (or that was never tried) is taken at once, and only when every server was tried
        too recently is the one whose wait ends first taken (``wait_turn`` waits for it).
        Servers in lame duck mode come last. Servers that used up their attempts leave the
        pool (as nats-py); None when none is left."""
        now = time.monotonic()
        wait = self.reconnect_wait
        with self._lock:
            self._drop_exhausted()
            best: Optional[int] = None
            best_key: Tuple[bool, float] = (True, 0.0)
            for i, server in enumerate(self.servers):
                key = (server.lame_until > now, max(server.last_attempt + wait, now))
                if best is None or key < best_key:
                    best, best_key = i, key
            if best is None:
                return None
            server = self.servers.pop(best)
            self.servers.append(server)
            return server

    def _drop_exhausted(self) -> None:
        """Remove the servers that used up max_reconnect_attempts (under the lock)."""
        limit = self.max_reconnect_attempts
        if limit >= 0:
            self.servers = [s for s in self.servers if s.reconnects < limit]

    def to_back(self, server: Server) -> None:
        """Move ``server`` (the one just lost) behind the others: a reconnect tries the
        rest of the pool first, as nats.go and nats-py do."""
        with self._lock:
            for i, s in enumerate(self.servers):
                if s is server:
                    self.servers.append(self.servers.pop(i))
                    return

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

    def choose(
        self, info: Dict[str, Any], report: Callable[[errors.NATSError], None]
    ) -> Optional[Tuple[Server, float]]:
        """reconnect_to_server_handler's pick among the servers with attempts left, and how
        long to wait before dialling it; None when no server has attempts left. A handler
        that raises, or picks a server not in the pool, is reported and the first eligible
        server is taken, after the usual reconnect wait."""
        assert self.chooser is not None
        with self._lock:
            self._drop_exhausted()
            eligible = list(self.servers)
        if not eligible:
            return None
        snapshot = [PoolServer(urllib.parse.urlparse(s.url), s.reconnects) for s in eligible]
        try:
            picked, delay = self.chooser(snapshot, dict(info))
            if picked is None:
                return eligible[0], self._wait_for(eligible[0])
            netloc = picked.uri.netloc
            if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
                raise errors.InvalidArgumentError(f"delay must be seconds >= 0, got {delay!r}")
        except Exception as exc:
            err = errors.CallbackError(
                f"reconnect_to_server_handler failed: {type(exc).__name__}: {exc}"
            )
            err.__cause__ = exc
            report(err)
            return eligible[0], self._wait_for(eligible[0])
        for s in eligible:
            if urllib.parse.urlparse(s.url).netloc == netloc:
                return s, float(delay)
        report(
            errors.ServerNotInPoolError(
                f"reconnect_to_server_handler chose {netloc!r}, which is not among the "
                f"eligible servers ({', '.join(s.url for s in eligible)})"
            )
        )
        return eligible[0], self._wait_for(eligible[0])

    def _wait_for(self, server: Server) -> float:
        delay = server.last_attempt + self.reconnect_wait - time.monotonic()
        return delay + random.uniform(0, self.jitter) if delay > 0 else 0.0

    @staticmethod
    def count_attempt(server: Server) -> None:
        """Note a connection attempt to ``server``: its time, and one more try in a row."""
        server.last_attempt = time.monotonic()
        server.reconnects += 1

    def snapshot(self) -> List[PoolServer]:
        """The pool as nats-py's ``server_pool`` shows it: no credentials, a copy."""
        with self._lock:
            return [PoolServer(urllib.parse.urlparse(s.url), s.reconnects) for s in self.servers]

    def replace(self, servers: List[Server]) -> None:
        """nats-py's ``set_server_pool``: the pool for the next reconnect. A server already
        in the pool keeps its state (failed attempts, lame duck); the connection in use is
        left alone; discovery goes on adding what INFO announces."""
        with self._lock:
            old = {(s.host, s.port): s for s in self.servers}
            pool: List[Server] = []
            for new in servers:
                kept = old.get((new.host, new.port))
                if kept is not None:
                    new.reconnects = kept.reconnects
                    new.last_attempt = kept.last_attempt
                    new.lame_until = kept.lame_until
                pool.append(new)
            if self.randomize and len(pool) > 1:
                random.shuffle(pool)
            self.servers = pool

    def discovered(self) -> List[str]:
        """The servers learnt from INFO (not given to connect)."""
        with self._lock:
            return [s.url for s in self.servers if s.implicit]
