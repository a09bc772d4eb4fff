//! Opening a session with an upstream server, whatever its transport and era.
//!
//! For an HTTP URL this runs the probe a client supporting every revision must run (the spec's
//! `basic/transports/*.mdx#backward-compatibility`), deciding only from HTTP status codes and
//! JSON-RPC error codes:
//! 1. POST `server/discover` (2026-07-28). A `DiscoverResult`, or a modern rejection such as
//!    `-32022` with supported versions (rmcp retries with one), means a stateless server.
//! 2. Otherwise POST `initialize` (2025-11-25 and older, with sessions).
//! 3. If that is refused with 400, 404 or 405, GET the URL expecting the `endpoint` event of the
//!    2024-11-05 HTTP+SSE transport.
//!
//! A transport the user pinned for the server is the only one tried.
//!
//! A cached probe result is tried first; if it no longer holds, the probe runs again from the top
//! and the caller gets the new [`DetectedTransport`] to store. stdio and WebSocket servers are
//! message transports: rmcp's `Auto` lifecycle sends `server/discover` with a timeout and falls back
//! to `initialize`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    Implementation, ProtocolVersion, ServerCapabilities, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, QuitReason, RoleClient,
    RunningService, Subscription,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use switchboard_core::{DetectedTransport, ServerDefinition, TransportSpec};
use tokio::sync::mpsc;
use url::Url;

use crate::error::{NO_CREDENTIALS, UpstreamError, auth_error, error_chain, fatal_http_error};
use crate::handler::{InputPolicy, UpstreamEvent, UpstreamHandler};
use crate::late_discover::LateDiscoverFilter;
use crate::tap::Tapped;
use crate::transport::http_client::StatusAwareHttpClient;
use crate::transport::http_failure::HttpFailure;
use crate::transport::legacy_sse::{LegacySseError, LegacySseTransport};
use crate::transport::stdio::{self, ChildExit, StderrTail};
use crate::transport::websocket::WebSocketTransport;
use crate::upstream::Upstream;

/// rmcp's `Auto` lifecycle waits a fixed 10 s for an answer to `server/discover` before it falls
/// back to `initialize`; message transports get that on top of the handshake timeout, so a legacy
/// server that ignores the probe can connect whatever the configured timeout.
const AUTO_DISCOVER_ALLOWANCE: Duration = Duration::from_secs(10);

/// Longest wait for a session's standalone GET stream before handing the session out anyway.
const STANDALONE_STREAM_WAIT: Duration = Duration::from_secs(5);

/// Settings shared by every connection the process opens.
#[derive(Clone)]
pub struct ConnectOptions {
    /// How Switchboard introduces itself.
    pub client: Implementation,
    /// How server requests for user input are answered when no downstream client can.
    pub input_policy: InputPolicy,
    /// Whether server requests for input are relayed to the downstream client behind each call
    /// (Switchboard as a proxy): then every client capability is declared to servers.
    pub relay_input: bool,
    /// The shared HTTP connection pools.
    pub http: crate::transport::plain_http::HttpClients,
    /// OAuth state for the server being connected (HTTP transports only): credentials for every
    /// request, and what to do on 401 and 403.
    pub auth: Option<std::sync::Arc<switchboard_oauth::ServerAuth>>,
    /// Reconnect, health-check and load bounds (the request bounds apply per session here).
    pub supervision: switchboard_core::Supervision,
    /// Who hears how each tool call ended (metrics, the console's live calls).
    pub call_observer: Option<std::sync::Arc<dyn crate::CallObserver>>,
    /// Who answers the server's requests for input that no call's responder takes (a person at
    /// the console); the input policy when `None`.
    pub input_fallback: Option<std::sync::Arc<dyn crate::InputResponder>>,
    /// Where `builtin:` servers run; they cannot be connected without it.
    pub builtins: Option<std::sync::Arc<dyn BuiltinServers>>,
    /// Where copies of the connection's JSON-RPC messages go while someone watches (the
    /// console's inspector).
    pub message_tap: Option<std::sync::Arc<dyn crate::MessageTap>>,
    /// How stdio children are started: what they inherit, what they may not reach.
    pub children: std::sync::Arc<crate::children::ChildPolicy>,
}

/// Runs the servers Switchboard carries inside itself
/// ([`TransportSpec::Builtin`](switchboard_core::TransportSpec::Builtin)).
pub trait BuiltinServers: Send + Sync + std::fmt::Debug {
    /// Starts a fresh instance of built-in server `name` for `server`, and returns the client's
    /// end of the byte stream it speaks MCP on (newline-delimited JSON-RPC, as over stdio).
    /// `wait_always`: see
    /// [`TransportSpec::Builtin`](switchboard_core::TransportSpec::Builtin).
    fn open(
        &self,
        server: &switchboard_core::ServerId,
        name: &str,
        wait_always: bool,
    ) -> Result<tokio::io::DuplexStream, String>;
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("client", &self.client)
            .field("input_policy", &self.input_policy)
            .field("relay_input", &self.relay_input)
            .field("supervision", &self.supervision)
            .field("builtins", &self.builtins)
            .finish_non_exhaustive()
    }
}

impl ConnectOptions {
    /// Options with Switchboard's name and version and a fresh connection pool.
    pub fn new(client_version: &str) -> Self {
        Self {
            client: Implementation::new(
                switchboard_core::wire_names::IMPLEMENTATION_NAME,
                client_version,
            ),
            input_policy: InputPolicy::default(),
            relay_input: false,
            http: crate::transport::plain_http::HttpClients::new(),
            auth: None,
            supervision: switchboard_core::Supervision::default(),
            call_observer: None,
            input_fallback: None,
            builtins: None,
            message_tap: None,
            children: std::sync::Arc::default(),
        }
    }

    /// Who answers the server's requests for input that no call's responder takes.
    pub(crate) fn fallback(&self) -> std::sync::Arc<dyn crate::InputResponder> {
        match &self.input_fallback {
            Some(fallback) => fallback.clone(),
            None => std::sync::Arc::new(self.input_policy),
        }
    }
}

type Service = RunningService<RoleClient, UpstreamHandler>;

/// A live session: the handle for requests, the server's unsolicited events, and the session's
/// lifetime.
pub struct Connection {
    /// Cloneable handle for requests.
    pub upstream: Upstream,
    /// Change notifications and log messages from the server.
    pub events: mpsc::UnboundedReceiver<UpstreamEvent>,
    /// For HTTP servers: the transport the probe settled on.
    pub detected: Option<DetectedTransport>,
    /// For stdio servers: the last lines of the process's stderr.
    pub stderr: Option<StderrTail>,
    /// For stdio servers: how the process ended, once it has.
    pub exit: Option<ChildExit>,
    /// The session itself: wait on it or close it.
    pub session: Session,
}

/// The running session behind a [`Connection`].
pub struct Session {
    service: Service,
    /// The process group of a stdio child to stop at once on close
    /// ([`crate::ChildPolicy::stop_at_once`]).
    stop_at_once: Option<Arc<std::sync::atomic::AtomicU32>>,
}

impl Session {
    /// Waits until the session ends (the process exits, the stream closes) or `shutdown` fires;
    /// in the latter case the session is closed gracefully (DELETE, stdin close, signals).
    pub async fn run_until_closed(self, shutdown: impl Future<Output = ()>) -> QuitReason {
        let stop = self.service.cancellation_token();
        let stop_at_once = self.stop_at_once.clone();
        let waiting = self.service.waiting();
        tokio::pin!(waiting);
        tokio::select! {
            reason = &mut waiting => reason.unwrap_or(QuitReason::Closed),
            () = shutdown => {
                stop.cancel();
                let stopping = stop_child_soon(stop_at_once);
                // Closing may need the server (a DELETE behind a request it never answered):
                // a server that hangs does not get to hang its supervisor too.
                let reason = tokio::time::timeout(CLOSE_LIMIT, waiting)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or(QuitReason::Cancelled);
                // Closed: a child that exited by itself is not signalled after it was reaped.
                if let Some(stopping) = stopping {
                    stopping.abort();
                }
                reason
            }
        }
    }

    /// Closes the session gracefully and waits for it to end.
    pub async fn close(mut self) {
        let stopping = stop_child_soon(self.stop_at_once.clone());
        let _ = self.service.close().await;
        if let Some(stopping) = stopping {
            stopping.abort();
        }
    }
}

/// Asks a stdio child to stop soon, when its policy says so (`group` holds its process group):
/// once its stdin has been closed and it had [`STOP_GRACE`] to exit by itself. The caller
/// aborts the returned task once the session is closed (rmcp has then reaped the child), so the
/// group id named still is the child's whenever the signal goes.
fn stop_child_soon(
    group: Option<Arc<std::sync::atomic::AtomicU32>>,
) -> Option<tokio::task::JoinHandle<()>> {
    #[cfg(unix)]
    if let Some(group) = group {
        return Some(tokio::spawn(async move {
            tokio::time::sleep(STOP_GRACE).await;
            let group = group.load(std::sync::atomic::Ordering::Acquire);
            if let Ok(group) = libc::pid_t::try_from(group)
                && group > 0
            {
                // SAFETY: kill(2) with a negative pid signals that process group; it touches
                // no memory of ours.
                unsafe {
                    libc::kill(-group, libc::SIGTERM);
                }
            }
        }));
    }
    #[cfg(not(unix))]
    let _ = group;
    None
}

/// How long a child stopped at once may take to exit by itself after its stdin closes.
const STOP_GRACE: Duration = Duration::from_millis(200);

/// How long closing a session may take before it is abandoned.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// Connects to `def`, trying `cached` first for HTTP servers: the client side of the session
/// set up, a session opened on the server's transport, and the request handle built on it.
pub async fn connect(
    def: &ServerDefinition,
    cached: Option<DetectedTransport>,
    options: &ConnectOptions,
) -> Result<Connection, UpstreamError> {
    let (events_tx, events) = mpsc::unbounded_channel();
    let progress = ProgressDispatcher::new();
    let in_flight = crate::input_requests::InFlight::default();
    let handler = UpstreamHandler::new(
        options.client.clone(),
        options.input_policy,
        options.fallback(),
        options.relay_input,
        events_tx.clone(),
        progress.clone(),
        in_flight.clone(),
    );
    let opened = match &def.transport {
        TransportSpec::Http {
            url,
            headers,
            pinned,
        } => {
            let probe = Probe {
                cached,
                pinned: *pinned,
            };
            let client = StatusAwareHttpClient::new(
                options.http.clone(),
                url,
                crate::transport::http_client::header_map(headers)
                    .map_err(|e| UpstreamError::Handshake(e.to_string()))?,
            )
            .with_tap(options.message_tap.clone())
            .with_auth(options.auth.clone())
            .with_in_flight(in_flight.clone())
            .with_events(events_tx.clone());
            open_http(def, url, client, handler, probe, &events_tx).await?
        }
        TransportSpec::WebSocket { url, headers } => {
            open_websocket(def, url, headers, handler, options).await?
        }
        TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let child = stdio::ChildCommand {
                command,
                args,
                env,
                cwd: cwd.as_deref(),
            };
            open_stdio(def, child, handler, options).await?
        }
        TransportSpec::Approved { name, .. } => {
            return Err(UpstreamError::NotAllowed(format!(
                "the approved command '{name}' must be read before connecting"
            )));
        }
        TransportSpec::Builtin { name, wait_always } => {
            open_builtin(def, name, *wait_always, handler, options).await?
        }
    };
    let Opened {
        service,
        detected,
        direct,
        stderr,
        exit,
        stop_at_once,
    } = opened;
    let upstream = request_handle(def, &service, direct, options, progress, in_flight).await;
    if upstream.is_stateless() {
        spawn_change_listener(&upstream, service.peer().clone(), events_tx);
    }
    Ok(Connection {
        upstream,
        events,
        detected,
        stderr,
        exit,
        session: Session {
            service,
            stop_at_once,
        },
    })
}

/// A session opened on one transport, with what that transport adds to it.
struct Opened {
    service: Service,
    /// For HTTP servers: the transport the probe settled on.
    detected: Option<DetectedTransport>,
    /// For HTTP servers with a Streamable HTTP transport: the route for calls beside rmcp.
    direct: Option<crate::direct::DirectRoute>,
    /// For stdio servers: the last lines of the process's stderr.
    stderr: Option<StderrTail>,
    /// For stdio servers: how the process ended, once it has.
    exit: Option<ChildExit>,
    /// For stdio servers stopped at once on close: their process group.
    stop_at_once: Option<Arc<std::sync::atomic::AtomicU32>>,
}

impl Opened {
    /// A session on a message transport that adds nothing.
    fn session(service: Service) -> Self {
        Self {
            service,
            detected: None,
            direct: None,
            stderr: None,
            exit: None,
            stop_at_once: None,
        }
    }
}

/// Opens a session with an HTTP server: the probe, then, once the session's standalone stream
/// is settled, the route for calls beside rmcp on the Streamable HTTP transports.
async fn open_http(
    def: &ServerDefinition,
    url: &Url,
    client: StatusAwareHttpClient,
    handler: UpstreamHandler,
    probe: Probe,
    events: &mpsc::UnboundedSender<UpstreamEvent>,
) -> Result<Opened, UpstreamError> {
    let handshake = def.timeouts.request;
    let (service, detected) = connect_http(
        def.id.as_str(),
        url,
        client.clone(),
        handler,
        probe,
        handshake,
    )
    .await?;
    // Server-initiated requests travel on the session's GET stream; do not hand out the
    // session before that stream is open (or refused), or they could be lost.
    client
        .standalone_stream_settled(handshake.min(STANDALONE_STREAM_WAIT))
        .await;
    let direct = match detected {
        DetectedTransport::StreamableHttpStateless => {
            Some(crate::direct::DirectRoute::stateless(client, url.clone()))
        }
        DetectedTransport::StreamableHttp => Some(crate::direct::DirectRoute::in_session(
            client,
            url.clone(),
            events.clone(),
        )),
        DetectedTransport::HttpSse => None,
    };
    Ok(Opened {
        detected: Some(detected),
        direct,
        ..Opened::session(service)
    })
}

/// Opens a session with a WebSocket server; a refused upgrade says what it was refused with.
async fn open_websocket(
    def: &ServerDefinition,
    url: &Url,
    headers: &[switchboard_core::NamedValue],
    handler: UpstreamHandler,
    options: &ConnectOptions,
) -> Result<Opened, UpstreamError> {
    let open = || async {
        WebSocketTransport::connect(url, headers, def.id.to_string(), &options.http)
            .await
            .map_err(|e| match e.http_status() {
                Some(401) => UpstreamError::AuthRequired(
                    "the WebSocket upgrade was refused with HTTP 401; OAuth sign-in \
                     works over HTTP transports only"
                        .into(),
                ),
                Some(status) => UpstreamError::HttpStatus {
                    status,
                    detail: String::new(),
                    retry_after: None,
                },
                None => match e {
                    crate::transport::websocket::WebSocketError::Refused(reason) => {
                        UpstreamError::NotAllowed(reason)
                    }
                    e => UpstreamError::Unreachable(error_chain(&e)),
                },
            })
    };
    let service = within(
        def.timeouts.request + AUTO_DISCOVER_ALLOWANCE,
        serve_message_transport(handler, open, options.message_tap.clone()),
    )
    .await?;
    Ok(Opened::session(service))
}

/// Starts a stdio server's process (again for each attempt) and opens a session on it; a
/// failed handshake quotes what the process said.
async fn open_stdio(
    def: &ServerDefinition,
    child: stdio::ChildCommand<'_>,
    handler: UpstreamHandler,
    options: &ConnectOptions,
) -> Result<Opened, UpstreamError> {
    let tail = StderrTail::default();
    let ended = ChildExit::default();
    let group = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let open = || async {
        let spawned = stdio::spawn(def.id.as_str(), child, &options.children, &tail, &ended)?;
        // The child leads a process group of its own.
        group.store(
            spawned.id().unwrap_or_default(),
            std::sync::atomic::Ordering::Release,
        );
        Ok(spawned)
    };
    let service = within(
        def.timeouts.request + AUTO_DISCOVER_ALLOWANCE,
        serve_message_transport(handler, open, options.message_tap.clone()),
    )
    .await
    .map_err(|e| explain_with_stderr(e, &tail))?;
    Ok(Opened {
        stderr: Some(tail),
        exit: Some(ended),
        stop_at_once: options.children.stop_at_once.then_some(group),
        ..Opened::session(service)
    })
}

/// Opens a session with a built-in server of the process, over an in-memory byte stream.
async fn open_builtin(
    def: &ServerDefinition,
    name: &str,
    wait_always: bool,
    handler: UpstreamHandler,
    options: &ConnectOptions,
) -> Result<Opened, UpstreamError> {
    let open = || async {
        let builtins = options
            .builtins
            .as_ref()
            .ok_or_else(|| UpstreamError::Handshake("built-in servers do not run here".into()))?;
        let stream = builtins
            .open(&def.id, name, wait_always)
            .map_err(UpstreamError::Handshake)?;
        let (read, write) = tokio::io::split(stream);
        Ok(rmcp::transport::async_rw::AsyncRwTransport::<
            RoleClient,
            _,
            _,
        >::new_client(read, write))
    };
    let service = within(
        def.timeouts.request,
        serve_message_transport(handler, open, options.message_tap.clone()),
    )
    .await?;
    Ok(Opened::session(service))
}

/// The request handle on an opened session: its limits, retries, direct route and observer.
async fn request_handle(
    def: &ServerDefinition,
    service: &Service,
    direct: Option<crate::direct::DirectRoute>,
    options: &ConnectOptions,
    progress: ProgressDispatcher,
    in_flight: crate::input_requests::InFlight,
) -> Upstream {
    let peer = service.peer().clone();
    peer.set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    let upstream = crate::upstream::LiveSession::new(
        def.id.clone(),
        peer,
        progress,
        options.fallback(),
        in_flight,
        def.timeouts,
        crate::limits::CallLimiter::new(
            options.supervision.max_concurrent_calls,
            options.supervision.max_queued_calls,
        ),
    )
    .with_direct(direct)
    .with_call_observer(options.call_observer.clone());
    let upstream = Upstream::from(upstream);
    upstream.set_retries(def.policies.retries);
    upstream
}

async fn within<T>(
    limit: Duration,
    attempt: impl Future<Output = Result<T, UpstreamError>>,
) -> Result<T, UpstreamError> {
    tokio::time::timeout(limit, attempt)
        .await
        .map_err(|_| UpstreamError::Timeout(limit))?
}

fn explain_with_stderr(error: UpstreamError, tail: &StderrTail) -> UpstreamError {
    match (error, tail.reason()) {
        (UpstreamError::Handshake(text), Some(line)) => {
            UpstreamError::Handshake(format!("{text}; the process said: {line}"))
        }
        (error, _) => error,
    }
}

/// Starts a session on a message transport (stdio, WebSocket): `server/discover` with a timeout,
/// falling back to `initialize`. A server that answers `-32022` listing only `initialize`-era
/// versions (as rmcp-based legacy servers do) is legacy too; the transport is consumed by the
/// failed attempt, so a fresh one is opened for `initialize`. A server that answered the probe
/// after the fallback (slow to start, not legacy) and so refused `initialize` is reached on a
/// fresh transport (a new process, for stdio) with `server/discover` alone, which waits as long
/// as the connection's own timeout allows: being slow is no error.
async fn serve_message_transport<T, Open, Fut>(
    handler: UpstreamHandler,
    open: Open,
    tap: Option<std::sync::Arc<dyn crate::MessageTap>>,
) -> Result<Service, UpstreamError>
where
    T: rmcp::transport::Transport<RoleClient> + 'static,
    Open: Fn() -> Fut,
    Fut: Future<Output = Result<T, UpstreamError>>,
{
    let auto = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let probing = LateDiscoverFilter::new(Tapped::new(open().await?, tap.clone()));
    let answered_late = probing.answered_late();
    match handler.clone().serve_with_lifecycle(probing, auto).await {
        Ok(service) => Ok(service),
        Err(error) if answered_late.load(std::sync::atomic::Ordering::SeqCst) => {
            tracing::info!(
                refused = %error_chain(&error),
                "the server answered server/discover after the probe gave up; connecting again with server/discover only"
            );
            let lifecycle = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            handler
                .serve_with_lifecycle(Tapped::new(open().await?, tap), lifecycle)
                .await
                .map_err(handshake_error)
        }
        Err(error) if only_legacy_versions(&error) => handler
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .serve_with_lifecycle(
                Tapped::new(open().await?, tap),
                ClientLifecycleMode::Initialize,
            )
            .await
            .map_err(handshake_error),
        Err(error) => Err(handshake_error(error)),
    }
}

/// Whether a discover attempt failed because the server named only `initialize`-era versions.
fn only_legacy_versions(error: &ClientInitializeError) -> bool {
    match error {
        ClientInitializeError::NoCompatibleProtocolVersion {
            server_supported, ..
        } => {
            !server_supported.is_empty()
                && server_supported.iter().all(|version| {
                    version.has_initialize() && ProtocolVersion::KNOWN_VERSIONS.contains(version)
                })
        }
        _ => false,
    }
}

fn handshake_error(error: ClientInitializeError) -> UpstreamError {
    match &error {
        ClientInitializeError::JsonRpcError(error) => UpstreamError::Rpc {
            code: error.code.0,
            message: error.message.to_string(),
            data: error.data.clone(),
        },
        ClientInitializeError::ConnectionClosed(_) => {
            UpstreamError::Handshake("the server closed the connection during the handshake".into())
        }
        _ => UpstreamError::Handshake(error_chain(&error)),
    }
}

/// What one probe step concluded.
enum Step {
    Connected(Service),
    /// This transport is not the one; the reason is kept for the final message.
    NotThis(String),
}

/// What the probe starts from: the transport found last time, and the one the user pinned.
struct Probe {
    cached: Option<DetectedTransport>,
    pinned: Option<DetectedTransport>,
}

/// Runs the probe (the pinned transport alone, or the cached result first) and returns the
/// session and the transport it settled on.
async fn connect_http(
    server: &str,
    url: &Url,
    client: StatusAwareHttpClient,
    handler: UpstreamHandler,
    probe: Probe,
    handshake: Duration,
) -> Result<(Service, DetectedTransport), UpstreamError> {
    const ORDER: [DetectedTransport; 3] = [
        DetectedTransport::StreamableHttpStateless,
        DetectedTransport::StreamableHttp,
        DetectedTransport::HttpSse,
    ];
    let cached = probe.cached.filter(|_| probe.pinned.is_none());
    let order: Vec<DetectedTransport> = match probe.pinned {
        Some(pinned) => vec![pinned],
        None => cached
            .into_iter()
            .chain(ORDER.into_iter().filter(|kind| Some(*kind) != cached))
            .collect(),
    };
    let mut reasons = Vec::new();
    for kind in order {
        let step = match kind {
            DetectedTransport::StreamableHttpStateless => {
                match within(handshake, try_stateless(url, &client, handler.clone())).await {
                    Err(UpstreamError::Timeout(limit)) => Ok(Step::NotThis(format!(
                        "no answer to server/discover within {limit:?}"
                    ))),
                    other => other,
                }
            }
            DetectedTransport::StreamableHttp => {
                within(handshake, try_sessions(url, &client, handler.clone())).await
            }
            DetectedTransport::HttpSse => {
                try_http_sse(server, url, &client, handler.clone(), handshake).await
            }
        };
        let step = match step {
            // A cached answer that no longer holds is a reason to probe again from the top,
            // unless the server cannot be reached or wants a sign-in (no probe step can help).
            Err(error) if Some(kind) == cached && !ends_the_probe(&error) => Ok(Step::NotThis(
                format!("cached result no longer holds: {error}"),
            )),
            other => other,
        }?;
        match step {
            Step::Connected(service) => {
                tracing::debug!(server, transport = kind.as_str(), "probe settled");
                return Ok((service, kind));
            }
            Step::NotThis(reason) => {
                tracing::debug!(
                    server,
                    transport = kind.as_str(),
                    reason,
                    "not this transport"
                );
                reasons.push(format!("{}: {reason}", kind.as_str()));
            }
        }
    }
    Err(UpstreamError::NoTransport(reasons.join("; ")))
}

fn ends_the_probe(error: &UpstreamError) -> bool {
    matches!(
        error,
        UpstreamError::Unreachable(_) | UpstreamError::AuthRequired(_) | UpstreamError::Auth(_)
    )
}

fn streamable_transport(
    url: &Url,
    client: &StatusAwareHttpClient,
) -> StreamableHttpClientTransport<StatusAwareHttpClient> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
    let mut backoff = ExponentialBackoff::default();
    backoff.max_times = Some(5);
    backoff.base_duration = Duration::from_millis(500);
    backoff.max_delay = Some(Duration::from_secs(30));
    config.retry_config = std::sync::Arc::new(backoff);
    StreamableHttpClientTransport::with_client(client.clone(), config)
}

/// The HTTP failure inside an rmcp handshake error, if the transport hit one.
fn http_failure(error: &ClientInitializeError) -> Option<&StreamableHttpError<HttpFailure>> {
    match error {
        ClientInitializeError::TransportError { error, .. } => error
            .error
            .downcast_ref::<StreamableHttpError<HttpFailure>>(),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => http_failure(fallback),
        _ => None,
    }
}

async fn try_stateless(
    url: &Url,
    client: &StatusAwareHttpClient,
    handler: UpstreamHandler,
) -> Result<Step, UpstreamError> {
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let transport = crate::transport::stateless::StatelessTransport::new(client.clone(), url);
    match handler.serve_with_lifecycle(transport, lifecycle).await {
        Ok(service) => Ok(Step::Connected(service)),
        // A JSON-RPC error that is not a modern rejection: a legacy server answering
        // `server/discover` before `initialize` (rmcp classifies by code).
        Err(ClientInitializeError::JsonRpcError(data)) => Ok(Step::NotThis(format!(
            "server/discover answered with error {}",
            data.code.0
        ))),
        Err(error) if only_legacy_versions(&error) => Ok(Step::NotThis(error.to_string())),
        Err(error @ ClientInitializeError::NoCompatibleProtocolVersion { .. }) => {
            Err(UpstreamError::Handshake(error.to_string()))
        }
        Err(error) => match http_failure(&error) {
            Some(failure) => match fatal_http_error(failure) {
                Some(fatal) => Err(fatal),
                None => Ok(Step::NotThis(failure.to_string())),
            },
            None => Ok(Step::NotThis(error_chain(&error))),
        },
    }
}

async fn try_sessions(
    url: &Url,
    client: &StatusAwareHttpClient,
    handler: UpstreamHandler,
) -> Result<Step, UpstreamError> {
    let handler = handler.with_protocol_version(ProtocolVersion::V_2025_11_25);
    match handler
        .serve_with_lifecycle(
            streamable_transport(url, client),
            ClientLifecycleMode::Initialize,
        )
        .await
    {
        Ok(service) => {
            let version = service
                .peer()
                .peer_info()
                .map(|info| info.protocol_version.clone());
            match version {
                Some(v) if ProtocolVersion::KNOWN_VERSIONS.contains(&v) => {
                    Ok(Step::Connected(service))
                }
                other => Err(UpstreamError::Handshake(format!(
                    "the server chose protocol version {:?}, which Switchboard does not speak",
                    other.map(|v| v.as_str().to_owned())
                ))),
            }
        }
        Err(error) => match http_failure(&error) {
            Some(failure) => {
                if let Some(fatal) = fatal_http_error(failure) {
                    return Err(fatal);
                }
                match failure {
                    // The spec's signal to fall back to HTTP+SSE.
                    StreamableHttpError::Client(HttpFailure::Status {
                        status: 400 | 404 | 405,
                        ..
                    }) => Ok(Step::NotThis(failure.to_string())),
                    StreamableHttpError::Client(HttpFailure::Status {
                        status,
                        excerpt,
                        retry_after,
                    }) => Err(UpstreamError::HttpStatus {
                        status: *status,
                        detail: excerpt.clone(),
                        retry_after: *retry_after,
                    }),
                    other => Err(UpstreamError::Handshake(other.to_string())),
                }
            }
            None => Err(handshake_error(error)),
        },
    }
}

async fn try_http_sse(
    server: &str,
    url: &Url,
    client: &StatusAwareHttpClient,
    handler: UpstreamHandler,
    wait: Duration,
) -> Result<Step, UpstreamError> {
    // The endpoint wait (inside) is shorter than the bound on the whole GET (outside), so a
    // server that answers the GET but sends no `endpoint` event is reported as such.
    let opened = LegacySseTransport::connect(client.clone(), url, wait, server.to_owned());
    let transport = match within(wait.saturating_mul(2), async { Ok(opened.await) }).await? {
        Ok(transport) => transport,
        Err(LegacySseError::Request(e)) => return Err(UpstreamError::Unreachable(e)),
        Err(LegacySseError::Status(401)) => {
            return Err(UpstreamError::AuthRequired(NO_CREDENTIALS.into()));
        }
        Err(LegacySseError::Auth(e)) => return Err(auth_error(&e)),
        Err(error @ (LegacySseError::CrossOrigin(_) | LegacySseError::BadEndpoint(_))) => {
            return Err(UpstreamError::Handshake(error.to_string()));
        }
        Err(other) => return Ok(Step::NotThis(other.to_string())),
    };
    let handler = handler.with_protocol_version(ProtocolVersion::V_2024_11_05);
    within(wait, async {
        handler
            .serve_with_lifecycle(
                Tapped::new(transport, client.tap()),
                ClientLifecycleMode::Initialize,
            )
            .await
            .map(Step::Connected)
            .map_err(handshake_error)
    })
    .await
}

/// On 2026-07-28 servers, change notifications arrive only on a `subscriptions/listen` stream.
fn spawn_change_listener(
    upstream: &Upstream,
    peer: rmcp::Peer<RoleClient>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
) {
    let Some(lists) = lists_to_follow(&upstream.capabilities()) else {
        return;
    };
    let listener = ChangeListener {
        peer,
        events,
        lists,
        subscribed: upstream.watch_subscribed_resources(),
        listening: upstream.listening(),
        server: upstream.server().to_string(),
    };
    tokio::spawn(listener.run());
}

/// The filter of the lists whose changes the server announces; `None` when there is nothing to
/// follow: no list changes, and no resource subscriptions (those join the filter later, see
/// `Upstream::subscribe_resource`).
fn lists_to_follow(caps: &ServerCapabilities) -> Option<SubscriptionFilter> {
    let mut filter = SubscriptionFilter::builder();
    let mut wanted = caps
        .resources
        .as_ref()
        .is_some_and(|r| r.subscribe == Some(true));
    if caps
        .tools
        .as_ref()
        .is_some_and(|t| t.list_changed == Some(true))
    {
        filter = filter.tools_list_changed();
        wanted = true;
    }
    if caps
        .resources
        .as_ref()
        .is_some_and(|r| r.list_changed == Some(true))
    {
        filter = filter.resources_list_changed();
        wanted = true;
    }
    if caps
        .prompts
        .as_ref()
        .is_some_and(|p| p.list_changed == Some(true))
    {
        filter = filter.prompts_list_changed();
        wanted = true;
    }
    wanted.then(|| filter.build())
}

/// Whether the server has no `subscriptions/listen` for a filter.
fn listen_refused(error: &rmcp::ServiceError) -> bool {
    matches!(error, rmcp::ServiceError::McpError(error)
        if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND)
}

/// The task that follows a stateless server's changes for as long as its session lives.
///
/// A listen stream that drops while the session lives is opened again, with backoff: without it
/// the catalog would silently stop following the server. A change of the subscribed resources
/// opens a stream with the new filter at once, and only then lets the old one go, so that no
/// update falls between the two.
struct ChangeListener {
    peer: rmcp::Peer<RoleClient>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    /// The lists followed; the subscribed resources join them ([`Self::filter_for`]).
    lists: SubscriptionFilter,
    subscribed: tokio::sync::watch::Receiver<std::collections::BTreeSet<String>>,
    listening: Arc<tokio::sync::watch::Sender<crate::upstream::Listening>>,
    server: String,
}

/// What the listener does after a step.
enum Next {
    /// Goes on following the stream it has.
    Follow,
    /// Opens a stream again (the one it had ended, or a new filter failed).
    Reopen,
    /// Ends: nobody takes the session's events, or its subscriptions are gone.
    Stop,
}

impl ChangeListener {
    /// The filter of the followed lists with the resources `uris`.
    fn filter_for(&self, uris: &std::collections::BTreeSet<String>) -> SubscriptionFilter {
        let mut filter = self.lists.clone();
        if !uris.is_empty() {
            filter.resource_subscriptions = Some(uris.iter().cloned().collect());
        }
        filter
    }

    /// Opens a stream, follows it, and opens one again when it is lost (after a backoff, or at
    /// once when the subscribed resources changed), until the session ends.
    async fn run(mut self) {
        let mut backoff = Duration::from_secs(1);
        let mut dropped_before = false;
        while !self.peer.is_transport_closed() {
            let mut refused = false;
            let uris = self.subscribed.borrow_and_update().clone();
            // Both requests boxed: the task waits on the stream for as long as the session
            // lives, and would otherwise keep room for a request in flight all that time.
            match Box::pin(self.peer.listen(self.filter_for(&uris))).await {
                Ok(subscription) => {
                    backoff = Duration::from_secs(1);
                    if std::mem::replace(&mut dropped_before, true)
                        && self.events.send(UpstreamEvent::ListenReopened).is_err()
                    {
                        return;
                    }
                    self.listening.send_replace(crate::upstream::Listening {
                        covering: uris,
                        refused: Default::default(),
                    });
                    if let Next::Stop = self.follow(subscription).await {
                        return;
                    }
                    // Nothing is covered until a stream is acknowledged again.
                    self.listening.send_modify(|l| l.covering.clear());
                }
                // A server without `subscriptions/listen` for this filter (it announced list
                // changes it does not deliver) will not grow one by being asked again: ask again
                // only with another filter.
                Err(error) if listen_refused(&error) => {
                    tracing::warn!(
                        server = self.server.as_str(),
                        "the server announces list changes but refuses subscriptions/listen; \
                         its lists are read again when it reconnects"
                    );
                    self.listening.send_replace(crate::upstream::Listening {
                        covering: Default::default(),
                        refused: uris,
                    });
                    refused = true;
                }
                Err(error) => {
                    tracing::warn!(server = self.server.as_str(), %error, "subscriptions/listen failed; retrying in {backoff:?}");
                }
            }
            if self.events.is_closed() {
                return;
            }
            if self.subscribed.has_changed().unwrap_or(false) {
                continue;
            }
            if refused {
                if let Next::Stop = self.wait_for_another_filter().await {
                    return;
                }
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = self.subscribed.changed() => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(60));
        }
    }

    /// Passes on what one acknowledged stream brings, moving to a stream with a new filter when
    /// the subscribed resources change, until the stream is lost (`Reopen`) or the task ends.
    async fn follow(&mut self, mut subscription: Subscription) -> Next {
        loop {
            let next = tokio::select! {
                next = subscription.next() => next,
                changed = self.subscribed.changed() => {
                    if changed.is_err() {
                        return Next::Stop;
                    }
                    match self.switch_filter(&mut subscription).await {
                        Next::Follow => continue,
                        end => return end,
                    }
                }
            };
            let step = match next {
                Ok(Some(notification)) => self.pass_on(notification),
                Ok(None) => Next::Reopen,
                Err(error) => {
                    tracing::debug!(server = self.server.as_str(), %error, "the subscriptions/listen stream ended");
                    Next::Reopen
                }
            };
            if !matches!(step, Next::Follow) {
                return step;
            }
        }
    }

    /// Opens a stream with the filter of the subscribed resources now, and lets `subscription`
    /// go for it once what it still holds is passed on. A filter the server refuses leaves the
    /// old stream on, its resources marked refused.
    async fn switch_filter(&mut self, subscription: &mut Subscription) -> Next {
        let uris = self.subscribed.borrow_and_update().clone();
        match Box::pin(self.peer.listen(self.filter_for(&uris))).await {
            Ok(newer) => {
                // What the old stream still holds comes first.
                while let Some(Ok(Some(notification))) =
                    futures::FutureExt::now_or_never(subscription.next())
                {
                    if let Next::Stop = self.pass_on(notification) {
                        return Next::Stop;
                    }
                }
                *subscription = newer;
                self.listening.send_replace(crate::upstream::Listening {
                    covering: uris,
                    refused: Default::default(),
                });
                Next::Follow
            }
            // The old stream goes on; the new resources are refused.
            Err(error) if listen_refused(&error) => {
                self.listening.send_modify(|l| l.refused = uris);
                Next::Follow
            }
            Err(error) => {
                tracing::debug!(server = self.server.as_str(), %error, "subscriptions/listen with a new filter failed");
                Next::Reopen
            }
        }
    }

    /// Sends the event a notification stands for; `Stop` once nobody takes events.
    fn pass_on(&self, notification: ServerNotification) -> Next {
        if let Some(event) = change_event(notification)
            && self.events.send(event).is_err()
        {
            return Next::Stop;
        }
        Next::Follow
    }

    /// After the server refused the filter: waits until the subscribed resources change; the
    /// task still ends with the session.
    async fn wait_for_another_filter(&mut self) -> Next {
        loop {
            tokio::select! {
                changed = self.subscribed.changed() => {
                    return if changed.is_ok() { Next::Reopen } else { Next::Stop };
                }
                _ = tokio::time::sleep(Duration::from_secs(60)) => {
                    if self.peer.is_transport_closed() || self.events.is_closed() {
                        return Next::Stop;
                    }
                }
            }
        }
    }
}

/// The upstream event a notification on a `subscriptions/listen` stream stands for.
fn change_event(notification: ServerNotification) -> Option<UpstreamEvent> {
    Some(match notification {
        ServerNotification::ToolListChangedNotification(_) => UpstreamEvent::ToolsChanged,
        ServerNotification::ResourceListChangedNotification(_) => UpstreamEvent::ResourcesChanged,
        ServerNotification::PromptListChangedNotification(_) => UpstreamEvent::PromptsChanged,
        ServerNotification::ResourceUpdatedNotification(n) => {
            UpstreamEvent::ResourceUpdated(n.params.uri)
        }
        _ => return None,
    })
}

/// The Bearer challenge a server answers an unauthenticated request with, if any: what a sign-in
/// started from the CLI needs (resource metadata URL, scope). Sends a harmless `ping` through
/// `http` (so within its network rules).
pub async fn auth_challenge(
    http: &crate::transport::plain_http::HttpClients,
    url: &Url,
    headers: &[switchboard_core::NamedValue],
) -> Option<switchboard_oauth::BearerChallenge> {
    let headers = crate::transport::http_client::header_map(headers).ok()?;
    let request = http
        .reqwest()
        .post(url.clone())
        .headers(headers)
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "ping"}))
        .timeout(Duration::from_secs(15))
        .build()
        .ok()?;
    // One request: its connection closes with it.
    let connection = crate::HeldConnections::default();
    let response = http.execute(request, &connection).await.ok()?;
    if response.status() != http::StatusCode::UNAUTHORIZED {
        return None;
    }
    switchboard_oauth::BearerChallenge::from_headers(response.headers())
}
