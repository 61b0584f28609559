"""Partitioned consumer groups' records and names against orbit.go's (pcgroups, its Go source
and tests): Go cannot run here, so the bytes its ``json.Marshal`` writes for its structs are
spelled out and compared field by field, as are its partition filters, transform
destinations, validation verdicts and names. A Go member and a Python member of one group read
and rewrite these same records and make these same consumers."""

from __future__ import annotations

from typing import List

import pytest

from jetstream_sync import errors
from jetstream_sync.pcgroups import (
    ConsumerGroupConfigError,
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConsumerGroupConfig,
    elastic_partition_filters,
    generate_partition_filters,
    partitioning_transform_dest,
    static_partition_filters,
)
from jetstream_sync.pcgroups.partitions import (
    ELASTIC_BUCKET,
    PRIORITY_GROUP,
    STATIC_BUCKET,
    config_key,
    elastic_stream_name,
    static_consumer_name,
    strip_partition,
)

# --- the records, as Go's json.Marshal writes orbit.go's structs ----------------------------


def test_names_are_orbits() -> None:
    assert STATIC_BUCKET == "static-consumer-groups"
    assert ELASTIC_BUCKET == "elastic-consumer-groups"
    assert PRIORITY_GROUP == "PCG"
    assert config_key("ORDERS", "cg") == "ORDERS.cg"  # composeKey
    assert static_consumer_name("cg", "m1") == "cg-m1"  # composeStaticConsumerName
    assert elastic_stream_name("ORDERS", "cg") == "ORDERS-cg"  # composeCGSName


def test_static_record_balanced_as_go_writes_it() -> None:
    # CreateStatic(..., 2, []string{"foo.*", "bar.*"}, []string{"m1", "m2"}, []MemberMapping{})
    # (orbit's TestStatic): member_mappings is omitempty, so the empty slice is left out.
    cfg = StaticConsumerGroupConfig(2, ["foo.*", "bar.*"], ["m1", "m2"], [])
    want = b'{"max_members":2,"filters":["foo.*","bar.*"],"members":["m1","m2"]}'
    assert cfg.to_json() == want
    assert StaticConsumerGroupConfig.from_json(want) == cfg


def test_static_record_escapes_html_characters_as_go_does() -> None:
    # Go escapes <, > and & in strings by default: the filter ">" is stored as "\u003e".
    cfg = StaticConsumerGroupConfig(10, [">"], ["m1", "m2"])
    want = b'{"max_members":10,"filters":["\\u003e"],"members":["m1","m2"]}'
    assert cfg.to_json() == want
    assert StaticConsumerGroupConfig.from_json(want).filters == [">"]


def test_static_record_mapped_and_without_filters() -> None:
    cfg = StaticConsumerGroupConfig(
        4, member_mappings=[MemberMapping("m1", [0, 1]), MemberMapping("m2", [2, 3])]
    )
    want = (
        b'{"max_members":4,"member_mappings":[{"member":"m1","partitions":[0,1]},'
        b'{"member":"m2","partitions":[2,3]}]}'
    )
    assert cfg.to_json() == want
    assert StaticConsumerGroupConfig.from_json(want) == cfg


def test_elastic_record_as_go_writes_it() -> None:
    # CreateElastic(..., 2, []PartitioningFilter{{"foo.*", []int{1}}, {"bar.*", []int{1}}},
    # -1, -1) (orbit's TestElastic): max_buffered_* are omitempty but -1 is not empty; note
    # the tag "max_buffered_msg" (no s).
    cfg = ElasticConsumerGroupConfig(
        2,
        [PartitioningFilter("foo.*", [1]), PartitioningFilter("bar.*", [1])],
        max_buffered_msgs=-1,
        max_buffered_bytes=-1,
    )
    want = (
        b'{"max_members":2,"partitioning_filters":[{"filter":"foo.*","partitioning_wildcards":'
        b'[1]},{"filter":"bar.*","partitioning_wildcards":[1]}],"max_buffered_msg":-1,'
        b'"max_buffered_bytes":-1}'
    )
    assert cfg.to_json() == want
    # AddMembers then writes the members after the buffer limits.
    cfg.members = ["m1", "m2"]
    assert cfg.to_json() == want[:-1] + b',"members":["m1","m2"]}'
    assert ElasticConsumerGroupConfig.from_json(cfg.to_json()) == cfg


def test_elastic_record_keeps_go_nil_apart_from_empty() -> None:
    # partitioning_filters and partitioning_wildcards are not omitempty: a nil slice is null,
    # an empty one []. Go members compare configs with reflect.DeepEqual, for which these
    # differ: a record we rewrite must keep whichever it had.
    nil_filters = b'{"max_members":3,"partitioning_filters":null}'
    empty_filters = b'{"max_members":3,"partitioning_filters":[]}'
    nil_wildcards = (
        b'{"max_members":3,"partitioning_filters":[{"filter":"a.\\u003e",'
        b'"partitioning_wildcards":null}],"max_buffered_bytes":1048576}'
    )
    for record in (nil_filters, empty_filters, nil_wildcards):
        assert ElasticConsumerGroupConfig.from_json(record).to_json() == record
    a = ElasticConsumerGroupConfig.from_json(nil_filters)
    b = ElasticConsumerGroupConfig.from_json(empty_filters)
    assert a.partitioning_filters is None and b.partitioning_filters == []
    assert not a.same_shape(b)  # as a Go member would see it: a change of filters
    # A mapping with a nil partitions slice round-trips too.
    mapped = (
        b'{"max_members":1,"partitioning_filters":null,"member_mappings":'
        b'[{"member":"m1","partitions":[0]},{"member":"m2","partitions":null}]}'
    )
    assert ElasticConsumerGroupConfig.from_json(mapped).to_json() == mapped


def test_records_go_wrote_with_unknown_fields_and_unicode_are_read() -> None:
    record = '{"max_members":2,"members":["m\u00e9",">"],"later_field":true}'.encode()
    cfg = StaticConsumerGroupConfig.from_json(record)
    assert cfg.members == ["m\u00e9", ">"]
    # Go writes non-ASCII as UTF-8 and the > escaped.
    assert cfg.to_json() == '{"max_members":2,"members":["m\u00e9","\\u003e"]}'.encode()


@pytest.mark.parametrize(
    "record",
    [
        b"not json",
        b"[1,2]",
        b'{"max_members":"2"}',
        b'{"max_members":-1}',
        b'{"max_members":2,"members":"m1"}',
        b'{"max_members":2,"member_mappings":[{"member":1,"partitions":[0]}]}',
        b'{"max_members":2,"member_mappings":[{"member":"m1","partitions":["0"]}]}',
    ],
)
def test_unreadable_records_are_config_errors(record: bytes) -> None:
    with pytest.raises(ConsumerGroupConfigError):
        StaticConsumerGroupConfig.from_json(record)


def test_config_errors_are_invalid_arguments_too() -> None:
    assert issubclass(ConsumerGroupConfigError, errors.InvalidArgumentError)
    assert issubclass(ConsumerGroupConfigError, errors.JetStreamError)


# --- the partitions, as orbit.go shares them out --------------------------------------------


def test_partition_filters_of_orbits_base_functions_test() -> None:
    # orbit's TestBaseFunctions, value for value.
    pfs = [PartitioningFilter("foo.*.*.>", [1, 2])]
    cfg = ElasticConsumerGroupConfig(4, pfs, members=["m1", "m2", "m3"])
    assert (
        partitioning_transform_dest(pfs[0], 4)
        == "{{Partition(4,1,2)}}.foo.{{Wildcard(1)}}.{{Wildcard(2)}}.>"
    )
    cfg.max_members = 6
    assert elastic_partition_filters(cfg, "m1") == ["0.foo.*.*.>", "1.foo.*.*.>"]
    assert elastic_partition_filters(cfg, "m2") == ["2.foo.*.*.>", "3.foo.*.*.>"]
    assert elastic_partition_filters(cfg, "m3") == ["4.foo.*.*.>", "5.foo.*.*.>"]
    cfg.max_members = 7
    assert elastic_partition_filters(cfg, "m1") == ["0.foo.*.*.>", "1.foo.*.*.>", "6.foo.*.*.>"]
    assert elastic_partition_filters(cfg, "m2") == ["2.foo.*.*.>", "3.foo.*.*.>"]
    assert elastic_partition_filters(cfg, "m3") == ["4.foo.*.*.>", "5.foo.*.*.>"]
    cfg.max_members = 8
    assert elastic_partition_filters(cfg, "m1") == ["0.foo.*.*.>", "1.foo.*.*.>", "6.foo.*.*.>"]
    assert elastic_partition_filters(cfg, "m2") == ["2.foo.*.*.>", "3.foo.*.*.>", "7.foo.*.*.>"]
    assert elastic_partition_filters(cfg, "m3") == ["4.foo.*.*.>", "5.foo.*.*.>"]


def test_balanced_members_are_deduplicated_sorted_and_capped() -> None:
    members = ["m3", "m1", "m3", "m2"]
    assert generate_partition_filters(members, 2, [], "m1", ">") == ["0.>"]
    assert generate_partition_filters(members, 2, [], "m2", ">") == ["1.>"]
    assert generate_partition_filters(members, 2, [], "m3", ">") == []  # beyond max_members
    # Every partition has exactly one owner, whatever the count.
    for max_members in range(1, 12):
        for n in range(1, 6):
            names = [f"m{i}" for i in range(n)]
            owned: List[str] = []
            for m in names:
                owned += generate_partition_filters(names, max_members, [], m, "x")
            assert sorted(owned) == sorted(f"{p}.x" for p in range(max_members))


def test_static_filters_per_filter_and_mapped_filters_ignore_the_filter() -> None:
    cfg = StaticConsumerGroupConfig(2, ["foo.*", "bar.*"], ["m1", "m2"])
    assert static_partition_filters(cfg, "m1") == ["0.foo.*", "0.bar.*"]
    assert static_partition_filters(cfg, "m2") == ["1.foo.*", "1.bar.*"]
    assert static_partition_filters(StaticConsumerGroupConfig(2, [], ["m1"]), "m1") == [
        "0.>",
        "1.>",
    ]
    # Mapped: orbit.go writes "<p>.>" whatever the filter (so do we: one consumer for both).
    mapped = StaticConsumerGroupConfig(
        3, ["foo.*"], member_mappings=[MemberMapping("a", [2, 0]), MemberMapping("b", [1])]
    )
    assert static_partition_filters(mapped, "a") == ["2.>", "0.>"]
    assert static_partition_filters(mapped, "b") == ["1.>"]
    assert static_partition_filters(mapped, "c") == []


def test_transform_destinations() -> None:
    assert partitioning_transform_dest(PartitioningFilter(">", []), 10) == "{{Partition(10)}}.>"
    assert (
        partitioning_transform_dest(PartitioningFilter("foo.*", [1]), 2)
        == "{{Partition(2,1)}}.foo.{{Wildcard(1)}}"
    )
    assert (
        partitioning_transform_dest(PartitioningFilter("a.*.b.*.>", [2]), 5)
        == "{{Partition(5,2)}}.a.{{Wildcard(1)}}.b.{{Wildcard(2)}}.>"
    )
    assert (
        partitioning_transform_dest(PartitioningFilter("a.*", None), 3)
        == "{{Partition(3)}}.a.{{Wildcard(1)}}"
    )


def test_the_partition_token_is_stripped() -> None:
    assert strip_partition("3.orders.k1") == "orders.k1"
    assert strip_partition("3") == "3"


# --- validation: orbit's verdicts -----------------------------------------------------------


def _valid(cfg: ElasticConsumerGroupConfig) -> bool:
    try:
        cfg.validate()
    except ConsumerGroupConfigError:
        return False
    return True


def test_validation_of_orbits_base_functions_test() -> None:
    cfg = ElasticConsumerGroupConfig(2, [PartitioningFilter("foo.*", [1])], members=["m1", "m2"])
    assert _valid(cfg)
    cfg.member_mappings = [MemberMapping("m1", [0, 1])]
    assert not _valid(cfg)  # members and mappings both
    cfg.members = []
    assert _valid(cfg)
    for mappings in (
        [MemberMapping("m1", [1, 1])],  # duplicate partition
        [MemberMapping("m1", [1])],  # not every partition
        [MemberMapping("m1", [0, 1, 2])],  # out of range
        [MemberMapping("m1", [0, 2])],  # out of range
        [MemberMapping("m1", [0, 1]), MemberMapping("m1", [0, 1])],  # duplicate member
        [MemberMapping("m1", [0, 1]), MemberMapping("m2", [0, 1])],  # overlap
        [MemberMapping("m1", [0, 1]), MemberMapping("m2", [2, 3])],  # out of range
    ):
        cfg.member_mappings = mappings
        assert not _valid(cfg), mappings
    cfg.member_mappings = [MemberMapping("m1", [0]), MemberMapping("m2", [1])]
    assert _valid(cfg)
    cfg.max_members = 3
    assert not _valid(cfg)
    cfg.member_mappings = [MemberMapping("m1", [0, 2]), MemberMapping("m2", [1, 2])]
    assert not _valid(cfg)
    cfg.member_mappings = [MemberMapping("m1", [0, 2]), MemberMapping("m2", [1])]
    assert _valid(cfg)


@pytest.mark.parametrize(
    "pf, ok",
    [
        (PartitioningFilter("foo.*", [1]), True),
        (PartitioningFilter("foo.>", []), True),
        (PartitioningFilter("foo.*.*", [2, 1]), True),
        (PartitioningFilter("", []), False),
        (PartitioningFilter("foo.bar", []), False),  # no wildcard
        (PartitioningFilter("foo.*", [1, 2]), False),  # more indexes than *
        (PartitioningFilter("foo.*.*", [1, 1]), False),  # not unique
        (PartitioningFilter("foo.*.*", [0]), False),  # 1-based
        (PartitioningFilter("foo.*.>", [2]), False),  # > is not a * wildcard
    ],
)
def test_partitioning_filter_validation(pf: PartitioningFilter, ok: bool) -> None:
    assert _valid(ElasticConsumerGroupConfig(4, [pf])) is ok


def test_max_members_must_be_at_least_one() -> None:
    with pytest.raises(ConsumerGroupConfigError, match="max number of members must be >= 1"):
        StaticConsumerGroupConfig(0, members=["m1"]).validate()


def test_partitioning_filter_default_is_orbits_nil() -> None:
    # Issue 34: orbit's PartitioningFilter{Filter: "e.>"} stores null; so must ours, or a
    # create-if-absent of the same-looking config from the other language is refused.
    pf = PartitioningFilter("e.>")
    assert pf.partitioning_wildcards is None
    cfg = ElasticConsumerGroupConfig(2, [pf])
    assert cfg.to_json() == (
        b'{"max_members":2,"partitioning_filters":[{"filter":"e.\\u003e",'
        b'"partitioning_wildcards":null}]}'
    )
    assert ElasticConsumerGroupConfig.from_json(cfg.to_json()).same_shape(cfg)


def test_member_count_beyond_max_members_is_refused_but_still_read() -> None:
    from jetstream_sync.pcgroups.records import check_member_count

    check_member_count(2, ["a", "b", "a"])  # duplicates are one member
    with pytest.raises(ConsumerGroupConfigError, match="max_members"):
        check_member_count(2, ["a", "b", "c"])
    # A record another tool wrote with more members is read and passes validate().
    cfg = StaticConsumerGroupConfig.from_json(b'{"max_members":2,"members":["a","b","c"]}')
    cfg.validate()
    assert cfg.members == ["a", "b", "c"]
