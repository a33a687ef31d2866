// A second MCP client implementation for the suite: the official TypeScript SDK's Client
// (@modelcontextprotocol/sdk, installed in tools/ by scripts/setup) drives `crystalmesh mcp`
// over stdio and prints what it saw as one JSON object.
//
// Usage: NODE_PATH=tools/node_modules node mcp_ts_client.cjs '<json plan>'
//   plan = {"command": "...", "args": [...], "env": {...}, "cwd": "...",
//           "calls": [{"tool": "name", "arguments": {...}}, ...],
//           "subscribe": [uri, ...]}   (optional: resources/subscribe before the calls, then wait
//                                       for a notifications/resources/updated of each)
// Output: {"server": ..., "tools": [...], "resources": [...], "templates": [...],
//          "skills": [...], "reads": {uri: text}, "calls": [result, ...],
//          "progress": [[{progress, total, message}, ...] per call], "updated": [uri, ...]}
"use strict";

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { ResourceUpdatedNotificationSchema } = require("@modelcontextprotocol/sdk/types.js");
const { z } = require("zod");

async function main() {
  const plan = JSON.parse(process.argv[2]);
  const transport = new StdioClientTransport({
    command: plan.command, args: plan.args, env: plan.env, cwd: plan.cwd, stderr: "inherit",
  });
  const client = new Client({ name: "crystalmesh-suite-ts", version: "1.0.0" });
  await client.connect(transport);
  const out = { server: client.getServerVersion(), capabilities: client.getServerCapabilities(),
                calls: [], reads: {} };
  out.tools = (await client.listTools()).tools.map((tool) => ({
    name: tool.name, description: tool.description, required: tool.inputSchema.required || [],
  }));
  out.resources = (await client.listResources()).resources;
  out.templates = (await client.listResourceTemplates()).resourceTemplates;
  // skills/list is an extension method (SEP-2640): the SDK sends any method with a result schema.
  const listed = await client.request({ method: "skills/list", params: {} }, z.object({}).passthrough());
  out.skills = listed.skills;
  for (const skill of out.skills) {
    const read = await client.readResource({ uri: skill.uri });
    out.reads[skill.uri] = read.contents[0].text;
  }
  out.updated = [];
  let updatedWaiter = null;
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    out.updated.push(notification.params.uri);
    if (updatedWaiter) updatedWaiter();
  });
  for (const uri of plan.subscribe || []) {
    await client.subscribeResource({ uri });
  }
  out.progress = [];
  for (const step of plan.calls) {
    const seen = [];
    out.progress.push(seen);
    out.calls.push(await client.callTool({ name: step.tool, arguments: step.arguments }, undefined,
                                         { onprogress: (progress) => seen.push(progress) }));
  }
  const allUpdated = () => (plan.subscribe || []).every((uri) => out.updated.includes(uri));
  while (!allUpdated()) {  // the test's own timeout bounds this wait
    await new Promise((resolve) => { updatedWaiter = resolve; });
  }
  await client.close();
  process.stdout.write(JSON.stringify(out));
}

main().catch((error) => {
  process.stderr.write(`mcp_ts_client: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
