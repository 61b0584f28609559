"""Object Store put through the fault proxy (faultproxy.py, issue 35): the connection is cut
right after the new info went up, so its ack never comes back, or right as the info goes
up, so it never reaches the server. Either way the bucket must hold one whole object: the
new one if its info was stored (the put succeeded), the old one otherwise."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from faultproxy import DOWN, UP, FaultProxy
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.testing import stream_name

META = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=10))
OLD, NEW = b"o" * 25, b"n" * 35


@pytest.fixture
def bucket(js: JetStream) -> Iterator[str]:
    name = stream_name("OBF")
    js.create_object_store(name)
    try:
        yield name
    finally:
        js.delete_object_store(name)


@pytest.fixture
def pjs(proxy: FaultProxy) -> Iterator[JetStream]:
    """JetStream on a client connected through the proxy, reconnecting at once."""
    nc = nats.connect(
        proxy.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1, error_cb=Errors()
    )
    try:
        yield nc.jetstream(timeout=5.0)
    finally:
        proxy.heal()
        nc.close()


def cut_at_the_info(
    monkeypatch: pytest.MonkeyPatch, pjs: JetStream, proxy: FaultProxy, bucket: str, way: str
) -> None:
    """Arm a cut (0 bytes forwarded, ``way``) just before the put sends its info."""
    real = pjs.publish

    def publish(subject: str, *args: Any, **kwargs: Any) -> Any:
        if subject.startswith(f"$O.{bucket}.M."):
            proxy.cut(0, way)
        return real(subject, *args, **kwargs)

    monkeypatch.setattr(pjs, "publish", publish)


def test_a_put_whose_info_ack_is_cut_returns_the_new_object_whole(
    js: JetStream, pjs: JetStream, proxy: FaultProxy, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pjs.object_store(bucket)
    store.put("doc", OLD, meta=META)
    cut_at_the_info(monkeypatch, pjs, proxy, bucket, DOWN)
    new = store.put("doc", NEW, meta=META)  # the info was stored: the put succeeded
    monkeypatch.undo()
    assert proxy.cuts_done == 1 and proxy.accepted >= 2  # cut, and reconnected
    reader = js.object_store(bucket)
    assert [i.nuid for i in reader.list()] == [new.nuid]
    assert reader.get("doc").data == NEW


def test_a_put_whose_info_is_cut_on_the_way_up_keeps_the_old_object_whole(
    js: JetStream, pjs: JetStream, proxy: FaultProxy, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pjs.object_store(bucket)
    old = store.put("doc", OLD, meta=META)
    cut_at_the_info(monkeypatch, pjs, proxy, bucket, UP)
    with pytest.raises(nats.NATSError) as caught:
        store.put("doc", NEW, meta=META)
    monkeypatch.undo()
    assert not isinstance(caught.value, nats.ObjectOutcomeUnknownError), caught.value
    assert proxy.cuts_done == 1
    reader = js.object_store(bucket)
    assert [i.nuid for i in reader.list()] == [old.nuid]
    assert reader.get("doc").data == OLD
