#!/usr/bin/env node
// Compiles devnet/contracts/*.sol with the solc-js and OpenZeppelin installed in
// tools/node_modules (scripts/setup) and writes node/chain/artifacts/<Name>.json:
// abi, creation and runtime bytecode, immutable offsets, storage layout, compiler settings and the
// sha256 of the contract sources (tests/unit/test_chain_artifacts.py checks it).
//
//   node devnet/build_contracts.mjs [--out DIR]
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const TOOLS = join(ROOT, "tools", "node_modules");
const CONTRACTS_DIR = join(ROOT, "devnet", "contracts");
const CONTRACTS = ["USDC", "BatchSettler", "ChannelSettlement", "ERC3009DepositCollector", "Multicall3"];

const outFlag = process.argv.indexOf("--out");
const OUT = outFlag >= 0 ? resolve(process.argv[outFlag + 1]) : join(ROOT, "node", "chain", "artifacts");

const require = createRequire(join(TOOLS, "noop.js"));
let solc;
try {
  solc = require("solc");
} catch {
  console.error("build_contracts: solc not found in tools/node_modules; run scripts/setup");
  process.exit(2);
}
const ozVersion = JSON.parse(readFileSync(join(TOOLS, "@openzeppelin", "contracts", "package.json"), "utf8")).version;

// Must match node/chain/contracts.py:sources_sha256.
function sourcesSha256() {
  const hash = createHash("sha256");
  for (const name of readdirSync(CONTRACTS_DIR).filter((f) => f.endsWith(".sol")).sort()) {
    hash.update(name + "\0");
    hash.update(readFileSync(join(CONTRACTS_DIR, name)));
    hash.update("\0");
  }
  return hash.digest("hex");
}

const settings = {
  evmVersion: "cancun",
  optimizer: { enabled: true, runs: 10000 },
  outputSelection: {
    "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object", "evm.deployedBytecode.immutableReferences", "storageLayout"] },
  },
};

const sources = {};
for (const name of CONTRACTS) {
  sources[`devnet/contracts/${name}.sol`] = { content: readFileSync(join(CONTRACTS_DIR, `${name}.sol`), "utf8") };
}

function findImports(path) {
  if (path.startsWith("@openzeppelin/")) {
    return { contents: readFileSync(join(TOOLS, path), "utf8") };
  }
  return { error: `import not found: ${path}` };
}

const output = JSON.parse(solc.compile(JSON.stringify({ language: "Solidity", sources, settings }), { import: findImports }));
const errors = (output.errors || []).filter((e) => e.severity === "error");
for (const message of output.errors || []) console.error(message.formattedMessage);
if (errors.length) process.exit(1);

const sourcesHash = sourcesSha256();
mkdirSync(OUT, { recursive: true });
for (const name of CONTRACTS) {
  const compiled = output.contracts[`devnet/contracts/${name}.sol`][name];
  const artifact = {
    contractName: name,
    sourcesSha256: sourcesHash,
    compiler: { solc: solc.version(), openzeppelin: ozVersion, evmVersion: settings.evmVersion, optimizer: settings.optimizer },
    abi: compiled.abi,
    bytecode: "0x" + compiled.evm.bytecode.object,
    deployedBytecode: "0x" + compiled.evm.deployedBytecode.object,
    storageLayout: compiled.storageLayout.storage.map((s) => ({ label: s.label, slot: Number(s.slot), offset: s.offset, type: s.type })),
  };
  // Where the runtime code holds immutables (byte offsets of 32-byte words), so their values
  // can be written in when the runtime code is placed at an address without a constructor.
  const immutables = Object.values(compiled.evm.deployedBytecode.immutableReferences || {}).flat().map((r) => r.start);
  if (immutables.length) artifact.immutableOffsets = immutables;
  writeFileSync(join(OUT, `${name}.json`), JSON.stringify(artifact, null, 1) + "\n");
  console.log(`build_contracts: ${name} -> ${join(OUT, name + ".json")} (${compiled.evm.deployedBytecode.object.length / 2} bytes)`);
}
