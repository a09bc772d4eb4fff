//! The aggregated server over Streamable HTTP, at `/mcp`.
//!
//! rmcp's `StreamableHttpService` serves both shapes on the one path: requests that carry
//! 2026-07-28 `_meta` are answered statelessly, `initialize` opens a legacy session (with its
//! GET stream, resumable SSE and DELETE). Host and Origin are checked by the router's
//! DNS-rebinding guard before a request gets here, so rmcp's own host list is left open.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{AggregateServer, Shared};

/// The path of the aggregated MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// Largest request body accepted on `/mcp` (a JSON-RPC message); larger ones get 413.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The Streamable HTTP service; every session and stream ends when `stop` is cancelled.
pub fn service(
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> StreamableHttpService<AggregateServer, LocalSessionManager> {
    // A request answered by one message gets it as plain JSON; one that streams progress or
    // asks for input first gets SSE. JSON spares each plain call an SSE stream and its task.
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_allowed_hosts(Vec::<String>::new())
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(stop);
    StreamableHttpService::new(
        move || Ok(AggregateServer::new(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Refuses POST bodies that are too large (413) or not JSON (400 with a JSON-RPC parse error)
/// before they reach rmcp, which would answer a parse failure with 415. Runs before rmcp reads
/// the body, which it then gets back unchanged.
/// A plain stateless `tools/call` of a stateless server's tool is then relayed directly
/// (`direct`); everything else goes on to rmcp.
pub async fn check_body(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body exceeds {MAX_BODY_BYTES} bytes\n"),
            )
                .into_response();
        }
    };
    if let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32700, "message": format!("Parse error: {error}")},
        });
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
    }
    if let Some(response) = super::direct::try_call(&shared, &parts, &bytes).await {
        return response;
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
