//! Switchboard's front doors, on axum.
//!
//! The aggregated MCP server ([`mcp`]) at `/mcp` (HTTP+SSE clients: `/sse`; and over stdio), `GET /healthz` (liveness),
//! `GET /api/status` (every server's status and the merged catalog's name collisions, as JSON),
//! and sign-in through the daemon ([`oauth`]: `POST /api/servers/{id}/login`,
//! `GET /oauth/callback`, the client ID metadata document), the rest of the admin API
//! ([`servers`], [`events`], `/metrics`; docs/api.md) and the web console at `/` ([`ui`]).
//!
//! Every request a browser sends for a page is judged by [`origins`] first: only the daemon's
//! own pages, and the browser apps of origins the operator names (`--cors-origin`), may use it.
//! Then it passes an [`Access`] guard. On a loopback listener that is a DNS-rebinding guard: its
//! `Host` must name a loopback address; anything else is refused with 403. A listener on any
//! other address requires an API key (`Authorization: Bearer <key>`, else 401) on everything but
//! `/healthz` and the OAuth redirect and metadata routes.

mod activation;
mod apps;
mod audit;
mod commands;
mod connection_threads;
pub use connection_threads::ConnectionThreads;
mod endpoints;
mod events;
mod export;
mod grants;
pub mod listener;
pub mod mcp;
mod oauth;
pub mod origins;
mod questions;
mod readiness;
mod servers;
mod ui;
mod workspaces;

pub use oauth::callback_page;
pub use origins::{BrowserOrigins, WebOrigin};
pub use workspaces::{TenantFrom, TokenClaims, Users, WorkspaceHubs};

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use switchboard_hub::Hub;

/// Errors from serving.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// The server failed while running.
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

/// What every route shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) hub: Arc<Hub>,
    /// This daemon's OAuth redirect URI.
    pub(crate) callback_url: String,
    pub(crate) logins: Arc<oauth::PendingLogins>,
    /// Cancelled when the daemon shuts down: long-lived streams end.
    pub(crate) stop: tokio_util::sync::CancellationToken,
    /// MCP Apps views the console asked for.
    pub(crate) views: Arc<apps::Views>,
    /// A multi-user daemon's users, whose credentials prove who confirms a sign-in.
    pub(crate) users: Option<Arc<Users>>,
    /// The permissions MCP Apps views may have (`serve --app-permission`).
    pub(crate) app_permissions: Arc<Vec<String>>,
}

/// Who may use the front doors.
#[derive(Clone)]
pub enum Access {
    /// Only this machine: a loopback `Host` required. This is the DNS-rebinding defence: a page
    /// on another site that resolves its own name to 127.0.0.1 still sends its own `Host`.
    /// Browser apps of a `--cors-origin` present one of `keys` (SHA-256 digests).
    Loopback {
        /// The operator's API keys, for browser apps.
        keys: Arc<Vec<[u8; 32]>>,
    },
    /// Anyone holding one of these API keys (kept as SHA-256 digests).
    ApiKeys(Arc<Vec<[u8; 32]>>),
    /// Many users, each in a workspace of their own (see [`Users`]).
    Users(Arc<Users>),
}

impl Access {
    /// Whether only loopback `Host`s are served.
    pub(crate) fn is_loopback(&self) -> bool {
        matches!(self, Self::Loopback { .. })
    }

    /// Only this machine, without keys (so without browser apps of other origins).
    pub fn loopback() -> Self {
        Self::loopback_with_keys([])
    }

    /// Only this machine; browser apps of a `--cors-origin` present one of `keys`.
    pub fn loopback_with_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> Self {
        Self::Loopback {
            keys: Arc::new(keys.into_iter().map(digest).collect()),
        }
    }

    /// Access for holders of `keys`.
    pub fn api_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> Self {
        Self::ApiKeys(Arc::new(keys.into_iter().map(digest).collect()))
    }

    /// Who holds the key `request` presents, when it is one of these keys (the rate limit's
    /// client then).
    fn key_holder(&self, request: &Request) -> Option<mcp::conversation::VerifiedClient> {
        let keys = match self {
            Self::Loopback { keys } | Self::ApiKeys(keys) => keys,
            Self::Users(_) => return None,
        };
        let key = presented_key(request.headers())?;
        keys.contains(&digest(&key))
            .then(|| mcp::conversation::key_holder(&key))
    }

    /// Why `request`, sent by `sender`, may not pass, if it may not.
    fn refusal(&self, request: &Request, sender: &origins::Sender) -> Option<Refusal> {
        let headers = request.headers();
        let holds_one_of = |keys: &[[u8; 32]]| {
            presented_key(headers)
                .map(|key| digest(&key))
                .is_some_and(|key| keys.contains(&key))
        };
        match self {
            Self::Loopback { keys } => {
                if !request_is_local(headers) {
                    return Some(Refusal::NotLoopback);
                }
                let browser_app = matches!(sender, origins::Sender::CorsApp(_));
                (browser_app && !holds_one_of(keys)).then_some(Refusal::NoApiKey)
            }
            Self::ApiKeys(keys) => {
                if is_public_path(request.uri().path()) {
                    return None;
                }
                (!holds_one_of(keys)).then_some(Refusal::NoApiKey)
            }
            // Checked by the dispatcher before any workspace's routes.
            Self::Users(_) => None,
        }
    }
}

/// Why a request was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// A loopback listener got a non-loopback `Host`.
    NotLoopback,
    /// No valid API key.
    NoApiKey,
    /// The credential could not be checked now (the store did not answer).
    Unavailable,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Self::NotLoopback => {
                (StatusCode::FORBIDDEN, "forbidden: not a loopback Host\n").into_response()
            }
            Self::NoApiKey => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer realm=\"switchboard\"")],
                "an API key is required: Authorization: Bearer <key>\n",
            )
                .into_response(),
            // JSON-RPC's shape, so MCP clients show the reason (an admin API client reads
            // `error.message`).
            Self::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, "5")],
                axum::Json(serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": null,
                    "error": {
                        "code": -32000,
                        "message": "credentials cannot be checked right now (the store does not answer); try again shortly",
                    },
                })),
            )
                .into_response(),
        }
    }
}

/// Comparing digests keeps the comparison's timing independent of how much of a key matched.
fn digest(key: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).into()
}

/// Routes anyone may reach: liveness, the OAuth redirect and metadata document, which
/// authorization servers and browsers fetch without an API key (`state` protects the redirect),
/// and the console's files (which hold no data; the page asks for a key).
fn is_public_path(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | oauth::CALLBACK_PATH | "/oauth/client-metadata.json"
    ) || ui::PATHS.contains(&path)
        || path.starts_with(apps::VIEW_PATH)
}

/// The router with every front door; `addr` is where it is served (for the OAuth redirect URI).
/// Cancelling `stop` ends every MCP session and stream.
pub fn router(
    shared: Arc<mcp::Shared>,
    addr: SocketAddr,
    access: Access,
    stop: tokio_util::sync::CancellationToken,
) -> Router {
    let parts = RouterParts::new(
        callback_url(addr),
        stop,
        shared.tools_options(),
        BrowserOrigins::default(),
    );
    let workspace = Workspace::new(shared, Some(access), &parts);
    routes().layer(axum::Extension(workspace))
}

/// What every workspace's router shares: the daemon's OAuth redirect URI, when it stops, and
/// the sign-ins and MCP Apps views that come back on routes without a credential (the OAuth
/// redirect, a view's frame), wherever they were started.
#[derive(Clone)]
pub(crate) struct RouterParts {
    callback_url: String,
    pub(crate) stop: tokio_util::sync::CancellationToken,
    pub(crate) tools: mcp::ToolsOptions,
    logins: Arc<oauth::PendingLogins>,
    views: Arc<apps::Views>,
    /// The pages that may use the daemon.
    pub(crate) origins: Arc<BrowserOrigins>,
    /// A multi-user daemon's users.
    pub(crate) users: Option<Arc<Users>>,
    /// The permissions MCP Apps views may have.
    pub(crate) app_permissions: Arc<Vec<String>>,
}

impl RouterParts {
    fn new(
        callback_url: String,
        stop: tokio_util::sync::CancellationToken,
        tools: mcp::ToolsOptions,
        origins: BrowserOrigins,
    ) -> Self {
        Self {
            callback_url,
            stop,
            tools,
            logins: Arc::default(),
            views: Arc::default(),
            origins: Arc::new(origins),
            users: None,
            app_permissions: Arc::default(),
        }
    }
}

/// One workspace as its routes see it: its hub and front doors, and who may reach it. Every
/// route finds the workspace it serves in its request's extensions, put there by [`router`]'s
/// single workspace or by the dispatcher of `serve --users`, so that one route table
/// ([`routes`]) serves every workspace: one built per workspace was about 100 KB of each open
/// workspace's memory.
#[derive(Clone)]
pub(crate) struct Workspace(Arc<WorkspaceParts>);

struct WorkspaceParts {
    app: AppState,
    door: mcp::http::FrontDoor,
    /// rmcp's Streamable HTTP server (the full path), with the workspace's sessions.
    mcp: mcp::http::McpService,
    legacy_sse: mcp::legacy_sse::LegacySse,
    readiness: readiness::Readiness,
    shared: Arc<mcp::Shared>,
    /// `None`: the dispatcher checked the caller already.
    access: Option<Access>,
    origins: Arc<BrowserOrigins>,
}

impl Workspace {
    /// The workspace over `shared`, behind `access` (`None`: the dispatcher checks callers).
    pub(crate) fn new(
        shared: Arc<mcp::Shared>,
        access: Option<Access>,
        parts: &RouterParts,
    ) -> Self {
        let stop = parts.stop.clone();
        let idle = shared.session_limits().idle;
        let door = mcp::http::FrontDoor::new(shared.clone(), stop.clone(), idle);
        let mcp = mcp::http::service(&door, stop.clone());
        Self(Arc::new(WorkspaceParts {
            app: AppState {
                hub: shared.hub().clone(),
                callback_url: parts.callback_url.clone(),
                logins: parts.logins.clone(),
                stop: stop.clone(),
                views: parts.views.clone(),
                users: parts.users.clone(),
                app_permissions: parts.app_permissions.clone(),
            },
            door,
            mcp,
            legacy_sse: mcp::legacy_sse::LegacySse::new(shared.clone(), stop),
            readiness: readiness::Readiness::new(shared.clone()),
            shared,
            access,
            origins: parts.origins.clone(),
        }))
    }

    /// Answers `request` with this workspace's routes (`routes`, built once).
    pub(crate) async fn serve(&self, routes: &Router, mut request: Request) -> Response {
        request.extensions_mut().insert(self.clone());
        match tower::ServiceExt::oneshot(routes.clone(), request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    pub(crate) fn shared(&self) -> &Arc<mcp::Shared> {
        &self.0.shared
    }

    pub(crate) fn door(&self) -> &mcp::http::FrontDoor {
        &self.0.door
    }

    pub(crate) fn legacy_sse(&self) -> &mcp::legacy_sse::LegacySse {
        &self.0.legacy_sse
    }
}

/// A request that reached a route without a workspace: a bug in how the router was built, never
/// the client's doing.
#[derive(Debug)]
pub(crate) struct NoWorkspace;

impl IntoResponse for NoWorkspace {
    fn into_response(self) -> Response {
        tracing::error!("a request reached a route without its workspace");
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Workspace {
    type Rejection = NoWorkspace;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Workspace>()
            .cloned()
            .ok_or(NoWorkspace)
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for AppState {
    type Rejection = NoWorkspace;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Workspace::from_request_parts(parts, state)
            .await?
            .0
            .app
            .clone())
    }
}

/// rmcp's server for the workspace the request is for.
async fn full_path(workspace: Workspace, request: Request) -> Response {
    match tower::ServiceExt::oneshot(workspace.0.mcp.clone(), request).await {
        Ok(response) => response.into_response(),
        Err(never) => match never {},
    }
}

/// Every route of a workspace, built once: each request carries its [`Workspace`].
pub(crate) fn routes() -> Router {
    // An endpoint's door is the same service: each request reads its endpoint from its path.
    let endpoint_mcp = Router::new()
        .route(endpoints::MCP_PATH, axum::routing::any(full_path))
        .layer(middleware::from_fn(endpoints::require_endpoint));
    Router::new()
        .merge(
            Router::new()
                .route(mcp::http::MCP_PATH, axum::routing::any(full_path))
                .merge(endpoint_mcp)
                // The door: sessions checked and noted, every POST's body bounded and parsed,
                // and the branch of the two call paths: the short path takes a plain
                // `tools/call`, rmcp's server (the full path, above) everything else.
                .layer(middleware::from_fn(mcp::http::door)),
        )
        .merge(mcp::legacy_sse::routes())
        .route("/", get(ui::index))
        .route("/ui/app.js", get(ui::script))
        .route("/ui/app.css", get(ui::style))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|workspace: Workspace| async move { workspace.0.readiness.answer().await }),
        )
        .route("/api/status", get(status))
        .route("/api/me", get(servers::me))
        .route("/metrics", get(metrics))
        .route("/api/events", get(events::sse))
        .route("/api/events/ws", get(events::websocket))
        .route("/api/apps/views", post(apps::create))
        .route("/apps/view/{id}", get(apps::serve))
        .route("/api/questions", get(questions::list))
        .route("/api/questions/{id}", post(questions::answer_one))
        .route(
            "/api/activation/app",
            get(activation::get_app)
                .patch(activation::patch_app)
                .delete(activation::delete_app),
        )
        .route(
            "/api/activation/{kind}/{id}",
            get(activation::get_named)
                .patch(activation::patch_named)
                .delete(activation::delete_named),
        )
        .route("/api/tools", get(export_tools))
        .route("/api/tools/search", get(search_tools))
        .route("/api/servers", get(servers::list).post(servers::create))
        .route("/api/servers/import", post(servers::import))
        .route("/api/commands", get(commands::list))
        .route("/api/audit", get(audit::list))
        .route("/api/audit/export", get(audit::export))
        .route("/api/groups", get(grants::list_groups))
        .route(
            "/api/groups/{name}",
            axum::routing::put(grants::put_group).delete(grants::remove_group),
        )
        .route(
            "/api/grants",
            get(grants::list_grants).post(grants::add_grant),
        )
        .route(
            "/api/grants/{id}",
            axum::routing::delete(grants::revoke_grant),
        )
        .route("/api/endpoints", get(endpoints::list))
        .route(
            "/api/endpoints/{name}",
            get(endpoints::show)
                .put(endpoints::put)
                .delete(endpoints::remove),
        )
        .route("/api/endpoints/{name}/keys", post(endpoints::issue_key))
        .route(
            "/api/endpoints/{name}/keys/{id}",
            axum::routing::delete(endpoints::revoke_key),
        )
        .route(
            "/api/commands/{name}",
            axum::routing::put(commands::put).delete(commands::remove),
        )
        .route("/api/test-connection", post(servers::test))
        .route(
            "/api/servers/{id}",
            get(servers::show)
                .put(servers::replace)
                .patch(servers::change)
                .delete(servers::remove),
        )
        .route("/api/servers/{id}/tools", get(servers::tools))
        .route(
            "/api/servers/{id}/tools/{tool}",
            patch(servers::change_tool),
        )
        .route("/api/servers/{id}/tools/{tool}/call", post(servers::call))
        .route(
            "/api/servers/{id}/definitions",
            get(servers::changed_definitions),
        )
        .route(
            "/api/servers/{id}/definitions/{tool}/accept",
            post(servers::accept_definition),
        )
        .route("/api/servers/{id}/resources", get(servers::resources))
        .route("/api/servers/{id}/prompts", get(servers::prompts))
        .route("/api/servers/{id}/resource", get(servers::read_resource))
        .route("/api/servers/{id}/complete", post(servers::complete))
        .route("/api/servers/{id}/traffic", get(events::traffic))
        .route(
            "/api/servers/{id}/resource-updates",
            get(events::resource_updates),
        )
        .route(
            "/api/servers/{id}/prompts/{prompt}/get",
            post(servers::get_prompt),
        )
        .route("/api/servers/{id}/logout", post(servers::logout))
        .route("/api/servers/{id}/check", post(servers::check))
        .route(
            "/api/servers/{id}/my-settings",
            get(servers::my_settings)
                .put(servers::put_my_settings)
                .delete(servers::delete_my_settings),
        )
        .route("/api/servers/{id}/login", post(oauth::start_login))
        .route(
            oauth::CALLBACK_PATH,
            get(oauth::callback).post(oauth::confirmed_callback),
        )
        .route("/oauth/client-metadata.json", get(oauth::client_metadata))
        // One layer for every check: every layer costs each request a clone of the service
        // below it and a boxed future.
        .layer(middleware::from_fn(
            |workspace: Workspace, mut request: Request, next: Next| {
                async move {
                    let parts = &workspace.0;
                    let (access, draining, origins, endpoint_hub) =
                        (&parts.access, &parts.shared, &parts.origins, &parts.app.hub);
                    // Without an access guard, the dispatcher judged the request already.
                    let sender = match &access {
                        Some(access) => {
                            let sender = match origins.judge(&request) {
                                Ok(sender) => sender,
                                Err(refusal) => return refusal.into_response(),
                            };
                            if let origins::Sender::CorsApp(origin) = &sender
                                && request.method() == axum::http::Method::OPTIONS
                            {
                                return origins::preflight(origin.clone());
                            }
                            // A key issued for an endpoint reaches that endpoint's doors, and
                            // nothing else, whatever the listener lets other requests reach.
                            let endpoint_key = presented_key(request.headers())
                                .and_then(|key| endpoint_hub.endpoint_of_key(&key));
                            if let Some((endpoint, key)) = endpoint_key {
                                if let Some(refusal) =
                                    endpoints::key_refusal(&endpoint, &request, access)
                                {
                                    return refusal;
                                }
                                request
                                    .extensions_mut()
                                    .insert(mcp::conversation::VerifiedClient(format!(
                                        "endpoint {endpoint} key {key}"
                                    )));
                                request
                                    .extensions_mut()
                                    .insert(endpoints::EndpointKeyHolder(endpoint));
                            } else {
                                if let Some(refusal) = access.refusal(&request, &sender) {
                                    return refusal.into_response();
                                }
                                if let Some(holder) = access.key_holder(&request) {
                                    request.extensions_mut().insert(holder);
                                }
                            }
                            sender
                        }
                        None => origins::Sender::Trusted,
                    };
                    if request.method() == axum::http::Method::POST && draining.is_draining() {
                        return shutting_down();
                    }
                    let change = audit::change_in(endpoint_hub, &request);
                    let mut response = next.run(request).await;
                    if let Some(change) = change {
                        change.record(endpoint_hub, response.status());
                    }
                    if let origins::Sender::CorsApp(origin) = sender {
                        origins::grant(&mut response, origin);
                    }
                    response
                }
            },
        ))
        // Each handler made into its service, with the layers above, once, here: a router
        // never given its state keeps its handlers boxed and builds each one's service stack
        // again for every request (axum's `MethodEndpoint::BoxedHandler`).
        .with_state(())
}

/// An admin API error: answered with its status and `{"error": "<message>"}` as the body.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl ToString) -> Self {
        Self {
            status,
            message: message.to_string(),
        }
    }

    /// What went wrong, in plain words.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({"error": self.message})),
        )
            .into_response()
    }
}

/// The status that says what kind of failure a store's error is.
pub(crate) fn store_status(error: &switchboard_hub::StoreError) -> StatusCode {
    use switchboard_hub::StoreError;
    match error {
        StoreError::NotFound(_) | StoreError::Missing(_) => StatusCode::NOT_FOUND,
        StoreError::AlreadyExists(_) | StoreError::Exists(_) => StatusCode::CONFLICT,
        StoreError::SharedServer(_) | StoreError::Forbidden(_) => StatusCode::FORBIDDEN,
        StoreError::Invalid(_) => StatusCode::BAD_REQUEST,
        error if error.is_unavailable() => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// [`ApiError`] as a response.
pub(crate) fn api_error(status: StatusCode, message: impl ToString) -> Response {
    ApiError::new(status, message).into_response()
}

/// The answer to a request that arrives while the daemon shuts down: 503 with a JSON-RPC error,
/// so MCP clients show a reason and may retry against the next instance.
pub(crate) fn shutting_down() -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": "Switchboard is shutting down; try again shortly"},
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(axum::http::header::RETRY_AFTER, "5")],
        axum::Json(body),
    )
        .into_response()
}

/// The OAuth redirect URI of a daemon listening on `addr`.
pub fn callback_url(addr: SocketAddr) -> String {
    format!("http://{addr}{}", oauth::CALLBACK_PATH)
}

/// Whether `host` (a `Host` value or an origin's host, with or without port) is loopback.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The API key a request presents: `Authorization: Bearer <key>`, or on a WebSocket upgrade a
/// `bearer.<key, base64url>` subprotocol (a browser cannot set headers on a WebSocket).
fn presented_key(headers: &HeaderMap) -> Option<String> {
    use base64::Engine;
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110, 11.1).
            let (scheme, key) = v.trim_start().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(key)
        })
        .map(|key| key.trim().to_owned());
    bearer.or_else(|| {
        let upgrade = headers.get(header::UPGRADE)?.to_str().ok()?;
        if !upgrade.eq_ignore_ascii_case("websocket") {
            return None;
        }
        let offered = headers.get(header::SEC_WEBSOCKET_PROTOCOL)?.to_str().ok()?;
        let encoded = offered
            .split(',')
            .find_map(|protocol| protocol.trim().strip_prefix("bearer."))?;
        let key = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded.trim_end_matches('='))
            .ok()?;
        String::from_utf8(key).ok()
    })
}

/// Whether the request was sent to a loopback name (`Host`).
fn request_is_local(headers: &HeaderMap) -> bool {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(is_loopback_host)
}

async fn status(app: AppState) -> Json<switchboard_hub::StatusReport> {
    Json(app.hub.status_report())
}

/// `GET /metrics`: Prometheus' text format (see [`Hub::metrics`]).
async fn metrics(app: AppState) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.hub.metrics(),
    )
        .into_response()
}

/// `GET /api/tools[?format=mcp|anthropic|openai][&defer=all|none][&search=bm25|regex]
/// [&user=<id>][&thread=<id>][&endpoint=<name>]`: every exposed tool (on for that conversation,
/// inside that endpoint, or the one whose key the request presents), as a model API takes them
/// (see [`export`]).
async fn export_tools(
    app: AppState,
    holder: Option<axum::Extension<endpoints::EndpointKeyHolder>>,
    query: Result<
        axum::extract::Query<export::ExportQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let query = match query {
        Ok(axum::extract::Query(query)) => query,
        Err(rejection) => {
            return (
                axum::http::StatusCode::BAD_REQUEST,
                Json(serde_json::json!({"error": format!(
                    "{}; format is mcp, anthropic or openai, defer all or none, search bm25 or regex",
                    rejection.body_text()
                )})),
            )
                .into_response();
        }
    };
    let conversation = match conversation_of(&app, &query.user, &query.thread) {
        Ok(conversation) => conversation,
        Err(refused) => return *refused,
    };
    let boundary = match endpoints::boundary_of(&app.hub, query.endpoint.as_deref(), &holder) {
        Ok(boundary) => boundary,
        Err(refused) => return refused.into_response(),
    };
    let layers = conversation.with_own(None);
    let catalog = app.hub.exposed();
    let policies: std::collections::HashMap<_, _> = catalog
        .tools
        .iter()
        .map(|tool| tool.server.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|server| {
            let policies = app.hub.policies(&server);
            (server, policies)
        })
        .collect();
    let empty = switchboard_core::ToolPolicies::default();
    let tools: Vec<export::ExportedTool<'_>> = catalog
        .tools
        .iter()
        .filter(|tool| {
            boundary.includes_tool(tool.server.as_str(), &tool.upstream)
                && layers.is_active(tool.server.as_str(), tool.item.name.as_ref())
        })
        .map(|tool| export::ExportedTool {
            tool: &tool.item,
            upstream: &tool.upstream,
            policies: policies.get(&tool.server).unwrap_or(&empty),
        })
        .collect();
    Json(export::export(&tools, &query)).into_response()
}

/// The hub's activation layers for the conversation a query names (`user=`, `thread=`), or a
/// 400 naming an id that cannot name one.
fn conversation_of(
    app: &AppState,
    user: &Option<String>,
    thread: &Option<String>,
) -> Result<switchboard_hub::ConversationLayers, Box<axum::response::Response>> {
    use axum::response::IntoResponse;
    if let Some(bad) = [user, thread]
        .into_iter()
        .flatten()
        .find(|id| !switchboard_core::activation::valid_conversation_id(id))
    {
        return Err(Box::new(
            (
                axum::http::StatusCode::BAD_REQUEST,
                Json(serde_json::json!({"error": format!("'{bad}' is not a valid user or thread id")})),
            )
                .into_response(),
        ));
    }
    Ok(app
        .hub
        .conversation_layers(user.as_deref(), thread.as_deref()))
}

/// The query of `GET /api/tools/search`.
#[derive(serde::Deserialize)]
struct SearchQuery {
    /// Words (or, with `regex=true`, a regular expression).
    q: String,
    #[serde(default = "default_search_limit")]
    limit: usize,
    #[serde(default)]
    regex: bool,
    /// Only tools on for this user's conversations…
    user: Option<String>,
    /// …or this thread's.
    thread: Option<String>,
    /// Only what this endpoint includes.
    endpoint: Option<String>,
    /// Only tools scoring at least this, in the ranking's own scale.
    min_score: Option<f32>,
}

fn default_search_limit() -> usize {
    10
}

/// The most tools one search answers with.
const MAX_SEARCH_LIMIT: usize = 100;

/// `GET /api/tools/search?q=<words>[&limit=N][&regex=true][&min_score=S][&user=<id>]
/// [&thread=<id>][&endpoint=<name>]`: the exposed tools (on for that conversation, inside that
/// endpoint or the one whose key the request presents) that match best, ranked, as
/// `switchboard search` prints them, leaving out those scoring below `min_score`.
async fn search_tools(
    app: AppState,
    holder: Option<axum::Extension<endpoints::EndpointKeyHolder>>,
    query: Result<axum::extract::Query<SearchQuery>, axum::extract::rejection::QueryRejection>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Ok(axum::extract::Query(query)) = query else {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"error": "give the words to search for as ?q=..."})),
        )
            .into_response();
    };
    if query.min_score.is_some_and(|min| !min.is_finite()) {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"error": "min_score must be a finite number"})),
        )
            .into_response();
    }
    let limit = query.limit.min(MAX_SEARCH_LIMIT);
    let conversation = match conversation_of(&app, &query.user, &query.thread) {
        Ok(conversation) => conversation,
        Err(refused) => return *refused,
    };
    let boundary = match endpoints::boundary_of(&app.hub, query.endpoint.as_deref(), &holder) {
        Ok(boundary) => boundary,
        Err(refused) => return refused.into_response(),
    };
    let layers = conversation.with_own(None);
    let catalog = app.hub.exposed();
    let active = |server: &switchboard_core::ServerId, name: &str| {
        layers.is_active(server.as_str(), name)
            && catalog
                .tools
                .get(name)
                .is_some_and(|tool| boundary.includes_tool(server.as_str(), &tool.upstream))
    };
    // Only a conversation whose layers or endpoint leave something out needs its tools
    // filtered.
    let filter = (!layers.is_empty() || !boundary.is_everything())
        .then_some(&active as &switchboard_hub::ToolFilter<'_>);
    match app
        .hub
        .search_tools(&query.q, limit, query.regex, filter)
        .await
    {
        Ok(mut found) => {
            if let Some(min_score) = query.min_score {
                found.keep_scoring_at_least(min_score);
            }
            Json(serde_json::json!({
                "query": query.q,
                "ranking": found.ranking,
                "note": found.note,
                "tools": found.tools,
            }))
            .into_response()
        }
        Err(error) => (
            axum::http::StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"error": error.to_string()})),
        )
            .into_response(),
    }
}

/// A bound listener, so callers learn the real port (for `:0`) before serving.
pub struct Gateway {
    listener: tokio::net::TcpListener,
    sessions: mcp::SessionLimits,
    tools: mcp::ToolsOptions,
    public_url: Option<url::Url>,
    cors_origins: Vec<WebOrigin>,
    limits: listener::Limits,
    app_permissions: Vec<String>,
    connection_threads: ConnectionThreads,
}

impl Gateway {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr) -> Result<Self, GatewayError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|error| GatewayError::Bind { addr, error })?;
        Ok(Self {
            listener,
            sessions: mcp::SessionLimits::default(),
            tools: mcp::ToolsOptions::default(),
            public_url: None,
            cors_origins: Vec::new(),
            limits: listener::Limits::default(),
            app_permissions: Vec::new(),
            connection_threads: ConnectionThreads::none(),
        })
    }

    /// Names the address browsers and authorization servers reach the daemon at (a load
    /// balancer's, in front of several replicas): the OAuth redirect URI is made from it
    /// instead of the listen address.
    pub fn with_public_url(mut self, url: url::Url) -> Self {
        self.public_url = Some(url);
        self
    }

    /// Lets MCP Apps views have these of the permissions they ask for (`camera`,
    /// `microphone`, `geolocation`, `clipboardWrite`); none unless given.
    pub fn with_app_permissions(mut self, permissions: Vec<String>) -> Self {
        self.app_permissions = permissions;
        self
    }

    /// Takes connections within `limits` (per client address, header and body timeouts).
    pub fn with_connection_limits(mut self, limits: listener::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Serves connections on `threads` (each with a single-threaded runtime) rather than on the
    /// runtime `serve` runs on (the default). One per core keeps each call on one thread; see
    /// [`ConnectionThreads`]. The caller keeps a clone for as long as work started by requests
    /// must run: after `serve` returns, until its hub has shut down.
    pub fn with_connection_threads(mut self, threads: ConnectionThreads) -> Self {
        self.connection_threads = threads;
        self
    }

    /// Lets browser apps of `origins` use `/mcp` and the tool routes ([`origins::CORS_PATHS`])
    /// with a credential.
    pub fn with_cors_origins(mut self, origins: Vec<WebOrigin>) -> Self {
        self.cors_origins = origins;
        self
    }

    /// Shows MCP clients the view of `tools` unless they ask for another, and bounds the
    /// deferred view's working set (see [`mcp::ToolsOptions`]).
    pub fn with_tools(mut self, tools: mcp::ToolsOptions) -> Self {
        self.tools = tools;
        self
    }

    /// Serves MCP client sessions within `limits` (see [`mcp::SessionLimits`]).
    pub fn with_session_limits(mut self, limits: mcp::SessionLimits) -> Self {
        self.sessions = limits;
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` completes, then drains: new requests get 503, requests in flight
    /// get up to `drain` to finish, and every stream is closed.
    pub async fn serve(
        self,
        hub: Arc<Hub>,
        access: Access,
        shutdown: impl Future<Output = ()> + Send + 'static,
        drain: std::time::Duration,
    ) -> Result<(), GatewayError> {
        let addr = self.listener.local_addr().map_err(GatewayError::Serve)?;
        let stop = tokio_util::sync::CancellationToken::new();
        let streams = stop.clone();
        let shared = mcp::Shared::with_options(hub, self.sessions, self.tools);
        let draining = shared.clone();
        let callback = match &self.public_url {
            Some(public) => format!(
                "{}{}",
                public.as_str().trim_end_matches('/'),
                oauth::CALLBACK_PATH
            ),
            None => callback_url(addr),
        };
        let origins = BrowserOrigins::new(self.public_url.as_ref(), self.cors_origins);
        let mut parts = RouterParts::new(callback, stop.clone(), self.tools, origins);
        parts.app_permissions = Arc::new(self.app_permissions);
        let (app, workspaces) = match access {
            Access::Users(users) => {
                parts.users = Some(users.clone());
                let dispatcher = workspaces::Dispatcher::new(users, shared, parts);
                (dispatcher.front_door(), Some(dispatcher))
            }
            access => (
                routes().layer(axum::Extension(Workspace::new(
                    shared,
                    Some(access),
                    &parts,
                ))),
                None,
            ),
        };
        let shutdown = async move {
            shutdown.await;
            let unfinished = match &workspaces {
                Some(workspaces) => {
                    let (local, users) =
                        tokio::join!(draining.drain(drain), workspaces.drain(drain));
                    local + users
                }
                None => draining.drain(drain).await,
            };
            if unfinished > 0 {
                tracing::warn!(
                    unfinished,
                    "requests still in flight after the drain deadline are cut off"
                );
            }
            // A request that just finished has its response queued on its stream: give the
            // streams a moment to flush before closing them.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            // Long-lived SSE streams would hold the graceful shutdown open.
            streams.cancel();
        };
        listener::serve(
            self.listener,
            app,
            self.limits,
            &self.connection_threads,
            shutdown,
        )
        .await
        .map_err(GatewayError::Serve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    fn request(path: &str, pairs: &[(&'static str, &str)]) -> Request {
        let mut builder = axum::http::Request::builder().uri(path);
        for (name, value) in pairs {
            builder = builder.header(*name, *value);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn while_draining_new_requests_get_503_with_a_json_rpc_error_and_only_liveness_answers() {
        use tower::ServiceExt;
        let dir = tempfile::tempdir().unwrap();
        let store = switchboard_store::Store::open(dir.path()).await.unwrap();
        let hub = Hub::new(store, switchboard_upstream::ConnectOptions::new("test"));
        let shared = mcp::Shared::new(hub);
        let addr: SocketAddr = "127.0.0.1:8750".parse().unwrap();
        let app = router(shared.clone(), addr, Access::loopback(), Default::default());
        let readiness = |app: Router| async move {
            let answer = app
                .oneshot(request("/readyz", &[("host", "127.0.0.1:8750")]))
                .await
                .unwrap();
            let status = answer.status();
            let body = axum::body::to_bytes(answer.into_body(), 4096)
                .await
                .unwrap();
            (
                status,
                serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            )
        };
        assert_eq!(
            readiness(app.clone()).await,
            (StatusCode::OK, serde_json::json!({"ready": true}))
        );
        assert_eq!(
            shared.drain(std::time::Duration::ZERO).await,
            0,
            "nothing in flight"
        );

        let ping = axum::http::Request::post("/mcp")
            .header("host", "127.0.0.1:8750")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(axum::body::Body::from(
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            ))
            .unwrap();
        let refused = app.clone().oneshot(ping).await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refused
                .headers()
                .contains_key(axum::http::header::RETRY_AFTER)
        );
        let body = axum::body::to_bytes(refused.into_body(), 4096)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], -32000);
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("shutting down")
        );

        let (status, unready) = readiness(app.clone()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            unready["reason"].as_str().unwrap().contains("draining"),
            "{unready}"
        );
        let health = app
            .oneshot(request("/healthz", &[("host", "127.0.0.1:8750")]))
            .await
            .unwrap();
        assert_eq!(health.status(), StatusCode::OK);
    }

    #[test]
    fn a_non_loopback_listener_requires_an_api_key_but_not_for_health_and_oauth_redirects() {
        let access = Access::api_keys(["k3y-0123456789abcdef", "second-key-0123456789"]);
        let host = ("host", "switchboard.internal:8750");
        let trusted = origins::Sender::Trusted;
        let status = |r: Option<Refusal>| r.map(|e| e.into_response().status().as_u16());
        assert_eq!(
            status(access.refusal(&request("/mcp", &[host]), &trusted)),
            Some(401)
        );
        assert_eq!(
            status(access.refusal(
                &request(
                    "/mcp",
                    &[host, ("authorization", "Bearer wrong-key-0123456789")]
                ),
                &trusted
            )),
            Some(401)
        );
        for key in ["k3y-0123456789abcdef", "second-key-0123456789"] {
            for scheme in ["Bearer", "bearer", "BEARER"] {
                let bearer = format!("{scheme} {key}");
                assert_eq!(
                    status(access.refusal(
                        &request("/mcp", &[host, ("authorization", &bearer)]),
                        &trusted
                    )),
                    None,
                    "{bearer}: the scheme is case-insensitive"
                );
            }
        }
        for public in [
            "/healthz",
            "/readyz",
            "/oauth/callback",
            "/oauth/client-metadata.json",
        ] {
            assert_eq!(
                status(access.refusal(&request(public, &[host]), &trusted)),
                None,
                "{public}"
            );
        }
        assert_eq!(
            status(Access::loopback().refusal(&request("/mcp", &[host]), &trusted)),
            Some(403)
        );
    }

    #[test]
    fn a_browser_app_on_a_loopback_daemon_presents_an_operator_key() {
        let access = Access::loopback_with_keys(["k3y-0123456789abcdef"]);
        let host = ("host", "127.0.0.1:8750");
        let app = origins::Sender::CorsApp(axum::http::HeaderValue::from_static(
            "http://localhost:5173",
        ));
        let status = |r: Option<Refusal>| r.map(|e| e.into_response().status().as_u16());
        let with =
            |key: &str| request("/mcp", &[host, ("authorization", &format!("Bearer {key}"))]);
        assert_eq!(
            status(access.refusal(&with("k3y-0123456789abcdef"), &app)),
            None
        );
        assert_eq!(
            status(access.refusal(&with("another-key-01234567"), &app)),
            Some(401)
        );
        assert_eq!(
            status(access.refusal(&request("/mcp", &[host]), &origins::Sender::Trusted)),
            None,
            "the daemon's own pages and programs on this machine need no key"
        );
    }

    #[test]
    fn the_console_of_a_keyed_listener_passes_over_websockets_with_its_key() {
        let access = Access::api_keys(["k3y-0123456789abcdef"]);
        let host = ("host", "switchboard.internal:8750");
        let trusted = origins::Sender::Trusted;
        let status = |r: Option<Refusal>| r.map(|e| e.into_response().status().as_u16());
        // base64url("k3y-0123456789abcdef")
        let offered = (
            "sec-websocket-protocol",
            "switchboard, bearer.azN5LTAxMjM0NTY3ODlhYmNkZWY",
        );
        let upgrade = ("upgrade", "websocket");
        assert_eq!(
            status(access.refusal(
                &request("/api/events/ws", &[host, upgrade, offered]),
                &trusted
            )),
            None
        );
        assert_eq!(
            status(access.refusal(&request("/api/servers", &[host, offered]), &trusted)),
            Some(401),
            "the subprotocol carries a key on WebSocket upgrades only"
        );
        let wrong = ("sec-websocket-protocol", "switchboard, bearer.d3Jvbmc");
        assert_eq!(
            status(access.refusal(
                &request("/api/events/ws", &[host, upgrade, wrong]),
                &trusted
            )),
            Some(401)
        );
    }

    #[test]
    fn only_loopback_hosts_pass() {
        for host in [
            "127.0.0.1:8750",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8750",
            "127.0.0.2",
        ] {
            assert!(request_is_local(&headers(&[("host", host)])), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8750",
            "10.0.0.1:8750",
            "[2001:db8::1]:1",
        ] {
            assert!(!request_is_local(&headers(&[("host", host)])), "{host}");
        }
        assert!(
            !request_is_local(&headers(&[])),
            "a Host header is required"
        );
    }

    #[tokio::test]
    async fn every_route_refuses_a_page_of_another_loopback_port_websockets_and_streams_included() {
        use tower::ServiceExt;
        let dir = tempfile::tempdir().unwrap();
        let store = switchboard_store::Store::open(dir.path()).await.unwrap();
        let hub = Hub::new(store, switchboard_upstream::ConnectOptions::new("test"));
        let addr: SocketAddr = "127.0.0.1:8750".parse().unwrap();
        let app = router(
            mcp::Shared::new(hub),
            addr,
            Access::loopback(),
            Default::default(),
        );
        for (method, path) in [
            ("POST", "/api/servers/import"),
            ("POST", "/api/servers"),
            ("POST", "/api/test-connection"),
            ("GET", "/api/events"),
            ("GET", "/api/events/ws"),
            ("GET", "/sse"),
            ("GET", "/mcp"),
            ("POST", "/mcp"),
            ("POST", "/api/questions/q1"),
            ("PUT", "/api/endpoints/e"),
            ("POST", "/api/endpoints/e/keys"),
            ("POST", "/mcp/e/e"),
            ("GET", "/sse/e/e"),
            ("PATCH", "/api/servers/s/tools/t"),
            ("PATCH", "/api/servers/s"),
            ("GET", "/api/audit"),
            ("GET", "/api/audit/export"),
            ("GET", "/api/servers/s/definitions"),
            ("POST", "/api/servers/s/definitions/t/accept"),
            ("GET", "/api/groups"),
            ("PUT", "/api/groups/g"),
            ("GET", "/api/grants"),
            ("POST", "/api/grants"),
            ("DELETE", "/api/grants/x"),
        ] {
            let request = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "127.0.0.1:8750")
                .header("origin", "http://localhost:3000")
                .header("content-type", "text/plain")
                .header("upgrade", "websocket")
                .body(axum::body::Body::from("{}"))
                .unwrap();
            let answer = app.clone().oneshot(request).await.unwrap();
            assert_eq!(answer.status(), StatusCode::FORBIDDEN, "{method} {path}");
        }
    }

    /// On a listener that asks for keys, a key issued for an endpoint reaches that endpoint's
    /// doors (Streamable HTTP, HTTP+SSE and its message path) and the reads of its tools, and
    /// nothing else, until revoked; the operator's keys reach everything.
    #[tokio::test]
    async fn an_endpoint_key_reaches_its_endpoint_only_until_it_is_revoked() {
        use tower::ServiceExt;
        let dir = tempfile::tempdir().unwrap();
        let store = switchboard_store::Store::open(dir.path()).await.unwrap();
        let hub = Hub::new(store, switchboard_upstream::ConnectOptions::new("test"));
        let definition: switchboard_core::EndpointDefinition =
            serde_json::from_value(serde_json::json!({"servers": {"docs": "*"}})).unwrap();
        hub.define_endpoint("support", definition.clone())
            .await
            .unwrap();
        hub.define_endpoint("other", definition).await.unwrap();
        let (key, kept) = hub.issue_endpoint_key("support").await.unwrap();
        let operator = "operator-key-0123456789";
        let app = router(
            mcp::Shared::new(hub.clone()),
            "10.0.0.1:8750".parse().unwrap(),
            Access::api_keys([operator]),
            Default::default(),
        );
        let status = |method: &str, path: &str, key: Option<&str>| {
            let mut request = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "10.0.0.1:8750")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json");
            if let Some(key) = key {
                request = request.header("authorization", format!("Bearer {key}"));
            }
            let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}});
            let request = request
                .body(axum::body::Body::from(body.to_string()))
                .unwrap();
            let app = app.clone();
            async move { app.oneshot(request).await.unwrap().status().as_u16() }
        };
        assert_eq!(status("POST", "/mcp/e/support", Some(&key)).await, 200);
        assert_eq!(status("GET", "/sse/e/support", Some(&key)).await, 200);
        assert_eq!(
            status("POST", "/message/e/support?sessionId=x", Some(&key)).await,
            404,
            "past the key check: no such session"
        );
        for (method, elsewhere) in [
            ("POST", "/mcp"),
            ("GET", "/sse"),
            ("POST", "/mcp/e/other"),
            ("GET", "/api/status"),
            ("GET", "/api/endpoints"),
            ("POST", "/api/endpoints/support/keys"),
            ("GET", "/api/audit"),
            ("GET", "/api/audit/export"),
            ("GET", "/api/groups"),
            ("POST", "/api/grants"),
        ] {
            assert_eq!(
                status(method, elsewhere, Some(&key)).await,
                403,
                "{elsewhere}"
            );
        }
        // Its tools for a model API, and a search of them: its own endpoint's only.
        assert_eq!(status("GET", "/api/tools", Some(&key)).await, 200);
        assert_eq!(
            status("GET", "/api/tools/search?q=x", Some(&key)).await,
            200
        );
        assert_eq!(
            status("GET", "/api/tools?endpoint=other", Some(&key)).await,
            403
        );
        assert_eq!(status("POST", "/mcp/e/support", None).await, 401);
        assert_eq!(
            status("POST", "/mcp/e/support", Some("sbe_guess")).await,
            401
        );
        assert_eq!(status("POST", "/mcp/e/support", Some(operator)).await, 200);
        assert_eq!(status("POST", "/mcp/e/nowhere", Some(operator)).await, 404);
        assert_eq!(status("GET", "/api/status", Some(operator)).await, 200);
        hub.revoke_endpoint_key("support", &kept.id).await.unwrap();
        assert_eq!(status("POST", "/mcp/e/support", Some(&key)).await, 401);
    }
}
