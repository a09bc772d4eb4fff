//! Per-tool policies at the front door: pinned tools listed in the deferred view, and a tool's
//! allowed callers enforced on every path a call can take.

use serde_json::{Value, json};
use switchboard_core::TransportSpec;
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::{CallContext, Connection};

use crate::common::switchboard;
use crate::support::{Daemon, add, args, client, client_with, listed, ok, stdio_fixture, text};

/// Pinned tools are in the deferred view's list from the start; a tool that names its allowed
/// callers refuses any other (the caller a connection declares with `X-Switchboard-Caller`), on
/// every path a call can take: sessions and stateless requests, to stdio servers and to HTTP
/// servers of both eras (whose calls otherwise take the short path).
#[tokio::test(flavor = "multi_thread")]
async fn pinned_tools_are_listed_and_a_tools_allowed_callers_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let old = transports::streamable_http(Era::Legacy).await;
    let new = transports::streamable_http(Era::Modern).await;
    add(dir.path(), &["steady", "--", &stdio_fixture()]);
    add(dir.path(), &["old", &old.url]);
    add(dir.path(), &["new", &new.url]);
    let servers = ["steady", "old", "new"];
    ok(&switchboard(
        dir.path(),
        &["server", "pin", "steady", "echo"],
    ));
    let set_callers = |server: &str, tool: &str, callers: &str| {
        ok(&switchboard(
            dir.path(),
            &["server", "set-callers", server, tool, "--callers", callers],
        ))
    };
    for server in servers {
        set_callers(server, "add", "direct,agent:math");
        set_callers(server, "whoami", "code_execution");
    }
    let shown = ok(&switchboard(dir.path(), &["server", "show", "steady"]));
    assert!(shown.contains("pinned:       echo"), "{shown}");
    assert!(
        shown.contains("callers:      add: direct, agent:math"),
        "{shown}"
    );
    let bad = switchboard(
        dir.path(),
        &[
            "server",
            "set-callers",
            "steady",
            "add",
            "--callers",
            "robot",
        ],
    );
    assert!(!bad.status.success());

    let (daemon, _) = Daemon::start_with(dir.path(), 3, &["--tools", "deferred"]).await;
    let caller = |who: &str| switchboard_core::NamedValue::guess("X-Switchboard-Caller", who);
    let call = |connection: &Connection, tool: String| {
        let upstream = connection.upstream.clone();
        async move {
            let arguments = if tool.ends_with("__add") {
                args(json!({"a": 2, "b": 3}))
            } else {
                None
            };
            upstream
                .call_tool(&tool, arguments, &CallContext::default())
                .await
        }
    };
    for sessions in [true, false] {
        let model = client_with(&daemon.mcp_url(), sessions, vec![]).await;
        assert_eq!(
            listed(&model).await,
            [
                "call_tool",
                "describe_tools",
                "list_servers",
                "search_tools",
                "set_active",
                "steady__echo"
            ],
            "sessions: {sessions}"
        );
        let code = client_with(&daemon.mcp_url(), sessions, vec![caller("code_execution")]).await;
        let agent = client_with(&daemon.mcp_url(), sessions, vec![caller("agent:math")]).await;
        let unknown = client_with(&daemon.mcp_url(), sessions, vec![caller("robot")]).await;
        for server in servers {
            let add = format!("{server}__add");
            let whoami = format!("{server}__whoami");
            let path = format!("sessions: {sessions}, server {server}");

            let answer = call(&model, add.clone()).await.unwrap();
            assert!(text(&answer).contains('5'), "{path}: {}", text(&answer));
            // A call that declares no caller is the model's own, which whoami does not allow.
            let refused = call(&model, whoami.clone())
                .await
                .expect_err("whoami is for code only");
            assert!(
                refused.to_string().contains("may not be called by direct"),
                "{path}: {refused}"
            );

            let refused = call(&code, add.clone())
                .await
                .expect_err("code may not add");
            assert!(
                refused
                    .to_string()
                    .contains("may not be called by code_execution"),
                "{path}: {refused}"
            );
            let through_call_tool = code
                .upstream
                .call_tool(
                    "call_tool",
                    args(json!({"name": add, "arguments": {"a": 1, "b": 1}})),
                    &CallContext::default(),
                )
                .await;
            assert!(through_call_tool.is_err(), "{path}: {through_call_tool:?}");
            let ran = call(&code, whoami.clone()).await;
            assert!(ran.is_ok(), "{path}: {ran:?}");
            // A tool without allowed callers is anyone's.
            let echoed = code
                .upstream
                .call_tool(
                    &format!("{server}__echo"),
                    args(json!({"message": "hi"})),
                    &CallContext::default(),
                )
                .await
                .unwrap();
            assert!(text(&echoed).contains("hi"), "{path}");

            assert!(call(&agent, add.clone()).await.is_ok(), "{path}");
            let refused = call(&unknown, add).await.expect_err("not a caller");
            assert!(
                refused.to_string().contains("not a caller"),
                "{path}: {refused}"
            );
        }
    }

    // An HTTP+SSE (2024-11-05) client's header counts the same.
    let sse = |who: &str| {
        TransportSpec::from_url(&format!("{}/sse", daemon.base), vec![caller(who)]).unwrap()
    };
    let legacy_code = client(sse("code_execution")).await;
    let refused = call(&legacy_code, "old__add".to_owned())
        .await
        .expect_err("code may not add, over /sse either");
    assert!(
        refused
            .to_string()
            .contains("may not be called by code_execution"),
        "{refused}"
    );
    assert!(call(&legacy_code, "old__whoami".to_owned()).await.is_ok());

    // The same policies in the listing for a model API.
    let http = reqwest::Client::new();
    let export = |query: &'static str| {
        let (http, base) = (http.clone(), daemon.base.clone());
        async move {
            let response = http
                .get(format!("{base}/api/tools{query}"))
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let (status, anthropic) = export("?format=anthropic").await;
    assert_eq!(status, 200, "{anthropic}");
    let tools = anthropic["tools"].as_array().unwrap();
    assert_eq!(tools[0]["type"], "tool_search_tool_bm25_20251119");
    let entry = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {anthropic:#}"))
    };
    assert!(
        entry("steady__echo").get("defer_loading").is_none(),
        "pinned"
    );
    assert_eq!(entry("steady__add")["defer_loading"], true);
    assert_eq!(entry("steady__add")["allowed_callers"], json!(["direct"]));
    assert_eq!(
        entry("old__whoami")["allowed_callers"],
        json!(["code_execution_20250825"])
    );
    assert!(entry("new__echo")["input_schema"]["properties"].is_object());
    let (_, openai) = export("?format=openai&defer=none").await;
    let names: Vec<&str> = openai["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"steady__add"), "{names:?}");
    assert!(!names.contains(&"steady__whoami"), "code only: {names:?}");
    assert_eq!(openai["tools"][0]["type"], "function", "nothing deferred");
    let (status, body) = export("?format=gemini").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("anthropic"),
        "{body}"
    );
    drop((old, new));
}
