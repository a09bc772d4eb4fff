//! Names a server gives its tools reach clients, model APIs and terminals only in forms they
//! take: a tool named with an escape sequence, a line break, a path, nothing, or ten thousand
//! characters is exposed under a stable valid name (the spec's 1 to 128 of `A-Za-z0-9_.-`),
//! callable by it, listed with its original in `/api/status` and `switchboard status` (escaped),
//! and exported to model APIs under names they take, which calls take too.

mod common;

use std::process::Stdio;

use switchboard_fixtures::{Era, transports};

fn is_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn is_model_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_whose_names_are_no_tool_names_are_exposed_under_stable_valid_names() {
    let fixture = transports::streamable_http(Era::Modern).await;
    fixture
        .state
        .hostile_names
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let added = common::switchboard(
        dir.path(),
        &[
            "server",
            "add",
            "odd.v2",
            &fixture.url,
            "--prefix",
            "odd.v2",
        ],
    );
    assert!(
        !added.status.success(),
        "ids are slugs: {}",
        common::text(&added)
    );
    let added = common::switchboard(
        dir.path(),
        &["server", "add", "odd", &fixture.url, "--prefix", "odd.v2"],
    );
    assert!(added.status.success(), "{}", common::text(&added));
    let port = common::free_port();
    let _daemon = common::command(
        dir.path(),
        &["serve", "--listen", &format!("127.0.0.1:{port}")],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    common::await_health(port).await;
    common::wait_for_state(port, "odd", "connected").await;
    let base = format!("http://127.0.0.1:{port}");

    let status = common::get_json(&format!("{base}/api/status")).await;
    let renamed = status["renamed"].as_array().unwrap().clone();
    let originals: Vec<String> = renamed
        .iter()
        .map(|r| r["original"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        originals.len(),
        switchboard_fixtures::hostile_tool_names().len(),
        "{status:#}"
    );
    for hostile in switchboard_fixtures::hostile_tool_names() {
        assert!(originals.contains(&hostile), "{hostile:?}");
    }
    // Each is listed, and called, by a valid name; the call reaches the original at the server.
    for entry in &renamed {
        let exposed = entry["exposed"].as_str().unwrap();
        assert!(is_tool_name(exposed), "{exposed}");
        let answer = common::call_through_daemon(port, 7, exposed).await;
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            text,
            format!("called {:?}", entry["original"].as_str().unwrap()),
            "{answer}"
        );
    }
    let exported = common::get_json(&format!("{base}/api/tools?format=mcp&defer=none")).await;
    for tool in exported["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        assert!(is_tool_name(name), "{name}");
    }

    // Model APIs: every name theirs, and each one callable (`odd.v2__echo` has a dot).
    let openai = common::get_json(&format!("{base}/api/tools?format=openai&defer=none")).await;
    let names: Vec<String> = openai["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect();
    assert!(names.len() > 10, "{openai:#}");
    for name in &names {
        assert!(is_model_name(name), "{name}");
    }
    let echo = names
        .iter()
        .find(|name| name.contains("echo"))
        .expect("echo is exported");
    assert!(!echo.contains('.'));
    let answer = common::call_through_daemon(port, 8, echo).await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");

    // The terminal gets them escaped.
    let shown = common::run(dir.path(), &["status"]).await;
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("is not a valid tool name"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'),
        "{text:?}"
    );
    let tools = common::run(dir.path(), &["tools", "--server", "odd"]).await;
    let listed = String::from_utf8_lossy(&tools.stdout);
    assert!(!listed.contains('\u{1b}'), "{listed:?}");
}
