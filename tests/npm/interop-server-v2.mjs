// An upstream MCP server on the official TypeScript SDK v2 (`@modelcontextprotocol/server`), for
// Switchboard's interop matrix (crates/switchboard/tests/interop_matrix.rs):
//
//   node interop-server-v2.mjs <port>     createMcpHandler at /mcp (127.0.0.1 only)
//
// v2 speaks the stateless 2026-07-28 revision (and answers 2025-era requests statelessly through
// its legacy fallback). The same tools as every interop server (see tests/py/server_mcp1.py),
// written the v2 way: sampling, elicitation and roots are `inputRequired(...)` results (the
// client answers them in a retried call), progress goes out with `ctx.mcpReq.notify`, a
// cancelled call is one whose HTTP exchange the client abandoned (`ctx.mcpReq.signal`), and
// resource updates reach `subscriptions/listen` streams through `handler.notify`.
import { createServer } from "node:http";
import { createMcpHandler, fromJsonSchema, inputRequired, McpServer } from "@modelcontextprotocol/server";

const port = Number(process.argv[2]);
const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason ?? new Error("aborted"));
    });
  });
const object = (properties = {}) =>
  fromJsonSchema({ type: "object", properties, required: Object.keys(properties) });
const text = (value) => ({ content: [{ type: "text", text: String(value) }] });

const cancelled = new Set();
let counter = 0;

/** A fresh server instance; `createMcpHandler` makes one for every request. */
function build() {
  const server = new McpServer(
    { name: "interop-ts-v2", version: "2.4.0" },
    { capabilities: { tools: {}, resources: { subscribe: true } } },
  );
  server.registerTool("echo", { description: "Echoes its text", inputSchema: object({ text: { type: "string" } }) },
    async ({ text: said }) => text(`echo: ${said}`));
  server.registerTool("progress", { description: "Reports progress 1, 2, 3 of 3", inputSchema: object() },
    async (_args, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      for (const step of [1, 2, 3]) {
        if (token !== undefined) {
          await ctx.mcpReq.notify({
            method: "notifications/progress",
            params: { progressToken: token, progress: step, total: 3 },
          });
        }
        await sleep(50);
      }
      return text("progressed");
    });
  server.registerTool("slow", { description: "Sleeps 30 s; records its cancellation", inputSchema: object({ tag: { type: "string" } }) },
    async ({ tag }, ctx) => {
      try {
        await sleep(30_000, ctx.mcpReq.signal);
      } catch (error) {
        cancelled.add(tag);
        throw error;
      }
      return text("finished");
    });
  server.registerTool("was_cancelled", { description: "`yes` once that `slow` call was cancelled", inputSchema: object({ tag: { type: "string" } }) },
    async ({ tag }) => text(cancelled.has(tag) ? "yes" : "no"));
  server.registerTool("sample", { description: "Asks the client's model", inputSchema: object() }, async (_args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.answer;
    if (!answer) {
      return inputRequired({
        inputRequests: {
          answer: inputRequired.createMessage({
            messages: [{ role: "user", content: { type: "text", text: "say hi" } }],
            maxTokens: 16,
          }),
        },
      });
    }
    return text(answer.content?.text);
  });
  server.registerTool("elicit", { description: "Asks the user for a name", inputSchema: object() }, async (_args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.person;
    if (!answer) {
      return inputRequired({
        inputRequests: {
          person: inputRequired.elicit({
            message: "Who are you?",
            requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
          }),
        },
      });
    }
    return text(`${answer.action}:${answer.content?.name ?? ""}`);
  });
  server.registerTool("roots", { description: "Asks the client for its roots", inputSchema: object() }, async (_args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.roots;
    if (!answer) {
      return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
    }
    return text(JSON.stringify(answer.roots.map((root) => root.uri)));
  });
  server.registerTool("bump", { description: "Increments test://counter and tells its subscribers", inputSchema: object() },
    async () => {
      counter += 1;
      handler.notify.resourceUpdated("test://counter");
      return text(counter);
    });
  server.registerResource("counter", "test://counter", { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: String(counter) }],
  }));
  return server;
}

const handler = createMcpHandler(build);

/** Serves one Node request through the web-standard handler; a client that leaves aborts it. */
async function serve(request, response) {
  if (new URL(request.url, "http://127.0.0.1").pathname !== "/mcp") {
    response.writeHead(404).end();
    return;
  }
  const abandoned = new AbortController();
  response.on("close", () => {
    if (!response.writableFinished) abandoned.abort();
  });
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === "string") headers.set(name, value);
  }
  const answer = await handler.fetch(
    new Request(`http://127.0.0.1:${port}${request.url}`, {
      method: request.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
      signal: abandoned.signal,
    }),
  );
  response.writeHead(answer.status, Object.fromEntries(answer.headers));
  if (answer.body) {
    try {
      for await (const chunk of answer.body) response.write(chunk);
    } catch {
      // the client left mid-stream
    }
  }
  response.end();
}

createServer((request, response) =>
  serve(request, response).catch((error) => {
    if (!response.headersSent) response.writeHead(500).end(String(error?.message ?? error));
  }),
).listen(port, "127.0.0.1");
