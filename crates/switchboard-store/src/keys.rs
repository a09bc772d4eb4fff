//! Envelope encryption: a data key per tenant, wrapped by the master key, and rotating both.
//!
//! A tenant's secrets (its servers' headers, environment values, URLs and OAuth client
//! credentials, its users' tokens) are sealed with the tenant's newest data key, as
//! `sealed:t1:<version>:<nonce and ciphertext>`. The data keys live in `tenant_keys`, each sealed
//! with the master key, so a database copied without the master key opens nothing, and rotating
//! the master key rewrites only the wrapped data keys (and the few values sealed with the master
//! key itself: client registrations, which are not a tenant's, and the store's check value).
//! Values written before data keys existed (`sealed:v1:`, the master key's) still open; the
//! first rotation seals them again under their tenant's key.
//!
//! - [`Store::rotate_tenant_key`] adds a new version of a tenant's key, and seals the tenant's
//!   values again with it.
//! - [`Store::rotate_master_key`] seals every value again under its tenant's key, then wraps
//!   the data keys, the client registrations and the check value with the new master key, in
//!   one transaction. Processes still holding the old master key must be restarted with the new
//!   one; with the old one in `SWITCHBOARD_VAULT_PREVIOUS_KEY` they may be restarted first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_core::sync::lock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use switchboard_core::TenantId;

use crate::db::on_db;
use crate::{Store, StoreError, Vault, VaultError, now_ms};

/// Prefix of a value sealed with a tenant's data key; the key's version follows.
const TENANT_SEALED_PREFIX: &str = "sealed:t1:";

/// How long the newest version of a tenant's key is believed before it is read again (another
/// process may have rotated it).
const NEWEST_TTL: Duration = Duration::from_secs(30);

/// The data keys this process has opened.
#[derive(Default)]
pub(crate) struct DataKeys {
    opened: Mutex<HashMap<(String, i64), Arc<Vault>>>,
    newest: Mutex<HashMap<String, (i64, Instant)>>,
}

impl std::fmt::Debug for DataKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKeys(..)")
    }
}

fn wrap_context(tenant: &str, version: i64) -> String {
    format!("tenant-key:{tenant}/v{version}")
}

/// What a rotation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Resealed {
    /// Server rows whose secrets were sealed again.
    pub servers: usize,
    /// Grants (token sets) sealed again.
    pub grants: usize,
    /// Users' own settings for shared servers sealed again.
    pub settings: usize,
    /// The operator's approved commands sealed again.
    pub commands: usize,
}

impl std::fmt::Display for Resealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} servers', {} sign-ins', {} users' own settings' and {} approved commands' secrets",
            self.servers, self.grants, self.settings, self.commands
        )
    }
}

impl Store {
    /// Seals `plain` for `tenant`, under its newest data key (made on first use).
    pub(crate) async fn seal_for(
        &self,
        tenant: &TenantId,
        context: &str,
        plain: &str,
    ) -> Result<String, StoreError> {
        let (version, key) = self.newest_data_key(tenant).await?;
        Ok(format!(
            "{TENANT_SEALED_PREFIX}{version}:{}",
            key.seal_bare(context, plain)
        ))
    }

    /// Opens a value of `tenant`'s: sealed with the data key version it names, or, written
    /// before data keys, with the master key.
    pub(crate) async fn unseal_for(
        &self,
        tenant: &TenantId,
        context: &str,
        sealed: &str,
    ) -> Result<String, StoreError> {
        let Some(rest) = sealed.strip_prefix(TENANT_SEALED_PREFIX) else {
            return Ok(self.vault.unseal(context, sealed)?);
        };
        let malformed = || VaultError::Malformed {
            context: context.into(),
        };
        let (version, encoded) = rest.split_once(':').ok_or_else(malformed)?;
        let version: i64 = version.parse().map_err(|_| malformed())?;
        let key = self.data_key(tenant, version).await?;
        Ok(key.unseal_bare(context, encoded)?)
    }

    /// The newest version of `tenant`'s data key, made if it has none.
    async fn newest_data_key(&self, tenant: &TenantId) -> Result<(i64, Arc<Vault>), StoreError> {
        let known = lock(&self.keys.newest)
            .get(tenant.as_str())
            .filter(|(_, at)| at.elapsed() < NEWEST_TTL)
            .map(|(version, _)| *version);
        let version = match known {
            Some(version) => version,
            None => {
                let newest: Option<i64> = on_db!(&self.db, pool => sqlx::query_scalar(
                    "SELECT MAX(version) FROM tenant_keys WHERE tenant = $1",
                )
                .bind(tenant.as_str())
                .fetch_one(pool)
                .await)?;
                let version = match newest {
                    Some(version) => version,
                    None => self.add_data_key(tenant, 1).await?,
                };
                lock(&self.keys.newest).insert(tenant.to_string(), (version, Instant::now()));
                version
            }
        };
        Ok((version, self.data_key(tenant, version).await?))
    }

    /// Adds version `version` of `tenant`'s data key, unless another process just did; returns
    /// the newest version there is.
    async fn add_data_key(&self, tenant: &TenantId, version: i64) -> Result<i64, StoreError> {
        let (key, _) = Vault::generate();
        let wrapped = self
            .vault
            .seal(&wrap_context(tenant.as_str(), version), &B64.encode(key));
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO tenant_keys (tenant, version, wrapped, created_at_ms)
             VALUES ($1, $2, $3, $4) ON CONFLICT(tenant, version) DO NOTHING",
        )
        .bind(tenant.as_str())
        .bind(version)
        .bind(&wrapped)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(drop))?;
        let newest: Option<i64> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT MAX(version) FROM tenant_keys WHERE tenant = $1",
        )
        .bind(tenant.as_str())
        .fetch_one(pool)
        .await)?;
        Ok(newest.unwrap_or(version))
    }

    /// Version `version` of `tenant`'s data key, unwrapped.
    async fn data_key(&self, tenant: &TenantId, version: i64) -> Result<Arc<Vault>, StoreError> {
        let cache_key = (tenant.to_string(), version);
        if let Some(key) = lock(&self.keys.opened).get(&cache_key) {
            return Ok(key.clone());
        }
        let wrapped: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT wrapped FROM tenant_keys WHERE tenant = $1 AND version = $2",
        )
        .bind(tenant.as_str())
        .bind(version)
        .fetch_optional(pool)
        .await)?;
        let context = wrap_context(tenant.as_str(), version);
        let wrapped = wrapped.ok_or_else(|| VaultError::Unseal {
            context: format!("{context} (no such key is stored)"),
        })?;
        let key = unwrap(&self.vault, &context, &wrapped)?;
        let key = Arc::new(key);
        lock(&self.keys.opened).insert(cache_key, key.clone());
        Ok(key)
    }

    /// Adds a new version of `tenant`'s data key and seals every value of the tenant's again
    /// with it. Returns the new version and what was sealed again.
    pub async fn rotate_tenant_key(
        &self,
        tenant: &TenantId,
    ) -> Result<(i64, Resealed), StoreError> {
        let newest: Option<i64> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT MAX(version) FROM tenant_keys WHERE tenant = $1",
        )
        .bind(tenant.as_str())
        .fetch_one(pool)
        .await)?;
        let version = self.add_data_key(tenant, newest.unwrap_or(0) + 1).await?;
        lock(&self.keys.newest).insert(tenant.to_string(), (version, Instant::now()));
        let resealed = self.reseal(Some(tenant)).await?;
        Ok((version, resealed))
    }

    /// Seals every value of `tenant`'s (of every tenant's, for `None`) again under its tenant's
    /// newest data key. A row changed meanwhile by someone else is left as they wrote it (it is
    /// sealed with the newest key already).
    pub async fn reseal(&self, tenant: Option<&TenantId>) -> Result<Resealed, StoreError> {
        let filter = tenant.map_or_else(String::new, ToString::to_string);
        let rows: Vec<crate::ServerRow> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT id, name, tenant, owner, display_name, description, transport_json, timeouts_json,
                    enabled, disabled_tools_json, oauth_client_sealed, exposed_prefix,
                    task_modes_json, tool_policies_json
             FROM servers WHERE $1 = '' OR tenant = $1",
        )
        .bind(&filter)
        .fetch_all(pool)
        .await)?;
        let mut resealed = Resealed::default();
        for row in rows {
            let key = row.id.clone();
            let tenant = TenantId::new(row.tenant.clone()).map_err(|e| StoreError::Corrupt {
                server: key.clone(),
                detail: e.to_string(),
            })?;
            let (old_transport, old_client) =
                (row.transport_json.clone(), row.oauth_client_sealed.clone());
            let def = self.decode_server(row).await?;
            let transport = self.seal_transport(&key, &tenant, &def).await?;
            let client = self.seal_oauth_client(&key, &tenant, &def).await?;
            let updated = on_db!(&self.db, pool => sqlx::query(
                "UPDATE servers SET transport_json = $2, oauth_client_sealed = $3
                 WHERE id = $1 AND transport_json = $4
                   AND COALESCE(oauth_client_sealed, '') = COALESCE($5, '')",
            )
            .bind(&key)
            .bind(&transport)
            .bind(&client)
            .bind(&old_transport)
            .bind(&old_client)
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
            resealed.servers += usize::try_from(updated).unwrap_or(0);
        }
        let grants: Vec<(String, String, String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT g.server_id, g.principal, g.sealed_json, s.tenant
             FROM oauth_grants g JOIN servers s ON s.id = g.server_id
             WHERE $1 = '' OR s.tenant = $1",
        )
        .bind(&filter)
        .fetch_all(pool)
        .await)?;
        for (server, principal, sealed, tenant) in grants {
            let tenant = TenantId::new(tenant).map_err(|e| StoreError::Corrupt {
                server: server.clone(),
                detail: e.to_string(),
            })?;
            let context = crate::credentials::grant_context_of(&server, &principal);
            let plain = self.unseal_for(&tenant, &context, &sealed).await?;
            let again = self.seal_for(&tenant, &context, &plain).await?;
            // Only if nobody refreshed the tokens meanwhile: a rotated refresh token is never
            // overwritten with the one it replaced.
            let updated = on_db!(&self.db, pool => sqlx::query(
                "UPDATE oauth_grants SET sealed_json = $3
                 WHERE server_id = $1 AND principal = $2 AND sealed_json = $4",
            )
            .bind(&server)
            .bind(&principal)
            .bind(&again)
            .bind(&sealed)
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
            resealed.grants += usize::try_from(updated).unwrap_or(0);
        }
        let settings: Vec<(String, String, String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT tenant, user_id, server_name, settings_sealed FROM user_server_settings
             WHERE $1 = '' OR tenant = $1",
        )
        .bind(&filter)
        .fetch_all(pool)
        .await)?;
        for (tenant, user, server, sealed) in settings {
            let context = crate::settings::settings_context(&tenant, &user, &server);
            let tenant = TenantId::new(tenant).map_err(|e| StoreError::Corrupt {
                server: server.clone(),
                detail: e.to_string(),
            })?;
            let plain = self.unseal_for(&tenant, &context, &sealed).await?;
            let again = self.seal_for(&tenant, &context, &plain).await?;
            // Only if the user did not change them meanwhile.
            let updated = on_db!(&self.db, pool => sqlx::query(
                "UPDATE user_server_settings SET settings_sealed = $4
                 WHERE tenant = $1 AND user_id = $2 AND server_name = $3 AND settings_sealed = $5",
            )
            .bind(tenant.as_str())
            .bind(&user)
            .bind(&server)
            .bind(&again)
            .bind(&sealed)
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
            resealed.settings += usize::try_from(updated).unwrap_or(0);
        }
        if tenant.is_none_or(TenantId::is_default) {
            resealed.commands = self.reseal_approved_commands().await?;
        }
        Ok(resealed)
    }

    /// Rewrites the database so that no old ciphertext stays in it after a rotation: on SQLite
    /// (whose deleted pages `secure_delete` zeroes) the file is rebuilt with `VACUUM` and the
    /// write-ahead log emptied; on PostgreSQL the tables that hold secrets are vacuumed (their
    /// old row versions become free space, which PostgreSQL does not zero). Says which.
    pub async fn compact(&self) -> Result<&'static str, StoreError> {
        on_db!(&self.db, pool => {
            match self.engine() {
                "sqlite" => {
                    sqlx::query("VACUUM").execute(pool).await?;
                    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(pool).await?;
                }
                _ => {
                    sqlx::query(
                        "VACUUM servers, oauth_grants, oauth_clients, user_server_settings, \
                         tenant_keys, approved_commands, pending_sign_ins, store_meta",
                    )
                    .execute(pool)
                    .await?;
                }
            }
            Ok::<(), sqlx::Error>(())
        })?;
        Ok(match self.engine() {
            "sqlite" => {
                "the old ciphertexts were overwritten: the database file was rewritten (SQLite secure_delete and VACUUM)"
            }
            _ => {
                "PostgreSQL keeps the old row versions as free space after VACUUM (which ran) until it reuses it; its own backups and WAL archives keep them longer"
            }
        })
    }

    /// Replaces the master key with `new`: every value is first sealed again under its tenant's
    /// data key (so none depends on the master key directly but the keys themselves), then the
    /// data keys, the client registrations and the store's check value are wrapped with `new`,
    /// all in one transaction. This store handle keeps the old key: the process ends after this.
    pub async fn rotate_master_key(&self, new: &Vault) -> Result<Resealed, StoreError> {
        let resealed = self.reseal(None).await?;
        let keys: Vec<(String, i64, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT tenant, version, wrapped FROM tenant_keys",
        )
        .fetch_all(pool)
        .await)?;
        let mut rewrapped = Vec::with_capacity(keys.len());
        for (tenant, version, wrapped) in keys {
            let context = wrap_context(&tenant, version);
            let key = self.vault.unseal(&context, &wrapped)?;
            rewrapped.push((tenant, version, new.seal(&context, &key)));
        }
        let clients: Vec<(String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT issuer, sealed_json FROM oauth_clients",
        )
        .fetch_all(pool)
        .await)?;
        let mut clients_again = Vec::with_capacity(clients.len());
        for (issuer, sealed) in clients {
            let context = crate::credentials::client_context(&issuer);
            let plain = self.vault.unseal(&context, &sealed)?;
            clients_again.push((issuer, new.seal(&context, &plain)));
        }
        let check = new.seal(crate::VAULT_CHECK_CONTEXT, crate::VAULT_CHECK_VALUE);
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            for (tenant, version, wrapped) in &rewrapped {
                sqlx::query("UPDATE tenant_keys SET wrapped = $3 WHERE tenant = $1 AND version = $2")
                    .bind(tenant)
                    .bind(version)
                    .bind(wrapped)
                    .execute(&mut *tx)
                    .await?;
            }
            for (issuer, sealed) in &clients_again {
                sqlx::query("UPDATE oauth_clients SET sealed_json = $2 WHERE issuer = $1")
                    .bind(issuer)
                    .bind(sealed)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query("UPDATE store_meta SET value = $1 WHERE name = 'vault_check'")
                .bind(&check)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        })?;
        Ok(resealed)
    }
}

/// The data key `wrapped` holds, opened with `master`.
fn unwrap(master: &Vault, context: &str, wrapped: &str) -> Result<Vault, VaultError> {
    let encoded = master.unseal(context, wrapped)?;
    let bytes = B64
        .decode(encoded.trim())
        .map_err(|_| VaultError::Malformed {
            context: context.into(),
        })?;
    let key: [u8; 32] = bytes.try_into().map_err(|_| VaultError::Malformed {
        context: context.into(),
    })?;
    Ok(Vault::from_key(key))
}
