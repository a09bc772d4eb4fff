//! `switchboard login` and `switchboard logout`.
//!
//! Login runs the authorization-code flow with the system browser: a callback listener on a
//! random loopback port (so two logins at once never collide), the authorization URL opened in
//! the browser or printed with `--no-browser`, and the redirect checked against the request's
//! `state` before anything else happens. Discovery, registration, PKCE and the token exchange are
//! the same code the daemon and the conformance adapter use (`switchboard_oauth::ServerAuth`),
//! and the tokens land in the store, where a running daemon picks them up.

use std::time::Duration;

use anyhow::{Context, bail};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use switchboard_gateway::callback_page;
use switchboard_hub::{OAuthOptions, begin_sign_in, server_auth_for};
use switchboard_oauth::AuthorizationCallback;
use switchboard_store::Store;
use tokio::sync::mpsc;

use crate::cli::{LoginArgs, LogoutArgs};
use crate::parse_id;

const CALLBACK_PATH: &str = "/oauth/callback";

pub(crate) async fn login(store: &Store, args: LoginArgs) -> anyhow::Result<i32> {
    let id = parse_id(&args.server)?;
    let (def, auth) = server_auth_for(store, &id, &OAuthOptions::from_env()).await?;

    // A client registered with one exact redirect URI gets that one; otherwise any free port
    // (a dynamic registration is good for every loopback port).
    let configured = def
        .oauth_client
        .as_ref()
        .and_then(|client| client.redirect_uri.as_deref())
        .map(loopback_redirect)
        .transpose()?;
    let (listener, redirect_uri) = match configured {
        Some(uri) => {
            let address = uri
                .socket_addrs(|| None)?
                .into_iter()
                .next()
                .context("the configured redirect URI names no address")?;
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| {
                    format!("cannot listen on {address} for the configured redirect URI {uri}")
                })?;
            (listener, uri)
        }
        None => {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .context("cannot open a loopback port for the sign-in redirect")?;
            let port = listener.local_addr()?.port();
            let uri = url::Url::parse(&format!("http://127.0.0.1:{port}{CALLBACK_PATH}"))?;
            (listener, uri)
        }
    };
    let pending = begin_sign_in(&def, &auth, redirect_uri.as_str(), &args.scope).await?;

    let (tx, mut rx) = mpsc::channel::<AuthorizationCallback>(1);
    let state = pending.state.clone();
    let router = axum::Router::new()
        .route(redirect_uri.path(), axum::routing::get(callback))
        .with_state(CallbackState {
            expected_state: state,
            server: id.to_string(),
            deliver: tx,
        });
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn({
        let stop = stop.clone();
        async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
        }
    });

    let url = pending.authorization_url.to_string();
    println!("Sign in to '{id}' at:\n{url}");
    if !args.no_browser
        && let Err(error) = webbrowser::open(&url)
    {
        eprintln!("(could not open a browser: {error}; open the URL above yourself)");
    }
    let received = tokio::time::timeout(Duration::from_secs(args.timeout), rx.recv()).await;
    stop.cancel();
    let _ = server.await;
    let callback = match received {
        Ok(Some(callback)) => callback,
        _ => bail!(
            "no sign-in redirect arrived within {} s; run `switchboard login {id}` again",
            args.timeout
        ),
    };
    auth.complete_sign_in(&pending, &callback)
        .await
        .with_context(|| format!("signing in to '{id}' failed"))?;
    println!("Signed in to '{id}'.");
    Ok(0)
}

/// `text` as a redirect URI `switchboard login` can listen at: `http` on a loopback address
/// with an explicit port.
pub(crate) fn loopback_redirect(text: &str) -> anyhow::Result<url::Url> {
    let uri = url::Url::parse(text).with_context(|| format!("'{text}' is not a URL"))?;
    let loopback = match uri.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        _ => false,
    };
    if uri.scheme() != "http" || !loopback || uri.port().is_none() {
        bail!(
            "the redirect URI must be http on a loopback address with a port, such as \
             http://127.0.0.1:8976/oauth/callback, where `switchboard login` can listen; got {text}"
        );
    }
    Ok(uri)
}

#[derive(Clone)]
struct CallbackState {
    expected_state: String,
    server: String,
    deliver: mpsc::Sender<AuthorizationCallback>,
}

/// The redirect target. Only a redirect carrying this login's `state` is taken; anything else
/// (a stale tab, another login's redirect, a forged request) is refused and the wait goes on.
async fn callback(
    State(state): State<CallbackState>,
    Query(query): Query<Vec<(String, String)>>,
) -> axum::response::Response {
    let callback = AuthorizationCallback::from_query_pairs(query);
    if callback.state.as_deref() != Some(state.expected_state.as_str()) {
        return callback_page(
            StatusCode::BAD_REQUEST,
            "This sign-in link does not belong to the login in progress.",
        );
    }
    let page = received_page(&state.server, &callback);
    let _ = state.deliver.try_send(callback);
    callback_page(StatusCode::OK, &page)
}

/// What the browser is told once the redirect of this login arrived: the truth when the
/// authorization server refused (the user denied access, say), since the CLI ends with that too.
fn received_page(server: &str, callback: &AuthorizationCallback) -> String {
    match &callback.error {
        Some(error) => {
            let description = callback
                .error_description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            format!(
                "The sign-in to '{server}' was not completed: the authorization server answered \
                 {error}{description}. Run `switchboard login {server}` to try again; you can \
                 close this tab."
            )
        }
        None => format!("Switchboard received the sign-in for '{server}'. You can close this tab."),
    }
}

pub(crate) async fn logout(store: &Store, args: LogoutArgs) -> anyhow::Result<i32> {
    let id = parse_id(&args.server)?;
    let (_, auth) = server_auth_for(store, &id, &OAuthOptions::from_env()).await?;
    if !auth.is_signed_in().await? {
        println!("Not signed in to '{id}'.");
        return Ok(0);
    }
    let revoked = auth.sign_out().await?;
    if revoked {
        println!("Signed out of '{id}': the server revoked the tokens and they are deleted.");
    } else {
        println!(
            "Signed out of '{id}': the tokens are deleted (the server offers no revocation, or \
             refused it)."
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_redirect_must_be_a_loopback_address_with_a_port() {
        assert!(loopback_redirect("http://127.0.0.1:8976/oauth/callback").is_ok());
        assert!(loopback_redirect("http://[::1]:8976/cb").is_ok());
        for refused in [
            "https://127.0.0.1:8976/cb",
            "http://example.com:8976/cb",
            "http://127.0.0.1/cb",
            "not a url",
        ] {
            assert!(loopback_redirect(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn a_refused_sign_in_is_not_called_received() {
        let denied = AuthorizationCallback::from_query_pairs([
            ("state", "s"),
            ("error", "access_denied"),
            ("error_description", "the user said no"),
        ]);
        let page = received_page("notion", &denied);
        assert!(
            page.contains("was not completed")
                && page.contains("access_denied: the user said no")
                && page.contains("switchboard login notion"),
            "{page}"
        );
        let granted = AuthorizationCallback::from_query_pairs([("state", "s"), ("code", "c")]);
        assert!(received_page("notion", &granted).contains("received the sign-in"));
    }
}
