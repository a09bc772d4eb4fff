//! Switchboard's persistence.
//!
//! Server definitions and probe results live in an embedded SQLite database (WAL mode, so the CLI
//! and a running daemon can share it). Schema changes are versioned migrations under
//! `migrations/`, embedded in the binary and applied on open. Every value marked secret is sealed by
//! the [`vault`] before it is written, and opened again on read; the database never holds a secret
//! in plain text.
//!
//! PostgreSQL, for replicas that share state, will be a second backend behind this same API.

mod activations;
pub mod credentials;
pub mod vault;
pub mod vectors;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use switchboard_core::{DetectedTransport, ServerDefinition, ServerId, Timeouts, TransportSpec};

pub use vault::{Vault, VaultError};

/// File name of the database inside the data directory.
pub const DATABASE_FILE: &str = "switchboard.db";
/// File name of the vault key inside the data directory.
pub const KEY_FILE: &str = "vault.key";

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data directory could not be created.
    #[error("cannot create data directory {path}: {error}")]
    DataDir {
        /// The directory.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The database could not be opened or queried.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A migration failed.
    #[error("cannot migrate the database schema: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// A secret could not be sealed or opened.
    #[error(transparent)]
    Vault(#[from] VaultError),
    /// A stored row could not be decoded.
    #[error("stored data for server '{server}' is corrupt: {detail}")]
    Corrupt {
        /// The server the row belongs to.
        server: String,
        /// What is wrong.
        detail: String,
    },
    /// A server with this id already exists.
    #[error("a server with id '{0}' already exists")]
    AlreadyExists(ServerId),
    /// No server has this id.
    #[error("no server with id '{0}'")]
    NotFound(ServerId),
}

/// A cached era-probe result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedProbe {
    /// The URL the probe ran against; the cache holds only while the server's URL is unchanged.
    /// Only its SHA-256 digest is stored.
    pub target: String,
    /// What the probe found.
    pub detected: DetectedTransport,
    /// The protocol version negotiated at the time, if known.
    pub protocol_version: Option<String>,
}

/// The embedded store.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) pool: SqlitePool,
    pub(crate) vault: std::sync::Arc<Vault>,
}

impl Store {
    /// Closes every connection, so the database and its write-ahead log are complete on disk.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Opens (creating if needed) the store in `data_dir`: the directory (mode 0700), the vault key
    /// and the database, then applies pending migrations.
    pub async fn open(data_dir: &Path) -> Result<Self, StoreError> {
        create_private_dir(data_dir)?;
        let vault = Vault::load_or_create(&data_dir.join(KEY_FILE))?;
        Self::open_with_vault(&data_dir.join(DATABASE_FILE), vault).await
    }

    /// Opens the database at `path` with an explicit vault.
    pub async fn open_with_vault(path: &Path, vault: Vault) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // Every commit is durable when it returns: a rotated refresh token must be on disk
            // before it is used.
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(std::time::Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Self {
            pool,
            vault: std::sync::Arc::new(vault),
        })
    }

    /// Adds a new server; fails if the id is taken.
    pub async fn add_server(&self, def: &ServerDefinition) -> Result<(), StoreError> {
        if self.get_server(&def.id).await?.is_some() {
            return Err(StoreError::AlreadyExists(def.id.clone()));
        }
        self.put_server(def).await
    }

    /// Inserts or replaces a server. A changed transport invalidates the cached probe.
    pub async fn put_server(&self, def: &ServerDefinition) -> Result<(), StoreError> {
        let now = now_ms();
        let transport = self.seal_transport(def)?;
        let timeouts = serde_json::to_string(&def.timeouts).map_err(|e| corrupt(&def.id, e))?;
        let disabled =
            serde_json::to_string(&def.disabled_tools).map_err(|e| corrupt(&def.id, e))?;
        let task_modes = serde_json::to_string(&def.task_modes).map_err(|e| corrupt(&def.id, e))?;
        let policies = serde_json::to_string(&def.policies).map_err(|e| corrupt(&def.id, e))?;
        let oauth_client = match &def.oauth_client {
            Some(client) => {
                let plain = serde_json::to_string(client).map_err(|e| corrupt(&def.id, e))?;
                Some(self.vault.seal(&oauth_client_context(&def.id), &plain))
            }
            None => None,
        };
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO servers (id, display_name, description, transport_json, timeouts_json,
                                  enabled, disabled_tools_json, created_at_ms, updated_at_ms,
                                  oauth_client_sealed, exposed_prefix, task_modes_json,
                                  tool_policies_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11, ?12)
             ON CONFLICT(id) DO UPDATE SET display_name = ?2, description = ?3,
                transport_json = ?4, timeouts_json = ?5, enabled = ?6,
                disabled_tools_json = ?7, updated_at_ms = ?8, oauth_client_sealed = ?9,
                exposed_prefix = ?10, task_modes_json = ?11, tool_policies_json = ?12",
        )
        .bind(def.id.as_str())
        .bind(&def.display_name)
        .bind(&def.description)
        .bind(transport)
        .bind(timeouts)
        .bind(def.enabled)
        .bind(disabled)
        .bind(now)
        .bind(oauth_client)
        .bind(def.prefix.as_deref())
        .bind(task_modes)
        .bind(policies)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM server_probes WHERE server_id = ?1 AND target_digest <> ?2")
            .bind(def.id.as_str())
            .bind(target_digest(&def.transport.target()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Stores the servers an import found: each one new, or (with `replace`) every one, a
    /// replaced one keeping what a file cannot say
    /// ([`ServerDefinition::keep_unwritten_settings`]). Returns those stored, and the ids
    /// skipped because they are taken.
    pub async fn import_servers(
        &self,
        servers: Vec<ServerDefinition>,
        replace: bool,
    ) -> Result<(Vec<ServerDefinition>, Vec<ServerId>), StoreError> {
        let (mut imported, mut taken) = (Vec::new(), Vec::new());
        for mut def in servers {
            match self.get_server(&def.id).await? {
                Some(_) if !replace => {
                    taken.push(def.id);
                    continue;
                }
                Some(stored) => def.keep_unwritten_settings(&stored),
                None => {}
            }
            self.put_server(&def).await?;
            imported.push(def);
        }
        Ok((imported, taken))
    }

    /// One server by id.
    pub async fn get_server(&self, id: &ServerId) -> Result<Option<ServerDefinition>, StoreError> {
        let row = sqlx::query(SELECT_SERVER_COLUMNS_WHERE_ID)
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| self.decode_server(&row)).transpose()
    }

    /// Every server, ordered by id.
    pub async fn list_servers(&self) -> Result<Vec<ServerDefinition>, StoreError> {
        let rows = sqlx::query(SELECT_SERVER_COLUMNS_ORDERED)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| self.decode_server(row)).collect()
    }

    /// A value that changes whenever a server is added, changed or removed (their number and
    /// the sum of their change times), read without opening any sealed value: a daemon checks
    /// it often, and lists the servers only when it moved.
    pub async fn servers_fingerprint(&self) -> Result<(i64, i64), StoreError> {
        let (count, sum): (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), SUM(updated_at_ms) FROM servers")
                .fetch_one(&self.pool)
                .await?;
        Ok((count, sum.unwrap_or(0)))
    }

    /// Removes a server and everything stored for it.
    pub async fn remove_server(&self, id: &ServerId) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM servers WHERE id = ?1")
            .bind(id.as_str())
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(id.clone()));
        }
        Ok(())
    }

    /// Enables or disables a server.
    pub async fn set_enabled(&self, id: &ServerId, enabled: bool) -> Result<(), StoreError> {
        let done = sqlx::query("UPDATE servers SET enabled = ?2, updated_at_ms = ?3 WHERE id = ?1")
            .bind(id.as_str())
            .bind(enabled)
            .bind(now_ms())
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(id.clone()));
        }
        Ok(())
    }

    /// The cached probe result for a server whose URL is `target`, if one was stored for that
    /// very URL.
    pub async fn cached_probe(
        &self,
        id: &ServerId,
        target: &str,
    ) -> Result<Option<CachedProbe>, StoreError> {
        let row = sqlx::query(
            "SELECT detected, protocol_version FROM server_probes
             WHERE server_id = ?1 AND target_digest = ?2",
        )
        .bind(id.as_str())
        .bind(target_digest(target))
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let detected: String = row.try_get("detected")?;
        let detected = DetectedTransport::parse(&detected)
            .ok_or_else(|| corrupt(id, format!("unknown probe result '{detected}'")))?;
        Ok(Some(CachedProbe {
            target: target.to_owned(),
            detected,
            protocol_version: row.try_get("protocol_version")?,
        }))
    }

    /// Records what a probe found.
    pub async fn put_probe(&self, id: &ServerId, probe: &CachedProbe) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO server_probes (server_id, target_digest, detected, protocol_version,
                                        probed_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(server_id) DO UPDATE SET target_digest = ?2, detected = ?3,
                protocol_version = ?4, probed_at_ms = ?5",
        )
        .bind(id.as_str())
        .bind(target_digest(&probe.target))
        .bind(probe.detected.as_str())
        .bind(&probe.protocol_version)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The transport as stored: every header and env value sealed, and the URL sealed.
    fn seal_transport(&self, def: &ServerDefinition) -> Result<String, StoreError> {
        let mut transport = def.transport.clone();
        for value in transport.named_values_mut().iter_mut() {
            value.value = self
                .vault
                .seal(&secret_context(&def.id, &value.name), &value.value);
        }
        let mut json = serde_json::to_value(&transport).map_err(|e| corrupt(&def.id, e))?;
        if let Some(url) = json.get_mut("url")
            && let Some(plain) = url.as_str()
        {
            *url = self.vault.seal(&url_context(&def.id), plain).into();
        }
        serde_json::to_string(&json).map_err(|e| corrupt(&def.id, e))
    }

    fn decode_server(&self, row: &sqlx::sqlite::SqliteRow) -> Result<ServerDefinition, StoreError> {
        let id: String = row.try_get("id")?;
        let id = ServerId::new(id.clone()).map_err(|e| StoreError::Corrupt {
            server: id,
            detail: e.to_string(),
        })?;
        let mut json: serde_json::Value =
            serde_json::from_str(row.try_get("transport_json")?).map_err(|e| corrupt(&id, e))?;
        if let Some(url) = json.get_mut("url")
            && let Some(sealed) = url.as_str()
        {
            *url = self.vault.unseal(&url_context(&id), sealed)?.into();
        }
        let mut transport: TransportSpec =
            serde_json::from_value(json).map_err(|e| corrupt(&id, e))?;
        for value in transport.named_values_mut().iter_mut() {
            value.value = self
                .vault
                .unseal(&secret_context(&id, &value.name), &value.value)?;
        }
        let timeouts: Timeouts =
            serde_json::from_str(row.try_get("timeouts_json")?).map_err(|e| corrupt(&id, e))?;
        let disabled_tools = serde_json::from_str(row.try_get("disabled_tools_json")?)
            .map_err(|e| corrupt(&id, e))?;
        let task_modes =
            serde_json::from_str(row.try_get("task_modes_json")?).map_err(|e| corrupt(&id, e))?;
        let policies = serde_json::from_str(row.try_get("tool_policies_json")?)
            .map_err(|e| corrupt(&id, e))?;
        let oauth_client = match row.try_get::<Option<String>, _>("oauth_client_sealed")? {
            Some(sealed) => {
                let plain = self.vault.unseal(&oauth_client_context(&id), &sealed)?;
                Some(serde_json::from_str(&plain).map_err(|e| corrupt(&id, e))?)
            }
            None => None,
        };
        Ok(ServerDefinition {
            id,
            display_name: row.try_get("display_name")?,
            description: row.try_get("description")?,
            transport,
            timeouts,
            enabled: row.try_get("enabled")?,
            disabled_tools,
            oauth_client,
            prefix: row.try_get("exposed_prefix")?,
            task_modes,
            policies,
        })
    }
}

const SELECT_SERVER_COLUMNS_WHERE_ID: &str = "SELECT id, display_name, description, transport_json, timeouts_json, enabled, disabled_tools_json, oauth_client_sealed, exposed_prefix, task_modes_json, tool_policies_json FROM servers WHERE id = ?1";
const SELECT_SERVER_COLUMNS_ORDERED: &str = "SELECT id, display_name, description, transport_json, timeouts_json, enabled, disabled_tools_json, oauth_client_sealed, exposed_prefix, task_modes_json, tool_policies_json FROM servers ORDER BY id";

fn secret_context(id: &ServerId, name: &str) -> String {
    format!("server:{id}/value:{name}")
}

fn oauth_client_context(id: &ServerId) -> String {
    format!("server:{id}/oauth-client")
}

fn url_context(id: &ServerId) -> String {
    format!("server:{id}/url")
}

/// The probe cache's key for a URL: its SHA-256, so the cache never holds the URL itself.
fn target_digest(target: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(target.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn corrupt(id: &ServerId, detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        server: id.to_string(),
        detail: detail.to_string(),
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    let err = |error| StoreError::DataDir {
        path: dir.display().to_string(),
        error,
    };
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(err)
}

/// The default data directory: `$SWITCHBOARD_DATA_DIR` if set, else the platform's data directory.
pub fn default_data_dir(platform_dir: Option<PathBuf>) -> PathBuf {
    std::env::var_os("SWITCHBOARD_DATA_DIR")
        .map(PathBuf::from)
        .or(platform_dir)
        .unwrap_or_else(|| PathBuf::from(".switchboard"))
}
