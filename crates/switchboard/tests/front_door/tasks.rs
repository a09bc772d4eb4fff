//! The tasks extension (2026-07-28) run by Switchboard for a server that has none: calls that become
//! tasks, outlive their request and ask the client through it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_fixtures::{Era, transports};

use crate::common::switchboard;
use crate::support::{Daemon, add, ok, request_2026};

/// Polls `tasks/get` for task `id` (every 100 ms, up to 10 s) until `done` holds; the task.
async fn poll_task(url: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut task = Value::Null;
    for _ in 0..100 {
        task =
            request_2026(url, "tasks/get", id, json!({"taskId": id}), true).await["result"].clone();
        if done(&task) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the task did not get there within 10 s: {task:#}");
}

/// The tasks extension at the front door, run by Switchboard for a server that has none (a
/// legacy session server): a client that takes tasks gets a call that runs long as a task,
/// whose outcome it polls later, after its own request has ended; a client that does not, gets
/// the same call's result as usual. A tool whose calls are always tasks refuses clients without
/// tasks (-32021), and its server's question (roots, asked on the session's GET stream) is put
/// to the client through the task (`input_required`), answered with `tasks/update`. A task
/// cancelled with `tasks/cancel` ends as cancelled, and so does its call at the server.
#[tokio::test(flavor = "multi_thread")]
async fn calls_become_tasks_that_outlive_their_request_and_ask_through_it() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["fx", &fixture.url]);
    ok(&switchboard(
        dir.path(),
        &["server", "set-task-mode", "fx", "required", "roots"],
    ));
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let url = daemon.mcp_url();
    let slow = json!({"name": "fx__slow", "arguments": {"ms": 1500}});

    let created = request_2026(&url, "tools/call", "fx__slow", slow.clone(), true).await;
    let created = &created["result"];
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    assert!(
        created["ttlMs"].as_u64().unwrap_or_default() > 0,
        "{created}"
    );
    assert!(created["pollIntervalMs"].is_u64(), "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    let done = poll_task(&url, &id, |t| t["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "done", "{done}");

    let plain = request_2026(&url, "tools/call", "fx__slow", slow, false).await;
    assert_eq!(plain["result"]["content"][0]["text"], "done", "{plain}");
    assert!(plain["result"].get("taskId").is_none(), "{plain}");

    let refused = request_2026(
        &url,
        "tools/call",
        "fx__roots",
        json!({"name": "fx__roots"}),
        false,
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");

    let created = request_2026(
        &url,
        "tools/call",
        "fx__roots",
        json!({"name": "fx__roots"}),
        true,
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let asking = poll_task(&url, &id, |t| t["status"] == "input_required").await;
    let requests = asking["inputRequests"].as_object().expect("input requests");
    assert_eq!(requests.len(), 1, "{asking}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "roots/list", "{asking}");
    let roots = json!({"roots": [{"uri": "file:///work/tasks", "name": "tasks"}]});
    let acked = request_2026(
        &url,
        "tasks/update",
        &id,
        json!({"taskId": id, "inputResponses": {key.clone(): roots}}),
        true,
    )
    .await;
    assert_eq!(acked["result"]["resultType"], "complete", "{acked}");
    let done = poll_task(&url, &id, |t| t["status"] == "completed").await;
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("file:///work/tasks"),
        "{done}"
    );

    let long = json!({"name": "fx__slow", "arguments": {"ms": 30000}});
    let created = request_2026(&url, "tools/call", "fx__slow", long, true).await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let acked = request_2026(&url, "tasks/cancel", &id, json!({"taskId": id}), true).await;
    assert_eq!(acked["result"]["resultType"], "complete", "{acked}");
    let task = request_2026(&url, "tasks/get", &id, json!({"taskId": id}), true).await;
    assert_eq!(task["result"]["status"], "cancelled", "{task}");
    for _ in 0..100 {
        if fixture.state.cancelled_calls.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        fixture.state.cancelled_calls.load(Ordering::SeqCst) > 0,
        "the server's call was cancelled"
    );
    let unknown = request_2026(&url, "tasks/get", "nope", json!({"taskId": "nope"}), true).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}
