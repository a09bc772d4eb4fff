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
    unavailable("Switchboard is shutting down; try again shortly")
}

/// 503 with `Retry-After: 5` and a JSON-RPC error saying `reason`: what every route answers when
/// something it needs (the daemon, the store, a workspace) cannot serve right now. JSON-RPC's
/// shape, so MCP clients show the reason; an admin API client reads `error.message`.
pub(crate) fn unavailable(reason: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": reason},
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(axum::http::header::RETRY_AFTER, "5")],
        axum::Json(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unavailable_is_a_503_to_retry_with_a_json_rpc_error_naming_the_reason() {
        let response = unavailable("the store does not answer");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[axum::http::header::RETRY_AFTER], "5");
        let body = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["error"]["code"], -32000);
        assert_eq!(body["error"]["message"], "the store does not answer");
    }
}
