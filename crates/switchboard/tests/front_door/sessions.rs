//! Session lifetime at the front door: the `--max-sessions` bound and DELETE, `--session-idle`
//! ending quiet sessions, sessions going on after the daemon restarts, and a session that only
//! calls straight through living while it calls.

use std::time::Duration;

use serde_json::json;
use switchboard_fixtures::{Era, transports};

use crate::support::{
    Daemon, add, answer_to, call_in_session, initialize, last_call_id, open_session,
    post_in_session, reaches_the_server, saw_a_cancellation, send_in_session, serving,
    tools_call_2026,
};

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
