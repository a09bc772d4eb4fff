//! Session calls on the short path (relayed straight into the session Switchboard holds with the
//! server): the same answers as the full path, rate limits charged once for a call handed to the
//! full path, input requests on the call's own stream, and roots asked on the server's GET stream
//! reaching the client whose call it is.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_fixtures::{Era, transports};

use crate::common::switchboard;
use crate::support::{
    Daemon, add, call_in_session, call_in_session_with, last_call_id, ok, open_session,
    post_in_session, reaches_the_server, saw_a_cancellation, send_in_session, serving,
};

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
