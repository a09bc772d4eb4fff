//! Cancellation reaching the server: a call the client cancels or walks away from is cancelled at
//! its server, a client that stops reading a streamed call is given up on, and a session client
//! whose connection closes before the first message does not cancel its call.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::TransportSpec;
use switchboard_fixtures::{Era, transports};

use crate::support::{
    Daemon, add, call_and_cancel, call_in_session, client, initialize, last_call_id, open_session,
    post_in_session, reaches_the_server, saw_a_cancellation, serving, tools_call_2026,
};

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
