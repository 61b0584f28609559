"""What the OpenTelemetry instrumentation costs per message: core publish, subscribe
(next_msg), js.publish and fetch, timed in one process per measurement.

Usage::

    python benchmarks/bench_otel.py [--rounds 5] [--n 20000]
    PYTHONPATH=<another checkout> python benchmarks/bench_otel.py --mode plain --url ...

Modes: ``plain`` (the package alone, nothing of OpenTelemetry imported), ``off`` (the
instrumentor imported, instrumented and uninstrumented again: installed, not on), ``on``
(instrumented: the SDK's TracerProvider with a BatchSpanProcessor whose exporter drops the
spans, and a MeterProvider). Without ``--mode`` it starts a server and runs every mode, and
``--baseline DIR`` (a checkout of another branch) as a fourth column, in turns (A B C A B
C ...), and prints the medians in microseconds per message.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Sequence

ROWS = ("core publish", "subscribe", "js.publish", "fetch")


def _switch_on(mode: str) -> None:
    if mode == "plain":
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from jetstream_sync.otel import JetStreamSyncInstrumentor

    class Drop(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    inst = JetStreamSyncInstrumentor()
    inst.instrument(tracer_provider=provider, meter_provider=meters)
    if mode == "off":
        inst.uninstrument()


def _measure(url: str, n: int, mode: str) -> Dict[str, float]:
    _switch_on(mode)
    import jetstream_sync

    out: Dict[str, float] = {}

    def timed(row: str, count: int, fn: Callable[[], None]) -> None:
        start = time.perf_counter()
        fn()
        out[row] = (time.perf_counter() - start) / count * 1e6

    with jetstream_sync.connect(url) as nc:
        sub = nc.subscribe("bench.otel")
        nc.flush()
        payload = b"x" * 128

        def publish() -> None:
            for _ in range(n):
                nc.publish("bench.otel.pub", payload)
            nc.flush()

        timed("core publish", n, publish)

        def subscribe() -> None:
            for _ in range(n):
                nc.publish("bench.otel", payload)
                if _ % 1000 == 999:
                    nc.flush()
            nc.flush()
            for _ in range(n):
                sub.next_msg(10)

        timed("subscribe", n, subscribe)
        js = nc.jetstream()
        stream = f"BENCHOTEL{os.getpid()}"
        js.add_stream(name=stream, subjects=[f"benchotel{os.getpid()}.>"], storage="memory")
        try:
            m = max(1, n // 10)
            subject = f"benchotel{os.getpid()}.a"

            def js_publish() -> None:
                for _ in range(m):
                    js.publish(subject, payload)

            timed("js.publish", m, js_publish)
            psub = js.pull_subscribe(subject, durable="bench")

            def fetch() -> None:
                got = 0
                while got < m:
                    msgs = psub.fetch(100, timeout=10)
                    for msg in msgs:
                        msg.ack()
                    got += len(msgs)

            timed("fetch", m, fetch)
        finally:
            js.delete_stream(stream)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mode", choices=("plain", "off", "on"))
    ap.add_argument("--url")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", help="a checkout whose package is timed as 'baseline'")
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(_measure(args.url, args.n, args.mode)))
        return
    from jetstream_sync.server import NATSServer

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    columns: Dict[str, Dict[str, Any]] = {}
    if args.baseline:
        columns["baseline"] = {"mode": "plain", "path": os.path.abspath(args.baseline)}
    columns["plain"] = {"mode": "plain", "path": here}
    columns["off"] = {"mode": "off", "path": here}
    columns["on"] = {"mode": "on", "path": here}
    results: Dict[str, Dict[str, List[float]]] = {c: {r: [] for r in ROWS} for c in columns}
    with NATSServer(jetstream=True) as srv:
        for _ in range(args.rounds):
            for name, col in columns.items():
                env = {**os.environ, "PYTHONPATH": col["path"]}
                cmd = [sys.executable, os.path.abspath(__file__), "--mode", col["mode"]]
                cmd += ["--url", srv.url, "--n", str(args.n)]
                done = subprocess.run(
                    cmd, env=env, cwd=col["path"], capture_output=True, text=True, timeout=600
                )
                if done.returncode:
                    sys.exit(f"{name} failed: {done.stderr}")
                for row, value in json.loads(done.stdout.splitlines()[-1]).items():
                    results[name][row].append(value)
    print(f"median us/msg of {args.rounds} interleaved rounds (min-max)")
    print(f"{'row':<14}" + "".join(f"{c:>22}" for c in columns))
    for row in ROWS:
        cells = []
        for c in columns:
            vals = results[c][row]
            cells.append(f"{statistics.median(vals):8.2f} ({min(vals):.2f}-{max(vals):.2f})")
        print(f"{row:<14}" + "".join(f"{cell:>22}" for cell in cells))


if __name__ == "__main__":
    main()
