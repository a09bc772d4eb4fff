//! Several `switchboard serve` replicas on one PostgreSQL database (started by the test run)
//! share one state: a server added by the CLI, an edit through one replica's API and an
//! activation layer reach every replica as they commit, and a stateless (2026-07-28) call is
//! answered by whichever replica gets it. The replicas check the store by polling only once an
//! hour here, so only PostgreSQL's change announcements can bring the changes in time.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{call_through_daemon, command, get_json, server_status, wait_for_state};
use serde_json::Value;
use switchboard_fixtures::postgres::TestPostgres;
use switchboard_fixtures::{Era, transports};

/// Replicas each with a data directory of their own (as on separate machines), one store and
/// one vault key.
struct Replicas {
    store: String,
    dirs: Vec<tempfile::TempDir>,
    daemons: Vec<(tokio::process::Child, u16)>,
}

impl Replicas {
    async fn start(count: usize) -> Self {
        let store = TestPostgres::shared().database();
        let key = "c3dpdGNoYm9hcmQtcmVwbGljYS10ZXN0LWtleS0zMmI="; // 32 bytes, base64
        let mut dirs = Vec::new();
        let mut daemons = Vec::new();
        for _ in 0..count {
            let dir = tempfile::tempdir().unwrap();
            write_key(dir.path(), key);
            daemons.push(spawn_replica(dir.path(), &store));
            dirs.push(dir);
        }
        for (_, port) in &daemons {
            common::await_health(*port).await;
        }
        Self {
            store,
            dirs,
            daemons,
        }
    }

    fn ports(&self) -> Vec<u16> {
        self.daemons.iter().map(|(_, port)| *port).collect()
    }

    /// Sends SIGTERM to the replica on `port`: it drains and stops.
    fn terminate(&self, port: u16) {
        let (child, _) = self
            .daemons
            .iter()
            .find(|(_, p)| *p == port)
            .expect("a replica on that port");
        let pid = child.id().expect("still running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Kills the replica on `port` (SIGKILL): it stops at once, mid-call.
    async fn kill(&mut self, port: u16) {
        let (child, _) = self
            .daemons
            .iter_mut()
            .find(|(_, p)| *p == port)
            .expect("a replica on that port");
        child.kill().await.unwrap();
    }

    /// `switchboard --store <db> <args>` from the first replica's machine.
    async fn cli(&self, args: &[&str]) -> std::process::Output {
        let mut all = vec!["--store", self.store.as_str()];
        all.extend_from_slice(args);
        let output = command(self.dirs[0].path(), &all).output().await.unwrap();
        assert!(
            output.status.success(),
            "switchboard {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }
}

fn write_key(dir: &Path, key: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join("vault.key"))
        .unwrap();
    file.write_all(key.as_bytes()).unwrap();
}

fn spawn_replica(dir: &Path, store: &str) -> (tokio::process::Child, u16) {
    common::spawn_daemon_with(dir, &["--store", store], &["--store-check", "3600"])
}

/// Waits (up to 10 s) until `check` holds for what the replica on `port` says of `server`.
async fn await_status(
    port: u16,
    server: &str,
    what: &str,
    check: impl Fn(Option<&serde_json::Value>) -> bool,
) {
    for _ in 0..200 {
        if check(server_status(port, server).await.as_ref()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the replica on {port} never showed {server} {what}: {:?}",
        server_status(port, server).await
    );
}

#[tokio::test]
async fn replicas_on_one_postgres_share_servers_edits_and_layers_as_they_commit() {
    let upstream = transports::streamable_http(Era::Modern).await;
    let replicas = Replicas::start(3).await;

    // Added by the CLI on the shared store: every replica connects it and serves its calls.
    replicas
        .cli(&["server", "add", "echo", &upstream.url])
        .await;
    for (n, port) in replicas.ports().into_iter().enumerate() {
        wait_for_state(port, "echo", "connected").await;
        let answer = call_through_daemon(port, n as u64 + 1, "echo__echo").await;
        assert_eq!(
            answer["result"]["content"][0]["text"], "hi",
            "replica {n}: {answer}"
        );
    }

    // Disabled through the first replica's API: the others stop it too, and bring it back when
    // it is enabled again.
    let [first, second, third] = replicas.ports()[..] else {
        unreachable!()
    };
    let client = reqwest::Client::new();
    let patch = |port: u16, enabled: bool| {
        client
            .patch(format!("http://127.0.0.1:{port}/api/servers/echo"))
            .json(&serde_json::json!({"enabled": enabled}))
            .send()
    };
    assert!(patch(first, false).await.unwrap().status().is_success());
    for port in [second, third] {
        await_status(port, "echo", "stopped", |status| status.is_none()).await;
    }
    assert!(patch(second, true).await.unwrap().status().is_success());
    for port in [first, third] {
        wait_for_state(port, "echo", "connected").await;
    }

    // An activation layer set through one replica filters another's tools for that user.
    let off = client
        .patch(format!("http://127.0.0.1:{third}/api/activation/users/ana"))
        .json(&serde_json::json!({"servers": {"echo": false}}))
        .send()
        .await
        .unwrap();
    assert!(off.status().is_success(), "{}", off.text().await.unwrap());
    let mut filtered = false;
    for _ in 0..200 {
        let tools = get_json(&format!(
            "http://127.0.0.1:{first}/api/tools?format=mcp&user=ana"
        ))
        .await;
        let listed = tools["tools"].as_array().map_or(0, Vec::len);
        if listed == 0 {
            filtered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(filtered, "the first replica never applied ana's layer");
    let everyone = get_json(&format!("http://127.0.0.1:{first}/api/tools?format=mcp")).await;
    assert!(
        !everyone["tools"].as_array().unwrap().is_empty(),
        "other users keep the tools: {everyone}"
    );
}

/// POSTs one JSON-RPC message to `/mcp` of the replica on `port` as a 2025-11-25 client.
async fn post_legacy(
    port: u16,
    session: Option<&str>,
    message: serde_json::Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

async fn initialize(port: u16) -> String {
    let response = post_legacy(
        port,
        None,
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "replica-test", "version": "1"}}}),
    )
    .await;
    assert!(response.status().is_success(), "{}", response.status());
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = post_legacy(
        port,
        Some(&session),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status(), 202);
    session
}

/// A `tools/call` of `echo__echo` with `message` in `session` at the replica on `port`; the
/// HTTP status and the text answered (empty when none).
async fn echo_in_session(port: u16, session: &str, id: u64, message: &str) -> (u16, String) {
    let response = post_legacy(
        port,
        Some(session),
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo__echo", "arguments": {"message": message}}}),
    )
    .await;
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    let text = body
        .lines()
        .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|answer| answer["id"] == id)
        .and_then(|answer| {
            answer["result"]["content"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (status, text)
}

/// A session outlives the replica that opened it: a request naming it at another replica is
/// answered there (that replica takes the session over from the store: no 404, no new
/// `initialize`), and once the first replica is killed the session goes on at a third. A DELETE
/// ends it; stateless requests need none of this.
#[tokio::test]
async fn a_legacy_session_goes_on_at_another_replica_and_outlives_its_own() {
    let upstream = transports::streamable_http(Era::Legacy).await;
    let mut replicas = Replicas::start(3).await;
    replicas
        .cli(&["server", "add", "echo", &upstream.url])
        .await;
    for port in replicas.ports() {
        wait_for_state(port, "echo", "connected").await;
    }
    let [first, second, third] = replicas.ports()[..] else {
        unreachable!()
    };
    let session = initialize(first).await;
    assert_eq!(
        echo_in_session(first, &session, 1, "at home").await,
        (200, "at home".to_owned())
    );
    assert_eq!(
        echo_in_session(second, &session, 2, "elsewhere").await,
        (200, "elsewhere".to_owned()),
        "another replica takes the session over"
    );
    replicas.kill(first).await;
    assert_eq!(
        echo_in_session(third, &session, 3, "after its replica died").await,
        (200, "after its replica died".to_owned())
    );
    let ended = reqwest::Client::new()
        .delete(format!("http://127.0.0.1:{third}/mcp"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    let (status, _) = echo_in_session(third, &session, 4, "ended").await;
    assert_eq!(status, 404, "an ended session is not taken over again");
    // A session id nobody opened is refused, as before.
    let (status, _) = echo_in_session(second, "made-up-session", 5, "no").await;
    assert_eq!(status, 404);
}

/// Three replicas behind nginx hashing `Mcp-Session-Id` (the `initialize` carries none, so it
/// lands on one replica and the session's later requests on another): every one of 30 sessions
/// works, and goes on working when a replica is killed between calls.
#[tokio::test]
async fn sessions_work_behind_nginx_hashing_the_session_id_and_survive_a_killed_replica() {
    const SESSIONS: usize = 30;
    let upstream = transports::streamable_http(Era::Legacy).await;
    let mut replicas = Replicas::start(3).await;
    replicas
        .cli(&["server", "add", "echo", &upstream.url])
        .await;
    for port in replicas.ports() {
        wait_for_state(port, "echo", "connected").await;
    }
    let servers: String = replicas
        .ports()
        .iter()
        .map(|port| format!("server 127.0.0.1:{port} max_fails=1 fail_timeout=30s;\n"))
        .collect();
    let nginx = switchboard_fixtures::nginx::Nginx::balancing(&format!(
        "hash $http_mcp_session_id consistent;\n{servers}"
    ))
    .await;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(initialize(nginx.port).await);
    }
    let mut failed = Vec::new();
    for round in 0..3u64 {
        if round == 2 {
            let victim = replicas.ports()[1];
            replicas.kill(victim).await;
        }
        for (n, session) in sessions.iter().enumerate() {
            let message = format!("session {n} round {round}");
            let answer =
                echo_in_session(nginx.port, session, round * 100 + n as u64, &message).await;
            if answer != (200, message.clone()) {
                failed.push(format!("{message}: {answer:?}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} calls failed: {failed:#?}\nnginx: {}",
        failed.len(),
        3 * SESSIONS,
        nginx.error_log()
    );
}

/// How one attempt of a call at a replica went.
enum Attempt {
    /// Its answer.
    Answered(Value),
    /// The replica refused it before running it (no connection; 503 while draining): safe to
    /// send elsewhere.
    NotRun,
    /// The connection broke after the request was sent: the server may have run it.
    Broken,
}

/// One stateless `echo` call of `message` at the replica on `port`, held `delay_ms` at the
/// server.
async fn attempt(http: &reqwest::Client, port: u16, id: u64, message: &str) -> Attempt {
    let sent = http
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo__echo")
        .json(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "echo__echo", "arguments": {"message": message, "delay_ms": 40},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(error) if error.is_connect() => return Attempt::NotRun,
        Err(_) => return Attempt::Broken,
    };
    if response.status() == 503 {
        return Attempt::NotRun;
    }
    let Ok(body) = response.text().await else {
        return Attempt::Broken;
    };
    body.lines()
        .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|answer| answer["id"] == id)
        .map_or(Attempt::Broken, Attempt::Answered)
}

/// Three replicas under a steady load of stateless calls, each call sent to the next replica in
/// turn and, when a replica does not answer it, to another (as a load balancer retrying on a
/// failed upstream does). One replica is stopped (SIGTERM) and another killed (SIGKILL) mid-load:
/// every call is answered once, with its own answer. The stopped replica finishes what it took
/// (nothing it did not answer ran there); a call the killed one had taken may have run there
/// before its retry, and only such a call ran twice.
#[tokio::test]
async fn replicas_stopped_or_killed_mid_load_lose_no_call_and_answer_none_twice() {
    const CALLS: usize = 300;
    const WORKERS: usize = 8;
    let upstream = transports::streamable_http(Era::Modern).await;
    upstream
        .state
        .count_echoes
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let mut replicas = Replicas::start(3).await;
    replicas
        .cli(&["server", "add", "echo", &upstream.url])
        .await;
    for port in replicas.ports() {
        wait_for_state(port, "echo", "connected").await;
    }
    let ports = replicas.ports();
    let (stopped, killed) = (ports[0], ports[1]);

    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let outcomes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..WORKERS {
        let (next, answered, outcomes, ports) = (
            next.clone(),
            answered.clone(),
            outcomes.clone(),
            ports.clone(),
        );
        workers.spawn(async move {
            let http = reqwest::Client::new();
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n >= CALLS {
                    return;
                }
                let message = format!("call-{n}");
                let mut broken_at = Vec::new();
                let mut answer = None;
                // Each replica in turn, starting with this call's own, for at most 30 rounds.
                for round in 0..30 * ports.len() {
                    let port = ports[(n + round) % ports.len()];
                    match attempt(&http, port, n as u64, &message).await {
                        Attempt::Answered(value) => {
                            answer = Some(value);
                            break;
                        }
                        Attempt::Broken => broken_at.push(port),
                        Attempt::NotRun => {}
                    }
                    if round % ports.len() == ports.len() - 1 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                outcomes.lock().unwrap().push((message, answer, broken_at));
            }
        });
    }
    // Mid-load: a third of the calls answered, stop one replica; two thirds, kill another.
    let mut stop_sent = false;
    loop {
        let done = answered.load(std::sync::atomic::Ordering::SeqCst);
        if !stop_sent && done >= CALLS / 3 {
            replicas.terminate(stopped);
            stop_sent = true;
        }
        if done >= 2 * CALLS / 3 {
            replicas.kill(killed).await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    while workers.join_next().await.is_some() {}

    let outcomes = outcomes.lock().unwrap();
    assert_eq!(outcomes.len(), CALLS);
    let echoes = upstream.state.echoes.lock().unwrap().clone();
    let mut ran_twice = 0;
    for (message, answer, broken_at) in outcomes.iter() {
        let answer = answer
            .as_ref()
            .unwrap_or_else(|| panic!("{message} was never answered"));
        assert_eq!(
            answer["result"]["content"][0]["text"], *message,
            "{message} got another call's answer: {answer}"
        );
        let runs = echoes.get(message).copied().unwrap_or(0);
        assert!(runs >= 1, "{message} never reached the server");
        // Only the killed replica can have run a call it did not answer. A request can meet a
        // kept-alive connection the stopped replica is closing (HTTP/1.1 cannot rule that race
        // out), but such a request was never read there: it runs once, where it is retried.
        let broken_at_killed = broken_at.iter().filter(|port| **port == killed).count();
        assert!(
            runs <= 1 + broken_at_killed,
            "{message} ran {runs} times, broken at {broken_at:?} (stopped: {stopped}, killed: {killed})"
        );
        if runs > 1 {
            ran_twice += 1;
        }
    }
    // Each call is one request at a time, so a call broken at the killed replica can have run
    // there at most once before its retry.
    assert!(echoes.values().all(|runs| *runs <= 2), "{echoes:?}");
    eprintln!("calls run twice (taken by the killed replica, then retried): {ran_twice}");
}

/// The hidden fields of the form in `page` (`<input type=hidden name="..." value="...">`).
fn hidden_fields(page: &str) -> Vec<(String, String)> {
    let attribute = |input: &str, name: &str| {
        let start = input.find(&format!("{name}=\""))? + name.len() + 2;
        let length = input[start..].find('"')?;
        Some(
            input[start..start + length]
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&"),
        )
    };
    page.split("<input ")
        .skip(1)
        .filter(|input| input.starts_with("type=hidden"))
        .filter_map(|input| Some((attribute(input, "name")?, attribute(input, "value")?)))
        .collect()
}

/// `method path` on the replica on `port` as the holder of `key`; the status and JSON answer.
async fn as_user(
    port: u16,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    common::with_token(&format!("http://127.0.0.1:{port}"), key, method, path, body).await
}

/// Waits (up to 10 s) until `key`'s workspace on the replica on `port` shows `server` in
/// `state`.
async fn await_users_state(port: u16, key: &str, server: &str, state: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        let (_, view) = as_user(
            port,
            key,
            reqwest::Method::GET,
            &format!("/api/servers/{server}"),
            None,
        )
        .await;
        if view["status"]["state"] == state {
            return view;
        }
        last = view;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{server} never reached {state} on the replica on {port}: {last}");
}

#[tokio::test]
async fn a_user_signs_in_through_one_replica_and_the_redirect_completes_on_another() {
    let upstream = switchboard_fixtures::oauth::protected(Era::Modern).await;
    let store = TestPostgres::shared().database();
    let key = "c3dpdGNoYm9hcmQtcmVwbGljYS10ZXN0LWtleS0zMmI="; // 32 bytes, base64
    // Two replicas behind one public address; the load balancer sends the redirect to the
    // second (its port stands for the balancer's address here).
    let ports = [common::free_port(), common::free_port()];
    let public = format!("http://127.0.0.1:{}", ports[1]);
    let mut dirs = Vec::new();
    let mut daemons = Vec::new();
    for port in ports {
        let dir = tempfile::tempdir().unwrap();
        write_key(dir.path(), key);
        let listen = format!("127.0.0.1:{port}");
        let daemon = command(
            dir.path(),
            &[
                "--store",
                &store,
                "serve",
                "--users",
                "--listen",
                &listen,
                "--allow-upstream-network",
                "127.0.0.1",
                "--public-url",
                &public,
            ],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
        daemons.push(daemon);
        dirs.push(dir);
    }
    for port in ports {
        common::await_health(port).await;
    }
    let cli = |args: &'static [&'static str]| {
        let mut all = vec!["--store", store.as_str()];
        all.extend_from_slice(args);
        let dir = dirs[0].path().to_owned();
        async move {
            let output = command(&dir, &all).output().await.unwrap();
            assert!(
                output.status.success(),
                "switchboard {all:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8(output.stdout).unwrap().trim().to_owned()
        }
    };
    cli(&["tenant", "add", "acme"]).await;
    cli(&["user", "add", "acme/ana"]).await;
    cli(&["user", "add", "acme/bob"]).await;
    cli(&["user", "add", "acme/carol", "--admin"]).await;
    let ana = cli(&["user", "key", "acme/ana"]).await;
    let bob = cli(&["user", "key", "acme/bob"]).await;
    let carol = cli(&["user", "key", "acme/carol"]).await;
    let [first, second] = ports;

    // The tenant's admin shares the OAuth-protected server; nobody has signed in to it.
    let (status, body) = as_user(
        first,
        &carol,
        reqwest::Method::POST,
        "/api/servers",
        Some(serde_json::json!({"id": "linear", "url": upstream.url})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    await_users_state(first, &ana, "linear", "needs-auth").await;

    // Ana starts her sign-in through the first replica; the authorization server sends her
    // browser back to the public address, where the second replica completes it.
    let (status, started) = as_user(
        first,
        &ana,
        reqwest::Method::POST,
        "/api/servers/linear/login",
        None,
    )
    .await;
    assert_eq!(status, 200, "{started}");
    let url = url::Url::parse(started["authorization_url"].as_str().unwrap()).unwrap();
    let redirect_uri = url
        .query_pairs()
        .find(|(name, _)| name == "redirect_uri")
        .map(|(_, value)| value.into_owned());
    assert_eq!(
        redirect_uri.as_deref(),
        Some(format!("{public}/oauth/callback").as_str())
    );
    // Her browser here holds no cookie from the start (an API client started it): the page
    // says whose sign-in this is and asks for that user's own key before anything is redeemed,
    // as it would ask a person sent a stranger's link.
    let landed = reqwest::get(url).await.unwrap();
    assert_eq!(
        landed.url().port(),
        Some(second),
        "the redirect went to the second replica"
    );
    assert_eq!(landed.status(), reqwest::StatusCode::OK);
    assert_eq!(landed.headers()["x-frame-options"], "DENY");
    let page = landed.text().await.unwrap();
    assert!(
        page.contains("user 'ana' of tenant 'acme' in to 'linear'"),
        "{page}"
    );
    let exchanges = || {
        upstream
            .auth
            .code_exchanges
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    assert_eq!(exchanges(), 0, "nothing is redeemed before she confirms");
    // A press of Continue alone, or with someone else's key, proves nothing: the sign-in stays
    // hers to finish.
    assert!(page.contains("name=credential"), "{page}");
    let confirm = |credential: Option<&str>| {
        let mut fields = hidden_fields(&page);
        fields.extend(credential.map(|c| ("credential".to_owned(), c.to_owned())));
        let public = public.clone();
        async move {
            reqwest::Client::new()
                .post(format!("{public}/oauth/callback"))
                .form(&fields)
                .send()
                .await
                .unwrap()
        }
    };
    for someone_else in [
        None,
        Some(bob.as_str()),
        Some("sbk_not-a-key-0123456789abcdef"),
    ] {
        let refused = confirm(someone_else).await;
        assert_eq!(refused.status(), reqwest::StatusCode::FORBIDDEN);
        assert!(
            refused.text().await.unwrap().contains("Only user 'ana'"),
            "{someone_else:?}"
        );
    }
    assert_eq!(exchanges(), 0, "nothing is redeemed for anyone else");
    let confirmed = confirm(Some(ana.as_str())).await;
    assert_eq!(confirmed.status(), reqwest::StatusCode::OK);
    assert!(
        confirmed
            .text()
            .await
            .unwrap()
            .contains("Signed in to 'linear'")
    );
    assert_eq!(exchanges(), 1);

    // Her workspace on the first replica finds her tokens and connects, and on the second too;
    // her calls work through either.
    for port in ports {
        await_users_state(port, &ana, "linear", "connected").await;
        let (status, answer) = as_user(
            port,
            &ana,
            reqwest::Method::POST,
            "/api/servers/linear/tools/echo/call",
            Some(serde_json::json!({"arguments": {"message": "from ana"}})),
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["content"][0]["text"], "from ana", "{answer}");
    }
    // Bob uses the same shared server, and has not signed in: her tokens are not his.
    let bobs = await_users_state(first, &bob, "linear", "needs-auth").await;
    assert!(
        bobs["status"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("POST /api/servers/linear/login")),
        "he is told how to sign in through the daemon: {bobs}"
    );

    // His sign-in, started through the first replica, fails on the second (a redirect naming
    // another issuer): the first shows it, and he may start again.
    let (status, his) = as_user(
        first,
        &bob,
        reqwest::Method::POST,
        "/api/servers/linear/login",
        None,
    )
    .await;
    assert_eq!(status, 200, "{his}");
    await_users_state(first, &bob, "linear", "authorizing").await;
    let his_state = url::Url::parse(his["authorization_url"].as_str().unwrap())
        .unwrap()
        .query_pairs()
        .find(|(name, _)| name == "state")
        .map(|(_, value)| value.into_owned())
        .unwrap();
    let refused = reqwest::Client::new()
        .post(format!("{public}/oauth/callback"))
        .form(&[
            ("code", "forged"),
            ("state", his_state.as_str()),
            ("iss", "https://evil.example"),
            ("credential", bob.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::BAD_REQUEST);
    let back = await_users_state(first, &bob, "linear", "needs-auth").await;
    assert!(
        back["status"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("evil.example")),
        "the replica that started it shows why it failed: {back}"
    );
    assert_eq!(exchanges(), 1, "no token request for his");

    // The redirect is taken once: replaying it on either replica finds nothing.
    let replay = reqwest::get(format!(
        "{public}/oauth/callback?code=again&state={}",
        started["authorization_url"]
            .as_str()
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u
                .query_pairs()
                .find(|(name, _)| name == "state")
                .map(|(_, v)| v.into_owned()))
            .unwrap()
    ))
    .await
    .unwrap();
    assert_eq!(replay.status(), reqwest::StatusCode::BAD_REQUEST);
    assert_eq!(
        upstream
            .auth
            .code_exchanges
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no second token request"
    );
}
