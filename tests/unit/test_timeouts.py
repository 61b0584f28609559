"""check_timeout and Deadline; time is frozen with freezegun, nothing sleeps."""

from __future__ import annotations

import builtins
import math
from typing import Any

import pytest
from freezegun import freeze_time

from jetstream_sync import errors
from jetstream_sync._timeouts import Deadline, check_timeout
from jetstream_sync.errors import BadTimeoutError, InvalidArgumentError, NATSError


@pytest.mark.parametrize("value", [0, 0.0, 1, 2.5, 1e-9, 86400, 10**6])
def test_valid_timeouts(value: Any) -> None:
    result = check_timeout(value)
    assert type(result) is float
    assert result == float(value)
    assert check_timeout(value, allow_none=True) == float(value)


def test_ints_are_coerced_to_float() -> None:
    assert repr(check_timeout(3)) == "3.0"


def test_none_refused_unless_allowed() -> None:
    with pytest.raises(
        BadTimeoutError, match=r"^flush timeout must be a number of seconds, got None$"
    ):
        check_timeout(None, "flush timeout")
    assert check_timeout(None, allow_none=True) is None


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (-1, "must be >= 0 seconds, got -1"),
        (-0.001, "must be >= 0 seconds, got -0.001"),
        (-math.inf, "must be >= 0 seconds, got -inf"),
        (math.nan, "must be >= 0 seconds, got nan"),
        (True, "must be a number of seconds, got bool"),
        (False, "must be a number of seconds, got bool"),
        ("1", "must be a number of seconds, got str"),
        (b"1", "must be a number of seconds, got bytes"),
        ([1], "must be a number of seconds, got list"),
        (1j, "must be a number of seconds, got complex"),
    ],
)
def test_bad_timeouts(value: Any, needle: str) -> None:
    for allow_none in (False, True):
        with pytest.raises(BadTimeoutError, match=f"^my_arg {needle}") as info:
            check_timeout(value, "my_arg", allow_none=allow_none)
        assert isinstance(info.value, InvalidArgumentError)
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, NATSError)


def test_default_argument_name_is_timeout() -> None:
    with pytest.raises(BadTimeoutError, match=r"^timeout must be >= 0 seconds"):
        check_timeout(-1)


def test_infinity_only_with_allow_none() -> None:
    with pytest.raises(BadTimeoutError, match=r"^wait must be finite, got inf$"):
        check_timeout(math.inf, "wait")
    assert check_timeout(math.inf, allow_none=True) is None
    assert check_timeout(float("inf"), "wait", allow_none=True) is None


@pytest.mark.parametrize("allow_none", [False, True])
def test_huge_int_timeout(allow_none: bool) -> None:
    try:
        result = check_timeout(10**400, "t", allow_none=allow_none)
    except BadTimeoutError as exc:
        assert "t " in str(exc)
    else:
        assert allow_none and result is None


# --- Deadline ---------------------------------------------------------------------------


def test_deadline_counts_down_and_clamps_at_zero() -> None:
    with freeze_time("2024-01-01 00:00:00") as frozen:
        d = Deadline(5.0, "request on 'svc'")
        assert d.remaining() == pytest.approx(5.0)
        assert not d.expired
        assert d.check() == pytest.approx(5.0)
        frozen.tick(2)
        assert d.remaining() == pytest.approx(3.0)
        assert d.check() == pytest.approx(3.0)
        frozen.tick(2.5)
        assert d.remaining() == pytest.approx(0.5)
        assert not d.expired
        frozen.tick(0.5)
        assert d.remaining() == 0.0
        assert d.expired
        frozen.tick(100)
        assert d.remaining() == 0.0
        assert d.expired


def test_deadline_remaining_never_increases() -> None:
    with freeze_time("2024-01-01") as frozen:
        d = Deadline(1.0)
        last = d.remaining()
        for _ in range(30):
            frozen.tick(0.05)
            now = d.remaining()
            assert 0.0 <= now <= last
            last = now
        assert last == 0.0


def test_deadline_check_raises_timeout_error_once_expired() -> None:
    with freeze_time("2024-01-01") as frozen:
        d = Deadline(1.0, "flush")
        frozen.tick(1.0)
        with pytest.raises(errors.TimeoutError, match=r"^flush timed out$") as info:
            d.check()
        assert isinstance(info.value, builtins.TimeoutError)
        assert isinstance(info.value, NATSError)
        frozen.tick(5)
        with pytest.raises(builtins.TimeoutError):
            d.check()


def test_deadline_zero_is_already_expired() -> None:
    with freeze_time("2024-01-01"):
        d = Deadline(0.0)
        assert d.expired
        assert d.remaining() == 0.0
        with pytest.raises(errors.TimeoutError, match="operation timed out"):
            d.check()


def test_deadline_from_checked_timeout() -> None:
    with freeze_time("2024-01-01") as frozen:
        d = Deadline(check_timeout(2), "connect")
        frozen.tick(1.5)
        assert d.check() == pytest.approx(0.5)
        frozen.tick(0.5)
        assert d.expired
