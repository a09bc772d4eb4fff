// Two clients on the official TypeScript SDK with roots of their own, taking turns calling one
// tool through Switchboard, for front_door/real_clients.rs (one client's roots are not another's):
//
//   node roots-clients.mjs <url> <tool>
//
// Client "a" has the root file:///roots/a, client "b" file:///roots/b. They call <tool> in the
// order a, b, a, b, one call at a time, and the texts of the results are printed as one JSON
// line: [{"client": "a", "text": ...}, ...].
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, tool] = process.argv.slice(2);

async function open(name) {
  const client = new Client({ name: `roots-client-${name}`, version: "1.0.0" }, { capabilities: { roots: { listChanged: true } } });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: [{ uri: `file:///roots/${name}`, name: `root of ${name}` }],
  }));
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

const clients = { a: await open("a"), b: await open("b") };
const calls = [];
for (const name of ["a", "b", "a", "b"]) {
  const result = await clients[name].callTool({ name: tool, arguments: {} });
  calls.push({ client: name, text: result.content.map((c) => c.text ?? "").join("\n") });
}
console.log(JSON.stringify(calls));
for (const client of Object.values(clients)) await client.close();
