//! The admin API a console drives, against a running `switchboard serve` with the real
//! `@modelcontextprotocol/server-everything` behind it: servers added, changed, imported and
//! removed while the daemon runs, tool toggles and calls (with progress), and the live event
//! stream over SSE and WebSocket.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

/// A running daemon with no servers yet; killed on drop.
struct Daemon {
    _child: tokio::process::Child,
    base: String,
    port: u16,
    http: reqwest::Client,
}

impl Daemon {
    async fn start(data_dir: &Path) -> Self {
        Self::start_with(data_dir, &[]).await
    }

    /// [`Daemon::start`] with options for `serve`.
    async fn start_with(data_dir: &Path, serve_options: &[&str]) -> Self {
        let (child, port) = common::spawn_daemon_with(data_dir, &[], serve_options);
        let daemon = Self {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
            port,
            http: reqwest::Client::new(),
        };
        for _ in 0..200 {
            if reqwest::get(format!("{}/healthz", daemon.base))
                .await
                .is_ok()
            {
                return daemon;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the daemon did not answer within 10 s");
    }

    /// Sends `method path` with `body` (JSON unless it is a string); the status and JSON body
    /// (`null` when there is none).
    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        match body {
            Some(Value::String(text)) => request = request.body(text),
            Some(body) => request = request.json(&body),
            None => {}
        }
        let response = request.send().await.expect("the daemon answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, json)
    }

    /// `POST /api/servers/everything/tools/{tool}/call` with `arguments`.
    async fn call(&self, tool: &str, arguments: Value) -> (u16, Value) {
        let path = format!("/api/servers/everything/tools/{tool}/call");
        self.send("POST", &path, Some(json!({ "arguments": arguments })))
            .await
    }

    /// `GET /metrics`, which must be OpenMetrics text.
    async fn metrics(&self) -> String {
        let response = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap();
        let kind = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
        response.text().await.unwrap()
    }

    /// Waits (up to 30 s) until server `id`'s status says `state`; returns its view.
    async fn wait_for_state(&self, id: &str, state: &str) -> Value {
        let mut last = Value::Null;
        for _ in 0..600 {
            let (_, view) = self.send("GET", &format!("/api/servers/{id}"), None).await;
            if view["status"]["state"] == state {
                return view;
            }
            last = view;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{id} never got to {state}: {last:#}");
    }

    /// Adds the real `server-everything` as `everything` through the API, and waits until it
    /// lists `tool`.
    async fn add_everything_listing(&self, tool: &str) {
        let entry = json!({"id": "everything", "command": "node", "args": [everything()]});
        let (status, _) = self.send("POST", "/api/servers", Some(entry)).await;
        assert_eq!(status, 201);
        self.wait_for_tool("everything", tool, json!(format!("everything__{tool}")))
            .await;
    }

    /// POSTs `body` to `path` in a task of its own (a call that waits for a person); its JSON
    /// answer.
    fn post_in_background(&self, path: &str, body: Value) -> tokio::task::JoinHandle<Value> {
        let request = self.http.post(format!("{}{path}", self.base)).json(&body);
        tokio::spawn(async move { request.send().await.unwrap().json().await.unwrap() })
    }

    /// Waits (up to 30 s) until server `id` lists tool `tool` with `exposed_name`.
    async fn wait_for_tool(&self, id: &str, tool: &str, exposed_name: Value) -> Value {
        let mut last = Value::Null;
        for _ in 0..600 {
            let (_, tools) = self
                .send("GET", &format!("/api/servers/{id}/tools"), None)
                .await;
            if let Some(found) = tools["tools"]
                .as_array()
                .and_then(|all| all.iter().find(|t| t["name"] == tool))
                && found["exposed_name"] == exposed_name
            {
                return found.clone();
            }
            last = tools;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{id} never listed {tool} as {exposed_name}: {last:#}");
    }
}

fn everything() -> String {
    switchboard_fixtures::server_everything_entry()
        .display()
        .to_string()
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The SSE events of `GET /api/events`, as JSON objects, until `enough` says so (or 30 s).
async fn collect_events(base: String, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    collect_sse(format!("{base}/api/events"), enough).await
}

/// The SSE events of `GET url`, as JSON objects, until `enough` says so (or 30 s).
async fn collect_sse(url: String, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(chunk)) = body.next().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let data: String = block
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if let Ok(event) = serde_json::from_str::<Value>(&data) {
                    events.push(event);
                }
            }
            if enough(&events) {
                return;
            }
        }
    })
    .await;
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_are_added_changed_and_removed_through_the_admin_api_while_the_daemon_runs() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;

    // A console listening from the start sees the snapshot, then the server being started and
    // connecting.
    let listening = tokio::spawn(collect_events(daemon.base.clone(), |events| {
        events
            .iter()
            .any(|e| e["type"] == "state_changed" && e["to"] == "connected")
    }));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (status, created) = daemon
        .send(
            "POST",
            "/api/servers",
            Some(
                json!({"id": "everything", "command": "node", "args": [everything()],
                        "description": "The reference server", "env": {"API_TOKEN": "s3cret"}}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{created:#}");
    assert_eq!(created["id"], "everything");
    let env = &created["transport"]["env"][0];
    assert_eq!(
        (env["name"].as_str(), env["value"].as_str()),
        (Some("API_TOKEN"), Some("********")),
        "secrets are never shown: {created:#}"
    );
    daemon.wait_for_state("everything", "connected").await;

    let events = listening.await.unwrap();
    assert_eq!(events.first().map(|e| &e["type"]), Some(&json!("status")));
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "configured" && e["change"] == "started"),
        "{events:#?}"
    );

    let (status, taken) = daemon
        .send(
            "POST",
            "/api/servers",
            Some(json!({"id": "everything", "url": "http://127.0.0.1:1/mcp"})),
        )
        .await;
    assert_eq!(status, 409, "a taken id is refused: {taken}");

    // The server's real secret reaches it; a definition written back with the redacted value
    // keeps it.
    let (status, env) = daemon.call("get-env", json!({})).await;
    assert_eq!(status, 200, "{env:#}");
    assert!(text_of(&env).contains("s3cret"), "{env:#}");
    let (status, replaced) = daemon
        .send(
            "PUT",
            "/api/servers/everything",
            Some(json!({"command": "node", "args": [everything()],
                        "env": {"API_TOKEN": "********", "MODE": "replaced"}})),
        )
        .await;
    assert_eq!(status, 200, "{replaced:#}");
    daemon.wait_for_state("everything", "connected").await;
    let (_, env) = daemon.call("get-env", json!({})).await;
    assert!(
        text_of(&env).contains("s3cret") && text_of(&env).contains("replaced"),
        "{env:#}"
    );

    // A tool turned off is listed as off, not exposed, and refused; turned on, it is called.
    let echo = daemon
        .wait_for_tool("everything", "echo", json!("everything__echo"))
        .await;
    assert_eq!(echo["settings"]["enabled"], true);
    let (status, changed) = daemon
        .send(
            "PATCH",
            "/api/servers/everything/tools/echo",
            Some(json!({"enabled": false, "pinned": true})),
        )
        .await;
    assert_eq!(status, 200, "{changed:#}");
    assert_eq!(changed["settings"]["enabled"], false);
    let echo = daemon
        .wait_for_tool("everything", "echo", Value::Null)
        .await;
    assert_eq!(echo["settings"]["pinned"], true, "{echo:#}");
    let (status, refused) = daemon.call("echo", json!({"message": "hi"})).await;
    assert_eq!(status, 409, "{refused:#}");
    assert!(refused["error"].as_str().unwrap().contains("disabled"));

    daemon
        .send(
            "PATCH",
            "/api/servers/everything/tools/echo",
            Some(json!({"enabled": true})),
        )
        .await;
    daemon
        .wait_for_tool("everything", "echo", json!("everything__echo"))
        .await;
    let (status, echoed) = daemon.call("echo", json!({"message": "hi"})).await;
    assert_eq!(status, 200, "{echoed:#}");
    assert_eq!(text_of(&echoed), "Echo: hi");

    // A new prefix renames the exposed tools; the MCP front door follows.
    let (status, renamed) = daemon
        .send(
            "PATCH",
            "/api/servers/everything",
            Some(json!({"prefix": "ev", "display_name": "Everything"})),
        )
        .await;
    assert_eq!(status, 200, "{renamed:#}");
    assert_eq!(renamed["display_name"], "Everything");
    daemon
        .wait_for_tool("everything", "echo", json!("ev__echo"))
        .await;
    let answer = common::call_through_daemon(daemon.port, 1, "ev__echo").await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "Echo: hi",
        "{answer:#}"
    );

    // Resources and prompts of the server.
    let (_, resources) = daemon
        .send("GET", "/api/servers/everything/resources", None)
        .await;
    assert!(
        !resources["resources"].as_array().unwrap().is_empty()
            || !resources["resource_templates"]
                .as_array()
                .unwrap()
                .is_empty(),
        "{resources:#}"
    );
    let (_, prompts) = daemon
        .send("GET", "/api/servers/everything/prompts", None)
        .await;
    assert!(!prompts["prompts"].as_array().unwrap().is_empty());
    // One of each read and got.
    let uri = resources["resources"][0]["uri"].as_str().unwrap();
    let path = format!(
        "/api/servers/everything/resource?uri={}",
        url::form_urlencoded::byte_serialize(uri.as_bytes()).collect::<String>()
    );
    let (status, read) = daemon.send("GET", &path, None).await;
    assert_eq!(
        (status, &read["contents"][0]["uri"]),
        (200, &json!(uri)),
        "{read:#}"
    );
    let (status, _) = daemon
        .send(
            "GET",
            "/api/servers/everything/resource?uri=demo://nope",
            None,
        )
        .await;
    assert_eq!(status, 422, "an unknown resource is the server's error");
    let (status, got) = daemon
        .send(
            "POST",
            "/api/servers/everything/prompts/args-prompt/get",
            Some(json!({"arguments": {"city": "Lisbon"}})),
        )
        .await;
    assert_eq!(
        (status, &got["messages"][0]["content"]["text"]),
        (200, &json!("What's weather in Lisbon?")),
        "{got:#}"
    );

    // Disabled, it stops; removed, it is gone.
    let (_, disabled) = daemon
        .send(
            "PATCH",
            "/api/servers/everything",
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(disabled["enabled"], false);
    assert_eq!(
        disabled["status"],
        Value::Null,
        "a disabled server is not running"
    );
    let (status, refused) = daemon.call("echo", json!({"message": "hi"})).await;
    assert_eq!(status, 409, "{refused:#}");
    let (status, _) = daemon.send("DELETE", "/api/servers/everything", None).await;
    assert_eq!(status, 204);
    let (status, gone) = daemon.send("GET", "/api/servers/everything", None).await;
    assert_eq!(status, 404, "{gone:#}");
    let (_, all) = daemon.send("GET", "/api/servers", None).await;
    assert_eq!(all["servers"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_called_from_the_console_streams_its_progress_then_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    let imported = format!(
        r#"{{"mcpServers": {{"everything": {{"command": "node", "args": ["{}"]}},
            "broken": {{"command": "a", "url": "http://127.0.0.1:1/mcp"}}}}}}"#,
        everything()
    );
    let (status, outcome) = daemon
        .send("POST", "/api/servers/import", Some(Value::String(imported)))
        .await;
    assert_eq!(status, 200, "{outcome:#}");
    assert_eq!(outcome["imported"], json!(["everything"]));
    assert_eq!(outcome["skipped"][0]["name"], "broken");
    daemon.wait_for_state("everything", "connected").await;

    let response = daemon
        .http
        .post(format!(
            "{}/api/servers/everything/tools/trigger-long-running-operation/call",
            daemon.base
        ))
        .header("accept", "text/event-stream")
        .json(&json!({"arguments": {"duration": 1, "steps": 3}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    let events: Vec<(String, Value)> = body
        .split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event:"))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data:"))?;
            Some((
                name.trim().to_owned(),
                serde_json::from_str(data.trim()).ok()?,
            ))
        })
        .collect();
    let progress: Vec<f64> = events
        .iter()
        .filter(|(name, _)| name == "progress")
        .map(|(_, data)| data["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0], "{body}");
    let (last, result) = events.last().unwrap();
    assert_eq!(last, "result", "{body}");
    assert!(text_of(result).contains("completed"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_is_also_a_websocket() {
    use tokio_tungstenite::tungstenite::Message;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    let (mut socket, _) =
        tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{}/api/events/ws", daemon.port))
            .await
            .expect("the WebSocket opens");
    let mut next = async || loop {
        let message = tokio::time::timeout(Duration::from_secs(30), socket.next())
            .await
            .expect("an event within 30 s")
            .expect("the socket stays open")
            .unwrap();
        if let Message::Text(text) = message {
            return serde_json::from_str::<Value>(&text).unwrap();
        }
    };
    assert_eq!(next().await["type"], "status");
    let (status, _) = daemon
        .send(
            "POST",
            "/api/servers",
            Some(json!({"id": "everything", "command": "node", "args": [everything()]})),
        )
        .await;
    assert_eq!(status, 201);
    let mut seen = Vec::new();
    loop {
        let event = next().await;
        if event["type"] == "state_changed" && event["to"] == "connected" {
            break;
        }
        seen.push(event);
    }
    assert!(
        seen.iter()
            .any(|e| e["type"] == "configured" && e["server"] == "everything"),
        "{seen:#?}"
    );
}

#[tokio::test]
async fn bad_requests_to_the_admin_api_get_clear_errors_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    let cases = [
        ("POST", "/api/servers", Some(Value::String("{".into())), 400),
        (
            "POST",
            "/api/servers",
            Some(json!({"url": "http://127.0.0.1:1/mcp"})),
            400,
        ),
        (
            "POST",
            "/api/servers",
            Some(json!({"id": "x", "url": "ftp://x"})),
            400,
        ),
        (
            "POST",
            "/api/servers",
            Some(json!({"id": "Not An Id", "command": "a"})),
            400,
        ),
        ("GET", "/api/servers/nope", None, 404),
        ("GET", "/api/servers/Bad_Id", None, 400),
        (
            "PATCH",
            "/api/servers/nope",
            Some(json!({"enabled": true})),
            404,
        ),
        ("DELETE", "/api/servers/nope", None, 404),
        (
            "POST",
            "/api/servers/import",
            Some(Value::String("{}".into())),
            400,
        ),
    ];
    for (method, path, body, expected) in cases {
        let (status, answer) = daemon.send(method, path, body.clone()).await;
        assert_eq!(status, expected, "{method} {path} {body:?}: {answer}");
        assert!(
            answer["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{method} {path}: the error says why: {answer}"
        );
    }
    let (status, created) = daemon
        .send(
            "POST",
            "/api/servers",
            Some(json!({"id": "x", "url": "http://127.0.0.1:1/mcp", "enabled": false})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    for (path, body) in [
        ("/api/servers/x", json!({"enabeld": true})),
        ("/api/servers/x", json!({"prefix": "Bad Prefix"})),
        ("/api/servers/x", json!({"display_name": " "})),
        (
            "/api/servers/x/tools/t",
            json!({"allowed_callers": ["robot"]}),
        ),
    ] {
        let (status, answer) = daemon.send("PATCH", path, Some(body.clone())).await;
        assert_eq!(status, 400, "PATCH {path} {body}: {answer}");
    }
    let (_, unchanged) = daemon.send("GET", "/api/servers/x", None).await;
    assert_eq!(unchanged["display_name"], "x");
    assert_eq!(unchanged.get("prefix"), None, "{unchanged:#}");

    // A page from another origin cannot drive the API.
    let refused = daemon
        .http
        .delete(format!("{}/api/servers/x", daemon.base))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let (status, _) = daemon.send("GET", "/api/servers/x", None).await;
    assert_eq!(status, 200, "the refused request removed nothing");
}

/// Checks that each series (name and labels) has its value in the metrics `text`.
fn assert_metrics(text: &str, expected: &[(&str, f64)]) {
    for (series, value) in expected {
        let found: Option<f64> = text
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok());
        assert_eq!(found, Some(*value), "{series} in:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_counted_in_the_metrics_and_announced_live() {
    let modern =
        switchboard_fixtures::transports::streamable_http(switchboard_fixtures::Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    for entry in [
        json!({"id": "modern", "url": modern.url}),
        json!({"id": "everything", "command": "node", "args": [everything()]}),
    ] {
        let (status, answer) = daemon.send("POST", "/api/servers", Some(entry)).await;
        assert_eq!(status, 201, "{answer:#}");
    }
    daemon.wait_for_state("modern", "connected").await;
    daemon.wait_for_state("everything", "connected").await;
    let listening = tokio::spawn(collect_events(daemon.base.clone(), |events| {
        events.iter().filter(|e| e["type"] == "tool_called").count() >= 3
    }));
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Straight through to an HTTP server (the short path), a tool error among them, and through
    // the console to a stdio server (the full path).
    let echoed = common::call_through_daemon(daemon.port, 1, "modern__echo").await;
    assert!(echoed["result"].is_object(), "{echoed:#}");
    let failed = common::call_through_daemon(daemon.port, 2, "modern__fail").await;
    assert_eq!(failed["result"]["isError"], true, "{failed:#}");
    let (status, _) = daemon.call("echo", json!({"message": "hi"})).await;
    assert_eq!(status, 200);

    let events = listening.await.unwrap();
    let calls: Vec<(String, String, String)> = events
        .iter()
        .filter(|e| e["type"] == "tool_called")
        .map(|e| {
            assert!(e["elapsed_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{e}");
            (
                e["server"].as_str().unwrap().to_owned(),
                e["tool"].as_str().unwrap().to_owned(),
                e["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("modern", "echo", "ok"),
        ("modern", "fail", "tool_error"),
        ("everything", "echo", "ok"),
    ]
    .map(|(s, t, o)| (s.to_owned(), t.to_owned(), o.to_owned()));
    assert_eq!(calls, expected, "each call announced once, in order");

    let text = daemon.metrics().await;
    assert_metrics(
        &text,
        &[
            (
                r#"switchboard_tool_calls_total{server="modern",tool="echo",outcome="ok"}"#,
                1.0,
            ),
            (
                r#"switchboard_tool_calls_total{server="modern",tool="fail",outcome="tool_error"}"#,
                1.0,
            ),
            (
                r#"switchboard_tool_calls_total{server="everything",tool="echo",outcome="ok"}"#,
                1.0,
            ),
            (
                r#"switchboard_tool_call_duration_seconds_count{server="modern",tool="echo"}"#,
                1.0,
            ),
            (
                r#"switchboard_server_state{server="modern",state="connected"}"#,
                1.0,
            ),
            (
                r#"switchboard_server_state{server="everything",state="connected"}"#,
                1.0,
            ),
        ],
    );
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_refuse_calls_beyond_them_and_say_when_to_retry() {
    let modern =
        switchboard_fixtures::transports::streamable_http(switchboard_fixtures::Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    for args in [
        vec!["server", "add", "modern", &modern.url],
        vec!["server", "add", "everything", "--", "node", &everything()],
        // Two calls of modern's echo an hour; one call of any of everything's tools.
        vec![
            "server",
            "set-rate-limit",
            "modern",
            "echo",
            "--limit",
            "2/h",
        ],
        vec!["server", "set-rate-limit", "everything", "--limit", "1/h"],
    ] {
        let output = common::switchboard(data, &args);
        assert!(output.status.success(), "{}", common::text(&output));
    }
    let shown = common::switchboard(data, &["server", "show", "modern"]);
    assert!(
        common::text(&shown).contains("rate limit:   echo: 2/h"),
        "{}",
        common::text(&shown)
    );
    let daemon = Daemon::start_with(data, &["--client-rate-limit", "6/h"]).await;
    daemon.wait_for_state("modern", "connected").await;
    daemon.wait_for_state("everything", "connected").await;

    // A tool's limit, on the short path: the third call is refused with the limit and a wait.
    for id in 1..=2 {
        let answer = common::call_through_daemon(daemon.port, id, "modern__echo").await;
        assert!(answer["result"].is_object(), "call {id}: {answer:#}");
    }
    let refused = common::call_through_daemon(daemon.port, 3, "modern__echo").await;
    assert_eq!(refused["error"]["code"], -32029, "{refused:#}");
    assert_eq!(refused["error"]["data"]["limit"], "2/h");
    assert!(refused["error"]["data"]["retry_after_ms"].as_u64().unwrap() > 60_000);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("tool 'echo' of server 'modern'"),
        "{message}"
    );
    // The server's other tools are not limited.
    let added = common::call_through_daemon(daemon.port, 4, "modern__add").await;
    assert!(added["result"].is_object(), "{added:#}");

    // A server's limit, from the console and through /mcp (the full path).
    let (status, _) = daemon.call("echo", json!({"message": "hi"})).await;
    assert_eq!(status, 200);
    let (status, refused) = daemon.call("get-sum", json!({"a": 1, "b": 2})).await;
    assert_eq!(status, 429, "{refused:#}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("server 'everything'")
    );
    let refused = common::call_through_daemon(daemon.port, 5, "everything__echo").await;
    assert_eq!(refused["error"]["code"], -32029, "{refused:#}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("server 'everything'"),
        "{refused:#}"
    );

    // Each client's own limit (a call refused by another limit counts). A loopback daemon
    // without users knows its clients by address only: what a request says of itself (a user
    // it names) cannot buy it a fresh allowance. Calls "as ana" until the limit refuses one
    // (the calls above counted too: the same client), then "as bob", or anyone, are refused as
    // well.
    let mut passed = 0;
    for id in 10..17 {
        let answer = common::call_through_daemon_with(
            daemon.port,
            id,
            "modern__add",
            &[("x-switchboard-user", "ana")],
        )
        .await;
        if answer["error"]["code"] == -32029 {
            break;
        }
        assert!(answer["result"].is_object(), "call {id}: {answer:#}");
        passed += 1;
    }
    assert!(passed < 6, "the earlier calls counted: {passed}");
    for (id, named) in [(16, "ana"), (17, "bob"), (18, "someone-else")] {
        let refused = common::call_through_daemon_with(
            daemon.port,
            id,
            "modern__add",
            &[("x-switchboard-user", named)],
        )
        .await;
        assert_eq!(refused["error"]["code"], -32029, "{named}: {refused:#}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("client address 127.0.0.1"),
            "{refused:#}"
        );
    }
    // Refused calls never reached a server.
    let text = daemon.metrics().await;
    assert_metrics(
        &text,
        &[
            (
                r#"switchboard_tool_calls_total{server="modern",tool="echo",outcome="ok"}"#,
                2.0,
            ),
            (
                r#"switchboard_tool_calls_total{server="modern",tool="add",outcome="ok"}"#,
                1.0 + f64::from(passed),
            ),
            (
                r#"switchboard_tool_calls_total{server="everything",tool="echo",outcome="ok"}"#,
                1.0,
            ),
        ],
    );
    assert_eq!(
        text.matches("switchboard_tool_calls_total{").count(),
        3,
        "{text}"
    );
}

/// The console's WebSocket on `/api/events/ws`: while it is open the console counts as there to
/// answer questions.
struct Console {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl Console {
    async fn open(port: u16) -> Self {
        let (socket, _) =
            tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/api/events/ws"))
                .await
                .expect("the WebSocket opens");
        Self { socket }
    }

    /// The next event (within 30 s).
    async fn next(&mut self) -> Value {
        use tokio_tungstenite::tungstenite::Message;
        loop {
            let message = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .expect("an event within 30 s")
                .expect("the socket stays open")
                .unwrap();
            if let Message::Text(text) = message {
                return serde_json::from_str(&text).unwrap();
            }
        }
    }

    /// The next event of `kind`, skipping others.
    async fn next_of(&mut self, kind: &str) -> Value {
        loop {
            let event = self.next().await;
            if event["type"] == kind {
                return event;
            }
        }
    }

    async fn send(&mut self, message: Value) {
        use futures::SinkExt;
        self.socket
            .send(tokio_tungstenite::tungstenite::Message::Text(
                message.to_string().into(),
            ))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_tool_waits_for_a_person_who_answers_on_the_console_websocket() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    let (status, _) = daemon
        .send(
            "POST",
            "/api/servers",
            Some(json!({"id": "human", "url": "builtin:human"})),
        )
        .await;
    assert_eq!(status, 201);
    daemon.wait_for_state("human", "connected").await;
    let (_, tools) = daemon.send("GET", "/api/servers/human/tools", None).await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["ask", "confirm", "choose", "approve_plan", "request_file"]
    );

    let mut console = Console::open(daemon.port).await;
    assert_eq!(console.next().await["questions"], json!([]));
    let path = "/api/servers/human/tools/choose/call".to_owned();
    let body =
        json!({"arguments": {"question": "Which region?", "options": ["eu-west", "us-east"]}});
    let call = daemon.post_in_background(&path, body);
    let asked = console.next_of("question_asked").await["question"].clone();
    assert_eq!(
        (
            &asked["server"],
            &asked["tool"],
            &asked["kind"],
            &asked["message"]
        ),
        (
            &json!("human"),
            &json!("choose"),
            &json!("form"),
            &json!("Which region?")
        )
    );
    assert_eq!(
        asked["schema"]["properties"]["choice"]["enum"],
        json!(["eu-west", "us-east"])
    );
    let id = asked["id"].as_str().unwrap().to_owned();
    let (_, waiting) = daemon.send("GET", "/api/questions", None).await;
    assert_eq!(waiting["questions"][0]["id"], id.as_str());

    // An answer that is not among the options is refused, and the question goes on waiting.
    console
        .send(
            json!({"type": "answer", "id": id, "action": "accept", "content": {"choice": "mars"}}),
        )
        .await;
    let refused = console.next_of("answer_refused").await;
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("'choice' offers no choice"),
        "{refused}"
    );
    console
        .send(json!({"type": "answer", "id": id, "action": "accept", "content": {"choice": "us-east"}}))
        .await;
    let ended = console.next_of("question_ended").await;
    assert_eq!(
        (&ended["id"], &ended["ending"]),
        (&json!(id), &json!("accepted"))
    );
    let result = call.await.unwrap();
    assert_eq!(text_of(&result), "us-east");
    assert_eq!(
        result["structuredContent"],
        json!({"action": "accept", "choice": "us-east"})
    );

    // A late answer finds nothing waiting; a question nobody answers times out.
    let (status, _) = daemon
        .send(
            "POST",
            &format!("/api/questions/{id}"),
            Some(json!({"action": "decline"})),
        )
        .await;
    assert_eq!(status, 404);
    let (status, result) = daemon
        .send(
            "POST",
            "/api/servers/human/tools/ask/call",
            Some(json!({"arguments": {"question": "Anyone?", "timeout_seconds": 1}})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(result["isError"], true);
    assert_eq!(text_of(&result), "Nobody answered within 1 seconds.");
    assert_eq!(
        console.next_of("question_ended").await["ending"],
        "timed_out"
    );
    assert_metrics(
        &daemon.metrics().await,
        &[
            (
                r#"switchboard_questions_total{kind="form",ending="accepted"}"#,
                1.0,
            ),
            (
                r#"switchboard_questions_total{kind="form",ending="timed_out"}"#,
                1.0,
            ),
            ("switchboard_questions_waiting", 0.0),
            ("switchboard_consoles_answering", 1.0),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_question_goes_to_the_console_only_while_a_person_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    daemon
        .add_everything_listing("trigger-elicitation-request")
        .await;

    // Nobody at a console: the server is declined at once.
    let (_, result) = daemon.call("trigger-elicitation-request", json!({})).await;
    assert!(text_of(&result).contains("declined"), "{result:#}");

    let mut console = Console::open(daemon.port).await;
    console.next_of("status").await;
    let call = daemon.post_in_background(
        "/api/servers/everything/tools/trigger-elicitation-request/call",
        json!({"arguments": {}}),
    );
    let asked = console.next_of("question_asked").await["question"].clone();
    assert_eq!(
        (&asked["server"], &asked["kind"]),
        (&json!("everything"), &json!("form"))
    );
    assert_eq!(asked["schema"]["required"], json!(["name"]));
    let id = asked["id"].as_str().unwrap();
    let (status, refused) = daemon
        .send(
            "POST",
            &format!("/api/questions/{id}"),
            Some(json!({"action": "accept", "content": {"integer": 500}})),
        )
        .await;
    assert_eq!(
        (status, &refused["error"]),
        (
            422,
            &json!("the answer does not fit the question: 'name' is required")
        )
    );
    let (status, _) = daemon
        .send(
            "POST",
            &format!("/api/questions/{id}"),
            Some(json!({"action": "accept", "content": {"name": "Ada Lovelace", "integer": 7, "titledMultipleSelectEnum": ["fish-2"]}})),
        )
        .await;
    assert_eq!(status, 204);
    let result = call.await.unwrap();
    let text = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("- Name: Ada Lovelace"), "{text}");
    assert!(text.contains("- Favorite Integer: 7"), "{text}");

    // A sampling request: the person writes the model's reply.
    let call = daemon.post_in_background(
        "/api/servers/everything/tools/trigger-sampling-request/call",
        json!({"arguments": {"prompt": "Say hello", "maxTokens": 40}}),
    );
    let asked = console.next_of("question_asked").await["question"].clone();
    assert_eq!(
        (
            &asked["kind"],
            &asked["system_prompt"],
            &asked["max_tokens"]
        ),
        (
            &json!("sampling"),
            &json!("You are a helpful test server."),
            &json!(40)
        )
    );
    assert!(
        asked["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("Say hello"),
        "{asked:#}"
    );
    let id = asked["id"].as_str().unwrap().to_owned();
    console
        .send(json!({"type": "answer", "id": id, "action": "accept", "content": {"text": "Hello from a person"}}))
        .await;
    let result = call.await.unwrap();
    let text = text_of(&result);
    assert!(
        text.contains("Hello from a person") && text.contains("\"model\": \"person\""),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_is_tested_without_being_stored() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    let (status, test) = daemon
        .send(
            "POST",
            "/api/test-connection",
            Some(json!({"command": "node", "args": [everything()]})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(test["connected"], true, "{test:#}");
    assert!(
        test["tools"].as_array().unwrap().contains(&json!("echo")),
        "{test:#}"
    );
    assert!(test["resources"].as_u64().unwrap() > 0, "{test:#}");
    assert!(
        test["server_info"]
            .as_str()
            .unwrap()
            .contains("mcp-servers/everything"),
        "{test:#}"
    );

    let (_, test) = daemon
        .send(
            "POST",
            "/api/test-connection",
            Some(json!({"id": "human", "url": "builtin:human"})),
        )
        .await;
    assert_eq!(
        test["tools"],
        json!(["ask", "confirm", "choose", "approve_plan", "request_file"]),
        "{test:#}"
    );

    // Nothing listens on port 1: an answer saying so, not an error.
    let (status, test) = daemon
        .send(
            "POST",
            "/api/test-connection",
            Some(json!({"url": "http://127.0.0.1:1/mcp"})),
        )
        .await;
    assert_eq!(
        (status, &test["connected"], &test["needs_auth"]),
        (200, &json!(false), &json!(false))
    );
    assert!(!test["error"].as_str().unwrap().is_empty(), "{test:#}");
    let (status, refused) = daemon
        .send(
            "POST",
            "/api/test-connection",
            Some(json!({"url": "gopher://x"})),
        )
        .await;
    assert_eq!(status, 400, "{refused}");

    let (_, servers) = daemon.send("GET", "/api/servers", None).await;
    assert_eq!(servers["servers"], json!([]), "a test stores nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_json_rpc_traffic_is_followed_live() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    daemon.add_everything_listing("echo").await;
    let following = tokio::spawn(collect_sse(
        format!("{}/api/servers/everything/traffic", daemon.base),
        |messages| {
            messages.iter().any(|m| {
                m["direction"] == "received"
                    && m["message"]["result"]["content"][0]["text"] == "Echo: inspect me"
            })
        },
    ));
    // The follower is in place once its stream is open; calls until then go unseen.
    let mut answered = false;
    for _ in 0..100 {
        let (_, result) = daemon.call("echo", json!({"message": "inspect me"})).await;
        assert_eq!(text_of(&result), "Echo: inspect me");
        if following.is_finished() {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered, "the call was never seen");
    let messages = following.await.unwrap();
    let sent = messages
        .iter()
        .find(|m| m["direction"] == "sent" && m["message"]["method"] == "tools/call")
        .expect("the call was seen going out");
    assert_eq!(sent["message"]["params"]["name"], "echo");
    assert!(sent["at_ms"].as_u64().unwrap() > 0);
    let (status, _) = daemon.send("GET", "/api/servers/nope/traffic", None).await;
    assert_eq!(status, 404);
}

/// With `serve --inspector-history`, a server's messages are kept while nobody watches, and
/// the inspector opened afterwards shows them first: here a call made before it was opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspector_opened_late_shows_the_kept_history_first() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), &["--inspector-history", "200"]).await;
    daemon.add_everything_listing("echo").await;
    let (_, result) = daemon
        .call("echo", json!({"message": "before anyone looked"}))
        .await;
    assert_eq!(text_of(&result), "Echo: before anyone looked");
    let messages = collect_sse(
        format!("{}/api/servers/everything/traffic", daemon.base),
        |messages| {
            messages.iter().any(|m| {
                m["direction"] == "received"
                    && m["message"]["result"]["content"][0]["text"] == "Echo: before anyone looked"
            })
        },
    )
    .await;
    let first = &messages[0];
    assert_eq!(
        first["direction"], "sent",
        "the history starts at the session's start: {first}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m["direction"] == "sent" && m["message"]["method"] == "tools/call"),
        "{messages:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_the_calling_client_cannot_answer_goes_to_a_person_at_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    daemon
        .add_everything_listing("trigger-elicitation-request")
        .await;
    // A client that declared no elicitation, calling through /mcp, with nobody at a console:
    // the server's question fails as before.
    let tool = "everything__trigger-elicitation-request";
    let alone = common::call_through_daemon_with(daemon.port, 1, tool, &[]).await;
    assert_eq!(alone["result"]["isError"], true, "{alone:#}");
    assert!(
        alone["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("does not support elicitation"),
        "{alone:#}"
    );

    // With a person at the console, the question goes to them.
    let mut console = Console::open(daemon.port).await;
    console.next_of("status").await;
    let port = daemon.port;
    let call =
        tokio::spawn(async move { common::call_through_daemon_with(port, 2, tool, &[]).await });
    let asked = console.next_of("question_asked").await["question"].clone();
    assert_eq!(asked["server"], "everything");
    console
        .send(json!({"type": "answer", "id": asked["id"], "action": "accept", "content": {"name": "Grace Hopper"}}))
        .await;
    let answered = call.await.unwrap();
    let text = answered["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("- Name: Grace Hopper"), "{answered:#}");
}

/// A daemon with server-everything (Streamable HTTP) added as `everything` and connected: the
/// daemon's data directory, the server and the daemon (dropped in the reverse order when bound
/// in this one).
async fn daemon_with_everything() -> (
    tempfile::TempDir,
    switchboard_fixtures::ServerEverything,
    Daemon,
) {
    let server = switchboard_fixtures::ServerEverything::start("streamableHttp");
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    let (status, _) = daemon
        .send(
            "POST",
            "/api/servers",
            Some(json!({"id": "everything", "url": server.url})),
        )
        .await;
    assert_eq!(status, 201);
    daemon.wait_for_state("everything", "connected").await;
    (dir, server, daemon)
}

/// `POST /api/servers/{id}/check` asks a server whether it still answers: a stopped
/// server-everything shows `reconnecting` with the reason in the check's own answer, and a call
/// of its tool through `/mcp` meanwhile names the server and its state (the tool stays listed,
/// it is not "unknown"); once the server is back, a check answers with it connected. A disabled
/// server is not checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_check_reconnects_at_once_and_says_how_it_is() {
    let (_dir, mut server, daemon) = daemon_with_everything().await;
    let (status, checked) = daemon
        .send("POST", "/api/servers/everything/check", None)
        .await;
    assert_eq!(status, 200, "{checked}");
    assert_eq!(checked["status"]["state"], "connected", "{checked}");

    server.stop();
    let (status, checked) = daemon
        .send("POST", "/api/servers/everything/check", None)
        .await;
    assert_eq!(status, 200, "{checked}");
    assert_ne!(checked["status"]["state"], "connected", "{checked}");
    assert!(
        checked["status"]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "the check says why: {checked}"
    );

    let (_, listed) = daemon.send("GET", "/api/tools", None).await;
    assert!(
        listed.to_string().contains("everything__echo"),
        "the down server's tools stay listed: {listed}"
    );
    let refused = common::call_through_daemon(daemon.port, 1, "everything__echo").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("everything") && message.contains("not connected"),
        "{refused}"
    );
    assert!(!message.contains("unknown tool"), "{refused}");
    assert_eq!(
        refused["error"]["data"]["server"], "everything",
        "{refused}"
    );
    assert!(refused["error"]["data"]["state"].is_string(), "{refused}");

    server.restart();
    let mut state = Value::Null;
    for _ in 0..10 {
        let (_, checked) = daemon
            .send("POST", "/api/servers/everything/check", None)
            .await;
        state = checked["status"]["state"].clone();
        if state == "connected" {
            break;
        }
    }
    assert_eq!(state, "connected");
    let answer = common::call_through_daemon(daemon.port, 2, "everything__echo").await;
    assert_eq!(text_of(&answer["result"]), "Echo: hi", "{answer}");

    let (status, _) = daemon
        .send(
            "PATCH",
            "/api/servers/everything",
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(status, 200);
    let (status, refused) = daemon
        .send("POST", "/api/servers/everything/check", None)
        .await;
    assert_eq!(status, 409, "{refused}");
}

/// A request of a client of the daemon's `/mcp` (2026-07-28, no session) for `method` on `name`
/// with `params`: the answer to it.
async fn mcp_request(port: u16, method: &str, name: &str, params: Value) -> Value {
    common::request_through_daemon(port, 1, method, name, params, &[]).await
}

/// A server that is not connected reads alike wherever a client meets it (docs/api.md, "Errors
/// on the wire"): `tools/call`, `prompts/get` and `resources/read` through `/mcp` are each
/// answered with JSON-RPC error -32603 naming the server and its state (`data`), and a call
/// through the admin API with 503, all saying "not connected".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_not_connected_is_the_same_error_on_every_method_and_on_the_admin_api() {
    let (_dir, mut server, daemon) = daemon_with_everything().await;
    let listed = mcp_request(daemon.port, "prompts/list", "", json!({})).await;
    let prompt = listed["result"]["prompts"][0]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("a prompt: {listed}"))
        .to_owned();
    let listed = mcp_request(daemon.port, "resources/list", "", json!({})).await;
    let resource = listed["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("a resource: {listed}"))
        .to_owned();

    server.stop();
    let (_, checked) = daemon
        .send("POST", "/api/servers/everything/check", None)
        .await;
    assert_ne!(checked["status"]["state"], "connected", "{checked}");
    let answers = [
        (
            "tools/call",
            common::call_through_daemon(daemon.port, 1, "everything__echo").await,
        ),
        (
            "prompts/get",
            mcp_request(daemon.port, "prompts/get", &prompt, json!({"name": prompt})).await,
        ),
        (
            "resources/read",
            mcp_request(
                daemon.port,
                "resources/read",
                &resource,
                json!({"uri": resource}),
            )
            .await,
        ),
    ];
    for (method, answer) in &answers {
        assert_eq!(answer["error"]["code"], -32603, "{method}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("not connected")),
            "{method}: {answer}"
        );
        assert_eq!(
            answer["error"]["data"]["server"], "everything",
            "{method}: {answer}"
        );
        assert!(
            answer["error"]["data"]["state"].is_string(),
            "{method}: {answer}"
        );
    }
    let (status, refused) = daemon.call("echo", json!({"message": "hi"})).await;
    assert_eq!(status, 503, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|m| m.contains("not connected")),
        "{refused}"
    );
}

/// The value of the sample `name` (labels included) in OpenMetrics `text`.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
}

/// A `human` question nobody is there to see is answered at once that no one is available
/// (not after its 300 s), unless the server is `builtin:human?wait=always`; a console that
/// stops answering its WebSocket's heartbeat (here: one that never reads again) stops counting
/// as there within the silence limit, and questions are again answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_nobody_is_there_to_see_is_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path()).await;
    for (id, url) in [
        ("human", "builtin:human"),
        ("patient", "builtin:human?wait=always"),
    ] {
        let (status, answer) = daemon
            .send("POST", "/api/servers", Some(json!({"id": id, "url": url})))
            .await;
        assert_eq!(status, 201, "{answer}");
        daemon.wait_for_state(id, "connected").await;
    }
    let confirm = |server: &'static str| {
        let path = format!("/api/servers/{server}/tools/confirm/call");
        let daemon = &daemon;
        async move {
            let body = json!({"arguments": {"question": "Deploy?", "timeout_seconds": 2}});
            let (status, result) = daemon.send("POST", &path, Some(body)).await;
            assert_eq!(status, 200, "{result}");
            text_of(&result)
        }
    };
    assert!(
        confirm("human")
            .await
            .starts_with("No one is available to answer"),
        "answered at once with no console open"
    );
    assert_eq!(
        confirm("patient").await,
        "Nobody answered within 2 seconds.",
        "a server configured to wait waits"
    );

    let mut console = Console::open(daemon.port).await;
    assert_eq!(console.next().await["questions"], json!([]));
    assert_eq!(
        metric(&daemon.metrics().await, "switchboard_consoles_answering"),
        Some(1.0)
    );
    // The console never reads again, so it answers no ping.
    let mut gone = false;
    for _ in 0..120 {
        if metric(&daemon.metrics().await, "switchboard_consoles_answering") == Some(0.0) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(gone, "a silent console stops counting within 60 s");
    assert!(
        confirm("human")
            .await
            .starts_with("No one is available to answer")
    );
    drop(console);
}
