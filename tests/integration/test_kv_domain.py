"""Key-Value through a JetStream domain and through an API prefix, against a real server.

The server has the JetStream domain ``hub``; the account ``JS`` has JetStream. Two other
accounts have none, and reach JetStream only through imports of the JS account's API:
``VIAFAR`` imports it as ``$JS.far.API`` (a domain ``far`` that is not this server's, as a
leaf node forwards a remote domain's API; the server answers ``$JS.hub.API`` itself in an
account without JetStream) and ``VIAPFX`` as ``fromJS`` (an API prefix, nats.go's
cross-account set-up). In those two, a
call that did not go through the prefix finds no JetStream (and a KV write no stream):
each works only if every request, the watch's consumer and every put, delete and purge
took the prefix. The writes take ``<prefix>.$KV.<bucket>.<key>``, as nats.go's do; the
server maps ``$JS.<domain>.API.$KV.>`` to ``$KV.>`` for a domain's own accounts.
"""

from __future__ import annotations

from typing import Callable, Iterator, List

import pytest
from support import drain

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

# What the JS account exports, and the tail of each below an API prefix (the server's own
# domain mapping table has the same pieces: INFO, STREAM, CONSUMER, DIRECT, $KV).
_PIECES = [
    ("$JS.API.INFO", "INFO"),
    ("$JS.API.STREAM.>", "STREAM.>"),
    ("$JS.API.CONSUMER.>", "CONSUMER.>"),
    ("$JS.API.DIRECT.>", "DIRECT.>"),
    ("$KV.>", "$KV.>"),
]


def _config() -> str:
    exports = ", ".join(f'{{service: "{src}", response_type: stream}}' for src, _ in _PIECES)

    def imports(prefix: str) -> str:
        return ", ".join(
            f'{{service: {{account: JS, subject: "{src}"}}, to: "{prefix}.{tail}"}}'
            for src, tail in _PIECES
        )

    return f"""
jetstream {{ domain: hub }}
accounts {{
  JS {{
    jetstream: enabled
    users: [ {{user: owner, password: owner}} ]
    exports: [ {exports} ]
  }}
  VIAFAR {{
    users: [ {{user: viafar, password: viafar}} ]
    imports: [ {imports("$JS.far.API")} ]
  }}
  VIAPFX {{
    users: [ {{user: viapfx, password: viapfx}} ]
    imports: [ {imports("fromJS")} ]
  }}
}}
"""


@pytest.fixture(scope="module")
def hub() -> Iterator[NATSServer]:
    srv = NATSServer(jetstream=True, config=_config()).start()
    try:
        yield srv
    finally:
        srv.cleanup()


def _url(srv: NATSServer, user: str) -> str:
    return srv.url.replace("nats://", f"nats://{user}:{user}@", 1)


@pytest.fixture
def connect(hub: NATSServer) -> Iterator[Callable[..., JetStream]]:
    """``connect(user, **jetstream_options)``: a JetStream context of that user."""
    clients: List[nats.Client] = []

    def make(user: str, **options: object) -> JetStream:
        nc = nats.connect(_url(hub, user))
        clients.append(nc)
        return nc.jetstream(timeout=10, **options)  # type: ignore[arg-type]

    yield make
    for nc in clients:
        nc.close()


def _round_trip(js: JetStream, owner: JetStream) -> None:
    """Everything a bucket does, through ``js``; ``owner`` (plain $JS.API in the JS
    account) checks that it all landed in the one bucket."""
    bucket = stream_name("KVD")
    kv = js.create_key_value(bucket=bucket, history=5)
    try:
        assert kv.put("a", b"1") == 1
        assert kv.create("b", b"2") == 2
        assert kv.update("a", b"11", last=1) == 3
        with pytest.raises(nats.KeyWrongLastSequenceError):
            kv.update("a", b"stale", last=1)
        bound = js.key_value(bucket)
        assert bound.get("a").value == b"11" and bound.get("a", revision=1).value == b"1"
        with bound.watchall() as w:
            assert [(e.key, e.revision) if e else None for e in drain(w, 3)] == [
                ("b", 2), ("a", 3), None,
            ]  # fmt: skip
            kv.put("c", b"3")
            kv.delete("b")
            live = drain(w, 2)
            assert [(e.key, e.operation) for e in live if e] == [("c", None), ("b", "DEL")]
        assert sorted(kv.keys()) == ["a", "c"]
        assert [e.value for e in kv.history("a")] == [b"1", b"11"]
        kv.purge("c")
        kv.purge_deletes(olderthan=0)
        assert kv.status().values == 2  # a's two values; b and c are gone
        # The owner sees the same bucket, through the plain API.
        theirs = owner.key_value(bucket)
        assert theirs.get("a").value == b"11"
        assert [e.key for e in theirs.history(">")] == ["a", "a"]
    finally:
        js.delete_key_value(bucket)
    with pytest.raises(nats.BucketNotFoundError):
        owner.key_value(bucket)


def test_kv_in_the_domains_own_account(connect: Callable[..., JetStream]) -> None:
    """The JS account addressed by its domain: the server maps $JS.hub.API for it."""
    js = connect("owner", domain="hub")
    assert js.prefix == "$JS.hub.API"
    _round_trip(js, connect("owner"))


def test_kv_through_a_domain_import(connect: Callable[..., JetStream]) -> None:
    """An account with no JetStream of its own, reaching one through $JS.far.API."""
    with pytest.raises(nats.JetStreamNotEnabledError):
        connect("viafar").account_info()  # nothing answers the unprefixed API here
    _round_trip(connect("viafar", domain="far"), connect("owner"))


def test_kv_through_an_api_prefix(connect: Callable[..., JetStream]) -> None:
    """nats.go's cross-account case: the API and the KV subjects imported under fromJS."""
    _round_trip(connect("viapfx", prefix="fromJS"), connect("owner"))
