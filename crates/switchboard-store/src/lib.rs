//! Switchboard's persistence.
//!
//! Server definitions, credentials, probe results and activation layers live in an embedded
//! SQLite database by default (WAL mode, so the CLI and a running daemon can share it), or in
//! PostgreSQL when several replicas share one state ([`db`]: one API, the same SQL on both).
//! Schema changes are versioned migrations under `migrations/<engine>/`, embedded in the binary
//! and applied on open. Every value marked secret is sealed by the [`vault`] before it is
//! written, and opened again on read; the database never holds a secret in plain text.

mod activations;
mod changes;
pub mod credentials;
mod db;
pub mod vault;
pub mod vectors;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use switchboard_core::{DetectedTransport, ServerDefinition, ServerId, Timeouts, TransportSpec};

pub use changes::ChangeWatch;
pub use db::StoreLocation;
use db::{Db, on_db};
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
    /// `--store` is not a place a store can be.
    #[error("not a store location: {0}")]
    Location(String),
    /// The database holds secrets sealed with another vault key than this process has.
    #[error(
        "this store's secrets were sealed with a different vault key; give every process that \
         shares the store the same key (SWITCHBOARD_VAULT_KEY or the same vault.key file)"
    )]
    OtherVaultKey,
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

/// The store: definitions, credentials and the rest, on SQLite or PostgreSQL, every secret sealed
/// by the vault.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) db: Db,
    pub(crate) vault: std::sync::Arc<Vault>,
}

/// A value that moves whenever the servers or the activation layers change, read without
/// opening any sealed value: a daemon checks it often, and reads what moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreFingerprint {
    /// The servers' number and the sum of their change times.
    pub servers: (i64, i64),
    /// The activation layers' number and the sum of their change times.
    pub activations: (i64, i64),
}

impl Store {
    /// Closes every connection (an SQLite database and its write-ahead log are then complete on
    /// disk).
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// Opens (creating if needed) the embedded store in `data_dir`: the directory (mode 0700),
    /// the vault key and the SQLite database, then applies pending migrations.
    pub async fn open(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_at(
            &StoreLocation::Sqlite(data_dir.join(DATABASE_FILE)),
            data_dir,
        )
        .await
    }

    /// Opens the store at `location`, its vault key from `SWITCHBOARD_VAULT_KEY` or else the key
    /// file in `data_dir` (created, mode 0600, with the directory, if missing).
    pub async fn open_at(location: &StoreLocation, data_dir: &Path) -> Result<Self, StoreError> {
        create_private_dir(data_dir)?;
        let vault = Vault::load_or_create(&data_dir.join(KEY_FILE))?;
        Self::open_with_vault(location, vault).await
    }

    /// Opens the store at `location` with an explicit vault. A store already holding secrets
    /// sealed with another key is refused here, before anything is written.
    pub async fn open_with_vault(
        location: &StoreLocation,
        vault: Vault,
    ) -> Result<Self, StoreError> {
        let db = match location {
            StoreLocation::Sqlite(path) => Db::open_sqlite(path).await?,
            StoreLocation::Postgres(url) => Db::open_postgres(url).await?,
        };
        let store = Self {
            db,
            vault: std::sync::Arc::new(vault),
        };
        store.check_vault_key().await?;
        Ok(store)
    }

    /// The engine this store runs on: `sqlite` or `postgres`.
    pub fn engine(&self) -> &'static str {
        match self.db {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    /// Checks the key against the value sealed when the store was first opened (sealing one
    /// now if there is none).
    async fn check_vault_key(&self) -> Result<(), StoreError> {
        const CONTEXT: &str = "store/vault-check";
        let sealed = self.vault.seal(CONTEXT, "switchboard");
        // The first writer wins; every later opener (a replica starting at the same moment too)
        // reads what it wrote.
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO store_meta (name, value) VALUES ('vault_check', $1)
             ON CONFLICT(name) DO NOTHING",
        )
        .bind(&sealed)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        let stored: String = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT value FROM store_meta WHERE name = 'vault_check'",
        )
        .fetch_one(pool)
        .await)?;
        match self.vault.unseal(CONTEXT, &stored) {
            Ok(_) => Ok(()),
            Err(VaultError::Unseal { .. }) => Err(StoreError::OtherVaultKey),
            Err(error) => Err(error.into()),
        }
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
        on_db!(&self.db, pool => {
        let mut tx = pool.begin().await?;
        sqlx::query(
            "INSERT INTO servers (id, display_name, description, transport_json, timeouts_json,
                                  enabled, disabled_tools_json, created_at_ms, updated_at_ms,
                                  oauth_client_sealed, exposed_prefix, task_modes_json,
                                  tool_policies_json)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12)
             ON CONFLICT(id) DO UPDATE SET display_name = $2, description = $3,
                transport_json = $4, timeouts_json = $5, enabled = $6,
                disabled_tools_json = $7, updated_at_ms = $8, oauth_client_sealed = $9,
                exposed_prefix = $10, task_modes_json = $11, tool_policies_json = $12",
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
        sqlx::query("DELETE FROM server_probes WHERE server_id = $1 AND target_digest <> $2")
            .bind(def.id.as_str())
            .bind(target_digest(&def.transport.target()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
        })?;
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
        let row: Option<ServerRow> = on_db!(&self.db, pool => sqlx::query_as(SELECT_SERVER_COLUMNS_WHERE_ID)
            .bind(id.as_str())
            .fetch_optional(pool)
            .await)?;
        row.map(|row| self.decode_server(row)).transpose()
    }

    /// Every server, ordered by id.
    pub async fn list_servers(&self) -> Result<Vec<ServerDefinition>, StoreError> {
        let rows: Vec<ServerRow> = on_db!(&self.db, pool => sqlx::query_as(SELECT_SERVER_COLUMNS_ORDERED)
            .fetch_all(pool)
            .await)?;
        rows.into_iter()
            .map(|row| self.decode_server(row))
            .collect()
    }

    /// What the servers and activation layers are now, in four numbers (see
    /// [`StoreFingerprint`]).
    pub async fn fingerprint(&self) -> Result<StoreFingerprint, StoreError> {
        let (servers, servers_sum, layers, layers_sum): (i64, i64, i64, i64) = on_db!(&self.db, pool => sqlx::query_as(
                "SELECT (SELECT COUNT(*) FROM servers),
                        (SELECT CAST(COALESCE(SUM(updated_at_ms), 0) AS BIGINT) FROM servers),
                        (SELECT COUNT(*) FROM activations),
                        (SELECT CAST(COALESCE(SUM(updated_at_ms), 0) AS BIGINT) FROM activations)",
            )
            .fetch_one(pool)
            .await)?;
        Ok(StoreFingerprint {
            servers: (servers, servers_sum),
            activations: (layers, layers_sum),
        })
    }

    /// Removes a server and everything stored for it.
    pub async fn remove_server(&self, id: &ServerId) -> Result<(), StoreError> {
        let done = on_db!(&self.db, pool => sqlx::query("DELETE FROM servers WHERE id = $1")
            .bind(id.as_str())
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
        if done == 0 {
            return Err(StoreError::NotFound(id.clone()));
        }
        Ok(())
    }

    /// Enables or disables a server.
    pub async fn set_enabled(&self, id: &ServerId, enabled: bool) -> Result<(), StoreError> {
        let done = on_db!(&self.db, pool => sqlx::query("UPDATE servers SET enabled = $2, updated_at_ms = $3 WHERE id = $1")
            .bind(id.as_str())
            .bind(enabled)
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
        if done == 0 {
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
        let row: Option<(String, Option<String>)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT detected, protocol_version FROM server_probes
             WHERE server_id = $1 AND target_digest = $2",
        )
        .bind(id.as_str())
        .bind(target_digest(target))
        .fetch_optional(pool)
        .await)?;
        let Some((detected, protocol_version)) = row else {
            return Ok(None);
        };
        let detected = DetectedTransport::parse(&detected)
            .ok_or_else(|| corrupt(id, format!("unknown probe result '{detected}'")))?;
        Ok(Some(CachedProbe {
            target: target.to_owned(),
            detected,
            protocol_version,
        }))
    }

    /// Records what a probe found.
    pub async fn put_probe(&self, id: &ServerId, probe: &CachedProbe) -> Result<(), StoreError> {
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO server_probes (server_id, target_digest, detected, protocol_version,
                                        probed_at_ms)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT(server_id) DO UPDATE SET target_digest = $2, detected = $3,
                protocol_version = $4, probed_at_ms = $5",
        )
        .bind(id.as_str())
        .bind(target_digest(&probe.target))
        .bind(probe.detected.as_str())
        .bind(&probe.protocol_version)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
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

    fn decode_server(&self, row: ServerRow) -> Result<ServerDefinition, StoreError> {
        let id = ServerId::new(row.id.clone()).map_err(|e| StoreError::Corrupt {
            server: row.id,
            detail: e.to_string(),
        })?;
        let mut json: serde_json::Value =
            serde_json::from_str(&row.transport_json).map_err(|e| corrupt(&id, e))?;
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
            serde_json::from_str(&row.timeouts_json).map_err(|e| corrupt(&id, e))?;
        let disabled_tools =
            serde_json::from_str(&row.disabled_tools_json).map_err(|e| corrupt(&id, e))?;
        let task_modes = serde_json::from_str(&row.task_modes_json).map_err(|e| corrupt(&id, e))?;
        let policies =
            serde_json::from_str(&row.tool_policies_json).map_err(|e| corrupt(&id, e))?;
        let oauth_client = match &row.oauth_client_sealed {
            Some(sealed) => {
                let plain = self.vault.unseal(&oauth_client_context(&id), sealed)?;
                Some(serde_json::from_str(&plain).map_err(|e| corrupt(&id, e))?)
            }
            None => None,
        };
        Ok(ServerDefinition {
            id,
            display_name: row.display_name,
            description: row.description,
            transport,
            timeouts,
            enabled: row.enabled,
            disabled_tools,
            oauth_client,
            prefix: row.exposed_prefix,
            task_modes,
            policies,
        })
    }
}

/// A `servers` row as stored (sealed values still sealed).
#[derive(sqlx::FromRow)]
struct ServerRow {
    id: String,
    display_name: String,
    description: String,
    transport_json: String,
    timeouts_json: String,
    enabled: bool,
    disabled_tools_json: String,
    oauth_client_sealed: Option<String>,
    exposed_prefix: Option<String>,
    task_modes_json: String,
    tool_policies_json: String,
}

const SELECT_SERVER_COLUMNS_WHERE_ID: &str = "SELECT id, display_name, description, transport_json, timeouts_json, enabled, disabled_tools_json, oauth_client_sealed, exposed_prefix, task_modes_json, tool_policies_json FROM servers WHERE id = $1";
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
