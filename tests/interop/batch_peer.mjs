// nats.js's atomic batch publish (ADR-50: js.startBatch, @nats-io/jetstream 3.4.0) as a peer
// for the jetstream_sync batch interop tests.
//
// Usage:
//   node batch_peer.mjs <server-url> publish <subject-prefix> <count>
//     startBatch on <prefix>.first, then <count>-2 add()s on <prefix>.n<i> (the 3rd one
//     waits for the server's answer: ack: true), then commit on <prefix>.last. Every message
//     has the header Peer: natsjs and Index: <i> (1-based), payload "natsjs <i>". Prints
//     {"batch": <its Nats-Batch-Id>, "ack": <the commit's PubAck>}.
//   node batch_peer.mjs <server-url> read <stream>
//     reads every message the stream has, by sequence (STREAM.MSG.GET), and prints
//     {"messages": [{seq, subject, data (base64), headers: {name: [values]}}]}.

import { connect, headers } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";

const [url, mode, arg, count] = process.argv.slice(2);
if (!url || !mode || !arg) {
  process.stderr.write("usage: node batch_peer.mjs <url> publish <prefix> <count> | read <stream>\n");
  process.exit(2);
}

const nc = await connect({ servers: url, name: "natsjs-batch-peer" });

function labelled(i) {
  const h = headers();
  h.set("Peer", "natsjs");
  h.set("Index", String(i));
  return h;
}

if (mode === "publish") {
  const n = Number(count);
  const js = jetstream(nc);
  const batch = await js.startBatch(`${arg}.first`, `natsjs 1`, { headers: labelled(1) });
  for (let i = 2; i < n; i++) {
    const opts = { headers: labelled(i), ack: i === 3 };
    const sent = batch.add(`${arg}.n${i}`, `natsjs ${i}`, opts);
    if (opts.ack) await sent;
  }
  const ack = await batch.commit(`${arg}.last`, `natsjs ${n}`, { headers: labelled(n) });
  process.stdout.write(JSON.stringify({ batch: batch.id, ack }) + "\n");
} else if (mode === "read") {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(arg);
  const messages = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(arg, { seq });
    const hdrs = {};
    if (m.header) {
      for (const [k, v] of m.header) hdrs[k] = v;
    }
    messages.push({
      seq: m.seq,
      subject: m.subject,
      data: Buffer.from(m.data).toString("base64"),
      headers: hdrs,
    });
  }
  process.stdout.write(JSON.stringify({ messages }) + "\n");
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
await nc.close();
