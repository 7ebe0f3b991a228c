// Drives Memwarden's /mcp with the MCP TypeScript SDK's own client, the strictest of the SDKs: it
// checks every tool result's structured content against the tool's declared output schema.
// Usage: node mcp_ts_client.mjs <mcp url> <bearer token> <calls json>
// where <calls json> is [{"tool": name, "arguments": {...}}, ...]. Prints one JSON line with the
// listed tool names and, per call, either the result or the exception the SDK threw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, callsJson] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "memwarden-ts-probe", version: "1.0.0" });
await client.connect(transport);
const listed = await client.listTools();
const outcomes = [];
for (const { tool, arguments: args } of JSON.parse(callsJson)) {
  try {
    const result = await client.callTool({ name: tool, arguments: args });
    outcomes.push({ tool, result });
  } catch (error) {
    outcomes.push({ tool, thrown: { name: error.name, code: error.code, message: String(error.message) } });
  }
}
console.log(JSON.stringify({
  protocol: transport.protocolVersion ?? null,
  tools: listed.tools.map((t) => t.name),
  outcomes,
}));
await client.close();
