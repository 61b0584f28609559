"""The Spark module's parts without Spark: range splitting, the per-process client cache
(fork included), Arrow rows."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

import jetstream_sync as nats
from jetstream_sync.msg import Headers
from jetstream_sync.server import NATSServer
from jetstream_sync.spark import _clients, _options
from jetstream_sync.spark._publish import check_duplicate_window, publish_all
from jetstream_sync.spark._ranges import SeqRange, StoredMsg, parse_time_option, split_range
from jetstream_sync.spark._rows import BatchBuilder, msgs_from_arrow, msgs_from_rows


def test_split_range() -> None:
    parts = split_range(SeqRange(1, 1000), 3)
    assert parts == [SeqRange(1, 334), SeqRange(335, 667), SeqRange(668, 1000)]
    assert split_range(SeqRange(5, 6), 4) == [SeqRange(5, 5), SeqRange(6, 6)]
    assert split_range(SeqRange(7, 6), 4) == []
    with pytest.raises(nats.InvalidArgumentError):
        split_range(SeqRange(1, 2), 0)


def test_parse_time_option() -> None:
    want = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    assert parse_time_option("2024-05-01T12:00:00Z", "t") == want
    assert parse_time_option("2024-05-01 12:00:00", "t") == want
    assert parse_time_option(str(want.timestamp()), "t") == want
    with pytest.raises(nats.InvalidArgumentError):
        parse_time_option("yesterday", "t")


def test_client_cache(spark_nats: NATSServer) -> None:
    a = _clients.client(spark_nats.url, name="cache-test")
    assert _clients.client(spark_nats.url, name="cache-test") is a
    assert _clients.client(spark_nats.url, name="cache-test-2") is not a
    js = _clients.jetstream(spark_nats.url, None, name="cache-test")
    assert js.nc is a and _clients.jetstream(spark_nats.url, None, name="cache-test") is js
    a.close()
    b = _clients.client(spark_nats.url, name="cache-test")  # a closed client is replaced
    assert b is not a and b.is_connected
    assert _clients.jetstream(spark_nats.url, None, name="cache-test").nc is b


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_client_cache_after_fork(spark_nats: NATSServer) -> None:
    parent = _clients.client(spark_nats.url, name="fork-test")
    parent.flush(timeout=2.0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new client, the parent's left alone
        code = 1
        try:
            child = _clients.client(spark_nats.url, name="fork-test")
            child.flush(timeout=2.0)
            ok = child is not parent and child.is_connected
            os.write(w, b"ok" if ok else b"same")
            child.close()
            code = 0
        except BaseException as exc:  # report anything to the parent
            os.write(w, repr(exc).encode()[:200])
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.close(w)
    answer = os.read(r, 256)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert answer == b"ok" and status == 0
    parent.flush(timeout=2.0)  # the parent's socket survived the child
    assert _clients.client(spark_nats.url, name="fork-test") is parent


def test_rows_round_trip() -> None:
    t = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    builder = BatchBuilder(max_rows=2)
    h = Headers([("K", "a"), ("K", "b"), ("Nats-Msg-Id", "x1")])
    assert builder.add(StoredMsg("s.a", b"1", h, "S", 1, t)) is None
    batch = builder.add(StoredMsg("s.b", b"2", None, "S", 2, None))
    assert batch is not None and builder.flush() is None
    rows = batch.to_pylist()
    assert rows[0]["headers"] == [("K", ["a", "b"]), ("Nats-Msg-Id", ["x1"])]
    assert rows[0]["msg_id"] == "x1" and rows[0]["timestamp"] == t
    assert rows[1]["headers"] is None and rows[1]["stream_seq"] == 2
    out = list(msgs_from_arrow([batch.select(["subject", "data", "headers", "msg_id"])]))
    assert out[0] == ("s.a", b"1", {"K": ["a", "b"], "Nats-Msg-Id": ["x1"]}, "x1")
    assert out[1] == ("s.b", b"2", None, None)
    got = list(msgs_from_rows([{"data": "x", "headers": {"A": "1"}}], default_subject="d"))
    assert got == [("d", b"x", {"A": ["1"]}, None)]
    with pytest.raises(nats.InvalidArgumentError):
        list(msgs_from_rows([{"data": b"x"}]))


def test_short_duplicate_window_warns(spark_nats: NATSServer) -> None:
    js = _clients.jetstream(spark_nats.url, None, name="window-test")
    js.add_stream(name="SHORTWIN", subjects=["shortwin.>"], duplicate_window=10.0)
    with pytest.warns(RuntimeWarning, match="duplicate_window of 10 s"):
        assert check_duplicate_window(js, subject="shortwin.x") == 10.0
    result = publish_all(js, msgs_from_rows([{"data": b"a"}, {"data": b"b"}], "shortwin.x"), "w")
    assert (result.published, result.duplicates) == (2, 0)
    again = publish_all(js, msgs_from_rows([{"data": b"a"}], "shortwin.x"), "w")
    assert (again.published, again.duplicates) == (0, 1)  # the same id: de-duplicated


def test_connection_options() -> None:
    servers, kwargs = _options.connection(
        {
            "servers": "nats://a:4222",
            "creds": "/etc/nats/user.creds",
            "nkeys_seed": "/etc/nats/user.nk",
            "token": "t",
            "connect_timeout": "2.5",
            "max_reconnect_attempts": "-1",
        }
    )
    assert servers == "nats://a:4222"
    assert kwargs == {
        "user_credentials": "/etc/nats/user.creds",
        "nkeys_seed": "/etc/nats/user.nk",
        "token": "t",
        "connect_timeout": 2.5,
        "max_reconnect_attempts": -1,
    }
    with pytest.raises(nats.InvalidArgumentError, match="'servers'"):
        _options.connection({"stream": "S"})
    with pytest.raises(nats.InvalidArgumentError, match="'connect_timeout' must be a number"):
        _options.connection({"servers": "x", "connect_timeout": "soon"})


def test_options_checked_with_kafka_names() -> None:
    base = {"servers": "nats://x", "stream": "S"}
    assert _options.checked({**base, "startingOffsets": "latest"}, "stream read") == {
        **base,
        "starting": "latest",
    }
    assert _options.checked({**base, "maxOffsetsPerTrigger": "5"}, "stream read") == {
        **base,
        "max_rows_per_trigger": "5",
    }
    assert _options.checked({**base, "startingoffsets": '{"seq": 7}'}, "read") == {
        **base,
        "start_seq": "7",
    }
    assert _options.checked({**base, "startingoffsets": "earliest"}, "read") == base
    assert _options.checked({**base, "endingoffsets": "latest"}, "read") == base
    assert _options.checked({**base, "path": "ignored", "checkpointLocation": "/c"}, "read")
    with pytest.raises(nats.InvalidArgumentError, match="cannot be latest"):
        _options.checked({**base, "startingOffsets": "latest"}, "read")
    with pytest.raises(nats.InvalidArgumentError, match="given twice"):
        _options.checked({**base, "start_seq": "1", "startingOffsets": "2"}, "read")
    with pytest.raises(nats.InvalidArgumentError, match=r'\{"seq": n\}'):
        _options.checked({**base, "startingOffsets": "{oops"}, "stream read")
    with pytest.raises(nats.InvalidArgumentError, match="unknown option 'ack_timeout'"):
        _options.checked({**base, "ack_timeout": "5"}, "read")


def test_tls_options_reach_the_executors_client(tmp_path: Path) -> None:
    """tls_ca_file / tls_cert_file / tls_key_file (issue 18, 3): the executor makes the
    SSLContext from files, and the per-process cache still keys on the option values."""
    pytest.importorskip("cryptography", reason="the test PKI needs cryptography")
    from jetstream_sync.testpki import PKI

    pki = PKI(tmp_path)
    with NATSServer(jetstream=True, config=pki.server_config(verify=True)) as srv:
        options = {
            "servers": srv.url,
            "tls_hostname": "nats.test",
            "tls_ca_file": str(pki.ca),
            "tls_cert_file": str(pki.client),
            "tls_key_file": str(pki.client_key),
        }
        servers, kwargs = _options.connection(_options.checked(options, "read"))
        js = _clients.jetstream(servers, None, **kwargs)
        assert js.nc.is_connected and js.nc.server_info.get("tls_required")
        again = _clients.jetstream(*_options.connection(options)[:1], None, **kwargs)
        assert again.nc is js.nc  # cached: one connection per worker process
        js.nc.close()
    with pytest.raises(nats.InvalidArgumentError, match="go together"):
        _options.connection({"servers": "x", "tls_cert_file": str(pki.client)})


def test_filter_subjects_option() -> None:
    f = _options.filters_option
    assert f({}) is None
    assert f({"filter_subject": "a.b"}) == ["a.b"]
    assert f({"filter_subjects": " a.b , c.> ,"}) == ["a.b", "c.>"]
    assert f({"filter_subjects": "rd.a, rd.*, rd.a"}) == ["rd.*"]  # covered ones add nothing
    assert f({"filter_subject": "a.>", "filter_subjects": "a.b.c,x"}) == ["a.>", "x"]
    for a, b in [("a.*.c", "a.b.*"), ("a.>", "*.b"), ("*.x", "a.*")]:
        with pytest.raises(nats.InvalidArgumentError, match="overlap"):
            f({"filter_subjects": f"{a},{b}"})
    assert f({"filter_subjects": "a.b,a.c,a.b.c,b.>"}) == ["a.b", "a.c", "a.b.c", "b.>"]
    with pytest.raises(nats.BadSubjectError, match="last token"):
        f({"filter_subjects": "a.>.b"})
