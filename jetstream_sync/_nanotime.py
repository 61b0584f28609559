"""NanoDatetime: a datetime that keeps the nanoseconds below its microsecond.

A core module because ``Msg.metadata`` (a message's ``$JS.ACK`` timestamp) makes one, and
the core imports nothing from ``jetstream/``; ``jetstream/api.py`` re-exports it with the
models whose server times are of this type.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, SupportsIndex, Tuple

__all__ = ["NanoDatetime", "plain_repr"]


class NanoDatetime(datetime):
    """A ``datetime`` that also keeps the nanoseconds below its microsecond (0-999).

    Parsed server times are of this type; to the rest of Python they are ordinary aware
    datetimes (comparison, hashing and arithmetic ignore ``nanosecond``).
    """

    nanosecond: int = 0

    def __repr__(self) -> str:
        text = super().__repr__()
        return f"{text[:-1]}, nanosecond={self.nanosecond})" if self.nanosecond else text

    def __reduce_ex__(self, protocol: SupportsIndex) -> Tuple[Any, ...]:
        plain = datetime(
            self.year, self.month, self.day, self.hour, self.minute, self.second,
            self.microsecond, self.tzinfo, fold=self.fold,
        )  # fmt: skip
        return (_nano_datetime, (plain, self.nanosecond))


def _nano_datetime(dt: datetime, nanosecond: int) -> NanoDatetime:
    out = NanoDatetime(
        dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond, dt.tzinfo,
        fold=dt.fold,
    )  # fmt: skip
    out.nanosecond = nanosecond
    return out


def plain_repr(value: Any) -> str:
    """``repr(value)``, but a datetime as nats-py shows its times: ``datetime.datetime(...)``
    to the microsecond, whatever its subclass (a NanoDatetime's nanoseconds left out)."""
    if isinstance(value, datetime):
        plain = datetime(
            value.year, value.month, value.day, value.hour, value.minute, value.second,
            value.microsecond, value.tzinfo, fold=value.fold,
        )  # fmt: skip
        return repr(plain)
    return repr(value)
