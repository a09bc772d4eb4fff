// A client on the official TypeScript SDK v2 (`@modelcontextprotocol/client`), pointed at
// Switchboard by the interop matrix (crates/switchboard/tests/interop_matrix.rs):
//
//   node interop-client-v2.mjs <prefixes> http <url>          Streamable HTTP, version negotiation
//                                                             `auto` (2026-07-28 where offered)
//   node interop-client-v2.mjs <prefixes> http-legacy <url>   Streamable HTTP, the plain 2025
//                                                             `initialize` (the SDK's default)
//   node interop-client-v2.mjs <prefixes> sse <url>           HTTP+SSE (/sse)
//   node interop-client-v2.mjs <prefixes> stdio <command> [args...]   negotiation `auto`
//
// `<prefixes>` is a comma-separated list of the upstreams' prefixes. The client declares sampling,
// elicitation and roots, answers them with fixed values naming itself (at 2026-07-28 the SDK
// answers `input_required` results with the same handlers and retries the call), runs
// interop-exercise.mjs against every upstream and prints one JSON line. Subscriptions go through
// `subscriptions/listen` on a 2026-07-28 connection and `resources/subscribe` on a 2025 one.
import { Client, SSEClientTransport, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { answers, exercise, Updates } from "./interop-exercise.mjs";

const NAME = "typescript-v2";
const [prefixes, mode, target, ...rest] = process.argv.slice(2);
const transport =
  mode === "http" || mode === "http-legacy"
    ? new StreamableHTTPClientTransport(new URL(target))
    : mode === "sse"
      ? new SSEClientTransport(new URL(target))
      : new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });

const client = new Client(
  { name: NAME, version: "2.4.0" },
  {
    capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } },
    versionNegotiation: { mode: mode === "http" || mode === "stdio" ? "auto" : "legacy" },
  },
);
const fixed = answers(NAME);
client.setRequestHandler("sampling/createMessage", async () => fixed.sampling());
client.setRequestHandler("elicitation/create", async () => fixed.elicitation());
client.setRequestHandler("roots/list", async () => fixed.roots());
const updates = new Updates();
client.setNotificationHandler("notifications/resources/updated", (notification) =>
  updates.record(notification.params.uri),
);
await client.connect(transport);
const modern = client.getProtocolEra() === "modern";

const { resources } = await client.listResources();
const { tools } = await client.listTools();
const upstreams = await exercise(prefixes.split(","), {
  call: (name, args, options) => client.callTool({ name, arguments: args }, options),
  subscribe: async (uri) => {
    if (modern) {
      const subscription = await client.listen({ resourceSubscriptions: [uri] });
      return () => subscription.close();
    }
    await client.subscribeResource({ uri });
    return () => client.unsubscribeResource({ uri });
  },
  resources,
  updates,
});
console.log(
  JSON.stringify({
    client: NAME,
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    tools: tools.map((t) => t.name),
    upstreams,
  }),
);
await client.close();
process.exit(0);
