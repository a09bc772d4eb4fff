//! The 2024-11-05 HTTP+SSE transport at `/sse`: its clients get the same server `/mcp` serves.

use serde_json::json;
use switchboard_core::TransportSpec;
use switchboard_upstream::CallContext;

use crate::support::{Daemon, add, args, client, stdio_fixture, text};

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
