//! How the admin API answers an error: its status and a JSON body with a message. Which status
//! an error type gets is [`crate::wire`]'s to say.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An admin API error: answered with its status and `{"error": "<message>"}` as the body.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl ToString) -> Self {
        Self {
            status,
            message: message.to_string(),
        }
    }

    /// What went wrong, in plain words.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({"error": self.message})),
        )
            .into_response()
    }
}

/// [`ApiError`] as a response.
pub(crate) fn api_error(status: StatusCode, message: impl ToString) -> Response {
    ApiError::new(status, message).into_response()
}

/// The answer to a request that arrives while the daemon shuts down: 503 with a JSON-RPC error,
/// so MCP clients show a reason and may retry against the next instance.
pub(crate) fn shutting_down() -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": "Switchboard is shutting down; try again shortly"},
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(axum::http::header::RETRY_AFTER, "5")],
        axum::Json(body),
    )
        .into_response()
}
