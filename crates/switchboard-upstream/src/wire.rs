//! Decoding JSON-RPC messages that arrive as text (legacy SSE events, WebSocket frames).
//!
//! A message that does not parse is never dropped silently: if it carries a request id, the waiting
//! request gets a clear local error at once instead of hanging until its timeout.

use rmcp::model::{
    ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};

/// Decodes one server message; malformed replies to a request become an error for that request.
pub fn decode_server_message(text: &str, server: &str) -> Option<ServerJsonRpcMessage> {
    match serde_json::from_str::<ServerJsonRpcMessage>(text) {
        Ok(message) => Some(message),
        Err(parse_error) => {
            let id = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|value| value.get("id").cloned())
                .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
            tracing::warn!(server, error = %parse_error, "ignored a malformed message from the server");
            id.map(|id| {
                JsonRpcMessage::Error(JsonRpcError {
                    jsonrpc: Default::default(),
                    id: Some(id),
                    error: ErrorData::new(
                        ErrorCode::INTERNAL_ERROR,
                        format!("Switchboard could not parse the server's reply: {parse_error}"),
                        None,
                    ),
                })
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_replies_with_an_id_become_errors_for_that_request() {
        let message = decode_server_message(
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":1}]}}"#,
            "s",
        );
        // Untyped results fall through to a custom result in rmcp; genuinely broken JSON does not.
        assert!(message.is_some());
        let broken = decode_server_message(r#"{"jsonrpc":"2.0","id":7,"result":"#, "s");
        assert!(broken.is_none(), "unparseable text has no id to answer");
        let wrong_shape =
            decode_server_message(r#"{"jsonrpc":"2.0","id":"a","result":1,"error":{}}"#, "s");
        match wrong_shape {
            Some(JsonRpcMessage::Error(e)) => {
                assert_eq!(e.id, Some(RequestId::String("a".into())));
                assert!(e.error.message.contains("could not parse"));
            }
            other => panic!("expected an error, got {other:?}"),
        }
    }
}
