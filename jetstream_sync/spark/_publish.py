"""Publishing a partition: pipelined ``publish_async``, every ack waited for, and message ids
that make a retried task a no-op on the server (JetStream de-duplicates ``Nats-Msg-Id``
within the stream's ``duplicate_window``).

A row's default id does not depend on where it stands in the partition: a retried task may
read a shuffled partition in another order (another executor, another fetch order), and an
id by position would then drop new rows as "duplicates" and store repeated ones. The id is
``<prefix>-<digest of subject, headers and data>``, with ``-<k>`` for the k-th repeat of an
identical message in the partition, so identical rows stay distinct and every retry, in any
order, produces the same set of ids.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import warnings
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .. import errors
from ..jetstream import api
from ..jetstream.context import JetStream
from ._rows import OutMsg

__all__ = ["PublishResult", "check_duplicate_window", "content_id", "publish_all"]

log = logging.getLogger("jetstream_sync.spark")

MIN_DUPLICATE_WINDOW = 120.0  # seconds: shorter is warned about
_PRUNE_EVERY = 4096

_warned: Set[Tuple[str, str]] = set()
_checked: Dict[Tuple[str, str, str], Optional[float]] = {}
_warned_lock = threading.Lock()


@dataclass
class PublishResult:
    published: int = 0  # messages stored by this call
    duplicates: int = 0  # acks saying "already stored" (a retried task's earlier publishes)


def content_id(subject: str, data: bytes, headers: Optional[Dict[str, List[str]]] = None) -> str:
    """A digest of a message's content (128 bits: no two rows of a partition share one by
    chance); headers count, in a canonical order."""
    h = hashlib.blake2b(digest_size=16)
    h.update(subject.encode())
    h.update(b"\0")
    if headers:
        for name in sorted(headers):
            for value in headers[name]:
                h.update(f"{name}:{value}\n".encode())
    h.update(b"\0")
    h.update(data)
    return h.hexdigest()


def _settle(fut: Future[api.PubAck], result: PublishResult) -> None:
    ack = fut.result(0)  # raises the publish's error
    if ack.duplicate:
        result.duplicates += 1
    else:
        result.published += 1


def publish_all(
    js: JetStream,
    msgs: Iterable[OutMsg],
    id_prefix: Optional[str],
    ack_timeout: float = 60.0,
) -> PublishResult:
    """Publish ``msgs`` and wait for every ack; raise the first failed publish's error.

    A message without its own id gets ``<id_prefix>-<content digest>`` (``-<k>`` added for
    the k-th repeat of the same content in ``msgs``): the same messages in any order give
    the same ids, so a retry is de-duplicated. ``id_prefix`` None and no id: no
    ``Nats-Msg-Id`` at all. Memory: one entry per distinct message of the partition.
    """
    result = PublishResult()
    pending: List[Future[api.PubAck]] = []
    seen: Dict[str, int] = {}  # digest -> copies so far
    for subject, data, headers, msg_id in msgs:
        if msg_id is None and id_prefix is not None:
            digest = content_id(subject, data, headers)
            copies = seen.get(digest, 0)
            seen[digest] = copies + 1
            msg_id = f"{id_prefix}-{digest}-{copies}" if copies else f"{id_prefix}-{digest}"
        pending.append(js.publish_async(subject, data, headers=headers, msg_id=msg_id))
        if len(pending) >= _PRUNE_EVERY:
            keep = []
            for fut in pending:
                if fut.done():
                    _settle(fut, result)
                else:
                    keep.append(fut)
            pending = keep
    if pending:
        js.publish_async_completed(timeout=ack_timeout)
        for fut in pending:
            if not fut.done():
                raise errors.TimeoutError(f"no JetStream ack within {ack_timeout} s")
            _settle(fut, result)
    return result


def check_duplicate_window(
    js: JetStream, stream: Optional[str] = None, subject: Optional[str] = None
) -> Optional[float]:
    """Warn (once per process and stream) when ``stream`` (or the stream capturing
    ``subject``) keeps message ids for less than MIN_DUPLICATE_WINDOW: a task retried
    after that would publish its messages again. Returns the window (None: unknown)."""
    if stream is None and subject is None:
        return None
    asked = (js.prefix, stream or "", subject or "")
    with _warned_lock:
        if asked in _checked:  # once per process: tasks of a worker need not ask again
            return _checked[asked]
    try:
        if stream is None:
            assert subject is not None
            stream = js.find_stream_name_by_subject(subject)
        window = js.stream_info(stream).config.duplicate_window
    except errors.NATSError as exc:
        log.debug("jetstream_sync.spark: cannot check the duplicate window: %s", exc)
        return None
    with _warned_lock:
        _checked[asked] = window
    if window is not None and window < MIN_DUPLICATE_WINDOW:
        key = (js.prefix, stream)
        with _warned_lock:
            first = key not in _warned
            _warned.add(key)
        if first:
            text = (
                f"stream {stream!r} has a duplicate_window of {window:g} s (< "
                f"{MIN_DUPLICATE_WINDOW:g} s): a Spark task retried later than that publishes "
                "its messages again instead of being de-duplicated"
            )
            log.warning("jetstream_sync.spark: %s", text)
            warnings.warn(text, RuntimeWarning, stacklevel=3)
    return window
