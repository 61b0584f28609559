// nats.js 3.x as an independent peer for the jetstream_sync interop tests.
//
// Usage: node peer.mjs <server-url>
//
// The peer connects, prints {"event":"ready",...} and then reads commands from stdin, one JSON
// object per line: {"id": <n>, "op": "<name>", ...parameters}. Each command runs on its own
// (a long fetch does not hold up a publish), and its answer is one JSON line on stdout with the
// same id: {"id": n, "ok": true, ...} or {"id": n, "ok": false, "error": "..."}. A running
// consume reports what it sees as events without an id: {"event": "msg" | "pinned" |
// "unpinned", "tag": ...}. Payloads travel as base64 so that any bytes can be compared.
//
// Durations in consumer configs are passed through as the server wants them (nanoseconds);
// pull options (expires) are in milliseconds, as nats.js wants them.

import { createInterface } from "node:readline";
import { connect, headers } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Objm } from "@nats-io/obj";
import { Kvm } from "@nats-io/kv";

const url = process.argv[2];
if (!url) {
  process.stderr.write("usage: node peer.mjs <server-url>\n");
  process.exit(2);
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function describe(m) {
  const hdrs = {};
  if (m.headers) {
    for (const [k, v] of m.headers) {
      hdrs[k] = [...v];
    }
  }
  const info = m.info;
  return {
    subject: m.subject,
    data: Buffer.from(m.data).toString("base64"),
    headers: hdrs,
    seq: info.streamSequence,
    dseq: info.deliverySequence,
    delivered: info.deliveryCount,
    pending: info.pending,
    redelivered: m.redelivered,
    stream: info.stream,
    consumer: info.consumer,
  };
}

// "<i zero-padded to 6>|" repeated and cut to size bytes (interop_peers.generated in Python).
function generated(i, size) {
  const unit = String(i).padStart(6, "0") + "|";
  return Buffer.from(unit.repeat(Math.ceil(size / unit.length)).slice(0, size), "ascii");
}

const nc = await connect({ servers: url, name: "natsjs-peer" });
const js = jetstream(nc);
const jsm = await jetstreamManager(nc);

// Messages a fetch was told to hold, by stream sequence, for a later "act" command.
const held = new Map();
// Running consumes, by tag.
const consumes = new Map();

async function act(m, action, reason) {
  switch (action) {
    case "ack":
      // ackAck: the answer goes out only once the server has the ack, so the test's next
      // step sees the consumer's state after it.
      if (!(await m.ackAck())) throw new Error(`ack of ${m.seq} not confirmed`);
      return;
    case "nak":
      m.nak();
      break;
    case "term":
      m.term(reason);
      break;
    case "working":
      m.working();
      break;
    case "hold":
      held.set(m.seq, m);
      return;
    default:
      throw new Error(`unknown action ${action}`);
  }
  // nak / term / working are fire-and-forget in nats.js: a flush makes sure the server has
  // them before the answer goes out.
  await nc.flush();
}

const ops = {
  async publish({ messages }) {
    const acks = [];
    for (const { subject, data, headers: hdrs, msg_id } of messages) {
      const opts = {};
      if (hdrs) {
        const h = headers();
        for (const [k, values] of Object.entries(hdrs)) {
          for (const v of values) h.append(k, v);
        }
        opts.headers = h;
      }
      if (msg_id) opts.msgID = msg_id;
      const pa = await js.publish(subject, Buffer.from(data ?? "", "base64"), opts);
      acks.push({ stream: pa.stream, seq: pa.seq, duplicate: pa.duplicate });
    }
    return { acks };
  },

  // Many messages without shipping their bytes through stdin: message i goes to
  // subjects[i % n] with the payload generated(i, size) (the tests compute the same bytes),
  // a header X-Index: i and the msg id <msg_id_prefix><i>.
  async publish_generated({ subjects, count, size, msg_id_prefix }) {
    const acks = [];
    for (let i = 0; i < count; i++) {
      const h = headers();
      h.set("X-Index", String(i));
      const opts = { headers: h, msgID: `${msg_id_prefix}${i}` };
      const pa = await js.publish(subjects[i % subjects.length], generated(i, size), opts);
      acks.push({ stream: pa.stream, seq: pa.seq, duplicate: pa.duplicate });
    }
    return { acks };
  },

  async add_consumer({ stream, config }) {
    const ci = await jsm.consumers.add(stream, config);
    return { name: ci.name, config: ci.config };
  },

  async consumer_info({ stream, consumer }) {
    const ci = await jsm.consumers.info(stream, consumer);
    return { info: ci };
  },

  async fetch({ stream, consumer, opts, action = "ack", reason }) {
    const c = await js.consumers.get(stream, consumer);
    const iter = await c.fetch(opts);
    const msgs = [];
    for await (const m of iter) {
      msgs.push(describe(m));
      await act(m, action, reason);
    }
    return { msgs };
  },

  async act({ seq, action, reason }) {
    const m = held.get(seq);
    if (!m) throw new Error(`no held message with stream sequence ${seq}`);
    if (action === "ack" || action === "nak" || action === "term") held.delete(seq);
    await act(m, action, reason);
    return {};
  },

  async consume({ stream, consumer, opts, tag }) {
    const c = await js.consumers.get(stream, consumer);
    const iter = await c.consume(opts);
    const done = (async () => {
      for await (const s of iter.status()) {
        if (s.type === "consumer_pinned") emit({ event: "pinned", tag, pin: s.id });
        if (s.type === "consumer_unpinned") emit({ event: "unpinned", tag });
      }
    })();
    const loop = (async () => {
      for await (const m of iter) {
        await act(m, "ack");
        emit({ event: "msg", tag, msg: describe(m) });
      }
    })();
    consumes.set(tag, { iter, loop, done });
    return {};
  },

  async stop({ tag }) {
    const c = consumes.get(tag);
    if (!c) throw new Error(`no consume tagged ${tag}`);
    consumes.delete(tag);
    c.iter.stop();
    await c.loop;
    return {};
  },

  async exit() {
    await nc.drain();
    setImmediate(() => process.exit(0));
    return {};
  },

  // --- Object Store (@nats-io/obj) ------------------------------------------------------------
  // Infos travel as nats.js has them: the JSON the bucket stores (its .info), or null.

  async obj_put({ bucket, name, data, chunk_size, description, headers: hdrs }) {
    const os = await new Objm(js).create(bucket);
    const meta = { name, description };
    if (chunk_size) meta.options = { max_chunk_size: chunk_size };
    if (hdrs) {
      meta.headers = headers();
      for (const [k, values] of Object.entries(hdrs)) {
        for (const v of values) meta.headers.append(k, v);
      }
    }
    const oi = await os.putBlob(meta, Buffer.from(data ?? "", "base64"));
    return { info: oi.info };
  },

  // The object's bytes as nats.js reads them (it checks the digest), or found: false.
  async obj_get({ bucket, name }) {
    const os = await new Objm(js).open(bucket);
    const data = await os.getBlob(name);
    if (data === null) return { found: false };
    const oi = await os.info(name);
    return { found: true, data: Buffer.from(data).toString("base64"), info: oi?.info ?? null };
  },

  async obj_info({ bucket, name }) {
    const oi = await (await new Objm(js).open(bucket)).info(name);
    return { info: oi?.info ?? null };
  },

  async obj_list({ bucket }) {
    const infos = await (await new Objm(js).open(bucket)).list();
    return { names: infos.map((i) => i.name) };
  },

  async obj_delete({ bucket, name }) {
    await (await new Objm(js).open(bucket)).delete(name);
    return {};
  },

  // A link named name in bucket, to the object target of target_bucket.
  async obj_link({ bucket, name, target_bucket, target }) {
    const objm = new Objm(js);
    const dest = await (await objm.open(target_bucket)).info(target);
    if (dest === null) throw new Error(`no object ${target} in ${target_bucket}`);
    const oi = await (await objm.open(bucket)).link(name, dest);
    return { info: oi?.info ?? null };
  },

  // --- Key-Value (@nats-io/kv): values travel as base64, entries as kvEntry() describes ---

  async kv_create_bucket({ bucket, opts }) {
    const kv = await kvm.create(bucket, opts ?? {});
    buckets.set(bucket, kv);
    return { status: kvStatus(await kv.status()) };
  },

  async kv_status({ bucket }) {
    return { status: kvStatus(await (await kvOpen(bucket)).status()) };
  },

  async kv_put({ bucket, key, data }) {
    return { revision: await (await kvOpen(bucket)).put(key, Buffer.from(data, "base64")) };
  },

  async kv_create({ bucket, key, data, ttl }) {
    const kv = await kvOpen(bucket);
    return { revision: await kv.create(key, Buffer.from(data, "base64"), ttl) };
  },

  async kv_update({ bucket, key, data, last }) {
    const kv = await kvOpen(bucket);
    return { revision: await kv.update(key, Buffer.from(data, "base64"), last) };
  },

  async kv_delete({ bucket, key, last }) {
    const opts = last ? { previousSeq: last } : {};
    await (await kvOpen(bucket)).delete(key, opts);
    return {};
  },

  async kv_purge({ bucket, key }) {
    await (await kvOpen(bucket)).purge(key);
    return {};
  },

  async kv_get({ bucket, key, revision }) {
    const kv = await kvOpen(bucket);
    return { entry: kvEntry(await kv.get(key, revision ? { revision } : undefined)) };
  },

  async kv_history({ bucket, key }) {
    const entries = [];
    for await (const e of await (await kvOpen(bucket)).history({ key })) {
      entries.push(kvEntry(e));
    }
    return { entries };
  },

  async kv_keys({ bucket, filter }) {
    const keys = [];
    for await (const k of await (await kvOpen(bucket)).keys(filter)) keys.push(k);
    return { keys };
  },

  // A watch reports each entry as an event {"event": "kv", "tag", "entry"} until kv_unwatch.
  async kv_watch({ bucket, tag, key, include, ignoreDeletes }) {
    const iter = await (await kvOpen(bucket)).watch({ key, include, ignoreDeletes });
    const loop = (async () => {
      for await (const e of iter) emit({ event: "kv", tag, entry: kvEntry(e) });
    })();
    watches.set(tag, { iter, loop });
    return {};
  },

  async kv_unwatch({ tag }) {
    const w = watches.get(tag);
    if (!w) throw new Error(`no watch tagged ${tag}`);
    watches.delete(tag);
    w.iter.stop();
    await w.loop;
    return {};
  },
};

const kvm = new Kvm(js);
const buckets = new Map(); // bucket name -> KV, opened once
const watches = new Map(); // tag -> running kv_watch

async function kvOpen(bucket) {
  let kv = buckets.get(bucket);
  if (!kv) {
    kv = await kvm.open(bucket);
    buckets.set(bucket, kv);
  }
  return kv;
}

function kvEntry(e) {
  if (!e) return null;
  return {
    bucket: e.bucket,
    key: e.key,
    value: Buffer.from(e.value).toString("base64"),
    revision: e.revision,
    operation: e.operation,
    delta: e.delta ?? null,
    created: e.created.toISOString(),
    is_update: e.isUpdate ?? null,
  };
}

function kvStatus(s) {
  return {
    bucket: s.bucket,
    values: s.values,
    history: s.history,
    ttl: s.ttl,
    direct: s.streamInfo.config.allow_direct,
    stream: s.streamInfo.config.name,
  };
}

async function run(cmd) {
  const { id, op, ...params } = cmd;
  try {
    const fn = ops[op];
    if (!fn) throw new Error(`unknown op ${op}`);
    const result = await fn(params);
    emit({ id, ok: true, ...result });
  } catch (err) {
    emit({ id, ok: false, error: `${err?.name}: ${err?.message}` });
  }
}

emit({ event: "ready", server_version: nc.info?.version });

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line.trim()) run(JSON.parse(line));
});
// The test closed our stdin (or died): nothing more will come, so leave.
lines.on("close", () => {
  nc.close().finally(() => process.exit(0));
});
