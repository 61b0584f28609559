"""Partitioned consumer group members in processes of their own (pcg_worker.py), and what
they report, for test_pcgroups_processes.py and test_pcgroups_cluster.py."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import jetstream_sync as nats
from jetstream_sync.testing import wait_until

WORKER = str(Path(__file__).with_name("pcg_worker.py"))
# The workers import the jetstream_sync of this tree, whatever the venv has installed.
ROOT = str(Path(__file__).resolve().parents[2])
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
}


class Member:
    """A member instance in a process of its own."""

    def __init__(
        self,
        url: str,
        kind: str,
        stream: str,
        group: str,
        member: str,
        wid: str,
        ack_wait: float,
        hang: int = 0,
    ) -> None:
        args = [sys.executable, WORKER, url, kind, stream, group, member, wid, str(ack_wait)]
        if hang:
            args.append(str(hang))
        self.wid = wid
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
        )
        self.lines: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def wait_ready(self) -> None:
        wait_until(lambda: "ready" in self.lines or self.proc.poll() is not None, 30, "ready")
        assert "ready" in self.lines, self.stderr()

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stderr.read()[-3000:] if self.proc.stderr else ""

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL
        self.proc.wait(10)

    def finish(self, timeout: float = 20.0) -> str:
        """The worker's last line once its consume context ended (the group deleted)."""
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(10)
        return self.lines[-1] if self.lines else self.stderr()


class Reports:
    """What the workers report, in the order the server delivered it."""

    def __init__(self, nc: nats.Client) -> None:
        self.events: List[Tuple[str, str, str, int]] = []  # (what, worker, key, n)
        self._lock = threading.Lock()
        nc.subscribe("pcg.>", cb=self._on)
        nc.flush()

    def _on(self, msg: nats.Msg) -> None:
        _, what, wid = msg.subject.split(".")
        subject, data = msg.data.decode().split(" ")
        with self._lock:
            self.events.append((what, wid, subject, int(data)))

    def count(self, what: str, wid: Optional[str] = None) -> int:
        with self._lock:
            return sum(1 for e in self.events if e[0] == what and wid in (None, e[1]))

    def check(self, keys: List[str], per_key: int) -> Dict[str, int]:
        """Every message acked exactly once; per key, the deliveries in order, a message
        delivered again only before it was acked (its ack failed or its instance died)."""
        with self._lock:
            events = list(self.events)
        got: Dict[str, List[int]] = defaultdict(list)
        acked: Dict[str, List[int]] = defaultdict(list)
        for what, wid, key, n in events:
            if what == "got":
                assert n not in acked[key], f"{key} {n} delivered again after its ack ({wid})"
                seq = got[key]
                last = seq[-1] if seq else -1
                assert n in (last, last + 1), f"{key}: {n} handled after {seq[-5:]} ({wid})"
                seq.append(n)
            elif what == "acked":
                assert n not in acked[key], f"{key} {n} acked twice"
                acked[key].append(n)
        for key in keys:
            assert acked[key] == list(range(per_key)), f"{key}: acked {acked[key]}"
        return {what: sum(1 for e in events if e[0] == what) for what in ("got", "failed", "hung")}

    def check_processed(self, keys: List[str], per_key: int) -> Dict[str, int]:
        """As check(), where an ack's outcome may be unknown (a cluster losing a leader): a
        failed ack_sync may have reached the server, so its message is not delivered again
        and never reported acked. Then: per key, deliveries in order, a message delivered
        again only while not known acked and only right after its own delivery, none acked
        twice, every message delivered (handled) at least once."""
        with self._lock:
            events = list(self.events)
        got: Dict[str, List[int]] = defaultdict(list)
        acked: Dict[str, List[int]] = defaultdict(list)
        for what, wid, key, n in events:
            if what == "got":
                assert n not in acked[key], f"{key} {n} delivered again after its ack ({wid})"
                seq = got[key]
                last = seq[-1] if seq else -1
                assert n in (last, last + 1), f"{key}: {n} handled after {seq[-5:]} ({wid})"
                seq.append(n)
            elif what == "acked":
                assert n not in acked[key], f"{key} {n} acked twice"
                acked[key].append(n)
        for key in keys:
            assert sorted(set(got[key])) == list(range(per_key)), f"{key}: got {got[key]}"
        return {what: sum(1 for e in events if e[0] == what) for what in ("got", "acked", "failed")}
