// A second MCP client implementation for the suite: the official TypeScript SDK's Client
// (@modelcontextprotocol/sdk, installed in tools/ by scripts/setup) drives `crystalmesh mcp`
// over stdio and prints what it saw as one JSON object.
//
// Usage: NODE_PATH=tools/node_modules node mcp_ts_client.cjs '<json plan>'
//   plan = {"command": "...", "args": [...], "env": {...}, "cwd": "...",
//           "calls": [{"tool": "name", "arguments": {...}}, ...]}
// Output: {"server": ..., "tools": [...], "resources": [...], "templates": [...],
//          "skills": [...], "reads": {uri: text}, "calls": [result, ...]}
"use strict";

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
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
  for (const step of plan.calls) {
    out.calls.push(await client.callTool({ name: step.tool, arguments: step.arguments }));
  }
  await client.close();
  process.stdout.write(JSON.stringify(out));
}

main().catch((error) => {
  process.stderr.write(`mcp_ts_client: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
