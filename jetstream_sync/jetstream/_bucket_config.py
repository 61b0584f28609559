"""nats-py's three methods of a bucket's config (``KeyValueConfig``, ``ObjectStoreConfig``):
``as_dict``, ``evolve`` and ``from_response``, with nats-py's meaning, for ported code."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Type, TypeVar

_C = TypeVar("_C", bound="BucketConfigForms")


class BucketConfigForms:
    """Mixed into the bucket configs (dataclasses)."""

    # fields nats-py never puts in as_dict (client-side only)
    _NOT_IN_DICT: frozenset[str] = frozenset({"limit_marker_ttl"})

    def as_dict(self) -> Dict[str, Any]:
        """nats-py's ``as_dict``: the fields that are set, ``ttl`` in nanoseconds, models
        as their dicts, enums as they are (the bucket's stream config is what create_* sends)."""
        out: Dict[str, Any] = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if value is None or field.name in self._NOT_IN_DICT:
                continue
            if hasattr(value, "as_dict"):
                value = value.as_dict()
            out[field.name] = value
        ttl = getattr(self, "ttl", None)
        out["ttl"] = None if ttl is None else int(ttl * 1_000_000_000)
        return out

    def evolve(self: _C, **params: Any) -> _C:
        """nats-py's ``evolve``: a copy with ``params`` replaced (``dataclasses.replace``)."""
        return dataclasses.replace(self, **params)  # type: ignore[type-var]

    @classmethod
    def from_response(cls: Type[_C], resp: Mapping[str, Any]) -> _C:
        """nats-py's ``from_response``: the fields ``resp`` has; unknown keys ignored."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in resp.items() if k in names})
