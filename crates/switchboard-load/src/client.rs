//! A minimal MCP client over Streamable HTTP for load: one `tools/call` per POST, nothing else.
//!
//! Written by hand on purpose: the harness must cost as little as possible per call so that the
//! figures measure the server, and it needs exactly two shapes of traffic, a stateless
//! 2026-07-28 request and a request in a 2025-11-25 session, which it sends as the spec writes
//! them.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// Which protocol shape the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// Stateless 2026-07-28 requests with per-request `_meta`.
    Stateless,
    /// A 2025-11-25 session opened with `initialize`.
    Session,
}

impl Shape {
    /// How the shape is named in reports.
    pub fn label(self) -> &'static str {
        match self {
            Shape::Stateless => "2026-07-28 stateless",
            Shape::Session => "2025-11-25 session",
        }
    }

    fn version(self) -> &'static str {
        match self {
            Shape::Stateless => "2026-07-28",
            Shape::Session => "2025-11-25",
        }
    }
}

/// One client: a connection pool and, for sessions, its session id.
pub struct McpClient {
    http: reqwest::Client,
    url: String,
    shape: Shape,
    session: Option<String>,
    /// The API key it calls with (a user of a `serve --users` daemon), if any.
    key: Option<String>,
    next_id: AtomicU64,
}

impl McpClient {
    /// A client of `url`; a session client initializes its session first.
    pub async fn open(url: &str, shape: Shape) -> anyhow::Result<Self> {
        Self::open_as(url, shape, None).await
    }

    /// [`Self::open`], calling with the API `key` when given.
    pub async fn open_as(url: &str, shape: Shape, key: Option<String>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(4)
            .build()
            .context("building the HTTP client")?;
        let mut client = Self {
            http,
            url: url.to_owned(),
            shape,
            session: None,
            key,
            next_id: AtomicU64::new(1),
        };
        if shape == Shape::Session {
            let response = client
                .post(
                    "initialize",
                    None,
                    json!({"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "switchboard-load", "version": "1"}}),
                )
                .await?;
            let session = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .context("the server opened no session")?;
            let _ = response.bytes().await;
            client.session = Some(session);
            client
                .http
                .post(&client.url)
                .headers(client.headers("notifications/initialized", None))
                .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .send()
                .await
                .context("sending notifications/initialized")?;
        }
        Ok(client)
    }

    fn headers(&self, method: &str, name: Option<&str>) -> reqwest::header::HeaderMap {
        let mut headers = reqwest::header::HeaderMap::new();
        let mut set = |key: &'static str, value: &str| {
            if let Ok(value) = value.parse() {
                headers.insert(key, value);
            }
        };
        set("accept", "application/json, text/event-stream");
        if method != "initialize" {
            set("mcp-protocol-version", self.shape.version());
        }
        if let Some(session) = &self.session {
            set("mcp-session-id", session);
        }
        if let Some(key) = &self.key {
            set("authorization", &format!("Bearer {key}"));
        }
        if self.shape == Shape::Stateless {
            set("mcp-method", method);
            if let Some(name) = name {
                set("mcp-name", name);
            }
        }
        headers
    }

    async fn post(
        &self,
        method: &str,
        name: Option<&str>,
        mut params: Value,
    ) -> anyhow::Result<reqwest::Response> {
        if self.shape == Shape::Stateless {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let response = self
            .http
            .post(&self.url)
            .headers(self.headers(method, name))
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .send()
            .await
            .with_context(|| format!("{method} to {}", self.url))?;
        if !response.status().is_success() {
            bail!("{method} got HTTP {}", response.status());
        }
        Ok(response)
    }

    /// Calls `tool` with `arguments`; fails on a transport error, a JSON-RPC error or an
    /// `isError` result.
    pub async fn call(&self, tool: &str, arguments: Value) -> anyhow::Result<Value> {
        let response = self
            .post(
                "tools/call",
                Some(tool),
                json!({"name": tool, "arguments": arguments}),
            )
            .await?;
        let body = response.text().await.context("reading the response")?;
        let message = body
            .lines()
            .map(|line| line.strip_prefix("data:").map_or(line, str::trim))
            .filter(|data| data.starts_with('{'))
            .filter_map(|data| serde_json::from_str::<Value>(data).ok())
            .find(|message| message.get("id").is_some())
            .with_context(|| format!("no response in {body:.200}"))?;
        if let Some(error) = message.get("error") {
            bail!("JSON-RPC error: {error}");
        }
        let result = message.get("result").cloned().unwrap_or_default();
        if result.get("isError") == Some(&Value::Bool(true)) {
            bail!("the tool failed: {result}");
        }
        Ok(result)
    }
}
