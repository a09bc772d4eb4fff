//! The hub keeps each server in its own task: failures stay put, crashes reconnect, changes
//! refresh the catalog, and every state change is published.

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
    assert_eq!(by_id("good").tools, 7);
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
    eventually(&hub, "changing", "8 tools", |s| s.tools == 8).await;
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
    assert_eq!(catalog.tools.len(), 6);
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
