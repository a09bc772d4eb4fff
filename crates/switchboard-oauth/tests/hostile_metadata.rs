//! Metadata from a hostile or broken server gets a clear error, and nothing is fetched from, or
//! handed to a browser for, a URL outside the policy.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};
use switchboard_oauth::{
    AuthSettings, BearerChallenge, ClientIdentity, GrantKey, MemoryCredentialStore, NetworkPolicy,
    OAuthError, OAuthHttp, ServerAuth,
};

/// Serves `prm` and `server_metadata` (raw bodies) on 127.0.0.1; returns the MCP URL and a
/// counter of requests to `/authorize`.
async fn hostile(prm: String, server_metadata: String) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let authorizations = Arc::new(AtomicUsize::new(0));
    let counter = authorizations.clone();
    let prm = prm.replace("{origin}", &origin);
    let server_metadata = server_metadata.replace("{origin}", &origin);
    let router = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(move || async move { ([("content-type", "application/json")], prm) }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move { ([("content-type", "application/json")], server_metadata) }),
        )
        .route(
            "/redirect-to-private",
            get(|| async {
                (StatusCode::FOUND, [("location", "http://10.0.0.1/prm")]).into_response()
            }),
        )
        .route(
            "/authorize",
            get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::FOUND }
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (format!("{origin}/mcp"), authorizations)
}

fn prm(authorization_server: &str) -> String {
    json!({"resource": "{origin}/mcp", "authorization_servers": [authorization_server]}).to_string()
}

fn server_metadata(overrides: Value) -> String {
    let mut metadata = json!({
        "issuer": "{origin}",
        "authorization_endpoint": "{origin}/authorize",
        "token_endpoint": "{origin}/token",
        "registration_endpoint": "{origin}/register",
        "code_challenge_methods_supported": ["S256"],
    });
    for (key, value) in overrides.as_object().unwrap() {
        metadata[key] = value.clone();
    }
    metadata.to_string()
}

async fn begin(url: &str, challenge: Option<&BearerChallenge>) -> OAuthError {
    let url = url::Url::parse(url).unwrap();
    let auth = ServerAuth::new(
        url.clone(),
        GrantKey::for_server("hostile"),
        OAuthHttp::new(NetworkPolicy::for_server(&url, false, false)),
        ClientIdentity::default(),
        AuthSettings {
            client: Some(switchboard_oauth::ConfiguredClient {
                client_id: "c".into(),
                ..Default::default()
            }),
            ..AuthSettings::default()
        },
        Arc::new(MemoryCredentialStore::default()),
    );
    auth.begin_sign_in("http://127.0.0.1:1/cb", challenge, &[])
        .await
        .expect_err("the sign-in must not start")
}

#[tokio::test]
async fn an_authorization_server_on_the_cloud_metadata_address_is_refused() {
    let (url, authorizations) = hostile(
        prm("http://169.254.169.254/latest"),
        server_metadata(json!({})),
    )
    .await;
    let error = begin(&url, None).await;
    assert!(matches!(error, OAuthError::UnsafeUrl { .. }), "{error}");
    assert!(error.to_string().contains("169.254.169.254"), "{error}");
    assert_eq!(authorizations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_javascript_authorization_endpoint_is_never_handed_to_a_browser() {
    let (origin_url, authorizations) = hostile(
        prm("{origin}"),
        server_metadata(json!({"authorization_endpoint": "javascript:alert(document.cookie)"})),
    )
    .await;
    let error = begin(&origin_url, None).await;
    assert!(matches!(error, OAuthError::UnsafeUrl { .. }), "{error}");
    assert_eq!(authorizations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_server_without_pkce_support_gets_no_authorization_request() {
    let (url, authorizations) = hostile(
        prm("{origin}"),
        server_metadata(json!({"code_challenge_methods_supported": null})),
    )
    .await;
    let error = begin(&url, None).await;
    assert!(
        matches!(error, OAuthError::PkceUnsupported { .. }),
        "{error}"
    );
    assert_eq!(authorizations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn oversized_and_malformed_metadata_are_clear_errors() {
    let huge = format!("{{\"resource\": \"{}\"}}", "x".repeat(1024 * 1024));
    let (url, _) = hostile(huge, server_metadata(json!({}))).await;
    let error = begin(&url, None).await;
    assert!(matches!(error, OAuthError::TooLarge { .. }), "{error}");

    let (url, _) = hostile("{not json".into(), server_metadata(json!({}))).await;
    let error = begin(&url, None).await;
    assert!(
        matches!(error, OAuthError::InvalidMetadata { .. }),
        "{error}"
    );

    let (url, _) = hostile(
        prm("{origin}"),
        server_metadata(json!({"issuer": "https://attacker.example"})),
    )
    .await;
    let error = begin(&url, None).await;
    assert!(
        matches!(error, OAuthError::IssuerMismatch { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn a_redirect_to_a_private_address_is_not_followed() {
    let (url, _) = hostile(prm("{origin}"), server_metadata(json!({}))).await;
    let origin = url::Url::parse(&url).unwrap();
    let http = OAuthHttp::new(NetworkPolicy::for_server(&origin, false, false));
    let redirecting = origin.join("/redirect-to-private").unwrap();
    let error = http
        .get(
            &redirecting,
            "protected resource metadata",
            Default::default(),
        )
        .await
        .expect_err("the redirect must not be followed");
    assert!(error.to_string().contains("10.0.0.1"), "{error}");
}
