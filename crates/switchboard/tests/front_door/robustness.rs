//! What a hostile client, a failing server or an unsafe listen address cannot do to the front door:
//! malformed and foreign requests get clear errors and change nothing, a server dying mid-call
//! fails that call only, and the daemon does not serve beyond loopback without API keys.

use std::process::Command;

use serde_json::json;
use switchboard_core::TransportSpec;
use switchboard_upstream::CallContext;

use crate::support::{Daemon, add, args, client, stdio_fixture, text};

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
