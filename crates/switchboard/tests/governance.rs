//! What each client may see and do.
//!
//! Endpoints: a named set of servers and tools served at `/mcp/e/{name}`, `/sse/e/{name}` and
//! through `switchboard stdio --endpoint`, whose clients can list, search, turn on and call
//! nothing outside it, on every path a call can take (the short paths included), and whose keys
//! reach that endpoint only. Tool overrides: what an admin says of a tool in place of its server
//! (name, description, annotations, arguments fixed and hidden), on every path too.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::{CallContext, ConnectOptions, Connection, connect};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// A running `switchboard serve`; killed on drop.
struct Daemon {
    _child: tokio::process::Child,
    base: String,
}

impl Daemon {
    /// Starts the daemon on `data_dir` and waits (up to 30 s) until `servers` servers are
    /// connected.
    async fn start(data_dir: &Path, servers: usize) -> Self {
        Self::start_with(data_dir, servers, &[]).await
    }

    /// As [`Daemon::start`], with `options` for `serve`.
    async fn start_with(data_dir: &Path, servers: usize, options: &[&str]) -> Self {
        let port = common::free_port();
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
        for _ in 0..600 {
            if let Ok(response) = reqwest::get(format!("{}/api/status", daemon.base)).await
                && let Ok(status) = response.json::<Value>().await
                && status["servers"].as_array().is_some_and(|all| {
                    all.iter().filter(|s| s["state"] == "connected").count() == servers
                })
            {
                return daemon;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the daemon did not connect {servers} servers within 30 s");
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `PATCH path` with `body`.
    async fn patch(&self, path: &str, body: Value) -> reqwest::Result<reqwest::Response> {
        reqwest::Client::new()
            .patch(self.url(path))
            .json(&body)
            .send()
            .await
    }

    /// `PUT /api/endpoints/{name}` with `definition`; the status and body.
    async fn define(&self, name: &str, definition: Value) -> (u16, Value) {
        let response = reqwest::Client::new()
            .put(self.url(&format!("/api/endpoints/{name}")))
            .json(&definition)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

/// Switchboard's own rmcp-based client (2026-07-28, stateless) at `url`.
async fn client(url: &str) -> Connection {
    let def = ServerDefinition::new(
        ServerId::new("switchboard").unwrap(),
        TransportSpec::from_url(url, vec![]).unwrap(),
    );
    connect(&def, None, &ConnectOptions::new("test"))
        .await
        .expect("the client connects to Switchboard")
}

/// Opens a 2025-11-25 session at `url` (initialize, then initialized); its id.
async fn open_session(url: &str) -> String {
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "endpoints-test", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = rpc(url, Some(&session), None, "notifications/initialized", None).await;
    assert_eq!(initialized, Value::Null);
    session
}

/// Sends `method` (a request when `id` is given) at `url`, in `session` if given; the answer
/// (from a JSON or an SSE body), or `null` for a notification.
async fn rpc(
    url: &str,
    session: Option<&str>,
    id: Option<u64>,
    method: &str,
    params: Option<Value>,
) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "method": method});
    if let Some(id) = id {
        message["id"] = id.into();
    }
    if let Some(params) = params {
        message["params"] = params;
    }
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.unwrap();
    let body = response.text().await.unwrap();
    let Some(id) = id else { return Value::Null };
    body.lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim).or(Some(line)))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {method} in: {body}"))
}

/// Calls `tool` with `arguments` at `url` (in `session`, if given) as request `id`; the answer.
async fn call_tool_in(
    url: &str,
    session: Option<&str>,
    id: u64,
    tool: &str,
    arguments: Value,
) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    rpc(url, session, Some(id), "tools/call", Some(params)).await
}

/// Asserts that `answer` is the error a call of `tool` outside what its client may reach gets:
/// the tool is unknown there.
fn assert_unknown_tool(answer: &Value, tool: &str) {
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("unknown tool '{tool}'")),
        "{answer}"
    );
}

/// The names in a list result's `key` array.
fn names(result: &Value, key: &str, field: &str) -> Vec<String> {
    let mut names: Vec<String> = result[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {result}"))
        .iter()
        .filter_map(|item| item[field].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// The text of a call's result.
fn text_of(result: &switchboard_upstream::rmcp_model::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap().to_string()
}

/// Two fixture servers: `alpha` is stateless (2026-07-28: calls to it take the stateless short
/// path) and `beta` holds sessions (a session's calls to it take the session short path);
/// the endpoint `support` includes alpha's `echo` and beta's `add`.
async fn two_servers_and_an_endpoint()
-> (Daemon, tempfile::TempDir, [transports::RunningFixture; 2]) {
    let alpha = transports::streamable_http(Era::Modern).await;
    let beta = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    for (id, fixture) in [("alpha", &alpha), ("beta", &beta)] {
        let added = common::run(dir.path(), &["server", "add", id, &fixture.url]).await;
        assert!(added.status.success(), "{}", common::text(&added));
    }
    let daemon = Daemon::start(dir.path(), 2).await;
    let (status, defined) = daemon
        .define(
            "support",
            json!({"description": "support agents", "servers": {"alpha": ["echo"], "beta": ["add"]}}),
        )
        .await;
    assert_eq!(status, 201, "{defined}");
    assert_eq!(defined["servers"]["alpha"], json!(["echo"]));
    (daemon, dir, [alpha, beta])
}

// Multi-threaded: the fixtures run in this process.
#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_client_of_an_endpoint_lists_and_calls_only_what_it_includes() {
    let (daemon, _dir, _fixtures) = two_servers_and_an_endpoint().await;
    let inside = client(&daemon.url("/mcp/e/support")).await;
    let everything = client(&daemon.url("/mcp")).await;
    let upstream = &inside.upstream;
    assert_eq!(upstream.protocol_version().as_deref(), Some("2026-07-28"));

    let mut tools: Vec<String> = upstream
        .list_tools()
        .await
        .unwrap()
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    tools.sort();
    assert_eq!(tools, ["alpha__echo", "beta__add"]);
    assert!(
        everything.upstream.list_tools().await.unwrap().len() > 2,
        "the workspace's own door lists every tool"
    );

    let echoed = upstream
        .call_tool(
            "alpha__echo",
            json!({"message": "inside"}).as_object().cloned(),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text_of(&echoed).contains("inside"), "{}", text_of(&echoed));
    // A tool of an included server that the endpoint leaves out, and a server it leaves out:
    // unknown, on the short path a stateless call of a stateless server takes too.
    for outside in ["alpha__add", "beta__echo", "alpha__whoami"] {
        let refused = upstream
            .call_tool(
                outside,
                json!({"a": 1, "b": 2, "message": "x"}).as_object().cloned(),
                &CallContext::default(),
            )
            .await;
        let error = format!("{refused:?}");
        assert!(
            error.contains(&format!("unknown tool '{outside}'")),
            "{outside}: {error}"
        );
    }

    // The admin API's reads for a model API, of the endpoint's tools only.
    let exported: Value = reqwest::get(daemon.url("/api/tools?endpoint=support&format=openai"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let exported = exported.to_string();
    assert!(
        exported.contains("alpha__echo") && exported.contains("beta__add"),
        "{exported}"
    );
    assert!(!exported.contains("alpha__add"), "{exported}");
    let found: Value = reqwest::get(daemon.url("/api/tools/search?endpoint=support&q=echo"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let found: Vec<&str> = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|hit| hit["name"].as_str())
        .collect();
    assert_eq!(found, ["alpha__echo"]);
    let unknown = reqwest::get(daemon.url("/api/tools?endpoint=nowhere"))
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);

    // Prompts and resources of included servers only (beta's, too: it is included).
    let mut prompts: Vec<String> = upstream
        .list_prompts()
        .await
        .unwrap()
        .iter()
        .map(|p| p.name.clone())
        .collect();
    prompts.sort();
    assert_eq!(prompts, ["alpha__greet", "beta__greet"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_of_an_endpoint_cannot_reach_outside_it_nor_move_to_another_door() {
    let (daemon, _dir, [alpha, _beta]) = two_servers_and_an_endpoint().await;
    // Only alpha's echo and nothing of beta: resources and prompts of beta go too.
    let (status, _) = daemon
        .define("narrow", json!({"servers": {"alpha": ["echo"]}}))
        .await;
    assert_eq!(status, 201);
    let url = daemon.url("/mcp/e/narrow");
    let session = open_session(&url).await;
    let s = Some(session.as_str());

    let tools = rpc(&url, s, Some(1), "tools/list", None).await;
    assert_eq!(names(&tools["result"], "tools", "name"), ["alpha__echo"]);
    let prompts = rpc(&url, s, Some(2), "prompts/list", None).await;
    assert_eq!(
        names(&prompts["result"], "prompts", "name"),
        ["alpha__greet"]
    );
    let mut every: Vec<String> = client(&daemon.url("/mcp"))
        .await
        .upstream
        .list_resources()
        .await
        .unwrap()
        .iter()
        .map(|resource| resource.uri.clone())
        .collect();
    every.sort();
    assert_eq!(every.len(), 2, "{every:?}");
    let (alpha_greeting, beta_greeting) = match every.iter().find(|uri| uri.contains("alpha")) {
        Some(alpha) => (
            alpha.clone(),
            every.iter().find(|uri| *uri != alpha).unwrap().clone(),
        ),
        None => panic!("alpha's resource is named by its prefix: {every:?}"),
    };
    let resources = rpc(&url, s, Some(3), "resources/list", None).await;
    assert_eq!(
        names(&resources["result"], "resources", "uri"),
        [alpha_greeting],
        "no resource of beta"
    );
    let beta_greeting = beta_greeting.as_str();
    let read = rpc(
        &url,
        s,
        Some(4),
        "resources/read",
        Some(json!({"uri": beta_greeting})),
    )
    .await;
    assert!(
        read["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no connected server has a resource")),
        "{read}"
    );
    let got = rpc(
        &url,
        s,
        Some(5),
        "prompts/get",
        Some(json!({"name": "beta__greet", "arguments": {"name": "x"}})),
    )
    .await;
    assert!(
        got["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown prompt")),
        "{got}"
    );
    let subscribed = rpc(
        &url,
        s,
        Some(6),
        "resources/subscribe",
        Some(json!({"uri": beta_greeting})),
    )
    .await;
    assert!(subscribed["error"].is_object(), "{subscribed}");

    // Calls: the included tool works; one outside is unknown on the full path too.
    let echoed = call_tool_in(
        &url,
        s,
        7,
        "alpha__echo",
        json!({"message": "in a session"}),
    )
    .await;
    assert!(echoed.to_string().contains("in a session"), "{echoed}");
    let before = alpha.state.last_call_id.lock().unwrap().clone();
    let refused = call_tool_in(&url, s, 8, "alpha__add", json!({"a": 1, "b": 2})).await;
    assert_unknown_tool(&refused, "alpha__add");
    assert_eq!(
        *alpha.state.last_call_id.lock().unwrap(),
        before,
        "the refused call never reached the server"
    );

    // The session is the endpoint's: at the workspace's own door it is no session, for a
    // request, its stream or its end; at its own door it goes on.
    let elsewhere = |method: reqwest::Method| {
        reqwest::Client::new()
            .request(method, daemon.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
            .send()
    };
    for method in [
        reqwest::Method::POST,
        reqwest::Method::GET,
        reqwest::Method::DELETE,
    ] {
        let refused = elsewhere(method.clone()).await.unwrap();
        assert_eq!(refused.status(), 404, "{method}");
        let said = refused.text().await.unwrap();
        assert!(said.contains("opened at another"), "{method}: {said}");
    }
    let still = rpc(&url, s, Some(10), "tools/list", None).await;
    assert_eq!(names(&still["result"], "tools", "name"), ["alpha__echo"]);
    // Bound from its `initialize`: a session whose first request goes elsewhere is refused too.
    let fresh = open_session(&url).await;
    let moved = reqwest::Client::new()
        .post(daemon.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &fresh)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), 404);

    // An endpoint that is not defined is not served.
    let missing = reqwest::Client::new()
        .post(daemon.url("/mcp/e/nowhere"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    // Redefined: the session's list follows at once.
    let (status, _) = daemon
        .define("narrow", json!({"servers": {"alpha": ["echo", "add"]}}))
        .await;
    assert_eq!(status, 200);
    let tools = rpc(&url, s, Some(11), "tools/list", None).await;
    assert_eq!(
        names(&tools["result"], "tools", "name"),
        ["alpha__add", "alpha__echo"]
    );
    // Removed: its sessions reach nothing, and it is not served.
    let removed = reqwest::Client::new()
        .delete(daemon.url("/api/endpoints/narrow"))
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 204);
    let gone = reqwest::Client::new()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 13, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404, "a removed endpoint's door is closed");
}

/// A session's call of a tool on a server with sessions goes straight into Switchboard's
/// session with it (the session short path); a tool outside the endpoint must be refused
/// there too, before anything is sent.
#[tokio::test(flavor = "multi_thread")]
async fn the_session_short_path_refuses_a_tool_outside_the_endpoint() {
    let (daemon, _dir, [_alpha, beta]) = two_servers_and_an_endpoint().await;
    let url = daemon.url("/mcp/e/support");
    let session = open_session(&url).await;
    let s = Some(session.as_str());
    let added = call_tool_in(&url, s, 1, "beta__add", json!({"a": 2, "b": 3})).await;
    assert!(added["result"].is_object(), "{added}");
    let before = beta.state.last_call_id.lock().unwrap().clone();
    assert_ne!(before, None, "beta saw the call");
    let refused = call_tool_in(&url, s, 2, "beta__echo", json!({"message": "x"})).await;
    assert_unknown_tool(&refused, "beta__echo");
    assert_eq!(*beta.state.last_call_id.lock().unwrap(), before);
}

/// In the deferred view, search finds only the endpoint's tools, `list_servers` lists only its
/// servers, and neither `set_active` nor `describe_tools` can name what it leaves out.
#[tokio::test(flavor = "multi_thread")]
async fn search_and_activation_stay_inside_the_endpoint() {
    let (daemon, _dir, _fixtures) = two_servers_and_an_endpoint().await;
    let url = daemon.url("/mcp/e/support?tools=deferred");
    let session = open_session(&url).await;
    let s = Some(session.as_str());
    let meta_call = async |id: u64, name: &str, arguments: Value| {
        rpc(
            &url,
            s,
            Some(id),
            "tools/call",
            Some(json!({"name": name, "arguments": arguments})),
        )
        .await
    };
    let found = meta_call(1, "search_tools", json!({"query": "echo the message back"})).await;
    let found = found.to_string();
    assert!(found.contains("alpha__echo"), "{found}");
    assert!(!found.contains("beta__echo"), "{found}");
    let found = meta_call(
        2,
        "search_tools",
        json!({"query": "whoami working directory"}),
    )
    .await;
    assert!(!found.to_string().contains("alpha__whoami"), "{found}");

    let servers = meta_call(3, "list_servers", json!({})).await;
    let listed: Value =
        serde_json::from_str(servers["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let tools: Vec<(String, u64)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["server"].as_str().unwrap().to_owned(),
                s["tools"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tools, [("alpha".into(), 1), ("beta".into(), 1)]);

    let turned = meta_call(
        4,
        "set_active",
        json!({"tools": ["beta__echo"], "active": true}),
    )
    .await;
    assert!(
        turned["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no tool is named 'beta__echo'")),
        "{turned}"
    );
    let turned = meta_call(
        5,
        "set_active",
        json!({"servers": ["gamma"], "active": true}),
    )
    .await;
    assert!(turned["error"].is_object(), "{turned}");
    let turned = meta_call(
        5,
        "set_active",
        json!({"tools": ["alpha__echo"], "active": true}),
    )
    .await;
    assert!(turned["result"].is_object(), "{turned}");
    let called = meta_call(
        6,
        "call_tool",
        json!({"name": "beta__echo", "arguments": {"message": "x"}}),
    )
    .await;
    assert!(
        called.to_string().contains("unknown tool 'beta__echo'"),
        "{called}"
    );
    let described = meta_call(7, "describe_tools", json!({"names": ["beta__echo"]})).await;
    assert!(
        described.to_string().contains("unknown tool 'beta__echo'")
            && !described.to_string().contains("inputSchema"),
        "{described}"
    );
    let described = meta_call(8, "describe_tools", json!({"names": ["alpha__echo"]})).await;
    assert!(described.to_string().contains("inputSchema"), "{described}");
}

/// An HTTP+SSE client opens its session at the endpoint's stream and posts to the endpoint's
/// message path; posting that session's messages elsewhere finds no session.
#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_sse_client_of_an_endpoint_sees_only_what_it_includes() {
    let (daemon, _dir, _fixtures) = two_servers_and_an_endpoint().await;
    let inside = client(&daemon.url("/sse/e/support")).await;
    let mut tools: Vec<String> = inside
        .upstream
        .list_tools()
        .await
        .unwrap()
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    tools.sort();
    assert_eq!(tools, ["alpha__echo", "beta__add"]);
    let refused = inside
        .upstream
        .call_tool(
            "beta__echo",
            json!({"message": "x"}).as_object().cloned(),
            &CallContext::default(),
        )
        .await;
    assert!(
        format!("{refused:?}").contains("unknown tool"),
        "{refused:?}"
    );

    // The stream names the endpoint's message path; the plain one does not take its session.
    let stream = reqwest::get(daemon.url("/sse/e/support")).await.unwrap();
    assert_eq!(stream.status(), 200);
    let mut body = stream.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("sessionId=") {
        use futures::StreamExt;
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("the endpoint event comes")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let path = seen
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap()
        .trim()
        .to_owned();
    assert!(path.starts_with("/message/e/support?sessionId="), "{path}");
    let elsewhere = path.replace("/message/e/support", "/message");
    let posted = reqwest::Client::new()
        .post(daemon.url(&elsewhere))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 404);
    let missing = reqwest::get(daemon.url("/sse/e/nowhere")).await.unwrap();
    assert_eq!(missing.status(), 404);
}

/// `switchboard endpoint` defines endpoints and issues keys in the store; a running daemon
/// follows, and `switchboard stdio --endpoint` serves only what the endpoint includes. A key
/// of the endpoint reaches its doors and nothing else, until revoked.
#[tokio::test(flavor = "multi_thread")]
async fn the_cli_defines_an_endpoint_its_keys_reach_only_it_and_stdio_serves_it() {
    let (daemon, dir, _fixtures) = two_servers_and_an_endpoint().await;
    let set = common::run(
        dir.path(),
        &[
            "endpoint",
            "set",
            "ops",
            "--server",
            "alpha:whoami,echo",
            "--description",
            "operations",
        ],
    )
    .await;
    assert!(set.status.success(), "{}", common::text(&set));
    let listed = common::run(dir.path(), &["endpoint", "list", "--json"]).await;
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        listed.as_array().unwrap().len(),
        2,
        "support and ops: {listed}"
    );
    let issued = common::run(dir.path(), &["endpoint", "add-key", "ops"]).await;
    assert!(issued.status.success(), "{}", common::text(&issued));
    let key = String::from_utf8(issued.stdout).unwrap().trim().to_owned();
    assert!(key.starts_with("sbe_"), "{key}");

    // The daemon follows the store (its --store-check), within seconds.
    let with_key = |path: &str| {
        reqwest::Client::new()
            .post(daemon.url(path))
            .bearer_auth(&key)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "key-test", "version": "1"}}}),
            )
            .send()
    };
    let mut reached = 0;
    for _ in 0..200 {
        reached = with_key("/mcp/e/ops").await.unwrap().status().as_u16();
        if reached == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reached, 200, "the key reaches its endpoint");
    for elsewhere in ["/mcp", "/mcp/e/support"] {
        let refused = with_key(elsewhere).await.unwrap();
        assert_eq!(refused.status(), 403, "{elsewhere}");
        let said = refused.text().await.unwrap();
        assert!(said.contains("reaches endpoint 'ops' only"), "{said}");
    }
    let admin = reqwest::Client::new()
        .get(daemon.url("/api/servers"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(admin.status(), 403, "no admin API with an endpoint's key");

    // stdio, in front of the daemon, through the endpoint.
    let mut bridge = common::command(dir.path(), &["stdio", "--endpoint", "ops"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut to_bridge = bridge.stdin.take().unwrap();
    let mut from_bridge = tokio::io::BufReader::new(bridge.stdout.take().unwrap()).lines();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bridge-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        to_bridge
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let listed = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), from_bridge.next_line())
            .await
            .expect("the bridge answers")
            .unwrap()
            .expect("the bridge's stdout stays open");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message;
        }
    };
    assert_eq!(
        names(&listed["result"], "tools", "name"),
        ["alpha__echo", "alpha__whoami"]
    );
    drop(to_bridge);
    let _ = bridge.wait().await;

    // Revoked: the key is no endpoint's any more (on a listener that asks for keys, it is
    // refused; see the gateway's own tests).
    let id = common::run(dir.path(), &["endpoint", "list", "--json"]).await;
    let id: Value = serde_json::from_slice(&id.stdout).unwrap();
    let id = id
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ops")
        .and_then(|e| e["keys"][0]["id"].as_str())
        .unwrap()
        .to_owned();
    let revoked = common::run(dir.path(), &["endpoint", "revoke-key", "ops", &id]).await;
    assert!(revoked.status.success(), "{}", common::text(&revoked));
    let mut confined = 403;
    for _ in 0..200 {
        confined = with_key("/mcp").await.unwrap().status().as_u16();
        if confined != 403 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        confined, 200,
        "once revoked, the key confines nothing: a loopback listener serves this machine"
    );
}

/// `tools/list` of a stateless client at `url`, by exposed name.
async fn listed(url: &str) -> std::collections::BTreeMap<String, Value> {
    client(url)
        .await
        .upstream
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| (tool.name.to_string(), serde_json::to_value(&tool).unwrap()))
        .collect()
}

/// [`listed`] at `url` once it lists `name` (or after 5 s, for the caller to say what it lists).
async fn listed_once(url: &str, name: &str) -> std::collections::BTreeMap<String, Value> {
    let mut tools = listed(url).await;
    for _ in 0..100 {
        if tools.contains_key(name) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        tools = listed(url).await;
    }
    tools
}

/// An admin's override of a tool changes what every client lists and searches (its name,
/// description and annotations, its schema without the fixed arguments) and what every call
/// sends its server (the fixed values, whatever the client sent), on the full path and on both
/// short paths; a malformed one is refused with the reason, and a cleared one gives the
/// server's tool back.
#[tokio::test(flavor = "multi_thread")]
async fn an_override_renames_redescribes_and_fixes_arguments_on_every_path() {
    let (daemon, dir, _fixtures) = two_servers_and_an_endpoint().await;
    let refused = daemon
        .patch(
            "/api/servers/alpha/tools/echo",
            json!({"override": {"annotations": {"dangerous": true}}}),
        )
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("'dangerous' is not a tool annotation")
    );
    let set = daemon
        .patch(
            "/api/servers/alpha/tools/echo",
            json!({"override": {"name": "say", "description": "Says the approved words",
            "annotations": {"destructiveHint": true},
            "fixed_arguments": {"message": "approved words"}}}),
        )
        .await
        .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());

    let mcp = daemon.url("/mcp");
    let tools = listed_once(&mcp, "alpha__say").await;
    assert!(!tools.contains_key("alpha__echo"), "{:?}", tools.keys());
    let say = &tools["alpha__say"];
    assert_eq!(say["description"], "Says the approved words");
    assert_eq!(say["annotations"]["destructiveHint"], true);
    assert!(
        say["inputSchema"]["properties"].get("message").is_none(),
        "the fixed argument is hidden: {say}"
    );

    // A stateless call (the stateless short path would take it, but the fixed argument is the
    // full path's to set): the server gets the fixed value, whatever the client sent.
    let stateless = client(&mcp).await;
    for sent in [json!({}), json!({"message": "something else"})] {
        let said = stateless
            .upstream
            .call_tool(
                "alpha__say",
                sent.as_object().cloned(),
                &CallContext::default(),
            )
            .await
            .unwrap();
        let said = text_of(&said);
        assert!(
            said.contains("approved words") && !said.contains("something else"),
            "{said}"
        );
    }
    // A session's call, on the full path.
    let session = open_session(&mcp).await;
    let called = call_tool_in(
        &mcp,
        Some(&session),
        1,
        "alpha__say",
        json!({"message": "x"}),
    )
    .await;
    assert!(called.to_string().contains("approved words"), "{called}");
    // Search reads the admin's words.
    let found: Value = reqwest::get(daemon.url("/api/tools/search?q=approved+words"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(found["tools"][0]["name"], "alpha__say", "{found}");

    // The CLI, on a server with sessions (whose session calls the session short path would
    // take): `b` is fixed at 40.
    let cli = common::run(
        dir.path(),
        &[
            "server",
            "override-tool",
            "beta",
            "add",
            "--fixed",
            "b=40",
            "--description",
            "Adds forty",
        ],
    )
    .await;
    assert!(cli.status.success(), "{}", common::text(&cli));
    let shown = common::run(dir.path(), &["server", "show", "beta"]).await;
    assert!(
        common::text(&shown).contains("override:     add:"),
        "{}",
        common::text(&shown)
    );
    let mut sum = Value::Null;
    for id in 2..200 {
        sum = call_tool_in(
            &mcp,
            Some(&session),
            id,
            "beta__add",
            json!({"a": 2, "b": 1}),
        )
        .await;
        if sum.to_string().contains("42") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(sum.to_string().contains("\"42\""), "{sum}");

    // Cleared: the server's tool again.
    let cleared = daemon
        .patch("/api/servers/alpha/tools/echo", json!({"override": null}))
        .await
        .unwrap();
    assert_eq!(cleared.status(), 200);
    let tools = listed_once(&mcp, "alpha__echo").await;
    assert!(
        tools.contains_key("alpha__echo") && !tools.contains_key("alpha__say"),
        "{:?}",
        tools.keys()
    );

    // Search notes, through the API: the words an operator adds find the tool, its settings
    // show them, clients never see them, and notes over the limit are refused.
    let noted = daemon
        .patch(
            "/api/servers/alpha/tools/echo",
            json!({"search_notes": "parrot; mimic what I say"}),
        )
        .await
        .unwrap();
    assert_eq!(noted.status(), 200);
    let mut found = Value::Null;
    for _ in 0..100 {
        found = common::get_json(&daemon.url("/api/tools/search?q=parrot&limit=1")).await;
        if found["tools"][0]["name"] == "alpha__echo" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(found["tools"][0]["name"], "alpha__echo", "{found:#}");
    let listing = common::get_json(&daemon.url("/api/servers/alpha/tools")).await;
    let echo = listing["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|tool| tool["name"] == "echo"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        echo["settings"]["search_notes"], "parrot; mimic what I say",
        "{listing:#}"
    );
    let tools = listed_once(&mcp, "alpha__echo").await;
    assert!(
        !serde_json::to_string(&tools["alpha__echo"])
            .unwrap()
            .contains("parrot"),
        "notes are for search only"
    );
    let too_long = daemon
        .patch(
            "/api/servers/alpha/tools/echo",
            json!({"search_notes": "x".repeat(2_001)}),
        )
        .await
        .unwrap();
    assert_eq!(too_long.status(), 400);
}

/// The questions waiting on the daemon's desk for `server`, waiting (up to 10 s) for one.
async fn waiting_question(daemon: &Daemon, server: &str) -> Value {
    for _ in 0..200 {
        let listed: Value = reqwest::get(daemon.url("/api/questions"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(question) = listed["questions"]
            .as_array()
            .and_then(|all| all.iter().find(|q| q["server"] == server))
        {
            return question.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no question from {server} within 10 s");
}

/// `POST /api/questions/{id}` with `answer`; the status.
async fn answer(daemon: &Daemon, id: &str, answer: Value) -> u16 {
    reqwest::Client::new()
        .post(daemon.url(&format!("/api/questions/{id}")))
        .json(&answer)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A call of a tool that needs approval waits on the desk, where a person sees the server, the
/// tool and the exact arguments; nothing reaches the server before they approve, an approval
/// naming other arguments does not fit, and a refusal or the time running out refuses the call.
/// A server that approves destructive tools holds every tool annotated so (here by an
/// override) the same way.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_needs_approval_waits_for_a_person_who_sees_its_exact_arguments() {
    let (daemon, dir, [alpha, _beta]) = two_servers_and_an_endpoint().await;
    let set = daemon
        .patch("/api/servers/alpha/tools/echo", json!({"approval": true}))
        .await
        .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());
    let set = daemon
        .patch("/api/servers/alpha", json!({"approval_timeout_secs": 2}))
        .await
        .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());
    let mcp = daemon.url("/mcp");
    let stateless = client(&mcp).await;
    let call = |message: &'static str| {
        let upstream = stateless.upstream.clone();
        tokio::spawn(async move {
            upstream
                .call_tool(
                    "alpha__echo",
                    json!({"message": message}).as_object().cloned(),
                    &CallContext::default(),
                )
                .await
        })
    };

    // Approved, after an approval of other arguments was refused as not fitting.
    let before = alpha.state.last_call_id.lock().unwrap().clone();
    let approved = call("ship it");
    let question = waiting_question(&daemon, "alpha").await;
    let asked = question["message"].as_str().unwrap();
    assert!(
        asked.contains("ship it") && asked.contains("alpha__echo"),
        "{question}"
    );
    let digest = question["schema"]["properties"]["arguments_sha256"]["enum"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(digest.len(), 64);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        *alpha.state.last_call_id.lock().unwrap(),
        before,
        "nothing reaches the server before a person approves"
    );
    let id = question["id"].as_str().unwrap();
    let other = json!({"action": "accept", "content": {"arguments_sha256": "0".repeat(64)}});
    assert_eq!(answer(&daemon, id, other).await, 422);
    let right = json!({"action": "accept", "content": {"arguments_sha256": digest}});
    assert_eq!(answer(&daemon, id, right).await, 204);
    let said = approved.await.unwrap().unwrap();
    assert!(text_of(&said).contains("ship it"), "{}", text_of(&said));

    // Refused.
    let refused = call("drop the tables");
    let question = waiting_question(&daemon, "alpha").await;
    let id = question["id"].as_str().unwrap();
    assert_eq!(answer(&daemon, id, json!({"action": "decline"})).await, 204);
    let error = format!("{:?}", refused.await.unwrap());
    assert!(
        error.contains("a person refused this call of tool 'alpha__echo'"),
        "{error}"
    );

    // Nobody answers: refused after the server's wait, and the question is gone.
    let error = format!("{:?}", call("later").await.unwrap());
    assert!(
        error.contains("nobody approved this call of tool 'alpha__echo' within 2 s"),
        "{error}"
    );
    let left: Value = reqwest::get(daemon.url("/api/questions"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(left["questions"], json!([]));

    // Destructive tools, on a server with sessions: beta's `add`, annotated destructive by an
    // override, waits too (its session call is not taken by the short path).
    let cli = common::run(
        dir.path(),
        &["server", "set-approval", "beta", "--destructive"],
    )
    .await;
    assert!(cli.status.success(), "{}", common::text(&cli));
    let set = daemon
        .patch(
            "/api/servers/beta/tools/add",
            json!({"override": {"annotations": {"destructiveHint": true}}}),
        )
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let session = open_session(&mcp).await;
    let held = tokio::spawn({
        let mcp = mcp.clone();
        async move {
            let mut last = Value::Null;
            for id in 1..100 {
                last = call_tool_in(
                    &mcp,
                    Some(&session),
                    id,
                    "beta__add",
                    json!({"a": 1, "b": 2}),
                )
                .await;
                // Until the daemon read the CLI's change, the call goes through.
                if last["error"].is_object() {
                    return last;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            last
        }
    });
    let question = waiting_question(&daemon, "beta").await;
    assert_eq!(question["tool"], "add");
    let id = question["id"].as_str().unwrap();
    assert_eq!(answer(&daemon, id, json!({"action": "cancel"})).await, 204);
    let error = held.await.unwrap();
    assert_eq!(error["error"]["data"]["approval"], "refused", "{error}");

    // Each decision is in the audit log, with the digest approved; the calls refused are
    // there as refused, with why.
    let decisions = audit(&daemon, "kind=approval&server=alpha").await;
    let outcomes: Vec<&str> = decisions
        .iter()
        .map(|record| record["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["timed_out", "refused", "approved"],
        "{decisions:?}"
    );
    assert_eq!(decisions[2]["detail"]["arguments_sha256"], digest.as_str());
    assert_eq!(decisions[2]["tool"], "echo");
    let refused = audit(&daemon, "kind=call&outcome=refused").await;
    let reasons: Vec<&str> = refused
        .iter()
        .map(|record| record["detail"]["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons[0].contains("a person refused this call of tool 'beta__add'")
            && reasons[1].contains("nobody approved")
            && reasons[2].contains("a person refused"),
        "{reasons:?}"
    );
    let ran = audit(&daemon, "kind=call&server=alpha&outcome=ok").await;
    assert_eq!(
        ran.len(),
        1,
        "only the approved call reached alpha: {ran:?}"
    );
}

/// The audit log's records matching `query` (a query string), newest first.
async fn audit(daemon: &Daemon, query: &str) -> Vec<Value> {
    let response = reqwest::get(daemon.url(&format!("/api/audit?{query}")))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let page: Value = response.json().await.unwrap();
    page["records"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_call_and_change_is_in_the_audit_log_with_who_where_and_how_it_ended() {
    let (daemon, dir, _fixtures) = two_servers_and_an_endpoint().await;
    // The stateless short path, at the workspace's door.
    let stateless = client(&daemon.url("/mcp")).await;
    let said = stateless
        .upstream
        .call_tool(
            "alpha__echo",
            json!({"message": "one"}).as_object().cloned(),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text_of(&said).contains("one"));
    // The session short path, at the endpoint's door.
    let endpoint = daemon.url("/mcp/e/support");
    let session = open_session(&endpoint).await;
    let added = call_tool_in(
        &endpoint,
        Some(&session),
        1,
        "beta__add",
        json!({"a": 2, "b": 3}),
    )
    .await;
    assert!(added["result"].is_object(), "{added}");
    // The full path (a fixed argument sends calls there), recorded with the arguments the
    // server gets.
    let set = daemon
        .patch(
            "/api/servers/alpha/tools/echo",
            json!({"override": {"fixed_arguments": {"message": "fixed"}}}),
        )
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let full = call_tool_in(
        &daemon.url("/mcp"),
        Some(&open_session(&daemon.url("/mcp")).await),
        2,
        "alpha__echo",
        json!({}),
    )
    .await;
    assert!(full.to_string().contains("fixed"), "{full}");
    // The admin API's call, as the console's Try makes it.
    let tried = reqwest::Client::new()
        .post(daemon.url("/api/servers/beta/tools/add/call"))
        .json(&json!({"arguments": {"a": 1, "b": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(tried.status(), 200);
    // A change made on the command line, straight to the store.
    let cli = common::run(dir.path(), &["server", "set-prefix", "beta", "b2"]).await;
    assert!(cli.status.success(), "{}", common::text(&cli));

    let calls = audit(&daemon, "kind=call").await;
    assert_eq!(calls.len(), 4, "{calls:#?}");
    let digest = |arguments: Value| switchboard_hub::arguments_digest(arguments.as_object());
    let (api, full, endpoint_call, stateless_call) = (&calls[0], &calls[1], &calls[2], &calls[3]);
    assert_eq!(
        (
            stateless_call["door"].as_str(),
            stateless_call["server"].as_str()
        ),
        (Some("mcp"), Some("alpha"))
    );
    assert_eq!(stateless_call["tool"], "echo");
    assert_eq!(stateless_call["detail"]["called_as"], "alpha__echo");
    assert_eq!(stateless_call["outcome"], "ok");
    assert_eq!(stateless_call["actor"], "operator");
    assert_eq!(
        stateless_call["arguments"]["sha256"],
        digest(json!({"message": "one"}))
    );
    assert!(stateless_call["duration_ms"].is_u64());
    assert!(stateless_call["endpoint"].is_null());
    assert_eq!(endpoint_call["endpoint"], "support");
    assert_eq!(endpoint_call["server"], "beta");
    assert!(
        endpoint_call["client"]
            .as_str()
            .unwrap()
            .starts_with("endpoints-test ("),
        "the client's own name: {endpoint_call}"
    );
    assert_eq!(
        full["arguments"]["sha256"],
        digest(json!({"message": "fixed"})),
        "the arguments as the server got them"
    );
    assert_eq!(
        (api["door"].as_str(), api["server"].as_str()),
        (Some("api"), Some("beta"))
    );
    // No argument is kept by default: only its digest.
    assert!(!calls.iter().any(|c| c.to_string().contains("\"one\"")));

    // A check changes nothing: it is not recorded as a change.
    let checked = reqwest::Client::new()
        .post(daemon.url("/api/servers/alpha/check"))
        .send()
        .await
        .unwrap();
    assert!(checked.status().is_success());
    let changes = audit(&daemon, "kind=change").await;
    assert!(
        !changes.iter().any(|c| c["detail"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/check"))),
        "{changes:?}"
    );
    // The daemon writes its records in batches and the command line its own at once, so the
    // two writers' records are found by what they are, not by their places.
    let cli_change = changes
        .iter()
        .find(|c| c["door"] == "cli")
        .unwrap_or_else(|| panic!("the command line's change: {changes:#?}"));
    assert_eq!(cli_change["detail"]["command"], "server set-prefix");
    assert_eq!(cli_change["outcome"], "ok");
    assert!(
        !cli_change.to_string().contains("b2"),
        "a command's values are not kept: {cli_change}"
    );
    let patched = changes
        .iter()
        .find(|c| c["detail"]["method"] == "PATCH")
        .unwrap_or_else(|| panic!("the API's change: {changes:#?}"));
    assert_eq!(patched["detail"]["path"], "/api/servers/alpha/tools/echo");
    assert_eq!(patched["server"], "alpha");
    assert!(
        !patched.to_string().contains("fixed"),
        "no body is kept: {patched}"
    );
    assert!(
        changes
            .iter()
            .any(|c| c["detail"]["path"] == "/api/endpoints/support"),
        "{changes:?}"
    );

    // Pages: newest first, each page's `next` the next page's `before`; filters combine.
    let mut seen = Vec::new();
    let mut before = String::new();
    loop {
        let page: Value =
            reqwest::get(daemon.url(&format!("/api/audit?kind=call&limit=1{before}")))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
        seen.extend(
            page["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].clone()),
        );
        match page["next"].as_i64() {
            Some(next) => before = format!("&before={next}"),
            None => break,
        }
        assert!(seen.len() <= 4, "paging ends");
    }
    let ids: Vec<Value> = calls.iter().map(|r| r["id"].clone()).collect();
    // The last page may be full with nothing after it: at most one empty page more.
    assert_eq!(seen, ids);
    assert_eq!(
        audit(&daemon, "kind=call&server=beta&endpoint=support")
            .await
            .len(),
        1
    );

    // The export: the same records, one JSON object per line.
    let export = reqwest::get(daemon.url("/api/audit/export?kind=call"))
        .await
        .unwrap();
    assert_eq!(export.headers()["content-type"], "application/x-ndjson");
    let lines: Vec<Value> = export
        .text()
        .await
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines, calls);

    // A query the log cannot answer is refused with the reason.
    for bad in ["kind=login", "limit=0", "limit=5000", "colour=red"] {
        let refused = reqwest::get(daemon.url(&format!("/api/audit?{bad}")))
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "{bad}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_log_keeps_redacted_arguments_when_asked_and_is_not_there_when_off() {
    let fixture = transports::streamable_http(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let added = common::run(dir.path(), &["server", "add", "alpha", &fixture.url]).await;
    assert!(added.status.success(), "{}", common::text(&added));
    let secret = "ghp_0123456789abcdefghij0123456789abcdef";
    let message = format!("deploy with {secret} and tell ada@example.org");
    {
        let daemon = Daemon::start_with(dir.path(), 1, &["--audit", "redacted"]).await;
        let stateless = client(&daemon.url("/mcp")).await;
        stateless
            .upstream
            .call_tool(
                "alpha__echo",
                json!({"message": message}).as_object().cloned(),
                &CallContext::default(),
            )
            .await
            .unwrap();
        let calls = audit(&daemon, "kind=call").await;
        let kept = calls[0]["arguments"]["message"].as_str().unwrap();
        assert_eq!(
            kept,
            "deploy with [redacted:github_token] and tell [redacted:email]"
        );
    }
    let daemon = Daemon::start_with(dir.path(), 1, &["--audit", "off"]).await;
    let off = reqwest::get(daemon.url("/api/audit")).await.unwrap();
    assert_eq!(off.status(), 404);
    assert!(off.text().await.unwrap().contains("--audit off"));
    for file in std::fs::read_dir(dir.path()).unwrap() {
        let file = file.unwrap().path();
        if file.to_string_lossy().contains("switchboard.db") {
            let stored = std::fs::read(&file).unwrap();
            assert!(
                !stored.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "the secret is in {}",
                file.display()
            );
        }
    }
}

/// The tools listed at `url` (a stateless client's `tools/list`), by name.
async fn tools_at(url: &str) -> std::collections::BTreeMap<String, Value> {
    let listed = client(url).await.upstream.list_tools().await.unwrap();
    listed
        .into_iter()
        .map(|tool| (tool.name.to_string(), serde_json::to_value(&tool).unwrap()))
        .collect()
}

/// `GET /api/servers/{server}/definitions`, once it lists `count` changed tools (up to 10 s).
async fn changed_definitions(daemon: &Daemon, server: &str, count: usize) -> Vec<Value> {
    let mut changed = Vec::new();
    for _ in 0..200 {
        changed = reqwest::get(daemon.url(&format!("/api/servers/{server}/definitions")))
            .await
            .unwrap()
            .json::<Vec<Value>>()
            .await
            .unwrap();
        if changed.len() == count {
            return changed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{server} never listed {count} changed definitions: {changed:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_whose_definition_changed_is_held_or_warned_of_until_an_admin_accepts_it() {
    let (daemon, dir, [alpha, beta]) = two_servers_and_an_endpoint().await;
    let set = daemon
        .patch("/api/servers/beta", json!({"definition_changes": "hold"}))
        .await
        .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());
    let mcp = daemon.url("/mcp");
    assert!(tools_at(&mcp).await.contains_key("beta__add"));
    assert!(changed_definitions(&daemon, "beta", 0).await.is_empty());

    // Both servers change `add` under the same name: beta says its list changed (its
    // `add_tool` does), alpha (stateless) is listed again by a check.
    for fixture in [&alpha, &beta] {
        fixture
            .state
            .rug_pull
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let told = reqwest::Client::new()
        .post(daemon.url("/api/servers/beta/tools/add_tool/call"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(told.status(), 200);
    let checked = reqwest::Client::new()
        .post(daemon.url("/api/servers/alpha/check"))
        .send()
        .await
        .unwrap();
    assert!(checked.status().is_success());
    // beta holds it: not listed, not found, not called.
    let held = changed_definitions(&daemon, "beta", 1).await;
    assert_eq!(held[0]["tool"], "add");
    assert_eq!(held[0]["held"], true);
    assert_eq!(
        held[0]["approved"]["definition"]["description"],
        "Adds two numbers"
    );
    assert!(
        held[0]["current"]["description"]
            .as_str()
            .unwrap()
            .contains("id_rsa"),
        "{held:?}"
    );
    let listed = tools_at(&mcp).await;
    assert!(!listed.contains_key("beta__add"), "held: {listed:?}");
    assert!(listed.contains_key("beta__echo"), "the rest is served");
    let session = open_session(&mcp).await;
    let refused = call_tool_in(
        &mcp,
        Some(&session),
        1,
        "beta__add",
        json!({"a": 1, "b": 2}),
    )
    .await;
    assert_unknown_tool(&refused, "beta__add");
    // alpha warns: served as it is now, and shown as changed.
    let warned = changed_definitions(&daemon, "alpha", 1).await;
    assert_eq!(warned[0]["held"], false);
    assert!(
        listed["alpha__add"]["description"]
            .as_str()
            .unwrap()
            .contains("id_rsa")
    );

    // An acceptance names the definition the person saw: another is refused (409).
    let accept = |server: &str, body: Value| {
        reqwest::Client::new()
            .post(daemon.url(&format!("/api/servers/{server}/definitions/add/accept")))
            .json(&body)
            .send()
    };
    let stale = accept("beta", json!({"sha256": "0".repeat(64)}))
        .await
        .unwrap();
    assert_eq!(stale.status(), 409);
    let sha256 = held[0]["current_sha256"].as_str().unwrap();
    let accepted = accept("beta", json!({"sha256": sha256})).await.unwrap();
    assert_eq!(accepted.status(), 204, "{}", accepted.text().await.unwrap());
    assert!(changed_definitions(&daemon, "beta", 0).await.is_empty());
    let listed = tools_at(&mcp).await;
    assert!(
        listed["beta__add"]["description"]
            .as_str()
            .unwrap()
            .contains("id_rsa"),
        "accepted, it is served as it is now"
    );
    let again = accept("beta", json!({})).await.unwrap();
    assert_eq!(again.status(), 404, "nothing waits any more");

    // The CLI shows what changed, and accepts alpha's; the daemon reads the acceptance from
    // the store.
    let shown = common::run(dir.path(), &["server", "definitions", "alpha"]).await;
    assert!(shown.status.success(), "{}", common::text(&shown));
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains("add: approved")
            && shown.contains("- \"Adds two numbers\"")
            && shown.contains("id_rsa"),
        "{shown}"
    );
    let cli = common::run(dir.path(), &["server", "accept-definition", "alpha", "add"]).await;
    assert!(cli.status.success(), "{}", common::text(&cli));
    assert!(changed_definitions(&daemon, "alpha", 0).await.is_empty());

    // Each detection and decision is in the audit log.
    let decisions = audit(&daemon, "kind=definition").await;
    let outcomes: Vec<(&str, &str)> = decisions
        .iter()
        .map(|r| {
            (
                r["server"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(outcomes.contains(&("beta", "held")), "{outcomes:?}");
    assert!(outcomes.contains(&("alpha", "warned")), "{outcomes:?}");
    assert!(outcomes.contains(&("beta", "accepted")), "{outcomes:?}");
    assert!(outcomes.contains(&("alpha", "accepted")), "{outcomes:?}");
}

/// A guardrail webhook on loopback: it refuses a call whose message says "forbidden",
/// rewrites one that says "rewrite me", withholds a result that says "withhold", and lets
/// everything else through; it hangs while `hang` is set. It keeps every body it was sent.
struct PolicyWebhook {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    hang: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

async fn policy_webhook() -> PolicyWebhook {
    use std::sync::atomic::Ordering;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let hang = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (kept, hanging) = (seen.clone(), hang.clone());
    let app = axum::Router::new().route(
        "/check",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let (kept, hanging) = (kept.clone(), hanging.clone());
            async move {
                kept.lock().unwrap().push(body.clone());
                if hanging.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                let message = body["arguments"]["message"].as_str().unwrap_or_default();
                let verdict = match body["phase"].as_str() {
                    Some("before") if message.contains("forbidden") => {
                        json!({"action": "refuse", "reason": "no forbidden words"})
                    }
                    Some("before") if message.contains("rewrite me") => {
                        json!({"action": "rewrite", "arguments": {"message": "rewritten"}})
                    }
                    Some("after") if body["result"].to_string().contains("withhold") => {
                        json!({"action": "refuse", "reason": "not for the model"})
                    }
                    _ => json!({"action": "allow"}),
                };
                axum::Json(verdict)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/check", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    PolicyWebhook { url, seen, hang }
}

#[tokio::test(flavor = "multi_thread")]
async fn guardrails_mask_check_and_rewrite_calls_and_a_failed_webhook_refuses_or_lets_through() {
    let (daemon, dir, _fixtures) = two_servers_and_an_endpoint().await;
    let webhook = policy_webhook().await;
    let cli = common::run(
        dir.path(),
        &[
            "server",
            "set-guardrails",
            "alpha",
            "--redact-arguments",
            "secrets",
            "--redact-results",
            "personal",
            "--webhook",
            &webhook.url,
            "--webhook-timeout",
            "500",
        ],
    )
    .await;
    assert!(cli.status.success(), "{}", common::text(&cli));
    let stateless = client(&daemon.url("/mcp")).await;
    let echo = |message: String| {
        let upstream = stateless.upstream.clone();
        async move {
            upstream
                .call_tool(
                    "alpha__echo",
                    json!({"message": message}).as_object().cloned(),
                    &CallContext::default(),
                )
                .await
        }
    };
    // Until the daemon reads the CLI's change, calls pass unguarded.
    let secret = "ghp_0123456789abcdefghij0123456789abcdef";
    let mut said = String::new();
    for _ in 0..100 {
        said = text_of(&echo(format!("deploy with {secret}")).await.unwrap());
        if !said.contains(secret) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        said.contains("deploy with [redacted:github_token]"),
        "the server got the argument masked: {said}"
    );
    let before = webhook
        .seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|b| b["phase"] == "before")
        .cloned()
        .unwrap();
    assert_eq!(before["server"], "alpha");
    assert_eq!(before["tool"], "echo");
    assert_eq!(before["called_as"], "alpha__echo");
    assert_eq!(before["actor"], "operator");
    assert!(
        !before.to_string().contains(secret),
        "nor does the webhook see it: {before}"
    );

    // Results: personal data masked before the client sees it.
    let said = text_of(&echo("write to ada@example.org".into()).await.unwrap());
    assert!(said.contains("write to [redacted:email]"), "{said}");

    // The webhook refuses, rewrites, withholds.
    let refused = format!("{:?}", echo("say a forbidden word".into()).await);
    assert!(
        refused.contains("a guardrail refused this call of tool 'alpha__echo': no forbidden words"),
        "{refused}"
    );
    let said = text_of(&echo("rewrite me please".into()).await.unwrap());
    assert!(
        said.contains("rewritten") && !said.contains("please"),
        "{said}"
    );
    let withheld = echo("withhold this".into()).await.unwrap();
    assert_eq!(withheld.is_error, Some(true));
    assert!(
        text_of(&withheld).contains("The result was withheld")
            && !text_of(&withheld).contains("withhold this\""),
        "{}",
        text_of(&withheld)
    );

    // A webhook that does not answer in time refuses the call (fail closed) ...
    webhook
        .hang
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let failed = format!("{:?}", echo("anything".into()).await);
    assert!(
        failed.contains("the guardrail webhook of tool 'alpha__echo' failed")
            && failed.contains("no answer within 500 ms"),
        "{failed}"
    );
    // ... or lets it through (fail open).
    let set = daemon
        .patch(
            "/api/servers/alpha",
            json!({"guardrails": {"webhook": {"url": webhook.url, "timeout_ms": 200, "on_failure": "allow"}}}),
        )
        .await
        .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());
    let said = text_of(&echo("still served".into()).await.unwrap());
    assert!(said.contains("still served"), "{said}");

    // The refusals are in the audit log; a bad webhook URL is refused with the reason.
    let refused = audit(&daemon, "kind=call&outcome=refused&server=alpha").await;
    assert!(
        refused.iter().any(|r| r["detail"]["reason"]
            .as_str()
            .unwrap()
            .contains("no forbidden words")),
        "{refused:?}"
    );
    let bad = daemon
        .patch(
            "/api/servers/alpha",
            json!({"guardrails": {"webhook": {"url": "file:///etc/passwd"}}}),
        )
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("http(s) URL"));
}
