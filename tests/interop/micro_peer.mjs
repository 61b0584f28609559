// nats.js's services (@nats-io/services) as a peer for the jetstream_sync micro interop tests.
//
// Usage:
//   node micro_peer.mjs <server-url> discover <service-name> <endpoint-subject>
//     nats.js's service client (Svcm) pings, asks INFO and STATS of the named service, calls
//     the endpoint (payload "21", then "fail", which must come back as a service error),
//     and prints one JSON object with what it saw; then exits.
//   node micro_peer.mjs <server-url> serve <service-name>
//     runs a nats.js service: endpoint "double" (group "math": subject math.double) answers
//     twice the number it gets, or a 400 service error for what is not a number. It prints
//     {"event":"ready","service_id":...} and runs until stdin closes.

import { connect } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";

const [url, mode, name, endpoint] = process.argv.slice(2);
if (!url || !mode || !name) {
  process.stderr.write("usage: node micro_peer.mjs <url> discover|serve <name> [subject]\n");
  process.exit(2);
}

const nc = await connect({ servers: url, name: "natsjs-micro-peer" });
const svcm = new Svcm(nc);

async function all(iterable) {
  const out = [];
  for await (const x of await iterable) out.push(x);
  return out;
}

if (mode === "discover") {
  const client = svcm.client({ maxWait: 1000 });
  const ping = await all(client.ping(name));
  const info = await all(client.info(name));
  const stats = await all(client.stats(name));
  const ok = await nc.request(endpoint, "21", { timeout: 2000 });
  const bad = await nc.request(endpoint, "fail", { timeout: 2000 });
  process.stdout.write(
    JSON.stringify({
      ping,
      info,
      stats,
      ok: { data: ok.string(), error: ok.headers?.get("Nats-Service-Error") ?? "" },
      bad: {
        data: bad.string(),
        code: bad.headers?.get("Nats-Service-Error-Code") ?? "",
        error: bad.headers?.get("Nats-Service-Error") ?? "",
      },
    }) + "\n",
  );
  await nc.close();
} else if (mode === "serve") {
  const srv = await svcm.add({
    name,
    version: "2.0.0",
    description: "nats.js doubles numbers",
    metadata: { peer: "nats.js" },
  });
  srv.addGroup("math").addEndpoint("double", {
    metadata: { unit: "none" },
    handler: (err, msg) => {
      if (err) return;
      const n = Number(msg.string());
      if (Number.isNaN(n)) {
        msg.respondError(400, `not a number: ${msg.string()}`);
      } else {
        msg.respond(String(2 * n));
      }
    },
  });
  await nc.flush();
  process.stdout.write(JSON.stringify({ event: "ready", service_id: srv.info().id }) + "\n");
  process.stdin.resume();
  process.stdin.on("end", async () => {
    await srv.stop();
    await nc.close();
    process.exit(0);
  });
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
