//! A server's `tools/call` sent as one HTTP exchange, beside rmcp's client.
//!
//! Sending a relayed call through rmcp's client (a worker task, a channel and a progress
//! subscription per request, the input rounds) costs several times what relaying the message
//! itself does, so for the plain case the aggregated server hands the call to [`DirectRoute`]:
//! the request goes out as it came (the caller maps the tool name), and the server's messages
//! come back as it sent them, for the caller to pass on.
//!
//! A 2026-07-28 server keeps no session: every request is a POST that carries all it needs and
//! is answered on its own response. Progress tokens, log levels, client capabilities,
//! `input_required` and `requestState` all belong to the downstream client and travel
//! untouched.
//!
//! A server with sessions (2025-03-26 .. 2025-11-25) is reached in the session rmcp's client
//! opened ([`StatusAwareHttpClient::session_in_use`]), which every downstream client shares. So
//! the call gets an id and a progress token of Switchboard's own (the caller's are put back in
//! what comes back), a caller that gives up is cancelled with `notifications/cancelled` (closing
//! a stream does not cancel in a session: a reply stream dropped without cancelling is read to
//! its end), requests the server sends on the call's stream are
//! answered by the caller's [`InputResponder`], other notifications there (list changes,
//! resource updates) go to the connection's events as if they came through rmcp, and a stream
//! that ends before its response is resumed with `Last-Event-ID`. When there is no session in
//! use yet, or the server says it expired (404: it never saw the call), nothing is sent:
//! [`DirectReply::NotSent`] tells the caller to send it through rmcp's client, which opens a
//! new session.
//!
//! What keeps every other call safe applies here too: the session's request slots, the
//! tool-call timeout (reset by each progress report, capped at five times), OAuth (the same
//! [`StatusAwareHttpClient`]), and the bounds on bodies and events. Cancelling is dropping: the
//! response stream closes, which a 2026-07-28 server takes as the cancellation. A streamed reply
//! is read by a task of its own, so a caller that stops reading cannot hold the call's slot past
//! its timeout.
//! Once the response is in, the end of its stream is still read (briefly, and for a bounded
//! number of streams at once), so that its connection goes back to the pool instead of closing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientRequest, ErrorData, InputRequest, JsonRpcMessage,
    JsonRpcRequest, NumberOrString, ProgressToken, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerNotification, ServerRequest,
};
use rmcp::transport::streamable_http_client::{StreamableHttpError, StreamableHttpPostResponse};
use switchboard_core::wire_names::DIRECT_CALL_ID_PREFIX;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::UpstreamError;
use crate::handler::UpstreamEvent;
use crate::input_requests::InputResponder;
use crate::limits::CallLimiter;
use crate::transport::http_client::{SessionInUse, StatusAwareHttpClient};
use crate::transport::http_failure::HttpFailure;

/// How many times its timeout a call may run in all, however often progress resets the timer
/// (the same cap as calls through the session).
const MAX_TOTAL_TIMEOUTS: u32 = 5;

/// What a server answered to a direct call, as it sent it.
pub enum DirectReply {
    /// The response (result or error) alone. Boxed where it is decoded: a message is 496 bytes,
    /// and each layer it passes on its way to the client (the reading, the retries, the call's
    /// report and trace, the relay) moved it whole, some thirty copies a call
    /// (docs/benchmarks.md).
    Message(Box<ServerJsonRpcMessage>),
    /// Messages in order: notifications about the call (progress, log messages), then the
    /// response. The stream ends after the response, or with an error when the server stops
    /// before it.
    Stream(BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>>),
    /// Nothing was sent: the session to send it in is not known yet, or the server said it
    /// expired before seeing the call. Send it through the connection's session instead.
    NotSent,
}

/// A caller that resumes a call's stream itself: a 2025-11-25 session client (SEP-1699). When
/// the server ends the call's stream before its response, the caller is told (with the
/// server's `retry`), so that it can end its own stream the same way, and the server's stream
/// is resumed as soon as the caller comes back for the rest ([`CallerPolling::came_back`]), or
/// after the server's `retry` at the latest. The caller, which was told the server's `retry`,
/// so sets the pace of reconnecting, as it would talking to the server itself: a server that
/// answers while no stream is attached (and so loses the answer) fares no worse through
/// Switchboard than without it. A caller that never comes back loses nothing either: what the
/// resumed stream brings waits for it.
#[derive(Clone)]
pub struct CallerPolling {
    paused: mpsc::UnboundedSender<Option<Duration>>,
    back: Arc<tokio::sync::Notify>,
}

impl CallerPolling {
    /// A caller's polling, and where it hears of each pause (the server's `retry`, if any).
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Option<Duration>>) {
        let (paused, pauses) = mpsc::unbounded_channel();
        let polling = Self {
            paused,
            back: Arc::default(),
        };
        (polling, pauses)
    }

    /// The caller came back after a pause: the server's stream is resumed now.
    pub fn came_back(&self) {
        self.back.notify_waiters();
    }

    /// Tells the caller of a pause and waits until it comes back, or `retry` passed.
    async fn pause(&self, retry: Option<Duration>) {
        let back = self.back.notified();
        let mut back = std::pin::pin!(back);
        // Registered before the caller hears of the pause, so its return cannot be missed.
        back.as_mut().enable();
        let _ = self.paused.send(retry);
        if let Some(retry) = retry {
            tokio::select! {
                () = tokio::time::sleep(retry) => {}
                () = back => {}
            }
        }
    }
}

/// Where an HTTP server's calls go directly.
#[derive(Clone)]
pub(crate) struct DirectRoute {
    /// Shared, so that a call in a session holds it as one reference count ([`SessionCall`]).
    client: Arc<StatusAwareHttpClient>,
    url: Arc<url::Url>,
    /// For a server with sessions, what its calls need beside the session; `None` for a
    /// stateless server.
    session: Option<Arc<SessionRoute>>,
    /// The server's call streams being read to their end after their response.
    lingering: Arc<AtomicUsize>,
}

/// What calls in a shared session need.
struct SessionRoute {
    /// The connection's events, for notifications on a call's stream that are not about it.
    events: mpsc::UnboundedSender<UpstreamEvent>,
    /// Numbers the ids and progress tokens Switchboard gives its calls in the session.
    next: AtomicU64,
}

/// How long the cancellation of an abandoned call, or the answer to a server's request, may
/// take to send.
const CONTROL_POST_LIMIT: Duration = Duration::from_secs(10);

/// How often a call's stream may be resumed after the server ended it early.
const MAX_RESUMES: u32 = 16;

/// How long, and for how many more events, a call's stream is read after its response so that
/// its connection can be reused (see [`Reading`]'s `Drop`). A server ends the stream right after
/// the response; one that keeps it open longer costs a connection per call, as it would anyway.
const LINGER: Duration = Duration::from_millis(250);
const LINGER_EVENTS: usize = 16;

/// How many of a server's call streams may be lingering at once; beyond this a stream is
/// dropped after its response (closing its connection), so a server that keeps its streams
/// open cannot make Switchboard hold connections without bound.
const MAX_LINGERING: usize = 64;

impl DirectRoute {
    /// Whether the server gave this connection a session id (a route to a stateless server,
    /// or to one that answers `initialize` without a session, holds none).
    pub(crate) fn holds_session_id(&self) -> bool {
        self.session.is_some() && self.client.session_in_use().is_some()
    }

    /// The route to a stateless (2026-07-28) server.
    pub(crate) fn stateless(client: StatusAwareHttpClient, url: url::Url) -> Self {
        Self {
            client: Arc::new(client),
            url: Arc::new(url),
            session: None,
            lingering: Arc::default(),
        }
    }

    /// The route into the session rmcp's client holds with a server (2025-03-26 ..
    /// 2025-11-25); notifications on a call's stream that are not about the call go to
    /// `events`.
    pub(crate) fn in_session(
        client: StatusAwareHttpClient,
        url: url::Url,
        events: mpsc::UnboundedSender<UpstreamEvent>,
    ) -> Self {
        let route = SessionRoute {
            events,
            next: AtomicU64::new(1),
        };
        Self {
            client: Arc::new(client),
            url: Arc::new(url),
            session: Some(Arc::new(route)),
            lingering: Arc::default(),
        }
    }

    /// Sends `request` (its tool name already the server's own), holding a slot of `limiter`
    /// until the reply is complete, within `timeout` (reset by progress). In a session, the
    /// server's requests on the call's stream are answered by `input`, a reply stream dropped
    /// before its end cancels the call only once `cancelled` fired, and a stream the server
    /// ends early is resumed when `polling`'s caller comes back (or after the server's `retry`).
    #[expect(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps each argument twice in its future (rust-lang/rust#62958), and this one is part of every relayed call's (docs/benchmarks.md)"
    )]
    pub(crate) fn call_tool<'a>(
        &'a self,
        request: JsonRpcRequest<CallToolRequest>,
        limiter: &'a CallLimiter,
        timeout: Duration,
        input: Arc<dyn InputResponder>,
        cancelled: CancellationToken,
        polling: Option<CallerPolling>,
    ) -> impl Future<Output = Result<DirectReply, UpstreamError>> + 'a {
        async move {
            let (message, headers, mut call) = match &self.session {
                None => {
                    let headers = standard_headers(&request)?;
                    let message = JsonRpcMessage::Request(JsonRpcRequest {
                        jsonrpc: request.jsonrpc,
                        id: request.id,
                        request: ClientRequest::CallToolRequest(request.request),
                    });
                    (message, headers, None)
                }
                Some(route) => {
                    let Some(session) = self.client.session_in_use() else {
                        return Ok(DirectReply::NotSent);
                    };
                    let (message, mut call) =
                        self.session_call(route, session, request, input, cancelled);
                    call.polling = polling;
                    (message, call.headers(), Some(call))
                }
            };
            let slot = limiter.acquire(timeout).await?;
            let started = Instant::now();
            let cap = started + timeout.saturating_mul(MAX_TOTAL_TIMEOUTS);
            // The POST's future (several kilobytes) is pinned where it is made, so `timeout` does
            // not move it twice; in a block of its own, so that its space is free again for the
            // awaits that read the reply (pinned for the whole function, it made this future as
            // much larger, and every move of it dearer: docs/benchmarks.md).
            let reply = {
                let sent = std::pin::pin!(self.client.post(
                    &self.url,
                    message,
                    call.as_ref().map(|call| call.session.id.clone()),
                    None,
                    headers,
                    crate::transport::sse::MAX_SSE_EVENT_BYTES,
                    false,
                ));
                // From here until the response, a call dropped or timed out is cancelled.
                if let Some(call) = &mut call {
                    call.armed = true;
                }
                tokio::time::timeout(timeout, sent).await
            }
            .map_err(|_| UpstreamError::Timeout(timeout))?;
            let reply = match (reply, &mut call) {
                (Err(StreamableHttpError::SessionExpired), Some(call)) => {
                    call.armed = false;
                    self.client.session_expired(&call.session.id);
                    return Ok(DirectReply::NotSent);
                }
                (reply, _) => reply.map_err(http_error)?,
            };
            match reply {
                StreamableHttpPostResponse::Json(message, _) => {
                    let mut message = Box::new(message);
                    if let Some(call) = &mut call {
                        call.answered(&mut message);
                    }
                    Ok(DirectReply::Message(message))
                }
                StreamableHttpPostResponse::Sse(events, _) => {
                    let deadline = (started + timeout).min(cap);
                    let mut reading = Reading {
                        events,
                        deadline,
                        cap,
                        timeout,
                        done: false,
                        answered: false,
                        lingering: self.lingering.clone(),
                        call,
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

    /// `request` with an id and progress token of Switchboard's own in `session`, and what the
    /// call needs to put the caller's back.
    fn session_call(
        &self,
        route: &Arc<SessionRoute>,
        session: SessionInUse,
        request: JsonRpcRequest<CallToolRequest>,
        input: Arc<dyn InputResponder>,
        cancelled: CancellationToken,
    ) -> (ClientJsonRpcMessage, SessionCall) {
        let number = route.next.fetch_add(1, Ordering::Relaxed);
        let ours = format!("{DIRECT_CALL_ID_PREFIX}{number}");
        let mut call = request.request;
        let caller_token = call
            .extensions
            .get_mut::<RequestMetaObject>()
            .and_then(|meta| {
                let token = meta.get_progress_token()?;
                meta.set_progress_token(ProgressToken(NumberOrString::String(ours.clone().into())));
                Some(token)
            });
        let id = RequestId::String(ours.into());
        // Registered like the full path's calls, so that the server's requests about this call
        // on the session's GET stream (where the Python SDK and FastMCP send `roots/list`) reach
        // its client too.
        let registration =
            self.client
                .in_flight()
                .register(id.clone(), input.clone(), cancelled.clone());
        let message = JsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc: request.jsonrpc,
            id: id.clone(),
            request: ClientRequest::CallToolRequest(call),
        });
        let call = SessionCall {
            client: self.client.clone(),
            url: self.url.clone(),
            route: route.clone(),
            session,
            id,
            caller_id: request.id,
            caller_token,
            input,
            cancelled,
            armed: false,
            last_event_id: None,
            retry: None,
            resumes: 0,
            registration: Some(registration),
            polling: None,
        };
        (message, call)
    }
}

/// One call in a shared session: Switchboard's id for it and the caller's, and what answers
/// the server's requests on its stream. Dropped before its response (the caller gave up, or
/// the call timed out), it cancels the call at the server.
struct SessionCall {
    client: Arc<StatusAwareHttpClient>,
    url: Arc<url::Url>,
    route: Arc<SessionRoute>,
    session: SessionInUse,
    id: RequestId,
    caller_id: RequestId,
    caller_token: Option<ProgressToken>,
    input: Arc<dyn InputResponder>,
    /// Fires when the caller cancels the call (see [`pump`]).
    cancelled: CancellationToken,
    /// Sent and not answered: dropping it cancels it.
    armed: bool,
    /// The last event id seen on the call's stream, and the server's reconnection delay.
    last_event_id: Option<String>,
    retry: Option<Duration>,
    resumes: u32,
    /// The call among the session's calls in flight, until it is answered or dropped.
    registration: Option<crate::input_requests::Registration>,
    /// A caller that resumes the stream itself, which sets when it is resumed here.
    polling: Option<CallerPolling>,
}

impl SessionCall {
    /// The headers the session's requests carry besides its id.
    fn headers(&self) -> HashMap<HeaderName, HeaderValue> {
        self.session
            .version
            .iter()
            .map(|version| {
                (
                    HeaderName::from_static("mcp-protocol-version"),
                    version.clone(),
                )
            })
            .collect()
    }

    /// Gives the response the caller's id; the call is over.
    fn answered(&mut self, message: &mut ServerJsonRpcMessage) {
        self.armed = false;
        // No longer in flight: a request on the GET stream now is about another call.
        self.registration = None;
        match message {
            JsonRpcMessage::Response(response) => response.id = self.caller_id.clone(),
            JsonRpcMessage::Error(error) => error.id = Some(self.caller_id.clone()),
            _ => {}
        }
    }

    /// Makes a notification on the call's stream what the caller should see; `false` when it
    /// is not the caller's (it went to the connection's events, or the caller asked for no
    /// progress).
    fn notification(&self, notification: &mut ServerNotification) -> bool {
        let event = match notification {
            ServerNotification::ProgressNotification(progress) => {
                let Some(token) = self.caller_token.clone() else {
                    return false;
                };
                progress.params.progress_token = token;
                None
            }
            ServerNotification::LoggingMessageNotification(_) => None,
            ServerNotification::ToolListChangedNotification(_) => Some(UpstreamEvent::ToolsChanged),
            ServerNotification::PromptListChangedNotification(_) => {
                Some(UpstreamEvent::PromptsChanged)
            }
            ServerNotification::ResourceListChangedNotification(_) => {
                Some(UpstreamEvent::ResourcesChanged)
            }
            ServerNotification::ResourceUpdatedNotification(updated) => {
                Some(UpstreamEvent::ResourceUpdated(updated.params.uri.clone()))
            }
            _ => return false,
        };
        match event {
            Some(event) => {
                let _ = self.route.events.send(event);
                false
            }
            None => true,
        }
    }

    /// Answers a request the server sent on the call's stream, in a task of its own: `ping`
    /// at once, requests for input through the caller's responder.
    fn answer(&self, request: JsonRpcRequest<ServerRequest>) {
        let input = match request.request {
            ServerRequest::PingRequest(_) => None,
            ServerRequest::CreateMessageRequest(r) => Some(Ok(InputRequest::CreateMessage(r))),
            ServerRequest::ListRootsRequest(r) => Some(Ok(InputRequest::ListRoots(r))),
            ServerRequest::ElicitRequest(r) => Some(Ok(InputRequest::Elicitation(r))),
            ServerRequest::CustomRequest(custom) => Some(Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("Switchboard does not answer {}", custom.method),
                None,
            ))),
            _ => Some(Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "Switchboard does not answer this kind of request",
                None,
            ))),
        };
        // Whose roots the server was given, once the caller answers (see
        // `InFlight::hand_roots_to`).
        let roots_of = matches!(input, Some(Ok(InputRequest::ListRoots(_)))).then(|| {
            self.client.in_flight().roots_asked();
            (
                self.client.in_flight().clone(),
                self.input.client().map(str::to_owned),
            )
        });
        let answer = match input {
            None => None,
            Some(Ok(input)) => Some(self.input.answer(None, input)),
            Some(Err(refused)) => Some(Box::pin(std::future::ready(Err(refused))) as _),
        };
        let control = self.control();
        let id = request.id;
        tokio::spawn(async move {
            let answer = match answer {
                None => Ok(serde_json::json!({})),
                Some(answer) => answer.await,
            };
            let roots_given = roots_of.filter(|_| answer.is_ok());
            let reply = match answer {
                Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(error) => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}),
            };
            control.send(reply).await;
            // Only once the server has the client's roots may the call waiting for them go on
            // (`InFlight::hand_roots_to`): sent sooner, the call can reach the server before
            // them and be answered with the roots of the client before.
            if let Some((in_flight, client)) = roots_given {
                in_flight.roots_given_by(client.as_deref());
            }
        });
    }

    /// Resumes the call's stream after the server ended it before the response, if it gave
    /// the events ids; `None` when it cannot be resumed.
    async fn resume(
        &mut self,
    ) -> Option<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>> {
        let last = self.last_event_id.clone()?;
        if self.resumes >= MAX_RESUMES {
            return None;
        }
        self.resumes += 1;
        match (&self.polling, self.retry) {
            (Some(polling), retry) => polling.pause(retry).await,
            (None, Some(delay)) => tokio::time::sleep(delay).await,
            (None, None) => {}
        }
        self.client
            .open_event_stream(
                self.url.as_str().into(),
                Some(self.session.id.clone()),
                Some(last),
                None,
                self.headers(),
                crate::transport::sse::MAX_SSE_EVENT_BYTES,
            )
            .await
            .ok()
    }

    fn control(&self) -> Control {
        Control {
            client: self.client.clone(),
            url: self.url.clone(),
            session: self.session.id.clone(),
            headers: self.headers(),
        }
    }
}

impl Drop for SessionCall {
    fn drop(&mut self) {
        if !self.armed || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let control = self.control();
        let cancel = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": self.id, "reason": "the caller gave up"},
        });
        tokio::spawn(async move { control.send(cancel).await });
    }
}

/// Sends one message that expects no reply into a session (a cancellation, an answer to the
/// server's request), bounded in time; a failure is only logged, as the call is over or the
/// server will time out its request.
struct Control {
    client: Arc<StatusAwareHttpClient>,
    url: Arc<url::Url>,
    session: Arc<str>,
    headers: HashMap<HeaderName, HeaderValue>,
}

impl Control {
    async fn send(self, message: serde_json::Value) {
        let message = match serde_json::from_value::<ClientJsonRpcMessage>(message) {
            Ok(message) => message,
            Err(error) => {
                tracing::debug!(%error, "a message for the server could not be built");
                return;
            }
        };
        let sent = self.client.post(
            &self.url,
            message,
            Some(self.session),
            None,
            self.headers,
            crate::transport::sse::MAX_SSE_EVENT_BYTES,
            false,
        );
        match tokio::time::timeout(CONTROL_POST_LIMIT, sent).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::debug!(%error, "a message to the server failed"),
            Err(_) => tracing::debug!("a message to the server timed out"),
        }
    }
}

/// Messages a streamed reply may have read ahead of its caller.
const READ_AHEAD: usize = 16;

/// `first`, then the rest of the reply, read in a task of its own so its timeouts run whether
/// or not the caller keeps up; a caller that takes no message for `timeout` is given up on (the
/// reading ends, its request slot is freed and the server's stream closed, and in a session the
/// call cancelled), as is one that drops the stream (in a session, only once it cancelled).
fn pump(
    first: Box<ServerJsonRpcMessage>,
    mut reading: Reading,
    timeout: Duration,
) -> BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(READ_AHEAD);
    tokio::spawn(async move {
        loop {
            // A caller that is gone cancels the call at once, even while the server is silent;
            // except in a session, where a closed stream is no cancellation (the spec's rule):
            // unless the caller cancelled it, the server's call runs to its end (or its
            // timeout), and what it sends is dropped.
            let message = tokio::select! {
                message = reading.next() => message,
                () = sender.closed() => return reading.run_out().await,
            };
            let Some(message) = message else { return };
            let message = message.map(|message| *message);
            match tokio::time::timeout(timeout, sender.send(message)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return reading.run_out().await,
                // Not taken for as long as the call may wait: given up on.
                Err(_) => return,
            }
        }
    });
    let rest = futures::stream::unfold(receiver, |mut receiver| async move {
        let message = receiver.recv().await?;
        Some((message, receiver))
    });
    futures::stream::iter([Ok(*first)]).chain(rest).boxed()
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
        .and_then(crate::wire::protocol_version_in)
        .ok_or_else(|| UpstreamError::Protocol("a direct call names no protocol version".into()))?;
    let value = |text: &str| {
        HeaderValue::from_str(text)
            .map_err(|_| UpstreamError::Protocol(format!("'{text}' cannot be an HTTP header")))
    };
    // A version rmcp knows is a static header value, not a copy.
    let version = match rmcp::model::ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .find(|known| known.as_str() == version)
    {
        Some(known) => HeaderValue::from_static(known.as_str()),
        None => value(version)?,
    };
    Ok(HashMap::from([
        (HeaderName::from_static("mcp-protocol-version"), version),
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
    /// The response was read: the call is over, and only the stream's end is left.
    answered: bool,
    /// The route's count of streams lingering after their response.
    lingering: Arc<AtomicUsize>,
    /// The call in a session, for a server with sessions.
    call: Option<SessionCall>,
    /// The call's request slot, given back when the reading ends.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl Reading {
    /// The next message; `None` once the response was read or the reading failed.
    async fn next(&mut self) -> Option<Result<Box<ServerJsonRpcMessage>, UpstreamError>> {
        while !self.done {
            let event = tokio::time::timeout_at(self.deadline, self.events.next()).await;
            let mut event = match event {
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(error))) => {
                    if self.resumed().await {
                        continue;
                    }
                    return self.fail(UpstreamError::Protocol(format!(
                        "the response stream broke: {error}"
                    )));
                }
                Ok(None) => {
                    if self.resumed().await {
                        continue;
                    }
                    return self.fail(UpstreamError::Closed);
                }
                Err(_) => return self.fail(UpstreamError::Timeout(self.timeout)),
            };
            if let Some(call) = &mut self.call {
                if event.id.is_some() {
                    call.last_event_id = event.id.take();
                    // The stream works again: a later break may be resumed as often.
                    call.resumes = 0;
                }
                if let Some(retry) = event.retry {
                    call.retry = Some(Duration::from_millis(retry));
                }
            }
            // Events without data (priming events, comments) carry no message.
            let Some(data) = event.data.filter(|data| !data.is_empty()) else {
                continue;
            };
            let mut message = match crate::wire::call_reply(&data) {
                Ok(message) => Box::new(message),
                // In a session, as rmcp's client does: the event is skipped and the call waits
                // for its response (or its timeout).
                Err(error) if self.call.is_some() => {
                    tracing::warn!(%error, "skipped an event that is not a JSON-RPC message");
                    continue;
                }
                Err(error) => {
                    return self.fail(UpstreamError::Protocol(format!(
                        "an event is not a JSON-RPC message: {error}"
                    )));
                }
            };
            match &mut *message {
                JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {
                    self.done = true;
                    self.answered = true;
                    if let Some(call) = &mut self.call {
                        call.answered(&mut message);
                    }
                }
                JsonRpcMessage::Notification(notification) => {
                    if let ServerNotification::ProgressNotification(_) = &notification.notification
                    {
                        self.deadline = (Instant::now() + self.timeout).min(self.cap);
                    }
                    let passed = match &self.call {
                        Some(call) => call.notification(&mut notification.notification),
                        None => true,
                    };
                    if !passed {
                        continue;
                    }
                }
                JsonRpcMessage::Request(_) => {
                    let JsonRpcMessage::Request(request) = *message else {
                        continue;
                    };
                    match &self.call {
                        Some(call) => call.answer(request),
                        // A 2026-07-28 server asks for input with `input_required`, never
                        // with a request of its own; one that does anyway is not answered.
                        None => tracing::debug!(
                            id = ?request.id,
                            "a stateless server sent a request on a call's stream; ignored"
                        ),
                    }
                    continue;
                }
            }
            return Some(Ok(message));
        }
        None
    }

    /// After the caller dropped the reply: in a session, unless the caller cancelled the call,
    /// reads it to its end (or its timeout), dropping what the server sends; otherwise returns
    /// at once (and dropping the reading cancels the call).
    async fn run_out(mut self) {
        let Some(cancelled) = self.call.as_ref().map(|call| call.cancelled.clone()) else {
            return;
        };
        while !cancelled.is_cancelled() {
            tokio::select! {
                message = self.next() => if message.is_none() { return },
                () = cancelled.cancelled() => return,
            }
        }
    }

    /// Whether the call's stream, ended or broken before its response, was resumed (a call in
    /// a session whose server gave its events ids).
    async fn resumed(&mut self) -> bool {
        let Some(call) = &mut self.call else {
            return false;
        };
        match tokio::time::timeout_at(self.deadline, call.resume()).await {
            Ok(Some(events)) => {
                self.events = events;
                true
            }
            _ => false,
        }
    }

    fn fail(
        &mut self,
        error: UpstreamError,
    ) -> Option<Result<Box<ServerJsonRpcMessage>, UpstreamError>> {
        self.done = true;
        Some(Err(error))
    }
}

impl Drop for Reading {
    /// After the response, lets the server end its stream: a response body dropped before its
    /// end closes its connection, and the next call would pay for a new one. Servers end the
    /// stream right after the response, so the end has mostly arrived with it and is taken
    /// here; otherwise a task waits for it, for at most [`LINGER`] and [`LINGER_EVENTS`] events
    /// (what comes after the response is dropped), while fewer than [`MAX_LINGERING`] of the
    /// server's streams do.
    fn drop(&mut self) {
        if !self.answered {
            return;
        }
        let mut events = std::mem::replace(&mut self.events, futures::stream::empty().boxed());
        if let Some(None) = futures::FutureExt::now_or_never(events.next()) {
            return;
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        if self.lingering.fetch_add(1, Ordering::Relaxed) >= MAX_LINGERING {
            self.lingering.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        // Gives the slot back however the task ends (also dropped unfinished at shutdown).
        let slot = LingerSlot(self.lingering.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let _ = tokio::time::timeout(LINGER, async move {
                let mut left = LINGER_EVENTS;
                while left > 0 && events.next().await.is_some() {
                    left -= 1;
                }
            })
            .await;
        });
    }
}

/// One of a route's [`MAX_LINGERING`] places for a stream read after its response.
struct LingerSlot(Arc<AtomicUsize>);

impl Drop for LingerSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a failed HTTP exchange means for the call.
fn http_error(error: StreamableHttpError<HttpFailure>) -> UpstreamError {
    if let Some(fatal) = crate::error::fatal_http_error(&error) {
        return fatal;
    }
    match error {
        StreamableHttpError::Client(HttpFailure::Status {
            status,
            excerpt,
            retry_after,
        }) => UpstreamError::HttpStatus {
            status,
            detail: excerpt,
            retry_after,
        },
        other => UpstreamError::Protocol(other.to_string()),
    }
}
