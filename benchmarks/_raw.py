"""The raw limit: each benchmark's work done by the smallest honest socket loop (issue 21).

No client library: one thread, one blocking TCP socket, frames built by hand, every server
frame read inline and parsed (the MSG/HMSG line gives the payload length; the payload is
read), PINGs answered, acks written with the next request. These loops do the same work as
the client in the same benchmark row (same counts, sizes, acks, checks) and nothing else:
no reconnects, no timers, no dispatch, no futures. Their figures are what Python itself can
do with one socket on this machine: the practical limit for a Python client.

Setup and checks around the timed part (streams, preloads, consumer info) are done by the
benchmark scripts with jetstream_sync, untimed, exactly as for the other columns.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from typing import Dict, List, Optional, Tuple
from urllib.parse import urlparse

CONNECT = (
    b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
    b'"protocol":1,"lang":"python-raw","version":"0"}\r\nPING\r\n'
)
SOCKET_TIMEOUT = 5.0  # any single blocking read
WRITE_CHUNK = 32 * 1024  # pipelined writes go out when this much is buffered

# (subject, reply, headers or None, payload)
Msg = Tuple[bytes, bytes, Optional[bytes], bytes]


class RawError(Exception):
    pass


class RawConn:
    """One socket, a read buffer and a parser for the frames a client receives."""

    def __init__(self, url: str, timeout: float = SOCKET_TIMEOUT) -> None:
        parsed = urlparse(url)
        self.sock = socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or 4222), timeout
        )
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rest = b""  # received bytes not yet a whole frame
        self.events: List[Optional[Msg]] = []  # parsed frames not yet handed out
        self.next = 0
        self.sids = 0
        self.subscribed: Dict[str, int] = {}
        info = b""
        while b"\r\n" not in info:
            data = self.sock.recv(65536)
            if not data:
                raise RawError("connection closed before INFO")
            info += data
        if not info.startswith(b"INFO "):
            raise RawError(f"expected INFO, got {info[:80]!r}")
        self.rest = info.split(b"\r\n", 1)[1]
        self.sock.sendall(CONNECT)
        if self.read() is not None:
            raise RawError("expected PONG after CONNECT")

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading ---------------------------------------------------------------------

    def read(self) -> Optional[Msg]:
        """The next MSG or HMSG, or None for a PONG. Answers PINGs; skips +OK and INFO."""
        while self.next >= len(self.events):
            self._receive()
        event = self.events[self.next]
        self.next += 1
        return event

    def _receive(self) -> None:
        """One recv, and every whole frame in the buffer parsed into ``events``: one split
        of the buffer at CRLF, then a walk over the pieces, each MSG/HMSG line telling the
        payload's length (a payload holding CRLF, or not all here yet, is cut by offset)."""
        data = self.sock.recv(262144)
        if not data:
            raise RawError("connection closed by the server")
        buf = self.rest + data if self.rest else data
        events: List[Optional[Msg]] = []
        append = events.append
        pieces = buf.split(b"\r\n")
        last = len(pieces) - 1
        i = off = 0
        while i < last:
            line = pieces[i]
            start = off
            off += len(line) + 2
            op = line[:4]
            if op == b"MSG " or op == b"HMSG":
                parts = line.split(b" ")
                size = int(parts[-1])
                if i + 1 < last and len(pieces[i + 1]) == size:  # the usual case
                    data = pieces[i + 1]
                    off += size + 2
                    i += 2
                elif off + size + 2 <= len(buf):  # the payload holds CRLF: cut, re-split
                    data = buf[off : off + size]
                    off += size + 2
                    buf = buf[off:]
                    pieces = buf.split(b"\r\n")
                    last = len(pieces) - 1
                    i = off = 0
                else:  # not all here yet
                    off = start
                    break
                if op == b"MSG ":
                    append((parts[1], parts[3] if len(parts) == 5 else b"", None, data))
                else:
                    hdr_len = int(parts[-2])
                    reply = parts[3] if len(parts) == 6 else b""
                    append((parts[1], reply, data[:hdr_len], data[hdr_len:]))
                continue
            i += 1
            if op == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif op == b"PONG":
                append(None)
            elif op == b"-ERR":
                raise RawError(line.decode(errors="replace"))
        self.rest = buf[off:]
        self.events = events
        self.next = 0

    # --- writing ---------------------------------------------------------------------

    def sub(self, subject: str) -> int:
        """SUB with a sid of its own; returns the sid."""
        self.sids += 1
        self.sock.sendall(f"SUB {subject} {self.sids}\r\n".encode())
        return self.sids

    def sub_once(self, subject: str) -> None:
        """SUB and PING/PONG, unless this connection has subscribed ``subject`` already."""
        if subject not in self.subscribed:
            self.subscribed[subject] = self.sub(subject)
            self.flush()

    def flush(self, pending: bytes = b"") -> List[Msg]:
        """Write ``pending`` and a PING; read until the PONG. Returns any message read first."""
        self.sock.sendall(pending + b"PING\r\n")
        seen: List[Msg] = []
        while True:
            msg = self.read()
            if msg is None:
                return seen
            seen.append(msg)

    def request(self, subject: str, body: bytes, inbox: str = "_INBOX.raw.api") -> bytes:
        """One request/reply on a reply subject of its own (the API calls around a loop).

        Frames that arrive before the reply stay queued for :meth:`read`: the server may
        deliver a new push consumer's first messages before its create reply (the two go out
        on different internal queues), and dropping them would lose messages."""
        sid = self.sub(inbox)
        self.sock.sendall(f"PUB {subject} {inbox} {len(body)}\r\n".encode() + body + b"\r\n")
        reply_subject = inbox.encode()
        held: List[Optional[Msg]] = []
        while True:
            msg = self.read()
            if msg is not None and msg[0] == reply_subject:
                self.sock.sendall(f"UNSUB {sid}\r\n".encode())
                if held:
                    self.events = held + self.events[self.next :]
                    self.next = 0
                return msg[3]
            held.append(msg)


def pub_frame(subject: str, payload: bytes, reply: str = "") -> bytes:
    reply_part = f" {reply}" if reply else ""
    return f"PUB {subject}{reply_part} {len(payload)}\r\n".encode() + payload + b"\r\n"


# --- core -------------------------------------------------------------------------------


def publish(conn: RawConn, subject: str, payload: bytes, n: int) -> None:
    """n PUBs, each frame built from the subject and the payload (a client cannot know the
    next call's), buffered and written in 32 KiB chunks, then a PING; returns at the PONG."""
    subj = subject.encode()
    sendall = conn.sock.sendall
    out = bytearray()
    for _ in range(n):
        out += b"PUB %s %d\r\n%s\r\n" % (subj, len(payload), payload)
        if len(out) >= WRITE_CHUNK:
            sendall(out)
            out.clear()
    conn.flush(bytes(out))


def receive(
    conn: RawConn, n: int, first_wait: float, idle_wait: float, deadline: float
) -> Tuple[int, float, float]:
    """Read MSGs until n came (or no message for ``idle_wait``, or the deadline passed);
    the first may take ``first_wait``. Every message of a recv is parsed (its payload cut
    out) by RawConn; this loop counts them a recv at a time. Returns (received, time of the
    first, time of the last)."""
    clock = time.perf_counter
    received = 0
    t_first = t_last = 0.0
    try:
        conn.sock.settimeout(first_wait)
        while conn.read() is None:
            pass
        received = 1
        t_first = t_last = clock()
        conn.sock.settimeout(idle_wait)
        while received < n:
            if conn.next >= len(conn.events):
                conn._receive()
            events, start = conn.events, conn.next
            for i in range(start, len(events)):
                if events[i] is not None:
                    received += 1
                    if received == n:
                        conn.next = i + 1
                        break
            else:
                conn.next = len(events)
            t_last = clock()
            if t_last > deadline:
                break
    except (socket.timeout, RawError):
        pass
    return received, t_first, t_last


def request_loop(conn: RawConn, subject: str, payload: bytes, n: int) -> List[int]:
    """n sequential requests (one reply subject subscribed once, a token per request);
    each reply must come back with the payload. Returns each round trip in ns."""
    conn.sub_once("_INBOX.rawreq.*")
    read, sendall, clock = conn.read, conn.sock.sendall, time.perf_counter_ns
    head = f"PUB {subject} _INBOX.rawreq.".encode()
    tail = f" {len(payload)}\r\n".encode() + payload + b"\r\n"
    samples: List[int] = []
    for i in range(n):
        token = str(i).encode()
        inbox = b"_INBOX.rawreq." + token
        t0 = clock()
        sendall(head + token + tail)
        while True:
            msg = read()
            if msg is not None and msg[0] == inbox:
                break
        samples.append(clock() - t0)
        if msg[3] != payload:
            raise RawError(f"reply {i}: wrong payload {msg[3][:40]!r}")
    return samples


# --- JetStream publish --------------------------------------------------------------------


def _is_puback(msg: Msg) -> bool:
    """A reply is a PubAck: no status header (503 no responders) and no error in the JSON."""
    return msg[2] is None and msg[3].startswith(b"{") and b'"error"' not in msg[3]


def js_publish(conn: RawConn, subject: str, payload: bytes, n: int) -> Tuple[int, int]:
    """n publishes, each waiting for its PubAck. Returns (acked, failed)."""
    conn.sub_once("_INBOX.rawjs.*")
    read, sendall = conn.read, conn.sock.sendall
    head = f"PUB {subject} _INBOX.rawjs.".encode()
    tail = f" {len(payload)}\r\n".encode() + payload + b"\r\n"
    acked = failed = 0
    for i in range(n):
        token = str(i).encode()
        inbox = b"_INBOX.rawjs." + token
        sendall(head + token + tail)
        while True:
            msg = read()
            if msg is not None and msg[0] == inbox:
                break
        if _is_puback(msg):
            acked += 1
        else:
            failed += 1
    return acked, failed


def js_publish_pipelined(
    conn: RawConn, subject: str, payload: bytes, n: int, window: int
) -> Tuple[int, int]:
    """n publishes with at most ``window`` acks outstanding; each ack is matched to its
    publish by the token in its reply subject. Frames are buffered and written every 32 KiB,
    and whenever the window is full: then the loop reads at least one ack and takes every
    ack already received (no more system calls) before it writes again. Returns (acked,
    failed) once every ack came."""
    prefix = "_INBOX.rawjsa."
    conn.sub_once(prefix + "*")
    head = f"PUB {subject} {prefix}".encode()
    tail = f" {len(payload)}\r\n".encode() + payload + b"\r\n"
    acks = _AckCount(conn, prefix, n, window)
    for i in range(n):
        acks.write(head + str(i).encode() + tail)
    return acks.finish()


class _AckCount:
    """The pipelined loops' writing and ack counting: frames buffered and written every
    32 KiB, and whenever ``window`` acks are outstanding; then at least one ack is read and
    every ack already received is taken (no more system calls) before the next write. Each
    ack is matched to its publish by the token after ``prefix`` in its reply subject."""

    def __init__(self, conn: RawConn, prefix: str, n: int, window: int) -> None:
        self.conn, self.cut, self.window = conn, len(prefix), window
        self.done = bytearray(n)
        self.acked = self.failed = self.outstanding = 0
        self.out = bytearray()

    def take(self, msg: Optional[Msg]) -> None:
        if msg is None:
            return
        seq = int(msg[0][self.cut :])
        if self.done[seq]:
            raise RawError(f"ack {seq} came twice")
        self.done[seq] = 1
        self.outstanding -= 1
        if _is_puback(msg):
            self.acked += 1
        else:
            self.failed += 1

    def write(self, frame: bytes) -> None:
        self.out += frame
        self.outstanding += 1
        if self.outstanding >= self.window or len(self.out) >= WRITE_CHUNK:
            conn = self.conn
            conn.sock.sendall(self.out)
            self.out.clear()
            while self.outstanding >= self.window:
                self.take(conn.read())
                while conn.next < len(conn.events):  # the acks already parsed
                    self.take(conn.read())

    def finish(self) -> Tuple[int, int]:
        """Write what is left, wait for every ack; (acked, failed)."""
        if self.out:
            self.conn.sock.sendall(self.out)
        while self.outstanding:
            self.take(self.conn.read())
        return self.acked, self.failed


def js_publish_with_ids(
    conn: RawConn, subjects: List[str], payloads: List[bytes], id_prefix: str, window: int
) -> Tuple[int, int]:
    """What the Spark sink does for a partition, and nothing else: each row's Nats-Msg-Id
    (``<id_prefix>-<blake2b of subject, NUL NUL, data>``, as the sink's RowIds for rows
    without headers or repeats), an HPUB frame per row with a reply token, at most
    ``window`` acks outstanding, written every 32 KiB. Returns (acked, failed)."""
    prefix = "_INBOX.rawjsi."
    conn.sub_once(prefix + "*")
    reply = prefix.encode()
    ids = (id_prefix + "-").encode()
    acks = _AckCount(conn, prefix, len(subjects), window)
    blake2b = hashlib.blake2b
    for i, text in enumerate(subjects):
        subject = text.encode()
        data = payloads[i]
        msg_id = ids + blake2b(subject + b"\0\0" + data, digest_size=16).hexdigest().encode()
        hdr = b"NATS/1.0\r\nNats-Msg-Id: " + msg_id + b"\r\n\r\n"
        acks.write(
            b"HPUB %b %b%d %d %d\r\n%b%b\r\n"
            % (subject, reply, i, len(hdr), len(hdr) + len(data), hdr, data)
        )
    return acks.finish()


def fast_ingest(
    conn: RawConn, subject: str, payload: bytes, n: int, flow: int, max_outstanding: int
) -> Dict[str, object]:
    """A fast-ingest batch (ADR-50) of n messages and nothing else: SUB ``<inbox>.>``, the
    first message with ``<inbox>.<flow>.fail.1.0.$FI`` and a wait for the server's first
    flow ack, then ``PUB <subject> <inbox>.<flow>.fail.<seq>.1.$FI`` frames buffered and
    written every 32 KiB; once ``flow x max_outstanding`` messages are unacked (the flow the
    server sends in its acks), the buffer is written and acks are read until there is room.
    An EOB commit (``<seq>.3.$FI``, no payload) ends it; returns the final PubAck's JSON.
    Any gap, refused message or error ends the run with RawError."""
    inbox = f"_INBOX.rawfi.{time.monotonic_ns()}"
    sid = conn.sub(inbox + ".>")
    head = b"PUB %b %b.%d.fail." % (subject.encode(), inbox.encode(), flow)
    tail = b".1.$FI %d\r\n%b\r\n" % (len(payload), payload)
    read, sendall = conn.read, conn.sock.sendall
    acked = limit = 0

    def take(msg: Optional[Msg]) -> Optional[Dict[str, object]]:
        """A flow ack moves the window (None); the final PubAck is returned."""
        nonlocal acked, limit
        if msg is None:
            return None
        if msg[2] is not None:
            raise RawError(f"a status on the batch's inbox: {msg[2][:40]!r}")
        body = json.loads(msg[3])
        if body.get("type") == "ack":
            acked = max(acked, body["seq"])
            limit = acked + body["msgs"] * max_outstanding
            return None
        if "type" in body or "error" in body:
            raise RawError(f"the batch stopped: {msg[3][:200]!r}")
        return dict(body)

    sendall(
        b"PUB %b %b.%d.fail.1.0.$FI %d\r\n%b\r\n"
        % (subject.encode(), inbox.encode(), flow, len(payload), payload)
    )
    while not limit:
        if take(read()) is not None:
            raise RawError("the batch ended at its first message")
    out = bytearray()
    for seq in range(2, n + 1):
        out += head + b"%d" % seq + tail
        if seq >= limit or len(out) >= WRITE_CHUNK:
            sendall(out)
            out.clear()
            while seq >= limit:
                if take(read()) is not None:
                    raise RawError(f"the batch ended at message {seq}")
    sendall(bytes(out) + head + b"%d.3.$FI 0\r\n\r\n" % (n + 1))
    while True:
        final = take(read())
        if final is not None:
            sendall(f"UNSUB {sid}\r\n".encode())
            return final


def range_read(conn: RawConn, stream: str, consumer: str, n: int, batch: int) -> int:
    """What the Spark source does for a range, and nothing else: an ack-none consumer
    (made by the caller) pulled ``batch`` at a time with two pulls out, every delivery kept
    as it is parsed (subject, reply, payload) until ``n`` came. Returns how many came."""
    inbox = "_INBOX.rawrange"
    conn.sub_once(inbox)
    read, sendall = conn.read, conn.sock.sendall
    api = f"PUB $JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer} {inbox} ".encode()

    def pull(want: int) -> bytes:
        body = b'{"batch":%d,"expires":30000000000}' % want
        return api + b"%d\r\n" % len(body) + body + b"\r\n"

    asked = min(n, 2 * batch)
    sendall(pull(min(batch, n)) + (pull(asked - batch) if asked > batch else b""))
    kept: List[Tuple[bytes, bytes, bytes]] = []
    keep = kept.append
    since = 0
    while len(kept) < n:
        msg = read()
        if msg is None or (msg[2] is not None and msg[2].startswith(b"NATS/1.0 ")):
            continue  # a PONG, a status
        keep((msg[0], msg[1], msg[3]))
        since += 1
        if since == batch and asked < n:  # a pull used up: the next one
            since = 0
            want = min(batch, n - asked)
            asked += want
            sendall(pull(want))
    return len(kept)


# --- JetStream pull -----------------------------------------------------------------------

PULL_INBOX = "_INBOX.rawpull"


def fetch_loop(
    conn: RawConn,
    stream: str,
    consumer: str,
    batch: int,
    n: int,
    expires: float = 4.5,
    deadline: float = float("inf"),
) -> Tuple[int, int, int, int]:
    """Pull ``batch`` at a time until n messages came, acking every one: the acks of a batch
    go out in the same write as the next pull request (the last ones with the final PING).
    A status message (404, 408, 409) ends a pull early. Returns (received, acked, pulls,
    pulls that ended on a status)."""
    inbox = PULL_INBOX
    conn.sub_once(inbox)
    read, sendall = conn.read, conn.sock.sendall
    api = f"PUB $JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer} {inbox} ".encode()
    expires_ns = int(expires * 1e9)
    acks: List[bytes] = []
    received = acked = pulls = short = 0
    while received < n and time.perf_counter() < deadline:
        want = min(batch, n - received)
        body = b'{"batch":%d,"expires":%d}' % (want, expires_ns)
        acks.append(api + str(len(body)).encode() + b"\r\n" + body + b"\r\n")
        sendall(b"".join(acks))
        acks.clear()
        pulls += 1
        got = 0
        while got < want:
            msg = read()
            if msg is None:
                continue
            if msg[2] is not None and msg[2].startswith(b"NATS/1.0 "):  # a status
                short += 1
                break
            got += 1
            acks.append(b"PUB " + msg[1] + b" 4\r\n+ACK\r\n")
        received += got
        acked += got
    conn.flush(b"".join(acks))
    return received, acked, pulls, short


def consume_loop(
    conn: RawConn,
    stream: str,
    consumer: str,
    max_messages: int,
    n: int,
    deadline: float = float("inf"),
    expires: float = 30.0,
) -> Tuple[int, int, int, int]:
    """What ``consumer.consume(cb, max_messages=M)`` does, with an inline "callback" that
    counts and acks: one pull for M with an expiry and idle heartbeats; once half of what
    was asked for has come, the acks so far and a pull for the difference go out in one
    write. A status other than a heartbeat ends what the pulls could bring: pull M afresh.
    The last acks go out with the final PING. Returns (received, acked, pulls, statuses
    that ended a pull)."""
    inbox = PULL_INBOX
    conn.sub_once(inbox)
    read, sendall = conn.read, conn.sock.sendall
    api = f"PUB $JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer} {inbox} ".encode()
    timing = b',"expires":%d,"idle_heartbeat":%d}' % (
        int(expires * 1e9),
        int(min(expires / 2, 30.0) * 1e9),
    )

    def pull(want: int) -> bytes:
        body = b'{"batch":%d' % want + timing
        return api + b"%d\r\n" % len(body) + body + b"\r\n"

    threshold = max(1, max_messages // 2)
    sendall(pull(max_messages))
    pending, pulls, short, received = max_messages, 1, 0, 0
    acks: List[bytes] = []
    while received < n:
        msg = read()
        if msg is None:
            continue
        if msg[2] is not None and msg[2].startswith(b"NATS/1.0 "):  # a status
            if msg[2].startswith(b"NATS/1.0 100"):
                continue  # an idle heartbeat
            short += 1
            pending = 0
        else:
            received += 1
            acks.append(b"PUB " + msg[1] + b" 4\r\n+ACK\r\n")
            pending -= 1
            if not received & 0xFFF and time.perf_counter() > deadline:
                break
        if pending <= threshold and received < n:
            acks.append(pull(max_messages - pending))
            sendall(b"".join(acks))
            acks.clear()
            pending = max_messages
            pulls += 1
    conn.flush(b"".join(acks))
    return received, received, pulls, short


# --- JetStream push -----------------------------------------------------------------------


def push_loop(
    conn: RawConn,
    subject: str,
    n: int,
    idle_heartbeat: float,
    deadline: float = float("inf"),
) -> Tuple[str, str, int, int]:
    """What ``js.subscribe(subject, flow_control=True, idle_heartbeat=...)`` with ack policy
    none does, then read n messages: look the stream up by subject, SUB a deliver subject,
    create the ephemeral consumer, and read, answering flow control (status 100 with a reply
    subject) and stall headers with an empty PUB. Returns (stream, consumer, messages read,
    flow control replies sent)."""
    names = json.loads(
        conn.request("$JS.API.STREAM.NAMES", json.dumps({"subject": subject}).encode())
    )
    if not names.get("streams"):
        raise RawError(f"no stream for {subject}: {names}")
    stream = names["streams"][0]
    deliver = "_INBOX.rawpush"
    conn.sub(deliver)
    config = {
        "stream_name": stream,
        "config": {
            "deliver_subject": deliver,
            "deliver_policy": "all",
            "ack_policy": "none",
            "filter_subject": subject,
            "flow_control": True,
            "idle_heartbeat": int(idle_heartbeat * 1e9),
        },
    }
    created = json.loads(
        conn.request(f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps(config).encode())
    )
    if "error" in created:
        raise RawError(f"consumer create failed: {created['error']}")
    read, sendall = conn.read, conn.sock.sendall
    received = replies = 0
    try:
        while received < n:
            msg = read()
            if msg is None:
                continue
            headers = msg[2]
            if headers is not None and headers.startswith(b"NATS/1.0 100"):
                if msg[1]:  # flow control: answer on its reply subject
                    sendall(b"PUB " + msg[1] + b" 0\r\n\r\n")
                    replies += 1
                else:
                    at = headers.find(b"Nats-Consumer-Stalled:")
                    if at >= 0:  # a heartbeat naming a flow control reply we missed
                        stalled = headers[at + 22 :].split(b"\r\n", 1)[0].strip()
                        sendall(b"PUB " + stalled + b" 0\r\n\r\n")
                        replies += 1
                    elif time.perf_counter() > deadline:
                        # Heartbeats keep the socket busy, so no read times out: without
                        # this a delivery that stopped for good would never end the loop.
                        break
                continue
            received += 1
            if not received & 0xFFF and time.perf_counter() > deadline:
                break
    except (socket.timeout, RawError):
        pass
    return stream, created["name"], received, replies


def drain_extra(conn: RawConn, wait: float) -> int:
    """Messages (not status frames) that arrive within ``wait`` seconds."""
    conn.sock.settimeout(wait)
    extra = 0
    try:
        while True:
            msg = conn.read()
            if msg is not None and not (msg[2] or b"").startswith(b"NATS/1.0 100"):
                extra += 1
    except (socket.timeout, RawError):
        pass
    finally:
        conn.sock.settimeout(SOCKET_TIMEOUT)
    return extra
