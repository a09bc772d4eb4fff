//! The merged catalog clients see: colliding names withheld, reported and fixed by a prefix,
//! `tools/list_changed` heard by clients of both eras, and a server's last known tools served
//! while it is down (and, with `serve --lazy`, until first use).

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::TransportSpec;
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::CallContext;

use crate::common::switchboard;
use crate::support::{
    Daemon, add, args, client, ok, request_2026, stdio_fixture, text, tools_call_2026,
    typescript_sdk_server,
};

// Multi-threaded: the fixtures run in this process while the one-shot CLI blocks a thread.
#[tokio::test(flavor = "multi_thread")]
async fn colliding_names_are_withheld_reported_and_fixed_by_a_prefix() {
    let a = transports::streamable_http(Era::Legacy).await;
    let b = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["alpha", &a.url, "--prefix", ""]);
    add(dir.path(), &["beta", &b.url, "--prefix", ""]);
    // The one-shot `status` reports them too.
    let status: Value = serde_json::from_str(&ok(&switchboard(dir.path(), &["status", "--json"])))
        .expect("status --json prints JSON");
    let alpha = &status[0]["collisions"];
    assert!(
        alpha
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["name"] == "echo")),
        "{status:#}"
    );
    let human = ok(&switchboard(dir.path(), &["status"]));
    // One line for the pair, however many names they share.
    assert_eq!(
        human.matches("exposed by alpha and beta").count(),
        1,
        "{human}"
    );
    assert!(
        human.contains("names (tool 'add', ") && human.contains("more) are exposed by"),
        "{human}"
    );

    let (daemon, status) = Daemon::start(dir.path(), 2).await;
    let status = if status["collisions"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
    {
        status
    } else {
        daemon
            .wait_for(|s| s["collisions"].as_array().is_some_and(|c| !c.is_empty()))
            .await
    };
    let collisions = status["collisions"].as_array().unwrap();
    let echo = collisions
        .iter()
        .find(|c| c["name"] == "echo")
        .expect("the shared tool name is reported");
    assert_eq!(echo["kind"], "tool");
    assert_eq!(echo["servers"], json!(["alpha", "beta"]));
    assert!(
        status["servers"][0]["collisions"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "each server's status names its collisions"
    );

    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let upstream = &connection.upstream;
    let tools = upstream.list_tools().await.unwrap();
    assert!(
        !tools.iter().any(|t| t.name == "echo"),
        "neither server shadows the other"
    );
    let refused = upstream
        .call_tool(
            "echo",
            args(json!({"message": "x"})),
            &CallContext::default(),
        )
        .await;
    assert!(
        matches!(&refused, Err(switchboard_upstream::UpstreamError::Rpc { code: -32602, message, .. }) if message.contains("unknown tool")),
        "{refused:?}"
    );
    drop(daemon);

    // The command the warning suggests fixes it: with a prefix on one of them, both tools are
    // there.
    let suggested = human
        .split('`')
        .find(|part| part.starts_with("switchboard server "))
        .expect("the warning suggests a command");
    assert_eq!(suggested, "switchboard server set-prefix beta beta");
    let words: Vec<&str> = suggested.split_whitespace().skip(1).collect();
    let changed = ok(&switchboard(dir.path(), &words));
    assert!(changed.contains("beta__<name>"), "{changed}");
    let (daemon, status) = Daemon::start(dir.path(), 2).await;
    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let upstream = &connection.upstream;
    let tools = upstream.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert!(
        names.contains(&"echo".to_owned()) && names.contains(&"beta__echo".to_owned()),
        "{names:?} {status}"
    );
}

#[tokio::test]
async fn clients_hear_list_changed_when_a_server_changes_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    // A 2026-07-28 client (subscriptions/listen on /mcp) and a 2024-11-05 one (/sse).
    let mut modern = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let mut legacy =
        client(TransportSpec::from_url(&format!("{}/sse", daemon.base), vec![]).unwrap()).await;
    let names = |tools: Vec<switchboard_upstream::rmcp_model::Tool>| -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    };
    assert!(!names(modern.upstream.list_tools().await.unwrap()).contains(&"steady__late".into()));

    let added = modern
        .upstream
        .call_tool("steady__add_tool", None, &CallContext::default())
        .await
        .unwrap();
    assert!(text(&added).contains("added"));
    for (era, connection) in [("2026-07-28", &mut modern), ("2024-11-05", &mut legacy)] {
        let heard = tokio::time::timeout(Duration::from_secs(15), async {
            while let Some(event) = connection.events.recv().await {
                if event == switchboard_upstream::UpstreamEvent::ToolsChanged {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(heard, Ok(true), "the {era} client hears tools/list_changed");
        let tools = names(connection.upstream.list_tools().await.unwrap());
        assert!(tools.contains(&"steady__late".into()), "{era}: {tools:?}");
    }
}

/// The exposed names of the tools a 2026-07-28 client lists at `url`.
async fn tools_listed_2026(url: &str) -> Vec<String> {
    request_2026(url, "tools/list", "", json!({}), false).await["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A server's last known catalog is kept in the store: a daemon started while the server is
/// down lists and finds its tools (a call says the server is down, naming it and its state),
/// and `serve --lazy` serves them without connecting until a request needs the server (no
/// session is opened at it before).
#[tokio::test(flavor = "multi_thread")]
async fn a_servers_last_known_tools_are_served_while_it_is_down_and_until_first_use() {
    let server = typescript_sdk_server(false).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["ts", &server.url]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    assert!(
        tools_listed_2026(&daemon.mcp_url())
            .await
            .contains(&"ts__test_simple_text".to_owned())
    );
    drop(daemon);

    let opened = server.sessions.load(Ordering::SeqCst);
    let (daemon, status) = Daemon::start_with(dir.path(), 0, &["--lazy"]).await;
    assert_eq!(status["servers"][0]["state"], "disconnected", "{status:#}");
    assert_eq!(
        status["servers"][0]["connects_on_first_use"], true,
        "{status:#}"
    );
    assert!(
        status["servers"][0]["tools"].as_u64().unwrap() > 10,
        "{status:#}"
    );
    let listed = tools_listed_2026(&daemon.mcp_url()).await;
    assert!(
        listed.contains(&"ts__test_simple_text".to_owned()),
        "{listed:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.sessions.load(Ordering::SeqCst),
        opened,
        "not connected for a list"
    );
    let (_, answer) = tools_call_2026(
        &daemon.mcp_url(),
        json!({"name": "ts__test_simple_text", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "This is a simple text response for testing.",
        "the first call connects the server: {answer}"
    );
    assert_eq!(server.sessions.load(Ordering::SeqCst), opened + 1);
    drop(daemon);

    drop(server);
    let (daemon, _) = Daemon::start(dir.path(), 0).await;
    let listed = tools_listed_2026(&daemon.mcp_url()).await;
    assert!(
        listed.contains(&"ts__test_simple_text".to_owned()),
        "{listed:?}"
    );
    let found: Value = reqwest::get(format!(
        "{}/api/tools/search?q=simple%20text%20response&limit=3",
        daemon.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert!(
        found["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "ts__test_simple_text"),
        "{found}"
    );
    let (_, refused) = tools_call_2026(
        &daemon.mcp_url(),
        json!({"name": "ts__test_simple_text", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(refused["error"]["data"]["server"], "ts", "{refused}");
    assert!(refused["error"]["data"]["state"].is_string(), "{refused}");
}
