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
//! is logged.
//!
//! In a multi-user daemon a sign-in is also bound to the browser that started it (RFC 6749
//! §10.12): the start sets an HttpOnly cookie, and a redirect arriving without it (another
//! person's browser, sent a link by someone who started a sign-in for themselves) is not
//! completed until the user who started it proves it is them, with their own API key or
//! identity-provider token, on a page that says whose sign-in it is. A press of a button would
//! not do: whoever sent the link would have the person who pressed it grant their upstream
//! account into the sender's workspace (authorization-code injection). The process that started it also keeps, in memory, the listener that shows its
//! progress in the server's state; a sign-in completed elsewhere shows when the server's task
//! next finds the tokens in the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_core::sync::lock;

use axum::Json;
use axum::extract::{Form, Path, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;
use switchboard_hub::{Hub, SignInError, begin_sign_in, server_auth_for};
use switchboard_oauth::AuthorizationCallback;
use switchboard_store::PendingSignIn;

use crate::{ApiError, AppState, api_error};

/// How long a started sign-in may wait for its redirect.
const PENDING_LIFETIME: Duration = Duration::from_secs(600);
/// The callback path, relative to the daemon's address.
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";
/// The cookie that tells the browser which started a sign-in.
const BROWSER_COOKIE: &str = "switchboard_browser";

/// The value of this daemon's browser cookie in `headers`, if the browser sent one. (Parsed by
/// hand: one name in a `Cookie` header needs no cookie library.)
fn browser_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, value)| *name == BROWSER_COOKIE && value.len() >= 32)
        .map(|(_, value)| value.to_owned())
}

/// Shows a sign-in's progress in its server's state (see [`Hub::sign_in_listener`]).
type Listener = Arc<dyn Fn(switchboard_oauth::AuthEvent) + Send + Sync>;

/// The listeners of the sign-ins this process started, by `state`, until their redirect comes
/// back or they expire.
#[derive(Default)]
pub(crate) struct PendingLogins {
    by_state: Mutex<HashMap<String, (Listener, Instant)>>,
}

/// How often a process checks the store for how its sign-ins ended elsewhere.
const OUTCOME_CHECK: Duration = Duration::from_secs(2);

impl PendingLogins {
    /// Remembers `listener` for the sign-in with `state`, and follows it in `store` until it
    /// ends: a redirect completed by another process (another replica) that failed is shown
    /// here too, through `listener`.
    fn insert(self: &Arc<Self>, state: &str, listener: Listener, store: switchboard_store::Store) {
        {
            let mut map = lock(&self.by_state);
            map.retain(|_, (_, started)| started.elapsed() < PENDING_LIFETIME);
            map.insert(state.to_owned(), (listener, Instant::now()));
        }
        let (logins, state) = (Arc::downgrade(self), state.to_owned());
        tokio::spawn(async move {
            let started = Instant::now();
            while started.elapsed() < PENDING_LIFETIME {
                tokio::time::sleep(OUTCOME_CHECK).await;
                let Some(logins) = logins.upgrade() else {
                    return;
                };
                if !logins.holds(&state) {
                    return; // completed here
                }
                match store.pending_sign_in_outcome(&state).await {
                    Ok(switchboard_store::SignInOutcome::Waiting) => {}
                    Ok(switchboard_store::SignInOutcome::Failed(message)) => {
                        if let Some(listener) = logins.take(&state) {
                            listener(switchboard_oauth::AuthEvent::Failed { message });
                        }
                        return;
                    }
                    // Completed elsewhere: the server's task finds the tokens in the store.
                    Ok(switchboard_store::SignInOutcome::Gone) => {
                        logins.take(&state);
                        return;
                    }
                    Err(error) => {
                        tracing::debug!(%error, "cannot read how a sign-in ended; trying again");
                    }
                }
            }
        });
    }

    fn holds(&self, state: &str) -> bool {
        let map = lock(&self.by_state);
        map.contains_key(state)
    }

    fn take(&self, state: &str) -> Option<Listener> {
        let mut map = lock(&self.by_state);
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
    app: AppState,
    Path(id): Path<String>,
    Query(query): Query<LoginQuery>,
    headers: HeaderMap,
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
    let pending = match begin_sign_in(hub.http(), &def, &auth, &app.callback_url, &more).await {
        Ok(pending) => pending,
        Err(error) => return sign_in_problem(error).into_response(),
    };
    let switchboard_core::TransportSpec::Http {
        url: server_url, ..
    } = &def.transport
    else {
        return sign_in_problem(SignInError::NotHttp(id)).into_response();
    };
    // The browser asking (the console's page) keeps a cookie of this daemon's; the redirect
    // must come back to the same browser to complete without a question.
    let (browser, new_cookie) = match browser_cookie(&headers) {
        Some(cookie) => (cookie, false),
        None => (switchboard_oauth::random_token(), true),
    };
    if let Err(error) = hub
        .store()
        .put_pending_sign_in(
            &id,
            server_url.as_str(),
            &pending,
            Some(&browser),
            PENDING_LIFETIME,
        )
        .await
    {
        return sign_in_problem(SignInError::Store(error)).into_response();
    }
    app.logins
        .insert(&pending.state, listener, hub.store().clone());
    let url = pending.authorization_url.to_string();
    let mut response = Json(json!({
        "authorization_url": url,
        "expires_in": PENDING_LIFETIME.as_secs(),
    }))
    .into_response();
    if new_cookie {
        let secure = if app.callback_url.starts_with("https:") {
            "; Secure"
        } else {
            ""
        };
        if let Ok(cookie) = HeaderValue::from_str(&format!(
            "{BROWSER_COOKIE}={browser}; Path=/; HttpOnly; SameSite=Lax{secure}"
        )) {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
    }
    response
}

/// The small HTML page a browser sees at the end of a sign-in (also used by `switchboard login`).
pub fn callback_page(status: StatusCode, text: &str) -> Response {
    let escaped = escape_html(text);
    (
        status,
        PAGE_HEADERS,
        Html(format!(
            "<!doctype html><meta charset=utf-8><title>Switchboard</title><p>{escaped}</p>"
        )),
    )
        .into_response()
}

/// The headers of a page only this daemon may show, in no frame: the sign-in pages.
const PAGE_HEADERS: [(header::HeaderName, &str); 4] = [
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    ),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::REFERRER_POLICY, "no-referrer"),
    (header::CACHE_CONTROL, "no-store"),
];

/// `text` as HTML text.
fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `value` as a quoted HTML attribute's value.
fn escape_attribute(value: &str) -> String {
    escape_html(value)
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Asks the person whose browser a redirect reached without the starting browser's cookie
/// whether they started this sign-in; continuing posts the redirect's parameters back.
fn confirmation_page(login: &PendingSignIn, pairs: &[(String, String)]) -> Response {
    let whose = match &login.workspace {
        switchboard_core::Workspace::User(principal) => {
            format!("user '{}' of tenant '{}'", principal.user, principal.tenant)
        }
        switchboard_core::Workspace::Local => "this daemon's operator".to_owned(),
    };
    let fields: String = pairs
        .iter()
        .filter(|(name, _)| {
            matches!(
                name.as_str(),
                "code" | "state" | "iss" | "error" | "error_description"
            )
        })
        .map(|(name, value)| {
            format!(
                "<input type=hidden name=\"{}\" value=\"{}\">",
                escape_attribute(name),
                escape_attribute(value)
            )
        })
        .collect();
    let text = format!(
        "This signs {whose} in to '{}', with the account you just used. It was started in \
         another browser. Only that user can finish it, with their own Switchboard key or \
         sign-in token; if someone sent you the link, close this page.",
        login.server
    );
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>Switchboard: confirm the sign-in</title>\
         <h1>Finish this sign-in?</h1><p id=whose>{}</p>\
         <form method=post action=\"{CALLBACK_PATH}\">{fields}\
         <label>Your Switchboard key or sign-in token \
         <input type=password name=credential autocomplete=off required></label> \
         <button type=submit>Continue</button></form>",
        escape_html(&text)
    );
    (StatusCode::OK, PAGE_HEADERS, Html(body)).into_response()
}

/// `GET /oauth/callback`: completes the sign-in, or, in a user's workspace when the redirect
/// reached another browser than the one that started it, asks first.
pub(crate) async fn callback(
    app: AppState,
    headers: HeaderMap,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let callback = AuthorizationCallback::from_query_pairs(pairs.clone());
    let Some(state) = callback.state.as_deref() else {
        return unknown_sign_in();
    };
    let login = match app.hub.store().pending_sign_in(state).await {
        Ok(Some(login)) => login,
        Ok(None) => return unknown_sign_in(),
        Err(error) => return store_unavailable(&error),
    };
    let same_browser = login.started_by_browser(browser_cookie(&headers).as_deref());
    if matches!(login.workspace, switchboard_core::Workspace::User(_)) && !same_browser {
        return confirmation_page(&login, &pairs);
    }
    complete(&app, callback).await
}

/// `POST /oauth/callback`: a sign-in that reached another browser, confirmed there. In a user's
/// workspace the form must carry that user's own credential (`credential`: their API key or
/// identity-provider token); anything else leaves the sign-in waiting for them.
pub(crate) async fn confirmed_callback(
    app: AppState,
    Form(pairs): Form<Vec<(String, String)>>,
) -> Response {
    let credential = pairs
        .iter()
        .find(|(name, _)| name == "credential")
        .map(|(_, value)| value.trim().to_owned());
    let callback = AuthorizationCallback::from_query_pairs(
        pairs
            .into_iter()
            .filter(|(name, _)| name != "credential")
            .collect::<Vec<_>>(),
    );
    let Some(state) = callback.state.as_deref() else {
        return unknown_sign_in();
    };
    let login = match app.hub.store().pending_sign_in(state).await {
        Ok(Some(login)) => login,
        Ok(None) => return unknown_sign_in(),
        Err(error) => return store_unavailable(&error),
    };
    if let switchboard_core::Workspace::User(starter) = &login.workspace {
        let proven = match (credential.filter(|c| !c.is_empty()), &app.users) {
            (Some(credential), Some(users)) => users
                .principal_of(&credential)
                .await
                .is_some_and(|p| p.tenant == starter.tenant && p.user == starter.user),
            _ => false,
        };
        if !proven {
            return callback_page(
                StatusCode::FORBIDDEN,
                &format!(
                    "Only user '{}' of tenant '{}', who started this sign-in, can finish it, with their own Switchboard key or sign-in token. Nothing was signed in.",
                    starter.user, starter.tenant
                ),
            );
        }
    }
    complete(&app, callback).await
}

fn unknown_sign_in() -> Response {
    callback_page(
        StatusCode::BAD_REQUEST,
        "This sign-in link is unknown or has expired. Start the sign-in again.",
    )
}

fn store_unavailable(error: &switchboard_store::StoreError) -> Response {
    tracing::warn!(%error, "reading a pending sign-in from the store failed");
    callback_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The sign-in cannot be completed right now: the store did not answer. Start the sign-in again.",
    )
}

/// Claims the sign-in `callback` names and redeems its code, into the workspace that started
/// it and the server row it started for; says how it ended where it started (through its
/// listener when that is this process, else through the store).
async fn complete(app: &AppState, callback: AuthorizationCallback) -> Response {
    let Some(state) = callback.state.as_deref() else {
        return unknown_sign_in();
    };
    let listener = app.logins.take(state);
    let store = app.hub.store();
    let login = match store.claim_pending_sign_in(state).await {
        Ok(Some(login)) => login,
        Ok(None) => return unknown_sign_in(),
        Err(error) => return store_unavailable(&error),
    };
    let id = login.server.clone();
    let workspace = login.workspace.clone();
    let outcome = redeem(app, login, &callback).await;
    app.hub
        .audit_sign_in(&workspace, &id, outcome.as_ref().err().map(String::as_str));
    let failure_elsewhere = outcome.as_ref().err().filter(|_| listener.is_none());
    if let Err(error) = store
        .finish_pending_sign_in(state, failure_elsewhere.map(String::as_str))
        .await
    {
        tracing::warn!(%error, "cannot record how a sign-in ended");
    }
    // The server's task sees the new tokens (at once through the listener here, or in the
    // store on another replica) and connects.
    match outcome {
        Ok(()) => {
            if let Some(listener) = listener {
                listener(switchboard_oauth::AuthEvent::Authenticated);
            }
            callback_page(
                StatusCode::OK,
                &format!("Signed in to '{id}'. You can close this tab."),
            )
        }
        Err(message) => {
            let page = callback_page(
                StatusCode::BAD_REQUEST,
                &format!("Signing in to '{id}' failed: {message}"),
            );
            if let Some(listener) = listener {
                listener(switchboard_oauth::AuthEvent::Failed { message });
            }
            page
        }
    }
}

/// Redeems the code of a claimed sign-in; why not, when it fails.
async fn redeem(
    app: &AppState,
    login: PendingSignIn,
    callback: &AuthorizationCallback,
) -> Result<(), String> {
    let store = app.hub.store().for_workspace(login.workspace);
    let id = &login.server;
    let (def, auth) = server_auth_for(&store, id, app.hub.oauth())
        .await
        .map_err(|error| error.to_string())?;
    // The tokens are for the server the sign-in started for: not for one redefined, replaced
    // or shadowed meanwhile.
    let same_server = match (&def.transport, store.grant_key(id).await) {
        (switchboard_core::TransportSpec::Http { url, .. }, Ok(key)) => {
            url.as_str() == login.url && key.server == login.row_key
        }
        _ => false,
    };
    if !same_server {
        return Err("the server changed since the sign-in started; start it again".into());
    }
    auth.complete_sign_in(&login.authorization, callback)
        .await
        .map_err(|error| error.to_string())
}

/// `GET /oauth/client-metadata.json`.
pub(crate) async fn client_metadata(app: AppState) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_browser_cookie_is_found_among_others_and_a_short_one_is_not_taken() {
        let long = "a".repeat(43);
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("theme=dark"));
        headers.append(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {BROWSER_COOKIE}={long}; last=2")).unwrap(),
        );
        assert_eq!(browser_cookie(&headers), Some(long));
        let mut short = HeaderMap::new();
        short.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{BROWSER_COOKIE}=guessable")).unwrap(),
        );
        assert_eq!(browser_cookie(&short), None);
        assert_eq!(browser_cookie(&HeaderMap::new()), None);
    }

    #[test]
    fn values_from_the_redirect_cannot_leave_their_attribute() {
        let hostile = r#""><script>alert('x')</script>&"#;
        let escaped = escape_attribute(hostile);
        assert!(!escaped.contains(['"', '<', '>', '\'']), "{escaped}");
        assert_eq!(
            escaped,
            "&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;"
        );
    }
}
