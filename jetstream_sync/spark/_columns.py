"""Raw JetStream deliveries to Arrow columns, a batch at a time: no object per message.

A consumer's delivery carries its metadata in its reply subject
(``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``, or the v2 form
with a domain and an account hash in front and a random token behind). Arrow compute splits
a whole batch of them at once into stream sequence, consumer sequence and timestamp; the
subjects and payloads go to Arrow as the lists they are. Only messages that carry headers
cost Python per message, and only when the headers or ``msg_id`` column is read.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

from .. import errors
from .._seam import raw_headers
from ..msg import Msg, parse_header_block
from ._rows import MSG_ID_HEADER, arrow_schema

__all__ = ["AckColumns", "ColumnBuilder", "ack_columns"]

_subject = operator.attrgetter("subject")
_data = operator.attrgetter("data")
_reply = operator.attrgetter("reply")


@dataclass
class AckColumns:
    """Per delivery: stream sequence, consumer sequence, store time in ns (int64 arrays)."""

    sseq: Any
    cseq: Any
    ts: Any

    def __len__(self) -> int:
        return len(self.sseq)

    def slice(self, n: int) -> AckColumns:
        """The first ``n`` deliveries' columns."""
        return AckColumns(self.sseq.slice(0, n), self.cseq.slice(0, n), self.ts.slice(0, n))


def ack_columns(replies: List[str]) -> AckColumns:
    """Split ``$JS.ACK`` reply subjects into sequence and time columns (Arrow compute);
    NotJSMessageError names the first reply that is not one.

    The replies of one consumer share everything up to the delivery count, which is 1 for
    every message of an ack-none consumer: after checking that they do, only the rest
    (``<sseq>.<cseq>.<ts>.<pending>``) is split, a fifth of the work of splitting it all.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    first = replies[0] if replies else ""
    tokens = first.split(".")
    if len(tokens) == 9:
        head = 5  # $JS.ACK.<stream>.<consumer>.<delivered>.
    elif len(tokens) > 10:
        head = 7  # $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.
    else:
        return _ack_columns_one_by_one(replies)
    prefix = ".".join(tokens[:head]) + "."
    if tokens[:2] != ["$JS", "ACK"]:
        return _ack_columns_one_by_one(replies)
    raw = pa.array(replies, pa.string())
    if not pc.all(pc.starts_with(raw, prefix)).as_py():
        return _ack_columns_one_by_one(replies)
    rest = pc.binary_slice(raw.cast(pa.binary()), len(prefix), 1 << 30)
    dots = pc.min_max(pc.count_substring(rest, b".")).as_py()
    if not dots["min"] == dots["max"] == len(tokens) - head - 1:  # a reply of another form
        return _ack_columns_one_by_one(replies)
    parts = pc.split_pattern(rest, pattern=b".", max_splits=3)
    try:
        numbers = [pc.list_element(parts, k).cast(pa.string()).cast(pa.int64()) for k in range(3)]
    except (pa.ArrowInvalid, ValueError):
        return _ack_columns_one_by_one(replies)
    if any(pc.min(column).as_py() < 0 for column in numbers):
        return _ack_columns_one_by_one(replies)  # which names the reply at fault
    return AckColumns(*numbers)


def _ack_columns_one_by_one(replies: List[str]) -> AckColumns:
    """The slow path, for a batch whose replies differ in form (or are not acks)."""
    import pyarrow as pa

    sseq: List[int] = []
    cseq: List[int] = []
    ts: List[int] = []
    for reply in replies:
        tokens = reply.split(".")
        n = len(tokens)
        first = 5 if n == 9 else 7 if n > 10 else -1
        try:
            if first < 0 or tokens[0] != "$JS" or tokens[1] != "ACK":
                raise ValueError
            numbers = [int(t) for t in tokens[first : first + 3]]
            if min(numbers) < 0:
                raise ValueError
            sseq.append(numbers[0])
            cseq.append(numbers[1])
            ts.append(numbers[2])
        except ValueError:
            raise errors.NotJSMessageError(
                f"not a JetStream delivery: reply subject {reply!r}"
            ) from None
    return AckColumns(*(pa.array(col, pa.int64()) for col in (sseq, cseq, ts)))


def _headers_of(hdr: Optional[bytes]) -> Any:
    if hdr is None:
        return None
    _, _, headers = parse_header_block(hdr)
    return [(k, headers.get_all(k)) for k in headers] or None


_MSG_ID_LOWER = MSG_ID_HEADER.lower().encode()


def _msg_id_of(hdr: Optional[bytes]) -> Optional[str]:
    # Header names match without regard to case (Headers.get), as on the direct-get path.
    if hdr is None or _MSG_ID_LOWER not in hdr.lower():
        return None
    _, _, headers = parse_header_block(hdr)
    return headers.get(MSG_ID_HEADER)


class ColumnBuilder:
    """Record batches of ``columns`` (a subset of the read schema) from raw deliveries."""

    def __init__(self, stream: str, columns: Sequence[str], include_headers: bool = True):
        self._stream = stream
        self._columns = list(columns)
        self._schema = arrow_schema(columns)
        self._include_headers = include_headers

    def build(self, msgs: List[Msg], acks: AckColumns) -> Any:
        """One RecordBatch of ``msgs``, whose reply subjects ``acks`` holds, split."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(msgs)
        hdrs: Optional[List[Optional[bytes]]] = None
        arrays = []
        for c in self._columns:
            kind = self._schema.field(c).type
            if c == "subject":
                arrays.append(pa.array(list(map(_subject, msgs)), kind))
            elif c == "data":
                arrays.append(pa.array(list(map(_data, msgs)), kind))
            elif c == "stream":
                arrays.append(pa.repeat(pa.scalar(self._stream, kind), n))
            elif c == "stream_seq":
                arrays.append(acks.sseq)
            elif c == "timestamp":
                micros = pc.divide(acks.ts, 1000)  # the store keeps ns, Spark has us
                arrays.append(micros.cast(pa.int64()).view(kind))
            elif c in ("headers", "msg_id"):
                if hdrs is None:
                    hdrs = list(map(raw_headers, msgs))
                # the usual case: no message has headers
                if not any(hdrs) or (c == "headers" and not self._include_headers):
                    arrays.append(pa.nulls(n, kind))
                elif c == "headers":
                    arrays.append(pa.array([_headers_of(h) for h in hdrs], kind))
                else:
                    arrays.append(pa.array([_msg_id_of(h) for h in hdrs], kind))
            else:  # arrow_schema refused unknown columns already
                raise errors.InvalidArgumentError(f"unknown column {c!r}")
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)
