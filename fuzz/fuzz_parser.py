#!/usr/bin/env python3
"""Fuzz the sans-IO NATS protocol parser (jetstream_sync._protocol.Parser). Not run by CI.

Every input is ``[chunk mode byte][limits byte][stream bytes...]``: the stream is fed to a
fresh Parser in the chunking the first byte picks (whole, 1-byte, k-byte, pseudo-random
cuts) under the limits the second byte picks. What is checked for every input:

* only ProtocolError escapes (anything else is a crash), and a broken parser stays broken;
* every event is one of the documented kinds (Msg, Info with a dict, Err, PING/PONG/OK);
* the parser never holds more than one control line plus one payload (bounded memory);
* one input never takes longer than --hang-seconds (no infinite loop);
* differential: when the whole stream fed at once parses without error, the chunked feed
  gives exactly the same events and no error; when it fails, the chunked feed fails too.

Engines: ``atheris`` (coverage-guided libFuzzer, if ``pip install atheris`` worked) or
``mutate`` (built in: seeded corpus of valid streams, random flips/inserts/deletes/splices/
number swaps; deterministic for a --seed). ``--engine auto`` picks atheris when importable.

    python fuzz/fuzz_parser.py --inputs 1000000 --seed 1 --engine mutate
    python fuzz/fuzz_parser.py --inputs 1000000 --engine atheris
    python fuzz/fuzz_parser.py --reproduce fuzz/crashes/crash-<sha1>.bin

A failing input is written to --crash-dir (default fuzz/crashes/) as ``crash-<sha1>.bin``.
Exit status: 0 if no crash was found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

LIMITS: List[Tuple[int, int]] = [(4096, 64 * 1024 * 1024), (64, 256), (512, 4096)]
HMSG_ALLOWANCE = 65536  # Parser allows HMSG total size up to max_payload + 64 KiB


class Crash(Exception):
    """A property failed for an input (as opposed to the parser raising)."""


# --- the target ---------------------------------------------------------------------------------


def load_parser(instrument: bool = False) -> Tuple[Any, Any, Any]:
    if instrument:
        import atheris

        with atheris.instrument_imports(include=["jetstream_sync"]):
            from jetstream_sync import _protocol as proto
            from jetstream_sync.errors import ProtocolError
            from jetstream_sync.msg import Msg
    else:
        from jetstream_sync import _protocol as proto
        from jetstream_sync.errors import ProtocolError
        from jetstream_sync.msg import Msg
    return proto, ProtocolError, Msg


proto, ProtocolError, Msg = None, None, None  # set by main()


def chunks_for(mode: int, stream: bytes) -> List[bytes]:
    n = len(stream)
    kind = mode & 3
    if kind == 0 or n == 0:
        return [stream]
    if kind == 1:
        size = 1 if n <= 512 else 7  # 1-byte chunks of a long stream only cost time
    elif kind == 2:
        size = (mode >> 2) + 1
    else:
        rnd = random.Random(mode * 1_000_003 + n)
        cuts = sorted(rnd.sample(range(1, n), min(n - 1, 1 + (mode >> 3)))) if n > 1 else []
        points = [0, *cuts, n]
        return [stream[a:b] for a, b in zip(points, points[1:])]
    return [stream[i : i + size] for i in range(0, n, size)]


def describe(ev: Any) -> Tuple[Any, ...]:
    if ev.__class__ is Msg:
        return ("msg", ev.subject, ev.reply, ev.sid, ev.data, ev.header_bytes)
    if isinstance(ev, proto.Info):
        if not isinstance(ev.data, dict):
            raise Crash(f"Info with non-dict data {type(ev.data).__name__}")
        return ("info", json.dumps(ev.data, sort_keys=True, default=repr))
    if isinstance(ev, proto.Err):
        if not isinstance(ev.message, str):
            raise Crash("Err with non-str message")
        return ("err", ev.message)
    if ev is proto.PING or ev is proto.PONG or ev is proto.OK:
        return (repr(ev),)
    raise Crash(f"unknown event {ev!r}")


def feed(stream: bytes, chunks: List[bytes], limits: Tuple[int, int]) -> Tuple[list, Any]:
    max_line, max_payload = limits
    bound = max_line + max_payload + HMSG_ALLOWANCE + 8
    parser = proto.Parser(max_control_line=max_line, max_payload=max_payload)
    events: List[Tuple[Any, ...]] = []
    error = None
    for chunk in chunks:
        try:
            parser.receive_data(chunk)
            got = parser.events()
        except ProtocolError as exc:
            error = exc
            break
        events.extend(describe(ev) for ev in got)
        if parser.buffered > bound or parser.buffered > len(stream):
            raise Crash(f"buffered {parser.buffered} bytes (bound {bound}, fed {len(stream)})")
    if error is None:
        if parser.next_event() is not proto.NEED_DATA:
            raise Crash("events left after events() returned")
    else:
        if not str(error):
            raise Crash("ProtocolError with an empty message")
        try:
            parser.receive_data(b"PING\r\n")
        except ProtocolError as again:
            if again is not error:
                raise Crash("a broken parser raised a different error") from None
        else:
            raise Crash("a broken parser accepted more data")
    return events, error


def check_one(data: bytes) -> bool:
    """The whole property for one input; raises on failure. True when the input parsed
    without a ProtocolError."""
    if len(data) < 2:
        return True
    mode, lim, stream = data[0], data[1], data[2:]
    limits = LIMITS[lim % len(LIMITS)]
    whole_events, whole_error = feed(stream, [stream], limits)
    if mode & 3 == 0:
        return whole_error is None
    events, error = feed(stream, chunks_for(mode, stream), limits)
    if whole_error is None:
        if error is not None:
            raise Crash(f"chunked feed failed where the whole feed did not: {error}")
        if events != whole_events:
            raise Crash("chunked feed gave other events than the whole feed")
    elif error is None:
        raise Crash(f"whole feed failed ({whole_error}) but the chunked feed did not")
    return whole_error is None


# --- the built-in mutation engine ---------------------------------------------------------------


def seed_corpus() -> List[bytes]:
    """Valid server streams: every operation, with and without reply, headers, statuses."""
    info = {
        "server_id": "NDJWE4SOUJOJT2TY5Y2YQEOAHGAK5VIGXTGKWJSFHVCII4ITI3LBHBUV",
        "version": "2.10.18",
        "proto": 1,
        "headers": True,
        "max_payload": 1048576,
        "jetstream": True,
        "client_id": 5,
        "connect_urls": ["10.0.0.1:4222", "[::1]:4222"],
    }
    hdr = b"NATS/1.0\r\nNats-Msg-Id: abc\r\nX: 1\r\nX: 2\r\n\r\n"
    status = b"NATS/1.0 404 No Messages\r\n\r\n"
    idle = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\n\r\n"
    ack = b"$JS.ACK.ORDERS.worker.1.120.45.1700000000123456789.7"
    ack2 = b"$JS.ACK.hub.ACC.ORDERS.worker.1.2.3.1700000000123456789.0.r4nd"
    parts = [
        b"INFO " + json.dumps(info).encode() + b"\r\n",
        b"PING\r\n",
        b"PONG\r\n",
        b"+OK\r\n",
        b"-ERR 'Stale Connection'\r\n",
        b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n",
        b"MSG foo.bar 1 5\r\nhello\r\n",
        b"MSG foo 2 _INBOX.abc.1 0\r\n\r\n",
        b"MSG orders.new 9 %b 4\r\n{\r\n}\r\n" % ack,
        b"MSG a 3 6\r\n\r\nMSG \r\n",
        b"HMSG foo 1 %d %d\r\n%bhi\r\n" % (len(hdr), len(hdr) + 2, hdr),
        b"HMSG _INBOX.x.y 4 %d %d\r\n%b\r\n" % (len(status), len(status), status),
        b"HMSG orders 5 %b %d %d\r\n%bdata\r\n" % (ack2, len(hdr), len(hdr) + 4, hdr),
        b"HMSG hb 6 %d %d\r\n%b\r\n" % (len(idle), len(idle), idle),
        b"HMSG m 7 12 12\r\nNATS/1.0\r\n\r\n\r\n",
    ]
    corpus = list(parts)
    rnd = random.Random(0)
    for _ in range(40):
        corpus.append(b"".join(rnd.choice(parts) for _ in range(rnd.randint(2, 6))))
    return corpus


INTERESTING = [
    b"\r\n", b"\r", b"\n", b" ", b"\t", b"0", b"-1", b"4097", b"65536", b"99999999999999999999",
    b"MSG ", b"HMSG ", b"INFO ", b"PING", b"PONG", b"+OK", b"-ERR ", b"NATS/1.0", b"NATS/1.0\r\n",
    b"{", b"}", b"[", b"]", b'"', b"\x00", b"\xff", b"\xc3", b"$JS.ACK.", b"..", b"1_0", b"+5",
    b"[" * 2000, b"{\"a\":" * 900,
]  # fmt: skip


def _mutate_numbers(stream: bytes, rnd: random.Random) -> bytes:
    digits = [i for i, b in enumerate(stream) if 48 <= b <= 57]
    if not digits:
        return stream
    i = rnd.choice(digits)
    j = i
    while j < len(stream) and 48 <= stream[j] <= 57:
        j += 1
    value = int(stream[i:j])
    new = rnd.choice(
        [value + 1, value - 1, value * 2, 0, -value, value + 65536, 2**31, 2**64, value + 4096]
    )
    return stream[:i] + str(new).encode() + stream[j:]


def mutate(stream: bytes, corpus: List[bytes], rnd: random.Random) -> bytes:
    for _ in range(rnd.choice((1, 1, 1, 2, 3, 5))):
        n = len(stream)
        op = rnd.randrange(9)
        pos = rnd.randrange(n + 1) if n else 0
        if op == 0 and n:  # bit flip
            i = min(pos, n - 1)
            stream = stream[:i] + bytes([stream[i] ^ (1 << rnd.randrange(8))]) + stream[i + 1 :]
        elif op == 1 and n:  # byte set
            i = min(pos, n - 1)
            stream = stream[:i] + bytes([rnd.randrange(256)]) + stream[i + 1 :]
        elif op == 2:  # insert random bytes
            stream = stream[:pos] + rnd.randbytes(rnd.randint(1, 8)) + stream[pos:]
        elif op == 3 and n:  # delete a range
            stream = stream[:pos] + stream[pos + rnd.randint(1, 16) :]
        elif op == 4:  # insert a protocol token
            stream = stream[:pos] + rnd.choice(INTERESTING) + stream[pos:]
        elif op == 5:  # splice with another corpus entry
            other = rnd.choice(corpus)
            cut = rnd.randrange(len(other) + 1)
            stream = (
                stream[:pos] + other[cut:] if rnd.random() < 0.5 else other[:cut] + stream[pos:]
            )
        elif op == 6:  # change a number (sizes, sids)
            stream = _mutate_numbers(stream, rnd)
        elif op == 7 and n:  # duplicate a range
            end = min(n, pos + rnd.randint(1, 64))
            stream = stream[:end] + stream[pos:end] + stream[end:]
        elif op == 8 and n:  # truncate
            stream = stream[:pos]
    return stream


def make_input(corpus: List[bytes], rnd: random.Random) -> bytes:
    stream = mutate(rnd.choice(corpus), corpus, rnd)
    if len(stream) > 20000:
        stream = stream[:20000]
    return bytes([rnd.randrange(256), rnd.randrange(256)]) + stream


def save_crash(crash_dir: Path, data: bytes) -> Path:
    crash_dir.mkdir(parents=True, exist_ok=True)
    path = crash_dir / f"crash-{hashlib.sha1(data).hexdigest()}.bin"
    path.write_bytes(data)
    return path


def run_mutate(args: argparse.Namespace) -> int:
    rnd = random.Random(args.seed)
    corpus = seed_corpus()
    keep_max = 2000  # mutated inputs that parsed without error join the corpus (bounded)
    crashes: Dict[str, Path] = {}
    hangs = 0
    clean = 0  # inputs that parsed without a ProtocolError
    started = time.monotonic()
    last_report = started
    slowest = 0.0
    for count in range(1, args.inputs + 1):
        data = make_input(corpus, rnd)
        t0 = time.perf_counter()
        try:
            clean += check_one(data)
        except Exception as exc:
            key = f"{type(exc).__name__}: {str(exc)[:60]}"
            if key not in crashes:
                crashes[key] = save_crash(args.crash_dir, data)
                print(f"\nCRASH #{len(crashes)} at input {count}: {key}", flush=True)
                traceback.print_exc()
                print(f"reproducer: {crashes[key]}", flush=True)
        else:
            if count % 50 == 0 and len(corpus) < keep_max:
                corpus.append(data[2:])
        spent = time.perf_counter() - t0
        slowest = max(slowest, spent)
        if spent > args.hang_seconds:
            hangs += 1
            path = save_crash(args.crash_dir, data)
            print(f"\nSLOW input {count}: {spent:.2f} s; saved as {path}", flush=True)
        now = time.monotonic()
        if now - last_report >= args.report_every:
            last_report = now
            print(
                f"  {count:>10,} inputs  {count / (now - started):>9,.0f}/s  "
                f"crashes={len(crashes)} slow={hangs}",
                flush=True,
            )
    elapsed = time.monotonic() - started
    print(
        f"DONE engine=mutate seed={args.seed} inputs={args.inputs:,} time={elapsed:.1f}s "
        f"rate={args.inputs / elapsed:,.0f}/s crashes={len(crashes)} slow={hangs} "
        f"slowest={slowest * 1000:.1f}ms parsed_clean={clean:,} "
        f"protocol_errors={args.inputs - clean:,}",
        flush=True,
    )
    return 1 if crashes or hangs else 0


# --- atheris ------------------------------------------------------------------------------------


def run_atheris(args: argparse.Namespace) -> int:
    import atheris

    corpus_dir = args.corpus_dir or Path(tempfile.mkdtemp(prefix="fuzz-parser-corpus-"))
    corpus_dir.mkdir(parents=True, exist_ok=True)
    for i, stream in enumerate(seed_corpus()):
        (corpus_dir / f"seed-{i:03d}").write_bytes(bytes([i % 256, i % 3]) + stream)
    args.crash_dir.mkdir(parents=True, exist_ok=True)
    state = {"count": 0, "started": time.monotonic()}
    target = args.inputs

    def summary() -> None:
        elapsed = time.monotonic() - state["started"]
        n = state["count"]
        print(
            f"DONE engine=atheris seed={args.seed} inputs={n:,} time={elapsed:.1f}s "
            f"rate={n / max(elapsed, 1e-9):,.0f}/s crashes=0",
            flush=True,
        )

    def one(data: bytes) -> None:
        state["count"] += 1
        try:
            check_one(data)
        except BaseException:
            print(f"\nCRASH at input {state['count']}", flush=True)
            raise  # libFuzzer writes the reproducer to the artifact prefix
        if state["count"] >= target:
            summary()
            os._exit(0)  # libFuzzer's own -runs would count its corpus reads too

    argv = [
        sys.argv[0],
        str(corpus_dir),
        f"-seed={args.seed}",
        "-max_len=8192",
        f"-timeout={max(1, int(args.hang_seconds * 5))}",
        "-rss_limit_mb=2048",
        f"-artifact_prefix={args.crash_dir}/",
        "-print_final_stats=1",
    ]
    atheris.Setup(argv, one)
    atheris.Fuzz()
    return 0


# --- main ---------------------------------------------------------------------------------------


def main(argv: Optional[List[str]] = None) -> int:
    global proto, ProtocolError, Msg
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=1_000_000, help="how many inputs to run")
    ap.add_argument("--seed", type=int, default=1, help="random seed (both engines)")
    ap.add_argument("--engine", choices=("auto", "atheris", "mutate"), default="auto")
    ap.add_argument("--crash-dir", type=Path, default=HERE / "crashes")
    ap.add_argument("--corpus-dir", type=Path, help="atheris: corpus dir (default: a temp dir)")
    ap.add_argument("--hang-seconds", type=float, default=2.0, help="slower input: a hang")
    ap.add_argument("--report-every", type=float, default=10.0, help="progress line period, s")
    ap.add_argument("--reproduce", type=Path, help="run one saved input and show the failure")
    args = ap.parse_args(argv)

    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "mutate"
    proto, ProtocolError, Msg = load_parser(instrument=engine == "atheris" and not args.reproduce)

    if args.reproduce:
        data = args.reproduce.read_bytes()
        print(f"mode={data[:1]!r} limits={data[1:2]!r} stream={data[2:][:200]!r}")
        check_one(data)  # raises with the traceback on failure
        print("no failure")
        return 0
    print(f"fuzzing the parser: engine={engine} inputs={args.inputs:,} seed={args.seed}")
    return run_atheris(args) if engine == "atheris" else run_mutate(args)


if __name__ == "__main__":
    sys.exit(main())
