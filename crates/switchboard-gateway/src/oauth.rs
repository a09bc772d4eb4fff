//! Sign-in through the daemon: the admin API starts an authorization for a server and the
//! `/oauth/callback` route completes it, so a web UI (or any HTTP client) can drive a sign-in.
//! It also serves Switchboard's client ID metadata document when a public URL for it is
//! configured.
//!
//! - `POST /api/servers/{id}/login` → `{"authorization_url": ...}`: discovery, registration and
//!   the authorization request, with this daemon's `/oauth/callback` as the redirect URI.
//! - `GET /oauth/callback?code=...&state=...&iss=...` → validates the redirect against the pending
//!   request (`state` first, then RFC 9207 `iss`), redeems the code and stores the tokens; the
//!   server's connection task follows the sign-in's progress in its state and connects.
//! - `GET /oauth/client-metadata.json` → the client ID metadata document.
//!
//! Pending sign-ins live in memory for ten minutes; a daemon restart forgets them (the user
//! starts again), and nothing about them is logged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;
use switchboard_hub::{Hub, SignInError, begin_sign_in, server_auth_for};
use switchboard_oauth::{AuthorizationCallback, PendingAuthorization, ServerAuth};

use crate::{ApiError, AppState, api_error};

/// How long a started sign-in may wait for its redirect.
const PENDING_LIFETIME: Duration = Duration::from_secs(600);
/// The callback path, relative to the daemon's address.
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";

/// Sign-ins waiting for their redirect, by `state`.
#[derive(Default)]
pub(crate) struct PendingLogins {
    by_state: Mutex<HashMap<String, PendingLogin>>,
}

struct PendingLogin {
    server: switchboard_core::ServerId,
    auth: Arc<ServerAuth>,
    pending: PendingAuthorization,
    started: Instant,
}

impl PendingLogins {
    fn insert(&self, login: PendingLogin) {
        let mut map = self.by_state.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, l| l.started.elapsed() < PENDING_LIFETIME);
        map.insert(login.pending.state.clone(), login);
    }

    fn take(&self, state: &str) -> Option<PendingLogin> {
        let mut map = self.by_state.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(state)
            .filter(|l| l.started.elapsed() < PENDING_LIFETIME)
    }
}

pub(crate) fn sign_in_problem(error: SignInError) -> ApiError {
    let status = match &error {
        SignInError::UnknownServer(_) => StatusCode::NOT_FOUND,
        SignInError::NotHttp(_) => StatusCode::BAD_REQUEST,
        SignInError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        SignInError::OAuth { .. } => StatusCode::BAD_GATEWAY,
    };
    ApiError::new(status, error)
}

/// What `POST /api/servers/{id}/login` may ask: scopes on top of those of the last sign-in and
/// of any step-up the server asked for since (`?scope=a%20b`).
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct LoginQuery {
    #[serde(default)]
    scope: Option<String>,
}

/// `POST /api/servers/{id}/login`.
pub(crate) async fn start_login(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<LoginQuery>,
) -> Response {
    let Ok(id) = switchboard_core::ServerId::new(id) else {
        return api_error(StatusCode::BAD_REQUEST, "not a valid server id");
    };
    let hub: &Hub = &app.hub;
    let (def, auth) = match server_auth_for(hub.store(), &id, hub.oauth()).await {
        Ok(found) => found,
        Err(error) => return sign_in_problem(error).into_response(),
    };
    let auth = Arc::new(auth.with_listener(hub.sign_in_listener(&id)));
    let more: Vec<String> = query
        .scope
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let pending = match begin_sign_in(&def, &auth, &app.callback_url, &more).await {
        Ok(pending) => pending,
        Err(error) => return sign_in_problem(error).into_response(),
    };
    let url = pending.authorization_url.to_string();
    app.logins.insert(PendingLogin {
        server: id,
        auth,
        pending,
        started: Instant::now(),
    });
    Json(json!({
        "authorization_url": url,
        "expires_in": PENDING_LIFETIME.as_secs(),
    }))
    .into_response()
}

/// The small HTML page a browser sees at the end of a sign-in (also used by `switchboard login`).
pub fn callback_page(status: StatusCode, text: &str) -> Response {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    (
        status,
        Html(format!(
            "<!doctype html><meta charset=utf-8><title>Switchboard</title><p>{escaped}</p>"
        )),
    )
        .into_response()
}

/// `GET /oauth/callback`.
pub(crate) async fn callback(
    State(app): State<AppState>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let callback = AuthorizationCallback::from_query_pairs(query);
    let Some(login) = callback.state.as_deref().and_then(|s| app.logins.take(s)) else {
        return callback_page(
            StatusCode::BAD_REQUEST,
            "This sign-in link is unknown or has expired. Start the sign-in again.",
        );
    };
    let id = login.server.clone();
    match login.auth.complete_sign_in(&login.pending, &callback).await {
        // The server's task sees the new tokens (through the sign-in listener) and connects.
        Ok(()) => callback_page(
            StatusCode::OK,
            &format!("Signed in to '{id}'. You can close this tab."),
        ),
        Err(error) => callback_page(
            StatusCode::BAD_REQUEST,
            &format!("Signing in to '{id}' failed: {error}"),
        ),
    }
}

/// `GET /oauth/client-metadata.json`.
pub(crate) async fn client_metadata(State(app): State<AppState>) -> Response {
    match app
        .hub
        .oauth()
        .identity
        .metadata_document(std::slice::from_ref(&app.callback_url))
    {
        Some(document) => Json(document).into_response(),
        None => api_error(
            StatusCode::NOT_FOUND,
            "no client metadata URL is configured (serve --client-metadata-url)",
        ),
    }
}
