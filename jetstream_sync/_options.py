"""connect()'s options: every one checked with an error that names the problem, nats-py's
names mapped onto ours, and the rooms configured with the result. Client.connect hands its
arguments here and only starts the threads itself.

nats-py's names and what they become:

* ``dont_randomize`` is ``no_randomize``; ``no_echo`` is ``not echo``. Both spellings may be
  given only when they agree.
* ``pending_size`` is ``reconnect_buf_size``: nats-py refuses a publish with
  OutboundBufferLimitError when, disconnected, the bytes waiting would pass it (0: no
  buffering while disconnected). Our reconnect buffer is that same limit. While connected
  our buffer is bounded by back-pressure instead (a publisher far ahead of the socket waits
  for it), so the limit is not needed there.
* ``flusher_queue_size`` is checked and has no effect: our flusher thread has no queue (a
  publish appends to one buffer, and the flusher writes all of it per wake-up).
* ``flush_timeout`` and ``drain_timeout`` are the timeouts ``flush()`` and ``drain()`` use
  when called without one.
* ``nkeys_seed_str`` is a seed given as text (``nkeys_seed`` takes a seed or a file).
* ``token`` may be a callable returning the token: it is called at every CONNECT, so a
  reconnect sends a fresh one.
* ``ws_connection_headers``: this client speaks TCP only; a value is refused.
"""

from __future__ import annotations

import inspect
import ssl
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from . import _protocol as proto
from . import errors
from ._auth import _SEED_LIKE_RE, UserAuth
from ._dial import DialOptions
from ._servers import ServerPool, parse_url
from ._timeouts import check_timeout

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["check_callable", "check_positive_int", "configure"]

DEFAULT_RECONNECT_BUF_SIZE = 8 * 1024 * 1024
_CALLBACKS = (
    "error_cb",
    "disconnected_cb",
    "reconnected_cb",
    "closed_cb",
    "discovered_server_cb",
    "lame_duck_mode_cb",
    "reconnect_to_server_handler",
)


def check_positive_int(value: Any, what: str, *, allow_none: bool = False) -> Optional[int]:
    """Return ``value`` if it is an int > 0 (or None where ``allow_none``); InvalidArgumentError
    naming ``what`` otherwise."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise errors.InvalidArgumentError(f"{what} must be an int > 0, got {value!r}")
    return value


def check_pending_limit(value: Any, what: str) -> int:
    """A subscription's pending limit: an int; 0 or less means no limit, as nats-py."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidArgumentError(
            f"{what} must be an int (0 or less: no limit), got {value!r}"
        )
    return value


def check_callable(value: Any, what: str) -> Any:
    """None, or a plain callable: ``async def`` functions are refused (this client calls
    callbacks in threads, and a coroutine nobody awaits would silently do nothing)."""
    if value is None:
        return None
    if not callable(value):
        raise errors.InvalidCallbackTypeError(
            f"{what} must be callable, got {type(value).__name__}"
        )
    if inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(
        getattr(value, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
    ):
        raise errors.InvalidCallbackTypeError(
            f"{what} is an async function: jetstream_sync calls callbacks in threads, "
            "so give a plain function (drop async/await)"
        )
    return value


def _check_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise errors.InvalidArgumentError(f"{what} must be a bool, got {type(value).__name__}")
    return value


def _alias_bool(ours: Any, ours_name: str, theirs: Any, theirs_name: str, inverse: bool) -> bool:
    """One bool given under our name, nats-py's, or both when they agree (default False
    for ours, after inversion)."""
    if ours is not None:
        _check_bool(ours, ours_name)
    if theirs is not None:
        _check_bool(theirs, theirs_name)
        mapped = (not theirs) if inverse else theirs
        if ours is not None and ours != mapped:
            raise errors.InvalidArgumentError(
                f"{ours_name}={ours!r} and {theirs_name}={theirs!r} contradict each other: "
                f"{theirs_name} is nats-py's name for "
                + (f"'not {ours_name}'" if inverse else ours_name)
                + "; give one of them"
            )
        return mapped
    return bool(ours) if ours is not None else inverse


def _servers(servers: Any) -> List[Any]:
    if isinstance(servers, str):
        urls = [u for u in servers.split(",") if u.strip()]
    elif isinstance(servers, (list, tuple)):
        urls = list(servers)
    else:
        raise errors.InvalidArgumentError(
            f"servers must be a URL string or a list of them, got {type(servers).__name__}"
        )
    if not urls:
        raise errors.InvalidArgumentError("servers is empty")
    return [parse_url(u) for u in urls]


def _token(token: Any) -> Any:
    if token is None or isinstance(token, str):
        return token
    if callable(token):
        return check_callable(token, "token")
    raise errors.InvalidArgumentError(
        f"token must be a str or a callable returning one, got {type(token).__name__}"
    )


def _seed(nkeys_seed: Any, nkeys_seed_str: Any) -> Any:
    if nkeys_seed_str is None:
        return nkeys_seed
    if nkeys_seed is not None:
        raise errors.InvalidArgumentError(
            "give nkeys_seed or nkeys_seed_str, not both: they are the same credential"
        )
    if not isinstance(nkeys_seed_str, str):
        raise errors.InvalidArgumentError(
            f"nkeys_seed_str must be a str, got {type(nkeys_seed_str).__name__}"
        )
    if not _SEED_LIKE_RE.fullmatch(nkeys_seed_str.strip()):
        raise errors.InvalidUserCredentialsError(
            "nkeys_seed_str is not an nkey seed (expected the text of one, starting with 'S')"
        )
    return nkeys_seed_str.strip()


def _buffer_size(reconnect_buf_size: Any, pending_size: Any) -> int:
    if pending_size is not None:
        if isinstance(pending_size, bool) or not isinstance(pending_size, int) or pending_size < 0:
            raise errors.InvalidArgumentError(
                f"pending_size must be an int >= 0 (bytes; 0: no buffering while "
                f"disconnected), got {pending_size!r}"
            )
        if reconnect_buf_size is not None and reconnect_buf_size != pending_size:
            raise errors.InvalidArgumentError(
                f"reconnect_buf_size={reconnect_buf_size!r} and pending_size={pending_size!r} "
                "contradict each other: pending_size is nats-py's name for reconnect_buf_size"
            )
        return int(pending_size)
    if reconnect_buf_size is None:
        return DEFAULT_RECONNECT_BUF_SIZE
    return check_positive_int(reconnect_buf_size, "reconnect_buf_size") or 0


def _refuse(o: Dict[str, Any]) -> None:
    if o["ws_connection_headers"] is not None:
        raise errors.InvalidArgumentError(
            "ws_connection_headers: websocket is not supported; jetstream_sync speaks NATS "
            "over TCP (nats:// or tls://) only"
        )
    check_positive_int(o["flusher_queue_size"], "flusher_queue_size")
    for what in ("skip_subject_validation", "tls_handshake_first", "retry_on_failed_connect"):
        _check_bool(o[what], what)


def configure(client: Client, o: Dict[str, Any]) -> None:
    """Check connect()'s options ``o`` (its arguments by name) and set up the client's
    rooms with them; raises InvalidArgumentError (or a subclass) naming the problem."""
    _refuse(o)
    parsed = _servers(o["servers"])
    for name in _CALLBACKS:
        check_callable(o[name], name)
    tls = o["tls"]
    if tls is not None and not isinstance(tls, ssl.SSLContext):
        raise errors.InvalidArgumentError(
            f"tls must be an ssl.SSLContext, got {type(tls).__name__}"
        )
    for what in ("user", "password", "name", "tls_hostname"):
        value = o[what]
        if value is not None and not isinstance(value, str):
            raise errors.InvalidArgumentError(f"{what} must be a str, got {type(value).__name__}")
    user, password = o["user"], o["password"]
    if (user is None) != (password is None):
        raise errors.InvalidArgumentError("user and password go together: give both or neither")
    attempts = o["max_reconnect_attempts"]
    if not isinstance(attempts, int) or isinstance(attempts, bool):
        raise errors.InvalidArgumentError(
            f"max_reconnect_attempts must be an int (-1 for no limit), got {attempts!r}"
        )
    inbox_prefix = o["inbox_prefix"]
    proto.check_publish_subject(inbox_prefix, "inbox_prefix")
    ping = check_timeout(o["ping_interval"], "ping_interval")
    if not ping:
        raise errors.BadTimeoutError("ping_interval must be > 0 seconds")
    write_t = check_timeout(o["write_timeout"], "write_timeout")
    if not write_t:
        raise errors.BadTimeoutError("write_timeout must be > 0 seconds")
    randomize = not _alias_bool(
        o["no_randomize"], "no_randomize", o["dont_randomize"], "dont_randomize", False
    )
    echo = _alias_bool(o["echo"], "echo", o["no_echo"], "no_echo", True)
    net = client._network
    net.pool = ServerPool(
        parsed,
        randomize,
        attempts,
        check_timeout(o["reconnect_time_wait"], "reconnect_time_wait"),
        check_timeout(o["reconnect_jitter"], "reconnect_jitter"),
    )
    net.pool.chooser = o["reconnect_to_server_handler"]
    net.dial_opts = DialOptions(
        connect_timeout=check_timeout(o["connect_timeout"], "connect_timeout"),
        name=o["name"],
        user=user,
        password=password,
        token=_token(o["token"]),
        auth=UserAuth.from_options(
            _seed(o["nkeys_seed"], o["nkeys_seed_str"]),
            o["user_credentials"],
            o["signature_cb"],
            o["user_jwt_cb"],
        ),
        tls=tls,
        tls_hostname=o["tls_hostname"],
        tls_first=o["tls_handshake_first"],
        echo=echo,
        verbose=bool(o["verbose"]),
        pedantic=bool(o["pedantic"]),
        inbox_prefix=inbox_prefix,
    )
    net.ping_interval = ping
    net.max_outstanding_pings = (
        check_positive_int(o["max_outstanding_pings"], "max_outstanding_pings") or 2
    )
    net.allow_reconnect = bool(o["allow_reconnect"])
    net.disconnected_cb = o["disconnected_cb"]
    net.reconnected_cb = o["reconnected_cb"]
    net.discovered_server_cb = o["discovered_server_cb"]
    net.lame_duck_mode_cb = o["lame_duck_mode_cb"]
    outbox = client._outbox
    # A write that makes no progress for this long: the peer stopped reading, and the
    # connection is stale (then the reconnect path, as for unanswered pings).
    outbox.write_timeout = write_t
    outbox.reconnect_buf_size = _buffer_size(o["reconnect_buf_size"], o["pending_size"])
    outbox.check_subjects = not o["skip_subject_validation"]
    client._callbacks.error_cb = o["error_cb"]
    client._closed_cb = o["closed_cb"]
    client._inbox_prefix = client._requests.inbox_prefix = inbox_prefix
    client._flush_timeout = _positive_timeout(o["flush_timeout"], "flush_timeout", 2.0)
    client._drain_timeout = _positive_timeout(o["drain_timeout"], "drain_timeout", 30.0)


def _positive_timeout(value: Any, what: str, default: float) -> float:
    if value is None:
        return default
    t = check_timeout(value, what)
    if not t:
        raise errors.BadTimeoutError(f"{what} must be > 0 seconds")
    return t
