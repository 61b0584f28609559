"""Elastic partitioned consumer groups (orbit.go's ``ElasticConsume``, ``CreateElastic``,
``AddMembers``, ...).

The stream's subjects need no partition number: the group has a work-queue stream
``<stream>-<group>`` that sources the stream through a ``{{Partition(N,...)}}`` subject
transform, which puts one in front. Each member has a consumer named after it on that stream
(inactive_threshold = ack_wait: it goes away when no instance pulls), filtered to its
partitions. Members are added and dropped at run time by rewriting the record; every running
instance follows: the pinned instance deletes its consumer and creates it with the new
filters (a work-queue stream allows no two consumers on one partition, so a member taking over
a partition waits until its previous owner's consumer is gone — it tries again every
ack_wait + 0.5 s).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, List, Optional, Sequence, Tuple

from .. import errors
from .._protocol import check_subscribe_subject
from ..jetstream.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StreamConfig,
    StreamSource,
    SubjectTransform,
)
from ..jetstream.context import JetStream
from ..jetstream.kv import KV_DEL, KV_PURGE, Entry, KeyValue, KeyWatcher
from .errors import (
    ConsumerGroupChangedError,
    ConsumerGroupConfigError,
    ConsumerGroupError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    NotAMemberError,
)
from .member import (
    ConsumerGroupConsumeContext,
    MemberRunner,
    MessageHandler,
    log,
    member_timers,
    pinned_template,
)
from .partitions import (
    ELASTIC_BUCKET,
    PRIORITY_GROUP,
    config_key,
    elastic_partition_filters,
    elastic_stream_name,
    partitioning_transform_dest,
)
from .records import (
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    check_member_count,
)
from .store import (
    bucket,
    check_handler,
    check_name,
    check_names,
    check_stream,
    delete_record,
    group_bucket,
    group_names,
    read_record,
)

__all__ = [
    "add_members",
    "create_elastic",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "elastic_active_members",
    "elastic_consume",
    "elastic_is_in_membership_and_active",
    "elastic_member_step_down",
    "get_elastic_config",
    "list_elastic",
    "set_member_mappings",
]

# The server's "filtered consumer not unique on workqueue stream": another member's consumer
# still has one of our partitions. Normal while members follow a change; retried later.
_WQ_NOT_UNIQUE = 10100


def _read(js: JetStream, stream: str, group: str) -> ElasticConsumerGroupConfig:
    kv = group_bucket(js, ELASTIC_BUCKET, "elastic", stream, group)
    return _read_from(kv, stream, group)


def _read_from(kv: KeyValue, stream: str, group: str) -> ElasticConsumerGroupConfig:
    entry = read_record(kv, stream, group, "elastic")
    config = ElasticConsumerGroupConfig.from_json(entry.value or b"", entry.revision)
    config.validate()
    return config


def get_elastic_config(js: JetStream, stream: str, group: str) -> ElasticConsumerGroupConfig:
    """The group's config as stored (ConsumerGroupNotFoundError if there is none);
    ``revision`` is the record's KV revision."""
    return _read(js, check_stream(stream), check_name(group, "group"))


def _filters(value: Optional[Sequence[PartitioningFilter]]) -> Optional[List[PartitioningFilter]]:
    if value is None:
        return None
    out = []
    for pf in value:
        if not isinstance(pf, PartitioningFilter):
            raise errors.InvalidArgumentError(
                f"partitioning_filters must be PartitioningFilter objects, got {pf!r}"
            )
        check_subscribe_subject(pf.filter, "a partitioning filter")
        wildcards = pf.partitioning_wildcards
        if wildcards is not None and (
            isinstance(wildcards, str)
            or not all(isinstance(w, int) and not isinstance(w, bool) for w in wildcards)
        ):
            raise errors.InvalidArgumentError(
                f"partitioning_wildcards of {pf.filter!r} must be a list of ints (1-based "
                f"indexes of its * wildcards) or None, got {wildcards!r}"
            )
        out.append(pf)
    return out


def create_elastic(
    js: JetStream,
    stream: str,
    group: str,
    max_members: int,
    partitioning_filters: Optional[Sequence[PartitioningFilter]] = None,
    max_buffered_msgs: int = 0,
    max_buffered_bytes: int = 0,
) -> ElasticConsumerGroupConfig:
    """Create an elastic group on ``stream`` over ``max_members`` partitions, with no members
    yet (add_members / set_member_mappings). ``partitioning_filters``: which subjects, and
    which of their ``*`` tokens make the key (none: every subject, the whole subject is the
    key). ``max_buffered_msgs`` / ``max_buffered_bytes`` (0: no limit) bound the group's
    work-queue stream; the sourcing pauses while it is full. The same config again is fine; a
    different one is ConsumerGroupExistsError."""
    for value, what in (
        (max_buffered_msgs, "max_buffered_msgs"),
        (max_buffered_bytes, "max_buffered_bytes"),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise ConsumerGroupConfigError(f"{what} must be an int >= -1, got {value!r}")
    if isinstance(max_members, bool) or not isinstance(max_members, int) or max_members < 1:
        raise ConsumerGroupConfigError(f"max_members must be an int >= 1, got {max_members!r}")
    config = ElasticConsumerGroupConfig(
        max_members=max_members,
        partitioning_filters=_filters(partitioning_filters),
        max_buffered_msgs=max_buffered_msgs,
        max_buffered_bytes=max_buffered_bytes,
    )
    config.validate()
    stream, group = check_stream(stream), check_name(group, "group")
    cg_stream = check_stream(elastic_stream_name(stream, group))
    info = js.stream_info(stream)
    kv = bucket(js, ELASTIC_BUCKET, "elastic", create_replicas=info.config.num_replicas or 1)
    key = config_key(stream, group)
    created = False
    try:
        existing = kv.get(key)
    except errors.KeyNotFoundError:
        _refuse_stream_clash(js, stream, group, cg_stream)
        try:
            kv.create(key, config.to_json())
            existing = None
            created = True
        except errors.KeyWrongLastSequenceError:
            existing = kv.get(key)  # another creator was first: compare with theirs
    if existing is not None:
        current = ElasticConsumerGroupConfig.from_json(existing.value or b"", existing.revision)
        if not current.same_shape(config):
            raise ConsumerGroupExistsError(
                f"elastic consumer group {key!r} exists with a different config "
                f"({(existing.value or b'').decode(errors='replace')}): "
                "delete it first to change it"
            )
        config = current
    pfs = config.partitioning_filters or [PartitioningFilter(">", [])]
    transforms = [
        SubjectTransform(src=pf.filter, dest=partitioning_transform_dest(pf, config.max_members))
        for pf in pfs
    ]
    try:
        js.add_stream(
            StreamConfig(
                name=cg_stream,
                retention=RetentionPolicy.WORK_QUEUE,
                num_replicas=info.config.num_replicas,
                storage=info.config.storage,
                max_msgs=config.max_buffered_msgs or None,
                max_bytes=config.max_buffered_bytes or None,
                discard=DiscardPolicy.NEW,
                sources=[StreamSource(name=stream, subject_transforms=transforms)],
                allow_direct=True,
            )
        )
    except BaseException:
        if created:  # undo: a refused create leaves no record (a group without a stream)
            try:
                kv.delete(key, last=kv.get(key).revision)
            except errors.NATSError as exc:
                log.warning("%s: could not remove the record of a refused create: %s", key, exc)
        raise
    return config


def _refuse_stream_clash(js: JetStream, stream: str, group: str, cg_stream: str) -> None:
    """Refuse a group whose work-queue stream name ``<stream>-<group>`` is taken by a stream
    that does not source ``stream`` (e.g. stream S group x-y and stream S-x group y are
    both S-x-y): the create would fail, or take over another group's stream."""
    try:
        existing = js.stream_info(cg_stream).config
    except errors.StreamNotFoundError:
        return
    sources = [src.name for src in existing.sources or []]
    if sources != [stream]:
        raise ConsumerGroupExistsError(
            f"elastic consumer group {stream}.{group}: its work-queue stream name {cg_stream!r} "
            f"is taken by a stream that sources {sources or 'nothing'}, not {stream!r} (another "
            f"group's: <stream>-<group> names clash): choose another group name"
        )


def delete_elastic(js: JetStream, stream: str, group: str) -> None:
    """Delete the group's record (its running members end) and its work-queue stream
    ``<stream>-<group>`` (with the members' consumers on it); ConsumerGroupNotFoundError if
    the group does not exist. Nothing of another group is touched."""
    stream, group = check_stream(stream), check_name(group, "group")
    kv = group_bucket(js, ELASTIC_BUCKET, "elastic", stream, group)
    read_record(kv, stream, group, "elastic")
    delete_record(kv, stream, group)
    try:
        js.delete_stream(elastic_stream_name(stream, group))
    except errors.StreamNotFoundError:
        pass  # a half-made group (its stream never made): the record was all there was


def list_elastic(js: JetStream, stream: str) -> List[str]:
    """The names of the elastic groups on ``stream`` (none when there is no bucket yet)."""
    stream = check_stream(stream)
    try:
        kv = bucket(js, ELASTIC_BUCKET, "elastic")
    except ConsumerGroupNotFoundError:
        return []
    return group_names(kv, stream)


def _rewrite(
    js: JetStream,
    stream: str,
    group: str,
    change: Callable[[ElasticConsumerGroupConfig], None],
    cas: bool,
) -> ElasticConsumerGroupConfig:
    """Read the record, change it (``change(config)``), check it and write it back; with
    ``cas`` only over the revision read (KeyWrongLastSequenceError: someone else was first)."""
    kv = group_bucket(js, ELASTIC_BUCKET, "elastic", stream, group)
    config = _read_from(kv, stream, group)
    change(config)
    config.validate()
    key = config_key(stream, group)
    if cas:
        config.revision = kv.update(key, config.to_json(), last=config.revision)
    else:
        config.revision = kv.put(key, config.to_json())
    return config


def add_members(js: JetStream, stream: str, group: str, members: Sequence[str]) -> List[str]:
    """Add ``members`` to the group's balanced membership; returns the membership."""
    stream, group = check_stream(stream), check_name(group, "group")
    new = check_names(members, "members")
    if not new:
        raise errors.InvalidArgumentError("add_members needs at least one member name")

    def change(config: ElasticConsumerGroupConfig) -> None:
        if config.member_mappings:
            raise ConsumerGroupError(
                f"elastic consumer group {stream}.{group} uses member mappings: members "
                f"cannot be added (delete_member_mappings first)"
            )
        members = list(dict.fromkeys([*config.members, *new]))
        check_member_count(config.max_members, members)
        config.members = members

    return _rewrite(js, stream, group, change, cas=True).members


def delete_members(js: JetStream, stream: str, group: str, members: Sequence[str]) -> List[str]:
    """Drop ``members`` from the group's balanced membership; returns the membership."""
    stream, group = check_stream(stream), check_name(group, "group")
    gone = set(check_names(members, "members"))
    if not gone:
        raise errors.InvalidArgumentError("delete_members needs at least one member name")

    def change(config: ElasticConsumerGroupConfig) -> None:
        if config.member_mappings:
            raise ConsumerGroupError(
                f"elastic consumer group {stream}.{group} uses member mappings: members "
                f"cannot be dropped (delete_member_mappings first)"
            )
        config.members = [m for m in config.members if m not in gone]

    return _rewrite(js, stream, group, change, cas=True).members


def set_member_mappings(
    js: JetStream, stream: str, group: str, member_mappings: Sequence[MemberMapping]
) -> None:
    """Replace the group's membership by explicit mappings (every partition mapped once)."""
    stream, group = check_stream(stream), check_name(group, "group")
    mappings = list(member_mappings or [])
    if not mappings or not all(isinstance(m, MemberMapping) for m in mappings):
        raise errors.InvalidArgumentError(
            f"member_mappings must be a non-empty list of MemberMapping, got {member_mappings!r}"
        )
    for m in mappings:
        check_name(m.member, "member_mappings member")

    def change(config: ElasticConsumerGroupConfig) -> None:
        config.members = []
        config.member_mappings = mappings

    _rewrite(js, stream, group, change, cas=False)


def delete_member_mappings(js: JetStream, stream: str, group: str) -> None:
    """Remove the group's mappings: it has no members until some are added."""
    stream, group = check_stream(stream), check_name(group, "group")

    def change(config: ElasticConsumerGroupConfig) -> None:
        config.member_mappings = []

    _rewrite(js, stream, group, change, cas=False)


def _member_names(config: ElasticConsumerGroupConfig) -> List[str]:
    return config.members or [m.member for m in config.member_mappings]


def elastic_active_members(js: JetStream, stream: str, group: str) -> List[str]:
    """The members whose consumer exists now (an instance made it and pulls: it goes away
    ack_wait after the last instance stopped pulling)."""
    stream, group = check_stream(stream), check_name(group, "group")
    names = set(_member_names(_read(js, stream, group)))
    if not names:
        return []
    return [n for n in js.consumer_names(elastic_stream_name(stream, group)) if n in names]


def elastic_is_in_membership_and_active(
    js: JetStream, stream: str, group: str, member: str
) -> Tuple[bool, bool]:
    """(whether ``member`` is in the membership, whether its consumer exists now)."""
    stream, group = check_stream(stream), check_name(group, "group")
    member = check_name(member, "member")
    config = _read(js, stream, group)
    active = member in js.consumer_names(elastic_stream_name(stream, group))
    return config.is_in_membership(member), active


def elastic_member_step_down(js: JetStream, stream: str, group: str, member: str) -> None:
    """Unpin the member's pinned instance: another instance of it takes over."""
    stream, group = check_stream(stream), check_name(group, "group")
    member = check_name(member, "member")
    config = _read(js, stream, group)
    if not config.is_in_membership(member):
        raise NotAMemberError(
            f"{member!r} is not a member of elastic consumer group {stream}.{group} "
            f"(members: {_member_names(config)})"
        )
    js.unpin_consumer(elastic_stream_name(stream, group), member, PRIORITY_GROUP)


def elastic_consume(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    cb: MessageHandler,
    config: Optional[ConsumerConfig] = None,
) -> ConsumerGroupConsumeContext:
    """Join the elastic group as ``member``: while the membership has it, ``cb(msg)`` runs
    for each message of its partitions (subject without the partition token), one instance of
    the member at a time. It may start before the member is added. ``config`` is the template
    of the member's consumer (acks must be explicit: ``cb`` acks each message)."""
    stream, group = check_stream(stream), check_name(group, "group")
    member = check_name(member, "member")
    check_handler(cb)
    template = member_timers(config)
    if template.ack_policy not in (None, AckPolicy.EXPLICIT):
        raise errors.InvalidArgumentError(
            "the ack policy when consuming from elastic consumer groups must be explicit, got "
            f"{template.ack_policy}"
        )
    assert template.ack_wait is not None
    template = dataclasses.replace(
        template, ack_policy=AckPolicy.EXPLICIT, inactive_threshold=template.ack_wait
    )
    kv = group_bucket(js, ELASTIC_BUCKET, "elastic", stream, group)
    group_config = _read_from(kv, stream, group)
    js.stream_info(elastic_stream_name(stream, group))  # the group's own stream is there
    watcher = kv.watch(config_key(stream, group))
    runner = _ElasticMember(js, stream, group, member, cb, template, watcher, group_config)
    if group_config.is_in_membership(member):
        runner.join()
    runner.start()
    return ConsumerGroupConsumeContext(runner)


class _ElasticMember(MemberRunner):
    def __init__(
        self,
        js: JetStream,
        stream: str,
        group: str,
        member: str,
        cb: MessageHandler,
        template: ConsumerConfig,
        watcher: KeyWatcher,
        group_config: ElasticConsumerGroupConfig,
    ) -> None:
        label = f"{stream}.{group}-{member}"
        super().__init__(js, label, elastic_stream_name(stream, group), cb, template, watcher)
        self.member = member
        self.group_config = group_config

    def join(self) -> None:
        """Create the member's consumer with the filters of the membership as this instance
        sees it, and pull from it; when it cannot yet, the idle timer tries again."""
        filters = elastic_partition_filters(self.group_config, self.member)
        if not filters:
            return  # not a member now
        cfg = dataclasses.replace(
            pinned_template(self.config),
            name=self.member,
            durable_name=None,
            filter_subject=None,
            filter_subjects=filters,
        )
        try:
            try:
                self.js.add_consumer(self.consumer_stream, cfg)
            except errors.ConsumerAlreadyExistsError:
                # It has other filters (an older membership): replace it. The other instances
                # of this member then find it gone and join it again.
                self.delete_consumer(self.member)
                self.js.add_consumer(self.consumer_stream, cfg)
            self.start_consuming(self.member)
        except errors.APIError as exc:
            if exc.err_code != _WQ_NOT_UNIQUE:
                log.warning("%s: could not create the member's consumer: %s", self.label, exc)
        except errors.NATSError as exc:
            log.warning("%s: could not join: %s", self.label, exc)

    def on_idle(self) -> None:
        # The catch-all: a join refused while another member still held our partitions, or
        # a consumer that timed out, is retried until it works.
        if not self.consuming and self.group_config.is_in_membership(self.member):
            self.join()

    def on_entry(self, entry: Entry) -> Optional[bool]:
        if entry.operation in (KV_DEL, KV_PURGE):
            self.stop_consuming()
            return True  # the group was deleted: a normal end
        try:
            new = ElasticConsumerGroupConfig.from_json(entry.value or b"", entry.revision)
            new.validate()
        except ConsumerGroupConfigError as exc:
            self.stop_consuming()
            self.reason = exc
            return True
        if not new.same_shape(self.group_config):
            self.stop_consuming()
            self.reason = ConsumerGroupChangedError(
                f"elastic consumer group {self.label}: max_members, partitioning_filters or "
                f"the buffer limits changed, which a running member cannot follow: ended"
            )
            return True
        same_members = (
            new.members == self.group_config.members
            and new.member_mappings == self.group_config.member_mappings
        )
        if same_members and self.consuming:
            return None
        self.group_config.members = new.members
        self.group_config.member_mappings = new.member_mappings
        self._follow_membership()
        return None

    def _follow_membership(self) -> None:
        # Our consumer is deleted and made again, not given more filters: partitions that
        # came to us may hold messages below where it already is.
        pinned = self.holds_pin()
        self.stop_consuming()
        if pinned:
            self.delete_consumer(self.member)
        elif self.pause(random.uniform(0.4, 0.5)):
            return  # stopped meanwhile
        # A standby waits a little: the pinned instance deletes and makes it first.
        self.join()
