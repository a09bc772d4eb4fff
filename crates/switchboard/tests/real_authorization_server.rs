//! Signing in at a real authorization server, as a person does: oidc-provider (OpenID
//! Certified; dynamic registration, PKCE, refresh tokens that rotate and revoke the grant when a
//! retired one comes back, RFC 8707 audiences, revocation) in front of an MCP server on the
//! official TypeScript SDK that checks each token's signature, issuer, audience and scope
//! (`tests/npm/oidc-protected-server.mjs`), and headless Chromium filling in its login and
//! consent pages (`tests/npm/browser-sign-in.mjs`, playwright-core with Debian's chromium).
//!
//! Three replicas on PostgreSQL share one rotating grant there without ever presenting a
//! retired refresh token. The same provider also acts as a team's identity provider for a
//! `serve --users` daemon: people sign in to an AI app in Chromium
//! (`tests/npm/idp-sign-in.mjs`), and the app's access tokens for Switchboard are their
//! credentials there.
//!
//! Our own mock authorization server (`oauth_end_to_end.rs`) redirects at once; this holds the
//! same flows to software nobody here wrote, and checks them against what the authorization
//! server itself records, not only against what Switchboard says.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{
    call_through_daemon, command, first_url, run, spawn_daemon, start_login, text, wait_for_state,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The authorization server and the MCP server it protects (`oidc-protected-server.mjs`);
/// stopped when dropped.
struct RealAuthorizationServer {
    _child: tokio::process::Child,
    issuer: String,
    mcp: String,
    events_url: String,
}

impl RealAuthorizationServer {
    /// Starts both, with access tokens that last `access_token_ttl` seconds.
    async fn start(access_token_ttl: u64) -> Self {
        Self::start_with(access_token_ttl, &[]).await
    }

    /// [`Self::start`] with more options of `oidc-protected-server.mjs`.
    async fn start_with(access_token_ttl: u64, options: &[&str]) -> Self {
        let script = npm_dir().join("oidc-protected-server.mjs");
        let mut child = tokio::process::Command::new("node")
            .arg(&script)
            .args(["--access-token-ttl", &access_token_ttl.to_string()])
            .args(options)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs (Node.js is needed for the authorization server)");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the authorization server starts within 30 s")
            .unwrap()
            .expect("the authorization server prints where it listens");
        let started: Value = serde_json::from_str(&first).expect("a JSON line");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            _child: child,
            issuer: started["issuer"].as_str().unwrap().to_owned(),
            mcp: started["mcp"].as_str().unwrap().to_owned(),
            events_url: started["events"].as_str().unwrap().to_owned(),
        }
    }

    /// What the authorization server did so far, in order.
    async fn events(&self) -> Vec<Value> {
        reqwest::get(&self.events_url)
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The events named `name`.
    async fn count(&self, name: &str) -> usize {
        self.events()
            .await
            .iter()
            .filter(|e| e["event"] == name)
            .count()
    }
}

fn npm_dir() -> PathBuf {
    common::npm_dir(&["oidc-provider", "playwright-core", "jose"])
}

/// What the person saw: the scopes the consent page asked for, and the last page.
#[derive(Debug)]
struct BrowserVisit {
    consent_scopes: Vec<String>,
    final_url: String,
    final_text: String,
}

/// Runs the browser script `script` of `tests/npm` with `args` (Chromium driven by
/// playwright-core) within `limit` seconds; the JSON line it prints.
async fn browser(script: &str, args: &[&str], limit: u64) -> Value {
    let output = tokio::time::timeout(
        Duration::from_secs(limit),
        tokio::process::Command::new("node")
            .arg(npm_dir().join(script))
            .args(args)
            .env("CHROMIUM", common::chromium())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{script} finishes within {limit} s"))
    .unwrap();
    assert!(output.status.success(), "{script}: {}", text(&output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{script} prints JSON: {e}"))
}

/// A person opens `url` in Chromium, signs in as `ada`, and answers the consent page with
/// `decision` (`allow` or `deny`).
async fn person_signs_in(url: &str, decision: &str) -> BrowserVisit {
    let seen = browser("browser-sign-in.mjs", &[url, decision], 90).await;
    BrowserVisit {
        consent_scopes: seen["consentScopes"]
            .as_str()
            .unwrap()
            .split(' ')
            .map(str::to_owned)
            .collect(),
        final_url: seen["finalUrl"].as_str().unwrap().to_owned(),
        final_text: seen["finalText"].as_str().unwrap().to_owned(),
    }
}

/// A person signs in to an AI app at their team's identity provider (`login`, `password`) in
/// Chromium; the app's access token for Switchboard (`audience`).
async fn token_from_identity_provider(
    issuer: &str,
    audience: &str,
    login: &str,
    password: &str,
) -> String {
    let printed = browser("idp-sign-in.mjs", &[issuer, audience, login, password], 90).await;
    printed["accessToken"].as_str().unwrap().to_owned()
}

/// How many times the authorization server refreshed a grant, after checking it never saw a
/// retired refresh token (which would have revoked the grant) or refused a token request.
fn refreshes_without_reuse(events: &[Value]) -> usize {
    assert!(
        !events
            .iter()
            .any(|e| e["event"] == "grant-revoked" || e["event"] == "token-error"),
        "no retired refresh token was ever presented: {events:#?}"
    );
    events
        .iter()
        .filter(|e| e["grantType"] == "refresh_token" && e["event"] == "token")
        .count()
}

/// The query parameter `name` of `url`.
fn query(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// `switchboard call secure/<tool>` with `message=<message>`.
async fn call(dir: &Path, tool: &str) -> std::process::Output {
    run(
        dir,
        &["call", &format!("secure/{tool}"), "--arg", "message=hi"],
    )
    .await
}

/// The claims of the access token the MCP server was last called with.
async fn whoami(dir: &Path) -> Value {
    let output = call(dir, "whoami").await;
    assert!(output.status.success(), "{}", text(&output));
    serde_json::from_slice(&output.stdout).expect("whoami prints the claims")
}

/// Signs in with `login --no-browser` and a person allowing it in the browser.
async fn sign_in(dir: &Path) -> BrowserVisit {
    let (mut login, url) = start_login(dir, "secure").await;
    let visit = person_signs_in(&url, "allow").await;
    let status = tokio::time::timeout(Duration::from_secs(20), login.wait())
        .await
        .expect("login ends once the browser is back")
        .unwrap();
    assert!(status.success(), "login failed after {visit:?}");
    visit
}

#[tokio::test]
async fn a_person_signs_in_in_a_browser_steps_up_and_signs_out_at_a_real_authorization_server() {
    let server = RealAuthorizationServer::start(3600).await;
    let dir = tempfile::tempdir().unwrap();
    let added = run(dir.path(), &["server", "add", "secure", &server.mcp]).await;
    assert!(added.status.success(), "{}", text(&added));

    let before = call(dir.path(), "echo").await;
    assert!(
        !before.status.success() && text(&before).contains("switchboard login secure"),
        "not signed in yet, and told how: {}",
        text(&before)
    );

    // The authorization request: PKCE S256, state, the MCP server as the resource (RFC 8707),
    // the scope the server's challenge named, and offline_access with consent (an OpenID
    // Provider grants refresh tokens only so).
    let (mut login, url) = start_login(dir.path(), "secure").await;
    assert!(
        url.starts_with(&format!("{}/auth?", server.issuer)),
        "{url}"
    );
    assert_eq!(
        query(&url, "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert!(query(&url, "state").is_some_and(|s| s.len() >= 32), "{url}");
    assert_eq!(
        query(&url, "resource").as_deref(),
        Some(server.mcp.as_str())
    );
    assert_eq!(
        query(&url, "scope").as_deref(),
        Some("mcp:read offline_access")
    );
    assert_eq!(query(&url, "prompt").as_deref(), Some("consent"));

    let visit = person_signs_in(&url, "allow").await;
    assert!(
        visit.final_url.starts_with("http://127.0.0.1:"),
        "{visit:?}"
    );
    assert!(
        visit.final_text.contains("Signed in to"),
        "the page says the sign-in is done, once it is: {visit:?}"
    );
    let mut consented = visit.consent_scopes.clone();
    consented.sort();
    assert_eq!(consented, ["mcp:read", "offline_access"]);
    let status = tokio::time::timeout(Duration::from_secs(20), login.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());

    let claims = whoami(dir.path()).await;
    assert_eq!(claims["sub"], "ada");
    assert_eq!(
        claims["aud"], server.mcp,
        "the token is for this server only"
    );
    assert_eq!(claims["scope"], "mcp:read");
    let echoed = call(dir.path(), "echo").await;
    assert!(echoed.status.success(), "{}", text(&echoed));
    assert_eq!(String::from_utf8_lossy(&echoed.stdout).trim(), "echo: hi");

    let events = server.events().await;
    let registered: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "registered")
        .collect();
    assert_eq!(registered.len(), 1, "{events:#?}");
    assert!(
        registered[0]["redirectUris"][0]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "a loopback redirect: {events:#?}"
    );
    assert!(
        events.contains(&json!({"event": "token", "grantType": "authorization_code",
            "resource": server.mcp})),
        "{events:#?}"
    );

    // Step-up: the call needs mcp:admin. With a person at hand (`--no-browser` prints the URL
    // on stderr) the call asks for the union of scopes, waits, and goes through.
    let mut stepping_up = command(
        dir.path(),
        &[
            "call",
            "secure/admin_echo",
            "--arg",
            "message=root",
            "--no-browser",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let url = first_url(stepping_up.stderr.take().unwrap()).await;
    let asked = query(&url, "scope").unwrap_or_default();
    for scope in ["mcp:read", "mcp:admin", "offline_access"] {
        assert!(asked.split(' ').any(|s| s == scope), "{asked}");
    }
    let visit = person_signs_in(&url, "allow").await;
    assert!(
        visit.consent_scopes.iter().any(|s| s == "mcp:admin"),
        "{visit:?}"
    );
    let done = tokio::time::timeout(Duration::from_secs(30), stepping_up.wait_with_output())
        .await
        .expect("the call ends once the browser is back")
        .unwrap();
    assert!(done.status.success(), "{}", text(&done));
    assert_eq!(
        String::from_utf8_lossy(&done.stdout).trim(),
        "admin_echo: root"
    );
    let claims = whoami(dir.path()).await;
    let scopes: Vec<&str> = claims["scope"].as_str().unwrap().split(' ').collect();
    assert!(
        scopes.contains(&"mcp:admin") && scopes.contains(&"mcp:read"),
        "{claims}"
    );
    assert_eq!(
        server.count("registered").await,
        1,
        "the client registered for the first loopback port serves the step-up's too"
    );

    let logout = run(dir.path(), &["logout", "secure"]).await;
    assert!(logout.status.success(), "{}", text(&logout));
    assert_eq!(
        server.count("grant-revoked").await,
        1,
        "the authorization server revoked the grant"
    );
    let after = call(dir.path(), "echo").await;
    assert!(
        !after.status.success() && text(&after).contains("switchboard login secure"),
        "{}",
        text(&after)
    );
}

#[tokio::test]
async fn a_person_who_denies_consent_is_told_so_and_stays_signed_out() {
    let server = RealAuthorizationServer::start(3600).await;
    let dir = tempfile::tempdir().unwrap();
    let added = run(dir.path(), &["server", "add", "secure", &server.mcp]).await;
    assert!(added.status.success(), "{}", text(&added));

    let (login, url) = start_login(dir.path(), "secure").await;
    let visit = person_signs_in(&url, "deny").await;
    assert!(
        visit.final_text.contains("access_denied") && !visit.final_text.contains("received"),
        "the page tells the truth: {visit:?}"
    );
    let output = tokio::time::timeout(Duration::from_secs(20), login.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(!output.status.success());
    assert!(text(&output).contains("access_denied"), "{}", text(&output));
    assert_eq!(server.count("token").await, 0, "no token was asked for");
    let after = call(dir.path(), "echo").await;
    assert!(!after.status.success(), "{}", text(&after));
}

/// A daemon and CLI calls on one data directory, with access tokens that last two seconds and
/// refresh tokens that rotate on every use: over many refreshes by both, the authorization
/// server never sees a retired refresh token (which would revoke the whole grant), and every
/// call is answered.
#[tokio::test]
async fn a_daemon_and_the_cli_share_a_rotating_grant_without_ever_losing_it() {
    let server = RealAuthorizationServer::start(2).await;
    let dir = tempfile::tempdir().unwrap();
    let added = run(dir.path(), &["server", "add", "secure", &server.mcp]).await;
    assert!(added.status.success(), "{}", text(&added));
    sign_in(dir.path()).await;

    let (_daemon, port) = spawn_daemon(dir.path());
    wait_for_state(port, "secure", "connected").await;
    for round in 0..8 {
        // The daemon and the CLI call at the same moment, each needing a fresh token.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let (through_daemon, from_cli) = tokio::join!(
            call_through_daemon(port, round, "secure__echo"),
            call(dir.path(), "echo")
        );
        assert_eq!(
            through_daemon["result"]["content"][0]["text"], "echo: hi",
            "round {round}: {through_daemon}"
        );
        assert!(
            from_cli.status.success(),
            "round {round}: {}",
            text(&from_cli)
        );
    }
    // A connection test uses the stored grant for the stored server's URL only.
    let test = |url: String| async move {
        reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/api/test-connection"))
            .json(&json!({"id": "secure", "url": url}))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let same = test(server.mcp.clone()).await;
    assert_eq!(same["connected"], true, "{same:#}");
    let elsewhere = test(format!("{}?elsewhere", server.mcp)).await;
    assert_eq!(
        (&elsewhere["connected"], &elsewhere["needs_auth"]),
        (&json!(false), &json!(true)),
        "another URL is tested signed out: {elsewhere:#}"
    );
    let events = server.events().await;
    let refreshed = refreshes_without_reuse(&events);
    assert!(refreshed >= 8, "both refreshed, many times: {events:#?}");
}

/// The same sign-in from the web console: a person adds the protected server in Chromium, signs
/// in and consents in the window the console opens, sees the server connect live, calls its
/// tool, and signs out. The first reading of the server list after the add answers only once the
/// server is connected; the console keeps showing it connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_and_out_from_the_web_console() {
    let server = RealAuthorizationServer::start(3600).await;
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, port) = spawn_daemon(dir.path());
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        if reqwest::get(format!("{base}/healthz")).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let screenshots = std::env::var("SWITCHBOARD_SCREENSHOTS").ok();
    let mut args = vec![base.as_str(), server.mcp.as_str()];
    args.extend(screenshots.as_deref());
    let seen = browser("console-sign-in.mjs", &args, 120).await;
    let issuer = url::Url::parse(&server.issuer).unwrap();
    assert_eq!(
        seen["signInPage"],
        issuer.origin().ascii_serialization(),
        "the person signs in on the authorization server's own page: {seen:#}"
    );
    assert!(
        seen["consentScopes"].as_str().unwrap().contains("mcp:read"),
        "{seen:#}"
    );
    assert_eq!(
        seen["callbackPage"], base,
        "the redirect comes back to the daemon"
    );
    assert!(
        seen["callbackText"].as_str().unwrap().contains("secure"),
        "{seen:#}"
    );
    assert_ne!(seen["lateReading"]["state"], "connected", "{seen:#}");
    assert_eq!(
        seen["lateReading"]["shownAfter"], "connected",
        "a reading of the server list that answers late does not take the card back: {seen:#}"
    );
    assert_eq!(seen["echo"], "echo: signed in");
    assert_eq!(seen["signedOut"], "Signed out of secure.");
    assert_eq!(seen["problems"], json!([]));
    assert!(server.count("token").await >= 1);
}

#[tokio::test]
async fn people_signed_in_at_the_teams_identity_provider_use_switchboard_as_themselves() {
    let port = common::free_port();
    let base = format!("http://127.0.0.1:{port}");
    // The team's provider issues tokens for Switchboard (its URL as the audience) naming each
    // person, their tenant and their roles.
    let provider =
        RealAuthorizationServer::start_with(3600, &["--switchboard-audience", &base]).await;
    let dir = tempfile::tempdir().unwrap();
    let added = run(dir.path(), &["tenant", "add", "acme"]).await;
    assert!(added.status.success(), "{}", text(&added));
    let listen = format!("127.0.0.1:{port}");
    let _daemon = command(
        dir.path(),
        &[
            "serve",
            "--users",
            "--listen",
            &listen,
            "--allow-upstream-network",
            "127.0.0.1",
            "--oidc-issuer",
            &provider.issuer,
            "--oidc-audience",
            &base,
            "--oidc-tenant-claim",
            "tenant",
            "--oidc-admin-role",
            "switchboard-admin",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    common::await_health(port).await;

    let (ada, grace) = tokio::join!(
        token_from_identity_provider(&provider.issuer, &base, "ada", "lovelace"),
        token_from_identity_provider(&provider.issuer, &base, "grace", "hopper"),
    );

    // Ada is a tenant admin by her role: she shares the MCP server the provider also protects.
    let (status, body) = common::with_token(
        &base,
        &ada,
        reqwest::Method::POST,
        "/api/servers",
        Some(json!({"id": "secure", "url": provider.mcp})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Grace, a member, sees it in her workspace and may not change it.
    let (status, listed) =
        common::with_token(&base, &grace, reqwest::Method::GET, "/api/servers", None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["servers"][0]["id"], "secure", "{listed}");
    let (status, body) = common::with_token(
        &base,
        &grace,
        reqwest::Method::PATCH,
        "/api/servers/secure",
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    // Both are users of the tenant now, as the provider named them.
    let users = run(dir.path(), &["user", "list", "acme"]).await;
    let users = text(&users);
    assert!(users.contains("ada") && users.contains("admin"), "{users}");
    assert!(users.contains("grace"), "{users}");

    // A token whose signature was tampered with, or for another audience, is refused.
    let signature_at = ada.rfind('.').unwrap() + 20;
    let swapped = if &ada[signature_at..=signature_at] == "A" {
        "B"
    } else {
        "A"
    };
    let tampered = format!(
        "{}{swapped}{}",
        &ada[..signature_at],
        &ada[signature_at + 1..]
    );
    let (status, _) =
        common::with_token(&base, &tampered, reqwest::Method::GET, "/api/servers", None).await;
    assert_eq!(status, 401);
    let for_the_mcp_server =
        token_from_identity_provider(&provider.issuer, &provider.mcp, "ada", "lovelace").await;
    let (status, body) = common::with_token(
        &base,
        &for_the_mcp_server,
        reqwest::Method::GET,
        "/api/servers",
        None,
    )
    .await;
    assert_eq!(status, 401, "{body}");
}

/// Two people of one tenant in the web console of a `serve --users` daemon, each in their own
/// browser: the page asks each for their key and shows whose workspace it is; Ana's own
/// environment value for a shared server, set in its "My settings" tab, reaches the process her
/// workspace runs and not Bob's; her sign-in to a shared OAuth server at the real authorization
/// server is hers alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_of_one_tenant_use_the_console_each_as_themselves() {
    let server = RealAuthorizationServer::start(3600).await;
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["tenant", "add", "acme"][..],
        &["user", "add", "acme/ana"],
        &["user", "add", "acme/bob"],
        &["user", "add", "acme/carol", "--admin"],
    ] {
        let done = run(dir.path(), args).await;
        assert!(done.status.success(), "{args:?}: {}", text(&done));
    }
    let key_of = |user: &'static str| {
        let dir = dir.path().to_owned();
        async move {
            let made = run(&dir, &["user", "key", user]).await;
            assert!(made.status.success(), "{}", text(&made));
            String::from_utf8(made.stdout).unwrap().trim().to_owned()
        }
    };
    let (ana, bob, carol) = (
        key_of("acme/ana").await,
        key_of("acme/bob").await,
        key_of("acme/carol").await,
    );
    let port = common::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let _daemon = command(
        dir.path(),
        &[
            "serve",
            "--users",
            "--listen",
            &listen,
            "--allow-upstream-network",
            "127.0.0.1",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    common::await_health(port).await;
    // The operator approves the stdio fixture; Carol, the tenant's admin, shares a server of it
    // and the OAuth-protected one.
    let fixture = switchboard_fixtures::stdio_fixture_binary();
    let approved = run(
        dir.path(),
        &[
            "commands",
            "add",
            "fixture",
            "--user-env",
            "FIXTURE_MARK",
            "--",
            fixture.to_str().unwrap(),
        ],
    )
    .await;
    assert!(approved.status.success(), "{}", text(&approved));
    for body in [
        json!({"id": "tool", "approvedCommand": "fixture", "env": {"FIXTURE_MARK": "shared"}}),
        json!({"id": "secure", "url": server.mcp}),
    ] {
        let (status, answer) = common::with_token(
            &base,
            &carol,
            reqwest::Method::POST,
            "/api/servers",
            Some(body),
        )
        .await;
        assert_eq!(status, 201, "{answer}");
    }

    let screenshots = std::env::var("SWITCHBOARD_SCREENSHOTS").ok();
    let mut args = vec![base.as_str(), ana.as_str(), bob.as_str()];
    args.extend(screenshots.as_deref());
    let seen = browser("console-users.mjs", &args, 180).await;

    assert_eq!(seen["anaPrompts"], 1, "asked for her key once: {seen:#}");
    assert_eq!(seen["anaWho"], "ana · acme · member", "{seen:#}");
    assert_eq!(seen["bobWho"], "bob · acme · member", "{seen:#}");
    assert_eq!(seen["anaToolOwner"], "shared", "{seen:#}");
    assert_eq!(
        seen["anaToolActions"],
        json!(["open", "check"]),
        "a member is not offered changes to a shared server (a check changes nothing): {seen:#}"
    );
    assert_eq!(seen["settingsKind"], "environment values", "{seen:#}");
    assert_eq!(
        seen["anaCommandFieldHidden"], true,
        "a member is offered approved commands, not a command field: {seen:#}"
    );
    assert!(
        seen["anaOwnWhoami"]
            .as_str()
            .unwrap()
            .starts_with("anas-own"),
        "{seen:#}"
    );
    assert!(
        seen["anaWhoami"].as_str().unwrap().starts_with("ana "),
        "{seen:#}"
    );
    assert!(
        seen["bobWhoami"].as_str().unwrap().starts_with("shared "),
        "{seen:#}"
    );
    assert_eq!(
        seen["bobSettings"],
        json!(["", ""]),
        "none of hers: {seen:#}"
    );
    assert!(
        seen["anaWhoamiAfter"]
            .as_str()
            .unwrap()
            .starts_with("shared "),
        "{seen:#}"
    );
    assert!(
        seen["callbackText"]
            .as_str()
            .unwrap()
            .contains("Signed in to 'secure'"),
        "{seen:#}"
    );
    assert_eq!(
        seen["bobSecureState"], "needs-auth",
        "her sign-in is not his: {seen:#}"
    );
    assert_eq!(seen["problems"], json!([]), "{seen:#}");
    // The authorization server issued tokens once: to her.
    assert_eq!(
        server.count("token").await,
        1,
        "{:#?}",
        server.events().await
    );
}

/// Three replicas on one PostgreSQL database share one person's grant at the real authorization
/// server, whose refresh tokens rotate on every use and whose whole grant is revoked when a
/// retired one comes back: with two-second access tokens, all three call at the same moment in
/// every round, each needing a fresh token, and the server never sees a retired refresh token
/// (the replicas refresh one at a time under a row lock, each reading the store first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgres_share_a_rotating_grant_without_ever_presenting_a_retired_token() {
    const KEY: &str = "c3dpdGNoYm9hcmQtcmVwbGljYS10ZXN0LWtleS0zMmI="; // 32 bytes, base64
    let server = RealAuthorizationServer::start(2).await;
    let store = switchboard_fixtures::postgres::TestPostgres::shared().database();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let switchboard = |dir: &Path, args: &[&str]| {
        let mut all = vec!["--store", store.as_str()];
        all.extend_from_slice(args);
        let mut command = command(dir, &all);
        command.env("SWITCHBOARD_VAULT_KEY", KEY);
        command
    };
    let added = switchboard(dirs[0].path(), &["server", "add", "secure", &server.mcp])
        .output()
        .await
        .unwrap();
    assert!(added.status.success(), "{}", text(&added));
    let mut login = switchboard(
        dirs[0].path(),
        &["login", "secure", "--no-browser", "--timeout", "30"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let url = first_url(login.stdout.take().unwrap()).await;
    let visit = person_signs_in(&url, "allow").await;
    let status = tokio::time::timeout(Duration::from_secs(20), login.wait())
        .await
        .expect("login ends once the browser is back")
        .unwrap();
    assert!(status.success(), "login failed after {visit:?}");

    let mut replicas = Vec::new();
    for dir in &dirs {
        let port = common::free_port();
        let listen = format!("127.0.0.1:{port}");
        let child = switchboard(dir.path(), &["serve", "--listen", &listen])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        replicas.push((child, port));
    }
    for (_, port) in &replicas {
        common::await_health(*port).await;
        wait_for_state(*port, "secure", "connected").await;
    }
    for round in 0..6u64 {
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let answers =
            futures::future::join_all(replicas.iter().enumerate().map(|(n, (_, port))| {
                call_through_daemon(*port, round * 10 + n as u64, "secure__echo")
            }))
            .await;
        for (n, answer) in answers.iter().enumerate() {
            assert_eq!(
                answer["result"]["content"][0]["text"], "echo: hi",
                "round {round}, replica {n}: {answer}"
            );
        }
    }
    let events = server.events().await;
    let refreshed = refreshes_without_reuse(&events);
    assert!(refreshed >= 6, "refreshed in every round: {events:#?}");
}
