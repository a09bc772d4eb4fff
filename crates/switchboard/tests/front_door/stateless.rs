//! 2026-07-28 (stateless) clients of 2026-07-28 servers: calls relayed straight through with the
//! same answers as on the full path, and the server's input requests keeping their names and
//! seeing the capabilities the caller declared.

use serde_json::{Value, json};

use crate::support::{post_tools_call_2026, serving_the_conformance_fixture, tools_call_2026};

/// The capabilities of a client that can answer every kind of input request.
fn answers_everything() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

/// Answers the request-state tool's question (`confirm`: yes) with `state`, sending `mcp_name`
/// as its `Mcp-Name`; returns the final message.
async fn confirm_with_state(url: &str, tool: &str, state: Value, mcp_name: &str) -> Value {
    let retry = json!({"name": tool, "arguments": {}, "requestState": state,
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}});
    let (_, mut done) = post_tools_call_2026(url, retry, answers_everything(), mcp_name).await;
    done.pop().unwrap()
}

/// `name` as SEP-2243 sends a header value it must protect: `=?base64?…?=`.
fn base64_header(name: &str) -> String {
    use base64::Engine;
    format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode(name)
    )
}

/// A 2026-07-28 client calling a 2026-07-28 server's tool is relayed straight through: the
/// server's own `requestState` reaches the client and its retry completes the call; progress
/// and the log messages asked for stream through as the server sent them. The same calls
/// with the tool's name Base64-encoded in `Mcp-Name` (a form only the full path checks) get the
/// same answers, except that the `requestState` and the progress token the server sees are
/// then Switchboard's; a state the server issued on the straight path is good on the full one.
#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_call_to_a_stateless_server_goes_straight_through_with_the_same_answers() {
    let (daemon, _fixture, _dir) = serving_the_conformance_fixture().await;
    let url = daemon.mcp_url();
    let everything = answers_everything();

    for straight in [true, false] {
        let header = |name: &str| {
            if straight {
                name.to_owned()
            } else {
                base64_header(name)
            }
        };
        let path = if straight { "straight" } else { "full" };

        // Asked for input: the state is the server's own on the straight path.
        let tool = "test__test_input_required_result_request_state";
        let call = json!({"name": tool, "arguments": {}});
        let (_, mut asked) =
            post_tools_call_2026(&url, call.clone(), everything.clone(), &header(tool)).await;
        let asked = asked.pop().unwrap();
        assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
        let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
        let servers_own = serde_json::from_str::<Value>(&state)
            .is_ok_and(|state| state["kind"] == "request-state");
        assert_eq!(servers_own, straight, "{path}: requestState {state}");
        let done = confirm_with_state(&url, tool, state.into(), &header(tool)).await;
        assert_eq!(
            done["result"]["content"][0]["text"], "state-ok: requestState validated",
            "{path}: {done}"
        );
        assert_eq!(done["result"]["resultType"], "complete", "{path}: {done}");

        // Progress for the caller's token, then the result.
        let tool = "test__test_tool_with_progress";
        let call = json!({"name": tool, "arguments": {}, "_meta": {"progressToken": "p-1"}});
        let (status, messages) =
            post_tools_call_2026(&url, call, everything.clone(), &header(tool)).await;
        assert_eq!(status, 200);
        let progress: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert!(!progress.is_empty(), "{path}: {messages:?}");
        assert!(
            progress
                .iter()
                .all(|p| p["params"]["progressToken"] == "p-1"),
            "{path}: {progress:?}"
        );
        // The tool answers with the token it was sent: the caller's own on the straight path
        // (the full path sends one of Switchboard's and maps the reports back).
        let seen = &messages.last().unwrap()["result"]["content"][0]["text"];
        assert!(seen.is_string(), "{path}: {messages:?}");
        assert_eq!(
            seen == "p-1",
            straight,
            "{path}: the server saw token {seen}"
        );

        // Log messages only when asked for, at the level asked for.
        let tool = "test__test_tool_with_logging";
        for (level, expected) in [(None, 0), (Some("info"), 3), (Some("error"), 0)] {
            let mut call = json!({"name": tool, "arguments": {}});
            if let Some(level) = level {
                call["_meta"] = json!({"io.modelcontextprotocol/logLevel": level});
            }
            let (_, messages) =
                post_tools_call_2026(&url, call, everything.clone(), &header(tool)).await;
            let logs = messages
                .iter()
                .filter(|m| m["method"] == "notifications/message")
                .count();
            assert_eq!(logs, expected, "{path}, level {level:?}: {messages:?}");
            assert_eq!(
                messages.last().unwrap()["result"]["content"][0]["text"],
                "Tool with logging executed successfully",
                "{path}"
            );
        }

        // A tool error is the server's, as it sent it.
        let tool = "test__test_error_handling";
        let (_, mut failed) = post_tools_call_2026(
            &url,
            json!({"name": tool, "arguments": {}}),
            everything.clone(),
            &header(tool),
        )
        .await;
        let failed = failed.pop().unwrap();
        assert_eq!(failed["result"]["isError"], true, "{path}: {failed}");
    }

    // A state the server issued on the straight path is good on the full path too: the retry
    // takes it to the server.
    let tool = "test__test_input_required_result_request_state";
    let call = json!({"name": tool, "arguments": {}});
    let (_, mut asked) = post_tools_call_2026(&url, call, everything, tool).await;
    let state = asked.pop().unwrap()["result"]["requestState"].clone();
    let done = confirm_with_state(&url, tool, state, &base64_header(tool)).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "state-ok: requestState validated",
        "{done}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modern_servers_input_requests_keep_their_names_and_see_the_callers_capabilities() {
    let (daemon, _fixture, _dir) = serving_the_conformance_fixture().await;
    let url = daemon.mcp_url();
    let everything = answers_everything();
    let call = |name: &str| json!({"name": name, "arguments": {}});

    // The server's three questions reach the client at once, under the server's own names.
    let (_, asked) = tools_call_2026(
        &url,
        call("test__test_input_required_result_multiple_inputs"),
        everything.clone(),
    )
    .await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let mut keys: Vec<&String> = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    keys.sort();
    assert_eq!(keys, ["client_roots", "greeting", "user_name"], "{asked}");
    let state = result["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();

    // The answers go back by those names and complete the call.
    let mut retry = call("test__test_input_required_result_multiple_inputs");
    retry["requestState"] = state.into();
    retry["inputResponses"] = json!({
        "user_name": {"action": "accept", "content": {"name": "Alice"}},
        "greeting": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "Hi"}},
        "client_roots": {"roots": [{"uri": "file:///work", "name": "work"}]},
    });
    let (_, done) = tools_call_2026(&url, retry, everything.clone()).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Name: Alice; Greeting: Hi; Roots: 1",
        "{done}"
    );

    // The server sees what this caller declared, not what Switchboard could relay: a caller
    // without sampling is refused by a tool that needs it (400, -32021), one with it is served,
    // and a caller that can only sample is asked only to sample.
    let (status, refused) =
        tools_call_2026(&url, call("test__test_missing_capability"), json!({})).await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!(-32021)),
        "{refused}"
    );
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    let (_, served) = tools_call_2026(
        &url,
        call("test__test_missing_capability"),
        json!({"sampling": {}}),
    )
    .await;
    assert_eq!(
        served["result"]["content"][0]["text"], "Success",
        "{served}"
    );
    let (_, asked) = tools_call_2026(
        &url,
        call("test__test_input_required_result_capabilities"),
        json!({"sampling": {}}),
    )
    .await;
    let keys: Vec<&String> = asked["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["sample_input"], "{asked}");

    // Answers that cannot be results of any input request are refused, not passed on.
    let mut malformed = call("test__test_input_required_result_elicitation");
    malformed["inputResponses"] = json!({"user_name": 12345});
    let (_, refused) = tools_call_2026(&url, malformed, everything).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}
