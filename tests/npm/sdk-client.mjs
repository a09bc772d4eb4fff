// The official TypeScript SDK client, pointed at Switchboard by front_door/real_clients.rs:
//   node sdk-client.mjs http <url>
//   node sdk-client.mjs stdio <command> [args...]
// It lists tools, calls one, collects progress, cancels a long call, answers an elicitation
// relayed from the upstream server, and prints what happened as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, ...rest] = process.argv.slice(2);
const transport =
  mode === "http"
    ? new StreamableHTTPClientTransport(new URL(target))
    : new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });
let negotiated = null;
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (version) => {
  negotiated = version;
  setVersion?.(version);
};

const client = new Client(
  { name: "sdk-client-test", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async () => ({
  action: "accept",
  content: { name: "Ada", check: true },
}));
await client.connect(transport);

const report = { protocolVersion: negotiated };
const { tools } = await client.listTools();
report.tools = tools.length;
const echo = await client.callTool({ name: "everything__echo", arguments: { message: "hi" } });
report.echo = echo.content[0].text;

const progress = [];
await client.callTool(
  { name: "everything__trigger-long-running-operation", arguments: { duration: 1, steps: 3 } },
  undefined,
  { onprogress: (p) => progress.push(p.progress) },
);
report.progress = progress;

const controller = new AbortController();
setTimeout(() => controller.abort(), 500);
try {
  await client.callTool(
    { name: "everything__trigger-long-running-operation", arguments: { duration: 30, steps: 30 } },
    undefined,
    { signal: controller.signal },
  );
  report.cancelled = false;
} catch {
  report.cancelled = true;
}

const elicited = await client.callTool({
  name: "everything__trigger-elicitation-request",
  arguments: {},
});
report.elicited = JSON.stringify(elicited.content).includes("Ada");

console.log(JSON.stringify(report));
await client.close();
