// A real authorization server and an MCP server it protects, for
// crates/switchboard/tests/real_authorization_server.rs:
//
//   node oidc-protected-server.mjs [--access-token-ttl <seconds>] [--switchboard-audience <uri>]
//
// The authorization server is oidc-provider (OpenID Certified), configured as an MCP server's
// authorization server is in the field: open dynamic client registration (RFC 7591), PKCE S256
// required of public clients (its default), refresh tokens that rotate on every use and revoke
// the whole grant when a retired one is presented (its defaults for public clients), resource
// indicators (RFC 8707) binding each access token to the MCP server as its audience, token
// revocation (RFC 7009), and a login and consent page a person fills in (user `ada`, password
// `lovelace`, or `grace`, password `hopper`; the consent page has Allow and Deny).
//
// With --switchboard-audience it is also a team's identity provider for Switchboard itself:
// access tokens for that resource (scope `switchboard`) are JWTs naming the person (`sub`),
// their tenant (`tenant`: acme) and their roles (`roles`: ada is a `switchboard-admin`).
//
// The MCP server (official TypeScript SDK, stateless Streamable HTTP) publishes its protected
// resource metadata (RFC 9728), checks each bearer token's signature against the authorization
// server's JWKS, its issuer and its audience, and asks for a higher scope (403
// `insufficient_scope`) on the one tool that needs `mcp:admin`.
//
// Prints one JSON line, {"issuer", "mcp", "events"}, once both listen (127.0.0.1 only).
// `GET <events>` answers what the authorization server did so far (registrations, token grants,
// refresh tokens consumed, grants revoked, errors), so the test can hold Switchboard to what the
// server saw and not only to what Switchboard says.
import { createServer } from "node:http";
import { once } from "node:events";
import * as jose from "jose";
import Provider, { errors } from "oidc-provider";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const ttlFlag = process.argv.indexOf("--access-token-ttl");
const ACCESS_TOKEN_TTL = Number(ttlFlag > 0 ? process.argv[ttlFlag + 1] : 3600);
const sbFlag = process.argv.indexOf("--switchboard-audience");
const SWITCHBOARD_AUDIENCE = sbFlag > 0 ? process.argv[sbFlag + 1] : null;
const USERS = {
  ada: { password: "lovelace", tenant: "acme", roles: ["switchboard-admin"] },
  grace: { password: "hopper", tenant: "acme", roles: ["engineering"] },
};
const READ = "mcp:read";
const ADMIN = "mcp:admin";

const listen = async (server) => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${server.address().port}`;
};
const asServer = createServer();
const mcpServer = createServer();
const ISSUER = await listen(asServer);
const MCP_BASE = await listen(mcpServer);
const MCP_URL = `${MCP_BASE}/mcp`;
const METADATA_URL = `${MCP_BASE}/.well-known/oauth-protected-resource/mcp`;

// ---------------------------------------------------------------- the authorization server
const { privateKey } = await jose.generateKeyPair("RS256", { extractable: true });
const signingKey = { ...(await jose.exportJWK(privateKey)), kid: "test-key", alg: "RS256", use: "sig" };

/** What the authorization server did, in order: `{event, ...}`. */
const events = [];
const provider = new Provider(ISSUER, {
  jwks: { keys: [signingKey] },
  cookies: { keys: ["switchboard-test-cookie-key"] },
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  scopes: ["openid", "offline_access"],
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, resource) => {
        if (SWITCHBOARD_AUDIENCE && resource === SWITCHBOARD_AUDIENCE) {
          return {
            scope: "switchboard",
            audience: SWITCHBOARD_AUDIENCE,
            accessTokenTTL: ACCESS_TOKEN_TTL,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "RS256" } },
          };
        }
        if (resource !== MCP_URL) throw new errors.InvalidTarget(`unknown resource ${resource}`);
        return {
          scope: `${READ} ${ADMIN}`,
          audience: MCP_URL,
          accessTokenTTL: ACCESS_TOKEN_TTL,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        };
      },
    },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  // Who the person is, in the tokens Switchboard takes from its team's provider.
  extraTokenClaims: async (_ctx, token) => {
    const user = USERS[token.accountId];
    const audience = token.resourceServer?.audience ?? token.aud;
    if (!SWITCHBOARD_AUDIENCE || audience !== SWITCHBOARD_AUDIENCE || !user) return undefined;
    return { tenant: user.tenant, roles: user.roles };
  },
});
provider.on("registration_create.success", (_ctx, client) =>
  events.push({ event: "registered", client: client.clientId, redirectUris: client.redirectUris }));
provider.on("grant.success", (ctx) =>
  events.push({ event: "token", grantType: ctx.oidc.params.grant_type, resource: ctx.oidc.params.resource }));
provider.on("grant.error", (ctx, error) =>
  events.push({ event: "token-error", grantType: ctx.oidc.params?.grant_type, error: error.message }));
provider.on("refresh_token.consumed", () => events.push({ event: "refresh-token-consumed" }));
provider.on("grant.revoked", () => events.push({ event: "grant-revoked" }));
provider.on("revocation.success", () => events.push({ event: "revoked" }));
provider.on("authorization.error", (_ctx, error) =>
  events.push({ event: "authorization-error", error: error.message, detail: error.error_description }));

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title, body) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title></head>` +
  `<body><h1>${escape(title)}</h1>${body}</body></html>`;
const form = async (req) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
};

/** The login and consent pages, as an authorization server's own sign-in pages are. */
async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params } = details;
  const action = `/interaction/${uid}`;
  if (req.method === "GET") {
    res.setHeader("content-type", "text/html; charset=utf-8");
    if (prompt.name === "login") {
      res.end(page("Sign in", `<form method="post" action="${action}">
        <label>User <input name="login" autocomplete="username"></label>
        <label>Password <input name="password" type="password"></label>
        <button type="submit" name="action" value="login">Sign in</button></form>`));
    } else {
      const wanted = [
        ...(prompt.details.missingOIDCScope ?? []),
        ...Object.values(prompt.details.missingResourceScopes ?? {}).flat(),
      ];
      res.end(page(`Allow ${params.client_id}?`, `<p id="scopes">${escape(wanted.join(" "))}</p>
        <form method="post" action="${action}">
        <button type="submit" name="action" value="allow">Allow</button>
        <button type="submit" name="action" value="deny">Deny</button></form>`));
    }
    return;
  }
  const submitted = await form(req);
  let result;
  if (prompt.name === "login") {
    const user = USERS[submitted.get("login")];
    if (!user || submitted.get("password") !== user.password) {
      res.statusCode = 401;
      res.setHeader("content-type", "text/html; charset=utf-8");
      res.end(page("Wrong user or password", `<a href="${action}">Try again</a>`));
      return;
    }
    result = { login: { accountId: submitted.get("login") } };
  } else if (submitted.get("action") !== "allow") {
    result = { error: "access_denied", error_description: "The user denied the request" };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(" "));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    for (const [resource, scopes] of Object.entries(prompt.details.missingResourceScopes ?? {})) {
      grant.addResourceScope(resource, scopes.join(" "));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}

const providerCallback = provider.callback();
asServer.on("request", (req, res) => {
  if (req.url.startsWith("/interaction/")) {
    interaction(req, res).catch((error) => {
      res.statusCode = 400;
      res.end(page("Sign-in failed", escape(error.message)));
    });
  } else {
    providerCallback(req, res);
  }
});

// ---------------------------------------------------------------- the protected MCP server
const jwks = jose.createRemoteJWKSet(new URL(`${ISSUER}/jwks`));
const challenge = (res, status, fields) => {
  const params = Object.entries({ resource_metadata: METADATA_URL, ...fields })
    .map(([k, v]) => `${k}="${v}"`)
    .join(", ");
  res.writeHead(status, { "www-authenticate": `Bearer ${params}`, "content-type": "application/json" });
  res.end(JSON.stringify({ error: fields.error ?? "unauthorized" }));
};

/** The token's claims, or `null` after answering 401. */
async function authenticate(req, res) {
  const header = req.headers.authorization ?? "";
  if (!header.startsWith("Bearer ")) {
    challenge(res, 401, { scope: READ });
    return null;
  }
  try {
    const { payload } = await jose.jwtVerify(header.slice(7), jwks, { issuer: ISSUER, audience: MCP_URL });
    return payload;
  } catch (error) {
    challenge(res, 401, { error: "invalid_token", error_description: error.code ?? "invalid" });
    return null;
  }
}

const TOOLS = [
  { name: "echo", description: "Echoes a message (needs mcp:read)", inputSchema: {
    type: "object", properties: { message: { type: "string" } }, required: ["message"] } },
  { name: "whoami", description: "The claims of the caller's access token", inputSchema: { type: "object" } },
  { name: "admin_echo", description: "Echoes a message (needs mcp:admin)", inputSchema: {
    type: "object", properties: { message: { type: "string" } }, required: ["message"] } },
];

function mcpFor(claims) {
  const server = new Server({ name: "oidc-protected", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
    const text = (t) => ({ content: [{ type: "text", text: t }] });
    switch (params.name) {
      case "echo":
      case "admin_echo":
        return text(`${params.name}: ${params.arguments?.message ?? ""}`);
      case "whoami":
        return text(JSON.stringify({ sub: claims.sub, aud: claims.aud, scope: claims.scope, client: claims.client_id }));
      default:
        return { isError: true, ...text(`unknown tool ${params.name}`) };
    }
  });
  return server;
}

mcpServer.on("request", async (req, res) => {
  try {
    const path = new URL(req.url, MCP_BASE).pathname;
    if (path === "/events") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(events));
      return;
    }
    if (path === "/.well-known/oauth-protected-resource/mcp" || path === "/.well-known/oauth-protected-resource") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({
        resource: MCP_URL,
        authorization_servers: [ISSUER],
        scopes_supported: [READ, ADMIN],
        bearer_methods_supported: ["header"],
      }));
      return;
    }
    if (path !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    const claims = await authenticate(req, res);
    if (!claims) return;
    const scopes = String(claims.scope ?? "").split(" ");
    let body;
    if (req.method === "POST") {
      let raw = "";
      for await (const chunk of req) raw += chunk;
      body = JSON.parse(raw);
      const messages = Array.isArray(body) ? body : [body];
      const needsAdmin = messages.some((m) => m.method === "tools/call" && m.params?.name === "admin_echo");
      if (!scopes.includes(READ) || (needsAdmin && !scopes.includes(ADMIN))) {
        const needed = needsAdmin ? `${READ} ${ADMIN}` : READ;
        challenge(res, 403, { error: "insufficient_scope", scope: needed });
        return;
      }
    }
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    const server = mcpFor(claims);
    res.on("close", () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  } catch (error) {
    if (!res.headersSent) res.writeHead(400, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: String(error.message ?? error) }));
  }
});

console.log(JSON.stringify({ issuer: ISSUER, mcp: MCP_URL, events: `${MCP_BASE}/events` }));
