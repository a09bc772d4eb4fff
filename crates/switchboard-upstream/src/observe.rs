//! Telling someone how each tool call ended, whichever way it went to its server.
//!
//! Calls reach a server two ways: through its session ([`crate::Upstream::call_tool`]) or as
//! one HTTP exchange ([`crate::Upstream::call_tool_direct`], whose answer may still be
//! streaming when the call returns). Both report here once the call has its outcome, so metrics
//! and the console's live calls see every call once, with its full duration.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::model::{CallToolResult, ServerJsonRpcMessage, ServerResult};
use switchboard_core::{CallOrigin, ServerId};

use crate::error::UpstreamError;

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// A result.
    Ok,
    /// A result with `isError`: the tool ran and reported a failure.
    ToolError,
    /// A JSON-RPC error from the server.
    RpcError,
    /// No answer within the tool-call timeout.
    Timeout,
    /// The caller cancelled it.
    Cancelled,
    /// The server could not be reached, broke the exchange or was too busy.
    Failed,
}

impl CallOutcome {
    /// Every outcome, in the order of their discriminants.
    pub const ALL: [Self; 6] = [
        Self::Ok,
        Self::ToolError,
        Self::RpcError,
        Self::Timeout,
        Self::Cancelled,
        Self::Failed,
    ];

    /// Its name, as metrics label it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::RpcError => "rpc_error",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    /// The outcome of a call that returned `result`.
    pub fn of(result: &Result<CallToolResult, UpstreamError>) -> Self {
        match result {
            Ok(result) if result.is_error == Some(true) => Self::ToolError,
            Ok(_) => Self::Ok,
            Err(error) => Self::of_error(error),
        }
    }

    /// The outcome of a call that failed with `error`.
    pub fn of_error(error: &UpstreamError) -> Self {
        match error {
            UpstreamError::Rpc { .. } => Self::RpcError,
            UpstreamError::Timeout(_) => Self::Timeout,
            UpstreamError::Cancelled => Self::Cancelled,
            _ => Self::Failed,
        }
    }

    /// The outcome a server's message settles, if it is the call's answer.
    fn of_message(message: &ServerJsonRpcMessage) -> Option<Self> {
        match message {
            ServerJsonRpcMessage::Response(response) => Some(match &response.result {
                ServerResult::CallToolResult(result) if result.is_error == Some(true) => {
                    Self::ToolError
                }
                _ => Self::Ok,
            }),
            ServerJsonRpcMessage::Error(_) => Some(Self::RpcError),
            _ => None,
        }
    }
}

/// The method of `request` and its target as traces name them: the tool or prompt.
pub(crate) fn traced_method(request: &rmcp::model::ClientRequest) -> (&str, Option<&str>) {
    use rmcp::model::ClientRequest;
    match request {
        ClientRequest::CallToolRequest(call) => (request.method(), Some(&call.params.name)),
        ClientRequest::GetPromptRequest(get) => (request.method(), Some(&get.params.name)),
        _ => (request.method(), None),
    }
}

/// Marks an exchange's span failed when `result` is a failure: a JSON-RPC error by its code, a
/// tool's own error as `tool_error`, anything else by its outcome's name.
pub(crate) fn trace_outcome(span: &tracing::Span, result: &Result<ServerResult, UpstreamError>) {
    match result {
        Ok(ServerResult::CallToolResult(result)) if result.is_error == Some(true) => {
            switchboard_telemetry::record_error(span, CallOutcome::ToolError.as_str(), None);
        }
        Ok(_) => {}
        Err(error) => trace_error(span, error),
    }
}

/// Marks an exchange's span failed with `error`.
pub(crate) fn trace_error(span: &tracing::Span, error: &UpstreamError) {
    match error {
        UpstreamError::Rpc { code, .. } => {
            switchboard_telemetry::record_error(span, &code.to_string(), Some(*code));
        }
        error => {
            switchboard_telemetry::record_error(span, CallOutcome::of_error(error).as_str(), None);
        }
    }
}

/// Marks an exchange's span failed when the server's `message` is its error, or a result with
/// `isError`.
pub(crate) fn trace_message(span: &tracing::Span, message: &ServerJsonRpcMessage) {
    match message {
        ServerJsonRpcMessage::Error(error) => {
            let code = error.error.code.0;
            switchboard_telemetry::record_error(span, &code.to_string(), Some(code));
        }
        ServerJsonRpcMessage::Response(response) => {
            if let ServerResult::CallToolResult(result) = &response.result
                && result.is_error == Some(true)
            {
                switchboard_telemetry::record_error(span, CallOutcome::ToolError.as_str(), None);
            }
        }
        _ => {}
    }
}

/// `messages`, holding `span` open until the stream ends or is dropped, and marking it as the
/// answer or a failure says.
pub(crate) fn trace_stream(
    span: tracing::Span,
    messages: BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>>,
) -> BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>> {
    messages
        .map(move |item| {
            match &item {
                Ok(message) => trace_message(&span, message),
                Err(error) => trace_error(&span, error),
            }
            item
        })
        .boxed()
}

/// One finished tool call (borrowed: reporting a call allocates nothing).
#[derive(Debug, Clone, Copy)]
pub struct CallRecord<'a> {
    /// The server.
    pub server: &'a ServerId,
    /// The tool, by its name at the server.
    pub tool: &'a str,
    /// How it ended.
    pub outcome: CallOutcome,
    /// From the call's start to its outcome (its answer read to the end).
    pub elapsed: Duration,
    /// Where the call came in (its door, endpoint, client, arguments), when its caller said;
    /// shared, so that an observer keeps it without copying it.
    pub origin: Option<&'a Arc<CallOrigin>>,
}

/// Who hears of every finished call. Called on the call's own task: keep it quick.
pub trait CallObserver: Send + Sync + std::fmt::Debug + 'static {
    /// A call ended.
    fn finished(&self, call: CallRecord<'_>);
}

/// The observer of one server's calls, and when a call started.
#[derive(Clone)]
pub(crate) struct CallWatch {
    observer: Arc<dyn CallObserver>,
    server: ServerId,
}

impl CallWatch {
    pub(crate) fn new(observer: Arc<dyn CallObserver>, server: ServerId) -> Self {
        Self { observer, server }
    }

    pub(crate) fn report(
        &self,
        tool: &str,
        outcome: CallOutcome,
        started: Instant,
        origin: Option<&Arc<CallOrigin>>,
    ) {
        self.observer.finished(CallRecord {
            server: &self.server,
            tool,
            outcome,
            elapsed: started.elapsed(),
            origin,
        });
    }

    /// `messages`, reporting the call when its answer passes, when the stream fails, or when it
    /// is dropped before either (the caller went away: cancelled).
    pub(crate) fn follow(
        self,
        tool: String,
        started: Instant,
        origin: Option<Arc<CallOrigin>>,
        messages: BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>>,
    ) -> BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>> {
        /// Reports once: on the answer, on an error, or when dropped unreported.
        struct Pending {
            watch: Option<CallWatch>,
            tool: String,
            started: Instant,
            origin: Option<Arc<CallOrigin>>,
        }
        impl Pending {
            fn settle(&mut self, outcome: CallOutcome) {
                if let Some(watch) = self.watch.take() {
                    watch.report(&self.tool, outcome, self.started, self.origin.as_ref());
                }
            }
        }
        impl Drop for Pending {
            fn drop(&mut self) {
                self.settle(CallOutcome::Cancelled);
            }
        }
        let mut pending = Pending {
            watch: Some(self),
            tool,
            started,
            origin,
        };
        messages
            .map(move |item| {
                match &item {
                    Ok(message) => {
                        if let Some(outcome) = CallOutcome::of_message(message) {
                            pending.settle(outcome);
                        }
                    }
                    Err(error) => pending.settle(CallOutcome::of_error(error)),
                }
                item
            })
            .boxed()
    }
}

/// The outcome of a direct reply that is one message.
pub(crate) fn outcome_of_message(message: &ServerJsonRpcMessage) -> CallOutcome {
    CallOutcome::of_message(message).unwrap_or(CallOutcome::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_is_listed_at_its_own_index_with_its_own_name() {
        let names: std::collections::BTreeSet<_> =
            CallOutcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(names.len(), CallOutcome::ALL.len());
        for (index, outcome) in CallOutcome::ALL.iter().enumerate() {
            assert_eq!(*outcome as usize, index, "{outcome:?}");
        }
    }
}
