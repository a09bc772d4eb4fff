//! An OAuth-protected fixture: the fixture MCP server behind bearer tokens, with its own
//! authorization server on the same listener (test-only).
//!
//! - `/mcp`: the fixture server (either era); every request needs a live access token, else 401
//!   with a `resource_metadata` challenge. `tools/call` can be made to need an extra scope, answered
//!   with a 403 `insufficient_scope` challenge.
//! - `/.well-known/oauth-protected-resource/mcp`: resource metadata naming the issuer `/as`.
//! - `/.well-known/oauth-authorization-server/as`: metadata (S256, registration, revocation,
//!   `offline_access`, RFC 9207 `iss`).
//! - `/as/register`, `/as/authorize` (redirects at once, no consent page), `/as/token`
//!   (authorization code with PKCE, refresh with rotation), `/as/revoke`.
//!
//! Knobs on [`AuthServerState`] make tokens expire, refreshes slow, or refresh tokens dead, and
//! counters record what the client did.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard_core::sync::lock;

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;
use tokio_util::sync::CancellationToken;

use crate::{Era, FixtureState};

/// What the authorization server knows and what it saw.
#[derive(Default)]
pub struct AuthServerState {
    origin: Mutex<String>,
    /// Lifetime of new access tokens, in seconds (default 3600).
    pub access_ttl_secs: AtomicU64,
    /// Delay before a refresh request is processed, in milliseconds.
    pub refresh_delay_ms: AtomicU64,
    /// A scope `tools/call` needs on top of the granted ones (empty: none).
    pub tools_call_scope: Mutex<String>,
    access: Mutex<HashMap<String, Grant>>,
    refresh: Mutex<HashMap<String, Grant>>,
    /// Rotation with a grace period (as Auth0's reuse interval or Okta's grace period): a
    /// rotated refresh token stays valid until its successor is used, so a client that never
    /// received the answer can still refresh with the token it has.
    superseded_by: Mutex<HashMap<String, String>>,
    /// Refresh tokens retired by rotation (their successor was used).
    retired: Mutex<std::collections::HashSet<String>>,
    /// Dynamically registered client ids the server has forgotten: the token endpoint answers
    /// them `invalid_client` (as after a server-side cleanup of registrations).
    forgotten_clients: Mutex<std::collections::HashSet<String>>,
    /// While set, presenting a retired refresh token revokes every token (reuse detection, as
    /// Auth0 and Okta do: a replayed token means the grant may be stolen).
    pub revoke_all_on_reuse: std::sync::atomic::AtomicBool,
    codes: Mutex<HashMap<String, PendingCode>>,
    serial: AtomicU64,
    /// `/as/authorize` requests, with their `scope` parameters.
    pub authorizations: Mutex<Vec<Option<String>>>,
    /// The `client_id` of each `/as/authorize` request.
    pub authorizing_clients: Mutex<Vec<String>>,
    /// Dynamic registrations.
    pub registrations: AtomicUsize,
    /// Token requests with `grant_type=refresh_token`.
    pub refreshes: AtomicUsize,
    /// Successful token requests with `grant_type=client_credentials`.
    pub client_credentials: AtomicUsize,
    /// Token requests with `grant_type=authorization_code`.
    pub code_exchanges: AtomicUsize,
    /// Tokens revoked through `/as/revoke`.
    pub revocations: AtomicUsize,
    /// While set, `/as/revoke` answers an access token with `unsupported_token_type` (RFC 7009
    /// §2.2.1), as servers that revoke only refresh tokens do.
    pub refuses_access_token_revocation: std::sync::atomic::AtomicBool,
    /// MCP requests refused with 401.
    pub unauthorized: AtomicUsize,
    /// MCP requests that carried an access token past its expiry.
    pub expired_tokens_seen: AtomicUsize,
}

#[derive(Clone)]
struct Grant {
    scopes: Vec<String>,
    expires_at: u64,
}

struct PendingCode {
    challenge: String,
    scopes: Vec<String>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl AuthServerState {
    fn next(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.serial.fetch_add(1, Ordering::SeqCst))
    }

    fn origin(&self) -> String {
        lock(&self.origin).clone()
    }

    /// The issuer identifier.
    pub fn issuer(&self) -> String {
        format!("{}/as", self.origin())
    }

    /// Makes every access token issued so far expire now (the server will answer 401).
    pub fn expire_access_tokens(&self) {
        for grant in lock(&self.access).values_mut() {
            grant.expires_at = 0;
        }
    }

    /// Forgets every refresh token (the next refresh gets `invalid_grant`).
    pub fn revoke_refresh_tokens(&self) {
        lock(&self.refresh).clear();
    }

    /// Forgets every client registered so far: the token endpoint refuses them with
    /// `invalid_client`; clients registered later are known.
    pub fn forget_registered_clients(&self) {
        let registered = self.registrations.load(Ordering::SeqCst);
        lock(&self.forgotten_clients).extend((0..registered).map(|n| format!("client-{n}")));
    }

    /// True while `refresh_token` would be honoured.
    pub fn honours_refresh_token(&self, refresh_token: &str) -> bool {
        lock(&self.refresh).contains_key(refresh_token)
    }

    /// A token (access or refresh) was used: the refresh token it replaced is now dead.
    fn used(&self, token: &str) {
        if let Some(old) = lock(&self.superseded_by).remove(token) {
            lock(&self.refresh).remove(&old);
            lock(&self.retired).insert(old);
        }
    }

    fn issue(&self, scopes: Vec<String>) -> Value {
        let ttl = match self.access_ttl_secs.load(Ordering::SeqCst) {
            0 => 3600,
            ttl => ttl,
        };
        let access = self.next("at");
        let refresh = self.next("rt");
        let grant = Grant {
            scopes: scopes.clone(),
            expires_at: now() + ttl,
        };
        lock(&self.access).insert(access.clone(), grant.clone());
        lock(&self.refresh).insert(refresh.clone(), grant);
        json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": ttl,
            "refresh_token": refresh,
            "scope": scopes.join(" "),
        })
    }
}

/// The protected fixture, running until dropped.
pub struct OAuthFixture {
    /// The MCP endpoint.
    pub url: String,
    /// The authorization server's state and counters.
    pub auth: Arc<AuthServerState>,
    /// The MCP fixture's state.
    pub fixture: Arc<FixtureState>,
    stop: CancellationToken,
}

impl Drop for OAuthFixture {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[derive(Clone)]
struct Shared {
    auth: Arc<AuthServerState>,
}

/// Starts the protected fixture server of `era` on 127.0.0.1.
pub async fn protected(era: Era) -> OAuthFixture {
    let fixture = Arc::new(FixtureState::default());
    let auth = Arc::new(AuthServerState::default());
    let stop = CancellationToken::new();
    let service = crate::transports::streamable_service(era, &fixture, &stop);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    *lock(&auth.origin) = format!("http://{addr}");
    let shared = Shared { auth: auth.clone() };
    // Faults armed on the fixture strike after the token check, like a server that rejects a
    // token it accepted a moment ago.
    let mcp = Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            fixture.clone(),
            crate::transports::observe_sessions,
        ))
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            require_token,
        ));
    let router = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(resource_metadata),
        )
        .route(
            "/.well-known/oauth-authorization-server/as",
            get(server_metadata),
        )
        .route("/as/register", post(register))
        .route("/as/authorize", get(authorize))
        .route("/as/token", post(token))
        .route("/as/revoke", post(revoke))
        .with_state(shared)
        .merge(mcp);
    let serve_stop = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(serve_stop.cancelled_owned())
            .await;
    });
    OAuthFixture {
        url: format!("http://{addr}/mcp"),
        auth,
        fixture,
        stop,
    }
}

fn challenge(auth: &AuthServerState, extra: &str) -> String {
    format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"{extra}",
        auth.origin()
    )
}

async fn require_token(
    State(shared): State<Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let auth = &shared.auth;
    let token = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let grant = token
        .as_deref()
        .and_then(|t| lock(&auth.access).get(t).cloned());
    let Some(grant) = grant.filter(|g| {
        let live = g.expires_at > now();
        if !live {
            auth.expired_tokens_seen.fetch_add(1, Ordering::SeqCst);
        }
        live
    }) else {
        auth.unauthorized.fetch_add(1, Ordering::SeqCst);
        let extra = if token.is_some() {
            ", error=\"invalid_token\""
        } else {
            ""
        };
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", challenge(auth, extra))],
        )
            .into_response();
    };
    if let Some(token) = &token {
        auth.used(token);
    }
    let needed = lock(&auth.tools_call_scope).clone();
    if needed.is_empty() || grant.scopes.contains(&needed) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let is_call = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .is_some_and(|v| v["method"] == "tools/call");
    if is_call {
        return (
            StatusCode::FORBIDDEN,
            [(
                "www-authenticate",
                challenge(
                    auth,
                    &format!(", error=\"insufficient_scope\", scope=\"{needed}\""),
                ),
            )],
        )
            .into_response();
    }
    next.run(axum::extract::Request::from_parts(parts, bytes.into()))
        .await
}

async fn resource_metadata(State(shared): State<Shared>) -> Response {
    let auth = &shared.auth;
    axum::Json(json!({
        "resource": format!("{}/mcp", auth.origin()),
        "authorization_servers": [auth.issuer()],
        "scopes_supported": ["tools"],
    }))
    .into_response()
}

async fn server_metadata(State(shared): State<Shared>) -> Response {
    let issuer = shared.auth.issuer();
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "revocation_endpoint": format!("{issuer}/revoke"),
        "scopes_supported": ["tools", "admin", "offline_access"],
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
        "authorization_response_iss_parameter_supported": true,
    }))
    .into_response()
}

async fn register(State(shared): State<Shared>, axum::Json(body): axum::Json<Value>) -> Response {
    let n = shared.auth.registrations.fetch_add(1, Ordering::SeqCst);
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": format!("client-{n}"),
            "redirect_uris": body["redirect_uris"],
            "token_endpoint_auth_method": "none",
        })),
    )
        .into_response()
}

async fn authorize(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let auth = &shared.auth;
    lock(&auth.authorizations).push(query.get("scope").cloned());
    lock(&auth.authorizing_clients).push(query.get("client_id").cloned().unwrap_or_default());
    let (Some(redirect), Some(challenge)) =
        (query.get("redirect_uri"), query.get("code_challenge"))
    else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    if query.get("code_challenge_method").map(String::as_str) != Some("S256")
        || query.get("resource") != Some(&format!("{}/mcp", auth.origin()))
    {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let code = auth.next("code");
    let scopes = scopes_of(query.get("scope"));
    lock(&auth.codes).insert(
        code.clone(),
        PendingCode {
            challenge: challenge.clone(),
            scopes,
        },
    );
    let Ok(mut location) = url::Url::parse(redirect) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    location
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair(
            "state",
            query.get("state").map(String::as_str).unwrap_or_default(),
        )
        .append_pair("iss", &auth.issuer());
    (StatusCode::FOUND, [("location", location.to_string())]).into_response()
}

fn scopes_of(scope: Option<&String>) -> Vec<String> {
    scope
        .map(|s| s.split_ascii_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn oauth_error(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error}))).into_response()
}

async fn token(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let auth = &shared.auth;
    if form.get("resource") != Some(&format!("{}/mcp", auth.origin())) {
        return oauth_error("invalid_target");
    }
    match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            auth.code_exchanges.fetch_add(1, Ordering::SeqCst);
            let pending = form.get("code").and_then(|c| lock(&auth.codes).remove(c));
            let Some(pending) = pending else {
                return oauth_error("invalid_grant");
            };
            let verifier = form.get("code_verifier").cloned().unwrap_or_default();
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(sha2::Sha256::digest(verifier.as_bytes()));
            if computed != pending.challenge {
                return oauth_error("invalid_grant");
            }
            axum::Json(auth.issue(pending.scopes)).into_response()
        }
        Some("refresh_token") => {
            auth.refreshes.fetch_add(1, Ordering::SeqCst);
            if form
                .get("client_id")
                .is_some_and(|id| lock(&auth.forgotten_clients).contains(id))
            {
                return (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(json!({"error": "invalid_client"})),
                )
                    .into_response();
            }
            let delay = auth.refresh_delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            // Rotation: a new refresh token each time; the old one dies once the new one (or
            // the access token issued with it) is used.
            let Some(presented) = form.get("refresh_token") else {
                return oauth_error("invalid_request");
            };
            if auth.revoke_all_on_reuse.load(Ordering::SeqCst)
                && lock(&auth.retired).contains(presented)
            {
                lock(&auth.access).clear();
                lock(&auth.refresh).clear();
                return oauth_error("invalid_grant");
            }
            auth.used(presented);
            let grant = lock(&auth.refresh).get(presented).cloned();
            match grant {
                Some(grant) => {
                    let issued = auth.issue(grant.scopes);
                    let mut superseded = lock(&auth.superseded_by);
                    for key in ["access_token", "refresh_token"] {
                        if let Some(new) = issued[key].as_str() {
                            superseded.insert(new.to_owned(), presented.clone());
                        }
                    }
                    axum::Json(issued).into_response()
                }
                None => oauth_error("invalid_grant"),
            }
        }
        Some("client_credentials") => {
            // The fixture's machine client: `m2m` / `m2m-secret`, by HTTP Basic.
            let basic = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Basic "))
                .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok());
            if basic.as_deref() != Some(b"m2m:m2m-secret".as_slice()) {
                return (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(json!({"error": "invalid_client"})),
                )
                    .into_response();
            }
            auth.client_credentials.fetch_add(1, Ordering::SeqCst);
            let scopes = scopes_of(form.get("scope"));
            let mut issued = auth.issue(scopes);
            issued.as_object_mut().map(|o| o.remove("refresh_token"));
            axum::Json(issued).into_response()
        }
        _ => oauth_error("unsupported_grant_type"),
    }
}

async fn revoke(
    State(shared): State<Shared>,
    _headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let auth = &shared.auth;
    if let Some(token) = form.get("token") {
        if auth.refuses_access_token_revocation.load(Ordering::SeqCst)
            && lock(&auth.access).contains_key(token)
        {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({"error": "unsupported_token_type"})),
            )
                .into_response();
        }
        let removed = lock(&auth.access).remove(token).is_some()
            | lock(&auth.refresh).remove(token).is_some();
        if removed {
            auth.revocations.fetch_add(1, Ordering::SeqCst);
        }
    }
    StatusCode::OK.into_response()
}

/// The public face of an OpenID provider on 127.0.0.1, for tests of bearer-token verification:
/// its discovery document and a key set the test replaces at will, counting reads of the set.
/// It signs nothing; the test signs tokens with the keys whose public halves it publishes.
/// Serves until dropped.
pub struct OpenIdProvider {
    /// The issuer (`http://127.0.0.1:<port>`), as discovery names it.
    pub issuer: String,
    keys: Arc<Mutex<Vec<Value>>>,
    key_set_reads: Arc<AtomicUsize>,
    /// Whether the key set answers 503 instead.
    failing: Arc<std::sync::atomic::AtomicBool>,
    stop: CancellationToken,
}

impl OpenIdProvider {
    /// Starts a provider publishing `keys` (public JWKs).
    pub async fn start(keys: Vec<Value>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let issuer = format!("http://{}", listener.local_addr().expect("local addr"));
        let keys = Arc::new(Mutex::new(keys));
        let key_set_reads = Arc::new(AtomicUsize::new(0));
        let discovery = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks"),
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token")});
        let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (served, counted, fails) = (keys.clone(), key_set_reads.clone(), failing.clone());
        let router = Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(move || async move { axum::Json(discovery) }),
            )
            .route(
                "/jwks",
                get(move || async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    if fails.load(Ordering::SeqCst) {
                        return StatusCode::SERVICE_UNAVAILABLE.into_response();
                    }
                    let keys = lock(&served).clone();
                    axum::Json(json!({ "keys": keys })).into_response()
                }),
            );
        let stop = CancellationToken::new();
        let serve_stop = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(serve_stop.cancelled_owned())
                .await;
        });
        Self {
            issuer,
            keys,
            key_set_reads,
            failing,
            stop,
        }
    }

    /// Makes the key set answer 503 (`true`) or its keys again.
    pub fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// Publishes `keys` (public JWKs) in place of the set it had.
    pub fn publish(&self, keys: Vec<Value>) {
        *lock(&self.keys) = keys;
    }

    /// How many times the key set has been read.
    pub fn key_set_reads(&self) -> usize {
        self.key_set_reads.load(Ordering::SeqCst)
    }
}

impl Drop for OpenIdProvider {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
