"""Reaching the groups' records, and the argument checks every entry point shares."""

from __future__ import annotations

import re
import time
from typing import List, Optional, Sequence

from .. import errors
from .._protocol import check_subscribe_subject
from .._timeouts import Deadline
from ..jetstream.api import StorageType, check_stream_name
from ..jetstream.context import JetStream
from ..jetstream.kv import Entry, KeyValue
from .errors import ConsumerGroupNotFoundError
from .partitions import config_key

__all__ = ["bucket", "check_handler", "check_name", "check_names", "check_stream", "read_record"]

# A group or member name is a token of the record's key and part of consumer and stream names:
# no dots, wildcards, whitespace or path separators.
_NAME = re.compile(r"[^.*>\s/\\]+\Z")
_PROBE_KEY = "_pcgroups_probe"  # not a "<stream>.<group>" key: never a record


def check_stream(stream: object) -> str:
    """Return ``stream`` if it can name a stream, else raise InvalidArgumentError."""
    return check_stream_name(stream)


def check_name(value: object, what: str) -> str:
    """Return ``value`` if it can name a group or member (a non-empty str without dots,
    wildcards, slashes, backslashes or whitespace); InvalidArgumentError naming ``what``
    otherwise."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise errors.InvalidArgumentError(
            f"{what} must be a non-empty name without '.', '*', '>', '/', '\\' or whitespace, "
            f"got {value!r}"
        )
    return value


def check_names(values: Optional[Sequence[str]], what: str, subject: bool = False) -> List[str]:
    """A list of member names (or of subject filters, ``subject=True``)."""
    if values is None:
        return []
    if isinstance(values, str):
        raise errors.InvalidArgumentError(f"{what} must be a list, got the string {values!r}")
    out = []
    for value in values:
        if subject:
            out.append(check_subscribe_subject(value, f"{what} entry"))
        else:
            out.append(check_name(value, f"{what} entry"))
    return out


def check_handler(cb: object) -> None:
    """Raise InvalidArgumentError unless ``cb`` is callable."""
    if not callable(cb):
        raise errors.InvalidArgumentError(
            f"a message handler (cb) must be callable, got {type(cb).__name__}"
        )


def bucket(
    js: JetStream,
    name: str,
    kind: str,
    create_replicas: Optional[int] = None,
    key: Optional[str] = None,
) -> KeyValue:
    """The groups' bucket; made (file storage, that many replicas) if ``create_replicas``.
    ``key``: the group asked for (``<stream>.<group>``), named when there is no bucket."""
    try:
        return js.key_value(name)
    except errors.BucketNotFoundError:
        if create_replicas is None:
            what = f"{kind} consumer group {key!r}" if key else f"{kind} consumer groups"
            raise ConsumerGroupNotFoundError(
                f"{what} does not exist: there are no {kind} consumer groups, the bucket "
                f"{name!r} does not exist (create_{kind} makes it)"
            ) from None
    kv = js.create_key_value(bucket=name, replicas=create_replicas, storage=StorageType.FILE)
    _await_direct_gets(kv, Deadline(js.timeout, f"the new bucket {name!r} answering"))
    return kv


def _await_direct_gets(kv: KeyValue, deadline: Deadline) -> None:
    """Until the new bucket answers a get. Its replicas start answering direct gets a moment
    after the create returned (seen on a 3-node cluster: a get right after creating an R3
    bucket found no responders), and the caller reads the bucket next."""
    while True:
        try:
            kv.get(_PROBE_KEY)
            return  # nobody writes the probe key, but an answer is an answer
        except errors.KeyNotFoundError:
            return
        except errors.NoRespondersError:
            deadline.check()
            time.sleep(min(0.02, deadline.remaining()))


def group_bucket(js: JetStream, name: str, kind: str, stream: str, group: str) -> KeyValue:
    """The bucket holding the group's record (ConsumerGroupNotFoundError naming the group if
    there is no bucket)."""
    return bucket(js, name, kind, key=config_key(stream, group))


def read_record(kv: KeyValue, stream: str, group: str, kind: str) -> Entry:
    """The KV entry of the group's record in ``kv``; ConsumerGroupNotFoundError when the group
    does not exist."""
    key = config_key(stream, group)
    try:
        return kv.get(key)
    except errors.KeyNotFoundError:
        raise ConsumerGroupNotFoundError(
            f"{kind} consumer group {key!r} (stream {stream!r}, group {group!r}) does not "
            f"exist (create_{kind} makes it)"
        ) from None


def delete_record(kv: KeyValue, stream: str, group: str) -> None:
    """Delete a group's record (its running members end); a missing one is fine."""
    try:
        kv.delete(config_key(stream, group))
    except errors.KeyNotFoundError:
        pass


def group_names(kv: KeyValue, stream: str) -> List[str]:
    """The names of the groups on ``stream`` that have a record in ``kv``."""
    try:
        keys = kv.keys(f"{stream}.*")
    except errors.NoKeysError:
        return []
    return [k.split(".", 1)[1] for k in keys]
