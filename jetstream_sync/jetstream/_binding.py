"""Binding to a consumer that exists: is it the one the caller asked for?

A restarted worker binds with the config it always had. The server does not hand that config
back as it was sent: it leaves out ``False`` and ``0`` (Go's omitempty), turns a ``0`` into its
own default (``max_deliver`` -1, ``max_waiting`` 512, ``max_ack_pending`` 1000), and adds
``_nats.*`` keys to ``metadata``. So, as nats.go's check does, only what the caller set is
compared, and a zero value (``0``, ``False``, ``""``, empty) counts as not set: it asks for
the server's default, which the server has already chosen.
"""

from __future__ import annotations

import dataclasses
import math
from typing import AbstractSet, Any, List

from .. import errors
from . import api

__all__ = ["check_filter_matches", "config_differences", "subject_fits_filters"]

# The server keeps its own bookkeeping in metadata under this prefix (version, API level).
_SERVER_METADATA = "_nats."


def config_differences(
    want: api.ConsumerConfig, have: api.ConsumerConfig, skip: AbstractSet[str]
) -> List[str]:
    """One line per field the caller set (not None) that the consumer does not have, as
    ``name (asked X, has Y)``; fields in ``skip`` are the binding call's to decide."""
    differ = []
    for f in dataclasses.fields(want):
        if f.name in skip or f.name == "extra":
            continue
        asked = getattr(want, f.name)
        if asked is None or _is_zero(asked):
            continue
        has = getattr(have, f.name)
        same = _metadata_kept(asked, has) if f.name == "metadata" else _same(asked, has)
        if not same:
            differ.append(f"{f.name} (asked {asked!r}, has {has!r})")
    return differ


def _same(asked: Any, has: Any) -> bool:
    if has is None:
        return False
    if isinstance(asked, float) or isinstance(has, float):
        # Durations travel as nanoseconds: 0.1 s comes back as 100000000 ns / 1e9.
        if isinstance(asked, bool) or isinstance(has, bool):
            return bool(asked == has)
        try:
            return math.isclose(float(asked), float(has), rel_tol=1e-9, abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    if isinstance(asked, list) and isinstance(has, list):
        return len(asked) == len(has) and all(_same(a, h) for a, h in zip(asked, has))
    return bool(asked == has)


def _is_zero(value: Any) -> bool:
    """Go's zero values: "use the default" to the server, and left out of its answers."""
    return value is False or value == 0 or value == "" or value == [] or value == {}


def _metadata_kept(asked: Any, has: Any) -> bool:
    """Every key the caller set, with its value; the server's own keys are not the caller's."""
    if not isinstance(asked, dict):
        return False
    have = has if isinstance(has, dict) else {}
    return all(
        have.get(k) == v for k, v in asked.items() if not str(k).startswith(_SERVER_METADATA)
    )


def check_filter_matches(subject: str, config: api.ConsumerConfig) -> None:
    """A subscribe subject and a config filter that disagree are a mistake to name, not one
    to settle silently by taking either (nats.go refuses the mismatch too)."""
    if config.filter_subject and config.filter_subject != subject:
        raise errors.InvalidArgumentError(
            f"subject {subject!r} and config.filter_subject {config.filter_subject!r} differ: "
            "give the filter once, or the same in both"
        )
    if config.filter_subjects and not subject_fits_filters(subject, config.filter_subjects):
        raise errors.InvalidArgumentError(
            f"subject {subject!r} is neither one of config.filter_subjects "
            f"{config.filter_subjects!r} nor a pattern covering them all"
        )


def subject_fits_filters(subject: str, filters: List[str]) -> bool:
    """``subject`` names one of the consumer's ``filters``, or is a pattern covering every
    one of them (``events.>`` with filters ``events.1`` and ``events.2``, as nats-py lets
    the filters narrow the subject): either way the subject says nothing false about what
    the consumer delivers."""
    return subject in filters or all(covers(subject, f) for f in filters)


def covers(pattern: str, subject: str) -> bool:
    """Every subject ``subject`` matches (it may have wildcards itself), ``pattern`` does."""
    pt = pattern.split(".")
    st = subject.split(".")
    for i, p in enumerate(pt):
        if p == ">":
            return len(st) > i
        if i >= len(st):
            return False
        if st[i] == ">" or (p != "*" and (p != st[i] or st[i] == "*")):
            return False
    return len(pt) == len(st)
