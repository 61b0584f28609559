"""Opening a connection: the socket, TLS (before or after INFO), CONNECT with the
credentials, and the PING/PONG that proves the server took them. Returns a Conn whose
socket is non-blocking, or raises a NATSError; nothing here keeps state between calls.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Union

from . import _protocol as proto
from . import errors
from ._auth import UserAuth
from ._conn import Conn
from ._servers import Server
from ._timeouts import Deadline
from ._version import __version__

__all__ = ["DialOptions", "dial"]


@dataclass(frozen=True)
class DialOptions:
    """What every connect and reconnect of one client sends and expects."""

    connect_timeout: float = 2.0
    name: Optional[str] = None
    user: Optional[str] = None
    password: Optional[str] = None
    token: Union[str, Callable[[], str], None] = None  # a callable: called per CONNECT
    auth: Optional[UserAuth] = None
    tls: Optional[ssl.SSLContext] = None
    tls_hostname: Optional[str] = None
    # TLS before the server's INFO (a server configured with tls { handshake_first }):
    # nothing, not even INFO, crosses the network in the clear.
    tls_first: bool = False
    echo: bool = True
    verbose: bool = False
    pedantic: bool = False
    inbox_prefix: str = "_INBOX"


def dial(
    server: Server,
    opts: DialOptions,
    msg_owner: Any,
    on_info: Optional[Callable[[Dict[str, Any]], None]] = None,
) -> Conn:
    """Open a socket to ``server`` and complete the handshake, or raise a NATSError.
    ``msg_owner`` is stamped on every message read from it (Msg.respond and acks use it);
    ``on_info`` is given the server's INFO as soon as it is read (before CONNECT)."""
    where = f"connect to {server.url}"
    deadline = Deadline(opts.connect_timeout, where)
    sock: Optional[socket.socket] = None
    try:
        sock = socket.create_connection((server.host, server.port), timeout=deadline.check())
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        parser = proto.Parser(msg_owner=msg_owner, one_off_prefix=opts.inbox_prefix.encode() + b".")
        if opts.tls_first:
            sock = _wrap_tls(sock, server, opts, deadline)
        ev = _read_event(sock, parser, deadline, where)
        if not isinstance(ev, proto.Info):
            raise errors.ProtocolError(f"{where}: expected INFO first, got {ev!r}")
        info = ev.data
        if on_info is not None:
            on_info(info)
        if not opts.tls_first:
            sock = _maybe_tls(sock, server, opts, info, deadline)
        sock.settimeout(deadline.check())
        sock.sendall(proto.encode_connect(connect_fields(server, opts, info)) + proto.PING_FRAME)
        while True:
            ev = _read_event(sock, parser, deadline, where)
            if ev is proto.PONG:
                break
            if isinstance(ev, proto.Err):
                raise handshake_error(server, ev.message)
            if isinstance(ev, proto.Info):
                info = ev.data
            elif ev is proto.PING:
                sock.sendall(proto.PONG_FRAME)
        # Non-blocking from here on: reads wait in poll, and no write can block a thread
        # (see Outbox._send). Inline reads pass MSG_DONTWAIT anyway.
        sock.settimeout(0.0)
        max_payload = info.get("max_payload")
        if isinstance(max_payload, int) and max_payload > 0:
            parser.max_payload = max(max_payload, proto.DEFAULT_MAX_INBOUND)
        return Conn(sock, parser, server, info)
    except BaseException as exc:
        if sock is not None:
            sock.close()
        if isinstance(exc, (errors.NATSError, OSError)):
            raise errors.map_os_error(exc, where=where) from exc
        raise


def _read_event(
    sock: socket.socket, parser: proto.Parser, deadline: Deadline, where: str
) -> proto.Event:
    while True:
        ev = parser.next_event()
        if ev is not proto.NEED_DATA:
            return ev
        sock.settimeout(deadline.check())
        data = sock.recv(65536)
        if not data:
            raise errors.ConnectionLostError(f"{where}: server closed the connection")
        parser.receive_data(data)


def _maybe_tls(
    sock: socket.socket,
    server: Server,
    opts: DialOptions,
    info: Dict[str, Any],
    deadline: Deadline,
) -> socket.socket:
    wanted = opts.tls is not None or server.scheme == "tls"
    required = bool(info.get("tls_required"))
    available = required or bool(info.get("tls_available"))
    if wanted and not available:
        raise errors.SecureConnWantedError(
            f"TLS was requested but server {server.url} does not offer it"
        )
    if not (wanted or required):
        return sock
    return _wrap_tls(sock, server, opts, deadline)


def _wrap_tls(
    sock: socket.socket, server: Server, opts: DialOptions, deadline: Deadline
) -> socket.socket:
    # Like nats.go: a server that requires TLS gets it, with a default (verifying)
    # context when the caller gave none.
    context = opts.tls or ssl.create_default_context()
    sock.settimeout(deadline.check())
    return context.wrap_socket(sock, server_hostname=opts.tls_hostname or server.host)


def connect_fields(server: Server, opts: DialOptions, info: Dict[str, Any]) -> Dict[str, Any]:
    """The CONNECT message's fields for ``server``, whose INFO is ``info``."""
    fields: Dict[str, Any] = {
        "verbose": opts.verbose,
        "pedantic": opts.pedantic,
        "tls_required": opts.tls is not None
        or server.scheme == "tls"
        or bool(info.get("tls_required")),
        "name": opts.name,
        "lang": "python3-sync",
        "version": __version__,
        "protocol": 1,
        "echo": opts.echo,
        "headers": True,
        "no_responders": True,
    }
    if server.user is not None:
        fields["user"], fields["pass"] = server.user, server.password
    elif server.token is not None:
        fields["auth_token"] = server.token
    elif opts.user is not None:
        fields["user"], fields["pass"] = opts.user, opts.password
    elif opts.token is not None:
        fields["auth_token"] = _token(opts.token)
    if opts.auth is not None:
        nonce = info.get("nonce")
        fields.update(opts.auth.connect_fields(nonce if isinstance(nonce, str) else None))
    return fields


def _token(token: Union[str, Callable[[], str]]) -> str:
    """The token, or what the token callable returns now (a fresh one per connect)."""
    if isinstance(token, str):
        return token
    try:
        value = token()
    except Exception as exc:
        raise errors.AuthorizationError(f"the token callable raised {type(exc).__name__}") from exc
    if not isinstance(value, str):
        raise errors.AuthorizationError(
            f"the token callable must return a str, got {type(value).__name__}"
        )
    return value


def handshake_error(server: Server, message: str) -> errors.NATSError:
    """The error for a server's -ERR during the handshake."""
    low = message.lower()
    if "authorization" in low or "authentication" in low or "user" in low:
        return errors.AuthorizationError(f"server {server.url} refused the credentials: {message}")
    if "secure connection" in low or "tls" in low:
        return errors.SecureConnRequiredError(f"server {server.url}: {message}")
    return errors.ServerError(f"server {server.url} refused the connection: {message}")
