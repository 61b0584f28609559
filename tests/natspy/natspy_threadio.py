"""``asyncio`` as nats-py's tests use it, made of threads: what a ported test calls ``asyncio``.

The port (:mod:`natspy_port`) deletes ``async`` and ``await``; what awaiting *meant* has to
live somewhere, and it lives here:

* awaiting a future waits for its result (:func:`await_`, which the port puts where ``await``
  stood: on anything that is not a future it hands the value back unchanged, so deleting
  ``await`` before a plain call is exactly what it does);
* a coroutine handed to ``create_task``, ``ensure_future``, ``gather`` or ``wait_for`` would
  have run concurrently: the port hands over a ``lambda`` instead, which runs on a thread of
  its own (``wait_for`` gives up after its timeout with ``TimeoutError``, as asyncio's does);
* ``sleep`` sleeps, ``Future`` is a thread-safe future, ``start_server`` is a listening socket
  whose connections are served on threads, ``all_tasks`` counts live threads (the client's
  own threads are what stands for nats-py's tasks), ``run_in_executor`` runs on a thread.

Everything a test starts here is stopped by :func:`close_all` when the test ends.
"""

from __future__ import annotations

import builtins
import concurrent.futures
import queue
import socket
import threading
import time
from typing import Any, Callable, List, Optional, Set

TimeoutError = builtins.TimeoutError


class CancelledError(BaseException):
    """A task or future was cancelled (asyncio's is a BaseException too)."""


class InvalidStateError(Exception):
    """A future's result was set twice."""


_UNSET: Any = object()


class Future:
    """``asyncio.Future`` for threads: set from any thread, waited on by :func:`await_`."""

    def __init__(self, *, loop: Any = None) -> None:
        self._done = threading.Event()
        self._result: Any = _UNSET
        self._exception: Optional[BaseException] = None
        self._cancelled = False
        self._callbacks: List[Callable[[Future], Any]] = []
        self._lock = threading.Lock()

    def _finish(self) -> None:
        self._done.set()
        for cb in self._callbacks:
            cb(self)

    def set_result(self, result: Any) -> None:
        with self._lock:
            if self._done.is_set():
                raise InvalidStateError("the future is already done")
            self._result = result
        self._finish()

    def set_exception(self, exc: BaseException) -> None:
        with self._lock:
            if self._done.is_set():
                raise InvalidStateError("the future is already done")
            self._exception = exc() if isinstance(exc, type) else exc
        self._finish()

    def cancel(self, msg: Any = None) -> bool:
        with self._lock:
            if self._done.is_set():
                return False
            self._cancelled = True
            self._exception = CancelledError()
        self._finish()
        return True

    def cancelled(self) -> bool:
        return self._cancelled

    def done(self) -> bool:
        return self._done.is_set()

    def add_done_callback(self, cb: Callable[[Future], Any], **_: Any) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(cb)
                return
        cb(self)

    def exception(self) -> Optional[BaseException]:
        if not self._done.is_set():
            raise InvalidStateError("the future is not done")
        return None if self._cancelled else self._exception

    def result(self, timeout: Optional[float] = None) -> Any:
        if not self._done.wait(timeout):
            raise TimeoutError(f"no result within {timeout} s")
        if self._exception is not None:
            raise self._exception
        return self._result


class _Threads:
    """Daemon threads for tasks, each task on a thread of its own as if it had started one,
    but a thread whose task is done waits for the next instead of ending. A test that makes
    10,240 tasks inside ``wait_for(..., 5)`` (nats-py's test_ordered_consumer_larger_streams)
    spent about 1 s of an idle machine starting threads, and more than its 5 s when the
    parallel suite's other workers load the machine.

    Every task gets a thread: one is started unless an idle one is counted, and a counted
    idle thread is already on its way to take the next task, so no task ever waits for
    another to end (as with a thread per task)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = 0
        self._work: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def run(self, fn: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._work.put(fn)
        if start:
            threading.Thread(target=self._serve, name="ported-task", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self._work.get()()
            with self._lock:
                self._idle += 1


_THREADS = _Threads()


class Task(Future):
    """A coroutine running concurrently: here, the port's ``lambda`` on a thread of its own
    (one of :class:`_Threads`)."""

    def __init__(self, fn: Callable[[], Any], name: str = "ported-task") -> None:
        super().__init__()
        self._name = name
        _TASKS.add(self)
        _THREADS.run(lambda: self._run(fn))

    def _run(self, fn: Callable[[], Any]) -> None:
        threading.current_thread().name = self._name
        try:
            value = fn()
            if _is_future(value):  # create_task(asyncio.wait_for(...)) and the like
                value = value.result()
        except BaseException as exc:
            if not self.done():
                self.set_exception(exc)
        else:
            if not self.done():
                self.set_result(value)
        finally:
            _TASKS.discard(self)

    def cancel(self, msg: Any = None) -> bool:
        # A thread cannot be stopped from outside; the task is marked cancelled and its
        # thread finishes on its own (it is a daemon, and the test's server goes away).
        return super().cancel(msg)


_TASKS: Set[Task] = set()
_SERVERS: List[_Server] = []


def _is_future(value: Any) -> bool:
    return isinstance(value, (Future, concurrent.futures.Future))


def await_(value: Any) -> Any:
    """What ``await value`` means on threads: a future's result; anything else as it is."""
    if _is_future(value):
        return value.result()
    return value


def sleep(delay: float, result: Any = None) -> Any:
    time.sleep(delay)
    return result


def create_task(work: Any, *, name: Optional[str] = None, **_: Any) -> Future:
    if callable(work) and not _is_future(work):
        return Task(work, name or "ported-task")
    done = Future()
    done.set_result(work)
    return done


ensure_future = create_task


def gather(*work: Any, return_exceptions: bool = False) -> Any:
    """Run the lambdas side by side, then wait for everything in order."""
    started = [create_task(w) if callable(w) and not _is_future(w) else w for w in work]
    results: List[Any] = []
    for item in started:
        try:
            results.append(await_(item))
        except Exception as exc:
            if not return_exceptions:
                raise
            results.append(exc)
    return results


def wait_for(work: Any, timeout: Optional[float]) -> Any:
    """Wait at most ``timeout`` seconds for the work, as asyncio.wait_for does."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if callable(work) and not _is_future(work):
        work = Task(work, "ported-wait_for")
    if not _is_future(work):
        return work
    try:
        value = work.result(timeout=timeout)
    except (TimeoutError, concurrent.futures.TimeoutError):
        if work.done():  # the work itself raised a timeout: that is its result
            raise
        work.cancel()
        raise TimeoutError(f"wait_for: not done within {timeout} s") from None
    if _is_future(value):
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return wait_for(value, left)
    return value


def all_tasks(loop: Any = None) -> Set[Any]:
    """The live threads: what stands here for nats-py's tasks."""
    return set(threading.enumerate())


class _Loop:
    """The parts of an event loop nats-py's tests touch."""

    def run_in_executor(self, executor: Any, fn: Callable[..., Any], *args: Any) -> Future:
        return Task(lambda: fn(*args), "ported-executor")

    def create_future(self) -> Future:
        return Future()

    def time(self) -> float:
        return time.monotonic()

    def create_task(self, work: Any) -> Future:
        return create_task(work)


_LOOP = _Loop()


def get_running_loop() -> _Loop:
    return _LOOP


get_event_loop = get_running_loop


def new_event_loop() -> _Loop:
    return _LOOP


def set_event_loop(loop: Any) -> None:
    pass


class _Reader:
    def __init__(self, conn: socket.socket) -> None:
        self._file = conn.makefile("rb")

    def readline(self) -> bytes:
        try:
            return self._file.readline()
        except OSError:
            return b""

    def read(self, n: int = -1) -> bytes:
        try:
            return self._file.read1(n) if n > 0 else self._file.read()
        except OSError:
            return b""


class _Writer:
    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn

    def write(self, data: bytes) -> None:
        try:
            self._conn.sendall(data)
        except OSError:
            pass

    def drain(self) -> None:
        pass

    def close(self) -> None:
        try:
            self._conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._conn.close()

    def wait_closed(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._conn.getpeername() if name == "peername" else default


class _Server:
    """``asyncio.start_server``: each connection handled on a thread of its own."""

    def __init__(self, handler: Callable[[_Reader, _Writer], Any], host: str, port: int):
        self._handler = handler
        self._sock = socket.create_server((host, port), reuse_port=False)
        self._closed = False
        self._conns: List[socket.socket] = []
        threading.Thread(target=self._accept, name="ported-server", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(
                target=self._serve, args=(conn,), name="ported-server-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._handler(_Reader(conn), _Writer(conn))
        except Exception:
            pass

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        for conn in self._conns:
            try:
                conn.close()
            except OSError:
                pass

    def wait_closed(self) -> None:
        pass

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start_server(handler: Callable[..., Any], host: str, port: int, **_: Any) -> _Server:
    server = _Server(handler, host, port)
    _SERVERS.append(server)
    return server


def close_all() -> None:
    """The end of a test: its listening sockets closed (its task threads are daemons)."""
    while _SERVERS:
        _SERVERS.pop().close()
    for task in list(_TASKS):
        task.cancel()


def run(work: Any) -> Any:
    return await_(work() if callable(work) else work)
