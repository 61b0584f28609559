// nats.js 3.4.0's fast-ingest batches (ADR-50, startFastIngest) as a peer for the
// jetstream_sync fast-ingest interop tests.
//
// Usage:
//   node fast_ingest_peer.mjs <server-url> publish <subject> <n> last|end
//     a fast-ingest batch of n messages on <subject>, payload "<i>" for i = 0..n-1 (the
//     first starts the batch); "last" commits with message n-1 stored by last(), "end" adds
//     it too and commits with end() (EOB). Prints {"batch": ..., "ack": <the final PubAck>}.
//   node fast_ingest_peer.mjs <server-url> read <stream> <n>
//     reads the first n messages of <stream> with an ordered consumer and prints
//     {"data": [payloads as strings], "seqs": [stream sequences]}.

import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { startFastIngest } from "@nats-io/jetstream/internal";

const [url, mode, target, count, commit] = process.argv.slice(2);
const n = Number(count);
if (!url || !target || !(n > 0) || !["publish", "read"].includes(mode)) {
  process.stderr.write("usage: node fast_ingest_peer.mjs <url> publish|read <subject|stream> <n> [last|end]\n");
  process.exit(2);
}

const nc = await connect({ servers: url, name: "natsjs-fast-ingest-peer" });

if (mode === "publish") {
  const fi = await startFastIngest(nc, target, "0", { allowGaps: false, ackInterval: 10 });
  const adds = commit === "last" ? n - 1 : n;
  for (let i = 1; i < adds; i++) {
    await fi.add(target, String(i));
  }
  const ack = commit === "last" ? await fi.last(target, String(n - 1)) : await fi.end();
  process.stdout.write(JSON.stringify({ batch: fi.batch, ack }) + "\n");
} else {
  const consumer = await jetstream(nc).consumers.get(target);
  const data = [];
  const seqs = [];
  const messages = await consumer.consume();
  for await (const m of messages) {
    data.push(m.string());
    seqs.push(m.seq);
    if (data.length === n) break;
  }
  process.stdout.write(JSON.stringify({ data, seqs }) + "\n");
}
await nc.close();
