//! What the CLI tests share: running `switchboard` as a user does (no vault key or config from
//! the environment), starting `serve` and `login --no-browser`, and reading what they print.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]
#![allow(dead_code)] // each test binary uses a part of it

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Runs `switchboard --data-dir <data_dir> <args>` to its end, as a user does (no vault key or
/// config from the environment).
pub fn switchboard(data_dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env_remove("SWITCHBOARD_VAULT_KEY")
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .expect("the switchboard binary runs")
}

/// `switchboard --data-dir <data_dir> <args>`, killed when dropped.
pub fn command(data_dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env_remove("SWITCHBOARD_VAULT_KEY")
        .env_remove("SWITCHBOARD_CONFIG")
        .kill_on_drop(true);
    command
}

/// Starts `switchboard serve` on a free loopback port (killed when dropped).
pub fn spawn_daemon(data_dir: &Path) -> (Child, u16) {
    spawn_daemon_with(data_dir, &[], &[])
}

/// [`spawn_daemon`] with global `options` (before `serve`) and options for `serve` itself.
pub fn spawn_daemon_with(
    data_dir: &Path,
    options: &[&str],
    serve_options: &[&str],
) -> (Child, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = options.to_vec();
    args.extend(["serve", "--listen", &listen]);
    args.extend_from_slice(serve_options);
    let daemon = command(data_dir, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (daemon, port)
}

/// Waits (up to 10 s) until the daemon on `port` answers `/healthz`.
pub async fn await_health(port: u16) {
    for _ in 0..200 {
        if let Ok(response) = reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await
            && response.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the daemon on port {port} never answered /healthz");
}

/// `method path` on `base` with the bearer `token` (and a JSON `body`); the status and the
/// JSON answer (`null` when it is not JSON).
pub async fn with_token(
    base: &str,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

/// A loopback port free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub async fn run(data_dir: &Path, args: &[&str]) -> Output {
    command(data_dir, args)
        .output()
        .await
        .expect("switchboard runs")
}

pub fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Starts `login --no-browser` and returns the process and the authorization URL it printed.
pub async fn start_login(data_dir: &Path, server: &str) -> (Child, String) {
    start_login_with(data_dir, server, &[]).await
}

/// Starts `switchboard login` with `more` options; returns it and the URL it printed.
pub async fn start_login_with(data_dir: &Path, server: &str, more: &[&str]) -> (Child, String) {
    let mut args = vec!["login", server, "--no-browser", "--timeout", "30"];
    args.extend_from_slice(more);
    let mut child = command(data_dir, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = first_url(child.stdout.take().unwrap()).await;
    (child, url)
}

/// The first URL a child prints on `output` (within 20 s); the rest is read in the background
/// so the child never blocks on a full pipe.
pub async fn first_url(output: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> String {
    let mut lines = BufReader::new(output).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.starts_with("http://") || line.starts_with("https://") {
                return line;
            }
        }
        panic!("no URL printed");
    })
    .await
    .expect("a URL printed in time");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    url
}

/// The daemon on `port`'s status of server `id`.
pub async fn server_status(port: u16, id: &str) -> Option<serde_json::Value> {
    let status: serde_json::Value = reqwest::get(format!("http://127.0.0.1:{port}/api/status"))
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    status["servers"]
        .as_array()?
        .iter()
        .find(|s| s["server"] == id)
        .cloned()
}

/// The JSON body of a `GET` of `url`.
pub async fn get_json(url: &str) -> serde_json::Value {
    reqwest::get(url)
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: not JSON: {e}"))
}

/// `POST /api/servers/{id}/login`; returns the authorization URL.
pub async fn start_daemon_login(port: u16, id: &str) -> String {
    let started: serde_json::Value = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/servers/{id}/login"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    started["authorization_url"]
        .as_str()
        .expect("an authorization URL")
        .to_owned()
}

/// Waits (up to 10 s) until the daemon on `port` shows server `id` in `state`.
pub async fn wait_for_state(port: u16, id: &str, state: &str) -> serde_json::Value {
    for _ in 0..200 {
        if let Some(status) = server_status(port, id).await
            && status["state"] == state
        {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{id} never reached {state}: {:?}",
        server_status(port, id).await
    );
}

/// `tools/call <tool>` with `{"message": "hi"}` through the daemon on `port` (`/mcp`, as a
/// 2026-07-28 request, so no session is needed); the JSON-RPC answer.
pub async fn call_through_daemon(port: u16, id: u64, tool: &str) -> serde_json::Value {
    call_through_daemon_with(port, id, tool, &[]).await
}

/// [`call_through_daemon`] with more request headers.
pub async fn call_through_daemon_with(
    port: u16,
    id: u64,
    tool: &str,
    headers: &[(&str, &str)],
) -> serde_json::Value {
    call_through_daemon_meta(port, id, tool, serde_json::json!({}), headers).await
}

/// [`call_through_daemon_with`] with the keys of `meta` added to the request's `_meta`.
pub async fn call_through_daemon_meta(
    port: u16,
    id: u64,
    tool: &str,
    meta: serde_json::Value,
    headers: &[(&str, &str)],
) -> serde_json::Value {
    let params = serde_json::json!({"name": tool, "arguments": {"message": "hi"}, "_meta": meta});
    request_through_daemon(port, id, "tools/call", tool, params, headers).await
}

/// A 2026-07-28 request (no session) of `method` on `name` (its `Mcp-Name`) with `params`
/// through `/mcp` of the daemon on `port`, its `_meta` given the protocol's keys besides those
/// `params` has; the JSON-RPC answer.
pub async fn request_through_daemon(
    port: u16,
    id: u64,
    method: &str,
    name: &str,
    mut params: serde_json::Value,
    headers: &[(&str, &str)],
) -> serde_json::Value {
    let mut meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    for (key, value) in params["_meta"].as_object().into_iter().flatten() {
        meta[key] = value.clone();
    }
    params["_meta"] = meta;
    let mut request = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/mcp"));
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    let body = request
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .send()
        .await
        .expect("the daemon answers")
        .text()
        .await
        .unwrap();
    body.lines()
        .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {method} {id}: {body}"))
}

/// `tests/npm`, with `packages` installed (or a panic saying how to install them).
pub fn npm_dir(packages: &[&str]) -> std::path::PathBuf {
    let dir = switchboard_fixtures::repository_root().join("tests/npm");
    for package in packages {
        assert!(
            dir.join("node_modules").join(package).is_dir(),
            "{package} is missing: run `npm ci --prefix tests/npm` (scripts/test does)"
        );
    }
    dir
}

/// The Chromium browser scripts drive: Debian's, unless `CHROMIUM` names another.
pub fn chromium() -> String {
    let path = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&path).exists(),
        "no Chromium at {path}: install Debian's (`apt-get install chromium`, as .ci/run does) \
         or point CHROMIUM at one"
    );
    path
}
