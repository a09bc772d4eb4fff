//! A stateless server's `tools/call` sent as one HTTP exchange, outside the session machinery.
//!
//! A 2026-07-28 server keeps no session: every request is a POST that carries all it needs and
//! is answered on its own response. Sending a relayed call there through rmcp's client (a worker
//! task, a channel and a progress subscription per request, the input rounds) costs several
//! times what relaying the message itself does, so for the plain case the aggregated server
//! hands the call to [`DirectRoute`]: the request goes out as it came (the caller maps the tool
//! name), and the server's messages come back as it sent them, for the caller to pass on.
//! Progress tokens, log levels, client capabilities, `input_required` and `requestState` all
//! belong to the downstream client and travel untouched.
//!
//! What keeps every other call safe applies here too: the session's request slots, the
//! tool-call timeout (reset by each progress report, capped at five times), OAuth (the same
//! [`StatusAwareHttpClient`]), and the bounds on bodies and events. Cancelling is dropping: the
//! response stream closes, which a 2026-07-28 server takes as the cancellation. A streamed reply
//! is read by a task of its own, so a caller that stops reading cannot hold the call's slot past
//! its timeout.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, ClientRequest, JsonRpcMessage, JsonRpcRequest, ServerJsonRpcMessage,
    ServerNotification,
};
use rmcp::transport::streamable_http_client::{StreamableHttpError, StreamableHttpPostResponse};
use tokio::time::Instant;

use crate::error::UpstreamError;
use crate::http_client::{HttpFailure, StatusAwareHttpClient};
use crate::limits::CallLimiter;

/// How many times its timeout a call may run in all, however often progress resets the timer
/// (the same cap as calls through the session).
const MAX_TOTAL_TIMEOUTS: u32 = 5;

/// What a server answered to a direct call, as it sent it.
#[expect(
    clippy::large_enum_variant,
    reason = "one per call, moved once to the caller; boxing the message would only add an \
              allocation to every call"
)]
pub enum DirectReply {
    /// The response (result or error) alone.
    Message(ServerJsonRpcMessage),
    /// Messages in order: notifications about the call (progress, log messages), then the
    /// response. The stream ends after the response, or with an error when the server stops
    /// before it.
    Stream(BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>>),
}

/// Where a stateless HTTP server's calls go directly.
#[derive(Clone)]
pub(crate) struct DirectRoute {
    client: StatusAwareHttpClient,
    url: Arc<url::Url>,
}

impl DirectRoute {
    pub(crate) fn new(client: StatusAwareHttpClient, url: url::Url) -> Self {
        Self {
            client,
            url: Arc::new(url),
        }
    }

    /// Sends `request` (its tool name already the server's own), holding a slot of `limiter`
    /// until the reply is complete, within `timeout` (reset by progress).
    pub(crate) async fn call_tool(
        &self,
        request: JsonRpcRequest<CallToolRequest>,
        limiter: &CallLimiter,
        timeout: Duration,
    ) -> Result<DirectReply, UpstreamError> {
        let slot = limiter.acquire(timeout).await?;
        let headers = standard_headers(&request)?;
        let message = JsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc: request.jsonrpc,
            id: request.id,
            request: ClientRequest::CallToolRequest(request.request),
        });
        let started = Instant::now();
        let cap = started + timeout.saturating_mul(MAX_TOTAL_TIMEOUTS);
        let sent = self.client.post(
            &self.url,
            message,
            None,
            None,
            headers,
            crate::sse::MAX_SSE_EVENT_BYTES,
            false,
        );
        let reply = tokio::time::timeout(timeout, sent)
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))?
            .map_err(http_error)?;
        match reply {
            StreamableHttpPostResponse::Json(message, _) => Ok(DirectReply::Message(message)),
            StreamableHttpPostResponse::Sse(events, _) => {
                let deadline = (started + timeout).min(cap);
                let mut reading = Reading {
                    events,
                    deadline,
                    cap,
                    timeout,
                    done: false,
                    _slot: slot,
                };
                // The caller is waiting for this first message, so it is read here; most
                // replies are that one message, and need no reading task.
                match reading.next().await {
                    Some(Ok(first)) if reading.done => Ok(DirectReply::Message(first)),
                    Some(Ok(first)) => Ok(DirectReply::Stream(pump(first, reading, timeout))),
                    Some(Err(error)) => Err(error),
                    None => Err(UpstreamError::Closed),
                }
            }
            _ => Err(UpstreamError::Protocol(
                "the server accepted the call without answering it".into(),
            )),
        }
    }
}

/// Messages a streamed reply may have read ahead of its caller.
const READ_AHEAD: usize = 16;

/// `first`, then the rest of the reply, read in a task of its own so its timeouts run whether
/// or not the caller keeps up; a caller that takes no message for `timeout` is given up on (the
/// reading ends, its request slot is freed and the server's stream closed), as is one that
/// drops the stream.
fn pump(
    first: ServerJsonRpcMessage,
    mut reading: Reading,
    timeout: Duration,
) -> BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(READ_AHEAD);
    tokio::spawn(async move {
        loop {
            // A caller that is gone cancels the call at once, even while the server is silent.
            let message = tokio::select! {
                message = reading.next() => message,
                () = sender.closed() => return,
            };
            let Some(message) = message else { return };
            match tokio::time::timeout(timeout, sender.send(message)).await {
                Ok(Ok(())) => {}
                _ => return,
            }
        }
    });
    let rest = futures::stream::unfold(receiver, |mut receiver| async move {
        let message = receiver.recv().await?;
        Some((message, receiver))
    });
    futures::stream::iter([Ok(first)]).chain(rest).boxed()
}

/// The SEP-2243 headers of a `tools/call` (`Mcp-Method`, `Mcp-Name`) and its protocol version.
/// Callers send only names that travel as plain header values.
fn standard_headers(
    request: &JsonRpcRequest<CallToolRequest>,
) -> Result<HashMap<HeaderName, HeaderValue>, UpstreamError> {
    let version = request
        .request
        .extensions
        .get::<rmcp::model::RequestMetaObject>()
        .and_then(|meta| meta.protocol_version())
        .ok_or_else(|| UpstreamError::Protocol("a direct call names no protocol version".into()))?;
    let value = |text: &str| {
        HeaderValue::from_str(text)
            .map_err(|_| UpstreamError::Protocol(format!("'{text}' cannot be an HTTP header")))
    };
    Ok(HashMap::from([
        (
            HeaderName::from_static("mcp-protocol-version"),
            value(version.as_str())?,
        ),
        (
            HeaderName::from_static("mcp-method"),
            HeaderValue::from_static("tools/call"),
        ),
        (
            HeaderName::from_static("mcp-name"),
            value(&request.request.params.name)?,
        ),
    ]))
}

/// Reads a call's SSE response into messages, bounded in time.
struct Reading {
    events: BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
    deadline: Instant,
    cap: Instant,
    timeout: Duration,
    done: bool,
    /// The call's request slot, given back when the reading ends.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl Reading {
    /// The next message; `None` once the response was read or the reading failed.
    async fn next(&mut self) -> Option<Result<ServerJsonRpcMessage, UpstreamError>> {
        while !self.done {
            let event = tokio::time::timeout_at(self.deadline, self.events.next()).await;
            let event = match event {
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(error))) => {
                    return self.fail(UpstreamError::Protocol(format!(
                        "the response stream broke: {error}"
                    )));
                }
                Ok(None) => return self.fail(UpstreamError::Closed),
                Err(_) => return self.fail(UpstreamError::Timeout(self.timeout)),
            };
            // Events without data (priming events, comments) carry no message.
            let Some(data) = event.data.filter(|data| !data.is_empty()) else {
                continue;
            };
            let message = match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                Ok(message) => message,
                Err(error) => {
                    return self.fail(UpstreamError::Protocol(format!(
                        "an event is not a JSON-RPC message: {error}"
                    )));
                }
            };
            match &message {
                JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => self.done = true,
                JsonRpcMessage::Notification(notification) => {
                    if let ServerNotification::ProgressNotification(_) = &notification.notification
                    {
                        self.deadline = (Instant::now() + self.timeout).min(self.cap);
                    }
                }
                // A 2026-07-28 server asks for input with `input_required`, never with a
                // request of its own; one that does anyway is not answered.
                JsonRpcMessage::Request(request) => {
                    tracing::debug!(id = ?request.id, "a stateless server sent a request on a call's stream; ignored");
                    continue;
                }
            }
            return Some(Ok(message));
        }
        None
    }

    fn fail(
        &mut self,
        error: UpstreamError,
    ) -> Option<Result<ServerJsonRpcMessage, UpstreamError>> {
        self.done = true;
        Some(Err(error))
    }
}

/// What a failed HTTP exchange means for the call.
fn http_error(error: StreamableHttpError<HttpFailure>) -> UpstreamError {
    if let Some(fatal) = crate::connect::fatal_http_error(&error) {
        return fatal;
    }
    match error {
        StreamableHttpError::Client(HttpFailure::Status { status, excerpt }) => {
            UpstreamError::HttpStatus {
                status,
                detail: excerpt,
            }
        }
        other => UpstreamError::Protocol(other.to_string()),
    }
}
