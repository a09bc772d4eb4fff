//! A user's own settings for the servers their tenant shares (the user layer of a server's
//! configuration): their credentials for it and the tools they pin, read over the shared
//! definition wherever their workspace reads it.

use switchboard_core::{ServerId, UserServerSettings};

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

/// What a user's sealed settings for a server are bound to: the tenant, the user and the server.
pub(crate) fn settings_context(tenant: &str, user: &str, server: &str) -> String {
    format!("user-settings:{tenant}/{user}/{server}")
}

impl Store {
    /// This workspace's user's own settings for the shared server `id`, if any.
    pub async fn my_settings(
        &self,
        id: &ServerId,
    ) -> Result<Option<UserServerSettings>, StoreError> {
        let Some(user) = self.workspace.user() else {
            return Ok(None);
        };
        let tenant = self.workspace.tenant();
        let sealed: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT settings_sealed FROM user_server_settings
             WHERE tenant = $1 AND user_id = $2 AND server_name = $3",
        )
        .bind(tenant.as_str())
        .bind(user.as_str())
        .bind(id.as_str())
        .fetch_optional(pool)
        .await)?;
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        let context = settings_context(tenant.as_str(), user.as_str(), id.as_str());
        let plain = self.unseal_for(&tenant, &context, &sealed).await?;
        serde_json::from_str(&plain)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                server: id.to_string(),
                detail: format!("stored user settings: {e}"),
            })
    }

    /// Stores this workspace's user's own settings for the shared server `id` (empty settings
    /// are forgotten). Only a user's workspace has them, and only for a server the tenant
    /// shares: one's own server is changed directly.
    pub async fn put_my_settings(
        &self,
        id: &ServerId,
        settings: &UserServerSettings,
    ) -> Result<(), StoreError> {
        let Some(user) = self.workspace.user() else {
            return Err(StoreError::Forbidden(
                "only a user's workspace has settings of its own (serve --users)".into(),
            ));
        };
        let tenant = self.workspace.tenant();
        let Some(row) = self.stored_row(id).await? else {
            return Err(StoreError::NotFound(id.clone()));
        };
        if !row.owner.is_empty() {
            return Err(StoreError::Forbidden(format!(
                "server '{id}' is your own: change it directly"
            )));
        }
        // A shared server the member's grants leave out is not there for them.
        if self
            .reach()
            .await?
            .is_some_and(|reach| reach.server(id.as_str()).is_none())
        {
            return Err(StoreError::NotFound(id.clone()));
        }
        // The settings must fit the server (no header it sets itself, none on a built-in one),
        // and a stdio server's variables are the operator's to choose: a user sets only those
        // the server's approved command leaves to users (`PATH`, `LD_PRELOAD` or
        // `NODE_OPTIONS` would choose what runs).
        if let Some(mut shared) = self.shared_definition(id).await? {
            let names = || settings.values.iter().map(|v| v.name.as_str());
            match &shared.transport {
                switchboard_core::TransportSpec::Stdio { .. } if !settings.values.is_empty() => {
                    return Err(StoreError::Forbidden(format!(
                        "server '{id}' runs a command the operator defined, which takes no variables from users; the operator can approve a command that lets you set them (switchboard commands add --user-env)"
                    )));
                }
                switchboard_core::TransportSpec::Approved { name, .. } => {
                    let command = self.approved_command(name).await?.ok_or_else(|| {
                        StoreError::Forbidden(
                            switchboard_core::ApprovalError::Unknown(name.clone()).to_string(),
                        )
                    })?;
                    command
                        .check_user_variables(names())
                        .map_err(|e| StoreError::Forbidden(e.to_string()))?;
                }
                _ => {}
            }
            settings.apply(&mut shared).map_err(StoreError::Forbidden)?;
        }
        if settings.is_empty() {
            on_db!(&self.db, pool => sqlx::query(
                "DELETE FROM user_server_settings
                 WHERE tenant = $1 AND user_id = $2 AND server_name = $3",
            )
            .bind(tenant.as_str())
            .bind(user.as_str())
            .bind(id.as_str())
            .execute(pool)
            .await
            .map(drop))?;
            return Ok(());
        }
        let plain = serde_json::to_string(settings).map_err(|e| StoreError::Corrupt {
            server: id.to_string(),
            detail: e.to_string(),
        })?;
        let context = settings_context(tenant.as_str(), user.as_str(), id.as_str());
        let sealed = self.seal_for(&tenant, &context, &plain).await?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO user_server_settings
                 (tenant, user_id, server_name, settings_sealed, updated_at_ms)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT(tenant, user_id, server_name)
             DO UPDATE SET settings_sealed = $4, updated_at_ms = $5",
        )
        .bind(tenant.as_str())
        .bind(user.as_str())
        .bind(id.as_str())
        .bind(&sealed)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(drop))?;
        Ok(())
    }

    /// The shared server `id` as the tenant defines it, without any user's settings.
    async fn shared_definition(
        &self,
        id: &ServerId,
    ) -> Result<Option<switchboard_core::ServerDefinition>, StoreError> {
        let tenant = self.workspace.tenant();
        let row: Option<crate::ServerRow> = on_db!(&self.db, pool => sqlx::query_as(&format!(
            "{} AND owner = '' AND name = $3",
            crate::SELECT_SERVER_COLUMNS
        ))
        .bind(tenant.as_str())
        .bind("")
        .bind(id.as_str())
        .fetch_optional(pool)
        .await)?;
        match row {
            Some(row) => Ok(Some(self.decode_server(row).await?)),
            None => Ok(None),
        }
    }
}
