//! The [`Hub`] itself: its servers' slots, its catalog and search; what it
//! does is spread over the crate's modules, one concern each (`impl Hub` blocks).

use crate::{
    ClientEra, ConfigChange, ExposedCatalog, HubError, HubEvent, OAuthOptions, SemanticError,
    SentenceEncoder, ServerStatus, StatusReport, activation, audit, bus, connection, definitions,
    endpoints, era_link, exposed, inspector, last_known, lock, metrics, rate_limits, read,
    semantic, server_auth, shared_schemas, subscriptions, write,
};
use std::collections::HashMap;

use std::sync::{Arc, RwLock};
use std::time::Duration;
use switchboard_core::hashing::FastMap;
use switchboard_core::{ConnectionState, ServerDefinition, ServerId};
use switchboard_desk::{Desk, PeopleResponder};
use switchboard_store::{Store, StoreFingerprint};
use switchboard_upstream::rmcp_model::{Prompt, Resource, ResourceTemplate, Tool};
use switchboard_upstream::{ConnectOptions, Upstream};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// What a server currently offers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerCatalog {
    /// Tools, minus those the user disabled.
    pub tools: Vec<Tool>,
    /// The tools the user disabled, as the server lists them (for the console's toggles).
    pub disabled_tools: Vec<Tool>,
    /// The tools the workspace's member was not granted: never listed, shown or called, kept
    /// only so that a grant given later serves them without reconnecting.
    pub(crate) withheld_tools: Vec<Tool>,
    /// Resources.
    pub resources: Vec<Resource>,
    /// Resource templates.
    pub resource_templates: Vec<ResourceTemplate>,
    /// Prompts.
    pub prompts: Vec<Prompt>,
}

impl ServerCatalog {
    /// Takes the tools the server `listed`, split into those `def` exposes and those it turns
    /// off.
    pub(crate) fn set_tools(
        &mut self,
        listed: impl IntoIterator<Item = Tool>,
        def: &ServerDefinition,
    ) {
        let (granted, withheld): (Vec<Tool>, Vec<Tool>) = listed
            .into_iter()
            .map(shared_schemas::share_schemas)
            .partition(|tool| def.tool_granted(&tool.name));
        self.withheld_tools = withheld;
        (self.tools, self.disabled_tools) = granted
            .into_iter()
            .partition(|tool| def.tool_enabled(&tool.name));
    }

    /// Every tool the server listed, granted or not (what is kept as its last known catalog, and
    /// split again when a definition or a grant changes).
    pub(crate) fn all_tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools
            .iter()
            .chain(&self.disabled_tools)
            .chain(&self.withheld_tools)
    }
}

/// Shared state of one server, written by its task, read by everyone.
pub(crate) struct ServerSlot {
    /// The server's id (never changes for a slot).
    pub(crate) id: ServerId,
    /// Its definition: swapped in place by a change that keeps the connection (names, tool
    /// settings, policies, task modes); a change of the connection starts a new slot.
    pub(crate) definition: RwLock<Arc<ServerDefinition>>,
    pub(crate) status: watch::Sender<ServerStatus>,
    pub(crate) upstream: RwLock<Option<Upstream>>,
    pub(crate) catalog: RwLock<Arc<ServerCatalog>>,
    pub(crate) stop: CancellationToken,
    /// Sign-in progress for the server's task (from its own connections and from sign-ins the
    /// admin API runs).
    pub(crate) auth_events: tokio::sync::mpsc::UnboundedSender<switchboard_oauth::AuthEvent>,
    /// Checks asked for ([`Hub::check_now`], and calls that failed at the transport): a count
    /// the connection task follows, so requests that come while one check runs make one more.
    pub(crate) checks_wanted: watch::Sender<u64>,
    /// The highest count of [`Self::checks_wanted`] the connection task has answered (by a
    /// check, or by reaching a state that answers it: connected, reconnecting, needs sign-in).
    pub(crate) checks_answered: watch::Sender<u64>,
    /// The session link of a server that speaks both eras, for session-era clients
    /// ([`era_link`]).
    pub(crate) sessions_link: Arc<era_link::SessionsLink>,
    /// The order of its catalog's writes to the store ([`last_known`]).
    pub(crate) catalog_writes: Arc<last_known::Writes>,
    /// Its tools whose definitions are not the approved ones ([`definitions`]).
    pub(crate) changed_definitions: RwLock<definitions::Changed>,
}

impl ServerSlot {
    /// Its definition now.
    pub(crate) fn definition(&self) -> Arc<ServerDefinition> {
        read(&self.definition).clone()
    }
}

/// How long a server whose connection changed lets the requests it is running finish before
/// it is started again with the new definition.
pub(crate) const DRAIN_BEFORE_RESTART: Duration = Duration::from_secs(10);

/// Waits (at most `limit`) until `slot`'s connection runs no request.
pub(crate) async fn calls_finished(slot: &ServerSlot, limit: Duration) {
    const LOOK_EVERY: Duration = Duration::from_millis(20);
    let Some(upstream) = read(&slot.upstream).clone() else {
        return;
    };
    let deadline = tokio::time::Instant::now() + limit;
    let running = || upstream.requests_running() + slot.sessions_link.requests_running();
    while running() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// A tool [`Hub::search_tools`] found.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct FoundTool {
    /// Its exposed name, as clients call it.
    pub name: String,
    /// Its server.
    pub server: String,
    /// How well it matched; higher is better (1 for every regex match).
    pub score: f32,
    /// Its description.
    pub description: String,
}

/// The registry of live connections.
pub struct Hub {
    pub(crate) store: Store,
    pub(crate) options: ConnectOptions,
    pub(crate) oauth: OAuthOptions,
    pub(crate) servers: RwLock<FastMap<ServerId, Arc<ServerSlot>>>,
    pub(crate) events: Arc<bus::EventBus>,
    pub(crate) tasks: tokio::sync::Mutex<tokio::task::JoinSet<()>>,
    pub(crate) exposed: watch::Sender<Arc<ExposedCatalog>>,
    /// Held for a whole rebuild of the merged catalog, so each counts its revisions on from
    /// the one before; readers of `exposed` never wait on it.
    pub(crate) exposure_rebuild: std::sync::Mutex<()>,
    pub(crate) exposure_task: std::sync::Once,
    pub(crate) semantic: std::sync::OnceLock<Arc<semantic::SemanticSearch>>,
    pub(crate) activations: activation::Activations,
    pub(crate) endpoints: endpoints::Endpoints,
    /// Held by read-modify-write changes of the configuration ([`configure`]).
    pub(crate) edits: tokio::sync::Mutex<()>,
    /// Held while the running servers are brought in step with the store.
    pub(crate) syncing: tokio::sync::Mutex<()>,
    pub(crate) metrics: Arc<metrics::HubMetrics>,
    pub(crate) rate_limits: rate_limits::RateLimits,
    pub(crate) desk: Desk,
    pub(crate) inspector: inspector::Inspector,
    pub(crate) subscriptions: subscriptions::Subscriptions,
    /// Where the hub's calls, approvals and changes are recorded, once enabled.
    pub(crate) audit: std::sync::OnceLock<Arc<audit::AuditRecorder>>,
    /// The plain connections to guardrail webhooks.
    pub(crate) webhook_connections: switchboard_upstream::HeldConnections,
}

/// Which tools (by server and exposed name) a search may find.
pub type ToolFilter<'a> = dyn Fn(&ServerId, &str) -> bool + Sync + 'a;

/// How [`Hub::search_tools`] ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ranking {
    /// By words (BM25F).
    Lexical,
    /// By meaning and words (sentence-embedding similarity plus a share of BM25F).
    Blended,
    /// By a regular expression.
    Regex,
}

/// What [`Hub::search_tools`] found, and how.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ToolSearch {
    /// How the tools were ranked.
    pub ranking: Ranking,
    /// Why the ranking is lexical although a model is configured (its vectors are still being
    /// computed, or it failed), if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The tools, best first.
    pub tools: Vec<FoundTool>,
}

impl ToolSearch {
    /// Leaves out the tools scoring below `min_score`, in the scale of [`Self::ranking`] (the
    /// blend's similarity-like score, BM25F's unbounded one, or 1 for a regex match).
    pub fn keep_scoring_at_least(&mut self, min_score: f32) {
        self.tools.retain(|tool| tool.score >= min_score);
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        // Ends the task that keeps the merged catalog current: it wakes, finds no hub, returns.
        self.events.mark_exposure_stale();
    }
}

impl Hub {
    /// A hub over `store` that connects with `options` and keeps nothing else: what
    /// [`Hub::builder`] builds when told nothing more.
    pub fn new(store: Store, options: ConnectOptions) -> Arc<Self> {
        Self::builder(store, options).build()
    }

    /// The bare hub [`HubBuilder::build`](crate::HubBuilder::build) starts from: its servers
    /// connect with `options` and sign in with `oauth`.
    pub(crate) fn with_settings(
        store: Store,
        mut options: ConnectOptions,
        oauth: OAuthOptions,
    ) -> Arc<Self> {
        let desk = Desk::new();
        let metrics = Arc::new(metrics::HubMetrics::new(&desk));
        options.call_observer = Some(metrics.clone());
        options.builtins = Some(Arc::new(desk.clone()));
        Arc::new(Self {
            store,
            options,
            oauth,
            servers: RwLock::default(),
            events: Arc::new(bus::EventBus::new()),
            tasks: tokio::sync::Mutex::new(tokio::task::JoinSet::new()),
            exposed: watch::channel(Arc::default()).0,
            exposure_rebuild: std::sync::Mutex::new(()),
            exposure_task: std::sync::Once::new(),
            semantic: std::sync::OnceLock::new(),
            activations: activation::Activations::default(),
            endpoints: endpoints::Endpoints::default(),
            edits: tokio::sync::Mutex::new(()),
            syncing: tokio::sync::Mutex::new(()),
            metrics,
            rate_limits: rate_limits::RateLimits::default(),
            desk,
            inspector: inspector::Inspector::default(),
            subscriptions: subscriptions::Subscriptions::default(),
            audit: std::sync::OnceLock::new(),
            webhook_connections: switchboard_upstream::HeldConnections::default(),
        })
    }

    /// Where questions for people wait: upstream servers' requests for input that no client
    /// can answer (while a console is there to), and the `human` server's.
    pub fn desk(&self) -> &Desk {
        &self.desk
    }

    /// Ranks tool searches by meaning as well as words, with `encoder`. Every exposed tool's
    /// vector is computed (or read from the store) in the background whenever the catalog
    /// changes; searches rank by words alone until the current catalog's are all there. A
    /// second call changes nothing.
    pub fn enable_semantic_search(self: &Arc<Self>, encoder: Arc<SentenceEncoder>) {
        if self
            .semantic
            .set(Arc::new(semantic::SemanticSearch::new(encoder)))
            .is_err()
        {
            return;
        }
        let hub = Arc::downgrade(self);
        let mut exposed = self.exposed.subscribe();
        tokio::spawn(async move {
            loop {
                let Some(current) = hub.upgrade() else { return };
                let catalog = exposed.borrow_and_update().clone();
                if let Err(error) = current.prepare_semantic_search_of(&catalog).await {
                    tracing::warn!("semantic tool search is unavailable: {error}");
                }
                drop(current);
                if exposed.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Waits until every tool of the current catalog has its vector (computing those that have
    /// none); with no model enabled, returns at once.
    pub async fn prepare_semantic_search(&self) -> Result<(), SemanticError> {
        self.prepare_semantic_search_of(&self.exposed()).await
    }

    pub(crate) async fn prepare_semantic_search_of(
        &self,
        catalog: &ExposedCatalog,
    ) -> Result<(), SemanticError> {
        match self.semantic.get() {
            Some(semantic) => semantic.prepare(&self.store, catalog).await,
            None => Ok(()),
        }
    }

    /// The store the hub reads definitions and probe results from.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A listener that shows a sign-in's progress (registering, authorizing, authenticated,
    /// failed) in the state of server `id`, for sign-ins run outside its task (one the admin
    /// API starts, `sign_in.rs`).
    pub(crate) fn sign_in_listener(
        &self,
        id: &ServerId,
    ) -> impl Fn(switchboard_oauth::AuthEvent) + Send + Sync + 'static {
        let sender = crate::read(&self.servers)
            .get(id)
            .map(|slot| slot.auth_events.clone());
        move |event| {
            if let Some(sender) = &sender {
                let _ = sender.send(event);
            }
        }
    }

    /// The HTTP pools the hub's servers are reached through (guarded in a user's workspace).
    pub fn http(&self) -> &switchboard_upstream::HttpClients {
        &self.options.http
    }

    /// The OAuth settings the hub's servers sign in with.
    pub fn oauth(&self) -> &OAuthOptions {
        &self.oauth
    }

    /// The hub's metrics in Prometheus' text format: tool calls, errors and latencies per server
    /// and tool, each server's connection state, reconnects and token refreshes.
    pub fn metrics(&self) -> String {
        self.metrics.render(&self.status())
    }

    /// Subscribes to state changes, catalog changes and server logs.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.events.subscribe()
    }

    /// Subscribes to finished tool calls ([`HubEvent::ToolCalled`]), kept off the main bus so
    /// that calls do not wake every listener of [`Hub::subscribe`].
    pub fn subscribe_calls(&self) -> broadcast::Receiver<HubEvent> {
        self.metrics.calls_announced.subscribe()
    }

    /// Starts a connection task for every enabled server in the store.
    pub async fn start_all(self: &Arc<Self>) -> Result<usize, switchboard_store::StoreError> {
        self.load_activations().await?;
        self.load_endpoints().await?;
        let definitions = self.store.list_servers().await?;
        let mut started = 0;
        for def in definitions.into_iter().filter(|d| d.enabled) {
            self.start(def).await;
            started += 1;
        }
        Ok(started)
    }

    /// Keeps the running servers and the activation layers in step with the store (see
    /// [`StoreFollower`]) whenever `changes` moves: a server added or enabled there (by `switchboard server add` in another
    /// process, or another replica) is started, one whose definition changed is restarted, one
    /// removed or disabled is stopped, and changed layers are read again. A read that fails is
    /// tried again at the follower's next reading, moved or not. Ends when the follower does, or
    /// when the hub is dropped.
    pub fn follow(self: &Arc<Self>, mut changes: watch::Receiver<Option<StoreFingerprint>>) {
        let hub = Arc::downgrade(self);
        // Each reading is boxed: the task waits for changes for as long as the workspace is
        // open, and would otherwise keep room for the largest of them all that time.
        tokio::spawn(async move {
            let (mut seen_servers, mut seen_layers, mut seen_endpoints, mut seen_accepted) =
                (None, None, None, None);
            let mut seen_grants = None;
            loop {
                let now = changes.borrow_and_update().clone();
                if let Some(now) = now {
                    let Some(hub) = hub.upgrade() else { return };
                    // Only the servers this hub's workspace sees: a change in another tenant,
                    // or to another user's own servers, does not make it read them again.
                    let servers = now.servers_seen_by(hub.store.workspace());
                    // Grants bound what a member's workspace reads of the shared servers.
                    if seen_grants.is_some_and(|seen| seen != now.grants) {
                        seen_servers = None;
                        seen_endpoints = None;
                    }
                    seen_grants = Some(now.grants);
                    if seen_servers != Some(servers) {
                        match Box::pin(hub.sync_with_store()).await {
                            Ok(()) => seen_servers = Some(servers),
                            Err(error) => {
                                tracing::warn!(%error, "reading the servers from the store failed")
                            }
                        }
                    }
                    if seen_layers != Some(now.activations) {
                        match Box::pin(hub.load_activations()).await {
                            Ok(()) => seen_layers = Some(now.activations),
                            Err(error) => {
                                tracing::warn!(%error, "reading the activation layers from the store failed")
                            }
                        }
                    }
                    if seen_endpoints != Some(now.endpoints) {
                        match Box::pin(hub.load_endpoints()).await {
                            Ok(()) => seen_endpoints = Some(now.endpoints),
                            Err(error) => {
                                tracing::warn!(%error, "reading the endpoints from the store failed")
                            }
                        }
                    }
                    // A definition accepted elsewhere (another replica, the CLI) is served here
                    // too; the first reading only marks where things stand.
                    if seen_accepted.is_some_and(|seen| seen != now.accepted_definitions) {
                        Box::pin(hub.review_all_definitions()).await;
                    }
                    seen_accepted = Some(now.accepted_definitions);
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Starts, restarts and stops servers so that the running ones are the store's enabled
    /// ones, each with its stored definition, announcing each change as
    /// [`HubEvent::ServerConfigured`]. [`Hub::follow`] does this when the store changes;
    /// a writer that wants the effect at once calls it itself.
    pub async fn sync_with_store(self: &Arc<Self>) -> Result<(), switchboard_store::StoreError> {
        let _one_at_a_time = self.syncing.lock().await;
        let stored: HashMap<ServerId, ServerDefinition> = self
            .store
            .list_servers()
            .await?
            .into_iter()
            .filter(|def| def.enabled)
            .map(|def| (def.id.clone(), def))
            .collect();
        let running: HashMap<ServerId, Arc<ServerSlot>> = read(&self.servers)
            .iter()
            .map(|(id, slot)| (id.clone(), slot.clone()))
            .collect();
        for id in running.keys().filter(|id| !stored.contains_key(*id)) {
            tracing::info!(server = %id, "removed or disabled in the store: stopping it");
            self.stop(id).await;
            // Whoever follows its traffic is told it ended (a restart keeps the tap).
            self.inspector.forget(id);
            self.announce_configured(id, ConfigChange::Stopped);
        }
        for (id, def) in stored {
            match running.get(&id).map(|slot| (slot, slot.definition())) {
                Some((_, current)) if *current == def => {}
                Some((slot, current)) if current.connects_like(&def) => {
                    tracing::info!(server = %id, "changed in the store: applying it to the running connection");
                    let review =
                        current.policies.definition_changes != def.policies.definition_changes;
                    self.apply_in_place(slot, def);
                    if review {
                        let catalog = read(&slot.catalog).clone();
                        self.review_definitions(slot, &catalog).await;
                        self.rebuild_exposed();
                    }
                    self.announce_configured(&id, ConfigChange::Changed);
                }
                Some((slot, _)) => {
                    tracing::info!(server = %id, "its connection changed in the store: restarting it");
                    calls_finished(slot, DRAIN_BEFORE_RESTART).await;
                    self.start(def).await;
                    self.announce_configured(&id, ConfigChange::Restarted);
                }
                None => {
                    tracing::info!(server = %id, "added or enabled in the store: starting it");
                    self.start(def).await;
                    self.announce_configured(&id, ConfigChange::Started);
                }
            }
        }
        Ok(())
    }

    /// Swaps in `def` (which reaches the server as the running one does) without touching the
    /// connection, so calls in flight go on: the catalog is split again by the tools it turns
    /// off, and names, descriptions, policies, task modes and rate limits apply to the next
    /// request.
    pub(crate) fn apply_in_place(&self, slot: &ServerSlot, def: ServerDefinition) {
        let mut catalog = ServerCatalog::clone(&read(&slot.catalog));
        let listed: Vec<Tool> = catalog.all_tools().cloned().collect();
        catalog.set_tools(listed, &def);
        slot.status.send_modify(|status| {
            status.display_name = def.display_name.clone();
            status.prefix = def.exposed_prefix().to_string();
            status.tools = catalog.tools.len();
        });
        *write(&slot.catalog) = Arc::new(catalog);
        if let Some(upstream) = read(&slot.upstream).as_ref() {
            upstream.set_retries(def.policies.retries);
        }
        *write(&slot.definition) = Arc::new(def);
        self.events.send(HubEvent::CatalogChanged {
            server: slot.id.clone(),
        });
    }

    pub(crate) fn announce_configured(&self, server: &ServerId, change: ConfigChange) {
        self.events.send(HubEvent::Configured {
            server: server.clone(),
            change,
        });
    }

    /// Starts (or restarts) the connection task for one server.
    pub async fn start(self: &Arc<Self>, definition: ServerDefinition) {
        self.stop(&definition.id).await;
        self.keep_exposure_current();
        let (auth_events, auth_events_rx) = tokio::sync::mpsc::unbounded_channel();
        let slot = Arc::new(ServerSlot {
            status: watch::channel(ServerStatus::new(&definition)).0,
            id: definition.id.clone(),
            definition: RwLock::new(Arc::new(definition)),
            upstream: RwLock::new(None),
            catalog: RwLock::new(Arc::new(ServerCatalog::default())),
            stop: CancellationToken::new(),
            auth_events,
            checks_wanted: watch::channel(0).0,
            checks_answered: watch::channel(0).0,
            sessions_link: Arc::default(),
            catalog_writes: Arc::default(),
            changed_definitions: RwLock::default(),
        });
        // Its tools are listed (and searchable) from the start: the last catalog it listed,
        // until it lists one now.
        if let Some(catalog) = last_known::load(&self.store, &slot.definition()).await {
            slot.status.send_modify(|status| {
                status.tools = catalog.tools.len();
                status.resources = catalog.resources.len();
                status.resource_templates = catalog.resource_templates.len();
                status.prompts = catalog.prompts.len();
            });
            // Compared with the approved definitions before anything of it is served.
            self.review_definitions(&slot, &catalog).await;
            *write(&slot.catalog) = Arc::new(catalog);
        }
        write(&self.servers).insert(slot.id.clone(), slot.clone());
        self.events.send(HubEvent::CatalogChanged {
            server: slot.id.clone(),
        });
        let auth = match server_auth(&slot.definition(), &self.store, &self.oauth).await {
            Ok(auth) => auth,
            Err(error) => {
                // The connection then meets the server's challenge as a server with no
                // sign-in, and says it needs one.
                tracing::warn!(server = %slot.id, %error, "cannot read where this server's tokens are kept");
                None
            }
        };
        let mut options = self.options.clone();
        options.input_fallback = Some(Arc::new(PeopleResponder::new(
            self.desk.clone(),
            slot.id.as_str(),
            options.input_policy,
        )));
        options.message_tap = Some(self.inspector.tap(&slot.id));
        let task = connection::ConnectionTask::new(
            slot,
            self.store.clone(),
            options,
            auth,
            auth_events_rx,
            self.events.clone(),
            self.metrics.clone(),
        );
        self.tasks.lock().await.spawn(task.run());
    }

    /// Stops one server's task and closes its session.
    pub async fn stop(&self, id: &ServerId) {
        let slot = write(&self.servers).remove(id);
        if let Some(slot) = slot {
            slot.stop.cancel();
            let mut status = slot.status.subscribe();
            let _ = tokio::time::timeout(
                Duration::from_secs(10),
                status.wait_for(|s| s.state == ConnectionState::Disconnected),
            )
            .await;
            self.rebuild_exposed();
        }
    }

    /// The merged catalog of every connected server, as downstream clients see it.
    pub fn exposed(&self) -> Arc<ExposedCatalog> {
        self.exposed.borrow().clone()
    }

    /// The `limit` exposed tools that match `query` best: by BM25F over their names, titles,
    /// descriptions, parameters and servers, blended with their sentence embeddings'
    /// similarity to the query when a model is enabled and ready; or, with `regex`, those whose
    /// name, title or description the regular expression `query` matches. With `keep`, only
    /// tools it keeps (by server and exposed name) are found: a conversation's active ones.
    pub async fn search_tools(
        &self,
        query: &str,
        limit: usize,
        regex: bool,
        keep: Option<&ToolFilter<'_>>,
    ) -> Result<ToolSearch, switchboard_core::search::SearchError> {
        let exposed = self.exposed();
        let index = exposed.search_index();
        // Searches find tools for models: an app-only tool (MCP Apps visibility) is left out,
        // as are those `keep` leaves out; enough hits are asked for that `limit` remain.
        let wanted_tool = |server: &ServerId, tool: &switchboard_upstream::rmcp_model::Tool| {
            exposed::for_models(tool) && keep.is_none_or(|keep| keep(server, tool.name.as_ref()))
        };
        let left_out = exposed
            .tools
            .iter()
            .filter(|tool| !wanted_tool(&tool.server, &tool.item))
            .count();
        let wanted = limit.saturating_add(left_out);
        let (ranking, note, mut hits) = if regex {
            (Ranking::Regex, None, index.search_regex(query, wanted)?)
        } else {
            match self.semantic.get() {
                None => (Ranking::Lexical, None, index.search(query, wanted)),
                Some(semantic) => match semantic.similarities(&exposed, query).await {
                    Ok(Some(similarity)) => (
                        Ranking::Blended,
                        None,
                        index.search_blended(query, &similarity, wanted),
                    ),
                    Ok(None) => (
                        Ranking::Lexical,
                        Some(match semantic.failure() {
                            Some(failure) => format!("the semantic stage failed: {failure}"),
                            None => format!(
                                "the tools' vectors ({}) are still being computed",
                                semantic.model()
                            ),
                        }),
                        index.search(query, wanted),
                    ),
                    Err(error) => (
                        Ranking::Lexical,
                        Some(error.to_string()),
                        index.search(query, wanted),
                    ),
                },
            }
        };
        hits.retain(|hit| {
            exposed
                .tools
                .get(&hit.name)
                .is_some_and(|tool| wanted_tool(&tool.server, &tool.item))
        });
        hits.truncate(limit);
        let tools = hits
            .into_iter()
            .map(|hit| {
                let description = exposed
                    .tools
                    .get(&hit.name)
                    .and_then(|tool| tool.item.description.as_deref())
                    .unwrap_or_default()
                    .to_owned();
                FoundTool {
                    name: hit.name,
                    server: hit.server,
                    score: hit.score,
                    description,
                }
            })
            .collect();
        Ok(ToolSearch {
            ranking,
            note,
            tools,
        })
    }

    /// Watches the merged catalog; it changes when a server is added or removed, or lists
    /// something new.
    pub fn watch_exposed(&self) -> watch::Receiver<Arc<ExposedCatalog>> {
        self.exposed.subscribe()
    }

    /// Starts, once, the task that rebuilds the merged catalog from the bus. It holds only a weak
    /// reference, so it ends with the hub.
    pub(crate) fn keep_exposure_current(self: &Arc<Self>) {
        self.exposure_task.call_once(|| {
            let hub = Arc::downgrade(self);
            let bus = self.events.clone();
            tokio::spawn(async move {
                loop {
                    bus.exposure_went_stale().await;
                    // Woken by the hub's drop too, when this fails.
                    let Some(hub) = hub.upgrade() else { return };
                    // Tens of milliseconds of work for tens of thousands of tools: off the
                    // threads that relay calls.
                    if tokio::task::spawn_blocking(move || hub.rebuild_exposed())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        });
    }

    /// Rebuilds the merged catalog from every running server's catalog, and notes each
    /// server's collisions in its status. A server that is not connected right now (reconnecting,
    /// waiting for a sign-in) keeps its last known catalog in it: its tools stay listed and
    /// searchable, and a call of one is answered with the server's state and the reason (see
    /// [`Hub::upstream`]) instead of "unknown tool". The hub does this by itself whenever a
    /// server changes; call it to be sure a snapshot taken right now is current.
    pub fn rebuild_exposed(&self) {
        let _one_at_a_time = lock(&self.exposure_rebuild);
        let mut slots: Vec<_> = read(&self.servers).values().cloned().collect();
        slots.sort_by(|a, b| a.id.cmp(&b.id));
        let contributions: Vec<_> = slots
            .iter()
            .map(|slot| exposed::Contribution {
                server: slot.id.clone(),
                prefix: slot.definition().exposed_prefix(),
                catalog: read(&slot.catalog).clone(),
                description: slot.definition().description.clone(),
                overrides: slot.definition().policies.overrides.clone(),
                held: slot.held_tools(),
                search_notes: slot.definition().policies.search_notes.clone(),
            })
            .collect();
        let catalog = ExposedCatalog::build(&contributions);
        for slot in &slots {
            let mine: Vec<_> = catalog
                .collisions()
                .filter(|c| c.servers.contains(&slot.id))
                .cloned()
                .collect();
            slot.status.send_if_modified(|status| {
                let changed = status.collisions != mine;
                status.collisions = mine;
                changed
            });
        }
        let current = self.exposed();
        // Said once, when it first applies.
        for advice in catalog.advice() {
            if !current.advice().contains(advice) {
                let printable: String = advice
                    .chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect();
                tracing::warn!("{printable}");
            }
        }
        self.exposed
            .send_replace(Arc::new(catalog.succeeding(&current)));
    }

    /// Stops every task and waits for the sessions to close.
    pub async fn shutdown(&self) {
        let ids: Vec<ServerId> = read(&self.servers).keys().cloned().collect();
        for id in &ids {
            if let Some(slot) = read(&self.servers).get(id) {
                slot.stop.cancel();
            }
        }
        let mut tasks = self.tasks.lock().await;
        let _ = tokio::time::timeout(Duration::from_secs(15), async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        tasks.abort_all();
        write(&self.servers).clear();
        // Calls that ended as their servers stopped are in the log before the process ends.
        self.audit_flushed().await;
    }

    /// Status of every server in the hub, ordered by id.
    pub fn status(&self) -> Vec<ServerStatus> {
        let mut all: Vec<_> = read(&self.servers)
            .values()
            .map(|slot| slot.status.borrow().clone())
            .collect();
        all.sort_by(|a, b| a.server.cmp(&b.server));
        all
    }

    /// Every server's status with the merged names' collisions, renamings and advice.
    pub fn status_report(&self) -> StatusReport {
        let exposed = self.exposed();
        StatusReport {
            version: env!("CARGO_PKG_VERSION"),
            servers: self.status(),
            collisions: exposed.collisions().cloned().collect(),
            renamed: exposed.renamed_tools().collect(),
            advice: exposed.advice().to_vec(),
        }
    }

    /// Waits until every server has left the connecting states (connected, failed or needing
    /// sign-in), or `limit` passes. `on_change` sees each status as it settles.
    pub async fn wait_settled(&self, limit: Duration, mut on_change: impl FnMut(&ServerStatus)) {
        let slots: Vec<_> = read(&self.servers).values().cloned().collect();
        let waits = slots.into_iter().map(|slot| async move {
            let mut status = slot.status.subscribe();
            let settled = status.wait_for(|s| s.is_settled()).await.map(|s| s.clone());
            settled.ok()
        });
        let _ = tokio::time::timeout(limit, async {
            let mut pending: futures::stream::FuturesUnordered<_> = waits.collect();
            use futures::StreamExt;
            while let Some(done) = pending.next().await {
                if let Some(status) = done {
                    on_change(&status);
                }
            }
        })
        .await;
    }

    /// Checks one server now and returns its status once the check is done (or `limit` has
    /// passed): a connected server is asked whether it still answers (and reconnected when it
    /// does not), one waiting to reconnect tries at once, one that needs a sign-in stays so.
    pub async fn check_now(
        &self,
        id: &ServerId,
        limit: Duration,
    ) -> Result<ServerStatus, HubError> {
        let slot = self.slot(id)?;
        let mut wanted = 0;
        slot.checks_wanted.send_modify(|count| {
            *count += 1;
            wanted = *count;
        });
        let mut answered = slot.checks_answered.subscribe();
        let _ = tokio::time::timeout(limit, answered.wait_for(|done| *done >= wanted)).await;
        let status = slot.status.borrow().clone();
        Ok(status)
    }

    /// [`Hub::upstream_for_tool`] (or [`Hub::upstream`], without a tool) for a request that
    /// would rather wait a moment than fail: a server that is reconnecting (or connecting) is
    /// asked to try now, and the request waits for that attempt, at most `limit`. A server
    /// that restarted is then used again as soon as it answers, not after the backoff its
    /// failed attempts built up.
    pub async fn upstream_soon(
        &self,
        id: &ServerId,
        tool: Option<&str>,
        limit: Duration,
    ) -> Result<Upstream, HubError> {
        let now = || match tool {
            Some(tool) => self.upstream_for_tool(id, tool),
            None => self.upstream(id),
        };
        let waiting_for_use = || {
            self.slot(id)
                .is_ok_and(|slot| slot.status.borrow().connects_on_first_use)
        };
        match now() {
            Err(HubError::NotConnected {
                state: ConnectionState::Reconnecting | ConnectionState::Connecting,
                ..
            }) => {
                self.check_now(id, limit).await?;
                now()
            }
            Err(HubError::NotConnected {
                state: ConnectionState::Disconnected,
                ..
            }) if waiting_for_use() => {
                self.check_now(id, limit).await?;
                now()
            }
            other => other,
        }
    }

    /// [`Hub::upstream_soon`] for a request of a client of `era`: a session-era client's request
    /// for a server that speaks both eras goes over the server's session link, opened now if
    /// need be (within `limit`), so the client gets the session face it would get directly
    /// ([`era_link`]). Where there is no such link, the main one serves, bridging eras.
    pub async fn upstream_for_client(
        &self,
        id: &ServerId,
        tool: Option<&str>,
        era: ClientEra,
        limit: Duration,
    ) -> Result<Upstream, HubError> {
        let main = self.upstream_soon(id, tool, limit).await?;
        if era == ClientEra::Stateless {
            return Ok(main);
        }
        let slot = self.slot(id)?;
        if !era_link::may_have_sessions(&slot.definition(), &main) {
            return Ok(main);
        }
        Ok(slot.sessions_link.get(limit).await.unwrap_or(main))
    }

    /// The session link of a server that speaks both eras, when one is open now (nothing is
    /// opened or waited for; see [`Hub::upstream_for_client`]).
    pub fn open_sessions_link(&self, id: &ServerId) -> Option<Upstream> {
        self.server_view(id).ok()?.open_sessions_link()
    }

    /// The handle for subscribing to (and unsubscribing from) `id`'s resources on behalf of a
    /// client of `era`: the link that declares resource subscriptions, where the server has two
    /// and only one does, so a subscription and its end always go over the same link.
    pub async fn upstream_for_subscriptions(
        &self,
        id: &ServerId,
        era: ClientEra,
        limit: Duration,
    ) -> Result<Upstream, HubError> {
        let main = self.upstream_soon(id, None, limit).await?;
        let subscribes = |upstream: &Upstream| {
            upstream
                .capabilities()
                .resources
                .is_some_and(|resources| resources.subscribe == Some(true))
        };
        if subscribes(&main) {
            return Ok(main);
        }
        let slot = self.slot(id)?;
        if !era_link::may_have_sessions(&slot.definition(), &main) {
            return Ok(main);
        }
        let link = match era {
            ClientEra::Sessions => slot.sessions_link.get(limit).await,
            ClientEra::Stateless => slot.sessions_link.open(),
        };
        Ok(link.filter(subscribes).unwrap_or(main))
    }

    /// A request handle for a connected server.
    pub fn upstream(&self, id: &ServerId) -> Result<Upstream, HubError> {
        self.server_view(id)?.upstream()
    }

    /// A request handle for calling `tool` on `id`, refusing tools the user disabled.
    pub fn upstream_for_tool(&self, id: &ServerId, tool: &str) -> Result<Upstream, HubError> {
        self.server_view(id)?.upstream_for_tool(tool)
    }

    /// Whether `caller` may call the server's upstream tool `tool` (its allowed callers).
    pub fn check_caller(
        &self,
        id: &ServerId,
        tool: &str,
        caller: &switchboard_core::Caller,
    ) -> Result<(), HubError> {
        match self.server_view(id) {
            Ok(server) => server.check_caller(tool, caller),
            Err(_) => Ok(()),
        }
    }

    /// What the server is for, as its user described it (empty if unknown).
    pub fn description(&self, id: &ServerId) -> String {
        self.slot(id)
            .map(|slot| slot.definition().description.clone())
            .unwrap_or_default()
    }

    /// The server's per-tool policies (none for a server the hub does not know).
    pub fn policies(&self, id: &ServerId) -> switchboard_core::ToolPolicies {
        self.slot(id)
            .map(|slot| slot.definition().policies.clone())
            .unwrap_or_default()
    }

    /// `arguments` of a call of the server's upstream tool `tool` as the server gets them: the
    /// values an admin fixed (its override's `fixed_arguments`) set over what the client sent.
    pub fn with_fixed_arguments(
        &self,
        id: &ServerId,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        match self.slot(id) {
            Ok(slot) => match slot.definition().policies.overrides.get(tool) {
                Some(over) => over.fix(arguments),
                None => arguments,
            },
            Err(_) => arguments,
        }
    }

    /// Whether a call of the server's upstream tool `tool` may be sent again after a transient
    /// failure ([`ServerView::repeatable`], with the tool's annotations as the server lists
    /// them).
    pub fn call_repeatable(&self, id: &ServerId, tool: &str) -> bool {
        let Ok(server) = self.server_view(id) else {
            return false;
        };
        let annotations = read(&server.slot().catalog)
            .tools
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.annotations.clone());
        server.repeatable(tool, annotations.as_ref())
    }

    /// Whether the server's upstream tool `tool` is pinned: the deferred view lists it.
    pub fn is_pinned(&self, id: &ServerId, tool: &str) -> bool {
        self.slot(id)
            .is_ok_and(|slot| slot.definition().policies.pinned.contains(tool))
    }

    /// The server's current catalog (empty until connected).
    pub fn catalog(&self, id: &ServerId) -> Result<Arc<ServerCatalog>, HubError> {
        Ok(read(&self.slot(id)?.catalog).clone())
    }

    /// The ids of every server in the hub, ordered.
    pub fn server_ids(&self) -> Vec<ServerId> {
        let mut ids: Vec<_> = read(&self.servers).keys().cloned().collect();
        ids.sort();
        ids
    }

    pub(crate) fn slot(&self, id: &ServerId) -> Result<Arc<ServerSlot>, HubError> {
        read(&self.servers)
            .get(id)
            .cloned()
            .ok_or_else(|| HubError::UnknownServer(id.clone()))
    }
}

/// Watches the store for changes made by other processes (the CLI, other replicas), once per
/// process however many hubs follow it: it reads the store's fingerprint every `every`, and at
/// once when the store announces a write (PostgreSQL's `LISTEN`), and publishes every reading.
/// Each following hub compares it with what it last read and reads what concerns it when it
/// moved, or when its last read failed.
#[derive(Clone)]
pub struct StoreFollower {
    pub(crate) fingerprint: watch::Sender<Option<StoreFingerprint>>,
}

impl StoreFollower {
    /// Starts following `store` until `stop`.
    pub fn start(store: Store, every: Duration, stop: CancellationToken) -> Self {
        let (fingerprint, _) = watch::channel(None);
        let follower = Self {
            fingerprint: fingerprint.clone(),
        };
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut watch = None;
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    changed = next_change(&mut watch) => {
                        if let Err(error) = changed {
                            tracing::warn!(%error, "listening for the store's changes failed; polling until it works again");
                            watch = None;
                        }
                    }
                    () = stop.cancelled() => return,
                }
                if watch.is_none() {
                    match store.watch_changes().await {
                        Ok(Some(opened)) => watch = Some(opened),
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(%error, "cannot listen for the store's changes")
                        }
                    }
                }
                match store.fingerprint().await {
                    // Every reading wakes the hubs, moved or not: one whose last read failed
                    // tries again; the others compare and go back to sleep.
                    Ok(now) => {
                        fingerprint.send_replace(Some(now));
                    }
                    Err(error) => tracing::warn!(%error, "reading the store failed"),
                }
            }
        });
        follower
    }

    /// The store's fingerprint, at each reading (`None` until the first).
    pub fn subscribe(&self) -> watch::Receiver<Option<StoreFingerprint>> {
        self.fingerprint.subscribe()
    }
}

/// The store's next announced change; never, when there is no watch.
pub(crate) async fn next_change(
    watch: &mut Option<switchboard_store::ChangeWatch>,
) -> Result<(), switchboard_store::StoreError> {
    match watch {
        Some(watch) => watch.changed().await.map(drop),
        None => std::future::pending().await,
    }
}
