"""Object Store (ADR-20): objects of any size kept as chunks in a stream.

A bucket is the stream ``OBJ_<bucket>`` on two subject trees. An object is

* its chunks, messages on ``$O.<bucket>.C.<nuid>``, where the nuid is new for every put of
  the object (so a put never mixes its chunks with those of the put it replaces), and
* its info, one JSON message on ``$O.<bucket>.M.<base64url of the name>``, published with a
  rollup header so that the stream keeps only the newest info of each name.

``put`` reads its source one chunk at a time and publishes the chunks pipelined, with at most
a bounded window of acks outstanding; the info goes last, and only then are the chunks of
the object it replaced purged. ``get`` reads the chunks with an ordered consumer, a bounded
batch at a time, checks their size and SHA-256 digest against the info, and either returns
the bytes or writes them to a file object as they come. Memory therefore stays within a few
chunks whatever the object's size (unless ``get`` is asked for the bytes themselves).

The info's modification time is not trusted from the JSON: a read takes the server's time of
the info message, as ADR-20 says. A put writes the current time too, for readers that take
it from the JSON (nats.js does).
"""

from __future__ import annotations

import base64
import binascii
import collections
import concurrent.futures
import dataclasses
import datetime as _dt
import hashlib
import io
import json
import re
import time
from dataclasses import dataclass, field
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
    Deque,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
)

from .. import errors
from .._nuid import NUID
from .._timeouts import check_timeout
from ..msg import Headers
from . import api
from ._bucket_config import BucketConfigForms

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future

    from .context import JetStream
    from .ordered import OrderedConsumer

__all__ = [
    "ObjectHeaders",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectResult",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreFactory",
    "ObjectStoreStatus",
    "ObjectWatcher",
]

OBJ_STREAM_TEMPLATE = "OBJ_{bucket}"
OBJ_ALL_CHUNKS_PRE_TEMPLATE = "$O.{bucket}.C.>"
OBJ_ALL_META_PRE_TEMPLATE = "$O.{bucket}.M.>"
OBJ_CHUNKS_PRE_TEMPLATE = "$O.{bucket}.C.{obj}"
OBJ_META_PRE_TEMPLATE = "$O.{bucket}.M.{obj}"
OBJ_DEFAULT_CHUNK_SIZE = 128 * 1024
OBJ_DIGEST_TYPE = "SHA-256="

VALID_BUCKET_RE = re.compile(r"[a-zA-Z0-9_-]+")
_ROLLUP = {"Nats-Rollup": "sub"}  # keep only this message of its subject
_PUT_WINDOW_BYTES = 8 * 1024 * 1024  # chunks a put may have in flight, unacknowledged
_GET_BATCH_BYTES = 4 * 1024 * 1024  # chunks one pull of a get may bring
_MAX_BATCH = 256  # chunks in flight or in one pull, however small they are
_MAX_LINK_HOPS = 8  # a link to a link to ... (only other clients make those)
_WATCH_BATCH = 256

_nuids = NUID()


# --- the models: ADR-20's JSON ---------------------------------------------------------------


class ObjectHeaders(Dict[str, str]):
    """An object's headers as nats-py reads them, a ``dict`` of one str per name (the first
    value), that keeps every value too: :meth:`get_all`, and ``all_headers`` of the info or
    meta they belong to. ADR-20 (nats.go, nats.js, the nats CLI) stores a list per name.

    A plain dict to read, compare, print and JSON-encode; set or delete a name as in any
    dict (setting a new value drops the name's other values)."""

    __slots__ = ("_lists",)

    def __init__(self, lists: Optional[Mapping[str, List[str]]] = None) -> None:
        lists = {k: list(v) for k, v in (lists or {}).items() if v}
        super().__init__({k: v[0] for k, v in lists.items()})
        self._lists: Dict[str, List[str]] = lists

    def get_all(self, name: str) -> List[str]:
        """Every value of ``name`` in order; an empty list when there is none."""
        if name not in self:
            return []
        value = self[name]
        if not isinstance(value, str):  # a list put in by hand: its values
            return list(value)
        kept = self._lists.get(name)
        return list(kept) if kept and kept[0] == value else [value]

    def lists(self) -> Dict[str, List[str]]:
        """Every name with all its values, as ADR-20 stores them."""
        return {k: self.get_all(k) for k in self}


def _all_headers(headers: object) -> Optional[Dict[str, List[str]]]:
    if headers is None:
        return None
    if isinstance(headers, ObjectHeaders):
        return headers.lists()
    return _header_lists(headers, "headers")


@dataclass(repr=False)
class ObjectLink(api.Base):
    """A link to another object (``name`` set) or to a whole bucket (``name`` empty)."""

    bucket: str = ""
    name: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class ObjectMetaOptions(api.Base):
    """An object's options: a ``link`` to another object or bucket, and the chunk size it was put
    with."""

    link: Optional[ObjectLink] = None
    max_chunk_size: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class ObjectMeta(api.Base):
    """What the user says about an object. ``headers`` maps a name to a str, as nats-py's,
    or to a list of str for several values; ``all_headers`` reads them as lists (ADR-20's
    form). ``metadata`` is free-form str to str."""

    name: Optional[str] = None
    description: Optional[str] = None
    headers: Optional[Dict[str, Any]] = None
    options: Optional[ObjectMetaOptions] = None
    metadata: Optional[Dict[str, str]] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    _NATS_PY_ORDER: ClassVar[Tuple[str, ...]] = (
        "name",
        "description",
        "headers",
        "options",
    )

    @property
    def all_headers(self) -> Optional[Dict[str, List[str]]]:
        """Every header with all its values (a list per name), None when there are none."""
        return _all_headers(self.headers)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON ADR-20 stores: headers as a list of values per name."""
        out = super().to_dict()
        if self.headers is not None:
            out["headers"] = _all_headers(self.headers)
        return out


@dataclass(repr=False)
class ObjectInfo(api.Base):
    """An object's meta plus what the store knows of it: its bucket, the nuid of its chunks,
    size, chunk count, digest, whether it is deleted, and ``mtime`` (the server's time of
    the info message)."""

    name: str = ""
    bucket: str = ""
    nuid: str = ""
    size: int = 0
    mtime: Optional[_dt.datetime] = None
    chunks: int = 0
    digest: Optional[str] = None
    deleted: bool = False
    description: Optional[str] = None
    headers: Optional[Dict[str, str]] = None
    options: Optional[ObjectMetaOptions] = None
    metadata: Optional[Dict[str, str]] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    _NATS_PY_ORDER: ClassVar[Tuple[str, ...]] = (
        "name",
        "bucket",
        "nuid",
        "size",
        "mtime",
        "chunks",
        "digest",
        "deleted",
        "description",
        "headers",
        "options",
    )

    @property
    def all_headers(self) -> Optional[Dict[str, List[str]]]:
        """Every header with all its values, as ADR-20 stores them (``{'K': ['a', 'b']}``);
        ``headers`` has the first value of each, as nats-py reads them. None when none."""
        return _all_headers(self.headers)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON ADR-20 stores: headers as a list of values per name."""
        out = super().to_dict()
        if self.headers is not None:
            out["headers"] = _all_headers(self.headers)
        return out

    @property
    def meta(self) -> ObjectMeta:
        """The user's part, to edit and give to ``update_meta``."""
        return ObjectMeta(
            name=self.name,
            description=self.description,
            headers=_object_headers(_all_headers(self.headers)),
            options=dataclasses.replace(self.options) if self.options else None,
            metadata=dict(self.metadata) if self.metadata is not None else None,
        )

    def is_link(self) -> bool:
        """True when the object is a link to another object or bucket."""
        return self.options is not None and self.options.link is not None


@dataclass
class ObjectStoreConfig(BucketConfigForms):
    """A bucket's settings. ``ttl`` in seconds (None: forever), ``max_bytes`` None or 0 for
    no limit; ``compression`` stores the chunks s2-compressed (server 2.10+)."""

    bucket: Optional[str] = None
    description: Optional[str] = None
    ttl: Optional[float] = None
    max_bytes: Optional[int] = None
    storage: Optional[api.StorageType] = None
    replicas: int = 1
    placement: Optional[api.Placement] = None
    metadata: Optional[Dict[str, str]] = None
    compression: bool = False


@dataclass
class ObjectResult:
    """What ``get`` returns: the info, and the data (empty when written to ``writeinto``)."""

    info: ObjectInfo
    data: bytes = b""


@dataclass(frozen=True)
class ObjectStoreStatus:
    """A bucket's settings and size, from its stream."""

    stream_info: api.StreamInfo
    bucket: str

    @property
    def description(self) -> Optional[str]:
        """The bucket's description."""
        return self.stream_info.config.description

    @property
    def ttl(self) -> Optional[float]:
        """Seconds an object is kept; 0 or None is forever."""
        return self.stream_info.config.max_age

    @property
    def storage_type(self) -> Optional[api.StorageType]:
        """The bucket stream's storage (file or memory)."""
        return self.stream_info.config.storage

    @property
    def replicas(self) -> Optional[int]:
        """The bucket stream's replica count."""
        return self.stream_info.config.num_replicas

    @property
    def sealed(self) -> bool:
        """True when the bucket is sealed (read-only)."""
        return bool(self.stream_info.config.sealed)

    @property
    def size(self) -> int:
        """Bytes stored, chunks and infos together."""
        return self.stream_info.state.bytes

    @property
    def metadata(self) -> Optional[Dict[str, str]]:
        """The bucket stream's metadata."""
        return self.stream_info.config.metadata

    @property
    def is_compressed(self) -> bool:
        """True when the bucket's stream is compressed."""
        compression = self.stream_info.config.compression
        return compression is not None and compression != api.StoreCompression.NONE

    @property
    def backing_store(self) -> str:
        """Always ``"JetStream"``."""
        return "JetStream"


# --- checks and conversions ------------------------------------------------------------------


def _check_bucket(bucket: object) -> str:
    if not isinstance(bucket, str) or VALID_BUCKET_RE.fullmatch(bucket) is None:
        raise errors.InvalidBucketNameError(
            f"invalid bucket name {bucket!r}: it must be one or more of A-Z a-z 0-9 _ -"
        )
    return bucket


def _check_name(name: object, what: str = "object name") -> str:
    if not isinstance(name, str):
        raise errors.InvalidObjectNameError(f"{what} must be a str, got {type(name).__name__}")
    if not name:
        raise errors.InvalidObjectNameError(f"{what} must not be empty")
    return name


def _encode_name(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def _object_headers(lists: Optional[Dict[str, List[str]]]) -> Optional[ObjectHeaders]:
    return None if lists is None else ObjectHeaders(lists)


def _header_lists(headers: object, what: str) -> Optional[Dict[str, List[str]]]:
    """Headers as ADR-20 stores them, name to list of values; a str value is one value, and
    a :class:`Headers` keeps its repeated values. TypeError if they are anything else."""
    if headers is None:
        return None
    if isinstance(headers, ObjectHeaders):
        return headers.lists()
    if isinstance(headers, Headers):
        out: Dict[str, List[str]] = {}
        for key, value in headers.multi_items():
            out.setdefault(key, []).append(value)
        return out
    if not isinstance(headers, Mapping):
        raise TypeError(f"{what} must be a mapping, got {type(headers).__name__}")
    out = {}
    for key, value in headers.items():
        values = [value] if isinstance(value, str) else value
        if (
            not isinstance(key, str)
            or not isinstance(values, (list, tuple))
            or not all(isinstance(v, str) for v in values)
        ):
            raise TypeError(f"{what} must map str to str or a list of str, got {key!r}: {value!r}")
        out[key] = list(values)
    return out


def _user_headers(headers: object) -> Optional[Dict[str, List[str]]]:
    try:
        return _header_lists(headers, "headers")
    except TypeError as exc:
        raise errors.InvalidArgumentError(str(exc)) from None


def _check_meta(meta: object, what: str) -> ObjectMeta:
    if not isinstance(meta, ObjectMeta):
        raise errors.InvalidArgumentError(
            f"{what} must be an ObjectMeta, got {type(meta).__name__}"
        )
    if meta.metadata is not None and (
        not isinstance(meta.metadata, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.metadata.items())
    ):
        raise errors.InvalidArgumentError(f"{what}.metadata must map str to str")
    if meta.description is not None and not isinstance(meta.description, str):
        raise errors.InvalidArgumentError(f"{what}.description must be a str")
    return meta


def _digest(sha256: bytes) -> str:
    return OBJ_DIGEST_TYPE + base64.urlsafe_b64encode(sha256).decode()


def _parse_digest(digest: Optional[str]) -> Optional[bytes]:
    """The 32 bytes of ``SHA-256=<base64>`` (URL-safe or standard alphabet, as other
    clients may write it); None when it is not one."""
    if not digest or digest[: len(OBJ_DIGEST_TYPE)].upper() != OBJ_DIGEST_TYPE:
        return None
    value = digest[len(OBJ_DIGEST_TYPE) :].replace("+", "-").replace("/", "_")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def _parse_info(data: bytes, where: str, mtime: Optional[_dt.datetime]) -> ObjectInfo:
    """An ObjectInfo from a stored info message; BadObjectMetaError naming ``where`` when it
    is not one. The JSON's own mtime is replaced by ``mtime`` (the server's)."""
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise TypeError(f"a JSON {type(raw).__name__}, not an object")
        raw.pop("mtime", None)
        stored = _header_lists(raw.pop("headers", None), "headers")
        info = ObjectInfo.from_dict(raw)
        info.headers = _object_headers(stored)
        for key, kind in (("name", str), ("bucket", str), ("nuid", str)):
            if not isinstance(getattr(info, key), kind):
                raise TypeError(f"{key} is not a str")
        for key in ("size", "chunks"):
            value = getattr(info, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TypeError(f"{key} {value!r} is not a count")
        if info.digest is not None and not isinstance(info.digest, str):
            raise TypeError("digest is not a str")
        if info.options is not None and info.options.link is not None:
            link = info.options.link
            if not isinstance(link.bucket, str) or not isinstance(link.name, (str, type(None))):
                raise TypeError("a link without a bucket name")
    except (ValueError, TypeError, errors.JetStreamError) as exc:
        raise errors.BadObjectMetaError(f"{where}: the stored info is not valid: {exc}") from None
    info.deleted = bool(info.deleted)
    info.mtime = mtime
    return info


def _chunk_size(options: Optional[ObjectMetaOptions], max_payload: int) -> int:
    size = options.max_chunk_size if options is not None else None
    if size is None or size == 0:
        size = OBJ_DEFAULT_CHUNK_SIZE
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise errors.InvalidArgumentError(f"max_chunk_size must be an int > 0, got {size!r}")
    return min(size, max_payload)  # as nats.js: a chunk must fit in one message


def _reader(data: object) -> Callable[[int], bytes]:
    """``read(n)`` over put's source: bytes-like, str, or a binary file object (a text file
    is read through its binary buffer)."""
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data).cast("B")
        pos = 0

        def from_memory(n: int) -> bytes:
            nonlocal pos
            piece = bytes(view[pos : pos + n])
            pos += len(piece)
            return piece

        return from_memory
    if isinstance(data, io.TextIOBase):
        buffer = getattr(data, "buffer", None)
        if buffer is None:
            raise errors.InvalidArgumentError(
                f"put needs bytes, str or a binary file object; {type(data).__name__} is a "
                "text stream without a binary buffer"
            )
        data = buffer
    read = getattr(data, "read", None)
    if not callable(read):
        raise errors.InvalidArgumentError(
            f"put needs bytes, str or a binary file object, got {type(data).__name__}"
        )
    source = type(data).__name__

    def from_file(n: int) -> bytes:
        piece = read(n)
        if piece is None:
            raise errors.InvalidArgumentError(
                f"put: {source}.read() returned None: non-blocking sources are not supported"
            )
        if not isinstance(piece, (bytes, bytearray)):
            raise errors.InvalidArgumentError(
                f"put: {source}.read() returned {type(piece).__name__}, not bytes"
            )
        return bytes(piece)

    return from_file


def _chunks(read: Callable[[int], bytes], size: int) -> Iterator[bytes]:
    """Full chunks of ``size`` bytes (the last one shorter) until the source is exhausted;
    a source that returns short reads is read again until the chunk is full."""
    while True:
        chunk = read(size)
        if not chunk:
            return
        if len(chunk) < size:
            parts = [chunk]
            have = len(chunk)
            while have < size:
                more = read(size - have)
                if not more:
                    break
                parts.append(more)
                have += len(more)
            chunk = b"".join(parts)
        yield chunk


def _writer(writeinto: object) -> Optional[Callable[[bytes], None]]:
    """A function that writes all of a chunk to ``writeinto`` (a binary file object, or a
    text file with a binary buffer), or None without one."""
    if writeinto is None:
        return None
    target: Any = writeinto
    if isinstance(writeinto, io.TextIOBase):
        buffer = getattr(writeinto, "buffer", None)
        if buffer is None:
            raise errors.InvalidArgumentError(
                f"writeinto must be a binary file object; {type(writeinto).__name__} is a "
                "text stream without a binary buffer"
            )
        writeinto.flush()  # what was written as text goes first
        target = buffer
    write = getattr(target, "write", None)
    if not callable(write):
        raise errors.InvalidArgumentError(
            f"writeinto must be a binary file object, got {type(writeinto).__name__}"
        )

    def write_all(data: bytes) -> None:
        n = write(data)
        if n is None or n >= len(data):  # buffered writers take everything
            return
        view = memoryview(data)[n:]
        while view:  # a raw file may take less: the rest goes in more writes
            if n <= 0:
                raise errors.InvalidArgumentError(
                    f"writeinto.write() took {n} of {len(view)} bytes: cannot write the object"
                )
            n = write(view)
            if n is None or n >= len(view):
                return
            view = view[n:]

    return write_all


def _wait_ack(fut: Future[api.PubAck], timeout: float, what: str) -> None:
    """Wait up to ``timeout`` for a chunk's ack; its own error, if it failed, as it is."""
    try:
        fut.result(timeout)
    except concurrent.futures.TimeoutError:
        # concurrent.futures.TimeoutError is the builtin TimeoutError, which the package's
        # TimeoutError subclasses: the future may have failed with a timeout of its own
        # (say, the publisher expiring a late ack) that must keep its words.
        if not fut.done():
            raise errors.TimeoutError(f"{what}: no ack within {timeout} s") from None
        fut.result(0)  # done: its own outcome (an error raises as it is)


# --- the bucket --------------------------------------------------------------------------------


class ObjectStore:
    """One bucket, made by ``js.create_object_store()`` or ``js.object_store()``.

    Thread-safe in the sense that every call stands alone: two puts of the same name race,
    and the info published last wins (the loser's chunks stay until the name is put again
    or deleted).
    """

    def __init__(self, name: str, stream: str, js: JetStream, *, direct: bool = True) -> None:
        self._name = _check_bucket(name)
        self._stream = api.check_stream_name(stream)
        self._js = js
        self._direct = direct  # read infos with direct gets (the stream allows them)

    def __repr__(self) -> str:
        return f"<ObjectStore {self._name!r}>"

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self._name

    @property
    def stream_name(self) -> str:
        """The name of the bucket's stream."""
        return self._stream

    def _where(self, name: str) -> str:
        return f"object {name!r} in bucket {self._name!r}"

    def _meta_subject(self, name: str) -> str:
        return OBJ_META_PRE_TEMPLATE.format(bucket=self._name, obj=_encode_name(name))

    def _chunk_subject(self, nuid: str) -> str:
        return OBJ_CHUNKS_PRE_TEMPLATE.format(bucket=self._name, obj=nuid)

    # --- infos ------------------------------------------------------------------------------

    def _last_msg(self, subject: str, direct: Optional[bool] = None) -> Optional[api.RawStreamMsg]:
        """The newest message on ``subject``; None when there is none. ``direct`` (default:
        the bucket's): a direct get, which any replica answers; False asks the leader."""
        direct = self._direct if direct is None else direct
        try:
            try:
                return self._js.get_msg(self._stream, last_by_subject=subject, direct=direct)
            except errors.APIError:
                raise
            except (errors.JetStreamError, errors.NoRespondersError):
                if not direct:
                    raise
                # Nobody answered the direct get: the stream is gone, or does not allow
                # direct gets. The API says which.
                return self._js.get_msg(self._stream, last_by_subject=subject)
        except errors.NoMessageFoundError:
            return None
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code,
                exc.err_code,
                f"object store bucket {self._name!r} not found (no stream {self._stream!r})",
            ) from exc

    def get_info(self, name: str, show_deleted: bool = False) -> ObjectInfo:
        """The object's info; ObjectNotFoundError if there is none, or (unless
        ``show_deleted``) the object is deleted."""
        name = _check_name(name)
        msg = self._last_msg(self._meta_subject(name))
        if msg is None:
            raise errors.ObjectNotFoundError(f"{self._where(name)} not found")
        info = _parse_info(msg.data, self._where(name), msg.time)
        if info.deleted and not show_deleted:
            raise errors.ObjectNotFoundError(f"{self._where(name)} is deleted")
        return info

    def _existing(self, name: str) -> Optional[ObjectInfo]:
        try:
            return self.get_info(name, show_deleted=True)
        except errors.ObjectNotFoundError:
            return None

    def _publish_meta(self, info: ObjectInfo) -> ObjectInfo:
        """Store ``info`` as the newest (and only) info of its name."""
        info.mtime = _dt.datetime.now(_dt.timezone.utc)
        payload = json.dumps(info.to_dict(), separators=(",", ":")).encode()
        self._js.publish(self._meta_subject(info.name), payload, headers=_ROLLUP)
        return info

    def _purge(self, subject: str) -> None:
        self._js.purge_stream(self._stream, subject=subject)

    # --- put ----------------------------------------------------------------------------------

    def put(
        self,
        name: str,
        data: Union[bytes, bytearray, memoryview, str, IO[Any], io.IOBase],
        meta: Optional[ObjectMeta] = None,
    ) -> ObjectInfo:
        """Store ``data`` (bytes, str or a binary file object, read chunk by chunk) as the
        object ``name`` (or ``meta.name`` when ``name`` is empty), replacing any object of
        that name. Returns its info."""
        if meta is None:
            meta = ObjectMeta()
        _check_meta(meta, "meta")
        obj = _check_name(name if name or meta.name is None else meta.name)
        if meta.options is not None and not isinstance(meta.options, ObjectMetaOptions):
            raise errors.InvalidArgumentError(
                f"meta.options must be an ObjectMetaOptions, got {type(meta.options).__name__}"
            )
        if meta.options is not None and meta.options.link is not None:
            raise errors.InvalidArgumentError(
                f"put of {self._where(obj)}: meta.options.link is set; links are made "
                "by add_link and add_bucket_link"
            )
        headers = _user_headers(meta.headers)
        chunk_size = _chunk_size(meta.options, self._js.nc.max_payload)
        read = _reader(data)
        options = dataclasses.replace(meta.options or ObjectMetaOptions())
        options.max_chunk_size = chunk_size

        old = self._existing(obj)
        nuid = _nuids.next()
        subject = self._chunk_subject(nuid)
        sha = hashlib.sha256()
        size = count = 0
        window: Deque[Future[api.PubAck]] = collections.deque()
        depth = max(1, min(_MAX_BATCH, _PUT_WINDOW_BYTES // chunk_size))
        wait = self._js.timeout * 2  # the publisher expires a late ack after one timeout
        what = f"put of {self._where(obj)}"
        try:
            for chunk in _chunks(read, chunk_size):
                sha.update(chunk)
                window.append(self._js.publish_async(subject, chunk))
                size += len(chunk)
                count += 1
                if len(window) >= depth:
                    _wait_ack(window.popleft(), wait, what)
            while window:
                _wait_ack(window.popleft(), wait, what)
            info = ObjectInfo(
                name=obj,
                bucket=self._name,
                nuid=nuid,
                size=size,
                chunks=count,
                digest=_digest(sha.digest()),
                description=meta.description,
                headers=_object_headers(headers),
                options=options,
                metadata=meta.metadata,
            )
        except BaseException:
            self._discard(window, subject, wait)
            raise
        self._store_info(info, subject, wait)
        if old is not None and not old.deleted and old.nuid and old.nuid != nuid:
            try:
                self._purge(self._chunk_subject(old.nuid))
            except errors.NATSError as exc:  # the put stands: the old chunks are litter
                self._js._core.report(exc)
        return info

    def _store_info(self, info: ObjectInfo, chunks: str, wait: float) -> None:
        """Publish the info of a put whose chunks (on ``chunks``) are all stored. Chunks
        are purged only when no stored info can point to them: when the publish is
        refused, or when its fate was unknown and the info the server holds is another.
        When that cannot be learned within ``wait`` seconds, ObjectOutcomeUnknownError."""
        try:
            self._publish_meta(info)
        except (errors.APIError, errors.NoRespondersError, errors.InvalidArgumentError):
            self._purge_quietly(chunks)  # refused, or never sent: the old info stands
            raise
        except Exception as exc:
            # Lost connection, timeout: the info may be stored and have replaced the old
            # one already. Purging its chunks then would destroy the object: ask first.
            try:
                stored = self._stored_nuid(info.name, wait)
            except errors.NATSError as why:
                raise errors.ObjectOutcomeUnknownError(
                    f"put of {self._where(info.name)}: the info (nuid {info.nuid}) was sent "
                    f"but not acknowledged ({exc}), and the info the server holds could "
                    f"not be read ({why}): get_info({info.name!r}).nuid == {info.nuid!r} "
                    "tells whether the put stored it; nothing was purged"
                ) from exc
            if stored == info.nuid:
                return  # the server stored it: the put succeeded, only the ack was lost
            self._purge_quietly(chunks)
            raise

    def _stored_nuid(self, name: str, wait: float) -> Optional[str]:
        """The nuid of the info the server holds for ``name`` (None: no info), asking
        again while the connection is down or answers time out, for up to ``wait``
        seconds; the last error once they are up."""
        deadline = time.monotonic() + wait
        nc = self._js.nc
        fence = self._chunk_subject(_nuids.next())
        fenced = False
        while True:
            try:
                if not fenced:
                    self._fence(fence)
                    fenced = True
                # From the leader: a replica answering a direct get may not have applied
                # the info yet, fence or not.
                msg = self._last_msg(self._meta_subject(name), direct=False)
            except (
                errors.ConnectionLostError,
                errors.TimeoutError,
                errors.NoRespondersError,
                errors.OutboundBufferLimitError,
            ):
                if time.monotonic() >= deadline:
                    raise
            else:
                if msg is None:
                    return None
                stored = _parse_info(msg.data, self._where(name), msg.time)
                return stored.nuid
            # A pause, then wait (polling: the client has no event for it) until the
            # connection is back.
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            while not nc.is_connected and not nc.is_closed and time.monotonic() < deadline:
                time.sleep(0.02)
            if nc.is_closed:
                raise errors.ConnectionClosedError("the client was closed")

    def _fence(self, subject: str) -> None:
        """Return once the stream has stored what this client sent it before: a message
        stored on ``subject`` (a fresh chunk subject), then purged. The leader applies one
        client's publishes in order and acks one once it is applied, so an info still on
        its way in (an ack that timed out on a busy stream) is stored before this ack comes
        back, and a read from the leader after it cannot miss it. (A publish the stream
        refuses does not do: on a replicated stream the leader refuses it at once, before
        earlier publishes are applied.) Were the purge lost, the fence is an empty chunk
        no info points to."""
        self._js.publish(subject, b"")
        self._purge_quietly(subject)

    def _purge_quietly(self, subject: str) -> None:
        try:
            self._purge(subject)
        except errors.NATSError:
            pass

    def _discard(self, window: Deque[Future[api.PubAck]], subject: str, wait: float) -> None:
        """A put failed: let its chunks in flight land, then remove them all (best effort:
        the error that failed the put is the one the caller sees)."""
        for fut in window:
            try:
                fut.result(wait)
            except BaseException:
                pass
        self._purge_quietly(subject)

    # --- get ----------------------------------------------------------------------------------

    def get(
        self,
        name: str,
        writeinto: Optional[Union[IO[Any], io.IOBase]] = None,
        show_deleted: bool = False,
    ) -> ObjectResult:
        """The object ``name`` (a link is followed). Its data is in the result, or with
        ``writeinto`` (a binary file object) written there chunk by chunk and the result's
        data left empty. DigestMismatchError if what was read is not what the info says
        (whatever was written to ``writeinto`` by then stays there)."""
        name = _check_name(name)
        write = _writer(writeinto)
        return self._get(name, write, show_deleted, 0)

    def _get(
        self,
        name: str,
        write: Optional[Callable[[bytes], None]],
        show_deleted: bool,
        hops: int,
    ) -> ObjectResult:
        info = self.get_info(name, show_deleted)
        if info.is_link():
            return self._follow(info, write, hops)
        if not info.nuid:
            raise errors.BadObjectMetaError(f"{self._where(name)}: the stored info has no nuid")
        result = ObjectResult(info=info)
        if info.deleted or (info.size == 0 and info.chunks == 0):
            return result
        expected = _parse_digest(info.digest)
        if expected is None:
            raise errors.BadObjectMetaError(
                f"{self._where(name)}: unknown digest {info.digest!r} (expected SHA-256=...)"
            )
        parts: List[bytes] = []
        digest, size = self._read_chunks(info, parts.append if write is None else write)
        if size != info.size:
            raise errors.DigestMismatchError(
                f"{self._where(name)}: read {size} bytes, its info says {info.size}"
            )
        if digest != expected:
            raise errors.DigestMismatchError(
                f"{self._where(name)}: the data read has digest {_digest(digest)}, its info "
                f"says {info.digest}"
            )
        if write is None:
            result.data = parts[0] if len(parts) == 1 else b"".join(parts)
        return result

    def _read_chunks(self, info: ObjectInfo, write: Callable[[bytes], None]) -> Tuple[bytes, int]:
        """Every chunk of ``info``'s object, in order, to ``write``; (SHA-256, size)."""
        chunk_size = info.options.max_chunk_size if info.options else None
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0:
            chunk_size = OBJ_DEFAULT_CHUNK_SIZE
        batch = max(1, min(_MAX_BATCH, info.chunks or 1, _GET_BATCH_BYTES // chunk_size))
        where = self._where(info.name)
        timeout = self._js.timeout
        sha = hashlib.sha256()
        size = count = 0
        oc: OrderedConsumer = self._js.ordered_consumer(
            self._stream, filter_subjects=[self._chunk_subject(info.nuid)]
        )
        # A continuous pull of at most ``batch`` chunks at a time: no round trip per batch,
        # and no wait for a batch the object cannot fill.
        with oc, oc.messages(max_messages=batch) as chunks:
            while True:
                try:
                    msg = chunks.next(timeout)
                except errors.TimeoutError:
                    raise errors.TimeoutError(
                        f"get of {where}: no chunk came within {timeout} s after {count} of "
                        f"{info.chunks} chunks ({size} of {info.size} bytes): are its chunks gone?"
                    ) from None
                data = msg.data
                size += len(data)
                count += 1
                if size > info.size:
                    raise errors.DigestMismatchError(
                        f"{where}: its chunks hold more than the {info.size} bytes its info says"
                    )
                sha.update(data)
                write(data)
                if msg.metadata.num_pending == 0:
                    return sha.digest(), size

    def _follow(
        self, info: ObjectInfo, write: Optional[Callable[[bytes], None]], hops: int
    ) -> ObjectResult:
        assert info.options is not None and info.options.link is not None
        link = info.options.link
        if not link.name:
            raise errors.LinkIsABucketError(
                f"{self._where(info.name)} is a link to the whole bucket {link.bucket!r}, "
                "not to one object"
            )
        if hops >= _MAX_LINK_HOPS:
            raise errors.BadObjectMetaError(
                f"{self._where(info.name)}: more than {_MAX_LINK_HOPS} links in a row"
            )
        target = self if link.bucket == self._name else self._js.object_store(link.bucket)
        return target._get(link.name, write, False, hops + 1)

    # --- meta, delete, links ------------------------------------------------------------------

    def update_meta(self, name: str, meta: ObjectMeta) -> ObjectInfo:
        """Change the object's name, description, headers and metadata (its options stay).
        A new name must not be that of a live object (ObjectAlreadyExistsError)."""
        name = _check_name(name)
        meta = _check_meta(meta, "meta")
        new_name = name if meta.name is None else _check_name(meta.name, "meta.name")
        headers = _user_headers(meta.headers)
        try:
            info = self.get_info(name)
        except errors.ObjectNotFoundError:
            raise errors.ObjectDeletedError(
                f"update_meta: {self._where(name)} does not exist or is deleted"
            ) from None
        if new_name != name:
            other = self._existing(new_name)
            if other is not None and not other.deleted:
                raise errors.ObjectAlreadyExistsError(
                    f"update_meta: cannot rename {self._where(name)} to {new_name!r}: "
                    "an object of that name exists"
                )
        info.name = new_name
        info.description = meta.description
        info.headers = _object_headers(headers)
        info.metadata = dict(meta.metadata) if meta.metadata is not None else None
        self._publish_meta(info)
        if new_name != name:
            self._purge(self._meta_subject(name))
        return info

    def delete(self, name: str) -> ObjectInfo:
        """Delete the object: its chunks go, a deleted marker stays as its info.
        ObjectNotFoundError if there is no such object; an object already deleted is left
        as it is."""
        name = _check_name(name)
        info = self.get_info(name, show_deleted=True)
        if info.deleted:
            return info
        nuid = info.nuid
        info.deleted = True
        info.size = info.chunks = 0
        info.digest = ""
        try:
            self._publish_meta(info)
        finally:
            if nuid:  # (a link has no chunks; nats.js writes links without a nuid)
                self._purge(self._chunk_subject(nuid))
        return info

    def _link_name_free(self, name: str, what: str) -> None:
        """A link may take the name of nothing, of a deleted object, or of another link."""
        existing = self._existing(name)
        if existing is not None and not existing.deleted and not existing.is_link():
            raise errors.ObjectAlreadyExistsError(
                f"{what}: {self._where(name)} exists and is not a link"
            )

    def add_link(self, name: str, obj_info: ObjectInfo) -> ObjectInfo:
        """Add ``name``, a link to the object ``obj_info`` describes (in this bucket or
        another). Not to a deleted object, nor to a link."""
        name = _check_name(name, "link name")
        if not isinstance(obj_info, ObjectInfo):
            raise errors.InvalidArgumentError(
                f"obj_info must be an ObjectInfo, got {type(obj_info).__name__}"
            )
        target = f"object {obj_info.name!r} of bucket {obj_info.bucket!r}"
        _check_name(obj_info.name, "obj_info.name")
        _check_bucket(obj_info.bucket)
        if obj_info.deleted:
            raise errors.InvalidArgumentError(f"add_link: {target} is deleted")
        if obj_info.is_link():
            raise errors.InvalidArgumentError(f"add_link: {target} is a link itself")
        self._link_name_free(name, "add_link")
        link = ObjectLink(bucket=obj_info.bucket, name=obj_info.name)
        return self._publish_link(name, link)

    def add_bucket_link(self, name: str, bucket: ObjectStore) -> ObjectInfo:
        """Add ``name``, a link to the whole bucket ``bucket``."""
        name = _check_name(name, "link name")
        if not isinstance(bucket, ObjectStore):
            raise errors.InvalidArgumentError(
                f"bucket must be an ObjectStore, got {type(bucket).__name__}"
            )
        self._link_name_free(name, "add_bucket_link")
        return self._publish_link(name, ObjectLink(bucket=bucket._name))

    def _publish_link(self, name: str, link: ObjectLink) -> ObjectInfo:
        info = ObjectInfo(
            name=name,
            bucket=self._name,
            nuid=_nuids.next(),
            options=ObjectMetaOptions(link=link),
        )
        return self._publish_meta(info)

    # --- the whole bucket ----------------------------------------------------------------------

    def watch(
        self,
        ignore_deletes: bool = False,
        include_history: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
    ) -> ObjectWatcher:
        """Infos as they change: first the current one of every object (all of them with
        ``include_history``; none with ``updates_only``), then one ``None``, then every
        change. ``meta_only`` is accepted for nats-py's sake: only infos are watched anyway."""
        for flag, what in (
            (ignore_deletes, "ignore_deletes"),
            (include_history, "include_history"),
            (meta_only, "meta_only"),
            (updates_only, "updates_only"),
        ):
            if not isinstance(flag, bool):
                raise errors.InvalidArgumentError(f"{what} must be a bool, got {flag!r}")
        if include_history and updates_only:
            raise errors.InvalidArgumentError("give include_history or updates_only, not both")
        return ObjectWatcher(self, ignore_deletes, include_history, updates_only)

    def list(self, ignore_deletes: bool = False) -> List[ObjectInfo]:
        """The info of every object, deleted ones too unless ``ignore_deletes``. An empty
        bucket gives an empty list (nats-py raises NotFoundError)."""
        with self.watch(ignore_deletes=ignore_deletes) as watcher:
            out: List[ObjectInfo] = []
            while True:
                info = watcher.updates(self._js.timeout)
                if info is None:
                    return out
                out.append(info)

    def status(self) -> ObjectStoreStatus:
        """The bucket's settings and size; BucketNotFoundError when the bucket is gone."""
        return ObjectStoreStatus(stream_info=self._stream_info(), bucket=self._name)

    def seal(self) -> None:
        """Seal the bucket: nothing can be put, changed or deleted from now on."""
        info = self._stream_info()
        self._js.update_stream(dataclasses.replace(info.config, sealed=True))

    def _stream_info(self) -> api.StreamInfo:
        try:
            return self._js.stream_info(self._stream)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code,
                exc.err_code,
                f"object store bucket {self._name!r} not found (no stream {self._stream!r})",
            ) from exc


class ObjectWatcher:
    """``ObjectStore.watch()``: iterate (blocking) for ObjectInfo, and one ``None`` once the
    initial infos are all there; ``updates(timeout)`` for one at a time; ``stop()`` (or
    leaving the ``with``) ends it. An info that cannot be read is reported to error_cb as a
    BadObjectMetaError and skipped."""

    def __init__(
        self, store: ObjectStore, ignore_deletes: bool, include_history: bool, updates_only: bool
    ) -> None:
        js = store._js
        self._store = store
        self._core = js._core
        self._ignore_deletes = ignore_deletes
        self._ready: Deque[Optional[ObjectInfo]] = collections.deque()
        subject = OBJ_ALL_META_PRE_TEMPLATE.format(bucket=store._name)
        self._init_done = updates_only
        if not updates_only and not self._any(js, store._stream, subject):
            self._init_done = True
            self._ready.append(None)
        if updates_only:
            policy = api.DeliverPolicy.NEW
        elif include_history:
            policy = api.DeliverPolicy.ALL
        else:
            policy = api.DeliverPolicy.LAST_PER_SUBJECT
        self._oc = js.ordered_consumer(store._stream, [subject], deliver_policy=policy)
        self._msgs = self._oc.messages(max_messages=_WATCH_BATCH)

    @staticmethod
    def _any(js: JetStream, stream: str, subject: str) -> bool:
        try:
            js.get_msg(stream, seq=1, next_by_subject=subject)
        except errors.NoMessageFoundError:
            return False
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code, exc.err_code, f"no stream {stream!r} to watch"
            ) from exc
        return True

    def _take(self, timeout: Optional[float]) -> Optional[ObjectInfo]:
        """The next thing to hand out; StopIteration once stopped, TimeoutError when
        ``timeout`` (None: forever) runs out first."""
        while not self._ready:
            msg = next(self._msgs) if timeout is None else self._msgs.next(timeout)
            self._on_msg(msg.data, msg.metadata.timestamp, msg.metadata.num_pending)
        return self._ready.popleft()

    def _on_msg(self, data: bytes, mtime: _dt.datetime, pending: int) -> None:
        try:
            info: Optional[ObjectInfo] = _parse_info(
                data, f"an info in bucket {self._store._name!r}", mtime
            )
        except errors.BadObjectMetaError as exc:
            self._core.report(exc)
            info = None
        if info is not None and not (self._ignore_deletes and info.deleted):
            self._ready.append(info)
        if not self._init_done and pending == 0:
            self._init_done = True
            self._ready.append(None)

    def updates(self, timeout: float = 5.0) -> Optional[ObjectInfo]:
        """The next info (or the ``None`` that ends the initial ones) within ``timeout``;
        TimeoutError otherwise, StopIteration once stopped."""
        return self._take(check_timeout(timeout, "timeout"))

    def __iter__(self) -> Iterator[Optional[ObjectInfo]]:
        return self

    def __next__(self) -> Optional[ObjectInfo]:
        return self._take(None)

    def stop(self) -> None:
        """Stop watching: the iteration ends."""
        self._msgs.stop()

    def __enter__(self) -> ObjectWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# nats-py's spellings: these are classes nested in its ObjectStore.
ObjectStore.ObjectResult = ObjectResult  # type: ignore[attr-defined]
ObjectStore.ObjectStoreStatus = ObjectStoreStatus  # type: ignore[attr-defined]
ObjectStore.ObjectWatcher = ObjectWatcher  # type: ignore[attr-defined]


# --- the JetStream mixin -------------------------------------------------------------------------


class ObjectStoreFactory:
    """``create_object_store``, ``object_store`` and ``delete_object_store`` of JetStream."""

    def create_object_store(
        self,
        bucket: Optional[str] = None,
        config: Optional[ObjectStoreConfig] = None,
        **params: Any,
    ) -> ObjectStore:
        """Create the bucket (its stream ``OBJ_<bucket>``) from ``bucket``, a config and/or
        config fields as keywords; the same settings again are fine."""
        js: JetStream = self  # type: ignore[assignment]
        if config is not None and not isinstance(config, ObjectStoreConfig):
            raise errors.InvalidArgumentError(
                f"config must be an ObjectStoreConfig, got {type(config).__name__}"
            )
        try:
            cfg = dataclasses.replace(config or ObjectStoreConfig(), **params)
        except TypeError as exc:
            raise errors.InvalidArgumentError(f"bad ObjectStoreConfig field: {exc}") from None
        if bucket is not None:
            cfg.bucket = bucket
        name = _check_bucket(cfg.bucket)
        if cfg.ttl is not None:
            check_timeout(cfg.ttl, "ttl")
        for value, what, low in ((cfg.max_bytes, "max_bytes", -1), (cfg.replicas, "replicas", 0)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < low
            ):
                raise errors.InvalidArgumentError(f"{what} must be an int >= {low}, got {value!r}")
        stream = api.StreamConfig(
            name=OBJ_STREAM_TEMPLATE.format(bucket=name),
            description=cfg.description,
            subjects=[
                OBJ_ALL_CHUNKS_PRE_TEMPLATE.format(bucket=name),
                OBJ_ALL_META_PRE_TEMPLATE.format(bucket=name),
            ],
            max_age=cfg.ttl or 0.0,
            max_bytes=cfg.max_bytes or -1,
            storage=cfg.storage,
            num_replicas=cfg.replicas or 1,
            placement=cfg.placement,
            discard=api.DiscardPolicy.NEW,
            allow_rollup_hdrs=True,
            allow_direct=True,
            metadata=cfg.metadata,
            compression=api.StoreCompression.S2 if cfg.compression else None,
        )
        js.add_stream(stream)
        return ObjectStore(name, OBJ_STREAM_TEMPLATE.format(bucket=name), js)

    def object_store(self, bucket: str) -> ObjectStore:
        """Bind to an existing bucket; BucketNotFoundError if there is none."""
        js: JetStream = self  # type: ignore[assignment]
        bucket = _check_bucket(bucket)
        stream = OBJ_STREAM_TEMPLATE.format(bucket=bucket)
        try:
            info = js.stream_info(stream)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code,
                exc.err_code,
                f"object store bucket {bucket!r} not found (no stream {stream!r})",
            ) from exc
        return ObjectStore(bucket, stream, js, direct=bool(info.config.allow_direct))

    def delete_object_store(self, bucket: str) -> bool:
        """Delete the bucket and every object in it."""
        js: JetStream = self  # type: ignore[assignment]
        bucket = _check_bucket(bucket)
        stream = OBJ_STREAM_TEMPLATE.format(bucket=bucket)
        try:
            return js.delete_stream(stream)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code,
                exc.err_code,
                f"object store bucket {bucket!r} not found (no stream {stream!r})",
            ) from exc
