"""The OpenTelemetry instrumentation is switched on by the user only: the package imports
nothing of OpenTelemetry by itself, and uninstrument() leaves the classes as they were."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jetstream_sync import _observe

_PROGRAM = r"""
import sys
import jetstream_sync, jetstream_sync.jetstream, jetstream_sync.micro
from jetstream_sync.server import NATSServer
with NATSServer(jetstream=True) as srv, jetstream_sync.connect(srv.url) as nc:
    js = nc.jetstream()
    js.add_stream(name="S", subjects=["s.>"])
    js.publish("s.a", b"1")
    sub = nc.subscribe("x")
    nc.publish("x", b"1")
    assert sub.next_msg(5).header is None
    assert js.pull_subscribe("s.>", durable="d").fetch(1, timeout=5)[0].data == b"1"
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_the_uninstrumented_package_never_imports_opentelemetry() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_uninstrument_puts_every_method_back() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider

    from jetstream_sync import Client, Msg, Subscription
    from jetstream_sync.jetstream.publish import Publisher
    from jetstream_sync.otel import JetStreamSyncInstrumentor

    classes = (Client, Msg, Subscription, Publisher)
    before = [dict(vars(cls)) for cls in classes]
    inst = JetStreamSyncInstrumentor()
    inst.instrument(tracer_provider=TracerProvider())
    try:
        assert Client.__dict__["publish"] is not before[0]["publish"]
        assert _observe.observer is not None
        assert Client.publish.__doc__ == before[0]["publish"].__doc__
    finally:
        inst.uninstrument()
    assert [dict(vars(cls)) for cls in classes] == before
    assert _observe.observer is None
