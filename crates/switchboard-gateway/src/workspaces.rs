//! Many users on one daemon: every request says who sends it, and is served by that user's own
//! workspace.
//!
//! With [`Access::Users`](crate::Access::Users), each request must carry a credential
//! (`Authorization: Bearer ...`, or the `bearer.` WebSocket subprotocol): an operator key
//! (`SWITCHBOARD_API_KEYS`), which reaches the local workspace (the default tenant, as the
//! operator sees it), or a user's API key (`sbk_...`, made with `switchboard user key`), which
//! reaches that user's workspace. A workspace is a hub of its own, over the store as that user
//! sees it (their tenant's shared servers and their own), with its own MCP sessions, event
//! stream, questions and activation layers, behind a router of its own: one user's sessions,
//! events, servers and tokens are not in another's workspace to be found. A workspace starts at
//! its user's first request and stops once unused for [`Users::idle`].
//!
//! With an identity provider configured ([`Users::with_identity_provider`]), a JWT it signed for
//! this daemon's audience is a credential too: its claims name the user and tenant, and the user
//! is recorded in the store at their first request.
//!
//! A request in a user's workspace speaks for that user: it may name no other user
//! (`X-Switchboard-User`), and names its own when it names none, so the user's layer applies.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_core::sync::lock;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchboard_core::{Principal, Role, TenantId, UserId, Workspace};
use switchboard_hub::{
    EndpointKeyOwner, HubBuilder, RecordUserError, StoreFingerprint, UserDirectory,
};
use switchboard_oauth::{IdentityProvider, IdpError};

use crate::mcp::conversation::USER_HEADER;
use crate::{Refusal, RouterParts, api_error, digest, is_public_path, origins, presented_key};

/// Who may use a multi-user daemon, and where their requests go.
pub struct Users {
    operator_keys: Vec<[u8; 32]>,
    directory: UserDirectory,
    /// How a workspace's hub is built: the daemon's settings (its connection options, its
    /// search model, the store's follower), over the store as the workspace's user sees it.
    hubs: HubBuilder,
    idle: Duration,
    changes: Option<tokio::sync::watch::Receiver<Option<StoreFingerprint>>>,
    provider: Option<(Arc<IdentityProvider>, TokenClaims)>,
}

/// How a token from the identity provider names its user: which claim is the user id, where
/// the tenant comes from, and which role value makes a tenant admin.
#[derive(Debug, Clone)]
pub struct TokenClaims {
    /// The claim holding the user id (`sub` unless configured).
    pub user: String,
    /// The tenant every token's user belongs to, or the claim naming it.
    pub tenant: TenantFrom,
    /// A value that, in the token's `roles` or `groups` claim, makes its user a tenant admin.
    pub admin_role: Option<String>,
    /// The claim listing the user's groups (`groups` unless configured): those the tenant has
    /// are theirs for the request, beside the groups the store lists them in.
    pub groups: Option<String>,
}

/// The most groups taken from one token (a claim listing more is cut there).
const MAX_CLAIMED_GROUPS: usize = 256;

/// Where a token's tenant comes from.
#[derive(Debug, Clone)]
pub enum TenantFrom {
    /// Every user of the provider is in this tenant.
    Fixed(TenantId),
    /// This claim names the tenant (which must have been added).
    Claim(String),
}

impl TokenClaims {
    /// The user `claims` name, or why they name none.
    fn principal(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Principal, String> {
        let text = |name: &str| claims.get(name).and_then(|v| v.as_str()).map(str::to_owned);
        let user =
            text(&self.user).ok_or_else(|| format!("the token has no '{}' claim", self.user))?;
        // An address the provider has not verified names nobody in particular.
        if self.user == "email" && !is_true(claims.get("email_verified")) {
            return Err("the token's email is not verified (email_verified)".into());
        }
        let user = UserId::new(user).map_err(|e| e.to_string())?;
        let tenant = match &self.tenant {
            TenantFrom::Fixed(tenant) => tenant.clone(),
            TenantFrom::Claim(name) => {
                let named = text(name).ok_or_else(|| format!("the token has no '{name}' claim"))?;
                TenantId::new(named).map_err(|e| e.to_string())?
            }
        };
        let admin = self.admin_role.as_ref().is_some_and(|wanted| {
            ["roles", "groups"]
                .iter()
                .any(|claim| match claims.get(*claim) {
                    Some(serde_json::Value::Array(values)) => {
                        values.iter().any(|v| v.as_str() == Some(wanted.as_str()))
                    }
                    Some(serde_json::Value::String(value)) => {
                        value.split(' ').any(|v| v == wanted.as_str())
                    }
                    _ => false,
                })
        });
        let groups = self
            .groups
            .as_ref()
            .map(|name| claimed_groups(claims.get(name)))
            .unwrap_or_default();
        Ok(Principal {
            tenant,
            user,
            role: if admin { Role::Admin } else { Role::Member },
            groups,
        })
    }
}

/// The group names a claim lists (an array of strings, or one string of names separated by
/// spaces); names that are not group names are left out.
fn claimed_groups(
    claim: Option<&serde_json::Value>,
) -> std::collections::BTreeSet<switchboard_core::GroupName> {
    let names: Vec<&str> = match claim {
        Some(serde_json::Value::Array(values)) => values
            .iter()
            .filter_map(serde_json::Value::as_str)
            .collect(),
        Some(serde_json::Value::String(value)) => value.split(' ').collect(),
        _ => Vec::new(),
    };
    names
        .into_iter()
        .filter_map(|name| switchboard_core::GroupName::new(name).ok())
        .take(MAX_CLAIMED_GROUPS)
        .collect()
}

impl Users {
    /// Users with API keys in `directory` (the store's users), and operators holding
    /// `operator_keys`; `hubs` builds a user's workspace (for the workspace, then
    /// [started](HubBuilder::start)).
    pub fn new<'a>(
        directory: impl Into<UserDirectory>,
        operator_keys: impl IntoIterator<Item = &'a str>,
        hubs: HubBuilder,
    ) -> Self {
        Self {
            operator_keys: operator_keys.into_iter().map(digest).collect(),
            directory: directory.into(),
            hubs,
            idle: Duration::from_secs(15 * 60),
            changes: None,
            provider: None,
        }
    }

    /// Also takes the bearer tokens `provider` issues (JWTs naming this daemon as their
    /// audience), naming their users as `claims` says; a user it vouches for is added to the
    /// store at their first request.
    pub fn with_identity_provider(
        mut self,
        provider: Arc<IdentityProvider>,
        claims: TokenClaims,
    ) -> Self {
        self.provider = Some((provider, claims));
        self
    }

    /// Forgets the API keys it looked up whenever the store's users or keys change (`changes`:
    /// the store's follower), so a revoked key stops working at once.
    pub fn with_changes(
        mut self,
        changes: tokio::sync::watch::Receiver<Option<StoreFingerprint>>,
    ) -> Self {
        self.changes = Some(changes);
        self
    }

    /// Stops a workspace after `idle` without a request and with no session open.
    pub fn with_idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }
}

impl Users {
    /// The user `credential` names (their API key, or a token from the identity provider), if
    /// it names one.
    pub(crate) async fn principal_of(&self, credential: &str) -> Option<Principal> {
        if let Some((provider, claims)) = &self.provider
            && looks_like_jwt(credential)
        {
            let verified = provider.verify(credential).await.ok()?;
            return claims.principal(&verified).ok();
        }
        self.directory
            .principal_for_api_key(credential)
            .await
            .ok()
            .flatten()
    }
}

/// Who sent a request.
enum Caller {
    Operator,
    User(Principal),
    /// An endpoint's key: the endpoint's doors only, as the user who issued it (the operator,
    /// in the local workspace, when `None`).
    EndpointKey(EndpointKeyOwner),
}

/// How long a looked-up API key is believed before it is looked up again (a key revoked in
/// another process stops working within this; one revoked through this daemon's store, or
/// announced by PostgreSQL, at once).
const KEY_CACHE_TTL: Duration = Duration::from_secs(10);
/// The most API keys remembered; beyond it the memory is cleared.
const KEY_CACHE_MAX: usize = 10_000;
/// How long a key looked up before waits for the store before its last answer is used.
const STALE_KEY_PATIENCE: Duration = Duration::from_secs(2);
/// After the store failed a lookup, how long keys looked up before skip it altogether.
const STORE_DOWN_FOR: Duration = Duration::from_secs(5);

/// Who an API key (by digest) named when it was looked up, if anyone, and when.
type LookedUp = (Option<Principal>, Instant);

/// Whom an endpoint key (by digest) spoke for when it was looked up, if anyone, and when.
type EndpointKeyLookedUp = (Option<EndpointKeyOwner>, Instant);

/// A user's workspace, open.
struct OpenWorkspace {
    workspace: crate::Workspace,
    /// Ends the workspace's long-lived streams (events, MCP sessions' streams) when it closes.
    stop: tokio_util::sync::CancellationToken,
    /// Milliseconds since the dispatcher started, at the last request.
    last_used: AtomicU64,
}

/// A user's place in the map of workspaces: the principal it opens for, and the workspace once
/// open.
struct Opening {
    principal: Principal,
    workspace: tokio::sync::OnceCell<Arc<OpenWorkspace>>,
}

/// Sends each request to its caller's workspace.
pub(crate) struct Dispatcher {
    users: Arc<Users>,
    /// Every workspace's routes, built once.
    routes: Router,
    local: crate::Workspace,
    parts: RouterParts,
    /// Each user's workspace, open or opening. The map is locked only to find or add a slot:
    /// one user's workspace taking seconds to open (its servers connecting) holds up nobody
    /// else's requests.
    open: Mutex<HashMap<(TenantId, UserId), Arc<Opening>>>,
    keys: Mutex<HashMap<[u8; 32], LookedUp>>,
    /// Endpoint keys looked up, by digest, and when (forgotten when endpoints or users change).
    endpoint_keys: Mutex<HashMap<[u8; 32], EndpointKeyLookedUp>>,
    /// Users the identity provider vouched for who are in the store already.
    recorded: Mutex<std::collections::HashSet<(TenantId, UserId)>>,
    /// When a key lookup last found the store not answering (cleared when it answers).
    store_down_since: Mutex<Option<Instant>>,
    started: Instant,
}

impl Dispatcher {
    pub(crate) fn new(
        users: Arc<Users>,
        local_shared: Arc<crate::mcp::Shared>,
        parts: RouterParts,
    ) -> Arc<Self> {
        let local = crate::Workspace::new(local_shared, None, &parts);
        let dispatcher = Arc::new(Self {
            users,
            routes: crate::routes(),
            local,
            parts,
            open: Mutex::default(),
            keys: Mutex::default(),
            endpoint_keys: Mutex::default(),
            recorded: Mutex::default(),
            store_down_since: Mutex::default(),
            started: Instant::now(),
        });
        tokio::spawn(dispatcher.clone().close_idle_workspaces());
        if let Some(mut changes) = dispatcher.users.changes.clone() {
            let dispatcher = Arc::downgrade(&dispatcher);
            tokio::spawn(async move {
                let read = |fingerprint: Option<&StoreFingerprint>| {
                    fingerprint.map(|f| (f.principals, f.endpoints))
                };
                let mut seen = read(changes.borrow_and_update().as_ref());
                while changes.changed().await.is_ok() {
                    let now = read(changes.borrow_and_update().as_ref());
                    let Some(dispatcher) = dispatcher.upgrade() else {
                        return;
                    };
                    let principals = |read: Option<((i64, i64), (i64, i64))>| read.map(|r| r.0);
                    if now != seen {
                        // An endpoint key revoked, or its issuer removed, stops working at once.
                        dispatcher.forget_endpoint_keys();
                    }
                    if principals(now) != principals(seen) {
                        dispatcher.forget_keys();
                        dispatcher.close_workspaces_of_removed_users().await;
                    }
                    seen = now;
                }
            });
        }
        dispatcher
    }

    /// The router that takes every request.
    pub(crate) fn front_door(self: &Arc<Self>) -> Router {
        Router::new().fallback(dispatch).with_state(self.clone())
    }

    /// Whether `request` is new work a draining daemon refuses (as its workspaces' routes do:
    /// every POST).
    fn refuses_new_requests(&self, request: &Request) -> bool {
        request.method() == axum::http::Method::POST && self.local.shared().is_draining()
    }

    /// Whether a key lookup failed lately (see [`STORE_DOWN_FOR`]).
    fn store_known_down(&self) -> bool {
        lock(&self.store_down_since).is_some_and(|since| since.elapsed() < STORE_DOWN_FOR)
    }

    fn store_failed(&self) {
        let mut since = lock(&self.store_down_since);
        if since.is_none_or(|at| at.elapsed() >= STORE_DOWN_FOR) {
            *since = Some(Instant::now());
        }
    }

    fn store_answered(&self) {
        *lock(&self.store_down_since) = None;
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Who presents the credential in `headers`.
    async fn identify(&self, headers: &axum::http::HeaderMap) -> Result<Caller, Response> {
        let Some(key) = presented_key(headers) else {
            return Err(Refusal::NoApiKey.into_response());
        };
        let digest = digest(&key);
        if self.users.operator_keys.contains(&digest) {
            return Ok(Caller::Operator);
        }
        if UserDirectory::is_endpoint_key(&key) {
            return self.identify_endpoint_key(&key, digest).await;
        }
        if let Some((provider, claims)) = &self.users.provider
            && looks_like_jwt(&key)
        {
            return self.identify_token(provider, claims, &key).await;
        }
        let (cached, stale) = {
            let keys = lock(&self.keys);
            match keys.get(&digest) {
                Some((principal, at)) if at.elapsed() < KEY_CACHE_TTL => {
                    (Some(principal.clone()), None)
                }
                Some((principal, _)) => (None, Some(principal.clone())),
                None => (None, None),
            }
        };
        let principal = match cached {
            Some(principal) => principal,
            None => {
                // While the store does not answer, a key looked up before keeps its answer (a
                // revocation cannot be read then either): its users' workspaces go on serving
                // from memory. Such a key waits for the store briefly, and not at all while it
                // is known to be down.
                let lookup = self.users.directory.principal_for_api_key(&key);
                let looked_up = match &stale {
                    Some(_) if self.store_known_down() => None,
                    Some(_) => tokio::time::timeout(STALE_KEY_PATIENCE, lookup).await.ok(),
                    None => Some(lookup.await),
                };
                let found = match (looked_up, stale) {
                    (Some(Ok(found)), _) => {
                        self.store_answered();
                        found
                    }
                    (failed, Some(stale)) => {
                        if let Some(Err(error)) = failed {
                            tracing::warn!(%error, "cannot look up an API key; using its last answer");
                        }
                        self.store_failed();
                        return stale
                            .map(Caller::User)
                            .ok_or_else(|| Refusal::NoApiKey.into_response());
                    }
                    (failed, None) => {
                        if let Some(Err(error)) = failed {
                            tracing::warn!(%error, "cannot look up an API key");
                        }
                        self.store_failed();
                        return Err(Refusal::Unavailable.into_response());
                    }
                };
                let mut keys = lock(&self.keys);
                if keys.len() >= KEY_CACHE_MAX {
                    keys.clear();
                }
                keys.insert(digest, (found.clone(), Instant::now()));
                found
            }
        };
        principal
            .map(Caller::User)
            .ok_or_else(|| Refusal::NoApiKey.into_response())
    }

    /// Whom an endpoint key speaks for, looked up in the store (and remembered for
    /// [`KEY_CACHE_TTL`], or until the endpoints or users change).
    async fn identify_endpoint_key(&self, key: &str, digest: [u8; 32]) -> Result<Caller, Response> {
        let remembered = lock(&self.endpoint_keys)
            .get(&digest)
            .filter(|(_, at)| at.elapsed() < KEY_CACHE_TTL)
            .map(|(owner, _)| owner.clone());
        let owner = match remembered {
            Some(owner) => owner,
            None => {
                let owner =
                    self.users
                        .directory
                        .endpoint_key_owner(key)
                        .await
                        .map_err(|error| {
                            tracing::warn!(%error, "cannot look up an endpoint key");
                            Refusal::Unavailable.into_response()
                        })?;
                let mut keys = lock(&self.endpoint_keys);
                if keys.len() >= KEY_CACHE_MAX {
                    keys.clear();
                }
                keys.insert(digest, (owner.clone(), Instant::now()));
                owner
            }
        };
        owner
            .map(Caller::EndpointKey)
            .ok_or_else(|| Refusal::NoApiKey.into_response())
    }

    fn forget_endpoint_keys(&self) {
        lock(&self.endpoint_keys).clear();
    }

    /// The user a token from the identity provider names, added to the store at their first
    /// request.
    async fn identify_token(
        &self,
        provider: &IdentityProvider,
        claims: &TokenClaims,
        token: &str,
    ) -> Result<Caller, Response> {
        let verified = match provider.verify(token).await {
            Ok(verified) => verified,
            Err(error @ IdpError::Rejected(_)) => {
                return Err(invalid_token(&error.to_string()));
            }
            Err(error @ IdpError::Unavailable(_)) => {
                tracing::warn!(%error, "cannot check a token");
                return Err(Refusal::Unavailable.into_response());
            }
        };
        let principal = claims
            .principal(&verified)
            .map_err(|reason| invalid_token(&reason))?;
        let key = (principal.tenant.clone(), principal.user.clone());
        let known = lock(&self.recorded).contains(&key);
        if !known {
            match self
                .users
                .directory
                .record_user(&principal.tenant, &principal.user, principal.role)
                .await
            {
                Ok(()) => {
                    lock(&self.recorded).insert(key);
                }
                Err(RecordUserError::Refused(why)) => {
                    return Err(api_error(StatusCode::FORBIDDEN, why));
                }
                Err(RecordUserError::Unavailable(error)) => {
                    tracing::warn!(%error, "cannot record a user");
                    return Err(Refusal::Unavailable.into_response());
                }
            }
        }
        Ok(Caller::User(principal))
    }

    /// Stops believing every looked-up key (the users or keys changed): each is looked up again
    /// at its next request. The last answers are kept for a store that does not answer then.
    fn forget_keys(&self) {
        let expired = Instant::now().checked_sub(KEY_CACHE_TTL);
        let mut keys = lock(&self.keys);
        match expired {
            Some(expired) => keys.values_mut().for_each(|(_, at)| *at = expired),
            None => keys.clear(),
        }
        drop(keys);
        lock(&self.recorded).clear();
    }

    /// The open workspace of `principal`, opening it if needed (its other requests meanwhile
    /// wait for the same opening).
    async fn workspace(&self, principal: &Principal) -> Result<Arc<OpenWorkspace>, String> {
        let key = (principal.tenant.clone(), principal.user.clone());
        let slot = {
            let mut open = lock(&self.open);
            match open.get(&key) {
                Some(slot) if slot.principal == *principal => slot.clone(),
                stale => {
                    // New, or the user's role changed: their workspace opens (again) with it.
                    if let Some(workspace) = stale.and_then(|slot| slot.workspace.get().cloned()) {
                        tokio::spawn(close(workspace));
                    }
                    let slot = Arc::new(Opening {
                        principal: principal.clone(),
                        workspace: tokio::sync::OnceCell::new(),
                    });
                    open.insert(key, slot.clone());
                    slot
                }
            }
        };
        slot.workspace
            .get_or_try_init(|| self.open_workspace(principal))
            .await
            .cloned()
    }

    /// Starts `principal`'s workspace.
    async fn open_workspace(&self, principal: &Principal) -> Result<Arc<OpenWorkspace>, String> {
        let hub = self
            .users
            .hubs
            .for_workspace(Workspace::User(principal.clone()))
            .start()
            .await
            .map_err(|error| error.to_string())?;
        let shared = crate::mcp::Shared::with_options(
            hub,
            self.local.shared().session_limits(),
            self.parts.tools,
        );
        let mut parts = self.parts.clone();
        parts.stop = self.parts.stop.child_token();
        let workspace = Arc::new(OpenWorkspace {
            workspace: crate::Workspace::new(shared, None, &parts),
            stop: parts.stop,
            last_used: AtomicU64::new(self.now_ms()),
        });
        tracing::info!(user = %principal, "opened a workspace");
        Ok(workspace)
    }

    /// Closes the open workspaces whose user was removed, or whose tenant was: their event
    /// streams and sessions end and their servers stop at once, rather than running on for a
    /// user who is gone. (A user whose role changed gets a fresh workspace at their next
    /// request.)
    async fn close_workspaces_of_removed_users(&self) {
        let open: Vec<(TenantId, UserId)> = lock(&self.open).keys().cloned().collect();
        for (tenant, user) in open {
            match self.users.directory.user_exists(&tenant, &user).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, "cannot check whether a user still exists");
                    continue;
                }
            }
            let slot = lock(&self.open).remove(&(tenant.clone(), user.clone()));
            if let Some(workspace) = slot.and_then(|slot| slot.workspace.get().cloned()) {
                tracing::info!(user = %format!("{tenant}/{user}"), "closing the workspace of a removed user");
                close(workspace).await;
            }
        }
    }

    /// Closes, every minute, the workspaces unused for [`Users::idle`] that have no session.
    async fn close_idle_workspaces(self: Arc<Self>) {
        let mut ticks = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = self.parts.stop.cancelled() => return,
            }
            let idle_ms = u64::try_from(self.users.idle.as_millis()).unwrap_or(u64::MAX);
            let now = self.now_ms();
            let closing: Vec<(Principal, Arc<OpenWorkspace>)> = {
                let mut open = lock(&self.open);
                let idle: Vec<_> = open
                    .iter()
                    .filter(|(_, slot)| {
                        slot.workspace.get().is_some_and(|w| {
                            now.saturating_sub(w.last_used.load(Ordering::Relaxed)) >= idle_ms
                                && w.workspace.shared().open_sessions() == 0
                        })
                    })
                    .map(|(key, _)| key.clone())
                    .collect();
                idle.iter()
                    .filter_map(|key| open.remove(key))
                    .filter_map(|slot| {
                        let workspace = slot.workspace.get().cloned()?;
                        Some((slot.principal.clone(), workspace))
                    })
                    .collect()
            };
            for (principal, workspace) in closing {
                tracing::info!(user = %principal, "closing an idle workspace");
                close(workspace).await;
            }
        }
    }

    /// Drains every open workspace (see [`crate::mcp::Shared::drain`]) and stops their hubs;
    /// returns how many requests had not finished.
    ///
    /// New requests are refused from the moment the local workspace drains (see
    /// [`dispatch_judged`]); the workspaces stay in the map until they are drained, so a request
    /// that was let in just before finds its workspace draining (and refusing) rather than a
    /// new one opened behind the drain's back.
    pub(crate) async fn drain(&self, deadline: Duration) -> usize {
        let open: Vec<Arc<OpenWorkspace>> = lock(&self.open)
            .values()
            .filter_map(|slot| slot.workspace.get().cloned())
            .collect();
        let drains = open.iter().map(|w| w.workspace.shared().drain(deadline));
        let unfinished = futures::future::join_all(drains).await.into_iter().sum();
        lock(&self.open).clear();
        futures::future::join_all(open.into_iter().map(close)).await;
        unfinished
    }
}

async fn close(workspace: Arc<OpenWorkspace>) {
    workspace.stop.cancel();
    workspace.workspace.shared().hub().shutdown().await;
}

/// Every request of a multi-user daemon.
async fn dispatch(State(dispatcher): State<Arc<Dispatcher>>, request: Request) -> Response {
    let sender = match dispatcher.parts.origins.judge(&request) {
        Ok(sender) => sender,
        Err(refusal) => return refusal.into_response(),
    };
    let origins::Sender::CorsApp(origin) = sender else {
        return dispatch_judged(dispatcher, request).await;
    };
    if request.method() == axum::http::Method::OPTIONS {
        return origins::preflight(origin);
    }
    let mut response = dispatch_judged(dispatcher, request).await;
    origins::grant(&mut response, origin);
    response
}

/// A request whose origin may use the daemon, to its caller's workspace.
async fn dispatch_judged(dispatcher: Arc<Dispatcher>, mut request: Request) -> Response {
    if is_public_path(request.uri().path()) {
        return dispatcher.local.serve(&dispatcher.routes, request).await;
    }
    // A draining daemon takes nothing new, whoever asks (the local workspace's routes refuse
    // the operator's requests the same way); streams and reads already open finish.
    if dispatcher.refuses_new_requests(&request) {
        return crate::shutting_down();
    }
    let caller = match dispatcher.identify(request.headers()).await {
        Err(refused) => return refused,
        Ok(caller) => caller,
    };
    let principal = match caller {
        Caller::Operator => {
            if let Some(key) = presented_key(request.headers()) {
                let holder = crate::mcp::conversation::key_holder(&key);
                request.extensions_mut().insert(holder);
            }
            return dispatcher.local.serve(&dispatcher.routes, request).await;
        }
        Caller::EndpointKey(owner) => {
            if let Some(refusal) = crate::endpoints::beyond_its_endpoint(&owner.endpoint, &request)
            {
                return refusal;
            }
            let extensions = request.extensions_mut();
            extensions.insert(crate::mcp::conversation::VerifiedClient(format!(
                "endpoint {} key {}",
                owner.endpoint, owner.key_id
            )));
            extensions.insert(crate::endpoints::EndpointKeyHolder(owner.endpoint));
            match owner.user {
                None => {
                    // The key was checked here; the local workspace's routes need not see it.
                    request.headers_mut().remove(header::AUTHORIZATION);
                    return dispatcher.local.serve(&dispatcher.routes, request).await;
                }
                Some(principal) => principal,
            }
        }
        Caller::User(principal) => {
            request
                .extensions_mut()
                .insert(crate::mcp::conversation::VerifiedClient(format!(
                    "user {principal}"
                )));
            principal
        }
    };
    let headers = request.headers_mut();
    match headers.get(USER_HEADER).map(HeaderValue::as_bytes) {
        Some(named) if named != principal.user.as_str().as_bytes() => {
            return api_error(
                StatusCode::FORBIDDEN,
                format!(
                    "this credential is user '{}''s; a request cannot speak for another user",
                    principal.user
                ),
            );
        }
        _ => {}
    }
    if let Ok(user) = HeaderValue::from_str(principal.user.as_str()) {
        headers.insert(USER_HEADER, user);
    }
    // The key was checked here; the workspace's routes need not see it.
    headers.remove(header::AUTHORIZATION);
    match dispatcher.workspace(&principal).await {
        // The drain may have begun while the workspace opened.
        Ok(_) if dispatcher.refuses_new_requests(&request) => crate::shutting_down(),
        Ok(workspace) => {
            workspace
                .last_used
                .store(dispatcher.now_ms(), Ordering::Relaxed);
            workspace.workspace.serve(&dispatcher.routes, request).await
        }
        Err(error) => crate::api_error::unavailable(&format!(
            "cannot open your workspace: {error}; try again shortly"
        )),
    }
}

/// Whether a claim is `true` (a boolean, or the string some providers send).
fn is_true(claim: Option<&serde_json::Value>) -> bool {
    matches!(claim, Some(serde_json::Value::Bool(true)))
        || claim.and_then(|v| v.as_str()) == Some("true")
}

/// Whether a credential has a JWT's shape (three dot-separated parts), rather than an API
/// key's.
fn looks_like_jwt(credential: &str) -> bool {
    credential.split('.').count() == 3 && !UserDirectory::is_api_key(credential)
}

/// 401 for a token that was not taken, saying why (RFC 6750's `invalid_token`).
fn invalid_token(reason: &str) -> Response {
    let quoted = reason.replace(['"', '\\'], "'");
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_str(&format!(
                "Bearer realm=\"switchboard\", error=\"invalid_token\", error_description=\"{quoted}\""
            ))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"switchboard\", error=\"invalid_token\"")),
        )],
        axum::Json(serde_json::json!({"error": format!("the token is not accepted: {reason}")})),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn an_email_names_its_user_only_when_the_provider_verified_it() {
        let by_email = TokenClaims {
            user: "email".into(),
            tenant: TenantFrom::Fixed(TenantId::new("acme").unwrap()),
            admin_role: None,
            groups: Some("groups".into()),
        };
        for unverified in [
            serde_json::json!({"email": "ana@acme.test"}),
            serde_json::json!({"email": "ana@acme.test", "email_verified": false}),
            serde_json::json!({"email": "ana@acme.test", "email_verified": "no"}),
        ] {
            let refused = by_email.principal(&claims(unverified.clone()));
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|why| why.contains("not verified")),
                "{unverified}: {refused:?}"
            );
        }
        for verified in [
            serde_json::json!({"email": "ana@acme.test", "email_verified": true}),
            serde_json::json!({"email": "ana@acme.test", "email_verified": "true"}),
        ] {
            let principal = by_email.principal(&claims(verified)).unwrap();
            assert_eq!(principal.user.as_str(), "ana@acme.test");
        }
        let by_subject = TokenClaims {
            user: "sub".into(),
            ..by_email
        };
        assert!(
            by_subject
                .principal(&claims(serde_json::json!({"sub": "ana"})))
                .is_ok()
        );
    }

    #[test]
    fn a_tokens_groups_claim_names_its_users_groups() {
        let claims_of = |groups: Option<&str>| TokenClaims {
            user: "sub".into(),
            tenant: TenantFrom::Fixed(TenantId::new("acme").unwrap()),
            admin_role: None,
            groups: groups.map(str::to_owned),
        };
        let names = |principal: Principal| -> Vec<String> {
            principal.groups.iter().map(ToString::to_string).collect()
        };
        let listed = claims(serde_json::json!({"sub": "ana", "groups": ["eng", "a b", 7, "ops"]}));
        assert_eq!(
            names(claims_of(Some("groups")).principal(&listed).unwrap()),
            ["eng", "ops"]
        );
        let spaced = claims(serde_json::json!({"sub": "ana", "teams": "eng ops"}));
        assert_eq!(
            names(claims_of(Some("teams")).principal(&spaced).unwrap()),
            ["eng", "ops"]
        );
        assert!(names(claims_of(None).principal(&listed).unwrap()).is_empty());
        let many: Vec<String> = (0..1000).map(|i| format!("g{i}")).collect();
        let flood = claims(serde_json::json!({"sub": "ana", "groups": many}));
        assert_eq!(
            claims_of(Some("groups"))
                .principal(&flood)
                .unwrap()
                .groups
                .len(),
            MAX_CLAIMED_GROUPS
        );
    }
}
