//! Resource subscriptions: updates reach subscribers of both eras, a console and an MCP client share
//! one subscription at the server, and it is made again when its server connects again.

use std::time::Duration;

use serde_json::Value;
use switchboard_core::TransportSpec;
use switchboard_fixtures::{Era, transports};
use switchboard_upstream::CallContext;

use crate::support::{
    Daemon, add, client, client_with, connected, serving_the_conformance_fixture,
};

#[tokio::test(flavor = "multi_thread")]
async fn resource_updates_reach_subscribers_of_both_eras_from_a_modern_server() {
    let (daemon, _fixture, _dir) = serving_the_conformance_fixture().await;
    // Switchboard reaches the fixture statelessly, so its subscriptions ride on the fixture's
    // subscriptions/listen stream; downstream, a 2026-07-28 client subscribes the same way and
    // a 2024-11-05 client with resources/subscribe.
    let mut modern = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    let mut legacy =
        client(TransportSpec::from_url(&format!("{}/sse", daemon.base), vec![]).unwrap()).await;
    let uri = "test://test__watched-resource";
    modern.upstream.subscribe_resource(uri).await.unwrap();
    legacy.upstream.subscribe_resource(uri).await.unwrap();
    let caller = modern.upstream.clone();

    for (era, connection) in [("2026-07-28", &mut modern), ("2024-11-05", &mut legacy)] {
        // A subscription is answered once it is in place all the way to the fixture (its listen
        // stream acknowledged with the resource in its filter), so one change made right after
        // it is heard.
        caller
            .call_tool(
                "test__test_update_watched_resource",
                None,
                &CallContext::default(),
            )
            .await
            .unwrap();
        let heard = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match connection.events.recv().await {
                    Some(switchboard_upstream::UpstreamEvent::ResourceUpdated(updated)) => {
                        break updated;
                    }
                    Some(_) => continue,
                    None => break String::new(),
                }
            }
        })
        .await;
        assert_eq!(
            heard.ok().as_deref(),
            Some(uri),
            "{era}: the one update made right after subscribing is heard, under the exposed URI"
        );
    }

    // After unsubscribing, no more updates reach the modern client.
    modern.upstream.unsubscribe_resource(uri).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    while modern.events.try_recv().is_ok() {}
    modern
        .upstream
        .call_tool(
            "test__test_update_watched_resource",
            None,
            &CallContext::default(),
        )
        .await
        .unwrap();
    let late = tokio::time::timeout(Duration::from_millis(500), async {
        loop {
            if let Some(switchboard_upstream::UpstreamEvent::ResourceUpdated(u)) =
                modern.events.recv().await
            {
                break u;
            }
        }
    })
    .await;
    assert!(late.is_err(), "an update after unsubscribing: {late:?}");
}

/// A console following a resource (`GET /api/servers/{id}/resource-updates`) and an MCP client
/// subscribing to it share one subscription at the server: it is subscribed once, and
/// unsubscribed only when the last of them lets go, here the console closing its stream.
#[tokio::test(flavor = "multi_thread")]
async fn a_console_and_an_mcp_client_share_one_subscription_at_the_server() {
    let fixture = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["fixture", &fixture.url]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let subscribed = || fixture.state.subscribed.lock().unwrap().clone();
    let unsubscribed = || fixture.state.unsubscribed.lock().unwrap().clone();
    let until = async |what: &dyn Fn() -> bool| {
        for _ in 0..200 {
            if what() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("never came to pass");
    };

    let follow = reqwest::get(format!(
        "{}/api/servers/fixture/resource-updates?uri=fixture://greeting",
        daemon.base
    ))
    .await
    .unwrap();
    assert_eq!(follow.status(), 200);
    until(&|| subscribed() == ["fixture://greeting"]).await;

    // A client with a session: its resources/subscribe and resources/unsubscribe are answered
    // once the hub has counted them, so each step below has happened at the daemon before the
    // next. (A 2026-07-28 client's subscription is counted only after its listen stream is
    // acknowledged, and let go whenever the daemon sees that stream close: the console could
    // let go before either, and be taken for the last subscriber.)
    let connection = client_with(&daemon.mcp_url(), true, vec![]).await;
    let exposed = "fixture://fixture__greeting";
    connection
        .upstream
        .subscribe_resource(exposed)
        .await
        .unwrap();
    connection
        .upstream
        .unsubscribe_resource(exposed)
        .await
        .unwrap();
    assert_eq!(subscribed(), ["fixture://greeting"], "subscribed once");
    assert!(unsubscribed().is_empty(), "the console still follows it");

    drop(follow);
    until(&|| unsubscribed() == ["fixture://greeting"]).await;
    assert_eq!(subscribed(), ["fixture://greeting"]);
}

#[tokio::test]
async fn a_subscription_is_made_again_when_its_server_connects_again() {
    let mut fixture = transports::streamable_http(Era::Legacy).await;
    let state = fixture.state.clone();
    let dir = tempfile::tempdir().unwrap();
    add(dir.path(), &["fixture", &fixture.url]);
    let (daemon, _) = Daemon::start(dir.path(), 1).await;
    let subscribed = || state.subscribed.lock().unwrap().clone();
    let connection = client(TransportSpec::from_url(&daemon.mcp_url(), vec![]).unwrap()).await;
    connection
        .upstream
        .subscribe_resource("fixture://fixture__greeting")
        .await
        .unwrap();
    // A 2026-07-28 client: its listen stream is acknowledged as the subscription is being made.
    daemon
        .wait_for(|_| subscribed() == ["fixture://greeting"])
        .await;

    // The server goes away (a check finds it gone, and the connection is made anew) and
    // comes back remembering nothing.
    let check = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let checked: Value = reqwest::Client::new()
            .post(format!("{}/api/servers/fixture/check", daemon.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_ne!(checked["status"]["state"], "connected", "{checked}");
    };
    tokio::join!(fixture.restart(Duration::from_secs(2)), check);
    daemon
        .wait_for(|status| connected(status) == 1 && subscribed().len() == 2)
        .await;
    assert_eq!(subscribed(), ["fixture://greeting", "fixture://greeting"]);

    // The client's subscription is its own still: its end ends the new one.
    connection
        .upstream
        .unsubscribe_resource("fixture://fixture__greeting")
        .await
        .unwrap();
    daemon
        .wait_for(|_| *state.unsubscribed.lock().unwrap() == ["fixture://greeting"])
        .await;
}
