"""examples/flask_app.py under load: Flask's threaded server (werkzeug's make_server, in this
process), 50 concurrent clients, one shared connection and JetStream context. Every publish
must reach the stream and every Key-Value read must see the value its request wrote."""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Set

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSServer

flask = pytest.importorskip("flask", reason="Flask is not installed: install the test extra")
serving = pytest.importorskip("werkzeug.serving")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "flask_app.py"
REQUESTS = 50


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("flask_app_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def call(method: str, url: str, body: bytes = b"") -> Dict[str, Any]:
    req = urllib.request.Request(url, data=body if method != "GET" else None, method=method)
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200
        return json.loads(resp.read())  # type: ignore[no-any-return]


def test_fifty_concurrent_requests_share_one_connection(nats_server: NATSServer) -> None:
    app_module = load_example()
    with nats.connect(nats_server.url, name="flask-test") as nc:
        app = app_module.create_app(nc, stream="WEB_TEST", bucket="web_test")
        threads: Set[int] = set()
        app.before_request(lambda: threads.add(threading.get_ident()))
        server = serving.make_server("127.0.0.1", 0, app, threaded=True)
        serve = threading.Thread(target=server.serve_forever, daemon=True)
        serve.start()
        base = f"http://127.0.0.1:{server.server_port}"
        try:

            def one(i: int) -> Dict[str, Any]:
                ack = call("POST", f"{base}/orders/{i}", f"order {i}".encode())
                put = call("PUT", f"{base}/settings/key{i}", f"value {i}".encode())
                got = call("GET", f"{base}/settings/key{i}")
                return {"ack": ack, "put": put, "got": got}

            with cf.ThreadPoolExecutor(max_workers=REQUESTS) as pool:
                results = list(pool.map(one, range(REQUESTS)))
            # A setting nobody wrote is a 404 naming the key, not a 500.
            with pytest.raises(urllib.error.HTTPError) as missing:
                call("GET", f"{base}/settings/never-written")
            assert missing.value.code == 404
            assert json.loads(missing.value.read())["error"] == "no such setting"
        finally:
            server.shutdown()
            serve.join(10)

        # Every KV read saw the value its own request wrote, at the revision the put gave.
        for i, r in enumerate(results):
            assert r["got"] == {
                "key": f"key{i}",
                "value": f"value {i}",
                "revision": r["put"]["revision"],
            }
        # Every publish was acked once, at a sequence of its own, and is in the stream.
        assert sorted(r["ack"]["seq"] for r in results) == list(range(1, REQUESTS + 1))
        assert len(threads) > 1, "the requests did not run on several threads"
        js = nc.jetstream()
        assert js.stream_info("WEB_TEST").state.messages == REQUESTS
        psub = js.pull_subscribe("web_test.>", stream="WEB_TEST")
        got: Set[bytes] = set()
        while len(got) < REQUESTS:
            batch = psub.fetch(REQUESTS, timeout=5.0)
            got.update(m.data for m in batch)
        assert got == {f"order {i}".encode() for i in range(REQUESTS)}
        js.delete_stream("WEB_TEST")
        js.delete_stream("KV_web_test")
