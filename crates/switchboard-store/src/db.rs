//! The two database engines the store runs on, behind one enum.
//!
//! SQLite is the embedded default: one file in the data directory, nothing to set up. PostgreSQL
//! is for several replicas sharing one state. Every query is written once, in SQL both engines
//! take (`$N` parameters, `ON CONFLICT` upserts), and `on_db!` compiles it for
//! each engine's typed pool: no runtime translation layer (sqlx's `Any` driver would convert every
//! value and lose each engine's own options, such as SQLite's pragmas and PostgreSQL's `LISTEN`).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::StoreError;

/// Where a store lives.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// An SQLite database file (the embedded default: `switchboard.db` in the data directory).
    Sqlite(std::path::PathBuf),
    /// A PostgreSQL database, by its `postgres://` URL.
    Postgres(String),
}

impl StoreLocation {
    /// Reads `--store`: a `postgres://` or `postgresql://` URL, or `sqlite://` and a file path.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            // Checked now, so a mistyped URL is reported before anything starts.
            PgConnectOptions::from_str(text).map_err(|e| StoreError::Location(e.to_string()))?;
            Ok(Self::Postgres(text.to_owned()))
        } else if let Some(path) = text.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(StoreError::Location("sqlite:// needs a file path".into()));
            }
            Ok(Self::Sqlite(path.into()))
        } else {
            Err(StoreError::Location(
                "expected a postgres:// URL or sqlite://<file>".into(),
            ))
        }
    }
}

/// Never prints a PostgreSQL URL's password.
impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            Self::Postgres(url) => match url::Url::parse(url) {
                Ok(mut url) => {
                    if url.password().is_some() {
                        let _ = url.set_password(Some("********"));
                    }
                    write!(f, "{url}")
                }
                Err(_) => f.write_str("postgres://(unreadable URL)"),
            },
        }
    }
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A pool of one engine's connections.
#[derive(Debug, Clone)]
pub(crate) enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the store's pool, whichever engine it is: the body is
/// compiled once per engine, so each runs the same SQL through its own typed driver.
macro_rules! on_db {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::db::Db::Sqlite($pool) => $body,
            $crate::db::Db::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_db;

/// Makes `path` (a file, or a directory when `mode` has execute bits) its owner's alone: made
/// with `mode` when it does not exist yet (files), tightened to it when it is looser. Where that
/// cannot be done, says so and goes on.
pub(crate) fn keep_private(path: &Path, mode: u32) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let is_dir = mode & 0o100 != 0;
        if !is_dir && !path.exists() {
            let made = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(path);
            if let Err(error) = made
                && error.kind() != std::io::ErrorKind::AlreadyExists
            {
                tracing::warn!(path = %path.display(), %error, "cannot create the file private to its owner");
            }
            return;
        }
        let Ok(metadata) = std::fs::metadata(path) else {
            return;
        };
        if metadata.permissions().mode() & 0o077 != 0
            && let Err(error) =
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        {
            tracing::warn!(
                path = %path.display(),
                %error,
                "others may read this file or directory, and its permissions cannot be narrowed: run chmod {:o} on it",
                mode
            );
        }
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
}

/// How long a PostgreSQL connection may take to open before the store gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Db {
    /// Opens the SQLite file at `path`, creating it, and applies pending migrations.
    pub(crate) async fn open_sqlite(path: &Path) -> Result<Self, StoreError> {
        // The file holds every sealed secret: its owner's alone, from its first byte (SQLite
        // gives its journal files the main file's permissions).
        keep_private(path, 0o600);
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // What is deleted or overwritten is zeroed, not left in free pages: an old
            // ciphertext does not outlive a key rotation in the file.
            .pragma("secure_delete", "ON")
            // Every commit is durable when it returns: a rotated refresh token must be on disk
            // before it is used.
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        for journal in ["-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(journal);
            keep_private(Path::new(&name), 0o600);
        }
        Ok(Self::Sqlite(pool))
    }

    /// Connects to the PostgreSQL database at `url` and applies pending migrations (sqlx takes
    /// an advisory lock for that, so replicas starting together migrate once).
    pub(crate) async fn open_postgres(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)?.application_name("switchboard");
        // One plain connection first: the pool retries until its timeout and then reports only
        // that it timed out, where this says why (refused, no such database, bad password).
        let first = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)??;
        first.close().await?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self::Postgres(pool))
    }

    pub(crate) async fn close(&self) {
        on_db!(self, pool => pool.close().await);
    }
}

/// The PostgreSQL channel every replica listens on; the migrations' triggers name the changed
/// table there.
pub(crate) const CHANGES_CHANNEL: &str = "switchboard_changes";
