"""A threaded Flask app: every request handler, on whichever thread Flask's server runs it,
uses the one connection and the one JetStream context made at start-up. No event loop, no
per-request connection, no lock of the app's own.

Run: python examples/flask_app.py   (uses $NATS_URL, or starts an embedded nats-server;
$PORT, 5000 by default). Then:

    curl -X POST localhost:5000/orders/42 -d 'two pizzas'   # JetStream publish, acked
    curl -X PUT localhost:5000/settings/color -d blue       # Key-Value put
    curl localhost:5000/settings/color                      # Key-Value get

Needs Flask (``pip install flask``, or the test extra) and Key-Value.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Tuple

from flask import Flask, request

import jetstream_sync as nats
from jetstream_sync.server import url_from_env_or_embedded


def create_app(nc: nats.Client, stream: str = "WEB_ORDERS", bucket: str = "web_settings") -> Flask:
    """The app, on a connection the caller owns (and closes)."""
    js = nc.jetstream()  # one context for every thread: it is thread-safe, like the client
    js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
    kv = js.create_key_value(bucket=bucket)
    app = Flask(__name__)

    @app.post("/orders/<order_id>")
    def new_order(order_id: str) -> Dict[str, Any]:
        ack = js.publish(f"{stream.lower()}.{order_id}", request.get_data())
        return {"stream": ack.stream, "seq": ack.seq}

    @app.put("/settings/<key>")
    def put_setting(key: str) -> Dict[str, Any]:
        return {"key": key, "revision": kv.put(key, request.get_data())}

    @app.get("/settings/<key>")
    def get_setting(key: str) -> Tuple[Dict[str, Any], int]:
        try:
            entry = kv.get(key)
        except nats.KeyNotFoundError:  # never written, or deleted (KeyDeletedError)
            return {"key": key, "error": "no such setting"}, 404
        return {"key": key, "value": entry.value.decode(), "revision": entry.revision}, 200

    return app


def main() -> None:
    port = int(os.environ.get("PORT", "5000"))
    with url_from_env_or_embedded() as url, nats.connect(url, name="flask-app") as nc:
        print(f"NATS at {url}; serving on http://127.0.0.1:{port}")
        create_app(nc).run(host="127.0.0.1", port=port, threaded=True)


if __name__ == "__main__":
    main()
