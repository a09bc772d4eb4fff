// A server built on the official TypeScript SDK (v1, sessions, 2025-11-25) that offers what the
// MCP conformance suite's server scenarios call by name (`test_simple_text`,
// `test://static-text`, `test_prompt_with_arguments`, ...). .ci/conformance.sh puts it behind
// `switchboard serve` as the only upstream and runs the suite against Switchboard, so the whole
// pass-through path (sessions, SSE, progress, logging, sampling and elicitation relayed from the
// server to the suite's client, subscriptions, completions, resumption) is held to the suite
// with the TypeScript SDK's server on the other side, not only with our Rust fixture.
//
//   node conformance-upstream.mjs --port <port> [--dual-era]     (listens on 127.0.0.1 only)
//
// With --dual-era it also has a stateless 2026-07-28 face, bolted on the way the conformance
// repository's reference server (examples/servers/typescript/everything-server.ts) bolts one on
// a TypeScript SDK v1 server: each stateless request is dispatched to a fresh `Server` over an
// in-memory client that declares no capabilities, so that face offers less than the sessions
// do. It declares no resource subscriptions, logging or completions, and its tools cannot ask
// for sampling or elicitation (the SDK refuses the request: the in-memory client cannot take
// it). .ci/conformance.sh runs the suite's server scenarios of both revisions against it directly
// and through Switchboard and requires every scenario that passes directly to pass through
// Switchboard too (.ci/conformance-compare.mjs).
//
// Written for Switchboard's tests (the conformance repository's own reference server is not
// published to any registry CI can reach); it follows the suite's documented fixture surface.
// `test_reconnection` closes the call's stream and answers 100 ms later, as the reference server
// does, with a `retry` of 500 ms: the answer is sent while no stream is attached. Through
// Switchboard, the suite's client sees the stream end too, and its reconnection resumes the
// server's stream (SEP-1699 through a proxy; the SDK keeps the answer in its event store).
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  isInitializeRequest,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  ResultSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const portFlag = process.argv.indexOf("--port");
const port = Number(portFlag > 0 ? process.argv[portFlag + 1] : 0);
const DUAL_ERA = process.argv.includes("--dual-era");
/** The `retry` announced on every SSE stream, in milliseconds. */
const RETRY_MS = 500;
const LOGGER = "conformance-test-server";
const IMAGE_PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const AUDIO_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const noArguments = { type: "object", properties: {} };
const stringArgument = (name, description) => ({
  type: "object",
  properties: { [name]: { type: "string", description } },
  required: [name],
});
const TOOLS = [
  ["test_simple_text", "Tests simple text content response", noArguments],
  ["test_image_content", "Tests image content response", noArguments],
  ["test_audio_content", "Tests audio content response", noArguments],
  ["test_embedded_resource", "Tests embedded resource content response", noArguments],
  ["test_multiple_content_types", "Tests response with multiple content types", noArguments],
  ["test_tool_with_logging", "Tests tool that emits log messages during execution", noArguments],
  ["test_tool_with_progress", "Tests tool that reports progress notifications", noArguments],
  ["test_error_handling", "Tests error response handling", noArguments],
  ["test_reconnection", "Closes the call's stream mid-call and answers 100 ms later (SEP-1699)", noArguments],
  ["test_sampling", "Tests server-initiated sampling (LLM completion request)",
    stringArgument("prompt", "The prompt to send to the LLM")],
  ["test_elicitation", "Tests server-initiated elicitation (user input request)",
    stringArgument("message", "The message to show the user")],
  ["test_elicitation_sep1034_defaults", "Tests elicitation with default values (SEP-1034)", noArguments],
  ["test_elicitation_sep1330_enums", "Tests elicitation with enum schemas (SEP-1330)", noArguments],
  ["json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)", {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    $defs: {
      address: {
        $anchor: "addressDef",
        type: "object",
        properties: { street: { type: "string" }, city: { type: "string" } },
      },
    },
    properties: {
      name: { type: "string" },
      address: { $ref: "#/$defs/address" },
      contactMethod: { type: "string", enum: ["phone", "email"] },
      phone: { type: "string" },
      email: { type: "string" },
    },
    allOf: [{ anyOf: [{ required: ["phone"] }, { required: ["email"] }] }],
    if: { properties: { contactMethod: { const: "phone" } }, required: ["contactMethod"] },
    then: { required: ["phone"] },
    else: { required: ["email"] },
    additionalProperties: false,
  }],
].map(([name, description, inputSchema]) => ({ name, description, inputSchema }));

const SEP1034_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", description: "User name", default: "John Doe" },
    age: { type: "integer", description: "User age", default: 30 },
    score: { type: "number", description: "User score", default: 95.5 },
    status: { type: "string", description: "User status", enum: ["active", "inactive", "pending"], default: "active" },
    verified: { type: "boolean", description: "Verification status", default: true },
  },
  required: [],
};
const titled = (prefix, word) =>
  [1, 2, 3].map((n) => ({ const: `${prefix}${n}`, title: `${["First", "Second", "Third"][n - 1]} ${word}` }));
const SEP1330_SCHEMA = {
  type: "object",
  properties: {
    untitledSingle: { type: "string", description: "Select one option", enum: ["option1", "option2", "option3"] },
    titledSingle: { type: "string", description: "Select one option with titles", oneOf: titled("value", "Option") },
    legacyEnum: {
      type: "string", description: "Select one option (legacy)",
      enum: ["opt1", "opt2", "opt3"], enumNames: ["Option One", "Option Two", "Option Three"],
    },
    untitledMulti: {
      type: "array", description: "Select multiple options", minItems: 1, maxItems: 3,
      items: { type: "string", enum: ["option1", "option2", "option3"] },
    },
    titledMulti: {
      type: "array", description: "Select multiple options with titles", minItems: 1, maxItems: 3,
      items: { anyOf: titled("value", "Choice") },
    },
  },
  required: [],
};

const RESOURCES = [
  { uri: "test://static-text", name: "static-text", title: "Static Text Resource",
    description: "A static text resource for testing", mimeType: "text/plain" },
  { uri: "test://static-binary", name: "static-binary", title: "Static Binary Resource",
    description: "A static binary resource (image) for testing", mimeType: "image/png" },
  { uri: "test://watched-resource", name: "watched-resource", title: "Watched Resource",
    description: "A resource clients can subscribe to", mimeType: "text/plain" },
];
const TEMPLATES = [
  { uriTemplate: "test://template/{id}/data", name: "template", title: "Resource Template",
    description: "A resource template with parameter substitution", mimeType: "application/json" },
];
const PROMPTS = [
  { name: "test_simple_prompt", title: "Simple Test Prompt", description: "A simple prompt without arguments" },
  { name: "test_prompt_with_arguments", title: "Prompt With Arguments", description: "A prompt with required arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ] },
  { name: "test_prompt_with_embedded_resource", title: "Prompt With Embedded Resource",
    description: "A prompt that includes an embedded resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }] },
  { name: "test_prompt_with_image", title: "Prompt With Image", description: "A prompt that includes image content" },
];

const text = (value) => ({ content: [{ type: "text", text: String(value) }] });

/** One session's server, answering on `transport`. */
function sessionServer(transport) {
  const server = new Server(
    { name: "switchboard-ts-sdk-conformance-upstream", version: "1.0.0" },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  const log = (extra, data) =>
    extra.sendNotification({ method: "notifications/message", params: { level: "info", logger: LOGGER, data } });
  const elicit = async (extra, message, requestedSchema, label) => {
    const answer = await extra.sendRequest(
      { method: "elicitation/create", params: { message, requestedSchema } },
      ElicitResultSchema,
    );
    return text(`${label}: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments ?? {};
    switch (request.params.name) {
      case "test_simple_text":
        return text("This is a simple text response for testing.");
      case "test_image_content":
        return { content: [{ type: "image", data: IMAGE_PNG, mimeType: "image/png" }] };
      case "test_audio_content":
        return { content: [{ type: "audio", data: AUDIO_WAV, mimeType: "audio/wav" }] };
      case "test_embedded_resource":
        return { content: [{ type: "resource", resource: {
          uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." } }] };
      case "test_multiple_content_types":
        return { content: [
          { type: "text", text: "Multiple content types test:" },
          { type: "image", data: IMAGE_PNG, mimeType: "image/png" },
          { type: "resource", resource: {
            uri: "test://mixed-content-resource", mimeType: "application/json", text: '{"test":"data","value":123}' } },
        ] };
      case "test_tool_with_logging":
        for (const [i, message] of ["Tool execution started", "Tool processing data", "Tool execution completed"].entries()) {
          if (i > 0) await sleep(50);
          await log(extra, message);
        }
        return text("Tool with logging executed successfully");
      case "test_tool_with_progress": {
        const token = request.params._meta?.progressToken;
        for (const step of [0, 50, 100]) {
          if (step > 0) await sleep(50);
          if (token !== undefined) {
            await extra.sendNotification({ method: "notifications/progress", params: {
              progressToken: token, progress: step, total: 100, message: `Completed step ${step} of 100` } });
          }
        }
        return text(token ?? 0);
      }
      case "test_error_handling":
        return { isError: true, content: [{ type: "text", text: "This tool intentionally returns an error for testing" }] };
      case "test_reconnection":
        transport.closeSSEStream(extra.requestId);
        await sleep(100);
        return text("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.");
      case "test_sampling": {
        const answer = await extra.sendRequest({ method: "sampling/createMessage", params: {
          messages: [{ role: "user", content: { type: "text", text: String(args.prompt ?? "") } }], maxTokens: 100 } },
          CreateMessageResultSchema);
        return text(`LLM response: ${answer.content?.text ?? "No response"}`);
      }
      case "test_elicitation":
        return elicit(extra, String(args.message ?? ""), {
          type: "object", properties: { response: { type: "string", description: "User's response" } }, required: ["response"] },
          "User response");
      case "test_elicitation_sep1034_defaults":
        return elicit(extra, "Please review and update the form fields with defaults", SEP1034_SCHEMA, "Elicitation completed");
      case "test_elicitation_sep1330_enums":
        return elicit(extra, "Please select options from the enum fields", SEP1330_SCHEMA, "Elicitation completed");
      case "json_schema_2020_12_tool":
        return text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`);
      default:
        throw new McpError(ErrorCode.InvalidParams, `unknown tool '${request.params.name}'`);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: TEMPLATES }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const uri = request.params.uri;
    const id = /^test:\/\/template\/([^/]+)\/data$/.exec(uri)?.[1];
    const contents =
      uri === "test://static-text" ? { uri, mimeType: "text/plain", text: "This is the content of the static text resource." }
      : uri === "test://static-binary" ? { uri, mimeType: "image/png", blob: IMAGE_PNG }
      : uri === "test://watched-resource" ? { uri, mimeType: "text/plain", text: "Watched resource content" }
      : id ? { uri, mimeType: "application/json", text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }
      : undefined;
    if (!contents) throw new McpError(ErrorCode.InvalidParams, `Resource ${uri} not found`, { uri });
    return { contents: [contents] };
  });
  server.setRequestHandler(SubscribeRequestSchema, async () => ({}));
  server.setRequestHandler(UnsubscribeRequestSchema, async () => ({}));

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) => {
    const args = request.params.arguments ?? {};
    const user = (content) => ({ role: "user", content });
    switch (request.params.name) {
      case "test_simple_prompt":
        return { messages: [user({ type: "text", text: "This is a simple prompt for testing." })] };
      case "test_prompt_with_arguments":
        return { messages: [user({ type: "text", text: `Prompt with arguments: arg1='${args.arg1 ?? ""}', arg2='${args.arg2 ?? ""}'` })] };
      case "test_prompt_with_embedded_resource":
        return { messages: [
          user({ type: "resource", resource: { uri: args.resourceUri ?? "", mimeType: "text/plain", text: "Embedded resource content for testing." } }),
          user({ type: "text", text: "Please process the embedded resource above." }),
        ] };
      case "test_prompt_with_image":
        return { messages: [
          user({ type: "image", data: IMAGE_PNG, mimeType: "image/png" }),
          user({ type: "text", text: "Please analyze the image above." }),
        ] };
      default:
        throw new McpError(ErrorCode.InvalidParams, `unknown prompt '${request.params.name}'`);
    }
  });
  server.setRequestHandler(CompleteRequestSchema, async () => ({ completion: { values: [], total: 0, hasMore: false } }));
  server.setRequestHandler(SetLevelRequestSchema, async (request, extra) => {
    await log(extra, `Log level set to: ${request.params.level}`);
    return {};
  });
  return server;
}

/** Events of every session's streams, kept for resumption with `Last-Event-ID`. */
function eventStore() {
  const events = [];
  return {
    async storeEvent(streamId, message) {
      const eventId = `${streamId}_${String(events.length).padStart(10, "0")}`;
      events.push({ eventId, streamId, message });
      return eventId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const at = events.findIndex((event) => event.eventId === lastEventId);
      if (at < 0) throw new Error(`unknown event id ${lastEventId}`);
      const { streamId } = events[at];
      for (const event of events.slice(at + 1)) {
        if (event.streamId === streamId) await send(event.eventId, event.message);
      }
      return streamId;
    },
  };
}

const transports = new Map();
const store = eventStore();

async function readJson(request) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const body = Buffer.concat(chunks).toString("utf8");
  return body ? JSON.parse(body) : undefined;
}


// --- the stateless 2026-07-28 face (--dual-era) ------------------------------------------------
const STATELESS_VERSION = "2026-07-28";
const META_VERSION = "io.modelcontextprotocol/protocolVersion";
const LEGACY_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/** What the stateless face serves; anything else is -32601 there. */
const STATELESS_METHODS = new Set([
  "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
  "prompts/list", "prompts/get", "ping",
]);
const CACHEABLE = new Set(["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"]);

/** Whether a session-less POST is 2026-07-28 traffic (per-request `_meta`, or a non-legacy
 *  version header) rather than a legacy client's `initialize`. */
function isStatelessRequest(request, body) {
  if (!DUAL_ERA || request.headers["mcp-session-id"] || !body || Array.isArray(body)) return false;
  const header = request.headers["mcp-protocol-version"];
  const meta = body.params?._meta;
  return meta?.[META_VERSION] !== undefined || (header !== undefined && !LEGACY_VERSIONS.includes(header));
}

const statelessError = (response, status, id, code, message, data) =>
  response.writeHead(status, { "content-type": "application/json" })
    .end(JSON.stringify({ jsonrpc: "2.0", id, error: { code, message, ...(data ? { data } : {}) } }));

/** Completes a stateless result as 2026-07-28 wants it (`resultType`, cache hints). */
function statelessResult(method, result) {
  result.resultType ??= "complete";
  if (CACHEABLE.has(method)) {
    result.ttlMs ??= 0;
    result.cacheScope ??= "private";
  }
  return result;
}

/** Open `subscriptions/listen` streams; this face announces no list changes, so they only stay open. */
const listenStreams = new Set();

async function serveStateless(request, response, body) {
  const id = body.id ?? null;
  const method = body.method;
  const params = body.params ?? {};
  const meta = params._meta ?? {};
  const header = request.headers["mcp-protocol-version"];
  if (!header) return statelessError(response, 400, id, -32020, "Missing MCP-Protocol-Version header");
  if (!meta[META_VERSION] || !meta["io.modelcontextprotocol/clientCapabilities"]) {
    return statelessError(response, 400, id, -32602, "Invalid params: missing _meta or required fields");
  }
  if (header !== meta[META_VERSION]) return statelessError(response, 400, id, -32020, "Mismatched MCP-Protocol-Version header");
  if (meta[META_VERSION] !== STATELESS_VERSION) {
    return statelessError(response, 400, id, -32022, "UnsupportedProtocolVersionError",
      { supported: [STATELESS_VERSION], requested: String(meta[META_VERSION]) });
  }
  if (body.id === undefined) {
    response.writeHead(202).end();
    return;
  }
  if (method === "server/discover") {
    const result = statelessResult(method, {
      supportedVersions: [STATELESS_VERSION],
      capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: {} },
      _meta: { "io.modelcontextprotocol/serverInfo": { name: "switchboard-ts-sdk-dual-era-stateless", version: "1.0.0" } },
    });
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, result }));
    return;
  }
  if (method === "subscriptions/listen") {
    const wanted = params.notifications ?? {};
    response.writeHead(200, { "content-type": "application/json", "cache-control": "no-cache" });
    response.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/subscriptions/acknowledged", params: {
      _meta: { "io.modelcontextprotocol/subscriptionId": String(id) },
      notifications: {
        ...(wanted.toolsListChanged === true ? { toolsListChanged: true } : {}),
        ...(wanted.promptsListChanged === true ? { promptsListChanged: true } : {}),
      },
    } }) + "\n");
    listenStreams.add(response);
    response.on("close", () => listenStreams.delete(response));
    return;
  }
  if (!STATELESS_METHODS.has(method)) {
    return statelessError(response, 200, id, -32601, `Method not found on the stateless face: ${method}`);
  }
  // A fresh server per request, reached over an in-memory client that declares nothing: its
  // tools' sampling and elicitation requests are refused by the SDK, as the reference server's are.
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = sessionServer({ closeSSEStream() {} });
  const client = new Client({ name: "stateless-dispatch", version: "1.0.0" }, { capabilities: {} });
  const progress = [];
  const token = meta.progressToken;
  try {
    await server.connect(serverSide);
    await client.connect(clientSide);
    const { _meta: _ignored, ...rest } = params;
    const onprogress = token === undefined ? undefined : (p) =>
      progress.push({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: token, ...p } });
    const result = await client.request({ method, params: rest }, ResultSchema, { onprogress });
    const answer = { jsonrpc: "2.0", id, result: statelessResult(method, result) };
    if (progress.length === 0) {
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
    } else {
      response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      for (const message of [...progress, answer]) response.write(`data: ${JSON.stringify(message)}\n\n`);
      response.end();
    }
  } catch (error) {
    const code = typeof error?.code === "number" ? error.code : ErrorCode.InternalError;
    const message = String(error?.message ?? error).replace(/^(MCP error -?\d+: )+/, "");
    statelessError(response, 200, id, code, message, error?.data);
  } finally {
    await client.close().catch(() => {});
    await server.close().catch(() => {});
  }
}

const http = createServer(async (request, response) => {
  try {
    if (new URL(request.url, "http://127.0.0.1").pathname !== "/mcp") {
      response.writeHead(404).end();
      return;
    }
    const sessionId = request.headers["mcp-session-id"];
    const body = request.method === "POST" ? await readJson(request) : undefined;
    if (request.method === "POST" && isStatelessRequest(request, body)) {
      await serveStateless(request, response, body);
      return;
    }
    let transport = sessionId ? transports.get(sessionId) : undefined;
    if (!transport && !sessionId && request.method === "POST" && isInitializeRequest(body)) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: store,
        retryInterval: RETRY_MS,
        onsessioninitialized: (id) => {
          transports.set(id, transport);
          // Tests count the sessions opened from here.
          console.error(`session opened: ${id}`);
        },
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await sessionServer(transport).connect(transport);
    }
    if (!transport) {
      response.writeHead(sessionId ? 404 : 400, { "content-type": "application/json" }).end(JSON.stringify({
        jsonrpc: "2.0", id: null, error: { code: -32000, message: sessionId ? "Session not found" : "No session: initialize first" },
      }));
      return;
    }
    await transport.handleRequest(request, response, body);
  } catch (error) {
    if (!response.headersSent) {
      response.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({
        jsonrpc: "2.0", id: null, error: { code: -32700, message: String(error?.message ?? error) },
      }));
    }
  }
});
http.listen(port, "127.0.0.1", () => {
  console.error(`conformance upstream (TypeScript SDK${DUAL_ERA ? ", dual-era" : ""}) on http://127.0.0.1:${http.address().port}/mcp`);
});
