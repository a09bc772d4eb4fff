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

mod questions;
mod relay;
mod resumable;

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, header};
use axum::response::Response;
use rmcp::model::{
    CallToolRequest, ClientNotification, ClientRequest, JsonObject, JsonRpcError, JsonRpcMessage,
    JsonRpcRequest, JsonRpcResponse, ProtocolVersion, RequestId, RequestMetaObject,
};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use switchboard_core::exposure::Exposed;
use switchboard_hub::{ExposedCatalog, ServerView};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::admission::{Admission, Charged, task_mode};
use switchboard_core::sync::lock;

pub(crate) use questions::Answer;
use questions::*;
use relay::*;
use resumable::*;
pub(crate) use resumable::{SessionStreams, try_resume};

/// The MCP headers this path reads, as parsed names: a lookup by a `&str` parses the name again
/// each time.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD: HeaderName = HeaderName::from_static("mcp-method");
const NAME: HeaderName = HeaderName::from_static("mcp-name");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

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

/// Relays `body` (a POST to `/mcp` with `parts`) directly when it is a plain `tools/call` this path
/// takes; [`ShortPath::Declined`] when the full path must answer it. `sessions` are rmcp's
/// Streamable HTTP sessions. A session's `notifications/cancelled` for a call relayed here cancels
/// it (and still goes on to rmcp). At shutdown, `stop` ends a call still running after the drain
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
    let taken = if !parts.headers.contains_key(&super::http::SESSION_HEADER) {
        stateless_call(shared, stop, parts, body).await
    } else if let Some(session) = single(&parts.headers, &super::http::SESSION_HEADER) {
        session_call(shared, sessions, stop, parts, session, body).await
    } else {
        None
    };
    taken.unwrap_or(ShortPath::Declined(None))
}

/// A stateless 2026-07-28 `tools/call` of a stateless server's tool.
///
/// Its admission is a function of its own, not a part of this future: a local that was ever
/// borrowed stays in an `async fn`'s future until its scope ends, moved out or not, so the
/// request and its server's handle were kept twice while the call ran (`docs/benchmarks.md`).
async fn stateless_call(
    shared: &Arc<Shared>,
    stop: &CancellationToken,
    parts: &Parts,
    body: &Bytes,
) -> Option<ShortPath> {
    // Matched before the relay is awaited: a `match` keeps what it matches until its end.
    let (catalog, call) = match admit_stateless(shared, parts, body)? {
        Ok(relayable) => relayable,
        Err(answer) => return Some(ShortPath::Answered(answer)),
    };
    Some(ShortPath::after_admission(
        relay(shared, stop, catalog, call).await,
    ))
}

/// The relay of a stateless call ([`stateless_call`]): `None` when this path does not take
/// it, `Err` when it is refused (the refusal is the answer).
fn admit_stateless(
    shared: &Arc<Shared>,
    parts: &Parts,
    body: &Bytes,
) -> Option<Result<(Arc<ExposedCatalog>, Call), Response>> {
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
    // Both keys a 2026-07-28 request's `_meta` must have (rmcp's `missing_required_keys`).
    if switchboard_upstream::wire::protocol_version_in(meta)
        != Some(ProtocolVersion::V_2026_07_28.as_str())
        || single(&parts.headers, &NAME) != Some(&*call.params.name)
    {
        return None;
    }
    let capabilities = meta.client_capabilities()?;
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
    let server = shared.hub.server_view(&tool.server).ok()?;
    if !runs_to_its_result(&server, tool, &call, capabilities.supports_tasks())
        || has_policies(&server, tool, Some(meta), &parts.headers)
    {
        return None;
    }
    let upstream = server
        .upstream_for_tool(&tool.upstream)
        .ok()
        .filter(|upstream| upstream.calls_directly() && !upstream.has_sessions())?;
    let span = request_span(&call, parts);
    let admitting = (&admission, tool, &server);
    if let Some(answer) = refusal(admitting, &call, parts, &id, &span, Era::Stateless) {
        return Some(Err(answer));
    }
    let origin = admission.origin(&call.params.name, call.params.arguments.as_ref());
    let log_level = meta.log_level();
    let repeatable = server.repeatable(&tool.upstream, tool.item.annotations.as_ref());
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
        repeatable,
        span,
        origin,
    };
    Some(Ok((catalog, call)))
}

/// A legacy session's `tools/call` of a tool on a server with sessions, or its
/// `notifications/cancelled` for a call relayed here. Taken apart like [`stateless_call`], and
/// for the same reason.
async fn session_call(
    shared: &Arc<Shared>,
    sessions: &LocalSessionManager,
    stop: &CancellationToken,
    parts: &Parts,
    session: &str,
    body: &Bytes,
) -> Option<ShortPath> {
    let (state, id, call) = match session_message(shared, parts, session, body)? {
        SessionMessage::Call(state, id, call) => (state, id, call),
        SessionMessage::Answered(answer) => return Some(ShortPath::Answered(answer)),
    };
    // The session's id as its state keeps it, shared rather than copied (the same text).
    let session: Arc<str> = match state.http_session.get() {
        Some(kept) if **kept == *session => kept.clone(),
        _ => Arc::from(session),
    };
    if !sessions.has_session(&session).await.unwrap_or(false) {
        return None;
    }
    let (catalog, call) = match admit_in_session(shared, parts, session, state, id, call)? {
        Ok(relayable) => relayable,
        Err(answer) => return Some(ShortPath::Answered(answer)),
    };
    Some(ShortPath::after_admission(
        relay(shared, stop, catalog, call).await,
    ))
}

/// What [`session_message`] made of a session's message.
enum SessionMessage {
    /// A `tools/call` for this path, in the session whose state this is.
    Call(Arc<crate::mcp::SessionState>, RequestId, CallToolRequest),
    /// The client's answer to a question this path put to it, taken here.
    Answered(Response),
}

/// The `tools/call` in a session's `body` ([`session_call`]), or the client's answer to a
/// question, taken here; `None` when this path does not take the message.
fn session_message(
    shared: &Arc<Shared>,
    parts: &Parts,
    session: &str,
    body: &Bytes,
) -> Option<SessionMessage> {
    let state = lock(&shared.short_path_sessions)
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
            return answered(shared, session, id.clone(), message).map(SessionMessage::Answered);
        }
        JsonRpcMessage::Error(JsonRpcError {
            id: Some(ref id), ..
        }) => {
            return answered(shared, session, id.clone(), message).map(SessionMessage::Answered);
        }
        _ => return None,
    };
    // The headers a legacy client sends, and nothing this path would have to check.
    if !plain_post(&parts.headers) {
        return None;
    }
    let version = match parts.headers.get(&PROTOCOL_VERSION) {
        None => true,
        Some(_) => single(&parts.headers, &PROTOCOL_VERSION)
            .is_some_and(|version| version == negotiated.version.as_str()),
    };
    if !negotiated.version.has_initialize()
        || !version
        || parts.headers.contains_key(&METHOD)
        || parts.headers.contains_key(&NAME)
        || call.params.input_responses.is_some()
        || call.params.request_state.is_some()
        || call
            .extensions
            .get::<RequestMetaObject>()
            .is_some_and(|meta| switchboard_upstream::wire::protocol_version_in(meta).is_some())
    {
        return None;
    }
    Some(SessionMessage::Call(state, id, call))
}

/// The relay of a session's call ([`session_call`]), once its session is known to rmcp:
/// `None` when this path does not take it, `Err` when it is refused (the refusal is the answer).
fn admit_in_session(
    shared: &Arc<Shared>,
    parts: &Parts,
    session: Arc<str>,
    state: Arc<crate::mcp::SessionState>,
    id: RequestId,
    call: CallToolRequest,
) -> Option<Result<(Arc<ExposedCatalog>, Call), Response>> {
    let negotiated = state.negotiated.get()?;
    if super::deferred::is_meta_tool(&call.params.name)
        || state.adds_to_working_set(shared, &call.params.name)
    {
        return None;
    }
    let catalog = shared.hub.exposed();
    let admission = Admission::new(&shared.hub, Some(&state), Some(parts));
    let tool = admission.tool(&catalog, &call.params.name).ok()?;
    let server = shared.hub.server_view(&tool.server).ok()?;
    if !runs_to_its_result(
        &server,
        tool,
        &call,
        negotiated.capabilities.supports_tasks(),
    ) || has_policies(
        &server,
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
    let upstream = server.upstream_for_tool(&tool.upstream).ok()?;
    let upstream = if upstream.has_sessions() {
        upstream
    } else {
        server.open_sessions_link()?
    };
    // A server holding another client's roots is told they changed on the full path first.
    let upstream = Some(upstream).filter(|upstream| {
        upstream.calls_directly()
            && upstream.has_sessions()
            && !upstream.roots_held_by_another(&session)
    })?;
    let span = request_span(&call, parts);
    let admitting = (&admission, tool, &server);
    if let Some(answer) = refusal(admitting, &call, parts, &id, &span, Era::Session) {
        return Some(Err(answer));
    }
    let origin = admission.origin(&call.params.name, call.params.arguments.as_ref());
    // Cancelled by the client, or when its session ends; reachable by the client's
    // cancellation for as long as the call's responder lives (until its reading ends, even
    // after the client's connection closed).
    let cancelled = state.ended.child_token();
    let registered = Registered::new(shared, &session, &id, &cancelled);
    let log_level = *lock(&state.log_level);
    let (questions, asked) = mpsc::channel(1);
    let asker = AskOnStream {
        shared: shared.clone(),
        session,
        state: state.clone(),
        log_level,
        questions,
        _registered: registered,
    };
    let asking = (asker, asked);
    let repeatable = server.repeatable(&tool.upstream, tool.item.annotations.as_ref());
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
        repeatable,
        span,
        origin,
    };
    Some(Ok((catalog, call)))
}

/// Whether a call of `tool` runs to its result, as this path runs calls ([`task_mode`]): not
/// one that may become a task (the full path runs tasks), nor one refused for a client that
/// takes no tasks (the full path refuses it).
fn runs_to_its_result(
    server: &ServerView,
    tool: &Exposed<rmcp::model::Tool>,
    call: &CallToolRequest,
    takes_tasks: bool,
) -> bool {
    matches!(
        task_mode(Some(server), tool, &call.params.name, takes_tasks, false),
        Ok(switchboard_core::TaskMode::Forbidden)
    )
}

/// Whether a call of `tool` has policies to apply, which the full path does: a caller to check
/// (the tool names its allowed callers, or the call declares who makes it), or arguments an
/// admin fixed.
fn has_policies(
    server: &ServerView,
    tool: &Exposed<rmcp::model::Tool>,
    meta: Option<&rmcp::model::JsonObject>,
    headers: &axum::http::HeaderMap,
) -> bool {
    server.policies_apply_to_calls(&tool.upstream) || super::caller::declares_caller(meta, headers)
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

/// Whether a POST's headers are those this path reads: a JSON body, a client that accepts
/// both JSON and SSE answers, no `Mcp-Param-*` header.
fn plain_post(headers: &HeaderMap) -> bool {
    let json_body = single(headers, &header::CONTENT_TYPE)
        .is_some_and(|kind| media_type(kind) == Some("application/json"));
    headers.contains_key(header::HOST)
        && json_body
        && single(headers, &header::ACCEPT).is_some_and(accepts_json_and_sse)
        && !headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
}

/// Whether an `Accept` value takes both JSON and SSE answers (read in one pass).
fn accepts_json_and_sse(accept: &str) -> bool {
    let (mut json, mut sse) = (false, false);
    for range in accept.split(',') {
        let wanted = match media_type(range) {
            Some("application/json") => &mut json,
            Some("text/event-stream") => &mut sse,
            _ => continue,
        };
        *wanted |= !refused(range);
    }
    json && sse
}

/// Whether the headers are those of a stateless 2026-07-28 `tools/call` that this path checks
/// completely: the plain POST headers ([`plain_post`]), no session, one of each standard
/// header, and no Base64 name.
fn plain_stateless_call(headers: &HeaderMap) -> bool {
    plain_post(headers)
        && !headers.contains_key(&super::http::SESSION_HEADER)
        && single(headers, &PROTOCOL_VERSION) == Some(ProtocolVersion::V_2026_07_28.as_str())
        && single(headers, &METHOD) == Some("tools/call")
        && single(headers, &NAME).is_some_and(|name| !name.starts_with(BASE64_HEADER_PREFIX))
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
fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
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

/// Admits `call` of `tool` on `server` ([`Admission::admit`]); `Some`, the error answer to
/// request `id` from a client of `era`, when it is refused, marked on the request's `span` as on
/// its admission's.
fn refusal(
    (admission, tool, server): (&Admission<'_>, &Exposed<rmcp::model::Tool>, &ServerView),
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
            Some(server),
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
            json(era, &refused)
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
        assert!(
            replaced(
                "accept",
                "application/json;q=0, text/event-stream, application/json"
            ),
            "JSON refused in one range and accepted in another"
        );
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
    fn names_that_need_encoding_are_not_plain_header_values() {
        assert!(plain_header_value("read_file.v2"));
        for name in ["", "two words", "naïve", "=?base64?eA==?=", "tab\t"] {
            assert!(!plain_header_value(name), "{name:?}");
        }
    }
}
