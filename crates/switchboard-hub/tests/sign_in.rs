//! The sign-in a person drives through the daemon, at the hub: started for a server, its
//! redirect completes it once, into the store, and signing out removes the tokens again.

#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::Arc;

use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::Era;
use switchboard_hub::{Hub, SignIns, server_auth_for};
use switchboard_oauth::{Authorizer, HeadlessAuthorizer, NetworkPolicy, OAuthHttp};
use switchboard_store::Store;
use switchboard_upstream::ConnectOptions;

const REDIRECT_URI: &str = "http://127.0.0.1:1/oauth/callback";

#[tokio::test(flavor = "multi_thread")]
async fn a_started_sign_in_is_completed_once_by_its_redirect_and_signing_out_undoes_it() {
    let protected = switchboard_fixtures::oauth::protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::new(
        Store::open(dir.path()).await.unwrap(),
        ConnectOptions::new("test"),
    );
    let id = ServerId::new("guarded").unwrap();
    let def = ServerDefinition::new(
        id.clone(),
        TransportSpec::from_url(&protected.url, vec![]).unwrap(),
    );
    hub.store().put_server(&def).await.unwrap();
    let signed_in = || async {
        let (_, auth) = server_auth_for(hub.store(), &id, hub.oauth())
            .await
            .unwrap();
        auth.is_signed_in().await.unwrap()
    };
    assert!(!signed_in().await);

    let sign_ins = Arc::new(SignIns::default());
    let authorization_url = hub
        .start_sign_in(
            &sign_ins,
            &id,
            REDIRECT_URI,
            &[],
            "the-starting-browsers-cookie",
        )
        .await
        .unwrap();
    // The person approves at the authorization server, which redirects their browser back.
    let url = url::Url::parse(&protected.url).unwrap();
    let browser = HeadlessAuthorizer::new(
        OAuthHttp::new(NetworkPolicy::for_server(&url, false, false)),
        REDIRECT_URI,
    );
    let callback = browser.authorize(&authorization_url).await.unwrap();
    let state = callback.state.clone().unwrap();
    let pending = hub.pending_sign_in(&state).await.unwrap().unwrap();
    assert_eq!(pending.server, id);
    assert!(pending.started_by_browser(Some("the-starting-browsers-cookie")));
    assert!(!pending.started_by_browser(Some("another-browsers-cookie")));

    let completed = hub
        .complete_sign_in(&sign_ins, &callback)
        .await
        .unwrap()
        .expect("the redirect names the pending sign-in");
    assert_eq!(completed.server, id);
    assert_eq!(completed.outcome, Ok(()));
    assert!(signed_in().await, "the tokens are in the store");
    // Claimed once: the same redirect again (replayed, or reaching another replica) finds
    // nothing waiting.
    assert!(hub.pending_sign_in(&state).await.unwrap().is_none());
    assert!(
        hub.complete_sign_in(&sign_ins, &callback)
            .await
            .unwrap()
            .is_none()
    );

    let signed_out = hub.sign_out(&id).await.unwrap();
    assert!(signed_out.signed_out);
    assert!(!signed_in().await, "the tokens are gone");
    assert!(!hub.sign_out(&id).await.unwrap().signed_out);
    hub.shutdown().await;
}
