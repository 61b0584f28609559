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
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .. import errors
from ..jetstream.context import JetStream
from ._ackwindow import AckWindow, PublishResult
from ._rows import OutMsg, columns_to_publish

__all__ = [
    "PublishResult",
    "RowIds",
    "check_duplicate_window",
    "content_id",
    "publish_all",
    "publish_arrow",
]

log = logging.getLogger("jetstream_sync.spark")

MIN_DUPLICATE_WINDOW = 120.0  # seconds: shorter is warned about

_warned: Set[Tuple[str, str]] = set()
_checked: Dict[Tuple[str, str, str], Optional[float]] = {}
_warned_lock = threading.Lock()


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


class RowIds:
    """The ``Nats-Msg-Id`` of each row of one partition: the row's own ``msg_id`` when it
    has one, else ``<prefix>-<content digest>`` (``-<k>`` for the k-th repeat of the same
    content in the partition); ``prefix`` None: no id for rows without their own.

    The same rows in any order get the same ids, so a retried task is de-duplicated.
    Memory: one entry per distinct message of the partition.
    """

    def __init__(self, prefix: Optional[str]) -> None:
        self._prefix = None if prefix is None else (prefix + "-").encode()
        self._seen: Dict[str, int] = {}  # digest -> copies so far
        self._heads: Dict[str, bytes] = {}  # subject -> what its digest starts with

    def of(
        self,
        subjects: Sequence[str],
        datas: Sequence[bytes],
        headers: Optional[Sequence[Optional[Dict[str, List[str]]]]] = None,
        given: Optional[Sequence[Optional[str]]] = None,
    ) -> List[Optional[bytes]]:
        """The ids of a batch of rows (their subjects, payloads, headers and own ``msg_id``
        values), as bytes, None for a row without one; InvalidArgumentError for a given
        ``msg_id`` that is empty or has a line break."""
        prefix = self._prefix
        n = len(subjects)
        if given is not None and None not in given:
            return [_checked_id(v) for v in given]
        if prefix is None:
            if given is None:
                return [None] * n
            return [None if v is None else _checked_id(v) for v in given]
        seen = self._seen
        heads = self._heads
        blake2b = hashlib.blake2b
        out: List[Optional[bytes]] = []
        append = out.append
        for i, subject in enumerate(subjects):
            if given is not None and given[i] is not None:
                append(_checked_id(given[i]))
                continue
            extra = headers[i] if headers is not None else None
            if extra:
                digest = content_id(subject, datas[i], extra)
            else:  # content_id without headers, in one call
                head = heads.get(subject)
                if head is None:
                    head = heads[subject] = subject.encode() + b"\0\0"
                digest = blake2b(head + datas[i], digest_size=16).hexdigest()
            copies = seen.get(digest)
            if copies is None:
                seen[digest] = 1
                append(prefix + digest.encode())
            else:
                seen[digest] = copies + 1
                append(b"%b%b-%d" % (prefix, digest.encode(), copies))
        return out


def _checked_id(value: Optional[str]) -> bytes:
    if not value or "\r" in value or "\n" in value:
        raise errors.InvalidArgumentError(
            f"a msg_id must be a non-empty string on one line, got {value!r}"
        )
    return value.encode()


_ROWS_PER_ADD = 4096


def publish_all(
    js: JetStream,
    msgs: Iterable[OutMsg],
    id_prefix: Optional[str],
    ack_timeout: float = 60.0,
) -> PublishResult:
    """Publish ``msgs`` (rows: subject, data, headers, msg_id) and wait for every ack;
    raise the first failed publish's error. Ids: :class:`RowIds`."""
    ids = RowIds(id_prefix)
    with AckWindow(js, ack_timeout=ack_timeout) as window:
        chunk: List[OutMsg] = []
        for msg in msgs:
            chunk.append(msg)
            if len(chunk) >= _ROWS_PER_ADD:
                _add_rows(window, ids, chunk)
                chunk = []
        if chunk:
            _add_rows(window, ids, chunk)
        return window.finish()


def _add_rows(window: AckWindow, ids: RowIds, chunk: List[OutMsg]) -> None:
    subjects = [m[0] for m in chunk]
    datas = [m[1] for m in chunk]
    headers = [m[2] for m in chunk]
    given = [m[3] for m in chunk]
    some_headers = any(headers)
    window.add(
        subjects,
        datas,
        ids.of(subjects, datas, headers if some_headers else None, given),
        headers if some_headers else None,
    )


def publish_arrow(
    js: JetStream,
    batches: Iterable[Any],
    default_subject: Optional[str],
    id_prefix: Optional[str],
    ack_timeout: float = 60.0,
) -> PublishResult:
    """Publish Arrow record batches with the write columns (see ``_rows``), a batch at a
    time, column by column; wait for every ack. Ids: :class:`RowIds`."""
    ids = RowIds(id_prefix)
    with AckWindow(js, ack_timeout=ack_timeout) as window:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            subjects, datas, headers, given = columns_to_publish(batch, default_subject)
            window.add(subjects, datas, ids.of(subjects, datas, headers, given), headers)
        return window.finish()


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
