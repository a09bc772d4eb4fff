//! Where the CLI's reads and calls go: the daemon serving this data directory, or servers
//! started in this process when none does.
//!
//! Both answer in the same shapes (the daemon's status report, each server's catalog, rmcp's
//! results), so every command prints the same whichever one answered.

use std::sync::Arc;

use anyhow::{Context, bail};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_core::ConnectionState;
use switchboard_hub::model::{CallToolResult, GetPromptResult, ReadResourceResult, Tool};
use switchboard_hub::{FoundTool, Hub, ServerCatalog};
use switchboard_upstream::{CallContext, Progress};
use tokio_util::sync::CancellationToken;

use crate::commands::parse_id;
use crate::daemon::Daemon;
use crate::hubs::{did_you_mean, one_line_status};

/// Where the answers come from.
pub enum Reach {
    /// The running daemon, through its admin API.
    Daemon(Daemon),
    /// Servers this process started.
    Here(Arc<Hub>),
}

/// One server's line of a status report: what the CLI shows of it.
#[derive(Debug, Clone, Deserialize)]
pub struct StatusLine {
    /// The server's id.
    pub server: String,
    /// Its connection state.
    pub state: ConnectionState,
    /// `http`, `websocket` or `stdio`.
    pub transport: String,
    /// For HTTP: the transport the probe found.
    #[serde(default)]
    pub detected_transport: Option<String>,
    /// The negotiated protocol version.
    #[serde(default)]
    pub protocol_version: Option<String>,
    /// Its enabled tools.
    pub tools: usize,
    /// Its resources.
    pub resources: usize,
    /// Its prompts.
    pub prompts: usize,
    /// What is wrong, in plain words.
    #[serde(default)]
    pub error: Option<String>,
}

/// A tool shown under another name than its server's.
#[derive(Debug, Clone, Deserialize)]
pub struct RenamedTool {
    /// Its server.
    pub server: String,
    /// The server's name for it.
    pub original: String,
    /// The name clients call it by.
    pub exposed: String,
}

/// A status report (`GET /api/status`), as the CLI reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct StatusView {
    /// Every server.
    pub servers: Vec<StatusLine>,
    /// Tools shown under another name.
    #[serde(default)]
    pub renamed: Vec<RenamedTool>,
    /// What to do about the names.
    #[serde(default)]
    pub advice: Vec<String>,
}

/// What a search found, and why it ranked by words only if it did.
#[derive(Debug, Deserialize)]
pub struct Found {
    /// Why the ranking is by words only although a model is configured.
    #[serde(default)]
    pub note: Option<String>,
    /// The tools, best first.
    pub tools: Vec<FoundTool>,
}

impl Reach {
    /// The status report: as JSON (what `--json` prints), and read.
    pub async fn status(&self) -> anyhow::Result<(Value, StatusView)> {
        let report = match self {
            Self::Daemon(daemon) => daemon.get::<Value>("/api/status").await?,
            Self::Here(hub) => {
                hub.rebuild_exposed();
                serde_json::to_value(hub.status_report())?
            }
        };
        let view = serde_json::from_value(report.clone()).context("reading the status report")?;
        Ok((report, view))
    }

    /// Each server's catalog (only `only`'s when given), in id order; a server not running has
    /// an empty one. Says on stderr which servers are not connected.
    pub async fn catalogs(
        &self,
        only: Option<&str>,
    ) -> anyhow::Result<(Vec<(String, ServerCatalog)>, Vec<StatusLine>)> {
        let (_, status) = self.status().await?;
        let lines: Vec<StatusLine> = status
            .servers
            .into_iter()
            .filter(|line| only.is_none_or(|id| line.server == id))
            .collect();
        if let (Some(id), true) = (only, lines.is_empty()) {
            bail!("no server with id '{id}' is running");
        }
        let mut catalogs = Vec::new();
        for line in &lines {
            let catalog = match self {
                Self::Here(hub) => (*hub.catalog(&parse_id(&line.server)?)?).clone(),
                Self::Daemon(daemon) => daemon_catalog(daemon, &line.server).await?,
            };
            catalogs.push((line.server.clone(), catalog));
        }
        if matches!(self, Self::Daemon(_)) {
            for line in &lines {
                if line.state != ConnectionState::Connected {
                    eprintln!("warning: {}", one_line_status(line));
                }
            }
        }
        Ok((catalogs, lines))
    }

    /// Tools ranked for `query`.
    pub async fn search(
        &self,
        query: &str,
        limit: usize,
        regex: bool,
        min_score: Option<f32>,
    ) -> anyhow::Result<Found> {
        match self {
            Self::Here(hub) => {
                hub.rebuild_exposed();
                if !regex {
                    // A one-shot search waits for the vectors (computed once, then read from
                    // the store).
                    hub.prepare_semantic_search().await?;
                }
                let mut search = hub
                    .search_tools(query, limit, regex, None)
                    .await
                    .map_err(|e| anyhow::anyhow!(e))?;
                if let Some(min_score) = min_score {
                    search.keep_scoring_at_least(min_score);
                }
                Ok(Found {
                    note: search.note,
                    tools: search.tools,
                })
            }
            Self::Daemon(daemon) => {
                let mut url = daemon.url_of("/api/tools/search");
                url.query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("limit", &limit.to_string())
                    .append_pair("regex", &regex.to_string());
                if let Some(min_score) = min_score {
                    url.query_pairs_mut()
                        .append_pair("min_score", &min_score.to_string());
                }
                let path = format!("/api/tools/search?{}", url.query().unwrap_or_default());
                Ok(daemon.get(&path).await?)
            }
        }
    }

    /// The input schema of `server`'s tool `tool`, or an error naming the tool meant.
    pub async fn tool_schema(
        &self,
        server: &str,
        tool: &str,
    ) -> anyhow::Result<Map<String, Value>> {
        let (catalogs, lines) = self.catalogs(Some(server)).await?;
        let connected = lines
            .iter()
            .any(|line| line.state == ConnectionState::Connected);
        let tools = catalogs
            .into_iter()
            .flat_map(|(_, catalog)| catalog.tools)
            .collect::<Vec<_>>();
        match tools.iter().find(|t| t.name == tool) {
            Some(found) => Ok((*found.input_schema).clone()),
            None if !connected && tools.is_empty() => {
                let why = lines.first().map(one_line_status).unwrap_or_default();
                bail!("{why}")
            }
            None => bail!(
                "server '{server}' has no tool '{tool}'{}",
                did_you_mean(tool, tools.iter().map(|t| t.name.as_ref()))
            ),
        }
    }

    /// Calls `server`'s tool `tool` with `arguments`, reporting progress to `progress`;
    /// cancelling `cancel` cancels it at the server.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        progress: tokio::sync::mpsc::UnboundedSender<Progress>,
        cancel: CancellationToken,
    ) -> anyhow::Result<CallToolResult> {
        match self {
            Self::Here(hub) => {
                let id = parse_id(server)?;
                let upstream = hub.upstream_for_tool(&id, tool)?;
                let arguments = hub.with_fixed_arguments(&id, tool, Some(arguments));
                let origin = hub.call_origin("cli", None, None, tool, arguments.as_ref());
                let result = upstream
                    .call_tool(
                        tool,
                        arguments,
                        &CallContext {
                            progress: Some(progress),
                            cancel,
                            repeatable: hub.call_repeatable(&id, tool),
                            origin,
                            ..Default::default()
                        },
                    )
                    .await?;
                Ok(result)
            }
            Self::Daemon(daemon) => {
                call_at_daemon(daemon, server, tool, arguments, progress, cancel).await
            }
        }
    }

    /// Reads `uri` at `server`.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> anyhow::Result<ReadResourceResult> {
        match self {
            Self::Here(hub) => Ok(hub
                .upstream(&parse_id(server)?)?
                .read_resource(uri, &CallContext::default())
                .await?),
            Self::Daemon(daemon) => {
                let mut url = daemon.url_of("/api/servers/x/resource");
                url.query_pairs_mut().append_pair("uri", uri);
                let path = format!(
                    "/api/servers/{}/resource?{}",
                    path_segment(server),
                    url.query().unwrap_or_default()
                );
                Ok(daemon.get(&path).await?)
            }
        }
    }

    /// Gets `server`'s prompt `name` with `arguments`.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: Map<String, Value>,
    ) -> anyhow::Result<GetPromptResult> {
        match self {
            Self::Here(hub) => Ok(hub
                .upstream(&parse_id(server)?)?
                .get_prompt(name, Some(arguments), &CallContext::default())
                .await?),
            Self::Daemon(daemon) => {
                let path = format!(
                    "/api/servers/{}/prompts/{}/get",
                    path_segment(server),
                    path_segment(name)
                );
                Ok(daemon.post(&path, &json!({"arguments": arguments})).await?)
            }
        }
    }

    /// Stops the servers this process started (the daemon's go on).
    pub async fn close(self) {
        if let Self::Here(hub) = self {
            hub.shutdown().await;
        }
    }
}

/// `text` as one path segment.
pub fn path_segment(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// A server's catalog as the daemon's API lists it: the tools it exposes (disabled ones
/// apart), resources, templates and prompts. A server not running has an empty one.
async fn daemon_catalog(daemon: &Daemon, server: &str) -> anyhow::Result<ServerCatalog> {
    let id = path_segment(server);
    let tools: Value = daemon.get(&format!("/api/servers/{id}/tools")).await?;
    let mut catalog = ServerCatalog::default();
    for listed in tools["tools"].as_array().into_iter().flatten() {
        let tool = tool_from_api(listed)?;
        if listed["settings"]["enabled"] == false {
            catalog.disabled_tools.push(tool);
        } else {
            catalog.tools.push(tool);
        }
    }
    let not_running = |error: &crate::daemon::DaemonError| matches!(error, crate::daemon::DaemonError::Refused { status, .. } if *status == 409 || *status == 503);
    match daemon
        .get::<Value>(&format!("/api/servers/{id}/resources"))
        .await
    {
        Ok(mut listed) => {
            catalog.resources = serde_json::from_value(listed["resources"].take())?;
            catalog.resource_templates =
                serde_json::from_value(listed["resource_templates"].take())?;
        }
        Err(error) if not_running(&error) => {}
        Err(error) => return Err(error.into()),
    }
    match daemon
        .get::<Value>(&format!("/api/servers/{id}/prompts"))
        .await
    {
        Ok(mut listed) => catalog.prompts = serde_json::from_value(listed["prompts"].take())?,
        Err(error) if not_running(&error) => {}
        Err(error) => return Err(error.into()),
    }
    Ok(catalog)
}

/// An rmcp tool from the API's view of one (`input_schema` for `inputSchema`, and so on).
fn tool_from_api(listed: &Value) -> anyhow::Result<Tool> {
    let mut tool = Map::new();
    for (from, to) in [
        ("name", "name"),
        ("title", "title"),
        ("description", "description"),
        ("input_schema", "inputSchema"),
        ("output_schema", "outputSchema"),
        ("annotations", "annotations"),
        ("_meta", "_meta"),
    ] {
        if let Some(value) = listed.get(from).filter(|v| !v.is_null()) {
            tool.insert(to.into(), value.clone());
        }
    }
    serde_json::from_value(Value::Object(tool)).context("reading a tool the daemon listed")
}

/// A call through the daemon's API, as a stream: progress as it comes, then the result;
/// cancelling drops the stream, which cancels the call at the server.
async fn call_at_daemon(
    daemon: &Daemon,
    server: &str,
    tool: &str,
    arguments: Map<String, Value>,
    progress: tokio::sync::mpsc::UnboundedSender<Progress>,
    cancel: CancellationToken,
) -> anyhow::Result<CallToolResult> {
    let path = format!(
        "/api/servers/{}/tools/{}/call",
        path_segment(server),
        path_segment(tool)
    );
    let request = daemon
        .request(reqwest::Method::POST, &path)
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .json(&json!({"arguments": arguments}));
    let response = tokio::select! {
        response = daemon.answer(request) => response?,
        () = cancel.cancelled() => bail!("cancelled"),
    };
    let mut events = switchboard_upstream::bounded_sse(
        response.bytes_stream(),
        switchboard_upstream::MAX_SSE_EVENT_BYTES,
    );
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = cancel.cancelled() => bail!("cancelled"),
        };
        let Some(event) = event else {
            bail!("the daemon ended the call's stream without a result");
        };
        let event = event.context("reading the call's stream from the daemon")?;
        let data: Value = serde_json::from_str(event.data.as_deref().unwrap_or("null"))
            .context("reading an event of the call's stream")?;
        match event.event.as_deref() {
            Some("progress") => {
                let _ = progress.send(Progress {
                    progress: data["progress"].as_f64().unwrap_or_default(),
                    total: data["total"].as_f64(),
                    message: data["message"].as_str().map(str::to_owned),
                });
            }
            Some("result") => return Ok(serde_json::from_value(data)?),
            Some("error") => bail!(
                "{}",
                data["error"]
                    .as_str()
                    .unwrap_or("the call failed at the daemon")
            ),
            _ => {}
        }
    }
}
