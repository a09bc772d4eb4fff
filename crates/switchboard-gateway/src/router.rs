//! The daemon's routes: every route of a workspace, built once ([`routes`]), the [`Workspace`]
//! each request carries and the [`AppState`] handlers take, and the small handlers of the admin
//! API's status, metrics, export and tool search.

use crate::{
    Access, BrowserOrigins, Users, activation, apps, audit, callback_url, commands, endpoints,
    events, export, grants, mcp, oauth, origins, presented_key, questions, readiness, servers,
    shutting_down, ui,
};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use std::net::SocketAddr;
use std::sync::Arc;
use switchboard_hub::Hub;

/// What every route shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) hub: Arc<Hub>,
    /// This daemon's OAuth redirect URI.
    pub(crate) callback_url: String,
    /// The sign-ins this process started (one for the daemon, every workspace's).
    pub(crate) logins: Arc<switchboard_hub::SignIns>,
    /// Cancelled when the daemon shuts down: long-lived streams end.
    pub(crate) stop: tokio_util::sync::CancellationToken,
    /// MCP Apps views the console asked for.
    pub(crate) views: Arc<apps::Views>,
    /// A multi-user daemon's users, whose credentials prove who confirms a sign-in.
    pub(crate) users: Option<Arc<Users>>,
    /// The permissions MCP Apps views may have (`serve --app-permission`).
    pub(crate) app_permissions: Arc<Vec<String>>,
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
    Router::new().fallback_service(one_workspace(workspace))
}

/// A daemon of one workspace: every request is answered by [`Workspace::serve`] (so a
/// `POST /mcp` skips the router there, as in each workspace of `serve --users`).
pub(crate) fn one_workspace(
    workspace: Workspace,
) -> impl tower::Service<
    Request,
    Response = Response,
    Error = std::convert::Infallible,
    Future: Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    let served = Arc::new((workspace, routes()));
    tower::service_fn(move |request: Request| {
        let served = served.clone();
        // Boxed once here: the answer's future is several kilobytes, and the connection's
        // layers above would each move it whole.
        Box::pin(async move {
            let (workspace, routes) = &*served;
            Ok(workspace.serve(routes, request).await)
        })
    })
}

/// What every workspace's router shares: the daemon's OAuth redirect URI, when it stops, and
/// the sign-ins and MCP Apps views that come back on routes without a credential (the OAuth
/// redirect, a view's frame), wherever they were started.
#[derive(Clone)]
pub(crate) struct RouterParts {
    pub(crate) callback_url: String,
    pub(crate) stop: tokio_util::sync::CancellationToken,
    pub(crate) tools: mcp::ToolsOptions,
    pub(crate) logins: Arc<switchboard_hub::SignIns>,
    pub(crate) views: Arc<apps::Views>,
    /// The pages that may use the daemon.
    pub(crate) origins: Arc<BrowserOrigins>,
    /// A multi-user daemon's users.
    pub(crate) users: Option<Arc<Users>>,
    /// The permissions MCP Apps views may have.
    pub(crate) app_permissions: Arc<Vec<String>>,
}

impl RouterParts {
    pub(crate) fn new(
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
pub(crate) struct Workspace(pub(crate) Arc<WorkspaceParts>);

pub(crate) struct WorkspaceParts {
    pub(crate) app: AppState,
    pub(crate) door: mcp::http::FrontDoor,
    /// rmcp's Streamable HTTP server (the full path), with the workspace's sessions.
    pub(crate) mcp: mcp::http::McpService,
    pub(crate) legacy_sse: mcp::legacy_sse::LegacySse,
    pub(crate) readiness: readiness::Readiness,
    pub(crate) shared: Arc<mcp::Shared>,
    /// `None`: the dispatcher checked the caller already.
    pub(crate) access: Option<Access>,
    pub(crate) origins: Arc<BrowserOrigins>,
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

    /// Answers `request` with this workspace's routes (`routes`, built once). A `POST /mcp`
    /// (every MCP request but a session's stream and end) skips the router to the layers its
    /// route has, called in the same order ([`checked`], then the door, then the full path):
    /// the router and its two middleware layers, each boxing the request's future, were a
    /// twentieth of a relayed call's instructions.
    #[expect(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps each argument twice in its future (rust-lang/rust#62958), and this one is every request's (docs/benchmarks.md)"
    )]
    pub(crate) fn serve(
        &self,
        routes: &Router,
        mut request: Request,
    ) -> impl Future<Output = Response> {
        async move {
            if request.method() == axum::http::Method::POST
                && request.uri().path() == mcp::http::MCP_PATH
            {
                return checked(self.clone(), request, |request| {
                    mcp::http::door(self.clone(), request, |request| {
                        full_path(self.clone(), request)
                    })
                })
                .await;
            }
            request.extensions_mut().insert(self.clone());
            match tower::ServiceExt::oneshot(routes.clone(), request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
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
pub(crate) async fn full_path(workspace: Workspace, request: Request) -> Response {
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
                // `tools/call`, rmcp's server (the full path, above) everything else. A
                // `POST /mcp` does not come through this table: `Workspace::serve` calls the
                // same layers itself, so a layer added on `/mcp` is added there too.
                .layer(middleware::from_fn(
                    |workspace: Workspace, request: Request, next: Next| {
                        mcp::http::door(workspace, request, move |request| next.run(request))
                    },
                )),
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
            |workspace: Workspace, request: Request, next: Next| {
                checked(workspace, request, move |request| next.run(request))
            },
        ))
        // Each handler made into its service, with the layers above, once, here: a router
        // never given its state keeps its handlers boxed and builds each one's service stack
        // again for every request (axum's `MethodEndpoint::BoxedHandler`).
        .with_state(())
}

/// Every request's checks, whichever route it is for: the sender's origin and credential (unless
/// the dispatcher of `serve --users` judged it), an endpoint key's reach, the drain, and the
/// audit record of a change; `onward` answers a request that passes them (the router's next
/// layer, or the MCP door itself for a `POST /mcp`, see [`Workspace::serve`]).
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps each argument twice in its future (rust-lang/rust#62958), and this one is every request's (docs/benchmarks.md)"
)]
fn checked<Answer>(
    workspace: Workspace,
    mut request: Request,
    onward: impl FnOnce(Request) -> Answer,
) -> impl Future<Output = Response>
where
    Answer: Future<Output = Response>,
{
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
                // A key issued for an endpoint reaches that endpoint's doors, and nothing else,
                // whatever the listener lets other requests reach.
                let endpoint_key = presented_key(request.headers())
                    .and_then(|key| endpoint_hub.endpoint_of_key(&key));
                if let Some((endpoint, key)) = endpoint_key {
                    if let Some(refusal) = endpoints::key_refusal(&endpoint, &request, access) {
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
        let mut response = onward(request).await;
        if let Some(change) = change {
            change.record(endpoint_hub, response.status());
        }
        if let origins::Sender::CorsApp(origin) = sender {
            origins::grant(&mut response, origin);
        }
        response
    }
}

pub(crate) async fn status(app: AppState) -> Json<switchboard_hub::StatusReport> {
    Json(app.hub.status_report())
}

/// `GET /metrics`: Prometheus' text format (see [`Hub::metrics`]).
pub(crate) async fn metrics(app: AppState) -> Response {
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
pub(crate) async fn export_tools(
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
pub(crate) fn conversation_of(
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
pub(crate) struct SearchQuery {
    /// Words (or, with `regex=true`, a regular expression).
    pub(crate) q: String,
    #[serde(default = "default_search_limit")]
    pub(crate) limit: usize,
    #[serde(default)]
    pub(crate) regex: bool,
    /// Only tools on for this user's conversations…
    pub(crate) user: Option<String>,
    /// …or this thread's.
    pub(crate) thread: Option<String>,
    /// Only what this endpoint includes.
    pub(crate) endpoint: Option<String>,
    /// Only tools scoring at least this, in the ranking's own scale.
    pub(crate) min_score: Option<f32>,
}

pub(crate) fn default_search_limit() -> usize {
    10
}

/// The most tools one search answers with.
pub(crate) const MAX_SEARCH_LIMIT: usize = 100;

/// `GET /api/tools/search?q=<words>[&limit=N][&regex=true][&min_score=S][&user=<id>]
/// [&thread=<id>][&endpoint=<name>]`: the exposed tools (on for that conversation, inside that
/// endpoint or the one whose key the request presents) that match best, ranked, as
/// `switchboard search` prints them, leaving out those scoring below `min_score`.
pub(crate) async fn search_tools(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Refusal, request_is_local};
    use axum::http::HeaderMap;

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
        // `/mcp` itself (which skips the route table) is as closed to a caller without a key.
        assert_eq!(status("POST", "/mcp", None).await, 401);
        assert_eq!(status("POST", "/mcp", Some("sbe_guess")).await, 401);
        assert_eq!(status("POST", "/mcp", Some(operator)).await, 200);
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
