//! The hub keeps each server in its own task: failures stay put, crashes reconnect, changes
//! refresh the catalog, and every state change is published.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::{
    ConnectionState, DetectedTransport, ServerDefinition, ServerId, TransportSpec,
};
use switchboard_fixtures::{Era, chaos, transports};
use switchboard_hub::{Hub, HubError, HubEvent};
use switchboard_store::Store;
use switchboard_upstream::{CallContext, ConnectOptions};

async fn hub() -> (Arc<Hub>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    (Hub::new(store, ConnectOptions::new("test")), dir)
}

fn http(id: &str, url: &str) -> ServerDefinition {
    let mut def = ServerDefinition::new(
        ServerId::new(id).unwrap(),
        TransportSpec::from_url(url, vec![]).unwrap(),
    );
    def.timeouts.request = Duration::from_millis(800);
    def
}

fn stdio_fixture(id: &str) -> ServerDefinition {
    let binary = switchboard_fixtures::stdio_fixture_binary();
    ServerDefinition::new(
        ServerId::new(id).unwrap(),
        TransportSpec::stdio(
            binary.display().to_string(),
            vec!["legacy".into()],
            vec![],
            None,
        )
        .unwrap(),
    )
}

fn id(text: &str) -> ServerId {
    ServerId::new(text).unwrap()
}

async fn echo(hub: &Hub, server: &str) -> String {
    let result = hub
        .upstream(&id(server))
        .unwrap()
        .call_tool(
            "echo",
            serde_json::json!({"message": "ok"}).as_object().cloned(),
            &CallContext::default(),
        )
        .await
        .unwrap();
    result.content[0].as_text().unwrap().text.clone()
}

/// Waits (bounded) until `check` holds for the server's status.
async fn eventually(
    hub: &Hub,
    server: &str,
    what: &str,
    check: impl Fn(&switchboard_hub::ServerStatus) -> bool,
) {
    for _ in 0..300 {
        if hub
            .status()
            .iter()
            .any(|s| s.server.as_str() == server && check(s))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{server} never reached: {what}; status: {:?}", hub.status());
}

#[tokio::test]
async fn broken_servers_leave_the_healthy_one_untouched_and_say_what_is_wrong() {
    let (hub, _dir) = hub().await;
    let good = transports::streamable_http(Era::Legacy).await;
    let hanging = chaos::hang().await;
    let garbage = chaos::garbage_json().await;
    let refused_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    hub.start(http("good", &good.url)).await;
    hub.start(http("hanging", &hanging.url)).await;
    hub.start(http("garbage", &garbage.url)).await;
    hub.start(http(
        "refused",
        &format!("http://127.0.0.1:{refused_port}/mcp"),
    ))
    .await;
    hub.wait_settled(Duration::from_secs(20), |_| {}).await;

    let status = hub.status();
    let by_id = |name: &str| {
        status
            .iter()
            .find(|s| s.server.as_str() == name)
            .unwrap()
            .clone()
    };
    assert_eq!(by_id("good").state, ConnectionState::Connected);
    assert_eq!(by_id("good").tools, 8);
    // The fixture answers resources/templates/list with -32601: that list is empty, the
    // others are kept and the server counts as connected.
    assert_eq!(by_id("good").resources, 1);
    assert_eq!(by_id("good").resource_templates, 0);
    for (name, words) in [
        ("hanging", "no answer within"),
        ("garbage", "not a JSON-RPC message"),
        ("refused", "refused"),
    ] {
        let s = by_id(name);
        assert!(
            matches!(
                s.state,
                ConnectionState::Error | ConnectionState::Reconnecting
            ),
            "{name}: {s:?}"
        );
        let error = s.error.unwrap_or_default();
        assert!(
            error.contains(words),
            "{name}: '{error}' should say '{words}'"
        );
    }
    assert_eq!(echo(&hub, "good").await, "ok");
    let err = hub.upstream(&id("refused")).unwrap_err();
    assert!(matches!(err, HubError::NotConnected { .. }), "{err}");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_crashed_stdio_server_is_reconnected_and_the_bus_says_so() {
    let (hub, _dir) = hub().await;
    let mut events = hub.subscribe();
    hub.start(stdio_fixture("crashy")).await;
    eventually(&hub, "crashy", "connected", |s| {
        s.state == ConnectionState::Connected
    })
    .await;
    let upstream = hub.upstream(&id("crashy")).unwrap();
    let _ = upstream
        .call_tool("crash", None, &CallContext::default())
        .await;

    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen
        .iter()
        .filter(|to| **to == ConnectionState::Connected)
        .count()
        < 2
    {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .expect("reconnected within 20 s")
            .unwrap();
        if let HubEvent::StateChanged { to, .. } = event {
            seen.push(to);
        }
    }
    assert!(seen.contains(&ConnectionState::Reconnecting), "{seen:?}");
    assert_eq!(echo(&hub, "crashy").await, "ok");
    hub.shutdown().await;
    assert!(hub.status().is_empty());
}

/// The reason the next change of `server` to an error state gives (within 20 s).
async fn next_reason(
    events: &mut tokio::sync::broadcast::Receiver<HubEvent>,
    server: &str,
) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .expect("a state change within 20 s")
            .unwrap();
        if let HubEvent::StateChanged {
            server: changed,
            error: Some(error),
            ..
        } = event
            && changed.as_str() == server
        {
            return error;
        }
    }
}

/// The process whose environment holds `FIXTURE_MARK=<mark>`.
fn process_marked(mark: &str) -> u32 {
    let wanted = format!("FIXTURE_MARK={mark}");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|byte| *byte == 0)
            .any(|variable| variable == wanted.as_bytes())
        {
            return pid;
        }
    }
    panic!("no process marked {mark}");
}

#[tokio::test]
async fn a_stdio_server_that_ends_is_said_to_have_exited_with_its_code_or_been_killed() {
    let (hub, _dir) = hub().await;
    let mut events = hub.subscribe();
    let mark = format!("ending-{}", std::process::id());
    let mut def = stdio_fixture("ending");
    if let TransportSpec::Stdio { env, .. } = &mut def.transport {
        env.push(switchboard_core::NamedValue::guess("FIXTURE_MARK", &mark));
    }
    hub.start(def).await;
    let connected = |s: &switchboard_hub::ServerStatus| s.state == ConnectionState::Connected;
    eventually(&hub, "ending", "connected", connected).await;

    // It exits by itself with code 3.
    let upstream = hub.upstream(&id("ending")).unwrap();
    let _ = upstream
        .call_tool("crash", None, &CallContext::default())
        .await;
    let reason = next_reason(&mut events, "ending").await;
    assert!(
        reason.contains("the server process exited with code 3"),
        "{reason}"
    );

    // Someone kills it: the reason is the signal, not an old line of its stderr.
    eventually(&hub, "ending", "connected again", connected).await;
    while events.try_recv().is_ok() {}
    let pid = process_marked(&mark);
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let reason = next_reason(&mut events, "ending").await;
    assert!(
        reason.contains("the server process was killed by signal 9 (SIGKILL)"),
        "{reason}"
    );
    assert!(!reason.contains("last output"), "{reason}");
    hub.shutdown().await;
}

#[tokio::test]
async fn list_changed_refreshes_the_catalog() {
    let (hub, _dir) = hub().await;
    let fixture = transports::streamable_http(Era::Legacy).await;
    hub.start(http("changing", &fixture.url)).await;
    eventually(&hub, "changing", "connected", |s| {
        s.state == ConnectionState::Connected
    })
    .await;
    let upstream = hub.upstream(&id("changing")).unwrap();
    upstream
        .call_tool("add_tool", None, &CallContext::default())
        .await
        .unwrap();
    eventually(&hub, "changing", "9 tools", |s| s.tools == 9).await;
    let catalog = hub.catalog(&id("changing")).unwrap();
    assert!(catalog.tools.iter().any(|t| t.name == "late"));
    hub.shutdown().await;
}

#[tokio::test]
async fn disabled_tools_are_hidden_and_refused() {
    let (hub, _dir) = hub().await;
    let fixture = transports::streamable_http(Era::Legacy).await;
    let mut def = http("filtered", &fixture.url);
    def.disabled_tools.insert("crash".into());
    hub.start(def).await;
    eventually(&hub, "filtered", "connected", |s| {
        s.state == ConnectionState::Connected
    })
    .await;
    let catalog = hub.catalog(&id("filtered")).unwrap();
    assert!(!catalog.tools.iter().any(|t| t.name == "crash"));
    assert_eq!(catalog.tools.len(), 7);
    assert!(matches!(
        hub.upstream_for_tool(&id("filtered"), "crash"),
        Err(HubError::ToolDisabled { .. })
    ));
    hub.shutdown().await;
}

#[tokio::test]
async fn the_probe_result_is_cached_in_the_store() {
    let (hub, _dir) = hub().await;
    let fixture = transports::http_sse().await;
    let def = http("legacy", &fixture.url);
    hub.store().add_server(&def).await.unwrap();
    hub.start(def.clone()).await;
    eventually(&hub, "legacy", "connected", |s| {
        s.state == ConnectionState::Connected
    })
    .await;
    let cached = hub
        .store()
        .cached_probe(&def.id, &def.transport.target())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cached.detected, DetectedTransport::HttpSse);
    assert_eq!(cached.protocol_version.as_deref(), Some("2024-11-05"));
    assert_eq!(hub.status()[0].detected_transport, Some("http_sse"));
    hub.shutdown().await;
}

async fn hub_supervised(
    supervision: switchboard_core::Supervision,
) -> (Arc<Hub>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let options = ConnectOptions {
        supervision,
        ..ConnectOptions::new("test")
    };
    (Hub::new(store, options), dir)
}

#[tokio::test]
async fn a_server_that_stops_answering_fails_its_health_check_fails_fast_and_recovers() {
    for era in [Era::Legacy, Era::Modern] {
        let fixture = transports::streamable_http(era).await;
        let (hub, _dir) = hub_supervised(switchboard_core::Supervision {
            health_interval: Some(Duration::from_millis(200)),
            reconnect_initial: Duration::from_millis(100),
            reconnect_max: Duration::from_millis(300),
            ..Default::default()
        })
        .await;
        let mut def = http("frozen", &fixture.url);
        def.timeouts.request = Duration::from_millis(500);
        let mut events = hub.subscribe();
        hub.start(def).await;
        eventually(&hub, "frozen", "connected", |s| {
            s.state == ConnectionState::Connected
        })
        .await;

        // The connection stays open but nothing answers: only a health check can tell.
        fixture
            .state
            .frozen
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let left_connected = tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                if let Ok(HubEvent::StateChanged {
                    from: ConnectionState::Connected,
                    error,
                    ..
                }) = events.recv().await
                {
                    break error;
                }
            }
        })
        .await
        .expect("the server is noticed down within 15 s");
        assert!(
            left_connected
                .as_deref()
                .is_some_and(|e| e.contains("health check")),
            "{era:?}: {left_connected:?}"
        );
        eventually(&hub, "frozen", "not connected", |s| {
            s.state != ConnectionState::Connected
        })
        .await;
        // While it is known down, a call is refused at once with the reason.
        match hub.upstream(&id("frozen")) {
            Err(HubError::NotConnected { reason, .. }) => {
                assert!(reason.is_some(), "{era:?}: the refusal says why")
            }
            other => panic!("{era:?}: expected NotConnected, got {other:?}"),
        }

        fixture
            .state
            .frozen
            .store(false, std::sync::atomic::Ordering::SeqCst);
        eventually(&hub, "frozen", "connected again", |s| {
            s.state == ConnectionState::Connected
        })
        .await;
        assert_eq!(echo(&hub, "frozen").await, "ok", "{era:?}");
        hub.shutdown().await;
    }
}

#[tokio::test]
async fn requests_beyond_a_servers_bounds_are_refused_as_busy_and_the_rest_complete() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let (hub, _dir) = hub_supervised(switchboard_core::Supervision {
        max_concurrent_calls: 1,
        max_queued_calls: 1,
        ..Default::default()
    })
    .await;
    hub.start(http("busy", &fixture.url)).await;
    eventually(&hub, "busy", "connected", |s| {
        s.state == ConnectionState::Connected
    })
    .await;
    let upstream = hub.upstream(&id("busy")).unwrap();

    // One runs, one waits for its slot, one finds the line full.
    let calls = (0..3).map(|_| {
        let upstream = upstream.clone();
        async move {
            upstream
                .call_tool(
                    "slow",
                    serde_json::json!({"ms": 600}).as_object().cloned(),
                    &CallContext::default(),
                )
                .await
        }
    });
    let outcomes = futures::future::join_all(calls).await;
    let done = outcomes
        .iter()
        .filter(|o| {
            o.as_ref()
                .is_ok_and(|r| r.content[0].as_text().unwrap().text == "done")
        })
        .count();
    let busy: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().err())
        .filter(|e| matches!(e, switchboard_upstream::UpstreamError::Busy { .. }))
        .map(|e| e.to_string())
        .collect();
    assert_eq!((done, busy.len()), (2, 1), "{outcomes:?}");
    assert!(busy[0].contains("busy"), "{busy:?}");
    hub.shutdown().await;
}

/// A server that restarts (its sessions forgotten) is met with a new session, by rmcp's client
/// on the next request's 404, without the hub reconnecting: its tools, resources and prompts
/// are listed again all the same, so a tool the new process has shows up, the status counts
/// follow, and the new session is subscribed to the resources the old one was.
#[tokio::test]
async fn a_restarted_server_is_listed_again() {
    let (hub, _dir) = hub().await;
    let mut fixture = transports::streamable_http(Era::Legacy).await;
    hub.start(http("restarting", &fixture.url)).await;
    eventually(&hub, "restarting", "connected", |s| {
        s.state == ConnectionState::Connected
    })
    .await;
    eventually(&hub, "restarting", "8 tools", |s| s.tools == 8).await;
    hub.upstream(&id("restarting"))
        .unwrap()
        .subscribe_resource("fixture://greeting")
        .await
        .unwrap();
    // The new process has one more tool, and says nothing about it.
    fixture
        .state
        .extra_tool
        .store(true, std::sync::atomic::Ordering::SeqCst);
    fixture.restart(Duration::from_millis(50)).await;
    // The next call meets the 404 and goes into a new session.
    for _ in 0..50 {
        if hub.upstream(&id("restarting")).is_ok() && echo(&hub, "restarting").await == "ok" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually(&hub, "restarting", "9 tools", |s| s.tools == 9).await;
    let catalog = hub.catalog(&id("restarting")).unwrap();
    assert!(catalog.tools.iter().any(|t| t.name == "late"));
    for _ in 0..100 {
        if fixture.state.subscribed.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        *fixture.state.subscribed.lock().unwrap(),
        ["fixture://greeting", "fixture://greeting"],
        "subscribed in the first session and again in the new one"
    );
    hub.shutdown().await;
}

/// A call that fails at the transport makes the hub check the server at once: with periodic
/// health checks off, the status still turns from `connected` to `reconnecting`, with the
/// reason. The server's tools stay in the merged catalog meanwhile (a call of one is refused
/// with the server's state and reason, not as an unknown tool), and the next request once it is
/// back (`upstream_soon`) reconnects it without waiting out the backoff (an hour here).
#[tokio::test]
async fn a_call_that_fails_at_the_transport_shows_the_server_down_at_once() {
    for era in [Era::Legacy, Era::Modern] {
        let mut fixture = transports::streamable_http(era).await;
        let (hub, _dir) = hub_supervised(switchboard_core::Supervision {
            health_interval: None,
            reconnect_initial: Duration::from_secs(3600),
            reconnect_max: Duration::from_secs(3600),
            ..Default::default()
        })
        .await;
        hub.start(http("flaky", &fixture.url)).await;
        eventually(&hub, "flaky", "connected", |s| {
            s.state == ConnectionState::Connected
        })
        .await;
        hub.rebuild_exposed();
        assert!(hub.exposed().tools.get("flaky__echo").is_some(), "{era:?}");

        fixture.stop();
        let failed = hub
            .upstream(&id("flaky"))
            .unwrap()
            .call_tool(
                "echo",
                serde_json::json!({"message": "ok"}).as_object().cloned(),
                &CallContext::default(),
            )
            .await;
        assert!(failed.is_err(), "{era:?}: {failed:?}");
        eventually(&hub, "flaky", "reconnecting after the failed call", |s| {
            s.state == ConnectionState::Reconnecting
                && s.error
                    .as_deref()
                    .is_some_and(|e| e.contains("did not answer a check") || e.contains("reach"))
        })
        .await;

        hub.rebuild_exposed();
        assert!(
            hub.exposed().tools.get("flaky__echo").is_some(),
            "{era:?}: the last known tools stay listed"
        );
        match hub.upstream_for_tool(&id("flaky"), "echo") {
            Err(HubError::NotConnected {
                state: ConnectionState::Reconnecting,
                reason: Some(_),
                ..
            }) => {}
            other => panic!("{era:?}: expected NotConnected with a reason, got {other:?}"),
        }

        // Back up, the server is used again by the next request, which asks for an attempt
        // and waits for it rather than for the hour's backoff.
        fixture.restart(Duration::ZERO).await;
        assert!(hub.upstream_for_tool(&id("flaky"), "echo").is_err());
        hub.upstream_soon(&id("flaky"), Some("echo"), Duration::from_secs(20))
            .await
            .unwrap_or_else(|e| panic!("{era:?}: {e}"));
        assert_eq!(echo(&hub, "flaky").await, "ok", "{era:?}");

        // A check of a healthy server answers with it still connected.
        let checked = hub
            .check_now(&id("flaky"), Duration::from_secs(20))
            .await
            .unwrap();
        assert_eq!(checked.state, ConnectionState::Connected, "{era:?}");
        hub.shutdown().await;
    }
}

/// A stateless (2026-07-28) server that restarts with another catalog keeps no session that
/// would tell: its lists are read again (at the next health check, or when its listen stream is
/// opened again), so the new tool is listed.
#[tokio::test]
async fn a_restarted_stateless_server_is_listed_again() {
    let (hub, _dir) = hub_supervised(switchboard_core::Supervision {
        health_interval: Some(Duration::from_millis(300)),
        ..Default::default()
    })
    .await;
    let mut fixture = transports::streamable_http(Era::Modern).await;
    hub.start(http("stateless", &fixture.url)).await;
    eventually(&hub, "stateless", "connected", |s| {
        s.state == ConnectionState::Connected && s.protocol_version.as_deref() == Some("2026-07-28")
    })
    .await;
    let before = hub.catalog(&id("stateless")).unwrap().tools.len();
    assert!(before > 0);
    fixture
        .state
        .extra_tool
        .store(true, std::sync::atomic::Ordering::SeqCst);
    fixture.restart(Duration::from_millis(50)).await;
    eventually(&hub, "stateless", "one more tool", |s| {
        s.tools == before + 1
    })
    .await;
    assert!(
        hub.catalog(&id("stateless"))
            .unwrap()
            .tools
            .iter()
            .any(|t| t.name == "late")
    );
    hub.shutdown().await;
}

/// With a limit on reconnect attempts, a server that keeps failing rests in `error` saying it
/// gave up, until a check asks for it again; then it connects.
#[tokio::test]
async fn a_server_past_its_reconnect_attempts_rests_in_error_until_checked() {
    let mut fixture = transports::streamable_http(Era::Modern).await;
    fixture.stop();
    let (hub, _dir) = hub_supervised(switchboard_core::Supervision {
        reconnect_initial: Duration::from_millis(50),
        reconnect_max: Duration::from_millis(100),
        max_reconnect_attempts: Some(2),
        ..Default::default()
    })
    .await;
    hub.start(http("gone", &fixture.url)).await;
    eventually(&hub, "gone", "resting in error", |s| {
        s.state == ConnectionState::Error
            && s.error
                .as_deref()
                .is_some_and(|e| e.contains("gave up after 2 attempts"))
    })
    .await;
    assert_eq!(hub.status()[0].failures, 2, "no third attempt");

    fixture.restart(Duration::ZERO).await;
    let checked = hub
        .check_now(&id("gone"), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(checked.state, ConnectionState::Connected, "{checked:?}");
    hub.shutdown().await;
}

/// A 700 ms call of `server`'s `slow` tool, under way at the server when this returns.
async fn slow_call_under_way(
    hub: &Hub,
    server: &str,
) -> tokio::task::JoinHandle<
    Result<switchboard_upstream::rmcp_model::CallToolResult, switchboard_upstream::UpstreamError>,
> {
    let upstream = hub.upstream(&id(server)).unwrap();
    let call = tokio::spawn(async move {
        upstream
            .call_tool(
                "slow",
                serde_json::json!({"ms": 700, "quiet": true})
                    .as_object()
                    .cloned(),
                &CallContext::default(),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    call
}

/// Settings that do not touch the connection (a tool turned off, a pin, the prefix) apply to
/// the running connection: a call in flight finishes, the server's state never changes, and the
/// catalog follows at once. A change of the connection (here its timeouts) starts it again,
/// once the call it is running has finished.
#[tokio::test]
async fn settings_apply_without_reconnecting_and_calls_in_flight_finish() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let (hub, _dir) = hub().await;
    hub.put_definition(http("steady", &fixture.url), false)
        .await
        .unwrap();
    eventually(&hub, "steady", "connected", |s| {
        s.state == ConnectionState::Connected
    })
    .await;
    let mut events = hub.subscribe();
    let in_flight = slow_call_under_way(&hub, "steady").await;
    hub.change_definition(&id("steady"), |def| {
        def.disabled_tools.insert("echo".into());
        def.policies.pinned.insert("add".into());
        def.prefix = Some("st".into());
        Ok(())
    })
    .await
    .unwrap();
    let catalog = hub.catalog(&id("steady")).unwrap();
    assert!(!catalog.tools.iter().any(|t| t.name == "echo"));
    assert!(catalog.disabled_tools.iter().any(|t| t.name == "echo"));
    assert!(hub.is_pinned(&id("steady"), "add"));
    hub.rebuild_exposed();
    assert!(hub.exposed().tools.get("st__add").is_some());
    assert!(hub.exposed().tools.get("st__echo").is_none());
    let finished = in_flight
        .await
        .unwrap()
        .expect("the call in flight finishes");
    assert_eq!(finished.content[0].as_text().unwrap().text, "done");

    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, HubEvent::StateChanged { .. })),
        "the connection was left alone: {seen:?}"
    );
    assert!(seen.iter().any(|e| matches!(
        e,
        HubEvent::Configured {
            change: switchboard_hub::ConfigChange::Changed,
            ..
        }
    )));

    // A change of the connection lets the call in flight finish first.
    let in_flight = slow_call_under_way(&hub, "steady").await;
    hub.change_definition(&id("steady"), |def| {
        def.timeouts.request = Duration::from_secs(5);
        Ok(())
    })
    .await
    .unwrap();
    let finished = in_flight
        .await
        .unwrap()
        .expect("drained before the restart");
    assert_eq!(finished.content[0].as_text().unwrap().text, "done");
    let mut restarted = false;
    while let Ok(event) = events.try_recv() {
        restarted |= matches!(
            event,
            HubEvent::Configured {
                change: switchboard_hub::ConfigChange::Restarted,
                ..
            }
        );
    }
    assert!(restarted, "a change of the connection starts it again");
    hub.shutdown().await;
}

/// A disabled server (never running) that is removed is announced as stopped: consoles that
/// listed it drop it, as they drop a running one.
#[tokio::test]
async fn removing_a_disabled_server_is_announced() {
    let (hub, _dir) = hub().await;
    let mut def = http("off", "http://127.0.0.1:9/mcp");
    def.enabled = false;
    hub.put_definition(def, false).await.unwrap();
    let mut events = hub.subscribe();
    hub.remove_definition(&id("off")).await.unwrap();
    let announced = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(switchboard_hub::HubEvent::Configured { server, change }) =
                events.recv().await
                && server.as_str() == "off"
            {
                return change;
            }
        }
    })
    .await
    .expect("the removal is announced");
    assert_eq!(announced, switchboard_hub::ConfigChange::Stopped);
}
