//! The interop matrix (issue 17): real MCP SDKs on both sides of Switchboard.
//!
//! Switchboard is only as useful as the clients and servers it works with, and those are built on
//! a handful of SDKs, each with its own reading of the spec and its own habits: where a server
//! sends its requests (on the call's stream, or on the session's standalone GET stream as the
//! Python SDK 1.x and FastMCP 2.x do for `roots/list` and sampling), how a client cancels, how it
//! subscribes (`resources/subscribe`, or `subscriptions/listen` at 2026-07-28), how a 2026-07-28
//! server asks for input (`input_required`). This test puts one daemon in front of upstreams on
//! every SDK and era:
//!
//! | upstream | SDK | reached over |
//! | --- | --- | --- |
//! | `py-mcp1`, `py-mcp1-sse`, `py-mcp1-stdio` | Python `mcp` 1.x (`FastMCP`) | Streamable HTTP sessions, HTTP+SSE, stdio |
//! | `fastmcp2` | FastMCP 2.x | Streamable HTTP sessions |
//! | `py-mcp2`, `py-mcp2-sessions` | Python `mcp` 2.x (`MCPServer`) | stateless 2026-07-28, and sessions (pinned) |
//! | `ts-v1`, `ts-v1-stdio` | TypeScript SDK v1 | Streamable HTTP sessions, stdio |
//! | `ts-v2` | TypeScript SDK v2 (`createMcpHandler`) | stateless 2026-07-28 |
//!
//! and drives it with clients on the TypeScript SDK v1 and v2 and the Python SDK 1.x and 2.x
//! through each of its front doors: `/mcp` (the 2025 handshake, and 2026-07-28 for the clients
//! that speak it), `/sse` and `switchboard stdio`. Every client exercises every upstream: a call,
//! progress, sampling, elicitation and roots answered by the client (each answer names the
//! client, so an invented answer cannot pass), a resource update after subscribing, and a
//! cancelled call that the upstream itself must report as cancelled.
//!
//! The servers and clients are in `tests/py` and `tests/npm` (`interop-*`); the Python ones run
//! from the venvs `tests/py/install.sh` makes, the TypeScript ones from `npm ci --prefix
//! tests/npm`. Clients run one after another: a server's request on its standalone GET stream
//! can only be routed to the caller while that caller's call is the server's only one in flight.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::switchboard;
use serde_json::{Value, json};

/// Cells of the matrix that cannot work because of the SDK (never because of Switchboard):
/// (client, front door, upstream, feature, why). A listed cell that passes fails the test, so
/// the list never outlives its reason.
const NOT_EXPECTED_TO_WORK: &[(&str, &str, &str, &str, &str)] = &[];

/// `switchboard server add <args>`, which must succeed.
fn add(data_dir: &Path, args: &[&str]) {
    let mut all = vec!["server", "add"];
    all.extend_from_slice(args);
    let output = switchboard(data_dir, &all);
    assert!(
        output.status.success(),
        "server add {args:?}: exit {:?}\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A free port on 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The Python of the venv `tests/py/.venv-<name>`; panics with the command that makes it.
fn python(name: &str) -> PathBuf {
    let python =
        switchboard_fixtures::repository_root().join(format!("tests/py/.venv-{name}/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: run `bash tests/py/install.sh` (scripts/test does)",
        python.display()
    );
    python
}

/// The path of `tests/<dir>/<file>`; for the npm scripts, panics with the command that installs
/// the SDKs they import.
fn script(dir: &str, file: &str) -> String {
    let root = switchboard_fixtures::repository_root();
    if dir == "npm" {
        for package in ["sdk", "client", "server"] {
            let installed = root.join(format!(
                "tests/npm/node_modules/@modelcontextprotocol/{package}"
            ));
            assert!(
                installed.exists(),
                "{} is missing: run `npm ci --prefix tests/npm` (scripts/test does)",
                installed.display()
            );
        }
    }
    root.join("tests")
        .join(dir)
        .join(file)
        .display()
        .to_string()
}

/// An upstream server process on a loopback port; killed on drop.
struct Listening {
    child: std::process::Child,
    port: u16,
    /// How it was started, `{port}` not yet replaced: to start it again on another port.
    command: (String, Vec<String>),
}

/// How many times a server that exits before listening is started again on another port.
const STARTS: usize = 3;

impl Listening {
    /// Starts `program args...` with `{port}` in `args` replaced by a free port.
    fn start(program: &str, args: &[&str]) -> Self {
        let port = free_port();
        let with_port: Vec<String> = args
            .iter()
            .map(|a| a.replace("{port}", &port.to_string()))
            .collect();
        let child = Command::new(program)
            .args(&with_port)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{program} {with_port:?} starts: {e}"));
        let command = (
            program.to_owned(),
            args.iter().map(|a| (*a).to_owned()).collect(),
        );
        Self {
            child,
            port,
            command,
        }
    }

    /// Waits (up to 60 s: Python imports are slow on a busy machine) until it listens on its
    /// port (its own socket). The port was free when picked, but another process may take it
    /// before the server binds it (uvicorn then exits with 3): a server that exits before
    /// listening is started again on another port, at most [`STARTS`] times in all.
    fn wait(&mut self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut starts = 1;
        while !switchboard_fixtures::process_listens_on(self.child.id(), self.port) {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(
                    starts < STARTS,
                    "the server for port {} exited before listening, {starts} times: {status}",
                    self.port
                );
                starts += 1;
                let (program, args) = self.command.clone();
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                *self = Self::start(&program, &args);
                continue;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "nothing listened on port {} within 60 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How Switchboard must have reached an upstream: its id (the tools' prefix), and the transport
/// and protocol revision `/api/status` shows for it.
struct Upstream {
    id: &'static str,
    transport: Option<&'static str>,
    protocol: &'static str,
}

/// Starts every upstream and adds it to `data_dir`; the processes live as long as the result.
fn upstreams(data_dir: &Path) -> (Vec<Listening>, Vec<Upstream>) {
    let v1 = python("v1").display().to_string();
    let v2 = python("v2").display().to_string();
    let mcp1 = script("py", "server_mcp1.py");
    let mcp2 = script("py", "server_mcp2.py");
    let fastmcp2 = script("py", "server_fastmcp2.py");
    let ts1 = script("npm", "interop-server-v1.mjs");
    let ts2 = script("npm", "interop-server-v2.mjs");
    let mut servers = vec![
        Listening::start(&v1, &[&mcp1, "streamable-http", "{port}"]),
        Listening::start(&v1, &[&mcp1, "sse", "{port}"]),
        Listening::start(&v1, &[&fastmcp2, "{port}"]),
        Listening::start(&v2, &[&mcp2, "{port}"]),
        Listening::start("node", &[&ts1, "http", "{port}"]),
        Listening::start("node", &[&ts2, "{port}"]),
    ];
    for server in &mut servers {
        server.wait();
    }
    let [py_mcp1, py_mcp1_sse, fast, py_mcp2, ts_v1, ts_v2] = &servers[..] else {
        unreachable!()
    };
    add(data_dir, &["py-mcp1", &py_mcp1.url("/mcp")]);
    add(
        data_dir,
        &[
            "py-mcp1-sse",
            &py_mcp1_sse.url("/sse"),
            "--transport",
            "sse",
        ],
    );
    add(data_dir, &["py-mcp1-stdio", "--", &v1, &mcp1, "stdio"]);
    add(data_dir, &["fastmcp2", &fast.url("/mcp")]);
    add(data_dir, &["py-mcp2", &py_mcp2.url("/mcp")]);
    add(
        data_dir,
        &[
            "py-mcp2-sessions",
            &py_mcp2.url("/mcp"),
            "--transport",
            "sessions",
        ],
    );
    add(data_dir, &["ts-v1", &ts_v1.url("/mcp")]);
    add(data_dir, &["ts-v1-stdio", "--", "node", &ts1, "stdio"]);
    add(data_dir, &["ts-v2", &ts_v2.url("/mcp")]);
    let sessions = Some("streamable_http");
    let stateless = Some("streamable_http_stateless");
    let expected = vec![
        Upstream {
            id: "py-mcp1",
            transport: sessions,
            protocol: "2025-11-25",
        },
        Upstream {
            id: "py-mcp1-sse",
            transport: Some("http_sse"),
            protocol: "2024-11-05",
        },
        Upstream {
            id: "py-mcp1-stdio",
            transport: None,
            protocol: "2025-11-25",
        },
        Upstream {
            id: "fastmcp2",
            transport: sessions,
            protocol: "2025-11-25",
        },
        Upstream {
            id: "py-mcp2",
            transport: stateless,
            protocol: "2026-07-28",
        },
        Upstream {
            id: "py-mcp2-sessions",
            transport: sessions,
            protocol: "2025-11-25",
        },
        Upstream {
            id: "ts-v1",
            transport: sessions,
            protocol: "2025-11-25",
        },
        Upstream {
            id: "ts-v1-stdio",
            transport: None,
            protocol: "2025-11-25",
        },
        Upstream {
            id: "ts-v2",
            transport: stateless,
            protocol: "2026-07-28",
        },
    ];
    (servers, expected)
}

/// A running `switchboard serve`; killed on drop.
struct Daemon {
    _child: tokio::process::Child,
    base: String,
}

impl Daemon {
    /// Starts the daemon and waits (up to 60 s) until `servers` servers are connected; returns
    /// it with its last `/api/status`.
    async fn start(data_dir: &Path, servers: usize) -> (Self, Value) {
        let port = free_port();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("--data-dir")
            .arg(data_dir)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .env_remove("SWITCHBOARD_VAULT_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let daemon = Self {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let mut last = None;
        for _ in 0..600 {
            if let Ok(response) = reqwest::get(format!("{}/api/status", daemon.base)).await
                && let Ok(status) = response.json::<Value>().await
            {
                let connected = status["servers"].as_array().map_or(0, |s| {
                    s.iter().filter(|s| s["state"] == "connected").count()
                });
                if connected == servers {
                    return (daemon, status);
                }
                last = Some(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("not every server connected within 60 s; last status: {last:#?}");
    }
}

/// One client run: which SDK, through which front door, and the arguments that say so.
struct Cell {
    client: &'static str,
    door: &'static str,
    /// The protocol revision the client must have agreed with Switchboard.
    protocol: &'static str,
    program: String,
    args: Vec<String>,
}

/// Every client through every front door its SDK has.
fn cells(daemon: &Daemon, data_dir: &Path, prefixes: &str) -> Vec<Cell> {
    let mcp = format!("{}/mcp", daemon.base);
    let sse = format!("{}/sse", daemon.base);
    let stdio = [
        "stdio".to_owned(),
        env!("CARGO_BIN_EXE_switchboard").to_owned(),
        "--data-dir".to_owned(),
        data_dir.display().to_string(),
        "stdio".to_owned(),
    ];
    let node = |file: &str| ("node".to_owned(), script("npm", file));
    let py = |venv: &str, file: &str| (python(venv).display().to_string(), script("py", file));
    let sdks = [
        (
            "typescript-v1",
            node("interop-client-v1.mjs"),
            "2025-11-25",
            false,
        ),
        (
            "typescript-v2",
            node("interop-client-v2.mjs"),
            "2026-07-28",
            true,
        ),
        (
            "python-mcp1",
            py("v1", "client_mcp1.py"),
            "2025-11-25",
            false,
        ),
        (
            "python-mcp2",
            py("v2", "client_mcp2.py"),
            "2026-07-28",
            true,
        ),
    ];
    let mut cells = Vec::new();
    for (client, (program, script), newest, handshake_too) in sdks {
        let mut doors = vec![
            ("/mcp", newest, vec!["http".to_owned(), mcp.clone()]),
            ("/sse", "2025-11-25", vec!["sse".to_owned(), sse.clone()]),
        ];
        if handshake_too {
            doors.push((
                "/mcp (2025 handshake)",
                "2025-11-25",
                vec!["http-legacy".to_owned(), mcp.clone()],
            ));
        }
        doors.push(("switchboard stdio", newest, stdio.to_vec()));
        for (door, protocol, target) in doors {
            let mut args = vec![script.clone(), prefixes.to_owned()];
            args.extend(target);
            cells.push(Cell {
                client,
                door,
                protocol,
                program: program.clone(),
                args,
            });
        }
    }
    cells
}

/// Runs one cell's client (at most 180 s) and returns its report, or why there is none.
async fn run(cell: &Cell) -> Result<Value, String> {
    let output = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new(&cell.program)
            .args(&cell.args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| "the client did not finish within 180 s".to_owned())?
    .map_err(|e| format!("the client did not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail = |s: &str| {
        s.chars()
            .rev()
            .take(3000)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>()
    };
    if !output.status.success() {
        return Err(format!(
            "exit {:?}\nstdout: {stdout}\nstderr: {}",
            output.status.code(),
            tail(&stderr)
        ));
    }
    serde_json::from_str(stdout.trim()).map_err(|e| {
        format!(
            "not one JSON report ({e}): {stdout}\nstderr: {}",
            tail(&stderr)
        )
    })
}

/// What every client must have seen of every upstream: each value names the client, so only
/// its own answers can match.
fn expected(client: &str) -> BTreeMap<&'static str, Value> {
    BTreeMap::from([
        ("echo", json!("echo: hi")),
        ("progress", json!([1.0, 2.0, 3.0])),
        ("sampled", json!(format!("sampled by {client}"))),
        ("elicited", json!(format!("accept:{client}"))),
        ("roots", json!([format!("file:///interop/{client}")])),
        ("resourceUpdated", json!(true)),
        (
            "cancel",
            json!({"cancelled": true, "upstreamSawCancel": true}),
        ),
    ])
}

/// JSON equality with numbers compared as numbers (`1` from one SDK, `1.0` from another).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_sdk_client_reaches_every_sdk_server_through_every_front_door() {
    let dir = tempfile::tempdir().unwrap();
    let (_servers, upstreams) = upstreams(dir.path());
    let (daemon, status) = Daemon::start(dir.path(), upstreams.len()).await;

    // Each upstream is reached the way its SDK and era call for.
    for upstream in &upstreams {
        let shown = status["servers"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["server"] == upstream.id))
            .unwrap_or_else(|| panic!("{} is not in the status: {status:#}", upstream.id));
        assert_eq!(
            shown["detected_transport"].as_str(),
            upstream.transport,
            "{shown:#}"
        );
        assert_eq!(shown["protocol_version"], upstream.protocol, "{shown:#}");
    }

    let prefixes = upstreams.iter().map(|u| u.id).collect::<Vec<_>>().join(",");
    let mut failures = Vec::new();
    let mut excluded_but_passed = Vec::new();
    for cell in cells(&daemon, dir.path(), &prefixes) {
        let at = format!("{} through {}", cell.client, cell.door);
        let report = match run(&cell).await {
            Ok(report) => report,
            Err(why) => {
                failures.push(format!("{at}: {why}"));
                continue;
            }
        };
        if report["protocolVersion"] != cell.protocol {
            failures.push(format!(
                "{at}: agreed on {} instead of {}",
                report["protocolVersion"], cell.protocol
            ));
        }
        let tools = report["tools"].as_array().cloned().unwrap_or_default();
        for upstream in &upstreams {
            let echo = format!("{}__echo", upstream.id);
            if !tools.iter().any(|t| t == &json!(echo)) {
                failures.push(format!("{at}: {echo} is not among the tools listed"));
            }
            for (feature, want) in expected(cell.client) {
                let got = &report["upstreams"][upstream.id][feature];
                let works = same(got, &want);
                let exclusion = NOT_EXPECTED_TO_WORK.iter().find(|(c, d, u, f, _)| {
                    *c == cell.client && *d == cell.door && *u == upstream.id && *f == feature
                });
                match (works, exclusion) {
                    (true, None) | (false, Some(_)) => {}
                    (true, Some(_)) => {
                        excluded_but_passed.push(format!("{at} → {} {feature}", upstream.id))
                    }
                    (false, None) => failures.push(format!(
                        "{at} → {} {feature}: expected {want}, got {got}",
                        upstream.id
                    )),
                }
            }
        }
    }
    assert!(
        excluded_but_passed.is_empty(),
        "cells listed in NOT_EXPECTED_TO_WORK work now; remove them from the list:\n{}",
        excluded_but_passed.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} failing cells:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// FastMCP 2.x lists a tool's tags in `_meta._fastmcp.tags`, outside its description: search
/// finds the tool by a tag, which no other word of it shares.
#[tokio::test]
async fn a_fastmcp_tools_tags_find_it_in_search() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = python("v1").display().to_string();
    let mut server = Listening::start(&v1, &[&script("py", "server_fastmcp2.py"), "{port}"]);
    server.wait();
    add(dir.path(), &["fastmcp2", &server.url("/mcp")]);
    let found = common::run(dir.path(), &["search", "parrot", "--json"]).await;
    assert!(found.status.success(), "{}", common::text(&found));
    let found: Value = serde_json::from_slice(&found.stdout).unwrap();
    let names: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["fastmcp2__echo"], "{found:#}");
}

/// A Python-SDK server slow to start (11 s, past the 10 s that rmcp's `server/discover` probe
/// waits) answers the probe late, then refuses the `initialize` sent meanwhile ("connection is
/// serving the 2026-07-28 protocol"). Switchboard starts it again and connects with
/// `server/discover` alone: `server check` shows it connected at 2026-07-28, not in error.
#[tokio::test]
async fn a_python_server_slow_to_start_connects_instead_of_failing() {
    let dir = tempfile::tempdir().unwrap();
    let python = python("v2").display().to_string();
    let server = script("py", "server_mcp2.py");
    let added = common::run(
        dir.path(),
        &[
            "server", "add", "slow", "--", &python, &server, "stdio", "11",
        ],
    )
    .await;
    assert!(added.status.success(), "{}", common::text(&added));
    let checked = common::run(dir.path(), &["server", "check", "slow", "--json"]).await;
    assert!(checked.status.success(), "{}", common::text(&checked));
    let status: Value = serde_json::from_slice(&checked.stdout).unwrap();
    assert_eq!(status[0]["state"], "connected", "{status}");
    assert_eq!(status[0]["protocol_version"], "2026-07-28", "{status}");
}
