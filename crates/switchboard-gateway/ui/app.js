// Switchboard's console: a page over the admin API (docs/api.md), with no build step and no
// dependencies. It keeps the server list in step with the live event stream (a WebSocket, on
// which it also answers the questions tools ask a person), and every other action is one API
// request; what the daemon answers is what the page shows.

const $ = (selector) => document.querySelector(selector);

/** The API key, on a listener that wants one (asked once, kept for this tab). */
let apiKey = sessionStorage.getItem("switchboard-api-key");

/** Whether a server is a process the daemon runs (its own command, or an approved one). */
function runsACommand(server) {
  return ["stdio", "approved"].includes(server?.transport.type);
}

/** An API request; the JSON answer, or an Error with the daemon's words. */
async function api(method, path, body, extra = {}) {
  const headers = { ...extra.headers };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  let payload;
  if (typeof body === "string") {
    payload = body;
  } else if (body !== undefined) {
    headers["content-type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const response = await fetch(path, { method, headers, body: payload, signal: extra.signal });
  if (response.status === 401) {
    apiKey = prompt("This Switchboard wants an API key:");
    if (apiKey) {
      sessionStorage.setItem("switchboard-api-key", apiKey);
      return api(method, path, body, extra);
    }
  }
  if (extra.raw) return response;
  const text = await response.text();
  const answer = text ? JSON.parse(text) : null;
  if (!response.ok) throw new Error(failureOf(answer, response));
  return answer;
}

/**
 * What a failed answer says: the admin API's `{"error": "..."}`, or the message of a JSON-RPC
 * error (the 503 a draining daemon, a store that does not answer or a workspace that cannot
 * open gives), or else the status.
 */
function failureOf(answer, response) {
  const error = answer?.error;
  const said = typeof error === "string" ? error : error?.message;
  return said ?? `${response.status} ${response.statusText}`;
}

/** Reads a Server-Sent Events response, calling `onEvent(name, data)` for each event. */
async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trim());
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value);
  }
  node.append(...children.filter((child) => child !== undefined && child !== null));
  return node;
}

function say(text, isError = false) {
  const message = $("#message");
  message.textContent = text;
  message.className = isError ? "error" : "";
}

// ---- what survives a reload: the open server and tab, the activity, the theme ----

/** What this browser keeps for the console (local storage, this origin only). */
const kept = (() => {
  try {
    const saved = JSON.parse(localStorage.getItem("switchboard-console") ?? "{}");
    const list = (value, fits) => (Array.isArray(value) ? value.filter(fits) : []);
    const open = typeof saved.open?.server === "string" ? { server: saved.open.server, tab: String(saved.open.tab ?? "tools") } : null;
    return {
      open,
      activity: list(saved.activity, (e) => typeof e?.type === "string" && typeof e?.line === "string"),
      history: [],
      theme: ["system", "light", "dark"].includes(saved.theme) ? saved.theme : "system",
    };
  } catch {
    return { open: null, activity: [], history: [], theme: "system" };
  }
})();

function keep() {
  try {
    const { history, ...rest } = kept;
    localStorage.setItem("switchboard-console", JSON.stringify(rest));
    // Answers are the person's: kept under their own name, so another user of this browser
    // (`serve --users`) does not see them.
    if (historyLoaded) localStorage.setItem(historyKey(), JSON.stringify(history));
  } catch {
    // Storage full or refused: the console works on, it only forgets on reload.
  }
}

function historyKey() {
  return `switchboard-history:${me.workspace === "user" ? `${me.tenant}/${me.user}` : "local"}`;
}

/** Whether this person's history was read (until then none is written). */
let historyLoaded = false;

/** The history of this console's person, once it is known whose workspace this is. */
function loadHistory() {
  historyLoaded = true;
  try {
    const saved = JSON.parse(localStorage.getItem(historyKey()) ?? "[]");
    kept.history = Array.isArray(saved)
      ? saved.filter((e) => typeof e?.server === "string" && typeof e?.ending === "string" && typeof e?.at === "number")
      : [];
  } catch {
    kept.history = [];
  }
  renderHistory();
}

/** Keeps which server and tab are open. */
function remember() {
  const tab = document.querySelector("[data-tab].active")?.dataset.tab ?? "tools";
  kept.open = selected ? { server: selected, tab } : null;
  keep();
}

const THEMES = ["system", "light", "dark"];
const darkScheme = matchMedia("(prefers-color-scheme: dark)");

/** The theme shown: the one chosen, or the system's. */
function effectiveTheme() {
  return kept.theme === "system" ? (darkScheme.matches ? "dark" : "light") : kept.theme;
}

function applyTheme() {
  document.documentElement.dataset.theme = effectiveTheme();
  $("#theme").textContent = `Theme: ${kept.theme}`;
  app?.notify("ui/notifications/host-context-changed", themeContext());
}

$("#theme").addEventListener("click", () => {
  kept.theme = THEMES[(THEMES.indexOf(kept.theme) + 1) % THEMES.length];
  keep();
  applyTheme();
});
darkScheme.addEventListener("change", applyTheme);

/** The host context an MCP App's view gets about the look: the theme, and the console's
 * colours and fonts as the spec's CSS variables. */
function themeContext() {
  const style = getComputedStyle(document.documentElement);
  const value = (name) => style.getPropertyValue(name).trim();
  return {
    theme: effectiveTheme(),
    styles: {
      variables: {
        "--color-background-primary": value("--panel"),
        "--color-background-secondary": value("--bg"),
        "--color-text-primary": value("--fg"),
        "--color-text-secondary": value("--muted"),
        "--color-border-primary": value("--line"),
        "--color-text-info": value("--accent"),
        "--font-sans": value("font-family") || "system-ui, sans-serif",
        "--border-radius-md": "6px",
      },
    },
  };
}

// ---- connect a client ----

function showConnect() {
  const mcp = `${location.origin}/mcp`;
  const sse = `${location.origin}/sse`;
  $("#mcp-url").textContent = mcp;
  $("#sse-url").textContent = sse;
  const entries = [
    ["Claude Desktop (claude_desktop_config.json), through mcp-remote",
      { mcpServers: { switchboard: { command: "npx", args: ["-y", "mcp-remote", mcp] } } }],
    ["Claude Desktop, with the switchboard command on this machine",
      { mcpServers: { switchboard: { command: "switchboard", args: ["stdio"] } } }],
    ["Cursor (~/.cursor/mcp.json)", { mcpServers: { switchboard: { url: mcp } } }],
    ["VS Code (.vscode/mcp.json)", { servers: { switchboard: { type: "http", url: mcp } } }],
    ["mcp-remote, for any client that launches commands", `npx -y mcp-remote ${mcp}`],
  ];
  $("#client-entries").replaceChildren(...entries.map(([name, entry]) => {
    const text = typeof entry === "string" ? entry : JSON.stringify(entry, null, 2);
    const copied = element("span", { class: "muted", role: "status" });
    return element("li", { "data-client": name },
      element("span", { class: "name" }, name),
      element("span", { class: "controls" }, copied, element("button", {
        type: "button", "data-copy": "",
        onclick: () => (navigator.clipboard?.writeText(text) ?? Promise.reject(new Error("no clipboard"))).then(
          () => { copied.textContent = "copied"; }, () => { copied.textContent = "select and copy it"; }),
      }, "Copy")),
      element("pre", { class: "desc" }, text));
  }));
  $("#connect-panel").hidden = false;
  $("#connect-panel").scrollIntoView({ block: "nearest" });
}

$("#show-connect").addEventListener("click", showConnect);
$("#welcome-connect").addEventListener("click", showConnect);
document.querySelector("[data-close-connect]").addEventListener("click", () => { $("#connect-panel").hidden = true; });

// ---- endpoints: what one client may reach ----

/** The endpoints (`GET /api/endpoints`). */
let endpoints = [];

/** Whether this person may define endpoints: the operator, or a tenant's admin. */
function mayDefineEndpoints() {
  return me.workspace !== "user" || me.role === "admin";
}

/** Reads the endpoints; the panel is `aria-busy` until they are shown (or the reading failed). */
async function loadEndpoints() {
  $("#endpoints-panel").setAttribute("aria-busy", "true");
  try {
    endpoints = await api("GET", "/api/endpoints");
    renderEndpoints();
  } catch (error) {
    $("#endpoint-status").textContent = `Cannot read the endpoints: ${error.message}`;
  } finally {
    $("#endpoints-panel").removeAttribute("aria-busy");
  }
}

/** "docs (every tool) · github: search_issues, get_issue". */
function includedText(endpoint) {
  return Object.entries(endpoint.servers).map(([server, tools]) =>
    tools === "*" ? `${server} (every tool)` : `${server}: ${tools.join(", ")}`).join(" · ");
}

function renderEndpoints() {
  const may = mayDefineEndpoints();
  $("#new-endpoint").hidden = !may;
  $("#no-endpoints").hidden = endpoints.length > 0;
  $("#endpoints").replaceChildren(...endpoints.map((endpoint) => {
    const url = `${location.origin}/mcp/e/${endpoint.name}`;
    const issued = element("p", { class: "key", hidden: true });
    const keys = element("ul", { class: "list" }, ...endpoint.keys.map((key) => element("li", {},
      element("span", { class: "name" }, `key ${key.id}, issued ${new Date(key.issued_at_ms).toLocaleString()}`),
      may ? element("span", { class: "controls" }, element("button", {
        type: "button", "data-action": "revoke",
        onclick: () => changeEndpoint("DELETE", `/api/endpoints/${encodeURIComponent(endpoint.name)}/keys/${encodeURIComponent(key.id)}`, `Revoked key ${key.id}.`),
      }, "Revoke")) : undefined)));
    return element("li", { class: "card", "data-endpoint": endpoint.name },
      element("h3", {}, endpoint.name),
      endpoint.description ? element("p", { class: "muted" }, endpoint.description) : undefined,
      element("p", { class: "target" }, element("code", {}, url), " · HTTP+SSE ", element("code", {}, `${location.origin}/sse/e/${endpoint.name}`)),
      element("p", { class: "includes" }, includedText(endpoint)),
      keys, issued,
      may ? element("div", { class: "actions" },
        element("button", { type: "button", "data-action": "edit", onclick: () => editEndpoint(endpoint) }, "Edit"),
        element("button", {
          type: "button", "data-action": "issue-key",
          onclick: async () => {
            try {
              const made = await api("POST", `/api/endpoints/${encodeURIComponent(endpoint.name)}/keys`);
              await loadEndpoints();
              const shown = document.querySelector(`[data-endpoint="${CSS.escape(endpoint.name)}"] .key`);
              shown.replaceChildren("Its key, shown this once: ", element("code", {}, made.key),
                " (Authorization: Bearer <key>)");
              shown.hidden = false;
            } catch (error) {
              $("#endpoint-status").textContent = error.message;
            }
          },
        }, "Issue a key"),
        element("button", {
          type: "button", "data-action": "remove",
          onclick: () => confirm(`Remove endpoint ${endpoint.name} and its keys?`) &&
            changeEndpoint("DELETE", `/api/endpoints/${encodeURIComponent(endpoint.name)}`, `Removed ${endpoint.name}.`),
        }, "Remove")) : undefined);
  }));
}

async function changeEndpoint(method, path, done) {
  try {
    await api(method, path);
    $("#endpoint-status").textContent = done;
  } catch (error) {
    $("#endpoint-status").textContent = error.message;
  }
  await loadEndpoints();
}

/** Opens the form for `endpoint` (a new one when absent): each server, and its tools to tick. */
async function editEndpoint(endpoint) {
  const form = $("#endpoint-form");
  form.reset();
  form.hidden = false;
  form.elements.name.value = endpoint?.name ?? "";
  form.elements.name.readOnly = Boolean(endpoint);
  form.elements.description.value = endpoint?.description ?? "";
  $("#endpoint-status").textContent = "";
  const included = endpoint?.servers ?? {};
  const rows = await Promise.all(servers.map(async (server) => {
    let names = [];
    try {
      names = (await api("GET", `/api/servers/${encodeURIComponent(server.id)}/tools`)).tools.map((t) => t.name);
    } catch {
      // A server whose tools cannot be read keeps what the endpoint names.
    }
    const chosen = included[server.id];
    for (const name of Array.isArray(chosen) ? chosen : []) if (!names.includes(name)) names.push(name);
    const boxes = names.map((name) => element("label", { class: "inline" },
      element("input", { type: "checkbox", "data-tool": name, checked: chosen === "*" || (Array.isArray(chosen) && chosen.includes(name)) || !chosen }),
      ` ${name}`));
    const include = element("input", { type: "checkbox", "data-include": server.id, checked: chosen !== undefined });
    const every = (on) => () => boxes.forEach((box) => { box.querySelector("input").checked = on; });
    return element("li", { "data-server": server.id },
      element("label", { class: "inline name" }, include, ` ${server.id}`),
      element("details", {}, element("summary", {}, `its tools (${names.length})`),
        element("div", { class: "row" },
          element("button", { type: "button", "data-action": "all", onclick: every(true) }, "All"),
          element("button", { type: "button", "data-action": "none", onclick: every(false) }, "None")),
        ...boxes));
  }));
  $("#endpoint-servers").replaceChildren(...rows);
  (endpoint ? form.elements.description : form.elements.name).focus();
}

// ---- access: a tenant's groups, and what each person may reach ----

/** What a grant gives, in words. */
function grantTarget(grant) {
  if (grant.endpoint) return `endpoint ${grant.endpoint}`;
  return grant.tool ? `${grant.server}: ${grant.tool}` : `${grant.server} (every tool)`;
}

async function loadAccess() {
  let groups, grants;
  try {
    [groups, grants] = await Promise.all([api("GET", "/api/groups"), api("GET", "/api/grants"), loadEndpointsQuietly()]);
  } catch (error) {
    $("#access-status").textContent = `Cannot read the groups and grants: ${error.message}`;
    return;
  }
  $("#access-rule").textContent = grants.length
    ? "Members reach only the shared servers, tools and endpoints granted to them or their groups. Admins reach everything."
    : "No grants yet: every member reaches every shared server. The first grant limits members to what is granted.";
  $("#groups").replaceChildren(...groups.map((group) => element("li", { "data-group": group.name },
    element("span", { class: "name" }, group.name),
    element("span", { class: "desc" }, [group.members.join(", ") || "no stored members", group.description].filter(Boolean).join(" · ")),
    element("span", { class: "controls" },
      element("button", {
        type: "button", "data-action": "edit-group",
        onclick: () => {
          const form = $("#group-form");
          form.elements.name.value = group.name;
          form.elements.members.value = group.members.join(" ");
          form.elements.description.value = group.description ?? "";
          form.elements.members.focus();
        },
      }, "Edit"),
      element("button", {
        type: "button", "data-action": "remove-group",
        onclick: () => confirm(`Remove group ${group.name} and the grants made to it?`) &&
          changeAccess("DELETE", `/api/groups/${encodeURIComponent(group.name)}`, undefined, `Removed ${group.name}.`),
      }, "Remove")))));
  $("#grant-subjects").replaceChildren(...groups.map((group) => element("option", { value: `group:${group.name}` })));
  $("#grants tbody").replaceChildren(...grants.map((grant) => element("tr", { "data-grant": grant.id },
    element("td", {}, grant.subject),
    element("td", {}, grantTarget(grant)),
    element("td", {}, new Date(grant.created_at_ms).toLocaleString()),
    element("td", {}, element("button", {
      type: "button", "data-action": "revoke-grant",
      onclick: () => changeAccess("DELETE", `/api/grants/${encodeURIComponent(grant.id)}`, undefined, `Revoked: ${grant.subject} no longer has ${grantTarget(grant)}.`),
    }, "Revoke")))));
  const form = $("#grant-form");
  form.elements.server.replaceChildren(...servers.filter((server) => server.shared)
    .map((server) => element("option", { value: server.id }, server.id)));
  form.elements.endpoint.replaceChildren(...endpoints.map((endpoint) => element("option", { value: endpoint.name }, endpoint.name)));
}

/** Reads the endpoints for the grant form, keeping any error to the endpoints panel. */
async function loadEndpointsQuietly() {
  try {
    endpoints = await api("GET", "/api/endpoints");
  } catch {
    // The grant form offers no endpoint then.
  }
}

async function changeAccess(method, path, body, done) {
  try {
    await api(method, path, body);
    $("#access-status").textContent = done;
  } catch (error) {
    $("#access-status").textContent = error.message;
  }
  await loadAccess();
}

$("#show-access").addEventListener("click", () => {
  $("#access-panel").hidden = false;
  loadAccess();
  $("#access-panel").scrollIntoView({ block: "nearest" });
});
document.querySelector("[data-close-access]").addEventListener("click", () => { $("#access-panel").hidden = true; });
$("#group-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  const name = form.elements.name.value.trim();
  const body = { members: form.elements.members.value.split(/[\s,]+/).filter(Boolean) };
  if (form.elements.description.value.trim()) body.description = form.elements.description.value.trim();
  changeAccess("PUT", `/api/groups/${encodeURIComponent(name)}`, body, `Saved group ${name}.`);
});
$("#grant-form").elements.kind.addEventListener("change", (event) => {
  const kind = event.target.value;
  for (const label of $("#grant-form").querySelectorAll("[data-for]")) {
    label.hidden = !(label.dataset.for === kind || (kind === "tool" && label.dataset.for === "server"));
  }
});
$("#grant-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  const kind = form.elements.kind.value;
  const body = { subject: form.elements.subject.value.trim() };
  if (kind === "endpoint") body.endpoint = form.elements.endpoint.value;
  else body.server = form.elements.server.value;
  if (kind === "tool") body.tool = form.elements.tool.value.trim();
  changeAccess("POST", "/api/grants", body, `Granted ${grantTarget(body)} to ${body.subject}.`);
});

// ---- the audit log: what ran, and who changed what ----

/** The filters of the audit page, as a query string (without `before`). */
function auditQuery() {
  const query = new URLSearchParams();
  for (const [name, value] of new FormData($("#audit-filters"))) {
    if (String(value).trim()) query.set(name, String(value).trim());
  }
  return query;
}

/** "sha256 1f2e…" for a digest, the JSON for redacted arguments; the details' words. */
function auditDetail(record) {
  const parts = [];
  if (record.arguments?.sha256) parts.push(`arguments sha256 ${record.arguments.sha256.slice(0, 12)}…`);
  else if (record.arguments) parts.push(`arguments ${JSON.stringify(record.arguments)}`);
  const detail = record.detail ?? {};
  if (detail.called_as) parts.push(`called as ${detail.called_as}`);
  if (detail.reason) parts.push(detail.reason);
  if (detail.method) parts.push(`${detail.method} ${detail.path}`);
  if (detail.command) parts.push(`switchboard ${detail.command}`);
  if (detail.arguments_sha256) parts.push(`approved sha256 ${detail.arguments_sha256.slice(0, 12)}…`);
  return parts.join(" · ");
}

/** Shows a page of the audit log: the first (`before` absent), or the one after the last. */
async function loadAudit(before) {
  const query = auditQuery();
  query.set("limit", "50");
  if (before) query.set("before", before);
  let page;
  try {
    page = await api("GET", `/api/audit?${query}`);
  } catch (error) {
    $("#audit-status").textContent = `Cannot read the audit log: ${error.message}`;
    return;
  }
  const rows = page.records.map((record) => element("tr", { "data-kind": record.kind, "data-outcome": record.outcome },
    element("td", {}, new Date(record.at_ms).toLocaleString()),
    element("td", {}, record.kind.replace("_", "-")),
    element("td", {}, record.actor),
    element("td", {}, [record.door, record.endpoint && `endpoint ${record.endpoint}`, record.client].filter(Boolean).join(" · ")),
    element("td", {}, [record.server, record.tool].filter(Boolean).join(" / ")),
    element("td", { class: ["ok", "approved"].includes(record.outcome) ? "" : "error" }, record.outcome),
    element("td", {}, record.duration_ms ?? ""),
    element("td", {}, auditDetail(record))));
  const body = $("#audit-records tbody");
  if (before) body.append(...rows); else body.replaceChildren(...rows);
  $("#audit-status").textContent = body.children.length ? "" : "Nothing recorded matches.";
  const older = $("#audit-older");
  older.hidden = page.next == null;
  older.dataset.before = page.next ?? "";
}

$("#show-audit").addEventListener("click", () => {
  $("#audit-panel").hidden = false;
  loadAudit();
  $("#audit-panel").scrollIntoView({ block: "nearest" });
});
$("#audit-filters").addEventListener("submit", (event) => { event.preventDefault(); loadAudit(); });
$("#audit-older").addEventListener("click", (event) => loadAudit(event.target.dataset.before));
document.querySelector("[data-close-audit]").addEventListener("click", () => { $("#audit-panel").hidden = true; });
$("#audit-export").addEventListener("click", async () => {
  const response = await api("GET", `/api/audit/export?${auditQuery()}`, undefined, { raw: true });
  if (!response.ok) {
    $("#audit-status").textContent = `Cannot export the audit log: ${response.status} ${response.statusText}`;
    return;
  }
  const link = element("a", { href: URL.createObjectURL(await response.blob()), download: "switchboard-audit.jsonl" });
  link.click();
  URL.revokeObjectURL(link.href);
});

$("#show-endpoints").addEventListener("click", () => {
  $("#endpoints-panel").hidden = false;
  loadEndpoints();
  $("#endpoints-panel").scrollIntoView({ block: "nearest" });
});
$("#new-endpoint").addEventListener("click", () => editEndpoint(null));
document.querySelector("[data-close-endpoints]").addEventListener("click", () => { $("#endpoints-panel").hidden = true; });
document.querySelector("[data-close-endpoint-form]").addEventListener("click", () => { $("#endpoint-form").hidden = true; });
$("#endpoint-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const included = {};
  for (const row of $("#endpoint-servers").children) {
    if (!row.querySelector("[data-include]").checked) continue;
    const boxes = [...row.querySelectorAll("[data-tool]")];
    const ticked = boxes.filter((box) => box.checked).map((box) => box.dataset.tool);
    included[row.dataset.server] = ticked.length === boxes.length ? "*" : ticked;
  }
  const body = { servers: included };
  if (form.elements.description.value.trim()) body.description = form.elements.description.value.trim();
  const name = form.elements.name.value.trim();
  try {
    await api("PUT", `/api/endpoints/${encodeURIComponent(name)}`, body);
    form.hidden = true;
    $("#endpoint-status").textContent = `Saved ${name}: its clients use ${location.origin}/mcp/e/${name}.`;
  } catch (error) {
    $("#endpoint-status").textContent = error.message;
  }
  await loadEndpoints();
});

// ---- notifications ----

if ("Notification" in window && Notification.permission === "default") {
  $("#notify").hidden = false;
  $("#notify").addEventListener("click", async () => {
    await Notification.requestPermission();
    $("#notify").hidden = Notification.permission !== "default";
  });
}

// ---- finding a tool on any server: the daemon's ranked search ----

let searching = 0;
$("#search").addEventListener("input", () => {
  const query = $("#search").value.trim();
  const mine = ++searching;
  clearTimeout(searchSoon);
  if (!query) {
    $("#search-results").hidden = true;
    return;
  }
  searchSoon = setTimeout(async () => {
    try {
      const found = await api("GET", `/api/tools/search?q=${encodeURIComponent(query)}&limit=8`);
      if (mine !== searching) return;
      const results = found.tools.map((tool) => element("li", {},
        element("button", { type: "button", "data-found": tool.name, onclick: () => openFound(tool) },
          element("b", {}, tool.name), element("span", { class: "muted" }, ` ${tool.server}`),
          element("span", { class: "desc" }, tool.description))));
      $("#search-results").replaceChildren(...(results.length ? results
        : [element("li", { class: "muted" }, "No tool matches.")]));
      $("#search-results").hidden = false;
    } catch (error) {
      say(error.message, true);
    }
  }, 150);
});
let searchSoon;
$("#search-box").addEventListener("focusout", (event) => {
  if (!$("#search-box").contains(event.relatedTarget)) $("#search-results").hidden = true;
});
$("#search").addEventListener("keydown", (event) => {
  if (event.key === "ArrowDown") {
    event.preventDefault();
    if ($("#search-results").children.length) $("#search-results").hidden = false;
    $("#search-results button")?.focus();
  } else if (event.key === "Escape") {
    $("#search-results").hidden = true;
  }
});
$("#search-results").addEventListener("keydown", (event) => {
  const item = document.activeElement?.closest("li");
  if (event.key === "ArrowDown") item?.nextElementSibling?.querySelector("button")?.focus();
  else if (event.key === "ArrowUp") (item?.previousElementSibling?.querySelector("button") ?? $("#search")).focus();
  else if (event.key === "Escape") {
    $("#search-results").hidden = true;
    $("#search").focus();
  } else return;
  event.preventDefault();
});

/** Opens a found tool's server with the tool ready to try. */
async function openFound(found) {
  $("#search-results").hidden = true;
  $('[data-tab="tools"]').click();
  await openDetail(found.server);
  const tool = tools.find((t) => t.exposed_name === found.name);
  if (tool) {
    openTry(tool);
    document.querySelector(`[data-tool="${CSS.escape(tool.name)}"]`)?.scrollIntoView({ block: "nearest" });
    $("#try-form input, #try-form select, #try-form textarea, #run")?.focus();
  }
}

// ---- results as a client shows them ----

/** A tool result's content: text as text (markdown rendered), images and audio as media,
 * resource links openable, structured content as a tree, the raw JSON behind a toggle. */
function resultBlocks(result, server) {
  const blocks = (result.content ?? []).map((block) => contentBlock(block, server));
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    blocks.push(element("div", { class: "structured" }, element("h4", {}, "Structured content"), tree(result.structuredContent)));
  }
  blocks.push(element("details", { class: "raw" }, element("summary", {}, "Raw JSON"),
    element("pre", {}, JSON.stringify(result, null, 2))));
  return blocks;
}

function contentBlock(block, server) {
  switch (block?.type) {
    case "text":
      return looksLikeMarkdown(block.text) ? markdown(block.text) : element("pre", { class: "text" }, block.text);
    case "image":
      return element("img", { class: "media", src: `data:${block.mimeType};base64,${block.data}`, alt: "An image the tool returned" });
    case "audio":
      return element("audio", { class: "media", controls: "", src: `data:${block.mimeType};base64,${block.data}` });
    case "resource_link":
      return element("p", { class: "link" }, "Resource: ",
        element("button", { type: "button", "data-open-resource": block.uri, onclick: () => readResource(server, block.uri) },
          block.title ?? block.name ?? block.uri),
        element("span", { class: "muted" }, ` ${block.uri}${block.mimeType ? ` (${block.mimeType})` : ""}`));
    case "resource": {
      const resource = block.resource ?? {};
      return element("div", { class: "embedded" }, element("span", { class: "muted" }, resource.uri ?? "an embedded resource"),
        resource.text !== undefined ? element("pre", {}, resource.text)
          : element("p", { class: "muted" }, `${resource.mimeType ?? "binary"}, ${Math.floor((resource.blob?.length ?? 0) * 3 / 4)} bytes`));
    }
    default:
      return element("pre", {}, JSON.stringify(block, null, 2));
  }
}

/** JSON as a tree of nested, foldable entries. */
function tree(value, name) {
  const label = name === undefined ? [] : [element("span", { class: "key" }, `${name}: `)];
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    return element("details", { class: "tree", open: "" },
      element("summary", {}, ...label, element("span", { class: "muted" }, Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`)),
      ...entries.map(([key, child]) => tree(child, key)));
  }
  return element("div", { class: "leaf" }, ...label, element("code", {}, JSON.stringify(value)));
}

function looksLikeMarkdown(text) {
  return /^(#{1,6} |[-*] |\d+\. |```)/m.test(text) || /\*\*[^*]+\*\*|\[[^\]]+\]\(https?:\/\//.test(text);
}

/**
 * Markdown as page elements, built node by node (never as HTML, so a tool's text cannot put
 * markup or script in the console): headings, paragraphs, lists, fenced code, and inline code,
 * bold, italics and http(s) links. Written here because the console has no dependencies and no
 * build step, and this small subset is what tool results use.
 */
function markdown(text) {
  const root = element("div", { class: "markdown" });
  const lines = text.split(/\r?\n/);
  let list = null;
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) root.append(element("p", {}, ...inline(paragraph.join(" "))));
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush();
      list = null;
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
      root.append(element("pre", {}, code.join("\n")));
      continue;
    }
    const heading = /^(#{1,6}) (.*)$/.exec(line);
    const item = /^\s*([-*]|\d+\.) (.*)$/.exec(line);
    if (heading) {
      flush();
      list = null;
      root.append(element(`h${Math.min(heading[1].length + 3, 6)}`, {}, ...inline(heading[2])));
    } else if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      if (!list || (list.tagName === "OL") !== ordered) {
        list = element(ordered ? "ol" : "ul");
        root.append(list);
      }
      list.append(element("li", {}, ...inline(item[2])));
    } else if (!line.trim()) {
      flush();
      list = null;
    } else {
      list = null;
      paragraph.push(line.trim());
    }
  }
  flush();
  return root;
}

/** Inline markdown: `code`, **bold**, *italics* and [links](https://...), as nodes. */
function inline(text) {
  const nodes = [];
  const pattern = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*]+)\*|\[([^\]]+)\]\((https?:\/\/[^)\s]+)\)/g;
  let at = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > at) nodes.push(text.slice(at, match.index));
    if (match[1] !== undefined) nodes.push(element("code", {}, match[1]));
    else if (match[2] !== undefined) nodes.push(element("strong", {}, match[2]));
    else if (match[3] !== undefined) nodes.push(element("em", {}, match[3]));
    else nodes.push(element("a", { href: match[5], target: "_blank", rel: "noopener noreferrer" }, match[4]));
    at = match.index + match[0].length;
  }
  if (at < text.length) nodes.push(text.slice(at));
  return nodes;
}

// ---- an MCP App's display modes ----

const DISPLAY_MODES = ["inline", "fullscreen", "pip"];
let displayMode = "inline";

/** Shows the app panel in `mode` and tells the view; answers the mode shown. */
function showApp(mode) {
  displayMode = mode;
  const panel = $("#try-app-panel");
  panel.classList.toggle("fullscreen", mode === "fullscreen");
  panel.classList.toggle("pip", mode === "pip");
  $("#app-fullscreen").textContent = mode === "fullscreen" ? "Exit fullscreen" : "Fullscreen";
  $("#app-pip").textContent = mode === "pip" ? "Back in place" : "Picture in picture";
  app?.notify("ui/notifications/host-context-changed", { displayMode: mode });
  return mode;
}

$("#app-fullscreen").addEventListener("click", () => showApp(displayMode === "fullscreen" ? "inline" : "fullscreen"));
$("#app-pip").addEventListener("click", () => showApp(displayMode === "pip" ? "inline" : "pip"));
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && displayMode === "fullscreen") showApp("inline");
});

// ---- who is here ----

/** Whose workspace this is (`GET /api/me`): the local one, or a user's with their role. */
let me = { workspace: "local" };

async function loadMe() {
  try {
    me = await api("GET", "/api/me");
  } catch (error) {
    say(`Cannot tell whose workspace this is: ${error.message}`, true);
    return;
  }
  $("#who").hidden = me.workspace !== "user";
  // The audit log is the operator's and tenant admins'.
  $("#show-audit").hidden = me.workspace === "user" && me.role !== "admin";
  // Groups and grants are a tenant's, managed by its admins.
  $("#show-access").hidden = !(me.workspace === "user" && me.role === "admin");
  if (me.workspace === "user") {
    $("#who").textContent = `${me.user} · ${me.tenant} · ${me.role}`;
    await loadApprovedCommands();
  }
}

// ---- approved commands ----

/** The commands the operator approves (`GET /api/commands`): a user's only stdio servers. */
let approvedCommands = [];

async function loadApprovedCommands() {
  try {
    approvedCommands = (await api("GET", "/api/commands")).commands;
  } catch (error) {
    say(`Cannot read the approved commands: ${error.message}`, true);
    return;
  }
  // Only the operator defines commands: a user picks one of theirs instead.
  $("#command-field").hidden = true;
  $("#approved-field").hidden = false;
  const select = $('#add-form select[name="approved"]');
  for (const command of approvedCommands) {
    const label = command.description ? `${command.name}: ${command.description}` : command.name;
    select.append(element("option", { value: command.name }, label));
  }
}

$('#add-form select[name="approved"]').addEventListener("change", (event) => {
  const command = approvedCommands.find((c) => c.name === event.target.value);
  const choices = $("#approved-choices");
  choices.replaceChildren();
  choices.hidden = !command;
  if (!command) return;
  for (const name of command.user_env) {
    choices.append(element("label", {}, `${name} `,
      element("input", { type: "password", "data-env": name, autocomplete: "off" })));
  }
  for (const arg of command.user_args) {
    choices.append(element("label", { class: "inline" },
      element("input", { type: "checkbox", "data-arg": arg }), arg));
  }
});

/** Whether this user may change server `server` (a shared one only as the tenant's admin). */
function mayChange(server) {
  return !server.shared || me.role === "admin";
}

// ---- servers ----

let servers = [];
let selected = null;

/**
 * How many readings of each kind were asked for. Readings can answer out of order, and an earlier
 * one answering late would show what has changed since, so only the latest asked is shown.
 */
const readings = {};

/** Starts a reading of `kind`; the answer says whether it is still the latest of its kind. */
function newReading(kind) {
  const reading = (readings[kind] = (readings[kind] ?? 0) + 1);
  return () => readings[kind] === reading;
}

async function loadServers() {
  const latest = newReading("servers");
  try {
    const answer = (await api("GET", "/api/servers")).servers;
    if (!latest()) return;
    servers = answer;
    renderServers();
    if (selected && !servers.some((s) => s.id === selected)) closeDetail();
  } catch (error) {
    say(`Cannot read the servers: ${error.message}`, true);
  }
}

let reloading;
function reloadSoon() {
  clearTimeout(reloading);
  reloading = setTimeout(loadServers, 150);
}

/**
 * Shows the server list, keeping every card that reads the same as before: the live events
 * re-read the list often, and a card replaced under a person's pointer or keyboard focus would
 * take their click or their place with it.
 */
function renderServers() {
  const list = $("#servers");
  const shown = new Map([...list.children].map((card) => [card.dataset.server, card]));
  servers.forEach((server, index) => {
    const fresh = serverCard(server);
    const old = shown.get(server.id);
    const card = old?.isEqualNode(fresh) ? old : fresh;
    const there = list.children[index];
    if (there !== card) {
      if (old && old !== card) old.remove();
      list.insertBefore(card, list.children[index] ?? null);
    }
  });
  while (list.children.length > servers.length) list.lastElementChild.remove();
  $("#no-servers").hidden = servers.length > 0;
}

function serverCard(server) {
  const status = server.status;
  const state = server.enabled ? (status?.state ?? "starting") : "disabled";
  const action = (label, run, attributes = {}) =>
    element("button", { type: "button", ...attributes, onclick: () => run().catch((e) => say(e.message, true)) }, label);
  const actions = [action("Open", () => openDetail(server.id), { "data-action": "open" })];
  if (server.enabled) {
    actions.push(action("Check", async () => {
      const checked = (await api("POST", `/api/servers/${server.id}/check`)).status;
      const state = checked?.state ?? "starting";
      say(`${server.id} is ${state}${checked?.error ? `: ${checked.error}` : "."}`, state !== "connected");
      await loadServers();
    }, { "data-action": "check" }));
  }
  if (mayChange(server) && !server.transport.approved && server.transport.type !== "approved") {
    actions.push(action("Edit", async () => editServer(await api("GET", `/api/servers/${server.id}`)), { "data-action": "edit" }));
  }
  if (mayChange(server)) {
    actions.push(action(server.enabled ? "Disable" : "Enable", async () => {
      await api("PATCH", `/api/servers/${server.id}`, { enabled: !server.enabled });
      say(`${server.id} ${server.enabled ? "disabled" : "enabled"}.`);
      await loadServers();
    }, { "data-action": "toggle" }));
  }
  if (server.transport.type === "http" && ["needs-auth", "invalid-token"].includes(state)) {
    actions.push(action("Sign in", () => signIn(server.id), { "data-action": "sign-in", class: "primary" }));
  } else if (server.transport.type === "http" && status?.needs_scope) {
    // Asks for the scopes calls were refused for, with those granted before.
    actions.push(action("Sign in", () => signIn(server.id, status.needs_scope),
      { "data-action": "sign-in", class: "primary" }));
  }
  if (server.transport.type === "http" && state === "connected") {
    actions.push(action("Sign out", async () => {
      const answer = await api("POST", `/api/servers/${server.id}/logout`);
      say(answer.signed_out ? `Signed out of ${server.id}.` : `Not signed in to ${server.id}.`);
    }, { "data-action": "sign-out" }));
  }
  if (mayChange(server)) {
    actions.push(action("Remove", async () => {
      if (!confirm(`Remove ${server.id} and everything stored for it?`)) return;
      await api("DELETE", `/api/servers/${server.id}`);
      say(`Removed ${server.id}.`);
      await loadServers();
    }, { "data-action": "remove" }));
  }
  const counts = status ? `${status.tools} tools · ${status.resources} resources · ${status.prompts} prompts` : "";
  return element("li", { class: `card${selected === server.id ? " selected" : ""}`, "data-server": server.id },
    element("h3", {}, server.display_name,
      element("span", { class: `badge state-${state}`, "data-state": state }, state),
      server.shared === undefined ? undefined
        : element("span", { class: "badge owner", "data-owner": server.shared ? "shared" : "mine" },
          server.shared ? "shared" : "yours")),
    element("div", { class: "target" }, `${server.id} · ${status?.target ?? server.transport.url ?? server.transport.command ?? server.transport.name ?? ""}`),
    counts ? element("div", { class: "muted" }, counts) : undefined,
    status?.error ? element("div", { class: "error" }, status.error) : undefined,
    status?.needs_scope ? element("div", { class: "error" }, `needs scope: ${status.needs_scope}`) : undefined,
    element("div", { class: "actions" }, ...actions));
}

async function signIn(id, scope) {
  // Opened before the request, so the browser treats it as the click's window.
  const window_ = window.open("about:blank", "_blank");
  try {
    const more = scope ? `?scope=${encodeURIComponent(scope)}` : "";
    const started = await api("POST", `/api/servers/${id}/login${more}`);
    if (window_) window_.location = started.authorization_url;
    else location.assign(started.authorization_url);
    say(`Sign in to ${id} in the new window.`);
  } catch (error) {
    window_?.close();
    throw error;
  }
}

function showForm(id) {
  for (const form of ["#add-form", "#import-form"]) $(form).hidden = form !== id || !$(form).hidden;
}

$("#show-add").addEventListener("click", () => {
  if ($("#add-form").dataset.editing) {
    // From editing to adding: an empty form, still open.
    resetAddForm();
    $("#import-form").hidden = true;
    $("#add-form").hidden = false;
    return;
  }
  showForm("#add-form");
});
$("#show-import").addEventListener("click", () => showForm("#import-form"));
for (const button of document.querySelectorAll("[data-close]")) {
  button.addEventListener("click", () => {
    resetAddForm();
    showForm(null);
  });
}

/** A command line split into words the way a shell splits it: spaces separate, quotes ('...'
 * and "...") and backslashes keep a space in a word. */
function splitCommandLine(text) {
  const words = [];
  let word = null;
  let quote = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === "\\" && quote === '"' && i + 1 < text.length) word += text[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= "";
    } else if (c === "\\" && i + 1 < text.length) {
      word = (word ?? "") + text[++i];
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word = (word ?? "") + c;
    }
  }
  if (quote) throw new Error(`the command line has an unclosed ${quote}`);
  if (word !== null) words.push(word);
  return words;
}

/** Words joined into a command line that {@link splitCommandLine} splits back into them. */
function joinCommandLine(words) {
  return words.map((w) => (w === "" || /[\s'"\\]/.test(w) ? `'${w.replaceAll("'", `'"'"'`)}'` : w)).join(" ");
}

/** A row of the form's headers or environment values (a secret one shows masked). */
function valueRow(name = "", value = "", secret = false) {
  return element("li", { "data-value": "" },
    element("input", { name: "value-name", placeholder: "NAME", value: name, "aria-label": "Name" }),
    element("input", { name: "value-value", placeholder: "value", value, type: secret ? "password" : "text", "aria-label": "Value" }),
    element("label", { class: "inline" }, element("input", { type: "checkbox", name: "value-secret", checked: secret ? "" : undefined,
      onchange: (event) => { event.target.closest("li").querySelector('[name="value-value"]').type = event.target.checked ? "password" : "text"; } }), "secret"),
    element("button", { type: "button", title: "Remove", "aria-label": "Remove this value", onclick: (event) => event.target.closest("li").remove() }, "×"));
}

$("#add-value").addEventListener("click", () => $("#values").append(valueRow()));

/** The server entry the add form describes, or undefined after saying what is missing. */
function entryOf(formElement) {
  const form = new FormData(formElement);
  const entry = { id: form.get("id").trim() };
  const url = form.get("url").trim();
  const command = form.get("command").trim();
  const approved = form.get("approved");
  if (url && (command || approved)) return say("Give a URL or a command, not both.", true);
  if (url) entry.url = url;
  else if (approved) {
    entry.approvedCommand = approved;
    entry.args = [...formElement.querySelectorAll("[data-arg]")].filter((box) => box.checked).map((box) => box.dataset.arg);
    entry.env = {};
    for (const input of formElement.querySelectorAll("[data-env]")) {
      if (input.value) entry.env[input.dataset.env] = input.value;
    }
  } else if (command) {
    let words;
    try {
      words = splitCommandLine(command);
    } catch (error) {
      return say(`${error.message}.`, true);
    }
    const [program, ...args] = words;
    entry.command = program;
    entry.args = args;
  } else return say("Give the server's URL or the command that starts it.", true);
  if (form.get("description").trim()) entry.description = form.get("description").trim();
  // Headers for a URL, environment values for a command; secret ones apart.
  const [plainKey, secretKey] = url ? ["headers", "secretHeaders"] : ["env", "secretEnv"];
  for (const row of formElement.querySelectorAll("[data-value]")) {
    const name = row.querySelector('[name="value-name"]').value.trim();
    if (!name) continue;
    const key = row.querySelector('[name="value-secret"]').checked ? secretKey : plainKey;
    entry[key] = { ...entry[key], [name]: row.querySelector('[name="value-value"]').value };
  }
  if (form.get("display_name").trim()) entry.displayName = form.get("display_name").trim();
  const timeouts = {};
  if (form.get("request_ms")) timeouts.request_ms = Number(form.get("request_ms"));
  if (form.get("tool_call_ms")) timeouts.tool_call_ms = Number(form.get("tool_call_ms"));
  if (Object.keys(timeouts).length) entry.timeouts = timeouts;
  // What the form does not show stays as it was: the working directory, the notification
  // timeout.
  const editing = formElement.dataset.editing ? editingServer : undefined;
  if (editing) {
    if (editing.transport.cwd && entry.command) entry.cwd = editing.transport.cwd;
    if (editing.timeouts?.notification) entry.timeouts = { ...entry.timeouts, notification_ms: editing.timeouts.notification };
  }
  return entry;
}

/** The form's settings written with PATCH (not part of an entry): prefix, retries and the
 * OAuth client. A blank prefix is the server's id; "names unchanged" is none. A blank client id
 * removes the server's client; its secret shown masked stays as it is. */
function settingsOf(formElement) {
  const form = new FormData(formElement);
  const change = { retries: form.get("retries") };
  const prefix = form.get("prefix").trim();
  if (form.get("no_prefix")) change.prefix = "";
  else if (prefix) change.prefix = prefix;
  else if (formElement.dataset.editing) change.prefix = form.get("id").trim();
  const clientId = form.get("oauth_client_id").trim();
  const editing = formElement.dataset.editing ? editingServer : undefined;
  if (clientId) {
    change.oauth_client = { client_id: clientId, grant: form.get("oauth_grant") };
    if (form.get("oauth_client_secret")) change.oauth_client.client_secret = form.get("oauth_client_secret");
    if (form.get("oauth_issuer").trim()) change.oauth_client.issuer = form.get("oauth_issuer").trim();
  } else if (editing?.oauth_client) change.oauth_client = null;
  change.definition_changes = form.get("definition_changes");
  change.approve_destructive = form.get("approve_destructive") === "on";
  const wait = form.get("approval_timeout_secs").trim();
  change.approval_timeout_secs = wait ? Number(wait) : null;
  const guardrails = { redact_arguments: form.getAll("redact_arguments"), redact_results: form.getAll("redact_results") };
  const webhook = form.get("webhook_url").trim();
  if (webhook) {
    guardrails.webhook = { url: webhook, on_failure: form.get("webhook_on_failure") };
    const timeout = form.get("webhook_timeout_ms").trim();
    if (timeout) guardrails.webhook.timeout_ms = Number(timeout);
  }
  const guarded = guardrails.redact_arguments.length || guardrails.redact_results.length || guardrails.webhook;
  change.guardrails = guarded ? guardrails : null;
  return change;
}

/** Whether the form's settings say more than a new server's defaults (then they are written). */
function settingsSaySomething(settings) {
  return settings.prefix !== undefined || settings.retries !== "quick" || settings.oauth_client !== undefined
    || settings.definition_changes !== "warn" || settings.approve_destructive
    || settings.approval_timeout_secs !== null || settings.guardrails !== null;
}

/** The server the form edits, as read when its Edit was pressed. */
let editingServer;

/** Opens the form on server `server` (as just read) to change it: every value as it is
 * (secrets masked; a masked one left as it is keeps its value). */
function editServer(server) {
  const form = $("#add-form");
  form.reset();
  editingServer = server;
  form.dataset.editing = server.id;
  form.elements.id.value = server.id;
  form.elements.id.readOnly = true;
  const transport = server.transport;
  const values = transport.headers ?? transport.env ?? [];
  if (transport.type === "stdio") form.elements.command.value = joinCommandLine([transport.command, ...(transport.args ?? [])]);
  else if (transport.type === "builtin") form.elements.url.value = `builtin:${transport.name}${transport.wait_always ? "?wait=always" : ""}`;
  else form.elements.url.value = transport.url ?? "";
  form.elements.description.value = server.description ?? "";
  form.elements.display_name.value = server.display_name === server.id ? "" : server.display_name;
  const prefix = server.status?.prefix ?? server.prefix ?? server.id;
  form.elements.no_prefix.checked = prefix === "";
  form.elements.prefix.value = prefix === server.id ? "" : prefix;
  form.elements.request_ms.value = server.timeouts?.request ?? "";
  form.elements.tool_call_ms.value = server.timeouts?.tool_call ?? "";
  const policies = server.policies ?? {};
  form.elements.retries.value = policies.retries ?? "quick";
  form.elements.definition_changes.value = policies.definition_changes ?? "warn";
  form.elements.approve_destructive.checked = Boolean(policies.approve_destructive);
  form.elements.approval_timeout_secs.value = policies.approval_timeout_secs ?? "";
  const guardrails = policies.guardrails ?? {};
  for (const list of ["redact_arguments", "redact_results"]) {
    for (const box of form.querySelectorAll(`[name=${list}]`)) box.checked = (guardrails[list] ?? []).includes(box.value);
  }
  form.elements.webhook_url.value = guardrails.webhook?.url ?? "";
  form.elements.webhook_timeout_ms.value = guardrails.webhook?.timeout_ms ?? "";
  form.elements.webhook_on_failure.value = guardrails.webhook?.on_failure ?? "refuse";
  const client = server.oauth_client;
  form.elements.oauth_client_id.value = client?.client_id ?? "";
  form.elements.oauth_client_secret.value = client?.client_secret ?? "";
  form.elements.oauth_issuer.value = client?.issuer ?? "";
  form.elements.oauth_grant.value = client?.grant ?? "authorization-code";
  $("#values").replaceChildren(...values.map((v) => valueRow(v.name, v.value, v.secret)));
  $("#more-settings").open = true;
  $("#add-submit").textContent = "Save";
  // A test would send the masked secrets as they show; the saved server's status says instead.
  $("#test-connection").hidden = true;
  $("#import-form").hidden = true;
  form.hidden = false;
  form.scrollIntoView({ block: "nearest" });
}

/** Back to adding: the form empty, the id editable. */
function resetAddForm() {
  const form = $("#add-form");
  form.reset();
  delete form.dataset.editing;
  editingServer = undefined;
  form.elements.id.readOnly = false;
  $("#values").replaceChildren();
  $("#more-settings").open = false;
  $("#add-submit").textContent = "Add";
  $("#test-connection").hidden = false;
}

$("#add-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const entry = entryOf(event.target);
  if (!entry) return;
  const editing = event.target.dataset.editing;
  try {
    if (editing) {
      // What an entry cannot say stays as it was: on or off, the tools turned off.
      const server = editingServer;
      entry.disabled = server ? !server.enabled : undefined;
      entry.disabledTools = server?.disabled_tools ?? [];
      await api("PUT", `/api/servers/${editing}`, entry);
    } else {
      await api("POST", "/api/servers", entry);
      // Added: should the settings below fail, the form goes on as the server's edit form.
      event.target.dataset.editing = entry.id;
      event.target.elements.id.readOnly = true;
    }
    const settings = settingsOf(event.target);
    if (editing || settingsSaySomething(settings)) {
      await api("PATCH", `/api/servers/${entry.id}`, settings);
    }
    resetAddForm();
    $("#approved-choices").replaceChildren();
    $("#approved-choices").hidden = true;
    showForm(null);
    // Said once the list shows it, so a person (or a test) who goes on sees what was saved.
    await loadServers();
    say(editing ? `Saved ${entry.id}.` : `Added ${entry.id}.`);
  } catch (error) {
    say(error.message, true);
  }
});

$("#test-connection").addEventListener("click", async () => {
  const entry = entryOf($("#add-form"));
  if (!entry) return;
  if (!entry.id) delete entry.id;
  say("Connecting…");
  try {
    const test = await api("POST", "/api/test-connection", entry);
    if (test.connected) {
      const via = [test.server_info, test.detected_transport, test.protocol_version].filter(Boolean).join(", ");
      say(`Connected (${via}): ${test.tools.length} tools, ${test.resources} resources, ${test.prompts} prompts, in ${Math.round(test.elapsed_ms)} ms.`);
    } else {
      say(test.needs_auth ? `It wants a sign-in: add it, then sign in. (${test.error})` : `Cannot connect: ${test.error}`, !test.needs_auth);
    }
  } catch (error) {
    say(error.message, true);
  }
});

$("#import-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const replace = form.get("replace") ? "?replace=true" : "";
  try {
    const outcome = await api("POST", `/api/servers/import${replace}`, form.get("text"));
    const skipped = outcome.skipped.map((s) => `${s.name} (${s.reason})`).join("; ");
    say(`Imported ${outcome.imported.length}${skipped ? `; skipped ${skipped}` : ""}.`);
    event.target.reset();
    showForm(null);
    await loadServers();
  } catch (error) {
    say(error.message, true);
  }
});

// ---- one server: tools, resources, prompts ----

let tools = [];

async function openDetail(id) {
  if (selected !== id) {
    closeApp("another server was opened");
    stopInspecting();
    stopFollowing();
    heldTools = new Set();
    for (const tab of document.querySelectorAll("[data-tab]")) tab.classList.toggle("active", tab.dataset.tab === "tools");
    for (const pane of document.querySelectorAll("[data-pane]")) pane.hidden = pane.dataset.pane !== "tools";
  }
  selected = id;
  remember();
  renderServers();
  const server = servers.find((s) => s.id === id);
  $("#welcome").hidden = true;
  $("#detail").hidden = false;
  $("#view").hidden = true;
  $("#detail-title").textContent = server?.display_name ?? id;
  $('[data-tab="settings"]').hidden = !server?.shared;
  await loadDetail();
}

function closeDetail() {
  closeApp("the server was closed");
  stopInspecting();
  stopFollowing();
  selected = null;
  remember();
  $("#detail").hidden = true;
  $("#try").hidden = true;
  $("#welcome").hidden = false;
}

async function loadDetail() {
  if (!selected) return;
  const id = selected;
  const latest = newReading("detail");
  try {
    const listed = (await api("GET", `/api/servers/${id}/tools`)).tools;
    if (!latest()) return;
    tools = listed;
    renderTools();
    loadDefinitionChanges(id);
    const [resources, prompts] = await Promise.all([
      api("GET", `/api/servers/${id}/resources`).catch(() => ({ resources: [], resource_templates: [] })),
      api("GET", `/api/servers/${id}/prompts`).catch(() => ({ prompts: [] })),
    ]);
    if (!latest()) return;
    $("#resources").replaceChildren(
      ...resources.resources.map((r) => element("li", { "data-resource": r.uri },
        element("span", { class: "name" }, r.name ?? r.uri),
        element("span", { class: "controls" }, element("code", {}, r.mimeType ?? ""),
          element("button", { type: "button", "data-read": r.uri, onclick: () => readResource(id, r.uri) }, "Read"),
          element("button", { type: "button", "data-follow": r.uri, onclick: (event) => toggleFollow(id, r.uri, event.target) },
            following?.uri === r.uri ? "Stop following" : "Follow")),
        element("span", { class: "desc" }, r.uri))),
      ...resources.resource_templates.map((t) => element("li", { "data-template": t.uriTemplate },
        element("span", { class: "name" }, t.name ?? t.uriTemplate),
        element("span", { class: "controls" }, element("code", {}, "template"),
          element("button", { type: "button", "data-fill": t.uriTemplate, onclick: () => openTemplate(id, t) }, "Fill")),
        element("span", { class: "desc" }, t.uriTemplate))));
    $("#prompts").replaceChildren(...prompts.prompts.map((p) => element("li", { "data-prompt": p.name },
      element("span", { class: "name" }, p.name),
      element("span", { class: "controls" }, element("code", {}, (p.arguments ?? []).map((a) => a.name).join(", ")),
        element("button", { type: "button", "data-get": p.name, onclick: () => openPrompt(id, p) }, "Get")),
      element("span", { class: "desc" }, p.description ?? ""))));
  } catch (error) {
    say(error.message, true);
  }
}

/** The resource followed (its updates shown as they come), if one is. */
let following = null;

/** Follows `uri` at server `id` (subscribed while the console follows it): each update the
 * server announces is read again and shown; pressed again, stops. */
async function toggleFollow(id, uri, button) {
  const was = following;
  stopFollowing();
  if (was?.uri === uri) return;
  const controller = new AbortController();
  following = { uri, controller, button };
  button.textContent = "Stop following";
  let updates = 0;
  const note = element("p", { class: "muted", "data-updates": "0" }, "Following: updates show here as the server sends them.");
  try {
    await readResource(id, uri, [note]);
    const response = await api("GET", `/api/servers/${id}/resource-updates?uri=${encodeURIComponent(uri)}`, undefined,
      { raw: true, signal: controller.signal });
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      throw new Error(failureOf(answer, response));
    }
    await readEvents(response, (name) => {
      if (name !== "updated") return;
      updates += 1;
      note.dataset.updates = String(updates);
      note.textContent = `Following: updated ${updates} time${updates === 1 ? "" : "s"}, last at ${new Date().toLocaleTimeString()}.`;
      // Shown again only while the view still shows it; anything else opened there ends it.
      if ($("#view-title").textContent === uri) readResource(id, uri, [note]);
      else stopFollowing();
    });
  } catch (error) {
    if (error.name !== "AbortError") say(`Cannot follow ${uri}: ${error.message}`, true);
  } finally {
    if (following?.controller === controller) stopFollowing();
  }
}

function stopFollowing() {
  if (!following) return;
  following.controller.abort();
  const button = document.querySelector(`[data-follow="${CSS.escape(following.uri)}"]`);
  if (button) button.textContent = "Follow";
  following = null;
}

/** The variables of a URI template (RFC 6570), in order. */
function templateVariables(template) {
  const names = [];
  for (const [, expression] of template.matchAll(/\{([^}]+)\}/g)) {
    for (const spec of expression.replace(/^[+#./;?&]/, "").split(",")) {
      const name = spec.replace(/[*]$|:\d+$/, "");
      if (name && !names.includes(name)) names.push(name);
    }
  }
  return names;
}

/** A URI template filled in with `values` (RFC 6570 level 3: simple, reserved, fragment,
 * label, path, parameter and query expressions of single values). */
function expandTemplate(template, values) {
  const forms = { "": [",", ""], "+": [",", ""], "#": [",", "#"], ".": [".", "."], "/": ["/", "/"],
    ";": [";", ";"], "?": ["&", "?"], "&": ["&", "&"] };
  return template.replace(/\{([^}]+)\}/g, (_, expression) => {
    const operator = /^[+#./;?&]/.test(expression) ? expression[0] : "";
    const [separator, first] = forms[operator];
    const encode = operator === "+" || operator === "#" ? encodeURI : encodeURIComponent;
    const parts = expression.slice(operator.length).split(",").map((spec) => spec.replace(/[*]$|:\d+$/, ""))
      .filter((name) => values[name] !== undefined && values[name] !== "")
      .map((name) => (";?&".includes(operator) && operator ? `${name}=${encode(values[name])}` : encode(values[name])));
    return parts.length ? first + parts.join(separator) : "";
  });
}

/** A form filling in a resource template, then reading the resource it names. */
function openTemplate(id, template) {
  const names = templateVariables(template.uriTemplate);
  const form = element("form", {},
    ...names.map((name) => field(name, { type: "string" }, true)),
    element("p", { class: "muted", "data-expanded": "" }, template.uriTemplate),
    element("div", { class: "row" }, element("button", { type: "submit" }, "Read")));
  const expanded = () => expandTemplate(template.uriTemplate, argumentsOf(form));
  form.addEventListener("input", () => { form.querySelector("[data-expanded]").textContent = expanded(); });
  offerCompletions(form, id, { type: "ref/resource", uri: template.uriTemplate });
  form.onsubmit = (event) => {
    event.preventDefault();
    readResource(id, expanded());
  };
  showView(template.name ?? template.uriTemplate, [form]);
}

/**
 * Offers the server's completions (`completion/complete`) for the text fields of `form` as
 * they are typed: the other fields' values go along as context.
 */
function offerCompletions(form, id, ref) {
  for (const input of form.querySelectorAll('input[data-kind="string"]')) {
    const list = element("datalist", { id: `complete-${Math.random().toString(36).slice(2)}` });
    input.setAttribute("list", list.id);
    input.after(list);
    let asked = 0;
    let soon;
    input.addEventListener("input", () => {
      clearTimeout(soon);
      soon = setTimeout(() => complete(++asked), 120);
    });
    const complete = async (mine) => {
      const context = { arguments: Object.fromEntries(Object.entries(argumentsOf(form)).filter(([name]) => name !== input.name)) };
      try {
        const answer = await api("POST", `/api/servers/${id}/complete`,
          { ref, argument: { name: input.name, value: input.value }, context });
        if (mine !== asked) return;
        list.replaceChildren(...(answer.completion?.values ?? []).map((value) => element("option", { value })));
        input.dataset.completions = String(list.children.length);
      } catch {
        // No completions from this server: the field is typed by hand.
      }
    };
  }
}

/** Shows what a resource read or prompt get answered, below the lists. */
function showView(title, body) {
  $("#view").hidden = false;
  $("#view-title").textContent = title;
  $("#view-body").replaceChildren(...body);
}

async function readResource(id, uri, before = []) {
  const latest = newReading("view");
  try {
    const read = await api("GET", `/api/servers/${id}/resource?uri=${encodeURIComponent(uri)}`);
    if (!latest()) return;
    showView(uri, [...before, ...read.contents.map((c) => c.text !== undefined
      ? element("pre", {}, c.text)
      : element("p", { class: "muted" }, `${c.mimeType ?? "binary"}, ${Math.floor((c.blob?.length ?? 0) * 3 / 4)} bytes`))]);
  } catch (error) {
    say(error.message, true);
  }
}

function openPrompt(id, prompt) {
  const form = element("form", {},
    ...(prompt.arguments ?? []).map((a) => field(a.name, { type: "string", description: a.description }, a.required)),
    element("div", { class: "row" }, element("button", { type: "submit" }, "Get")));
  offerCompletions(form, id, { type: "ref/prompt", name: prompt.name });
  form.onsubmit = async (event) => {
    event.preventDefault();
    try {
      const got = await api("POST", `/api/servers/${id}/prompts/${encodeURIComponent(prompt.name)}/get`, { arguments: argumentsOf(form) });
      showView(prompt.name, [form, ...got.messages.map((m) =>
        element("pre", { "data-role": m.role }, `${m.role}: ${m.content?.text ?? JSON.stringify(m.content, null, 2)}`))]);
    } catch (error) {
      say(error.message, true);
    }
  };
  showView(prompt.name, [form]);
}

// ---- tools whose definitions changed (a "rug pull"), to accept ----

/** The open server's tools held back from clients (their definitions changed). */
let heldTools = new Set();

/** The defining fields of a tool, as the API compares them. */
const DEFINING_FIELDS = ["name", "title", "description", "inputSchema", "outputSchema", "annotations"];

/** Shows server `id`'s tools whose definitions are not the approved ones: each changed field
 * as approved and as now, and Accept for whoever may change the server. */
async function loadDefinitionChanges(id) {
  let changes;
  try {
    changes = await api("GET", `/api/servers/${id}/definitions`);
  } catch (error) {
    changes = [];
  }
  if (selected !== id) return;
  heldTools = new Set(changes.filter((change) => change.held).map((change) => change.tool));
  renderTools();
  const shown = (value) => value === undefined ? "(none)" : JSON.stringify(value, null, 2);
  $("#definition-changes").replaceChildren(...changes.map((change) => {
    const fields = DEFINING_FIELDS.filter((field) =>
      JSON.stringify(change.approved.definition[field]) !== JSON.stringify(change.current[field]));
    const accept = element("button", { type: "button", "data-action": "accept-definition", onclick: async () => {
      try {
        await api("POST", `/api/servers/${id}/definitions/${encodeURIComponent(change.tool)}/accept`, { sha256: change.current_sha256 });
        say(`Accepted the new definition of ${change.tool}.`);
        loadDetail();
      } catch (error) {
        say(error.message, true);
      }
    } }, "Accept the new definition");
    const approved = change.approved.accepted_by ? `accepted by ${change.approved.accepted_by}` : "as first seen";
    return element("li", { class: "definition-change", "data-definition-change": change.tool },
      element("span", { class: "name" }, `${change.tool}: its definition changed`),
      element("span", { class: "controls" }, element("span", { class: change.held ? "badge state-error" : "badge state-reconnecting" },
        change.held ? "held back from clients" : "served as it is now"), accept),
      element("span", { class: "desc" }, `Approved ${approved} on ${new Date(change.approved.approved_at_ms).toLocaleString()}. What changed:`),
      ...fields.map((field) => element("div", { class: "diff", "data-field": field },
        element("strong", {}, field),
        element("span", { class: "muted" }, "approved"), element("span", { class: "muted" }, "now"),
        element("pre", { class: "was" }, shown(change.approved.definition[field])),
        element("pre", { class: "now" }, shown(change.current[field])))));
  }));
}

function renderTools() {
  const filter = $("#tool-filter").value.trim().toLowerCase();
  const shown = tools.filter((tool) =>
    !filter || `${tool.name} ${tool.title ?? ""} ${tool.description ?? ""}`.toLowerCase().includes(filter));
  $("#tools").replaceChildren(...shown.map((tool) => {
    const toggle = element("input", {
      type: "checkbox", title: "Exposed to clients", "data-toggle": tool.name,
      checked: tool.settings.enabled ? "" : undefined,
      onchange: async (event) => {
        try {
          await api("PATCH", `/api/servers/${selected}/tools/${encodeURIComponent(tool.name)}`,
            { enabled: event.target.checked });
          say(`${tool.name} ${event.target.checked ? "enabled" : "disabled"}.`);
        } catch (error) {
          event.target.checked = !event.target.checked;
          say(error.message, true);
        }
      },
    });
    const tryIt = element("button", { type: "button", "data-try": tool.name,
      disabled: tool.settings.enabled ? undefined : "", onclick: () => openTry(tool) }, "Try");
    const notes = element("button", { type: "button", "data-notes": tool.name,
      title: "Words its users say, aliases, example requests: search reads them, clients never see them",
      onclick: () => editSearchNotes(tool) }, tool.settings.search_notes ? "Search notes ✓" : "Search notes");
    return element("li", { class: tool.settings.enabled ? "" : "off", "data-tool": tool.name },
      element("span", { class: "name" }, tool.title ? `${tool.title} (${tool.name})` : tool.name,
        heldTools.has(tool.name) ? element("span", { class: "badge state-error", "data-held": "" }, " held") : undefined),
      element("span", { class: "controls" }, element("label", { class: "inline" }, toggle, "on"), notes, tryIt),
      element("span", { class: "desc" }, tool.description ?? ""));
  }));
}

/** Opens, under `tool`'s row, a form for its search notes: words search reads with the tool's
 * own (PATCH `search_notes`; empty removes them). */
function editSearchNotes(tool) {
  const row = document.querySelector(`#tools > li[data-tool="${CSS.escape(tool.name)}"]`);
  if (!row || row.querySelector("form.search-notes")) return;
  const text = element("textarea", { name: "search_notes", maxlength: "2000", rows: "3",
    placeholder: "e.g. PR; pull request; bring my branch up to date with main" });
  text.value = tool.settings.search_notes ?? "";
  const form = element("form", { class: "search-notes" },
    element("label", {}, "Search notes (never shown to clients)", text),
    element("button", { type: "submit" }, "Save notes"),
    element("button", { type: "button", onclick: () => form.remove() }, "Cancel"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const notes = text.value.trim();
    try {
      await api("PATCH", `/api/servers/${selected}/tools/${encodeURIComponent(tool.name)}`,
        { search_notes: notes || null });
      tool.settings.search_notes = notes || undefined;
      say(notes ? `Search notes of ${tool.name} saved.` : `Search notes of ${tool.name} removed.`);
      renderTools();
    } catch (error) {
      say(error.message, true);
    }
  });
  row.append(form);
  text.focus();
}

$("#tool-filter").addEventListener("input", renderTools);
for (const tab of document.querySelectorAll("[data-tab]")) {
  tab.addEventListener("click", () => {
    for (const other of document.querySelectorAll("[data-tab]")) other.classList.toggle("active", other === tab);
    for (const pane of document.querySelectorAll("[data-pane]")) pane.hidden = pane.dataset.pane !== tab.dataset.tab;
    if (tab.dataset.tab === "inspector") inspect(selected);
    else stopInspecting();
    if (tab.dataset.tab === "settings") loadSettings(selected).catch((e) => say(e.message, true));
    remember();
  });
}

// ---- my settings: a user's own values for a server the tenant shares ----

/** The tools the user pinned on the server shown (kept as they are when values are saved). */
let settingsPinned = [];

function settingRow(name = "", value = "") {
  const row = element("li", { "data-setting": "" },
    element("input", { name: "name", placeholder: "Name", "aria-label": "Name" }),
    element("input", { name: "value", placeholder: "Value", "aria-label": "Value" }),
    element("button", { type: "button", onclick: () => row.remove() }, "Remove"));
  row.querySelector('[name="name"]').value = name;
  row.querySelector('[name="value"]').value = value;
  return row;
}

async function loadSettings(id) {
  const server = servers.find((s) => s.id === id);
  const mine = await api("GET", `/api/servers/${id}/my-settings`);
  settingsPinned = mine.pinned ?? [];
  $("#settings-kind").textContent = runsACommand(server) ? "environment values" : "headers";
  const rows = mine.values.map((v) => settingRow(v.name, v.value));
  $("#settings-values").replaceChildren(...(rows.length ? rows : [settingRow()]));
}

$("#settings-add").addEventListener("click", () => $("#settings-values").append(settingRow()));
$("#settings-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const id = selected;
  const server = servers.find((s) => s.id === id);
  const values = {};
  for (const row of document.querySelectorAll("#settings-values [data-setting]")) {
    const name = row.querySelector('[name="name"]').value.trim();
    if (name) values[name] = row.querySelector('[name="value"]').value;
  }
  const kind = runsACommand(server) ? "env" : "headers";
  try {
    await api("PUT", `/api/servers/${id}/my-settings`, { [kind]: values, pinned: settingsPinned });
    say(`Saved your settings for ${id}: it restarts with them, for you only.`);
    await loadSettings(id);
  } catch (error) {
    say(error.message, true);
  }
});
$("#settings-forget").addEventListener("click", async () => {
  const id = selected;
  try {
    await api("DELETE", `/api/servers/${id}/my-settings`);
    say(`Forgot your settings for ${id}: it uses the tenant's again.`);
    await loadSettings(id);
  } catch (error) {
    say(error.message, true);
  }
});

// ---- the inspector: a server's JSON-RPC messages, live ----

let inspecting = null;

/** What kind of JSON-RPC message it is. */
function kindOf(message) {
  if (message.method !== undefined) return message.id !== undefined ? "request" : "notification";
  return message.error !== undefined ? "error" : "response";
}

/** One line saying what a message is. */
function summary(message) {
  const kind = kindOf(message);
  if (kind === "request") return `${message.method} #${message.id}`;
  if (kind === "notification") return message.method;
  if (kind === "error") return `error #${message.id}: ${message.error.code} ${message.error.message}`;
  return `result #${message.id}`;
}

function trafficShown(item) {
  const direction = $("#traffic-direction").value;
  const kind = $("#traffic-kind").value;
  const text = $("#traffic-filter").value.trim().toLowerCase();
  return (!direction || item.dataset.direction === direction) && (!kind || item.dataset.kind === kind)
    && (!text || item.dataset.text.includes(text));
}

function filterTraffic() {
  for (const item of $("#traffic").children) item.hidden = !trafficShown(item);
}

for (const control of ["#traffic-direction", "#traffic-kind"]) $(control).addEventListener("change", filterTraffic);
$("#traffic-filter").addEventListener("input", filterTraffic);
$("#traffic-clear").addEventListener("click", () => {
  $("#traffic").replaceChildren();
  trafficLog.length = 0;
});

/** The messages followed, oldest first (at most 1,000), for export; requests' times by id. */
const trafficLog = [];
const asked = new Map();

$("#traffic-export").addEventListener("click", () => {
  const blob = new Blob([JSON.stringify(trafficLog, null, 2)], { type: "application/json" });
  const link = element("a", { href: URL.createObjectURL(blob), download: `switchboard-${selected}-messages.json` });
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
});

function stopInspecting() {
  inspecting?.abort();
  inspecting = null;
}

/** Follows server `id`'s messages until the tab or the server changes. */
async function inspect(id) {
  stopInspecting();
  const controller = new AbortController();
  inspecting = controller;
  $("#traffic").replaceChildren();
  trafficLog.length = 0;
  asked.clear();
  $("#traffic-status").textContent = "Following this server's messages (those the daemon kept first, if it keeps a history)…";
  try {
    const response = await api("GET", `/api/servers/${id}/traffic`, undefined, { raw: true, signal: controller.signal });
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      throw new Error(failureOf(answer, response));
    }
    $("#traffic-status").dataset.following = "yes";
    await readEvents(response, (name, data) => {
      if (name === "lagged") {
        $("#traffic").prepend(element("li", { class: "error" }, `missed ${data.missed} messages`));
        return;
      }
      const { message } = data;
      const text = JSON.stringify(message);
      const bytes = new TextEncoder().encode(text).length;
      // A response's time: since the request of its id went the other way.
      const key = `${message.id}`;
      let took = "";
      if (kindOf(message) === "request") asked.set(`${data.direction}:${key}`, data.at_ms);
      else if (message.id !== undefined) {
        const other = data.direction === "sent" ? "received" : "sent";
        const at = asked.get(`${other}:${key}`);
        if (at !== undefined) took = ` · ${data.at_ms - at} ms`;
        asked.delete(`${other}:${key}`);
      }
      trafficLog.push(data);
      if (trafficLog.length > 1000) trafficLog.shift();
      const item = element("li", {
        "data-direction": data.direction, "data-kind": kindOf(message), "data-method": message.method ?? "",
        "data-text": text.toLowerCase(),
      }, element("details", {},
        element("summary", {},
          element("span", { class: "muted" }, new Date(data.at_ms).toLocaleTimeString()), " ",
          element("b", {}, data.direction === "sent" ? "→" : "←"), " ", summary(message),
          element("span", { class: "muted size" }, ` · ${bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KB`}${took}`)),
        element("pre", {}, JSON.stringify(message, null, 2))));
      item.hidden = !trafficShown(item);
      const list = $("#traffic");
      list.prepend(item);
      while (list.children.length > 500) list.lastChild.remove();
    });
  } catch (error) {
    if (error.name !== "AbortError") $("#traffic-status").textContent = `Not following: ${error.message}`;
  } finally {
    delete $("#traffic-status").dataset.following;
    if (inspecting === controller) inspecting = null;
  }
}

// ---- try a tool ----

let running = null;

/** The choices a property offers, as [value, label] pairs (`enum` with `enumNames`, or the
 * `const`s of `oneOf`/`anyOf` with their titles); undefined when it is not a choice. */
function choicesOf(schema) {
  if (Array.isArray(schema?.enum)) return schema.enum.map((v, i) => [v, schema.enumNames?.[i] ?? String(v)]);
  const options = schema?.oneOf ?? schema?.anyOf;
  if (Array.isArray(options) && options.length && options.every((o) => "const" in o)) {
    return options.map((o) => [o.const, o.title ?? String(o.const)]);
  }
  return undefined;
}

const inputTypes = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

/** A form field for one property of a JSON schema (a tool's input, or a question's form). */
function field(name, schema, required) {
  const label = `${schema.title ?? name}${required ? " *" : ""}`;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  const choices = choicesOf(schema);
  const itemChoices = type === "array" ? choicesOf(schema.items) : undefined;
  const option = ([value, text]) => element("option", { value: JSON.stringify(value) }, text);
  const described = (schema.oneOf ?? schema.anyOf ?? []).some((o) => o.description);
  const files = schema.format === "data-url" || (type === "array" && schema.items?.format === "data-url");
  let input;
  if (files) {
    // Files the person attaches, read as data: URLs.
    input = element("input", { type: "file", name, multiple: type === "array" ? "" : undefined,
      accept: schema.accept ?? schema.items?.accept, required: required ? "" : undefined });
    input.dataset.kind = type === "array" ? "files" : "file";
    input.dataset.value = type === "array" ? "[]" : "";
    input.addEventListener("change", () => {
      input.reading = Promise.all([...input.files].map((file) => new Promise((resolve, reject) => {
        const reader = new FileReader();
        reader.onload = () => resolve(reader.result);
        reader.onerror = () => reject(new Error(`cannot read ${file.name}: ${reader.error?.message}`));
        reader.readAsDataURL(file);
      }))).then((urls) => {
        input.dataset.value = type === "array" ? JSON.stringify(urls) : (urls[0] ?? "");
      });
    });
  } else if (choices && described) {
    // Choices with descriptions: each one shown with what it means.
    input = element("div", { class: "radios", name }, ...(schema.oneOf ?? schema.anyOf).map((o, i) =>
      element("label", { class: "inline radio" },
        element("input", { type: "radio", name, value: JSON.stringify(o.const), required: required && i === 0 ? "" : undefined }),
        element("span", {}, element("b", {}, o.title ?? String(o.const)), o.description ? element("span", { class: "muted" }, ` ${o.description}`) : undefined))));
    input.dataset.kind = "radio";
  } else if (choices) {
    const blank = required ? [] : [element("option", { value: "" }, "—")];
    input = element("select", { name }, ...blank, ...choices.map(option));
    input.dataset.kind = "enum";
  } else if (itemChoices) {
    input = element("select", { name, multiple: "", size: Math.min(itemChoices.length, 5) }, ...itemChoices.map(option));
    input.dataset.kind = "multi";
  } else if (type === "boolean") {
    input = element("input", { type: "checkbox", name });
    input.dataset.kind = "boolean";
  } else if (type === "number" || type === "integer") {
    input = element("input", { type: "number", name, step: type === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum, required: required ? "" : undefined });
    input.dataset.kind = "number";
  } else if (type === "string" && schema.contentMediaType?.startsWith("text/")) {
    // Text of many lines (markdown, a document).
    input = element("textarea", { name, rows: 6, required: required ? "" : undefined });
    input.dataset.kind = "string";
  } else if (type === "string") {
    input = element("input", { type: inputTypes[schema.format] ?? "text", name, required: required ? "" : undefined });
    input.dataset.kind = "string";
  } else {
    input = element("textarea", { name, rows: 3, placeholder: "JSON" });
    input.dataset.kind = "json";
  }
  if (schema.default !== undefined && !files && input.dataset.kind !== "radio") {
    const kind = input.dataset.kind;
    if (kind === "boolean") input.checked = Boolean(schema.default);
    else if (kind === "multi") for (const o of input.options) o.selected = schema.default.some((d) => JSON.stringify(d) === o.value);
    else if (kind === "enum" || kind === "json") input.value = JSON.stringify(schema.default);
    else input.value = schema.default;
  }
  const hint = schema.description ? element("span", { class: "muted" }, schema.description) : undefined;
  if (input.dataset.kind === "radio") return element("fieldset", { class: "choices" }, element("legend", {}, label), input, hint);
  return element("label", { class: input.dataset.kind === "boolean" ? "inline" : "" }, label, input, hint);
}

/** The fields of an object schema. */
function fieldsOf(schema) {
  const required = new Set(schema?.required ?? []);
  return Object.entries(schema?.properties ?? {}).map(([name, property]) => field(name, property, required.has(name)));
}

/** Waits until the files chosen in `form` are read (a read that fails rejects, saying which). */
function filesRead(form) {
  return Promise.all([...form.querySelectorAll('input[type="file"]')].map((input) => input.reading));
}

/** The values the form describes, typed as the schema says. */
function argumentsOf(form) {
  const values = {};
  for (const input of form.querySelectorAll("[data-kind]")) {
    const kind = input.dataset.kind;
    if (kind === "radio") {
      const checked = input.querySelector("input:checked");
      if (checked) values[input.getAttribute("name")] = JSON.parse(checked.value);
    } else if (kind === "files") {
      const urls = JSON.parse(input.dataset.value || "[]");
      if (urls.length) values[input.name] = urls;
    } else if (kind === "file") {
      if (input.dataset.value) values[input.name] = input.dataset.value;
    } else if (kind === "boolean") {
      values[input.name] = input.checked;
    } else if (kind === "multi") {
      values[input.name] = [...input.selectedOptions].map((o) => JSON.parse(o.value));
    } else if (input.value === "") {
      continue;
    } else if (kind === "number") {
      values[input.name] = Number(input.value);
    } else if (kind === "enum" || kind === "json") {
      values[input.name] = JSON.parse(input.value);
    } else {
      values[input.name] = input.value;
    }
  }
  return values;
}

function openTry(tool) {
  $("#try").hidden = false;
  for (const item of document.querySelectorAll("#tools > li")) item.classList.toggle("trying", item.dataset.tool === tool.name);
  $("#try-name").textContent = tool.name;
  $("#try-description").textContent = tool.description ?? "";
  $("#try-result").replaceChildren();
  $("#try-status").textContent = "";
  closeApp("another tool was opened");
  const form = $("#try-form");
  form.replaceChildren(
    ...fieldsOf(tool.input_schema),
    element("div", { class: "row" },
      element("button", { type: "submit", id: "run" }, "Run"),
      element("button", { type: "button", id: "cancel", disabled: "", onclick: () => running?.abort() }, "Cancel")));
  form.onsubmit = (event) => {
    event.preventDefault();
    runTool(selected, tool.name, form).catch((error) => status(error.message, true));
  };
}

function status(text, isError = false) {
  $("#try-status").textContent = text;
  $("#try-status").className = isError ? "error" : "";
}

async function runTool(server, tool, form) {
  let args;
  try {
    args = argumentsOf(form);
  } catch (error) {
    return status(`An argument is not valid JSON: ${error.message}`, true);
  }
  running = new AbortController();
  const progress = $("#try-progress");
  progress.hidden = false;
  progress.removeAttribute("value");
  $("#run").disabled = true;
  $("#cancel").disabled = false;
  $("#try-result").replaceChildren();
  status("Running…");
  const toolInfo = tools.find((t) => t.name === tool);
  const view = viewOf(toolInfo) ? await openApp(server, toolInfo, args).catch((error) => {
    status(`The tool's app cannot be shown: ${error.message}`, true);
    return null;
  }) : null;
  try {
    const response = await api("POST", `/api/servers/${server}/tools/${encodeURIComponent(tool)}/call`,
      { arguments: args }, { raw: true, signal: running.signal, headers: { accept: "text/event-stream" } });
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      throw new Error(failureOf(answer, response));
    }
    await readEvents(response, (name, data) => {
      if (name === "progress") {
        if (data.total) {
          progress.max = data.total;
          progress.value = data.progress;
        }
        status(`Running… ${data.progress}${data.total ? ` of ${data.total}` : ""}${data.message ? `: ${data.message}` : ""}`);
      } else if (name === "result") {
        status(data.isError ? "The tool reported an error." : "Done.", Boolean(data.isError));
        $("#try-result").replaceChildren(...resultBlocks(data, server));
        view?.notify("ui/notifications/tool-result", data);
      } else if (name === "error") {
        status(data.error, true);
        view?.notify("ui/notifications/tool-cancelled", { reason: data.error });
      }
    });
  } catch (error) {
    view?.notify("ui/notifications/tool-cancelled", { reason: error.message });
    if (error.name === "AbortError") status("Cancelled.", true);
    else throw error;
  } finally {
    running = null;
    progress.hidden = true;
    $("#run").disabled = false;
    $("#cancel").disabled = true;
  }
}

// ---- live events ----

function logActivity(event) {
  const describe = {
    state_changed: (e) => `${e.server}: ${e.from} → ${e.to}${e.error ? ` (${e.error})` : ""}`,
    configured: (e) => `${e.server}: ${e.change}`,
    tool_called: (e) => `${e.server}/${e.tool}: ${e.outcome} in ${e.elapsed_ms.toFixed(1)} ms`,
    catalog_changed: (e) => `${e.server}: catalog changed`,
    scope_needed: (e) => `${e.server}: ${e.scope ? `needs scope ${e.scope}` : "scope granted"}`,
    lagged: (e) => `missed ${e.missed} events`,
    question_asked: (e) => `${e.question.server}${e.question.tool ? `/${e.question.tool}` : ""}: ${e.question.kind} question ${e.question.id}`,
    question_ended: (e) => `${e.server}: question ${e.id} ${e.ending.replace("_", " ")}`,
    app_log: (e) => `${e.server}/${e.tool} app: ${e.level} ${typeof e.data === "string" ? e.data : JSON.stringify(e.data)}`,
  }[event.type];
  if (!describe) return;
  const line = `${new Date().toLocaleTimeString()} ${event.type} ${describe(event)}`;
  showActivity(event.type, line);
  kept.activity.unshift({ type: event.type, line });
  kept.activity.length = Math.min(kept.activity.length, 100);
  keep();
}

function showActivity(type, line, atEnd = false) {
  const list = $("#activity");
  const item = element("li", { "data-type": type }, line);
  if (atEnd) list.append(item);
  else list.prepend(item);
  while (list.children.length > 100) list.lastChild.remove();
}

// ---- MCP Apps ----
// A tool whose `_meta.ui.resourceUri` names a `ui://` view gets it framed below its result. The
// daemon serves the view sandboxed under the policy its metadata asks for (an opaque origin);
// this page is the view's host: it answers the MCP Apps messages the view posts (JSON-RPC 2.0
// objects), calls the server's tools and reads its resources for it through the admin API, and
// tells it the tool's input and result once it says it is initialized.

/** The view of a tool, if it has one. */
function viewOf(tool) {
  const uri = tool?._meta?.ui?.resourceUri ?? tool?._meta?.["ui/resourceUri"];
  return typeof uri === "string" && uri.startsWith("ui://") ? uri : undefined;
}

/** Whether a view may call tool `name` of its server's `serverTools`: it must be on, and
 * visible to apps. */
function appMayCall(serverTools, name) {
  const tool = serverTools.find((t) => t.name === name);
  const visibility = tool?._meta?.ui?.visibility ?? ["model", "app"];
  return Boolean(tool?.settings.enabled) && visibility.includes("app");
}

/** The view framed now, and views being torn down (they may still answer). */
let app = null;
const closing = new Set();

window.addEventListener("message", (event) => {
  if (event.data?.jsonrpc !== "2.0") return;
  const view = [app, ...closing].find((v) => v && event.source === v.frame.contentWindow);
  view?.receive(event.data);
});

async function openApp(server, tool, args) {
  closeApp("the tool runs again");
  const served = await api("POST", "/api/apps/views", { server, uri: viewOf(tool) });
  const frame = element("iframe", {
    sandbox: "allow-scripts allow-forms", title: `${tool.name} app`, "data-app": tool.name,
    allow: appAllow(served.permissions), class: served.prefers_border === false ? "borderless" : "",
  });
  const serverTools = tools.slice();
  const view = {
    frame, server, tool, initialized: false, queue: [], nextId: 1, waiting: new Map(),
    post(message) {
      frame.contentWindow?.postMessage(message, "*");
    },
    notify(method, params) {
      const message = { jsonrpc: "2.0", method, params };
      if (this.initialized) this.post(message);
      else this.queue.push(message);
    },
    request(method, params) {
      const id = this.nextId++;
      this.post({ jsonrpc: "2.0", id, method, params });
      return new Promise((resolve) => this.waiting.set(id, resolve));
    },
    async receive(message) {
      if (message.method === undefined) {
        this.waiting.get(message.id)?.(message);
        this.waiting.delete(message.id);
        return;
      }
      if (message.id === undefined) return this.notified(message);
      try {
        this.post({ jsonrpc: "2.0", id: message.id, result: await this.answer(message) });
      } catch (error) {
        this.post({ jsonrpc: "2.0", id: message.id, error: { code: error.code ?? -32000, message: error.message } });
      }
    },
    notified({ method, params }) {
      if (method === "ui/notifications/initialized") {
        this.initialized = true;
        $("#app-loading").hidden = true;
        for (const message of this.queue.splice(0)) this.post(message);
      } else if (method === "ui/notifications/size-changed" && params?.height) {
        frame.style.height = `${Math.min(Math.max(params.height, 40), 1200)}px`;
      } else if (method === "notifications/message") {
        logActivity({ type: "app_log", server, tool: tool.name, level: params?.level, data: params?.data });
      }
    },
    async answer({ method, params }) {
      switch (method) {
        case "ui/initialize":
          return {
            protocolVersion: "2026-01-26",
            hostInfo: { name: "switchboard", version: $("#version").textContent.replace(/^v/, "") || "0" },
            hostCapabilities: { openLinks: {}, serverTools: {}, serverResources: {}, logging: {}, message: { text: {} }, updateModelContext: { text: {} } },
            hostContext: {
              toolInfo: { tool: { name: tool.name, title: tool.title, description: tool.description, inputSchema: tool.input_schema } },
              ...themeContext(), displayMode, availableDisplayModes: DISPLAY_MODES, platform: "web",
              locale: navigator.language, timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
              containerDimensions: { maxHeight: 1200 },
            },
          };
        case "ping":
          return {};
        case "tools/call": {
          if (!appMayCall(serverTools, params?.name)) throw Object.assign(new Error(`the app may not call '${params?.name}'`), { code: -32602 });
          return api("POST", `/api/servers/${server}/tools/${encodeURIComponent(params.name)}/call`, { arguments: params.arguments ?? {} });
        }
        case "resources/read":
          return api("GET", `/api/servers/${server}/resource?uri=${encodeURIComponent(params?.uri ?? "")}`);
        case "ui/open-link": {
          const url = new URL(params?.url ?? "");
          if (!["http:", "https:"].includes(url.protocol)) throw new Error("only http and https links open");
          window.open(url.href, "_blank", "noopener,noreferrer");
          return {};
        }
        case "ui/message": {
          const blocks = Array.isArray(params?.content) ? params.content : [params?.content];
          const text = blocks.map((b) => b?.text ?? JSON.stringify(b)).join("\n");
          $("#app-messages").prepend(element("li", {}, `${tool.name} app says: ${text}`));
          return {};
        }
        case "ui/update-model-context":
          return {};
        case "ui/request-display-mode":
          return { mode: showApp(DISPLAY_MODES.includes(params?.mode) ? params.mode : displayMode) };
        default:
          throw Object.assign(new Error(`Method not found: ${method}`), { code: -32601 });
      }
    },
  };
  app = view;
  // The view posts `ui/initialize` as soon as its script runs: the listener is in place first.
  frame.src = served.url;
  $("#try-app").append(frame);
  $("#try-app-panel").hidden = false;
  $("#app-loading").hidden = false;
  view.notify("ui/notifications/tool-input", { arguments: args });
  return view;
}

/** The `allow` attribute for the permissions a view asked for. */
function appAllow(permissions) {
  const features = { camera: "camera", microphone: "microphone", geolocation: "geolocation", clipboardWrite: "clipboard-write" };
  return Object.keys(permissions ?? {}).filter((p) => features[p]).map((p) => features[p]).join("; ") || undefined;
}

/** Asks the framed view to wind down (a second at most, hidden meanwhile), then removes it. */
function closeApp(reason) {
  const view = app;
  if (!view) return;
  app = null;
  closing.add(view);
  view.frame.hidden = true;
  const teardown = view.initialized ? view.request("ui/resource-teardown", { reason }) : Promise.resolve();
  Promise.race([teardown, new Promise((resolve) => setTimeout(resolve, 1000))]).then(() => {
    closing.delete(view);
    view.frame.remove();
  });
  $("#try-app-panel").hidden = true;
  $("#app-loading").hidden = true;
  $("#app-messages").replaceChildren();
  showApp("inline");
}

// ---- questions for people ----

/** The questions waiting for a person, by id. */
const questions = new Map();

function renderQuestions() {
  const list = $("#questions");
  const shown = new Set([...list.children].map((card) => card.dataset.question));
  for (const card of [...list.children]) if (!questions.has(card.dataset.question)) card.remove();
  for (const question of questions.values()) if (!shown.has(question.id)) list.append(questionCard(question));
  $("#questions-panel").hidden = questions.size === 0;
  document.title = questions.size ? `(${questions.size}) Switchboard: waiting for you` : "Switchboard";
}

/** The answers this console sent, by question id, until the question ends. */
const answersSent = new Map();

/** Keeps an ended question with how it ended (and this console's answer, files counted, not
 * kept) in the history: the last 50, kept across reloads. */
function rememberEnded(id, ending) {
  const question = questions.get(id);
  if (!question) return;
  const sent = answersSent.get(id);
  answersSent.delete(id);
  const isFile = (v) => typeof v === "string" && v.startsWith("data:");
  const answer = sent?.content ? Object.fromEntries(Object.entries(sent.content).map(([name, value]) =>
    [name, isFile(value) ? "1 file" : Array.isArray(value) && value.some(isFile) ? `${value.length} file(s)` : value])) : undefined;
  kept.history.unshift({
    at: Date.now(), server: question.server, tool: question.tool ?? null,
    message: (question.message ?? "").slice(0, 300), ending, answer: answer ?? null,
  });
  kept.history.length = Math.min(kept.history.length, 50);
  keep();
  renderHistory();
}

function renderHistory() {
  $("#history-panel").hidden = kept.history.length === 0;
  $("#history").replaceChildren(...kept.history.map((entry) => element("li", { "data-ending": entry.ending },
    element("span", { class: "muted" }, `${new Date(entry.at).toLocaleTimeString()} `),
    element("b", {}, `${entry.server}${entry.tool ? ` · ${entry.tool}` : ""}: `), entry.message, " → ",
    element("span", { class: "ending" }, entry.ending.replace("_", " ")),
    entry.answer ? element("code", {}, ` ${JSON.stringify(entry.answer)}`) : undefined)));
}

/** Tells the person of a new question with a browser notification, when they allowed them
 * and are looking elsewhere. */
function notifyOf(question) {
  if (!("Notification" in window) || Notification.permission !== "granted" || !document.hidden) return;
  const note = new Notification(`${question.server}${question.tool ? ` · ${question.tool}` : ""} asks`, {
    body: question.message ?? "A model's reply is wanted", tag: question.id,
  });
  note.onclick = () => window.focus();
}

/** A card asking one question, with the means to answer it. */
function questionCard(question) {
  const answer = (action, content) => {
    card.querySelector(".error").textContent = "";
    answersSent.set(question.id, { action, content });
    send({ type: "answer", id: question.id, action, content });
  };
  /** Answers with the form's values once its files are read. */
  const answerWith = (form, extra = {}) => filesRead(form).then(
    () => answer("accept", { ...argumentsOf(form), ...extra }),
    (error) => { card.querySelector(".error").textContent = error.message; });
  const button = (label, action, attributes = {}) =>
    element("button", { type: "button", "data-action": action, ...attributes, onclick: () => answer(action) }, label);
  const refuse = [button("Decline", "decline"), button("Dismiss", "cancel")];
  let body;
  const properties = question.schema?.properties ?? {};
  const required = question.schema?.required ?? [];
  const yesNo = question.kind === "form" && required.length === 1 && properties[required[0]]?.type === "boolean";
  if (yesNo) {
    // A yes-or-no question (the human server's `confirm`): answered with one press, with
    // whatever else the form takes (a comment, files) filled in first.
    const [name] = required;
    const rest = { ...question.schema, properties: { ...properties }, required: [] };
    delete rest.properties[name];
    const yes = (value) => () => answerWith(body, { [name]: value });
    body = element("form", {}, ...fieldsOf(rest),
      element("div", { class: "row" },
        element("button", { type: "button", class: "primary", "data-action": "yes", onclick: yes(true) }, "Yes"),
        element("button", { type: "button", "data-action": "no", onclick: yes(false) }, "No"),
        ...refuse));
    body.onsubmit = (event) => event.preventDefault();
  } else if (question.kind === "form") {
    // A call waiting for approval names its arguments' digest, which the form fills in.
    const approval = "arguments_sha256" in properties;
    body = element("form", {}, ...fieldsOf(question.schema),
      element("div", { class: "row" }, element("button", { type: "submit", "data-action": "accept" }, approval ? "Approve" : "Send"),
        ...(approval ? [button("Refuse", "decline")] : refuse)));
    body.onsubmit = (event) => {
      event.preventDefault();
      answerWith(body);
    };
  } else if (question.kind === "url") {
    const web = /^https?:\/\//i.test(question.url);
    body = element("div", {},
      element("p", {}, web
        ? element("a", { href: question.url, target: "_blank", rel: "noopener noreferrer" }, question.url)
        : element("code", {}, question.url)),
      element("div", { class: "row" }, button("Done", "accept", { class: "primary" }), ...refuse));
  } else {
    const reply = element("textarea", { name: "reply", rows: 4, required: "" });
    body = element("form", {},
      question.system_prompt ? element("p", { class: "muted" }, `System: ${question.system_prompt}`) : undefined,
      element("ol", { class: "messages" }, ...question.messages.map((m) =>
        element("li", {}, element("b", {}, `${m.role}: `), m.content?.text ?? JSON.stringify(m.content)))),
      element("label", {}, `Reply as the model (up to ${question.max_tokens} tokens)`, reply),
      element("div", { class: "row" }, element("button", { type: "submit", "data-action": "accept" }, "Send"), button("Decline", "decline")));
    body.onsubmit = (event) => {
      event.preventDefault();
      answer("accept", { text: reply.value });
    };
  }
  const left = element("span", { class: "muted countdown", "aria-hidden": "true" });
  let shown = false;
  const tick = () => {
    if (card.isConnected) shown = true;
    else if (shown) return; // answered or gone: the card was removed
    const seconds = Math.max(0, Math.round((question.expires_at_ms - Date.now()) / 1000));
    left.textContent = `${seconds} s left`;
    if (seconds > 0) setTimeout(tick, 1000);
  };
  const card = element("li", { class: "card question", "data-question": question.id },
    element("h3", {}, `${question.server}${question.tool ? ` · ${question.tool}` : ""}`, left),
    question.message && looksLikeMarkdown(question.message)
      ? element("div", { class: "message markdown" }, markdown(question.message))
      : element("p", { class: "message" }, question.message ?? "A model's reply is wanted:"),
    body,
    element("div", { class: "error", role: "alert" }));
  tick();
  return card;
}

// ---- live events ----

/** The console's WebSocket: events come in, answers go out. */
let socket = null;

function send(message) {
  if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  else say("Not connected to the daemon; the answer was not sent.", true);
}

/** base64url of a text's UTF-8 bytes, unpadded. */
function base64url(text) {
  const bytes = String.fromCharCode(...new TextEncoder().encode(text));
  return btoa(bytes).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function handle(event) {
  logActivity(event);
  if (event.type === "status") {
    questions.clear();
    for (const question of event.questions ?? []) questions.set(question.id, question);
    renderQuestions();
  } else if (event.type === "question_asked") {
    questions.set(event.question.id, event.question);
    renderQuestions();
    notifyOf(event.question);
  } else if (event.type === "question_ended") {
    rememberEnded(event.id, event.ending);
    questions.delete(event.id);
    renderQuestions();
  } else if (event.type === "answer_refused") {
    const card = document.querySelector(`[data-question="${CSS.escape(event.id)}"] .error`);
    if (card) card.textContent = event.error;
    else say(event.error, true);
  }
  if (["status", "configured", "state_changed", "catalog_changed", "scope_needed", "lagged"].includes(event.type)) reloadSoon();
  if (event.type === "endpoint_changed" && !$("#endpoints-panel").hidden) loadEndpoints();
  if (event.type === "tool_definition_changed" && event.server === selected) loadDetail();
  if (event.type === "catalog_changed" && event.server === selected) loadDetail();
}

/** Follows the events over the WebSocket, opening it again whenever it closes. */
function follow() {
  const protocols = ["switchboard"];
  if (apiKey) protocols.push(`bearer.${base64url(apiKey)}`);
  socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/events/ws`, protocols);
  socket.onopen = () => {
    $("#live").textContent = "live";
    $("#live").className = "badge live";
  };
  socket.onmessage = (message) => handle(JSON.parse(message.data));
  socket.onclose = () => {
    $("#live").textContent = "reconnecting…";
    $("#live").className = "badge dead";
    setTimeout(follow, 2000);
  };
}

// Whose workspace first: on a listener that wants a key, that is where the page asks for it.
applyTheme();
for (const entry of kept.activity) showActivity(entry.type, entry.line, true);
loadMe().then(() => {
  loadHistory();
  api("GET", "/api/status").then((status) => { $("#version").textContent = `v${status.version}`; }).catch(() => {});
  return loadServers();
}).then(() => {
  // Where the person was before the reload.
  const open = kept.open;
  if (open?.server && servers.some((s) => s.id === open.server)) {
    return openDetail(open.server).then(() => {
      if (open.tab && open.tab !== "tools") document.querySelector(`[data-tab="${CSS.escape(open.tab)}"]`)?.click();
    });
  }
}).then(follow);
