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
//! The workflow is the hub's (`switchboard_hub::Hub::start_sign_in` and `complete_sign_in`: the
//! pending sign-in kept in the store, found by its `state` from any replica, redeemed into the
//! workspace that started it); this module reads the HTTP requests and writes the answers.
//!
//! In a multi-user daemon a sign-in is also bound to the browser that started it (RFC 6749
//! §10.12): the start sets an HttpOnly cookie, and a redirect arriving without it (another
//! person's browser, sent a link by someone who started a sign-in for themselves) is not
//! completed until the user who started it proves it is them, with their own API key or
//! identity-provider token, on a page that says whose sign-in it is. A press of a button would
//! not do: whoever sent the link would have the person who pressed it grant their upstream
//! account into the sender's workspace (authorization-code injection).

use axum::Json;
use axum::extract::{Form, Path, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;
use switchboard_hub::{PendingSignIn, SIGN_IN_LIFETIME, StoreError};
use switchboard_oauth::AuthorizationCallback;

use crate::wire::OnTheWire;
use crate::{AppState, api_error};

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
    let more: Vec<String> = query
        .scope
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    // The browser asking (the console's page) keeps a cookie of this daemon's; the redirect
    // must come back to the same browser to complete without a question.
    let (browser, new_cookie) = match browser_cookie(&headers) {
        Some(cookie) => (cookie, false),
        None => (switchboard_oauth::random_token(), true),
    };
    let url = match app
        .hub
        .start_sign_in(&app.logins, &id, &app.callback_url, &more, &browser)
        .await
    {
        Ok(url) => url.to_string(),
        Err(error) => return error.api_error().into_response(),
    };
    let mut response = Json(json!({
        "authorization_url": url,
        "expires_in": SIGN_IN_LIFETIME.as_secs(),
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
    let login = match app.hub.pending_sign_in(state).await {
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
    let login = match app.hub.pending_sign_in(state).await {
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

fn store_unavailable(error: &StoreError) -> Response {
    tracing::warn!(%error, "reading a pending sign-in from the store failed");
    callback_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The sign-in cannot be completed right now: the store did not answer. Start the sign-in again.",
    )
}

/// Completes the sign-in `callback` names (see [`switchboard_hub::Hub::complete_sign_in`]) and
/// says how it ended.
async fn complete(app: &AppState, callback: AuthorizationCallback) -> Response {
    let completed = match app.hub.complete_sign_in(&app.logins, &callback).await {
        Ok(Some(completed)) => completed,
        Ok(None) => return unknown_sign_in(),
        Err(error) => return store_unavailable(&error),
    };
    let id = completed.server;
    match completed.outcome {
        Ok(()) => callback_page(
            StatusCode::OK,
            &format!("Signed in to '{id}'. You can close this tab."),
        ),
        Err(message) => callback_page(
            StatusCode::BAD_REQUEST,
            &format!("Signing in to '{id}' failed: {message}"),
        ),
    }
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
