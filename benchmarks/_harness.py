"""What the benchmark scripts share: child processes, their results, and the machine facts.

Each measurement runs in a fresh child process of the script itself (``--child ...``), which
prints one JSON line; the parent runs children with a hard deadline and kills the whole
process group of one that hangs.
"""

from __future__ import annotations

import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Dict, List, Optional, Tuple

Run = Dict[str, Any]
RESULT_MARK = "BENCH-RESULT "  # the line a child prints its JSON result on
# syscalls.py traces a child and counts only what happens between these marks: a stat of a
# path that does not exist, which strace shows and nothing else makes.
SYSCALL_MARKS = os.environ.get("JSS_SYSCALL_MARKS") == "1"
SYSCALL_MARK = "/.jss-syscall-mark-"


# ...and, run without strace, takes each thread's context switches at the same marks
# (JSS_SWITCHES=<file>: one JSON line per timed run): a thread that blocks and is woken
# counts one voluntary switch, so these count thread wake-ups at full speed.
SWITCHES_FILE = os.environ.get("JSS_SWITCHES")
_switches_at_start: Dict[str, Tuple[int, int]] = {}


def _switches() -> Dict[str, Tuple[int, int]]:
    """(voluntary, involuntary) context switches of each thread of this process, by name."""
    import threading

    names = {t.native_id: t.name for t in threading.enumerate()}
    got: Dict[str, Tuple[int, int]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        name = names.get(int(tid), f"thread {tid}")
        got[name] = (
            int(fields["voluntary_ctxt_switches"]),
            int(fields["nonvoluntary_ctxt_switches"]),
        )
    return got


def syscall_mark(what: str) -> None:
    """Leave a mark in an strace of this process (``start`` / ``stop`` of the clock); with
    JSS_SWITCHES set, note the context switches of every thread between the two."""
    if SYSCALL_MARKS:
        try:
            os.stat(SYSCALL_MARK + what)
        except OSError:
            pass
    if SWITCHES_FILE:
        if what == "start":
            _switches_at_start.clear()
            _switches_at_start.update(_switches())
        else:
            now = _switches()
            diff = {
                name: [
                    v - _switches_at_start.get(name, (0, 0))[0],
                    nv - _switches_at_start.get(name, (0, 0))[1],
                ]
                for name, (v, nv) in now.items()
            }
            with open(SWITCHES_FILE, "a") as f:
                f.write(json.dumps(diff) + "\n")


def emit(result: Dict[str, Any]) -> None:
    """Hand a result to the parent: one marked JSON line on stdout."""
    print(RESULT_MARK + json.dumps(result), flush=True)


def parse_result(stdout: str) -> Optional[Dict[str, Any]]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            parsed: Dict[str, Any] = json.loads(line[len(RESULT_MARK) :])
            return parsed
    return None


@dataclass
class Outcome:
    runs: List[Run]
    error: Optional[str] = None
    stderr: str = ""
    seconds: float = 0.0


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL a child we started in its own session, with any helper it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


_STACKS_DUMPED = "Timeout (0:"  # how faulthandler.dump_traceback_later's report begins


def proc_cpu(pid: Optional[int]) -> Optional[float]:
    """CPU seconds (user + system) process ``pid`` has used so far (Linux), or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _server_version(binary: str) -> str:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        text = done.stdout.strip() or done.stderr.strip()
        return text.removeprefix("nats-server:").strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cores() -> str:
    total = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = total
    return f"{usable} usable of {total}" if usable != total else str(total)


def _fmt_int(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def run_child(script: str, args: List[str], timeout: float) -> Outcome:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, script, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate(timeout=10)
        reason = f"did not finish within {timeout:.0f} s; killed"
        if _STACKS_DUMPED in err:
            reason += " (hung: its thread stacks, dumped before the deadline, are below)"
        return Outcome([], reason, err, time.monotonic() - started)
    except BaseException:
        _kill_group(proc)
        proc.wait(10)
        raise
    elapsed = time.monotonic() - started
    result = parse_result(out)
    if result is None or proc.returncode != 0:
        reason = f"exit code {proc.returncode}"
        if _STACKS_DUMPED in err:
            reason += " (hung: its thread stacks, dumped before the deadline, are below)"
        return Outcome([], reason, err, elapsed)
    return Outcome(list(result["runs"]), None, err, elapsed)


# --- interleaved rounds and the raw limit (issue 21) ----------------------------------------

LIMIT_GOAL = 0.8  # issue 21: jetstream_sync should reach this share of the raw-socket limit


def median(values: List[float]) -> Optional[float]:
    """The median of the rounds (None when there is none)."""
    return statistics.median(values) if values else None


def of_limit(
    ours: Optional[float], raw: Optional[float], higher_is_better: bool = True
) -> Optional[float]:
    """jetstream_sync as a share of the raw-socket loop: ours / raw for throughput, raw /
    ours for latency. 1.0 is the limit."""
    if not ours or not raw:
        return None
    return ours / raw if higher_is_better else raw / ours


def fmt_share(x: Optional[float]) -> str:
    """A ratio truncated (not rounded) to 2 decimals: 0.799 must not show as 0.80."""
    return "n/a" if x is None else f"{math.floor(x * 100) / 100:.2f}"


def limit_mark(share: Optional[float]) -> str:
    """The issue-21 goal column: ≥ 0.8 of the raw limit or not."""
    if share is None:
        return "n/a"
    return "yes" if share >= LIMIT_GOAL else "**no**"


def run_interleaved(
    script: str,
    jobs: List[Tuple[Any, Tuple[str, ...], List[str]]],
    rounds: int,
    timeout: float,
    labels: Dict[str, str],
) -> Dict[Tuple[Any, str], Outcome]:
    """Run each job's libraries in interleaved rounds: for every job, round 1 of each
    library (ours, nats-py, raw, ...), then round 2, and so on; every round is a fresh child
    with ``--runs 1``. ``jobs`` holds (key, libraries, child arguments without --lib and
    --runs). Returns, per (key, library), the rounds' runs together."""
    results: Dict[Tuple[Any, str], Outcome] = {}
    for key, libs, args in jobs:
        for r in range(rounds):
            for lib in libs:
                name = key if isinstance(key, str) else " ".join(str(k) for k in key)
                print(
                    f"  running {name:<22} {labels[lib]:<15} round {r + 1}/{rounds}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
                outcome = run_child(script, [*args, "--lib", lib, "--runs", "1"], timeout)
                status = "ok" if outcome.error is None else f"ERROR: {outcome.error}"
                print(f" {outcome.seconds:5.1f} s  {status}", file=sys.stderr)
                merged = results.setdefault((key, lib), Outcome([]))
                merged.runs.extend(outcome.runs)
                merged.seconds += outcome.seconds
                if outcome.error is not None and merged.error is None:
                    merged.error, merged.stderr = outcome.error, outcome.stderr
    return results
