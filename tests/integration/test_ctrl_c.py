"""Ctrl-C ends a blocking call before its timeout, whichever of the client's threads the
kernel hands the signal to.

Python runs signal handlers in the main thread only, between bytecodes; a SIGINT that the
kernel delivers to another thread does not interrupt a system call the main thread is
blocked in. The child below blocks SIGINT in its main thread after the client's threads
have started, so the kernel must hand every SIGINT to one of them: the main thread sees it
only if its waits come back to Python now and then (seen in CI: a request sat out its
600 s timeout after a SIGINT)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name, wait_until

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import signal, sys
import jetstream_sync as nats

url, call, stream = sys.argv[1], sys.argv[2], sys.argv[3]
# Ctrl-C as in a terminal, whatever this process inherited: a shell starts background jobs
# with SIGINT ignored, and an ignored signal stays ignored across exec.
signal.signal(signal.SIGINT, signal.default_int_handler)
nc = nats.connect(url)
js = nc.jetstream(timeout=10)
silent = nc.subscribe("ctrlc.silent")  # interest, but nobody answers: no 503
js.add_stream(name=stream, subjects=[stream.lower() + ".>"])
psub = js.pull_subscribe(stream.lower() + ".>", durable="d", stream=stream)
consumer = js.consumer(stream, "d")
nc.flush()
# From here on only the client's own threads can take a SIGINT.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
print("ready", flush=True)
try:
    if call == "request":
        nc.request("ctrlc.silent", b"", timeout=600)
    elif call == "next_msg":
        silent.next_msg(timeout=None)
    elif call == "iterate":
        for _ in silent:
            pass
    elif call == "fetch":
        psub.fetch(1, timeout=600)
    elif call == "consumer_fetch":
        consumer.fetch(1, max_wait=600)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    nc.close()
    sys.exit(3)
print("returned", flush=True)
"""


def _main_thread_sleeps(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "S"


@pytest.mark.parametrize("call", ["request", "next_msg", "iterate", "fetch", "consumer_fetch"])
def test_ctrl_c_ends_a_blocking_call_when_another_thread_takes_the_signal(
    nats_server: NATSServer, call: str
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, nats_server.url, call, stream_name("CTRLC")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
        wait_until(lambda: _main_thread_sleeps(proc.pid), 10, "the call to block")
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)  # the calls' own timeouts are 600 s
        except subprocess.TimeoutExpired:
            pytest.fail(f"{call}: SIGINT did not end the call within 60 s (its timeout: 600 s)")
        assert (proc.returncode, out.strip()) == (3, "interrupted"), err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
