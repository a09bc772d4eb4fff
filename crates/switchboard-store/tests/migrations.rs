//! Migrations are append-only: a store migrated by an earlier release keeps opening. A migration
//! changed after it was released would make sqlx refuse every store that applied it ("previously
//! applied but has been modified"), and a column added by editing it would never reach them.

use std::path::Path;

use sha2::Digest;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use switchboard_store::{DATABASE_FILE, Store};

/// The released migrations' SHA-256 (`sha256sum` lines, paths under `migrations/`). A new
/// migration is added to it in the commit that adds it; a line never changes.
const RELEASED: &str = include_str!("../migrations/released.sha256");

fn migrations_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
}

#[test]
fn released_migrations_never_change_and_every_migration_is_recorded() {
    let mut recorded = Vec::new();
    for line in RELEASED.lines().filter(|line| !line.trim().is_empty()) {
        let (digest, path) = line
            .split_once("  ")
            .unwrap_or_else(|| panic!("a sha256sum line: {line}"));
        let text = std::fs::read(migrations_dir().join(path))
            .unwrap_or_else(|e| panic!("released migration {path} is gone: {e}"));
        let now: String = sha2::Sha256::digest(&text)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        assert_eq!(
            now, digest,
            "{path} was released and has changed: write a new migration instead"
        );
        recorded.push(path.to_owned());
    }
    for engine in ["sqlite", "postgres"] {
        for entry in std::fs::read_dir(migrations_dir().join(engine)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let path = format!("{engine}/{name}");
            assert!(
                recorded.contains(&path),
                "{path} is not in migrations/released.sha256: add its sha256sum line"
            );
        }
    }
}

/// A store made by the release before the sign-in outcomes (migrations up to 0015) opens with
/// this one, which adds them.
#[tokio::test]
async fn a_store_from_before_the_sign_in_outcomes_opens_and_gains_them() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join(DATABASE_FILE))
        .create_if_missing(true);
    let pool = SqlitePoolOptions::new()
        .connect_with(options)
        .await
        .unwrap();
    let mut earlier = sqlx::migrate!("./migrations/sqlite");
    earlier.migrations = earlier
        .migrations
        .iter()
        .filter(|migration| migration.version <= 15)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    earlier.run(&pool).await.unwrap();
    pool.close().await;

    let store = Store::open(dir.path()).await.unwrap();
    assert!(
        store
            .claim_pending_sign_in("no such state")
            .await
            .unwrap()
            .is_none(),
        "claiming reads the new column"
    );
    assert_eq!(
        store
            .pending_sign_in_outcome("no such state")
            .await
            .unwrap(),
        switchboard_store::SignInOutcome::Gone
    );
}

/// A store made before users were marked as the identity provider's (migrations up to 0017):
/// a user with an API key was made in Switchboard and keeps refusing the provider's tokens
/// naming them; a user without one was recorded from those tokens and keeps taking them.
#[tokio::test]
async fn users_from_before_identity_provider_links_keep_who_they_were() {
    use switchboard_core::{Role, TenantId, UserId};
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join(DATABASE_FILE))
        .create_if_missing(true);
    let pool = SqlitePoolOptions::new()
        .connect_with(options)
        .await
        .unwrap();
    let mut earlier = sqlx::migrate!("./migrations/sqlite");
    earlier.migrations = earlier
        .migrations
        .iter()
        .filter(|migration| migration.version <= 17)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    earlier.run(&pool).await.unwrap();
    for statement in [
        "INSERT INTO tenants (id, display_name, created_at_ms) VALUES ('acme', 'Acme', 0)",
        "INSERT INTO users (tenant, id, display_name, role, created_at_ms)
         VALUES ('acme', 'made-here', '', 'member', 0), ('acme', 'from-tokens', '', 'member', 0)",
        "INSERT INTO api_keys (digest, tenant, user_id, name, created_at_ms)
         VALUES ('d1', 'acme', 'made-here', 'laptop', 0)",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    pool.close().await;

    let store = Store::open(dir.path()).await.unwrap();
    let acme = TenantId::new("acme").unwrap();
    let made_here = store
        .ensure_user(&acme, &UserId::new("made-here").unwrap(), Role::Member)
        .await;
    assert!(
        matches!(made_here, Err(switchboard_store::StoreError::Forbidden(_))),
        "{made_here:?}"
    );
    store
        .ensure_user(&acme, &UserId::new("from-tokens").unwrap(), Role::Member)
        .await
        .unwrap();
}
