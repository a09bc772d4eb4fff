// An upstream MCP server on the official TypeScript SDK v1 (`@modelcontextprotocol/sdk`), for
// Switchboard's interop matrix (crates/switchboard/tests/interop_matrix.rs):
//
//   node interop-server-v1.mjs http <port>    Streamable HTTP with sessions at /mcp (127.0.0.1 only)
//   node interop-server-v1.mjs stdio
//
// The same tools as every interop server (see tests/py/server_mcp1.py): `echo`, `progress`
// (1, 2, 3), `slow` (30 s; records its cancellation under `tag`), `was_cancelled`, `sample`,
// `elicit`, `roots`, `bump` (updates the subscribable `test://counter`). Written with the SDK's
// low-level `Server`: sampling and elicitation go out with `extra.sendRequest` (on the call's own
// stream), roots with `server.listRoots()` (on the session's standalone GET stream).
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  isInitializeRequest,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mode, portArgument] = process.argv.slice(2);
const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason ?? new Error("aborted"));
    });
  });

const object = (properties = {}) => ({ type: "object", properties, required: Object.keys(properties) });
const TOOLS = [
  ["echo", "Echoes its text", object({ text: { type: "string" } })],
  ["progress", "Reports progress 1, 2, 3 of 3, then answers", object()],
  ["slow", "Sleeps 30 s; a cancellation is recorded under `tag`", object({ tag: { type: "string" } })],
  ["was_cancelled", "`yes` once a `slow` call with this tag was cancelled", object({ tag: { type: "string" } })],
  ["sample", "Asks the client's model and answers with its text", object()],
  ["elicit", "Asks the user for a name; answers `<action>:<name>`", object()],
  ["roots", "Asks the client for its roots; answers their URIs as a JSON list", object()],
  ["bump", "Increments test://counter and tells its subscribers", object()],
].map(([name, description, inputSchema]) => ({ name, description, inputSchema }));

const cancelled = new Set();
let counter = 0;
/** The servers (one per session) whose client subscribed to test://counter. */
const subscribers = new Set();
const text = (value) => ({ content: [{ type: "text", text: String(value) }] });

/** One session's server. */
function sessionServer() {
  const server = new Server(
    { name: "interop-ts-v1", version: "1.0.0" },
    { capabilities: { tools: {}, resources: { subscribe: true } } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments ?? {};
    switch (request.params.name) {
      case "echo":
        return text(`echo: ${args.text}`);
      case "progress": {
        const token = request.params._meta?.progressToken;
        for (const step of [1, 2, 3]) {
          if (token !== undefined) {
            await extra.sendNotification({
              method: "notifications/progress",
              params: { progressToken: token, progress: step, total: 3 },
            });
          }
          await sleep(50);
        }
        return text("progressed");
      }
      case "slow":
        try {
          await sleep(30_000, extra.signal);
        } catch (error) {
          cancelled.add(args.tag);
          throw error;
        }
        return text("finished");
      case "was_cancelled":
        return text(cancelled.has(args.tag) ? "yes" : "no");
      case "sample": {
        const answer = await extra.sendRequest(
          {
            method: "sampling/createMessage",
            params: { messages: [{ role: "user", content: { type: "text", text: "say hi" } }], maxTokens: 16 },
          },
          CreateMessageResultSchema,
        );
        return text(answer.content.text);
      }
      case "elicit": {
        const answer = await extra.sendRequest(
          {
            method: "elicitation/create",
            params: { message: "Who are you?", requestedSchema: object({ name: { type: "string" } }) },
          },
          ElicitResultSchema,
        );
        return text(`${answer.action}:${answer.content?.name ?? ""}`);
      }
      case "roots": {
        const { roots } = await server.listRoots();
        return text(JSON.stringify(roots.map((root) => root.uri)));
      }
      case "bump":
        counter += 1;
        for (const subscriber of subscribers) {
          await subscriber.sendResourceUpdated({ uri: "test://counter" }).catch(() => subscribers.delete(subscriber));
        }
        return text(counter);
      default:
        throw new McpError(ErrorCode.InvalidParams, `unknown tool '${request.params.name}'`);
    }
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [{ uri: "test://counter", name: "counter", mimeType: "text/plain" }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    if (request.params.uri !== "test://counter") {
      throw new McpError(ErrorCode.InvalidParams, `Resource ${request.params.uri} not found`);
    }
    return { contents: [{ uri: "test://counter", mimeType: "text/plain", text: String(counter) }] };
  });
  server.setRequestHandler(SubscribeRequestSchema, async () => {
    subscribers.add(server);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async () => {
    subscribers.delete(server);
    return {};
  });
  server.onclose = () => subscribers.delete(server);
  return server;
}

if (mode === "stdio") {
  await sessionServer().connect(new StdioServerTransport());
} else {
  const transports = new Map();
  const readJson = async (request) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString("utf8");
    return body ? JSON.parse(body) : undefined;
  };
  const http = createServer(async (request, response) => {
    try {
      if (new URL(request.url, "http://127.0.0.1").pathname !== "/mcp") {
        response.writeHead(404).end();
        return;
      }
      const sessionId = request.headers["mcp-session-id"];
      const body = request.method === "POST" ? await readJson(request) : undefined;
      let transport = sessionId ? transports.get(sessionId) : undefined;
      if (!transport && !sessionId && request.method === "POST" && isInitializeRequest(body)) {
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => transports.set(id, transport),
        });
        transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
        await sessionServer().connect(transport);
      }
      if (!transport) {
        response.writeHead(sessionId ? 404 : 400, { "content-type": "application/json" }).end(
          JSON.stringify({
            jsonrpc: "2.0",
            id: null,
            error: { code: -32000, message: sessionId ? "Session not found" : "No session: initialize first" },
          }),
        );
        return;
      }
      await transport.handleRequest(request, response, body);
    } catch (error) {
      if (!response.headersSent) {
        response.writeHead(400, { "content-type": "application/json" }).end(
          JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: String(error?.message ?? error) } }),
        );
      }
    }
  });
  http.listen(Number(portArgument), "127.0.0.1");
}
