//! Web pages on the same machine against a running daemon, in a real browser (headless Chromium
//! driven by playwright-core: `tests/npm/browser-origins.mjs`).
//!
//! A page served on another loopback port is another origin: it cannot import or add a stdio
//! server (the CVE-2025-49596 class of hole, where any local page made a proxy run commands),
//! test one, read the event stream over WebSocket or SSE, or use `/mcp`. A browser AI app on an
//! origin named with `--cors-origin` uses `/mcp` and tool search with an API key, and nothing
//! else.

mod common;

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_loopback_port_cannot_drive_the_daemon_and_an_allowed_app_uses_mcp() {
    let npm = common::npm_dir(&["playwright-core"]);
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("a-page-ran-a-command");
    let key = "browser-app-key-0123456789abcdef";
    let (port, hostile_port, app_port) = (
        common::free_port(),
        common::free_port(),
        common::free_port(),
    );
    let allowed = format!("http://127.0.0.1:{app_port}");
    let data = dir.path().join("data");
    let _daemon = common::command(
        &data,
        &[
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--cors-origin",
            &allowed,
        ],
    )
    .env("SWITCHBOARD_API_KEYS", key)
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    common::await_health(port).await;
    let base = format!("http://127.0.0.1:{port}");

    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg(npm.join("browser-origins.mjs"))
            .arg(&base)
            .arg(key)
            .arg(hostile_port.to_string())
            .arg(app_port.to_string())
            .arg(&marker)
            .env("CHROMIUM", common::chromium())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser finishes within 120 s")
    .unwrap();
    assert!(
        output.status.success(),
        "the browser: {}",
        common::text(&output)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).expect("the browser prints JSON");
    let hostile = &seen["hostile"];
    // The simple requests leave the browser (no preflight): the daemon must refuse them itself.
    assert_eq!(hostile["import"], "sent", "{seen:#}");
    assert_eq!(hostile["readServers"], "refused", "{seen:#}");
    assert_eq!(hostile["websocket"], "refused", "{seen:#}");
    assert_eq!(hostile["events"], "refused", "{seen:#}");
    assert_eq!(hostile["mcp"], "refused", "{seen:#}");

    let app = &seen["app"];
    assert_eq!(app["initializeStatus"], 200, "{seen:#}");
    assert_eq!(app["initialize"], true, "{seen:#}");
    assert!(
        app["session"].as_str().is_some_and(|s| !s.is_empty()),
        "the app reads Mcp-Session-Id: {seen:#}"
    );
    assert_eq!(app["toolsList"], true, "{seen:#}");
    assert_eq!(app["search"], 200, "{seen:#}");
    assert_eq!(app["withoutKey"], "refused", "{seen:#}");
    assert_eq!(app["servers"], "refused", "{seen:#}");
    assert_eq!(app["add"], "refused", "{seen:#}");

    // Give a command that had been started a moment to leave its mark, then look.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!marker.exists(), "a page made the daemon run a command");
    let servers = reqwest::get(format!("{base}/api/servers"))
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(servers["servers"], serde_json::json!([]), "nothing stored");
}
