// One js-libp2p benchmark node, driven by bench_gossip.py: the js side of the same run.
//
// A stock js-libp2p 2.x node (TCP, Noise, yamux, identify, @chainsafe/libp2p-gossipsub) with
// the gossipsub parameters of a crystalmesh node (node/net/gossip_config.py): D / D_lo / D_hi
// from --mesh (default 6,4,12), 1 s heartbeat, gossip window 3 of a 5-heartbeat history,
// 60 s fanout TTL and prune backoff, 300 s seen cache, PX on, flood publishing (on in both),
// /meshsub/1.1.0 only (a crystalmesh node speaks no 1.2, so no IDONTWANT), StrictSign, the
// message id of docs/protocol.md (sha256 of the data), and no behaviour or IP colocation
// penalties (crystalmesh's PeerScorer weighs neither). Messages carry no application
// envelope: what is compared is what a stock js-libp2p node spends to carry one.
//
// Talks the JSON lines of scripts/_gossip_worker.py (commands on stdin, events on stdout):
//   -> {"cmd": "status"}                         <- {"event": "status", "mesh": n, "peers": n}
//   -> {"cmd": "publish", "phase": k, "rate": r, "count": m}
//                                                <- {"event": "published", "phase": k, ...}
//   -> {"cmd": "report", "phase": k, "full": b}  <- {"event": "report", "phase": k, "count": n,
//                                                    "received": [[index, latency_us], ...], ...}
//   -> {"cmd": "quit"}
//
// Usage: node _gossip_worker.mjs <tools/node_modules> [--bootstrap a,b] [--mesh D,lo,hi]
//        [--bytes N]. Not a user tool. Packages come from tools/node_modules (scripts/setup).
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
const options = { bootstrap: "", mesh: "6,4,12", bytes: "728" };
for (let index = 3; index < process.argv.length; index += 2) {
  options[process.argv[index].replace(/^--/, "")] = process.argv[index + 1];
}
const TOPIC = "/crystalmesh/bench/gossip";

// js-libp2p 2.x and its queues call Promise.withResolvers (Node 22); Node 20 lacks it.
Promise.withResolvers ??= function withResolvers() {
  let resolve, reject;
  const promise = new this((yes, no) => { resolve = yes; reject = no; });
  return { promise, resolve, reject };
};

// ESM packages ignore NODE_PATH: import each by the file its package.json exports.
async function load(name) {
  const dir = join(modules, name);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const entry = pkg.exports["."];
  const file = typeof entry === "string" ? entry : entry.import ?? entry.default;
  return import(pathToFileURL(join(dir, file)).href);
}

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

// Wall clock in ns (the Python side's time.time_ns(); same machine, same clock).
function nowNs() {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const { createLibp2p } = await load("libp2p");
  const { tcp } = await load("@libp2p/tcp");
  const { noise } = await load("@chainsafe/libp2p-noise");
  const { yamux } = await load("@chainsafe/libp2p-yamux");
  const { identify } = await load("@libp2p/identify");
  const { gossipsub } = await load("@chainsafe/libp2p-gossipsub");
  const { multiaddr } = await load("@multiformats/multiaddr");

  const [D, Dlo, Dhi] = options.mesh.split(",").map(Number);
  const node = await createLibp2p({
    addresses: { listen: ["/ip4/127.0.0.1/tcp/0"] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    // js-libp2p 2.x pings every connection every 10 s and closes it when a ping times out;
    // on a loaded machine that closed 4 of the publisher's 9 connections within seconds and
    // cut the topology apart. py-libp2p 0.8.1 has no such monitor: off, so both sides keep
    // the same connections (a ping per 10 s per connection is no measurable cost).
    connectionMonitor: { enabled: false },
    services: {
      identify: identify(),
      pubsub: gossipsub({
        multicodecs: ["/meshsub/1.1.0"],
        D, Dlo, Dhi,
        heartbeatInterval: 1000,
        mcacheGossip: 3,
        mcacheLength: 5,
        fanoutTTL: 60_000,
        pruneBackoff: 60_000,
        seenTTL: 300_000,
        doPX: true,
        floodPublish: true,
        msgIdFn: (message) => createHash("sha256").update(message.data).digest(),
        emitSelf: false,
        // Scored as a crystalmesh node scores (gossip_config): no behaviour penalty (js:
        // -10 per broken IWANT promise, squared, which under CPU load graylists peers whose
        // answers are late) and no IP colocation penalty (every node is on 127.0.0.1).
        scoreParams: { behaviourPenaltyWeight: 0, IPColocationFactorWeight: 0 },
      }),
    },
  });
  const pubsub = node.services.pubsub;
  const received = new Map(); // phase -> [[index, latency_us], ...]
  const decoder = new TextDecoder();
  pubsub.addEventListener("message", (event) => {
    const now = nowNs();
    const data = event.detail.data;
    const head = decoder.decode(data.subarray(0, Math.min(64, data.length))).split("|")[0];
    const [phase, index, sentNs] = head.split(":");
    if (sentNs === undefined) return;
    if (!received.has(phase)) received.set(phase, []);
    received.get(phase).push([Number(index), Number((now - BigInt(sentNs)) / 1000n)]);
  });
  await node.start();
  pubsub.subscribe(TOPIC);
  for (const addr of options.bootstrap.split(",").filter(Boolean)) {
    await node.dial(multiaddr(addr));
  }
  const addr = node.getMultiaddrs()[0].toString();
  emit({ event: "ready", addr, pid: process.pid });

  async function publish(phase, rate, count) {
    const size = Number(options.bytes);
    const start = performance.now();
    let late = 0;
    const recipients = [];
    for (let index = 0; index < count; index++) {
      const due = start + (index * 1000) / rate;
      const now = performance.now();
      if (due > now) await sleep(due - now);
      else if (now - due > 50) late++;
      const head = Buffer.from(`${phase}:${index}:${nowNs()}|`);
      const data = Buffer.concat([head, randomBytes(Math.max(0, size - head.length))]);
      try {
        const result = await pubsub.publish(TOPIC, data);
        recipients.push(result.recipients.length);
      } catch (error) {
        process.stderr.write(`publish ${phase}:${index} failed: ${error}\n`);
      }
    }
    const elapsed = (performance.now() - start) / 1000;
    return { achieved_rate: elapsed > 0 ? count / elapsed : 0, late, sellers: 0,
             recipients_min: Math.min(...recipients), recipients_max: Math.max(...recipients) };
  }

  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const command = JSON.parse(line);
    if (command.cmd === "status") {
      emit({ event: "status", mesh: pubsub.getMeshPeers(TOPIC).length,
             peers: node.getConnections().length,
             connected: Object.values(pubsub.dumpPeerScoreStats()).filter((s) => s.connected).length });
    } else if (command.cmd === "publish") {
      const result = await publish(command.phase, command.rate, command.count);
      emit({ event: "published", phase: command.phase, ...result });
    } else if (command.cmd === "report") {
      const list = received.get(String(command.phase)) ?? [];
      const report = { event: "report", phase: command.phase, count: list.length, dropped: 0 };
      if (command.full ?? true) report.received = list;
      emit(report);
    } else if (command.cmd === "quit") {
      break;
    }
  }
  await node.stop();
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`_gossip_worker.mjs: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
