// Pages of other origins against a running daemon, in Chromium (browser_origins.rs).
//
//   node browser-origins.mjs <daemon base URL> <API key> <hostile port> <app port> <marker path>
//
// Serves two pages from this process on loopback: a hostile one on <hostile port> (an origin the
// daemon does not allow) and a browser AI app on <app port> (allowed with --cors-origin). The
// hostile page tries what any local page could: a text/plain POST importing a stdio server that
// would create <marker>, a test-connection of one, the event stream over WebSocket and SSE, and
// /mcp. The app initializes an MCP session with the key, lists tools and searches them, and
// tries what it may not. Prints one JSON object: what each page saw.
import http from "node:http";
import { launchChromium } from "./browser.mjs";

const [base, key, hostilePort, appPort, marker] = process.argv.slice(2);
const wsBase = base.replace(/^http/, "ws");

const hostile = `
window.results = (async () => {
  const seen = {};
  const shell = { command: "sh", args: ["-c", "touch ${marker}"] };
  const simplePost = (path, body) => fetch("${base}" + path, {
    method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body: JSON.stringify(body),
  }).then(() => "sent", (error) => "failed: " + error);
  seen.import = await simplePost("/api/servers/import", { mcpServers: { pwned: shell } });
  seen.testConnection = await simplePost("/api/test-connection", shell);
  seen.add = await simplePost("/api/servers", { id: "pwned", ...shell });
  seen.readServers = await fetch("${base}/api/servers").then((r) => r.status, () => "refused");
  seen.websocket = await new Promise((resolve) => {
    const socket = new WebSocket("${wsBase}/api/events/ws", ["switchboard"]);
    socket.onmessage = (message) => resolve("read: " + String(message.data).slice(0, 40));
    socket.onerror = () => resolve("refused");
    socket.onclose = () => resolve("refused");
    setTimeout(() => resolve("no answer"), 5000);
  });
  seen.events = await new Promise((resolve) => {
    const source = new EventSource("${base}/api/events");
    source.addEventListener("status", () => { source.close(); resolve("read"); });
    source.onerror = () => { source.close(); resolve("refused"); };
    setTimeout(() => { source.close(); resolve("no answer"); }, 5000);
  });
  seen.mcp = await fetch("${base}/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
  }).then((r) => r.status, () => "refused");
  return seen;
})();`;

const app = `
window.results = (async () => {
  const seen = {};
  const post = (body, headers = {}) => fetch("${base}/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(body),
  });
  const auth = { authorization: "Bearer ${key}" };
  const initialize = {
    jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "browser-app", version: "1" } },
  };
  try {
    const answer = await post(initialize, auth);
    seen.initializeStatus = answer.status;
    seen.session = answer.headers.get("mcp-session-id");
    seen.initialize = (await answer.text()).includes("protocolVersion");
    const session = { ...auth, "mcp-session-id": seen.session, "mcp-protocol-version": "2025-11-25" };
    await post({ jsonrpc: "2.0", method: "notifications/initialized" }, session);
    const tools = await post({ jsonrpc: "2.0", id: 2, method: "tools/list" }, session);
    seen.toolsList = (await tools.text()).includes('"tools"');
  } catch (error) {
    seen.initialize = "failed: " + error;
  }
  seen.search = await fetch("${base}/api/tools/search?q=echo", { headers: auth })
    .then((r) => r.status, () => "refused");
  seen.withoutKey = await post(initialize).then((r) => r.status, () => "refused");
  seen.servers = await fetch("${base}/api/servers", { headers: auth }).then((r) => r.status, () => "refused");
  seen.add = await fetch("${base}/api/servers", {
    method: "POST", headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ id: "pwned", command: "sh", args: ["-c", "touch ${marker}"] }),
  }).then((r) => r.status, () => "refused");
  return seen;
})();`;

function page(script) {
  return `<!doctype html><html><head><title>page</title></head><body><script>${script}</script></body></html>`;
}

function serve(port, body) {
  const server = http.createServer((_, response) => {
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end(page(body));
  });
  return new Promise((resolve) => server.listen(Number(port), "127.0.0.1", () => resolve(server)));
}

const servers = [await serve(hostilePort, hostile), await serve(appPort, app)];
const browser = await launchChromium();
try {
  const seen = {};
  for (const [name, port] of [["hostile", hostilePort], ["app", appPort]]) {
    const tab = await browser.newPage();
    await tab.goto(`http://127.0.0.1:${port}/`);
    seen[name] = await tab.evaluate(() => window.results);
    await tab.close();
  }
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
  for (const server of servers) server.close();
}
