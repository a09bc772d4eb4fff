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
mod changes;
pub(crate) mod conversation;
mod deferred;
mod downstream;
mod exchange;
pub mod http;
pub mod legacy_sse;
mod meta_tools;
mod server;
mod short_path;
pub mod stdio;
mod subscribing;
mod tasks;
mod tool_call;
mod traces;

use std::collections::HashSet;

use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_core::hashing::FastMap;
use switchboard_core::sync::lock;

use rmcp::model::{
    CallToolResult, CompleteResult, ErrorData, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel,
};
use switchboard_core::ServerId;
use switchboard_core::exposure::Prefix;
use switchboard_hub::{ExposedCatalog, Hub};

pub use crate::wire::RATE_LIMITED;
use crate::wire::{OnTheWire, upstream_json_rpc};
pub use deferred::{
    ToolsOptions, ToolsView, WorkingSet, WorkingSetLimits, estimated_tokens, found_result,
};
use exchange::Parked;
pub use server::AggregateServer;
use tool_call::call_result;
use traces::{in_span, incoming_trace, trace_error};

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
    /// The Streamable HTTP sessions whose calls the short path (`short_path`) may take, by id.
    /// Entries of ended sessions no longer upgrade, and are dropped as new ones are added.
    short_path_sessions: Mutex<FastMap<String, std::sync::Weak<SessionState>>>,
    /// Calls the short path is relaying for sessions, by session and request id, so that the
    /// client's `notifications/cancelled` reaches them.
    /// Each entry's number tells it from a later call under the same id.
    short_path_calls: Mutex<FastMap<SessionRequest, (u64, tokio_util::sync::CancellationToken)>>,
    /// Requests the short path put to session clients on a call's stream, by session and
    /// request id, waiting for the client's answer.
    short_path_questions: Mutex<FastMap<SessionRequest, short_path::Answer>>,
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
            short_path_sessions: Mutex::default(),
            short_path_calls: Mutex::default(),
            short_path_questions: Mutex::default(),
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
        let state = lock(&self.short_path_sessions)
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

/// A request in a session: the session's id (shared with its state) and the request's.
type SessionRequest = (Arc<str>, rmcp::model::RequestId);

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
    short_path_streams: Mutex<short_path::SessionStreams>,
    /// Its Streamable HTTP session id, once its client said `initialized` on it.
    http_session: std::sync::OnceLock<Arc<str>>,
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
    /// How the audit log names its client ([`SessionState::audit_client`]), and for whom.
    audit_client: Mutex<Option<(Arc<str>, Arc<str>)>>,
}

impl SessionState {
    /// How the audit log names this session's client on a request from `verified` (who the
    /// access checks found sent it): the name its `clientInfo` gave, then `verified`. Made once
    /// and kept while the session's requests come from the same verified client.
    fn audit_client(&self, verified: Arc<str>) -> Arc<str> {
        let Some(negotiated) = self.negotiated.get() else {
            return verified;
        };
        let mut kept = lock(&self.audit_client);
        if let Some((from, named)) = &*kept
            && *from == verified
        {
            return named.clone();
        }
        let named: Arc<str> = format!("{} ({verified})", negotiated.client).into();
        *kept = Some((verified, named.clone()));
        named
    }

    /// Whether calling `tool` would add it to this session's working set (a deferred session's
    /// first call of it, which the full path records and announces).
    fn adds_to_working_set(&self, shared: &Shared, tool: &str) -> bool {
        let view = self.tools_view.get().copied().unwrap_or(shared.tools.view);
        view == ToolsView::Deferred && !lock(&self.working_set).was_called(tool)
    }
}

/// How long a request for a server that is reconnecting waits for the attempt it asks for.
const WAIT_FOR_RECONNECT: std::time::Duration = std::time::Duration::from_secs(10);

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

/// The prefix a server's names carry in `catalog` (its id if it is not in the catalog).
fn prefix_of(catalog: &ExposedCatalog, server: &ServerId) -> Prefix {
    catalog
        .prefixes()
        .iter()
        .find(|(id, _)| id == server)
        .map(|(_, prefix)| prefix.clone())
        .unwrap_or_else(|| Prefix::of_server(server))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit log names a session's client by its `clientInfo` and by who sent each request:
    /// the name is made once for one verified client, and never kept for another.
    #[test]
    fn a_sessions_audit_name_is_kept_only_for_the_client_it_was_made_for() {
        let session = SessionState::default();
        let ana: Arc<str> = Arc::from("user acme/ana");
        assert_eq!(
            &*session.audit_client(ana.clone()),
            "user acme/ana",
            "before `initialize`, who the access checks verified"
        );
        let _ = session.negotiated.set(Negotiated {
            version: rmcp::model::ProtocolVersion::LATEST,
            capabilities: rmcp::model::ClientCapabilities::default(),
            client: "claude-code".to_owned(),
        });
        let first = session.audit_client(ana.clone());
        assert_eq!(&*first, "claude-code (user acme/ana)");
        assert!(
            Arc::ptr_eq(&first, &session.audit_client(Arc::from("user acme/ana"))),
            "made once for the same client"
        );
        assert_eq!(
            &*session.audit_client(Arc::from("address 127.0.0.1")),
            "claude-code (address 127.0.0.1)",
            "another sender is named as itself"
        );
        assert_eq!(&*session.audit_client(ana), "claude-code (user acme/ana)");
    }
}
