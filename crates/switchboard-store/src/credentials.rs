//! OAuth credentials in the store: the `CredentialStore` the sign-in layer persists through.
//!
//! A grant (access and refresh token, DPoP key, where to refresh) and a client registration
//! (client id and secret) are each sealed as one JSON document, bound by the vault to their key,
//! so a row copied to another server or issuer does not open. Writes commit before they return
//! (SQLite's FULL synchronous mode), which is what lets a rotated refresh token be saved before
//! it is used.

use futures::future::BoxFuture;
use sqlx::Row;
use switchboard_oauth::{ClientRegistration, CredentialStore, GrantKey, OAuthError, StoredGrant};

use crate::{Store, StoreError, now_ms};

fn grant_context(key: &GrantKey) -> String {
    format!("oauth-grant:{}/{}", key.server, key.principal)
}

fn client_context(issuer: &str) -> String {
    format!("oauth-client:{issuer}")
}

fn store_error(error: impl std::fmt::Display) -> OAuthError {
    OAuthError::Store(error.to_string())
}

impl Store {
    /// The grant stored for `key`, opened.
    pub async fn oauth_grant(&self, key: &GrantKey) -> Result<Option<StoredGrant>, StoreError> {
        let row = sqlx::query(
            "SELECT sealed_json FROM oauth_grants WHERE server_id = ?1 AND principal = ?2",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let plain = self
            .vault
            .unseal(&grant_context(key), row.try_get("sealed_json")?)?;
        serde_json::from_str(&plain)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                server: key.server.clone(),
                detail: format!("stored OAuth tokens: {e}"),
            })
    }

    /// Stores (replaces) the grant for `key`.
    pub async fn put_oauth_grant(
        &self,
        key: &GrantKey,
        grant: &StoredGrant,
    ) -> Result<(), StoreError> {
        let plain = serde_json::to_string(grant).map_err(|e| StoreError::Corrupt {
            server: key.server.clone(),
            detail: e.to_string(),
        })?;
        sqlx::query(
            "INSERT INTO oauth_grants (server_id, principal, sealed_json, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(server_id, principal) DO UPDATE SET sealed_json = ?3, updated_at_ms = ?4",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .bind(self.vault.seal(&grant_context(key), &plain))
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Forgets the grant for `key`.
    pub async fn delete_oauth_grant(&self, key: &GrantKey) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM oauth_grants WHERE server_id = ?1 AND principal = ?2")
            .bind(&key.server)
            .bind(&key.principal)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The client registration held at `issuer`, opened.
    pub async fn oauth_client(
        &self,
        issuer: &str,
    ) -> Result<Option<ClientRegistration>, StoreError> {
        let row = sqlx::query("SELECT sealed_json FROM oauth_clients WHERE issuer = ?1")
            .bind(issuer)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let plain = self
            .vault
            .unseal(&client_context(issuer), row.try_get("sealed_json")?)?;
        serde_json::from_str(&plain)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                server: issuer.to_owned(),
                detail: format!("stored client registration: {e}"),
            })
    }

    /// Stores a client registration under its issuer.
    pub async fn put_oauth_client(
        &self,
        registration: &ClientRegistration,
    ) -> Result<(), StoreError> {
        let plain = serde_json::to_string(registration).map_err(|e| StoreError::Corrupt {
            server: registration.issuer.clone(),
            detail: e.to_string(),
        })?;
        sqlx::query(
            "INSERT INTO oauth_clients (issuer, sealed_json, updated_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(issuer) DO UPDATE SET sealed_json = ?2, updated_at_ms = ?3",
        )
        .bind(&registration.issuer)
        .bind(
            self.vault
                .seal(&client_context(&registration.issuer), &plain),
        )
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

impl CredentialStore for Store {
    fn load_grant<'a>(
        &'a self,
        key: &'a GrantKey,
    ) -> BoxFuture<'a, Result<Option<StoredGrant>, OAuthError>> {
        Box::pin(async move { self.oauth_grant(key).await.map_err(store_error) })
    }

    fn save_grant<'a>(
        &'a self,
        key: &'a GrantKey,
        grant: &'a StoredGrant,
    ) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move { self.put_oauth_grant(key, grant).await.map_err(store_error) })
    }

    fn delete_grant<'a>(&'a self, key: &'a GrantKey) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move { self.delete_oauth_grant(key).await.map_err(store_error) })
    }

    fn load_client<'a>(
        &'a self,
        issuer: &'a str,
    ) -> BoxFuture<'a, Result<Option<ClientRegistration>, OAuthError>> {
        Box::pin(async move { self.oauth_client(issuer).await.map_err(store_error) })
    }

    fn save_client<'a>(
        &'a self,
        registration: &'a ClientRegistration,
    ) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            self.put_oauth_client(registration)
                .await
                .map_err(store_error)
        })
    }
}
