// A client on the official TypeScript SDK v1 (`@modelcontextprotocol/sdk` Client), pointed at
// Switchboard by the interop matrix (crates/switchboard/tests/interop_matrix.rs):
//
//   node interop-client-v1.mjs <prefixes> http <url>         Streamable HTTP (/mcp)
//   node interop-client-v1.mjs <prefixes> sse <url>          HTTP+SSE (/sse)
//   node interop-client-v1.mjs <prefixes> stdio <command> [args...]
//
// `<prefixes>` is a comma-separated list of the upstreams' prefixes. The client declares sampling,
// elicitation and roots, answers them with fixed values naming itself, runs interop-exercise.mjs
// against every upstream and prints one JSON line. Cancelling goes through the SDK's own
// `signal` option (it sends `notifications/cancelled`); subscribing through `resources/subscribe`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { answers, exercise, Updates } from "./interop-exercise.mjs";

const NAME = "typescript-v1";
const [prefixes, mode, target, ...rest] = process.argv.slice(2);
const transport =
  mode === "http"
    ? new StreamableHTTPClientTransport(new URL(target))
    : mode === "sse"
      ? new SSEClientTransport(new URL(target))
      : new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });
let negotiated = null;
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (version) => {
  negotiated = version;
  setVersion?.(version);
};

const client = new Client(
  { name: NAME, version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
);
const fixed = answers(NAME);
client.setRequestHandler(CreateMessageRequestSchema, async () => fixed.sampling());
client.setRequestHandler(ElicitRequestSchema, async () => fixed.elicitation());
client.setRequestHandler(ListRootsRequestSchema, async () => fixed.roots());
const updates = new Updates();
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) =>
  updates.record(notification.params.uri),
);
await client.connect(transport);

const { resources } = await client.listResources();
const { tools } = await client.listTools();
const upstreams = await exercise(prefixes.split(","), {
  call: (name, args, options) => client.callTool({ name, arguments: args }, undefined, options),
  subscribe: async (uri) => {
    await client.subscribeResource({ uri });
    return () => client.unsubscribeResource({ uri });
  },
  resources,
  updates,
});
console.log(JSON.stringify({ client: NAME, protocolVersion: negotiated, tools: tools.map((t) => t.name), upstreams }));
await client.close();
process.exit(0);
