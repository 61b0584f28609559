"""Atomic batch publish (ADR-50): messages a stream stores all together, or none of them.

::

    with js.batch_publish() as batch:
        batch.add("user.7.street", b"Main St 1")
        batch.add("user.7.city", b"Springfield")
        ack = batch.commit("user.7.zip", b"12345")   # all three stored, or none

On the wire every message of a batch carries ``Nats-Batch-Id`` (a fresh id per batch) and
``Nats-Batch-Sequence`` (1, 2, ...). The server stages them and stores nothing until the last
one, which carries ``Nats-Batch-Commit``: ``1`` (it is stored too) or ``eob`` (``commit()``
without a subject: nothing more is stored; API level 4). The commit is a request answered
by the PubAck of the batch's last message, with the batch id and count.

The first message is a request too (``ack_first``): a stream that cannot take the batch
refuses it at once, not at the commit. ``ack_every=N`` makes every Nth message a request,
as flow control: the publisher waits for the server to have staged the batch so far. Every
other message is a plain publish, which the server does not answer: one refused or lost
among them leaves the batch incomplete, and the next request (at the latest the commit)
gets the server's BatchIncompleteError.

Abandoning. The server drops an uncommitted batch 10 s after its last message, and keeps at
most 50 open per stream (1000 per server): batches left to time out would soon refuse new
ones. So a batch the client gives up (an exception in the ``with`` block, ``discard()``, a
refusal, the block left without ``commit()``) is abandoned at once: one more message, its
sequence number skipping one (n + 2 after n), and the server, which drops a batch with a gap
in its sequence on the spot (nats-server's ``processJetStreamAtomicBatchMsg``, "Detect
gaps"), stores nothing of it. That message has no reply and is never stored; where no batch
is open (the server dropped it already) it is refused and changes nothing.

A batch belongs to one thread: its methods are not synchronised. Many threads can each run
a batch of their own on one connection.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Dict, Optional, Type, Union

from .. import errors
from .._nuid import NUID
from .._protocol import check_publish_subject
from .._timeouts import check_timeout
from ..msg import Headers, HeadersLike
from . import api, api_level
from .publish import nats_py_names, pub_ack, publish_headers

if TYPE_CHECKING:  # pragma: no cover
    from types import TracebackType

    from ..client import Client
    from .api_level import ApiLevels

__all__ = ["BATCH_COMMIT", "BATCH_ID", "BATCH_SEQUENCE", "AtomicBatch", "AtomicBatchPublisher"]

BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
_COMMIT_STORED = "1"  # the commit message is stored, the last of the batch
_COMMIT_EOB = "eob"  # "end of batch": commit what was added, store nothing more

_ids = NUID()  # 22 characters: the server takes up to 64

_OPEN, _COMMITTED, _DISCARDED, _FAILED = "open", "committed", "discarded", "failed"
_WHY_CLOSED = {
    _COMMITTED: "committed",
    _DISCARDED: "discarded (nothing of it is stored)",
    _FAILED: "failed: it was refused or went unanswered (nothing of it is stored)",
}

# What a refusal means and what to do about it, by err_code ({stream}: the stream's name).
_ADVICE = {
    10174: "{stream} does not allow atomic batches: set allow_atomic=True in its config",
    10176: (
        "the server abandoned the batch: a message of it is missing (refused or lost on the "
        "way), or it was idle longer than the server waits (10 s by default); publish it "
        "again as a new batch"
    ),
    10175: "a message of the batch had no Nats-Batch-Sequence",
    10177: (
        "Nats-Expected-Last-Msg-Id cannot be used in an atomic batch (expected_last_seq and "
        "expected_last_subject_seq can)"
    ),
    10179: "the batch id is longer than the 64 characters the server takes",
    10199: (
        "the batch has more messages than the server takes in one (its jetstream "
        "max_batch_size, 1000 by default): split it"
    ),
    10200: "Nats-Batch-Commit must be 1 or eob",
    10201: (
        "a Nats-Msg-Id of the batch is a duplicate, of another of its messages or of one "
        "{stream} has within its duplicate window"
    ),
    10210: (
        "{stream} has as many open atomic batches as the server allows (50 per stream, 1000 "
        "per server by default): commit or discard open ones (one left alone is dropped 10 "
        "s after its last message)"
    ),
}


class AtomicBatchPublisher:
    """The atomic batch mixin of JetStream."""

    _nc: Client
    _levels: ApiLevels
    _timeout: float

    def batch_publish(
        self,
        timeout: Optional[float] = None,
        ack_every: Optional[int] = None,
        ack_first: bool = True,
    ) -> AtomicBatch:
        """A new atomic batch (ADR-50): its messages are stored all together at
        :meth:`AtomicBatch.commit`, or none of them. Use it as a context manager: an
        exception in the block, or the block left without ``commit()``, abandons the batch.

        ``timeout``: how long each answered message (the first, every ``ack_every``-th, the
        commit) waits for the server (default: the context's timeout). ``ack_first``: the
        first message waits for the server's answer, so that a stream that cannot take the
        batch refuses it at once. ``ack_every=N``: flow control, every Nth message waits too.

        Needs nats-server 2.12 (JetStream API level 2) and a stream with
        ``allow_atomic=True``; :class:`ApiLevelError` before anything is sent otherwise.
        """
        t = self._timeout if timeout is None else check_timeout(timeout, "timeout")
        if ack_every is not None and (
            isinstance(ack_every, bool) or not isinstance(ack_every, int) or ack_every < 1
        ):
            raise errors.InvalidArgumentError(
                f"ack_every must be an int >= 1 (every Nth message waits for the server) or "
                f"None, got {ack_every!r}"
            )
        if not isinstance(ack_first, bool):
            raise errors.InvalidArgumentError(f"ack_first must be a bool, got {ack_first!r}")
        self._levels.require(api_level.ATOMIC_BATCH)
        return AtomicBatch(self._nc, self._levels, t, ack_every, ack_first)


class AtomicBatch:
    """One atomic batch: :meth:`add` messages, then :meth:`commit` (or :meth:`discard`).
    Made by ``js.batch_publish()``. Belongs to one thread (not synchronised)."""

    def __init__(
        self,
        nc: Client,
        levels: ApiLevels,
        timeout: float,
        ack_every: Optional[int],
        ack_first: bool,
    ) -> None:
        self._nc = nc
        self._levels = levels
        self._timeout = timeout
        self._ack_every = ack_every
        self._ack_first = ack_first
        self._id = _ids.next()
        # Messages that went out, or may have (a request that failed midway): the abandon
        # message must skip a number after the last the server may have seen.
        self._sent = 0
        self._eob = False  # the end-of-batch marker went out: counted in _sent, not in size
        self._first_subject = ""  # where the batch lives: its first message's stream
        self._state = _OPEN
        self._ack: Optional[api.PubAck] = None

    @property
    def id(self) -> str:
        """The batch's ``Nats-Batch-Id``."""
        return self._id

    @property
    def size(self) -> int:
        """How many messages of the batch were sent so far, the commit's own included (not
        the marker of a commit() without a subject)."""
        return self._sent - (1 if self._eob else 0)

    @property
    def closed(self) -> bool:
        """True once committed, discarded or failed: nothing more can be added."""
        return self._state != _OPEN

    @property
    def ack(self) -> Optional[api.PubAck]:
        """The commit's PubAck, once committed."""
        return self._ack

    def __repr__(self) -> str:
        return f"<AtomicBatch {self._id} {self._state}, {self._sent} messages sent>"

    def add(
        self,
        subject: str,
        data: bytes = b"",
        headers: Optional[HeadersLike] = None,
        *,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_subject_seq: Optional[int] = None,
        expected_last_subject_seq_subject: Optional[str] = None,
        msg_ttl: Optional[Union[float, str]] = None,
    ) -> None:
        """Send one message of the batch; the server stages it until the commit. The
        keywords are :meth:`JetStream.publish`'s, checked by the server at the commit
        against the stream as it was before the batch (``expected_last_seq`` only on the
        first message). Raises the server's refusal when this message waits for an answer
        (the first, every ``ack_every``-th); the batch is then abandoned."""
        self._check_open("add")
        seq = self._sent + 1
        hdrs = self._headers(
            subject,
            headers,
            seq,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_subject_seq_subject,
            msg_ttl,
        )
        every = self._ack_every
        if (seq == 1 and self._ack_first) or (every is not None and seq % every == 0):
            answer = self._request(subject, data, hdrs, seq, "message")
            if answer:  # staged: a zero-byte answer; anything else is a refusal
                self._fail()
                raise self._refusal(answer, subject, seq)
        else:
            self._publish(subject, data, hdrs, seq)

    def commit(
        self,
        subject: Optional[str] = None,
        data: bytes = b"",
        headers: Optional[HeadersLike] = None,
        *,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_subject_seq: Optional[int] = None,
        expected_last_subject_seq_subject: Optional[str] = None,
        msg_ttl: Optional[Union[float, str]] = None,
    ) -> api.PubAck:
        """Send the batch's last message and store the whole batch; returns the PubAck of
        its last stored message (``batch_id``, ``batch_size``: how many were stored).

        Without ``subject``: commit what was added and store no further message
        (``Nats-Batch-Commit: eob``; needs nats-server 2.14, API level 4).

        A refusal (an expectation that does not hold, a missing message...) raises the
        server's error, and nothing of the batch is stored. A commit that was sent and not
        answered (a timeout, a lost connection) raises :class:`BatchOutcomeUnknownError`
        (also a TimeoutError and a ConnectionLostError): the batch is stored whole or not
        at all, and its message says how to check (the Nats-Batch-Id of the last message)."""
        self._check_open("commit")
        seq = self._sent + 1
        if subject is None:
            if (
                data
                or headers
                or msg_id is not None
                or expected_stream is not None
                or expected_last_seq is not None
                or expected_last_subject_seq is not None
                or expected_last_subject_seq_subject is not None
                or msg_ttl is not None
            ):
                raise errors.InvalidArgumentError(
                    "commit() without a subject stores no message of its own: give a subject "
                    "for its data, headers and options (or add() them first)"
                )
            if not self._sent:
                raise errors.InvalidArgumentError(
                    "commit() without a subject commits what was added, and nothing was: "
                    "add() a message first, or commit one"
                )
            self._levels.require(api_level.BATCH_COMMIT_EOB)
            subject, stored = self._first_subject, self._sent
            hdrs: Headers = self._batch_headers(None, seq, _COMMIT_EOB)
            self._eob = True
        else:
            stored = seq
            hdrs = self._headers(
                subject,
                headers,
                seq,
                msg_id,
                expected_stream,
                expected_last_seq,
                expected_last_subject_seq,
                expected_last_subject_seq_subject,
                msg_ttl,
                _COMMIT_STORED,
            )
        answer = self._request(subject, data, hdrs, seq, "commit")
        try:
            ack = pub_ack(answer, subject)
        except errors.APIError:
            self._fail()
            raise self._refusal(answer, subject, seq) from None
        except errors.JetStreamError:
            self._fail()
            raise
        self._state = _COMMITTED
        self._ack = ack
        if ack.batch_id != self._id or ack.batch_size != stored:
            raise errors.JetStreamError(
                f"the server acknowledged the commit of atomic batch {self._id} ({stored} "
                f"messages) as batch {ack.batch_id!r} of {ack.batch_size!r} messages "
                f"(stream {ack.stream!r}, sequence {ack.seq})"
            )
        return ack

    def discard(self) -> None:
        """Abandon the batch: nothing of it is stored, and the server frees its place at
        once. Nothing happens if the batch is discarded or failed already."""
        if self._state == _COMMITTED:
            raise errors.BatchClosedError(
                f"atomic batch {self._id} is committed: it cannot be discarded"
            )
        if self._state == _OPEN:
            self._state = _DISCARDED
            self._abandon()

    def __enter__(self) -> AtomicBatch:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._state != _OPEN:
            return
        self._state = _DISCARDED
        self._abandon()
        if exc_type is None and self._sent:
            raise errors.BatchNotCommittedError(
                f"atomic batch {self._id} was never committed: the with block ended without "
                f"commit(), and its {self._sent} message(s) were abandoned; none is stored"
            )

    # --- the wire --------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        if self._state != _OPEN:
            raise errors.BatchClosedError(
                f"{what}() on atomic batch {self._id}, which is {_WHY_CLOSED[self._state]}: "
                "start a new one with js.batch_publish()"
            )

    def _headers(
        self,
        subject: str,
        headers: Optional[HeadersLike],
        seq: int,
        msg_id: Optional[str],
        expected_stream: Optional[str],
        expected_last_seq: Optional[int],
        expected_last_subject_seq: Optional[int],
        expected_last_subject_seq_subject: Optional[str],
        msg_ttl: Optional[Union[float, str]],
        commit: Optional[str] = None,
    ) -> Headers:
        """A message's headers: the user's, publish's options, the batch's. Every argument
        is checked here, before anything is sent."""
        check_publish_subject(subject)
        if headers:
            for key in headers:
                if isinstance(key, str) and key.lower().startswith("nats-batch-"):
                    raise errors.InvalidArgumentError(
                        f"headers must not carry {key}: the batch sets {BATCH_ID}, "
                        f"{BATCH_SEQUENCE} and {BATCH_COMMIT} itself"
                    )
        if msg_ttl is not None:
            _, _, headers = nats_py_names(b"", None, None, None, headers, msg_ttl)
        merged = publish_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            None,  # Nats-Expected-Last-Msg-Id: batches cannot have it (10177)
            expected_last_subject_seq,
            expected_last_subject_seq_subject,
        )
        return self._batch_headers(merged, seq, commit)

    def _batch_headers(
        self, headers: Optional[HeadersLike], seq: int, commit: Optional[str]
    ) -> Headers:
        merged = Headers(headers) if headers else Headers()  # a copy: never the caller's
        merged.add(BATCH_ID, self._id)
        merged.add(BATCH_SEQUENCE, str(seq))
        if commit is not None:
            merged.add(BATCH_COMMIT, commit)
        return merged

    def _went_out(self, subject: str, seq: int) -> None:
        """Message ``seq`` went out (or may have): count it."""
        self._sent = seq
        if seq == 1:
            self._first_subject = subject

    def _publish(self, subject: str, data: bytes, hdrs: Headers, seq: int) -> None:
        try:
            self._nc.publish(subject, data, headers=hdrs)
        except errors.InvalidArgumentError:
            raise  # refused before it was sent (too large, say): the batch goes on as before
        except BaseException:
            self._went_out(subject, seq)
            self._fail()
            raise
        self._went_out(subject, seq)

    def _outcome_unknown(
        self, subject: str, seq: int, cause: str
    ) -> errors.BatchOutcomeUnknownError:
        """The error for a commit that was sent and not answered."""
        return errors.BatchOutcomeUnknownError(
            f"the commit ({seq}) of atomic batch {self._id} on {subject!r} was sent, and "
            f"{cause}: the batch is stored whole or not at all, and which is unknown. To "
            f"find out, read the stream's last message (js.get_last_msg(stream, "
            f"{subject!r}) or the stream's last sequence): it was stored if that message's "
            f"Nats-Batch-Id header is {self._id!r}. Do not send it again before checking, "
            "and then only with an expectation the first batch would break if it landed "
            "late (expected_last_subject_seq or expected_last_seq on the first message, as "
            "read): a commit that timed out may still be on its way"
        )

    def _request(self, subject: str, data: bytes, hdrs: Headers, seq: int, what: str) -> bytes:
        """Send message ``seq`` as a request; its answer's bytes. ``what``: "commit" or
        "message", for the errors."""
        try:
            reply = self._nc.request(subject, data, timeout=self._timeout, headers=hdrs)
        except errors.InvalidArgumentError:
            raise  # refused before it was sent: the batch goes on as before
        except errors.NoRespondersError:
            self._went_out(subject, seq)
            self._fail()
            raise errors.NoStreamResponseError(
                f"no stream answered {what} {seq} of atomic batch {self._id} on {subject!r}: "
                "no stream captures this subject; the batch is abandoned"
            ) from None
        except errors.TimeoutError:
            self._went_out(subject, seq)
            self._fail()
            if what == "commit":
                raise self._outcome_unknown(
                    subject, seq, f"no answer within {self._timeout} s"
                ) from None
            raise errors.TimeoutError(
                f"no answer to {what} {seq} of atomic batch {self._id} on {subject!r} within "
                f"{self._timeout} s: the batch is abandoned"
            ) from None
        except errors.ConnectionLostError as exc:
            self._went_out(subject, seq)
            self._fail()
            if what == "commit":
                # The commit may have reached the server before the connection dropped:
                # the batch is then stored whole, so "failed" would invite a double store.
                raise self._outcome_unknown(
                    subject, seq, f"the connection was lost ({exc})"
                ) from exc
            raise
        except BaseException:
            self._went_out(subject, seq)
            self._fail()
            raise
        self._went_out(subject, seq)
        return reply.data

    def _refusal(self, answer: bytes, subject: str, seq: int) -> errors.JetStreamError:
        """The error an answer carries, with what it means for the batch."""
        try:
            obj = json.loads(answer)
            err = obj["error"]
            code, err_code = int(err["code"]), int(err["err_code"])
            description = str(err.get("description", ""))
        except (ValueError, KeyError, TypeError, RecursionError):
            return errors.JetStreamError(
                f"atomic batch {self._id}: the answer to message {seq} on {subject!r} is no "
                f"ack the server sends: {answer[:80]!r}"
            )
        stream = obj.get("stream")
        named = f"stream {stream!r}" if isinstance(stream, str) and stream else "the stream"
        advice = _ADVICE.get(err_code, "").format(stream=named)
        return errors.api_error(
            code,
            err_code,
            description,
            subject,
            explanation=f"atomic batch {self._id} (message {seq}'s answer): nothing of it is "
            "stored" + (f"; {advice}" if advice else ""),
        )

    def _fail(self) -> None:
        self._state = _FAILED
        self._abandon()

    def _abandon(self) -> None:
        """Make the server drop the batch now, not after its 10 s: a message skipping a
        sequence number is a gap, and a batch with a gap is dropped on the spot."""
        if not self._sent:
            return  # nothing went out: the server has no batch
        gap: Dict[str, str] = {BATCH_ID: self._id, BATCH_SEQUENCE: str(self._sent + 2)}
        try:
            self._nc.publish(self._first_subject, b"", headers=gap)
        except errors.NATSError:
            pass  # closed or broken connection: the server drops the batch after its 10 s
