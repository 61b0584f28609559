"""Rows of the ``jetstream`` data source: messages to Arrow record batches (reading), and
Arrow batches or Spark rows to publishes (writing). pyarrow is imported lazily.

Read schema (``SCHEMA``)::

    subject string, data binary, headers map<string,array<string>>, stream string,
    stream_seq long, timestamp timestamp, msg_id string

Write columns: ``subject`` string (or a default subject), ``data`` binary or string,
optional ``headers`` map<string,array<string>> or map<string,string>, optional ``msg_id``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .. import errors
from ._ranges import StoredMsg

__all__ = [
    "COLUMNS",
    "MAX_BATCH_ROWS",
    "SCHEMA",
    "BatchBuilder",
    "OutMsg",
    "arrow_schema",
    "columns_to_publish",
    "msgs_from_arrow",
    "msgs_from_rows",
]

SCHEMA = (
    "subject string, data binary, headers map<string,array<string>>, stream string, "
    "stream_seq long, timestamp timestamp, msg_id string"
)
COLUMNS = ("subject", "data", "headers", "stream", "stream_seq", "timestamp", "msg_id")
MAX_BATCH_ROWS = 10_000
MSG_ID_HEADER = "Nats-Msg-Id"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)


def arrow_schema(columns: Sequence[str] = COLUMNS) -> Any:
    """The pyarrow schema of ``columns`` (a subset of :data:`COLUMNS`, in any order)."""
    import pyarrow as pa

    types = {
        "subject": pa.string(),
        "data": pa.binary(),
        "headers": pa.map_(pa.string(), pa.list_(pa.string())),
        "stream": pa.string(),
        "stream_seq": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "msg_id": pa.string(),
    }
    unknown = [c for c in columns if c not in types]
    if unknown:
        raise errors.InvalidArgumentError(
            f"the jetstream source has no column(s) {unknown}; it has {list(COLUMNS)}"
        )
    return pa.schema([(c, types[c]) for c in columns])


def _micros(t: Optional[datetime]) -> Optional[int]:
    if t is None:
        return None
    return (t - _EPOCH) // _ONE_US


class BatchBuilder:
    """Collects messages column by column; hands out a RecordBatch every ``max_rows``."""

    def __init__(
        self,
        columns: Sequence[str] = COLUMNS,
        max_rows: int = MAX_BATCH_ROWS,
        include_headers: bool = True,
    ) -> None:
        self._schema = arrow_schema(columns)
        self._columns = list(columns)
        self._include_headers = include_headers  # False: the headers column stays null
        self._max_rows = max_rows
        self._data: Dict[str, List[Any]] = {c: [] for c in self._columns}
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(self, m: StoredMsg) -> Optional[Any]:
        """Add one message; returns a full RecordBatch when ``max_rows`` is reached."""
        d = self._data
        for c in self._columns:
            if c == "subject":
                d[c].append(m.subject)
            elif c == "data":
                d[c].append(m.data)
            elif c == "headers":
                h = m.headers if self._include_headers else None
                d[c].append(None if not h else [(k, h.get_all(k)) for k in h])
            elif c == "stream":
                d[c].append(m.stream)
            elif c == "stream_seq":
                d[c].append(m.seq)
            elif c == "timestamp":
                d[c].append(_micros(m.time))
            else:  # msg_id
                h = m.headers
                d[c].append(h.get(MSG_ID_HEADER) if h else None)
        self._rows += 1
        if self._rows >= self._max_rows:
            return self.flush()
        return None

    def flush(self) -> Optional[Any]:
        """The rows collected so far as a RecordBatch (None when there are none)."""
        if not self._rows:
            return None
        import pyarrow as pa

        arrays = [pa.array(self._data[c], type=self._schema.field(c).type) for c in self._columns]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        self._data = {c: [] for c in self._columns}
        self._rows = 0
        return batch


def batches(
    msgs: Iterable[StoredMsg], columns: Sequence[str] = COLUMNS, include_headers: bool = True
) -> Iterator[Any]:
    """RecordBatches of up to MAX_BATCH_ROWS rows from ``msgs``."""
    builder = BatchBuilder(columns, include_headers=include_headers)
    for m in msgs:
        batch = builder.add(m)
        if batch is not None:
            yield batch
    last = builder.flush()
    if last is not None:
        yield last


# --- writing ---------------------------------------------------------------------------------

# subject, data, headers (None or a header mapping), msg_id (None: derive one)
OutMsg = Tuple[str, bytes, Optional[Dict[str, List[str]]], Optional[str]]


def _data_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise errors.InvalidArgumentError(
        f"the data column must be binary or string, got {type(value).__name__}"
    )


def _headers(value: Any) -> Optional[Dict[str, List[str]]]:
    """A map column as Arrow hands it out (a list of pairs) or as a Row has it (a dict);
    values are a string or a list of strings."""
    if not value:
        return None
    pairs: Iterable[Tuple[Any, Any]] = value.items() if isinstance(value, Mapping) else value
    out: Dict[str, List[str]] = {}
    for key, val in pairs:
        if val is None:
            continue
        values = [val] if isinstance(val, str) else [str(v) for v in val if v is not None]
        out.setdefault(str(key), []).extend(values)
    return out or None


def _subject(value: Any, default: Optional[str]) -> str:
    if value:
        return str(value)
    if default:
        return default
    raise errors.InvalidArgumentError(
        "a row has no subject: give a subject column or the subject option"
    )


def msgs_from_arrow(
    batches: Iterable[Any], default_subject: Optional[str] = None
) -> Iterator[OutMsg]:
    """Messages to publish from Arrow RecordBatches with the write columns."""
    for batch in batches:
        names = batch.schema.names
        _check_write_columns(names, default_subject)
        n = batch.num_rows
        none: List[Any] = [None] * n
        subjects = batch.column("subject").to_pylist() if "subject" in names else none
        datas = batch.column("data").to_pylist()
        headers = batch.column("headers").to_pylist() if "headers" in names else none
        ids = batch.column("msg_id").to_pylist() if "msg_id" in names else none
        for i in range(n):
            yield (
                _subject(subjects[i], default_subject),
                _data_bytes(datas[i]),
                _headers(headers[i]),
                None if ids[i] is None else str(ids[i]),
            )


def columns_to_publish(
    batch: Any, default_subject: Optional[str] = None
) -> Tuple[
    List[str],
    List[bytes],
    Optional[List[Optional[Dict[str, List[str]]]]],
    Optional[List[Optional[str]]],
]:
    """One Arrow RecordBatch with the write columns as lists: subjects, payloads, headers
    (None: no row has any) and msg_ids (None: no such column). The checks and defaults of
    :func:`msgs_from_arrow`, a column at a time instead of a row at a time."""
    import pyarrow as pa

    names = batch.schema.names
    _check_write_columns(names, default_subject)
    n = batch.num_rows
    if "subject" in names:
        subjects = batch.column("subject").cast(pa.string()).to_pylist()
        if None in subjects or "" in subjects:
            subjects = [_subject(v, default_subject) for v in subjects]
    else:
        assert default_subject is not None
        subjects = [default_subject] * n
    data = batch.column("data")
    if pa.types.is_string(data.type) or pa.types.is_large_string(data.type):
        data = data.cast(pa.binary())
    elif not (pa.types.is_binary(data.type) or pa.types.is_large_binary(data.type)):
        raise errors.InvalidArgumentError(
            f"the data column must be binary or string, got {data.type}"
        )
    datas = data.to_pylist()
    if None in datas:
        datas = [b"" if v is None else v for v in datas]
    headers: Optional[List[Optional[Dict[str, List[str]]]]] = None
    if "headers" in names:
        column = batch.column("headers")
        if column.null_count < n:
            headers = [_headers(v) for v in column.to_pylist()]
            if not any(headers):
                headers = None
    given: Optional[List[Optional[str]]] = None
    if "msg_id" in names:
        column = batch.column("msg_id")
        if column.null_count < n:
            given = [None if v is None else str(v) for v in column.to_pylist()]
    return subjects, datas, headers, given


def _check_write_columns(names: Sequence[str], default_subject: Optional[str]) -> None:
    if "data" not in names:
        raise errors.InvalidArgumentError(
            f"writing to jetstream needs a data column; the columns are {list(names)}"
        )
    if "subject" not in names and not default_subject:
        raise errors.InvalidArgumentError(
            f"writing to jetstream needs a subject column or the subject option; the "
            f"columns are {list(names)}"
        )


def _field(row: Any, name: str) -> Any:
    if isinstance(row, Mapping):
        return row.get(name)
    fields = getattr(row, "__fields__", None)
    if fields is not None:  # a pyspark Row
        return row[name] if name in fields else None
    return getattr(row, name, None)


def msgs_from_rows(
    rows: Iterable[Union[Any, Mapping[str, Any]]], default_subject: Optional[str] = None
) -> Iterator[OutMsg]:
    """Messages to publish from Spark Rows (or dicts) with the write columns."""
    for row in rows:
        msg_id = _field(row, "msg_id")
        yield (
            _subject(_field(row, "subject"), default_subject),
            _data_bytes(_field(row, "data")),
            _headers(_field(row, "headers")),
            None if msg_id is None else str(msg_id),
        )
