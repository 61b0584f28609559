"""The config records of partitioned consumer groups, byte for byte as orbit.go writes them.

A group's config is one JSON value in a KV bucket (``static-consumer-groups`` or
``elastic-consumer-groups``) under the key ``<stream>.<group>``. Go members and Python members
of one group read and rewrite the same record, so this module keeps orbit.go's encoding:

* the field names and order of its Go structs, no spaces (``encoding/json``);
* Go's ``omitempty`` fields (``filters``, ``members``, ``member_mappings``,
  ``max_buffered_msg``, ``max_buffered_bytes``) left out when empty or zero;
* a Go nil slice without ``omitempty`` (``partitioning_filters``, ``partitions``,
  ``partitioning_wildcards``) written as ``null``, and kept apart from ``[]`` when read:
  a Go member compares configs with ``reflect.DeepEqual``, for which nil and empty differ, so
  a record we rewrite (add_members, ...) must not turn one into the other;
* ``<``, ``>`` and ``&`` escaped as ``\\u003c``, ``\\u003e``, ``\\u0026`` (Go's HTML-safe
  default: the filter ``>`` is stored as ``"\\u003e"``), non-ASCII text as UTF-8.

The checks are orbit.go's ``validateStaticConfig`` / ``validateConfig``, with its words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .errors import ConsumerGroupConfigError

__all__ = [
    "ElasticConsumerGroupConfig",
    "MemberMapping",
    "PartitioningFilter",
    "StaticConsumerGroupConfig",
    "check_member_count",
    "go_json",
]

# Go's encoding/json escapes these in strings by default (SetEscapeHTML(true)).
_GO_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json(value: Any) -> bytes:
    """``value`` (dicts in field order, lists, str, int, None) as Go's json.Marshal writes it."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # The escapes are safe on the whole text: these characters only occur inside strings.
    for char, escape in _GO_ESCAPES.items():
        text = text.replace(char, escape)
    return text.encode("utf-8")


@dataclass
class MemberMapping:
    """A member and the partitions it consumes (orbit.go's ``MemberMapping``).
    ``partitions`` None is Go's nil slice (``null``)."""

    member: str
    partitions: Optional[List[int]]

    def to_go(self) -> Dict[str, Any]:
        """The mapping as orbit.go's JSON object (a dict in its field order)."""
        return {"member": self.member, "partitions": self.partitions}


@dataclass
class PartitioningFilter:
    """An elastic group's filter and which of its ``*`` wildcards (1-based) make the partition
    key; none: the whole subject (orbit.go's ``PartitioningFilter``).

    The default is ``None``, stored as JSON ``null`` like orbit.go's zero value (a nil
    slice): orbit compares configs with ``reflect.DeepEqual``, for which nil and ``[]``
    differ, so a create-if-absent of ``PartitioningFilter("e.>")`` here and of
    ``PartitioningFilter{Filter: "e.>"}`` in Go must store the same bytes. A record with
    ``null`` or ``[]`` both read (and stay as they were)."""

    filter: str
    partitioning_wildcards: Optional[List[int]] = None

    def to_go(self) -> Dict[str, Any]:
        """The filter as orbit.go's JSON object (a dict in its field order)."""
        return {"filter": self.filter, "partitioning_wildcards": self.partitioning_wildcards}


@dataclass
class StaticConsumerGroupConfig:
    """A static group: ``max_members`` partitions, the partition number already the first
    token of the stream's subjects; ``members`` (balanced) or ``member_mappings``."""

    max_members: int
    filters: List[str] = field(default_factory=list)
    members: List[str] = field(default_factory=list)
    member_mappings: List[MemberMapping] = field(default_factory=list)

    def is_in_membership(self, name: str) -> bool:
        """True when ``name`` is one of the members, or has a mapping."""
        return name in self.members or any(m.member == name for m in self.member_mappings)

    def to_json(self) -> bytes:
        """The record's bytes, as orbit.go writes them (empty lists left out)."""
        out: Dict[str, Any] = {"max_members": self.max_members}
        if self.filters:
            out["filters"] = self.filters
        if self.members:
            out["members"] = self.members
        if self.member_mappings:
            out["member_mappings"] = [m.to_go() for m in self.member_mappings]
        return go_json(out)

    @classmethod
    def from_json(cls, data: bytes) -> StaticConsumerGroupConfig:
        """The config a record's bytes hold; ConsumerGroupConfigError when they are not a valid
        record."""
        obj = _object(data, "static")
        return cls(
            max_members=_uint(obj.get("max_members"), "max_members"),
            filters=_strings(obj.get("filters"), "filters") or [],
            members=_strings(obj.get("members"), "members") or [],
            member_mappings=_mappings(obj.get("member_mappings")) or [],
        )

    def validate(self) -> None:
        """Raise ConsumerGroupConfigError when the config is invalid: ``max_members`` below 1,
        both members and mappings, or mappings that do not give each partition from 0 to
        max_members - 1 to exactly one member (members named once)."""
        _check_max_members(self.max_members)
        _check_membership(self.max_members, self.members, self.member_mappings)


@dataclass
class ElasticConsumerGroupConfig:
    """An elastic group: a work-queue stream ``<stream>-<group>`` sources the stream with the
    partition number inserted as first token; members change at run time.
    ``partitioning_filters`` None is Go's nil (``null``): the whole subject is the key.
    ``revision`` is the KV revision it was read at (not in the record)."""

    max_members: int
    partitioning_filters: Optional[List[PartitioningFilter]] = None
    max_buffered_msgs: int = 0
    max_buffered_bytes: int = 0
    members: List[str] = field(default_factory=list)
    member_mappings: List[MemberMapping] = field(default_factory=list)
    revision: int = field(default=0, compare=False)

    def is_in_membership(self, name: str) -> bool:
        """True when ``name`` is one of the members, or has a mapping."""
        return name in self.members or any(m.member == name for m in self.member_mappings)

    def to_json(self) -> bytes:
        """The record's bytes, as orbit.go writes them (empty lists and zero buffer limits left
        out; ``revision`` is not in it)."""
        filters = self.partitioning_filters
        out: Dict[str, Any] = {
            "max_members": self.max_members,
            "partitioning_filters": None if filters is None else [f.to_go() for f in filters],
        }
        # orbit.go's JSON tag is "max_buffered_msg" (no s): kept, or Go would not read it.
        if self.max_buffered_msgs:
            out["max_buffered_msg"] = self.max_buffered_msgs
        if self.max_buffered_bytes:
            out["max_buffered_bytes"] = self.max_buffered_bytes
        if self.members:
            out["members"] = self.members
        if self.member_mappings:
            out["member_mappings"] = [m.to_go() for m in self.member_mappings]
        return go_json(out)

    @classmethod
    def from_json(cls, data: bytes, revision: int = 0) -> ElasticConsumerGroupConfig:
        """The config a record's bytes hold, read at KV ``revision``; ConsumerGroupConfigError
        when they are not a valid record."""
        obj = _object(data, "elastic")
        return cls(
            max_members=_uint(obj.get("max_members"), "max_members"),
            partitioning_filters=_partitioning_filters(obj.get("partitioning_filters")),
            max_buffered_msgs=_int(obj.get("max_buffered_msg"), "max_buffered_msg"),
            max_buffered_bytes=_int(obj.get("max_buffered_bytes"), "max_buffered_bytes"),
            members=_strings(obj.get("members"), "members") or [],
            member_mappings=_mappings(obj.get("member_mappings")) or [],
            revision=revision,
        )

    def same_shape(self, other: ElasticConsumerGroupConfig) -> bool:
        """The fields a running member cannot follow a change of (all but the membership)."""
        return (
            self.max_members == other.max_members
            and self.max_buffered_msgs == other.max_buffered_msgs
            and self.max_buffered_bytes == other.max_buffered_bytes
            and self.partitioning_filters == other.partitioning_filters
        )

    def validate(self) -> None:
        """Raise ConsumerGroupConfigError when the config is invalid: ``max_members`` below 1, a
        partitioning filter without a ``*`` wildcard or a final ``>`` (or with bad wildcard
        numbers), both members and mappings, or mappings that do not give each partition from
        0 to max_members - 1 to exactly one member (members named once)."""
        _check_max_members(self.max_members)
        for pf in self.partitioning_filters or []:
            _check_partitioning_filter(pf)
        _check_membership(self.max_members, self.members, self.member_mappings)


# --- the checks (orbit.go's, in its words) ---------------------------------------------------


def _refuse(text: str) -> ConsumerGroupConfigError:
    return ConsumerGroupConfigError(f"invalid consumer group config: {text}")


def _check_max_members(max_members: int) -> None:
    if max_members < 1:
        raise _refuse("the max number of members must be >= 1")


def _check_partitioning_filter(pf: PartitioningFilter) -> None:
    if not pf.filter:
        raise _refuse("partitioning filters must have a non-empty filter")
    tokens = pf.filter.split(".")
    stars = tokens.count("*")
    if stars == 0 and tokens[-1] != ">":
        raise _refuse(
            f"partitioning filter {pf.filter!r} must have at least one * wildcard or end with >"
        )
    wildcards = pf.partitioning_wildcards or []
    if len(wildcards) > stars:
        raise _refuse(
            f"partitioning filter {pf.filter!r}: more partitioning wildcards ({len(wildcards)})"
            f" than * wildcards ({stars})"
        )
    if len(set(wildcards)) != len(wildcards):
        raise _refuse(f"partitioning wildcard indexes must be unique, got {wildcards}")
    for index in wildcards:
        if index < 1 or index > stars:
            raise _refuse(
                f"partitioning wildcard indexes must be between 1 and the number of * wildcards"
                f" in the filter ({stars}), got {index}"
            )


def check_member_count(max_members: int, members: List[str]) -> None:
    """Refuse a balanced membership of more distinct members than ``max_members`` (each
    member beyond it would get no partition while the membership lists it). Only what this
    package writes is checked: a record another tool wrote with more is still read."""
    count = len(dict.fromkeys(members))
    if count > max_members:
        raise _refuse(
            f"{count} members is more than max_members ({max_members}): a member beyond it "
            f"would get no partition"
        )


def _check_membership(
    max_members: int, members: List[str], member_mappings: List[MemberMapping]
) -> None:
    if members and member_mappings:
        raise _refuse("either members or member mappings must be provided, not both")
    # Members are not checked: duplicates are dropped and the list capped at max_members
    # when the partitions are shared out (as orbit.go does).
    if not member_mappings:
        return
    if len(member_mappings) > max_members:
        raise _refuse(
            f"the number of member mappings must be between 1 and the max number of members"
            f" ({max_members}), got {len(member_mappings)}"
        )
    names = set()
    seen = set()
    for mapping in member_mappings:
        if mapping.member in names:
            raise _refuse(f"member names must be unique, {mapping.member!r} is mapped twice")
        names.add(mapping.member)
        for p in mapping.partitions or []:
            if p in seen:
                raise _refuse(f"partition numbers must be used only once, {p} is used twice")
            seen.add(p)
            if p < 0 or p >= max_members:
                raise _refuse(
                    f"partition numbers must be between 0 and {max_members - 1}"
                    f" (one less than the max number of members), got {p}"
                )
    if len(seen) != max_members:
        raise _refuse(
            f"the mappings must assign every partition 0-{max_members - 1} to a member,"
            f" they assign {len(seen)}"
        )


# --- reading a record --------------------------------------------------------------------------


def _object(data: bytes, kind: str) -> Dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _refuse(f"the {kind} consumer group record is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise _refuse(f"the {kind} consumer group record is not a JSON object: {obj!r}")
    return obj


def _int(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(f"{what} must be an integer, got {value!r}")
    return value


def _uint(value: Any, what: str) -> int:
    number = _int(value, what)
    if number < 0:
        raise _refuse(f"{what} must be >= 0, got {number}")
    return number


def _ints(value: Any, what: str) -> Optional[List[int]]:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _refuse(f"{what} must be a list of integers, got {value!r}")
    return [_int(v, what) for v in value]


def _strings(value: Any, what: str) -> Optional[List[str]]:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _refuse(f"{what} must be a list of strings, got {value!r}")
    return list(value)


def _mappings(value: Any) -> Optional[List[MemberMapping]]:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _refuse(f"member_mappings must be a list of objects, got {value!r}")
    out = []
    for item in value:
        member = item.get("member", "")
        if not isinstance(member, str):
            raise _refuse(f"a member mapping's member must be a string, got {member!r}")
        out.append(MemberMapping(member, _ints(item.get("partitions"), "partitions")))
    return out


def _partitioning_filters(value: Any) -> Optional[List[PartitioningFilter]]:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _refuse(f"partitioning_filters must be a list of objects, got {value!r}")
    out = []
    for item in value:
        flt = item.get("filter", "")
        if not isinstance(flt, str):
            raise _refuse(f"a partitioning filter must be a string, got {flt!r}")
        wildcards = _ints(item.get("partitioning_wildcards"), "partitioning_wildcards")
        out.append(PartitioningFilter(flt, wildcards))
    return out
