"""System calls per message on the JetStream rows, ours against the raw loop (issue 21).

Usage::

    python benchmarks/syscalls.py                      # every row, ours and raw
    python benchmarks/syscalls.py --rows fetch100 consume --libs ours

Each figure runs one benchmark child (``bench_*.py --child ... --runs 1``) under
``strace -f`` against a server of this script's own (outside strace) and counts the system
calls of every thread of the child between the marks its clock leaves when it starts and
stops (``JSS_SYSCALL_MARKS=1``: a stat of a path that does not exist), divided by the
messages: what one message costs in writes, reads, waits and thread wake-ups (``futex``)
while the clock runs. Setup, preloading and checks are outside the marks. strace slows every
system call, so only the counts mean anything here, not the time; and it slows the client
~10x, so what is timed (the acks' 2 ms linger) happens more often per message under it. So
each child also runs once at full speed, untraced, with ``JSS_SWITCHES``: each thread's
voluntary context switches between the same marks, i.e. how often it blocked and was woken
(the "woken" column). See benchmarks/README.md, "System calls per message".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
LIBS = ("ours", "raw")

# row -> (script, child arguments, N, what the row is)
ROWS: Dict[str, Tuple[str, List[str], int, str]] = {
    "publish": (
        "bench_jetstream.py",
        ["--child", "publish", "--storage", "memory"],
        5_000,
        "`js.publish`, each ack awaited, memory storage",
    ),
    "publish_async": (
        "bench_jetstream.py",
        ["--child", "publish_async", "--storage", "memory"],
        50_000,
        "`publish_async` (window 4000), memory storage",
    ),
    "fetch1": ("bench_pull.py", ["--child", "fetch", "--batch", "1"], 5_000, "`fetch(1)` + ack"),
    "fetch100": (
        "bench_pull.py",
        ["--child", "fetch", "--batch", "100"],
        20_000,
        "`fetch(100)` + ack",
    ),
    "consume": (
        "bench_pull.py",
        ["--child", "consume", "--batch", "500"],
        20_000,
        "`consume(cb)` + ack",
    ),
    "push_cb": ("bench_push.py", ["--child", "callback"], 50_000, "push `cb=`, flow control"),
    "push_next": (
        "bench_push.py",
        ["--child", "next_msg"],
        50_000,
        "push `next_msg`, flow control",
    ),
}
GROUPS = {
    "writes": ("sendto", "sendmsg", "write", "send"),
    "reads": ("recvfrom", "recvmsg", "read", "recv"),
    "waits": ("poll", "ppoll", "epoll_wait", "epoll_pwait", "select", "pselect6"),
    "futex": ("futex",),
}
_CALL = re.compile(r"^\d+\s+([a-z_0-9]+)\(")
MARK = "/.jss-syscall-mark-"


def counts(path: str) -> Dict[str, int]:
    """Calls per system call between the last start mark and the stop mark after it."""
    got: Dict[str, int] = {}
    inside = False
    with open(path) as f:
        for line in f:
            if MARK + "start" in line:
                got, inside = {}, True  # the last start wins: the warm-up run has marks too
                continue
            if MARK + "stop" in line:
                inside = False
                continue
            m = _CALL.match(line) if inside else None
            if m:  # "<... x resumed>" lines are the second half of a call already counted
                got[m.group(1)] = got.get(m.group(1), 0) + 1
    return got


def traced(script: str, args: List[str], lib: str, n: int, url: str, out: str) -> Dict[str, int]:
    cmd = ["strace", "-f", "-o", out, sys.executable, os.path.join(HERE, script)]
    cmd += [*args, "--lib", lib, "--n", str(n), "--runs", "1", "--url", url]
    env = dict(os.environ, JSS_SYSCALL_MARKS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=HERE, env=env)
    if proc.returncode != 0 or "BENCH-RESULT" not in proc.stdout:
        tail = "\n".join(proc.stderr.splitlines()[-20:])
        raise RuntimeError(f"{script} {args} {lib} n={n} failed (rc {proc.returncode}):\n{tail}")
    return counts(out)


def woken(script: str, args: List[str], lib: str, n: int, url: str, out: str) -> Dict[str, float]:
    """Voluntary context switches per message of each thread, run at full speed (no strace):
    each is a thread that blocked and was woken."""
    cmd = [sys.executable, os.path.join(HERE, script), *args, "--lib", lib, "--n", str(n)]
    cmd += ["--runs", "1", "--url", url]
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ, JSS_SWITCHES=out)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=HERE, env=env)
    if proc.returncode != 0 or "BENCH-RESULT" not in proc.stdout:
        tail = "\n".join(proc.stderr.splitlines()[-20:])
        raise RuntimeError(f"{script} {args} {lib} n={n} failed (rc {proc.returncode}):\n{tail}")
    with open(out) as f:
        last = json.loads(f.read().splitlines()[-1])  # the timed run (warm-up runs come first)
    return {name: vn[0] / n for name, vn in last.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    ap.add_argument("--libs", nargs="+", choices=LIBS, default=list(LIBS))
    args = ap.parse_args()
    if shutil.which("strace") is None:
        sys.exit("strace not found")
    sys.path.insert(0, os.path.dirname(HERE))
    from jetstream_sync.server import NATSServer

    tmp = tempfile.mkdtemp(prefix="syscalls-")
    table: List[str] = []
    try:
        with NATSServer(jetstream=True) as srv:
            for row in args.rows:
                script, child, n, what = ROWS[row]
                for lib in args.libs:
                    got = traced(script, child, lib, n, srv.url, os.path.join(tmp, "trace"))
                    per = {k: v / n for k, v in got.items()}
                    cells = [
                        f"{sum(per.get(c, 0.0) for c in calls):.3f}" for calls in GROUPS.values()
                    ]
                    cells.append(f"{sum(per.values()):.3f}")
                    grouped = {c for calls in GROUPS.values() for c in calls}
                    rest = sorted(
                        ((v, k) for k, v in per.items() if k not in grouped), reverse=True
                    )
                    cells.append(", ".join(f"{k} {v:.3f}" for v, k in rest[:3] if v >= 0.001))
                    wake = woken(script, child, lib, n, srv.url, os.path.join(tmp, "switches"))
                    cells.append(f"{sum(wake.values()):.3f}")
                    busiest = sorted(((v, k) for k, v in wake.items()), reverse=True)
                    cells.append(", ".join(f"{k} {v:.3f}" for v, k in busiest[:3] if v >= 0.001))
                    table.append(f"| {what} | {lib} | " + " | ".join(cells) + " |")
                    print(table[-1], file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    head = " | all | most of the rest | woken (full speed) | which threads |"
    print("| row | lib | " + " | ".join(GROUPS) + head)
    print("| --- | --- |" + " ---: |" * (len(GROUPS) + 1) + " --- | ---: | --- |")
    print("\n".join(table))


if __name__ == "__main__":
    main()
