//! Stored endpoints ([`switchboard_core::Endpoint`]), per tenant: every workspace of a tenant
//! sees its endpoints, and only the tenant's admins (the operator, in the local workspace)
//! change them.

use sha2::Digest;
use switchboard_core::endpoint::{EndpointKey, MAX_KEYS, hex_of};
use switchboard_core::{Endpoint, EndpointDefinition};

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

/// What an endpoint key looks like: a prefix saying what it is, then 256 random bits in hex.
pub const ENDPOINT_KEY_PREFIX: &str = "sbe_";

/// SHA-256 of `key` as presented (surrounding space ignored), as an endpoint keeps it.
pub fn endpoint_key_digest(key: &str) -> [u8; 32] {
    sha2::Sha256::digest(key.trim().as_bytes()).into()
}

/// Whom an endpoint key speaks for, as a daemon with users finds it from the key alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointKeyOwner {
    /// The endpoint's tenant.
    pub tenant: switchboard_core::TenantId,
    /// The endpoint.
    pub endpoint: String,
    /// The key's id.
    pub key_id: String,
    /// The user who issued it, as they are now (`None`: the operator's key, in the default
    /// tenant).
    pub user: Option<switchboard_core::Principal>,
}

fn missing(name: &str) -> StoreError {
    StoreError::Missing(format!("endpoint named '{name}'"))
}

impl Store {
    /// The tenant's endpoints, by name. A row that does not decode is left out with a warning:
    /// its clients are refused (the endpoint is not there) rather than given more.
    pub async fn endpoints(&self) -> Result<Vec<Endpoint>, StoreError> {
        self.endpoints_of(&self.workspace.tenant()).await
    }

    /// `tenant`'s endpoints, by name (see [`Store::endpoints`]).
    pub(crate) async fn endpoints_of(
        &self,
        tenant: &switchboard_core::TenantId,
    ) -> Result<Vec<Endpoint>, StoreError> {
        let rows: Vec<(String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT name, endpoint_json FROM endpoints WHERE tenant = $1 ORDER BY name",
        )
        .bind(tenant.as_str())
        .fetch_all(pool)
        .await)?;
        let mut endpoints = Vec::with_capacity(rows.len());
        for (name, json) in rows {
            match serde_json::from_str::<Endpoint>(&json) {
                Ok(endpoint) if endpoint.name == name => endpoints.push(endpoint),
                Ok(_) => tracing::warn!(name, "ignoring a stored endpoint kept under another name"),
                Err(error) => {
                    tracing::warn!(name, %error, "ignoring a stored endpoint that does not decode")
                }
            }
        }
        Ok(endpoints)
    }

    /// Whom the endpoint key `key` speaks for, in any tenant: `None` when no endpoint holds it,
    /// or when the user who issued it is gone (a removed user's keys reach nothing).
    pub async fn endpoint_key_owner(
        &self,
        key: &str,
    ) -> Result<Option<EndpointKeyOwner>, StoreError> {
        let digest = endpoint_key_digest(key);
        let hex = hex_of(&digest);
        // The digest is in the endpoint's JSON as written by `put_endpoint`; each candidate is
        // decoded and checked below.
        let rows: Vec<(String, String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT tenant, name, endpoint_json FROM endpoints WHERE endpoint_json LIKE $1",
        )
        .bind(format!("%\"sha256\":\"{hex}\"%"))
        .fetch_all(pool)
        .await)?;
        for (tenant, name, json) in rows {
            let Ok(endpoint) = serde_json::from_str::<Endpoint>(&json) else {
                continue;
            };
            let Some(kept) = endpoint.key_with(&digest) else {
                continue;
            };
            let tenant =
                switchboard_core::TenantId::new(tenant).map_err(|e| StoreError::Corrupt {
                    server: format!("endpoint {name}"),
                    detail: e.to_string(),
                })?;
            let user = match &kept.user {
                None if tenant.is_default() => None,
                // Another tenant's key with no user would speak for nobody there.
                None => return Ok(None),
                Some(user) => match self.user(&tenant, user).await? {
                    Some(record) => Some(switchboard_core::Principal {
                        tenant: tenant.clone(),
                        user: record.id,
                        role: record.role,
                        groups: Default::default(),
                    }),
                    None => return Ok(None),
                },
            };
            return Ok(Some(EndpointKeyOwner {
                tenant,
                endpoint: name,
                key_id: kept.id.clone(),
                user,
            }));
        }
        Ok(None)
    }

    /// The tenant's endpoint `name`, if there is one.
    pub async fn endpoint(&self, name: &str) -> Result<Option<Endpoint>, StoreError> {
        Ok(self
            .endpoints()
            .await?
            .into_iter()
            .find(|endpoint| endpoint.name == name))
    }

    /// Defines the endpoint `name` as `definition` (checked first), replacing the definition of
    /// one that exists and keeping its keys; whether it is new.
    pub async fn define_endpoint(
        &self,
        name: &str,
        definition: EndpointDefinition,
    ) -> Result<bool, StoreError> {
        let mut endpoint =
            Endpoint::new(name, definition).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let existing = self.endpoint(name).await?;
        let new = existing.is_none();
        if let Some(existing) = existing {
            endpoint.keys = existing.keys;
        }
        self.put_endpoint(&endpoint).await?;
        Ok(new)
    }

    /// Issues a new key for the endpoint `name`: the key (to be shown once; only its digest is
    /// kept) and what is kept of it.
    pub async fn issue_endpoint_key(
        &self,
        name: &str,
    ) -> Result<(String, EndpointKey), StoreError> {
        let mut endpoint = self.endpoint(name).await?.ok_or_else(|| missing(name))?;
        if endpoint.keys.len() >= MAX_KEYS {
            return Err(StoreError::Forbidden(format!(
                "endpoint '{name}' already holds {MAX_KEYS} keys; revoke one first"
            )));
        }
        let key = format!(
            "{ENDPOINT_KEY_PREFIX}{}",
            hex_of(&rand::random::<[u8; 32]>())
        );
        let kept = EndpointKey {
            id: hex_of(&rand::random::<[u8; 4]>()),
            sha256: hex_of(&endpoint_key_digest(&key)),
            issued_at_ms: now_ms(),
            user: self.workspace.user().cloned(),
        };
        endpoint.keys.push(kept.clone());
        self.put_endpoint(&endpoint).await?;
        Ok((key, kept))
    }

    /// Revokes the key `id` of the endpoint `name`.
    pub async fn revoke_endpoint_key(&self, name: &str, id: &str) -> Result<(), StoreError> {
        let mut endpoint = self.endpoint(name).await?.ok_or_else(|| missing(name))?;
        let before = endpoint.keys.len();
        endpoint.keys.retain(|key| key.id != id);
        if endpoint.keys.len() == before {
            return Err(StoreError::Missing(format!(
                "key '{id}' of endpoint '{name}'"
            )));
        }
        self.put_endpoint(&endpoint).await
    }

    /// Stores `endpoint`, replacing the tenant's endpoint of that name.
    async fn put_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        self.tenant_admin_only("endpoints")?;
        let json = serde_json::to_string(endpoint).map_err(|e| StoreError::Corrupt {
            server: format!("endpoint {}", endpoint.name),
            detail: e.to_string(),
        })?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO endpoints (tenant, name, endpoint_json, updated_at_ms)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT(tenant, name) DO UPDATE SET endpoint_json = $3, updated_at_ms = $4",
        )
        .bind(self.workspace.tenant().as_str())
        .bind(&endpoint.name)
        .bind(json)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(drop))?;
        Ok(())
    }

    /// Removes the tenant's endpoint `name` and its keys.
    pub async fn remove_endpoint(&self, name: &str) -> Result<(), StoreError> {
        self.tenant_admin_only("endpoints")?;
        let removed = on_db!(&self.db, pool => sqlx::query(
            "DELETE FROM endpoints WHERE tenant = $1 AND name = $2",
        )
        .bind(self.workspace.tenant().as_str())
        .bind(name)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        if removed == 0 {
            return Err(missing(name));
        }
        Ok(())
    }

    /// Refuses a write of `what` from a workspace that does not manage its tenant.
    fn tenant_admin_only(&self, what: &str) -> Result<(), StoreError> {
        if self.workspace.manages_tenant() {
            Ok(())
        } else {
            Err(StoreError::Forbidden(format!(
                "only a tenant admin can change the tenant's {what}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use switchboard_core::ToolSet;

    use super::*;

    #[tokio::test]
    async fn endpoints_are_defined_keyed_redefined_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let definition = EndpointDefinition {
            description: Some("support".into()),
            servers: [("github".to_owned(), ToolSet::All)].into(),
        };
        assert!(store.define_endpoint("support", definition).await.unwrap());
        let (key, kept) = store.issue_endpoint_key("support").await.unwrap();
        assert!(key.starts_with("sbe_") && key.len() == 68, "{key}");
        let stored = store.endpoint("support").await.unwrap().unwrap();
        assert_eq!(stored.keys, std::slice::from_ref(&kept));
        assert_eq!(
            stored.key_with(&endpoint_key_digest(&key)),
            Some(&kept),
            "known by the digest of the key"
        );
        assert!(
            !serde_json::to_string(&stored).unwrap().contains(&key),
            "the key itself is not kept"
        );
        let only_read = EndpointDefinition {
            description: None,
            servers: [("docs".to_owned(), ToolSet::Only(["read".to_owned()].into()))].into(),
        };
        assert!(
            !store
                .define_endpoint("support", only_read.clone())
                .await
                .unwrap()
        );
        let redefined = store.endpoint("support").await.unwrap().unwrap();
        assert_eq!(redefined.definition, only_read);
        assert_eq!(
            redefined.keys,
            std::slice::from_ref(&kept),
            "a new definition keeps the keys"
        );
        assert!(matches!(
            store.define_endpoint("Bad Name", only_read).await,
            Err(StoreError::Invalid(_))
        ));
        on_db!(&store.db, pool => sqlx::query(
            "INSERT INTO endpoints VALUES ('default', 'broken', '{not json', 0)")
            .execute(pool)
            .await
            .map(drop))
        .unwrap();
        assert_eq!(store.endpoints().await.unwrap().len(), 1, "left out");
        store
            .revoke_endpoint_key("support", &kept.id)
            .await
            .unwrap();
        assert!(matches!(
            store.revoke_endpoint_key("support", &kept.id).await,
            Err(StoreError::Missing(_))
        ));
        store.remove_endpoint("support").await.unwrap();
        assert!(matches!(
            store.remove_endpoint("support").await,
            Err(StoreError::Missing(_))
        ));
        assert!(matches!(
            store.issue_endpoint_key("support").await,
            Err(StoreError::Missing(_))
        ));
    }
}
