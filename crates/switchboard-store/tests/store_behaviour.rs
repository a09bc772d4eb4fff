//! The store keeps definitions, seals secrets and caches probes across reopenings.

use switchboard_core::{DetectedTransport, NamedValue, ServerDefinition, ServerId, TransportSpec};
use switchboard_store::{CachedProbe, Store, StoreError};

fn http_server(id: &str, url: &str) -> ServerDefinition {
    ServerDefinition::new(
        ServerId::new(id).unwrap(),
        TransportSpec::from_url(
            url,
            vec![
                NamedValue::guess("Authorization", "Bearer top-secret-token"),
                NamedValue::guess("X-Team", "blue"),
            ],
        )
        .unwrap(),
    )
}

#[tokio::test]
async fn definitions_survive_reopening_and_secrets_are_sealed_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut def = http_server("notion", "https://mcp.notion.com/mcp");
    def.disabled_tools.insert("delete".into());
    {
        let store = Store::open(dir.path()).await.unwrap();
        store.add_server(&def).await.unwrap();
    }
    let store = Store::open(dir.path()).await.unwrap();
    assert_eq!(store.get_server(&def.id).await.unwrap(), Some(def.clone()));
    assert_eq!(store.list_servers().await.unwrap(), vec![def]);

    let mut raw = Vec::new();
    for name in ["switchboard.db", "switchboard.db-wal"] {
        if let Ok(bytes) = std::fs::read(dir.path().join(name)) {
            raw.extend(bytes);
        }
    }
    let raw = String::from_utf8_lossy(&raw);
    assert!(
        raw.contains("sealed:v1:"),
        "the file is the database we wrote, holding sealed values"
    );
    assert!(!raw.contains("mcp.notion.com"), "URLs are sealed");
    assert!(!raw.contains("top-secret-token"), "secret leaked to disk");
    assert!(
        !raw.contains("blue"),
        "every header value is sealed, not only guessed secrets"
    );
}

#[tokio::test]
async fn a_different_vault_key_cannot_read_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    store
        .add_server(&http_server("a", "https://a.test/mcp"))
        .await
        .unwrap();
    drop(store);
    std::fs::remove_file(dir.path().join("vault.key")).unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let err = store.list_servers().await.unwrap_err();
    assert!(matches!(err, StoreError::Vault(_)), "{err}");
    assert!(err.to_string().contains("different vault key"), "{err}");
}

#[tokio::test]
async fn crud_operations_report_missing_and_duplicate_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let def = http_server("a", "https://a.test/mcp");
    store.add_server(&def).await.unwrap();
    assert!(matches!(
        store.add_server(&def).await,
        Err(StoreError::AlreadyExists(_))
    ));
    store.set_enabled(&def.id, false).await.unwrap();
    assert!(!store.get_server(&def.id).await.unwrap().unwrap().enabled);
    let ghost = ServerId::new("ghost").unwrap();
    assert!(matches!(
        store.set_enabled(&ghost, true).await,
        Err(StoreError::NotFound(_))
    ));
    store.remove_server(&def.id).await.unwrap();
    assert!(matches!(
        store.remove_server(&def.id).await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn probe_cache_is_dropped_when_the_url_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let def = http_server("a", "https://a.test/mcp");
    store.add_server(&def).await.unwrap();
    let probe = CachedProbe {
        target: def.transport.target(),
        detected: DetectedTransport::HttpSse,
        protocol_version: Some("2024-11-05".into()),
    };
    store.put_probe(&def.id, &probe).await.unwrap();
    let url = def.transport.target();
    assert_eq!(
        store.cached_probe(&def.id, &url).await.unwrap(),
        Some(probe)
    );
    assert_eq!(
        store
            .cached_probe(&def.id, "https://other.test/mcp")
            .await
            .unwrap(),
        None,
        "a probe holds only for the URL it ran against"
    );

    let mut renamed = def.clone();
    renamed.display_name = "A".into();
    store.put_server(&renamed).await.unwrap();
    assert!(
        store.cached_probe(&def.id, &url).await.unwrap().is_some(),
        "same URL keeps the cache"
    );

    store
        .put_server(&http_server("a", "https://b.test/mcp"))
        .await
        .unwrap();
    assert_eq!(store.cached_probe(&def.id, &url).await.unwrap(), None);
    assert_eq!(
        store
            .cached_probe(&def.id, "https://b.test/mcp")
            .await
            .unwrap(),
        None,
        "changing the URL dropped the old result"
    );
}

#[tokio::test]
async fn urls_with_credentials_never_reach_the_disk_in_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let def = http_server(
        "keyed",
        "https://user:pa55word@keyed.test/mcp?api_key=k3y-s3cr3t",
    );
    store.add_server(&def).await.unwrap();
    let probe = CachedProbe {
        target: def.transport.target(),
        detected: DetectedTransport::StreamableHttp,
        protocol_version: None,
    };
    store.put_probe(&def.id, &probe).await.unwrap();
    assert_eq!(store.get_server(&def.id).await.unwrap(), Some(def.clone()));
    drop(store);

    let mut raw = Vec::new();
    for name in ["switchboard.db", "switchboard.db-wal"] {
        if let Ok(bytes) = std::fs::read(dir.path().join(name)) {
            raw.extend(bytes);
        }
    }
    let raw = String::from_utf8_lossy(&raw);
    for secret in ["pa55word", "k3y-s3cr3t", "keyed.test"] {
        assert!(!raw.contains(secret), "{secret} reached the disk");
    }
}

fn raw_database(dir: &std::path::Path) -> String {
    let mut raw = Vec::new();
    for name in ["switchboard.db", "switchboard.db-wal"] {
        if let Ok(bytes) = std::fs::read(dir.join(name)) {
            raw.extend(bytes);
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

#[tokio::test]
async fn oauth_tokens_and_client_secrets_are_sealed_survive_reopening_and_go_with_the_server() {
    use switchboard_oauth::registration::{RegistrationKind, TokenAuthMethod};
    use switchboard_oauth::{ClientRegistration, GrantKey, StoredGrant, TokenSet};

    let dir = tempfile::tempdir().unwrap();
    let mut def = http_server("linear", "https://mcp.linear.app/mcp");
    def.oauth_client = Some(switchboard_core::OAuthClient {
        client_id: "configured-client".into(),
        client_secret: Some("configured-secret-plaintext".into()),
        issuer: Some("https://auth.linear.app".into()),
        grant: switchboard_core::OAuthGrant::ClientCredentials,
        private_key_pem: Some("private-key-plaintext".into()),
        signing_algorithm: Some("ES256".into()),
        redirect_uri: Some("http://127.0.0.1:8976/oauth/callback".into()),
    });
    let key = GrantKey::for_server("linear");
    let grant = StoredGrant {
        tokens: TokenSet {
            access_token: "access-token-plaintext".into(),
            token_type: "Bearer".into(),
            refresh_token: Some("refresh-token-plaintext".into()),
            expires_at: Some(1_900_000_000),
            lifetime_secs: Some(3600),
            scope: Some("read write".into()),
        },
        issuer: "https://auth.linear.app".into(),
        token_endpoint: "https://auth.linear.app/token".into(),
        revocation_endpoint: None,
        resource: "https://mcp.linear.app/mcp".into(),
        client_id: "client-1".into(),
        requested_scopes: vec!["read".into(), "write".into()],
        dpop_key: Some(b"dpop-key-bytes".to_vec()),
    };
    let client = ClientRegistration {
        issuer: "https://auth.linear.app".into(),
        client_id: "client-1".into(),
        client_secret: Some("client-secret-plaintext".into()),
        auth_method: TokenAuthMethod::ClientSecretBasic,
        kind: RegistrationKind::Dynamic,
        redirect_uris: vec!["http://127.0.0.1:8750/oauth/callback".into()],
    };
    {
        let store = Store::open(dir.path()).await.unwrap();
        store.add_server(&def).await.unwrap();
        store.put_oauth_grant(&key, &grant).await.unwrap();
        store.put_oauth_client(&client).await.unwrap();
    }
    let raw = raw_database(dir.path());
    for secret in [
        "access-token-plaintext",
        "refresh-token-plaintext",
        "client-secret-plaintext",
    ] {
        assert!(!raw.contains(secret), "{secret} reached the disk unsealed");
    }

    let store = Store::open(dir.path()).await.unwrap();
    assert_eq!(store.get_server(&def.id).await.unwrap(), Some(def.clone()));
    assert_eq!(store.oauth_grant(&key).await.unwrap(), Some(grant));
    assert_eq!(
        store.oauth_client("https://auth.linear.app").await.unwrap(),
        Some(client)
    );
    assert_eq!(
        store.oauth_client("https://other.example").await.unwrap(),
        None
    );

    store.remove_server(&def.id).await.unwrap();
    assert_eq!(
        store.oauth_grant(&key).await.unwrap(),
        None,
        "tokens go with the server"
    );
}

/// A grant's refresh lease is held by one process at a time across connections to the database
/// (as processes have), is free again once given back or once it runs out, and is taken over at
/// once from a holder whose process no longer runs.
#[tokio::test]
async fn a_refresh_lease_is_exclusive_and_a_dead_holders_lease_is_taken_over() {
    use std::time::Duration;
    use switchboard_oauth::GrantKey;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Store::open(dir.path()).await.unwrap();
    let cli = Store::open(dir.path()).await.unwrap();
    let key = GrantKey::for_server("linear");
    let ttl = Duration::from_secs(30);
    let me = format!("{}-a", std::process::id());
    let other = format!("{}-b", std::process::id());
    assert!(daemon.try_lease_grant(&key, &me, ttl).await.unwrap());
    assert!(!cli.try_lease_grant(&key, &other, ttl).await.unwrap());
    // A live holder keeps it.
    cli.clear_dead_grant_lease(&key).await.unwrap();
    assert!(!cli.try_lease_grant(&key, &other, ttl).await.unwrap());
    daemon.release_grant_lease(&key, &me).await.unwrap();
    assert!(cli.try_lease_grant(&key, &other, ttl).await.unwrap());
    cli.release_grant_lease(&key, &other).await.unwrap();

    // Run out.
    assert!(
        daemon
            .try_lease_grant(&key, &me, Duration::ZERO)
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(cli.try_lease_grant(&key, &other, ttl).await.unwrap());
    cli.release_grant_lease(&key, &other).await.unwrap();

    // A holder whose process is gone (a child that exited, so its id names no process).
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let dead = format!("{gone}-c");
    assert!(daemon.try_lease_grant(&key, &dead, ttl).await.unwrap());
    assert!(!cli.try_lease_grant(&key, &other, ttl).await.unwrap());
    cli.clear_dead_grant_lease(&key).await.unwrap();
    assert!(cli.try_lease_grant(&key, &other, ttl).await.unwrap());
}
