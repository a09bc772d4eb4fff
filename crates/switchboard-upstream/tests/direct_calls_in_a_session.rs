//! Calls sent directly into the session rmcp's client holds with a server (the front door's
//! short path for session clients): they answer the server's questions through the caller's
//! responder, are cancelled at the server when their caller cancels (and only then: a closed
//! stream is no cancellation in a session), and are not sent into a session the server says
//! expired.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::rmcp_model::{
    ErrorData, InputRequest, JsonRpcMessage, ServerJsonRpcMessage, ServerResult,
};
use switchboard_upstream::{
    CallContext, ConnectOptions, Connection, DirectReply, InputPolicy, InputResponder, Upstream,
    connect,
};
use tokio_util::sync::CancellationToken;

async fn connected(url: &str, relay_input: bool) -> Connection {
    let mut def = ServerDefinition::new(
        ServerId::new("fixture").unwrap(),
        TransportSpec::from_url(url, vec![]).unwrap(),
    );
    def.timeouts.request = Duration::from_secs(10);
    def.timeouts.tool_call = Duration::from_secs(10);
    let mut options = ConnectOptions::new("test");
    options.relay_input = relay_input;
    let connection = connect(&def, None, &options).await.unwrap();
    assert!(connection.upstream.calls_directly() && connection.upstream.has_sessions());
    connection
}

/// A legacy client's `tools/call` of `tool` with id 7, as the front door hands it over.
fn call(tool: &str, arguments: Value, meta: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}})
}

async fn send(upstream: &Upstream, request: Value, input: Arc<dyn InputResponder>) -> DirectReply {
    send_cancellable(upstream, request, input, CancellationToken::new()).await
}

async fn send_cancellable(
    upstream: &Upstream,
    request: Value,
    input: Arc<dyn InputResponder>,
    cancelled: CancellationToken,
) -> DirectReply {
    upstream
        .call_tool_direct(
            serde_json::from_value(request).unwrap(),
            input,
            cancelled,
            None,
            false,
            None,
            &tracing::Span::none(),
        )
        .await
        .expect("the call is sent")
}

/// The response of a direct reply, reading past notifications.
async fn response(reply: DirectReply) -> ServerJsonRpcMessage {
    match reply {
        DirectReply::Message(message) => *message,
        DirectReply::Stream(mut messages) => loop {
            match messages.next().await {
                Some(Ok(message @ (JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)))) => {
                    break message;
                }
                Some(Ok(_)) => continue,
                other => panic!("the stream ended without a response: {other:?}"),
            }
        },
        DirectReply::NotSent => panic!("the call was not sent"),
    }
}

fn text(message: &ServerJsonRpcMessage) -> String {
    let value = serde_json::to_value(message).unwrap();
    assert_eq!(value["id"], 7, "the caller's id comes back: {value}");
    value["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {value}"))
        .to_owned()
}

fn last_call_id(fixture: &transports::RunningFixture) -> Option<Value> {
    fixture.state.last_call_id.lock().unwrap().clone()
}

/// Answers every elicitation with `{"response": "from the caller"}`.
struct Answering;

impl InputResponder for Answering {
    fn answer(
        &self,
        _key: Option<&str>,
        request: InputRequest,
    ) -> BoxFuture<'static, Result<Value, ErrorData>> {
        let answer = match request {
            InputRequest::Elicitation(_) => {
                Ok(json!({"action": "accept", "content": {"response": "from the caller"}}))
            }
            _ => Err(ErrorData::invalid_params("not this one", None)),
        };
        Box::pin(std::future::ready(answer))
    }
}

#[tokio::test]
async fn a_servers_question_on_a_direct_calls_stream_is_answered_by_the_callers_responder() {
    let fixture = transports::conformance_http(true).await;
    let connection = connected(&fixture.url, true).await;
    let request = call("test_elicitation", json!({"message": "Who?"}), json!({}));
    let reply = send(&connection.upstream, request, Arc::new(Answering)).await;
    let answer = text(&response(reply).await);
    assert!(
        answer.contains("action=accept") && answer.contains("from the caller"),
        "{answer}"
    );
    connection.session.close().await;
}

/// Sends `slow` for `ms` with a progress token and returns the reply stream after its first
/// report, checking that the server saw Switchboard's id and the caller its own token.
async fn slow_call_under_way(
    fixture: &transports::RunningFixture,
    upstream: &Upstream,
    ms: u64,
    cancelled: CancellationToken,
) -> DirectReply {
    let request = call("slow", json!({"ms": ms}), json!({"progressToken": "p"}));
    let reply = send_cancellable(upstream, request, Arc::new(InputPolicy::Decline), cancelled);
    let DirectReply::Stream(mut messages) = reply.await else {
        panic!("a progress report first");
    };
    let first = serde_json::to_value(messages.next().await.unwrap().unwrap()).unwrap();
    assert_eq!(
        first["params"]["progressToken"], "p",
        "the caller's token: {first}"
    );
    let seen = last_call_id(fixture).unwrap();
    assert!(
        seen.as_str()
            .is_some_and(|id| id.starts_with("switchboard-direct-")),
        "the server saw Switchboard's id, not the caller's: {seen}"
    );
    DirectReply::Stream(messages)
}

/// Whether the fixture's cancelled calls reach `count` within 5 s.
async fn cancelled_calls_reach(fixture: &transports::RunningFixture, count: usize) -> bool {
    for _ in 0..250 {
        if fixture.state.cancelled_calls.load(Ordering::SeqCst) == count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn a_direct_call_is_cancelled_at_the_server_when_its_caller_cancels_not_when_it_leaves() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let connection = connected(&fixture.url, true).await;
    let upstream = &connection.upstream;

    // Left without cancelling: the server's call runs to its end.
    let left = slow_call_under_way(&fixture, upstream, 500, CancellationToken::new()).await;
    drop(left);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(fixture.state.cancelled_calls.load(Ordering::SeqCst), 0);

    // Cancelled, then left: the server's call is cancelled.
    let cancelled = CancellationToken::new();
    let reply = slow_call_under_way(&fixture, upstream, 30000, cancelled.clone()).await;
    cancelled.cancel();
    drop(reply);
    assert!(
        cancelled_calls_reach(&fixture, 1).await,
        "the server's call was cancelled within 5 s"
    );

    // Dropped before its reply: cancelled as well.
    let request = call("slow", json!({"ms": 30000, "quiet": true}), json!({}));
    let sending = send(upstream, request, Arc::new(InputPolicy::Decline));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), sending)
            .await
            .is_err(),
        "a silent call has no reply yet"
    );
    assert!(
        cancelled_calls_reach(&fixture, 2).await,
        "the server's call was cancelled within 5 s"
    );
    connection.session.close().await;
}

#[tokio::test]
async fn a_direct_call_into_an_expired_session_is_not_sent_and_the_next_goes_to_the_new_one() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let connection = connected(&fixture.url, true).await;
    let upstream = &connection.upstream;
    let echo = || call("echo", json!({"message": "hi"}), json!({}));
    assert_eq!(
        text(&response(send(upstream, echo(), Arc::new(InputPolicy::Decline)).await).await),
        "hi"
    );
    fixture
        .state
        .expire_session_once
        .store(true, Ordering::SeqCst);
    let before = last_call_id(&fixture);
    let reply = send(upstream, echo(), Arc::new(InputPolicy::Decline)).await;
    assert!(
        matches!(reply, DirectReply::NotSent),
        "not sent after a 404"
    );
    assert_eq!(last_call_id(&fixture), before, "the server never saw it");
    // The same call through rmcp's client, which opens a new session; direct calls follow.
    let result = upstream
        .call_tool(
            "echo",
            json!({"message": "through rmcp"}).as_object().cloned(),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "through rmcp");
    let answer = response(send(upstream, echo(), Arc::new(InputPolicy::Decline)).await).await;
    assert_eq!(text(&answer), "hi");
    let JsonRpcMessage::Response(answer) = answer else {
        unreachable!()
    };
    assert!(matches!(answer.result, ServerResult::CallToolResult(_)));
    connection.session.close().await;
}
