//! Tenants, their users, and the users' API keys.
//!
//! An API key is `sbk_` and 32 random bytes (base64url). Only its SHA-256 digest is stored: the
//! key is shown once, when it is made, and a database that leaks gives nobody a key. Looking a
//! key up is one indexed read by digest.

use base64::Engine;
use rand::RngCore;
use serde::Serialize;
use switchboard_core::{Principal, Role, TenantId, UserId};

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

/// What every API key starts with, so that one pasted somewhere it should not be is recognised.
pub const API_KEY_PREFIX: &str = "sbk_";

/// A tenant as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TenantRecord {
    /// Its id.
    pub id: TenantId,
    /// Its name for people.
    pub display_name: String,
}

/// A user as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserRecord {
    /// Their tenant.
    pub tenant: TenantId,
    /// Their id.
    pub id: UserId,
    /// Their name for people.
    pub display_name: String,
    /// Their role.
    pub role: Role,
    /// Whether they sign in with the team's identity provider (recorded from its tokens, or
    /// linked on purpose): only then does a token naming them reach their workspace.
    pub identity_provider: bool,
}

/// An API key as listed (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiKeyRecord {
    /// Its name, unique per user.
    pub name: String,
    /// When it was made (Unix milliseconds).
    pub created_at_ms: i64,
}

/// SHA-256 of `key`, in hex: how keys and other bearer secrets are found without being kept.
pub(crate) fn digest(key: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

impl Store {
    /// Counts one more change to who may come in (users, API keys), which the store's
    /// fingerprint shows: every process then forgets the keys it remembered, even when a change
    /// leaves the numbers as they were (a key revoked and another made).
    async fn principals_changed(&self) -> Result<(), StoreError> {
        self.bump_version("principals_version").await
    }

    /// Adds one to the counter `name` of `store_meta`, which a fingerprint reads.
    pub(crate) async fn bump_version(&self, name: &str) -> Result<(), StoreError> {
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO store_meta (name, value) VALUES ($1, '1')
             ON CONFLICT(name) DO UPDATE
             SET value = CAST(CAST(store_meta.value AS BIGINT) + 1 AS TEXT)",
        )
        .bind(name)
        .execute(pool)
        .await
        .map(drop))?;
        Ok(())
    }
}

fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.is_unique_violation())
}

impl Store {
    /// Adds a tenant.
    pub async fn add_tenant(&self, id: &TenantId, display_name: &str) -> Result<(), StoreError> {
        let added = on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO tenants (id, display_name, created_at_ms) VALUES ($1, $2, $3)",
        )
        .bind(id.as_str())
        .bind(display_name)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(drop));
        match added {
            Err(error) if is_unique_violation(&error) => {
                Err(StoreError::Exists(format!("tenant '{id}'")))
            }
            other => Ok(other?),
        }
    }

    /// Every tenant, by id.
    pub async fn tenants(&self) -> Result<Vec<TenantRecord>, StoreError> {
        let rows: Vec<(String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT id, display_name FROM tenants ORDER BY id",
        )
        .fetch_all(pool)
        .await)?;
        rows.into_iter()
            .map(|(id, display_name)| {
                Ok(TenantRecord {
                    id: TenantId::new(id).map_err(|e| corrupt_identity(e.to_string()))?,
                    display_name,
                })
            })
            .collect()
    }

    /// Removes a tenant (not the default one) and everything it holds: its users and their
    /// keys, its servers with their tokens, its activation layers.
    pub async fn remove_tenant(&self, id: &TenantId) -> Result<(), StoreError> {
        if id.is_default() {
            return Err(StoreError::Forbidden(
                "the default tenant cannot be removed".into(),
            ));
        }
        let prefix = format!("{id}/");
        let removed = self
            .delete_together(&[
                ("DELETE FROM servers WHERE tenant = $1", &[id.as_str()]),
                (
                    "DELETE FROM activations WHERE substr(scope, 1, length($1)) = $1",
                    &[&prefix],
                ),
                ("DELETE FROM tenant_keys WHERE tenant = $1", &[id.as_str()]),
                (
                    "DELETE FROM user_server_settings WHERE tenant = $1",
                    &[id.as_str()],
                ),
                (
                    "DELETE FROM pending_sign_ins WHERE tenant = $1",
                    &[id.as_str()],
                ),
                ("DELETE FROM endpoints WHERE tenant = $1", &[id.as_str()]),
                ("DELETE FROM grants WHERE tenant = $1", &[id.as_str()]),
                (
                    "DELETE FROM group_members WHERE tenant = $1",
                    &[id.as_str()],
                ),
                ("DELETE FROM user_groups WHERE tenant = $1", &[id.as_str()]),
                ("DELETE FROM tenants WHERE id = $1", &[id.as_str()]),
            ])
            .await?;
        if removed == 0 {
            return Err(StoreError::Missing(format!("tenant '{id}'")));
        }
        self.principals_changed().await
    }

    /// Adds a user to a tenant; with `identity_provider`, one who signs in with the team's
    /// identity provider (its tokens naming them reach their workspace).
    pub async fn add_user(
        &self,
        tenant: &TenantId,
        id: &UserId,
        role: Role,
        display_name: &str,
        identity_provider: bool,
    ) -> Result<(), StoreError> {
        self.require_tenant(tenant).await?;
        let added = on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO users (tenant, id, display_name, role, created_at_ms, identity_provider)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(tenant.as_str())
        .bind(id.as_str())
        .bind(display_name)
        .bind(role.as_str())
        .bind(now_ms())
        .bind(identity_provider)
        .execute(pool)
        .await
        .map(drop));
        match added {
            Err(error) if is_unique_violation(&error) => {
                Err(StoreError::Exists(format!("user '{tenant}/{id}'")))
            }
            other => {
                other?;
                self.principals_changed().await
            }
        }
    }

    /// Lets the identity provider's tokens naming `id` reach that user (made in Switchboard
    /// before, with their own keys): linking the two is the operator's deliberate act.
    pub async fn link_user_to_identity_provider(
        &self,
        tenant: &TenantId,
        id: &UserId,
    ) -> Result<(), StoreError> {
        let linked = on_db!(&self.db, pool => sqlx::query(
            "UPDATE users SET identity_provider = TRUE WHERE tenant = $1 AND id = $2",
        )
        .bind(tenant.as_str())
        .bind(id.as_str())
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        if linked == 0 {
            return Err(StoreError::Missing(format!("user '{tenant}/{id}'")));
        }
        self.principals_changed().await
    }

    /// The user an identity provider's token names, adding them with `role` if they are new;
    /// an existing user keeps the role they have. A user made in Switchboard (the CLI) is
    /// refused unless the operator linked them ([`Self::link_user_to_identity_provider`]): a
    /// provider account that happens to have the same id is not that person.
    pub async fn ensure_user(
        &self,
        tenant: &TenantId,
        id: &UserId,
        role: Role,
    ) -> Result<Principal, StoreError> {
        self.require_tenant(tenant).await?;
        let added = on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO users (tenant, id, display_name, role, created_at_ms, identity_provider)
             VALUES ($1, $2, '', $3, $4, TRUE) ON CONFLICT(tenant, id) DO NOTHING",
        )
        .bind(tenant.as_str())
        .bind(id.as_str())
        .bind(role.as_str())
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        if added > 0 {
            self.principals_changed().await?;
        }
        let user = self
            .user(tenant, id)
            .await?
            .ok_or_else(|| StoreError::Missing(format!("user '{tenant}/{id}'")))?;
        if !user.identity_provider {
            return Err(StoreError::Forbidden(format!(
                "user '{tenant}/{id}' was made in Switchboard and does not sign in with the identity provider; an operator links the two on purpose with `switchboard user link {tenant}/{id}`"
            )));
        }
        Ok(Principal {
            tenant: user.tenant,
            user: user.id,
            role: user.role,
            groups: Default::default(),
        })
    }

    /// One user.
    pub async fn user(
        &self,
        tenant: &TenantId,
        id: &UserId,
    ) -> Result<Option<UserRecord>, StoreError> {
        let row: Option<(String, String, String, String, bool)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT tenant, id, display_name, role, identity_provider FROM users
             WHERE tenant = $1 AND id = $2",
        )
        .bind(tenant.as_str())
        .bind(id.as_str())
        .fetch_optional(pool)
        .await)?;
        row.map(user_record).transpose()
    }

    /// A tenant's users, by id.
    pub async fn users(&self, tenant: &TenantId) -> Result<Vec<UserRecord>, StoreError> {
        let rows: Vec<(String, String, String, String, bool)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT tenant, id, display_name, role, identity_provider FROM users
             WHERE tenant = $1 ORDER BY id",
        )
        .bind(tenant.as_str())
        .fetch_all(pool)
        .await)?;
        rows.into_iter().map(user_record).collect()
    }

    /// Removes a user and everything that is theirs: their keys, their own servers, their
    /// tokens for the tenant's shared servers, their layers, their settings and sign-ins in
    /// progress.
    pub async fn remove_user(&self, tenant: &TenantId, id: &UserId) -> Result<(), StoreError> {
        let user_layer = if tenant.is_default() {
            format!("user:{id}")
        } else {
            format!("{tenant}/user:{id}")
        };
        let threads = format!("{tenant}/{id}/");
        let principal = crate::grant_principal(Some(id));
        // A user given this id later inherits none of this one's groups and grants.
        let subject = switchboard_core::grants::Subject::User(id.clone()).to_string();
        let removed = self
            .delete_together(&[
                (
                    "DELETE FROM servers WHERE tenant = $1 AND owner = $2",
                    &[tenant.as_str(), id.as_str()],
                ),
                (
                    "DELETE FROM oauth_grants WHERE principal = $2
                     AND server_id IN (SELECT id FROM servers WHERE tenant = $1)",
                    &[tenant.as_str(), &principal],
                ),
                (
                    "DELETE FROM activations
                     WHERE scope = $1 OR substr(scope, 1, length($2)) = $2",
                    &[&user_layer, &threads],
                ),
                (
                    "DELETE FROM user_server_settings WHERE tenant = $1 AND user_id = $2",
                    &[tenant.as_str(), id.as_str()],
                ),
                (
                    "DELETE FROM pending_sign_ins WHERE tenant = $1 AND user_id = $2",
                    &[tenant.as_str(), id.as_str()],
                ),
                (
                    "DELETE FROM group_members WHERE tenant = $1 AND user_id = $2",
                    &[tenant.as_str(), id.as_str()],
                ),
                (
                    "DELETE FROM grants WHERE tenant = $1 AND subject = $2",
                    &[tenant.as_str(), &subject],
                ),
                (
                    "DELETE FROM users WHERE tenant = $1 AND id = $2",
                    &[tenant.as_str(), id.as_str()],
                ),
            ])
            .await?;
        if removed == 0 {
            return Err(StoreError::Missing(format!("user '{tenant}/{id}'")));
        }
        self.principals_changed().await
    }

    /// Makes an API key named `name` for a user, and returns it: the only time it is seen.
    pub async fn create_api_key(
        &self,
        tenant: &TenantId,
        user: &UserId,
        name: &str,
    ) -> Result<String, StoreError> {
        if self.user(tenant, user).await?.is_none() {
            return Err(StoreError::Missing(format!("user '{tenant}/{user}'")));
        }
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let key = format!(
            "{API_KEY_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
        );
        let added = on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO api_keys (digest, tenant, user_id, name, created_at_ms)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(digest(&key))
        .bind(tenant.as_str())
        .bind(user.as_str())
        .bind(name)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(drop));
        match added {
            Err(error) if is_unique_violation(&error) => Err(StoreError::Exists(format!(
                "an API key named '{name}' of '{tenant}/{user}'"
            ))),
            other => {
                other?;
                self.principals_changed().await?;
                Ok(key)
            }
        }
    }

    /// Who holds `key`, if it is a live API key.
    pub async fn principal_for_api_key(&self, key: &str) -> Result<Option<Principal>, StoreError> {
        if !key.starts_with(API_KEY_PREFIX) {
            return Ok(None);
        }
        let row: Option<(String, String, String, String, bool)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT users.tenant, users.id, users.display_name, users.role, users.identity_provider
             FROM api_keys JOIN users ON users.tenant = api_keys.tenant AND users.id = api_keys.user_id
             WHERE api_keys.digest = $1",
        )
        .bind(digest(key))
        .fetch_optional(pool)
        .await)?;
        Ok(row.map(user_record).transpose()?.map(|user| Principal {
            tenant: user.tenant,
            user: user.id,
            role: user.role,
            groups: Default::default(),
        }))
    }

    /// A user's API keys (their names and ages, never the keys).
    pub async fn api_keys(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let rows: Vec<(String, i64)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT name, created_at_ms FROM api_keys WHERE tenant = $1 AND user_id = $2
             ORDER BY name",
        )
        .bind(tenant.as_str())
        .bind(user.as_str())
        .fetch_all(pool)
        .await)?;
        Ok(rows
            .into_iter()
            .map(|(name, created_at_ms)| ApiKeyRecord {
                name,
                created_at_ms,
            })
            .collect())
    }

    /// Revokes a user's API key by name.
    pub async fn revoke_api_key(
        &self,
        tenant: &TenantId,
        user: &UserId,
        name: &str,
    ) -> Result<(), StoreError> {
        let removed = on_db!(&self.db, pool => sqlx::query(
            "DELETE FROM api_keys WHERE tenant = $1 AND user_id = $2 AND name = $3",
        )
        .bind(tenant.as_str())
        .bind(user.as_str())
        .bind(name)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        if removed == 0 {
            return Err(StoreError::Missing(format!(
                "an API key named '{name}' of '{tenant}/{user}'"
            )));
        }
        self.principals_changed().await
    }

    /// Runs `deletes` (each SQL with its text parameters) in one transaction; returns how many
    /// rows the last one removed.
    pub(crate) async fn delete_together(
        &self,
        deletes: &[(&str, &[&str])],
    ) -> Result<u64, StoreError> {
        let removed = on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            let mut removed = 0;
            for (sql, parameters) in deletes {
                let mut query = sqlx::query(sql);
                for parameter in *parameters {
                    query = query.bind(*parameter);
                }
                removed = query.execute(&mut *tx).await?.rows_affected();
            }
            tx.commit().await?;
            removed
        });
        Ok(removed)
    }

    pub(crate) async fn require_tenant(&self, tenant: &TenantId) -> Result<(), StoreError> {
        let found: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT id FROM tenants WHERE id = $1",
        )
        .bind(tenant.as_str())
        .fetch_optional(pool)
        .await)?;
        match found {
            Some(_) => Ok(()),
            None => Err(StoreError::Missing(format!("tenant '{tenant}'"))),
        }
    }
}

fn user_record(
    (tenant, id, display_name, role, identity_provider): (String, String, String, String, bool),
) -> Result<UserRecord, StoreError> {
    Ok(UserRecord {
        tenant: TenantId::new(tenant).map_err(|e| corrupt_identity(e.to_string()))?,
        id: UserId::new(id).map_err(|e| corrupt_identity(e.to_string()))?,
        display_name,
        role: Role::parse(&role).map_err(|e| corrupt_identity(e.to_string()))?,
        identity_provider,
    })
}

fn corrupt_identity(detail: String) -> StoreError {
    StoreError::Corrupt {
        server: "users".into(),
        detail,
    }
}
