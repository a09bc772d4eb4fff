//! Fault injection: a fixture server fails tool calls on purpose (hangs, broken or malformed
//! responses, error bursts, a slow drip, an oversized body, a forgotten session, a token
//! rejected mid-session), per call or on a schedule, or restarts; and for each fault the
//! affected call ends with a clear error within its timeout (a forgotten session is reopened and
//! a rejected token replaced, and the call retried, so there it succeeds), no call gets another
//! call's answer, a healthy server beside it is untouched, and the faulty server serves again by
//! itself once the fault stops.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::{ConnectionState, ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::chaos::Fault;
use switchboard_fixtures::{Era, transports};
use switchboard_hub::Hub;
use switchboard_store::Store;
use switchboard_upstream::{CallContext, ConnectOptions, Upstream, UpstreamError};

/// The tool-call and request timeout of the servers under test.
const TIMEOUT: Duration = Duration::from_millis(1500);
/// A call that takes this much longer than its timeout has hung (a liveness bound, not a timing).
const HUNG: Duration = Duration::from_secs(10);

fn server(id: &str, url: &str) -> ServerDefinition {
    let mut def = ServerDefinition::new(
        ServerId::new(id).unwrap(),
        TransportSpec::from_url(url, vec![]).unwrap(),
    );
    def.timeouts.request = TIMEOUT;
    def.timeouts.tool_call = TIMEOUT;
    def
}

/// Which way a test call goes: through rmcp's client (every era), or directly as one HTTP
/// exchange (Streamable HTTP servers, stateless or in the shared session; the front door's
/// short path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Session,
    Direct,
}

/// Every era, by every path it can be called on.
const ROUTES: [(Era, Path); 4] = [
    (Era::Legacy, Path::Session),
    (Era::Legacy, Path::Direct),
    (Era::Modern, Path::Session),
    (Era::Modern, Path::Direct),
];

async fn echo(hub: &Hub, server: &str, message: &str, path: Path) -> Result<String, String> {
    echo_with(hub, server, message, path, false).await
}

/// [`echo`], sent again after a transient failure when `repeatable`.
async fn echo_with(
    hub: &Hub,
    server: &str,
    message: &str,
    path: Path,
    repeatable: bool,
) -> Result<String, String> {
    let upstream = hub
        .upstream(&ServerId::new(server).unwrap())
        .map_err(|e| e.to_string())?;
    let arguments = serde_json::json!({"message": message}).as_object().cloned();
    let call = async {
        match path {
            Path::Session => {
                let context = CallContext {
                    repeatable,
                    ..Default::default()
                };
                upstream
                    .call_tool("echo", arguments, &context)
                    .await
                    .map(|result| result.content[0].as_text().unwrap().text.clone())
                    .map_err(|error| error_text(&error))
            }
            Path::Direct => echo_directly(&upstream, arguments, repeatable).await,
        }
    };
    match tokio::time::timeout(TIMEOUT + HUNG, call).await {
        Err(_) => panic!("a call to {server} ({path:?}) hung past its timeout"),
        Ok(outcome) => outcome,
    }
}

/// `echo` as the front door's short path sends it, with [`Upstream::call_tool_direct`] (a
/// stateless client's call to a stateless server, a session client's into a server's session):
/// its answer, or the error (the call's own JSON-RPC error, or why there is no answer). A call
/// the server's session could not take goes through rmcp's client, as the front door sends it.
async fn echo_directly(
    upstream: &Upstream,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    repeatable: bool,
) -> Result<String, String> {
    use futures::StreamExt;
    use switchboard_upstream::rmcp_model::{JsonRpcMessage, ServerResult};
    use switchboard_upstream::{DirectReply, InputPolicy};
    let params = if upstream.has_sessions() {
        serde_json::json!({"name": "echo", "arguments": arguments})
    } else {
        serde_json::json!({"name": "echo", "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }})
    };
    let request = serde_json::from_value(serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params,
    }))
    .unwrap();
    let reply = upstream
        .call_tool_direct(
            request,
            std::sync::Arc::new(InputPolicy::Decline),
            Default::default(),
            None,
            repeatable,
            None,
            &tracing::Span::none(),
        )
        .await
        .map_err(|error| error_text(&error))?;
    let response = match reply {
        DirectReply::NotSent => {
            return upstream
                .call_tool("echo", arguments, &CallContext::default())
                .await
                .map(|result| result.content[0].as_text().unwrap().text.clone())
                .map_err(|error| error_text(&error));
        }
        DirectReply::Message(message) => *message,
        DirectReply::Stream(mut messages) => loop {
            match messages.next().await {
                Some(Ok(message @ (JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)))) => {
                    break message;
                }
                Some(Ok(_)) => continue,
                Some(Err(error)) => return Err(error_text(&error)),
                None => panic!("a direct reply stream ended without saying why"),
            }
        },
    };
    match response {
        JsonRpcMessage::Response(response) => match response.result {
            ServerResult::CallToolResult(result) => {
                Ok(result.content[0].as_text().unwrap().text.clone())
            }
            other => panic!("echo answered with another kind of result: {other:?}"),
        },
        JsonRpcMessage::Error(error) => Err(error.error.message.to_string()),
        other => panic!("not an answer: {other:?}"),
    }
}

fn error_text(error: &UpstreamError) -> String {
    let text = error.to_string();
    assert!(!text.trim().is_empty(), "an error says what went wrong");
    text
}

async fn wait_connected(hub: &Hub, server: &str) {
    for _ in 0..400 {
        if hub
            .status()
            .iter()
            .any(|s| s.server.as_str() == server && s.state == ConnectionState::Connected)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{server} did not connect within 20 s: {:?}", hub.status());
}

/// Calls the faulty server until it answers again (bounded: 20 s).
async fn recovers(hub: &Hub, fault: Fault, era: Era, path: Path) {
    for _ in 0..100 {
        if echo(hub, "faulty", "again", path).await.as_deref() == Ok("again") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{era:?} {path:?} {fault:?}: the server did not serve again within 20 s");
}

/// A hub (reconnecting quickly) over a store in `dir`.
async fn hub_in(dir: &tempfile::TempDir) -> Arc<Hub> {
    let options = ConnectOptions {
        supervision: switchboard_core::Supervision {
            reconnect_initial: Duration::from_millis(100),
            reconnect_max: Duration::from_millis(500),
            ..Default::default()
        },
        ..ConnectOptions::new("test")
    };
    Hub::new(Store::open(dir.path()).await.unwrap(), options)
}

/// A hub over a store in `dir` with servers `faulty` and `healthy` connected.
async fn serving(dir: &tempfile::TempDir, faulty: &str, healthy: &str) -> Arc<Hub> {
    let hub = hub_in(dir).await;
    hub.start(server("faulty", faulty)).await;
    hub.start(server("healthy", healthy)).await;
    wait_connected(&hub, "faulty").await;
    wait_connected(&hub, "healthy").await;
    hub
}

/// Eight concurrent calls to the faulty server and one to the healthy one: every answer is the
/// caller's own, the healthy server answers; returns the faulty server's outcomes.
async fn calls_beside_a_healthy_server(
    hub: &Arc<Hub>,
    what: &str,
    path: Path,
) -> Vec<(String, Result<String, String>)> {
    let what = &format!("{what} ({path:?})");
    let calls = (0..8).map(|i| {
        let hub = hub.clone();
        async move {
            let message = format!("call-{i}");
            (message.clone(), echo(&hub, "faulty", &message, path).await)
        }
    });
    let (outcomes, beside) = tokio::join!(
        futures::future::join_all(calls),
        echo(hub, "healthy", "still here", path)
    );
    for (message, outcome) in &outcomes {
        if let Ok(answer) = outcome {
            assert_eq!(answer, message, "{what}: a call got another's answer");
        }
    }
    assert_eq!(
        beside.as_deref(),
        Ok("still here"),
        "{what}: the healthy server was affected"
    );
    outcomes
}

#[tokio::test(flavor = "multi_thread")]
async fn faults_on_a_schedule_strike_only_their_calls_and_stop_when_disarmed() {
    for (era, path) in ROUTES {
        let faulty = transports::streamable_http(era).await;
        let healthy = transports::streamable_http(era).await;
        let dir = tempfile::tempdir().unwrap();
        let hub = serving(&dir, &faulty.url, &healthy.url).await;

        // Every third call gets malformed JSON, until disarmed.
        faulty.state.arm_every(Fault::Malformed, 3);
        let mut failed = 0;
        for round in 0..3 {
            let outcomes = calls_beside_a_healthy_server(
                &hub,
                &format!("{era:?} every 3rd, round {round}"),
                path,
            )
            .await;
            failed += outcomes.iter().filter(|(_, o)| o.is_err()).count();
        }
        assert!(
            failed >= 8,
            "{era:?}: 24 calls with every third faulty, yet {failed} failed"
        );
        assert!(faulty.state.is_armed(), "a schedule stays armed");
        faulty.state.disarm();
        recovers(&hub, Fault::Malformed, era, path).await;

        // A window of 503s: every call in it fails, and service resumes by itself after it.
        faulty
            .state
            .arm_for(Fault::Status(503), Duration::from_millis(700));
        let outcomes =
            calls_beside_a_healthy_server(&hub, &format!("{era:?} 503 window"), path).await;
        assert!(
            outcomes.iter().all(|(_, o)| o.is_err()),
            "{era:?}: calls inside the window succeeded: {outcomes:?}"
        );
        recovers(&hub, Fault::Status(503), era, path).await;
        assert!(!faulty.state.is_armed(), "the window closed");
        hub.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_server_cuts_its_calls_clearly_and_is_reconnected_by_itself() {
    for (era, path) in ROUTES {
        let mut faulty = transports::streamable_http(era).await;
        let healthy = transports::streamable_http(era).await;
        let dir = tempfile::tempdir().unwrap();
        let hub = serving(&dir, &faulty.url, &healthy.url).await;
        let sessions_before = faulty
            .state
            .sessionless_posts
            .load(std::sync::atomic::Ordering::SeqCst);

        // Calls are in flight (the server holds them) when the process dies.
        faulty
            .state
            .frozen
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let in_flight = tokio::spawn({
            let hub = hub.clone();
            async move { calls_beside_a_healthy_server(&hub, "restart", path).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        faulty.stop();
        faulty
            .state
            .frozen
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let outcomes = in_flight.await.unwrap();
        assert!(
            outcomes.iter().all(|(_, o)| o.is_err()),
            "{era:?}: calls cut by the restart were answered: {outcomes:?}"
        );

        // While it is down, calls fail (at once, with the reason) and nothing else is affected.
        let down = calls_beside_a_healthy_server(&hub, "while down", path).await;
        assert!(down.iter().all(|(_, o)| o.is_err()), "{era:?}: {down:?}");

        faulty.restart(Duration::from_millis(500)).await;
        recovers(&hub, Fault::Hang, era, path).await;
        let after = calls_beside_a_healthy_server(&hub, "after the restart", path).await;
        assert!(after.iter().all(|(_, o)| o.is_ok()), "{era:?}: {after:?}");
        if era == Era::Legacy {
            assert!(
                faulty
                    .state
                    .sessionless_posts
                    .load(std::sync::atomic::Ordering::SeqCst)
                    > sessions_before,
                "a new session was opened with the restarted server"
            );
        }
        hub.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_rejected_mid_session_is_replaced_once_and_a_dead_grant_asks_for_a_sign_in() {
    use std::sync::atomic::Ordering;
    use switchboard_oauth::{HeadlessAuthorizer, NetworkPolicy, OAuthHttp};
    for (era, path) in ROUTES {
        let protected = switchboard_fixtures::oauth::protected(era).await;
        let healthy = transports::streamable_http(era).await;
        let dir = tempfile::tempdir().unwrap();
        let hub = hub_in(&dir).await;
        let def = server("faulty", &protected.url);
        hub.store().put_server(&def).await.unwrap();

        // Sign in once, as `switchboard login` would: the tokens are in the hub's store.
        let sign_in = || async {
            let url = url::Url::parse(&protected.url).unwrap();
            let http = OAuthHttp::new(NetworkPolicy::for_server(&url, false, false));
            let auth = switchboard_hub::server_auth(&def, hub.store(), hub.oauth())
                .await
                .unwrap()
                .unwrap()
                .with_authorizer(Arc::new(HeadlessAuthorizer::new(
                    http,
                    "http://127.0.0.1:1/oauth/callback",
                )));
            let mut options = ConnectOptions::new("test");
            options.auth = Some(Arc::new(auth));
            switchboard_upstream::connect(&def, None, &options)
                .await
                .unwrap()
                .session
                .close()
                .await;
        };
        sign_in().await;
        hub.start(def.clone()).await;
        hub.start(server("healthy", &healthy.url)).await;
        wait_connected(&hub, "faulty").await;
        wait_connected(&hub, "healthy").await;

        // The server rejects the token in the middle of the session: one refresh, and every
        // call goes through.
        let refreshes = protected.auth.refreshes.load(Ordering::SeqCst);
        protected.fixture.arm(Fault::RejectToken, 1);
        let outcomes = calls_beside_a_healthy_server(&hub, &format!("{era:?} 401"), path).await;
        assert!(!protected.fixture.is_armed(), "{era:?}: the 401 was served");
        assert!(
            outcomes.iter().all(|(_, o)| o.is_ok()),
            "{era:?}: {outcomes:?}"
        );
        assert_eq!(
            protected.auth.refreshes.load(Ordering::SeqCst),
            refreshes + 1,
            "{era:?}: one refresh replaced the rejected token"
        );

        // The grant itself is dead: the call ends with a clear request to sign in again, the
        // server waits for one, and the healthy server does not notice.
        protected.auth.revoke_refresh_tokens();
        protected.fixture.arm(Fault::RejectToken, 1);
        let outcome = echo(&hub, "faulty", "dead grant", path).await;
        let error = outcome.expect_err("a call with a dead grant cannot succeed");
        assert!(
            error.contains("switchboard login faulty"),
            "{era:?}: the error says what to do: {error}"
        );
        for _ in 0..200 {
            let state = hub
                .status()
                .into_iter()
                .find(|s| s.server.as_str() == "faulty")
                .map(|s| s.state);
            if state == Some(ConnectionState::NeedsAuth) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            hub.status()
                .into_iter()
                .find(|s| s.server.as_str() == "faulty")
                .map(|s| s.state),
            Some(ConnectionState::NeedsAuth),
            "{era:?}"
        );
        assert_eq!(
            echo(&hub, "healthy", "fine", path).await.as_deref(),
            Ok("fine"),
            "{era:?}"
        );

        // A new sign-in (another process writing the store) is picked up without a restart.
        sign_in().await;
        wait_connected(&hub, "faulty").await;
        assert_eq!(
            echo(&hub, "faulty", "back", path).await.as_deref(),
            Ok("back"),
            "{era:?}"
        );
        hub.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_fault_fails_only_its_calls_clearly_and_the_server_recovers() {
    let faults = [
        Fault::Hang,
        Fault::CloseMidResponse,
        Fault::Malformed,
        Fault::Status(503),
        Fault::Drip,
        Fault::Oversized,
        Fault::ExpireSession,
    ];
    for (era, path) in ROUTES {
        let faulty = transports::streamable_http(era).await;
        let healthy = transports::streamable_http(era).await;
        let dir = tempfile::tempdir().unwrap();
        let hub = serving(&dir, &faulty.url, &healthy.url).await;

        for fault in faults {
            if fault == Fault::ExpireSession && era == Era::Modern {
                continue; // no sessions to forget
            }
            // One call gets the fault; seven others run beside it and must each get their own
            // answer or a clear error, never another call's.
            faulty.state.arm(fault, 1);
            let outcomes =
                calls_beside_a_healthy_server(&hub, &format!("{era:?} {fault:?}"), path).await;
            assert!(
                !faulty.state.is_armed(),
                "{era:?} {fault:?}: the fault was served"
            );
            let failed = outcomes.iter().filter(|(_, o)| o.is_err()).count();
            if fault == Fault::ExpireSession {
                // A forgotten session is opened again and the call that met the 404 retried in
                // the new one: it never fails for the 404. Calls of the old session still being
                // answered when rmcp's client reopens it may be lost with it (rmcp fails them
                // with a clear error rather than retry a call the server may have run); under
                // load some are, so that is the one failure allowed.
                let lost =
                    |error: &String| error.contains("re-initialized before the response arrived");
                assert!(
                    outcomes
                        .iter()
                        .all(|(_, outcome)| outcome.as_ref().map_or_else(lost, |_| true)),
                    "{era:?}: {outcomes:?}"
                );
                assert!(failed < outcomes.len(), "{era:?}: {outcomes:?}");
            } else {
                assert!(
                    failed >= 1,
                    "{era:?} {fault:?}: no call failed: {outcomes:?}"
                );
            }
            recovers(&hub, fault, era, path).await;
        }

        // A burst: five 503s in a row, then service resumes by itself.
        faulty.state.arm(Fault::Status(503), 5);
        for i in 0..5 {
            let outcome = echo(&hub, "faulty", "burst", path).await;
            if let Err(error) = &outcome {
                assert!(
                    error.contains("503") || error.contains("not connected"),
                    "{era:?} burst {i}: {error}"
                );
            }
        }
        recovers(&hub, Fault::Status(503), era, path).await;
        hub.shutdown().await;
    }
}

/// A 429 with `Retry-After` is kept to: a call safe to repeat is sent again no sooner than the
/// server asked (2 s, where the preset alone would wait about 1 s), and a server asking for
/// longer than a call is held (60 s) gets its refusal passed on at once, saying how long it
/// asked for, the call sent once. Every era, both ways a call goes.
#[tokio::test(flavor = "multi_thread")]
async fn a_429_is_retried_no_sooner_than_its_retry_after_says() {
    for (era, path) in ROUTES {
        let fixture = transports::streamable_http(era).await;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let hub = Hub::new(store, ConnectOptions::new("test"));
        let mut def = server("busy", &fixture.url);
        def.policies.safe_to_retry.insert("echo".into());
        hub.put_definition(def, false).await.unwrap();
        wait_connected(&hub, "busy").await;

        fixture.state.arm(
            Fault::TooManyRequests {
                retry_after_secs: 2,
            },
            1,
        );
        let started = std::time::Instant::now();
        assert_eq!(
            echo_with(&hub, "busy", "later", path, true).await,
            Ok("later".to_owned()),
            "{era:?} {path:?}"
        );
        assert!(
            started.elapsed() >= Duration::from_secs(2),
            "{era:?} {path:?}: sent again after {:?}",
            started.elapsed()
        );

        fixture.state.arm(
            Fault::TooManyRequests {
                retry_after_secs: 60,
            },
            1,
        );
        let refused = echo_with(&hub, "busy", "much later", path, true).await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("429") && e.contains("retried after 60 s")),
            "{era:?} {path:?}: {refused:?}"
        );
        assert_eq!(
            echo(&hub, "busy", "next", path).await,
            Ok("next".to_owned()),
            "{era:?} {path:?}: the refused call was sent once"
        );
        hub.shutdown().await;
    }
}

/// A transient failure (a 503) of a call that is safe to repeat (its tool named safe to retry)
/// is retried and answered; the same failure of a call that is not fails it, and the call was
/// sent once (the next one, the fault spent, is answered); with retries off nothing is retried.
/// Every era, both ways a call goes.
#[tokio::test(flavor = "multi_thread")]
async fn transient_failures_are_retried_only_for_calls_safe_to_repeat() {
    for (era, path) in ROUTES {
        let fixture = transports::streamable_http(era).await;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let hub = Hub::new(store, ConnectOptions::new("test"));
        let mut def = server("flaky", &fixture.url);
        def.policies.safe_to_retry.insert("echo".into());
        hub.put_definition(def, false).await.unwrap();
        wait_connected(&hub, "flaky").await;
        let flaky = ServerId::new("flaky").unwrap();
        let repeatable = hub.call_repeatable(&flaky, "echo");
        assert!(repeatable, "named safe to retry");

        fixture.state.arm(Fault::Status(503), 1);
        assert_eq!(
            echo_with(&hub, "flaky", "again", path, repeatable).await,
            Ok("again".to_owned()),
            "{era:?} {path:?}: retried after the 503"
        );

        fixture.state.arm(Fault::Status(503), 1);
        let refused = echo_with(&hub, "flaky", "once", path, false).await;
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("503")),
            "{era:?} {path:?}: {refused:?}"
        );
        assert_eq!(
            echo(&hub, "flaky", "next", path).await,
            Ok("next".to_owned()),
            "{era:?} {path:?}: the refused call took the one 503"
        );

        hub.change_definition(&flaky, |def| {
            def.policies.retries = switchboard_core::RetryPreset::Off;
            Ok(())
        })
        .await
        .unwrap();
        fixture.state.arm(Fault::Status(503), 1);
        let refused = echo_with(&hub, "flaky", "off", path, repeatable).await;
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("503")),
            "{era:?} {path:?}: retries off: {refused:?}"
        );
        hub.shutdown().await;
    }
}
