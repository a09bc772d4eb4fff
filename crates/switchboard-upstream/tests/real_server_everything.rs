//! Against the real `@modelcontextprotocol/server-everything` (npm), over stdio, HTTP+SSE and
//! Streamable HTTP: list, call, read, get a prompt, receive progress, cancel.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Duration;

use switchboard_core::{DetectedTransport, ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::{ServerEverything, server_everything_entry};
use switchboard_upstream::{CallContext, ConnectOptions, Connection, UpstreamError, connect};
use tokio_util::sync::CancellationToken;

fn http(url: &str) -> ServerDefinition {
    ServerDefinition::new(
        ServerId::new("everything").unwrap(),
        TransportSpec::from_url(url, vec![]).unwrap(),
    )
}

fn stdio() -> ServerDefinition {
    let entry = server_everything_entry().display().to_string();
    ServerDefinition::new(
        ServerId::new("everything").unwrap(),
        TransportSpec::stdio("node", vec![entry], vec![], None).unwrap(),
    )
}

fn args(value: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    value.as_object().cloned()
}

async fn exercise(connection: Connection) {
    let upstream = &connection.upstream;
    let tools = upstream.list_tools().await.unwrap();
    for name in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(tools.iter().any(|t| t.name == name), "{name} is listed");
    }

    let echo = upstream
        .call_tool(
            "echo",
            args(serde_json::json!({"message": "hello"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(echo.content[0].as_text().unwrap().text, "Echo: hello");

    let sum = upstream
        .call_tool(
            "get-sum",
            args(serde_json::json!({"a": 2, "b": 40})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(sum.content[0].as_text().unwrap().text.contains("42"));

    let resources = upstream.list_resources().await.unwrap();
    let first = resources
        .first()
        .expect("server-everything lists resources");
    let read = upstream
        .read_resource(&first.uri, &CallContext::default())
        .await
        .unwrap();
    assert!(!read.contents.is_empty());

    let prompt = upstream
        .get_prompt("simple-prompt", None, &CallContext::default())
        .await
        .unwrap();
    assert!(!prompt.messages.is_empty());

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    upstream
        .call_tool(
            "trigger-long-running-operation",
            args(serde_json::json!({"duration": 1, "steps": 3})),
            &CallContext {
                progress: Some(tx),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut progress = Vec::new();
    while let Ok(report) = rx.try_recv() {
        progress.push(report.progress);
    }
    assert!(
        !progress.is_empty(),
        "progress notifications reached the caller"
    );

    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = std::time::Instant::now();
    let error = upstream
        .call_tool(
            "trigger-long-running-operation",
            args(serde_json::json!({"duration": 30, "steps": 30})),
            &CallContext {
                cancel,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(error, UpstreamError::Cancelled), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // The session survives a cancelled call.
    let again = upstream
        .call_tool(
            "echo",
            args(serde_json::json!({"message": "still here"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(again.content[0].as_text().unwrap().text, "Echo: still here");
    connection.session.close().await;
}

#[tokio::test]
async fn server_everything_over_stdio() {
    let connection = connect(&stdio(), None, &ConnectOptions::new("test"))
        .await
        .unwrap();
    exercise(connection).await;
}

#[tokio::test]
async fn server_everything_over_streamable_http() {
    let server = ServerEverything::start("streamableHttp");
    let connection = connect(&http(&server.url), None, &ConnectOptions::new("test"))
        .await
        .unwrap();
    assert_eq!(connection.detected, Some(DetectedTransport::StreamableHttp));
    exercise(connection).await;
}

#[tokio::test]
async fn server_everything_over_legacy_sse() {
    let server = ServerEverything::start("sse");
    let connection = connect(&http(&server.url), None, &ConnectOptions::new("test"))
        .await
        .unwrap();
    assert_eq!(connection.detected, Some(DetectedTransport::HttpSse));
    exercise(connection).await;
}

/// A TypeScript-SDK server that restarts answers the old session id with 400 "No valid session
/// ID provided" (not the spec's 404). The next call opens a new session and goes through, the
/// first time it is tried.
#[tokio::test]
async fn a_restarted_server_that_forgets_the_session_answers_the_next_call() {
    let mut server = ServerEverything::start("streamableHttp");
    let connection = connect(&http(&server.url), None, &ConnectOptions::new("test"))
        .await
        .unwrap();
    let echo = |message: &'static str| {
        let upstream = connection.upstream.clone();
        async move {
            upstream
                .call_tool(
                    "echo",
                    args(serde_json::json!({ "message": message })),
                    &CallContext::default(),
                )
                .await
        }
    };
    echo("before").await.unwrap();
    server.restart();
    // The next call comes a moment later, as calls after a deployment's restart do (one sent
    // in the instant the old process's connections close may meet a closing connection, and a
    // call that may have been sent is never sent twice).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = echo("after").await.expect("the call after the restart");
    assert_eq!(after.content[0].as_text().unwrap().text, "Echo: after");
    connection.session.close().await;
}
