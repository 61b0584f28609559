"""Reading a JetStream API answer: the JSON object, or the APIError it carries."""

from __future__ import annotations

import json
from typing import Any, Dict

from .. import errors

__all__ = ["parse_api_response"]


def parse_api_response(data: bytes, subject: str) -> Dict[str, Any]:
    """The JSON object of an API answer; its ``error`` raised as the mapped APIError."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python recurses
        raise errors.JetStreamError(
            f"malformed JSON in the answer on {subject}: {data[:80]!r}"
        ) from None
    if not isinstance(obj, dict):
        raise errors.JetStreamError(f"the answer on {subject} is not a JSON object: {data[:80]!r}")
    err = obj.get("error")
    if err is not None:
        if not isinstance(err, dict):
            raise errors.JetStreamError(f"malformed error in the answer on {subject}: {err!r}")
        raise errors.api_error(
            _int(err.get("code")),
            _int(err.get("err_code")),
            str(err.get("description", "")),
            subject,
        )
    return obj


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
