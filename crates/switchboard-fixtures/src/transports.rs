//! Serving the fixture over each transport on 127.0.0.1.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use switchboard_core::sync::lock;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::routing::{get, post};
use futures::{SinkExt, StreamExt};
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_util::sync::{CancellationToken, PollSender};

use crate::{Era, FixtureServer, FixtureState};

/// A fixture server running in the background until dropped.
pub struct RunningFixture {
    /// The URL to connect to.
    pub url: String,
    /// What the server observed.
    pub state: Arc<FixtureState>,
    stop: CancellationToken,
    /// Where it listens, and how to serve a fresh instance there, for
    /// [`RunningFixture::restart`].
    relaunch: Option<(std::net::SocketAddr, Relaunch)>,
}

/// Starts a fresh server instance on a listener; it runs until the token is cancelled.
type Relaunch = Box<dyn Fn(TcpListener, CancellationToken) + Send + Sync>;

impl RunningFixture {
    pub(crate) fn from_parts(
        url: String,
        state: Arc<FixtureState>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            url,
            state,
            stop,
            relaunch: None,
        }
    }

    /// Moves the stop token out (the returned token now owns the server's lifetime).
    pub(crate) fn take_stop(mut self) -> CancellationToken {
        std::mem::take(&mut self.stop)
    }

    /// Stops the server: the listener closes and every connection is cut.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Restarts the server the way a crashed process comes back: every connection is cut
    /// (requests in flight get no answer), nothing listens for `down`, and then a fresh
    /// instance serves on the same address, remembering no session. [`FixtureState`] (the
    /// counters and any armed fault) carries over, so tests keep observing.
    ///
    /// # Panics
    /// For fixtures that cannot restart (only [`streamable_http`] can), or when the address
    /// cannot be bound again within 5 s.
    pub async fn restart(&mut self, down: std::time::Duration) {
        let (addr, relaunch) = self
            .relaunch
            .as_ref()
            .expect("this fixture cannot restart; use transports::streamable_http");
        let addr = *addr;
        self.stop.cancel();
        tokio::time::sleep(down).await;
        let mut listener = None;
        for _ in 0..100 {
            match TcpListener::bind(addr).await {
                Ok(bound) => {
                    listener = Some(bound);
                    break;
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        }
        let listener = listener.expect("the fixture's address is free again within 5 s");
        self.stop = CancellationToken::new();
        relaunch(listener, self.stop.clone());
    }
}

impl Drop for RunningFixture {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn listen() -> (TcpListener, std::net::SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    (listener, addr)
}

/// Serves `router` on `listener` until `stop`, which closes the listener and cuts every
/// connection at once, requests in flight included, as a dying process would. (axum's own
/// graceful shutdown would let them finish, which is not what a failure test wants.)
/// `counted` counts the connections accepted.
pub(crate) fn spawn_router(
    listener: TcpListener,
    router: Router,
    stop: CancellationToken,
    counted: Option<Arc<FixtureState>>,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    tokio::spawn(async move {
        loop {
            let (tcp, _) = tokio::select! {
                _ = stop.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(_) => continue,
                },
            };
            let _ = tcp.set_nodelay(true);
            if let Some(state) = &counted {
                state
                    .connections
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            let service = TowerToHyperService::new(router.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let connection = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = connection => {}
                }
            });
        }
    });
}

/// The fixture's Streamable HTTP router at `/mcp`, one fresh instance (no sessions yet).
fn streamable_router(era: Era, state: &Arc<FixtureState>, stop: &CancellationToken) -> Router {
    streamable_router_for(era, state, stop, false)
}

/// [`streamable_router`]; with `any_host`, answering requests for any `Host` (rmcp's own
/// DNS-rebinding check takes loopback names only).
fn streamable_router_for(
    era: Era,
    state: &Arc<FixtureState>,
    stop: &CancellationToken,
    any_host: bool,
) -> Router {
    let mut service = streamable_service(era, state, stop);
    if any_host {
        service = StreamableHttpService::new(
            {
                let state = state.clone();
                move || Ok(FixtureServer::new(era, state.clone()))
            },
            Arc::new(LocalSessionManager::default()),
            streamable_config(era, stop).disable_allowed_hosts(),
        );
    }
    Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            observe_sessions,
        ))
}

/// Streamable HTTP at `/mcp`: with sessions for [`Era::Legacy`], stateless for [`Era::Modern`].
/// It can [restart](RunningFixture::restart).
pub async fn streamable_http(era: Era) -> RunningFixture {
    let (listener, _) = listen().await;
    streamable_http_on(era, listener, false)
}

/// [`streamable_http`] at `addr` (an address a test bound inside a network namespace of its
/// own, say).
pub async fn streamable_http_at(era: Era, addr: std::net::SocketAddr) -> RunningFixture {
    let listener = TcpListener::bind(addr)
        .await
        .expect("bind the fixture's address");
    streamable_http_on(era, listener, true)
}

/// The fixture on `listener`; with `any_host`, for any `Host` (see [`streamable_router_for`]).
fn streamable_http_on(era: Era, listener: TcpListener, any_host: bool) -> RunningFixture {
    let state = Arc::new(FixtureState::default());
    let stop = CancellationToken::new();
    let addr = listener.local_addr().expect("local addr");
    let relaunch_state = state.clone();
    let relaunch: Relaunch = Box::new(move |listener, stop| {
        let router = streamable_router_for(era, &relaunch_state, &stop, any_host);
        spawn_router(listener, router, stop, Some(relaunch_state.clone()));
    });
    relaunch(listener, stop.clone());
    RunningFixture {
        url: format!("http://{addr}/mcp"),
        state,
        stop,
        relaunch: Some((addr, relaunch)),
    }
}

/// A server of both eras whose stateless face is poorer than its sessions, as the conformance
/// reference server's is: `server/discover` is answered by hand, declaring tools and nothing
/// else, and everything else is the [`Era::Legacy`] fixture with sessions (tools, resources,
/// prompts). A client that keeps the stateless face gets no further than `server/discover`;
/// one pinned to sessions gets everything.
pub async fn dual_era_poorer_stateless() -> RunningFixture {
    let state = Arc::new(FixtureState::default());
    let stop = CancellationToken::new();
    let (listener, addr) = listen().await;
    let router = streamable_router(Era::Legacy, &state, &stop)
        .layer(axum::middleware::from_fn(answer_discover_with_tools_only));
    spawn_router(listener, router, stop.clone(), Some(state.clone()));
    RunningFixture::from_parts(format!("http://{addr}/mcp"), state, stop)
}

/// Answers a `server/discover` POST with a stateless `DiscoverResult` that declares tools only;
/// passes every other request on.
async fn answer_discover_with_tools_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let is_discover = request
        .headers()
        .get("mcp-method")
        .is_some_and(|method| method == "server/discover");
    if !is_discover {
        return next.run(request).await;
    }
    let bytes = axum::body::to_bytes(request.into_body(), 1024 * 1024)
        .await
        .unwrap_or_default();
    let id = serde_json::from_slice::<serde_json::Value>(&bytes)
        .map(|message| message["id"].clone())
        .unwrap_or_default();
    axum::response::IntoResponse::into_response(axum::Json(serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "switchboard-fixture-stateless-face", "version": "1.0.0"},
            "ttlMs": 0,
            "cacheScope": "private"
        }
    })))
}

/// The conformance server ([`crate::conformance`]) over Streamable HTTP at `/mcp`, speaking every
/// revision or, with `legacy_only`, the revisions up to 2025-11-25.
pub async fn conformance_http(legacy_only: bool) -> RunningFixture {
    let stop = CancellationToken::new();
    let mut server = crate::conformance::ConformanceServer::new();
    if legacy_only {
        server = server.legacy_only();
    }
    let service = crate::conformance::http_service(server, stop.child_token());
    let (listener, addr) = listen().await;
    spawn_router(
        listener,
        Router::new().nest_service("/mcp", service),
        stop.clone(),
        None,
    );
    RunningFixture::from_parts(format!("http://{addr}/mcp"), Arc::default(), stop)
}

/// The fixture as a Streamable HTTP service: with sessions for [`Era::Legacy`], stateless for
/// [`Era::Modern`]; it stops with `stop`.
pub(crate) fn streamable_service(
    era: Era,
    state: &Arc<FixtureState>,
    stop: &CancellationToken,
) -> StreamableHttpService<FixtureServer, LocalSessionManager> {
    let factory_state = state.clone();
    StreamableHttpService::new(
        move || Ok(FixtureServer::new(era, factory_state.clone())),
        Arc::new(LocalSessionManager::default()),
        streamable_config(era, stop),
    )
}

fn streamable_config(era: Era, stop: &CancellationToken) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_legacy_session_mode(era == Era::Legacy)
        .with_sse_keep_alive(None)
        .with_cancellation_token(stop.child_token())
}

/// Counts session-related requests, expires a session and delays the end of SSE responses on
/// demand.
pub(crate) async fn observe_sessions(
    State(state): State<Arc<FixtureState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use std::sync::atomic::Ordering;
    let has_session = request.headers().contains_key("mcp-session-id");
    match *request.method() {
        http::Method::DELETE => {
            state.deletes.fetch_add(1, Ordering::SeqCst);
        }
        http::Method::POST if !has_session => {
            state.sessionless_posts.fetch_add(1, Ordering::SeqCst);
        }
        _ => {}
    }
    if request
        .headers()
        .get("mcp-method")
        .is_some_and(|method| method == "subscriptions/listen")
    {
        state.listen_requests.fetch_add(1, Ordering::SeqCst);
    }
    let is_post = request.method() == http::Method::POST;
    if has_session && is_post && state.expire_session_once.swap(false, Ordering::SeqCst) {
        return axum::response::IntoResponse::into_response(StatusCode::NOT_FOUND);
    }
    // A frozen server holds POSTs unanswered until it thaws (bounded by the client's timeout).
    while is_post && state.frozen.load(Ordering::SeqCst) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let armed = is_post && state.is_armed();
    if !armed {
        let received = std::time::Instant::now();
        let response = next.run(request).await;
        let response = match state.late_stream_end.load(Ordering::SeqCst) {
            true => end_late(response),
            false => response,
        };
        return match is_post && state.time_exchanges.load(Ordering::Relaxed) {
            true => timed(response, received, state),
            false => response,
        };
    }
    // A fault is armed: it hits the next tools/call POSTs (the body has to be read to tell).
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 4 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let is_call = serde_json::from_slice::<serde_json::Value>(&bytes)
        .is_ok_and(|message| message["method"] == "tools/call");
    if is_call && let Some(fault) = crate::chaos::take_fault(&state) {
        return fault.respond().await;
    }
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

/// `response` as it is, except that an SSE body ends [`crate::server::LATE_STREAM_END`] after
/// its last event.
fn end_late(response: axum::response::Response) -> axum::response::Response {
    use futures::StreamExt;
    let is_sse = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    if !is_sse {
        return response;
    }
    let (parts, body) = response.into_parts();
    let end = futures::stream::once(tokio::time::sleep(crate::server::LATE_STREAM_END))
        .filter_map(|()| std::future::ready(None::<Result<bytes::Bytes, axum::Error>>));
    let body = axum::body::Body::from_stream(body.into_data_stream().chain(end));
    axum::response::Response::from_parts(parts, body)
}

/// `response`, whose [`crate::Exchange`] is kept in `state` once its body has gone out (or was
/// dropped unfinished: then when its last data frame went).
fn timed(
    response: axum::response::Response,
    received: std::time::Instant,
    state: Arc<FixtureState>,
) -> axum::response::Response {
    let (parts, body) = response.into_parts();
    let body = TimedBody {
        inner: body,
        received,
        answered: None,
        state,
    };
    axum::response::Response::from_parts(parts, axum::body::Body::new(body))
}

/// An answer's body that notes when its last data frame went ([`timed`]).
struct TimedBody {
    inner: axum::body::Body,
    received: std::time::Instant,
    answered: Option<std::time::Instant>,
    state: Arc<FixtureState>,
}

impl http_body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if let std::task::Poll::Ready(Some(Ok(frame))) = &polled
            && frame.is_data()
        {
            self.answered = Some(std::time::Instant::now());
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for TimedBody {
    fn drop(&mut self) {
        let Some(answered) = self.answered else {
            return;
        };
        let mut exchanges = lock(&self.state.exchanges);
        if exchanges.len() < crate::server::MAX_TIMED_EXCHANGES {
            exchanges.push(crate::Exchange {
                received: self.received,
                answered,
            });
        }
    }
}

type Sessions = Arc<Mutex<HashMap<String, mpsc::Sender<ClientJsonRpcMessage>>>>;

#[derive(Clone)]
struct SseState {
    sessions: Sessions,
    fixture: Arc<FixtureState>,
    stop: CancellationToken,
    next: Arc<std::sync::atomic::AtomicU64>,
}

/// The 2024-11-05 HTTP+SSE transport: `GET /sse`, then `POST /message?sessionId=...`.
pub async fn http_sse() -> RunningFixture {
    let state = Arc::new(FixtureState::default());
    let stop = CancellationToken::new();
    let sse_state = SseState {
        sessions: Arc::default(),
        fixture: state.clone(),
        stop: stop.clone(),
        next: Arc::default(),
    };
    let router = Router::new()
        .route("/sse", get(open_sse))
        .route("/message", post(post_message))
        .with_state(sse_state);
    let (listener, addr) = listen().await;
    spawn_router(listener, router, stop.clone(), None);
    RunningFixture::from_parts(format!("http://{addr}/sse"), state, stop)
}

async fn open_sse(
    State(state): State<SseState>,
) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>>> {
    let id = format!(
        "s{}",
        state.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let (to_server, from_client) = mpsc::channel::<ClientJsonRpcMessage>(64);
    let (to_client, from_server) = mpsc::channel::<ServerJsonRpcMessage>(64);
    lock(&state.sessions).insert(id.clone(), to_server);
    let server = FixtureServer::new(Era::Legacy, state.fixture.clone());
    let sink = PollSender::new(to_client).sink_map_err(|_| std::io::Error::other("client gone"));
    let stop = state.stop.clone();
    tokio::spawn(async move {
        if let Ok(running) = server.serve((sink, ReceiverStream::new(from_client))).await {
            tokio::select! {
                _ = running.waiting() => {}
                _ = stop.cancelled() => {}
            }
        }
    });
    let endpoint = futures::stream::once(async move {
        Ok(Event::default()
            .event("endpoint")
            .data(format!("/message?sessionId={id}")))
    });
    let messages = ReceiverStream::new(from_server).map(|message| {
        Ok(Event::default()
            .event("message")
            .data(serde_json::to_string(&message).unwrap_or_default()))
    });
    let stop = state.stop.clone();
    Sse::new(endpoint.chain(messages).take_until(stop.cancelled_owned()))
}

async fn post_message(
    State(state): State<SseState>,
    Query(query): Query<HashMap<String, String>>,
    body: String,
) -> StatusCode {
    let Some(sender) = query
        .get("sessionId")
        .and_then(|id| lock(&state.sessions).get(id).cloned())
    else {
        return StatusCode::NOT_FOUND;
    };
    let Ok(message) = serde_json::from_str::<ClientJsonRpcMessage>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    match sender.send(message).await {
        Ok(()) => StatusCode::ACCEPTED,
        Err(_) => StatusCode::GONE,
    }
}

/// MCP over WebSocket with subprotocol `mcp`.
pub async fn websocket() -> RunningFixture {
    let state = Arc::new(FixtureState::default());
    let stop = CancellationToken::new();
    let (listener, addr) = listen().await;
    let accept_state = state.clone();
    let accept_stop = stop.clone();
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = accept_stop.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
            };
            let fixture = accept_state.clone();
            let stop = accept_stop.clone();
            tokio::spawn(async move {
                #[allow(clippy::result_large_err)] // the signature is tungstenite's callback type
                let confirm_mcp = |_request: &Request, mut response: Response| {
                    response.headers_mut().insert(
                        "sec-websocket-protocol",
                        http::HeaderValue::from_static("mcp"),
                    );
                    Ok(response)
                };
                let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, confirm_mcp).await
                else {
                    return;
                };
                let (sink, stream) = socket.split();
                let sink = sink
                    .sink_map_err(|e| std::io::Error::other(e.to_string()))
                    .with(|message: ServerJsonRpcMessage| {
                        futures::future::ready(
                            serde_json::to_string(&message)
                                .map(Message::text)
                                .map_err(|e| std::io::Error::other(e.to_string())),
                        )
                    });
                let sink = Box::pin(sink);
                let stream = Box::pin(stream.filter_map(|frame| async move {
                    match frame {
                        Ok(Message::Text(text)) => serde_json::from_str(&text).ok(),
                        _ => None,
                    }
                }));
                let server = FixtureServer::new(Era::Legacy, fixture);
                if let Ok(running) = server.serve((sink, stream)).await {
                    tokio::select! {
                        _ = running.waiting() => {}
                        _ = stop.cancelled() => {}
                    }
                }
            });
        }
    });
    RunningFixture::from_parts(format!("ws://{addr}/ws"), state, stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// POSTs `body` to the fixture at `url` on a connection of its own; the answer's text.
    async fn post(url: &str, body: &str) -> String {
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn a_timed_fixture_notes_each_post_it_answered_while_timing() {
        let fixture = streamable_http(Era::Legacy).await;
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        post(&fixture.url, initialize).await;
        fixture.state.start_timing();
        let before = std::time::Instant::now();
        let answer = post(&fixture.url, initialize).await;
        assert!(answer.contains("protocolVersion"), "{answer}");
        // Noted once hyper has let go of the answer's body, just after the client read it.
        for _ in 0..200 {
            if !lock(&fixture.state.exchanges).is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let noted = fixture.state.stop_timing();
        let [exchange] = noted[..] else {
            panic!("one POST answered while timing, noted {}", noted.len());
        };
        assert!(before <= exchange.received && exchange.received <= exchange.answered);
        assert!(exchange.answered <= std::time::Instant::now());
        // Not timing: nothing noted.
        post(&fixture.url, initialize).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(fixture.state.stop_timing().is_empty());
    }
}
