// nats.js (@nats-io/jetstream 3.4.0) as the other side of the message schedule interop tests
// (ADR-51). One job per run; it prints one JSON object and exits.
//
// Usage:
//   node schedule_peer.mjs <server-url> publish <json>
//     <json>: {"schedules": [{"subject", "data", "target", "spec", "ttl"?, "header"?}]}
//     publishes each with nats.js's schedule option; "spec" is nats.js's ScheduleSpec
//     ({"every": "1s"}, {"cron": "* * * * * *"}, {"predefined": "@hourly"}) or
//     {"at_in_ms": 1000}: a Date that many milliseconds from now. "header" is one [name, value]
//     the schedule carries. Prints {"acks": [{"stream", "seq"}, ...]}.
//   node schedule_peer.mjs <server-url> watch <json>
//     <json>: {"stream", "target", "count", "cancel"?: {"subject", "schedule"}}
//     reads "count" messages on "target" with an ordered consumer (10 s for each), then, with
//     "cancel", publishes to cancel.subject with cancelSchedule: {scheduleSubject:
//     cancel.schedule}. Prints {"msgs": [{"subject", "data", "headers"}], "cancel_ack"?}.

import { connect, headers } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";

const [url, mode, arg] = process.argv.slice(2);
if (!url || !mode || !arg) {
  process.stderr.write("usage: node schedule_peer.mjs <url> publish|watch <json>\n");
  process.exit(2);
}
const job = JSON.parse(arg);
const nc = await connect({ servers: url, name: "natsjs-schedule-peer" });
const js = jetstream(nc);

function describe(m) {
  const hdrs = {};
  if (m.headers) {
    for (const [k, v] of m.headers) hdrs[k] = [...v];
  }
  return { subject: m.subject, data: m.string(), headers: hdrs };
}

function specification(spec) {
  if (spec.at_in_ms !== undefined) return new Date(Date.now() + spec.at_in_ms);
  return spec;
}

let out;
if (mode === "publish") {
  const acks = [];
  for (const s of job.schedules) {
    const opts = { schedule: { specification: specification(s.spec), target: s.target } };
    if (s.ttl) opts.schedule.ttl = s.ttl;
    if (s.header) {
      opts.headers = headers();
      opts.headers.set(s.header[0], s.header[1]);
    }
    const ack = await js.publish(s.subject, s.data, opts);
    acks.push({ stream: ack.stream, seq: ack.seq });
  }
  out = { acks };
} else if (mode === "watch") {
  const c = await js.consumers.get(job.stream, { filter_subjects: [job.target] });
  const msgs = [];
  while (msgs.length < job.count) {
    const m = await c.next({ expires: 10_000 });
    if (m === null) throw new Error(`only ${msgs.length} of ${job.count} messages came`);
    msgs.push(describe(m));
  }
  out = { msgs };
  if (job.cancel) {
    const ack = await js.publish(job.cancel.subject, "cancelled", {
      cancelSchedule: { scheduleSubject: job.cancel.schedule },
    });
    out.cancel_ack = { stream: ack.stream, seq: ack.seq };
  }
} else {
  throw new Error(`unknown mode ${mode}`);
}
process.stdout.write(JSON.stringify(out) + "\n");
await nc.close();
