//! Switchboard connects, lists and calls over every transport and protocol era, against the Rust
//! fixture servers.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use switchboard_core::{DetectedTransport, ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::{
    CallContext, ConnectOptions, Connection, UpstreamError, UpstreamEvent, connect,
};
use tokio_util::sync::CancellationToken;

fn definition(transport: TransportSpec) -> ServerDefinition {
    let mut def = ServerDefinition::new(ServerId::new("fixture").unwrap(), transport);
    def.timeouts.request = Duration::from_secs(10);
    def
}

fn http(url: &str) -> ServerDefinition {
    definition(TransportSpec::from_url(url, vec![]).unwrap())
}

/// The server at `url`, reached only over `transport`.
fn pinned_to(url: &str, transport: DetectedTransport) -> ServerDefinition {
    let mut def = http(url);
    if let TransportSpec::Http { pinned, .. } = &mut def.transport {
        *pinned = Some(transport);
    }
    def
}

fn stdio(era: &str) -> ServerDefinition {
    let binary = switchboard_fixtures::stdio_fixture_binary();
    definition(
        TransportSpec::stdio(binary.display().to_string(), vec![era.into()], vec![], None).unwrap(),
    )
}

fn options() -> ConnectOptions {
    ConnectOptions::new("test")
}

async fn text_of(connection: &Connection, tool: &str, args: serde_json::Value) -> String {
    let result = connection
        .upstream
        .call_tool(tool, args.as_object().cloned(), &CallContext::default())
        .await
        .unwrap();
    result.content[0].as_text().unwrap().text.clone()
}

/// Lists every kind of item and calls a tool, a resource and a prompt.
async fn exercise(connection: &Connection, expect_tools: &[&str]) {
    let upstream = &connection.upstream;
    let tools: Vec<String> = upstream
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(tools, expect_tools, "tools across both pages, in order");
    assert_eq!(
        text_of(connection, "echo", serde_json::json!({"message": "hi"})).await,
        "hi"
    );
    assert_eq!(
        text_of(connection, "add", serde_json::json!({"a": 2, "b": 3.5})).await,
        "5.5"
    );
    let resource = upstream
        .read_resource("fixture://greeting", &CallContext::default())
        .await
        .unwrap();
    let text = serde_json::to_value(&resource.contents[0]).unwrap();
    assert_eq!(text["text"], "hello from the fixture");
    let prompt = upstream
        .get_prompt(
            "greet",
            serde_json::json!({"name": "Ada"}).as_object().cloned(),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(
        serde_json::to_string(&prompt.messages)
            .unwrap()
            .contains("Hello, Ada!")
    );
    assert_eq!(upstream.list_prompts().await.unwrap().len(), 1);
    assert_eq!(upstream.list_resources().await.unwrap().len(), 1);
}

const LEGACY_TOOLS: &[&str] = &[
    "echo", "add", "slow", "fail", "crash", "whoami", "add_tool", "roots",
];
const MODERN_TOOLS: &[&str] = &[
    "echo", "add", "slow", "fail", "crash", "whoami", "add_tool", "lookup", "confirm",
];

#[tokio::test]
async fn streamable_http_with_sessions_is_detected_and_works() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    assert_eq!(connection.detected, Some(DetectedTransport::StreamableHttp));
    assert_eq!(
        connection.upstream.protocol_version().as_deref(),
        Some("2025-11-25")
    );
    exercise(&connection, LEGACY_TOOLS).await;
    connection.session.close().await;
}

#[tokio::test]
async fn stateless_2026_server_is_detected_and_works() {
    let fixture = transports::streamable_http(Era::Modern).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    assert_eq!(
        connection.detected,
        Some(DetectedTransport::StreamableHttpStateless)
    );
    assert_eq!(
        connection.upstream.protocol_version().as_deref(),
        Some("2026-07-28")
    );
    assert!(connection.upstream.is_stateless());
    // `bad_header` breaks the x-mcp-header rules and is dropped from the list.
    exercise(&connection, MODERN_TOOLS).await;
    connection.session.close().await;
}

/// A server of both eras is reached the newest way it answers, as the spec has it, even when
/// its stateless face offers less (a client cannot know without sending legacy traffic to a
/// server that answered `server/discover`); the transport the user pinned is the only one tried,
/// cached result or not.
#[tokio::test]
async fn a_pinned_transport_is_the_only_one_tried() {
    let fixture = transports::dual_era_poorer_stateless().await;
    let detected = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    assert_eq!(
        detected.detected,
        Some(DetectedTransport::StreamableHttpStateless)
    );
    detected.session.close().await;

    let pinned = pinned_to(&fixture.url, DetectedTransport::StreamableHttp);
    let stale_cache = Some(DetectedTransport::StreamableHttpStateless);
    let connection = connect(&pinned, stale_cache, &options()).await.unwrap();
    assert_eq!(connection.detected, Some(DetectedTransport::StreamableHttp));
    assert_eq!(
        connection.upstream.protocol_version().as_deref(),
        Some("2025-11-25")
    );
    // What only the sessions offer works: resources and prompts.
    exercise(&connection, LEGACY_TOOLS).await;
    connection.session.close().await;

    // Pinned to the transport a server does not speak, it fails instead of finding another.
    let legacy = transports::streamable_http(Era::Legacy).await;
    let wrong = pinned_to(&legacy.url, DetectedTransport::HttpSse);
    assert!(connect(&wrong, None, &options()).await.is_err());
}

#[tokio::test]
async fn x_mcp_header_arguments_are_mirrored_into_request_headers() {
    let fixture = transports::streamable_http(Era::Modern).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    connection.upstream.list_tools().await.unwrap();
    let text = text_of(
        &connection,
        "lookup",
        serde_json::json!({"region": "eu-west"}),
    )
    .await;
    assert_eq!(text, "header=eu-west");
    assert_eq!(
        fixture.state.last_region_header.lock().unwrap().as_deref(),
        Some("eu-west")
    );
    connection.session.close().await;
}

#[tokio::test]
async fn legacy_http_sse_server_is_detected_and_works() {
    let fixture = transports::http_sse().await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    assert_eq!(connection.detected, Some(DetectedTransport::HttpSse));
    assert_eq!(
        connection.upstream.protocol_version().as_deref(),
        Some("2024-11-05")
    );
    exercise(&connection, LEGACY_TOOLS).await;
    connection.session.close().await;
}

#[tokio::test]
async fn a_stale_probe_cache_is_corrected_by_probing_again() {
    let fixture = transports::http_sse().await;
    let connection = connect(
        &http(&fixture.url),
        Some(DetectedTransport::StreamableHttpStateless),
        &options(),
    )
    .await
    .unwrap();
    assert_eq!(connection.detected, Some(DetectedTransport::HttpSse));
    connection.session.close().await;
}

#[tokio::test]
async fn websocket_server_works() {
    let fixture = transports::websocket().await;
    let def = definition(TransportSpec::from_url(&fixture.url, vec![]).unwrap());
    let connection = connect(&def, None, &options()).await.unwrap();
    assert_eq!(connection.detected, None);
    exercise(&connection, LEGACY_TOOLS).await;
    connection.session.close().await;
}

#[tokio::test]
async fn stdio_servers_of_both_eras_work() {
    let legacy = connect(&stdio("legacy"), None, &options()).await.unwrap();
    assert_eq!(
        legacy.upstream.protocol_version().as_deref(),
        Some("2025-11-25")
    );
    exercise(&legacy, LEGACY_TOOLS).await;
    legacy.session.close().await;

    let modern = connect(&stdio("modern"), None, &options()).await.unwrap();
    assert_eq!(
        modern.upstream.protocol_version().as_deref(),
        Some("2026-07-28")
    );
    // stdio clients may ignore x-mcp-header annotations, so `bad_header` stays.
    let tools = modern.upstream.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "bad_header"));
    modern.session.close().await;
}

/// Cancels a slow call 150 ms in (the caller gets `Cancelled`); whether the fixture's tool then
/// saw its cancellation within 2 s.
async fn a_cancelled_call_reaches_the_server(
    connection: &Connection,
    fixture: &transports::RunningFixture,
) -> bool {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        trigger.cancel();
    });
    let error = connection
        .upstream
        .call_tool(
            "slow",
            serde_json::json!({"ms": 5000}).as_object().cloned(),
            &CallContext {
                cancel,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(error, UpstreamError::Cancelled), "{error}");
    let mut seen = false;
    for _ in 0..100 {
        if fixture.state.cancelled_calls.load(Ordering::SeqCst) == 1 {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

#[tokio::test]
async fn progress_reaches_the_caller_and_cancellation_reaches_the_server() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let result = connection
        .upstream
        .call_tool(
            "slow",
            serde_json::json!({"ms": 200}).as_object().cloned(),
            &CallContext {
                progress: Some(tx),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "done");
    let mut reports = Vec::new();
    while let Ok(report) = rx.try_recv() {
        reports.push(report);
    }
    assert!(!reports.is_empty(), "progress notifications arrived");
    assert!(reports.iter().all(|r| r.total == Some(4.0)));

    assert!(
        a_cancelled_call_reaches_the_server(&connection, &fixture).await,
        "the server saw notifications/cancelled"
    );
    connection.session.close().await;
}

/// At a 2026-07-28 server a cancelled request's response stream is closed, which the server
/// takes as the cancellation (no `notifications/cancelled` goes over HTTP in that revision).
#[tokio::test]
async fn a_stateless_servers_cancelled_call_is_cancelled_by_closing_its_stream() {
    let fixture = transports::streamable_http(Era::Modern).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    assert!(connection.upstream.is_stateless());
    assert!(
        a_cancelled_call_reaches_the_server(&connection, &fixture).await,
        "the server saw the call's stream close"
    );
    // The connection goes on serving.
    assert_eq!(
        text_of(&connection, "echo", serde_json::json!({"message": "after"})).await,
        "after"
    );
    connection.session.close().await;
}

#[tokio::test]
async fn list_changed_notifications_reach_the_event_channel() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let mut connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    text_of(&connection, "add_tool", serde_json::json!({})).await;
    let event = tokio::time::timeout(Duration::from_secs(5), connection.events.recv())
        .await
        .expect("a notification within 5 s");
    assert_eq!(event, Some(UpstreamEvent::ToolsChanged));
    let tools = connection.upstream.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "late"));
    connection.session.close().await;
}

#[tokio::test]
async fn a_repeated_pagination_cursor_stops_the_listing_with_an_error() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    fixture.state.repeat_cursor.store(true, Ordering::SeqCst);
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    let error = connection.upstream.list_tools().await.unwrap_err();
    assert!(
        matches!(error, UpstreamError::RepeatedCursor(ref c, "tools") if c == "same"),
        "{error}"
    );
    connection.session.close().await;
}

/// A server paging megabytes of tools forever is stopped at the bound on one server's list (a
/// few pages), not after a thousand pages and gigabytes of memory.
#[tokio::test]
async fn a_listing_that_outgrows_one_servers_bound_stops_with_an_error() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    fixture
        .state
        .endless_pages_of
        .store(2 * 1024 * 1024, Ordering::SeqCst);
    let before = fixture.state.pages_served.load(Ordering::SeqCst);
    let error = connection.upstream.list_tools().await.unwrap_err();
    assert!(
        matches!(error, UpstreamError::ListTooLarge { what: "tools", .. }),
        "{error}"
    );
    assert!(error.to_string().contains("16 MiB"), "{error}");
    let pages = fixture.state.pages_served.load(Ordering::SeqCst) - before;
    assert!(pages <= 9, "{pages} pages read");
    connection.session.close().await;
}

#[tokio::test]
async fn a_tool_error_is_a_result_not_a_failure() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    let result = connection
        .upstream
        .call_tool("fail", None, &CallContext::default())
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    connection.session.close().await;
}

#[tokio::test]
async fn stdio_servers_get_their_environment_and_working_directory() {
    let binary = switchboard_fixtures::stdio_fixture_binary();
    let dir = tempfile::tempdir().unwrap();
    let def = definition(
        TransportSpec::stdio(
            binary.display().to_string(),
            vec!["legacy".into()],
            vec![switchboard_core::NamedValue::guess(
                "FIXTURE_MARK",
                "marked",
            )],
            Some(dir.path().to_path_buf()),
        )
        .unwrap(),
    );
    let connection = connect(&def, None, &options()).await.unwrap();
    let text = text_of(&connection, "whoami", serde_json::json!({})).await;
    let expected_dir = dir.path().canonicalize().unwrap();
    assert_eq!(text, format!("marked {}", expected_dir.display()));
    connection.session.close().await;
}

#[tokio::test]
async fn an_expired_session_is_reinitialised_transparently_and_closing_deletes_it() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    let before = fixture.state.sessionless_posts.load(Ordering::SeqCst);
    fixture
        .state
        .expire_session_once
        .store(true, Ordering::SeqCst);
    assert_eq!(
        text_of(&connection, "echo", serde_json::json!({"message": "again"})).await,
        "again"
    );
    assert!(
        fixture.state.sessionless_posts.load(Ordering::SeqCst) > before,
        "a new initialize was sent without the expired session id"
    );
    assert_eq!(fixture.state.deletes.load(Ordering::SeqCst), 0);
    connection.session.close().await;
    assert_eq!(
        fixture.state.deletes.load(Ordering::SeqCst),
        1,
        "DELETE on close"
    );
}

#[tokio::test]
async fn a_stateless_server_reports_list_changes_through_subscriptions_listen() {
    let fixture = transports::streamable_http(Era::Modern).await;
    let mut connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    // The listen stream opens in the background; a change made before it is acknowledged is
    // not delivered, so make the change again until one arrives (bounded).
    let mut event = None;
    for _ in 0..50 {
        text_of(&connection, "add_tool", serde_json::json!({})).await;
        if let Ok(received) =
            tokio::time::timeout(Duration::from_millis(200), connection.events.recv()).await
        {
            event = received;
            break;
        }
    }
    assert_eq!(event, Some(UpstreamEvent::ToolsChanged));
    connection.session.close().await;
}

#[tokio::test]
async fn a_server_that_refuses_subscriptions_listen_is_not_asked_again_and_again() {
    // The fixture announces tool list changes but implements no `subscriptions/listen`.
    let fixture = transports::streamable_http(Era::Modern).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    let asked = || fixture.state.listen_requests.load(Ordering::SeqCst);
    for _ in 0..100 {
        if asked() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(asked(), 1, "the listen stream is asked for once");
    // A refusal used to be asked again after 1 s, 2 s, 4 s, ... for as long as the session lived.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        asked(),
        1,
        "a refused listen is not asked again with the same filter"
    );
    // Calls are unaffected.
    assert_eq!(
        text_of(&connection, "echo", serde_json::json!({"message": "still"})).await,
        "still"
    );
    connection.session.close().await;
}

/// Records the log messages of a call, slowly, as a busy client link may.
#[derive(Default)]
struct SlowLogRecorder {
    logs: std::sync::Mutex<Vec<String>>,
}

// Logging: deprecated in 2026-07-28, still relayed for the servers that send it.
#[allow(deprecated)]
impl switchboard_upstream::InputResponder for SlowLogRecorder {
    fn answer(
        &self,
        _key: Option<&str>,
        _request: rmcp::model::InputRequest,
    ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, rmcp::model::ErrorData>>
    {
        Box::pin(async { Err(rmcp::model::ErrorData::invalid_request("no input", None)) })
    }

    fn log(&self, message: rmcp::model::LoggingMessageNotificationParam) {
        std::thread::sleep(Duration::from_millis(50));
        self.logs.lock().unwrap().push(message.data.to_string());
    }
}

/// A call's own log messages reach its caller, and before the call returns, even with another
/// call in flight and when each takes a while to deliver. rmcp hands every notification to the
/// handler in a task of its own while the response goes straight to the caller, so the last
/// one used to arrive too late and be lost; and the tag naming the call was read where rmcp
/// does not put it, so with two calls in flight neither got any. This holds for messages sent
/// on the call's response stream, where the server's order is known (here a stateless server);
/// a session server that sends them on its GET stream instead gives no order to keep.
#[tokio::test(flavor = "multi_thread")]
#[allow(deprecated)]
async fn a_calls_log_messages_reach_its_caller_before_its_result() {
    let fixture = transports::conformance_http(false).await;
    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    for round in 0..3 {
        let call = || async {
            let recorder = std::sync::Arc::new(SlowLogRecorder::default());
            let context = CallContext {
                responder: Some(recorder.clone()),
                log_level: Some(rmcp::model::LoggingLevel::Debug),
                ..CallContext::default()
            };
            connection
                .upstream
                .call_tool("test_tool_with_logging", None, &context)
                .await
                .unwrap();
            recorder.logs.lock().unwrap().clone()
        };
        let (first, second) = tokio::join!(call(), call());
        for logs in [first, second] {
            assert_eq!(logs.len(), 3, "round {round}: {logs:?}");
        }
        // Progress likewise: the last report goes out just before the response, and a stateless
        // server's reports all come on the call's stream, so no straggler wait is needed.
        let (sink, mut reports) = tokio::sync::mpsc::unbounded_channel();
        let context = CallContext {
            progress: Some(sink),
            ..CallContext::default()
        };
        connection
            .upstream
            .call_tool("test_tool_with_progress", None, &context)
            .await
            .unwrap();
        let mut seen = Vec::new();
        while let Ok(report) = reports.try_recv() {
            seen.push(report.progress);
        }
        assert_eq!(seen, [0.0, 50.0, 100.0], "round {round}");
    }
    connection.session.close().await;
}

#[tokio::test]
async fn input_required_is_answered_by_the_policy_and_retried_with_the_exact_state() {
    let fixture = transports::streamable_http(Era::Modern).await;
    let mut accepting = options();
    accepting.input_policy = switchboard_upstream::InputPolicy::AcceptDefaults;
    let connection = connect(&http(&fixture.url), None, &accepting)
        .await
        .unwrap();
    let text = text_of(&connection, "confirm", serde_json::json!({})).await;
    assert_eq!(
        text,
        r#"answers={"confirm":{"action":"accept","content":{"ok":true}}} state=opaque-state-1"#
    );
    connection.session.close().await;

    let connection = connect(&http(&fixture.url), None, &options())
        .await
        .unwrap();
    let text = text_of(&connection, "confirm", serde_json::json!({})).await;
    assert_eq!(
        text,
        r#"answers={"confirm":{"action":"decline"}} state=opaque-state-1"#
    );
    connection.session.close().await;
}
