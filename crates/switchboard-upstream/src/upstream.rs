//! Requests to a connected upstream server.
//!
//! [`Upstream`] is a cheap, cloneable handle on one live session (an rmcp `Peer` underneath): any
//! number of tasks may call through it at once. It adds what every caller needs: the per-server
//! timeouts, pagination that stops on a repeated cursor, progress delivered to the caller that
//! asked for it, cancellation, and the 2026-07-28 `input_required` rounds answered by the same
//! policy as legacy server-to-client requests.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_core::sync::{read, write};

use futures::StreamExt;
use rmcp::Peer;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, GetPromptRequestParams, GetPromptResult,
    Implementation, InputRequiredResult, InputResponses, JsonObject, PaginatedRequestParams,
    Prompt, ReadResourceRequestParams, ReadResourceResult, Request, Resource, ResourceTemplate,
    ServerCapabilities, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, RoleClient};
use switchboard_core::{ServerId, Timeouts};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::direct::{DirectReply, DirectRoute};
use crate::error::{MAX_LIST_BYTES, MAX_LIST_ITEMS, UpstreamError, from_service_error};
use crate::input_requests::{InFlight, InputResponder};
use crate::limits::CallLimiter;
use crate::observe::{self, CallOutcome, CallWatch};

/// What a caller is told of a `requestState` nobody here or upstream can resume.
pub const UNKNOWN_REQUEST_STATE: &str =
    "requestState is unknown or expired; send the request again without it";

/// Most `input_required` rounds one request may take before Switchboard gives up.
pub(crate) const MAX_INPUT_ROUNDS: usize = 10;
/// The longest `Retry-After` a request safe to repeat is held for; a server asking for longer
/// gets its error passed on at once, saying how long it asked for, so the client decides.
pub(crate) const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(10);
/// How long a call that wants progress waits after its response for reports still in flight.
const PROGRESS_STRAGGLERS: Duration = Duration::from_millis(10);
/// Most pages one list may take (a guard against servers that page forever with new cursors).
pub(crate) const MAX_PAGES: usize = 1000;

/// One progress report for a running call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Work done so far.
    pub progress: f64,
    /// Total work, if known.
    pub total: Option<f64>,
    /// A human-readable status, if any.
    pub message: Option<String>,
}

async fn next_report(
    reports: &mut Option<rmcp::handler::client::progress::ProgressSubscriber>,
) -> Option<rmcp::model::ProgressNotificationParam> {
    match reports {
        Some(reports) => reports.next().await,
        None => std::future::pending().await,
    }
}

/// What a request carries besides its parameters.
#[derive(Clone, Default)]
pub struct CallContext {
    /// Where progress reports go, if the caller wants them.
    pub progress: Option<mpsc::UnboundedSender<Progress>>,
    /// Cancelling this cancels the request upstream.
    pub cancel: CancellationToken,
    /// Who answers the server's requests for input (elicitation, sampling, roots) during the
    /// request; the session's input policy when `None`.
    pub responder: Option<Arc<dyn InputResponder>>,
    /// The least severe log level the caller wants messages of during the request; sent as
    /// the request's `_meta` log level to 2026-07-28 servers, which log only when asked.
    #[allow(deprecated)]
    pub log_level: Option<rmcp::model::LoggingLevel>,
    /// What the caller can be asked for; a 2026-07-28 server gets it as the request's
    /// `clientCapabilities` (so it never asks for input the caller cannot give). The session's
    /// own capabilities when `None`.
    pub client_capabilities: Option<rmcp::model::ClientCapabilities>,
    /// Answers the caller sent with its first request (as a client may for a server that keeps
    /// no request state); they go with the first request to the server, which decides.
    pub input_responses: Option<InputResponses>,
    /// A `requestState` this server issued to the caller (relayed to it unchanged), sent back
    /// with the caller's answers; it goes with the first request. Only a stateless server
    /// issues them: any other server's request is refused as with an unknown state.
    pub request_state: Option<String>,
    /// Whether a `tools/call` may be sent again after a transient failure: its tool is
    /// annotated `readOnlyHint` or `idempotentHint`, or configured safe to retry. Lists,
    /// reads and prompts are always repeatable.
    pub repeatable: bool,
    /// The caller's W3C trace context, passed on to the server when Switchboard exports no
    /// traces of its own (when it does, the server gets the exchange's span instead).
    pub trace: Option<switchboard_telemetry::TraceContext>,
    /// Where a `tools/call` came in, for the observer's record of it (the audit log).
    pub origin: Option<Arc<switchboard_core::CallOrigin>>,
}

/// What a stateless server's `subscriptions/listen` stream covers.
#[derive(Debug, Default, Clone)]
pub(crate) struct Listening {
    /// The resource URIs of the acknowledged stream's filter.
    pub(crate) covering: BTreeSet<String>,
    /// The resource URIs of the last filter the server refused (it has no
    /// `subscriptions/listen` for it).
    pub(crate) refused: BTreeSet<String>,
}

/// A handle on one live upstream session: one shared allocation, so that a clone (one per
/// relayed call) is one reference count and the handle a word in every call's future, where
/// the session's parts by value were 424 bytes and some forty reference counts
/// (`docs/benchmarks.md`).
#[derive(Clone)]
pub struct Upstream(Arc<LiveSession>);

/// What an [`Upstream`] handle shares: the session and what every caller of it needs. Made
/// once, when the session opens, and shared from then on ([`Upstream::from`]).
pub(crate) struct LiveSession {
    server: ServerId,
    peer: Peer<RoleClient>,
    progress: ProgressDispatcher,
    /// Answers input requests of calls that bring no responder.
    fallback: Arc<dyn InputResponder>,
    in_flight: InFlight,
    timeouts: Timeouts,
    /// The resources subscribed to on a 2026-07-28 server, where a subscription is a URI in the
    /// filter of the session's `subscriptions/listen` stream (opened again when this changes).
    subscribed_resources: Arc<watch::Sender<BTreeSet<String>>>,
    /// What the server's acknowledged `subscriptions/listen` stream covers, so that a
    /// subscription is answered only once the server is sending its updates.
    listening: Arc<watch::Sender<Listening>>,
    /// Bounds the requests running and waiting on this session.
    limiter: CallLimiter,
    /// For a stateless HTTP server: where calls can go without the session machinery.
    direct: Option<DirectRoute>,
    /// Who hears how each tool call ended.
    calls: Option<CallWatch>,
    /// How requests safe to repeat are retried (the server's setting, which may change while
    /// the session lives).
    retries: Arc<std::sync::RwLock<switchboard_core::RetryPreset>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("server", &self.0.server)
            .finish()
    }
}

impl LiveSession {
    /// A session's parts, reached only through rmcp's `peer` until a direct route is added.
    pub(crate) fn new(
        server: ServerId,
        peer: Peer<RoleClient>,
        progress: ProgressDispatcher,
        fallback: Arc<dyn InputResponder>,
        in_flight: InFlight,
        timeouts: Timeouts,
        limiter: CallLimiter,
    ) -> Self {
        Self {
            server,
            peer,
            progress,
            fallback,
            in_flight,
            timeouts,
            subscribed_resources: Arc::new(watch::channel(BTreeSet::new()).0),
            listening: Arc::new(watch::channel(Listening::default()).0),
            limiter,
            direct: None,
            calls: None,
            retries: Arc::default(),
        }
    }

    /// Calls go to the server directly on `direct`, when there is one ([`DirectRoute`]).
    pub(crate) fn with_direct(mut self, direct: Option<DirectRoute>) -> Self {
        self.direct = direct;
        self
    }

    /// `observer` hears how each tool call ended.
    pub(crate) fn with_call_observer(
        mut self,
        observer: Option<Arc<dyn crate::CallObserver>>,
    ) -> Self {
        self.calls = observer.map(|observer| CallWatch::new(observer, self.server.clone()));
        self
    }
}

impl From<LiveSession> for Upstream {
    fn from(session: LiveSession) -> Self {
        Self(Arc::new(session))
    }
}

impl Upstream {
    /// Retries requests that are safe to repeat as `preset` says, from now on.
    pub fn set_retries(&self, preset: switchboard_core::RetryPreset) {
        *write(&self.0.retries) = preset;
    }

    fn retry_preset(&self) -> switchboard_core::RetryPreset {
        *read(&self.0.retries)
    }

    /// Runs `attempt`, and when it fails transiently (see [`UpstreamError::is_transient`]) and
    /// the request is `repeatable`, runs it again as the server's retry preset says. A request
    /// that is not repeatable is sent once. Cancelling `cancel` ends the wait between tries.
    async fn retrying<T, F, Fut>(
        &self,
        repeatable: bool,
        cancel: &CancellationToken,
        attempt: F,
    ) -> Result<T, UpstreamError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, UpstreamError>>,
    {
        let preset = self.retry_preset();
        let tries = if repeatable { preset.tries() } else { 1 };
        let mut failed = 0;
        loop {
            match attempt().await {
                Err(error) if failed + 1 < tries && error.is_transient() => {
                    failed += 1;
                    // The server's `Retry-After` is kept to; one asking for longer than a
                    // request should be held is answered at once, with its wait in the error.
                    let delay = match error.retry_after() {
                        Some(wait) if wait > LONGEST_RETRY_AFTER => return Err(error),
                        Some(wait) => wait,
                        None => preset.delay_after(failed, rand::random::<f64>()),
                    };
                    tracing::debug!(server = %self.0.server, %error, ?delay, "a transient failure; trying again");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = cancel.cancelled() => return Err(UpstreamError::Cancelled),
                    }
                }
                outcome => return outcome,
            }
        }
    }

    /// The server's timeouts.
    pub fn timeouts(&self) -> Timeouts {
        self.0.timeouts
    }

    /// Whether [`Upstream::call_tool_direct`] can reach this server: it is served over
    /// Streamable HTTP, stateless (2026-07-28) or with sessions.
    pub fn calls_directly(&self) -> bool {
        self.0.direct.is_some()
    }

    /// Whether the server holds the roots of a client other than `client` (it asked another
    /// client for them last); a request of `client` on the full path tells it they changed.
    pub fn roots_held_by_another(&self, client: &str) -> bool {
        self.0.in_flight.roots_held_by_another(client)
    }

    /// Whether the server gave this Streamable HTTP connection a session id. A server that
    /// answers `initialize` without one serves each request on its own, and cannot ask the
    /// client anything mid-call on some SDKs (the TypeScript SDK v2's fallback for 2025-era
    /// clients).
    pub fn holds_session_id(&self) -> bool {
        self.0
            .direct
            .as_ref()
            .is_some_and(crate::direct::DirectRoute::holds_session_id)
    }

    /// Whether this server keeps sessions (`initialize`d, 2025-03-26 .. 2025-11-25) rather
    /// than answering each request on its own.
    pub fn has_sessions(&self) -> bool {
        !self.is_stateless()
    }

    /// Sends a `tools/call` as one HTTP exchange and returns what the server answered as it
    /// sent it, with the caller's id (see [`crate::direct`]). `request` names the server's own
    /// tool and carries the caller's `_meta`. In a session, requests the server sends on the
    /// call's stream are answered by `input`, and (a closed stream being no cancellation there)
    /// a reply dropped before its end is read to its end unless `cancelled` fired; dropping the
    /// call before its reply, or a stateless server's reply, cancels it. Within the session's
    /// request slots and the tool-call timeout; [`UpstreamError::Unsupported`] when the server
    /// is not reached directly. A caller that resumes streams itself passes its `polling`: a
    /// stream the server ends early is then resumed at the caller's pace (see
    /// [`crate::direct::CallerPolling`]).
    ///
    /// The exchange has a span of its own, a child of `parent` (see
    /// [`switchboard_telemetry::exchange_span`]), lasting until the reply's end; while traces
    /// are exported the request carries its context, else the caller's `_meta` goes as it came.
    #[allow(clippy::too_many_arguments)]
    pub async fn call_tool_direct(
        &self,
        mut request: rmcp::model::JsonRpcRequest<rmcp::model::CallToolRequest>,
        input: std::sync::Arc<dyn crate::input_requests::InputResponder>,
        cancelled: tokio_util::sync::CancellationToken,
        polling: Option<crate::direct::CallerPolling>,
        repeatable: bool,
        origin: Option<Arc<switchboard_core::CallOrigin>>,
        parent: &tracing::Span,
    ) -> Result<DirectReply, UpstreamError> {
        let span = switchboard_telemetry::exchange_span(
            "tools/call",
            Some(&request.request.params.name),
            self.0.server.as_str(),
            parent,
        );
        if !span.is_disabled() {
            let outgoing = {
                let _entered = span.enter();
                switchboard_telemetry::TraceContext::outgoing(None)
            };
            if let Some(outgoing) = outgoing {
                let meta = request
                    .request
                    .extensions
                    .get_or_insert_default::<rmcp::model::RequestMetaObject>();
                outgoing.write_to(&mut meta.0);
            }
        }
        // Boxed: the caller's future holds only this one's, small, and moves it cheaply.
        let reply = Box::pin(
            self.call_tool_direct_traced(request, input, cancelled, polling, repeatable, origin),
        )
        .await;
        if span.is_disabled() {
            return reply;
        }
        match reply {
            Ok(DirectReply::Message(message)) => {
                observe::trace_message(&span, &message);
                Ok(DirectReply::Message(message))
            }
            Ok(DirectReply::Stream(messages)) => {
                Ok(DirectReply::Stream(observe::trace_stream(span, messages)))
            }
            Ok(DirectReply::NotSent) => Ok(DirectReply::NotSent),
            Err(error) => {
                observe::trace_error(&span, &error);
                Err(error)
            }
        }
    }

    #[expect(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps each argument twice in its future (rust-lang/rust#62958), and this one is part of every relayed call's (docs/benchmarks.md)"
    )]
    fn call_tool_direct_traced(
        &self,
        request: rmcp::model::JsonRpcRequest<rmcp::model::CallToolRequest>,
        input: std::sync::Arc<dyn crate::input_requests::InputResponder>,
        cancelled: tokio_util::sync::CancellationToken,
        polling: Option<crate::direct::CallerPolling>,
        repeatable: bool,
        origin: Option<Arc<switchboard_core::CallOrigin>>,
    ) -> impl Future<Output = Result<DirectReply, UpstreamError>> + '_ {
        async move {
            let Some(direct) = &self.0.direct else {
                return Err(UpstreamError::Unsupported("direct calls"));
            };
            let timeout = self.0.timeouts.tool_call;
            let started = Instant::now();
            let tool = self
                .0
                .calls
                .is_some()
                .then(|| request.request.params.name.to_string());
            // An error comes back only before any of the server's answer did (a reply that has
            // begun is a reply), so a repeatable call may be sent again. Only then is the request
            // copied: the commonest call is relayed as it came.
            let reply = if repeatable {
                let cancel = cancelled.clone();
                let send = || {
                    direct.call_tool(
                        request.clone(),
                        &self.0.limiter,
                        timeout,
                        input.clone(),
                        cancelled.clone(),
                        polling.clone(),
                    )
                };
                self.retrying(true, &cancel, send).await
            } else {
                direct
                    .call_tool(request, &self.0.limiter, timeout, input, cancelled, polling)
                    .await
            };
            let (Some(calls), Some(tool)) = (&self.0.calls, tool) else {
                return reply;
            };
            match reply {
                Ok(DirectReply::Message(message)) => {
                    calls.report(
                        &tool,
                        observe::outcome_of_message(&message),
                        started,
                        origin.as_ref(),
                    );
                    Ok(DirectReply::Message(message))
                }
                Ok(DirectReply::Stream(messages)) => Ok(DirectReply::Stream(
                    calls.clone().follow(tool, started, origin, messages),
                )),
                Ok(DirectReply::NotSent) => Ok(DirectReply::NotSent),
                Err(error) => {
                    calls.report(
                        &tool,
                        CallOutcome::of_error(&error),
                        started,
                        origin.as_ref(),
                    );
                    Err(error)
                }
            }
        }
    }

    /// How many requests to the server are running now (health checks not counted).
    pub fn requests_running(&self) -> usize {
        self.0.limiter.running()
    }

    /// Checks that the server still answers: `server/discover` for a stateless 2026-07-28
    /// server, `ping` in a session, within the request timeout. It takes no request slot, so a
    /// server that is merely busy is not mistaken for a dead one. A JSON-RPC error counts as
    /// alive (the server answered); a timeout, an HTTP failure or a lost connection does not.
    pub async fn health_check(&self) -> Result<(), UpstreamError> {
        let request = if self.is_stateless() {
            ClientRequest::DiscoverRequest(Request::new(rmcp::model::DiscoverRequestParams {}))
        } else {
            ClientRequest::PingRequest(Default::default())
        };
        let limit = self.0.timeouts.request;
        // The whole exchange is bounded: handing the request to a transport that is itself
        // stuck on the server can block before any response timer starts.
        let answered = tokio::time::timeout(limit, async {
            let options = PeerRequestOptions::with_timeout(limit);
            let handle = self
                .0
                .peer
                .send_cancellable_request(request, options)
                .await
                .map_err(from_service_error)?;
            handle.await_response().await.map_err(from_service_error)
        })
        .await
        .unwrap_or(Err(UpstreamError::Timeout(limit)));
        match answered {
            Ok(_) | Err(UpstreamError::Rpc { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Follows the resources subscribed to on a 2026-07-28 server (for its listen stream).
    pub(crate) fn watch_subscribed_resources(&self) -> watch::Receiver<BTreeSet<String>> {
        self.0.subscribed_resources.subscribe()
    }

    /// Where the listen task says what its acknowledged stream covers.
    pub(crate) fn listening(&self) -> Arc<watch::Sender<Listening>> {
        self.0.listening.clone()
    }

    /// Subscribes to updates of the resource `uri` (they arrive as
    /// [`UpstreamEvent::ResourceUpdated`](crate::UpstreamEvent)): `resources/subscribe` in a
    /// legacy session; on a 2026-07-28 server, which has no such request, the URI joins the
    /// filter of the session's `subscriptions/listen` stream.
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), UpstreamError> {
        self.change_resource_subscription(uri, true).await
    }

    /// Subscribes a new session (opened after the server forgot the old one) to every
    /// resource the old one was subscribed to; a stateless server needs nothing of this.
    pub async fn renew_resource_subscriptions(&self) -> Result<(), UpstreamError> {
        if self.is_stateless() {
            return Ok(());
        }
        let uris: Vec<String> = self
            .0
            .subscribed_resources
            .borrow()
            .iter()
            .cloned()
            .collect();
        for uri in uris {
            let request = ClientRequest::SubscribeRequest(Request::new(
                rmcp::model::SubscribeRequestParams::new(uri),
            ));
            self.request(request).await?;
        }
        Ok(())
    }

    /// Whether this session is subscribed to `uri` (see [`Self::subscribe_resource`]).
    pub fn subscribed_to(&self, uri: &str) -> bool {
        self.0.subscribed_resources.borrow().contains(uri)
    }

    /// Ends a subscription made with [`Self::subscribe_resource`].
    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), UpstreamError> {
        self.change_resource_subscription(uri, false).await
    }

    #[allow(deprecated)]
    async fn change_resource_subscription(
        &self,
        uri: &str,
        subscribe: bool,
    ) -> Result<(), UpstreamError> {
        let supported = self
            .capabilities()
            .resources
            .as_ref()
            .is_some_and(|r| r.subscribe == Some(true));
        if !supported {
            return Err(UpstreamError::Unsupported("resource subscriptions"));
        }
        // Kept for both eras: a stateless server's listen stream filters by it, and a session
        // opened again after the server forgot the old one subscribes to it again.
        self.0.subscribed_resources.send_if_modified(|uris| {
            if subscribe {
                uris.insert(uri.to_owned())
            } else {
                uris.remove(uri)
            }
        });
        if self.is_stateless() {
            if !subscribe {
                return Ok(());
            }
            // Answered once the server acknowledged a listen stream whose filter holds the URI:
            // an update it sends after that reaches the subscriber.
            let mut listening = self.0.listening.subscribe();
            let limit = self.0.timeouts.request;
            let covered = tokio::time::timeout(
                limit,
                listening.wait_for(|l| l.refused.contains(uri) || l.covering.contains(uri)),
            )
            .await
            .map_err(|_| UpstreamError::Timeout(limit))?
            .map_err(|_| UpstreamError::Closed)?
            .covering
            .contains(uri);
            return match covered {
                true => Ok(()),
                false => Err(UpstreamError::Unsupported("resource subscriptions")),
            };
        }
        let request = if subscribe {
            ClientRequest::SubscribeRequest(Request::new(rmcp::model::SubscribeRequestParams::new(
                uri,
            )))
        } else {
            ClientRequest::UnsubscribeRequest(Request::new(
                rmcp::model::UnsubscribeRequestParams::new(uri),
            ))
        };
        self.request(request).await.map(|_| ())
    }

    /// The server this session belongs to.
    pub fn server(&self) -> &ServerId {
        &self.0.server
    }

    /// The negotiated protocol version.
    pub fn protocol_version(&self) -> Option<String> {
        self.0
            .peer
            .peer_info()
            .map(|info| info.protocol_version.as_str().to_owned())
    }

    /// What the server says it is, as shown: `name version`.
    pub fn server_description(&self) -> Option<String> {
        self.server_info()
            .map(|info| format!("{} {}", info.name, info.version))
    }

    /// What the server says it is.
    pub fn server_info(&self) -> Option<Implementation> {
        self.0
            .peer
            .peer_info()
            .and_then(|info| info.server_info.clone())
    }

    /// What the server supports.
    pub fn capabilities(&self) -> ServerCapabilities {
        self.0
            .peer
            .peer_info()
            .map(|info| info.capabilities.clone())
            .unwrap_or_default()
    }

    /// Whether the session speaks a 2026-07-28-style stateless revision (no `initialize`).
    pub fn is_stateless(&self) -> bool {
        self.0
            .peer
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize())
    }

    /// Every tool, across all pages.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, UpstreamError> {
        if self.capabilities().tools.is_none() {
            return Ok(Vec::new());
        }
        self.paginate("tools", |params| async move {
            let page = self.0.peer.list_tools(params).await?;
            Ok((page.tools, page.next_cursor))
        })
        .await
    }

    /// Every resource, across all pages.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, UpstreamError> {
        if self.capabilities().resources.is_none() {
            return Ok(Vec::new());
        }
        self.paginate("resources", |params| async move {
            let page = self.0.peer.list_resources(params).await?;
            Ok((page.resources, page.next_cursor))
        })
        .await
    }

    /// Every resource template, across all pages.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, UpstreamError> {
        if self.capabilities().resources.is_none() {
            return Ok(Vec::new());
        }
        self.paginate("resource templates", |params| async move {
            let page = self.0.peer.list_resource_templates(params).await?;
            Ok((page.resource_templates, page.next_cursor))
        })
        .await
    }

    /// Every prompt, across all pages.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, UpstreamError> {
        if self.capabilities().prompts.is_none() {
            return Ok(Vec::new());
        }
        self.paginate("prompts", |params| async move {
            let page = self.0.peer.list_prompts(params).await?;
            Ok((page.prompts, page.next_cursor))
        })
        .await
    }

    /// A whole list, read again from its first page after a transient failure.
    async fn paginate<T, F, Fut>(
        &self,
        what: &'static str,
        fetch: F,
    ) -> Result<Vec<T>, UpstreamError>
    where
        T: serde::Serialize,
        F: Fn(Option<PaginatedRequestParams>) -> Fut,
        Fut: Future<Output = Result<(Vec<T>, Option<String>), rmcp::ServiceError>>,
    {
        self.retrying(true, &CancellationToken::new(), || {
            self.paginate_once(what, &fetch)
        })
        .await
    }

    async fn paginate_once<T, F, Fut>(
        &self,
        what: &'static str,
        fetch: &F,
    ) -> Result<Vec<T>, UpstreamError>
    where
        T: serde::Serialize,
        F: Fn(Option<PaginatedRequestParams>) -> Fut,
        Fut: Future<Output = Result<(Vec<T>, Option<String>), rmcp::ServiceError>>,
    {
        let mut items = Vec::new();
        let mut bytes = 0;
        let mut seen = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor
                .clone()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let (page, next) = tokio::time::timeout(self.0.timeouts.request, fetch(params))
                .await
                .map_err(|_| UpstreamError::Timeout(self.0.timeouts.request))?
                .map_err(from_service_error)?;
            bytes += page
                .iter()
                .map(|item| serde_json::to_vec(item).map_or(0, |json| json.len()))
                .sum::<usize>();
            items.extend(page);
            if items.len() > MAX_LIST_ITEMS || bytes > MAX_LIST_BYTES {
                return Err(UpstreamError::ListTooLarge {
                    what,
                    items: items.len(),
                    bytes,
                });
            }
            match next {
                None => return Ok(items),
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(UpstreamError::RepeatedCursor(next, what));
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(UpstreamError::Protocol(format!(
            "listing {what} did not end after {MAX_PAGES} pages"
        )))
    }

    /// Calls a tool. Progress reports go to the context's sink; cancelling its token sends the
    /// server a cancellation and returns [`UpstreamError::Cancelled`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<CallToolResult, UpstreamError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        let timeout = self.0.timeouts.tool_call;
        let started = Instant::now();
        let result = self
            .retrying(context.repeatable, &context.cancel, || {
                self.with_input_rounds(
                    params.clone(),
                    |p| ClientRequest::CallToolRequest(Request::new(p)),
                    |p, responses, state| {
                        p.input_responses = responses;
                        p.request_state = state;
                    },
                    |result| match result {
                        ServerResult::CallToolResult(r) => Some(r),
                        _ => None,
                    },
                    timeout,
                    context,
                )
            })
            .await;
        if let Some(calls) = &self.0.calls {
            calls.report(
                name,
                CallOutcome::of(&result),
                started,
                context.origin.as_ref(),
            );
        }
        result
    }

    /// Reads a resource.
    pub async fn read_resource(
        &self,
        uri: &str,
        context: &CallContext,
    ) -> Result<ReadResourceResult, UpstreamError> {
        self.retrying(true, &context.cancel, || {
            self.with_input_rounds(
                ReadResourceRequestParams::new(uri.to_owned()),
                |p| ClientRequest::ReadResourceRequest(Request::new(p)),
                |p, responses, state| {
                    p.input_responses = responses;
                    p.request_state = state;
                },
                |result| match result {
                    ServerResult::ReadResourceResult(r) => Some(r),
                    _ => None,
                },
                self.0.timeouts.request,
                context,
            )
        })
        .await
    }

    /// Gets a prompt with its arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<GetPromptResult, UpstreamError> {
        let mut params = GetPromptRequestParams::new(name.to_owned());
        params.arguments = arguments;
        self.retrying(true, &context.cancel, || {
            self.with_input_rounds(
                params.clone(),
                |p| ClientRequest::GetPromptRequest(Request::new(p)),
                |p, responses, state| {
                    p.input_responses = responses;
                    p.request_state = state;
                },
                |result| match result {
                    ServerResult::GetPromptResult(r) => Some(r),
                    _ => None,
                },
                self.0.timeouts.request,
                context,
            )
        })
        .await
    }

    /// Sends any other request (completion, subscriptions, log level) and returns its result;
    /// each may be repeated (completions read, the others set what is set already).
    pub async fn request(&self, request: ClientRequest) -> Result<ServerResult, UpstreamError> {
        let context = CallContext::default();
        self.retrying(true, &context.cancel, || {
            self.send(request.clone(), self.0.timeouts.request, &context)
        })
        .await
    }

    /// Sends one request, answering `input_required` results by the input policy and retrying
    /// with a new request id, the original parameters, the answers and the exact `requestState`.
    #[allow(clippy::too_many_arguments)]
    async fn with_input_rounds<P: Clone, T>(
        &self,
        mut params: P,
        into_request: impl Fn(P) -> ClientRequest,
        attach_inputs: impl Fn(&mut P, Option<InputResponses>, Option<String>),
        finish: impl Fn(ServerResult) -> Option<T>,
        timeout: Duration,
        context: &CallContext,
    ) -> Result<T, UpstreamError> {
        if context.request_state.is_some() && !self.is_stateless() {
            return Err(UpstreamError::Rpc {
                code: rmcp::model::ErrorCode::INVALID_PARAMS.0,
                message: UNKNOWN_REQUEST_STATE.into(),
                data: None,
            });
        }
        if context.input_responses.is_some() || context.request_state.is_some() {
            attach_inputs(
                &mut params,
                context.input_responses.clone(),
                context.request_state.clone(),
            );
        }
        for _ in 0..MAX_INPUT_ROUNDS {
            let result = self
                .send(into_request(params.clone()), timeout, context)
                .await?;
            match result {
                ServerResult::InputRequiredResult(required) => {
                    let (responses, state) = self.answer_inputs(required, context).await?;
                    attach_inputs(&mut params, responses, state);
                }
                other => {
                    return finish(other).ok_or_else(|| {
                        UpstreamError::Protocol("a result of the wrong kind".into())
                    });
                }
            }
        }
        Err(UpstreamError::TooManyInputRounds(MAX_INPUT_ROUNDS))
    }

    async fn answer_inputs(
        &self,
        required: InputRequiredResult,
        context: &CallContext,
    ) -> Result<(Option<InputResponses>, Option<String>), UpstreamError> {
        let responder = self.responder(context);
        let responses = match required.input_requests {
            Some(requests) => {
                // The questions are handed over together (a caller asked in batches gets them
                // all at once); the answers are then awaited in order.
                let keys: Vec<String> = requests.keys().cloned().collect();
                let pending = crate::input_requests::answer_all_with(
                    &responder,
                    &self.0.fallback,
                    requests.into_iter().collect(),
                );
                let mut answers = InputResponses::new();
                for (key, answer) in keys.into_iter().zip(pending) {
                    let answer = answer.await.map_err(|e| UpstreamError::Rpc {
                        code: e.code.0,
                        message: format!(
                            "cannot answer the server's '{key}' input request: {}",
                            e.message
                        ),
                        data: e.data,
                    })?;
                    answers.insert(key, answer);
                }
                Some(answers)
            }
            None => None,
        };
        Ok((responses, required.request_state))
    }

    fn responder(&self, context: &CallContext) -> Arc<dyn InputResponder> {
        match &context.responder {
            Some(responder) => responder.clone(),
            None => self.0.fallback.clone(),
        }
    }

    /// Sends one request in a span of its own (the exchange with the server, see
    /// [`switchboard_telemetry::exchange_span`]), whose trace context the request carries.
    async fn send(
        &self,
        mut request: ClientRequest,
        timeout: Duration,
        context: &CallContext,
    ) -> Result<ServerResult, UpstreamError> {
        let (method, target) = observe::traced_method(&request);
        let span = switchboard_telemetry::exchange_span(
            method,
            target,
            self.0.server.as_str(),
            &tracing::Span::current(),
        );
        let outgoing = {
            let _entered = span.enter();
            switchboard_telemetry::TraceContext::outgoing(context.trace.as_ref())
        };
        if let Some(outgoing) = outgoing {
            use rmcp::model::GetMeta;
            outgoing.write_to(&mut request.get_meta_mut().0);
        }
        // The span lives until the answer (it is not entered: nothing below makes spans of its
        // own). The exchange is boxed: its future is large, and every caller's would hold it.
        let result = Box::pin(self.send_traced(request, timeout, context)).await;
        observe::trace_outcome(&span, &result);
        result
    }

    #[allow(deprecated)]
    async fn send_traced(
        &self,
        mut request: ClientRequest,
        timeout: Duration,
        context: &CallContext,
    ) -> Result<ServerResult, UpstreamError> {
        if let Some(level) = context.log_level
            && self.is_stateless()
        {
            use rmcp::model::GetMeta;
            request.get_meta_mut().set_log_level(level);
        }
        let progress = &context.progress;
        let cancel = &context.cancel;
        let mut options = PeerRequestOptions::with_timeout(timeout)
            .reset_timeout_on_progress()
            .with_max_total_timeout(timeout.saturating_mul(5));
        if let Some(capabilities) = &context.client_capabilities
            && self.is_stateless()
        {
            // rmcp stamps the session's capabilities on every request; options' meta goes last.
            let mut meta = rmcp::model::RequestMetaObject::new();
            meta.set_client_capabilities(capabilities.clone());
            options = options.with_meta(meta);
        }
        // A caller that gives up while waiting for a slot leaves the line at once.
        let _slot = tokio::select! {
            slot = self.0.limiter.acquire(timeout) => slot?,
            _ = cancel.cancelled() => return Err(UpstreamError::Cancelled),
        };
        // A session server that keeps the roots it was given holds another client's, perhaps:
        // it is told they changed, and asks this caller (see `InFlight::hand_roots_to`).
        if let Some(responder) = &context.responder
            && self.has_sessions()
        {
            let tell = async {
                let told = tokio::time::timeout(
                    self.0.timeouts.notification,
                    self.0.peer.notify_roots_list_changed(),
                );
                matches!(told.await, Ok(Ok(())))
            };
            let handed = tokio::select! {
                handed = self.0.in_flight.hand_roots_to(responder, tell) => handed,
                _ = cancel.cancelled() => return Err(UpstreamError::Cancelled),
            };
            // The client's roots are given once the client answered, but rmcp writes that
            // answer to the server in no fixed order with the requests queued beside it: the call
            // could reach the server first and be answered with the roots before. The server
            // has the answer by the time it answers a ping sent after it.
            if handed {
                let pinged = tokio::time::timeout(
                    self.0.timeouts.notification,
                    self.0
                        .peer
                        .send_request(rmcp::model::ClientRequest::PingRequest(
                            rmcp::model::PingRequest::default(),
                        )),
                );
                tokio::select! {
                    _ = pinged => {}
                    _ = cancel.cancelled() => return Err(UpstreamError::Cancelled),
                }
            }
        }
        // The server may answer before this caller listens for the call's messages; they wait
        // until it does (see `relay`).
        let setting_up = self.0.in_flight.setting_up();
        // Handing the request over can itself wait on a transport stuck on the server, before
        // any response timer runs: bound it by the same timeout, and let the caller cancel it.
        let handle = tokio::select! {
            sent = tokio::time::timeout(timeout, self.0.peer.send_cancellable_request(request, options)) => {
                sent.map_err(|_| UpstreamError::Timeout(timeout))?.map_err(from_service_error)?
            }
            _ = cancel.cancelled() => return Err(UpstreamError::Cancelled),
        };
        let request_id = handle.id.clone();
        let _registration = context.responder.clone().map(|responder| {
            self.0
                .in_flight
                .register(request_id.clone(), responder, cancel.clone())
        });
        let mut reports = match &progress {
            Some(_) => Some(
                self.0
                    .progress
                    .subscribe(handle.progress_token.clone())
                    .await,
            ),
            None => None,
        };
        drop(setting_up);
        let forward = |report: rmcp::model::ProgressNotificationParam| {
            if let Some(sink) = &progress {
                let _ = sink.send(Progress {
                    progress: report.progress,
                    total: report.total,
                    message: report.message,
                });
            }
        };
        let response = handle.await_response();
        tokio::pin!(response);
        let mut reported = false;
        let outcome = loop {
            tokio::select! {
                biased;
                Some(report) = next_report(&mut reports) => {
                    reported = true;
                    forward(report);
                }
                response = &mut response => {
                    // The call's own log messages and progress, sent before the response, reach
                    // the caller before it does (see `relay`).
                    self.0.in_flight.all_delivered(&request_id).await;
                    break response.map_err(from_service_error);
                }
                _ = cancel.cancelled() => {
                    let notice = rmcp::model::CancelledNotificationParam::new(
                        Some(request_id),
                        Some("cancelled by the caller".into()),
                    );
                    let _ = tokio::time::timeout(
                        self.0.timeouts.notification,
                        self.0.peer.notify_cancelled(notice),
                    )
                    .await;
                    break Err(UpstreamError::Cancelled);
                }
            }
        };
        // Reports that arrived together with the response are still delivered. rmcp hands each
        // notification to the handler in a task of its own while the response goes straight to
        // the caller. Those on the call's response stream (Streamable HTTP) the wait above
        // covered, so they are in. A stateless HTTP server has no other stream, so that is all
        // of them; elsewhere (stdio, WebSocket, HTTP+SSE, a session's GET stream) a report sent
        // just before the response may still be on its way: wait a few milliseconds for
        // stragglers (only when the caller asked for progress and the server reported some: a
        // server that sent none during the call will not now).
        if let Some(reports) = reports.as_mut() {
            while let Some(Some(report)) = futures::FutureExt::now_or_never(reports.next()) {
                reported = true;
                forward(report);
            }
            if reported && !self.calls_directly() {
                while let Ok(Some(report)) =
                    tokio::time::timeout(PROGRESS_STRAGGLERS, reports.next()).await
                {
                    forward(report);
                }
            }
        }
        outcome
    }
}
