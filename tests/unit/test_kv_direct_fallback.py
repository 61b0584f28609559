"""KeyValue.get falls back to the stream leader's API when a direct get has no responders
(issue 34 item 6): a just-created R3 bucket's replicas may not all have subscribed to the
direct-get subject yet, and another process's first get then met NoRespondersError."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List, Optional

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream import api
from jetstream_sync.jetstream.kv import KeyNotFoundError, KeyValue


class _StubJS:
    """Answers direct gets with NoResponders and API gets with ``answer``."""

    prefix = "$JS.API"

    def __init__(self, answer: Optional[api.RawStreamMsg]) -> None:
        self.answer = answer
        self.calls: List[Any] = []

    def get_msg(
        self,
        stream: str,
        seq: Optional[int] = None,
        last_by_subject: Optional[str] = None,
        direct: bool = False,
    ) -> api.RawStreamMsg:
        self.calls.append((stream, seq, last_by_subject, direct))
        if direct:
            raise errors.NoRespondersError("nats: no responders available for request")
        if self.answer is None:
            raise errors.NoMessageFoundError(404, 10037, "no message found")
        return self.answer


def _kv(js: _StubJS, direct: bool = True) -> KeyValue:
    info = SimpleNamespace(config=SimpleNamespace(allow_direct=direct))
    return KeyValue(js, "B", info)  # type: ignore[arg-type]


def test_get_falls_back_to_the_api_when_a_direct_get_has_no_responders() -> None:
    js = _StubJS(api.RawStreamMsg(subject="$KV.B.k", seq=3, data=b"v"))
    entry = _kv(js).get("k")
    assert entry.value == b"v" and entry.revision == 3
    assert js.calls == [("KV_B", None, "$KV.B.k", True), ("KV_B", None, "$KV.B.k", False)]


def test_get_of_a_revision_falls_back_too() -> None:
    js = _StubJS(api.RawStreamMsg(subject="$KV.B.k", seq=5, data=b"w"))
    assert _kv(js).get("k", revision=5).value == b"w"
    assert js.calls[-1] == ("KV_B", 5, None, False)


def test_a_missing_key_after_the_fallback_is_still_key_not_found() -> None:
    with pytest.raises(KeyNotFoundError):
        _kv(_StubJS(None)).get("k")


def test_without_direct_gets_no_responders_is_not_swallowed() -> None:
    class _NoAnswer(_StubJS):
        def get_msg(self, stream: str, **kw: Any) -> api.RawStreamMsg:  # type: ignore[override]
            raise errors.NoRespondersError("nats: no responders available for request")

    with pytest.raises(errors.NoRespondersError):
        _kv(_NoAnswer(None), direct=False).get("k")
