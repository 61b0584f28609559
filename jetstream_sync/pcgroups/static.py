"""Static partitioned consumer groups (orbit.go's ``StaticConsume``, ``CreateStatic``, ...).

The stream's subjects already start with the partition number (a subject transform on the
stream puts it there, e.g. ``{{Partition(10,1)}}.orders.{{Wildcard(1)}}``). Each member has
a durable ``<group>-<member>`` on the stream itself, filtered to its partitions. The
membership is fixed at creation: any change of the record ends every member (delete and create
the group again to change it).
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

from .. import errors
from ..jetstream.api import ConsumerConfig
from ..jetstream.context import JetStream
from ..jetstream.kv import KV_DEL, KV_PURGE, Entry, KeyValue, KeyWatcher
from .errors import (
    ConsumerGroupChangedError,
    ConsumerGroupConfigError,
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
    PRIORITY_GROUP,
    STATIC_BUCKET,
    config_key,
    static_consumer_name,
    static_partition_filters,
)
from .records import MemberMapping, StaticConsumerGroupConfig, check_member_count
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
    "create_static",
    "delete_static",
    "get_static_config",
    "list_static",
    "static_active_members",
    "static_consume",
    "static_member_step_down",
]


def get_static_config(js: JetStream, stream: str, group: str) -> StaticConsumerGroupConfig:
    """The group's config as stored (ConsumerGroupNotFoundError if there is none)."""
    stream, group = check_stream(stream), check_name(group, "group")
    kv = group_bucket(js, STATIC_BUCKET, "static", stream, group)
    entry = read_record(kv, stream, group, "static")
    config = StaticConsumerGroupConfig.from_json(entry.value or b"")
    config.validate()
    return config


def create_static(
    js: JetStream,
    stream: str,
    group: str,
    max_members: int,
    filters: Optional[Sequence[str]] = None,
    members: Optional[Sequence[str]] = None,
    member_mappings: Optional[Sequence[MemberMapping]] = None,
) -> StaticConsumerGroupConfig:
    """Create a static group on ``stream`` (whose subjects start with the partition number):
    ``max_members`` partitions shared out among ``members`` (balanced) or as
    ``member_mappings`` say; ``filters`` (subject filters after the partition token) narrow
    what it consumes. The same config again is fine; a different one is
    ConsumerGroupExistsError. The bucket is made when missing (the stream's replicas)."""
    config = StaticConsumerGroupConfig(
        max_members=_max_members(max_members),
        filters=check_names(filters, "filters", subject=True),
        members=check_names(members, "members"),
        member_mappings=list(member_mappings or []),
    )
    config.validate()
    check_member_count(config.max_members, config.members)
    stream = check_stream(stream)
    group = check_name(group, "group")
    info = js.stream_info(stream)
    kv = bucket(js, STATIC_BUCKET, "static", create_replicas=info.config.num_replicas or 1)
    key = config_key(stream, group)
    try:
        existing = kv.get(key)
    except errors.KeyNotFoundError:
        _refuse_durable_clash(kv, stream, group, config)
        try:
            kv.create(key, config.to_json())
            return config
        except errors.KeyWrongLastSequenceError:
            existing = kv.get(key)  # another creator was first: compare with theirs
    current = StaticConsumerGroupConfig.from_json(existing.value or b"")
    if current != config:
        raise ConsumerGroupExistsError(
            f"static consumer group {key!r} exists with a different config "
            f"({(existing.value or b'').decode(errors='replace')}): delete it first to change it"
        )
    return current


def _refuse_durable_clash(
    kv: KeyValue, stream: str, group: str, config: StaticConsumerGroupConfig
) -> None:
    """Refuse a group whose members' durables (``<group>-<member>``) would be another
    group's on the same stream: group ``g`` member ``x-m1`` and group ``g-x`` member ``m1``
    are both ``g-x-m1``, and would share (and steal) one consumer."""
    mine = {static_consumer_name(group, m): m for m in _member_names(config)}
    for other in group_names(kv, stream):
        if other == group:
            continue
        try:
            theirs = StaticConsumerGroupConfig.from_json(
                kv.get(config_key(stream, other)).value or b""
            )
        except (errors.KeyNotFoundError, ConsumerGroupConfigError):
            continue  # gone meanwhile, or unreadable: it has no durables we can name
        clash = sorted(set(mine) & {static_consumer_name(other, m) for m in _member_names(theirs)})
        if clash:
            raise ConsumerGroupExistsError(
                f"static consumer group {stream}.{group}: the durable name(s) {clash} of its "
                f"members are those of group {other!r} on the same stream (a member's durable "
                f"is <group>-<member>): choose other group or member names"
            )


def delete_static(js: JetStream, stream: str, group: str) -> None:
    """Delete the group's record (its running members end) and the durables of the members
    its record names: exactly those, by whole name (ConsumerGroupNotFoundError if the group
    does not exist; the consumers of other groups are never touched)."""
    stream, group = check_stream(stream), check_name(group, "group")
    kv = group_bucket(js, STATIC_BUCKET, "static", stream, group)
    entry = read_record(kv, stream, group, "static")
    try:
        config = StaticConsumerGroupConfig.from_json(entry.value or b"")
        names = _member_names(config)
    except ConsumerGroupConfigError:
        names = []  # an unreadable record: nothing tells whose consumers are the group's
    delete_record(kv, stream, group)
    failed: List[str] = []
    for member in dict.fromkeys(names):
        name = static_consumer_name(group, member)
        try:
            js.delete_consumer(stream, name)
        except errors.NotFoundError:
            pass
        except errors.NATSError as exc:
            failed.append(f"{name}: {exc}")
    if failed:
        raise errors.JetStreamError(
            f"static consumer group {stream}.{group}: could not delete: {'; '.join(failed)}"
        )


def list_static(js: JetStream, stream: str) -> List[str]:
    """The names of the static groups on ``stream`` (none when there is no bucket yet)."""
    stream = check_stream(stream)
    try:
        kv = bucket(js, STATIC_BUCKET, "static")
    except ConsumerGroupNotFoundError:
        return []
    return group_names(kv, stream)


def _member_names(config: StaticConsumerGroupConfig) -> List[str]:
    return config.members or [m.member for m in config.member_mappings]


def static_active_members(js: JetStream, stream: str, group: str) -> List[str]:
    """The members that have an instance pulling now (their consumer has waiting pulls)."""
    config = get_static_config(js, stream, group)
    names = _member_names(config)
    by_consumer = {static_consumer_name(group, m): m for m in names}
    return [
        by_consumer[ci.name]
        for ci in js.consumers_info(stream)
        if ci.name in by_consumer and ci.num_waiting
    ]


def static_member_step_down(js: JetStream, stream: str, group: str, member: str) -> None:
    """Unpin the member's pinned instance: another instance of it takes over."""
    stream, group = check_stream(stream), check_name(group, "group")
    member = check_name(member, "member")
    config = get_static_config(js, stream, group)
    if not config.is_in_membership(member):
        raise NotAMemberError(
            f"{member!r} is not a member of static consumer group {stream}.{group} "
            f"(members: {_member_names(config)})"
        )
    js.unpin_consumer(stream, static_consumer_name(group, member), PRIORITY_GROUP)


def static_consume(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    cb: MessageHandler,
    config: Optional[ConsumerConfig] = None,
) -> ConsumerGroupConsumeContext:
    """Join the static group as ``member``: ``cb(msg)`` runs for each message of its
    partitions (subject without the partition token), one instance of the member at a time.
    ``config`` is the template of the member's consumer (ack_wait, max_ack_pending, ...)."""
    stream, group = check_stream(stream), check_name(group, "group")
    member = check_name(member, "member")
    check_handler(cb)
    template = member_timers(config)
    group_config = get_static_config(js, stream, group)
    js.stream_info(stream)  # StreamNotFoundError now rather than from the first pull
    if not group_config.is_in_membership(member):
        raise NotAMemberError(
            f"{member!r} is not a member of static consumer group {stream}.{group} "
            f"(members: {_member_names(group_config)})"
        )
    kv = bucket(js, STATIC_BUCKET, "static")
    watcher = kv.watch(config_key(stream, group))
    runner = _StaticMember(js, stream, group, member, cb, template, watcher, group_config)
    try:
        runner.join()
    except BaseException:
        watcher.stop()
        raise
    runner.start()
    return ConsumerGroupConsumeContext(runner)


def _max_members(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConsumerGroupConfigError(f"max_members must be an int >= 1, got {value!r}")
    return value


class _StaticMember(MemberRunner):
    def __init__(
        self,
        js: JetStream,
        stream: str,
        group: str,
        member: str,
        cb: MessageHandler,
        template: ConsumerConfig,
        watcher: KeyWatcher,
        group_config: StaticConsumerGroupConfig,
    ) -> None:
        super().__init__(js, f"{stream}.{group}-{member}", stream, cb, template, watcher)
        self.member = member
        self.group_config = group_config
        self.consumer_name = static_consumer_name(group, member)

    def join(self) -> None:
        """Create (or find, the same) the member's durable and pull from it."""
        filters = static_partition_filters(self.group_config, self.member)
        if not filters:
            return  # beyond max_members: a member that gets no partition
        cfg = dataclasses.replace(
            pinned_template(self.config),
            durable_name=self.consumer_name,
            name=None,
            filter_subject=None,
            filter_subjects=filters,
        )
        self.js.add_consumer(self.consumer_stream, cfg)
        self.start_consuming(self.consumer_name)

    def on_idle(self) -> None:
        if not self.consuming:
            try:
                self.join()
            except errors.NATSError as exc:
                log.warning("%s: could not join: %s", self.label, exc)

    def _end(self, reason: Optional[errors.NATSError]) -> bool:
        # The member's durable goes with it, as in orbit.go: a new config means new filters.
        self.stop_consuming()
        self.delete_consumer(self.consumer_name)
        self.reason = reason
        return True

    def on_entry(self, entry: Entry) -> Optional[bool]:
        if entry.operation in (KV_DEL, KV_PURGE):
            return self._end(None)
        try:
            new = StaticConsumerGroupConfig.from_json(entry.value or b"")
            new.validate()
        except ConsumerGroupConfigError as exc:
            return self._end(exc)
        if new != self.group_config:
            return self._end(
                ConsumerGroupChangedError(
                    f"static consumer group {self.label}: its config changed, which a static "
                    f"group cannot follow: member ended"
                )
            )
        return None
