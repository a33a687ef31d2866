// A stock js-libp2p node for the interop test (tests/integration/net/interop/): TCP, Noise,
// yamux, identify and @chainsafe/libp2p-gossipsub with its defaults (StrictSign; it offers
// /meshsub/1.2.0, 1.1.0 and 1.0.0, a crystalmesh node speaks 1.1.0), the message id of
// docs/protocol.md (sha256 of the data). Packages come from tools/node_modules (scripts/setup
// installs them from devnet/tools-package.json).
//
// Usage: node js_gossip_peer.mjs <tools/node_modules> <multiaddr of a crystalmesh node> <topic>
// stdin:  one hex string per line: data (an envelope's bytes) to publish on <topic>.
// stdout: one JSON object per line:
//   {"event": "started", "peer_id": ..., "addrs": [...]}
//   {"event": "connected", "peer": ..., "protocols": [...]}     once the dial and identify are done
//   {"event": "subscribed", "peer": ..., "topic": ..., "streams": [protocol, ...]}
//                                                               a peer joined <topic>
//   {"event": "message", "topic": ..., "from": ..., "data": hex} each message received
//   {"event": "published", "recipients": [...]} or {"event": "publish_error", "error": ...}
// Ends (exit 0) when stdin closes.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const [modules, target, topic] = process.argv.slice(2);

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

async function main() {
  const { createLibp2p } = await load("libp2p");
  const { tcp } = await load("@libp2p/tcp");
  const { noise } = await load("@chainsafe/libp2p-noise");
  const { yamux } = await load("@chainsafe/libp2p-yamux");
  const { identify } = await load("@libp2p/identify");
  const { gossipsub } = await load("@chainsafe/libp2p-gossipsub");
  const { multiaddr } = await load("@multiformats/multiaddr");

  const node = await createLibp2p({
    addresses: { listen: ["/ip4/127.0.0.1/tcp/0"] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    services: {
      identify: identify(),
      pubsub: gossipsub({
        msgIdFn: (message) => createHash("sha256").update(message.data).digest(),
        emitSelf: false,
      }),
    },
  });
  const pubsub = node.services.pubsub;
  pubsub.addEventListener("message", (event) => {
    const message = event.detail;
    emit({ event: "message", topic: message.topic, from: message.from?.toString() ?? null,
           data: Buffer.from(message.data).toString("hex") });
  });
  pubsub.addEventListener("subscription-change", (event) => {
    for (const change of event.detail.subscriptions) {
      if (change.topic === topic && change.subscribe) {
        // The protocols of the streams open to that peer: which meshsub version was agreed.
        const streams = node.getConnections(event.detail.peerId)
          .flatMap((connection) => connection.streams.map((stream) => stream.protocol));
        emit({ event: "subscribed", peer: event.detail.peerId.toString(), topic, streams });
      }
    }
  });
  node.addEventListener("peer:identify", (event) => {
    emit({ event: "connected", peer: event.detail.peerId.toString(),
           protocols: event.detail.protocols });
  });
  await node.start();
  emit({ event: "started", peer_id: node.peerId.toString(),
         addrs: node.getMultiaddrs().map((addr) => addr.toString()) });
  pubsub.subscribe(topic);
  await node.dial(multiaddr(target));

  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const hex = line.trim();
    if (!hex) continue;
    try {
      const result = await pubsub.publish(topic, Buffer.from(hex, "hex"));
      emit({ event: "published", recipients: result.recipients.map((peer) => peer.toString()) });
    } catch (error) {
      emit({ event: "publish_error", error: String(error) });
    }
  }
  await node.stop();
}

main().catch((error) => {
  process.stderr.write(`js_gossip_peer: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
