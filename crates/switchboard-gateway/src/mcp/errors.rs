//! How failures reach MCP clients: a rate limit's refusal, a request the hub could not route,
//! an upstream's error; and the traces that mark a request failed.

use rmcp::model::{ErrorCode, ErrorData};
use rmcp::service::{RequestContext, RoleServer};
use switchboard_core::ServerId;
use switchboard_upstream::UpstreamError;
use tracing::Instrument;

/// The JSON-RPC error code of a call a rate limit refused (implementation-defined server
/// error range; 429 in spirit).
pub const RATE_LIMITED: i32 = -32029;

/// A call refused by a rate limit: the limit in words, with `retry_after_ms` and `limit` as data.
pub(crate) fn rate_limited(error: switchboard_hub::HubError) -> ErrorData {
    let data = match &error {
        switchboard_hub::HubError::RateLimited {
            limit, retry_after, ..
        } => Some(serde_json::json!({
            "retry_after_ms": retry_after.as_millis().max(1),
            "limit": limit.to_string(),
        })),
        _ => None,
    };
    ErrorData::new(ErrorCode(RATE_LIMITED), error.to_string(), data)
}

/// A request the hub could not route to its server, as the client is told: a server that is
/// not connected right now (reconnecting, waiting for a sign-in) is named with its state and
/// the reason (also as `data`), so the client knows the tool exists and may be tried again; a
/// tool that is off is the caller's mistake.
pub(crate) fn not_routed(error: switchboard_hub::HubError) -> ErrorData {
    use switchboard_hub::HubError;
    match &error {
        HubError::NotConnected {
            server,
            state,
            reason,
        } => ErrorData::internal_error(
            error.to_string(),
            Some(serde_json::json!({
                "server": server,
                "state": state,
                "reason": reason,
            })),
        ),
        HubError::RateLimited { .. } => rate_limited(error),
        HubError::ToolDisabled { .. }
        | HubError::UnknownServer(_)
        | HubError::CallerRefused { .. } => ErrorData::invalid_params(error.to_string(), None),
        _ => ErrorData::internal_error(error.to_string(), None),
    }
}

/// An upstream failure as the downstream client sees it: the server's own JSON-RPC errors keep
/// their code; everything else is an internal error naming the server.
pub(super) fn upstream_error(server: &ServerId, error: UpstreamError) -> ErrorData {
    match error {
        UpstreamError::Rpc {
            code,
            message,
            data,
        } => ErrorData::new(ErrorCode(code), message, data),
        other => ErrorData::internal_error(format!("server '{server}': {other}"), None),
    }
}

/// The W3C trace context a client's request came with (its `_meta`, or its HTTP headers).
pub(super) fn incoming_trace(
    context: &RequestContext<RoleServer>,
) -> Option<switchboard_telemetry::TraceContext> {
    let headers = context
        .extensions
        .get::<axum::http::request::Parts>()
        .map(|parts| &parts.headers);
    switchboard_telemetry::TraceContext::incoming(Some(&context.meta.0), headers)
}

/// Runs a client's request in its span (see [`switchboard_telemetry::server_span`]), boxed so
/// that its future stays off the stack of whoever polls it, and marks the span failed with the
/// error the client is answered with.
pub(super) async fn in_span<T>(
    span: &tracing::Span,
    work: impl std::future::Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let result = Box::pin(work).instrument(span.clone()).await;
    if let Err(error) = &result {
        trace_error(span, error);
    }
    result
}

/// Marks `span` failed with the error a client is answered with.
pub(super) fn trace_error(span: &tracing::Span, error: &ErrorData) {
    switchboard_telemetry::record_error(span, &error.code.0.to_string(), Some(error.code.0));
}
