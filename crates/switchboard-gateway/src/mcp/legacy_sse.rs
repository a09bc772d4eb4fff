//! The aggregated server over the 2024-11-05 HTTP+SSE transport, for clients that predate
//! Streamable HTTP: `GET /sse` opens a session whose first event, `endpoint`, names where to POST
//! (`/message?sessionId=…`); every message from the server arrives as a `message` event.
//!
//! rmcp has no server side of this transport (it was removed from the SDK), so it is written
//! here: each session is the same [`AggregateServer`] served over a pair of channels, which rmcp
//! accepts as a transport.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use tokio_util::sync::CancellationToken;

use super::{AggregateServer, Shared};

/// Where HTTP+SSE clients open their stream.
pub const SSE_PATH: &str = "/sse";
/// Where they POST their messages.
pub const MESSAGE_PATH: &str = "/message";

/// Messages queued per session before a POST waits for the server to catch up.
const QUEUE: usize = 64;

/// The open sessions by id: where their messages go, and the endpoint each was opened at.
type Sessions = Arc<Mutex<HashMap<String, (mpsc::Sender<ClientJsonRpcMessage>, Option<String>)>>>;

/// A workspace's legacy SSE sessions.
#[derive(Clone)]
pub(crate) struct LegacySse {
    shared: Arc<Shared>,
    sessions: Sessions,
    stop: CancellationToken,
}

/// The `/sse` and `/message` routes, for every workspace (each request carries its own).
pub(crate) fn routes() -> Router {
    Router::new()
        .route(SSE_PATH, get(open))
        .route(MESSAGE_PATH, post(receive))
        .route(crate::endpoints::SSE_PATH, get(open))
        .route(crate::endpoints::MESSAGE_PATH, post(receive))
        .layer(DefaultBodyLimit::max(super::http::MAX_BODY_BYTES))
}

impl LegacySse {
    /// No sessions yet; every stream ends when `stop` is cancelled.
    pub(crate) fn new(shared: Arc<Shared>, stop: CancellationToken) -> Self {
        Self {
            shared,
            sessions: Arc::default(),
            stop,
        }
    }
}

/// Removes its session when the client's stream is dropped, which ends the session's server.
struct SessionGuard {
    sessions: Sessions,
    id: String,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        super::lock(&self.sessions).remove(&self.id);
    }
}

/// Opens a session: it counts against the sessions served at once from the moment its stream
/// opens (before its `initialize`), so streams that never initialize are bounded too. A
/// session opened at an endpoint's stream (`/sse/e/{name}`) is that endpoint's: its client
/// posts to the endpoint's message path, and sees only what the endpoint includes.
async fn open(workspace: crate::Workspace, opening: axum::http::request::Parts) -> Response {
    let sse = workspace.legacy_sse().clone();
    let endpoint = crate::endpoints::endpoint_of(Some(&opening)).map(str::to_owned);
    if let Some(name) = &endpoint
        && sse.shared.hub().endpoint(name).is_none()
    {
        return crate::endpoints::no_such_endpoint(name);
    }
    let Some(server) = AggregateServer::with_session_slot(sse.shared.clone()) else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            sse.shared.sessions_full().message.into_owned(),
        )
            .into_response();
    };
    let _ = server.session.endpoint.set(endpoint.clone());
    let id = format!("{:032x}", rand::random::<u128>());
    let (to_server, from_client) = mpsc::channel::<ClientJsonRpcMessage>(QUEUE);
    let (to_client, from_server) = mpsc::channel::<ServerJsonRpcMessage>(QUEUE);
    super::lock(&sse.sessions).insert(id.clone(), (to_server, endpoint.clone()));
    tokio::spawn(async move {
        match server.serve((to_client, from_client)).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(error) => tracing::debug!(%error, "an HTTP+SSE client did not open its session"),
        }
    });
    let guard = SessionGuard {
        sessions: sse.sessions.clone(),
        id: id.clone(),
    };
    // What the stream's URL asks for (`?tools=`, `?thread=`, `?user=`) goes on every message's
    // URL, where the session's requests read it.
    let message_path = match &endpoint {
        Some(name) => format!("{MESSAGE_PATH}/e/{name}"),
        None => MESSAGE_PATH.to_owned(),
    };
    let mut endpoint_url = format!("{message_path}?sessionId={id}");
    for key in ["tools", "thread", "user"] {
        if let Some(value) = super::conversation::query_param(&opening, key) {
            let pair: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair(key, &value)
                .finish();
            endpoint_url.push('&');
            endpoint_url.push_str(&pair);
        }
    }
    let endpoint = Event::default().event("endpoint").data(endpoint_url);
    let messages = from_server.map(move |message| {
        let _session = &guard;
        let data = serde_json::to_string(&message).unwrap_or_default();
        Ok::<_, Infallible>(Event::default().event("message").data(data))
    });
    let events = futures::stream::once(async { Ok(endpoint) })
        .chain(messages)
        .take_until(sse.stop.clone().cancelled_owned());
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    #[serde(rename = "sessionId")]
    session_id: String,
}

async fn receive(
    workspace: crate::Workspace,
    Query(query): Query<SessionQuery>,
    parts: axum::http::request::Parts,
    body: Bytes,
) -> Response {
    let sse = workspace.legacy_sse().clone();
    let mut message: ClientJsonRpcMessage = match serde_json::from_slice(&body) {
        Ok(message) => message,
        Err(error) => {
            return super::http::jsonrpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                &format!("Parse error: {error}"),
            );
        }
    };
    // Only at the door the session was opened at: a key of one endpoint reaches no other
    // endpoint's sessions.
    let posted_to = crate::endpoints::endpoint_of(Some(&parts)).map(str::to_owned);
    let sender = super::lock(&sse.sessions)
        .get(&query.session_id)
        .filter(|(_, endpoint)| *endpoint == posted_to)
        .map(|(sender, _)| sender.clone());
    // The POST's headers and URL reach the handlers as they do on `/mcp` (callers, users,
    // threads, the tools view).
    match &mut message {
        rmcp::model::JsonRpcMessage::Request(request) => {
            request.request.extensions_mut().insert(parts);
        }
        rmcp::model::JsonRpcMessage::Notification(notification) => {
            notification.notification.extensions_mut().insert(parts);
        }
        _ => {}
    }
    let Some(mut sender) = sender else {
        return (StatusCode::NOT_FOUND, "unknown or closed session\n").into_response();
    };
    match sender.send(message).await {
        Ok(()) => (StatusCode::ACCEPTED, "Accepted").into_response(),
        Err(_) => (StatusCode::NOT_FOUND, "the session has ended\n").into_response(),
    }
}
