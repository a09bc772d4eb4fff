//! Real MCP clients at the front door: Switchboard's own rmcp-based connector (which speaks
//! 2026-07-28 to it) and the official TypeScript SDK client (2025-11-25 sessions) reach the real
//! `server-everything` through `/mcp` and `switchboard stdio`, and each client is answered with its
//! own roots.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::TransportSpec;
use switchboard_upstream::CallContext;

use crate::support::{Daemon, add, args, call_and_cancel, client, everything, text};

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
