//! Bridging protocol eras: input requests crossing between 2026-07-28 and session-era clients and
//! servers, and each client served over a link of its own era (a session-era client of a
//! stateless-only server bridged over the stateless link).

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::TransportSpec;
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::CallContext;

use crate::support::{
    Daemon, add, answer_to, client, everything, open_session, send_in_session, serving, text,
    tools_call_2026, typescript_sdk_server,
};

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
