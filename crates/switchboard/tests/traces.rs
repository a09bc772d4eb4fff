//! Traces of calls: `serve --otlp-endpoint` exports one trace per call (the client's request,
//! its admission, the exchange with the server) to an OTLP collector, and servers are given
//! the exchange's W3C trace context; without a collector the client's context reaches the
//! server unchanged. The collector here is a small OTLP/HTTP receiver decoding what it is sent
//! with the protocol's own message definitions.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use serde_json::{Value, json};
use switchboard_fixtures::{Era, transports};

/// The client's own span: its trace id and span id.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn client_traceparent() -> String {
    format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")
}

/// An OTLP/HTTP collector on loopback keeping every span it is sent.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Collector {
    async fn start() -> Self {
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let request = <ExportTraceServiceRequest as prost::Message>::decode(body)
                        .expect("the exporter sends OTLP protobuf");
                    let mut kept = kept.lock().unwrap();
                    for resource in request.resource_spans {
                        for scope in resource.scope_spans {
                            kept.extend(scope.spans);
                        }
                    }
                    // An empty ExportTraceServiceResponse.
                    (
                        [("content-type", "application/x-protobuf")],
                        Vec::<u8>::new(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, spans }
    }

    /// The spans of trace `trace` (hex), once `count` of them have come (within 20 s).
    async fn trace(&self, trace: &str, count: usize) -> Vec<Span> {
        for _ in 0..400 {
            let found: Vec<Span> = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .filter(|span| hex(&span.trace_id) == trace)
                .cloned()
                .collect();
            if found.len() >= count {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let names: Vec<String> = self
            .spans
            .lock()
            .unwrap()
            .iter()
            .map(|span| format!("{} in {}", span.name, hex(&span.trace_id)))
            .collect();
        panic!("trace {trace} never had {count} spans; the collector has {names:?}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?;
    match value.value.as_ref()? {
        AnyValue::StringValue(text) => Some(text.clone()),
        AnyValue::IntValue(number) => Some(number.to_string()),
        other => Some(format!("{other:?}")),
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
            panic!("no span {name:?} among {names:?}")
        })
}

fn failed(span: &Span) -> bool {
    span.status
        .as_ref()
        .is_some_and(|status| status.code == StatusCode::Error as i32)
}

/// A 2026-07-28 `tools/call` of `tool` on the daemon at `port`, with `meta` added to the
/// request's `_meta` and `headers` to its HTTP headers; the JSON-RPC answer.
async fn call(port: u16, id: u64, tool: &str, meta: Value, headers: &[(&str, &str)]) -> Value {
    common::call_through_daemon_meta(port, id, tool, meta, headers).await
}

/// A daemon on `dir` serving a stateless 2026-07-28 fixture (`modern`: a client of that era
/// takes the short path to it) and a fixture with sessions (`legacy`: the full path), with
/// `serve_options`; its port once both are connected.
async fn daemon(
    dir: &Path,
    serve_options: &[&str],
) -> (
    tokio::process::Child,
    u16,
    transports::RunningFixture,
    transports::RunningFixture,
) {
    let modern = transports::streamable_http(Era::Modern).await;
    let legacy = transports::streamable_http(Era::Legacy).await;
    for (id, url) in [("modern", &modern.url), ("legacy", &legacy.url)] {
        let added = common::switchboard(dir, &["server", "add", id, url]);
        assert!(added.status.success(), "{}", common::text(&added));
    }
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["serve", "--listen", &listen];
    args.extend_from_slice(serve_options);
    let child = common::command(dir, &args)
        // Spans leave in batches every 100 ms rather than 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::await_health(port).await;
    for id in ["modern", "legacy"] {
        common::wait_for_state(port, id, "connected").await;
    }
    (child, port, modern, legacy)
}

fn last_trace(fixture: &transports::RunningFixture) -> (Option<String>, Option<String>) {
    fixture.state.last_call_trace.lock().unwrap().clone()
}

/// Checks the trace of one call of `tool` (`server`'s `upstream_tool`) made from the client's
/// span, and that the server was given the exchange's span: in `_meta`, and in the HTTP header.
fn check_trace(spans: &[Span], tool: &str, server: &str, seen: (Option<String>, Option<String>)) {
    let request = named(spans, &format!("tools/call {tool}"));
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(
        hex(&request.parent_span_id),
        CLIENT_SPAN,
        "the request is a child of the client's span"
    );
    assert_eq!(
        attribute(request, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        attribute(request, "gen_ai.tool.name").as_deref(),
        Some(tool)
    );
    let admission = named(spans, "admission");
    assert_eq!(admission.parent_span_id, request.span_id);
    let exchange = named(spans, "tools/call echo");
    assert_eq!(exchange.kind, SpanKind::Client as i32);
    assert_eq!(exchange.parent_span_id, request.span_id);
    assert_eq!(
        attribute(exchange, "switchboard.server").as_deref(),
        Some(server)
    );
    assert!(!failed(request) && !failed(exchange));
    // Nothing of the call's content is in the trace.
    for span in spans {
        for kv in &span.attributes {
            let value = format!("{:?}", kv.value);
            assert!(
                !value.contains("\"hi\""),
                "{} carries an argument",
                span.name
            );
        }
    }
    let sent = format!("00-{CLIENT_TRACE}-{}-01", hex(&exchange.span_id));
    assert_eq!(seen.1.as_deref(), Some(sent.as_str()), "_meta.traceparent");
    assert_eq!(
        seen.0.as_deref(),
        Some(sent.as_str()),
        "the traceparent header"
    );
}

#[tokio::test]
async fn a_call_is_one_trace_from_the_clients_span_through_switchboard_to_the_server() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, port, modern, legacy) =
        daemon(dir.path(), &["--otlp-endpoint", &collector.url]).await;

    // The short path, the client's context in `_meta`.
    let answer = call(
        port,
        1,
        "modern__echo",
        json!({"traceparent": client_traceparent()}),
        &[],
    )
    .await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    let spans = collector.trace(CLIENT_TRACE, 3).await;
    check_trace(&spans, "modern__echo", "modern", last_trace(&modern));

    // The full path, the client's context in its HTTP headers, in a trace of its own.
    collector.spans.lock().unwrap().clear();
    let answer = call(
        port,
        2,
        "legacy__echo",
        json!({}),
        &[("traceparent", &client_traceparent())],
    )
    .await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    let spans = collector.trace(CLIENT_TRACE, 3).await;
    check_trace(&spans, "legacy__echo", "legacy", last_trace(&legacy));

    // A tool's failure marks its request and its exchange failed.
    collector.spans.lock().unwrap().clear();
    let answer = call(
        port,
        3,
        "modern__fail",
        json!({"traceparent": client_traceparent()}),
        &[],
    )
    .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let spans = collector.trace(CLIENT_TRACE, 3).await;
    for name in ["tools/call modern__fail", "tools/call fail"] {
        let span = named(&spans, name);
        assert!(failed(span), "{name} is marked failed");
        assert_eq!(attribute(span, "error.type").as_deref(), Some("tool_error"));
    }

    // A call that comes with no context, or a malformed one, starts a trace of its own.
    collector.spans.lock().unwrap().clear();
    call(
        port,
        4,
        "legacy__echo",
        json!({"traceparent": "00-not-a-trace-01"}),
        &[],
    )
    .await;
    let (_, sent) = last_trace(&legacy);
    let sent = sent.expect("the server is given the exchange's context");
    let trace = sent.split('-').nth(1).unwrap().to_owned();
    assert_ne!(trace, CLIENT_TRACE);
    let spans = collector.trace(&trace, 3).await;
    let request = named(&spans, "tools/call legacy__echo");
    assert!(request.parent_span_id.is_empty(), "a root span");
}

#[tokio::test]
async fn without_a_collector_the_clients_trace_context_reaches_the_server_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, port, modern, legacy) = daemon(dir.path(), &[]).await;
    let parent = client_traceparent();
    for (id, tool, fixture) in [(1, "modern__echo", &modern), (2, "legacy__echo", &legacy)] {
        call(
            port,
            id,
            tool,
            json!({"traceparent": parent, "tracestate": "vendor=1"}),
            &[],
        )
        .await;
        let (header, meta) = last_trace(fixture);
        assert_eq!(meta.as_deref(), Some(parent.as_str()), "{tool}: _meta");
        assert_eq!(header.as_deref(), Some(parent.as_str()), "{tool}: header");
    }
    // A malformed context is not passed on by the full path, which sends only what it checked.
    call(
        port,
        3,
        "legacy__echo",
        json!({"traceparent": "00-not-a-trace-01"}),
        &[],
    )
    .await;
    assert_eq!(last_trace(&legacy), (None, None));
}

#[test]
fn an_endpoint_that_is_no_http_url_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = common::switchboard(
        dir.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--otlp-endpoint",
            "collector:4318",
        ],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OTLP endpoint 'collector:4318'"),
        "{stderr}"
    );
}
