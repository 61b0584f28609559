"""How partitions are shared out among members, and the names everything goes by.

All of it is orbit.go's, to the byte: a Go member and a Python member of one group must compute
the same filters for the same member (their consumers are one consumer, created by whichever
instance comes first), and address the same stream, consumers, key and priority group.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from .records import (
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConsumerGroupConfig,
)

__all__ = [
    "ELASTIC_BUCKET",
    "PRIORITY_GROUP",
    "STATIC_BUCKET",
    "config_key",
    "elastic_partition_filters",
    "elastic_stream_name",
    "generate_partition_filters",
    "partitioning_transform_dest",
    "static_consumer_name",
    "static_partition_filters",
    "strip_partition",
]

STATIC_BUCKET = "static-consumer-groups"
ELASTIC_BUCKET = "elastic-consumer-groups"
PRIORITY_GROUP = "PCG"  # the pinned_client group of every member's consumer


def config_key(stream: str, group: str) -> str:
    """The group's key in its bucket."""
    return f"{stream}.{group}"


def static_consumer_name(group: str, member: str) -> str:
    """A static group member's durable on the stream itself."""
    return f"{group}-{member}"


def elastic_stream_name(stream: str, group: str) -> str:
    """The work-queue stream an elastic group consumes from (its consumers: the members)."""
    return f"{stream}-{group}"


def strip_partition(subject: str) -> str:
    """The subject without its first token (the partition number)."""
    _, dot, rest = subject.partition(".")
    return rest if dot else subject


def generate_partition_filters(
    members: Sequence[str],
    max_members: int,
    member_mappings: Sequence[MemberMapping],
    member: str,
    subject_filter: str,
) -> List[str]:
    """The filters of ``member``'s consumer: ``<partition>.<subject_filter>`` for each
    partition it owns.

    Balanced (``members``): duplicates dropped, sorted, capped at ``max_members``; each member
    gets a run of ``max_members // n`` consecutive partitions and the remainder goes round
    from the first member — so adding or removing a member moves few partitions.
    Mapped: ``<partition>.>`` for each mapped partition (orbit.go ignores the filter there;
    so do we, or a Go and a Python instance would make differing consumers)."""
    if members:
        ordered = sorted(dict.fromkeys(members))[:max_members]
        n = len(ordered)
        per = max_members // n
        balanced = n * per
        mine = []
        for p in range(max_members):
            owner = ordered[(p // per) % n] if p < balanced else ordered[(p - balanced) % n]
            if owner == member:
                mine.append(f"{p}.{subject_filter}")
        return mine
    return [
        f"{p}.>"
        for mapping in member_mappings
        if mapping.member == member
        for p in mapping.partitions or []
    ]


def _per_filter(
    filters: Optional[Sequence[str]],
    members: Sequence[str],
    max_members: int,
    mappings: Sequence[MemberMapping],
    member: str,
) -> List[str]:
    if not filters:
        return generate_partition_filters(members, max_members, mappings, member, ">")
    out: List[str] = []
    for f in filters:
        out.extend(generate_partition_filters(members, max_members, mappings, member, f))
    return out


def static_partition_filters(config: StaticConsumerGroupConfig, member: str) -> List[str]:
    """The filters of ``member``'s consumer in a static group (none: it consumes nothing)."""
    return _per_filter(
        config.filters, config.members, config.max_members, config.member_mappings, member
    )


def elastic_partition_filters(config: ElasticConsumerGroupConfig, member: str) -> List[str]:
    """The filters of ``member``'s consumer in an elastic group (none: not a member now)."""
    filters = [pf.filter for pf in config.partitioning_filters or []]
    return _per_filter(filters, config.members, config.max_members, config.member_mappings, member)


def partitioning_transform_dest(pf: PartitioningFilter, max_members: int) -> str:
    """The subject transform destination that prefixes the partition number, e.g.
    ``foo.*.*`` with wildcards [1, 2] over 4 -> ``{{Partition(4,1,2)}}.foo.{{Wildcard(1)}}...``;
    no partitioning wildcards: the partition of the whole subject."""
    tokens = pf.filter.split(".")
    star = 0
    for i, token in enumerate(tokens):
        if token == "*":
            star += 1
            tokens[i] = f"{{{{Wildcard({star})}}}}"
    dest = ".".join(tokens)
    wildcards = pf.partitioning_wildcards or []
    if not wildcards:
        return f"{{{{Partition({max_members})}}}}.{dest}"
    listed = ",".join(str(w) for w in wildcards)
    return f"{{{{Partition({max_members},{listed})}}}}.{dest}"
