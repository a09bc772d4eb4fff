//! The short path for the commonest request: a `tools/call` of a tool on a Streamable HTTP
//! server.
//!
//! The full path (rmcp's server, an exchange, rmcp's client) costs several task hand-offs and
//! most of the relay's CPU (`docs/benchmarks.md`), so a plain call takes this path instead: the
//! request is checked, its tool name mapped, and it goes to the server as one HTTP exchange
//! ([`Upstream::call_tool_direct`]); the server's messages come back to the client, with the
//! result's names and URIs mapped and the result finished for the client's era as rmcp
//! finishes it.
//!
//! - A stateless (2026-07-28) client calling a stateless server's tool: there is nothing to
//!   bridge, no session on either side, and input requests, progress and log levels mean the
//!   same on both. `input_required` passes through with the server's own `requestState`, so
//!   the client's retry takes this path again.
//! - A legacy session's client (2025-03-26 .. 2025-11-25 over Streamable HTTP) calling a tool of
//!   a server with sessions: the call goes into the session Switchboard holds with the server
//!   under an id of its own, the server's progress and log messages come back by the session's
//!   rules (its `logging/setLevel`; everything when it set none), a request the server sends
//!   on the call's stream is put to the client on the call's own stream ([`AskOnStream`]), and
//!   the client's `notifications/cancelled` reaches the call ([`cancel`]).
//!
//! Anything else (another method, a header this path does not check, a tool with
//! `x-mcp-header` parameters, a call that may become a task, a server reached another way or
//! not connected, a retry of an
//! exchange Switchboard parked, a session this path does not know, a shutdown under way) is not
//! taken here: [`try_call`] returns `None` before anything is sent, and the full path answers,
//! with the same results and errors. So does a call the server's session could not take (none
//! open yet, or expired: [`DirectReply::NotSent`]), which this path had already admitted: the
//! request goes on marked [`Charged`], so the full path does not take its rate-limit tokens
//! again.
//!
//! A call taken here is admitted by the same function as on the full path
//! ([`super::admission`]), and refused with the same errors.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorCode, ErrorData,
    InputRequest, JsonObject, JsonRpcError, JsonRpcMessage, JsonRpcRequest, JsonRpcResponse,
    LoggingLevel, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerNotification, ServerRequest, ServerResult,
};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use switchboard_core::exposure::Exposed;
use switchboard_hub::ExposedCatalog;
use switchboard_upstream::{DirectReply, Upstream, UpstreamError};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::admission::{Admission, Charged, task_mode};
use super::{Shared, call_result, downstream::severity, lock};

/// Prefix of a header value sent Base64-encoded (SEP-2243); such values take the full path.
const BASE64_HEADER_PREFIX: &str = "=?base64?";

/// What the short path made of a request.
pub(crate) enum ShortPath {
    /// It answered the request.
    Answered(Response),
    /// The full path is to answer it. `Some` when this path admitted the call (taking its
    /// rate-limit tokens) and then could not send it; the request carries that on, so the full
    /// path does not charge it again.
    Declined(Option<Charged>),
}

impl ShortPath {
    /// What a relay that sent the call (`Some`: its answer) or could not send it after its
    /// admission (`None`) comes to.
    fn after_admission(answer: Option<Response>) -> Self {
        match answer {
            Some(answer) => Self::Answered(answer),
            None => Self::Declined(Some(Charged)),
        }
    }
}

/// Relays `body` (a POST to `/mcp` with `parts`) directly when it is a plain `tools/call` this
/// path takes; [`ShortPath::Declined`] when the full path must answer it. `sessions` are rmcp's Streamable HTTP
/// sessions. A session's `notifications/cancelled` for a call relayed here cancels it (and
/// still goes on to rmcp). At shutdown, `stop` ends a call still running after the drain
/// deadline, as it ends every other stream.
pub(crate) async fn try_call(
    shared: &Arc<Shared>,
    sessions: &LocalSessionManager,
    stop: &CancellationToken,
    parts: &Parts,
    body: &Bytes,
) -> ShortPath {
    if shared.is_draining() {
        return ShortPath::Declined(None);
    }
    let taken = if !parts.headers.contains_key("mcp-session-id") {
        stateless_call(shared, stop, parts, body).await
    } else if let Some(session) = single(&parts.headers, "mcp-session-id") {
        session_call(shared, sessions, stop, parts, session, body).await
    } else {
        None
    };
    taken.unwrap_or(ShortPath::Declined(None))
}

/// A stateless 2026-07-28 `tools/call` of a stateless server's tool.
async fn stateless_call(
    shared: &Arc<Shared>,
    stop: &CancellationToken,
    parts: &Parts,
    body: &Bytes,
) -> Option<ShortPath> {
    if !plain_stateless_call(&parts.headers) {
        return None;
    }
    let Ok(JsonRpcMessage::Request(JsonRpcRequest {
        id,
        request: ClientRequest::CallToolRequest(call),
        ..
    })) = switchboard_upstream::wire::client_message(body)
    else {
        return None;
    };
    let meta = call.extensions.get::<RequestMetaObject>()?;
    if meta.protocol_version() != Some(ProtocolVersion::V_2026_07_28)
        || !meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
        || single(&parts.headers, "mcp-name") != Some(&*call.params.name)
    {
        return None;
    }
    // Answers that cannot be answers to anything, and retries of exchanges parked here, are
    // the full path's.
    if call
        .params
        .input_responses
        .as_ref()
        .is_some_and(|responses| super::exchange::check_input_responses(responses).is_err())
    {
        return None;
    }
    if call
        .params
        .request_state
        .as_deref()
        .is_some_and(|state| shared.parked.holds(state))
    {
        return None;
    }
    if super::deferred::is_meta_tool(&call.params.name) {
        return None;
    }
    let catalog = shared.hub.exposed();
    let admission = Admission::new(&shared.hub, None, Some(parts));
    let tool = admission.tool(&catalog, &call.params.name).ok()?;
    if !plain_header_value(&tool.upstream) || mentions_key(&tool.item.input_schema, "x-mcp-header")
    {
        return None;
    }
    let takes_tasks = meta
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks());
    if !runs_to_its_result(shared, tool, &call, takes_tasks)
        || has_policies(shared, tool, Some(meta), &parts.headers)
    {
        return None;
    }
    let upstream = shared
        .hub
        .upstream_for_tool(&tool.server, &tool.upstream)
        .ok()
        .filter(|upstream| upstream.calls_directly() && !upstream.has_sessions())?;
    let span = request_span(&call, parts);
    if let Some(answer) = refusal(&admission, tool, &call, parts, &id, &span, Era::Stateless) {
        return Some(ShortPath::Answered(answer));
    }
    let origin = admission.origin(&call.params.name, call.params.arguments.as_ref());
    let log_level = meta.log_level();
    let (server, request) = to_server(tool, id, call);
    let call = Call {
        upstream,
        request,
        server,
        era: Era::Stateless,
        log_level,
        cancelled: None,
        asking: None,
        session: None,
        caller_polls: false,
        repeatable: repeatable(shared, tool),
        span,
        origin,
    };
    Some(ShortPath::after_admission(
        relay(shared, stop, catalog, call).await,
    ))
}

/// A legacy session's `tools/call` of a tool on a server with sessions, or its
/// `notifications/cancelled` for a call relayed here.
async fn session_call(
    shared: &Arc<Shared>,
    sessions: &LocalSessionManager,
    stop: &CancellationToken,
    parts: &Parts,
    session: &str,
    body: &Bytes,
) -> Option<ShortPath> {
    let state = lock(&shared.direct_sessions)
        .get(session)
        .and_then(std::sync::Weak::upgrade)?;
    let negotiated = state.negotiated.get()?;
    let message = switchboard_upstream::wire::client_message(body).ok()?;
    let (id, call) = match message {
        JsonRpcMessage::Request(JsonRpcRequest {
            id,
            request: ClientRequest::CallToolRequest(call),
            ..
        }) => (id, call),
        JsonRpcMessage::Notification(notification) => {
            if let ClientNotification::CancelledNotification(cancelled) = notification.notification
                && let Some(id) = cancelled.params.request_id
            {
                cancel(shared, session, id);
            }
            return None;
        }
        // The client's answer to a question this path put to it.
        JsonRpcMessage::Response(JsonRpcResponse { ref id, .. }) => {
            return answered(shared, session, id.clone(), message).map(ShortPath::Answered);
        }
        JsonRpcMessage::Error(JsonRpcError {
            id: Some(ref id), ..
        }) => {
            return answered(shared, session, id.clone(), message).map(ShortPath::Answered);
        }
        _ => return None,
    };
    // The headers a legacy client sends, and nothing this path would have to check.
    if !plain_post(&parts.headers) {
        return None;
    }
    let version = match parts.headers.get("mcp-protocol-version") {
        None => true,
        Some(_) => single(&parts.headers, "mcp-protocol-version")
            .is_some_and(|version| version == negotiated.version.as_str()),
    };
    if !negotiated.version.has_initialize()
        || !version
        || parts.headers.contains_key("mcp-method")
        || parts.headers.contains_key("mcp-name")
        || call.params.input_responses.is_some()
        || call.params.request_state.is_some()
        || call
            .extensions
            .get::<RequestMetaObject>()
            .is_some_and(|meta| meta.protocol_version().is_some())
    {
        return None;
    }
    if !sessions.has_session(&session.into()).await.unwrap_or(false) {
        return None;
    }
    if super::deferred::is_meta_tool(&call.params.name)
        || state.adds_to_working_set(shared, &call.params.name)
    {
        return None;
    }
    let catalog = shared.hub.exposed();
    let admission = Admission::new(&shared.hub, Some(&state), Some(parts));
    let tool = admission.tool(&catalog, &call.params.name).ok()?;
    if !runs_to_its_result(
        shared,
        tool,
        &call,
        negotiated.capabilities.supports_tasks(),
    ) || has_policies(
        shared,
        tool,
        call.extensions
            .get::<RequestMetaObject>()
            .or(call.params.meta.as_ref())
            .map(|m| &***m),
        &parts.headers,
    ) {
        return None;
    }
    // A server that speaks both eras serves a session's calls over its session link, once
    // open (the full path opens it).
    let upstream = shared
        .hub
        .upstream_for_tool(&tool.server, &tool.upstream)
        .ok()?;
    let upstream = if upstream.has_sessions() {
        upstream
    } else {
        shared.hub.open_sessions_link(&tool.server)?
    };
    // A server holding another client's roots is told they changed on the full path first.
    let upstream = Some(upstream).filter(|upstream| {
        upstream.calls_directly()
            && upstream.has_sessions()
            && !upstream.roots_held_by_another(session)
    })?;
    let span = request_span(&call, parts);
    if let Some(answer) = refusal(&admission, tool, &call, parts, &id, &span, Era::Session) {
        return Some(ShortPath::Answered(answer));
    }
    let origin = admission.origin(&call.params.name, call.params.arguments.as_ref());
    // Cancelled by the client, or when its session ends; reachable by the client's
    // cancellation for as long as the call's responder lives (until its reading ends, even
    // after the client's connection closed).
    let cancelled = state.ended.child_token();
    let registered = Registered::new(shared, session, &id, &cancelled);
    let log_level = *lock(&state.log_level);
    let (questions, asked) = mpsc::channel(1);
    let asker = AskOnStream {
        shared: shared.clone(),
        session: session.to_owned(),
        capabilities: negotiated.capabilities.clone(),
        log_level,
        questions,
        _registered: registered,
    };
    let asking = (asker, asked);
    let (server, request) = to_server(tool, id, call);
    let call = Call {
        upstream,
        request,
        server,
        era: Era::Session,
        log_level,
        cancelled: Some(cancelled),
        asking: Some(asking),
        session: Some(state.clone()),
        // SEP-1699 is 2025-11-25's: older clients are not expected to come back for a stream
        // that ends early, so for them the server's early end stays hidden.
        caller_polls: negotiated.version == ProtocolVersion::V_2025_11_25,
        repeatable: repeatable(shared, tool),
        span,
        origin,
    };
    Some(ShortPath::after_admission(
        relay(shared, stop, catalog, call).await,
    ))
}

/// Whether a call of `tool` runs to its result, as this path runs calls ([`task_mode`]): not
/// one that may become a task (the full path runs tasks), nor one refused for a client that
/// takes no tasks (the full path refuses it).
fn runs_to_its_result(
    shared: &Shared,
    tool: &Exposed<rmcp::model::Tool>,
    call: &CallToolRequest,
    takes_tasks: bool,
) -> bool {
    matches!(
        task_mode(&shared.hub, tool, &call.params.name, takes_tasks, false),
        Ok(switchboard_core::TaskMode::Forbidden)
    )
}

/// Whether a call of `tool` has policies to apply, which the full path does: a caller to check
/// (the tool names its allowed callers, or the call declares who makes it), or arguments an
/// admin fixed.
fn has_policies(
    shared: &Shared,
    tool: &Exposed<rmcp::model::Tool>,
    meta: Option<&rmcp::model::JsonObject>,
    headers: &axum::http::HeaderMap,
) -> bool {
    shared
        .hub
        .policies_apply_to_calls(&tool.server, &tool.upstream)
        || super::caller::declares_caller(meta, headers)
}

/// The request `id` calling `tool` as its server names it, and that server.
fn to_server(
    tool: &Exposed<rmcp::model::Tool>,
    id: RequestId,
    mut call: CallToolRequest,
) -> (switchboard_core::ServerId, JsonRpcRequest<CallToolRequest>) {
    call.params.name = tool.upstream.clone().into();
    (tool.server.clone(), JsonRpcRequest::new(id, call))
}

/// Hands the client's `answer` to the question `id` it was asked in `session` on the short
/// path: 202, as for any answer; `None` when no such question waits (rmcp's, then).
fn answered(
    shared: &Shared,
    session: &str,
    id: RequestId,
    answer: ClientJsonRpcMessage,
) -> Option<Response> {
    let waiting = lock(&shared.direct_questions).remove(&(session.to_owned(), id))?;
    let _ = waiting.send(answer);
    Some(StatusCode::ACCEPTED.into_response())
}

/// Cancels the call `id` of `session` relayed here, if there is one.
fn cancel(shared: &Shared, session: &str, id: RequestId) {
    if let Some((_, call)) = lock(&shared.direct_calls).get(&(session.to_owned(), id)) {
        call.cancel();
    }
}

/// A call's place among those [`cancel`] finds, until dropped.
struct Registered {
    shared: Arc<Shared>,
    key: (String, RequestId),
    /// Tells this call's entry from a later one under the same id (a client may reuse an id).
    serial: u64,
}

impl Registered {
    fn new(shared: &Arc<Shared>, session: &str, id: &RequestId, call: &CancellationToken) -> Self {
        static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = (session.to_owned(), id.clone());
        lock(&shared.direct_calls).insert(key.clone(), (serial, call.clone()));
        Self {
            shared: shared.clone(),
            key,
            serial,
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut calls = lock(&self.shared.direct_calls);
        if calls
            .get(&self.key)
            .is_some_and(|(serial, _)| *serial == self.serial)
        {
            calls.remove(&self.key);
        }
    }
}

/// The client's protocol era, which decides how answers are finished and which log messages
/// it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    /// 2026-07-28: no session; log messages only when the request asked for them.
    Stateless,
    /// 2025-03-26 .. 2025-11-25 in a session: everything unless the session set a level.
    Session,
}

/// A call this path relays.
struct Call {
    upstream: Upstream,
    /// The request with the server's own tool name, the caller's id and `_meta`.
    request: JsonRpcRequest<CallToolRequest>,
    server: switchboard_core::ServerId,
    era: Era,
    /// The least severe log message the client wants (see [`Era`] when there is none).
    log_level: Option<LoggingLevel>,
    /// Fires when the client cancels the call (sessions).
    cancelled: Option<CancellationToken>,
    /// For a session call, the responder that asks the client on the call's stream, and that
    /// stream's questions.
    asking: Option<(AskOnStream, mpsc::Receiver<ServerJsonRpcMessage>)>,
    /// For a session call, the session, which keeps the call's stream for resumption.
    session: Option<Arc<super::SessionState>>,
    /// The client resumes a stream that ends early (a 2025-11-25 session client): when the
    /// server ends the call's stream before its response, the client's stream ends too, and the
    /// server's is resumed when the client comes back ([`switchboard_upstream::CallerPolling`]).
    caller_polls: bool,
    /// The call may be sent again after a transient failure ([`Hub::repeatable`]).
    repeatable: bool,
    /// The client's request as traces show it ([`request_span`]).
    span: tracing::Span,
    /// Where it came in, for the audit log (when one is kept).
    origin: Option<Arc<switchboard_core::CallOrigin>>,
}

/// Whether a call of `tool` may be sent again after a transient failure.
fn repeatable(shared: &Shared, tool: &Exposed<rmcp::model::Tool>) -> bool {
    shared
        .hub
        .repeatable(&tool.server, &tool.upstream, tool.item.annotations.as_ref())
}

/// Sends `call` and answers the client with what comes back; `None` when nothing was sent
/// and the full path is to answer.
async fn relay(
    shared: &Arc<Shared>,
    stop: &CancellationToken,
    catalog: Arc<ExposedCatalog>,
    call: Call,
) -> Option<Response> {
    let Call {
        upstream,
        request,
        server,
        era,
        log_level,
        cancelled,
        asking,
        session,
        caller_polls,
        repeatable,
        span,
        origin,
    } = call;
    tracing::trace!(tool = %request.request.params.name, %server, "relayed directly");
    shared.subscribing.settled(&server).await;
    let in_flight = shared.in_flight.token();
    let cancelled = cancelled.unwrap_or_default();
    let (input, questions): (Arc<dyn switchboard_upstream::InputResponder>, _) = match asking {
        Some((asker, questions)) => (Arc::new(asker), Some(questions)),
        // A stateless server asks with `input_required`, never on the call's stream (its route
        // ignores requests there), so no responder is ever called.
        None => (Arc::new(switchboard_upstream::InputPolicy::Decline), None),
    };
    let (polling, mut pauses) = match caller_polls {
        true => {
            let (polling, pauses) = switchboard_upstream::CallerPolling::new();
            (Some(polling), Some(pauses))
        }
        false => (None, None),
    };
    let id = request.id.clone();
    let cancel = cancelled.clone();
    let passed = polling.clone();
    let parent = span.clone();
    let sent = async move {
        upstream
            .call_tool_direct(request, input, cancel, passed, repeatable, origin, &parent)
            .await
    };
    let relayed = Relayed {
        source: Source::Sending(Box::pin(sent)),
        span,
        questions,
        catalog,
        server,
        id,
        era,
        log_level,
    };
    let mut waiting = Waiting {
        call: Some((relayed, in_flight)),
        runs_out: session.is_some(),
        cancelled: cancelled.clone(),
        stop: stop.clone(),
    };
    // Whatever happens once the call went out is answered here, never by the full path.
    let first = tokio::select! {
        biased;
        first = waiting.first() => first,
        // The server ended the call's stream before its first message: so does the client's,
        // once primed, and the call goes on in the background until the client is back.
        Some(retry) = next_pause(&mut pauses) => {
            let (Some(session), Some((relayed, in_flight))) = (session, waiting.call.take()) else {
                return Some(unanswered());
            };
            let log = Arc::new(StreamLog::polled_by(polling));
            let stream = lock(&session.direct_streams).keep(log.clone());
            log.pause(retry);
            keep_logging(log.clone(), relayed, pauses, in_flight, stop.clone(), cancelled);
            return Some(log.follow(stream, 0));
        }
        () = stop.cancelled() => {
            return Some(match &waiting.call {
                Some((relayed, _)) => json(era, relayed.finish(Err(UpstreamError::Cancelled))),
                None => unanswered(),
            });
        }
        // A cancelled request is not answered.
        () = cancelled.cancelled() => return Some(unanswered()),
    };
    // Always there: only dropping `waiting` takes it otherwise.
    let Some((relayed, in_flight)) = waiting.call.take() else {
        return Some(unanswered());
    };
    let first = match first {
        Some(Next::Message(first)) => first,
        Some(Next::NotSent) => return None,
        None => relayed.finish(Err(UpstreamError::Closed)),
    };
    let done = is_final(&first);
    // A session's answer is a stream the client can resume (SEP-1699), as rmcp's are: primed,
    // its events numbered and kept. The call runs on in a task of its own, whether or not the
    // client stays to read it.
    if let Some(session) = session {
        let log = Arc::new(StreamLog::polled_by(polling));
        let stream = lock(&session.direct_streams).keep(log.clone());
        log.push(&first);
        if done {
            log.finish();
        } else {
            keep_logging(
                log.clone(),
                relayed,
                pauses,
                in_flight,
                stop.clone(),
                cancelled,
            );
        }
        return Some(log.follow(stream, 0));
    }
    if done {
        return Some(json(era, first));
    }
    // The stream stays counted as in flight until it ends, so a shutdown lets it finish.
    let rest = futures::stream::unfold(relayed, |mut relayed| async move {
        match relayed.next().await? {
            Next::Message(message) => Some((message, relayed)),
            Next::NotSent => None,
        }
    });
    let events = futures::stream::iter([first])
        .chain(rest)
        .take_until(stop.clone().cancelled_owned())
        .take_until(cancelled.cancelled_owned())
        .map(move |message| {
            let _counted = &in_flight;
            let data = serde_json::to_string(&message).unwrap_or_default();
            Ok::<_, Infallible>(Event::default().data(data))
        });
    Some(
        Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response(),
    )
}

/// The next pause of the server's stream, if the client resumes streams itself.
async fn next_pause(
    pauses: &mut Option<mpsc::UnboundedReceiver<Option<std::time::Duration>>>,
) -> Option<Option<std::time::Duration>> {
    match pauses {
        Some(pauses) => pauses.recv().await,
        None => std::future::pending().await,
    }
}

/// Runs a session call on in a task of its own, whether or not its client stays to read it:
/// its messages, and the pauses of the server's stream, go to `log` until the response (or
/// the client's cancellation, or the daemon's stop). A message already on its way comes
/// before a pause that came after it.
fn keep_logging(
    log: Arc<StreamLog>,
    mut relayed: Relayed,
    mut pauses: Option<mpsc::UnboundedReceiver<Option<std::time::Duration>>>,
    in_flight: tokio_util::task::task_tracker::TaskTrackerToken,
    stop: CancellationToken,
    cancelled: CancellationToken,
) {
    tokio::spawn(async move {
        let _counted = in_flight;
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                () = cancelled.cancelled() => break,
                next = relayed.next() => match next {
                    Some(Next::Message(message)) => log.push(&message),
                    Some(Next::NotSent) | None => break,
                },
                Some(retry) = next_pause(&mut pauses) => log.pause(retry),
            }
        }
        log.finish();
    });
}

/// A call sent, its client waiting for the first message. In a session, a client that goes away
/// then (its connection closed, so the handler is dropped) does not cancel the call: a closed
/// stream is no cancellation there (the spec's rule, and the full path's). The call runs on to
/// its end in a task of its own, its messages dropped (the client was never given a stream to
/// resume), unless it is cancelled (by the client, or its session's end) or the daemon stops.
struct Waiting {
    call: Option<(Relayed, tokio_util::task::task_tracker::TaskTrackerToken)>,
    runs_out: bool,
    cancelled: CancellationToken,
    stop: CancellationToken,
}

impl Waiting {
    async fn first(&mut self) -> Option<Next> {
        match &mut self.call {
            Some((relayed, _)) => relayed.next().await,
            None => None,
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some((mut relayed, in_flight)) = self.call.take() else {
            return;
        };
        if !self.runs_out
            || self.cancelled.is_cancelled()
            || self.stop.is_cancelled()
            || tokio::runtime::Handle::try_current().is_err()
        {
            return;
        }
        let (cancelled, stop) = (self.cancelled.clone(), self.stop.clone());
        tokio::spawn(async move {
            let _counted = in_flight;
            let run_out = async { while let Some(Next::Message(_)) = relayed.next().await {} };
            tokio::select! {
                () = run_out => {}
                () = cancelled.cancelled() => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

/// Where a relayed call's messages come from: the call being sent, then its reply.
enum Source {
    Sending(futures::future::BoxFuture<'static, Result<DirectReply, UpstreamError>>),
    Streaming(futures::stream::BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>>),
    Ended,
}

/// What a relayed call has for its client next.
#[expect(
    clippy::large_enum_variant,
    reason = "one at a time, moved once to the client's stream; boxing would only add an \
              allocation to every message"
)]
enum Next {
    /// A message for the client: a question of the server's, a notification it wants, or the
    /// response (the last).
    Message(ServerJsonRpcMessage),
    /// The call was not sent; the full path is to take it.
    NotSent,
}

/// A call on its way: the server's messages, mapped and filtered for the client, and the
/// server's questions to it, in the order they come, until the response.
struct Relayed {
    source: Source,
    /// Requests for the client from the call's responder ([`AskOnStream`]).
    questions: Option<mpsc::Receiver<ServerJsonRpcMessage>>,
    catalog: Arc<ExposedCatalog>,
    server: switchboard_core::ServerId,
    /// The client's id for the call.
    id: RequestId,
    era: Era,
    /// The least severe log message the client wants (see [`Era`] when there is none).
    log_level: Option<LoggingLevel>,
    /// The client's request in traces, open until its answer.
    span: tracing::Span,
}

impl Relayed {
    /// The next message for the client; `None` after the response.
    async fn next(&mut self) -> Option<Next> {
        loop {
            let question = async {
                match &mut self.questions {
                    Some(questions) => questions.recv().await,
                    None => std::future::pending().await,
                }
            };
            let reply = match &mut self.source {
                Source::Ended => return None,
                Source::Sending(sent) => tokio::select! {
                    Some(question) = question => return Some(Next::Message(question)),
                    reply = sent => reply,
                },
                Source::Streaming(messages) => tokio::select! {
                    Some(question) = question => return Some(Next::Message(question)),
                    message = messages.next() => match message {
                        Some(Ok(JsonRpcMessage::Notification(notification))) => {
                            if wants(self.era, self.log_level, &notification.notification) {
                                return Some(Next::Message(JsonRpcMessage::Notification(
                                    notification,
                                )));
                            }
                            continue;
                        }
                        Some(outcome) => outcome.map(DirectReply::Message),
                        None => Err(UpstreamError::Closed),
                    },
                },
            };
            let outcome = match reply {
                Ok(DirectReply::Stream(messages)) => {
                    self.source = Source::Streaming(messages);
                    continue;
                }
                Ok(DirectReply::NotSent) => {
                    self.source = Source::Ended;
                    return Some(Next::NotSent);
                }
                Ok(DirectReply::Message(message)) => Ok(message),
                Err(error) => Err(error),
            };
            self.source = Source::Ended;
            return Some(Next::Message(self.finish(outcome)));
        }
    }

    /// The client's answer to the server's response, or to the failure to get one.
    fn finish(&self, outcome: Result<ServerJsonRpcMessage, UpstreamError>) -> ServerJsonRpcMessage {
        let answer = answer(&self.catalog, &self.server, &self.id, self.era, outcome);
        match &answer {
            JsonRpcMessage::Error(error) => super::trace_error(&self.span, &error.error),
            JsonRpcMessage::Response(JsonRpcResponse {
                result: ServerResult::CallToolResult(result),
                ..
            }) if result.is_error == Some(true) => {
                switchboard_telemetry::record_error(&self.span, "tool_error", None);
            }
            _ => {}
        }
        answer
    }
}

/// Whether a client of `era` that wants log messages from `log_level` up wants this
/// notification about its call.
fn wants(era: Era, log_level: Option<LoggingLevel>, notification: &ServerNotification) -> bool {
    match notification {
        ServerNotification::ProgressNotification(_) => true,
        ServerNotification::LoggingMessageNotification(log) => match (era, log_level) {
            (_, Some(level)) => severity(log.params.level) >= severity(level),
            (Era::Session, None) => true,
            (Era::Stateless, None) => false,
        },
        _ => false,
    }
}

/// A client's answer to a question the short path put to it.
pub(crate) type Answer = oneshot::Sender<ClientJsonRpcMessage>;

/// The responder of a session call on the short path: the server's requests for input go to
/// the client on the call's own stream (as the full path puts them on the request's stream),
/// under ids of Switchboard's own, and the client's answers, which it POSTs in its session, are
/// taken by [`try_call`] on their way to rmcp. Requests the client did not declare the
/// capability for are refused as on the full path.
struct AskOnStream {
    shared: Arc<Shared>,
    session: String,
    capabilities: rmcp::model::ClientCapabilities,
    /// The log level the session asked for when the call began.
    log_level: Option<LoggingLevel>,
    /// The call's stream to the client.
    questions: mpsc::Sender<ServerJsonRpcMessage>,
    /// The call's place among those the client's `notifications/cancelled` reaches.
    _registered: Registered,
}

/// The prefix of the ids of requests the short path puts to clients.
const QUESTION_ID_PREFIX: &str = "switchboard-ask-";

impl switchboard_upstream::InputResponder for AskOnStream {
    /// The session: the full path knows this session's calls by its id too.
    fn client(&self) -> Option<&str> {
        Some(&self.session)
    }

    /// A log message the server sent about the call on its session's GET stream (those on the
    /// call's own stream are read by the short path itself) goes on the call's stream too, if
    /// the session wants it.
    fn log(&self, message: rmcp::model::LoggingMessageNotificationParam) {
        let notification =
            ServerNotification::LoggingMessageNotification(rmcp::model::Notification::new(message));
        if !wants(Era::Session, self.log_level, &notification) {
            return;
        }
        let message = JsonRpcMessage::notification(notification);
        if let Err(mpsc::error::TrySendError::Full(message)) = self.questions.try_send(message) {
            let questions = self.questions.clone();
            tokio::spawn(async move { questions.send(message).await });
        }
    }

    fn answer(
        &self,
        _key: Option<&str>,
        request: InputRequest,
    ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, ErrorData>> {
        if let Err(refused) = super::downstream::supports(&self.capabilities, &request) {
            return Box::pin(std::future::ready(Err(refused)));
        }
        let request = match request {
            InputRequest::CreateMessage(r) => ServerRequest::CreateMessageRequest(r),
            InputRequest::Elicitation(r) => ServerRequest::ElicitRequest(r),
            InputRequest::ListRoots(r) => ServerRequest::ListRootsRequest(r),
            _ => {
                let refused = ErrorData::invalid_params(
                    "Switchboard cannot relay this kind of input request",
                    None,
                );
                return Box::pin(std::future::ready(Err(refused)));
            }
        };
        static QUESTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let number = QUESTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = RequestId::String(format!("{QUESTION_ID_PREFIX}{number}").into());
        let (answer, answered) = oneshot::channel();
        let key = (self.session.clone(), id.clone());
        lock(&self.shared.direct_questions).insert(key.clone(), answer);
        let unregister = Unregister {
            shared: self.shared.clone(),
            key,
        };
        let questions = self.questions.clone();
        let question = JsonRpcMessage::Request(JsonRpcRequest::new(id, request));
        Box::pin(async move {
            let _unregister = unregister;
            let gone =
                || ErrorData::internal_error("the client's request ended before it answered", None);
            questions.send(question).await.map_err(|_| gone())?;
            // Until the client answers, or the call's stream to it ends.
            let answer = tokio::select! {
                answer = answered => answer.map_err(|_| gone())?,
                () = questions.closed() => return Err(gone()),
            };
            match answer {
                JsonRpcMessage::Response(response) => serde_json::to_value(response.result)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
                JsonRpcMessage::Error(error) => Err(error.error),
                _ => Err(gone()),
            }
        })
    }
}

/// Removes a question from those waiting for an answer when dropped.
struct Unregister {
    shared: Arc<Shared>,
    key: (String, RequestId),
}

impl Drop for Unregister {
    fn drop(&mut self) {
        lock(&self.shared.direct_questions).remove(&self.key);
    }
}

/// How long a client is told to wait before resuming a stream, as rmcp tells it.
const RESUME_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

/// How many of a session's latest streams are kept for resumption.
const KEPT_STREAMS: usize = 16;

/// The prefix of the event ids of the short path's streams (`sb-<stream>-<index>`), which tells
/// a resumption of one of them from one of rmcp's.
const EVENT_ID_PREFIX: &str = "sb-";

/// A session's streams on the short path, kept so that its client can resume them.
#[derive(Default)]
pub(crate) struct SessionStreams {
    next: u64,
    kept: std::collections::VecDeque<(u64, Arc<StreamLog>)>,
}

impl SessionStreams {
    /// Keeps `log` as a new stream (forgetting the oldest beyond [`KEPT_STREAMS`]); its number.
    fn keep(&mut self, log: Arc<StreamLog>) -> u64 {
        let stream = self.next;
        self.next += 1;
        if self.kept.len() >= KEPT_STREAMS {
            self.kept.pop_front();
        }
        self.kept.push_back((stream, log));
        stream
    }

    fn find(&self, stream: u64) -> Option<Arc<StreamLog>> {
        self.kept
            .iter()
            .find(|(number, _)| *number == stream)
            .map(|(_, log)| log.clone())
    }
}

/// The messages of one stream to a session client, as sent, and whether it is complete.
#[derive(Default)]
pub(crate) struct StreamLog {
    messages: std::sync::Mutex<(Vec<Entry>, bool)>,
    changed: tokio::sync::Notify,
    /// A client that comes back for the rest after the stream paused.
    polling: Option<switchboard_upstream::CallerPolling>,
}

/// One event of a [`StreamLog`].
enum Entry {
    /// A message, as its JSON.
    Message(String),
    /// The server ended its stream before the response: the client's stream ends here too,
    /// with the server's reconnection delay in milliseconds, if it gave one.
    Pause(Option<u128>),
}

impl StreamLog {
    /// A log whose pauses `polling`'s client comes back from.
    fn polled_by(polling: Option<switchboard_upstream::CallerPolling>) -> Self {
        Self {
            polling,
            ..Self::default()
        }
    }

    fn push(&self, message: &ServerJsonRpcMessage) {
        let data = serde_json::to_string(message).unwrap_or_default();
        lock(&self.messages).0.push(Entry::Message(data));
        self.changed.notify_waiters();
    }

    fn pause(&self, retry: Option<std::time::Duration>) {
        let retry = retry.map(|retry| retry.as_millis());
        lock(&self.messages).0.push(Entry::Pause(retry));
        self.changed.notify_waiters();
    }

    /// The client came back for the events after the one numbered `after`: when that one
    /// paused the stream and the server's is still paused, the server's is resumed now.
    fn came_back(&self, after: usize) {
        let messages = lock(&self.messages);
        let paused_there = after > 0
            && after == messages.0.len()
            && matches!(messages.0.get(after - 1), Some(Entry::Pause(_)));
        if paused_there && let Some(polling) = &self.polling {
            polling.came_back();
        }
    }

    fn finish(&self) {
        lock(&self.messages).1 = true;
        self.changed.notify_waiters();
    }

    /// The stream `stream` as an SSE answer: from the start (the priming event first) when
    /// `after` is 0, else the events after the one numbered `after`; it follows the log until
    /// it is complete or pauses, with a keep-alive comment every 15 s. Written by hand: the
    /// priming event carries an empty `data` field (SEP-1699), which axum's events leave out, and
    /// a pause is an event with an id, the server's `retry` and empty data, after which the
    /// response ends.
    fn follow(self: Arc<Self>, stream: u64, after: usize) -> Response {
        let priming = (after == 0).then(|| {
            let retry = RESUME_AFTER.as_millis();
            Bytes::from(format!(
                "id: {EVENT_ID_PREFIX}{stream}-0\nretry: {retry}\ndata: \n\n"
            ))
        });
        let events = futures::stream::unfold(Some((self, after)), move |state| async move {
            let (log, next) = state?;
            loop {
                let changed = log.changed.notified();
                let mut changed = std::pin::pin!(changed);
                changed.as_mut().enable();
                {
                    let messages = lock(&log.messages);
                    let id = format!("{EVENT_ID_PREFIX}{stream}-{}", next + 1);
                    match messages.0.get(next) {
                        // Compact JSON has no raw line breaks, so one `data` line carries it.
                        Some(Entry::Message(data)) => {
                            let event = format!("id: {id}\ndata: {data}\n\n");
                            return Some((Bytes::from(event), Some((log.clone(), next + 1))));
                        }
                        Some(Entry::Pause(retry)) => {
                            let retry =
                                retry.map(|ms| format!("retry: {ms}\n")).unwrap_or_default();
                            let event = format!("id: {id}\n{retry}data: \n\n");
                            return Some((Bytes::from(event), None));
                        }
                        None if messages.1 => return None,
                        None => {}
                    }
                }
                changed.await;
            }
        });
        let events = futures::stream::iter(priming)
            .chain(events)
            .map(Some)
            .chain(futures::stream::once(async { None }));
        let every = std::time::Duration::from_secs(15);
        let ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        let pings = futures::stream::unfold(ticks, |mut ticks| async move {
            ticks.tick().await;
            Some((Some(Bytes::from_static(b": keep-alive\n\n")), ticks))
        });
        let body = futures::stream::select(events, pings)
            .take_while(|chunk| std::future::ready(chunk.is_some()))
            .filter_map(|chunk| std::future::ready(chunk.map(Ok::<_, Infallible>)));
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            axum::body::Body::from_stream(body),
        )
            .into_response()
    }
}

/// Resumes a stream of the short path for a session client's GET with `Last-Event-ID` naming
/// one of its events; `None` when it names none (rmcp's, then).
pub(crate) fn try_resume(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let session = single(headers, "mcp-session-id")?;
    let last = single(headers, "last-event-id")?.strip_prefix(EVENT_ID_PREFIX)?;
    let (stream, index) = last.split_once('-')?;
    let (stream, index) = (stream.parse::<u64>().ok()?, index.parse::<usize>().ok()?);
    let state = lock(&shared.direct_sessions)
        .get(session)
        .and_then(std::sync::Weak::upgrade)?;
    let log = lock(&state.direct_streams).find(stream)?;
    log.came_back(index);
    Some(log.follow(stream, index))
}

/// The answer to a request the client cancelled: a stream that ends without a message.
fn unanswered() -> Response {
    Sse::new(futures::stream::empty::<Result<Event, Infallible>>()).into_response()
}

/// Whether a POST's headers are those this path reads: a JSON body, a client that accepts
/// both JSON and SSE answers, no `Mcp-Param-*` header.
fn plain_post(headers: &HeaderMap) -> bool {
    let accepts = |wanted: &str| {
        single(headers, header::ACCEPT.as_str()).is_some_and(|accept| {
            accept
                .split(',')
                .any(|range| media_type(range) == Some(wanted) && !refused(range))
        })
    };
    let json_body = single(headers, header::CONTENT_TYPE.as_str())
        .is_some_and(|kind| media_type(kind) == Some("application/json"));
    headers.contains_key(header::HOST)
        && json_body
        && accepts("application/json")
        && accepts("text/event-stream")
        && !headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
}

/// Whether the headers are those of a stateless 2026-07-28 `tools/call` that this path checks
/// completely: the plain POST headers ([`plain_post`]), no session, one of each standard
/// header, and no Base64 name.
fn plain_stateless_call(headers: &HeaderMap) -> bool {
    plain_post(headers)
        && !headers.contains_key("mcp-session-id")
        && single(headers, "mcp-protocol-version") == Some(ProtocolVersion::V_2026_07_28.as_str())
        && single(headers, "mcp-method") == Some("tools/call")
        && single(headers, "mcp-name").is_some_and(|name| !name.starts_with(BASE64_HEADER_PREFIX))
}

/// The media type of a `Content-Type` value or an `Accept` range, without its parameters.
fn media_type(value: &str) -> Option<&str> {
    value
        .split(';')
        .next()
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Whether an `Accept` range says `q=0` (not acceptable).
fn refused(range: &str) -> bool {
    range.split(';').skip(1).any(|param| {
        param
            .trim()
            .strip_prefix("q=")
            .and_then(|q| q.trim().parse::<f32>().ok())
            .is_some_and(|q| q <= 0.0)
    })
}

/// The header's value when it is present exactly once and readable.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    match values.next() {
        None => value.to_str().ok(),
        Some(_) => None,
    }
}

/// Whether `name` travels as an HTTP header value as it is (visible ASCII, not Base64-marked).
fn plain_header_value(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_graphic())
        && !name.starts_with(BASE64_HEADER_PREFIX)
}

/// Whether `key` appears anywhere in `object` (at any depth).
fn mentions_key(object: &JsonObject, key: &str) -> bool {
    fn in_value(value: &serde_json::Value, key: &str) -> bool {
        match value {
            serde_json::Value::Object(object) => mentions_key(object, key),
            serde_json::Value::Array(items) => items.iter().any(|item| in_value(item, key)),
            _ => false,
        }
    }
    object
        .iter()
        .any(|(name, value)| name == key || in_value(value, key))
}

/// The client's answer to the server's response (or to the failure to get one), mapped as the
/// full path maps it and finished for the client's `era` as rmcp finishes it.
fn answer(
    catalog: &ExposedCatalog,
    server: &switchboard_core::ServerId,
    id: &RequestId,
    era: Era,
    outcome: Result<ServerJsonRpcMessage, UpstreamError>,
) -> ServerJsonRpcMessage {
    let result = match outcome {
        Ok(JsonRpcMessage::Response(response)) => Ok(response.result),
        Ok(JsonRpcMessage::Error(error)) => Err(UpstreamError::Rpc {
            code: error.error.code.0,
            message: error.error.message.into_owned(),
            data: error.error.data,
        }),
        Ok(_) => Err(UpstreamError::Protocol(
            "a message that does not answer the call".into(),
        )),
        Err(error) => Err(error),
    };
    // As rmcp finishes every answer on the full path: for a 2026-07-28 client, cache hints
    // filled in and the standard code for a missing resource; for a legacy one, no
    // `resultType`, and no `input_required` (which it cannot read).
    let finished = call_result(catalog, server, result).and_then(|response| {
        let mut result = ServerResult::from(response);
        match era {
            Era::Stateless => result.fill_missing_cache_hints(),
            Era::Session if matches!(result, ServerResult::InputRequiredResult(_)) => {
                return Err(ErrorData::invalid_request(
                    "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                    None,
                ));
            }
            Era::Session => result.strip_result_type_for_legacy_peer(),
        }
        Ok(result)
    });
    match finished {
        Ok(result) => JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: Default::default(),
            id: id.clone(),
            result,
        }),
        Err(mut error) => {
            if era == Era::Stateless && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            JsonRpcMessage::Error(JsonRpcError::new(Some(id.clone()), error))
        }
    }
}

fn is_final(message: &ServerJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)
    )
}

/// Admits `call` of `tool` ([`Admission::admit`]); `Some`, the error answer to request `id`
/// from a client of `era`, when it is refused, marked on the request's `span` as on its
/// admission's.
fn refusal(
    admission: &Admission<'_>,
    tool: &Exposed<rmcp::model::Tool>,
    call: &CallToolRequest,
    parts: &Parts,
    id: &RequestId,
    span: &tracing::Span,
    era: Era,
) -> Option<Response> {
    let none = JsonObject::new();
    let meta = call
        .extensions
        .get::<RequestMetaObject>()
        .map_or(&none, |meta| &meta.0);
    let caller = super::caller::caller_of(&call.params, meta, Some(parts));
    let admission_span = span.in_scope(switchboard_telemetry::admission_span);
    admission
        .admit(
            tool,
            &call.params.name,
            caller,
            call.params.arguments.as_ref(),
            &admission_span,
        )
        .err()
        .map(|error| {
            super::trace_error(span, &error);
            let refused = JsonRpcMessage::Error(JsonRpcError {
                jsonrpc: Default::default(),
                id: Some(id.clone()),
                error,
            });
            json(era, refused)
        })
}

/// The span of a client's `tools/call` taken here, by the name the client called (see
/// [`switchboard_telemetry::server_span`]).
fn request_span(call: &CallToolRequest, parts: &Parts) -> tracing::Span {
    switchboard_telemetry::server_span("tools/call", Some(&call.params.name), || {
        let meta = call
            .extensions
            .get::<RequestMetaObject>()
            .or(call.params.meta.as_ref())
            .map(|meta| &meta.0);
        switchboard_telemetry::TraceContext::incoming(meta, Some(&parts.headers))
    })
}

/// One message as the whole HTTP answer, with the status a server of the client's era gives
/// it (as rmcp does on the full path: to a 2026-07-28 client some errors are HTTP errors too).
fn json(era: Era, message: ServerJsonRpcMessage) -> Response {
    let status = match &message {
        JsonRpcMessage::Error(error) if era == Era::Stateless => match error.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    };
    let body = serde_json::to_vec(&message).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Bytes::from(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    const PLAIN: [(&str, &str); 6] = [
        ("host", "127.0.0.1:8750"),
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "files__read"),
    ];

    #[test]
    fn only_requests_whose_headers_this_path_checks_completely_are_taken() {
        assert!(plain_stateless_call(&headers(&PLAIN)));
        let with = |extra: (&'static str, &'static str)| {
            let mut pairs = PLAIN.to_vec();
            pairs.push(extra);
            plain_stateless_call(&headers(&pairs))
        };
        let without = |name: &str| {
            let pairs: Vec<_> = PLAIN.iter().copied().filter(|(n, _)| *n != name).collect();
            plain_stateless_call(&headers(&pairs))
        };
        let replaced = |name: &str, value: &'static str| {
            let pairs: Vec<_> = PLAIN
                .iter()
                .map(|&(n, v)| if n == name { (n, value) } else { (n, v) })
                .collect();
            plain_stateless_call(&headers(&pairs))
        };
        assert!(!with(("mcp-session-id", "abc")), "a session");
        assert!(!with(("mcp-method", "tools/list")), "two methods");
        assert!(!with(("mcp-name", "other")), "two names");
        assert!(!with(("mcp-param-region", "eu")), "a parameter header");
        for name in [
            "host",
            "accept",
            "content-type",
            "mcp-protocol-version",
            "mcp-method",
            "mcp-name",
        ] {
            assert!(!without(name), "without {name}");
        }
        assert!(!replaced("accept", "application/json"), "JSON only");
        assert!(
            !replaced("accept", "application/json, text/event-stream;q=0"),
            "SSE refused"
        );
        assert!(
            !replaced("accept", "application/json-seq, text/event-stream"),
            "another JSON type"
        );
        assert!(replaced(
            "accept",
            "application/json;q=0.9, text/event-stream; q=1"
        ));
        assert!(!replaced("content-type", "application/jsonl"), "JSON lines");
        assert!(replaced("content-type", "application/json; charset=utf-8"));
        assert!(
            !replaced("mcp-protocol-version", "2025-11-25"),
            "a legacy version"
        );
        assert!(!replaced("mcp-method", "prompts/get"), "another method");
        assert!(
            !replaced("mcp-name", "=?base64?ZmlsZXNfX3JlYWQ=?="),
            "a Base64 name"
        );
    }

    #[test]
    fn header_annotations_are_found_at_any_depth() {
        let schema = |value: serde_json::Value| value.as_object().unwrap().clone();
        assert!(!mentions_key(
            &schema(serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}})),
            "x-mcp-header"
        ));
        assert!(mentions_key(
            &schema(serde_json::json!({"properties": {"q": {"x-mcp-header": "Q"}}})),
            "x-mcp-header"
        ));
        assert!(mentions_key(
            &schema(serde_json::json!({"anyOf": [{"properties": {"r": {"x-mcp-header": "R"}}}]})),
            "x-mcp-header"
        ));
    }

    #[test]
    fn answers_are_finished_as_rmcp_finishes_them_for_2026_clients() {
        let catalog = switchboard_hub::ExposedCatalog::default();
        let server = switchboard_core::ServerId::new("files").unwrap();
        let id = RequestId::Number(3);
        let missing = JsonRpcMessage::Error(JsonRpcError::new(
            Some(id.clone()),
            rmcp::model::ErrorData::resource_not_found("no such file", None),
        ));
        let JsonRpcMessage::Error(error) =
            answer(&catalog, &server, &id, Era::Stateless, Ok(missing))
        else {
            panic!("an error stays an error");
        };
        assert_eq!(error.error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(error.error.message, "no such file");

        let failed = answer(
            &catalog,
            &server,
            &id,
            Era::Stateless,
            Err(UpstreamError::Closed),
        );
        let text = serde_json::to_value(&failed).unwrap();
        assert_eq!(text["id"], 3);
        assert_eq!(text["result"]["isError"], true, "{text}");
        assert_eq!(text["result"]["resultType"], "complete", "{text}");
    }

    #[test]
    fn names_that_need_encoding_are_not_plain_header_values() {
        assert!(plain_header_value("read_file.v2"));
        for name in ["", "two words", "naïve", "=?base64?eA==?=", "tab\t"] {
            assert!(!plain_header_value(name), "{name:?}");
        }
    }
}
