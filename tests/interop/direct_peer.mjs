// nats.js 3.4.0's batch direct get (jsm.direct.getBatch / getLastMessagesFor) as a peer for
// the jetstream_sync batch direct get interop tests; and its publishes, counters included.
//
// Usage:
//   node direct_peer.mjs <server-url> read <stream> <requests-json>
//     <requests-json> is a list of {"kind": "batch" | "last", "opts": {...}}: each is asked
//     with getBatch (opts as DirectBatchOptions: seq, start_time, batch, max_bytes,
//     next_by_subj) or getLastMessagesFor (opts as DirectLastFor: multi_last, up_to_seq,
//     up_to_time, batch). Prints one JSON line: a list with, for each request, the messages
//     it got, or {"error": "..."}.
//   node direct_peer.mjs <server-url> write <requests-json>
//     <requests-json> is a list of {"subject", "data" (base64), "headers": {name: [values]}}:
//     each is published with js.publish (one at a time, acked). Prints one JSON line: the
//     acks, {"stream", "seq", "val"} ("val": a counter's new value, when the ack has one).
//
// A message is {"subject", "seq", "data" (base64), "headers": {name: [values]}, "stream"};
// its headers are the stored message's own: the coordinates a direct get adds (Nats-Stream,
// Nats-Sequence, ...) are left out, as jetstream_sync leaves them out.

import { connect, headers } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";

const [url, mode, ...args] = process.argv.slice(2);
if (!url || !mode) {
  process.stderr.write("usage: node direct_peer.mjs <url> read <stream> <json> | write <json>\n");
  process.exit(2);
}

const ADDED = new Set([
  "Nats-Stream",
  "Nats-Sequence",
  "Nats-Time-Stamp",
  "Nats-Subject",
  "Nats-Num-Pending",
  "Nats-Last-Sequence",
  "Nats-UpTo-Sequence",
]);

function describe(m) {
  const own = {};
  for (const [k, v] of m.header) {
    if (!ADDED.has(k)) own[k] = [...v];
  }
  return {
    subject: m.subject,
    seq: m.seq,
    data: Buffer.from(m.data).toString("base64"),
    headers: own,
    stream: m.stream,
  };
}

const nc = await connect({ servers: url, name: "natsjs-direct-peer" });
try {
  if (mode === "read") {
    const [stream, requests] = args;
    const jsm = await jetstreamManager(nc);
    const out = [];
    for (const { kind, opts } of JSON.parse(requests)) {
      try {
        const iter =
          kind === "batch"
            ? await jsm.direct.getBatch(stream, opts)
            : await jsm.direct.getLastMessagesFor(stream, opts);
        const msgs = [];
        for await (const m of iter) msgs.push(describe(m));
        out.push(msgs);
      } catch (err) {
        out.push({ error: String(err?.message ?? err) });
      }
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  } else if (mode === "write") {
    const js = jetstream(nc);
    const acks = [];
    for (const { subject, data, headers: hdrs } of JSON.parse(args[0])) {
      const h = headers();
      for (const [k, values] of Object.entries(hdrs ?? {})) {
        for (const v of values) h.append(k, v);
      }
      const ack = await js.publish(subject, Buffer.from(data, "base64"), { headers: h });
      acks.push({ stream: ack.stream, seq: ack.seq, val: ack.val ?? null });
    }
    process.stdout.write(JSON.stringify(acks) + "\n");
  } else {
    process.stderr.write(`unknown mode ${mode}\n`);
    process.exitCode = 2;
  }
} finally {
  await nc.close();
}
