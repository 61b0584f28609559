"""The binding comparison with no server: what the caller set against what the server shows."""

from __future__ import annotations

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream._binding import (
    check_filter_matches,
    config_differences,
    subject_fits_filters,
)
from jetstream_sync.jetstream.api import AckPolicy, ConsumerConfig, DeliverPolicy

NOTHING: frozenset = frozenset()


def test_what_the_server_leaves_out_or_adds_is_no_difference() -> None:
    asked = ConsumerConfig(
        headers_only=False,
        max_batch=0,
        description="",
        metadata={"team": "a"},
        ack_wait=0.1,
        backoff=[0.1, 1.5],
    )
    # As the server answers: omitempty fields absent, its own metadata keys, ns round trips.
    has = ConsumerConfig.from_dict(
        {
            "ack_wait": 100_000_000,
            "backoff": [100_000_000, 1_500_000_000],
            "metadata": {"team": "a", "_nats.ver": "2.15.1", "_nats.level": "1"},
        }
    )
    assert config_differences(asked, has, NOTHING) == []


def test_zero_values_ask_for_the_default_the_server_already_chose() -> None:
    has = ConsumerConfig.from_dict(
        {"max_deliver": -1, "max_waiting": 512, "max_ack_pending": 1000, "headers_only": True}
    )
    asked = ConsumerConfig(max_deliver=0, max_waiting=0, max_ack_pending=0, headers_only=False)
    assert config_differences(asked, has, NOTHING) == []


def test_what_the_caller_set_and_the_consumer_lacks_is_named() -> None:
    has = ConsumerConfig.from_dict(
        {"ack_policy": "explicit", "ack_wait": 30_000_000_000, "headers_only": False}
    )
    asked = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        ack_wait=5.0,
        headers_only=True,
        max_deliver=3,
        metadata={"team": "b"},
        deliver_policy=DeliverPolicy.ALL,
    )
    differ = config_differences(asked, has, NOTHING)
    names = [d.split(" ", 1)[0] for d in differ]
    assert names == [
        "deliver_policy",
        "ack_policy",
        "ack_wait",
        "max_deliver",
        "headers_only",
        "metadata",
    ]
    assert "asked 5.0, has 30.0" in differ[2]


def test_unset_fields_and_skipped_fields_are_not_compared() -> None:
    has = ConsumerConfig.from_dict({"filter_subject": "a.>", "max_ack_pending": 1000})
    asked = ConsumerConfig(filter_subject="b.*", durable_name="x")
    assert config_differences(asked, has, frozenset({"filter_subject", "durable_name"})) == []
    assert config_differences(ConsumerConfig(), has, NOTHING) == []


def test_a_subject_and_a_config_filter_must_agree() -> None:
    check_filter_matches("a.*", ConsumerConfig(filter_subject="a.*"))
    check_filter_matches("a.*", ConsumerConfig(filter_subjects=["b", "a.*"]))
    check_filter_matches("a.*", ConsumerConfig())
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        check_filter_matches("a.*", ConsumerConfig(filter_subject="a.>"))
    with pytest.raises(nats.InvalidArgumentError, match="neither one of"):
        check_filter_matches("a.*", ConsumerConfig(filter_subjects=["b"]))


def test_a_pattern_subject_covering_every_filter_fits() -> None:
    # nats-py: subscribe("events.>", config=ConsumerConfig(filter_subjects=[...]))
    check_filter_matches("e.>", ConsumerConfig(filter_subjects=["e.1", "e.2.x"]))
    check_filter_matches("e.*", ConsumerConfig(filter_subjects=["e.1", "e.*"]))
    check_filter_matches(">", ConsumerConfig(filter_subjects=["a.>", "b"]))
    for subject, filters in [
        ("e.*", ["e.1", "e.2.x"]),
        ("e.>", ["e.1", "e"]),
        ("e.*", ["e.1", "e.>"]),
        ("e.1", ["e.1", "e.2"][1:]),
        ("e.x", ["e.*"]),
    ]:
        assert not subject_fits_filters(subject, filters), (subject, filters)
    assert subject_fits_filters("e.1", ["e.1", "e.2"])
