//! Signing in as a user does it: `switchboard login --no-browser`, the redirect arriving on the
//! loopback callback, calls with the stored tokens, `logout` revoking them, two logins at once,
//! and a daemon killed in the middle of a token refresh. The upstream is the in-repo
//! OAuth-protected fixture (its authorization server redirects at once, as a browser session
//! that is already signed in would).

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{
    call_through_daemon, command, first_url, run, server_status, spawn_daemon, start_daemon_login,
    start_login, start_login_with, text, wait_for_state,
};
use switchboard_fixtures::Era;
use switchboard_fixtures::oauth::{OAuthFixture, protected};
use switchboard_oauth::GrantKey;

/// Plays the browser: follows the authorization URL to the loopback callback.
async fn visit(url: &str) -> reqwest::StatusCode {
    reqwest::Client::new()
        .get(url)
        .send()
        .await
        .unwrap()
        .status()
}

async fn add_server(data_dir: &Path, id: &str, fixture: &OAuthFixture) {
    let output = run(data_dir, &["server", "add", id, &fixture.url]).await;
    assert!(output.status.success(), "{}", text(&output));
}

async fn login(data_dir: &Path, id: &str) {
    let (mut child, url) = start_login(data_dir, id).await;
    assert_eq!(visit(&url).await, reqwest::StatusCode::OK);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "login failed");
}

async fn call_echo(data_dir: &Path, id: &str) -> Output {
    run(
        data_dir,
        &["call", &format!("{id}/echo"), "--arg", "message=hi"],
    )
    .await
}

#[tokio::test]
async fn login_then_call_with_stored_tokens_then_logout_revokes_them() {
    let fixture = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "protected", &fixture).await;

    let before = call_echo(dir.path(), "protected").await;
    assert!(!before.status.success());
    assert!(
        String::from_utf8_lossy(&before.stderr).contains("switchboard login protected"),
        "the error tells the user what to do: {}",
        text(&before)
    );

    login(dir.path(), "protected").await;
    let called = call_echo(dir.path(), "protected").await;
    assert!(called.status.success(), "{}", text(&called));
    assert!(String::from_utf8_lossy(&called.stdout).contains("hi"));
    let shown = run(dir.path(), &["server", "show", "protected", "--json"]).await;
    for secret in ["at-", "rt-"] {
        assert!(
            !String::from_utf8_lossy(&shown.stdout).contains(secret),
            "tokens are never printed: {}",
            text(&shown)
        );
    }

    let logout = run(dir.path(), &["logout", "protected"]).await;
    assert!(logout.status.success(), "{}", text(&logout));
    assert!(
        String::from_utf8_lossy(&logout.stdout).contains("revoked"),
        "{}",
        text(&logout)
    );
    assert_eq!(
        fixture.auth.revocations.load(Ordering::SeqCst),
        2,
        "access and refresh token"
    );
    let after = call_echo(dir.path(), "protected").await;
    assert!(!after.status.success(), "signed out: {}", text(&after));

    // Signing in again listens on another loopback port, and reuses the client registered for
    // the first (RFC 8252 §7.3: any port for a loopback redirect).
    login(dir.path(), "protected").await;
    assert_eq!(fixture.auth.registrations.load(Ordering::SeqCst), 1);
    assert!(call_echo(dir.path(), "protected").await.status.success());
}

/// A call refused for lack of scope (403 `insufficient_scope`) with nobody to ask (a script)
/// tells the user to sign in again, and that sign-in asks for the scope the server wanted, with
/// the ones granted before: the call then works. With a person at hand the call asks for the
/// scope itself and goes through. `login --scope` asks for more by hand.
#[tokio::test]
async fn a_call_that_needs_more_scope_is_granted_it_by_the_next_login() {
    let fixture = protected(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "protected", &fixture).await;
    login(dir.path(), "protected").await;
    *fixture.auth.tools_call_scope.lock().unwrap() = "admin".into();

    let refused = call_echo(dir.path(), "protected").await;
    assert!(!refused.status.success());
    let said = text(&refused);
    assert!(
        said.contains("admin") && said.contains("switchboard login protected"),
        "{said}"
    );
    login(dir.path(), "protected").await;
    let asked = fixture.auth.authorizations.lock().unwrap().clone();
    let last = asked.last().cloned().flatten().unwrap_or_default();
    let first = asked.first().cloned().flatten().unwrap_or_default();
    assert!(last.split(' ').any(|s| s == "admin"), "{asked:?}");
    for granted in first.split(' ').filter(|s| !s.is_empty()) {
        assert!(last.split(' ').any(|s| s == granted), "{asked:?}");
    }
    let called = call_echo(dir.path(), "protected").await;
    assert!(called.status.success(), "{}", text(&called));

    // During a call, with a person at hand (`--no-browser` prints the URL on stderr): the
    // call asks for the scope, waits for the sign-in, and goes through.
    *fixture.auth.tools_call_scope.lock().unwrap() = "deploy".into();
    let mut call = command(
        dir.path(),
        &[
            "call",
            "protected/echo",
            "--arg",
            "message=hi",
            "--no-browser",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let url = first_url(call.stderr.take().unwrap()).await;
    assert_eq!(visit(&url).await, reqwest::StatusCode::OK);
    let done = tokio::time::timeout(Duration::from_secs(20), call.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(done.status.success(), "{}", text(&done));
    assert!(String::from_utf8_lossy(&done.stdout).contains("hi"));
    let asked = fixture.auth.authorizations.lock().unwrap().clone();
    let last = asked.last().cloned().flatten().unwrap_or_default();
    assert!(
        last.split(' ').any(|s| s == "deploy") && last.split(' ').any(|s| s == "admin"),
        "the union of scopes: {asked:?}"
    );

    // By hand: `login --scope`.
    let (mut child, url) = start_login_with(dir.path(), "protected", &["--scope", "reports"]).await;
    assert_eq!(visit(&url).await, reqwest::StatusCode::OK);
    assert!(child.wait().await.unwrap().success());
    let asked = fixture.auth.authorizations.lock().unwrap().clone();
    let last = asked.last().cloned().flatten().unwrap_or_default();
    assert!(
        last.split(' ').any(|s| s == "reports") && last.split(' ').any(|s| s == "admin"),
        "{asked:?}"
    );
}

/// A person grants the scope a call was refused for from the web console (headless Chromium:
/// `tests/npm/console-scope.mjs`): the server's card says `needs scope` and offers Sign in, which
/// asks the authorization server for that scope with those granted before, the window it opens
/// comes back to the daemon's callback page, the card stops asking, and the call works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_grants_the_scope_a_call_needs_from_the_console() {
    let npm = common::npm_dir(&["playwright-core"]);
    let fixture = protected(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "protected", &fixture).await;
    login(dir.path(), "protected").await;
    let (_daemon, port) = spawn_daemon(dir.path());
    wait_for_state(port, "protected", "connected").await;
    *fixture.auth.tools_call_scope.lock().unwrap() = "admin".into();
    let refused = call_through_daemon(port, 1, "protected__echo").await;
    assert!(refused.to_string().contains("admin"), "{refused}");
    let granted_before = fixture
        .auth
        .authorizations
        .lock()
        .unwrap()
        .last()
        .cloned()
        .flatten()
        .unwrap_or_default();

    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg(npm.join("console-scope.mjs"))
            .arg(format!("http://127.0.0.1:{port}"))
            .arg("protected")
            .env("CHROMIUM", common::chromium())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser finishes within 120 s")
    .unwrap();
    assert!(output.status.success(), "the browser: {}", text(&output));
    let seen: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the browser prints JSON");
    assert!(
        seen["before"].as_str().unwrap().contains("needs scope: ")
            && seen["before"].as_str().unwrap().contains("admin"),
        "{seen:#}"
    );
    assert!(
        !seen["after"].as_str().unwrap().contains("needs scope"),
        "{seen:#}"
    );
    assert_eq!(seen["problems"], serde_json::json!([]), "{seen:#}");
    let asked = fixture
        .auth
        .authorizations
        .lock()
        .unwrap()
        .last()
        .cloned()
        .flatten()
        .unwrap_or_default();
    assert!(asked.split(' ').any(|s| s == "admin"), "{asked}");
    for scope in granted_before.split(' ').filter(|s| !s.is_empty()) {
        assert!(
            asked.split(' ').any(|s| s == scope),
            "{asked} lacks {scope}"
        );
    }
    let works = call_through_daemon(port, 2, "protected__echo").await;
    assert_eq!(works["result"]["content"][0]["text"], "hi", "{works}");
}

/// The daemon, with nobody at hand, meets a call that needs more scope: the call's answer says
/// what is missing and how to grant it, the server stays connected (its other calls go on) and
/// its status names the scope; a sign-in through the admin API asks for it with the scopes
/// granted before, after which the status clears and the call works. A later call needing yet
/// another scope is granted by `switchboard login` in another process, which the daemon picks
/// up without a restart.
#[tokio::test]
async fn the_daemon_shows_the_scope_a_call_needs_and_its_login_asks_for_it() {
    let fixture = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "protected", &fixture).await;
    login(dir.path(), "protected").await;
    let (_daemon, port) = spawn_daemon(dir.path());
    wait_for_state(port, "protected", "connected").await;
    let works = call_through_daemon(port, 1, "protected__echo").await;
    assert_eq!(works["result"]["content"][0]["text"], "hi", "{works}");

    *fixture.auth.tools_call_scope.lock().unwrap() = "admin".into();
    let refused = call_through_daemon(port, 2, "protected__echo").await;
    let said = refused.to_string();
    assert!(
        said.contains("admin") && said.contains("switchboard login protected"),
        "{refused}"
    );
    assert!(
        !said.contains("cannot reach"),
        "a refusal for scope is no unreachable server: {refused}"
    );
    // The status is brought up to date by the server's task, a moment after the answer.
    let mut status = server_status(port, "protected").await.unwrap();
    for _ in 0..100 {
        if status["needs_scope"].is_string() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        status = server_status(port, "protected").await.unwrap();
    }
    assert_eq!(status["state"], "connected", "{status}");
    let needed = status["needs_scope"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(needed.split(' ').any(|s| s == "admin"), "{status}");
    assert!(
        !needed.split(' ').any(|s| s == "offline_access"),
        "no grant lists offline_access, so it is not shown as wanted: {status}"
    );

    let url = start_daemon_login(port, "protected").await;
    let asked = url::Url::parse(&url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "scope")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    for scope in needed.split(' ') {
        assert!(
            asked.split(' ').any(|s| s == scope),
            "{asked} lacks {scope}"
        );
    }
    assert_eq!(visit(&url).await, reqwest::StatusCode::OK);
    let mut cleared = serde_json::Value::Null;
    for _ in 0..100 {
        cleared = server_status(port, "protected").await.unwrap();
        if cleared.get("needs_scope").is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cleared.get("needs_scope").is_none(), "{cleared}");
    let granted = call_through_daemon(port, 3, "protected__echo").await;
    assert_eq!(granted["result"]["content"][0]["text"], "hi", "{granted}");

    // Granted by the CLI in another process: the daemon takes the new tokens when its old
    // ones are refused, without waiting for them to expire.
    *fixture.auth.tools_call_scope.lock().unwrap() = "deploy".into();
    let refused = call_through_daemon(port, 4, "protected__echo").await;
    assert!(refused.to_string().contains("deploy"), "{refused}");
    login(dir.path(), "protected").await;
    let granted = call_through_daemon(port, 5, "protected__echo").await;
    assert_eq!(granted["result"]["content"][0]["text"], "hi", "{granted}");
}

/// A server that revokes refresh tokens but answers `unsupported_token_type` for access tokens
/// (RFC 7009 §2.2.1) still signs the user out cleanly: the access token simply expires.
#[tokio::test]
async fn logout_takes_unsupported_token_type_for_an_answer() {
    let fixture = protected(Era::Modern).await;
    fixture
        .auth
        .refuses_access_token_revocation
        .store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "protected", &fixture).await;
    login(dir.path(), "protected").await;
    let logout = run(dir.path(), &["logout", "protected"]).await;
    assert!(logout.status.success(), "{}", text(&logout));
    assert!(
        String::from_utf8_lossy(&logout.stdout).contains("revoked"),
        "{}",
        text(&logout)
    );
    assert_eq!(
        fixture.auth.revocations.load(Ordering::SeqCst),
        1,
        "the refresh token"
    );
}

#[tokio::test]
async fn two_logins_at_once_do_not_collide_and_a_foreign_redirect_is_refused() {
    let first = protected(Era::Legacy).await;
    let second = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "first", &first).await;
    add_server(dir.path(), "second", &second).await;

    let (mut login_one, url_one) = start_login(dir.path(), "first").await;
    let (mut login_two, url_two) = start_login(dir.path(), "second").await;

    // A redirect carrying another login's state is refused; the login keeps waiting.
    let redirect_of = |url: &str| -> url::Url {
        let url = url::Url::parse(url).unwrap();
        let redirect = url
            .query_pairs()
            .find(|(k, _)| k == "redirect_uri")
            .unwrap()
            .1
            .into_owned();
        url::Url::parse(&redirect).unwrap()
    };
    let mut forged = redirect_of(&url_one);
    forged
        .query_pairs_mut()
        .append_pair("code", "x")
        .append_pair("state", "not-this-login");
    assert_eq!(
        visit(forged.as_str()).await,
        reqwest::StatusCode::BAD_REQUEST
    );
    assert_ne!(redirect_of(&url_one).port(), redirect_of(&url_two).port());

    // Finish them in the opposite order.
    assert_eq!(visit(&url_two).await, reqwest::StatusCode::OK);
    assert_eq!(visit(&url_one).await, reqwest::StatusCode::OK);
    for child in [&mut login_one, &mut login_two] {
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success());
    }
    for id in ["first", "second"] {
        let called = call_echo(dir.path(), id).await;
        assert!(called.status.success(), "{id}: {}", text(&called));
    }
}

#[tokio::test]
async fn a_daemon_killed_during_a_refresh_keeps_the_refresh_token_it_had() {
    let fixture = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "protected", &fixture).await;
    login(dir.path(), "protected").await;
    let stored = || async {
        let store = switchboard_store::Store::open(dir.path()).await.unwrap();
        store
            .oauth_grant(&GrantKey::for_server("protected"))
            .await
            .unwrap()
            .expect("a stored grant")
            .tokens
            .refresh_token
            .expect("a refresh token")
    };
    let before = stored().await;

    // The daemon starts with a dead access token, so its first request triggers a refresh,
    // which the authorization server holds for 5 s.
    fixture.auth.expire_access_tokens();
    fixture.auth.refresh_delay_ms.store(5_000, Ordering::SeqCst);
    let (mut daemon, _port) = spawn_daemon(dir.path());
    let mut waited = 0;
    while fixture.auth.refreshes.load(Ordering::SeqCst) == 0 && waited < 200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    assert_eq!(
        fixture.auth.refreshes.load(Ordering::SeqCst),
        1,
        "the refresh is in flight"
    );
    daemon.kill().await.unwrap(); // SIGKILL: no cleanup runs
    let _ = daemon.wait().await;

    assert_eq!(
        stored().await,
        before,
        "the stored refresh token is untouched"
    );
    assert!(
        fixture.auth.honours_refresh_token(&before),
        "and the authorization server still honours it"
    );
    fixture.auth.refresh_delay_ms.store(0, Ordering::SeqCst);
    // Let the interrupted request finish at the server; its answer died with the daemon.
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    let (_daemon, port) = spawn_daemon(dir.path());
    wait_for_state(port, "protected", "connected").await;
    assert_eq!(
        fixture.auth.authorizations.lock().unwrap().len(),
        1,
        "no new sign-in needed"
    );
    assert_ne!(
        stored().await,
        before,
        "the restarted daemon refreshed and stored the new token"
    );
}

#[tokio::test]
async fn a_configured_client_is_used_instead_of_registering_and_only_at_its_issuer() {
    let fixture = protected(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    let issuer = fixture.auth.issuer();
    // The client was registered with one exact redirect URI: login listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redirect = format!("http://127.0.0.1:{port}/registered/callback");
    let added = run(
        dir.path(),
        &[
            "server",
            "add",
            "configured",
            &fixture.url,
            "--oauth-client-id",
            "my-client",
            "--oauth-client-secret",
            "my-client-secret",
            "--oauth-issuer",
            &issuer,
            "--oauth-redirect-uri",
            &redirect,
        ],
    )
    .await;
    assert!(added.status.success(), "{}", text(&added));
    let shown = run(dir.path(), &["server", "show", "configured", "--json"]).await;
    let shown_text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown_text.contains("my-client") && !shown_text.contains("my-client-secret"),
        "{shown_text}"
    );

    let (mut child, url) = start_login(dir.path(), "configured").await;
    let asked = url::Url::parse(&url).unwrap();
    let redirect_uri = asked
        .query_pairs()
        .find(|(k, _)| k == "redirect_uri")
        .map(|(_, v)| v.into_owned());
    assert_eq!(redirect_uri.as_deref(), Some(redirect.as_str()));
    assert_eq!(visit(&url).await, reqwest::StatusCode::OK);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "login failed");
    assert_eq!(
        fixture.auth.registrations.load(Ordering::SeqCst),
        0,
        "no dynamic registration"
    );
    assert_eq!(
        *fixture.auth.authorizing_clients.lock().unwrap(),
        ["my-client"]
    );

    // Credentials for another issuer are never presented here.
    let elsewhere = run(
        dir.path(),
        &[
            "server",
            "add",
            "elsewhere",
            &fixture.url,
            "--oauth-client-id",
            "my-client",
            "--oauth-issuer",
            "https://auth.example.com",
        ],
    )
    .await;
    assert!(elsewhere.status.success(), "{}", text(&elsewhere));
    let refused = run(
        dir.path(),
        &["login", "elsewhere", "--no-browser", "--timeout", "5"],
    )
    .await;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("https://auth.example.com"),
        "{}",
        text(&refused)
    );
    assert_eq!(
        fixture.auth.authorizations.lock().unwrap().len(),
        1,
        "no authorization request"
    );
}

#[tokio::test]
async fn the_daemon_waits_in_needs_auth_and_signs_in_through_its_admin_api() {
    let fixture = protected(Era::Modern).await;
    let other = protected(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "protected", &fixture).await;
    add_server(dir.path(), "other", &other).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metadata_url = "https://switchboard.example.com/oauth/client-metadata.json";
    let _daemon = command(
        dir.path(),
        &[
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--client-metadata-url",
            metadata_url,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();

    let waiting = wait_for_state(port, "protected", "needs-auth").await;
    assert!(
        waiting["error"]
            .as_str()
            .unwrap_or_default()
            .contains("switchboard login protected"),
        "{waiting}"
    );

    // The client ID metadata document names this daemon's callback.
    let document: serde_json::Value = reqwest::get(format!(
        "http://127.0.0.1:{port}/oauth/client-metadata.json"
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(document["client_id"], metadata_url);
    assert_eq!(
        document["redirect_uris"][0],
        format!("http://127.0.0.1:{port}/oauth/callback")
    );

    let client = reqwest::Client::new();
    // A redirect with this login's state but another issuer's `iss` fails the sign-in, which the
    // server's state shows, and sends it back to needs-auth without any token request.
    let first_url = url::Url::parse(&start_daemon_login(port, "protected").await).unwrap();
    wait_for_state(port, "protected", "authorizing").await;
    let state = first_url
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .into_owned();
    let mut mixed_up = url::Url::parse(&format!("http://127.0.0.1:{port}/oauth/callback")).unwrap();
    mixed_up
        .query_pairs_mut()
        .append_pair("code", "x")
        .append_pair("state", &state)
        .append_pair("iss", "https://evil.example");
    let refused = client.get(mixed_up).send().await.unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::BAD_REQUEST);
    let back = wait_for_state(port, "protected", "needs-auth").await;
    assert!(
        back["error"]
            .as_str()
            .unwrap_or_default()
            .contains("evil.example"),
        "{back}"
    );
    assert_eq!(
        fixture.auth.code_exchanges.load(Ordering::SeqCst),
        0,
        "no token request"
    );

    let url = &start_daemon_login(port, "protected").await;
    assert!(url.starts_with(&fixture.auth.issuer()), "{url}");
    wait_for_state(port, "protected", "authorizing").await;

    // A forged callback is refused; the real one (the browser following the redirect) works.
    let forged = client
        .get(format!(
            "http://127.0.0.1:{port}/oauth/callback?code=x&state=forged"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), reqwest::StatusCode::BAD_REQUEST);
    let landed = client.get(url).send().await.unwrap();
    assert_eq!(landed.status(), reqwest::StatusCode::OK);
    assert!(landed.text().await.unwrap().contains("Signed in"));

    let connected = wait_for_state(port, "protected", "connected").await;
    assert!(
        connected["tools"].as_u64().unwrap_or_default() > 0,
        "{connected}"
    );

    // A sign-in from the CLI while the daemon runs is picked up without a restart.
    wait_for_state(port, "other", "needs-auth").await;
    login(dir.path(), "other").await;
    wait_for_state(port, "other", "connected").await;
}

#[tokio::test]
async fn a_machine_client_gets_its_own_tokens_without_anyone_signing_in() {
    let fixture = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let added = run(
        dir.path(),
        &[
            "server",
            "add",
            "m2m",
            &fixture.url,
            "--oauth-client-id",
            "m2m",
            "--oauth-client-secret",
            "m2m-secret",
            "--oauth-grant",
            "client-credentials",
        ],
    )
    .await;
    assert!(added.status.success(), "{}", text(&added));
    let called = call_echo(dir.path(), "m2m").await;
    assert!(called.status.success(), "{}", text(&called));
    // An expired token is simply replaced by a new client-credentials token.
    fixture.auth.expire_access_tokens();
    let again = call_echo(dir.path(), "m2m").await;
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(fixture.auth.client_credentials.load(Ordering::SeqCst), 2);
    assert!(
        fixture.auth.authorizations.lock().unwrap().is_empty(),
        "nobody signed in"
    );
}

/// A redirect with this login's `state` but another issuer's `iss` (RFC 9207) is refused, and
/// the browser's page says the sign-in failed (400), not that it was received; the login exits
/// with the reason and stores nothing.
#[tokio::test]
async fn a_redirect_from_another_issuer_is_refused_and_the_page_says_so() {
    let fixture = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    add_server(dir.path(), "protected", &fixture).await;
    let (child, url) = start_login(dir.path(), "protected").await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = no_redirects.get(&url).send().await.unwrap();
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let mut redirect = url::Url::parse(&location).unwrap();
    let kept: Vec<(String, String)> = redirect
        .query_pairs()
        .filter(|(name, _)| name != "iss")
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect();
    redirect
        .query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair("iss", "https://evil.example");
    let page = reqwest::get(redirect.as_str()).await.unwrap();
    assert_eq!(page.status(), reqwest::StatusCode::BAD_REQUEST);
    let page = page.text().await.unwrap();
    assert!(
        page.contains("failed") && !page.contains("received"),
        "{page}"
    );
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(!output.status.success(), "{}", text(&output));
    let called = call_echo(dir.path(), "protected").await;
    assert!(!called.status.success(), "no tokens were stored");
}
