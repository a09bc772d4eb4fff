//! Resumable call streams (SEP-1699): a dropped stream resumed with `Last-Event-ID`, a long stream
//! keeping only its latest events, a stream the server ends early ending early for the clients
//! that come back, and a call answered at once answered as JSON instead, one running on primed at once.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_fixtures::{Era, transports};

use crate::support::{
    Daemon, add, last_call_id, open_session, open_session_at, send_in_session, serving,
    typescript_sdk_server,
};

/// A session call's stream on the short path is resumable as rmcp's are (SEP-1699): primed with
/// an event id and a retry delay, its events numbered; a client whose connection drops mid-call
/// resumes it with `Last-Event-ID` and gets the rest, result included, each event once. Once
/// the call is over (its stream sent whole), resuming from the same event, or from the priming
/// event, gives the same events as following it did.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_client_resumes_a_dropped_call_stream_with_last_event_id() {
    let (daemon, _fixture, _dir) =
        serving(transports::streamable_http(Era::Legacy).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "fx__slow", "arguments": {"ms": 1000}, "_meta": {"progressToken": "p"}}});
    let mut response = send_in_session(&url, &session, &call).await;
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    // Two progress reports, and whole events only (a chunk may end inside one).
    while text.matches("notifications/progress").count() < 2 || !text.ends_with("\n\n") {
        let chunk = response.chunk().await.unwrap().expect("more events");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let first = text.split("\n\n").next().unwrap_or_default();
    assert!(
        first.contains("id: ") && first.contains("retry: ") && first.contains("data: "),
        "a priming event first: {text:?}"
    );
    let last_id = text
        .lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .next_back()
        .unwrap()
        .to_owned();
    let seen = text.matches("notifications/progress").count();
    drop(response);

    let resume = |after: String| {
        let (url, session) = (url.clone(), session.clone());
        async move {
            let resumed = resume_stream(&url, &session, &after).await;
            assert_eq!(resumed.status(), 200);
            tokio::time::timeout(Duration::from_secs(10), resumed.text())
                .await
                .expect("the resumed stream ends with the call")
                .unwrap()
        }
    };
    let rest = resume(last_id.clone()).await;
    // The events of `text` that arrived whole.
    let events = |text: &str| -> Vec<String> {
        let whole = &text[..text.rfind("\n\n").map_or(0, |end| end + 2)];
        whole
            .split("\n\n")
            .filter(|event| event.contains("data: {"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        events(&resume(last_id).await),
        events(&rest),
        "resumed again, whole"
    );
    let priming_id = first
        .strip_prefix("id: ")
        .and_then(|f| f.lines().next())
        .unwrap();
    let everything = [events(&text), events(&rest)].concat();
    assert_eq!(events(&resume(priming_id.to_owned()).await), everything);
    let messages: Vec<Value> = rest
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect();
    let (result, progress) = messages.split_last().expect("messages");
    assert_eq!(result["id"], 9, "{rest}");
    assert_eq!(result["result"]["content"][0]["text"], "done", "{rest}");
    assert_eq!(seen + progress.len(), 20, "every report once: {text}{rest}");
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "p"));
}

/// A session call's stream keeps only its latest events for resumption (about 1 MiB besides the
/// newest), so a server that streams for as long as its call runs does not grow the daemon's
/// memory for that time: a client reading along gets every event, and one that comes back for
/// events no longer kept is refused with 410 and a JSON-RPC error, not handed the stream with a
/// gap; from a kept event on it gets the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_call_stream_keeps_its_latest_events_and_refuses_resuming_from_older_ones() {
    let (daemon, _fixture, _dir) =
        serving(transports::streamable_http(Era::Legacy).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    // Ten reports of 300 KB each: 3 MB in all.
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "fx__slow", "arguments": {"ms": 500, "pad": 300_000},
        "_meta": {"progressToken": "p"}}});
    let response = send_in_session(&url, &session, &call).await;
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the call's stream ends")
        .unwrap();
    assert_eq!(text.matches("notifications/progress").count(), 10);
    assert!(text.contains("\"text\":\"done\""), "the result, read along");
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .collect();
    assert_eq!(ids.len(), 12, "priming, ten reports, the result: {ids:?}");

    let refused = resume_stream(&url, &session, ids[0]).await;
    assert_eq!(refused.status(), 410);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no longer kept"),
        "{error}"
    );
    let rest = resume_stream(&url, &session, ids[10]).await;
    assert_eq!(rest.status(), 200);
    let rest = rest.text().await.unwrap();
    assert!(
        rest.starts_with(&format!("id: {}\n", ids[11])),
        "{rest:.200}"
    );
    assert!(rest.contains("\"text\":\"done\""), "{rest:.200}");
}

/// A session call its server answers at once is answered with that message as one JSON body
/// (as a stream it would go out in one write with the answer, leaving nothing to resume),
/// relayed on the short path all the same; one that runs on is given its primed stream while it
/// runs, before the server has sent anything, so its client could come back for the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_call_answered_at_once_gets_json_and_one_running_on_a_primed_stream_at_once() {
    let (daemon, fixture, _dir) =
        serving(transports::streamable_http(Era::Legacy).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let session = open_session(&url, json!({})).await;
    let echo = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "fx__echo", "arguments": {"message": "at once"}}});
    let response = send_in_session(&url, &session, &echo).await;
    assert_eq!(response.status(), 200);
    assert_eq!(content_type(&response), "application/json");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["id"], 4, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "at once",
        "{answer}"
    );
    assert!(answer["result"].get("resultType").is_none(), "{answer}");
    let seen = last_call_id(&fixture);
    assert!(
        seen.as_str()
            .is_some_and(|id| id.starts_with("switchboard-direct-")),
        "relayed on the short path: {seen}"
    );

    // No progress asked for: the server sends nothing until its answer, a second later.
    let slow = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "fx__slow", "arguments": {"ms": 1000}}});
    let mut response = send_in_session(&url, &session, &slow).await;
    assert_eq!(response.status(), 200);
    assert_eq!(content_type(&response), "text/event-stream");
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_millis(500), response.chunk())
            .await
            .expect("the priming event comes while the call runs")
            .unwrap()
            .expect("more of the stream");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let events = sse_events(&text);
    assert!(
        events[0].contains_key("id") && events[0].contains_key("retry"),
        "a priming event first: {text:?}"
    );
    assert!(!text.contains("\"result\""), "before the answer: {text:?}");
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let last = sse_events(&text)
        .pop()
        .and_then(|mut event| event.remove("data"));
    assert!(
        last.is_some_and(|data| data.contains("\"id\":5") && data.contains("\"text\":\"done\"")),
        "the answer last: {text:?}"
    );
}

/// The media type of `response`'s body, without parameters.
fn content_type(response: &reqwest::Response) -> String {
    let value = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A 2025-11-25 session client's GET resuming a stream after event `after` (`Last-Event-ID`).
async fn resume_stream(url: &str, session: &str, after: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", after)
        .send()
        .await
        .expect("Switchboard answers")
}

/// The SSE events of `body`: each event's fields, by name (`data` joined by lines).
fn sse_events(body: &str) -> Vec<std::collections::HashMap<String, String>> {
    body.split("\n\n")
        .filter(|event| !event.trim().is_empty())
        .map(|event| {
            let mut fields = std::collections::HashMap::<String, String>::new();
            for line in event.lines().filter(|line| !line.starts_with(':')) {
                let (name, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                fields
                    .entry(name.to_owned())
                    .and_modify(|v| {
                        v.push('\n');
                        v.push_str(value);
                    })
                    .or_insert_with(|| value.to_owned());
            }
            fields
        })
        .filter(|fields| !fields.is_empty())
        .collect()
}

/// A server that ends a call's stream before its answer (SEP-1699: the TypeScript SDK's
/// `closeSSEStream`, answering 100 ms later while no stream is attached) is seen to do so by a
/// 2025-11-25 client, as if it talked to the server itself: its own stream ends after an event
/// with an id, the server's `retry` and no message, and coming back with that id as
/// `Last-Event-ID` resumes the server's stream at once and brings the answer. A 2025-06-18
/// client, which is not expected to come back, gets the answer on the stream it opened.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_stream_the_server_ends_early_ends_early_for_clients_that_come_back() {
    let server = typescript_sdk_server(false).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["ts", &server.url, "--transport", "sessions"]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let url = daemon.mcp_url();
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "ts__test_reconnection", "arguments": {}}});
    let http = reqwest::Client::new();

    let session = open_session(&url, json!({})).await;
    let posted = send_in_session(&url, &session, &call).await;
    assert_eq!(posted.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(10), posted.text())
        .await
        .expect("the stream ends when the server's does")
        .unwrap();
    let events = sse_events(&body);
    assert_eq!(events.len(), 2, "a priming event and the pause: {body:?}");
    assert_eq!(
        events[0].get("data").map(String::as_str),
        Some(""),
        "{body:?}"
    );
    let pause = &events[1];
    assert_eq!(pause.get("data").map(String::as_str), Some(""), "{body:?}");
    assert_eq!(
        pause.get("retry").map(String::as_str),
        Some("500"),
        "the server's own retry: {body:?}"
    );
    let resumed = http
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", &pause["id"])
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let rest = tokio::time::timeout(Duration::from_secs(10), resumed.text())
        .await
        .expect("the resumed stream ends with the answer")
        .unwrap();
    let answer: Value = sse_events(&rest)
        .iter()
        .filter_map(|event| serde_json::from_str(event.get("data")?).ok())
        .next_back()
        .unwrap_or_else(|| panic!("an answer: {rest:?}"));
    assert_eq!(answer["id"], 5, "{rest}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Reconnection test completed"),
        "{rest}"
    );

    let older = open_session_at(&url, "2025-06-18", json!({})).await;
    let posted = http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &older)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&call)
        .send()
        .await
        .unwrap();
    let body = tokio::time::timeout(Duration::from_secs(10), posted.text())
        .await
        .expect("the answer comes on the same stream")
        .unwrap();
    assert!(body.contains("Reconnection test completed"), "{body:?}");
}
