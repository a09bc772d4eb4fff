//! The traces of a client's request: the trace context it came with, its span, and the mark
//! that it failed with the error its client is answered with (which error that is, is
//! [`crate::wire`]'s to say).

use rmcp::model::ErrorData;
use rmcp::service::{RequestContext, RoleServer};
use tracing::Instrument;

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
