"""Instructions per message on the CPU paths, counted by valgrind's callgrind (issue 21).

Usage::

    python benchmarks/icount.py                  # every path, ours / nats-py / raw, 2 runs each
    python benchmarks/icount.py --paths publish flood --runs 1 --scale 0.5
    python benchmarks/icount.py --profile        # + ours' top C functions per message, per path

Each figure is a whole-process count (every thread, interpreter start and imports included)
of a client process run under ``valgrind --tool=callgrind``: once doing N operations and once
doing 0 operations, with everything else (connect, subscribe, bind, flush, close) the same.
(count(N) - count(0)) / N is the cost of one message. The nats-server, the publisher of the
flood and the preloading of JetStream streams run in this driver process, not under valgrind.

Columns: ``ours`` (jetstream_sync), ``nats-py`` (its asyncio API, the natural way) and
``raw``: the smallest honest hand-written loop on a plain socket (build PUB frames, find
MSG/HMSG lines, slice payloads, send +ACK frames) with no library at all. See
benchmarks/README.md, "Instruction counts".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

SCRIPT = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(SCRIPT))
MSG_SIZE = 128
PAYLOAD = b"x" * MSG_SIZE
BATCH = 100
TIMEOUT = 120.0  # every wait in a child; valgrind makes a child ~50x slower
LIBS = ("ours", "nats-py", "raw")

# path -> (N, description). N keeps the 0-op subtraction stable (see the README's spread).
PATHS: Dict[str, Tuple[int, str]] = {
    "publish": (100_000, "core publish, 128 B, pipelined then one flush"),
    "flood": (50_000, "receive a flood of 128 B MSGs into `sub.next_msg()` (raw: parse only)"),
    "flood_cb": (50_000, "receive a flood of 128 B MSGs into a callback subscription"),
    "fetch": (20_000, "JetStream fetch(100), explicit-ack consumer, no ack sent"),
    "fetch_ack": (20_000, "JetStream fetch(100) + ack each, explicit-ack consumer"),
    "consume": (20_000, "JetStream consume(cb, max_messages=500), the callback acking each"),
    "push": (50_000, "JetStream push consumer into `sub.next_msg()`, flow control, ack none"),
    "request": (5_000, "core request/reply, 128 B, one at a time (the responder is outside)"),
    "js_publish": (5_000, "`js.publish`, each PubAck awaited, memory storage"),
    "publish_async": (20_000, "`publish_async` (window 4000) then publish_async_completed"),
    "fetch1": (5_000, "JetStream fetch(1) + ack, explicit-ack consumer"),
}
CONSUME_MAX = 500
NO_PATH = {("consume", "nats-py")}  # nats-py 2.16 has no consume()
JS_PATHS = ("fetch", "fetch_ack", "consume", "push", "fetch1")  # preloaded stream per run
PUBLISH_PATHS = ("js_publish", "publish_async")  # an empty stream per run
WINDOW = 4_000  # publish_async: acks outstanding at most, all three (bench_jetstream's)


# --- children: the code under valgrind ---------------------------------------------------


def _hostport(url: str) -> Tuple[str, int]:
    hp = url.split("://", 1)[-1].rsplit("@", 1)[-1]
    host, port = hp.rsplit(":", 1)
    return host, int(port)


def ours(path: str, n: int, env: Dict[str, str]) -> None:
    import jetstream_sync as nats

    nc = nats.connect(env["NATS_URL"])
    if path == "publish":
        pub = nc.publish
        data = PAYLOAD
        for _ in range(n):
            pub("icount.pub", data)
        nc.flush(TIMEOUT)
    elif path == "flood":
        subject = env["SUBJECT"]
        sub = nc.subscribe(subject, pending_msgs_limit=n + 1024, pending_bytes_limit=1 << 30)
        nc.flush(TIMEOUT)
        nc.publish("icount.go", f"{n} {subject}".encode())
        next_msg = sub.next_msg
        for _ in range(n):
            next_msg(TIMEOUT)
    elif path == "flood_cb":
        subject = env["SUBJECT"]
        done = threading.Event()
        count = [0]

        def cb(msg: Any) -> None:
            count[0] += 1
            if count[0] == n:
                done.set()

        nc.subscribe(subject, cb=cb, pending_msgs_limit=n + 1024, pending_bytes_limit=1 << 30)
        nc.flush(TIMEOUT)
        nc.publish("icount.go", f"{n} {subject}".encode())
        if n and not done.wait(TIMEOUT):
            raise RuntimeError(f"{count[0]} of {n} messages")
    elif path == "push":
        js = nc.jetstream(timeout=TIMEOUT)
        jsub = js.subscribe(
            env["SUBJECT"],
            stream=env["STREAM"],
            config=nats.ConsumerConfig(ack_policy=nats.AckPolicy.NONE),
            idle_heartbeat=5.0,
            flow_control=True,
            pending_msgs_limit=n + 1024,
            pending_bytes_limit=1 << 30,
        )
        take = jsub.next_msg
        for _ in range(n):
            take(TIMEOUT)
        jsub.unsubscribe()
    elif path == "request":
        request = nc.request
        for _ in range(n):
            request("icount.req", PAYLOAD, timeout=TIMEOUT)
    elif path == "js_publish":
        js = nc.jetstream(timeout=TIMEOUT)
        subject, publish = env["SUBJECT"], js.publish
        for _ in range(n):
            publish(subject, PAYLOAD)
    elif path == "publish_async":
        js = nc.jetstream(timeout=TIMEOUT, publish_async_max_pending=WINDOW)
        subject, publish_async = env["SUBJECT"], js.publish_async
        for _ in range(n):
            publish_async(subject, PAYLOAD)
        js.publish_async_completed(timeout=TIMEOUT)
    elif path == "consume":
        js = nc.jetstream(timeout=TIMEOUT)
        consumer = js.consumer(env["STREAM"], env["DURABLE"])
        done = threading.Event()
        count = [0]

        def on_msg(msg: Any) -> None:
            msg.ack()
            count[0] += 1
            if count[0] == n:
                done.set()

        ctx = consumer.consume(on_msg, max_messages=CONSUME_MAX)
        if n and not done.wait(TIMEOUT):
            raise RuntimeError(f"{count[0]} of {n} messages")
        nc.flush(TIMEOUT)
        ctx.stop()
        ctx.wait(TIMEOUT)
    else:  # fetch, fetch_ack, fetch1
        ack = path != "fetch"
        batch = 1 if path == "fetch1" else BATCH
        js = nc.jetstream(timeout=TIMEOUT)
        psub = js.pull_subscribe(env["SUBJECT"], durable=env["DURABLE"], stream=env["STREAM"])
        fetch = psub.fetch
        got = 0
        while got < n:
            msgs = fetch(batch, timeout=TIMEOUT)
            if ack:
                for m in msgs:
                    m.ack()
            got += len(msgs)
        nc.flush(TIMEOUT)
    nc.close()


def nats_py(path: str, n: int, env: Dict[str, str]) -> None:
    import nats

    async def main() -> None:
        nc = await nats.connect(env["NATS_URL"])
        if path == "publish":
            pub = nc.publish
            data = PAYLOAD
            for _ in range(n):
                await pub("icount.pub", data)
            await nc.flush(TIMEOUT)
        elif path in ("flood", "flood_cb"):
            subject = env["SUBJECT"]
            done = asyncio.Event()
            count = [0]

            async def cb(msg: Any) -> None:
                count[0] += 1
                if count[0] == n:
                    done.set()

            limits = dict(pending_msgs_limit=n + 1024, pending_bytes_limit=1 << 30)
            if path == "flood":
                sub = await nc.subscribe(subject, **limits)  # type: ignore[arg-type]
            else:
                sub = await nc.subscribe(subject, cb=cb, **limits)  # type: ignore[arg-type]
            await nc.flush(TIMEOUT)
            await nc.publish("icount.go", f"{n} {subject}".encode())
            if path == "flood":
                next_msg = sub.next_msg
                for _ in range(n):
                    await next_msg(TIMEOUT)
            elif n:
                await asyncio.wait_for(done.wait(), TIMEOUT)
        elif path == "push":
            from nats.js.api import AckPolicy, ConsumerConfig

            js = nc.jetstream(timeout=TIMEOUT)
            sub = await js.subscribe(
                env["SUBJECT"],
                stream=env["STREAM"],
                config=ConsumerConfig(ack_policy=AckPolicy.NONE),
                idle_heartbeat=5.0,
                flow_control=True,
                pending_msgs_limit=n + 1024,
                pending_bytes_limit=1 << 30,
            )
            next_msg = sub.next_msg
            for _ in range(n):
                await next_msg(TIMEOUT)
            await sub.unsubscribe()
        elif path == "request":
            request = nc.request
            for _ in range(n):
                await request("icount.req", PAYLOAD, timeout=TIMEOUT)
        elif path == "js_publish":
            js = nc.jetstream(timeout=TIMEOUT)
            subject, publish = env["SUBJECT"], js.publish
            for _ in range(n):
                await publish(subject, PAYLOAD)
        elif path == "publish_async":
            js = nc.jetstream(timeout=TIMEOUT, publish_async_max_pending=WINDOW)
            subject, publish_async = env["SUBJECT"], js.publish_async
            for _ in range(n):
                await publish_async(subject, PAYLOAD)
            await asyncio.wait_for(js.publish_async_completed(), TIMEOUT)
        else:
            ack = path != "fetch"
            batch = 1 if path == "fetch1" else BATCH
            js = nc.jetstream(timeout=TIMEOUT)
            psub = await js.pull_subscribe(
                env["SUBJECT"], durable=env["DURABLE"], stream=env["STREAM"]
            )
            fetch = psub.fetch
            got = 0
            while got < n:
                msgs = await fetch(batch, timeout=TIMEOUT)
                if ack:
                    for m in msgs:
                        await m.ack()
                got += len(msgs)
            await nc.flush(TIMEOUT)
        await nc.close()

    asyncio.run(main())


class RawConn:
    """A plain socket speaking the protocol by hand: what the raw column measures."""

    def __init__(self, url: str) -> None:
        self.sock = socket.create_connection(_hostport(url), timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.sock.sendall(
            b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nPING\r\n'
        )
        self.wait_pong()

    def wait_pong(self) -> None:
        """Read (discarding INFO, +OK, MSGs) until a PONG; keep what follows it."""
        while b"PONG\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("server closed the connection")
            self.buf += data
        self.buf = self.buf[self.buf.index(b"PONG\r\n") + 6 :]

    def read_msgs(self, n: int, replies: Optional[List[bytes]]) -> None:
        """Parse until n MSG/HMSG frames came; each payload is sliced out; with ``replies``,
        each message's reply subject is appended to it. Answers PINGs."""
        buf, pos, got = self.buf, 0, 0
        recv = self.sock.recv
        while got < n:
            i = buf.find(b"\r\n", pos)
            if i >= 0:
                line = buf[pos:i]
                if line[:4] == b"MSG " or line[:5] == b"HMSG ":
                    parts = line.split(b" ")
                    end = i + 2 + int(parts[-1])
                    if end + 2 <= len(buf):
                        data = buf[i + 2 : end]  # noqa: F841 (the payload, as a client hands it on)
                        if replies is not None:
                            replies.append(parts[3])
                        pos = end + 2
                        got += 1
                        continue
                else:
                    if line == b"PING":
                        self.sock.sendall(b"PONG\r\n")
                    pos = i + 2
                    continue
            more = recv(65536)
            if not more:
                raise EOFError("server closed the connection")
            buf = buf[pos:] + more
            pos = 0
        self.buf = buf[pos:]


def raw_shared(path: str, n: int, env: Dict[str, str]) -> None:
    """The paths whose raw loop is the wall-clock benchmarks' own (benchmarks/_raw.py)."""
    sys.path.insert(0, os.path.dirname(SCRIPT))
    import _raw

    with _raw.RawConn(env["NATS_URL"], timeout=TIMEOUT) as conn:
        if path == "request":
            _raw.request_loop(conn, "icount.req", PAYLOAD, n)
        elif path == "js_publish":
            acked, _ = _raw.js_publish(conn, env["SUBJECT"], PAYLOAD, n)
        elif path == "publish_async":
            acked, _ = _raw.js_publish_pipelined(conn, env["SUBJECT"], PAYLOAD, n, WINDOW)
        else:  # fetch1
            _raw.fetch_loop(conn, env["STREAM"], env["DURABLE"], 1, n, expires=TIMEOUT)
        if path in PUBLISH_PATHS and acked != n:
            raise RuntimeError(f"{acked} of {n} publishes acked")


def raw(path: str, n: int, env: Dict[str, str]) -> None:
    if path in ("request", "fetch1", *PUBLISH_PATHS):
        raw_shared(path, n, env)
        return
    c = RawConn(env["NATS_URL"])
    sock = c.sock
    if path == "publish":
        subject = b"icount.pub"
        data = PAYLOAD
        out: List[bytes] = []
        size = 0
        for _ in range(n):
            frame = b"PUB %s %d\r\n%s\r\n" % (subject, len(data), data)
            out.append(frame)
            size += len(frame)
            if size >= 65536:
                sock.sendall(b"".join(out))
                out.clear()
                size = 0
        out.append(b"PING\r\n")
        sock.sendall(b"".join(out))
        c.wait_pong()
    elif path in ("flood", "flood_cb"):
        subject = env["SUBJECT"].encode()
        sock.sendall(b"SUB %s 1\r\nPING\r\n" % subject)
        c.wait_pong()
        go = b"%d %s" % (n, subject)
        sock.sendall(b"PUB icount.go %d\r\n%s\r\n" % (len(go), go))
        c.read_msgs(n, None)
    elif path == "consume":
        raw_consume(c, env, n)
    elif path == "push":
        raw_push(c, env, n)
    else:
        ack = path == "fetch_ack"
        inbox = b"_INBOX.rawicount"
        api = b"$JS.API.CONSUMER.MSG.NEXT.%s.%s" % (
            env["STREAM"].encode(),
            env["DURABLE"].encode(),
        )
        req = b'{"batch":%d,"expires":%d}' % (BATCH, int(TIMEOUT * 1e9))
        pull = b"PUB %s %s %d\r\n%s\r\n" % (api, inbox, len(req), req)
        sock.sendall(b"SUB %s 1\r\nPING\r\n" % inbox)
        c.wait_pong()
        got = 0
        acks: List[bytes] = []
        while got < n:
            replies: List[bytes] = []
            sock.sendall(b"".join(acks) + pull)  # the previous batch's acks, then the pull
            c.read_msgs(BATCH, replies)
            got += len(replies)
            if ack:
                acks = [b"PUB %s 4\r\n+ACK\r\n" % r for r in replies]
        sock.sendall(b"".join(acks) + b"PING\r\n")
        c.wait_pong()
    sock.close()


def raw_consume(c: RawConn, env: Dict[str, str], n: int) -> None:
    """consume()'s work by hand: pull CONSUME_MAX with an expiry and idle heartbeats; once
    half has come, the acks so far and a pull for that half go out in one write."""
    sock = c.sock
    inbox = b"_INBOX.rawicount"
    api = b"$JS.API.CONSUMER.MSG.NEXT.%s.%s" % (env["STREAM"].encode(), env["DURABLE"].encode())
    half = CONSUME_MAX // 2

    def pull(want: int) -> bytes:
        req = b'{"batch":%d,"expires":%d,"idle_heartbeat":%d}' % (
            want,
            int(TIMEOUT * 1e9),
            int(TIMEOUT / 2 * 1e9),
        )
        return b"PUB %s %s %d\r\n%s\r\n" % (api, inbox, len(req), req)

    sock.sendall(b"SUB %s 1\r\nPING\r\n" % inbox)
    c.wait_pong()
    sock.sendall(pull(CONSUME_MAX))
    got = 0
    acks: List[bytes] = []
    while got < n:
        replies: List[bytes] = []
        c.read_msgs(min(half, n - got), replies)
        got += len(replies)
        acks = [b"PUB %s 4\r\n+ACK\r\n" % r for r in replies]
        if got < n:
            acks.append(pull(half))
        sock.sendall(b"".join(acks))
    sock.sendall(b"PING\r\n")
    c.wait_pong()


def raw_push(c: RawConn, env: Dict[str, str], n: int) -> None:
    """A push consumer by hand: SUB a deliver subject, create the consumer (ack none, flow
    control, idle heartbeat), read n messages answering flow control with an empty PUB."""
    import json

    sock = c.sock
    deliver = b"_INBOX.rawicountpush"
    config = {
        "stream_name": env["STREAM"],
        "config": {
            "deliver_subject": deliver.decode(),
            "deliver_policy": "all",
            "ack_policy": "none",
            "filter_subject": env["SUBJECT"],
            "flow_control": True,
            "idle_heartbeat": int(5e9),
        },
    }
    body = json.dumps(config).encode()
    api = b"$JS.API.CONSUMER.CREATE.%s" % env["STREAM"].encode()
    sock.sendall(
        b"SUB %s 1\r\nSUB _INBOX.rawicountapi 2\r\nPUB %s _INBOX.rawicountapi %d\r\n%s\r\n"
        % (deliver, api, len(body), body)
    )
    buf, pos, got = c.buf, 0, 0
    recv = sock.recv
    while got < n:
        i = buf.find(b"\r\n", pos)
        if i >= 0:
            line = buf[pos:i]
            if line[:4] == b"MSG " or line[:5] == b"HMSG ":
                parts = line.split(b" ")
                end = i + 2 + int(parts[-1])
                if end + 2 <= len(buf):
                    if line[:5] == b"HMSG ":  # a status: flow control has a reply subject
                        if len(parts) == 6 and buf[i + 2 : i + 14] == b"NATS/1.0 100":
                            sock.sendall(b"PUB %s 0\r\n\r\n" % parts[3])
                    elif parts[2] == b"1":  # on the deliver subscription (its own subject)
                        data = buf[i + 2 : end]  # noqa: F841 (the payload, as a client hands it on)
                        got += 1
                    pos = end + 2
                    continue
            else:
                if line == b"PING":
                    sock.sendall(b"PONG\r\n")
                pos = i + 2
                continue
        more = recv(65536)
        if not more:
            raise EOFError("server closed the connection")
        buf = buf[pos:] + more
        pos = 0
    c.buf = buf[pos:]


def child(path: str, lib: str, n: int) -> None:
    env = dict(os.environ)
    calls_out = env.get("ICOUNT_CALLS")
    counts: Dict[str, int] = {}
    if calls_out:  # --calls: count Python and C calls in every thread (not under valgrind)

        def prof(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                code = frame.f_code
                key = f"{os.path.basename(code.co_filename)}:{code.co_qualname}"
            elif event == "c_call":
                key = f"C {getattr(arg, '__qualname__', arg)}"
            else:
                return
            counts[key] = counts.get(key, 0) + 1

        threading.setprofile(prof)
        sys.setprofile(prof)
    {"ours": ours, "nats-py": nats_py, "raw": raw}[lib](path, n, env)
    if calls_out:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        import json

        with open(calls_out, "w") as f:
            json.dump(counts, f)


def python_calls(path: str, n: int, drv: Driver, tmp: str) -> List[str]:
    """Python-level calls per message in ours (sys.setprofile, every thread, N minus 0)."""
    import json

    got = []
    for k in (n, 0):
        env = drv.env_for(path, k)
        env["ICOUNT_CALLS"] = out = os.path.join(tmp, f"calls.{path}.{k}.json")
        cmd = [sys.executable, SCRIPT, "--child", path, "--lib", "ours", "--n", str(k)]
        subprocess.run(cmd, env=env, check=True, timeout=600)
        drv.done_with(path, env, k, "ours")
        with open(out) as f:
            got.append(json.load(f))
    diff = {key: (v - got[1].get(key, 0)) / n for key, v in got[0].items()}
    top = [kv for kv in sorted(diff.items(), key=lambda kv: -kv[1]) if kv[1] >= 0.005][:25]
    lines = ["| call (Python `file:function`, or C) | calls/msg |", "| --- | ---: |"]
    lines += [f"| `{key}` | {per:.2f} |" for key, per in top]
    return lines


# --- the driver (not under valgrind) -----------------------------------------------------


class Driver:
    """The server, the flood publisher and the JetStream preloading."""

    def __init__(self) -> None:
        sys.path.insert(0, ROOT)
        import jetstream_sync as nats
        from jetstream_sync.server import NATSServer

        self.nats = nats
        self.server = NATSServer(jetstream=True)
        self.server.__enter__()
        self.url = self.server.url
        self.nc = nats.connect(self.url)
        self.pub_nc = nats.connect(self.url)  # the flood publisher's own connection
        self.js = self.nc.jetstream(timeout=60)
        self.k = 0
        self.nc.subscribe("icount.go", cb=self._flood)
        # the request path's responder: the echo, on a connection of its own
        self.nc.subscribe("icount.req", cb=lambda msg: self.pub_nc.publish(msg.reply, msg.data))
        self.nc.flush(10)

    def _flood(self, msg: Any) -> None:
        count, subject = msg.data.decode().split()
        pub = self.pub_nc.publish
        for _ in range(int(count)):
            pub(subject, PAYLOAD)
        self.pub_nc.flush(60)

    def env_for(self, path: str, n: int) -> Dict[str, str]:
        self.k += 1
        env = dict(os.environ, NATS_URL=self.url, PYTHONHASHSEED="0")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        subject = f"icount.s{self.k}"
        env["SUBJECT"] = subject
        if path in PUBLISH_PATHS:
            stream = f"IC{self.k}"
            self.js.add_stream(
                name=stream, subjects=[subject], storage=self.nats.StorageType.MEMORY
            )
            env["STREAM"] = stream
        elif path in JS_PATHS:
            nats = self.nats
            stream, durable = f"IC{self.k}", f"d{self.k}"
            self.js.add_stream(name=stream, subjects=[subject], storage=nats.StorageType.MEMORY)
            for _ in range(n):
                self.js.publish_async(subject, PAYLOAD)
            self.js.publish_async_completed(timeout=60)
            if path == "push":  # the child makes its own push consumer
                env.update(STREAM=stream, DURABLE="")
                return env
            # explicit acks for both (ours refuses to pull from an ack-none consumer); the
            # no-ack run leaves them pending, with an ack wait far beyond the run
            self.js.add_consumer(
                stream,
                durable_name=durable,
                ack_policy=nats.AckPolicy.EXPLICIT,
                ack_wait=3600.0,
                max_ack_pending=-1,
                filter_subject=subject,
            )
            env.update(STREAM=stream, DURABLE=durable)
        return env

    def done_with(self, path: str, env: Dict[str, str], n: int, lib: str) -> None:
        if path in PUBLISH_PATHS:
            stored = self.js.stream_info(env["STREAM"]).state.messages
            if stored != n:
                print(f"WARNING {path}/{lib}: {stored} of {n} stored", file=sys.stderr)
            self.js.delete_stream(env["STREAM"])
        elif path == "push":
            self.js.delete_stream(env["STREAM"])
        elif path in JS_PATHS:
            info = self.js.consumer_info(env["STREAM"], env["DURABLE"])
            if info.delivered.consumer_seq != n or (
                path != "fetch" and info.num_ack_pending and self._settle(env)
            ):
                print(f"WARNING {path}/{lib}: consumer info {info}", file=sys.stderr)
            self.js.delete_stream(env["STREAM"])

    def _settle(self, env: Dict[str, str]) -> bool:
        for _ in range(50):
            time.sleep(0.1)
            if self.js.consumer_info(env["STREAM"], env["DURABLE"]).num_ack_pending == 0:
                return False
        return True

    def close(self) -> None:
        self.pub_nc.close()
        self.nc.close()
        self.server.__exit__(None, None, None)


def callgrind(
    path: str, lib: str, n: int, env: Dict[str, str], out: str
) -> Tuple[int, Optional[str]]:
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        SCRIPT,
        "--child",
        path,
        "--lib",
        lib,
        "--n",
        str(n),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    m = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or m is None:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise RuntimeError(f"{path}/{lib} n={n} failed (rc {proc.returncode}):\n{tail}")
    return int(m.group(1)), out


_LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([\s\d.]+%\)\s+)?(\S.*)$")


def annotate(out: str) -> Dict[str, int]:
    """Self cost per function (file:function [object]) from callgrind_annotate."""
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", out], capture_output=True, text=True
    ).stdout
    costs: Dict[str, int] = {}
    started = False
    for line in text.splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started:
            continue
        m = _LINE.match(line)
        if m is None:
            if costs:
                break
            continue
        name = re.sub(r" \[.*\]$", "", m.group(2))  # the object file
        name = re.sub(r"'\d+$", "", name.split(":", 1)[-1])  # the source file; recursion depth
        costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def per_message_profile(with_n: Dict[str, int], without: Dict[str, int], n: int) -> List[str]:
    diff = {k: (v - without.get(k, 0)) / n for k, v in with_n.items()}
    top = sorted(diff.items(), key=lambda kv: -kv[1])[:15]
    total = sum(diff.values())
    lines = ["| C function (self) | instr/msg | share |", "| --- | ---: | ---: |"]
    for name, per in top:
        lines.append(f"| `{name[:90]}` | {per:,.0f} | {100 * per / total:.0f}% |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--paths", nargs="+", choices=list(PATHS), default=list(PATHS))
    ap.add_argument("--libs", nargs="+", choices=LIBS, default=list(LIBS))
    ap.add_argument("--runs", type=int, default=2, help="pairs of (N, 0) runs per cell")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every N")
    ap.add_argument("--profile", action="store_true", help="ours' top functions per message")
    ap.add_argument("--calls", action="store_true", help="ours' Python calls per message")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.lib, args.n)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind not found")
    ver = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout
    print(f"{ver.strip()}, Python {sys.version.split()[0]}, N scale {args.scale}", flush=True)
    drv = Driver()
    tmp = tempfile.mkdtemp(prefix="icount-")
    results: Dict[Tuple[str, str], List[float]] = {}
    profiles: Dict[str, List[str]] = {}
    calls: Dict[str, List[str]] = {}
    try:
        for path in args.paths:
            n = max(BATCH, int(PATHS[path][0] * args.scale) // BATCH * BATCH)
            for lib in args.libs:
                if (path, lib) in NO_PATH:
                    continue
                per: List[float] = []
                for run in range(args.runs):
                    counts = []
                    outs = []
                    for k in (n, 0):
                        env = drv.env_for(path, k)
                        out = os.path.join(tmp, f"{path}.{lib}.{run}.{k}.out")
                        t0 = time.monotonic()
                        c, _ = callgrind(path, lib, k, env, out)
                        drv.done_with(path, env, k, lib)
                        counts.append(c)
                        outs.append(out)
                        print(
                            f"  {path:9s} {lib:7s} run {run} n={k:<7d} {c:>14,d} Ir"
                            f"  ({time.monotonic() - t0:.0f} s)",
                            file=sys.stderr,
                            flush=True,
                        )
                    per.append((counts[0] - counts[1]) / n)
                    if args.profile and lib == "ours" and run == 0:
                        profiles[path] = per_message_profile(
                            annotate(outs[0]), annotate(outs[1]), n
                        )
                results[(path, lib)] = per
            if args.calls:
                calls[path] = python_calls(path, n, drv, tmp)
    finally:
        drv.close()
        shutil.rmtree(tmp, ignore_errors=True)

    def cell(path: str, lib: str) -> str:
        v = results.get((path, lib))
        if not v:
            return "-"
        mean = sum(v) / len(v)
        spread = f" ±{(max(v) - min(v)) / 2:,.0f}" if len(v) > 1 else ""
        return f"{mean:,.0f}{spread}"

    def mean(path: str, lib: str) -> Optional[float]:
        v = results.get((path, lib))
        return sum(v) / len(v) if v else None

    rows = list(args.paths)
    print()
    print("| path | N | ours | nats-py | raw | ours/raw | nats-py/ours |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    derived = []
    if "fetch" in rows and "fetch_ack" in rows:
        derived.append("ack")
    for path in rows + derived:
        if path == "ack":  # fetch_ack - fetch: the cost of one ack
            for lib in LIBS:
                a, b = results.get(("fetch_ack", lib)), results.get(("fetch", lib))
                if a and b:
                    results[("ack", lib)] = [x - y for x, y in zip(a, b)]
            n_label, label = "", "ack (fetch_ack - fetch)"
        else:
            n_label = f"{max(BATCH, int(PATHS[path][0] * args.scale) // BATCH * BATCH):,}"
            label = path
        o, p, r = mean(path, "ours"), mean(path, "nats-py"), mean(path, "raw")
        print(
            f"| {label} | {n_label} | {cell(path, 'ours')} | {cell(path, 'nats-py')} "
            f"| {cell(path, 'raw')} | {f'{o / r:.2f}' if o and r else '-'} "
            f"| {f'{p / o:.2f}' if o and p else '-'} |"
        )
    print()
    for path in PATHS:
        print(f"- {path}: {PATHS[path][1]}")
    for path, lines in profiles.items():
        print(f"\n### ours, {path}: top C functions by self cost per message\n")
        print("\n".join(lines))
    for path, lines in calls.items():
        print(f"\n### ours, {path}: Python-level calls per message\n")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
