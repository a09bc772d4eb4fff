//! One daemon serving many users (`serve --users`), as a platform team runs it: users of two
//! tenants, each with an API key made by the CLI, each in a workspace of their own. The tests
//! try to cross the lines: a user reading, changing or calling another's servers, joining
//! another's MCP session, hearing another's events, speaking for another user, or coming in
//! without a key, with a wrong one, or with a revoked one.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use switchboard_fixtures::oauth::OpenIdProvider;
use switchboard_fixtures::{Era, RunningFixture, transports};

const OPERATOR_KEY: &str = "operator-key-0123456789abcdef";

/// A daemon with users, and a way to speak to it as each of them.
struct Daemon {
    dir: tempfile::TempDir,
    /// The store the daemon and its CLI use, when not the data directory's SQLite file.
    store: Option<String>,
    child: tokio::process::Child,
    base: String,
    http: reqwest::Client,
}

impl Daemon {
    async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// A daemon with users and more `serve` options.
    async fn start_with(options: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let listen = format!("127.0.0.1:{}", common::free_port());
        // Their servers are fixtures on loopback, which the operator allows here.
        let mut args = vec![
            "serve",
            "--users",
            "--listen",
            &listen,
            "--allow-upstream-network",
            "127.0.0.1",
        ];
        args.extend_from_slice(options);
        let child = common::command(dir.path(), &args)
            .env("SWITCHBOARD_API_KEYS", OPERATOR_KEY)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let store = options
            .iter()
            .position(|option| *option == "--store")
            .and_then(|at| options.get(at + 1))
            .map(|url| url.to_string());
        let daemon = Self {
            dir,
            store,
            child,
            base: format!("http://{listen}"),
            http: reqwest::Client::new(),
        };
        for _ in 0..200 {
            if daemon.http.get(daemon.url("/healthz")).send().await.is_ok() {
                return daemon;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the daemon never answered /healthz");
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `switchboard <args>` on the daemon's store; its standard output.
    async fn cli(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = Vec::new();
        if let Some(store) = &self.store {
            all.extend(["--store", store.as_str()]);
        }
        all.extend_from_slice(args);
        cli(self.dir.path(), &all).await
    }

    /// A user's API key, made by the CLI.
    async fn key_of(&self, user: &str) -> String {
        self.cli(&["user", "key", user]).await.trim().to_owned()
    }

    /// `method path` with `key`, and `body`; the status and JSON answer.
    async fn send(
        &self,
        key: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self.http.request(method.parse().unwrap(), self.url(path));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Adds the server `body` describes in `key`'s workspace (`POST /api/servers`), which must
    /// answer 201.
    async fn add_server(&self, key: &str, body: Value) {
        let (status, answer) = self
            .send(Some(key), "POST", "/api/servers", Some(body))
            .await;
        assert_eq!(status, 201, "{answer}");
    }

    /// Waits (up to 10 s) until `key`'s workspace shows server `id` connected.
    async fn await_connected(&self, key: &str, id: &str) {
        for _ in 0..200 {
            let (_, view) = self
                .send(Some(key), "GET", &format!("/api/servers/{id}"), None)
                .await;
            if view["status"]["state"] == "connected" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{id} never connected for this user");
    }

    /// The exposed tool names `key`'s workspace lists over MCP (a stateless request).
    async fn mcp_tools(&self, key: &str) -> Vec<String> {
        let answer = self
            .mcp(
                Some(key),
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .await;
        let mut names: Vec<String> = answer["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }

    /// One stateless (2026-07-28) JSON-RPC request to `/mcp`; the answer.
    async fn mcp(&self, key: Option<&str>, message: Value) -> Value {
        self.mcp_with(key, message, &[]).await
    }

    /// [`Self::mcp`] with more request headers.
    async fn mcp_with(&self, key: Option<&str>, message: Value, headers: &[(&str, &str)]) -> Value {
        self.mcp_at("/mcp", key, message, headers).await
    }

    /// [`Self::mcp_with`] at `path` (an endpoint's door, say).
    async fn mcp_at(
        &self,
        path: &str,
        key: Option<&str>,
        message: Value,
        headers: &[(&str, &str)],
    ) -> Value {
        let mut request = self
            .http
            .post(self.url(path))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", message["method"].as_str().unwrap());
        if let Some(name) = message["params"]["name"].as_str() {
            request = request.header("mcp-name", name);
        }
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = request
            .json(&message)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        body.lines()
            .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
            .filter_map(|data| serde_json::from_str::<Value>(data).ok())
            // A refusal before the request was read answers it with no id.
            .find(|m| m["id"] == message["id"] || (m["id"].is_null() && m["error"].is_object()))
            .unwrap_or_else(|| panic!("no answer: {body}"))
    }
}

async fn cli(dir: &Path, args: &[&str]) -> String {
    let output = common::run(dir, args).await;
    assert!(
        output.status.success(),
        "switchboard {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Tenants acme (member ana and bob, admin carol) and globex (member gus); their keys.
async fn people(daemon: &Daemon) -> [String; 4] {
    daemon.cli(&["tenant", "add", "acme"]).await;
    daemon.cli(&["tenant", "add", "globex"]).await;
    daemon.cli(&["user", "add", "acme/ana"]).await;
    daemon.cli(&["user", "add", "acme/bob"]).await;
    daemon.cli(&["user", "add", "acme/carol", "--admin"]).await;
    daemon.cli(&["user", "add", "globex/gus"]).await;
    [
        daemon.key_of("acme/ana").await,
        daemon.key_of("acme/bob").await,
        daemon.key_of("acme/carol").await,
        daemon.key_of("globex/gus").await,
    ]
}

/// The operator approves the stdio fixture as the command `fixture`, whose `FIXTURE_MARK` users
/// may set.
async fn approve_fixture(daemon: &Daemon) {
    let fixture = switchboard_fixtures::stdio_fixture_binary();
    let fixture = fixture.to_str().unwrap();
    daemon
        .cli(&[
            "commands",
            "add",
            "fixture",
            "--user-env",
            "FIXTURE_MARK",
            "--user-arg",
            "legacy",
            "--",
            fixture,
        ])
        .await;
}

fn ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn each_user_sees_and_uses_only_their_tenants_shared_servers_and_their_own() {
    let (shared, anas, bobs) = tokio::join!(
        transports::streamable_http(Era::Modern),
        transports::streamable_http(Era::Modern),
        transports::streamable_http(Era::Modern),
    );
    let daemon = Daemon::start().await;
    let [ana, bob, carol, gus] = people(&daemon).await;
    let add = |key: String, id: &'static str, url: String| {
        let daemon = &daemon;
        async move {
            daemon.add_server(&key, json!({"id": id, "url": url})).await;
        }
    };
    add(carol.clone(), "shared", shared.url.clone()).await;
    add(ana.clone(), "mine", anas.url.clone()).await;
    add(bob.clone(), "mine", bobs.url.clone()).await;

    // Each sees the tenant's shared server and their own; the other tenant sees neither.
    for key in [&ana, &bob] {
        let (_, list) = daemon.send(Some(key), "GET", "/api/servers", None).await;
        assert_eq!(ids(&list), ["mine", "shared"]);
    }
    let (_, list) = daemon.send(Some(&carol), "GET", "/api/servers", None).await;
    assert_eq!(
        ids(&list),
        ["shared"],
        "an admin does not see members' own servers"
    );
    let (_, list) = daemon.send(Some(&gus), "GET", "/api/servers", None).await;
    assert_eq!(ids(&list), Vec::<String>::new());
    let (_, list) = daemon
        .send(Some(OPERATOR_KEY), "GET", "/api/servers", None)
        .await;
    assert_eq!(
        ids(&list),
        Vec::<String>::new(),
        "the default tenant has none"
    );
    let (_, anas_view) = daemon
        .send(Some(&ana), "GET", "/api/servers/mine", None)
        .await;
    let (_, bobs_view) = daemon
        .send(Some(&bob), "GET", "/api/servers/mine", None)
        .await;
    assert_eq!(anas_view["transport"]["url"], anas.url, "{anas_view}");
    assert_eq!(bobs_view["transport"]["url"], bobs.url, "{bobs_view}");

    // A member cannot change what the tenant shares; another tenant cannot even find it.
    for (method, body) in [("DELETE", None), ("PATCH", Some(json!({"enabled": false})))] {
        let (status, body) = daemon
            .send(Some(&ana), method, "/api/servers/shared", body)
            .await;
        assert_eq!(status, 403, "{method}: {body}");
    }
    // Nor how search ranks its tools.
    let (status, body) = daemon
        .send(
            Some(&ana),
            "PATCH",
            "/api/servers/shared/tools/add",
            Some(json!({"search_notes": "sum"})),
        )
        .await;
    assert_eq!(status, 403, "search notes: {body}");
    let (status, _) = daemon
        .send(Some(&gus), "DELETE", "/api/servers/shared", None)
        .await;
    assert_eq!(status, 404);
    // Nor check it: a check reaches only the servers of the caller's own workspace.
    let (status, _) = daemon
        .send(Some(&gus), "POST", "/api/servers/shared/check", None)
        .await;
    assert_eq!(status, 404);
    // Nor complete its arguments, follow its resources or watch its traffic; its members can.
    daemon.await_connected(&ana, "shared").await;
    let completion = json!({"ref": {"type": "ref/prompt", "name": "greeting"},
                            "argument": {"name": "name", "value": "A"}});
    let (status, body) = daemon
        .send(
            Some(&gus),
            "POST",
            "/api/servers/shared/complete",
            Some(completion.clone()),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = daemon
        .send(
            Some(&ana),
            "POST",
            "/api/servers/shared/complete",
            Some(completion),
        )
        .await;
    assert_ne!(
        status, 404,
        "a member completes the tenant's server's arguments: {body}"
    );
    for path in [
        "/api/servers/shared/resource-updates?uri=fixture://greeting",
        "/api/servers/shared/traffic",
    ] {
        let status = |key: &str| {
            let request = daemon
                .http
                .get(daemon.url(path))
                .bearer_auth(key.to_owned());
            async move { request.send().await.unwrap().status().as_u16() }
        };
        assert_eq!(status(&gus).await, 404, "{path}");
        // (The stateless fixture takes no subscriptions: its refusal is still its own answer.)
        assert_ne!(status(&ana).await, 404, "{path}");
    }

    // Their MCP endpoints serve their own servers' tools, and calls reach them.
    for key in [&ana, &bob] {
        daemon.await_connected(key, "mine").await;
        daemon.await_connected(key, "shared").await;
        let tools = daemon.mcp_tools(key).await;
        let mut servers: Vec<&str> = tools.iter().filter_map(|t| t.split("__").next()).collect();
        servers.dedup();
        assert_eq!(servers, ["mine", "shared"], "{tools:?}");
        let answer = daemon
            .mcp(
                Some(key),
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "mine__echo", "arguments": {"message": "hi"},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .await;
        assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    }
    assert!(daemon.mcp_tools(&gus).await.is_empty());
    assert!(
        anas.state
            .connections
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
            && bobs
                .state
                .connections
                .load(std::sync::atomic::Ordering::SeqCst)
                > 0,
        "each user's own server was reached by their own workspace"
    );
}

#[tokio::test]
async fn a_user_cannot_join_another_users_session_hear_their_events_or_speak_for_them() {
    let upstream = transports::streamable_http(Era::Modern).await;
    let daemon = Daemon::start().await;
    let [ana, bob, ..] = people(&daemon).await;

    // Ana's session is hers: Bob's key with her session id is refused as unknown.
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "users-test", "version": "1"}}});
    let opened = daemon
        .http
        .post(daemon.url("/mcp"))
        .bearer_auth(&ana)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert!(opened.status().is_success());
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let as_bob = daemon
        .http
        .post(daemon.url("/mcp"))
        .bearer_auth(&bob)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(
        as_bob.status(),
        404,
        "another user's session is not there to be found"
    );

    // Ana's event stream carries her own servers' events, never Bob's.
    let events = daemon
        .http
        .get(daemon.url("/api/events"))
        .bearer_auth(&ana)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    daemon
        .add_server(&bob, json!({"id": "bobs-secret", "url": upstream.url}))
        .await;
    daemon
        .add_server(&ana, json!({"id": "anas", "url": upstream.url}))
        .await;
    let mut seen = String::new();
    let mut body = events.bytes_stream();
    let _ = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("\"anas\"") && seen.contains("connected") {
                break;
            }
        }
    })
    .await;
    assert!(
        seen.contains("\"anas\""),
        "ana hears her own server: {seen}"
    );
    assert!(
        !seen.contains("bobs-secret"),
        "ana never hears of bob's: {seen}"
    );

    // A request cannot name another user; naming oneself is fine.
    let (status, body) = daemon.send(Some(&ana), "GET", "/api/tools", None).await;
    assert_eq!(status, 200, "{body}");
    let as_other = daemon
        .http
        .get(daemon.url("/api/tools"))
        .bearer_auth(&ana)
        .header("x-switchboard-user", "bob")
        .send()
        .await
        .unwrap();
    assert_eq!(as_other.status(), 403);
    let (status, _) = daemon
        .send(
            Some(&ana),
            "PATCH",
            "/api/activation/users/bob",
            Some(json!({"servers": {"anas": false}})),
        )
        .await;
    assert_eq!(status, 403, "another user's layer is theirs");
    let (status, _) = daemon
        .send(
            Some(&ana),
            "PATCH",
            "/api/activation/app",
            Some(json!({"servers": {"anas": false}})),
        )
        .await;
    assert_eq!(status, 403, "the tenant's app layer is its admins'");
}

#[tokio::test]
async fn requests_without_a_valid_key_are_refused_and_a_revoked_key_stops_working() {
    let daemon = Daemon::start().await;
    let [ana, ..] = people(&daemon).await;
    for key in [
        None,
        Some("sbk_not-a-key"),
        Some("wrong-operator-key-0123456789"),
    ] {
        let (status, _) = daemon.send(key, "GET", "/api/servers", None).await;
        assert_eq!(status, 401, "{key:?}");
        let answer = daemon
            .http
            .post(daemon.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 401);
    }
    let (status, _) = daemon.send(None, "GET", "/healthz", None).await;
    assert_eq!(status, 200, "liveness needs no key");

    let (status, _) = daemon.send(Some(&ana), "GET", "/api/servers", None).await;
    assert_eq!(status, 200);
    daemon
        .cli(&["user", "revoke-key", "acme/ana", "default"])
        .await;
    // Another process revoked it: the daemon hears of it at its next look at the store.
    let mut refused = false;
    for _ in 0..200 {
        let (status, _) = daemon.send(Some(&ana), "GET", "/api/servers", None).await;
        if status == 401 {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused, "the revoked key kept working");
}

/// An identity provider on loopback publishing one P-256 key, with which it signs the tokens a
/// test asks for.
struct IdentityProvider {
    published: OpenIdProvider,
    key: switchboard_oauth::AssertionKey,
    /// A key the provider does not publish.
    stranger: switchboard_oauth::AssertionKey,
}

fn p256_key() -> (switchboard_oauth::AssertionKey, Value) {
    use base64::Engine;
    let pair = switchboard_oauth::DpopKey::generate().unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(pair.pkcs8())
    );
    let key = switchboard_oauth::AssertionKey::from_pem(&pem, "ES256").unwrap();
    (key, pair.public_jwk().clone())
}

impl IdentityProvider {
    async fn start() -> Self {
        let (key, public) = p256_key();
        let (stranger, _) = p256_key();
        Self {
            published: OpenIdProvider::start(vec![public]).await,
            key,
            stranger,
        }
    }

    fn issuer(&self) -> &str {
        &self.published.issuer
    }

    /// A token for `sub` in `org` with `roles`, for `audience`, expiring in `lifetime` seconds
    /// (negative: expired).
    fn token(&self, sub: &str, org: &str, roles: &[&str], audience: &str, lifetime: i64) -> String {
        self.sign(&self.key, sub, org, roles, audience, lifetime)
    }

    fn sign(
        &self,
        key: &switchboard_oauth::AssertionKey,
        sub: &str,
        org: &str,
        roles: &[&str],
        audience: &str,
        lifetime: i64,
    ) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        key.sign_claims(
            &json!({"iss": self.issuer(), "sub": sub, "org": org, "roles": roles,
                    "aud": audience, "iat": now, "exp": now + lifetime}),
            "JWT",
        )
        .unwrap()
    }

    /// A token for `sub` in `org` whose `groups` claim lists `groups`.
    fn token_in_groups(&self, sub: &str, org: &str, groups: &[&str]) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        self.key
            .sign_claims(
                &json!({"iss": self.issuer(), "sub": sub, "org": org, "groups": groups,
                        "aud": "switchboard", "iat": now, "exp": now + 300}),
                "JWT",
            )
            .unwrap()
    }

    /// A token for `sub` in `org` valid from `from` seconds from now to `until`.
    fn sign_at(
        &self,
        key: &switchboard_oauth::AssertionKey,
        sub: &str,
        org: &str,
        from: i64,
        until: i64,
    ) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        key.sign_claims(
            &json!({"iss": self.issuer(), "sub": sub, "org": org, "aud": "switchboard",
                    "iat": now, "nbf": now + from, "exp": now + until}),
            "JWT",
        )
        .unwrap()
    }
}

/// Starts a daemon with users that also takes the provider's tokens (tenant from the `org`
/// claim, `sb-admin` in `roles` making an admin).
async fn daemon_with_provider(provider: &IdentityProvider) -> Daemon {
    Daemon::start_with(&[
        "--oidc-issuer",
        provider.issuer(),
        "--oidc-audience",
        "switchboard",
        "--oidc-tenant-claim",
        "org",
        "--oidc-admin-role",
        "sb-admin",
    ])
    .await
}

#[tokio::test]
async fn tokens_from_the_identity_provider_are_credentials_naming_their_user_tenant_and_role() {
    use base64::Engine;
    let upstream = transports::streamable_http(Era::Modern).await;
    let provider = IdentityProvider::start().await;
    let daemon = daemon_with_provider(&provider).await;
    daemon.cli(&["tenant", "add", "acme"]).await;
    let ana = provider.token("ana@acme.test", "acme", &[], "switchboard", 300);
    let carol = provider.token("carol@acme.test", "acme", &["sb-admin"], "switchboard", 300);

    // An admin by the token's roles adds a shared server; a member sees it, cannot remove it.
    daemon
        .add_server(&carol, json!({"id": "shared", "url": upstream.url}))
        .await;
    let (status, list) = daemon.send(Some(&ana), "GET", "/api/servers", None).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(ids(&list), ["shared"]);
    let (status, _) = daemon
        .send(Some(&ana), "DELETE", "/api/servers/shared", None)
        .await;
    assert_eq!(status, 403);
    daemon.await_connected(&ana, "shared").await;
    let tools = daemon.mcp_tools(&ana).await;
    assert!(tools.iter().any(|t| t == "shared__echo"), "{tools:?}");
    // The users the provider vouched for are recorded.
    let users = daemon.cli(&["user", "list", "acme"]).await;
    assert!(
        users.contains("ana@acme.test") && users.contains("carol@acme.test"),
        "{users}"
    );

    // A user made in Switchboard is not whoever holds a provider account of the same id: her
    // token is refused until the operator links the two on purpose.
    daemon.cli(&["user", "add", "acme/dana"]).await;
    let dana_key = daemon.key_of("acme/dana").await;
    daemon
        .add_server(&dana_key, json!({"id": "danas-own", "url": upstream.url}))
        .await;
    let dana_token = provider.token("dana", "acme", &[], "switchboard", 300);
    let (status, body) = daemon
        .send(Some(&dana_token), "GET", "/api/servers", None)
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.to_string().contains("user link acme/dana"), "{body}");
    daemon.cli(&["user", "link", "acme/dana"]).await;
    let (status, list) = daemon
        .send(Some(&dana_token), "GET", "/api/servers", None)
        .await;
    assert_eq!(status, 200, "{list}");
    assert!(ids(&list).contains(&"danas-own".to_owned()), "{list}");

    // A token the provider signed for a moment not yet come is not taken now.
    let tomorrow = provider.sign_at(&provider.key, "ana@acme.test", "acme", 86_400, 90_000);
    let (status, _) = daemon
        .send(Some(&tomorrow), "GET", "/api/servers", None)
        .await;
    assert_eq!(status, 401, "a token valid only tomorrow");

    // A tenant nobody added is refused; so is every token that is not the provider's own,
    // for Switchboard, and current.
    let elsewhere = provider.token("zed", "nowhere", &[], "switchboard", 300);
    let (status, body) = daemon
        .send(Some(&elsewhere), "GET", "/api/servers", None)
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.to_string().contains("nowhere"), "{body}");
    let hs256 = format!(
        "{}.{}.c2lnbmF0dXJl",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","typ":"JWT"}"#),
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(json!({"iss": provider.issuer(), "sub": "ana", "org": "acme", "aud": "switchboard", "exp": 4_000_000_000u64}).to_string()),
    );
    for (what, token) in [
        (
            "another audience",
            provider.token("ana@acme.test", "acme", &[], "someone-else", 300),
        ),
        (
            "expired",
            provider.token("ana@acme.test", "acme", &[], "switchboard", -600),
        ),
        (
            "signed by a key the provider does not publish",
            provider.sign(
                &provider.stranger,
                "ana@acme.test",
                "acme",
                &[],
                "switchboard",
                300,
            ),
        ),
        ("a shared-secret algorithm", hs256),
        ("not a JWT at all", "a.b.c".to_owned()),
    ] {
        let response = daemon
            .http
            .get(daemon.url("/api/servers"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{what}");
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(challenge.contains("invalid_token"), "{what}: {challenge}");
    }
}

/// `switchboard vault rotate-master` seals every secret again and wraps the tenants' keys with
/// the new master key: the old key no longer opens the store (and says so), the new one opens
/// every secret; `vault rotate-tenant` gives a tenant a new data key, secrets still opening.
#[tokio::test]
async fn rotating_the_master_and_tenant_keys_keeps_every_secret_and_retires_the_old_master_key() {
    let dir = tempfile::tempdir().unwrap();
    cli(
        dir.path(),
        &[
            "server",
            "add",
            "s",
            "https://s.test/mcp",
            "--header",
            "X-Team=blue",
        ],
    )
    .await;
    let show = || cli(dir.path(), &["server", "show", "s", "--json"]);
    assert!(show().await.contains("blue"));

    let rotated = cli(dir.path(), &["vault", "rotate-tenant"]).await;
    assert!(rotated.contains("version 2"), "{rotated}");
    assert!(show().await.contains("blue"));

    let new_key = dir.path().join("new.key");
    let rotated = cli(
        dir.path(),
        &[
            "vault",
            "rotate-master",
            "--new-key-file",
            new_key.to_str().unwrap(),
        ],
    )
    .await;
    assert!(rotated.contains("Sealed 1 servers'"), "{rotated}");
    let with_old_key = common::run(dir.path(), &["server", "show", "s"]).await;
    assert!(!with_old_key.status.success());
    assert!(
        String::from_utf8_lossy(&with_old_key.stderr).contains("different vault key"),
        "{}",
        String::from_utf8_lossy(&with_old_key.stderr)
    );
    std::fs::rename(&new_key, dir.path().join("vault.key")).unwrap();
    assert!(
        show().await.contains("blue"),
        "the new key opens everything"
    );
}

/// What `whoami` of server `id` answers in `key`'s workspace (the stdio fixture's
/// `$FIXTURE_MARK` and directory), once the server is connected.
async fn whoami(daemon: &Daemon, key: &str, id: &str) -> String {
    let mut last = Value::Null;
    for n in 0..200 {
        let answer = daemon
            .mcp(
                Some(key),
                json!({"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call", "params": {
                "name": format!("{id}__whoami"), "arguments": {},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .await;
        if let Some(text) = answer["result"]["content"][0]["text"].as_str() {
            return text.to_owned();
        }
        last = answer;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("whoami never answered: {last}");
}

/// Waits (up to 5 s: the server restarts with new settings) until `whoami` of `id` in `key`'s
/// workspace starts with `mark`.
async fn await_whoami(daemon: &Daemon, key: &str, id: &str, mark: &str) {
    let mut said = String::new();
    for _ in 0..100 {
        said = whoami(daemon, key, id).await;
        if said.starts_with(mark) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("whoami never said {mark}: {said}");
}

/// A shared server with each user's own settings over it: Ana's own environment value reaches
/// the server process her workspace runs, Bob's workspace keeps the tenant's; her settings are
/// hers to read and forget, and cannot be set on her own server, by the operator, or for a
/// header the transport sets itself.
#[tokio::test]
async fn a_user_sets_their_own_credentials_for_a_shared_server_and_only_they_use_them() {
    let http_upstream = transports::streamable_http(Era::Modern).await;
    let daemon = Daemon::start().await;
    let [ana, bob, carol, _] = people(&daemon).await;
    approve_fixture(&daemon).await;
    daemon
        .add_server(
            &carol,
            json!({"id": "tool", "approvedCommand": "fixture", "env": {"FIXTURE_MARK": "shared"}}),
        )
        .await;
    daemon
        .add_server(&carol, json!({"id": "web", "url": http_upstream.url}))
        .await;
    assert!(whoami(&daemon, &ana, "tool").await.starts_with("shared"));
    // A member sees what the shared server is, not the values it runs with; its admin does.
    let (_, anas_view) = daemon
        .send(Some(&ana), "GET", "/api/servers/tool", None)
        .await;
    assert_eq!(
        anas_view["transport"]["env"][0]["value"], "********",
        "{anas_view}"
    );
    let (_, carols_view) = daemon
        .send(Some(&carol), "GET", "/api/servers/tool", None)
        .await;
    assert_eq!(
        carols_view["transport"]["env"][0]["value"], "shared",
        "{carols_view}"
    );

    let (status, view) = daemon
        .send(
            Some(&ana),
            "PUT",
            "/api/servers/tool/my-settings",
            Some(json!({"env": {"FIXTURE_MARK": "ana"}})),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["values"][0]["value"], "ana");
    await_whoami(&daemon, &ana, "tool", "ana").await;
    assert!(
        whoami(&daemon, &bob, "tool").await.starts_with("shared"),
        "bob's has the tenant's"
    );
    let (_, bobs) = daemon
        .send(Some(&bob), "GET", "/api/servers/tool/my-settings", None)
        .await;
    assert_eq!(bobs["values"], json!([]), "{bobs}");

    // Where settings of one's own make no sense, or would break the transport.
    daemon
        .add_server(&ana, json!({"id": "own", "url": http_upstream.url}))
        .await;
    for (key, path, body, expected) in [
        (
            &ana,
            "/api/servers/own/my-settings",
            json!({"headers": {"X-A": "1"}}),
            403,
        ),
        (
            &ana,
            "/api/servers/web/my-settings",
            json!({"headers": {"Mcp-Session-Id": "x"}}),
            403,
        ),
        (&ana, "/api/servers/nothing/my-settings", json!({}), 404),
        (
            &ana,
            "/api/servers/web/my-settings",
            json!({"colour": "red"}),
            400,
        ),
    ] {
        let (status, answer) = daemon.send(Some(key), "PUT", path, Some(body)).await;
        assert_eq!(status, expected, "{path}: {answer}");
    }
    let (status, _) = daemon
        .send(
            Some(OPERATOR_KEY),
            "PUT",
            "/api/servers/nothing/my-settings",
            Some(json!({})),
        )
        .await;
    assert_eq!(
        status, 403,
        "the operator's workspace has no settings of its own"
    );

    let (status, _) = daemon
        .send(Some(&ana), "DELETE", "/api/servers/tool/my-settings", None)
        .await;
    assert_eq!(status, 204);
    await_whoami(&daemon, &ana, "tool", "shared").await;
}

/// One user's workspace taking seconds to open (it waits for a shared server that accepts
/// connections and never answers) holds up nobody else's requests.
#[tokio::test]
async fn a_workspace_slow_to_open_holds_up_no_other_users_requests() {
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", hanging.local_addr().unwrap());
    let _held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hanging.accept().await {
            held.push(socket);
        }
    });
    let daemon = Daemon::start().await;
    let [ana, _, carol, gus] = people(&daemon).await;
    daemon
        .add_server(&carol, json!({"id": "stuck", "url": url}))
        .await;
    let anas_first = tokio::spawn({
        let (http, url) = (daemon.http.clone(), daemon.url("/api/servers"));
        async move {
            http.get(url)
                .bearer_auth(ana)
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = daemon.send(Some(&gus), "GET", "/api/servers", None).await;
    assert_eq!(status, 200);
    assert!(
        !anas_first.is_finished(),
        "gus is answered while ana's workspace is still opening"
    );
    assert_eq!(anas_first.await.unwrap(), 200);
}

/// The tool names `key`'s workspace lists in the deferred view (a stateless request asking for
/// it with `X-Switchboard-Tools`): the meta-tools, and the tools pinned for that user.
async fn deferred_tools(daemon: &Daemon, key: &str) -> Vec<String> {
    let answer = daemon
        .mcp_with(
            Some(key),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}}),
            &[("x-switchboard-tools", "deferred")],
        )
        .await;
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A tool a user pins on a shared server (their own settings) is listed to their model in the
/// deferred view from then on; another user's model sees only the meta-tools.
#[tokio::test]
async fn a_tool_a_user_pins_on_a_shared_server_is_listed_to_their_model_only() {
    let daemon = Daemon::start().await;
    let [ana, bob, carol, _] = people(&daemon).await;
    approve_fixture(&daemon).await;
    daemon
        .add_server(&carol, json!({"id": "tool", "approvedCommand": "fixture"}))
        .await;
    daemon.await_connected(&ana, "tool").await;
    let before = deferred_tools(&daemon, &ana).await;
    assert!(
        before.contains(&"search_tools".to_owned()) && !before.contains(&"tool__echo".to_owned()),
        "{before:?}"
    );

    let (status, view) = daemon
        .send(
            Some(&ana),
            "PUT",
            "/api/servers/tool/my-settings",
            Some(json!({"pinned": ["echo"]})),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["pinned"], json!(["echo"]));
    let mut listed = Vec::new();
    for _ in 0..100 {
        listed = deferred_tools(&daemon, &ana).await;
        if listed.contains(&"tool__echo".to_owned()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listed.contains(&"tool__echo".to_owned()), "{listed:?}");
    let bobs = deferred_tools(&daemon, &bob).await;
    assert!(!bobs.contains(&"tool__echo".to_owned()), "{bobs:?}");
    assert!(bobs.contains(&"search_tools".to_owned()), "{bobs:?}");
}

/// Nobody but the operator chooses what runs on the daemon's host: a member's or tenant admin's
/// command (added, replaced, imported or tested) is refused and never started; they run the
/// operator's approved commands only, with the arguments and variables those leave to them, and
/// set no other variable for a shared stdio server (`PATH`, `LD_PRELOAD`, `NODE_OPTIONS`), on the
/// operator's own stdio servers none at all. Approving commands is the operator's alone.
#[tokio::test]
async fn members_and_tenant_admins_run_only_the_operators_approved_commands() {
    let daemon = Daemon::start().await;
    let [ana, _bob, carol, _] = people(&daemon).await;
    approve_fixture(&daemon).await;
    let marker = daemon.dir.path().join("a-user-ran-a-command");
    let shell = json!(["-c", format!("touch {}", marker.display())]);
    for key in [&ana, &carol] {
        for (method, path, body) in [
            (
                "POST",
                "/api/servers",
                json!({"id": "mine", "command": "sh", "args": shell}),
            ),
            (
                "PUT",
                "/api/servers/mine",
                json!({"command": "sh", "args": shell}),
            ),
            (
                "POST",
                "/api/test-connection",
                json!({"command": "sh", "args": shell}),
            ),
        ] {
            let (status, answer) = daemon.send(Some(key), method, path, Some(body)).await;
            assert_eq!(status, 403, "{method} {path}: {answer}");
            assert!(
                answer["error"]
                    .as_str()
                    .unwrap()
                    .contains("approved commands"),
                "{answer}"
            );
        }
        let (status, outcome) = daemon
            .send(
                Some(key),
                "POST",
                "/api/servers/import",
                Some(json!({"mcpServers": {"pwned": {"command": "sh", "args": shell}}})),
            )
            .await;
        assert_eq!(status, 200, "{outcome}");
        assert_eq!(outcome["imported"], json!([]), "{outcome}");
        assert!(
            outcome["skipped"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("operator"),
            "{outcome}"
        );
    }
    let refused_choices = [
        json!({"id": "mine", "approvedCommand": "fixture", "args": ["-e", "x"]}),
        json!({"id": "mine", "approvedCommand": "fixture", "env": {"PATH": "/tmp"}}),
        json!({"id": "mine", "approvedCommand": "fixture", "env": {"LD_PRELOAD": "/tmp/x.so"}}),
        json!({"id": "mine", "approvedCommand": "nothing-approved"}),
    ];
    for body in refused_choices {
        let (status, answer) = daemon
            .send(Some(&ana), "POST", "/api/servers", Some(body.clone()))
            .await;
        assert_eq!(status, 403, "{body}: {answer}");
    }
    // What the command leaves to users works: her own argument and value.
    daemon
        .add_server(
            &ana,
            json!({"id": "mine", "approvedCommand": "fixture", "args": ["legacy"],
                   "env": {"FIXTURE_MARK": "ana's"}}),
        )
        .await;
    await_whoami(&daemon, &ana, "mine", "ana's").await;

    // Her own variables for a shared server: only those the command names.
    daemon
        .add_server(
            &carol,
            json!({"id": "shared", "approvedCommand": "fixture"}),
        )
        .await;
    for variable in ["PATH", "LD_PRELOAD", "NODE_OPTIONS"] {
        let (status, answer) = daemon
            .send(
                Some(&ana),
                "PUT",
                "/api/servers/shared/my-settings",
                Some(json!({"env": {variable: "x"}})),
            )
            .await;
        assert_eq!(status, 403, "{variable}: {answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("only FIXTURE_MARK"),
            "{answer}"
        );
    }
    // On a stdio server the operator defined for the default tenant, none at all.
    daemon.cli(&["user", "add", "dora"]).await;
    let dora = daemon.key_of("dora").await;
    let fixture = switchboard_fixtures::stdio_fixture_binary();
    daemon
        .cli(&[
            "server",
            "add",
            "local-tool",
            "--",
            fixture.to_str().unwrap(),
        ])
        .await;
    let (status, answer) = daemon
        .send(
            Some(&dora),
            "PUT",
            "/api/servers/local-tool/my-settings",
            Some(json!({"env": {"FIXTURE_MARK": "dora"}})),
        )
        .await;
    assert_eq!(status, 403, "{answer}");

    // Everyone sees what is approved (the operator's own values hidden); only the operator
    // approves.
    let (status, listed) = daemon.send(Some(&ana), "GET", "/api/commands", None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["commands"][0]["name"], "fixture");
    assert_eq!(listed["commands"][0]["user_env"], json!(["FIXTURE_MARK"]));
    let approve = json!({"command": "sh", "args": ["-c", "id"]});
    for key in [&ana, &carol] {
        let (status, answer) = daemon
            .send(
                Some(key),
                "PUT",
                "/api/commands/shell",
                Some(approve.clone()),
            )
            .await;
        assert_eq!(status, 403, "{answer}");
        let (status, _) = daemon
            .send(Some(key), "DELETE", "/api/commands/fixture", None)
            .await;
        assert_eq!(status, 403);
    }
    let (status, answer) = daemon
        .send(
            Some(OPERATOR_KEY),
            "PUT",
            "/api/commands/shell",
            Some(json!({"command": "sh", "env": {"API_TOKEN": "operator-secret"}})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (_, listed) = daemon.send(Some(&ana), "GET", "/api/commands", None).await;
    assert!(
        !listed.to_string().contains("operator-secret"),
        "the operator's values are not shown: {listed}"
    );
    assert!(!marker.exists(), "a user made the daemon run a command");
}

/// A user removed with the CLI is gone from the running daemon within its look at the store:
/// their open event stream ends, their workspace's servers stop (the session at the server is
/// ended), and their key stops working.
#[tokio::test]
async fn a_removed_users_streams_end_and_their_servers_stop() {
    let upstream = transports::streamable_http(Era::Legacy).await;
    let daemon = Daemon::start().await;
    let [ana, ..] = people(&daemon).await;
    daemon
        .add_server(&ana, json!({"id": "mine", "url": upstream.url}))
        .await;
    daemon.await_connected(&ana, "mine").await;
    let mut events = daemon
        .http
        .get(daemon.url("/api/events"))
        .bearer_auth(&ana)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let first = events.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("status"));
    let deletes = || {
        upstream
            .state
            .deletes
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    assert_eq!(deletes(), 0);

    daemon.cli(&["user", "remove", "acme/ana"]).await;
    tokio::time::timeout(Duration::from_secs(15), async {
        while let Ok(Some(_)) = events.chunk().await {}
    })
    .await
    .expect("her event stream ends once the daemon sees she is gone");
    for _ in 0..200 {
        if deletes() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(deletes() > 0, "her server's session is ended");
    let (status, _) = daemon.send(Some(&ana), "GET", "/api/servers", None).await;
    assert_eq!(status, 401);
}

/// Each user of a multi-user daemon is their own client for `--client-rate-limit`: one user's
/// calls use up only their own allowance.
#[tokio::test]
async fn each_user_has_their_own_rate_limit() {
    let (_upstream, daemon, [ana, bob]) =
        shared_by_ana_and_bob(&["--client-rate-limit", "2/h"]).await;
    for id in 1..3 {
        let answer = echo(&daemon, &ana, id).await;
        assert!(answer["result"].is_object(), "{answer}");
    }
    let refused = echo(&daemon, &ana, 3).await;
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("client user acme/ana"),
        "{refused}"
    );
    let answer = echo(&daemon, &bob, 4).await;
    assert!(answer["result"].is_object(), "bob has his own: {answer}");
}

/// A daemon with `options`, and the fixture `shared` (2026-07-28) that acme's admin shared,
/// connected for ana and bob; their keys.
async fn shared_by_ana_and_bob(options: &[&str]) -> (RunningFixture, Daemon, [String; 2]) {
    let upstream = transports::streamable_http(Era::Modern).await;
    let daemon = Daemon::start_with(options).await;
    let [ana, bob, carol, _] = people(&daemon).await;
    daemon
        .add_server(&carol, json!({"id": "shared", "url": upstream.url}))
        .await;
    daemon.await_connected(&ana, "shared").await;
    daemon.await_connected(&bob, "shared").await;
    (upstream, daemon, [ana, bob])
}

/// A 2026-07-28 request: `params` with the per-request `_meta` a stateless client sends.
fn stateless(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// `shared__echo` called in `key`'s workspace as a 2026-07-28 request; the JSON-RPC answer.
async fn echo(daemon: &Daemon, key: &str, id: u64) -> Value {
    echo_at(daemon, "/mcp", key, id).await
}

/// A stateless call of `shared__echo` at `path` with `key`.
async fn echo_at(daemon: &Daemon, path: &str, key: &str, id: u64) -> Value {
    let call = json!({"name": "shared__echo", "arguments": {"message": "hi"}});
    daemon
        .mcp_at(path, Some(key), stateless(id, "tools/call", call), &[])
        .await
}

/// A draining multi-user daemon takes no new request from anyone, a user's included, and
/// finishes every request it started (a user's call running at the upstream when SIGTERM
/// came is answered); `/readyz` says it is draining, while `/healthz` still answers.
#[tokio::test]
async fn a_draining_daemon_refuses_every_new_request_and_finishes_started_ones() {
    let (upstream, daemon, [ana, bob]) = shared_by_ana_and_bob(&["--drain-timeout", "30"]).await;
    assert_eq!(
        daemon.send(None, "GET", "/readyz", None).await,
        (200, json!({"ready": true}))
    );

    let slow = {
        let (http, url, key) = (daemon.http.clone(), daemon.url("/mcp"), ana.clone());
        tokio::spawn(async move {
            let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "shared__slow", "arguments": {"ms": 3000, "quiet": true},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}});
            let response = http
                .post(url)
                .bearer_auth(key)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "shared__slow")
                .json(&call)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        })
    };
    for _ in 0..200 {
        if upstream.state.last_call_id.lock().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        upstream.state.last_call_id.lock().unwrap().is_some(),
        "the slow call reached the upstream"
    );
    let pid = daemon.child.id().expect("running").to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );

    // Draining: readiness says so; new requests of the users and of the operator are refused
    // before anything runs.
    let mut unready = None;
    for _ in 0..200 {
        let (status, answer) = daemon.send(None, "GET", "/readyz", None).await;
        if status == 503 {
            unready = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let unready = unready.expect("/readyz turns 503 while draining");
    assert!(
        unready["reason"].as_str().unwrap().contains("draining"),
        "{unready}"
    );
    let (health, _) = daemon.send(None, "GET", "/healthz", None).await;
    assert_eq!(health, 200, "liveness stays");
    let echoes_before = upstream.state.last_call_id.lock().unwrap().clone();
    for key in [ana.as_str(), bob.as_str(), OPERATOR_KEY] {
        let (status, answer) = daemon
            .send(
                Some(key),
                "POST",
                "/mcp",
                Some(stateless(
                    8,
                    "tools/call",
                    json!({"name": "shared__echo", "arguments": {"message": "late"}}),
                )),
            )
            .await;
        assert_eq!(status, 503, "{answer}");
        assert_eq!(answer["error"]["code"], -32000, "{answer}");
    }
    assert_eq!(
        *upstream.state.last_call_id.lock().unwrap(),
        echoes_before,
        "no refused call reached the upstream"
    );

    let (status, body) = tokio::time::timeout(Duration::from_secs(30), slow)
        .await
        .expect("the started call ends within the drain")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"done\""),
        "the started call was answered: {body}"
    );
}

/// PostgreSQL going away under a `--users` daemon (a relay to it cut): users whose keys were
/// looked up before go on calling their open workspaces' servers from memory, quickly; a key
/// never seen gets a JSON-RPC error (503), an admin write 503, `/readyz` 503 with the reason;
/// once the store is back, everything works again.
#[tokio::test]
async fn with_the_store_gone_open_workspaces_keep_serving_and_errors_say_why() {
    let postgres = switchboard_fixtures::postgres::TestPostgres::shared();
    let relay = switchboard_fixtures::cuttable::CuttableRelay::to(
        format!("127.0.0.1:{}", postgres.port()).parse().unwrap(),
    )
    .await;
    let database = postgres.database();
    let through_relay = database.replacen(
        &format!(":{}/", postgres.port()),
        &format!(":{}/", relay.port),
        1,
    );
    let (_upstream, daemon, [ana, bob]) =
        shared_by_ana_and_bob(&["--store", &through_relay, "--store-check", "3600"]).await;
    let dan = {
        daemon.cli(&["user", "add", "acme/dan"]).await;
        daemon.key_of("acme/dan").await
    };
    // Adding dan changed the users: the daemon forgot the keys it had looked up (a revoked key
    // stops working at once). Ana's and Bob's are looked up again by their calls.
    for (id, key) in [(1, &ana), (11, &bob)] {
        let answer = echo(&daemon, key, id).await;
        assert!(answer["result"].is_object(), "{answer}");
    }

    relay.cut();
    // Past the keys' cache lifetime: the next request of each must do without the store.
    tokio::time::sleep(Duration::from_secs(11)).await;
    for (id, key) in [(2, &ana), (3, &bob), (4, &ana)] {
        let started = std::time::Instant::now();
        let answer = echo(&daemon, key, id).await;
        assert!(answer["result"].is_object(), "{answer}");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "answered without waiting out the store's connect timeout"
        );
    }
    let (status, refused) = daemon
        .send(
            Some(&dan),
            "POST",
            "/mcp",
            Some(stateless(5, "tools/list", json!({}))),
        )
        .await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("store"),
        "{refused}"
    );
    let (status, answer) = daemon
        .send(
            Some(OPERATOR_KEY),
            "PATCH",
            "/api/servers/shared",
            Some(json!({"description": "x"})),
        )
        .await;
    assert_eq!(status, 503, "{answer}");
    let (status, ready) = daemon.send(None, "GET", "/readyz", None).await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["reason"], "the store does not answer");

    relay.restore().await;
    let mut back = false;
    for _ in 0..100 {
        if daemon.send(None, "GET", "/readyz", None).await.0 == 200 {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(back, "ready again once the store answers");
    let answer = daemon
        .mcp(Some(&dan), stateless(6, "tools/list", json!({})))
        .await;
    assert!(answer["result"]["tools"].is_array(), "{answer}");
}

/// A tenant admin defines the tenant's endpoints, and members use them: a member's client of an
/// endpoint sees only what it includes, a member cannot change an endpoint, and another
/// tenant's users find no endpoint of that name.
#[tokio::test]
async fn a_tenant_admin_defines_endpoints_that_bound_what_members_reach() {
    let upstream = transports::streamable_http(Era::Modern).await;
    let daemon = Daemon::start().await;
    let [ana, _bob, carol, gus] = people(&daemon).await;
    daemon
        .add_server(&carol, json!({"id": "shared", "url": upstream.url}))
        .await;
    daemon.await_connected(&ana, "shared").await;
    let lite = json!({"servers": {"shared": ["echo"]}});
    let (status, answer) = daemon
        .send(Some(&ana), "PUT", "/api/endpoints/lite", Some(lite.clone()))
        .await;
    assert_eq!(status, 403, "a member defines no endpoint: {answer}");
    let (status, answer) = daemon
        .send(Some(&carol), "PUT", "/api/endpoints/lite", Some(lite))
        .await;
    assert_eq!(status, 201, "{answer}");
    // Ana's workspace follows the store (its --store-check), within seconds.
    let mut listed = Value::Null;
    for _ in 0..200 {
        let (status, answer) = daemon.send(Some(&ana), "GET", "/api/endpoints", None).await;
        assert_eq!(status, 200, "{answer}");
        listed = answer;
        if listed[0]["name"] == "lite" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(listed[0]["name"], "lite", "{listed}");

    let list = stateless(1, "tools/list", json!({}));
    let inside = daemon
        .mcp_at("/mcp/e/lite", Some(&ana), list.clone(), &[])
        .await;
    let names: Vec<&str> = inside["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{inside}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["shared__echo"]);
    assert!(
        daemon.mcp_tools(&ana).await.len() > 1,
        "the tenant's own door lists more"
    );
    let add = json!({"name": "shared__add", "arguments": {"a": 1, "b": 2}});
    let refused = daemon
        .mcp_at(
            "/mcp/e/lite",
            Some(&ana),
            stateless(2, "tools/call", add),
            &[],
        )
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown tool 'shared__add'")),
        "{refused}"
    );

    let other_tenant = daemon
        .http
        .post(daemon.url("/mcp/e/lite"))
        .bearer_auth(&gus)
        .header("accept", "application/json, text/event-stream")
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(other_tenant.status(), 404, "globex has no endpoint 'lite'");

    // The audit log: ana's call through the endpoint is recorded as hers, in acme; carol (an
    // admin) reads acme's records and only those, ana (a member) none, the operator all.
    let called = echo_at(&daemon, "/mcp/e/lite", &ana, 3).await;
    assert!(called["result"].is_object(), "{called}");
    let (status, _) = daemon
        .send(
            Some(&gus),
            "PUT",
            "/api/endpoints/g",
            Some(json!({"servers": {"shared": "*"}})),
        )
        .await;
    assert_eq!(status, 403, "gus is a member");
    let (status, answer) = daemon.send(Some(&ana), "GET", "/api/audit", None).await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = daemon
        .send(Some(&carol), "GET", "/api/audit?tenant=globex", None)
        .await;
    assert_eq!(status, 200, "{answer}");
    let records = answer["records"].as_array().unwrap();
    assert!(
        records.iter().all(|record| record["tenant"] == "acme"),
        "{answer}"
    );
    let call = records
        .iter()
        .find(|record| record["kind"] == "call" && record["outcome"] == "ok")
        .unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(
        (
            call["actor"].as_str(),
            call["endpoint"].as_str(),
            call["tool"].as_str()
        ),
        (Some("ana"), Some("lite"), Some("echo"))
    );
    assert!(
        records.iter().any(|record| record["kind"] == "change"
            && record["actor"] == "carol"
            && record["detail"]["path"] == "/api/endpoints/lite"),
        "{answer}"
    );
    assert!(
        records.iter().any(|record| record["kind"] == "change"
            && record["actor"] == "ana"
            && record["outcome"] == "403"),
        "a refused change is recorded too: {answer}"
    );
    let (status, answer) = daemon
        .send(
            Some(OPERATOR_KEY),
            "GET",
            "/api/audit?kind=change&tenant=globex",
            None,
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["records"][0]["actor"], "gus", "{answer}");

    // A shared tool's changed definition: shown to the member, accepted only by an admin.
    upstream
        .state
        .rug_pull
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, _) = daemon
        .send(Some(&ana), "POST", "/api/servers/shared/check", None)
        .await;
    assert!(status < 300, "{status}");
    let (status, changed) = daemon
        .send(Some(&ana), "GET", "/api/servers/shared/definitions", None)
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed[0]["tool"], "add", "{changed}");
    let accept = "/api/servers/shared/definitions/add/accept";
    let (status, answer) = daemon
        .send(Some(&ana), "POST", accept, Some(json!({})))
        .await;
    assert_eq!(
        status, 403,
        "a member accepts nothing for the tenant: {answer}"
    );
    let (status, answer) = daemon
        .send(Some(&carol), "POST", "/api/servers/shared/check", None)
        .await;
    assert!(status < 300, "{answer}");
    let (status, answer) = daemon
        .send(Some(&carol), "POST", accept, Some(json!({})))
        .await;
    assert_eq!(status, 204, "{answer}");
    // Ana's workspace reads the acceptance from the store.
    let mut left = Value::Null;
    for _ in 0..200 {
        (_, left) = daemon
            .send(Some(&ana), "GET", "/api/servers/shared/definitions", None)
            .await;
        if left == json!([]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, json!([]), "accepted for the tenant");
}

/// The ids of the servers `key`'s workspace lists once they are `want` (its workspace follows
/// the store within seconds); the last listing otherwise.
async fn await_servers(daemon: &Daemon, key: &str, want: &[&str]) -> Vec<String> {
    let mut listed = Vec::new();
    for _ in 0..200 {
        let (status, list) = daemon.send(Some(key), "GET", "/api/servers", None).await;
        assert_eq!(status, 200, "{list}");
        listed = ids(&list);
        if listed == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    listed
}

/// The tool names `key` gets from `tools/list` at `path` once they are `want`.
async fn await_tools_at(daemon: &Daemon, path: &str, key: &str, want: &[&str]) -> Vec<String> {
    let mut names = Vec::new();
    for id in 0..200 {
        let answer = daemon
            .mcp_at(path, Some(key), stateless(id, "tools/list", json!({})), &[])
            .await;
        names = answer["result"]["tools"]
            .as_array()
            .map(|tools| {
                let mut names: Vec<String> = tools
                    .iter()
                    .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
                    .collect();
                names.sort();
                names
            })
            .unwrap_or_default();
        if names == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    names
}

#[tokio::test]
async fn grants_to_users_and_groups_bound_what_each_member_reaches_through_every_door() {
    let upstream = transports::streamable_http(Era::Modern).await;
    let provider = IdentityProvider::start().await;
    let daemon = daemon_with_provider(&provider).await;
    let [ana, bob, carol, _gus] = people(&daemon).await;
    for id in ["docs", "tracker"] {
        daemon
            .add_server(&carol, json!({"id": id, "url": upstream.url}))
            .await;
    }
    // No grant yet: every member reaches every shared server.
    assert_eq!(
        await_servers(&daemon, &bob, &["docs", "tracker"]).await,
        ["docs", "tracker"]
    );

    // Only a tenant admin (or the operator) manages groups and grants.
    let eng = json!({"members": ["ana"], "description": "engineers"});
    for (method, path, body) in [
        ("PUT", "/api/groups/eng", Some(eng.clone())),
        ("GET", "/api/groups", None),
        ("GET", "/api/grants", None),
        (
            "POST",
            "/api/grants",
            Some(json!({"subject": "user:ana", "server": "docs"})),
        ),
    ] {
        let (status, answer) = daemon.send(Some(&ana), method, path, body).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
    }
    let (status, answer) = daemon
        .send(
            Some(&carol),
            "PUT",
            "/api/groups/eng",
            Some(json!({"members": ["zed"]})),
        )
        .await;
    assert_eq!(
        status, 404,
        "a member must be a user of the tenant: {answer}"
    );
    let (status, answer) = daemon
        .send(Some(&carol), "PUT", "/api/groups/eng", Some(eng))
        .await;
    assert_eq!(status, 201, "{answer}");
    for (body, want) in [
        (json!({"subject": "group:eng", "server": "docs"}), 201),
        (json!({"subject": "group:eng", "server": "docs"}), 200),
        (
            json!({"subject": "user:bob", "server": "tracker", "tool": "echo"}),
            201,
        ),
        (json!({"subject": "user:bob", "server": "nowhere"}), 404),
        (json!({"subject": "group:ops", "server": "docs"}), 404),
        (json!({"subject": "user:bob", "endpoint": "adders"}), 404),
        (json!({"subject": "user:bob", "tool": "echo"}), 400),
    ] {
        let (status, answer) = daemon
            .send(Some(&carol), "POST", "/api/grants", Some(body.clone()))
            .await;
        assert_eq!(status, want, "{body}: {answer}");
    }

    // Ana (group eng) reaches docs only; bob tracker's echo only; carol, an admin, all.
    assert_eq!(await_servers(&daemon, &ana, &["docs"]).await, ["docs"]);
    assert_eq!(
        await_servers(&daemon, &bob, &["tracker"]).await,
        ["tracker"]
    );
    assert_eq!(
        await_servers(&daemon, &carol, &["docs", "tracker"]).await,
        ["docs", "tracker"]
    );
    daemon.await_connected(&bob, "tracker").await;
    assert_eq!(
        await_tools_at(&daemon, "/mcp", &bob, &["tracker__echo"]).await,
        ["tracker__echo"]
    );
    // Nothing else is there for bob to call, read, search, list, pin or configure.
    let call = |id: u64, name: &str| {
        stateless(
            id,
            "tools/call",
            json!({"name": name, "arguments": {"a": 1, "b": 2}}),
        )
    };
    for name in ["tracker__add", "docs__echo"] {
        let refused = daemon.mcp_at("/mcp", Some(&bob), call(9, name), &[]).await;
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown tool")),
            "{name}: {refused}"
        );
    }
    let (status, tools) = daemon
        .send(Some(&bob), "GET", "/api/servers/tracker/tools", None)
        .await;
    assert_eq!(status, 200, "{tools}");
    assert!(
        !tools.to_string().contains("\"add\""),
        "an ungranted tool is not even named: {tools}"
    );
    // An ungranted server is answered as one that does not exist.
    for path in ["", "/tools", "/prompts", "/resources"] {
        let (status, answer) = daemon
            .send(Some(&bob), "GET", &format!("/api/servers/docs{path}"), None)
            .await;
        let (none_status, none) = daemon
            .send(
                Some(&bob),
                "GET",
                &format!("/api/servers/nowhere{path}"),
                None,
            )
            .await;
        assert!(status >= 400, "{path}: {answer}");
        assert_eq!(
            (status, answer.to_string().replace("docs", "nowhere")),
            (none_status, none.to_string()),
            "{path}"
        );
    }
    let (status, answer) = daemon
        .send(
            Some(&bob),
            "POST",
            "/api/servers/tracker/tools/add/call",
            Some(json!({"arguments": {"a": 1, "b": 2}})),
        )
        .await;
    assert!(
        status >= 400,
        "the console's Try calls no ungranted tool: {status} {answer}"
    );
    let (status, answer) = daemon
        .send(
            Some(&bob),
            "PUT",
            "/api/servers/docs/my-settings",
            Some(json!({"pinned": ["echo"]})),
        )
        .await;
    assert_eq!(status, 404, "{answer}");
    let (status, found) = daemon
        .send(Some(&bob), "GET", "/api/tools/search?q=add%20numbers", None)
        .await;
    assert_eq!(status, 200, "{found}");
    assert!(!found.to_string().contains("__add"), "{found}");
    let (_, exported) = daemon.send(Some(&bob), "GET", "/api/tools", None).await;
    assert!(!exported.to_string().contains("docs__"), "{exported}");

    // An endpoint's door opens to those granted it, with what it includes.
    let (status, answer) = daemon
        .send(
            Some(&carol),
            "PUT",
            "/api/endpoints/adders",
            Some(json!({"servers": {"tracker": ["add"]}})),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    let door = daemon
        .http
        .post(daemon.url("/mcp/e/adders"))
        .bearer_auth(&bob)
        .header("accept", "application/json, text/event-stream")
        .json(&stateless(1, "tools/list", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(door.status(), 403, "no grant for the endpoint yet");
    let (_, endpoints) = daemon.send(Some(&bob), "GET", "/api/endpoints", None).await;
    assert_eq!(endpoints, json!([]), "an ungranted endpoint is not listed");
    let (status, granted) = daemon
        .send(
            Some(&carol),
            "POST",
            "/api/grants",
            Some(json!({"subject": "user:bob", "endpoint": "adders"})),
        )
        .await;
    assert_eq!(status, 201, "{granted}");
    assert_eq!(
        await_tools_at(&daemon, "/mcp/e/adders", &bob, &["tracker__add"]).await,
        ["tracker__add"]
    );
    assert_eq!(
        await_tools_at(&daemon, "/mcp", &bob, &["tracker__add", "tracker__echo"]).await,
        ["tracker__add", "tracker__echo"]
    );
    let added = daemon
        .mcp_at("/mcp/e/adders", Some(&bob), call(10, "tracker__add"), &[])
        .await;
    assert!(added["result"].is_object(), "{added}");
    let (status, me) = daemon.send(Some(&bob), "GET", "/api/me", None).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["reach"]["endpoints"], json!(["adders"]), "{me}");
    let (_, me) = daemon.send(Some(&ana), "GET", "/api/me", None).await;
    assert_eq!(me["groups"], json!(["eng"]), "{me}");

    // A member's own servers are theirs whatever the grants say.
    daemon
        .add_server(&ana, json!({"id": "anas-own", "url": upstream.url}))
        .await;
    assert_eq!(
        await_servers(&daemon, &ana, &["anas-own", "docs"]).await,
        ["anas-own", "docs"]
    );

    // Groups named by the identity provider's token count when the tenant has them.
    let erin = provider.token_in_groups("erin", "acme", &["eng", "unknown-group"]);
    let fay = provider.token_in_groups("fay", "acme", &[]);
    assert_eq!(await_servers(&daemon, &erin, &["docs"]).await, ["docs"]);
    assert_eq!(
        await_servers(&daemon, &fay, &[]).await,
        Vec::<String>::new()
    );

    // Revoking takes effect in open workspaces; removing a group takes its grants with it.
    let (_, grants) = daemon.send(Some(&carol), "GET", "/api/grants", None).await;
    let bobs_endpoint = granted["id"].as_str().unwrap();
    assert!(grants.to_string().contains(bobs_endpoint), "{grants}");
    let (status, _) = daemon
        .send(
            Some(&carol),
            "DELETE",
            &format!("/api/grants/{bobs_endpoint}"),
            None,
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(
        await_tools_at(&daemon, "/mcp", &bob, &["tracker__echo"]).await,
        ["tracker__echo"]
    );
    let (status, _) = daemon
        .send(Some(&carol), "DELETE", "/api/groups/eng", None)
        .await;
    assert_eq!(status, 204);
    assert_eq!(
        await_servers(&daemon, &ana, &["anas-own"]).await,
        ["anas-own"]
    );
    let listed = daemon.cli(&["grant", "list", "--tenant", "acme"]).await;
    assert!(
        listed.contains("user:bob") && !listed.contains("group:eng"),
        "{listed}"
    );

    // Each change is in the audit log, as carol's.
    let (_, audit) = daemon
        .send(
            Some(&carol),
            "GET",
            "/api/audit?kind=change&actor=carol",
            None,
        )
        .await;
    for path in ["/api/groups/eng", "/api/grants"] {
        assert!(
            audit["records"]
                .as_array()
                .is_some_and(|records| records.iter().any(|r| r["detail"]["path"] == path)),
            "{path}: {audit}"
        );
    }

    // With the last grant revoked, the tenant is open again.
    let bobs_tool = daemon
        .cli(&["grant", "list", "--tenant", "acme", "--json"])
        .await;
    let bobs_tool: Value = serde_json::from_str(&bobs_tool).unwrap();
    let id = bobs_tool[0]["id"].as_str().unwrap().to_owned();
    daemon
        .cli(&["grant", "revoke", &id, "--tenant", "acme"])
        .await;
    assert_eq!(
        await_servers(&daemon, &bob, &["docs", "tracker"]).await,
        ["docs", "tracker"]
    );
}

/// The status `key` gets for `method path` (with an MCP `tools/list` body for POSTs).
async fn status_with(daemon: &Daemon, key: &str, method: &str, path: &str) -> u16 {
    let mut request = daemon
        .http
        .request(method.parse().unwrap(), daemon.url(path))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream");
    if method == "POST" {
        request = request
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .json(&stateless(1, "tools/list", json!({})));
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn an_endpoint_key_reaches_its_endpoint_only_and_acts_as_whoever_issued_it() {
    let upstream = transports::streamable_http(Era::Modern).await;
    let daemon = Daemon::start().await;
    let [ana, _bob, carol, gus] = people(&daemon).await;
    daemon
        .add_server(&carol, json!({"id": "shared", "url": upstream.url}))
        .await;
    let (status, answer) = daemon
        .send(
            Some(&carol),
            "PUT",
            "/api/endpoints/lite",
            Some(json!({"servers": {"shared": ["echo"]}})),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    let (status, _) = daemon
        .send(Some(&ana), "POST", "/api/endpoints/lite/keys", None)
        .await;
    assert_eq!(status, 403, "a member issues no key");
    let (status, issued) = daemon
        .send(Some(&carol), "POST", "/api/endpoints/lite/keys", None)
        .await;
    assert_eq!(status, 201, "{issued}");
    let key = issued["key"].as_str().unwrap().to_owned();
    let (_, shown) = daemon
        .send(Some(&carol), "GET", "/api/endpoints/lite", None)
        .await;
    assert_eq!(shown["keys"][0]["user"], "carol", "{shown}");
    daemon.await_connected(&carol, "shared").await;

    // Its endpoint's door and the reads of its tools, nothing else.
    assert_eq!(
        await_tools_at(&daemon, "/mcp/e/lite", &key, &["shared__echo"]).await,
        ["shared__echo"]
    );
    for (method, path) in [
        ("POST", "/mcp"),
        ("GET", "/api/servers"),
        ("GET", "/api/endpoints"),
        ("POST", "/api/endpoints/lite/keys"),
        ("GET", "/api/audit"),
        ("GET", "/api/groups"),
    ] {
        assert_eq!(
            status_with(&daemon, &key, method, path).await,
            403,
            "{method} {path}"
        );
    }
    let (status, tools) = daemon.send(Some(&key), "GET", "/api/tools", None).await;
    assert_eq!(status, 200, "{tools}");
    assert!(
        tools.to_string().contains("shared__echo") && !tools.to_string().contains("shared__add"),
        "{tools}"
    );
    let called = echo_at(&daemon, "/mcp/e/lite", &key, 2).await;
    assert!(called["result"].is_object(), "{called}");
    let (_, audit) = daemon
        .send(
            Some(&carol),
            "GET",
            "/api/audit?kind=call&endpoint=lite",
            None,
        )
        .await;
    let call = &audit["records"][0];
    assert_eq!(
        (call["actor"].as_str(), call["tool"].as_str()),
        (Some("carol"), Some("echo")),
        "{audit}"
    );
    assert!(
        call["client"].to_string().contains("endpoint lite key"),
        "the call says which key made it: {audit}"
    );
    assert_eq!(
        status_with(&daemon, "sbe_0123456789abcdef", "POST", "/mcp/e/lite").await,
        401
    );
    assert_eq!(
        status_with(&daemon, &gus, "POST", "/mcp/e/lite").await,
        404,
        "not globex's"
    );

    // The operator's key for an endpoint of the default tenant acts as the operator.
    let (status, _) = daemon
        .send(
            Some(OPERATOR_KEY),
            "POST",
            "/api/servers",
            Some(json!({"id": "house", "url": upstream.url})),
        )
        .await;
    assert_eq!(status, 201);
    let (status, _) = daemon
        .send(
            Some(OPERATOR_KEY),
            "PUT",
            "/api/endpoints/house-lite",
            Some(json!({"servers": {"house": ["add"]}})),
        )
        .await;
    assert_eq!(status, 201);
    let (_, operators) = daemon
        .send(
            Some(OPERATOR_KEY),
            "POST",
            "/api/endpoints/house-lite/keys",
            None,
        )
        .await;
    let operators = operators["key"].as_str().unwrap().to_owned();
    assert_eq!(
        await_tools_at(&daemon, "/mcp/e/house-lite", &operators, &["house__add"]).await,
        ["house__add"]
    );
    assert_eq!(
        status_with(&daemon, &operators, "POST", "/mcp/e/lite").await,
        403
    );

    // A revoked key, and the key of a user who is gone, stop working.
    let id = issued["id"].as_str().unwrap();
    let (status, _) = daemon
        .send(
            Some(&carol),
            "DELETE",
            &format!("/api/endpoints/lite/keys/{id}"),
            None,
        )
        .await;
    assert_eq!(status, 204);
    let mut now = 0;
    for _ in 0..200 {
        now = status_with(&daemon, &key, "POST", "/mcp/e/lite").await;
        if now == 401 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(now, 401, "a revoked key");
    let (_, second) = daemon
        .send(Some(&carol), "POST", "/api/endpoints/lite/keys", None)
        .await;
    let second = second["key"].as_str().unwrap().to_owned();
    assert_eq!(
        status_with(&daemon, &second, "POST", "/mcp/e/lite").await,
        200
    );
    daemon.cli(&["user", "remove", "acme/carol"]).await;
    for _ in 0..200 {
        now = status_with(&daemon, &second, "POST", "/mcp/e/lite").await;
        if now == 401 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(now, 401, "the key of a removed user");
}
