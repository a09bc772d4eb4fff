//! Pooled connections to upstream servers: calls relayed straight reuse them (stateless, in a
//! session, and with streams that end late), and one idle longer than servers keep one is not
//! taken again.

use std::time::Duration;

use serde_json::json;
use switchboard_fixtures::{Era, transports};

use crate::support::{call_in_session, open_session, serving, tools_call_2026};

/// Calls relayed straight to a stateless server reuse pooled connections: twenty calls in a
/// row do not open twenty connections.
#[tokio::test(flavor = "multi_thread")]
async fn straight_calls_reuse_the_servers_connections() {
    straight_calls_reuse_connections(Era::Modern, false).await;
}

/// Calls relayed straight into a server's session reuse pooled connections too, although
/// the server answers each with an SSE stream that ends only after the response.
#[tokio::test(flavor = "multi_thread")]
async fn straight_calls_in_a_session_reuse_the_servers_connections() {
    straight_calls_reuse_connections(Era::Legacy, false).await;
}

/// A server that ends each call's stream in a write of its own, a little after the response,
/// still has its connections reused: the call is answered at once, and the end of its stream
/// is read after it (a response body dropped before its end would close the connection).
#[tokio::test(flavor = "multi_thread")]
async fn straight_calls_reuse_connections_whose_streams_end_late() {
    straight_calls_reuse_connections(Era::Legacy, true).await;
}

/// Twenty calls straight to a fixture of `era` (whose SSE responses end late with `late_end`,
/// the calls then spaced so that each stream has ended before the next call) open at most a
/// few connections.
async fn straight_calls_reuse_connections(era: Era, late_end: bool) {
    use std::sync::atomic::Ordering;
    let (daemon, fixture, _dir) = serving(transports::streamable_http(era).await, "fx", &[]).await;
    fixture
        .state
        .late_stream_end
        .store(late_end, Ordering::SeqCst);
    let url = daemon.mcp_url();
    let session = match era {
        Era::Legacy => Some(open_session(&url, json!({})).await),
        Era::Modern => None,
    };
    let (url, session) = (url.as_str(), session.as_deref());
    let echo = move |i: usize| async move {
        let params = json!({"name": "fx__echo", "arguments": {"message": format!("m{i}")}});
        let answer = match session {
            Some(session) => call_in_session(url, session, i as u64, params).await.pop(),
            None => Some(tools_call_2026(url, params, json!({})).await.1),
        };
        let answer = answer.expect("an answer");
        assert_eq!(
            answer["result"]["content"][0]["text"],
            format!("m{i}"),
            "{answer}"
        );
        if late_end {
            tokio::time::sleep(switchboard_fixtures::LATE_STREAM_END * 3).await;
        }
    };
    // The first call warms the pool.
    echo(0).await;
    let before = fixture.state.connections.load(Ordering::SeqCst);
    for i in 1..=20 {
        echo(i).await;
    }
    // A connection per call would be 20. hyper's pool takes a connection back in a task of its
    // own once a response has been read, so a call right behind another can, on a busy machine,
    // race that and open a spare (seen: 3 with the slow-reader tests running alongside).
    let opened = fixture.state.connections.load(Ordering::SeqCst) - before;
    assert!(opened <= 5, "20 calls opened {opened} connections");
}

/// A pooled connection left idle longer than servers usually keep one (Node's `http` and
/// uvicorn close them after 5 s) is not taken for the next call: a call sent on it just as the
/// server closes it would fail. Calls close together reuse connections (the tests above).
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_idle_for_longer_than_servers_keep_one_is_not_reused() {
    use std::sync::atomic::Ordering;
    let (daemon, fixture, _dir) =
        serving(transports::streamable_http(Era::Modern).await, "fx", &[]).await;
    let url = daemon.mcp_url();
    let echo = |message: &'static str| {
        let url = url.clone();
        async move {
            let params = json!({"name": "fx__echo", "arguments": {"message": message}});
            let (_, answer) = tools_call_2026(&url, params, json!({})).await;
            assert_eq!(answer["result"]["content"][0]["text"], message, "{answer}");
        }
    };
    echo("warm").await;
    let before = fixture.state.connections.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    echo("after a pause").await;
    let opened = fixture.state.connections.load(Ordering::SeqCst) - before;
    assert!(opened >= 1, "the idle connection was taken again");
}
