//! Switchboard's own MCP server: every connected upstream's tools, resources and prompts as one.
//!
//! [`AggregateServer`] is an rmcp `ServerHandler` over the hub's merged catalog
//! ([`switchboard_hub::ExposedCatalog`]). It resolves exposed names to their one upstream, sends
//! the request there through the hub's live session, and brings back progress, log messages,
//! requests for input ([`exchange`]) and the result, rewritten into exposed names. The same
//! handler serves Streamable HTTP of every era ([`http`]), HTTP+SSE ([`legacy_sse`]) and stdio
//! ([`stdio`]);
//! rmcp does the per-era framing (sessions, `server/discover`, `resultType`, cache hints).

// Logging, sampling and roots are deprecated in 2026-07-28 but still part of every legacy
// revision Switchboard serves.
#![allow(deprecated)]

mod admission;
mod caller;
pub(crate) mod conversation;
mod deferred;
mod direct;
mod downstream;
mod exchange;
pub mod http;
pub mod legacy_sse;
pub mod stdio;
mod subscribing;
mod tasks;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, CompleteRequestParams,
    CompleteResult, ContentBlock, ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse,
    Implementation, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, Request, ResourceUpdatedNotificationParam,
    ServerCapabilities, ServerInfo, ServerResult, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use switchboard_core::exposure::Prefix;
use switchboard_core::{ServerId, TaskMode};
use switchboard_hub::{ExposeUris, ExposedCatalog, Hub, HubEvent, Revisions};
use switchboard_upstream::{Upstream, UpstreamError};
use tokio::sync::broadcast;
use tracing::Instrument;

use admission::Admission;
pub use deferred::{
    ToolsOptions, ToolsView, WorkingSet, WorkingSetLimits, estimated_tokens, found_result,
};
use exchange::{Exchange, Outcome, Parked};

/// How often a session's notification task checks whether its client has gone.
const SESSION_CHECK: Duration = Duration::from_secs(30);

/// How many sessions (Streamable HTTP, HTTP+SSE and stdio together) are served at once by
/// default.
pub const DEFAULT_MAX_SESSIONS: usize = 1000;

/// How many client sessions are served at once, and how long one lives without its client.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Sessions served at once (at least one); an `initialize` beyond is refused.
    pub max: usize,
    /// A Streamable HTTP session whose client sent nothing and held no stream open this long
    /// is ended.
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max: DEFAULT_MAX_SESSIONS,
            idle: http::DEFAULT_SESSION_IDLE,
        }
    }
}

/// What every session of the aggregated server shares.
pub struct Shared {
    hub: Arc<Hub>,
    /// One permit per session open at once: every session holds memory and tasks until it
    /// ends or idles out, so their number is bounded.
    sessions: Arc<tokio::sync::Semaphore>,
    limits: SessionLimits,
    parked: Parked,
    /// Requests being worked on upstream (calls, reads, prompts), for a graceful shutdown.
    in_flight: tokio_util::task::TaskTracker,
    /// Set once a shutdown began: new requests are refused.
    draining: std::sync::atomic::AtomicBool,
    /// The Streamable HTTP sessions whose calls the short path (`direct`) may take, by id.
    /// Entries of ended sessions no longer upgrade, and are dropped as new ones are added.
    direct_sessions: Mutex<HashMap<String, std::sync::Weak<SessionState>>>,
    /// Calls the short path is relaying for sessions, by session and request id, so that the
    /// client's `notifications/cancelled` reaches them.
    /// Each entry's number tells it from a later call under the same id.
    direct_calls: Mutex<
        HashMap<(String, rmcp::model::RequestId), (u64, tokio_util::sync::CancellationToken)>,
    >,
    /// Requests the short path put to session clients on a call's stream, by session and
    /// request id, waiting for the client's answer.
    direct_questions: Mutex<HashMap<(String, rmcp::model::RequestId), direct::Answer>>,
    /// Calls running as tasks (the tasks extension), for every client.
    tasks: tasks::Tasks,
    /// Servers at which a 2026-07-28 client's `subscriptions/listen` is being subscribed.
    subscribing: Arc<subscribing::Subscribing>,
    /// The tools view clients get unless they ask for another, and the deferred view's bound.
    tools: ToolsOptions,
}

impl Shared {
    /// State shared by every session served from `hub`, within the default [`SessionLimits`].
    pub fn new(hub: Arc<Hub>) -> Arc<Self> {
        Self::with_session_limits(hub, SessionLimits::default())
    }

    /// State shared by every session served from `hub`, within `limits`: an `initialize`
    /// beyond the most sessions at once is refused with an error that says so.
    pub fn with_session_limits(hub: Arc<Hub>, limits: SessionLimits) -> Arc<Self> {
        Self::with_options(hub, limits, ToolsOptions::default())
    }

    /// [`Self::with_session_limits`], showing clients the view of `tools` unless they ask for
    /// another.
    pub fn with_options(
        hub: Arc<Hub>,
        mut limits: SessionLimits,
        tools: ToolsOptions,
    ) -> Arc<Self> {
        limits.max = limits.max.max(1);
        Arc::new(Self {
            hub,
            sessions: Arc::new(tokio::sync::Semaphore::new(limits.max)),
            limits,
            parked: Parked::default(),
            in_flight: tokio_util::task::TaskTracker::new(),
            draining: std::sync::atomic::AtomicBool::new(false),
            direct_sessions: Mutex::default(),
            direct_calls: Mutex::default(),
            direct_questions: Mutex::default(),
            tasks: tasks::Tasks::default(),
            subscribing: Arc::default(),
            tools,
        })
    }

    /// The session limits.
    pub fn session_limits(&self) -> SessionLimits {
        self.limits
    }

    /// The tools view clients get unless they ask for another, and the deferred view's bound.
    pub fn tools_options(&self) -> ToolsOptions {
        self.tools
    }

    /// How many sessions are open.
    pub fn open_sessions(&self) -> usize {
        self.limits.max - self.sessions.available_permits()
    }

    /// The hub served.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// A place among the sessions served at once, if one is free.
    fn session_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.sessions.clone().try_acquire_owned().ok()
    }

    /// The error for a session beyond the limit.
    fn sessions_full(&self) -> ErrorData {
        ErrorData::internal_error(
            format!(
                "Switchboard is serving its maximum of {} sessions; end an unused one or raise \
                 --max-sessions (sessions whose client is idle for --session-idle end by \
                 themselves)",
                self.limits.max
            ),
            None,
        )
    }

    /// Whether the Streamable HTTP session `id`, if this replica holds it, was opened at the
    /// door `path` names (an endpoint's, or the workspace's own): a session answers at its own
    /// door only. A session not known here yet is left to its handlers, which check the same.
    pub(crate) fn opened_at(&self, id: &str, path: &str) -> bool {
        let state = lock(&self.direct_sessions)
            .get(id)
            .and_then(std::sync::Weak::upgrade);
        state.is_none_or(|state| {
            state
                .endpoint
                .get()
                .is_none_or(|bound| bound.as_deref() == crate::endpoints::endpoint_in(path))
        })
    }

    /// Whether a shutdown began (new requests are refused).
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Begins a shutdown: from now on new requests are refused, and this waits up to `deadline`
    /// for the requests in flight to finish. Returns how many had not.
    pub async fn drain(&self, deadline: std::time::Duration) -> usize {
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.in_flight.close();
        let _ = tokio::time::timeout(deadline, self.in_flight.wait()).await;
        self.in_flight.len()
    }
}

/// What one downstream session (a legacy `initialize`d client, or one stateless request)
/// remembers.
#[derive(Default)]
struct SessionState {
    log_level: Mutex<Option<LoggingLevel>>,
    /// Exposed URIs the session subscribed to.
    subscribed: Mutex<HashSet<String>>,
    /// What `initialize` settled for a legacy session.
    negotiated: std::sync::OnceLock<Negotiated>,
    /// Cancelled when the session's server is dropped (the session ended): calls relayed for it
    /// on the short path end with it, as its handlers do on the full path.
    ended: tokio_util::sync::CancellationToken,
    /// The session's latest streams on the short path, kept for resumption.
    direct_streams: Mutex<direct::SessionStreams>,
    /// Its Streamable HTTP session id, once its client said `initialized` on it.
    http_session: std::sync::OnceLock<String>,
    /// The subscriptions acknowledged `subscriptions/listen` requests are about to make, by the
    /// resources they asked for (each request's `listen` takes its own).
    listen_underway: Mutex<Vec<(Vec<String>, subscribing::Underway)>>,
    /// The tools view its client asked for.
    tools_view: std::sync::OnceLock<ToolsView>,
    /// In the deferred view, the latest search's hits and the tools it called, which its list
    /// shows within the daemon's bound.
    working_set: Mutex<deferred::WorkingSet>,
    /// The user and thread its client named first (a request that names none is theirs).
    conversation: std::sync::OnceLock<conversation::Conversation>,
    /// Its own activation layer: which servers and tools its client turned on or off, when it
    /// names no thread.
    own_activation: Mutex<switchboard_core::Activation>,
    /// The endpoint its first request was sent to (`None`: the workspace's own door); every
    /// later request must be sent there too.
    endpoint: std::sync::OnceLock<Option<String>>,
}

impl SessionState {
    /// Whether calling `tool` would add it to this session's working set (a deferred session's
    /// first call of it, which the full path records and announces).
    fn adds_to_working_set(&self, shared: &Shared, tool: &str) -> bool {
        let view = self.tools_view.get().copied().unwrap_or(shared.tools.view);
        view == ToolsView::Deferred && !lock(&self.working_set).was_called(tool)
    }
}

/// How long a request for a server that is reconnecting waits for the attempt it asks for.
const WAIT_FOR_RECONNECT: std::time::Duration = std::time::Duration::from_secs(10);

/// The JSON-RPC error code of a call a rate limit refused (implementation-defined server
/// error range; 429 in spirit).
pub const RATE_LIMITED: i32 = -32029;

/// A call refused by a rate limit: the limit in words, with `retry_after_ms` and `limit` as data.
pub(crate) fn rate_limited(error: switchboard_hub::HubError) -> ErrorData {
    let data = match &error {
        switchboard_hub::HubError::RateLimited {
            limit, retry_after, ..
        } => Some(serde_json::json!({
            "retry_after_ms": retry_after.as_millis().max(1),
            "limit": limit.to_string(),
        })),
        _ => None,
    };
    ErrorData::new(ErrorCode(RATE_LIMITED), error.to_string(), data)
}

/// A request the hub could not route to its server, as the client is told: a server that is
/// not connected right now (reconnecting, waiting for a sign-in) is named with its state and
/// the reason (also as `data`), so the client knows the tool exists and may be tried again; a
/// tool that is off is the caller's mistake.
pub(crate) fn not_routed(error: switchboard_hub::HubError) -> ErrorData {
    use switchboard_hub::HubError;
    match &error {
        HubError::NotConnected {
            server,
            state,
            reason,
        } => ErrorData::internal_error(
            error.to_string(),
            Some(serde_json::json!({
                "server": server,
                "state": state,
                "reason": reason,
            })),
        ),
        HubError::RateLimited { .. } => rate_limited(error),
        HubError::ToolDisabled { .. }
        | HubError::UnknownServer(_)
        | HubError::CallerRefused { .. } => ErrorData::invalid_params(error.to_string(), None),
        _ => ErrorData::internal_error(error.to_string(), None),
    }
}

/// The deferred view's own tools (`search_tools`, `call_tool`, `list_servers`, `set_active`)
/// over a catalog of `tools` tools, as `tools/list` gives them: what every client of the view
/// reads before it searches.
pub fn deferred_view_tools(tools: usize) -> Vec<rmcp::model::Tool> {
    deferred::meta_tools(tools).into()
}

/// What a legacy session's `initialize` settled.
struct Negotiated {
    /// The protocol version agreed on.
    version: rmcp::model::ProtocolVersion,
    /// What the client declared it can be asked for (sampling, elicitation, roots).
    capabilities: rmcp::model::ClientCapabilities,
    /// The client's name, as its `clientInfo` gave it.
    client: String,
}

/// The aggregated MCP server, one per downstream session.
#[derive(Clone)]
pub struct AggregateServer {
    shared: Arc<Shared>,
    session: Arc<SessionState>,
    /// The session's place among those served at once, taken by `initialize` and given back
    /// when the session's server is dropped. Kept apart from `session`, which the session's
    /// notification task holds a little longer.
    slot: Arc<Mutex<Option<tokio::sync::OwnedSemaphorePermit>>>,
    /// Cancels the session's `ended` when the session's server is dropped.
    _ending: Arc<tokio_util::sync::DropGuard>,
}

impl AggregateServer {
    /// A handler for a new session.
    pub fn new(shared: Arc<Shared>) -> Self {
        let session = Arc::<SessionState>::default();
        let ending = Arc::new(session.ended.clone().drop_guard());
        Self {
            shared,
            session,
            slot: Arc::default(),
            _ending: ending,
        }
    }

    /// A handler for a new session that takes its place among the sessions served at once
    /// now rather than at `initialize`; `None` when there is no room.
    pub(crate) fn with_session_slot(shared: Arc<Shared>) -> Option<Self> {
        let slot = shared.session_slot()?;
        let server = Self::new(shared);
        *lock(&server.slot) = Some(slot);
        Some(server)
    }

    fn hub(&self) -> &Hub {
        &self.shared.hub
    }

    fn catalog(&self) -> Arc<ExposedCatalog> {
        self.hub().exposed()
    }

    /// The server's handle for a request (of `tool`, for a call) of the client behind
    /// `context`: over a link of the client's own era where the server has two, and waiting a
    /// moment for a server that is reconnecting ([`Hub::upstream_for_client`]).
    async fn upstream_soon(
        &self,
        server: &ServerId,
        tool: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Upstream, ErrorData> {
        self.hub()
            .upstream_for_client(server, tool, downstream::era(context), WAIT_FOR_RECONNECT)
            .await
            .map_err(not_routed)
    }

    fn log_level(&self) -> Option<LoggingLevel> {
        *lock(&self.session.log_level)
    }

    /// The tools view of the client behind `context`: what its request asks for (remembered
    /// for the session), else what it asked for before, else the daemon's.
    fn tools_view(&self, context: &RequestContext<RoleServer>) -> ToolsView {
        match deferred::requested(context) {
            Some(view) => *self.session.tools_view.get_or_init(|| view),
            None => self
                .session
                .tools_view
                .get()
                .copied()
                .unwrap_or(self.shared.tools.view),
        }
    }

    /// The conversation of `context`'s request: what it names, else what its session named.
    fn conversation(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<conversation::Conversation, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        admission::session_conversation(&self.session, parts)
            .map_err(|e| ErrorData::invalid_params(e, None))
    }

    /// What `context`'s request may reach: the boundary of the endpoint it was sent to.
    fn boundary(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<conversation::Boundary, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        admission::session_boundary(self.hub(), Some(&self.session), parts)
            .map_err(|e| ErrorData::invalid_request(e, None))
    }

    /// What decides which tools are on for `context`'s conversation.
    fn activity(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<conversation::Activity, ErrorData> {
        self.admission(context).activity()
    }

    /// The admission of calls made by `context`'s request.
    fn admission<'a>(&'a self, context: &'a RequestContext<RoleServer>) -> Admission<'a> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        Admission::new(self.hub(), Some(&self.session), parts)
    }

    /// The server and upstream URI of the exposed `uri`, if the request's endpoint includes its
    /// server: a resource outside it is not found, as one no server has.
    fn resolve_uri(
        &self,
        catalog: &ExposedCatalog,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(ServerId, String), ErrorData> {
        let boundary = self.boundary(context)?;
        let not_found = |message: String| {
            ErrorData::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                message,
                Some(serde_json::json!({"uri": uri})),
            )
        };
        // Inside an endpoint, every miss reads alike: an ambiguous URI's error would name
        // servers outside it.
        let unknown =
            || not_found(switchboard_hub::UnknownResource::NoOwner(uri.to_owned()).to_string());
        match catalog.resolve_uri(uri) {
            Ok((server, upstream)) if boundary.includes_server(server.as_str()) => {
                Ok((server, upstream))
            }
            Err(error) if boundary.is_everything() => Err(not_found(error.to_string())),
            _ => Err(unknown()),
        }
    }

    /// `list_servers` in the deferred view: every server with tools, what it is for, and
    /// whether it is on for this conversation.
    fn list_servers_for_client(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let activity = self.activity(context)?;
        let layers = activity.layers();
        let catalog = self.catalog();
        let mut servers: std::collections::BTreeMap<&ServerId, usize> = Default::default();
        for tool in catalog.tools.iter().filter(|tool| {
            activity
                .boundary()
                .includes_tool(tool.server.as_str(), &tool.upstream)
        }) {
            *servers.entry(&tool.server).or_default() += 1;
        }
        let listed: Vec<serde_json::Value> = servers
            .into_iter()
            .map(|(server, tools)| {
                serde_json::json!({
                    "server": server,
                    "description": self.hub().description(server),
                    "tools": tools,
                    "active": layers.is_active(server.as_str(), ""),
                })
            })
            .collect();
        Ok(CallToolResponse::Complete(complete(
            CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                serde_json::to_string(&listed).unwrap_or_default(),
            )]),
        )))
    }

    /// `set_active` in the deferred view: turns servers or tools on or off for this
    /// conversation (its named thread's layer, else its session's own).
    async fn set_active_for_client(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let catalog = self.catalog();
        // Only what the endpoint includes can be named: a layer chooses inside it.
        let boundary = self.boundary(context)?;
        let within = |tool: &switchboard_core::exposure::Exposed<rmcp::model::Tool>| {
            boundary.includes_tool(tool.server.as_str(), &tool.upstream)
        };
        let change = deferred::activation_change(
            request.arguments.as_ref(),
            |server| {
                catalog
                    .tools
                    .iter()
                    .any(|t| t.server.as_str() == server && within(t))
            },
            |tool| catalog.tools.get(tool).is_some_and(within),
        )?;
        let named = self.conversation(context)?;
        let said = match &named.thread {
            Some(thread) => {
                let scope = switchboard_hub::Scope::thread(thread)
                    .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
                self.hub()
                    .change_activation(&scope, &change)
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                format!("Done, for thread '{thread}'.")
            }
            None if downstream::is_modern(context) => {
                return Err(ErrorData::invalid_params(
                    "this request has no session to remember the change in: name the \
                     conversation with the X-Switchboard-Thread header or ?thread= on the URL",
                    None,
                ));
            }
            None => {
                let changed = lock(&self.session.own_activation).apply(&change);
                if changed {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                "Done, for this session.".to_owned()
            }
        };
        Ok(CallToolResponse::Complete(complete(
            CallToolResult::success(vec![rmcp::model::ContentBlock::text(said)]),
        )))
    }

    /// `search_tools` in the deferred view: the best matches, a line each; they become the
    /// hits of the session's working set (a change announced to a session client with
    /// `tools/list_changed`).
    async fn search_for_client(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (query, limit) = deferred::search_arguments(request.arguments.as_ref())?;
        let catalog = self.catalog();
        let activity = self.activity(context)?;
        let active = |_: &ServerId, name: &str| {
            catalog
                .tools
                .get(name)
                .is_some_and(|tool| activity.is_on(tool))
        };
        // Only a conversation whose layers or endpoint leave something out needs its tools
        // filtered.
        let filter = (!activity.layers().is_empty() || !activity.boundary().is_everything())
            .then_some(&active as &switchboard_hub::ToolFilter<'_>);
        let found: Vec<rmcp::model::Tool> = self
            .hub()
            .search_tools(&query, limit, false, filter)
            .await
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?
            .tools
            .iter()
            .filter_map(|hit| catalog.tools.get(&hit.name).map(|t| t.item.clone()))
            .collect();
        let hits = found.iter().map(|tool| tool.name.to_string()).collect();
        let changed = lock(&self.session.working_set).found(hits);
        if changed && !downstream::is_modern(context) {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(CallToolResponse::Complete(complete(
            deferred::found_result(&found, &query),
        )))
    }

    /// `describe_tools` in the deferred view: the full definitions of the named tools, of
    /// those this conversation may call.
    fn describe_for_client(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let names = deferred::describe_arguments(request.arguments.as_ref())?;
        let catalog = self.catalog();
        let activity = self.activity(context)?;
        let tools = names
            .iter()
            .map(|name| {
                catalog
                    .tools
                    .get(name)
                    .filter(|tool| activity.is_on(tool))
                    .map(|tool| tool.item.clone())
                    .ok_or_else(|| {
                        ErrorData::invalid_params(format!("unknown tool '{name}'"), None)
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CallToolResponse::Complete(complete(
            deferred::described_result(&tools),
        )))
    }

    /// What tells this session's calls from other clients' when a server asks something
    /// without naming the call: the Streamable HTTP session id of the request (the short path
    /// knows its calls by it too), else this session's own address.
    fn client_key(&self, context: &RequestContext<RoleServer>) -> String {
        let header = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get(http::SESSION_HEADER))
            .and_then(|id| id.to_str().ok());
        match header.or(self.session.http_session.get().map(String::as_str)) {
            Some(id) => id.to_owned(),
            None => format!("session@{:p}", Arc::as_ptr(&self.session)),
        }
    }

    /// Runs (or, with a `requestState`, resumes) an upstream request for `context`.
    async fn exchange<F>(
        &self,
        purpose: String,
        request_state: Option<String>,
        input_responses: Option<rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
        patience: std::time::Duration,
        work: F,
    ) -> Result<Outcome, ErrorData>
    where
        F: FnOnce(
            switchboard_upstream::CallContext,
        )
            -> futures::future::BoxFuture<'static, Result<ServerResult, UpstreamError>>,
    {
        let running = self
            .exchange_until(
                purpose,
                request_state,
                input_responses,
                context,
                patience,
                None,
                work,
            )
            .await?;
        // Without a deadline it never comes back unfinished.
        Ok(running.unwrap_or_else(|_| Outcome::Done(Err(UpstreamError::Closed))))
    }

    /// [`Self::exchange`], but an exchange still running at `deadline` (without an outcome or
    /// a question for the client) comes back unfinished (`Err`), to become a task.
    #[expect(
        clippy::too_many_arguments,
        reason = "the request's parts, each used once; a struct would only rename them"
    )]
    async fn exchange_until<F>(
        &self,
        purpose: String,
        request_state: Option<String>,
        input_responses: Option<rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
        patience: std::time::Duration,
        deadline: Option<tokio::time::Instant>,
        work: F,
    ) -> Result<Result<Outcome, Exchange>, ErrorData>
    where
        F: FnOnce(
            switchboard_upstream::CallContext,
        )
            -> futures::future::BoxFuture<'static, Result<ServerResult, UpstreamError>>,
    {
        if let Some(responses) = &input_responses {
            exchange::check_input_responses(responses)?;
        }
        // Counted until the outcome is in hand, so a shutdown lets it finish.
        let _in_flight = self.shared.in_flight.token();
        let forward = downstream::Forwarder::new(context, self.log_level(), patience);
        // A state of ours resumes the exchange parked under it; any other goes to the server,
        // which issued it to the client through the short path (`direct`).
        let exchange = match request_state {
            Some(handle) if self.shared.parked.holds(&handle) => {
                let mut exchange = self.shared.parked.resume(&handle, &purpose)?;
                exchange.deliver(input_responses);
                exchange
            }
            foreign => Exchange::start(
                purpose,
                input_responses,
                foreign,
                self.client_key(context),
                context,
                &forward,
                work,
            ),
        };
        Ok(exchange
            .advance_until(context, &forward, &self.shared.parked, deadline)
            .await)
    }

    /// Sends this session the `list_changed` notifications its client should see, and resource
    /// updates it subscribed to, until the client goes away.
    fn watch_changes(&self, peer: Peer<RoleServer>) {
        let mut catalog = self.hub().watch_exposed();
        let mut events = self.hub().subscribe();
        let session = self.session.clone();
        let hub = self.shared.hub.clone();
        tokio::spawn(async move {
            let mut seen = catalog.borrow_and_update().revisions;
            loop {
                tokio::select! {
                    changed = catalog.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let now = catalog.borrow_and_update().revisions;
                        let sent = notify_list_changes(&peer, seen, now).await;
                        seen = now;
                        if sent.is_err() {
                            return;
                        }
                    }
                    event = events.recv() => match event {
                        Ok(HubEvent::ResourceUpdated { server, uri }) => {
                            let exposed = prefix_of(&hub.exposed(), &server).uri(&uri);
                            if lock(&session.subscribed).contains(&exposed) {
                                let params = ResourceUpdatedNotificationParam::new(exposed);
                                if peer.notify_resource_updated(params).await.is_err() {
                                    return;
                                }
                            }
                        }
                        Ok(HubEvent::ActivationChanged { scope }) => {
                            let mine = session.conversation.get().cloned().unwrap_or_default();
                            if conversation::Activity::concerns(&mine, &scope)
                                && peer.notify_tool_list_changed().await.is_err()
                            {
                                return;
                            }
                        }
                        Ok(HubEvent::EndpointChanged { name })
                            if session.endpoint.get().and_then(Option::as_deref) == Some(&name) =>
                        {
                            if notify_list_changes(&peer, Revisions::default(), Revisions::EVERY_LIST).await.is_err() {
                                return;
                            }
                        }
                        Ok(HubEvent::Log { server, level, logger, data, to_caller: false }) => {
                            let wanted = *lock(&session.log_level);
                            if let Some(message) = unsolicited_log(wanted, &server, &level, logger, data)
                                && peer.notify_logging_message(message).await.is_err()
                            {
                                return;
                            }
                        }
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    _ = tokio::time::sleep(SESSION_CHECK) => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }

    /// Subscribes to (or unsubscribes from) `uri` at its server (see [`forward_subscription`]).
    async fn forward_subscription(
        &self,
        uri: &str,
        subscribe: bool,
        era: switchboard_hub::ClientEra,
    ) -> Result<(), ErrorData> {
        forward_subscription(&self.shared, uri, subscribe, era).await
    }
}

/// Subscribes to (or unsubscribes from) `uri` at its server on behalf of a client of `era`,
/// the first subscriber subscribing and the last one's end unsubscribing (the hub counts
/// every front door's subscribers, and the consoles').
async fn forward_subscription(
    shared: &Shared,
    uri: &str,
    subscribe: bool,
    era: switchboard_hub::ClientEra,
) -> Result<(), ErrorData> {
    let (server, upstream_uri) = shared
        .hub
        .exposed()
        .resolve_uri(uri)
        .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
    shared
        .hub
        .change_resource_subscription(&server, &upstream_uri, subscribe, era, WAIT_FOR_RECONNECT)
        .await
        .map_err(|error| match error {
            switchboard_hub::SubscriptionError::NotRouted(error) => not_routed(error),
            switchboard_hub::SubscriptionError::Upstream(server, error) => {
                upstream_error(&server, *error)
            }
        })
}

/// Results are re-emitted in the caller's era: marked complete here (a 2026-07-28 client needs
/// `resultType`; results from legacy servers lack it), and rmcp strips the mark again for legacy
/// clients.
trait Completable {
    fn result_type(&mut self) -> &mut Option<rmcp::model::ResultType>;
}

macro_rules! completable {
    ($($t:ty),*) => {$(
        impl Completable for $t {
            fn result_type(&mut self) -> &mut Option<rmcp::model::ResultType> {
                &mut self.result_type
            }
        }
    )*};
}

completable!(
    CallToolResult,
    rmcp::model::GetPromptResult,
    rmcp::model::ReadResourceResult,
    CompleteResult,
    ListToolsResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult
);

fn complete<T: Completable>(mut result: T) -> T {
    *result.result_type() = Some(rmcp::model::ResultType::COMPLETE);
    result
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

async fn notify_list_changes(
    peer: &Peer<RoleServer>,
    seen: switchboard_hub::Revisions,
    now: switchboard_hub::Revisions,
) -> Result<(), rmcp::ServiceError> {
    if now.tools != seen.tools {
        peer.notify_tool_list_changed().await?;
    }
    if now.prompts != seen.prompts {
        peer.notify_prompt_list_changed().await?;
    }
    if now.resources != seen.resources {
        peer.notify_resource_list_changed().await?;
    }
    Ok(())
}

/// The `list_changed` notifications a `subscriptions/listen` stream that `accepted` them is
/// sent when the lists' revisions move from `seen` to `now`.
fn list_changes(
    accepted: &SubscriptionFilter,
    seen: Revisions,
    now: Revisions,
) -> Vec<rmcp::model::ServerNotification> {
    use rmcp::model::ServerNotification;
    let mut notes = Vec::new();
    if now.tools != seen.tools && accepted.tools_list_changed == Some(true) {
        notes.push(ServerNotification::ToolListChangedNotification(
            Default::default(),
        ));
    }
    if now.prompts != seen.prompts && accepted.prompts_list_changed == Some(true) {
        notes.push(ServerNotification::PromptListChangedNotification(
            Default::default(),
        ));
    }
    if now.resources != seen.resources && accepted.resources_list_changed == Some(true) {
        notes.push(ServerNotification::ResourceListChangedNotification(
            Default::default(),
        ));
    }
    notes
}

/// A server's own log message (not about any request) as a session that set `wanted` with
/// `logging/setLevel` should see it: only at or above that level, and only if it set one;
/// the logger names the server.
fn unsolicited_log(
    wanted: Option<LoggingLevel>,
    server: &ServerId,
    level: &str,
    logger: Option<String>,
    data: serde_json::Value,
) -> Option<rmcp::model::LoggingMessageNotificationParam> {
    let wanted = wanted?;
    let level: LoggingLevel = serde_json::from_value(level.into()).ok()?;
    if downstream::severity(level) < downstream::severity(wanted) {
        return None;
    }
    let logger = match logger {
        Some(logger) => format!("{server}/{logger}"),
        None => server.to_string(),
    };
    let mut message = rmcp::model::LoggingMessageNotificationParam::new(level, data);
    message.logger = Some(logger);
    Some(message)
}

/// The prefix a server's names carry in `catalog` (its id if it is not in the catalog).
fn prefix_of(catalog: &ExposedCatalog, server: &ServerId) -> Prefix {
    catalog
        .prefixes()
        .iter()
        .find(|(id, _)| id == server)
        .map(|(_, prefix)| prefix.clone())
        .unwrap_or_else(|| Prefix::of_server(server))
}

/// An upstream failure as the downstream client sees it: the server's own JSON-RPC errors keep
/// their code; everything else is an internal error naming the server.
fn upstream_error(server: &ServerId, error: UpstreamError) -> ErrorData {
    match error {
        UpstreamError::Rpc {
            code,
            message,
            data,
        } => ErrorData::new(ErrorCode(code), message, data),
        other => ErrorData::internal_error(format!("server '{server}': {other}"), None),
    }
}

/// What the client gets for a `tools/call` its server answered with `result`: the result with
/// exposed names and URIs, the server's input requests as they are, the server's JSON-RPC error;
/// a failure of the server itself is a tool error the model can read.
fn call_result(
    catalog: &ExposedCatalog,
    server: &ServerId,
    result: Result<ServerResult, UpstreamError>,
) -> Result<CallToolResponse, ErrorData> {
    match result {
        Ok(ServerResult::CallToolResult(result)) => Ok(CallToolResponse::Complete(complete(
            result.exposed(&prefix_of(catalog, server)),
        ))),
        Ok(ServerResult::InputRequiredResult(required)) => {
            Ok(CallToolResponse::InputRequired(required))
        }
        Ok(_) => Err(ErrorData::internal_error(
            format!("server '{server}' answered tools/call with another kind of result"),
            None,
        )),
        Err(error @ UpstreamError::Rpc { .. }) => Err(upstream_error(server, error)),
        Err(error) => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
            ContentBlock::text(format!(
                "Switchboard could not complete the call: server '{server}': {error}"
            )),
        ]))),
    }
}

/// The W3C trace context a client's request came with (its `_meta`, or its HTTP headers).
fn incoming_trace(
    context: &RequestContext<RoleServer>,
) -> Option<switchboard_telemetry::TraceContext> {
    let headers = context
        .extensions
        .get::<axum::http::request::Parts>()
        .map(|parts| &parts.headers);
    switchboard_telemetry::TraceContext::incoming(Some(&context.meta.0), headers)
}

/// Runs a client's request in its span (see [`switchboard_telemetry::server_span`]), boxed so
/// that its future stays off the stack of whoever polls it, and marks the span failed with the
/// error the client is answered with.
async fn in_span<T>(
    span: &tracing::Span,
    work: impl std::future::Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let result = Box::pin(work).instrument(span.clone()).await;
    if let Err(error) = &result {
        trace_error(span, error);
    }
    result
}

/// Marks `span` failed with the error a client is answered with.
fn trace_error(span: &tracing::Span, error: &ErrorData) {
    switchboard_telemetry::record_error(span, &error.code.0.to_string(), Some(error.code.0));
}

impl AggregateServer {
    /// `tools/call`, inside its span.
    async fn call_tool_traced(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.tools_view(&context) == ToolsView::Deferred {
            match request.name.as_ref() {
                deferred::SEARCH_TOOLS => return self.search_for_client(&request, &context).await,
                deferred::DESCRIBE_TOOLS => return self.describe_for_client(&request, &context),
                deferred::LIST_SERVERS => return self.list_servers_for_client(&context),
                deferred::SET_ACTIVE => {
                    return self.set_active_for_client(&request, &context).await;
                }
                deferred::CALL_TOOL => {
                    let (name, arguments) = deferred::call_arguments(request.arguments.as_ref())?;
                    request.name = name.into();
                    request.arguments = arguments;
                }
                _ => {}
            }
        }
        let catalog = self.catalog();
        let admission = self.admission(&context);
        let tool = admission.tool(&catalog, &request.name)?;
        let server = tool.server.clone();
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let exposed = request.name.clone();
        // The checks admitting the call, in a span of their own; then its server, once ready.
        let admission_span = switchboard_telemetry::admission_span();
        admission.admit(
            tool,
            &exposed,
            caller::caller_of(&request, &context.meta, parts),
            request.arguments.as_ref(),
            &admission_span,
        )?;
        let ready = async {
            self.shared.subscribing.settled(&server).await;
            self.upstream_soon(&server, Some(&tool.upstream), &context)
                .await
        }
        .instrument(admission_span.clone())
        .await;
        if let Err(error) = &ready {
            trace_error(&admission_span, error);
            admission.audit_refusal(tool, &exposed, request.arguments.as_ref(), error);
        }
        let upstream = ready?;
        // A call refused on its way is recorded, with the arguments it had then.
        let refused = |error: &ErrorData, arguments: Option<&rmcp::model::JsonObject>| {
            admission.audit_refusal(tool, &exposed, arguments, error);
        };
        // A called tool joins a deferred session's working set.
        if self.tools_view(&context) == ToolsView::Deferred
            && lock(&self.session.working_set).called(&request.name)
            && !downstream::is_modern(&context)
        {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        let name = tool.upstream.clone();
        let arguments = self
            .hub()
            .with_fixed_arguments(&server, &name, request.arguments.take());
        // A call that needs a person's approval waits for it here, with the exact arguments
        // the server would get; nothing is sent unless they approve.
        let destructive = tool
            .item
            .annotations
            .as_ref()
            .and_then(|hints| hints.destructive_hint)
            == Some(true);
        if let Some(wait) = self.hub().approval_wait(&server, &name, destructive) {
            self.hub()
                .approve_call(&server, &name, &request.name, arguments.as_ref(), wait)
                .await
                .map_err(|not_approved| {
                    let error = ErrorData::invalid_params(
                        not_approved.to_string(),
                        Some(serde_json::json!({"approval": not_approved.kind()})),
                    );
                    refused(&error, arguments.as_ref());
                    error
                })?;
        }
        // Guardrails: the arguments masked and checked before the server gets them.
        let guardrails = self.hub().guardrails(&server);
        let guarded = switchboard_hub::GuardedCall {
            server: &server,
            tool: &tool.upstream,
            exposed: &exposed,
        };
        let arguments = match &guardrails {
            Some(guardrails) => self
                .hub()
                .guard_arguments(guardrails, guarded, arguments)
                .await
                .map_err(|stopped| {
                    let error = ErrorData::invalid_params(
                        stopped.to_string(),
                        Some(serde_json::json!({"guardrail": stopped.kind()})),
                    );
                    refused(&error, None);
                    error
                })?,
            None => arguments,
        };
        let checked_arguments = guardrails.as_ref().map(|_| arguments.clone());
        // Recorded as the server gets it: with the arguments an admin fixed.
        let origin = admission.origin(&request.name, arguments.as_ref());
        let patience = upstream.timeouts().tool_call;
        // The tasks extension: how this call may become a task, if its client can take one.
        let takes_tasks = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        let task_mode = admission::task_mode(
            self.hub(),
            tool,
            &exposed,
            takes_tasks,
            guardrails.is_some(),
        )?;
        let repeatable = self.hub().call_repeatable(&server, &name);
        let work = move |mut call: switchboard_upstream::CallContext| {
            call.repeatable = repeatable;
            call.origin = origin.clone();
            async move {
                upstream
                    .call_tool(&name, arguments, &call)
                    .await
                    .map(ServerResult::CallToolResult)
            }
            .boxed()
        };
        let purpose = format!("tools/call {}", request.name);
        let request_state = request.request_state.take();
        let input_responses = request.input_responses.take();
        let outcome = match task_mode {
            TaskMode::Forbidden => {
                self.exchange(
                    purpose,
                    request_state,
                    input_responses,
                    &context,
                    patience,
                    work,
                )
                .await?
            }
            mode => {
                // A required task is one from the start.
                let deadline = match mode {
                    TaskMode::Required => tokio::time::Instant::now(),
                    _ => tokio::time::Instant::now() + tasks::TASK_AFTER,
                };
                let running = self
                    .exchange_until(
                        purpose,
                        request_state,
                        input_responses,
                        &context,
                        patience,
                        Some(deadline),
                        work,
                    )
                    .await?;
                match running {
                    Ok(outcome) => outcome,
                    Err(exchange) => {
                        let finish: tasks::Finish = Box::new(move |outcome| {
                            match call_result(&catalog, &server, outcome) {
                                Ok(response) => tasks::payload(Ok(ServerResult::from(response))),
                                Err(error) => tasks::payload(Err::<ServerResult, _>(error)),
                            }
                        });
                        let task = self.shared.tasks.start(exchange, finish)?;
                        return Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
                            task,
                        )));
                    }
                }
            }
        };
        match outcome {
            Outcome::InputRequired(required) => Ok(CallToolResponse::InputRequired(required)),
            Outcome::Done(result) => match (call_result(&catalog, &server, result)?, &guardrails) {
                // Guardrails: the result checked and masked before the client gets it.
                (CallToolResponse::Complete(result), Some(guardrails)) => {
                    let arguments = checked_arguments.flatten();
                    Ok(CallToolResponse::Complete(
                        self.hub()
                            .guard_result(guardrails, guarded, arguments.as_ref(), result)
                            .await,
                    ))
                }
                (response, _) => Ok(response),
            },
        }
    }
}

impl ServerHandler for AggregateServer {
    fn get_info(&self) -> ServerInfo {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            .enable_tasks()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(
                "switchboard",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Switchboard: the tools, resources and prompts of every connected MCP server, \
                 named {server}__{name}.",
            )
    }

    /// The exposed tool, so rmcp can check a 2026-07-28 request's `Mcp-Param-*` headers
    /// against its `x-mcp-header` annotations.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let catalog = self.catalog();
        match catalog.tools.get(name) {
            Some(tool) => Some(tool.item.clone()),
            None => deferred::meta_tools(catalog.tools.len())
                .into_iter()
                .find(|tool| tool.name == name),
        }
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        {
            // A session that already holds its place (HTTP+SSE, from its stream's opening)
            // keeps it; a repeated `initialize` does not take a second one.
            let mut slot = lock(&self.slot);
            if slot.is_none() {
                *slot = Some(
                    self.shared
                        .session_slot()
                        .ok_or_else(|| self.shared.sessions_full())?,
                );
            }
        }
        context.peer.set_peer_info(request.clone());
        // The session's user and thread, if its client names them (so that changes of their
        // layers reach it before it sends anything else), and the door it is opened at (an
        // endpoint's, or the workspace's own), which it keeps.
        self.conversation(&context)?;
        self.boundary(&context)?;
        let result = self.negotiate_initialize(&request)?;
        let _ = self.session.negotiated.set(Negotiated {
            version: result.protocol_version.clone(),
            capabilities: request.capabilities.clone(),
            client: switchboard_core::audit::bounded(&request.client_info.name),
        });
        Ok(result)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A Streamable HTTP session names itself on this notification's POST; its calls may
        // take the short path from now on.
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get(http::SESSION_HEADER))
            .and_then(|id| id.to_str().ok());
        if let Some(id) = session {
            let _ = self.session.http_session.set(id.to_owned());
            let mut sessions = lock(&self.shared.direct_sessions);
            sessions.retain(|_, state| state.strong_count() > 0);
            sessions.insert(id.to_owned(), Arc::downgrade(&self.session));
        }
        self.watch_changes(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let catalog = self.catalog();
        let activity = self.activity(&context)?;
        let layers = activity.layers();
        let active = catalog.tools.iter().filter(|tool| activity.is_on(tool));
        let tools = match self.tools_view(&context) {
            ToolsView::All => active.map(|t| t.item.clone()).collect(),
            ToolsView::Deferred => {
                // The meta-tools, then the tools pinned, turned on for this conversation, or in
                // the session's working set (within its bound).
                let working =
                    lock(&self.session.working_set).listed(self.shared.tools.working_set, |name| {
                        catalog
                            .tools
                            .get(name)
                            .filter(|tool| activity.is_on(tool))
                            .map(|tool| deferred::estimated_tokens(&tool.item))
                    });
                let hub = self.hub();
                let listed = active.filter(|tool| {
                    let name = tool.item.name.as_ref();
                    working.contains(name)
                        || hub.is_pinned(&tool.server, &tool.upstream)
                        || layers.turned_on_for_conversation(tool.server.as_str(), name)
                });
                let reachable = catalog
                    .tools
                    .iter()
                    .filter(|tool| {
                        activity
                            .boundary()
                            .includes_tool(tool.server.as_str(), &tool.upstream)
                    })
                    .count();
                deferred::meta_tools(reachable)
                    .into_iter()
                    .chain(listed.map(|tool| tool.item.clone()))
                    .collect()
            }
        };
        Ok(complete(ListToolsResult::with_all_items(tools)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = switchboard_telemetry::server_span("tools/call", Some(&request.name), || {
            incoming_trace(&context)
        });
        let response = in_span(&span, self.call_tool_traced(request, context)).await;
        if let Ok(CallToolResponse::Complete(result)) = &response
            && result.is_error == Some(true)
        {
            switchboard_telemetry::record_error(&span, "tool_error", None);
        }
        response
    }

    /// `tasks/get`: the task as it stands (rmcp checked that the client declared tasks).
    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let task = self.shared.tasks.get(&request.task_id)?;
        Ok(rmcp::model::GetTaskResult::new(task))
    }

    /// `tasks/update`: the client's answers to a task's questions.
    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared
            .tasks
            .update(&request.task_id, request.input_responses)
            .await
    }

    /// `tasks/cancel`: stops a task and its upstream call.
    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.cancel(&request.task_id).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let boundary = self.boundary(&context)?;
        let prompts = self
            .catalog()
            .prompts
            .iter()
            .filter(|p| boundary.includes_server(p.server.as_str()))
            .map(|p| p.item.clone())
            .collect();
        Ok(complete(ListPromptsResult::with_all_items(prompts)))
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let span = switchboard_telemetry::server_span("prompts/get", Some(&request.name), || {
            incoming_trace(&context)
        });
        in_span(&span, async move {
            let catalog = self.catalog();
            let boundary = self.boundary(&context)?;
            let Some(prompt) = catalog
                .prompts
                .get(&request.name)
                .filter(|p| boundary.includes_server(p.server.as_str()))
            else {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt '{}'", request.name),
                    None,
                ));
            };
            let server = prompt.server.clone();
            self.shared.subscribing.settled(&server).await;
            let upstream = self.upstream_soon(&server, None, &context).await?;
            let name = prompt.upstream.clone();
            let arguments = request.arguments.take();
            let patience = upstream.timeouts().request;
            let outcome = self
                .exchange(
                    format!("prompts/get {}", request.name),
                    request.request_state.take(),
                    request.input_responses.take(),
                    &context,
                    patience,
                    move |call| {
                        async move {
                            upstream
                                .get_prompt(&name, arguments, &call)
                                .await
                                .map(ServerResult::GetPromptResult)
                        }
                        .boxed()
                    },
                )
                .await?;
            match outcome {
                Outcome::InputRequired(required) => Ok(GetPromptResponse::InputRequired(required)),
                Outcome::Done(Ok(ServerResult::GetPromptResult(result))) => {
                    Ok(GetPromptResponse::Complete(complete(
                        result.exposed(&prefix_of(&catalog, &server)),
                    )))
                }
                Outcome::Done(Ok(_)) => Err(ErrorData::internal_error(
                    format!("server '{server}' answered prompts/get with another kind of result"),
                    None,
                )),
                Outcome::Done(Err(error)) => Err(upstream_error(&server, error)),
            }
        })
        .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let boundary = self.boundary(&context)?;
        let resources = self
            .catalog()
            .resources
            .iter()
            .filter(|r| boundary.includes_server(r.server.as_str()))
            .map(|r| r.item.clone())
            .collect();
        Ok(complete(ListResourcesResult::with_all_items(resources)))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let boundary = self.boundary(&context)?;
        let templates = self
            .catalog()
            .resource_templates
            .iter()
            .filter(|t| boundary.includes_server(t.server.as_str()))
            .map(|t| t.item.clone())
            .collect();
        Ok(complete(ListResourceTemplatesResult::with_all_items(
            templates,
        )))
    }

    async fn read_resource(
        &self,
        mut request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let span =
            switchboard_telemetry::server_span("resources/read", None, || incoming_trace(&context));
        in_span(&span, async move {
            let catalog = self.catalog();
            let (server, uri) = self.resolve_uri(&catalog, &request.uri, &context)?;
            self.shared.subscribing.settled(&server).await;
            let upstream = self.upstream_soon(&server, None, &context).await?;
            let patience = upstream.timeouts().request;
            let outcome = self
                .exchange(
                    format!("resources/read {}", request.uri),
                    request.request_state.take(),
                    request.input_responses.take(),
                    &context,
                    patience,
                    move |call| {
                        async move {
                            upstream
                                .read_resource(&uri, &call)
                                .await
                                .map(ServerResult::ReadResourceResult)
                        }
                        .boxed()
                    },
                )
                .await?;
            match outcome {
                Outcome::InputRequired(required) => {
                    Ok(ReadResourceResponse::InputRequired(required))
                }
                Outcome::Done(Ok(ServerResult::ReadResourceResult(result))) => {
                    Ok(ReadResourceResponse::Complete(complete(
                        result.exposed(&prefix_of(&catalog, &server)),
                    )))
                }
                Outcome::Done(Ok(_)) => Err(ErrorData::internal_error(
                    format!(
                        "server '{server}' answered resources/read with another kind of result"
                    ),
                    None,
                )),
                Outcome::Done(Err(error)) => Err(upstream_error(&server, error)),
            }
        })
        .await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.resolve_uri(&self.catalog(), &request.uri, &context)?;
        // Claimed first, so a second subscribe to it waits for nothing and counts nothing.
        if !lock(&self.session.subscribed).insert(request.uri.clone()) {
            return Ok(());
        }
        // Runs to its end even when the client cancels the request: a subscription made at
        // the server is then the session's, and ends with it; one that failed is let go.
        let (shared, session) = (self.shared.clone(), self.session.clone());
        tokio::spawn(async move {
            let era = switchboard_hub::ClientEra::Sessions;
            let made = forward_subscription(&shared, &request.uri, true, era).await;
            if made.is_err() {
                lock(&session.subscribed).remove(&request.uri);
            }
            made
        })
        .await
        .unwrap_or_else(|stopped| Err(ErrorData::internal_error(stopped.to_string(), None)))
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if lock(&self.session.subscribed).remove(&request.uri) {
            self.forward_subscription(&request.uri, false, switchboard_hub::ClientEra::Sessions)
                .await?;
        }
        Ok(())
    }

    /// Everything asked for. Runs before rmcp acknowledges the request: the servers of the
    /// resources asked for are marked as being subscribed at, so that the client's next requests
    /// to them wait for [`ServerHandler::listen`] to have subscribed there.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let catalog = self.catalog();
        let uris = requested.resource_subscriptions.clone().unwrap_or_default();
        let servers: Vec<ServerId> = uris
            .iter()
            .filter_map(|uri| catalog.resolve_uri(uri).ok().map(|(server, _)| server))
            .collect();
        if !servers.is_empty() {
            let underway = self.shared.subscribing.begin(servers);
            lock(&self.session.listen_underway).push((uris, underway));
        }
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // Listening from before the first subscription, so no update after it is missed.
        let events = self.hub().subscribe();
        let boundary = self.boundary(context.request_context())?;
        let catalog = self.catalog();
        // Resources of servers outside the request's endpoint are not subscribed to.
        let resources: Vec<String> = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|uri| {
                catalog
                    .resolve_uri(uri)
                    .is_ok_and(|(server, _)| boundary.includes_server(server.as_str()))
            })
            .collect();
        // This request's own (several may be acknowledged at once on one stdio session).
        let underway = {
            let asked = context
                .requested()
                .resource_subscriptions
                .clone()
                .unwrap_or_default();
            let mut underway = lock(&self.session.listen_underway);
            underway
                .iter()
                .position(|(uris, _)| *uris == asked)
                .map(|at| underway.swap_remove(at).1)
        };
        let mut subscribed = Vec::new();
        for uri in resources {
            if self
                .forward_subscription(&uri, true, switchboard_hub::ClientEra::Stateless)
                .await
                .is_ok()
            {
                subscribed.push(uri);
            }
        }
        drop(underway);
        let outcome = self
            .listen_until_cancelled(&context, &boundary, events)
            .await;
        for uri in subscribed {
            let _ = self
                .forward_subscription(&uri, false, switchboard_hub::ClientEra::Stateless)
                .await;
        }
        outcome
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let catalog = self.catalog();
        let mut params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let reference = &mut params["ref"];
        let boundary = self.boundary(&context)?;
        let server = if let Some(name) = reference.get("name").and_then(|n| n.as_str()) {
            let prompt = catalog
                .prompts
                .get(name)
                .filter(|p| boundary.includes_server(p.server.as_str()))
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("unknown prompt '{name}'"), None)
                })?;
            reference["name"] = prompt.upstream.clone().into();
            prompt.server.clone()
        } else if let Some(uri) = reference.get("uri").and_then(|u| u.as_str()) {
            let (server, upstream_uri) = catalog
                .resolve_uri(uri)
                .ok()
                .filter(|(server, _)| boundary.includes_server(server.as_str()))
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("unknown resource '{uri}'"), None)
                })?;
            reference["uri"] = upstream_uri.into();
            server
        } else {
            return Err(ErrorData::invalid_params(
                "completion/complete needs a prompt or resource reference",
                None,
            ));
        };
        let params: CompleteRequestParams = serde_json::from_value(params)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let upstream = self.upstream_soon(&server, None, &context).await?;
        if upstream.capabilities().completions.is_none() {
            return Ok(CompleteResult::default());
        }
        match upstream
            .request(ClientRequest::CompleteRequest(Request::new(params)))
            .await
        {
            Ok(ServerResult::CompleteResult(result)) => Ok(complete(result)),
            Ok(_) => Err(ErrorData::internal_error(
                format!(
                    "server '{server}' answered completion/complete with another kind of result"
                ),
                None,
            )),
            Err(error) => Err(upstream_error(&server, error)),
        }
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *lock(&self.session.log_level) = Some(request.level);
        // Servers filter at the source: pass the level on to every server that logs.
        for server in self.hub().server_ids() {
            let links = self.hub().upstream(&server).ok().into_iter();
            for upstream in links.chain(self.hub().open_sessions_link(&server)) {
                if upstream.capabilities().logging.is_some() {
                    let params = SetLevelRequestParams::new(request.level);
                    let _ = upstream
                        .request(ClientRequest::SetLevelRequest(Request::new(params)))
                        .await;
                }
            }
        }
        Ok(())
    }
}

impl AggregateServer {
    async fn listen_until_cancelled(
        &self,
        context: &SubscriptionContext,
        boundary: &conversation::Boundary,
        mut events: broadcast::Receiver<HubEvent>,
    ) -> Result<(), ErrorData> {
        let mut catalog = self.hub().watch_exposed();
        let mut seen = catalog.borrow_and_update().revisions;
        let sink = context.sink();
        let accepted = context.accepted().clone();
        let endpoint = crate::endpoints::endpoint_of(
            context
                .request_context()
                .extensions
                .get::<axum::http::request::Parts>(),
        );
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = catalog.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let now = catalog.borrow_and_update().revisions;
                    let notes = list_changes(&accepted, seen, now);
                    seen = now;
                    for note in notes {
                        if sink.send(note).await.is_err() {
                            return Ok(());
                        }
                    }
                }
                event = events.recv() => match event {
                    Ok(HubEvent::EndpointChanged { name }) if endpoint == Some(name.as_str()) => {
                        for note in list_changes(&accepted, Revisions::default(), Revisions::EVERY_LIST) {
                            if sink.send(note).await.is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Ok(HubEvent::ResourceUpdated { server, uri }) => {
                        let exposed = prefix_of(&self.catalog(), &server).uri(&uri);
                        if boundary.includes_server(server.as_str())
                            && accepted.resource_subscriptions.as_ref().is_some_and(|uris| uris.contains(&exposed)) {
                            let note = rmcp::model::ServerNotification::ResourceUpdatedNotification(
                                rmcp::model::Notification::new(ResourceUpdatedNotificationParam::new(exposed)),
                            );
                            if sink.send(note).await.is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_own_log_messages_reach_sessions_that_asked_at_their_level() {
        let server = ServerId::new("notes").unwrap();
        let data = serde_json::json!("disk almost full");
        assert!(
            unsolicited_log(None, &server, "error", None, data.clone()).is_none(),
            "a session that never set a level is not flooded with every server's logs"
        );
        assert!(
            unsolicited_log(
                Some(LoggingLevel::Warning),
                &server,
                "info",
                None,
                data.clone()
            )
            .is_none()
        );
        let message = unsolicited_log(
            Some(LoggingLevel::Warning),
            &server,
            "error",
            Some("disk".into()),
            data.clone(),
        )
        .expect("an error is at or above warning");
        assert_eq!(message.logger.as_deref(), Some("notes/disk"));
        assert_eq!(message.data, data);
        assert!(
            unsolicited_log(Some(LoggingLevel::Debug), &server, "loud", None, data).is_none(),
            "an unknown level is dropped, not guessed"
        );
    }
}
