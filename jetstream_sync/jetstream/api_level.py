"""The server's JetStream API level (ADR-44), read once, and what a feature needs of it.

Every JetStream feature newer than the seeds needs a server that knows it: counters, atomic
batches and schedules need level 2 (nats-server 2.12), fast-ingest batches level 4 (2.14).
An older server does not always refuse what it does not know: it may ignore an unknown
header and store a batch's messages one by one. So a feature checks the level first and
fails with :class:`~jetstream_sync.errors.ApiLevelError`, naming the feature, the level it
needs and the level the server has, before anything is sent.

The level comes from ``$JS.API.INFO`` (``api.level``), asked once per server the client is
connected to (a reconnect to another server asks again). A server before 2.11 reports no
level: that is level 0. The ``Nats-Required-Api-Level`` header asks the server itself to
refuse a request it cannot serve at that level (its answer is the same ApiLevelError,
err_code 10185); :func:`required_level_header` builds it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from .. import errors

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client

__all__ = [
    "ATOMIC_BATCH",
    "BATCH_COMMIT_EOB",
    "BATCH_DIRECT_GET",
    "CANCEL_SCHEDULE",
    "COUNTERS",
    "FAST_INGEST",
    "REPEATING_SCHEDULES",
    "REQUIRED_API_LEVEL",
    "SCHEDULES",
    "ApiLevels",
    "release_of",
    "required_level_header",
    "stream_config_level",
]

REQUIRED_API_LEVEL = "Nats-Required-Api-Level"

# (what, level): the features that check, with the level nats-server gives them
# (server/jetstream_versioning.go) and the release that brought it, for the error's words.
COUNTERS = ("counters (ADR-49)", 2)
ATOMIC_BATCH = ("atomic batch publish (ADR-50)", 2)
SCHEDULES = ("message schedules (ADR-51)", 2)
# nats-server 2.12 knew @at only; 2.14 (level 4) brought the rest of ADR-51.
REPEATING_SCHEDULES = (
    "repeating message schedules (@every, cron) and a schedule's source, time zone or "
    "rollup (ADR-51)",
    4,
)
CANCEL_SCHEDULE = ("cancelling a message schedule by a publish (ADR-51)", 4)
BATCH_COMMIT_EOB = ("an atomic batch committed without a final message (ADR-50)", 4)
FAST_INGEST = ("fast-ingest batch publish (ADR-50)", 4)
BATCH_DIRECT_GET = ("batch direct get (ADR-31)", 1)

# Which nats-server release first reported each level.
_RELEASES = {0: "before 2.11", 1: "2.11", 2: "2.12", 3: "2.13", 4: "2.14", 5: "2.15"}


def release_of(level: int) -> str:
    """The nats-server release that introduced an API level, as text (for error messages)."""
    return _RELEASES.get(level, f"a release with API level {level}")


def stream_config_level(config: Dict[str, Any]) -> Tuple[int, str]:
    """The API level a stream config (its JSON) needs, and the fields that need it: the
    server's own rules (server/jetstream_versioning.go). A server below that level may not
    know the fields at all: one before 2.12 ignores an unknown field and makes the stream
    without it."""
    needs = []
    if config.get("allow_msg_ttl") or config.get("subject_delete_marker_ttl"):
        needs.append((1, "allow_msg_ttl / subject_delete_marker_ttl"))
    for name in ("allow_msg_counter", "allow_atomic", "allow_msg_schedules"):
        if config.get(name):
            needs.append((2, name))
    if config.get("persist_mode") == "async":
        needs.append((2, "persist_mode async"))
    if config.get("allow_batched"):
        needs.append((4, "allow_batched"))
    if not needs:
        return 0, ""
    level = max(n for n, _ in needs)
    return level, ", ".join(what for n, what in needs if n == level)


def required_level_header(level: int) -> Dict[str, str]:
    """The header that makes the server refuse a request below ``level`` (ADR-44)."""
    return {REQUIRED_API_LEVEL: str(level)}


class ApiLevels:
    """The API level of the server a client is connected to, asked once per server.
    ``api`` is JetStream's own API call (``js._api``): its errors are the usual ones."""

    def __init__(self, nc: Client, api: Callable[[str], Dict[str, Any]]) -> None:
        self._nc = nc
        self._api = api
        self._lock = threading.Lock()
        self._known: Optional[Tuple[Any, int]] = None  # (server id, level)

    def level(self) -> int:
        """The API level of the server the client is connected to now, asked once per server
        (``$JS.API.INFO``); raises JetStreamError on a level that is not an int >= 0, and the
        API call's errors."""
        server = self._nc.server_info.get("server_id")
        known = self._known
        if known is None or known[0] != server:
            with self._lock:
                known = self._known
                if known is None or known[0] != server:
                    known = self._known = (server, self._ask())
        return known[1]

    def _ask(self) -> int:
        api = self._api("INFO").get("api")
        level = api.get("level", 0) if isinstance(api, dict) else 0
        if isinstance(level, bool) or not isinstance(level, int) or level < 0:
            raise errors.JetStreamError(f"the server reported API level {level!r:.40}")
        return level

    def require(self, feature: Tuple[str, int]) -> None:
        """Raise ApiLevelError unless the server has ``feature``'s level."""
        what, needed = feature
        have = self.level()
        if have < needed:
            version = self._nc.server_info.get("version", "?")
            raise errors.ApiLevelError(
                412,
                10185,
                f"{what} needs JetStream API level {needed} (nats-server "
                f"{release_of(needed)} or later); the server this client is connected to "
                f"(nats-server {version}) has level {have}",
            )
