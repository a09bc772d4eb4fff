//! Activation layers (the app's, a user's, a thread's): the narrowest word decides what each client
//! lists and may call.

use serde_json::{Value, json};
use switchboard_core::TransportSpec;
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::{CallContext, Connection};

use crate::common;
use crate::support::{
    DEFERRED_META, Daemon, add, args, client, client_with, listed, stdio_fixture, text,
    tools_changed,
};

/// Activation layers: the app turns a server off for everyone, a user back on for their
/// conversations, a thread one of its tools off; the narrowest word decides what each client
/// lists and may call (over sessions and stateless requests, so on the short path too). In the
/// deferred view a session turns servers on for itself with `set_active`; a thread's change
/// reaches its sessions as `list_changed`; the model-API listing follows the same layers.
#[tokio::test(flavor = "multi_thread")]
async fn conversations_turn_servers_and_tools_on_and_off_in_layers() {
    let dir = tempfile::tempdir().unwrap();
    let old = transports::streamable_http(Era::Legacy).await;
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    add(dir.path(), &["old", &old.url]);
    let (daemon, _) = Daemon::start(dir.path(), 2).await;
    let http = reqwest::Client::new();
    let patch = |path: &str, body: Value| {
        let (http, url) = (
            http.clone(),
            format!("{}/api/activation/{path}", daemon.base),
        );
        async move {
            let response = http.patch(url).json(&body).send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let header = |name: &str, value: &str| switchboard_core::NamedValue::guess(name, value);
    let echo = |connection: &Connection, tool: &'static str| {
        let upstream = connection.upstream.clone();
        async move {
            upstream
                .call_tool(
                    tool,
                    args(json!({"message": "hi"})),
                    &CallContext::default(),
                )
                .await
        }
    };
    let has = |names: &[String], prefix: &str| names.iter().any(|n| n.starts_with(prefix));

    let (status, body) = patch("app", json!({"servers": {"old": false}})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"scope": "app", "servers": {"old": false}, "tools": {}})
    );
    let (status, _) = patch("users/ana", json!({"servers": {"old": true}})).await;
    assert_eq!(status, 200);
    let (status, _) = patch("threads/t1", json!({"tools": {"old__echo": false}})).await;
    assert_eq!(status, 200);
    let (status, body) = patch("threads/a%20b", json!({})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = patch("app", json!({"servers": {"old": "yes"}})).await;
    assert_eq!(status, 400, "{body}");

    for sessions in [true, false] {
        let path = format!("sessions: {sessions}");
        // Anyone: the app's word.
        let anyone = client_with(&daemon.mcp_url(), sessions, vec![]).await;
        let names = listed(&anyone).await;
        assert!(
            has(&names, "steady__") && !has(&names, "old__"),
            "{path}: {names:?}"
        );
        let refused = echo(&anyone, "old__echo").await.expect_err("old is off");
        assert!(
            refused.to_string().contains("turned off"),
            "{path}: {refused}"
        );
        assert!(echo(&anyone, "steady__echo").await.is_ok(), "{path}");
        // Ana: her word.
        let ana = client_with(
            &daemon.mcp_url(),
            sessions,
            vec![header("X-Switchboard-User", "ana")],
        )
        .await;
        assert!(has(&listed(&ana).await, "old__"), "{path}");
        assert!(echo(&ana, "old__echo").await.is_ok(), "{path}");
        // Ana in thread t1: the thread's word on one tool.
        let thread = client_with(
            &format!("{}?thread=t1", daemon.mcp_url()),
            sessions,
            vec![header("X-Switchboard-User", "ana")],
        )
        .await;
        let names = listed(&thread).await;
        assert!(
            has(&names, "old__add") && !names.contains(&"old__echo".to_owned()),
            "{path}: {names:?}"
        );
        let refused = echo(&thread, "old__echo").await.expect_err("off in t1");
        assert!(refused.to_string().contains("thread"), "{path}: {refused}");
    }

    // The model-API listing and the search API follow the same layers.
    let tool_names = |path: String| {
        let base = daemon.base.clone();
        async move {
            let body = common::get_json(&format!("{base}{path}")).await;
            body["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("{body}"))
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        }
    };
    let exported = |query: &str| tool_names(format!("/api/tools{query}"));
    let searched = |query: &str| tool_names(format!("/api/tools/search?q=echo&limit=50{query}"));
    assert!(!has(&exported("").await, "old__"));
    assert!(!searched("").await.contains(&"old__echo".to_owned()));
    assert!(
        searched("&user=ana")
            .await
            .contains(&"old__echo".to_owned())
    );
    assert!(has(&exported("?user=ana").await, "old__"));
    assert!(
        !exported("?user=ana&thread=t1")
            .await
            .contains(&"old__echo".to_owned())
    );

    // An HTTP+SSE client names its thread on the stream's URL.
    let legacy = client(
        TransportSpec::from_url(
            &format!("{}/sse?thread=t1", daemon.base),
            vec![header("X-Switchboard-User", "ana")],
        )
        .unwrap(),
    )
    .await;
    let refused = echo(&legacy, "old__echo").await.expect_err("off in t1");
    assert!(refused.to_string().contains("thread"), "{refused}");
    assert!(listed(&legacy).await.contains(&"old__add".to_owned()));

    // A thread's change reaches its session as list_changed.
    let mut in_t1 = client_with(&format!("{}?thread=t1", daemon.mcp_url()), true, vec![]).await;
    assert!(!has(&listed(&in_t1).await, "old__"));
    let (status, _) = patch("threads/t1", json!({"servers": {"old": true}})).await;
    assert_eq!(status, 200);
    let heard = tools_changed(&mut in_t1).await;
    assert!(heard, "list_changed after the thread's change");
    let names = listed(&in_t1).await;
    assert!(
        has(&names, "old__add") && !names.contains(&"old__echo".to_owned()),
        "{names:?}"
    );

    // In the deferred view a session turns a server on for itself.
    let deferred = format!("{}?tools=deferred", daemon.mcp_url());
    let mut session = client_with(&deferred, true, vec![]).await;
    let meta = DEFERRED_META;
    assert_eq!(listed(&session).await, meta);
    let servers = session
        .upstream
        .call_tool("list_servers", None, &CallContext::default())
        .await
        .unwrap();
    let content = serde_json::to_value(&servers.content).unwrap();
    let servers: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
    let old_entry = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["server"] == "old")
        .unwrap_or_else(|| panic!("{servers:#}"));
    assert_eq!(old_entry["active"], false, "{servers:#}");
    let found = session
        .upstream
        .call_tool(
            "search_tools",
            args(json!({"query": "echo a message"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(
        !text(&found).contains("old__"),
        "off servers are not found: {}",
        text(&found)
    );
    let unknown = session
        .upstream
        .call_tool(
            "set_active",
            args(json!({"servers": ["nope"], "active": true})),
            &CallContext::default(),
        )
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    session
        .upstream
        .call_tool(
            "set_active",
            args(json!({"servers": ["old"], "active": true})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    let heard = tools_changed(&mut session).await;
    assert!(heard, "list_changed after set_active");
    // The server's tools join the list (beside the tools the search found).
    let names = listed(&session).await;
    assert!(
        names.contains(&"old__whoami".to_owned()) && !names.contains(&"steady__whoami".to_owned()),
        "{names:?}"
    );
    assert!(echo(&session, "old__echo").await.is_ok());
    // Another session is not concerned.
    assert_eq!(
        listed(&client_with(&deferred, true, vec![]).await).await,
        meta
    );
    // A stateless request has no session to remember the change in.
    let stateless = client_with(&deferred, false, vec![]).await;
    let refused = stateless
        .upstream
        .call_tool(
            "set_active",
            args(json!({"servers": ["old"], "active": true})),
            &CallContext::default(),
        )
        .await
        .expect_err("no session");
    assert!(
        refused.to_string().contains("X-Switchboard-Thread"),
        "{refused}"
    );

    // Emptying the app's layer turns old back on for everyone.
    let response = http
        .delete(format!("{}/api/activation/app", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let anyone = client_with(&daemon.mcp_url(), true, vec![]).await;
    assert!(has(&listed(&anyone).await, "old__"));
    drop(old);
}
