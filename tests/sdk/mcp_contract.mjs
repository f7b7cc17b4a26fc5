// npm's official MCP client (@modelcontextprotocol/sdk 1.32.2, pinned by tests/sdk/package-lock.json)
// against fake-mcp over Streamable HTTP: the same steps as tests/sdk/mcp_contract.py, one JSON
// line each on stdout; tests/it/mcp_contract.rs arms the faults before and reads the ledger after.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const [url, token] = process.argv.slice(2);
const control = url.replace(/\/mcp$/, "");

function out(o) {
  const sorted = {};
  for (const k of Object.keys(o).sort()) sorted[k] = o[k];
  process.stdout.write(JSON.stringify(sorted) + "\n");
}

function resultOf(r) {
  const content = (r.content || []).filter((c) => c.type === "text").map((c) => {
    try { return JSON.parse(c.text); } catch { return c.text; }
  });
  return { is_error: Boolean(r.isError), content };
}

async function call(client, name, args, meta, timeout = 10000) {
  const started = Date.now();
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  try {
    const r = await client.callTool(params, undefined, { timeout });
    return { ...resultOf(r), outcome: "result", seconds: (Date.now() - started) / 1000 };
  } catch (e) {
    if (e instanceof McpError && e.code === -32001) {
      return { outcome: "no_reply", seconds: (Date.now() - started) / 1000 };
    }
    if (e instanceof McpError) return { outcome: "rpc_error", code: e.code, message: e.message };
    return { outcome: "error", message: String(e) };
  }
}

async function connect() {
  const client = new Client({ name: "aocheck-contract", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

const c = await connect();
const info = c.getServerVersion();
out({ step: "initialize", server: info.name, version: info.version, tools: Boolean(c.getServerCapabilities()?.tools) });
const listed = await c.listTools();
out({ step: "tools/list", tools: listed.tools.map((t) => ({
  name: t.name,
  required: [...(t.inputSchema.required || [])].sort(),
  properties: Object.keys(t.inputSchema.properties || {}).sort(),
})) });
out({ step: "send_message#1", ...(await call(c, "send_message", { to: "ops", text: "hi", idempotency_key: "m1" })) });
out({ step: "send_message#2", ...(await call(c, "send_message", { to: "ops", text: "again", idempotency_key: "m2" }, null, 3000)) });
for (const n of [1, 2, 3, 4]) {
  out({ step: `create_payment#${n}`, ...(await call(c, "create_payment", { amount: 1250, currency: "eur" }, { idempotency_key: `p${n}` })) });
}
out({ step: "write_record#1", ...(await call(c, "write_record", { key: "a", value: "b" })) });
out({ step: "lookup m2", ...(await call(c, "lookup", { key: "m2" })) });
out({ step: "lookup p4", ...(await call(c, "lookup", { key: "p4" })) });
out({ step: "list_effects", ...(await call(c, "list_effects", {})) });
out({ step: "unknown tool", ...(await call(c, "no_such_tool", {})) });
const r = await fetch(`${control}/_control/restart`, { method: "POST", body: "{}", headers: { Authorization: `Bearer ${token}` } });
out({ step: "restart", status: r.status, body: await r.json() });
out({ step: "after restart, old session", ...(await call(c, "send_message", { to: "ops", text: "late" }, null, 5000)) });
await c.close().catch(() => {});
const d = await connect();
out({ step: "after restart, new session", ...(await call(d, "lookup", { key: "m2" })) });
await d.close().catch(() => {});
