//! The deferred view (`serve --tools deferred`, `?tools=deferred`, `X-Switchboard-Tools`): a few
//! meta-tools that find and call the others, and a session's list as its working set.

use serde_json::{Value, json};
use switchboard_upstream::{CallContext, Connection};

use crate::support::{
    DEFERRED_META, Daemon, add, args, client_with, everything, listed, stdio_fixture, text,
    tools_changed,
};

/// The text of `result`'s first content block, as a model reads it.
fn first_text(result: &switchboard_upstream::rmcp_model::CallToolResult) -> String {
    let content = serde_json::to_value(&result.content).unwrap();
    content[0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The deferred view: a client sees a few meta-tools instead of every tool. A search finds
/// tools by what they do, a line each with their arguments; `describe_tools` gives their full
/// definitions; in a session they join the client's list, announced with `tools/list_changed`;
/// `call_tool` calls one by name, and any tool can still be called by its own name. The view is
/// the daemon's (`serve --tools deferred`) or the client's own (`?tools=deferred`, or the
/// `X-Switchboard-Tools` header).
#[tokio::test(flavor = "multi_thread")]
async fn the_deferred_view_shows_a_few_tools_that_find_and_call_the_others() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    add(dir.path(), &["everything", "--", "node", &everything()]);
    let (daemon, _) = Daemon::start_with(dir.path(), 2, &["--tools", "deferred"]).await;
    let meta = DEFERRED_META;

    for sessions in [true, false] {
        let mut connection = client_with(&daemon.mcp_url(), sessions, vec![]).await;
        assert_eq!(listed(&connection).await, meta, "sessions: {sessions}");
        let found = connection
            .upstream
            .call_tool(
                "search_tools",
                args(json!({"query": "add two numbers", "limit": 3})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        let found = first_text(&found);
        let first = found.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("steady__add(a, b): ")
                || first.starts_with("everything__get-sum(a, b): "),
            "a line per tool, its arguments first: {found}"
        );
        let first_name = first.split('(').next().unwrap_or_default();
        let described = connection
            .upstream
            .call_tool(
                "describe_tools",
                args(json!({"names": [first_name]})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        let described: Value = serde_json::from_str(&first_text(&described)).unwrap();
        assert_eq!(described[0]["name"], first_name, "{described:#}");
        assert!(
            described[0]["inputSchema"]["properties"]["a"].is_object(),
            "{described:#}"
        );
        let unknown = connection
            .upstream
            .call_tool(
                "describe_tools",
                args(json!({"names": ["nobody__nothing"]})),
                &CallContext::default(),
            )
            .await;
        assert!(unknown.is_err(), "{unknown:?}");
        if sessions {
            let heard = tools_changed(&mut connection).await;
            assert!(heard, "list_changed after the search");
            let now = listed(&connection).await;
            assert!(
                now.len() > 2 && now.contains(&"steady__add".to_owned()),
                "{now:?}"
            );
        } else {
            // A 2026-07-28 client has no session to keep a list in.
            assert_eq!(listed(&connection).await, meta);
        }
        let sum = connection
            .upstream
            .call_tool(
                "call_tool",
                args(json!({"name": "steady__add", "arguments": {"a": 2, "b": 3}})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        assert!(text(&sum).contains("\"5\""), "{}", text(&sum));
        let echoed = connection
            .upstream
            .call_tool(
                "steady__echo",
                args(json!({"message": "by name"})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        assert!(text(&echoed).contains("by name"));
        let refused = connection
            .upstream
            .call_tool("search_tools", args(json!({})), &CallContext::default())
            .await;
        assert!(
            refused.is_err(),
            "a search without a query is refused: {refused:?}"
        );
    }

    // The daemon's view is all; a client asks for the deferred one, and back.
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let all = listed(&client_with(&daemon.mcp_url(), true, vec![]).await).await;
    assert!(
        all.contains(&"steady__echo".to_owned()) && all.len() > 2,
        "{all:?}"
    );
    let by_query = client_with(
        &format!("{}?tools=deferred", daemon.mcp_url()),
        true,
        vec![],
    )
    .await;
    assert_eq!(listed(&by_query).await, meta);
    let header = switchboard_core::NamedValue::guess("X-Switchboard-Tools", "deferred");
    let by_header = client_with(&daemon.mcp_url(), false, vec![header]).await;
    assert_eq!(listed(&by_header).await, meta);
}

/// A deferred session's list is its working set, not everything it ever found: the latest
/// search's hits and the tools it called, within `--deferred-max-tools`. A new search replaces
/// the old hits, a called tool stays, and each change is announced with `tools/list_changed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_deferred_session_lists_its_latest_hits_and_called_tools_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    let (daemon, _) = Daemon::start_with(
        dir.path(),
        1,
        &["--tools", "deferred", "--deferred-max-tools", "3"],
    )
    .await;
    let mut session = client_with(&daemon.mcp_url(), true, vec![]).await;
    let search = async |session: &Connection, query: &str, limit: u64| -> Vec<String> {
        let found = session
            .upstream
            .call_tool(
                "search_tools",
                args(json!({"query": query, "limit": limit})),
                &CallContext::default(),
            )
            .await
            .unwrap();
        first_text(&found)
            .lines()
            .filter_map(|line| line.split_once('(').map(|(name, _)| name.to_owned()))
            .collect()
    };
    let working = async |session: &Connection| -> Vec<String> {
        listed(session)
            .await
            .into_iter()
            .filter(|name| !DEFERRED_META.contains(&name.as_str()))
            .collect()
    };

    let first = search(&session, "add two numbers", 2).await;
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(tools_changed(&mut session).await);
    let mut expected = first.clone();
    expected.sort();
    assert_eq!(working(&session).await, expected);

    // A called tool joins the set (by its own name here, which a session may also use).
    let echoed = session
        .upstream
        .call_tool(
            "steady__echo",
            args(json!({"message": "kept"})),
            &CallContext::default(),
        )
        .await
        .unwrap();
    assert!(text(&echoed).contains("kept"));
    let now = working(&session).await;
    assert!(now.contains(&"steady__echo".to_owned()), "{now:?}");
    assert!(now.len() <= 3, "{now:?}");

    // A second search replaces the first one's hits; the called tool stays, within the bound.
    let second = search(&session, "whoami", 1).await;
    assert_eq!(second.len(), 1, "{second:?}");
    assert!(tools_changed(&mut session).await);
    let now = working(&session).await;
    let mut expected: Vec<String> = second
        .iter()
        .chain(["steady__echo".to_owned()].iter())
        .cloned()
        .collect();
    expected.sort();
    expected.dedup();
    assert_eq!(now, expected, "the first search's hits are gone");

    // Searches never grow the list past the bound.
    for query in ["add", "echo", "slow", "fail", "crash", "whoami"] {
        let found = search(&session, query, 10).await;
        assert!(!found.is_empty(), "{query}");
        let now = working(&session).await;
        assert!(now.len() <= 3, "{query}: {now:?}");
    }
}
