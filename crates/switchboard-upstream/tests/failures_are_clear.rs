//! Broken servers give clear, per-server errors and never a panic.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::{Era, chaos, transports};
use switchboard_upstream::{CallContext, ConnectOptions, UpstreamError, connect};

fn http(url: &str, request_timeout: Duration) -> ServerDefinition {
    let mut def = ServerDefinition::new(
        ServerId::new("broken").unwrap(),
        TransportSpec::from_url(url, vec![]).unwrap(),
    );
    def.timeouts.request = request_timeout;
    def
}

async fn connect_error(def: &ServerDefinition) -> UpstreamError {
    match connect(def, None, &ConnectOptions::new("test")).await {
        Ok(_) => panic!("connecting to {} should fail", def.transport.target()),
        Err(error) => {
            eprintln!("{}: {error}", def.transport.target());
            error
        }
    }
}

#[tokio::test]
async fn connection_refused_says_the_server_cannot_be_reached() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let error = connect_error(&http(
        &format!("http://127.0.0.1:{port}/mcp"),
        Duration::from_secs(5),
    ))
    .await;
    assert!(matches!(error, UpstreamError::Unreachable(_)), "{error}");
    assert!(
        error.to_string().contains("cannot reach the server"),
        "{error}"
    );
    assert!(
        error.to_string().to_lowercase().contains("refused"),
        "{error}"
    );
}

#[tokio::test]
async fn tls_failure_is_reported_as_unreachable() {
    // An https URL pointed at a plain-HTTP server: the TLS handshake fails.
    let fixture = transports::streamable_http(Era::Legacy).await;
    let url = fixture.url.replace("http://", "https://");
    let error = connect_error(&http(&url, Duration::from_secs(5))).await;
    assert!(matches!(error, UpstreamError::Unreachable(_)), "{error}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let fixture = chaos::hang().await;
    let started = Instant::now();
    let error = connect_error(&http(&fixture.url, Duration::from_millis(500))).await;
    assert!(matches!(error, UpstreamError::Timeout(_)), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by the configured timeout"
    );
}

#[tokio::test]
async fn malformed_json_rpc_is_a_clear_error() {
    let fixture = chaos::garbage_json().await;
    let error = connect_error(&http(&fixture.url, Duration::from_secs(5))).await;
    let text = error.to_string();
    assert!(
        text.contains("not a JSON-RPC message") || text.contains("no MCP transport"),
        "{text}"
    );
}

#[tokio::test]
async fn a_broken_sse_stream_is_a_clear_error() {
    let fixture = chaos::broken_sse().await;
    let error = connect_error(&http(&fixture.url, Duration::from_secs(5))).await;
    assert!(!error.to_string().is_empty());
    assert!(
        !matches!(error, UpstreamError::Timeout(_)),
        "fails fast, not by timeout: {error}"
    );
}

#[tokio::test]
async fn a_server_error_status_is_reported_with_its_code() {
    let fixture = chaos::status(503).await;
    let error = connect_error(&http(&fixture.url, Duration::from_secs(5))).await;
    assert!(error.to_string().contains("503"), "{error}");
}

#[tokio::test]
async fn a_server_that_moved_is_reported_with_where_it_went() {
    let fixture = chaos::moved("http://127.0.0.1:9/new-home/mcp").await;
    let error = connect_error(&http(&fixture.url, Duration::from_secs(5))).await;
    let text = error.to_string();
    assert!(
        text.contains("308") && text.contains("it redirects to http://127.0.0.1:9/new-home/mcp"),
        "{text}"
    );
}

#[tokio::test]
async fn a_missing_stdio_command_says_it_cannot_start() {
    let def = ServerDefinition::new(
        ServerId::new("ghost").unwrap(),
        TransportSpec::stdio(
            "/nonexistent/switchboard-no-such-server",
            vec![],
            vec![],
            None,
        )
        .unwrap(),
    );
    let error = connect_error(&def).await;
    assert!(matches!(error, UpstreamError::Spawn { .. }), "{error}");
}

#[tokio::test]
async fn a_stdio_server_that_dies_mid_call_fails_the_call_promptly() {
    let binary = switchboard_fixtures::stdio_fixture_binary();
    let def = ServerDefinition::new(
        ServerId::new("crashy").unwrap(),
        TransportSpec::stdio(
            binary.display().to_string(),
            vec!["legacy".into()],
            vec![],
            None,
        )
        .unwrap(),
    );
    let connection = connect(&def, None, &ConnectOptions::new("test"))
        .await
        .unwrap();
    let started = Instant::now();
    let error = connection
        .upstream
        .call_tool("crash", None, &CallContext::default())
        .await
        .unwrap_err();
    assert!(matches!(error, UpstreamError::Closed), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10), "not a timeout");
    let reason = connection
        .session
        .run_until_closed(std::future::pending())
        .await;
    let _ = reason;
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    let fixture = chaos::cross_origin_endpoint().await;
    let error = connect_error(&http(&fixture.url, Duration::from_secs(5))).await;
    assert!(error.to_string().contains("different origin"), "{error}");
}

#[tokio::test]
async fn a_refused_websocket_upgrade_keeps_its_status() {
    let unauthorized = chaos::status(401).await;
    let url = unauthorized.url.replace("http://", "ws://");
    let error = connect_error(&http(&url, Duration::from_secs(5))).await;
    assert!(matches!(error, UpstreamError::AuthRequired(_)), "{error}");

    let missing = chaos::status(404).await;
    let url = missing.url.replace("http://", "ws://");
    let error = connect_error(&http(&url, Duration::from_secs(5))).await;
    assert!(
        matches!(error, UpstreamError::HttpStatus { status: 404, .. }),
        "{error}"
    );
}

/// A URL that serves a web page (a product's home page, a docs page pasted by mistake) is
/// told apart from a broken server: the error says an HTML page answered, not MCP.
#[tokio::test]
async fn a_url_serving_a_web_page_says_it_is_no_mcp_endpoint() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut buffer).await;
                let page = "<!doctype html><html><body>Welcome</body></html>";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    let error = connect_error(&http(
        &format!("http://127.0.0.1:{port}/"),
        Duration::from_secs(5),
    ))
    .await;
    let text = error.to_string();
    assert!(text.contains("HTML page"), "{text}");
    assert!(!text.contains("Some("), "no Rust debug text: {text}");
    serving.abort();
}
