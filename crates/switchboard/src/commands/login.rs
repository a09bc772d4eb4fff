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

use super::parse_id;
use crate::cli::{LoginArgs, LogoutArgs};

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
    let pending = begin_sign_in(
        &switchboard_upstream::HttpClients::new(),
        &def,
        &auth,
        redirect_uri.as_str(),
        &args.scope,
    )
    .await?;
    let url = pending.authorization_url.to_string();
    // The URL is made from the authorization server's metadata: shown, not obeyed.
    println!("Sign in to '{id}' at:\n{}", crate::render::safe(&url));
    let redirect = wait_for_redirect(
        listener,
        &url,
        &redirect_uri,
        &pending.state,
        id.as_str(),
        !args.no_browser,
        Duration::from_secs(args.timeout),
    )
    .await?;
    // The browser's page waits for this, so it says how the sign-in ended (a redirect with a
    // wrong `iss`, a refused code), not only that the redirect arrived.
    let finished = auth.complete_sign_in(&pending, &redirect.callback).await;
    let page = match &finished {
        Ok(()) => format!("Signed in to '{id}'. You can close this tab."),
        Err(_) if redirect.callback.error.is_some() => {
            received_page(id.as_str(), &redirect.callback)
        }
        Err(error) => format!(
            "Signing in to '{id}' failed: {error}. Run `switchboard login {id}` to try again; \
             you can close this tab."
        ),
    };
    redirect.answer(finished.is_ok(), page).await;
    finished.with_context(|| format!("signing in to '{id}' failed"))?;
    println!("Signed in to '{id}'.");
    Ok(0)
}

/// The redirect of a sign-in, whose browser tab waits for [`Redirect::answer`] (or, if that
/// never comes, is told that the terminal has the outcome).
struct Redirect {
    callback: AuthorizationCallback,
    page: Option<tokio::sync::oneshot::Sender<(bool, String)>>,
    stop: tokio_util::sync::CancellationToken,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Redirect {
    /// Shows the waiting tab `page` (with 200 if `succeeded`, else 400) and stops listening
    /// once it is sent.
    async fn answer(mut self, succeeded: bool, page: String) {
        if let Some(tab) = self.page.take() {
            let _ = tab.send((succeeded, page));
        }
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.serving).await;
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Opens the authorization request `url` in the browser (when `open_browser`; the caller
/// printed it), serves `redirect_uri` on `listener`, and returns the first redirect carrying
/// `state`, within `timeout`; its tab waits for [`Redirect::answer`]. Used by `login` and by a
/// command's step-up ([`BrowserAuthorizer`]).
async fn wait_for_redirect(
    listener: tokio::net::TcpListener,
    url: &str,
    redirect_uri: &url::Url,
    state: &str,
    server: &str,
    open_browser: bool,
    timeout: Duration,
) -> anyhow::Result<Redirect> {
    let (tx, mut rx) = mpsc::channel::<Arrived>(1);
    let router = axum::Router::new()
        .route(redirect_uri.path(), axum::routing::get(callback))
        .with_state(CallbackState {
            expected_state: state.to_owned(),
            server: server.to_owned(),
            deliver: tx,
        });
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn({
        let stop = stop.clone();
        async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
        }
    });
    if open_browser && let Err(error) = webbrowser::open(url) {
        eprintln!("(could not open a browser: {error}; open the URL above yourself)");
    }
    let received = tokio::time::timeout(timeout, rx.recv()).await;
    match received {
        Ok(Some((callback, page))) => Ok(Redirect {
            callback,
            page: Some(page),
            stop,
            serving,
        }),
        _ => {
            stop.cancel();
            let _ = serving.await;
            bail!(
                "no sign-in redirect arrived within {} s; run `switchboard login {server}` again",
                timeout.as_secs()
            )
        }
    }
}

/// A redirect of this login, and where its tab waits for the page to show.
type Arrived = (
    AuthorizationCallback,
    tokio::sync::oneshot::Sender<(bool, String)>,
);

/// How long a redirect's tab waits for the sign-in's outcome before it is told to look at the
/// terminal.
const OUTCOME_WAIT: Duration = Duration::from_secs(60);

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

/// A person at this terminal, asked for more scope while a command runs (a 403
/// `insufficient_scope`): the authorization URL is printed on stderr and opened in the browser
/// (unless `--no-browser`), and the redirect comes back to a loopback port of this process.
pub(crate) struct BrowserAuthorizer {
    /// Bound once, so the redirect URI stays the same for every attempt; each attempt serves a
    /// clone of it.
    listener: std::net::TcpListener,
    redirect_uri: url::Url,
    server: String,
    open_browser: bool,
    timeout: Duration,
}

impl BrowserAuthorizer {
    /// Listens on a free loopback port for `server`'s redirects.
    pub(crate) fn bind(
        server: &str,
        open_browser: bool,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .context("cannot open a loopback port for the sign-in redirect")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            listener,
            redirect_uri: url::Url::parse(&format!("http://127.0.0.1:{port}{CALLBACK_PATH}"))?,
            server: server.to_owned(),
            open_browser,
            timeout,
        })
    }
}

impl switchboard_oauth::Authorizer for BrowserAuthorizer {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.to_string()
    }

    fn authorize<'a>(
        &'a self,
        url: &'a url::Url,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<AuthorizationCallback, switchboard_oauth::OAuthError>,
                > + Send
                + 'a,
        >,
    > {
        Box::pin(async move {
            let failed = |error: anyhow::Error| {
                switchboard_oauth::OAuthError::SignInRequired(format!("{error:#}"))
            };
            let state = url
                .query_pairs()
                .find(|(key, _)| key == "state")
                .map(|(_, value)| value.into_owned())
                .unwrap_or_default();
            let listener = self
                .listener
                .try_clone()
                .and_then(tokio::net::TcpListener::from_std)
                .map_err(|e| failed(e.into()))?;
            eprintln!(
                "'{}' needs more permissions for this; grant them at:\n{url}",
                self.server
            );
            // The tab is told the redirect arrived: the sign-in goes on in the command, which
            // says how it ended.
            let redirect = wait_for_redirect(
                listener,
                url.as_str(),
                &self.redirect_uri,
                &state,
                &self.server,
                self.open_browser,
                self.timeout,
            )
            .await
            .map_err(failed)?;
            let callback = redirect.callback.clone();
            let page = received_page(&self.server, &callback);
            redirect.answer(callback.error.is_none(), page).await;
            Ok(callback)
        })
    }
}

#[derive(Clone)]
struct CallbackState {
    expected_state: String,
    server: String,
    deliver: mpsc::Sender<Arrived>,
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
    let (tab, outcome) = tokio::sync::oneshot::channel();
    if state.deliver.try_send((callback, tab)).is_err() {
        return callback_page(
            StatusCode::CONFLICT,
            "This sign-in's redirect arrived already; its first tab says how it ended.",
        );
    }
    match tokio::time::timeout(OUTCOME_WAIT, outcome).await {
        Ok(Ok((true, page))) => callback_page(StatusCode::OK, &page),
        Ok(Ok((false, page))) => callback_page(StatusCode::BAD_REQUEST, &page),
        _ => callback_page(
            StatusCode::OK,
            &format!(
                "Switchboard received the sign-in for '{}'; the terminal says how it ended. You \
                 can close this tab.",
                state.server
            ),
        ),
    }
}

/// What the browser is told once the redirect of a sign-in arrived, when the tab does not wait
/// for the code's exchange (a command's step-up): the truth when the authorization server
/// refused (the user denied access, say), since the command ends with that too; otherwise that
/// the terminal has the outcome.
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
        None => format!(
            "Switchboard received the sign-in for '{server}'; the terminal says whether it \
             succeeded. You can close this tab."
        ),
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
