//! The aggregated server over Streamable HTTP, at `/mcp`.
//!
//! rmcp's `StreamableHttpService` serves both shapes on the one path: requests that carry
//! 2026-07-28 `_meta` are answered statelessly, `initialize` opens a legacy session (with its
//! GET stream, resumable SSE and DELETE). Host and Origin are checked by the router's
//! DNS-rebinding guard before a request gets here, so rmcp's own host list is left open.
//!
//! A session outlives the replica (or the process) that opened it: what its client's
//! `initialize` said is kept in the store ([`StoredSessions`], rmcp's `SessionStore`), and a
//! replica that gets a request naming a session it does not hold loads that and replays the
//! handshake (rmcp's restore), so the client goes on with no 404 and no new `initialize`. A
//! balancer may so send a session's requests anywhere (a hash of `Mcp-Session-Id`, which the
//! `initialize` lacks, included); the session moves at most once per change of replica.

use std::collections::HashSet;

use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_core::hashing::FastMap;
use switchboard_core::sync::lock;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::short_path::ShortPath;
use super::{AggregateServer, Shared};

/// The header naming a Streamable HTTP session.
pub(crate) const SESSION_HEADER: axum::http::HeaderName =
    axum::http::HeaderName::from_static("mcp-session-id");

/// The path of the aggregated MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// Largest request body accepted on `/mcp` (a JSON-RPC message); larger ones get 413.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// rmcp's Streamable HTTP server over a workspace's aggregate server and sessions.
pub type McpService = StreamableHttpService<AggregateServer, LocalSessionManager>;

/// The Streamable HTTP service over `door`'s sessions; every session and stream ends when
/// `stop` is cancelled.
pub fn service(door: &FrontDoor, stop: CancellationToken) -> McpService {
    let shared = door.shared.clone();
    // A request answered by one message gets it as plain JSON; one that streams progress or
    // asks for input first gets SSE. JSON spares each plain call an SSE stream and its task.
    let mut config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_allowed_hosts(Vec::<String>::new())
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(stop);
    config.session_store = Some(Arc::new(StoredSessions {
        store: shared.hub().store().clone(),
    }));
    StreamableHttpService::new(
        move || Ok(AggregateServer::new(shared.clone())),
        door.sessions.clone(),
        config,
    )
}

/// Sessions kept in the store, so another replica can take one over ([`Store::put_mcp_session`]).
/// The store handle is the workspace's: a session is found only in the workspace it was opened
/// in, so another user naming its id gets 404.
struct StoredSessions {
    store: switchboard_store::Store,
}

/// Largest `initialize` kept for a session (its params as JSON); a session whose client said
/// more is not kept, and lives only in the replica that opened it.
const MAX_STORED_SESSION_BYTES: usize = 64 * 1024;

#[async_trait::async_trait]
impl SessionStore for StoredSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(json) = self.store.mcp_session(session_id).await? else {
            return Ok(None);
        };
        match serde_json::from_str(&json) {
            Ok(state) => Ok(Some(state)),
            Err(error) => {
                tracing::warn!(session = session_id, %error, "a stored session does not decode; its client must initialize again");
                Ok(None)
            }
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let json = serde_json::to_string(state)?;
        if json.len() > MAX_STORED_SESSION_BYTES {
            tracing::info!(
                session = session_id,
                bytes = json.len(),
                "a session's initialize is too large to keep; it lives in this replica only"
            );
            return Ok(());
        }
        Ok(self.store.put_mcp_session(session_id, &json).await?)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        Ok(self.store.remove_mcp_session(session_id).await?)
    }
}

/// How long a Streamable HTTP session lives without a request from its client, by default.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);

/// What `/mcp` works with: the shared state, the Streamable HTTP sessions and their clients'
/// activity, and the token that ends every stream at shutdown.
#[derive(Clone)]
pub struct FrontDoor {
    shared: Arc<Shared>,
    stop: CancellationToken,
    sessions: Arc<LocalSessionManager>,
    activity: Arc<SessionActivity>,
}

impl FrontDoor {
    /// The front door of `shared`, ended by `stop`. A session whose client sent nothing and
    /// held no stream open for `idle` is ended by a task this starts (which `stop` ends).
    pub fn new(shared: Arc<Shared>, stop: CancellationToken, idle: Duration) -> Self {
        let mut sessions = LocalSessionManager::default();
        // Only Switchboard's own tracking ends idle sessions: rmcp's keep-alive counts only what
        // passes through rmcp, and calls on the short path (`short_path`) do not.
        sessions.session_config.keep_alive = None;
        let door = Self {
            shared,
            stop,
            sessions: Arc::new(sessions),
            activity: Arc::default(),
        };
        tokio::spawn(door.clone().end_idle_sessions(idle));
        door
    }

    /// Ends the sessions whose clients went quiet, until `stop`.
    ///
    /// rmcp could end a session after a keep-alive without events, but the server's own
    /// messages count as events there (a session whose client left without a DELETE would live
    /// on as long as its servers keep sending notifications, and keep its place among the
    /// sessions served at once), and calls on the short path do not. Here only the client's
    /// requests and open streams count.
    async fn end_idle_sessions(self, idle: Duration) {
        let store = self.shared.hub().store().clone();
        let idle_ms = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
        let mut ticks = tokio::time::interval((idle / 4).max(Duration::from_millis(50)));
        let mut last_tick = Instant::now();
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = self.stop.cancelled() => return,
            }
            // The sessions heard since the last look are marked seen in the store, so no
            // replica forgets a session another one serves; sessions no replica heard for
            // `idle` are forgotten there.
            let heard = self.activity.heard_since(last_tick);
            last_tick = Instant::now();
            if !heard.is_empty()
                && let Err(error) = store.heard_mcp_sessions(&heard).await
            {
                tracing::debug!(%error, "cannot mark sessions seen in the store");
            }
            if let Err(error) = store.forget_mcp_sessions_quiet_for(idle_ms).await {
                tracing::debug!(%error, "cannot forget quiet sessions in the store");
            }
            let live: HashSet<String> = self
                .sessions
                .sessions
                .read()
                .await
                .keys()
                .map(|id| id.to_string())
                .collect();
            for id in self.activity.idle(&live, idle) {
                tracing::debug!(session = %id, "ending a session whose client went quiet");
                let _ = self.sessions.close_session(&id.as_str().into()).await;
                if let Err(error) = store.remove_mcp_session_quiet_for(&id, idle_ms).await {
                    tracing::debug!(session = %id, %error, "cannot forget a quiet session in the store");
                }
            }
        }
    }
}

/// When each Streamable HTTP session's client was last heard from, and how many streams it
/// holds open. Only sessions this daemon opened are tracked, so client-chosen ids add nothing.
#[derive(Default)]
struct SessionActivity {
    sessions: std::sync::Mutex<FastMap<String, Activity>>,
}

struct Activity {
    last: Instant,
    streams: usize,
}

impl SessionActivity {
    fn lock(&self) -> std::sync::MutexGuard<'_, FastMap<String, Activity>> {
        lock(&self.sessions)
    }

    fn opened(&self, id: &str) {
        let activity = Activity {
            last: Instant::now(),
            streams: 0,
        };
        self.lock().insert(id.to_owned(), activity);
    }

    fn heard(&self, id: &str) {
        if let Some(activity) = self.lock().get_mut(id) {
            activity.last = Instant::now();
        }
    }

    fn is_tracked(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// The sessions whose clients were heard since `when`.
    fn heard_since(&self, when: Instant) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, activity)| activity.last >= when || activity.streams > 0)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Counts a stream of `id` as open until the guard is dropped.
    fn streaming(self: &Arc<Self>, id: &str) -> StreamGuard {
        if let Some(activity) = self.lock().get_mut(id) {
            activity.streams += 1;
        }
        StreamGuard {
            activity: self.clone(),
            id: id.to_owned(),
        }
    }

    /// Forgets sessions no longer `live`, and returns (and forgets) those whose client has been
    /// quiet for `idle` with no stream open. A session heard from within `idle` is kept even if
    /// `live` (read a little earlier) does not have it yet.
    fn idle(&self, live: &HashSet<String>, idle: Duration) -> Vec<String> {
        let mut sessions = self.lock();
        sessions.retain(|id, activity| live.contains(id) || activity.last.elapsed() < idle);
        let quiet: Vec<String> = sessions
            .iter()
            .filter(|(_, a)| a.streams == 0 && a.last.elapsed() >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &quiet {
            sessions.remove(id);
        }
        quiet
    }
}

/// An open stream of a session; counts as its client's activity until dropped.
struct StreamGuard {
    activity: Arc<SessionActivity>,
    id: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(activity) = self.activity.lock().get_mut(&self.id) {
            activity.streams = activity.streams.saturating_sub(1);
            activity.last = Instant::now();
        }
    }
}

/// Everything the door at `/mcp` (and an endpoint's) does around rmcp's server, in order: the
/// session a request names must have been opened at this door, a `DELETE` ends it, a POST's
/// body is read once and bounded, and the request is answered by the short path or rmcp's
/// server ([`answer`]); then the session's activity is noted ([`note_activity`]). `onward` is
/// rmcp's server: the route below this layer, or itself for a `POST /mcp`, which skips the
/// router ([`crate::Workspace::serve`]). One layer where the router is built: each layer costs
/// every request a clone of the service below it and a boxed future.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps each argument twice in its future (rust-lang/rust#62958), and this one is every request's (docs/benchmarks.md)"
)]
pub(crate) fn door<Answer>(
    workspace: crate::Workspace,
    request: Request,
    onward: impl FnOnce(Request) -> Answer,
) -> impl Future<Output = Response>
where
    Answer: Future<Output = Response>,
{
    async move {
        let door = workspace.door();
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(id) = &session {
            // Another door's session (an endpoint's at `/mcp`, or the other way round) is no
            // session here: its stream, its end and its requests stay at its own door.
            if !door.shared.opened_at(id, request.uri().path()) {
                return jsonrpc_error(
                    StatusCode::NOT_FOUND,
                    -32600,
                    &format!("no session '{id}' at this door: it was opened at another"),
                );
            }
            door.activity.heard(id);
        }
        if request.method() == Method::DELETE {
            return end_session(door, session.as_deref(), request, onward).await;
        }
        let answering = session.as_deref().map(|id| door.activity.streaming(id));
        let response = answer(door, request, onward).await;
        note_activity(door, session, answering, response).await
    }
}

/// Notes the client activity of Streamable HTTP sessions from `response`: an `initialize`
/// answered with a new session starts tracking it, and a request counts as activity while it is
/// being answered (`answering`), an SSE answer (the GET stream, or a POST's streamed answer)
/// until it ends.
async fn note_activity(
    door: &FrontDoor,
    session: Option<String>,
    answering: Option<StreamGuard>,
    response: Response,
) -> Response {
    match &session {
        None => {
            let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
            else {
                return response;
            };
            // rmcp keeps a session in the store as soon as it answered `initialize`, refused
            // or not; a refused one (the limit of sessions) must not be taken over later.
            let (parts, body) = response.into_parts();
            let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            };
            // The answer is JSON or one SSE event; either way one message.
            let refused = !parts.status.is_success()
                || String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
                    .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
                    .any(|message| message.get("error").is_some());
            if refused {
                if let Err(error) = door.shared.hub().store().remove_mcp_session(&id).await {
                    tracing::warn!(session = %id, %error, "cannot forget a refused session in the store");
                }
            } else {
                door.activity.opened(&id);
            }
            Response::from_parts(parts, Body::from(bytes))
        }
        Some(id) => {
            // A session taken over from another replica (rmcp restored it from the store) is
            // tracked from its first request here, answered or not, so that it ends when its
            // client goes quiet like any other.
            if !door.activity.is_tracked(id)
                && door
                    .sessions
                    .sessions
                    .read()
                    .await
                    .contains_key(id.as_str())
            {
                door.activity.opened(id);
            }
            if !(response.status().is_success() && is_event_stream(&response)) {
                return response;
            }
            // Its stream counts as activity until it ends (taken again: the session may have
            // been tracked only now).
            drop(answering);
            let guard = door.activity.streaming(id);
            let (parts, body) = response.into_parts();
            let body = body.into_data_stream().map(move |chunk| {
                let _open = &guard;
                chunk
            });
            Response::from_parts(parts, Body::from_stream(body))
        }
    }
}

/// A `DELETE` of session `id`: 404 for a session that does not exist (any more), and 204 once
/// rmcp ended it (rmcp answers 202 either way, and clients expect 200 or 204 for a DELETE).
async fn end_session<Answer>(
    door: &FrontDoor,
    id: Option<&str>,
    request: Request,
    onward: impl FnOnce(Request) -> Answer,
) -> Response
where
    Answer: Future<Output = Response>,
{
    if let Some(id) = id
        && !door.sessions.sessions.read().await.contains_key(id)
    {
        // Held by another replica, or by one that stopped: ended here for all of them.
        let store = door.shared.hub().store();
        if let Ok(Some(_)) = store.mcp_session(id).await
            && store.remove_mcp_session(id).await.is_ok()
        {
            return StatusCode::NO_CONTENT.into_response();
        }
        return jsonrpc_error(
            StatusCode::NOT_FOUND,
            -32600,
            &format!("no session '{id}': it ended or never existed"),
        );
    }
    let response = onward(request).await;
    if response.status() == StatusCode::ACCEPTED {
        return StatusCode::NO_CONTENT.into_response();
    }
    response
}

/// An HTTP answer carrying a JSON-RPC error that belongs to no request (`id: null`).
pub(crate) fn jsonrpc_error(status: StatusCode, code: i32, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Whether `response` is an SSE stream.
fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"))
}

/// Answers a request at the door: a GET resuming a stream of the short path's is resumed by it;
/// a POST's body is read, bounded (413) and must be JSON (400 with a JSON-RPC parse error,
/// where rmcp would answer 415), and a plain `tools/call` of a Streamable HTTP server's tool is
/// relayed by the short path (`short_path`); everything else, and a call the short path
/// declines, goes on to rmcp's server (the full path). A call the short path admitted and could
/// not send goes on marked [`super::admission::Charged`].
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps each argument twice in its future (rust-lang/rust#62958), and this one is every request's (docs/benchmarks.md)"
)]
fn answer<Answer>(
    door: &FrontDoor,
    request: Request,
    onward: impl FnOnce(Request) -> Answer,
) -> impl Future<Output = Response>
where
    Answer: Future<Output = Response>,
{
    async move {
        if request.method() == Method::GET
            && let Some(resumed) = super::short_path::try_resume(&door.shared, request.headers())
        {
            return resumed;
        }
        if request.method() != Method::POST {
            return onward(request).await;
        }
        let (mut parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
            Ok(bytes) => bytes,
            Err(error) => {
                let error = error.into_inner();
                if error.is::<http_body_util::LengthLimitError>() {
                    return (
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("request body exceeds {MAX_BODY_BYTES} bytes\n"),
                    )
                        .into_response();
                }
                // The body stopped coming (the listener's deadline, a dropped connection).
                return (
                    StatusCode::REQUEST_TIMEOUT,
                    format!("the request body was not received: {error}\n"),
                )
                    .into_response();
            }
        };
        // The short path decodes the body itself: a body it takes is JSON, so only the rest is
        // checked for it below.
        match super::short_path::try_call(&door.shared, &door.sessions, &door.stop, &parts, &bytes)
            .await
        {
            ShortPath::Answered(response) => return response,
            ShortPath::Declined(None) => {}
            ShortPath::Declined(Some(charged)) => {
                parts.extensions.insert(charged);
            }
        }
        if let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                &format!("Parse error: {error}"),
            );
        }
        let sent_as_json = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));
        let answer = onward(Request::from_parts(parts, Body::from(bytes))).await;
        // JSON, sent as JSON, that is no JSON-RPC message: rmcp answers 415, as if the body were not
        // JSON at all; the spec's answer is an Invalid Request error.
        if sent_as_json && answer.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "Invalid Request: the body is JSON but not a JSON-RPC 2.0 request, notification or response",
            );
        }
        answer
    }
}
