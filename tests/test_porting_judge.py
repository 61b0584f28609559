"""A hostile judge of the README's "Porting from nats-py" section, written from the README alone.

Each program is written the nats-py way (asyncio, ``await``). It runs on nats-py itself against
a fresh embedded server, then ported mechanically (``async``/``await``/``asyncio.run`` deleted,
``import nats`` becomes ``import jetstream_sync as nats``, nats-py's module paths mapped to the
ones the README names) against another fresh server, and the two printed outputs are compared
line by line. Where the README's porting table keeps a difference, the test checks what the
ported program meets: nats-py's result, or a loud error -- never the other branch, silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import socket
import textwrap
import threading
import time
from typing import Any, Callable

import pytest

import jetstream_sync as jss
from jetstream_sync.server import NATSServer

nats_py = pytest.importorskip("nats", reason="nats-py is the baseline these programs run on")

# nats-py's module paths and where the README says the names are here.
_MODULES = [
    (r"^from nats\.aio\.errors import", "from jetstream_sync.errors import"),
    (r"^from nats\.js\.errors import", "from jetstream_sync import"),
    (r"^from nats\.errors import", "from jetstream_sync import"),
    (r"^from nats\.js\.api import", "from jetstream_sync.jetstream.api import"),
    (r"^import nats$", "import jetstream_sync as nats"),
]


def port(src: str) -> str:
    """Port a nats-py program by deleting keywords, as the README says."""
    out = re.sub(r"\bawait\s+", "", src)
    out = re.sub(r"\basync\s+(def|for|with)\b", r"\1", out)
    out = out.replace("asyncio.run(main())", "main()")
    for pat, rep in _MODULES:
        out = re.sub(pat, rep, out, flags=re.M)
    assert "await" not in out and "async " not in out
    return out


def _mask(text: str) -> list[str]:
    text = re.sub(r"0x[0-9a-fA-F]+", "0xADDR", text)
    text = re.sub(r"_INBOX\.[A-Za-z0-9]+(\.[A-Za-z0-9*]+)?", "_INBOX.X", text)
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    # the client object inside a Msg's repr is each library's own
    text = re.sub(r"_client=<[^>]*>", "_client=<CLIENT>", text)
    # the client object inside a Msg's repr is each library's own
    text = re.sub(r"_client=<[^>]*>", "_client=<CLIENT>", text)
    return text.splitlines()


def _run(src: str, extra: dict[str, Any] | None = None) -> tuple[list[str], BaseException | None]:
    """Run one program on a fresh server; returns its printed lines and what it raised."""
    with NATSServer(jetstream=True) as srv:
        ns: dict[str, Any] = {"URL": srv.url, "__name__": "judged"}
        if extra:
            ns.update({k: (v(srv.url) if callable(v) else v) for k, v in extra.items()})
        buf = io.StringIO()
        err: BaseException | None = None
        with contextlib.redirect_stdout(buf):
            try:
                exec(compile(src, "<program>", "exec"), ns)
            except Exception as exc:  # the program's own failure is part of its output
                err = exc
        return _mask(buf.getvalue()), err


def judge_lines(program: str, extra: dict[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """As judge, for a test that compares the lines itself."""
    return judge(program, extra)


def judge(program: str, extra: dict[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """Run ``program`` on nats-py, then ported here; both must print the same and not raise."""
    src = textwrap.dedent(program)
    want, werr = _run(src, extra)
    assert werr is None, f"the program fails on nats-py itself: {werr!r}; printed {want}"
    got, gerr = _run(port(src), extra)
    assert gerr is None, f"ported program raised {gerr!r}; printed {got}, nats-py printed {want}"
    return want, got


# --- the headline claims ---------------------------------------------------------------------


def test_port_rule_itself() -> None:
    src = "import nats\nasync def main():\n    nc = await nats.connect(URL)\nasyncio.run(main())\n"
    assert (
        port(src)
        == "import jetstream_sync as nats\ndef main():\n    nc = nats.connect(URL)\nmain()\n"
    )


def test_empty_queue_name_means_no_queue_group() -> None:
    """nats-py's subscribe("discover", "", cb): both subscribers get every message."""
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)
            seen = []

            async def cb_a(msg):
                seen.append(("a", msg.data))

            async def cb_b(msg):
                seen.append(("b", msg.data))

            sa = await nc.subscribe("discover", "", cb_a)
            sb = await nc.subscribe("discover", "", cb_b)
            print("queue", repr(sa.queue))
            await nc.publish("discover", b"hello")
            await nc.publish("discover", b"again")
            await nc.flush()
            await nc.drain()
            print(sorted(seen))

        asyncio.run(main())
        """
    )
    assert got == want
    assert "('a', b'hello')" in want[-1] and "('b', b'hello')" in want[-1]


def test_reply_headers_none_and_plain_message_headers_none() -> None:
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)

            async def upper(msg):
                await msg.respond(msg.data.upper())

            await nc.subscribe("svc.upper", cb=upper)
            reply = await nc.request("svc.upper", b"hi", timeout=2)
            print(reply.data, reply.headers)
            sub = await nc.subscribe("plain")
            await nc.publish("plain", b"x")
            msg = await sub.next_msg(timeout=2)
            print(msg.headers)
            await nc.publish("plain", b"y", headers={"A": "1"})
            msg = await sub.next_msg(timeout=2)
            print(msg.headers)
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want
    assert want[0] == "b'HI' None"


def test_error_cb_gets_the_callbacks_exception_itself() -> None:
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = None

            async def error_cb(e):
                print("error_cb", type(e).__name__, e)
                await nc.publish("err.seen", type(e).__name__.encode())

            nc = await nats.connect(URL, error_cb=error_cb)
            seen = await nc.subscribe("err.seen")

            async def bad(msg):
                raise ValueError("boom " + msg.data.decode())

            await nc.subscribe("work", cb=bad)
            await nc.publish("work", b"1")
            note = await seen.next_msg(timeout=5)
            print("seen", note.data)
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want
    assert "error_cb ValueError boom 1" in want


def test_deleted_kv_entry_value_is_none() -> None:
    want, got = judge(
        """
        import asyncio
        import nats
        from nats.js.errors import KeyNotFoundError

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            kv = await js.create_key_value(bucket="b")
            await kv.put("k", b"1")
            await kv.delete("k")
            for e in await kv.history("k"):
                print(e.key, e.operation, e.value)
            try:
                await kv.get("k")
            except KeyNotFoundError as err:
                print("deleted", err.entry.value, err.op)
            w = await kv.watchall(include_history=True)
            while True:
                e = await w.updates(timeout=2)
                if e is None:
                    break
                print("watch", e.key, e.operation, e.value)
            await w.stop()
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want
    assert any(line.endswith("None DEL") for line in want)


def test_kv_keys_filters_are_nats_py_substrings() -> None:
    """The porting table: a filter without wildcards lists the keys containing it, as nats-py."""
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            kv = await js.create_key_value(bucket="k")
            for key in ["greet", "greeting", "say.greet", "other", "a.greet.b"]:
                await kv.put(key, b"v")
            print(sorted(await kv.keys(filters=["greet"])))
            print(sorted(await kv.keys(filters=["other", "say"])))
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want
    assert want[0] == "['a.greet.b', 'greet', 'greeting', 'say.greet']"


def test_raw_pull_404_status_line_in_headers() -> None:
    want, got = judge(
        """
        import asyncio
        import json
        import nats

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.>"])
            await js.add_consumer("S", durable_name="d", ack_policy="explicit")
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            req = json.dumps({"batch": 1, "no_wait": True}).encode()
            await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.d", req, reply=inbox)
            msg = await sub.next_msg(timeout=5)
            print(dict(msg.headers) == {"Status": "404", "Description": "No Messages"})
            print(msg.headers["Status"], msg.headers["Description"])
            print(msg.data)
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want
    assert want[0] == "True"


def _raw_publisher(url: str) -> Callable[[], None]:
    """Sends, over a raw socket, a message whose headers include a non-ASCII name."""
    host, port_s = url.rsplit("//", 1)[1].rsplit(":", 1)

    def send() -> None:
        with socket.create_connection((host, int(port_s)), timeout=5) as s:
            f = s.makefile("rb")
            assert f.readline().startswith(b"INFO")
            s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nPING\r\n')
            assert f.readline() == b"PONG\r\n"
            hdr = "NATS/1.0\r\nGood: 1\r\nBäd: 2\r\nAlso-Good: 3\r\n\r\n".encode()
            body = b"payload"
            s.sendall(
                b"HPUB raw %d %d\r\n" % (len(hdr), len(hdr) + len(body)) + hdr + body + b"\r\n"
            )
            s.sendall(b"PING\r\n")
            assert f.readline() == b"PONG\r\n"

    return send


def test_non_ascii_header_name_dropped() -> None:
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)
            sub = await nc.subscribe("raw")
            await nc.flush()
            send_raw()
            msg = await sub.next_msg(timeout=5)
            print(sorted(msg.headers.items()), msg.data)
            await nc.close()

        asyncio.run(main())
        """,
        extra={"send_raw": _raw_publisher},
    )
    assert got == want
    assert "Bäd" not in want[0] and "Good" in want[0]


def test_add_consumer_durable_with_filter_gt_request_subject() -> None:
    """Issue 37: not `$JS.API.CONSUMER.CREATE.S.d.>`; pedantic=True reports no error.

    nats-py 2.16 itself sends the older `$JS.API.CONSUMER.DURABLE.CREATE.S.d`; both are
    subjects the server takes, so only that line may differ.
    """
    want, got = judge_lines(
        """
        import asyncio
        import nats

        async def main():
            spy = await nats.connect(URL)
            api = await spy.subscribe("$JS.API.CONSUMER.>")
            await spy.flush()
            errors = []

            async def error_cb(e):
                errors.append(repr(e))

            nc = await nats.connect(URL, pedantic=True, error_cb=error_cb)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.>"])
            info = await js.add_consumer("S", durable_name="d", filter_subject=">")
            print(info.name, info.config.filter_subject)
            req = await api.next_msg(timeout=5)
            print(req.subject)
            await nc.flush()
            print(errors)
            await nc.close()
            await spy.close()

        asyncio.run(main())
        """
    )
    assert want[1] in ("$JS.API.CONSUMER.DURABLE.CREATE.S.d", "$JS.API.CONSUMER.CREATE.S.d")
    assert got[1] in ("$JS.API.CONSUMER.DURABLE.CREATE.S.d", "$JS.API.CONSUMER.CREATE.S.d")
    assert got[0] == want[0] and got[2:] == want[2:] == ["[]"]


def test_nats_aio_errors_aliases() -> None:
    want, got = judge(
        """
        import asyncio
        import nats
        from nats.aio.errors import ErrConnectionClosed, ErrNoServers, ErrTimeout
        from nats.errors import ConnectionClosedError, NoServersError, TimeoutError

        async def main():
            print(issubclass(ErrTimeout, TimeoutError))
            print(issubclass(ErrNoServers, NoServersError))
            print(issubclass(ErrConnectionClosed, ConnectionClosedError))
            try:
                await nats.connect("nats://127.0.0.1:1", max_reconnect_attempts=1,
                                   connect_timeout=1, reconnect_time_wait=0)
            except ErrNoServers:
                print("caught as ErrNoServers")
            except NoServersError:
                print("caught as NoServersError")
            nc = await nats.connect(URL)
            sub = await nc.subscribe("nothing")
            try:
                await sub.next_msg(timeout=0.2)
            except ErrTimeout:
                print("caught as ErrTimeout")
            except TimeoutError:
                print("caught as TimeoutError")
            await nc.close()
            try:
                await nc.publish("x", b"")
            except ErrConnectionClosed:
                print("caught as ErrConnectionClosed")
            except ConnectionClosedError:
                print("caught as ConnectionClosedError")

        asyncio.run(main())
        """
    )
    assert got == want


def test_print_msg_and_puback_like_nats_py() -> None:
    """Issue 37: 7 of 10 examples differ only in how a Msg or PubAck prints."""
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)
            sub = await nc.subscribe("p")
            await nc.publish("p", b"hi", headers={"K": "v"})
            msg = await sub.next_msg(timeout=2)
            print(msg)
            print(msg.header)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s"])
            ack = await js.publish("s", b"x")
            print(ack)
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want


# --- the kept differences: loud, not silent -----------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason="issue 37 asks for the difference to be made loud; the porting table keeps "
    "ObjectStore header values as lists, so nats-py code `info.headers['K'] == 'v'` silently "
    "takes the other branch (prints 'not tar', raises nothing)",
)
def test_object_store_headers_as_nats_py_reads_them() -> None:
    """The table keeps lists; ported code comparing a value to a str must not silently differ."""
    src = """
    import asyncio
    import nats
    from nats.js.api import ObjectMeta

    async def main():
        nc = await nats.connect(URL)
        js = nc.jetstream()
        obs = await js.create_object_store("ASSETS")
        await obs.put("a.tar", b"data", meta=ObjectMeta(headers={"Content-Type": "x-tar"}))
        info = await obs.get_info("a.tar")
        if info.headers["Content-Type"] == "x-tar":
            print("tar")
        else:
            print("not tar")
        await nc.close()

    asyncio.run(main())
    """
    want, werr = _run(textwrap.dedent(src))
    assert werr is None and want == ["tar"]
    got, gerr = _run(port(textwrap.dedent(src)))
    assert got == want or gerr is not None, f"silent: ported code printed {got}"


def test_object_store_headers_documented_form() -> None:
    """What the README's table does promise: info.headers['K'][0]."""
    with NATSServer(jetstream=True) as srv, jss.connect(srv.url) as nc:
        obs = nc.jetstream().create_object_store("ASSETS")
        obs.put("a.tar", b"data", meta=jss.ObjectMeta(headers={"Content-Type": "x-tar"}))
        assert obs.get_info("a.tar").headers["Content-Type"][0] == "x-tar"


@pytest.mark.xfail(
    strict=True,
    reason="porting table: purge_stream 'returns the number of messages purged, not True'; "
    "nats-py's `if await js.purge_stream(...)` on an empty stream silently takes the other "
    "branch (0 is falsy): the silent kind of difference issue 37 rejects",
)
def test_purge_stream_result_truthiness_as_nats_py() -> None:
    """The table: purge_stream returns a count, not True. Ported `if await js.purge_stream(...)`."""
    src = """
    import asyncio
    import nats

    async def main():
        nc = await nats.connect(URL)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s"])
        if await js.purge_stream("S"):
            print("purged")
        else:
            print("purge failed")
        await nc.close()

    asyncio.run(main())
    """
    want, werr = _run(textwrap.dedent(src))
    assert werr is None and want == ["purged"]
    got, gerr = _run(port(textwrap.dedent(src)))
    assert got == want or gerr is not None, f"silent: ported code printed {got}"


def test_purge_stream_positional_seq_as_nats_py() -> None:
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.*"])
            for i in range(5):
                await js.publish(f"s.{i}", b"x")
            await js.purge_stream("S", 3)
            info = await js.stream_info("S")
            print(info.state.messages, info.state.first_seq)
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want


@pytest.fixture()
def jserver():
    with NATSServer(jetstream=True) as srv, jss.connect(srv.url) as nc:
        nc.jetstream().add_stream(name="S", subjects=["s"])
        nc.subscribe("echo", cb=lambda m: m.respond(m.data))
        nc.flush(5)
        yield srv, nc


def test_js_publish_positional_timeout_is_loud(jserver: Any) -> None:
    """Table: "a number as headers is refused with a clear error"."""
    _, nc = jserver
    js = nc.jetstream()
    with pytest.raises((TypeError, ValueError)) as ei:
        js.publish("s", b"x", 5.0)
    assert "header" in str(ei.value).lower()
    assert js.stream_info("S").state.messages == 0


def test_js_publish_async_positional_wait_stall_is_loud(jserver: Any) -> None:
    _, nc = jserver
    js = nc.jetstream()
    with pytest.raises((TypeError, ValueError)):
        js.publish_async("s", b"x", 5.0)


def test_request_positional_old_style_is_loud(jserver: Any) -> None:
    """nats-py's request(subject, payload, timeout, old_style=True) positionally."""
    _, nc = jserver
    with pytest.raises((TypeError, ValueError)):
        nc.request("echo", b"x", 1.0, True)
    with pytest.raises((TypeError, ValueError)):
        nc.request("echo", b"x", 1.0, False)


@pytest.mark.xfail(
    strict=True,
    reason="README porting table: 'old_style and headers are keyword-only' for Client.request; "
    "the client takes headers as the 4th positional (a dict there is sent as headers)",
)
def test_request_headers_keyword_only_as_table_says(jserver: Any) -> None:
    _, nc = jserver
    with pytest.raises(TypeError):
        nc.request("echo", b"x", 1.0, {"A": "1"})


def test_subscribe_positional_future_is_loud(jserver: Any) -> None:
    """nats-py's subscribe(subject, queue, cb, future): the 4th positional is max_msgs here."""
    _, nc = jserver
    fut = asyncio.get_event_loop_policy().new_event_loop().create_future()
    with pytest.raises((TypeError, ValueError)):
        nc.subscribe("f", "", None, fut)
    with pytest.raises((TypeError, ValueError)):
        nc.subscribe("f", future=fut)


@pytest.mark.xfail(
    strict=True,
    reason="README porting table: '`future` is keyword-only and refused' for Client.subscribe; "
    "the client's subscribe takes future as its 7th positional parameter",
)
def test_subscribe_future_keyword_only_as_table_says() -> None:
    import inspect

    param = inspect.signature(jss.Client.subscribe).parameters["future"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY


def test_connect_options_keyword_only(jserver: Any) -> None:
    srv, _ = jserver
    with pytest.raises(TypeError):
        jss.connect(srv.url, None)


def test_ws_connection_headers_refused(jserver: Any) -> None:
    srv, _ = jserver
    with pytest.raises((TypeError, ValueError)) as ei:
        jss.connect(srv.url, ws_connection_headers={"A": ["b"]})
    assert "ws_connection_headers" in str(ei.value) or "websocket" in str(ei.value).lower()


def test_fetch_after_unsubscribe_is_loud() -> None:
    with NATSServer(jetstream=True) as srv, jss.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="S", subjects=["s"])
        psub = js.pull_subscribe("s", durable="d")
        psub.unsubscribe()
        t0 = time.monotonic()
        with pytest.raises(jss.BadSubscriptionError):
            psub.fetch(1, timeout=30)
        assert time.monotonic() - t0 < 25  # at once, not after the 30 s timeout


def test_kv_delete_msg_ttl_deprecation_warning() -> None:
    with NATSServer(jetstream=True) as srv, jss.connect(srv.url) as nc:
        kv = nc.jetstream().create_key_value(bucket="b")
        kv.put("k", b"1")
        with pytest.warns(DeprecationWarning):
            kv.delete("k", msg_ttl=5)
        with pytest.raises(jss.KeyDeletedError):
            kv.get("k")


def test_connected_url_reads_as_parse_result() -> None:
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)
            u = nc.connected_url
            print(u.scheme, u.hostname, u.port == int(URL.rsplit(":", 1)[1]))
            print([s.hostname for s in nc.servers])
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want


def test_callback_prints_interleave_but_all_arrive() -> None:
    """README: callbacks run on their own thread, one at a time, in order."""
    with NATSServer() as srv, jss.connect(srv.url) as nc:
        seen: list[tuple[int, str]] = []
        done = threading.Event()

        def cb(msg: jss.Msg) -> None:
            seen.append((int(msg.data), threading.current_thread().name))
            if len(seen) == 50:
                done.set()

        nc.subscribe("order", cb=cb)
        for i in range(50):
            nc.publish("order", str(i).encode())
        assert done.wait(10)
        assert [n for n, _ in seen] == list(range(50))
        assert all(name != threading.main_thread().name for _, name in seen)
        assert len({name for _, name in seen}) == 1


def test_asyncio_not_needed_in_port() -> None:
    """A ported program must not need an event loop: run one inside a running loop."""

    async def inside() -> bytes:
        with NATSServer() as srv, jss.connect(srv.url) as nc:
            sub = nc.subscribe("x")
            nc.publish("x", b"ok")
            return sub.next_msg(timeout=2).data

    assert asyncio.run(inside()) == b"ok"


def test_kv_keys_wildcard_filter_is_a_key_pattern() -> None:
    """Porting table: a filter with `*` or `>` is a key pattern (ADR-8, nats.go)."""
    with NATSServer(jetstream=True) as srv, jss.connect(srv.url) as nc:
        kv = nc.jetstream().create_key_value(bucket="k")
        for key in ["app.a", "app.b.c", "apple", "x.app.y"]:
            kv.put(key, b"v")
        assert sorted(kv.keys(filters=["app.*"])) == ["app.a"]
        assert sorted(kv.keys(filters=["app.>"])) == ["app.a", "app.b.c"]
        assert sorted(kv.keys(filters=["app"])) == ["app.a", "app.b.c", "apple", "x.app.y"]


def test_streams_info_int_first_argument_is_offset() -> None:
    want, got = judge(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            for name in ["A", "B", "C"]:
                await js.add_stream(name=name, subjects=[name.lower()])
            infos = await js.streams_info(1)
            print(len(infos), sorted(i.config.name for i in infos))
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want


def _mask_js(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        line = re.sub(r"\$JS\.ACK\.[^'\s,)]+", "$JS.ACK.X", line)
        line = re.sub(r"timestamp=[^,)]+(\))?", "timestamp=T", line)
        line = re.sub(r"_sid=\d+", "_sid=N", line)
        out.append(line)
    return out


def test_natspy_readme_style_jetstream_program() -> None:
    """nats-py's README JetStream walk-through: print(ack), print(msg), positional durable
    and deliver group, fetch(1) without a timeout, a KV entry printed."""
    src = """
    import asyncio
    import nats
    from nats.errors import TimeoutError

    async def main():
        nc = await nats.connect(URL)
        js = nc.jetstream()
        await js.add_stream(name="sample-stream", subjects=["foo"])
        for i in range(0, 3):
            ack = await js.publish("foo", f"hello world: {i}".encode())
            print(ack)
        psub = await js.pull_subscribe("foo", "psub")
        for i in range(0, 3):
            msgs = await psub.fetch(1)
            for msg in msgs:
                await msg.ack()
                print(msg)
        sub = await js.subscribe("foo")
        msg = await sub.next_msg()
        await msg.ack()
        print(msg.data, msg.metadata.sequence.stream, msg.metadata.num_pending)
        got = []

        async def qsub_a(msg):
            got.append(msg.data)
            await msg.ack()

        qs = await js.subscribe("foo", "workers", cb=qsub_a)
        while len(got) < 3:
            await nc.flush()
        print(sorted(got))
        await qs.unsubscribe()
        kv = await js.create_key_value(bucket="MY_KV")
        await kv.put("hello", b"world")
        entry = await kv.get("hello")
        print(f"KeyValue.Entry: key={entry.key}, value={entry.value}")
        try:
            await nc.request("help", b"help me", timeout=0.5)
        except TimeoutError:
            print("Request timed out")
        except nats.errors.NoRespondersError:
            print("no responders")
        await nc.close()

    asyncio.run(main())
    """
    want, werr = _run(textwrap.dedent(src))
    assert werr is None, werr
    got, gerr = _run(port(textwrap.dedent(src)))
    assert gerr is None, (gerr, got)
    assert _mask_js(got) == _mask_js(want)


def test_natspy_readme_style_core_program() -> None:
    """nats-py's README core walk-through: `async for msg in sub.messages`, a positional
    queue group, a request answered by publish(msg.reply), drain."""
    want, got = judge(
        """
        import asyncio
        import nats
        from nats.errors import ConnectionClosedError, TimeoutError, NoServersError

        async def main():
            nc = await nats.connect(URL)
            sub = await nc.subscribe("foo")
            await nc.publish("foo", b"Hello")
            await nc.publish("foo", b"World")
            await nc.publish("foo", b"!!!!!")
            n = 0
            async for msg in sub.messages:
                print(f"Received a message on '{msg.subject} {msg.reply}': {msg.data.decode()}")
                n += 1
                if n == 3:
                    await sub.unsubscribe()

            async def help_request(msg):
                await nc.publish(msg.reply, b"I can help")

            await nc.subscribe("help", "workers", help_request)
            response = await nc.request("help", b"help me", timeout=0.5)
            print("Received response: {message}".format(message=response.data.decode()))
            await nc.drain()
            print(nc.is_closed)

        asyncio.run(main())
        """
    )
    assert got == want


@pytest.mark.xfail(
    strict=True,
    reason="issue 37 counts how things print; the porting table lists no print difference, "
    "yet msg.metadata.sequence prints 'SequencePair(consumer=1, stream=1)' here and "
    "'Msg.Metadata.SequencePair(consumer=1, stream=1)' on nats-py; msg.metadata prints "
    "'MsgMetadata(..., num_delivered=1, num_pending=0, timestamp=NanoDatetime(...))' here, "
    "'Msg.Metadata(..., num_pending=0, num_delivered=1, timestamp=datetime.datetime(...))' there",
)
def test_print_metadata_like_nats_py() -> None:
    want, got = judge(
        """
        import asyncio
        import re
        import nats

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s"])
            await js.publish("s", b"x")
            msg = (await (await js.pull_subscribe("s", "d")).fetch(1))[0]
            print(msg.metadata.sequence)
            print(re.sub(r"timestamp=.*?\\), stream", "timestamp=T, stream", repr(msg.metadata)))
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want


@pytest.mark.xfail(
    strict=True,
    reason="issue 37 counts how things print; the porting table lists none, yet print(await "
    "js.stream_info(...)) differs: here the enums print as <RetentionPolicy.LIMITS: 'limits'> "
    "and fields unset on the server (description=None, ...) are left out; nats-py prints "
    "retention='limits' and every field",
)
def test_print_stream_info_like_nats_py() -> None:
    want, got = judge(
        """
        import asyncio
        import re
        import nats

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s"])
            info = await js.stream_info("S")
            print(re.sub(r"created=[^,]+,", "", repr(info.config)))
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want


def test_client_class_then_connect_method() -> None:
    """nats-py's examples: `nc = NATS(); await nc.connect(servers=[...])` (the table: Client
    is Client, connect a method of it). The README names no module for nats.aio.client, so
    the port imports Client from jetstream_sync."""
    src = textwrap.dedent(
        """
        import asyncio
        from nats.aio.client import Client as NATS

        async def main():
            nc = NATS()
            await nc.connect(servers=[URL])
            print(nc.is_connected)
            sub = await nc.subscribe("x")
            await nc.publish("x", b"1")
            print((await sub.next_msg(timeout=2)).data)
            await nc.close()
            print(nc.is_closed)

        asyncio.run(main())
        """
    )
    want, werr = _run(src)
    assert werr is None
    ported = port(src).replace(
        "from nats.aio.client import Client as NATS", "from jetstream_sync import Client as NATS"
    )
    got, gerr = _run(ported)
    assert gerr is None, gerr
    assert got == want == ["True", "b'1'", "True"]


def test_error_types_match_nats_py() -> None:
    want, got = judge(
        """
        import asyncio
        import nats
        from nats.errors import TimeoutError, NoRespondersError
        from nats.js.errors import NotFoundError, KeyNotFoundError, NoKeysError

        async def main():
            nc = await nats.connect(URL)
            await nc.subscribe("quiet")
            s = await nc.subscribe("silent")
            js = nc.jetstream()
            kv = await js.create_key_value(bucket="b")
            for call, exc in [
                (lambda: nc.request("nobody", b"", timeout=0.5), NoRespondersError),
                (lambda: nc.request("quiet", b"", timeout=0.2), TimeoutError),
                (lambda: s.next_msg(timeout=0.1), TimeoutError),
                (lambda: js.stream_info("NOPE"), NotFoundError),
                (lambda: kv.get("missing"), KeyNotFoundError),
                (lambda: kv.keys(), NoKeysError),
            ]:
                try:
                    await call()
                    print("no error")
                except exc:
                    print("caught", exc.__name__)
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want
    assert len(want) == 6 and all(line.startswith("caught") for line in want)


@pytest.mark.xfail(
    strict=True,
    reason="the porting table lists different error texts only for Key-Value, permissions and "
    "stream/consumer names; the core errors' texts differ too: print(e) of a request with no "
    "responders is 'nats: no responders available for request' on nats-py, \"no responders "
    "are listening on 'nobody'\" here; a request timeout 'nats: timeout' vs \"request on "
    "'quiet': no reply within 0.2 s\"",
)
def test_core_error_texts_like_nats_py() -> None:
    want, got = judge(
        """
        import asyncio
        import nats
        from nats.errors import TimeoutError, NoRespondersError

        async def main():
            nc = await nats.connect(URL)
            await nc.subscribe("quiet")
            try:
                await nc.request("nobody", b"", timeout=0.5)
            except NoRespondersError as e:
                print(e)
            try:
                await nc.request("quiet", b"", timeout=0.2)
            except TimeoutError as e:
                print(e)
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want


def test_js_publish_no_stream_same_error_type() -> None:
    """Table: nats-py raises at the first 503, here after retries: the same type either way."""
    want, got = judge(
        """
        import asyncio
        import nats
        from nats.js.errors import NoStreamResponseError

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            try:
                await js.publish("nostream", b"x")
            except NoStreamResponseError as e:
                print("caught", type(e).__name__)
            await nc.close()

        asyncio.run(main())
        """
    )
    assert got == want == ["caught NoStreamResponseError"]


def test_kv_per_key_ttl_difference_is_loud() -> None:
    """Deliberate difference: per-key TTLs need limit_marker_ttl (nats-py enables msg TTLs on
    every bucket). A nats-py program using create(msg_ttl=) must fail loudly, not store a key
    that never expires."""
    src = textwrap.dedent(
        """
        import asyncio
        import nats

        async def main():
            nc = await nats.connect(URL)
            js = nc.jetstream()
            kv = await js.create_key_value(bucket="b")
            try:
                await kv.create("k", b"v", msg_ttl=5)
                print("stored")
            finally:
                await nc.close()

        asyncio.run(main())
        """
    )
    want, werr = _run(src)
    assert werr is None and want == ["stored"]
    got, gerr = _run(port(src))
    assert got == [] and isinstance(gerr, jss.NATSError), (got, gerr)
    assert "ttl" in str(gerr).lower()


@pytest.mark.xfail(
    strict=True,
    reason="README contradicts itself: the Key-Value section says '`keys(filters)` takes key "
    "patterns (ADR-8), not nats-py's substrings'; the porting table (and the client) say a "
    "filter without wildcards lists the keys containing it, as nats-py",
)
def test_kv_section_claim_filters_are_patterns_not_substrings() -> None:
    with NATSServer(jetstream=True) as srv, jss.connect(srv.url) as nc:
        kv = nc.jetstream().create_key_value(bucket="k")
        for key in ["app", "apple", "x.app"]:
            kv.put(key, b"v")
        assert kv.keys(filters=["app"]) == ["app"]
