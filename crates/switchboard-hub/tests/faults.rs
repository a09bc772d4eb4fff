//! Fault injection: a fixture server fails tool calls on purpose (hangs, broken or malformed
//! responses, error bursts, a slow drip, an oversized body, a forgotten session), and for each
//! fault the affected call ends with a clear error within its timeout (a forgotten session is
//! reopened and the call retried, so there it succeeds), no call gets another call's answer, a
//! healthy server beside it is untouched, and the faulty server serves again by itself once the
//! fault stops.

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::{ConnectionState, ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::chaos::Fault;
use switchboard_fixtures::{Era, transports};
use switchboard_hub::Hub;
use switchboard_store::Store;
use switchboard_upstream::{CallContext, ConnectOptions, UpstreamError};

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

async fn echo(hub: &Hub, server: &str, message: &str) -> Result<String, String> {
    let upstream = hub
        .upstream(&ServerId::new(server).unwrap())
        .map_err(|e| e.to_string())?;
    let context = CallContext::default();
    let call = upstream.call_tool(
        "echo",
        serde_json::json!({"message": message}).as_object().cloned(),
        &context,
    );
    match tokio::time::timeout(TIMEOUT + HUNG, call).await {
        Err(_) => panic!("a call to {server} hung past its timeout"),
        Ok(Ok(result)) => Ok(result.content[0].as_text().unwrap().text.clone()),
        Ok(Err(error)) => Err(error_text(&error)),
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
async fn recovers(hub: &Hub, fault: Fault, era: Era) {
    for _ in 0..100 {
        if echo(hub, "faulty", "again").await.as_deref() == Ok("again") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{era:?} {fault:?}: the server did not serve again within 20 s");
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
    for era in [Era::Legacy, Era::Modern] {
        let faulty = transports::streamable_http(era).await;
        let healthy = transports::streamable_http(era).await;
        let dir = tempfile::tempdir().unwrap();
        let options = ConnectOptions {
            supervision: switchboard_core::Supervision {
                reconnect_initial: Duration::from_millis(100),
                reconnect_max: Duration::from_millis(500),
                ..Default::default()
            },
            ..ConnectOptions::new("test")
        };
        let hub: Arc<Hub> = Hub::new(Store::open(dir.path()).await.unwrap(), options);
        hub.start(server("faulty", &faulty.url)).await;
        hub.start(server("healthy", &healthy.url)).await;
        wait_connected(&hub, "faulty").await;
        wait_connected(&hub, "healthy").await;

        for fault in faults {
            if fault == Fault::ExpireSession && era == Era::Modern {
                continue; // no sessions to forget
            }
            // One call gets the fault; seven others run beside it and must each get their own
            // answer or a clear error, never another call's.
            faulty.state.arm(fault, 1);
            let calls = (0..8).map(|i| {
                let hub = hub.clone();
                async move {
                    let message = format!("call-{i}");
                    (message.clone(), echo(&hub, "faulty", &message).await)
                }
            });
            let (outcomes, beside) = tokio::join!(
                futures::future::join_all(calls),
                echo(&hub, "healthy", "still here")
            );
            assert!(
                faulty.state.fault.lock().unwrap().is_none(),
                "{era:?} {fault:?}: the fault was served"
            );
            let failed = outcomes.iter().filter(|(_, o)| o.is_err()).count();
            if fault == Fault::ExpireSession {
                // A forgotten session is opened again and the call retried: nobody notices.
                assert_eq!(failed, 0, "{era:?}: {outcomes:?}");
            } else {
                assert!(
                    failed >= 1,
                    "{era:?} {fault:?}: no call failed: {outcomes:?}"
                );
            }
            for (message, outcome) in &outcomes {
                if let Ok(answer) = outcome {
                    assert_eq!(
                        answer, message,
                        "{era:?} {fault:?}: a call got another's answer"
                    );
                }
            }
            assert_eq!(
                beside.as_deref(),
                Ok("still here"),
                "{era:?} {fault:?}: the healthy server was affected"
            );
            recovers(&hub, fault, era).await;
        }

        // A burst: five 503s in a row, then service resumes by itself.
        faulty.state.arm(Fault::Status(503), 5);
        for i in 0..5 {
            let outcome = echo(&hub, "faulty", "burst").await;
            if let Err(error) = &outcome {
                assert!(
                    error.contains("503") || error.contains("not connected"),
                    "{era:?} burst {i}: {error}"
                );
            }
        }
        recovers(&hub, Fault::Status(503), era).await;
        hub.shutdown().await;
    }
}
