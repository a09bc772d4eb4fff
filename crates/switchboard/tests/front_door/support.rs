//! What the front-door tests share: a running daemon ([`Daemon`]), the servers it fronts, and
//! clients of every era (Switchboard's rmcp-based connector, raw 2026-07-28 calls, 2025-11-25
//! sessions) with readers of their answers.

use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::transports;
use switchboard_upstream::{CallContext, ConnectOptions, Connection, InputPolicy, connect};

use crate::common::switchboard;

pub(crate) fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn add(data_dir: &Path, args: &[&str]) {
    let mut all = vec!["server", "add"];
    all.extend_from_slice(args);
    ok(&switchboard(data_dir, &all));
}

pub(crate) fn everything() -> String {
    switchboard_fixtures::server_everything_entry()
        .display()
        .to_string()
}

pub(crate) fn stdio_fixture() -> String {
    switchboard_fixtures::stdio_fixture_binary()
        .display()
        .to_string()
}

/// A running `switchboard serve`; killed on drop.
pub(crate) struct Daemon {
    _child: tokio::process::Child,
    pub(crate) base: String,
}

impl Daemon {
    /// Starts the daemon and waits (up to 30 s) until `servers` of its servers are connected.
    pub(crate) async fn start(data_dir: &Path, servers: usize) -> (Self, Value) {
        Self::start_with(data_dir, servers, &[]).await
    }

    /// [`Daemon::start`] with more options for `serve`.
    pub(crate) async fn start_with(
        data_dir: &Path,
        servers: usize,
        options: &[&str],
    ) -> (Self, Value) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("--data-dir")
            .arg(data_dir)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(options)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let daemon = Self {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let status = daemon.wait_for(|s| connected(s) == servers).await;
        (daemon, status)
    }

    pub(crate) fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub(crate) async fn status(&self) -> Option<Value> {
        let response = reqwest::get(format!("{}/api/status", self.base))
            .await
            .ok()?;
        response.json().await.ok()
    }

    pub(crate) async fn wait_for(&self, done: impl Fn(&Value) -> bool) -> Value {
        let mut last = None;
        for _ in 0..600 {
            if let Some(status) = self.status().await {
                if done(&status) {
                    return status;
                }
                last = Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the daemon did not get there within 30 s; last status: {last:#?}");
    }
}

pub(crate) fn connected(status: &Value) -> usize {
    status["servers"].as_array().map_or(0, |s| {
        s.iter().filter(|s| s["state"] == "connected").count()
    })
}

/// Connects Switchboard's own rmcp-based client to `transport`, answering input requests with
/// the schema's defaults.
pub(crate) async fn client(transport: TransportSpec) -> Connection {
    let def = ServerDefinition::new(ServerId::new("switchboard").unwrap(), transport);
    let mut options = ConnectOptions::new("test");
    options.input_policy = InputPolicy::AcceptDefaults;
    connect(&def, None, &options)
        .await
        .expect("the client connects to Switchboard")
}

/// Calls `tool` and cancels the call after `after`; the call must end as cancelled.
pub(crate) async fn call_and_cancel(
    upstream: &switchboard_upstream::Upstream,
    tool: &str,
    arguments: Value,
    after: Duration,
) {
    let cancel = tokio_util::sync::CancellationToken::new();
    let cancelling = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        cancelling.cancel();
    });
    let context = CallContext {
        cancel,
        ..Default::default()
    };
    let outcome = upstream.call_tool(tool, args(arguments), &context).await;
    assert!(
        matches!(outcome, Err(switchboard_upstream::UpstreamError::Cancelled)),
        "{tool}: {outcome:?}"
    );
}

pub(crate) fn args(value: Value) -> Option<serde_json::Map<String, Value>> {
    value.as_object().cloned()
}

pub(crate) fn text(result: &switchboard_upstream::rmcp_model::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap().to_string()
}

/// One 2026-07-28 `tools/call` to `url` by a caller with `capabilities`, as a raw HTTP client
/// sends it; returns the HTTP status and the JSON-RPC response (from a JSON or an SSE body).
pub(crate) async fn tools_call_2026(url: &str, params: Value, capabilities: Value) -> (u16, Value) {
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    let (status, mut messages) = post_tools_call_2026(url, params, capabilities, &name).await;
    let response = messages.pop().expect("a response");
    (status, response)
}

/// Like [`tools_call_2026`] with `mcp_name` as the `Mcp-Name` header, keeping any `_meta`
/// already in `params`; returns the status and every message of the answer, the response last.
pub(crate) async fn post_tools_call_2026(
    url: &str,
    mut params: Value,
    capabilities: Value,
    mcp_name: &str,
) -> (u16, Vec<Value>) {
    if params.get("_meta").is_none() {
        params["_meta"] = json!({});
    }
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28".into();
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", mcp_name)
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}))
        .send()
        .await
        .expect("Switchboard answers");
    let status = response.status().as_u16();
    (status, answer_to(response, 7).await)
}

/// Every message of `response` (a JSON or an SSE body), checking that the response to `id`
/// comes last, once.
pub(crate) async fn answer_to(response: reqwest::Response, id: u64) -> Vec<Value> {
    let body = response.text().await.unwrap();
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim).or(Some(line)))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .collect();
    let answered = messages.iter().position(|message| message["id"] == id);
    assert_eq!(
        answered,
        Some(messages.len().wrapping_sub(1)),
        "the response comes last, once: {body}"
    );
    messages
}

/// A daemon serving the conformance fixture (every revision, so reached statelessly) as `test`.
pub(crate) async fn serving_the_conformance_fixture()
-> (Daemon, transports::RunningFixture, tempfile::TempDir) {
    serving(transports::conformance_http(false).await, "test", &[]).await
}

/// A daemon (started with `options`) serving `fixture` as server `id`, once it is connected.
pub(crate) async fn serving(
    fixture: transports::RunningFixture,
    id: &str,
    options: &[&str],
) -> (Daemon, transports::RunningFixture, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &[id, &fixture.url]);
    let (daemon, _) = Daemon::start_with(dir.path(), 1, options).await;
    (daemon, fixture, dir)
}

/// Whether `fixture` saw one call cancelled within `limit`.
pub(crate) async fn saw_a_cancellation(
    fixture: &transports::RunningFixture,
    limit: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if fixture.state.cancelled_calls.load(Ordering::SeqCst) == 1 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A legacy client's `initialize` at `url`: the HTTP status, the session it opened (if any) and
/// the JSON-RPC answer.
pub(crate) async fn initialize(url: &str) -> (u16, Option<String>, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "front-door-test", "version": "1"}}}),
        )
        .send()
        .await
        .expect("Switchboard answers");
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response.text().await.unwrap();
    let answer = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim).or(Some(line)))
        .find_map(|data| serde_json::from_str::<Value>(data).ok())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {body}"));
    (status, session, answer)
}

/// A POST of `message` in session `id`; returns the HTTP status.
pub(crate) async fn post_in_session(url: &str, id: &str, message: Value) -> u16 {
    send_in_session(url, id, &message).await.status().as_u16()
}

/// A POST of `message` in session `id`, as a 2025-11-25 client sends it.
pub(crate) async fn send_in_session(url: &str, id: &str, message: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-11-25")
        .json(message)
        .send()
        .await
        .expect("Switchboard answers")
}

/// A legacy client's `initialize` (declaring `capabilities`) and `notifications/initialized`
/// at `url`; returns the session.
pub(crate) async fn open_session(url: &str, capabilities: Value) -> String {
    open_session_at(url, "2025-11-25", capabilities).await
}

/// Like [`open_session`], for a client of protocol `version`.
pub(crate) async fn open_session_at(url: &str, version: &str, capabilities: Value) -> String {
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "front-door-test", "version": "1"}}}),
        )
        .send()
        .await
        .expect("Switchboard answers");
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("a session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let sent = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", version)
        .json(&initialized)
        .send()
        .await
        .expect("Switchboard answers");
    assert_eq!(sent.status(), 202);
    session
}

/// A `tools/call` with `id` and `params` in `session`, as a raw HTTP client sends it; returns
/// every message of the answer (from a JSON or an SSE body), the response last.
pub(crate) async fn call_in_session(
    url: &str,
    session: &str,
    id: u64,
    params: Value,
) -> Vec<Value> {
    call_in_session_with(url, session, id, params, false).await
}

/// Like [`call_in_session`]; with `standard_headers`, also sends the SEP-2243 `Mcp-Method` and
/// `Mcp-Name` headers, which only the full path checks (so it takes the call).
pub(crate) async fn call_in_session_with(
    url: &str,
    session: &str,
    id: u64,
    params: Value,
    standard_headers: bool,
) -> Vec<Value> {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25");
    if standard_headers {
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        request = request
            .header("mcp-method", "tools/call")
            .header("mcp-name", name);
    }
    let response = request
        .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
        .send()
        .await
        .expect("Switchboard answers");
    assert_eq!(response.status(), 200);
    answer_to(response, id).await
}

/// Waits (up to 5 s) until `fixture` saw a call after the one whose id was `before`.
pub(crate) async fn reaches_the_server(fixture: &transports::RunningFixture, before: &Value) {
    for _ in 0..250 {
        if last_call_id(fixture) != *before {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the call did not reach the server within 5 s");
}

/// The id of the last `tools/call` `fixture` saw.
pub(crate) fn last_call_id(fixture: &transports::RunningFixture) -> Value {
    fixture
        .state
        .last_call_id
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_default()
}

/// The TypeScript SDK server of the conformance runs (`tests/npm/conformance-upstream.mjs`),
/// on a free loopback port (with `--dual-era`, with its stateless face too); stopped when
/// dropped.
pub(crate) struct TypeScriptSdkServer {
    _child: tokio::process::Child,
    pub(crate) url: String,
    /// The sessions opened at it, as it reports them on stderr.
    pub(crate) sessions: Arc<AtomicUsize>,
}

pub(crate) async fn typescript_sdk_server(dual_era: bool) -> TypeScriptSdkServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = switchboard_fixtures::repository_root().join("tests/npm/conformance-upstream.mjs");
    let mut child = tokio::process::Command::new("node")
        .arg(script)
        .args(["--port", &port.to_string()])
        .args(dual_era.then_some("--dual-era"))
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let sessions = Arc::new(AtomicUsize::new(0));
    let stderr = child.stderr.take().expect("piped");
    let counted = sessions.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("session opened:") {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    for _ in 0..200 {
        if child
            .id()
            .is_some_and(|pid| switchboard_fixtures::process_listens_on(pid, port))
        {
            return TypeScriptSdkServer {
                _child: child,
                url: format!("http://127.0.0.1:{port}/mcp"),
                sessions,
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the TypeScript SDK server did not listen within 20 s (npm ci --prefix tests/npm?)");
}

/// A 2026-07-28 request `method` with `params` (and `name` as its `Mcp-Name`) from a client
/// that can be asked for its roots and declares the tasks extension (or, with `tasks` false,
/// not); the JSON-RPC answer.
pub(crate) async fn request_2026(
    url: &str,
    method: &str,
    name: &str,
    mut params: Value,
    tasks: bool,
) -> Value {
    let capabilities = if tasks {
        json!({"roots": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({"roots": {}})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("Switchboard answers");
    answer_to(response, 1).await.pop().expect("an answer")
}

/// An rmcp-based client of `url` (`?tools=` and all), a 2025-11-25 session one with
/// `sessions`, a 2026-07-28 one without, with `headers`.
pub(crate) async fn client_with(
    url: &str,
    sessions: bool,
    headers: Vec<switchboard_core::NamedValue>,
) -> Connection {
    let mut transport = TransportSpec::from_url(url, headers).unwrap();
    if let TransportSpec::Http { pinned, .. } = &mut transport {
        *pinned = sessions.then_some(switchboard_core::DetectedTransport::StreamableHttp);
    }
    client(transport).await
}

/// Whether `connection` hears `tools/list_changed` within 5 s.
pub(crate) async fn tools_changed(connection: &mut Connection) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match connection.events.recv().await {
                Some(switchboard_upstream::UpstreamEvent::ToolsChanged) | None => break,
                Some(_) => continue,
            }
        }
    })
    .await
    .is_ok()
}

/// The names of the tools `connection` is shown.
pub(crate) async fn listed(connection: &Connection) -> Vec<String> {
    let mut names: Vec<String> = connection
        .upstream
        .list_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

/// The deferred view's own tools, sorted.
pub(crate) const DEFERRED_META: [&str; 5] = [
    "call_tool",
    "describe_tools",
    "list_servers",
    "search_tools",
    "set_active",
];
