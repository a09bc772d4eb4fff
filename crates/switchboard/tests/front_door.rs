//! Switchboard's own MCP server (`/mcp` and `switchboard stdio`), driven by real clients: an
//! rmcp-based client (Switchboard's own connector, which speaks 2026-07-28 to it) and the
//! official TypeScript SDK client (2025-11-25 sessions), in front of real and fixture servers.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::switchboard;
use serde_json::{Value, json};
use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::{CallContext, ConnectOptions, Connection, InputPolicy, connect};

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn add(data_dir: &Path, args: &[&str]) {
    let mut all = vec!["server", "add"];
    all.extend_from_slice(args);
    ok(&switchboard(data_dir, &all));
}

fn everything() -> String {
    switchboard_fixtures::server_everything_entry()
        .display()
        .to_string()
}

fn stdio_fixture() -> String {
    switchboard_fixtures::stdio_fixture_binary()
        .display()
        .to_string()
}

/// A running `switchboard serve`; killed on drop.
struct Daemon {
    _child: tokio::process::Child,
    base: String,
}

impl Daemon {
    /// Starts the daemon and waits (up to 30 s) until `servers` of its servers are connected.
    async fn start(data_dir: &Path, servers: usize) -> (Self, Value) {
        Self::start_with(data_dir, servers, &[]).await
    }

    /// [`Daemon::start`] with more options for `serve`.
    async fn start_with(data_dir: &Path, servers: usize, options: &[&str]) -> (Self, Value) {
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

    fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    async fn status(&self) -> Option<Value> {
        let response = reqwest::get(format!("{}/api/status", self.base))
            .await
            .ok()?;
        response.json().await.ok()
    }

    async fn wait_for(&self, done: impl Fn(&Value) -> bool) -> Value {
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

fn connected(status: &Value) -> usize {
    status["servers"].as_array().map_or(0, |s| {
        s.iter().filter(|s| s["state"] == "connected").count()
    })
}

/// Connects Switchboard's own rmcp-based client to `transport`, answering input requests with
/// the schema's defaults.
async fn client(transport: TransportSpec) -> Connection {
    let def = ServerDefinition::new(ServerId::new("switchboard").unwrap(), transport);
    let mut options = ConnectOptions::new("test");
    options.input_policy = InputPolicy::AcceptDefaults;
    connect(&def, None, &options)
        .await
        .expect("the client connects to Switchboard")
}

/// Calls `tool` and cancels the call after `after`; the call must end as cancelled.
async fn call_and_cancel(
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

fn args(value: Value) -> Option<serde_json::Map<String, Value>> {
    value.as_object().cloned()
}

fn text(result: &switchboard_upstream::rmcp_model::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap().to_string()
}

/// The text of `result`'s first content block, as a model reads it.
fn first_text(result: &switchboard_upstream::rmcp_model::CallToolResult) -> String {
    let content = serde_json::to_value(&result.content).unwrap();
    content[0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn an_rmcp_client_uses_server_everything_through_mcp_with_progress_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["everything", "--", "node", &everything()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let upstream = &connection.upstream;
    assert_eq!(upstream.protocol_version().as_deref(), Some("2026-07-28"));

    let tools = upstream.list_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "everything__echo"),
        "{tools:?}"
    );
    assert!(tools.iter().all(|t| t.name.starts_with("everything__")));
    let echoed = upstream
        .call_tool(
            "everything__echo",
            args(json!({"message": "hi"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text(&echoed).contains("Echo: hi"), "{}", text(&echoed));

    let (progress, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let long = upstream
        .call_tool(
            "everything__trigger-long-running-operation",
            args(json!({"duration": 1, "steps": 3})),
            &CallContext {
                progress: Some(progress),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(long.is_error != Some(true), "{}", text(&long));
    let mut seen = Vec::new();
    while let Ok(report) = reports.try_recv() {
        seen.push(report.progress);
    }
    assert_eq!(
        seen,
        [1.0, 2.0, 3.0],
        "every progress report arrives, in order"
    );

    let started = std::time::Instant::now();
    call_and_cancel(
        upstream,
        "everything__trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
        Duration::from_millis(500),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    // Switchboard still serves after the cancellation.
    let again = upstream
        .call_tool(
            "everything__echo",
            args(json!({"message": "again"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text(&again).contains("again"));
}

#[tokio::test]
async fn input_requests_cross_eras_in_both_directions() {
    let modern = transports::streamable_http(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["everything", "--", "node", &everything()]);
    add(dir.path(), &["modern", &modern.url]);
    let (daemon, _) = Daemon::start(dir.path(), 2).await;
    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let upstream = &connection.upstream;

    // A legacy server's elicitation request reaches a 2026-07-28 client as input_required;
    // the client's answer (the schema defaults) reaches the server.
    let elicited = upstream
        .call_tool(
            "everything__trigger-elicitation-request",
            Some(Default::default()),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(
        text(&elicited).contains("It was a dark and stormy night."),
        "{}",
        text(&elicited)
    );

    // A 2026-07-28 server's input_required goes to the client and comes back with the
    // server's own requestState, unchanged.
    let confirmed = upstream
        .call_tool("modern__confirm", None, &CallContext::default())
        .await
        .unwrap();
    let confirmed = text(&confirmed);
    assert!(confirmed.contains(r#"\"ok\":true"#), "{confirmed}");
    assert!(confirmed.contains("state=opaque-state-1"), "{confirmed}");
}

// Multi-threaded: the fixtures run in this process while the one-shot CLI blocks a thread.
#[tokio::test(flavor = "multi_thread")]
async fn colliding_names_are_withheld_reported_and_fixed_by_a_prefix() {
    let a = transports::streamable_http(Era::Legacy).await;
    let b = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["alpha", &a.url, "--prefix", ""]);
    add(dir.path(), &["beta", &b.url, "--prefix", ""]);
    // The one-shot `status` reports them too.
    let status: Value = serde_json::from_str(&ok(&switchboard(dir.path(), &["status", "--json"])))
        .expect("status --json prints JSON");
    let alpha = &status[0]["collisions"];
    assert!(
        alpha
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["name"] == "echo")),
        "{status:#}"
    );
    let human = ok(&switchboard(dir.path(), &["status"]));
    // One line for the pair, however many names they share.
    assert_eq!(
        human.matches("exposed by alpha and beta").count(),
        1,
        "{human}"
    );
    assert!(
        human.contains("names (tool 'add', ") && human.contains("more) are exposed by"),
        "{human}"
    );

    let (daemon, status) = Daemon::start(dir.path(), 2).await;
    let status = if status["collisions"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
    {
        status
    } else {
        daemon
            .wait_for(|s| s["collisions"].as_array().is_some_and(|c| !c.is_empty()))
            .await
    };
    let collisions = status["collisions"].as_array().unwrap();
    let echo = collisions
        .iter()
        .find(|c| c["name"] == "echo")
        .expect("the shared tool name is reported");
    assert_eq!(echo["kind"], "tool");
    assert_eq!(echo["servers"], json!(["alpha", "beta"]));
    assert!(
        status["servers"][0]["collisions"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "each server's status names its collisions"
    );

    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let upstream = &connection.upstream;
    let tools = upstream.list_tools().await.unwrap();
    assert!(
        !tools.iter().any(|t| t.name == "echo"),
        "neither server shadows the other"
    );
    let refused = upstream
        .call_tool(
            "echo",
            args(json!({"message": "x"})),
            &CallContext::default(),
        )
        .await;
    assert!(
        matches!(&refused, Err(switchboard_upstream::UpstreamError::Rpc { code: -32602, message, .. }) if message.contains("unknown tool")),
        "{refused:?}"
    );
    drop(daemon);

    // The command the warning suggests fixes it: with a prefix on one of them, both tools are
    // there.
    let suggested = human
        .split('`')
        .find(|part| part.starts_with("switchboard server "))
        .expect("the warning suggests a command");
    assert_eq!(suggested, "switchboard server set-prefix beta beta");
    let words: Vec<&str> = suggested.split_whitespace().skip(1).collect();
    let changed = ok(&switchboard(dir.path(), &words));
    assert!(changed.contains("beta__<name>"), "{changed}");
    let (daemon, status) = Daemon::start(dir.path(), 2).await;
    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let upstream = &connection.upstream;
    let tools = upstream.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert!(
        names.contains(&"echo".to_owned()) && names.contains(&"beta__echo".to_owned()),
        "{names:?} {status}"
    );
}

#[tokio::test]
async fn an_upstream_that_dies_mid_call_fails_that_call_only() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["doomed", "--", &stdio_fixture()]);
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start(dir.path(), 2).await;
    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let upstream = &connection.upstream;
    let crashed = upstream
        .call_tool("doomed__crash", None, &CallContext::default())
        .await
        .unwrap();
    assert_eq!(crashed.is_error, Some(true));
    let message = text(&crashed);
    assert!(message.contains("server 'doomed'"), "{message}");
    let steady = upstream
        .call_tool(
            "steady__echo",
            args(json!({"message": "still here"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text(&steady).contains("still here"));
}

#[tokio::test]
async fn hostile_requests_get_clear_errors_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let http = reqwest::Client::new();
    let post = |body: String| {
        http.post(daemon.mcp_url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();

    let foreign = post(initialize.clone())
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403, "a foreign Origin is refused");

    // Its own connection: the server answers 413 without reading the rest and closes it.
    let oversized = reqwest::Client::new()
        .post(daemon.mcp_url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
            "x".repeat(5 * 1024 * 1024)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(oversized.status(), 413, "an oversized body is refused");

    let malformed = post("{not json".into()).send().await.unwrap();
    assert_eq!(malformed.status(), 400);
    let body = malformed.text().await.unwrap();
    assert!(
        body.contains("-32700") || body.to_lowercase().contains("parse"),
        "{body}"
    );

    // JSON, but no JSON-RPC message: an Invalid Request error, as the spec has it (not 415).
    for shape in [
        json!({"jsonrpc": "2.0", "id": 1, "meth": "x"}),
        json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
        json!([1, 2, 3]),
        json!("ping"),
    ] {
        let invalid = post(shape.to_string()).send().await.unwrap();
        assert_eq!(invalid.status(), 400, "{shape}");
        let body: serde_json::Value = invalid.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32600, "{shape}: {body}");
    }

    let unknown_session =
        post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string())
            .header("mcp-session-id", "no-such-session")
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap();
    assert_eq!(unknown_session.status(), 404, "an unknown session is 404");

    // Nothing broke: a proper client still gets everything.
    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let upstream = &connection.upstream;
    let echoed = upstream
        .call_tool(
            "steady__echo",
            args(json!({"message": "fine"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text(&echoed).contains("fine"));
}

#[tokio::test]
async fn switchboard_stdio_serves_the_same_catalog() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["everything", "--", "node", &everything()]);
    let transport = TransportSpec::stdio(
        env!("CARGO_BIN_EXE_switchboard"),
        vec![
            "--data-dir".into(),
            dir.path().display().to_string(),
            "stdio".into(),
        ],
        vec![],
        None,
    )
    .unwrap();
    let connection = client(transport).await;
    let upstream = &connection.upstream;
    let tools = upstream.list_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "everything__get-sum"),
        "{tools:?}"
    );
    let sum = upstream
        .call_tool(
            "everything__get-sum",
            args(json!({"a": 2, "b": 40})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text(&sum).contains("42"), "{}", text(&sum));
    let prompts = upstream.list_prompts().await.unwrap();
    assert!(
        prompts
            .iter()
            .any(|p| p.name == "everything__simple-prompt")
    );
    let resources = upstream.list_resources().await.unwrap();
    let first = resources.first().expect("server-everything has resources");
    assert!(first.uri.contains("everything__"), "{}", first.uri);
    let read = upstream
        .read_resource(&first.uri, &CallContext::default())
        .await
        .unwrap();
    let read = serde_json::to_value(&read).unwrap();
    assert_eq!(
        read["contents"][0]["uri"],
        first.uri.as_str(),
        "read results carry exposed URIs"
    );
}

/// The official TypeScript SDK client, through `/mcp` and through `switchboard stdio`, to
/// server-everything over stdio (the full path) and, through `/mcp`, to server-everything over
/// Streamable HTTP with sessions (the short path: progress, cancellation and the elicitation on
/// the call's own stream).
#[tokio::test]
async fn the_typescript_sdk_client_lists_calls_gets_progress_and_cancels() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["everything", "--", "node", &everything()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let over_http = switchboard_fixtures::ServerEverything::start("streamableHttp");
    let http_dir = tempfile::tempdir().unwrap();
    add(http_dir.path(), &["everything", &over_http.url]);
    let (http_daemon, _) = Daemon::start(http_dir.path(), 1).await;
    let script = switchboard_fixtures::repository_root().join("tests/npm/sdk-client.mjs");
    for target in [
        vec!["http".to_owned(), daemon.mcp_url()],
        vec![
            "stdio".to_owned(),
            env!("CARGO_BIN_EXE_switchboard").to_owned(),
            "--data-dir".to_owned(),
            dir.path().display().to_string(),
            "stdio".to_owned(),
        ],
        vec!["http".to_owned(), http_daemon.mcp_url()],
    ] {
        let report = node_json(&script, &target[..]).await;
        assert_eq!(report["protocolVersion"], "2025-11-25", "{target:?}");
        assert!(report["tools"].as_u64().unwrap() > 10, "{report}");
        assert_eq!(report["echo"], "Echo: hi", "{report}");
        assert_eq!(report["progress"], json!([1, 2, 3]), "{report}");
        assert_eq!(report["cancelled"], true, "{report}");
        assert_eq!(report["elicited"], true, "{report}");
    }
}

/// Runs `node <script> <args>` (an official SDK client of tests/npm, within 90 s), checks it
/// succeeded, and returns the one JSON value it prints.
async fn node_json<S: AsRef<std::ffi::OsStr>>(script: &Path, args: &[S]) -> Value {
    let output = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new("node")
            .arg(script)
            .args(args)
            .output(),
    )
    .await
    .expect("the client finishes within 90 s")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{script:?}: exit {:?}\n{stdout}\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("the client prints JSON")
}

/// One client's roots are not another's: server-everything keeps the roots it asked for per
/// session, and Switchboard's clients share its one session, so before a call of another client
/// Switchboard tells it the roots changed and lets it ask that client. Two official-SDK clients
/// with roots of their own, taking turns calling `get-roots-list`, each see their own, with
/// server-everything over stdio and over Streamable HTTP with sessions.
#[tokio::test]
async fn each_client_is_answered_with_its_own_roots() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["everything", "--", "node", &everything()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let over_http = switchboard_fixtures::ServerEverything::start("streamableHttp");
    let http_dir = tempfile::tempdir().unwrap();
    add(http_dir.path(), &["everything", &over_http.url]);
    let (http_daemon, _) = Daemon::start(http_dir.path(), 1).await;
    let script = switchboard_fixtures::repository_root().join("tests/npm/roots-clients.mjs");
    for url in [daemon.mcp_url(), http_daemon.mcp_url()] {
        let printed = node_json(&script, &[url.as_str(), "everything__get-roots-list"]).await;
        let stdout = printed.to_string();
        let calls = printed.as_array().expect("a list of calls");
        assert_eq!(calls.len(), 4, "{stdout}");
        for call in calls {
            let (mine, theirs) = match call["client"].as_str() {
                Some("a") => ("file:///roots/a", "file:///roots/b"),
                _ => ("file:///roots/b", "file:///roots/a"),
            };
            let text = call["text"].as_str().unwrap_or_default();
            assert!(
                text.contains(mine) && !text.contains(theirs),
                "{url}: {call}\nall: {stdout}"
            );
        }
    }
}

#[tokio::test]
async fn http_sse_clients_of_2024_get_the_same_server_at_sse() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let connection =
        client(TransportSpec::from_url(&format!("{}/sse", daemon.base), vec![]).unwrap()).await;
    assert_eq!(
        connection.detected,
        Some(switchboard_core::DetectedTransport::HttpSse)
    );
    let upstream = &connection.upstream;
    let tools = upstream.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "steady__echo"), "{tools:?}");
    let echoed = upstream
        .call_tool(
            "steady__echo",
            args(json!({"message": "old school"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text(&echoed).contains("old school"));

    let http = reqwest::Client::new();
    let unknown = http
        .post(format!("{}/message?sessionId=nope", daemon.base))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404, "an unknown session is 404");
}

#[test]
fn serving_beyond_loopback_without_api_keys_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("SWITCHBOARD_API_KEYS")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("SWITCHBOARD_API_KEYS"), "{stderr}");
}

#[tokio::test]
async fn clients_hear_list_changed_when_a_server_changes_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    // A 2026-07-28 client (subscriptions/listen on /mcp) and a 2024-11-05 one (/sse).
    let mut modern = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let mut legacy =
        client(TransportSpec::from_url(&format!("{}/sse", daemon.base), vec![]).unwrap()).await;
    let names = |tools: Vec<switchboard_upstream::rmcp_model::Tool>| -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    };
    assert!(!names(modern.upstream.list_tools().await.unwrap()).contains(&"steady__late".into()));

    let added = modern
        .upstream
        .call_tool("steady__add_tool", None, &CallContext::default())
        .await
        .unwrap();
    assert!(text(&added).contains("added"));
    for (era, connection) in [("2026-07-28", &mut modern), ("2024-11-05", &mut legacy)] {
        let heard = tokio::time::timeout(Duration::from_secs(15), async {
            while let Some(event) = connection.events.recv().await {
                if event == switchboard_upstream::UpstreamEvent::ToolsChanged {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(heard, Ok(true), "the {era} client hears tools/list_changed");
        let tools = names(connection.upstream.list_tools().await.unwrap());
        assert!(tools.contains(&"steady__late".into()), "{era}: {tools:?}");
    }
}

/// One 2026-07-28 `tools/call` to `url` by a caller with `capabilities`, as a raw HTTP client
/// sends it; returns the HTTP status and the JSON-RPC response (from a JSON or an SSE body).
async fn tools_call_2026(url: &str, params: Value, capabilities: Value) -> (u16, Value) {
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    let (status, mut messages) = post_tools_call_2026(url, params, capabilities, &name).await;
    let response = messages.pop().expect("a response");
    (status, response)
}

/// Like [`tools_call_2026`] with `mcp_name` as the `Mcp-Name` header, keeping any `_meta`
/// already in `params`; returns the status and every message of the answer, the response last.
async fn post_tools_call_2026(
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
async fn answer_to(response: reqwest::Response, id: u64) -> Vec<Value> {
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
async fn serving_the_conformance_fixture() -> (Daemon, transports::RunningFixture, tempfile::TempDir)
{
    serving(transports::conformance_http(false).await, "test", &[]).await
}

/// A daemon (started with `options`) serving `fixture` as server `id`, once it is connected.
async fn serving(
    fixture: transports::RunningFixture,
    id: &str,
    options: &[&str],
) -> (Daemon, transports::RunningFixture, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &[id, &fixture.url]);
    let (daemon, _) = Daemon::start_with(dir.path(), 1, options).await;
    (daemon, fixture, dir)
}

/// The capabilities of a client that can answer every kind of input request.
fn answers_everything() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

/// Answers the request-state tool's question (`confirm`: yes) with `state`, sending `mcp_name`
/// as its `Mcp-Name`; returns the final message.
async fn confirm_with_state(url: &str, tool: &str, state: Value, mcp_name: &str) -> Value {
    let retry = json!({"name": tool, "arguments": {}, "requestState": state,
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}});
    let (_, mut done) = post_tools_call_2026(url, retry, answers_everything(), mcp_name).await;
    done.pop().unwrap()
}

/// `name` as SEP-2243 sends a header value it must protect: `=?base64?…?=`.
fn base64_header(name: &str) -> String {
    use base64::Engine;
    format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode(name)
    )
}

/// A 2026-07-28 client calling a 2026-07-28 server's tool is relayed straight through: the
/// server's own `requestState` reaches the client and its retry completes the call; progress
/// and the log messages asked for stream through as the server sent them. The same calls
/// with the tool's name Base64-encoded in `Mcp-Name` (a form only the full path checks) get the
/// same answers, except that the `requestState` and the progress token the server sees are
/// then Switchboard's; a state the server issued on the straight path is good on the full one.
#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_call_to_a_stateless_server_goes_straight_through_with_the_same_answers() {
    let (daemon, _fixture, _dir) = serving_the_conformance_fixture().await;
    let url = daemon.mcp_url();
    let everything = answers_everything();

    for straight in [true, false] {
        let header = |name: &str| {
            if straight {
                name.to_owned()
            } else {
                base64_header(name)
            }
        };
        let path = if straight { "straight" } else { "full" };

        // Asked for input: the state is the server's own on the straight path.
        let tool = "test__test_input_required_result_request_state";
        let call = json!({"name": tool, "arguments": {}});
        let (_, mut asked) =
            post_tools_call_2026(&url, call.clone(), everything.clone(), &header(tool)).await;
        let asked = asked.pop().unwrap();
        assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
        let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
        let servers_own = serde_json::from_str::<Value>(&state)
            .is_ok_and(|state| state["kind"] == "request-state");
        assert_eq!(servers_own, straight, "{path}: requestState {state}");
        let done = confirm_with_state(&url, tool, state.into(), &header(tool)).await;
        assert_eq!(
            done["result"]["content"][0]["text"], "state-ok: requestState validated",
            "{path}: {done}"
        );
        assert_eq!(done["result"]["resultType"], "complete", "{path}: {done}");

        // Progress for the caller's token, then the result.
        let tool = "test__test_tool_with_progress";
        let call = json!({"name": tool, "arguments": {}, "_meta": {"progressToken": "p-1"}});
        let (status, messages) =
            post_tools_call_2026(&url, call, everything.clone(), &header(tool)).await;
        assert_eq!(status, 200);
        let progress: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert!(!progress.is_empty(), "{path}: {messages:?}");
        assert!(
            progress
                .iter()
                .all(|p| p["params"]["progressToken"] == "p-1"),
            "{path}: {progress:?}"
        );
        // The tool answers with the token it was sent: the caller's own on the straight path
        // (the full path sends one of Switchboard's and maps the reports back).
        let seen = &messages.last().unwrap()["result"]["content"][0]["text"];
        assert!(seen.is_string(), "{path}: {messages:?}");
        assert_eq!(
            seen == "p-1",
            straight,
            "{path}: the server saw token {seen}"
        );

        // Log messages only when asked for, at the level asked for.
        let tool = "test__test_tool_with_logging";
        for (level, expected) in [(None, 0), (Some("info"), 3), (Some("error"), 0)] {
            let mut call = json!({"name": tool, "arguments": {}});
            if let Some(level) = level {
                call["_meta"] = json!({"io.modelcontextprotocol/logLevel": level});
            }
            let (_, messages) =
                post_tools_call_2026(&url, call, everything.clone(), &header(tool)).await;
            let logs = messages
                .iter()
                .filter(|m| m["method"] == "notifications/message")
                .count();
            assert_eq!(logs, expected, "{path}, level {level:?}: {messages:?}");
            assert_eq!(
                messages.last().unwrap()["result"]["content"][0]["text"],
                "Tool with logging executed successfully",
                "{path}"
            );
        }

        // A tool error is the server's, as it sent it.
        let tool = "test__test_error_handling";
        let (_, mut failed) = post_tools_call_2026(
            &url,
            json!({"name": tool, "arguments": {}}),
            everything.clone(),
            &header(tool),
        )
        .await;
        let failed = failed.pop().unwrap();
        assert_eq!(failed["result"]["isError"], true, "{path}: {failed}");
    }

    // A state the server issued on the straight path is good on the full path too: the retry
    // takes it to the server.
    let tool = "test__test_input_required_result_request_state";
    let call = json!({"name": tool, "arguments": {}});
    let (_, mut asked) = post_tools_call_2026(&url, call, everything, tool).await;
    let state = asked.pop().unwrap()["result"]["requestState"].clone();
    let done = confirm_with_state(&url, tool, state, &base64_header(tool)).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "state-ok: requestState validated",
        "{done}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modern_servers_input_requests_keep_their_names_and_see_the_callers_capabilities() {
    let (daemon, _fixture, _dir) = serving_the_conformance_fixture().await;
    let url = daemon.mcp_url();
    let everything = answers_everything();
    let call = |name: &str| json!({"name": name, "arguments": {}});

    // The server's three questions reach the client at once, under the server's own names.
    let (_, asked) = tools_call_2026(
        &url,
        call("test__test_input_required_result_multiple_inputs"),
        everything.clone(),
    )
    .await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let mut keys: Vec<&String> = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    keys.sort();
    assert_eq!(keys, ["client_roots", "greeting", "user_name"], "{asked}");
    let state = result["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();

    // The answers go back by those names and complete the call.
    let mut retry = call("test__test_input_required_result_multiple_inputs");
    retry["requestState"] = state.into();
    retry["inputResponses"] = json!({
        "user_name": {"action": "accept", "content": {"name": "Alice"}},
        "greeting": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "Hi"}},
        "client_roots": {"roots": [{"uri": "file:///work", "name": "work"}]},
    });
    let (_, done) = tools_call_2026(&url, retry, everything.clone()).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Name: Alice; Greeting: Hi; Roots: 1",
        "{done}"
    );

    // The server sees what this caller declared, not what Switchboard could relay: a caller
    // without sampling is refused by a tool that needs it (400, -32021), one with it is served,
    // and a caller that can only sample is asked only to sample.
    let (status, refused) =
        tools_call_2026(&url, call("test__test_missing_capability"), json!({})).await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!(-32021)),
        "{refused}"
    );
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    let (_, served) = tools_call_2026(
        &url,
        call("test__test_missing_capability"),
        json!({"sampling": {}}),
    )
    .await;
    assert_eq!(
        served["result"]["content"][0]["text"], "Success",
        "{served}"
    );
    let (_, asked) = tools_call_2026(
        &url,
        call("test__test_input_required_result_capabilities"),
        json!({"sampling": {}}),
    )
    .await;
    let keys: Vec<&String> = asked["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["sample_input"], "{asked}");

    // Answers that cannot be results of any input request are refused, not passed on.
    let mut malformed = call("test__test_input_required_result_elicitation");
    malformed["inputResponses"] = json!({"user_name": 12345});
    let (_, refused) = tools_call_2026(&url, malformed, everything).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_updates_reach_subscribers_of_both_eras_from_a_modern_server() {
    let (daemon, _fixture, _dir) = serving_the_conformance_fixture().await;
    // Switchboard reaches the fixture statelessly, so its subscriptions ride on the fixture's
    // subscriptions/listen stream; downstream, a 2026-07-28 client subscribes the same way and
    // a 2024-11-05 client with resources/subscribe.
    let mut modern = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let mut legacy =
        client(TransportSpec::from_url(&format!("{}/sse", daemon.base), vec![]).unwrap()).await;
    let uri = "test://test__watched-resource";
    modern.upstream.subscribe_resource(uri).await.unwrap();
    legacy.upstream.subscribe_resource(uri).await.unwrap();
    let caller = modern.upstream.clone();

    for (era, connection) in [("2026-07-28", &mut modern), ("2024-11-05", &mut legacy)] {
        // A subscription is answered once it is in place all the way to the fixture (its listen
        // stream acknowledged with the resource in its filter), so one change made right after
        // it is heard.
        caller
            .call_tool(
                "test__test_update_watched_resource",
                None,
                &CallContext::default(),
            )
            .await
            .unwrap();
        let heard = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match connection.events.recv().await {
                    Some(switchboard_upstream::UpstreamEvent::ResourceUpdated(updated)) => {
                        break updated;
                    }
                    Some(_) => continue,
                    None => break String::new(),
                }
            }
        })
        .await;
        assert_eq!(
            heard.ok().as_deref(),
            Some(uri),
            "{era}: the one update made right after subscribing is heard, under the exposed URI"
        );
    }

    // After unsubscribing, no more updates reach the modern client.
    modern.upstream.unsubscribe_resource(uri).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    while modern.events.try_recv().is_ok() {}
    modern
        .upstream
        .call_tool(
            "test__test_update_watched_resource",
            None,
            &CallContext::default(),
        )
        .await
        .unwrap();
    let late = tokio::time::timeout(Duration::from_millis(500), async {
        loop {
            if let Some(switchboard_upstream::UpstreamEvent::ResourceUpdated(u)) =
                modern.events.recv().await
            {
                break u;
            }
        }
    })
    .await;
    assert!(late.is_err(), "an update after unsubscribing: {late:?}");
}

// Multi-threaded: the fixtures run in this process while the one-shot CLI blocks a thread.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_the_client_cancels_is_cancelled_at_its_server_too() {
    for era in [Era::Legacy, Era::Modern] {
        let fixture = transports::streamable_http(era).await;
        let dir = tempfile::tempdir().unwrap();
        add(dir.path(), &["fx", &fixture.url]);
        let (daemon, _) = Daemon::start(dir.path(), 1).await;
        let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;

        call_and_cancel(
            &connection.upstream,
            "fx__slow",
            json!({"ms": 10000}),
            Duration::from_millis(300),
        )
        .await;
        // The server sees its call cancelled, not run on unobserved.
        assert!(
            saw_a_cancellation(&fixture, Duration::from_secs(5)).await,
            "{era:?}: the server's call was cancelled"
        );
        connection.session.close().await;
    }
}

/// A stateless client that walks away from a streamed call (after its first progress report,
/// while the server works on in silence) cancels it at the server at once, not when the
/// server next speaks or the call times out.
#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_call_the_client_abandons_is_cancelled_at_its_server_at_once() {
    let (daemon, fixture, _dir) =
        serving(transports::streamable_http(Era::Modern).await, "fx", &[]).await;
    let mut response = reqwest::Client::new()
        .post(daemon.mcp_url())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "fx__slow")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "fx__slow", "arguments": {"ms": 30000, "quiet": true},
            "_meta": {"progressToken": "p", "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().expect("the first event");
    assert!(
        String::from_utf8_lossy(&first).contains("notifications/progress"),
        "{first:?}"
    );
    drop(response);
    assert!(
        saw_a_cancellation(&fixture, Duration::from_secs(5)).await,
        "the server's call ran on 5 s after its client left"
    );
}

/// Whether `fixture` saw one call cancelled within `limit`.
async fn saw_a_cancellation(fixture: &transports::RunningFixture, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if fixture.state.cancelled_calls.load(Ordering::SeqCst) == 1 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A client that stops reading a streamed call, while holding it open, is given up on once it
/// has taken no message for the call's timeout: the server's call is cancelled and the request
/// slot is free again. Filling the buffers between the two takes megabytes of progress. Both
/// paths: the short one (a stateless client) and the full one (a session).
#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_client_that_stops_reading_a_streamed_call_is_given_up_on() {
    given_up_on_when_not_reading(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_client_that_stops_reading_a_streamed_call_is_given_up_on() {
    given_up_on_when_not_reading(true).await;
}

async fn given_up_on_when_not_reading(in_session: bool) {
    let fixture = transports::streamable_http(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    add(
        dir.path(),
        &["fx", &fixture.url, "--tool-timeout-ms", "2000"],
    );
    let (daemon, _) = Daemon::start_with(
        dir.path(),
        1,
        &["--max-concurrent-calls", "1", "--max-queued-calls", "0"],
    )
    .await;
    let url = daemon.mcp_url();
    // One progress report of 1 MiB every 50 ms, for a minute, to a client that reads nothing.
    let arguments = json!({"ms": 60000, "pad": 1_048_576});
    let request = reqwest::Client::new()
        .post(&url)
        .header("accept", "application/json, text/event-stream");
    let request = if in_session {
        let session = initialize(&url).await.1.expect("a session");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(post_in_session(&url, &session, initialized).await, 202);
        request
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &session)
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "fx__slow", "arguments": arguments, "_meta": {"progressToken": "p"}}}),
            )
    } else {
        request
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "fx__slow")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "fx__slow", "arguments": arguments,
                "_meta": {"progressToken": "p",
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
    };
    let unread = request.send().await.unwrap();
    assert_eq!(unread.status(), 200);
    assert!(
        saw_a_cancellation(&fixture, Duration::from_secs(20)).await,
        "the server's call ran on for 20 s while its client held the stream unread"
    );
    // The only slot is free again (soon after the server saw the cancellation) while the first
    // client still holds its response.
    let mut answer = Value::Null;
    for _ in 0..50 {
        answer = tools_call_2026(
            &url,
            json!({"name": "fx__echo", "arguments": {"message": "after"}}),
            json!({}),
        )
        .await
        .1;
        if answer["result"]["content"][0]["text"] == "after" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answer["result"]["content"][0]["text"], "after", "{answer}");
    drop(unread);
}

/// Calls relayed straight to a stateless server reuse pooled connections: twenty calls in a
/// row do not open twenty connections.
#[tokio::test(flavor = "multi_thread")]
async fn straight_calls_reuse_the_servers_connections() {
    straight_calls_reuse_connections(Era::Modern, false).await;
}

/// Calls relayed straight into a server's session reuse pooled connections too, although
/// the server answers each with an SSE stream that ends only after the response.
#[tokio::test(flavor = "multi_thread")]
async fn straight_calls_in_a_session_reuse_the_servers_connections() {
    straight_calls_reuse_connections(Era::Legacy, false).await;
}

/// A server that ends each call's stream in a write of its own, a little after the response,
/// still has its connections reused: the call is answered at once, and the end of its stream
/// is read after it (a response body dropped before its end would close the connection).
#[tokio::test(flavor = "multi_thread")]
async fn straight_calls_reuse_connections_whose_streams_end_late() {
    straight_calls_reuse_connections(Era::Legacy, true).await;
}

/// Twenty calls straight to a fixture of `era` (whose SSE responses end late with `late_end`,
/// the calls then spaced so that each stream has ended before the next call) open at most a
/// few connections.
async fn straight_calls_reuse_connections(era: Era, late_end: bool) {
    use std::sync::atomic::Ordering;
    let (daemon, fixture, _dir) = serving(transports::streamable_http(era).await, "fx", &[]).await;
    fixture
        .state
        .late_stream_end
        .store(late_end, Ordering::SeqCst);
    let url = daemon.mcp_url();
    let session = match era {
        Era::Legacy => Some(open_session(&url, json!({})).await),
        Era::Modern => None,
    };
    let (url, session) = (url.as_str(), session.as_deref());
    let echo = move |i: usize| async move {
        let params = json!({"name": "fx__echo", "arguments": {"message": format!("m{i}")}});
        let answer = match session {
            Some(session) => call_in_session(url, session, i as u64, params).await.pop(),
            None => Some(tools_call_2026(url, params, json!({})).await.1),
        };
        let answer = answer.expect("an answer");
        assert_eq!(
            answer["result"]["content"][0]["text"],
            format!("m{i}"),
            "{answer}"
        );
        if late_end {
            tokio::time::sleep(switchboard_fixtures::LATE_STREAM_END * 3).await;
        }
    };
    // The first call warms the pool.
    echo(0).await;
    let before = fixture.state.connections.load(Ordering::SeqCst);
    for i in 1..=20 {
        echo(i).await;
    }
    // A connection per call would be 20. hyper's pool takes a connection back in a task of its
    // own once a response has been read, so a call right behind another can, on a busy machine,
    // race that and open a spare (seen: 3 with the slow-reader tests running alongside).
    let opened = fixture.state.connections.load(Ordering::SeqCst) - before;
    assert!(opened <= 5, "20 calls opened {opened} connections");
}

/// A pooled connection left idle longer than servers usually keep one (Node's `http` and
/// uvicorn close them after 5 s) is not taken for the next call: a call sent on it just as the
/// server closes it would fail. Calls close together reuse connections (the tests above).
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_idle_for_longer_than_servers_keep_one_is_not_reused() {
    use std::sync::atomic::Ordering;
    let (daemon, fixture, _dir) =
        serving(transports::streamable_http(Era::Modern).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let echo = |message: &'static str| {
        let url = url.clone();
        async move {
            let params = json!({"name": "fx__echo", "arguments": {"message": message}});
            let (_, answer) = tools_call_2026(&url, params, json!({})).await;
            assert_eq!(answer["result"]["content"][0]["text"], message, "{answer}");
        }
    };
    echo("warm").await;
    let before = fixture.state.connections.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    echo("after a pause").await;
    let opened = fixture.state.connections.load(Ordering::SeqCst) - before;
    assert!(opened >= 1, "the idle connection was taken again");
}

/// A legacy client's `initialize` at `url`: the HTTP status, the session it opened (if any) and
/// the JSON-RPC answer.
async fn initialize(url: &str) -> (u16, Option<String>, Value) {
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

/// Sessions are bounded: with `--max-sessions 2` a third `initialize` is refused with an error
/// that names the option and leaves nothing behind, an HTTP+SSE stream is refused too,
/// requests without a session are still served, and ending a session (DELETE: 204, then 404 for
/// that session) makes room for a new one.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_beyond_the_limit_are_refused_clearly_until_one_ends() {
    let (daemon, _fixture, _dir) = serving(
        transports::conformance_http(false).await,
        "test",
        &["--max-sessions", "2"],
    )
    .await;
    let url = daemon.mcp_url();

    let mut open = Vec::new();
    for _ in 0..2 {
        let (_, session, answer) = initialize(&url).await;
        assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
        open.push(session.expect("a session id"));
    }
    let (_, refused_session, refused) = initialize(&url).await;
    // Nothing of the refused session is kept: its id (rmcp hands one out) is unknown.
    if let Some(id) = &refused_session {
        let status = reqwest::Client::new()
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 404, "the refused session was kept");
    }
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("maximum of 2 sessions") && message.contains("--max-sessions"),
        "{refused}"
    );

    // An HTTP+SSE client is turned away before its stream opens, with the same reason.
    let sse = reqwest::get(format!("{}/sse", daemon.base)).await.unwrap();
    assert_eq!(sse.status(), 503);
    assert!(sse.text().await.unwrap().contains("--max-sessions"));

    // Stateless requests hold no session and are not refused.
    let (status, answer) = tools_call_2026(
        &url,
        json!({"name": "test__test_simple_text", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "This is a simple text response for testing.",
        "{answer}"
    );

    // Ending a session makes room (at once, give or take the session's own teardown).
    let delete = || {
        reqwest::Client::new()
            .delete(&url)
            .header("mcp-session-id", &open[0])
            .header("mcp-protocol-version", "2025-11-25")
            .send()
    };
    let ended = delete().await.unwrap();
    assert_eq!(
        ended.status(),
        204,
        "DELETE ends the session with no content"
    );
    // The session is gone: deleting it again, or using it, is a plain 404.
    assert_eq!(delete().await.unwrap().status(), 404, "a second DELETE");
    let ping = json!({"jsonrpc": "2.0", "id": 99, "method": "ping"});
    assert_eq!(post_in_session(&url, &open[0], ping).await, 404);
    for _ in 0..50 {
        let (_, session, answer) = initialize(&url).await;
        if session.is_some() && answer["result"].is_object() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no room for a new session 5 s after one ended");
}

/// A POST of `message` in session `id`; returns the HTTP status.
async fn post_in_session(url: &str, id: &str, message: Value) -> u16 {
    send_in_session(url, id, &message).await.status().as_u16()
}

/// A POST of `message` in session `id`, as a 2025-11-25 client sends it.
async fn send_in_session(url: &str, id: &str, message: &Value) -> reqwest::Response {
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

/// A session whose client went quiet ends after `--session-idle`, even while its server keeps
/// it busy with `list_changed` notifications (rmcp alone would keep it); a session whose client
/// keeps asking lives on, and so does one whose client holds its GET stream open.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_whose_clients_went_quiet_end_even_while_notifications_flow() {
    let (daemon, _fixture, _dir) = serving(
        transports::conformance_http(false).await,
        "test",
        &["--session-idle", "1"],
    )
    .await;
    let url = daemon.mcp_url();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = initialize(&url).await.1.expect("a session");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(post_in_session(&url, &id, initialized).await, 202);
        ids.push(id);
    }
    let [quiet, busy, listening] = [&ids[0], &ids[1], &ids[2]];
    let stream = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", listening.as_str())
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);

    // For three idle periods the server's tool list keeps changing (every session is told) and
    // one client keeps asking.
    for round in 0..15 {
        let (_, changed) = tools_call_2026(
            &url,
            json!({"name": "test__test_trigger_tool_change", "arguments": {}}),
            json!({}),
        )
        .await;
        assert!(changed["result"].is_object(), "{changed}");
        let ping = json!({"jsonrpc": "2.0", "id": round, "method": "ping"});
        assert_eq!(
            post_in_session(&url, busy, ping).await,
            200,
            "round {round}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let ping = json!({"jsonrpc": "2.0", "id": 99, "method": "ping"});
    assert_eq!(
        post_in_session(&url, quiet, ping.clone()).await,
        404,
        "the quiet session lives"
    );
    assert_eq!(post_in_session(&url, busy, ping.clone()).await, 200);
    assert_eq!(
        post_in_session(&url, listening, ping).await,
        200,
        "the listening session ended"
    );
    drop(stream);
}

/// On the embedded store, a daemon restarted (killed, even) keeps its clients' sessions: the
/// next request in a session opened before is answered, with no new `initialize`.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_go_on_after_the_daemon_restarts() {
    let fixture = transports::conformance_http(false).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["test", &fixture.url]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let session = open_session(&daemon.mcp_url(), json!({})).await;
    drop(daemon);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "test__test_simple_text", "arguments": {}}});
    let response = send_in_session(&daemon.mcp_url(), &session, &call).await;
    assert_eq!(response.status(), 200);
    let answer = answer_to(response, 2).await.pop().unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"], "This is a simple text response for testing.",
        "{answer}"
    );
}

/// The exposed names of the tools a 2026-07-28 client lists at `url`.
async fn tools_listed_2026(url: &str) -> Vec<String> {
    request_2026(url, "tools/list", "", json!({}), false).await["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A server's last known catalog is kept in the store: a daemon started while the server is
/// down lists and finds its tools (a call says the server is down, naming it and its state),
/// and `serve --lazy` serves them without connecting until a request needs the server (no
/// session is opened at it before).
#[tokio::test(flavor = "multi_thread")]
async fn a_servers_last_known_tools_are_served_while_it_is_down_and_until_first_use() {
    let server = typescript_sdk_server(false).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["ts", &server.url]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    assert!(
        tools_listed_2026(&daemon.mcp_url())
            .await
            .contains(&"ts__test_simple_text".to_owned())
    );
    drop(daemon);

    let opened = server.sessions.load(Ordering::SeqCst);
    let (daemon, status) = Daemon::start_with(dir.path(), 0, &["--lazy"]).await;
    assert_eq!(status["servers"][0]["state"], "disconnected", "{status:#}");
    assert_eq!(
        status["servers"][0]["connects_on_first_use"], true,
        "{status:#}"
    );
    assert!(
        status["servers"][0]["tools"].as_u64().unwrap() > 10,
        "{status:#}"
    );
    let listed = tools_listed_2026(&daemon.mcp_url()).await;
    assert!(
        listed.contains(&"ts__test_simple_text".to_owned()),
        "{listed:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.sessions.load(Ordering::SeqCst),
        opened,
        "not connected for a list"
    );
    let (_, answer) = tools_call_2026(
        &daemon.mcp_url(),
        json!({"name": "ts__test_simple_text", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "This is a simple text response for testing.",
        "the first call connects the server: {answer}"
    );
    assert_eq!(server.sessions.load(Ordering::SeqCst), opened + 1);
    drop(daemon);

    drop(server);
    let (daemon, _) = Daemon::start(dir.path(), 0).await;
    let listed = tools_listed_2026(&daemon.mcp_url()).await;
    assert!(
        listed.contains(&"ts__test_simple_text".to_owned()),
        "{listed:?}"
    );
    let found: Value = reqwest::get(format!(
        "{}/api/tools/search?q=simple%20text%20response&limit=3",
        daemon.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert!(
        found["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "ts__test_simple_text"),
        "{found}"
    );
    let (_, refused) = tools_call_2026(
        &daemon.mcp_url(),
        json!({"name": "ts__test_simple_text", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(refused["error"]["data"]["server"], "ts", "{refused}");
    assert!(refused["error"]["data"]["state"].is_string(), "{refused}");
}

/// A legacy client's `initialize` (declaring `capabilities`) and `notifications/initialized`
/// at `url`; returns the session.
async fn open_session(url: &str, capabilities: Value) -> String {
    open_session_at(url, "2025-11-25", capabilities).await
}

/// Like [`open_session`], for a client of protocol `version`.
async fn open_session_at(url: &str, version: &str, capabilities: Value) -> String {
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
async fn call_in_session(url: &str, session: &str, id: u64, params: Value) -> Vec<Value> {
    call_in_session_with(url, session, id, params, false).await
}

/// Like [`call_in_session`]; with `standard_headers`, also sends the SEP-2243 `Mcp-Method` and
/// `Mcp-Name` headers, which only the full path checks (so it takes the call).
async fn call_in_session_with(
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
async fn reaches_the_server(fixture: &transports::RunningFixture, before: &Value) {
    for _ in 0..250 {
        if last_call_id(fixture) != *before {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the call did not reach the server within 5 s");
}

/// The id of the last `tools/call` `fixture` saw.
fn last_call_id(fixture: &transports::RunningFixture) -> Value {
    fixture
        .state
        .last_call_id
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_default()
}

/// A session client calling a tool of a server with sessions is relayed straight into the
/// session Switchboard holds with that server: the server sees an id of Switchboard's own, and
/// the client gets the same messages (its own id and progress token, results finished for its
/// era) as the same calls sent with the standard headers only the full path checks, which take
/// the full path. Its `notifications/cancelled` cancels such a call at the server, and the call
/// is not answered.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_call_to_a_session_server_goes_straight_into_its_session_with_the_same_answers() {
    let (daemon, fixture, _dir) =
        serving(transports::streamable_http(Era::Legacy).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let plain = open_session(&url, json!({})).await;
    let calls = [
        json!({"name": "fx__echo", "arguments": {"message": "hi"}}),
        json!({"name": "fx__fail", "arguments": {}}),
        json!({"name": "fx__nonesuch", "arguments": {}}),
        json!({"name": "fx__slow", "arguments": {"ms": 150}, "_meta": {"progressToken": "mine"}}),
    ];
    for (id, params) in (7..).zip(calls) {
        let straight = call_in_session(&url, &plain, id, params.clone()).await;
        let seen_straight = last_call_id(&fixture);
        let full = call_in_session_with(&url, &plain, id, params.clone(), true).await;
        let seen_full = last_call_id(&fixture);
        assert_eq!(straight, full, "{params}");
        if params["name"] != "fx__nonesuch" {
            assert!(
                seen_straight
                    .as_str()
                    .is_some_and(|id| id.starts_with("switchboard-direct-")),
                "the short path's id: {seen_straight}"
            );
            assert!(seen_full.is_number(), "rmcp's client's id: {seen_full}");
        }
        let response = straight.last().unwrap();
        assert!(response["result"].get("resultType").is_none(), "{response}");
    }
    let progress = call_in_session(
        &url,
        &plain,
        20,
        json!({"name": "fx__slow", "arguments": {"ms": 150}, "_meta": {"progressToken": "mine"}}),
    )
    .await;
    assert_eq!(
        progress.len(),
        4,
        "three reports and the result: {progress:?}"
    );
    for report in &progress[..3] {
        assert_eq!(report["params"]["progressToken"], "mine", "{report}");
    }
    assert_eq!(progress[3]["result"]["content"][0]["text"], "done");

    // Cancelled by its client: the server's call is cancelled, and the call not answered.
    let before = last_call_id(&fixture);
    let slow = {
        let url = url.clone();
        let plain = plain.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(&url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", &plain)
                .header("mcp-protocol-version", "2025-11-25")
                .json(
                    &json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {
                    "name": "fx__slow", "arguments": {"ms": 30000}}}),
                )
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
    };
    reaches_the_server(&fixture, &before).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 30, "reason": "changed my mind"}});
    assert_eq!(post_in_session(&url, &plain, cancel).await, 202);
    assert!(
        saw_a_cancellation(&fixture, Duration::from_secs(5)).await,
        "the server's call was cancelled"
    );
    let body = tokio::time::timeout(Duration::from_secs(10), slow)
        .await
        .expect("the cancelled call's stream ends")
        .unwrap();
    assert!(
        !body.contains("\"result\""),
        "a cancelled call is not answered: {body}"
    );
}

/// A session call the short path admits but cannot send (the server's session expired) is
/// answered by the full path, which opens a new session with the server, and is charged
/// against the rate limits once: with a limit of one call a minute, it runs, and the next call
/// is the one refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_the_short_path_hands_to_the_full_path_is_charged_against_rate_limits_once() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["fx", &fixture.url]);
    ok(&switchboard(
        dir.path(),
        &["server", "set-rate-limit", "fx", "echo", "--limit", "1/min"],
    ));
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    fixture
        .state
        .expire_session_once
        .store(true, Ordering::SeqCst);
    let echo = json!({"name": "fx__echo", "arguments": {"message": "once"}});
    let answered = call_in_session(&url, &session, 7, echo.clone()).await;
    let answer = answered.last().unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "once", "{answer}");
    assert!(
        !fixture.state.expire_session_once.load(Ordering::SeqCst),
        "the short path tried the expired session first"
    );
    let refused = call_in_session(&url, &session, 8, echo).await;
    let refused = refused.last().unwrap();
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
}

/// A session whose client only calls tools straight through (never reaching rmcp's session) lives
/// on past `--session-idle` while it keeps calling, and through calls longer than that (streamed,
/// or silent until their result); ending the session (DELETE) cancels a call it still has running
/// at the server.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_calling_straight_through_lives_while_it_calls_and_its_end_cancels_its_calls() {
    let (daemon, fixture, _dir) = serving(
        transports::streamable_http(Era::Legacy).await,
        "fx",
        &["--session-idle", "1"],
    )
    .await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    for round in 0..15 {
        let echo = json!({"name": "fx__echo", "arguments": {"message": format!("{round}")}});
        let answer = call_in_session(&url, &session, round, echo).await;
        assert_eq!(
            answer[0]["result"]["content"][0]["text"],
            format!("{round}")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let long = json!({"name": "fx__slow", "arguments": {"ms": 2500},
        "_meta": {"progressToken": "p"}});
    let answer = call_in_session(&url, &session, 50, long).await;
    assert_eq!(
        answer.last().unwrap()["result"]["content"][0]["text"],
        "done"
    );
    // Silent until its result, longer than the idle limit.
    let quiet = json!({"name": "fx__slow", "arguments": {"ms": 2500, "quiet": true}});
    let answer = call_in_session(&url, &session, 52, quiet).await;
    assert_eq!(answer[0]["result"]["content"][0]["text"], "done");
    let ping = json!({"jsonrpc": "2.0", "id": 51, "method": "ping"});
    assert_eq!(post_in_session(&url, &session, ping).await, 200);

    let before = last_call_id(&fixture);
    let running = {
        let (url, session) = (url.clone(), session.clone());
        tokio::spawn(async move {
            let slow = json!({"jsonrpc": "2.0", "id": 60, "method": "tools/call", "params": {
                "name": "fx__slow", "arguments": {"ms": 30000}}});
            reqwest::Client::new()
                .post(&url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", "2025-11-25")
                .json(&slow)
                .send()
                .await
                .map(|response| response.status())
        })
    };
    reaches_the_server(&fixture, &before).await;
    let deleted = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert!(
        saw_a_cancellation(&fixture, Duration::from_secs(5)).await,
        "the ended session's call was cancelled at the server"
    );
    running.abort();
}

/// A session client whose connection closes before the first message of its call (a quiet
/// tool, so nothing comes before the result) does not cancel the call: in a session a closed
/// stream is no cancellation. The call runs to its end at the server.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_client_that_leaves_before_the_first_message_does_not_cancel_its_call() {
    let (daemon, fixture, _dir) =
        serving(transports::streamable_http(Era::Legacy).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    // The short path is taken for this session (its answers carry the client's own id).
    let echo = json!({"name": "fx__echo", "arguments": {"message": "hi"}});
    let answer = call_in_session(&url, &session, 1, echo).await;
    assert_eq!(answer[0]["result"]["content"][0]["text"], "hi");

    let before = last_call_id(&fixture);
    let address = reqwest::Url::parse(&url).unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "fx__slow", "arguments": {"ms": 1000, "quiet": true}}})
    .to_string();
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         Mcp-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
        address.path(),
        format_args!(
            "{}:{}",
            address.host_str().unwrap(),
            address.port().unwrap()
        ),
        body.len()
    );
    let mut connection =
        tokio::net::TcpStream::connect((address.host_str().unwrap(), address.port().unwrap()))
            .await
            .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut connection, request.as_bytes())
        .await
        .unwrap();
    reaches_the_server(&fixture, &before).await;
    let id = last_call_id(&fixture);
    assert!(
        id.as_str()
            .is_some_and(|id| id.starts_with("switchboard-direct-")),
        "the call took the short path: {id}"
    );
    drop(connection);

    let finished = &fixture.state.finished_slow_calls;
    for _ in 0..250 {
        if finished.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the call ran to its end"
    );
    assert_eq!(
        fixture.state.cancelled_calls.load(Ordering::SeqCst),
        0,
        "the call was not cancelled"
    );
}

/// The next JSON-RPC message of an SSE answer being read (`buffer` keeps what was read past it).
async fn next_event(response: &mut reqwest::Response, buffer: &mut String) -> Value {
    loop {
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            if let Some(data) = line.trim_end().strip_prefix("data:")
                && let Ok(message) = serde_json::from_str::<Value>(data.trim())
            {
                return message;
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("the next event within 10 s")
            .unwrap()
            .expect("the stream goes on");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// A session client that can be asked for input, calling a session server's tool that asks it
/// something, is asked on its call's own stream (the short path's question, under an id of
/// Switchboard's), and its answer, POSTed in its session, reaches the server, whose result then
/// ends the stream. A question it did not declare the capability for is refused as on the full
/// path, without reaching it.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_client_is_asked_on_its_calls_stream_and_its_answer_reaches_the_server() {
    let (daemon, _fixture, _dir) =
        serving(transports::conformance_http(true).await, "test", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({"elicitation": {}})).await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "test__test_elicitation", "arguments": {"message": "Who?"}}});
    let mut response = send_in_session(&url, &session, &call).await;
    assert_eq!(response.status(), 200);
    let mut buffer = String::new();
    let question = next_event(&mut response, &mut buffer).await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["message"], "Who?", "{question}");
    let asked = question["id"].as_str().unwrap_or_default();
    assert!(asked.starts_with("switchboard-ask-"), "{question}");
    let answer = json!({"jsonrpc": "2.0", "id": asked,
        "result": {"action": "accept", "content": {"response": "Ada"}}});
    assert_eq!(post_in_session(&url, &session, answer).await, 202);
    let result = next_event(&mut response, &mut buffer).await;
    assert_eq!(result["id"], 5, "{result}");
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("action=accept") && text.contains("Ada"),
        "{result}"
    );

    // Sampling was not declared: refused for the client, which is not asked.
    let refused = call_in_session(
        &url,
        &session,
        6,
        json!({"name": "test__test_sampling", "arguments": {"prompt": "Hi"}}),
    )
    .await;
    assert_eq!(
        refused.len(),
        1,
        "no question reached the client: {refused:?}"
    );
    let refusal = refused[0].to_string();
    assert!(refusal.contains("does not support sampling"), "{refusal}");
}

/// A session call's stream on the short path is resumable as rmcp's are (SEP-1699): primed with
/// an event id and a retry delay, its events numbered; a client whose connection drops mid-call
/// resumes it with `Last-Event-ID` and gets the rest, result included, each event once. Once
/// the call is over (its stream sent whole), resuming from the same event, or from the priming
/// event, gives the same events as following it did.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_client_resumes_a_dropped_call_stream_with_last_event_id() {
    let (daemon, _fixture, _dir) =
        serving(transports::streamable_http(Era::Legacy).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "fx__slow", "arguments": {"ms": 1000}, "_meta": {"progressToken": "p"}}});
    let mut response = send_in_session(&url, &session, &call).await;
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    // Two progress reports, and whole events only (a chunk may end inside one).
    while text.matches("notifications/progress").count() < 2 || !text.ends_with("\n\n") {
        let chunk = response.chunk().await.unwrap().expect("more events");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let first = text.split("\n\n").next().unwrap_or_default();
    assert!(
        first.contains("id: ") && first.contains("retry: ") && first.contains("data: "),
        "a priming event first: {text:?}"
    );
    let last_id = text
        .lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .next_back()
        .unwrap()
        .to_owned();
    let seen = text.matches("notifications/progress").count();
    drop(response);

    let resume = |after: String| {
        let (url, session) = (url.clone(), session.clone());
        async move {
            let resumed = resume_stream(&url, &session, &after).await;
            assert_eq!(resumed.status(), 200);
            tokio::time::timeout(Duration::from_secs(10), resumed.text())
                .await
                .expect("the resumed stream ends with the call")
                .unwrap()
        }
    };
    let rest = resume(last_id.clone()).await;
    // The events of `text` that arrived whole.
    let events = |text: &str| -> Vec<String> {
        let whole = &text[..text.rfind("\n\n").map_or(0, |end| end + 2)];
        whole
            .split("\n\n")
            .filter(|event| event.contains("data: {"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        events(&resume(last_id).await),
        events(&rest),
        "resumed again, whole"
    );
    let priming_id = first
        .strip_prefix("id: ")
        .and_then(|f| f.lines().next())
        .unwrap();
    let everything = [events(&text), events(&rest)].concat();
    assert_eq!(events(&resume(priming_id.to_owned()).await), everything);
    let messages: Vec<Value> = rest
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect();
    let (result, progress) = messages.split_last().expect("messages");
    assert_eq!(result["id"], 9, "{rest}");
    assert_eq!(result["result"]["content"][0]["text"], "done", "{rest}");
    assert_eq!(seen + progress.len(), 20, "every report once: {text}{rest}");
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "p"));
}

/// A session call's stream keeps only its latest events for resumption (about 1 MiB besides the
/// newest), so a server that streams for as long as its call runs does not grow the daemon's
/// memory for that time: a client reading along gets every event, and one that comes back for
/// events no longer kept is refused with 410 and a JSON-RPC error, not handed the stream with a
/// gap; from a kept event on it gets the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_call_stream_keeps_its_latest_events_and_refuses_resuming_from_older_ones() {
    let (daemon, _fixture, _dir) =
        serving(transports::streamable_http(Era::Legacy).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    // Ten reports of 300 KB each: 3 MB in all.
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "fx__slow", "arguments": {"ms": 500, "pad": 300_000},
        "_meta": {"progressToken": "p"}}});
    let response = send_in_session(&url, &session, &call).await;
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the call's stream ends")
        .unwrap();
    assert_eq!(text.matches("notifications/progress").count(), 10);
    assert!(text.contains("\"text\":\"done\""), "the result, read along");
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .collect();
    assert_eq!(ids.len(), 12, "priming, ten reports, the result: {ids:?}");

    let refused = resume_stream(&url, &session, ids[0]).await;
    assert_eq!(refused.status(), 410);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no longer kept"),
        "{error}"
    );
    let rest = resume_stream(&url, &session, ids[10]).await;
    assert_eq!(rest.status(), 200);
    let rest = rest.text().await.unwrap();
    assert!(
        rest.starts_with(&format!("id: {}\n", ids[11])),
        "{rest:.200}"
    );
    assert!(rest.contains("\"text\":\"done\""), "{rest:.200}");
}

/// A 2025-11-25 session client's GET resuming a stream after event `after` (`Last-Event-ID`).
async fn resume_stream(url: &str, session: &str, after: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", after)
        .send()
        .await
        .expect("Switchboard answers")
}

/// A session server that asks for roots on its session's GET stream while working on a call
/// (as the Python SDK and FastMCP do) reaches the client behind that call, on the short path
/// (the call straight into the session) and on the full one (the standard headers take it
/// there); the client's answer goes back to the server, also with another call of the same
/// client in flight. With no call to tie it to (calls of two clients in flight), the server is
/// told so, not handed an invented empty list.
#[tokio::test(flavor = "multi_thread")]
async fn roots_asked_on_the_servers_get_stream_reach_the_client_whose_call_it_is() {
    let (daemon, fixture, _dir) =
        serving(transports::streamable_http(Era::Legacy).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({"roots": {}})).await;
    for (id, straight) in [(7u64, true), (8, false)] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "fx__roots", "arguments": {}}});
        let mut request = reqwest::Client::new()
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25");
        if !straight {
            request = request
                .header("mcp-method", "tools/call")
                .header("mcp-name", "fx__roots");
        }
        let mut response = request.json(&call).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let mut buffer = String::new();
        let question = next_event(&mut response, &mut buffer).await;
        assert_eq!(question["method"], "roots/list", "{question}");
        let answer = json!({"jsonrpc": "2.0", "id": question["id"],
            "result": {"roots": [{"uri": "file:///work/project", "name": "project"}]}});
        assert_eq!(post_in_session(&url, &session, answer).await, 202);
        let result = next_event(&mut response, &mut buffer).await;
        assert_eq!(result["id"], id, "{result}");
        let text = result["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("file:///work/project"), "{result}");
    }

    // With another call of the same client in flight, the roots are still that client's: it
    // is asked (on its latest call's stream).
    let before = last_call_id(&fixture);
    let slow = {
        let (url, session) = (url.clone(), session.clone());
        tokio::spawn(async move {
            call_in_session(
                &url,
                &session,
                20,
                json!({"name": "fx__slow", "arguments": {"ms": 3000}}),
            )
            .await
        })
    };
    reaches_the_server(&fixture, &before).await;
    let call = json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {
        "name": "fx__roots", "arguments": {}}});
    let mut response = send_in_session(&url, &session, &call).await;
    let mut buffer = String::new();
    let question = next_event(&mut response, &mut buffer).await;
    assert_eq!(question["method"], "roots/list", "{question}");
    let answer = json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"roots": [{"uri": "file:///work/other", "name": "other"}]}});
    assert_eq!(post_in_session(&url, &session, answer).await, 202);
    let result = next_event(&mut response, &mut buffer).await;
    assert!(
        result.to_string().contains("file:///work/other"),
        "{result}"
    );
    slow.abort();

    // With a call of another client in flight, a request on the GET stream belongs to neither
    // for sure: the server is told so, and nobody is asked.
    let other = open_session(&url, json!({"roots": {}})).await;
    let before = last_call_id(&fixture);
    let slow = {
        let (url, other) = (url.clone(), other.clone());
        tokio::spawn(async move {
            call_in_session(
                &url,
                &other,
                22,
                json!({"name": "fx__slow", "arguments": {"ms": 3000}}),
            )
            .await
        })
    };
    reaches_the_server(&fixture, &before).await;
    let refused = call_in_session(
        &url,
        &session,
        23,
        json!({"name": "fx__roots", "arguments": {}}),
    )
    .await;
    assert_eq!(refused.len(), 1, "nobody was asked: {refused:?}");
    let text = refused[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("roots/list failed") && text.contains("cannot tell which call"),
        "{refused:?}"
    );
    slow.abort();
}

/// The TypeScript SDK server of the conformance runs (`tests/npm/conformance-upstream.mjs`),
/// on a free loopback port (with `--dual-era`, with its stateless face too); stopped when
/// dropped.
struct TypeScriptSdkServer {
    _child: tokio::process::Child,
    url: String,
    /// The sessions opened at it, as it reports them on stderr.
    sessions: Arc<AtomicUsize>,
}

async fn typescript_sdk_server(dual_era: bool) -> TypeScriptSdkServer {
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

/// A server that speaks both eras, whose stateless face offers less than its sessions (the
/// conformance reference server's shape, here on the TypeScript SDK), serves each client over
/// a link of the client's own era: 2026-07-28 clients over the stateless link Switchboard keeps
/// (no `initialize` is sent for them), session-era clients over one session Switchboard opens
/// when the first of them asks. Those get what only the sessions offer (resource subscriptions,
/// log messages), as they would directly.
#[tokio::test(flavor = "multi_thread")]
async fn each_client_era_is_served_over_a_link_of_its_own_era() {
    let server = typescript_sdk_server(true).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["ts", &server.url]);
    let (daemon, status) = Daemon::start(dir.path(), 1).await;
    let url = daemon.mcp_url();
    assert_eq!(
        status["servers"][0]["detected_transport"], "streamable_http_stateless",
        "{status:#}"
    );

    let (_, answer) = tools_call_2026(
        &url,
        json!({"name": "ts__test_simple_text", "arguments": {}}),
        json!({}),
    )
    .await;
    assert!(
        answer["result"]["content"][0]["text"].is_string(),
        "{answer}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.sessions.load(Ordering::SeqCst),
        0,
        "no session is opened for a 2026-07-28 client"
    );

    let session = open_session(&url, json!({})).await;
    let listed = send_in_session(
        &url,
        &session,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}),
    )
    .await;
    let listed = answer_to(listed, 2).await.pop().unwrap();
    let watched = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .find(|uri| uri.ends_with("watched-resource"))
        .unwrap_or_else(|| panic!("{listed}"))
        .to_owned();
    let subscribe = json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe",
        "params": {"uri": watched}});
    let subscribed = answer_to(send_in_session(&url, &session, &subscribe).await, 3)
        .await
        .pop()
        .unwrap();
    assert!(
        subscribed["result"].is_object(),
        "the session face takes subscriptions: {subscribed}"
    );
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "ts__test_tool_with_logging", "arguments": {}}});
    let messages = answer_to(send_in_session(&url, &session, &call).await, 4).await;
    let logged: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| &m["params"]["data"])
        .collect();
    assert_eq!(
        logged,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ],
        "{messages:?}"
    );
    assert_eq!(server.sessions.load(Ordering::SeqCst), 1);

    // Another session-era client shares the link; 2026-07-28 clients keep theirs.
    let other = open_session(&url, json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "ts__test_simple_text", "arguments": {}}});
    let answered = answer_to(send_in_session(&url, &other, &call).await, 5)
        .await
        .pop()
        .unwrap();
    assert!(answered["result"]["content"].is_array(), "{answered}");
    let (_, answer) = tools_call_2026(
        &url,
        json!({"name": "ts__test_simple_text", "arguments": {}}),
        json!({}),
    )
    .await;
    assert!(answer["result"]["content"].is_array(), "{answer}");
    assert_eq!(server.sessions.load(Ordering::SeqCst), 1);
}

/// A session-era client of a server that speaks 2026-07-28 only is bridged over the stateless
/// link: the session Switchboard asks for is refused, and the client's call is answered all
/// the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_client_of_a_stateless_only_server_is_bridged() {
    let (daemon, _fixture, _dir) =
        serving(transports::streamable_http(Era::Modern).await, "m", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    for id in [2, 3] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "m__echo", "arguments": {"message": "hi"}}});
        let answered = answer_to(send_in_session(&url, &session, &call).await, id)
            .await
            .pop()
            .unwrap();
        assert_eq!(
            answered["result"]["content"][0]["text"], "hi",
            "call {id}: {answered}"
        );
    }
}

/// The SSE events of `body`: each event's fields, by name (`data` joined by lines).
fn sse_events(body: &str) -> Vec<std::collections::HashMap<String, String>> {
    body.split("\n\n")
        .filter(|event| !event.trim().is_empty())
        .map(|event| {
            let mut fields = std::collections::HashMap::<String, String>::new();
            for line in event.lines().filter(|line| !line.starts_with(':')) {
                let (name, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                fields
                    .entry(name.to_owned())
                    .and_modify(|v| {
                        v.push('\n');
                        v.push_str(value);
                    })
                    .or_insert_with(|| value.to_owned());
            }
            fields
        })
        .filter(|fields| !fields.is_empty())
        .collect()
}

/// A server that ends a call's stream before its answer (SEP-1699: the TypeScript SDK's
/// `closeSSEStream`, answering 100 ms later while no stream is attached) is seen to do so by a
/// 2025-11-25 client, as if it talked to the server itself: its own stream ends after an event
/// with an id, the server's `retry` and no message, and coming back with that id as
/// `Last-Event-ID` resumes the server's stream at once and brings the answer. A 2025-06-18
/// client, which is not expected to come back, gets the answer on the stream it opened.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_stream_the_server_ends_early_ends_early_for_clients_that_come_back() {
    let server = typescript_sdk_server(false).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["ts", &server.url, "--transport", "sessions"]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let url = daemon.mcp_url();
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "ts__test_reconnection", "arguments": {}}});
    let http = reqwest::Client::new();

    let session = open_session(&url, json!({})).await;
    let posted = send_in_session(&url, &session, &call).await;
    assert_eq!(posted.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(10), posted.text())
        .await
        .expect("the stream ends when the server's does")
        .unwrap();
    let events = sse_events(&body);
    assert_eq!(events.len(), 2, "a priming event and the pause: {body:?}");
    assert_eq!(
        events[0].get("data").map(String::as_str),
        Some(""),
        "{body:?}"
    );
    let pause = &events[1];
    assert_eq!(pause.get("data").map(String::as_str), Some(""), "{body:?}");
    assert_eq!(
        pause.get("retry").map(String::as_str),
        Some("500"),
        "the server's own retry: {body:?}"
    );
    let resumed = http
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", &pause["id"])
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let rest = tokio::time::timeout(Duration::from_secs(10), resumed.text())
        .await
        .expect("the resumed stream ends with the answer")
        .unwrap();
    let answer: Value = sse_events(&rest)
        .iter()
        .filter_map(|event| serde_json::from_str(event.get("data")?).ok())
        .next_back()
        .unwrap_or_else(|| panic!("an answer: {rest:?}"));
    assert_eq!(answer["id"], 5, "{rest}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Reconnection test completed"),
        "{rest}"
    );

    let older = open_session_at(&url, "2025-06-18", json!({})).await;
    let posted = http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &older)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&call)
        .send()
        .await
        .unwrap();
    let body = tokio::time::timeout(Duration::from_secs(10), posted.text())
        .await
        .expect("the answer comes on the same stream")
        .unwrap();
    assert!(body.contains("Reconnection test completed"), "{body:?}");
}

/// A 2026-07-28 request `method` with `params` (and `name` as its `Mcp-Name`) from a client
/// that can be asked for its roots and declares the tasks extension (or, with `tasks` false,
/// not); the JSON-RPC answer.
async fn request_2026(
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

/// Polls `tasks/get` for task `id` (every 100 ms, up to 10 s) until `done` holds; the task.
async fn poll_task(url: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut task = Value::Null;
    for _ in 0..100 {
        task =
            request_2026(url, "tasks/get", id, json!({"taskId": id}), true).await["result"].clone();
        if done(&task) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the task did not get there within 10 s: {task:#}");
}

/// The tasks extension at the front door, run by Switchboard for a server that has none (a
/// legacy session server): a client that takes tasks gets a call that runs long as a task,
/// whose outcome it polls later, after its own request has ended; a client that does not, gets
/// the same call's result as usual. A tool whose calls are always tasks refuses clients without
/// tasks (-32021), and its server's question (roots, asked on the session's GET stream) is put
/// to the client through the task (`input_required`), answered with `tasks/update`. A task
/// cancelled with `tasks/cancel` ends as cancelled, and so does its call at the server.
#[tokio::test(flavor = "multi_thread")]
async fn calls_become_tasks_that_outlive_their_request_and_ask_through_it() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["fx", &fixture.url]);
    ok(&switchboard(
        dir.path(),
        &["server", "set-task-mode", "fx", "required", "roots"],
    ));
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let url = daemon.mcp_url();
    let slow = json!({"name": "fx__slow", "arguments": {"ms": 1500}});

    let created = request_2026(&url, "tools/call", "fx__slow", slow.clone(), true).await;
    let created = &created["result"];
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    assert!(
        created["ttlMs"].as_u64().unwrap_or_default() > 0,
        "{created}"
    );
    assert!(created["pollIntervalMs"].is_u64(), "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    let done = poll_task(&url, &id, |t| t["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "done", "{done}");

    let plain = request_2026(&url, "tools/call", "fx__slow", slow, false).await;
    assert_eq!(plain["result"]["content"][0]["text"], "done", "{plain}");
    assert!(plain["result"].get("taskId").is_none(), "{plain}");

    let refused = request_2026(
        &url,
        "tools/call",
        "fx__roots",
        json!({"name": "fx__roots"}),
        false,
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");

    let created = request_2026(
        &url,
        "tools/call",
        "fx__roots",
        json!({"name": "fx__roots"}),
        true,
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let asking = poll_task(&url, &id, |t| t["status"] == "input_required").await;
    let requests = asking["inputRequests"].as_object().expect("input requests");
    assert_eq!(requests.len(), 1, "{asking}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "roots/list", "{asking}");
    let roots = json!({"roots": [{"uri": "file:///work/tasks", "name": "tasks"}]});
    let acked = request_2026(
        &url,
        "tasks/update",
        &id,
        json!({"taskId": id, "inputResponses": {key.clone(): roots}}),
        true,
    )
    .await;
    assert_eq!(acked["result"]["resultType"], "complete", "{acked}");
    let done = poll_task(&url, &id, |t| t["status"] == "completed").await;
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("file:///work/tasks"),
        "{done}"
    );

    let long = json!({"name": "fx__slow", "arguments": {"ms": 30000}});
    let created = request_2026(&url, "tools/call", "fx__slow", long, true).await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let acked = request_2026(&url, "tasks/cancel", &id, json!({"taskId": id}), true).await;
    assert_eq!(acked["result"]["resultType"], "complete", "{acked}");
    let task = request_2026(&url, "tasks/get", &id, json!({"taskId": id}), true).await;
    assert_eq!(task["result"]["status"], "cancelled", "{task}");
    for _ in 0..100 {
        if fixture.state.cancelled_calls.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        fixture.state.cancelled_calls.load(Ordering::SeqCst) > 0,
        "the server's call was cancelled"
    );
    let unknown = request_2026(&url, "tasks/get", "nope", json!({"taskId": "nope"}), true).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

/// An rmcp-based client of `url` (`?tools=` and all), a 2025-11-25 session one with
/// `sessions`, a 2026-07-28 one without, with `headers`.
async fn client_with(
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

/// The names of the tools `connection` is shown.
/// Whether `connection` hears `tools/list_changed` within 5 s.
async fn tools_changed(connection: &mut Connection) -> bool {
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

async fn listed(connection: &Connection) -> Vec<String> {
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
const DEFERRED_META: [&str; 5] = [
    "call_tool",
    "describe_tools",
    "list_servers",
    "search_tools",
    "set_active",
];

/// The deferred view: a client sees a few meta-tools instead of every tool. A search finds
/// tools by what they do, a line each with their arguments; `describe_tools` gives their full
/// definitions; in a session they join the client's list, announced with `tools/list_changed`;
/// `call_tool` calls one by name, and any tool can still be called by its own name. The view is
/// the daemon's (`serve --tools deferred`) or the client's own (`?tools=deferred`, or the
/// `X-Switchboard-Tools` header).
#[tokio::test(flavor = "multi_thread")]
async fn the_deferred_view_shows_a_few_tools_that_find_and_call_the_others() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    add(dir.path(), &["everything", "--", "node", &everything()]);
    let (daemon, _) = Daemon::start_with(dir.path(), 2, &["--tools", "deferred"]).await;
    let meta = DEFERRED_META;

    for sessions in [true, false] {
        let mut connection = client_with(&daemon.mcp_url(), sessions, vec![]).await;
        assert_eq!(listed(&connection).await, meta, "sessions: {sessions}");
        let found = connection
            .upstream
            .call_tool(
                "search_tools",
                args(json!({"query": "add two numbers", "limit": 3})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        let found = first_text(&found);
        let first = found.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("steady__add(a, b): ")
                || first.starts_with("everything__get-sum(a, b): "),
            "a line per tool, its arguments first: {found}"
        );
        let first_name = first.split('(').next().unwrap_or_default();
        let described = connection
            .upstream
            .call_tool(
                "describe_tools",
                args(json!({"names": [first_name]})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        let described: Value = serde_json::from_str(&first_text(&described)).unwrap();
        assert_eq!(described[0]["name"], first_name, "{described:#}");
        assert!(
            described[0]["inputSchema"]["properties"]["a"].is_object(),
            "{described:#}"
        );
        let unknown = connection
            .upstream
            .call_tool(
                "describe_tools",
                args(json!({"names": ["nobody__nothing"]})),
                &CallContext::default(),
            )
            .await;
        assert!(unknown.is_err(), "{unknown:?}");
        if sessions {
            let heard = tools_changed(&mut connection).await;
            assert!(heard, "list_changed after the search");
            let now = listed(&connection).await;
            assert!(
                now.len() > 2 && now.contains(&"steady__add".to_owned()),
                "{now:?}"
            );
        } else {
            // A 2026-07-28 client has no session to keep a list in.
            assert_eq!(listed(&connection).await, meta);
        }
        let sum = connection
            .upstream
            .call_tool(
                "call_tool",
                args(json!({"name": "steady__add", "arguments": {"a": 2, "b": 3}})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        assert!(text(&sum).contains("\"5\""), "{}", text(&sum));
        let echoed = connection
            .upstream
            .call_tool(
                "steady__echo",
                args(json!({"message": "by name"})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        assert!(text(&echoed).contains("by name"));
        let refused = connection
            .upstream
            .call_tool("search_tools", args(json!({})), &CallContext::default())
            .await;
        assert!(
            refused.is_err(),
            "a search without a query is refused: {refused:?}"
        );
    }

    // The daemon's view is all; a client asks for the deferred one, and back.
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let all = listed(&client_with(&daemon.mcp_url(), true, vec![]).await).await;
    assert!(
        all.contains(&"steady__echo".to_owned()) && all.len() > 2,
        "{all:?}"
    );
    let by_query = client_with(
        &format!("{}?tools=deferred", daemon.mcp_url()),
        true,
        vec![],
    )
    .await;
    assert_eq!(listed(&by_query).await, meta);
    let header = switchboard_core::NamedValue::guess("X-Switchboard-Tools", "deferred");
    let by_header = client_with(&daemon.mcp_url(), false, vec![header]).await;
    assert_eq!(listed(&by_header).await, meta);
}

/// A deferred session's list is its working set, not everything it ever found: the latest
/// search's hits and the tools it called, within `--deferred-max-tools`. A new search replaces
/// the old hits, a called tool stays, and each change is announced with `tools/list_changed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_deferred_session_lists_its_latest_hits_and_called_tools_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start_with(
        dir.path(),
        1,
        &["--tools", "deferred", "--deferred-max-tools", "3"],
    )
    .await;
    let mut session = client_with(&daemon.mcp_url(), true, vec![]).await;
    let search = async |session: &Connection, query: &str, limit: u64| -> Vec<String> {
        let found = session
            .upstream
            .call_tool(
                "search_tools",
                args(json!({"query": query, "limit": limit})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        first_text(&found)
            .lines()
            .filter_map(|line| line.split_once('(').map(|(name, _)| name.to_owned()))
            .collect()
    };
    let working = async |session: &Connection| -> Vec<String> {
        listed(session)
            .await
            .into_iter()
            .filter(|name| !DEFERRED_META.contains(&name.as_str()))
            .collect()
    };

    let first = search(&session, "add two numbers", 2).await;
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(tools_changed(&mut session).await);
    let mut expected = first.clone();
    expected.sort();
    assert_eq!(working(&session).await, expected);

    // A called tool joins the set (by its own name here, which a session may also use).
    let echoed = session
        .upstream
        .call_tool(
            "steady__echo",
            args(json!({"message": "kept"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text(&echoed).contains("kept"));
    let now = working(&session).await;
    assert!(now.contains(&"steady__echo".to_owned()), "{now:?}");
    assert!(now.len() <= 3, "{now:?}");

    // A second search replaces the first one's hits; the called tool stays, within the bound.
    let second = search(&session, "whoami", 1).await;
    assert_eq!(second.len(), 1, "{second:?}");
    assert!(tools_changed(&mut session).await);
    let now = working(&session).await;
    let mut expected: Vec<String> = second
        .iter()
        .chain(["steady__echo".to_owned()].iter())
        .cloned()
        .collect();
    expected.sort();
    expected.dedup();
    assert_eq!(now, expected, "the first search's hits are gone");

    // Searches never grow the list past the bound.
    for query in ["add", "echo", "slow", "fail", "crash", "whoami"] {
        let found = search(&session, query, 10).await;
        assert!(!found.is_empty(), "{query}");
        let now = working(&session).await;
        assert!(now.len() <= 3, "{query}: {now:?}");
    }
}

/// Pinned tools are in the deferred view's list from the start; a tool that names its allowed
/// callers refuses any other (the caller a connection declares with `X-Switchboard-Caller`), on
/// every path a call can take: sessions and stateless requests, to stdio servers and to HTTP
/// servers of both eras (whose calls otherwise take the short path).
#[tokio::test(flavor = "multi_thread")]
async fn pinned_tools_are_listed_and_a_tools_allowed_callers_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let old = transports::streamable_http(Era::Legacy).await;
    let new = transports::streamable_http(Era::Modern).await;
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    add(dir.path(), &["old", &old.url]);
    add(dir.path(), &["new", &new.url]);
    let servers = ["steady", "old", "new"];
    ok(&switchboard(
        dir.path(),
        &["server", "pin", "steady", "echo"],
    ));
    let set_callers = |server: &str, tool: &str, callers: &str| {
        ok(&switchboard(
            dir.path(),
            &["server", "set-callers", server, tool, "--callers", callers],
        ))
    };
    for server in servers {
        set_callers(server, "add", "direct,agent:math");
        set_callers(server, "whoami", "code_execution");
    }
    let shown = ok(&switchboard(dir.path(), &["server", "show", "steady"]));
    assert!(shown.contains("pinned:       echo"), "{shown}");
    assert!(
        shown.contains("callers:      add: direct, agent:math"),
        "{shown}"
    );
    let bad = switchboard(
        dir.path(),
        &[
            "server",
            "set-callers",
            "steady",
            "add",
            "--callers",
            "robot",
        ],
    );
    assert!(!bad.status.success());

    let (daemon, _) = Daemon::start_with(dir.path(), 3, &["--tools", "deferred"]).await;
    let caller = |who: &str| switchboard_core::NamedValue::guess("X-Switchboard-Caller", who);
    let call = |connection: &Connection, tool: String| {
        let upstream = connection.upstream.clone();
        async move {
            let arguments = if tool.ends_with("__add") {
                args(json!({"a": 2, "b": 3}))
            } else {
                None
            };
            upstream
                .call_tool(&tool, arguments, &CallContext::default())
                .await
        }
    };
    for sessions in [true, false] {
        let model = client_with(&daemon.mcp_url(), sessions, vec![]).await;
        assert_eq!(
            listed(&model).await,
            [
                "call_tool",
                "describe_tools",
                "list_servers",
                "search_tools",
                "set_active",
                "steady__echo"
            ],
            "sessions: {sessions}"
        );
        let code = client_with(&daemon.mcp_url(), sessions, vec![caller("code_execution")]).await;
        let agent = client_with(&daemon.mcp_url(), sessions, vec![caller("agent:math")]).await;
        let unknown = client_with(&daemon.mcp_url(), sessions, vec![caller("robot")]).await;
        for server in servers {
            let add = format!("{server}__add");
            let whoami = format!("{server}__whoami");
            let path = format!("sessions: {sessions}, server {server}");

            let answer = call(&model, add.clone()).await.unwrap();
            assert!(text(&answer).contains('5'), "{path}: {}", text(&answer));
            // A call that declares no caller is the model's own, which whoami does not allow.
            let refused = call(&model, whoami.clone())
                .await
                .expect_err("whoami is for code only");
            assert!(
                refused.to_string().contains("may not be called by direct"),
                "{path}: {refused}"
            );

            let refused = call(&code, add.clone())
                .await
                .expect_err("code may not add");
            assert!(
                refused
                    .to_string()
                    .contains("may not be called by code_execution"),
                "{path}: {refused}"
            );
            let through_call_tool = code
                .upstream
                .call_tool(
                    "call_tool",
                    args(json!({"name": add, "arguments": {"a": 1, "b": 1}})),
                    &CallContext::default(),
                )
                .await;
            assert!(through_call_tool.is_err(), "{path}: {through_call_tool:?}");
            let ran = call(&code, whoami.clone()).await;
            assert!(ran.is_ok(), "{path}: {ran:?}");
            // A tool without allowed callers is anyone's.
            let echoed = code
                .upstream
                .call_tool(
                    &format!("{server}__echo"),
                    args(json!({"message": "hi"})),
                    &CallContext::default(),
                )
                .await
                .unwrap();
            assert!(text(&echoed).contains("hi"), "{path}");

            assert!(call(&agent, add.clone()).await.is_ok(), "{path}");
            let refused = call(&unknown, add).await.expect_err("not a caller");
            assert!(
                refused.to_string().contains("not a caller"),
                "{path}: {refused}"
            );
        }
    }

    // An HTTP+SSE (2024-11-05) client's header counts the same.
    let sse = |who: &str| {
        TransportSpec::from_url(&format!("{}/sse", daemon.base), vec![caller(who)]).unwrap()
    };
    let legacy_code = client(sse("code_execution")).await;
    let refused = call(&legacy_code, "old__add".to_owned())
        .await
        .expect_err("code may not add, over /sse either");
    assert!(
        refused
            .to_string()
            .contains("may not be called by code_execution"),
        "{refused}"
    );
    assert!(call(&legacy_code, "old__whoami".to_owned()).await.is_ok());

    // The same policies in the listing for a model API.
    let http = reqwest::Client::new();
    let export = |query: &'static str| {
        let (http, base) = (http.clone(), daemon.base.clone());
        async move {
            let response = http
                .get(format!("{base}/api/tools{query}"))
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let (status, anthropic) = export("?format=anthropic").await;
    assert_eq!(status, 200, "{anthropic}");
    let tools = anthropic["tools"].as_array().unwrap();
    assert_eq!(tools[0]["type"], "tool_search_tool_bm25_20251119");
    let entry = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {anthropic:#}"))
    };
    assert!(
        entry("steady__echo").get("defer_loading").is_none(),
        "pinned"
    );
    assert_eq!(entry("steady__add")["defer_loading"], true);
    assert_eq!(entry("steady__add")["allowed_callers"], json!(["direct"]));
    assert_eq!(
        entry("old__whoami")["allowed_callers"],
        json!(["code_execution_20250825"])
    );
    assert!(entry("new__echo")["input_schema"]["properties"].is_object());
    let (_, openai) = export("?format=openai&defer=none").await;
    let names: Vec<&str> = openai["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"steady__add"), "{names:?}");
    assert!(!names.contains(&"steady__whoami"), "code only: {names:?}");
    assert_eq!(openai["tools"][0]["type"], "function", "nothing deferred");
    let (status, body) = export("?format=gemini").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("anthropic"),
        "{body}"
    );
    drop((old, new));
}

/// Activation layers: the app turns a server off for everyone, a user back on for their
/// conversations, a thread one of its tools off; the narrowest word decides what each client
/// lists and may call (over sessions and stateless requests, so on the short path too). In the
/// deferred view a session turns servers on for itself with `set_active`; a thread's change
/// reaches its sessions as `list_changed`; the model-API listing follows the same layers.
#[tokio::test(flavor = "multi_thread")]
async fn conversations_turn_servers_and_tools_on_and_off_in_layers() {
    let dir = tempfile::tempdir().unwrap();
    let old = transports::streamable_http(Era::Legacy).await;
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    add(dir.path(), &["old", &old.url]);
    let (daemon, _) = Daemon::start(dir.path(), 2).await;
    let http = reqwest::Client::new();
    let patch = |path: &str, body: Value| {
        let (http, url) = (
            http.clone(),
            format!("{}/api/activation/{path}", daemon.base),
        );
        async move {
            let response = http.patch(url).json(&body).send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let header = |name: &str, value: &str| switchboard_core::NamedValue::guess(name, value);
    let echo = |connection: &Connection, tool: &'static str| {
        let upstream = connection.upstream.clone();
        async move {
            upstream
                .call_tool(
                    tool,
                    args(json!({"message": "hi"})),
                    &CallContext::default(),
                )
                .await
        }
    };
    let has = |names: &[String], prefix: &str| names.iter().any(|n| n.starts_with(prefix));

    let (status, body) = patch("app", json!({"servers": {"old": false}})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"scope": "app", "servers": {"old": false}, "tools": {}})
    );
    let (status, _) = patch("users/ana", json!({"servers": {"old": true}})).await;
    assert_eq!(status, 200);
    let (status, _) = patch("threads/t1", json!({"tools": {"old__echo": false}})).await;
    assert_eq!(status, 200);
    let (status, body) = patch("threads/a%20b", json!({})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = patch("app", json!({"servers": {"old": "yes"}})).await;
    assert_eq!(status, 400, "{body}");

    for sessions in [true, false] {
        let path = format!("sessions: {sessions}");
        // Anyone: the app's word.
        let anyone = client_with(&daemon.mcp_url(), sessions, vec![]).await;
        let names = listed(&anyone).await;
        assert!(
            has(&names, "steady__") && !has(&names, "old__"),
            "{path}: {names:?}"
        );
        let refused = echo(&anyone, "old__echo").await.expect_err("old is off");
        assert!(
            refused.to_string().contains("turned off"),
            "{path}: {refused}"
        );
        assert!(echo(&anyone, "steady__echo").await.is_ok(), "{path}");
        // Ana: her word.
        let ana = client_with(
            &daemon.mcp_url(),
            sessions,
            vec![header("X-Switchboard-User", "ana")],
        )
        .await;
        assert!(has(&listed(&ana).await, "old__"), "{path}");
        assert!(echo(&ana, "old__echo").await.is_ok(), "{path}");
        // Ana in thread t1: the thread's word on one tool.
        let thread = client_with(
            &format!("{}?thread=t1", daemon.mcp_url()),
            sessions,
            vec![header("X-Switchboard-User", "ana")],
        )
        .await;
        let names = listed(&thread).await;
        assert!(
            has(&names, "old__add") && !names.contains(&"old__echo".to_owned()),
            "{path}: {names:?}"
        );
        let refused = echo(&thread, "old__echo").await.expect_err("off in t1");
        assert!(refused.to_string().contains("thread"), "{path}: {refused}");
    }

    // The model-API listing and the search API follow the same layers.
    let tool_names = |path: String| {
        let base = daemon.base.clone();
        async move {
            let body = common::get_json(&format!("{base}{path}")).await;
            body["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("{body}"))
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        }
    };
    let exported = |query: &str| tool_names(format!("/api/tools{query}"));
    let searched = |query: &str| tool_names(format!("/api/tools/search?q=echo&limit=50{query}"));
    assert!(!has(&exported("").await, "old__"));
    assert!(!searched("").await.contains(&"old__echo".to_owned()));
    assert!(
        searched("&user=ana")
            .await
            .contains(&"old__echo".to_owned())
    );
    assert!(has(&exported("?user=ana").await, "old__"));
    assert!(
        !exported("?user=ana&thread=t1")
            .await
            .contains(&"old__echo".to_owned())
    );

    // An HTTP+SSE client names its thread on the stream's URL.
    let legacy = client(
        TransportSpec::from_url(
            &format!("{}/sse?thread=t1", daemon.base),
            vec![header("X-Switchboard-User", "ana")],
        )
        .unwrap(),
    )
    .await;
    let refused = echo(&legacy, "old__echo").await.expect_err("off in t1");
    assert!(refused.to_string().contains("thread"), "{refused}");
    assert!(listed(&legacy).await.contains(&"old__add".to_owned()));

    // A thread's change reaches its session as list_changed.
    let mut in_t1 = client_with(&format!("{}?thread=t1", daemon.mcp_url()), true, vec![]).await;
    assert!(!has(&listed(&in_t1).await, "old__"));
    let (status, _) = patch("threads/t1", json!({"servers": {"old": true}})).await;
    assert_eq!(status, 200);
    let heard = tools_changed(&mut in_t1).await;
    assert!(heard, "list_changed after the thread's change");
    let names = listed(&in_t1).await;
    assert!(
        has(&names, "old__add") && !names.contains(&"old__echo".to_owned()),
        "{names:?}"
    );

    // In the deferred view a session turns a server on for itself.
    let deferred = format!("{}?tools=deferred", daemon.mcp_url());
    let mut session = client_with(&deferred, true, vec![]).await;
    let meta = DEFERRED_META;
    assert_eq!(listed(&session).await, meta);
    let servers = session
        .upstream
        .call_tool("list_servers", None, &CallContext::default())
        .await
        .unwrap();
    let content = serde_json::to_value(&servers.content).unwrap();
    let servers: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
    let old_entry = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["server"] == "old")
        .unwrap_or_else(|| panic!("{servers:#}"));
    assert_eq!(old_entry["active"], false, "{servers:#}");
    let found = session
        .upstream
        .call_tool(
            "search_tools",
            args(json!({"query": "echo a message"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(
        !text(&found).contains("old__"),
        "off servers are not found: {}",
        text(&found)
    );
    let unknown = session
        .upstream
        .call_tool(
            "set_active",
            args(json!({"servers": ["nope"], "active": true})),
            &CallContext::default(),
        )
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    session
        .upstream
        .call_tool(
            "set_active",
            args(json!({"servers": ["old"], "active": true})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    let heard = tools_changed(&mut session).await;
    assert!(heard, "list_changed after set_active");
    // The server's tools join the list (beside the tools the search found).
    let names = listed(&session).await;
    assert!(
        names.contains(&"old__whoami".to_owned()) && !names.contains(&"steady__whoami".to_owned()),
        "{names:?}"
    );
    assert!(echo(&session, "old__echo").await.is_ok());
    // Another session is not concerned.
    assert_eq!(
        listed(&client_with(&deferred, true, vec![]).await).await,
        meta
    );
    // A stateless request has no session to remember the change in.
    let stateless = client_with(&deferred, false, vec![]).await;
    let refused = stateless
        .upstream
        .call_tool(
            "set_active",
            args(json!({"servers": ["old"], "active": true})),
            &CallContext::default(),
        )
        .await
        .expect_err("no session");
    assert!(
        refused.to_string().contains("X-Switchboard-Thread"),
        "{refused}"
    );

    // Emptying the app's layer turns old back on for everyone.
    let response = http
        .delete(format!("{}/api/activation/app", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let anyone = client_with(&daemon.mcp_url(), true, vec![]).await;
    assert!(has(&listed(&anyone).await, "old__"));
    drop(old);
}

/// A console following a resource (`GET /api/servers/{id}/resource-updates`) and an MCP client
/// subscribing to it share one subscription at the server: it is subscribed once, and
/// unsubscribed only when the last of them lets go, here the console closing its stream.
#[tokio::test(flavor = "multi_thread")]
async fn a_console_and_an_mcp_client_share_one_subscription_at_the_server() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["fixture", &fixture.url]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let subscribed = || fixture.state.subscribed.lock().unwrap().clone();
    let unsubscribed = || fixture.state.unsubscribed.lock().unwrap().clone();
    let until = async |what: &dyn Fn() -> bool| {
        for _ in 0..200 {
            if what() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("never came to pass");
    };

    let follow = reqwest::get(format!(
        "{}/api/servers/fixture/resource-updates?uri=fixture://greeting",
        daemon.base
    ))
    .await
    .unwrap();
    assert_eq!(follow.status(), 200);
    until(&|| subscribed() == ["fixture://greeting"]).await;

    // A client with a session: its resources/subscribe and resources/unsubscribe are answered
    // once the hub has counted them, so each step below has happened at the daemon before the
    // next. (A 2026-07-28 client's subscription is counted only after its listen stream is
    // acknowledged, and let go whenever the daemon sees that stream close: the console could
    // let go before either, and be taken for the last subscriber.)
    let connection = client_with(&daemon.mcp_url(), true, vec![]).await;
    let exposed = "fixture://fixture__greeting";
    connection
        .upstream
        .subscribe_resource(exposed)
        .await
        .unwrap();
    connection
        .upstream
        .unsubscribe_resource(exposed)
        .await
        .unwrap();
    assert_eq!(subscribed(), ["fixture://greeting"], "subscribed once");
    assert!(unsubscribed().is_empty(), "the console still follows it");

    drop(follow);
    until(&|| unsubscribed() == ["fixture://greeting"]).await;
    assert_eq!(subscribed(), ["fixture://greeting"]);
}

#[tokio::test]
async fn a_subscription_is_made_again_when_its_server_connects_again() {
    let mut fixture = transports::streamable_http(Era::Legacy).await;
    let state = fixture.state.clone();
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["fixture", &fixture.url]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let subscribed = || state.subscribed.lock().unwrap().clone();
    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    connection
        .upstream
        .subscribe_resource("fixture://fixture__greeting")
        .await
        .unwrap();
    // A 2026-07-28 client: its listen stream is acknowledged as the subscription is being made.
    daemon
        .wait_for(|_| subscribed() == ["fixture://greeting"])
        .await;

    // The server goes away (a check finds it gone, and the connection is made anew) and
    // comes back remembering nothing.
    let check = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let checked: Value = reqwest::Client::new()
            .post(format!("{}/api/servers/fixture/check", daemon.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_ne!(checked["status"]["state"], "connected", "{checked}");
    };
    tokio::join!(fixture.restart(Duration::from_secs(2)), check);
    daemon
        .wait_for(|status| connected(status) == 1 && subscribed().len() == 2)
        .await;
    assert_eq!(subscribed(), ["fixture://greeting", "fixture://greeting"]);

    // The client's subscription is its own still: its end ends the new one.
    connection
        .upstream
        .unsubscribe_resource("fixture://fixture__greeting")
        .await
        .unwrap();
    daemon
        .wait_for(|_| *state.unsubscribed.lock().unwrap() == ["fixture://greeting"])
        .await;
}
