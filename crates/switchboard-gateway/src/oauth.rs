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
//! A pending sign-in is kept in the store for ten minutes, sealed with the tenant's key and
//! found by the SHA-256 of its `state`, so the redirect may reach any replica behind a load
//! balancer (whose address `serve --public-url` names) and survives a restart; nothing about it
//! is logged. The process that started it also keeps, in memory, the listener that shows its
//! progress in the server's state; a sign-in completed elsewhere shows when the server's task
//! next finds the tokens in the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;
use switchboard_hub::{Hub, SignInError, begin_sign_in, server_auth_for};
use switchboard_oauth::AuthorizationCallback;

use crate::{ApiError, AppState, api_error};

/// How long a started sign-in may wait for its redirect.
const PENDING_LIFETIME: Duration = Duration::from_secs(600);
/// The callback path, relative to the daemon's address.
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";

/// Shows a sign-in's progress in its server's state (see [`Hub::sign_in_listener`]).
type Listener = Arc<dyn Fn(switchboard_oauth::AuthEvent) + Send + Sync>;

/// The listeners of the sign-ins this process started, by `state`, until their redirect comes
/// back or they expire.
#[derive(Default)]
pub(crate) struct PendingLogins {
    by_state: Mutex<HashMap<String, (Listener, Instant)>>,
}

impl PendingLogins {
    fn insert(&self, state: &str, listener: Listener) {
        let mut map = self.by_state.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, started)| started.elapsed() < PENDING_LIFETIME);
        map.insert(state.to_owned(), (listener, Instant::now()));
    }

    fn take(&self, state: &str) -> Option<Listener> {
        let mut map = self.by_state.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(state).map(|(listener, _)| listener)
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
    let listener: Listener = Arc::new(hub.sign_in_listener(&id));
    let auth = {
        let listener = listener.clone();
        auth.with_listener(move |event| listener(event))
    };
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
    if let Err(error) = hub
        .store()
        .put_pending_sign_in(&id, &pending, PENDING_LIFETIME)
        .await
    {
        return sign_in_problem(SignInError::Store(error)).into_response();
    }
    app.logins.insert(&pending.state, listener);
    let url = pending.authorization_url.to_string();
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
    let unknown = || {
        callback_page(
            StatusCode::BAD_REQUEST,
            "This sign-in link is unknown or has expired. Start the sign-in again.",
        )
    };
    let Some(state) = callback.state.as_deref() else {
        return unknown();
    };
    let listener = app.logins.take(state);
    let store = app.hub.store();
    let login = match store.take_pending_sign_in(state).await {
        Ok(Some(login)) => login,
        Ok(None) => return unknown(),
        Err(error) => {
            tracing::warn!(%error, "reading a pending sign-in from the store failed");
            return callback_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "The sign-in cannot be completed right now: the store did not answer. Start the sign-in again.",
            );
        }
    };
    let id = login.server;
    let store = store.for_workspace(login.workspace);
    let auth = match server_auth_for(&store, &id, app.hub.oauth()).await {
        Ok((_, auth)) => auth,
        Err(error) => {
            return callback_page(
                StatusCode::BAD_REQUEST,
                &format!("Signing in to '{id}' failed: {error}"),
            );
        }
    };
    let auth = match listener {
        Some(listener) => auth.with_listener(move |event| listener(event)),
        None => auth,
    };
    match auth.complete_sign_in(&login.authorization, &callback).await {
        // The server's task sees the new tokens (through the sign-in listener here, or in the
        // store on another replica) and connects.
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
