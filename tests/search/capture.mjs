#!/usr/bin/env node
// Captures the tools of real MCP servers for the search dev set (issue 18): starts each server
// below over stdio, initializes a session, calls `tools/list` until the last page, and writes
// `tools/<id>.json` beside this script: {server, package, registry, description, tools}, the
// tools exactly as the server listed them.
//
// The servers are installed beforehand, outside the repository (see README.md):
//
//   node tests/search/capture.mjs --npm /tmp/mcpcap/npm --py /tmp/mcpcap/pyenvs [id ...]
//
// --npm is a directory whose node_modules holds the npm packages; --py a directory holding one
// virtual environment per PyPI package, named after the package. With ids, only those servers
// are captured. A server that fails to start or to list is reported and skipped (exit code 1).
//
// No server is given a real credential: servers that insist on one at start get a placeholder
// value, which is enough to list their tools. Each runs with a scratch HOME and a minimal
// environment, so nothing of this machine's own configuration reaches it.
//
// A minimal JSON-RPC client of its own (newline-delimited messages on stdin and stdout), so that
// the tools are saved as they came, without any SDK's schema parsing in between.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const PLACEHOLDER = "capture-placeholder-not-a-credential";
const PROTOCOL_VERSION = "2025-11-25";
const TIMEOUT_MS = 90_000;

// Desktop Commander describes the machine it runs on in its tool descriptions: in a container,
// the container's mounted directories. Servers marked `plainHost` start with this module
// preloaded, which hides the container markers it looks for, so that they describe a plain Linux
// host rather than the machine that happened to capture them.
const PLAIN_HOST = `
import fs from "node:fs";
const hidden = new Set(["/.dockerenv"]);
const blank = new Set(["/proc/1/cgroup", "/proc/1/environ", "/proc/mounts", "/proc/self/mountinfo"]);
const exists = fs.existsSync;
fs.existsSync = (path, ...rest) => (hidden.has(String(path)) ? false : exists(path, ...rest));
const read = fs.readFileSync;
fs.readFileSync = (path, ...rest) =>
  blank.has(String(path)) ? (rest[0] ? "" : Buffer.alloc(0)) : read(path, ...rest);
`;

// Each server: id (its file name and exposed prefix), the package and registry it comes from,
// a one-line description of what it is, and how to start it (`bin` from the package's install,
// `args` with {scratch} standing for a fresh scratch directory, `env` added to the minimal one).
const SERVERS = [
  // npm
  { id: "filesystem", registry: "npm", package: "@modelcontextprotocol/server-filesystem", bin: "mcp-server-filesystem", args: ["{scratch}"],
    description: "Local files and directories under allowed roots: read, write, edit, move, search, list" },
  { id: "memory", registry: "npm", package: "@modelcontextprotocol/server-memory", bin: "mcp-server-memory", env: { MEMORY_FILE_PATH: "{scratch}/memory.jsonl" },
    description: "Persistent memory kept as a knowledge graph of entities, relations and observations" },
  { id: "sequential-thinking", registry: "npm", package: "@modelcontextprotocol/server-sequential-thinking", bin: "mcp-server-sequential-thinking",
    description: "Structured step-by-step thinking for working through a problem" },
  { id: "everything", registry: "npm", package: "@modelcontextprotocol/server-everything", bin: "mcp-server-everything", args: ["stdio"],
    description: "MCP reference and test server exercising every protocol feature" },
  { id: "github", registry: "npm", package: "@modelcontextprotocol/server-github", bin: "mcp-server-github", env: { GITHUB_PERSONAL_ACCESS_TOKEN: PLACEHOLDER },
    description: "GitHub: repositories, files, branches, issues, pull requests, code and user search" },
  { id: "gitlab", registry: "npm", package: "@modelcontextprotocol/server-gitlab", bin: "mcp-server-gitlab", env: { GITLAB_PERSONAL_ACCESS_TOKEN: PLACEHOLDER },
    description: "GitLab: projects, files, branches, issues and merge requests" },
  { id: "slack", registry: "npm", package: "@modelcontextprotocol/server-slack", bin: "mcp-server-slack", env: { SLACK_BOT_TOKEN: PLACEHOLDER, SLACK_TEAM_ID: PLACEHOLDER },
    description: "Slack workspace: channels, messages, threads, reactions and users" },
  { id: "brave-search", registry: "npm", package: "@modelcontextprotocol/server-brave-search", bin: "mcp-server-brave-search", env: { BRAVE_API_KEY: PLACEHOLDER },
    description: "Brave Search API: web search and local business search" },
  { id: "google-maps", registry: "npm", package: "@modelcontextprotocol/server-google-maps", bin: "mcp-server-google-maps", env: { GOOGLE_MAPS_API_KEY: PLACEHOLDER },
    description: "Google Maps Platform: geocoding, places, directions, distances and elevation" },
  { id: "postgres", registry: "npm", package: "@modelcontextprotocol/server-postgres", bin: "mcp-server-postgres", args: ["postgresql://127.0.0.1:1/placeholder"],
    description: "Read-only access to a PostgreSQL database" },
  { id: "puppeteer", registry: "npm", package: "@modelcontextprotocol/server-puppeteer", bin: "mcp-server-puppeteer",
    description: "Browser automation with Puppeteer: navigate, click, fill forms, screenshots, run JavaScript" },
  { id: "playwright", registry: "npm", package: "@playwright/mcp", bin: "playwright-mcp", args: ["--headless", "--user-data-dir", "{scratch}/profile"],
    description: "Browser automation with Playwright, driven through accessibility snapshots of the page" },
  { id: "notion", registry: "npm", package: "@notionhq/notion-mcp-server", bin: "notion-mcp-server", env: { NOTION_TOKEN: PLACEHOLDER },
    description: "Notion workspace: pages, databases, blocks, comments, users and search" },
  { id: "context7", registry: "npm", package: "@upstash/context7-mcp", bin: "context7-mcp",
    description: "Up-to-date documentation and code examples for programming libraries" },
  { id: "firecrawl", registry: "npm", package: "firecrawl-mcp", bin: "firecrawl-mcp", env: { FIRECRAWL_API_KEY: "fc-" + PLACEHOLDER },
    description: "Firecrawl: web scraping, crawling, site maps, search and structured extraction" },
  { id: "tavily", registry: "npm", package: "tavily-mcp", bin: "tavily-mcp", env: { TAVILY_API_KEY: PLACEHOLDER },
    description: "Tavily: web search, page extraction, crawling and site maps for AI agents" },
  { id: "exa", registry: "npm", package: "exa-mcp-server", bin: "exa-mcp-server", env: { EXA_API_KEY: PLACEHOLDER },
    description: "Exa: AI web search, and web pages fetched as clean text" },
  { id: "desktop-commander", registry: "npm", package: "@wonderwhy-er/desktop-commander", bin: "desktop-commander", plainHost: true,
    description: "The local machine: terminal commands, processes, and reading, writing and editing files" },
  { id: "chart", registry: "npm", package: "@antv/mcp-server-chart", bin: "mcp-server-chart",
    description: "AntV charts: renders charts, graphs, maps and diagrams from data" },
  { id: "mongodb", registry: "npm", package: "mongodb-mcp-server", bin: "mongodb-mcp-server",
    description: "MongoDB databases: queries, aggregations, collections, indexes, and the MongoDB knowledge base" },
  { id: "airtable", registry: "npm", package: "airtable-mcp-server", bin: "airtable-mcp-server", env: { AIRTABLE_API_KEY: PLACEHOLDER },
    description: "Airtable: bases, tables, fields, records and comments" },
  { id: "youtube-transcript", registry: "npm", package: "@kimtaeyoon83/mcp-server-youtube-transcript", bin: "mcp-server-youtube-transcript",
    description: "Transcripts and subtitles of YouTube videos" },
  { id: "circleci", registry: "npm", package: "@circleci/mcp-server-circleci", bin: "mcp-server-circleci", env: { CIRCLECI_TOKEN: PLACEHOLDER },
    description: "CircleCI: pipelines, build failure logs, flaky tests, config validation" },
  { id: "kubernetes", registry: "npm", package: "mcp-server-kubernetes", bin: "mcp-server-kubernetes",
    description: "Kubernetes clusters through kubectl and Helm: pods, deployments, services, logs" },
  { id: "airbnb", registry: "npm", package: "@openbnb/mcp-server-airbnb", bin: "mcp-server-airbnb", args: ["--ignore-robots-txt"],
    description: "Airbnb: search listings and get listing details" },
  { id: "datadog", registry: "npm", package: "@winor30/mcp-server-datadog", bin: "mcp-server-datadog", env: { DATADOG_API_KEY: PLACEHOLDER, DATADOG_APP_KEY: PLACEHOLDER },
    description: "Datadog monitoring: incidents, monitors, logs, metrics, traces, dashboards, hosts" },
  { id: "sentry", registry: "npm", package: "@sentry/mcp-server", bin: "sentry-mcp", args: ["--access-token=" + PLACEHOLDER],
    description: "Sentry error monitoring: organizations, projects, issues, events, root-cause analysis" },
  { id: "mapbox", registry: "npm", package: "@mapbox/mcp-server", bin: "mcp-server", env: { MAPBOX_ACCESS_TOKEN: "pk." + PLACEHOLDER },
    description: "Mapbox: geocoding, places, directions, travel-time matrices, isochrones, maps, and geometry (areas, distances, polygons)" },
  // PyPI
  { id: "fetch", registry: "pypi", package: "mcp-server-fetch", bin: "mcp-server-fetch",
    description: "Fetches a web page by URL and converts it to markdown" },
  { id: "git", registry: "pypi", package: "mcp-server-git", bin: "mcp-server-git", args: ["--repository", "{scratch}/repo"], gitRepo: "{scratch}/repo",
    description: "A local Git repository: status, diffs, staging, commits, log, branches" },
  { id: "time", registry: "pypi", package: "mcp-server-time", bin: "mcp-server-time", args: ["--local-timezone", "UTC"],
    description: "The current time and conversions between time zones" },
  { id: "sqlite", registry: "pypi", package: "mcp-server-sqlite", bin: "mcp-server-sqlite", args: ["--db-path", "{scratch}/capture.db"],
    description: "A local SQLite database: queries, tables, schema, and a business-insights memo" },
  { id: "duckduckgo", registry: "pypi", package: "duckduckgo-mcp-server", bin: "duckduckgo-mcp-server",
    description: "DuckDuckGo web search and web page content fetching" },
  { id: "arxiv", registry: "pypi", package: "arxiv-mcp-server", bin: "arxiv-mcp-server", args: ["--storage-path", "{scratch}/papers"],
    description: "arXiv research papers: search, download and read" },
  { id: "excel", registry: "pypi", package: "excel-mcp-server", bin: "excel-mcp-server", args: ["stdio"], env: { EXCEL_FILES_PATH: "{scratch}" },
    description: "Excel workbooks: create, read and write sheets, formulas, formatting, charts, pivot tables" },
  { id: "word", registry: "pypi", package: "office-word-mcp-server", bin: "word_mcp_server",
    description: "Microsoft Word documents: create, edit, format, tables, comments, PDF conversion" },
  { id: "obsidian", registry: "pypi", package: "mcp-obsidian", bin: "mcp-obsidian", env: { OBSIDIAN_API_KEY: PLACEHOLDER },
    description: "An Obsidian vault through its Local REST API plugin: notes, search, periodic notes" },
  { id: "clickhouse", registry: "pypi", package: "mcp-clickhouse", bin: "mcp-clickhouse", env: { CLICKHOUSE_HOST: "127.0.0.1", CLICKHOUSE_PORT: "1", CLICKHOUSE_USER: "default", CLICKHOUSE_PASSWORD: "", CLICKHOUSE_SECURE: "false" },
    description: "ClickHouse analytics databases: list databases and tables, run read-only SQL" },
  { id: "pandoc", registry: "pypi", package: "mcp-pandoc", bin: "mcp-pandoc",
    description: "Document conversion between formats with pandoc" },
];

function parseArgs(argv) {
  const options = { npm: null, py: null, ids: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--npm") options.npm = argv[++i];
    else if (argv[i] === "--py") options.py = argv[++i];
    else options.ids.push(argv[i]);
  }
  if (!options.npm || !options.py) {
    console.error("usage: node capture.mjs --npm <dir with node_modules> --py <dir of venvs> [id ...]");
    process.exit(2);
  }
  return options;
}

/// The installed version of a server's package.
function versionOf(server, options) {
  if (server.registry === "npm") {
    const manifest = join(options.npm, "node_modules", server.package, "package.json");
    return JSON.parse(readFileSync(manifest, "utf8")).version;
  }
  const python = join(options.py, server.package, "bin", "python");
  return execFileSync(python, ["-c", `import importlib.metadata as m; print(m.version(${JSON.stringify(server.package)}))`])
    .toString()
    .trim();
}

function commandOf(server, options) {
  return server.registry === "npm"
    ? join(options.npm, "node_modules", ".bin", server.bin)
    : join(options.py, server.package, "bin", server.bin);
}

/// Lists the tools of one running server: initialize, then tools/list page by page.
async function listTools(command, args, env) {
  const child = spawn(command, args, { env, stdio: ["pipe", "pipe", "pipe"], detached: true });
  const pending = new Map();
  let nextId = 1;
  let stderr = "";
  let buffer = "";
  let exited = null;
  child.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  child.stdout.on("data", (chunk) => {
    buffer += chunk;
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (!line) continue;
      let message;
      try {
        message = JSON.parse(line);
      } catch {
        continue; // a log line on stdout
      }
      if (message.id !== undefined && pending.has(message.id) && !message.method) {
        const { resolve, reject } = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) reject(new Error(`JSON-RPC error ${JSON.stringify(message.error)}`));
        else resolve(message.result);
      } else if (message.method && message.id !== undefined) {
        // A request from the server (roots/list, ping): answer it empty.
        const result = message.method === "roots/list" ? { roots: [] } : {};
        child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }) + "\n");
      }
    }
  });
  child.stdin.on("error", () => {});
  child.on("exit", (code, signal) => {
    exited = `exited (${code ?? signal})`;
    for (const { reject } of pending.values()) reject(new Error(exited));
    pending.clear();
  });
  const request = (method, params) =>
    new Promise((resolve, reject) => {
      if (exited) return reject(new Error(exited));
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  const timer = setTimeout(() => {
    for (const { reject } of pending.values()) reject(new Error("timed out"));
    pending.clear();
  }, TIMEOUT_MS);
  try {
    await request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: "switchboard-search-capture", version: "1.0.0" },
    });
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
    const tools = [];
    let cursor;
    do {
      const page = await request("tools/list", cursor ? { cursor } : {});
      tools.push(...(page.tools ?? []));
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  } catch (error) {
    error.message += `\n--- stderr ---\n${stderr.trim()}`;
    throw error;
  } finally {
    clearTimeout(timer);
    if (!exited) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
      setTimeout(() => {
        try {
          if (!exited) process.kill(-child.pid, "SIGKILL");
        } catch {}
      }, 2000).unref();
    }
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const selected = options.ids.length ? SERVERS.filter((s) => options.ids.includes(s.id)) : SERVERS;
  const out = join(HERE, "tools");
  mkdirSync(out, { recursive: true });
  let failed = 0;
  for (const server of selected) {
    const scratch = mkdtempSync(join(tmpdir(), `capture-${server.id}-`));
    const fill = (text) => text.replaceAll("{scratch}", scratch);
    mkdirSync(join(scratch, "home"), { recursive: true });
    if (server.gitRepo) {
      execFileSync("git", ["init", "-q", fill(server.gitRepo)]);
    }
    const env = {
      PATH: process.env.PATH,
      HOME: join(scratch, "home"),
      LANG: "C.UTF-8",
      DO_NOT_TRACK: "1",
      ...Object.fromEntries(Object.entries(server.env ?? {}).map(([k, v]) => [k, fill(v)])),
    };
    if (server.plainHost) {
      env.NODE_OPTIONS = `--import=data:text/javascript,${encodeURIComponent(PLAIN_HOST)}`;
    }
    const args = (server.args ?? []).map(fill);
    try {
      const version = versionOf(server, options);
      const tools = await listTools(commandOf(server, options), args, env);
      if (tools.length === 0) throw new Error("listed no tools");
      const record = {
        server: server.id,
        package: `${server.package}@${version}`,
        registry: server.registry,
        description: server.description,
        tools,
      };
      writeFileSync(join(out, `${server.id}.json`), JSON.stringify(record, null, 2) + "\n");
      console.log(`${server.id}: ${tools.length} tools (${server.package}@${version})`);
    } catch (error) {
      failed++;
      console.error(`${server.id}: FAILED: ${error.message}`);
    }
  }
  process.exit(failed ? 1 : 0);
}

main();
