"""The other side of the interop tests: peer processes that speak JSON lines.

``NodePeer`` drives ``peer.mjs`` (nats.js) by commands on its stdin; ``SyncPeer`` runs
``sync_peer.py`` (our client in a process of its own, so that a test can kill it). Both print
one JSON object per line; a reader thread keeps what they print, and every wait on it has a
deadline, so a peer that hangs or dies fails the test with its stderr instead of hanging it.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

HERE = Path(__file__).resolve().parent


class PeerError(AssertionError):
    """The peer answered a command with an error, died, or did not answer in time."""


class JsonLinesProcess:
    """A child process whose stdout is JSON lines: answers (with an ``id``) and events."""

    def __init__(self, argv: List[str], name: str, stderr_path: Path) -> None:
        self.name = name
        self._stderr_path = stderr_path
        self._stderr = stderr_path.open("wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )
        self._cond = threading.Condition()
        self._answers: Dict[int, Dict[str, Any]] = {}
        self.events: List[Dict[str, Any]] = []
        self._eof = False
        self._reader = threading.Thread(target=self._read, name=f"{name}-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:  # stray output is kept as an event, to show in a failure
                obj = {"event": "garbage", "line": line}
            with self._cond:
                if "id" in obj:
                    self._answers[obj["id"]] = obj
                else:
                    self.events.append(obj)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_ready(self, what: str) -> Dict[str, Any]:
        """The peer's ready event; a peer that never gets there is ended, not leaked."""
        try:
            ready: List[Dict[str, Any]] = self.wait_for(
                lambda evs: [e for e in evs if e.get("event") == "ready"], 30, what
            )
        except BaseException:
            self.proc.kill()
            self.close()
            raise
        return ready[0]

    def stderr_tail(self) -> str:
        self._stderr.flush()
        text = self._stderr_path.read_text(errors="replace")
        return text[-3000:]

    def _fail(self, what: str) -> PeerError:
        return PeerError(
            f"{self.name}: {what} (exit code {self.proc.poll()}); stderr:\n{self.stderr_tail()}"
        )

    def wait_for(
        self, predicate: Callable[[List[Dict[str, Any]]], Any], timeout: float, what: str
    ) -> Any:
        """Wait until ``predicate(events)`` is truthy; return its value."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self.events)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._fail(f"timed out after {timeout} s waiting for {what}")
                if self._eof:
                    raise self._fail(f"exited while waiting for {what}")
                self._cond.wait(left)

    def _answer(self, ident: int, timeout: float) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while ident not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.name}: no answer to command {ident} in {timeout} s")
                if self._eof:
                    raise self._fail(f"exited before answering command {ident}")
                self._cond.wait(left)
            return self._answers.pop(ident)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to tell the server anything."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # the peers leave when their stdin ends
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        self._stderr.close()


class NodePeer(JsonLinesProcess):
    """nats.js, commanded by JSON lines (see peer.mjs for the commands)."""

    def __init__(self, node: str, url: str, stderr_path: Path) -> None:
        super().__init__([node, str(HERE / "peer.mjs"), url], "nats.js", stderr_path)
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        ready = self.wait_ready("nats.js to connect")
        self.server_version: str = ready.get("server_version", "")

    def send(self, op: str, **params: Any) -> int:
        """Start a command; its answer is fetched later with ``result``."""
        ident = next(self._ids)
        line = json.dumps({"id": ident, "op": op, **params}) + "\n"
        with self._send_lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        return ident

    def result(self, ident: int, timeout: float = 30.0) -> Dict[str, Any]:
        answer = self._answer(ident, timeout)
        if not answer.get("ok"):
            raise PeerError(f"nats.js refused command {ident}: {answer.get('error')}")
        return answer

    def answered(self, ident: int) -> bool:
        with self._cond:
            return ident in self._answers

    def call(self, op: str, timeout: float = 30.0, **params: Any) -> Dict[str, Any]:
        return self.result(self.send(op, **params), timeout)

    def publish(self, messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Each message: subject, data (bytes), optional headers {key: [values]}, msg_id."""
        wire = [{**m, "data": b64(m.get("data", b""))} for m in messages]
        acks: List[Dict[str, Any]] = self.call("publish", messages=wire)["acks"]
        return acks

    def fetch(self, stream: str, consumer: str, timeout: float = 30.0, **kw: Any) -> List[Msg]:
        """One nats.js fetch (``opts``: its pull options; ``action`` on each message)."""
        answer = self.call("fetch", timeout, stream=stream, consumer=consumer, **kw)
        return [Msg(m) for m in answer["msgs"]]

    def consumed(self, tag: str) -> List[Msg]:
        """What the consume tagged ``tag`` has received (and acked) so far."""
        with self._cond:
            events = [e for e in self.events if e.get("event") == "msg" and e["tag"] == tag]
        return [Msg(e["msg"]) for e in events]

    def pins(self, tag: str) -> List[str]:
        with self._cond:
            return [e["pin"] for e in self.events if e.get("event") == "pinned" and e["tag"] == tag]


class SyncPeer(JsonLinesProcess):
    """Our client in a process of its own, consuming a priority-group consumer (sync_peer.py)."""

    def __init__(self, url: str, stream: str, consumer: str, group: str, stderr_path: Path) -> None:
        argv = [sys.executable, str(HERE / "sync_peer.py"), url, stream, consumer, group]
        super().__init__(argv, "jetstream_sync peer", stderr_path)
        self.wait_ready("our peer to start")

    def consumed(self, tag: str = "") -> List[Msg]:
        with self._cond:
            return [Msg(e["msg"]) for e in self.events if e.get("event") == "msg"]

    def pins(self, tag: str = "") -> List[str]:
        with self._cond:
            return [e["pin"] for e in self.events if e.get("event") == "pinned"]


class Msg:
    """A message as a peer described it: the same fields whichever client received it."""

    def __init__(self, d: Dict[str, Any]) -> None:
        self.subject: str = d["subject"]
        self.data: bytes = base64.b64decode(d["data"])
        self.headers: Dict[str, List[str]] = d["headers"]
        self.seq: int = d["seq"]
        self.dseq: int = d["dseq"]
        self.delivered: int = d["delivered"]
        self.pending: int = d["pending"]
        self.stream: str = d["stream"]
        self.consumer: str = d["consumer"]

    def __repr__(self) -> str:
        return f"Msg({self.subject!r}, seq={self.seq}, dseq={self.dseq}, n={self.delivered})"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def describe(msg: Any) -> Dict[str, Any]:
    """Our message in the peers' JSON form (sync_peer.py prints these)."""
    md = msg.metadata
    headers: Dict[str, List[str]] = {}
    if msg.headers:
        for key in msg.headers:
            headers[key] = list(msg.headers.get_all(key))
    return {
        "subject": msg.subject,
        "data": b64(msg.data),
        "headers": headers,
        "seq": md.sequence.stream,
        "dseq": md.sequence.consumer,
        "delivered": md.num_delivered,
        "pending": md.num_pending,
        "stream": md.stream,
        "consumer": md.consumer,
    }


def ns(seconds: float) -> int:
    """A duration for a consumer config sent through nats.js (the server's nanoseconds)."""
    return int(seconds * 1_000_000_000)


def version_tuple(version: str) -> tuple[int, ...]:
    core = version.lstrip("v").split("-")[0]
    return tuple(int(p) for p in core.split(".") if p.isdigit())


def generated(i: int, size: int) -> bytes:
    """The payload peer.mjs's publish_generated gives message ``i``."""
    unit = f"{i:06d}|"
    return (unit * (size // len(unit) + 1))[:size].encode()
