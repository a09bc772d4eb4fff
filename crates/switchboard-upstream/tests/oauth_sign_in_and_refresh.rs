//! Signing in to an OAuth-protected server and staying signed in, against the in-repo mock
//! authorization server (the conformance suite has no refresh scenarios): the headless flow,
//! tokens surviving a restart, proactive refresh, refresh on 401, rotation, one refresh for many
//! concurrent calls, `invalid_grant` and step-up. A daemon killed during a refresh is
//! `crates/switchboard/tests/oauth_end_to_end.rs`.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_fixtures::Era;
use switchboard_fixtures::oauth::{OAuthFixture, protected};
use switchboard_oauth::{
    AuthSettings, ClientIdentity, GrantKey, HeadlessAuthorizer, NetworkPolicy, OAuthHttp,
    ServerAuth,
};
use switchboard_store::Store;
use switchboard_upstream::{CallContext, ConnectOptions, Connection, UpstreamError, connect};

const REDIRECT: &str = "http://127.0.0.1:1/oauth/callback";

fn definition(url: &str) -> ServerDefinition {
    let mut def = ServerDefinition::new(
        ServerId::new("protected").unwrap(),
        TransportSpec::from_url(url, vec![]).unwrap(),
    );
    def.timeouts.request = Duration::from_secs(10);
    def
}

/// Signing-in state over `store`; with `headless`, a 401 runs the whole flow unattended.
fn server_auth(fixture: &OAuthFixture, store: &Store, headless: bool) -> Arc<ServerAuth> {
    let url = url::Url::parse(&fixture.url).unwrap();
    let http = OAuthHttp::new(NetworkPolicy::for_server(&url, false, false));
    let auth = ServerAuth::new(
        url,
        GrantKey::for_server("protected"),
        http.clone(),
        ClientIdentity::default(),
        AuthSettings::default(),
        Arc::new(store.clone()),
    );
    Arc::new(if headless {
        auth.with_authorizer(Arc::new(HeadlessAuthorizer::new(http, REDIRECT)))
    } else {
        auth
    })
}

async fn connect_with(
    fixture: &OAuthFixture,
    auth: Arc<ServerAuth>,
) -> Result<Connection, UpstreamError> {
    let mut options = ConnectOptions::new("test");
    options.auth = Some(auth);
    connect(&definition(&fixture.url), None, &options).await
}

/// Signs in with the headless authorizer and closes the session: tokens are in `store`.
async fn sign_in_and_close(fixture: &OAuthFixture, store: &Store) {
    connect_with(fixture, server_auth(fixture, store, true))
        .await
        .unwrap()
        .session
        .close()
        .await;
}

async fn echo(connection: &Connection) -> Result<String, UpstreamError> {
    let result = connection
        .upstream
        .call_tool(
            "echo",
            serde_json::json!({"message": "hi"}).as_object().cloned(),
            &CallContext::default(),
        )
        .await?;
    Ok(result.content[0].as_text().unwrap().text.clone())
}

async fn store_in(dir: &tempfile::TempDir, fixture: &OAuthFixture) -> Store {
    let store = Store::open(dir.path()).await.unwrap();
    store.put_server(&definition(&fixture.url)).await.unwrap();
    store
}

async fn stored_refresh_token(store: &Store) -> String {
    store
        .oauth_grant(&GrantKey::for_server("protected"))
        .await
        .unwrap()
        .expect("a stored grant")
        .tokens
        .refresh_token
        .expect("a refresh token")
}

#[tokio::test]
async fn a_401_signs_in_and_the_tokens_survive_a_restart() {
    for era in [Era::Legacy, Era::Modern] {
        let fixture = protected(era).await;
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir, &fixture).await;

        let connection = connect_with(&fixture, server_auth(&fixture, &store, true))
            .await
            .unwrap();
        assert_eq!(echo(&connection).await.unwrap(), "hi");
        connection.session.close().await;
        let authorizations = fixture.auth.authorizations.lock().unwrap().clone();
        assert_eq!(authorizations.len(), 1, "one sign-in");
        assert_eq!(
            authorizations[0].as_deref(),
            Some("tools offline_access"),
            "scopes from the resource metadata, plus offline_access the server lists"
        );
        assert_eq!(fixture.auth.registrations.load(Ordering::SeqCst), 1);

        // A new process over the same store: no authorizer, so a new sign-in is impossible;
        // the stored tokens must do.
        drop(store);
        let store = Store::open(dir.path()).await.unwrap();
        let connection = connect_with(&fixture, server_auth(&fixture, &store, false))
            .await
            .unwrap();
        assert_eq!(echo(&connection).await.unwrap(), "hi");
        connection.session.close().await;
        assert_eq!(
            fixture.auth.authorizations.lock().unwrap().len(),
            1,
            "no second sign-in"
        );
    }
}

#[tokio::test]
async fn without_tokens_and_without_a_person_the_error_says_to_sign_in() {
    let fixture = protected(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir, &fixture).await;
    let error = connect_with(&fixture, server_auth(&fixture, &store, false))
        .await
        .err()
        .expect("no tokens");
    assert!(matches!(error, UpstreamError::AuthRequired(_)), "{error}");
    assert!(
        error.to_string().contains("switchboard login protected"),
        "{error}"
    );
}

#[tokio::test]
async fn a_token_about_to_expire_is_refreshed_before_it_is_used() {
    let fixture = protected(Era::Modern).await;
    // One-second tokens: once one is past its lifetime (less its margin, a tenth of it), the
    // next request refreshes first.
    fixture.auth.access_ttl_secs.store(1, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir, &fixture).await;
    let connection = connect_with(&fixture, server_auth(&fixture, &store, true))
        .await
        .unwrap();
    let before = stored_refresh_token(&store).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let refreshes = fixture.auth.refreshes.load(Ordering::SeqCst);
    let unauthorized = fixture.auth.unauthorized.load(Ordering::SeqCst);
    assert_eq!(echo(&connection).await.unwrap(), "hi");
    assert!(
        fixture.auth.refreshes.load(Ordering::SeqCst) > refreshes,
        "refreshed ahead of use"
    );
    assert_eq!(
        fixture.auth.unauthorized.load(Ordering::SeqCst),
        unauthorized,
        "the server never had to refuse a token"
    );
    let after = stored_refresh_token(&store).await;
    assert_ne!(before, after, "the rotated refresh token is stored");
    assert!(!fixture.auth.honours_refresh_token(&before));
    assert!(fixture.auth.honours_refresh_token(&after));
    connection.session.close().await;
}

#[tokio::test]
async fn a_401_refreshes_once_even_for_many_concurrent_calls() {
    let fixture = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir, &fixture).await;
    let connection = connect_with(&fixture, server_auth(&fixture, &store, false))
        .await
        .err()
        .map(|_| ());
    assert!(connection.is_some(), "no tokens yet");
    let connection = connect_with(&fixture, server_auth(&fixture, &store, true))
        .await
        .unwrap();
    let before = stored_refresh_token(&store).await;

    fixture.auth.expire_access_tokens();
    let calls = (0..8).map(|_| echo(&connection));
    for result in futures::future::join_all(calls).await {
        assert_eq!(result.unwrap(), "hi");
    }
    assert_eq!(
        fixture.auth.refreshes.load(Ordering::SeqCst),
        1,
        "one refresh for all calls"
    );
    assert_eq!(
        fixture.auth.authorizations.lock().unwrap().len(),
        1,
        "no new sign-in"
    );
    assert_ne!(stored_refresh_token(&store).await, before);
    connection.session.close().await;
}

#[tokio::test]
async fn a_refused_refresh_token_is_forgotten_and_the_error_says_to_sign_in_again() {
    let fixture = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir, &fixture).await;
    sign_in_and_close(&fixture, &store).await;

    fixture.auth.expire_access_tokens();
    fixture.auth.revoke_refresh_tokens();
    let error = connect_with(&fixture, server_auth(&fixture, &store, false))
        .await
        .err()
        .expect("the refresh token is dead");
    assert!(matches!(error, UpstreamError::AuthRequired(_)), "{error}");
    assert!(error.to_string().contains("sign in again"), "{error}");
    assert_eq!(
        store
            .oauth_grant(&GrantKey::for_server("protected"))
            .await
            .unwrap(),
        None,
        "dead tokens are deleted"
    );
}

/// A refresh refused with `invalid_client` (the server dropped Switchboard's dynamic
/// registration) asks for a new sign-in, which registers again and works.
#[tokio::test]
async fn a_client_the_server_forgot_registers_again_at_the_next_sign_in() {
    let fixture = protected(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir, &fixture).await;
    sign_in_and_close(&fixture, &store).await;
    assert_eq!(fixture.auth.registrations.load(Ordering::SeqCst), 1);
    let connection = connect_with(&fixture, server_auth(&fixture, &store, false))
        .await
        .unwrap();
    fixture.auth.forget_registered_clients();
    fixture.auth.expire_access_tokens();
    let refused = echo(&connection).await.unwrap_err().to_string();
    assert!(
        refused.contains("no longer knows Switchboard's client")
            && refused.contains("switchboard login protected"),
        "{refused}"
    );
    connection.session.close().await;

    sign_in_and_close(&fixture, &store).await;
    assert_eq!(
        fixture.auth.registrations.load(Ordering::SeqCst),
        2,
        "registered anew"
    );
    let connection = connect_with(&fixture, server_auth(&fixture, &store, false))
        .await
        .unwrap();
    assert_eq!(echo(&connection).await.unwrap(), "hi");
    connection.session.close().await;
}

#[tokio::test]
async fn insufficient_scope_re_authorizes_with_the_union_of_scopes() {
    let fixture = protected(Era::Legacy).await;
    *fixture.auth.tools_call_scope.lock().unwrap() = "admin".into();
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir, &fixture).await;
    let connection = connect_with(&fixture, server_auth(&fixture, &store, true))
        .await
        .unwrap();
    assert_eq!(echo(&connection).await.unwrap(), "hi");
    let authorizations = fixture.auth.authorizations.lock().unwrap().clone();
    assert_eq!(
        authorizations,
        [
            Some("tools offline_access".to_owned()),
            Some("tools offline_access admin".to_owned())
        ]
    );
    connection.session.close().await;
}

#[tokio::test]
async fn without_a_person_a_step_up_is_reported_not_attempted() {
    let fixture = protected(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir, &fixture).await;
    sign_in_and_close(&fixture, &store).await;
    *fixture.auth.tools_call_scope.lock().unwrap() = "admin".into();
    let connection = connect_with(&fixture, server_auth(&fixture, &store, false))
        .await
        .unwrap();
    let error = echo(&connection).await.expect_err("needs more scope");
    assert!(error.to_string().contains("admin"), "{error}");
    assert_eq!(fixture.auth.authorizations.lock().unwrap().len(), 1);
    connection.session.close().await;
}

/// Signs in, then connects twice as two processes sharing the store would (each with its own
/// connection to the database), against a server that revokes the whole grant when a retired
/// refresh token is presented; every access token is expired. (Legacy sessions send nothing in
/// the background, so the order of the refreshes is the test's.)
async fn two_processes_signed_in(
    fixture: &OAuthFixture,
) -> (tempfile::TempDir, Store, Connection, Connection) {
    fixture
        .auth
        .revoke_all_on_reuse
        .store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir, fixture).await;
    sign_in_and_close(fixture, &store).await;
    let other_process = Store::open(dir.path()).await.unwrap();
    let first = connect_with(fixture, server_auth(fixture, &store, false))
        .await
        .unwrap();
    let second = connect_with(fixture, server_auth(fixture, &other_process, false))
        .await
        .unwrap();
    fixture.auth.expire_access_tokens();
    (dir, store, first, second)
}

/// Two processes share one store (the daemon and a CLI command): when both find their token
/// expired, only one refreshes; the other reads the rotated tokens from the store instead of
/// presenting the refresh token the first one retired, which a server that detects reuse (as
/// this one does) answers by revoking the whole grant.
#[tokio::test]
async fn processes_sharing_the_store_never_present_a_retired_refresh_token() {
    let fixture = protected(Era::Legacy).await;
    let (_dir, store, first, second) = two_processes_signed_in(&fixture).await;
    // The first refreshes and uses the new token, so the server retires the old refresh token.
    let old = stored_refresh_token(&store).await;
    assert_eq!(echo(&first).await.unwrap(), "hi");
    assert!(
        !fixture.auth.honours_refresh_token(&old),
        "retired at the server"
    );
    // The second still holds the retired one, and takes the stored tokens instead.
    assert_eq!(echo(&second).await.unwrap(), "hi");
    assert_eq!(
        fixture.auth.refreshes.load(Ordering::SeqCst),
        1,
        "one refresh between them"
    );
    // Nothing was revoked: both keep working.
    assert_eq!(echo(&first).await.unwrap(), "hi");
    assert_eq!(echo(&second).await.unwrap(), "hi");
    first.session.close().await;
    second.session.close().await;
}

/// Two processes refreshing at the same moment take turns: one refreshes, the other waits for
/// the lease and then finds the new tokens in the store.
#[tokio::test]
async fn simultaneous_refreshes_in_two_processes_make_one_refresh() {
    let fixture = protected(Era::Legacy).await;
    // A slow token endpoint keeps the first refresh going while the second asks.
    fixture.auth.refresh_delay_ms.store(300, Ordering::SeqCst);
    let (_dir, _store, first, second) = two_processes_signed_in(&fixture).await;
    let (a, b) = tokio::join!(echo(&first), echo(&second));
    assert_eq!((a.unwrap(), b.unwrap()), ("hi".into(), "hi".into()));
    assert_eq!(fixture.auth.refreshes.load(Ordering::SeqCst), 1);
    first.session.close().await;
    second.session.close().await;
}
