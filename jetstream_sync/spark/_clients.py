"""Per-process cached clients for Spark executors.

Spark reuses its Python worker processes across tasks (``spark.python.worker.reuse``), so
one connection per process and set of options serves every task that process runs,
instead of a connect (and a TLS handshake, an auth round trip) per task.

* :func:`client` returns the cached :class:`~jetstream_sync.Client` for ``(servers,
  options)``, connecting it on first use; a cached client that has closed (the user closed
  it, or it gave up reconnecting) is replaced.
* :func:`jetstream` returns a cached JetStream context on that client. Caching the context
  matters: its ``publish_async`` machinery (an inbox subscription, a sweep timer) lives as
  long as the client, so a context per task would pile them up.
* After ``fork()`` the child forgets the parent's clients without closing them (closing
  would send on the parent's socket); the client itself disowns the inherited socket
  (see ``Client._mark_forked``), and the child connects its own.

Nothing here relies on ``atexit``: Spark kills idle workers with SIGKILL, so whoever
publishes must wait for the acks before a task returns (the writers do).
"""

from __future__ import annotations

import os
import ssl
import threading
from typing import Any, Dict, Hashable, List, Sequence, Tuple, Union

from ..client import Client, connect
from ..jetstream.context import JetStream

__all__ = ["cached_clients", "client", "close_all", "jetstream"]

_Key = Tuple[Hashable, ...]

_lock = threading.Lock()
_pid = os.getpid()
_clients: Dict[_Key, Client] = {}
_contexts: Dict[Tuple[_Key, _Key], JetStream] = {}


def _freeze(value: Any) -> Hashable:
    """A hashable stand-in for an option value (lists and dicts become tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(_freeze(v) for v in value))  # type: ignore[type-var]
    try:
        hash(value)
    except TypeError:
        return ("id", type(value).__name__, id(value))
    return value  # type: ignore[no-any-return]


def _servers_key(servers: Union[str, Sequence[str]]) -> Tuple[str, ...]:
    if isinstance(servers, str):
        return tuple(u.strip() for u in servers.split(",") if u.strip())
    return tuple(str(u).strip() for u in servers)


def _key(servers: Union[str, Sequence[str]], options: Dict[str, Any]) -> _Key:
    # Secrets (password, token) are part of the key, so two users never share a client;
    # the key is never logged or put into an error message.
    return (_servers_key(servers), *sorted((k, _freeze(v)) for k, v in options.items()))


def _check_pid() -> None:
    """Called with the lock held: forget clients inherited from another process."""
    global _pid
    pid = os.getpid()
    if pid != _pid:
        _clients.clear()
        _contexts.clear()
        _pid = pid


def _usable(nc: Client) -> bool:
    # Not made in another process: every caller has run _check_pid, which forgets those.
    return not nc.is_closed


def client(servers: Union[str, Sequence[str]], **options: Any) -> Client:
    """The client of this process for ``servers`` and ``options`` (connect's keywords).

    Connects on first use and caches it; the same arguments later return the same client
    while it is open. Safe to call from several threads. Do not close the returned client
    in a task: other tasks of the worker use it (``close_all`` closes them all).
    """
    key = _key(servers, options)
    with _lock:
        _check_pid()
        nc = _clients.get(key)
        if nc is not None and _usable(nc):
            return nc
        options.setdefault("name", "jetstream_sync-spark")
        nc = connect(list(_servers_key(servers)), **_with_tls_context(options))
        _clients[key] = nc
        for ctx_key in [k for k in _contexts if k[0] == key]:
            del _contexts[ctx_key]
        return nc


def jetstream(
    servers: Union[str, Sequence[str]],
    js_options: Union[Dict[str, Any], None] = None,
    **options: Any,
) -> JetStream:
    """A cached JetStream context (``js_options``: domain, timeout, ...) on :func:`client`."""
    js_options = dict(js_options or {})
    nc = client(servers, **options)
    key = (_key(servers, options), _key((), js_options))
    with _lock:
        js = _contexts.get(key)
        if js is not None and js.nc is nc:
            return js
        js = nc.jetstream(**js_options)
        _contexts[key] = js
        return js


def _with_tls_context(options: Dict[str, Any]) -> Dict[str, Any]:
    """connect()'s keywords, with ``tls_ca_file`` / ``tls_cert_file`` / ``tls_key_file``
    (the Spark options, cached by their paths) made into the SSLContext connect() takes."""
    files = {}
    for k in ("tls_ca_file", "tls_cert_file", "tls_key_file"):
        value = options.pop(k, None)
        if value:
            files[k] = str(value)
    if not files:
        return options
    ctx = ssl.create_default_context(cafile=files.get("tls_ca_file"))
    if "tls_cert_file" in files:
        ctx.load_cert_chain(files["tls_cert_file"], files.get("tls_key_file"))
    return {**options, "tls": ctx}


def cached_clients() -> List[Client]:
    """The clients cached in this process (for tests and monitoring)."""
    with _lock:
        _check_pid()
        return [nc for nc in _clients.values() if _usable(nc)]


def close_all() -> None:
    """Close every client cached in this process (drivers and tests; executors need not)."""
    with _lock:
        _check_pid()
        clients = list(_clients.values())
        _clients.clear()
        _contexts.clear()
    for nc in clients:
        nc.close()


def _forget_after_fork() -> None:
    """In a forked child: drop the parent's clients without touching their sockets.

    A fresh lock too: another thread of the parent may have held it at the fork.
    """
    global _lock, _clients, _contexts, _pid
    _lock = threading.Lock()
    _clients = {}
    _contexts = {}
    _pid = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
