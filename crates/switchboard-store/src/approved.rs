//! The commands the operator approves for tenants and members
//! ([`switchboard_core::ApprovedCommand`]): one table for the whole daemon, each command sealed
//! with the default tenant's data key, written only from the local workspace (the operator's).

use switchboard_core::{ApprovedCommand, TenantId};

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

/// What an approved command's sealed document is bound to.
pub(crate) fn command_context(name: &str) -> String {
    format!("approved-command:{name}")
}

impl Store {
    /// Every approved command, by name.
    pub async fn approved_commands(&self) -> Result<Vec<ApprovedCommand>, StoreError> {
        let rows: Vec<(String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT name, sealed_json FROM approved_commands ORDER BY name",
        )
        .fetch_all(pool)
        .await)?;
        let mut commands = Vec::with_capacity(rows.len());
        for (name, sealed) in rows {
            commands.push(self.open_command(&name, &sealed).await?);
        }
        Ok(commands)
    }

    /// The approved command `name`, if there is one.
    pub async fn approved_command(
        &self,
        name: &str,
    ) -> Result<Option<ApprovedCommand>, StoreError> {
        let sealed: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT sealed_json FROM approved_commands WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(pool)
        .await)?;
        match sealed {
            Some(sealed) => Ok(Some(self.open_command(name, &sealed).await?)),
            None => Ok(None),
        }
    }

    /// Approves `command`, replacing one of the same name. Only the operator (the local
    /// workspace) approves commands.
    pub async fn put_approved_command(&self, command: &ApprovedCommand) -> Result<(), StoreError> {
        self.operator_only()?;
        let plain = serde_json::to_string(command).map_err(|e| StoreError::Corrupt {
            server: command.name.clone(),
            detail: e.to_string(),
        })?;
        let sealed = self
            .seal_for(
                &TenantId::default_tenant(),
                &command_context(&command.name),
                &plain,
            )
            .await?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO approved_commands (name, sealed_json, updated_at_ms) VALUES ($1, $2, $3)
             ON CONFLICT(name) DO UPDATE SET sealed_json = $2, updated_at_ms = $3",
        )
        .bind(&command.name)
        .bind(&sealed)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(drop))?;
        Ok(())
    }

    /// Withdraws the approved command `name`; servers made from it no longer start. Returns
    /// whether there was one.
    pub async fn remove_approved_command(&self, name: &str) -> Result<bool, StoreError> {
        self.operator_only()?;
        let removed = on_db!(&self.db, pool => sqlx::query(
            "DELETE FROM approved_commands WHERE name = $1",
        )
        .bind(name)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(removed > 0)
    }

    fn operator_only(&self) -> Result<(), StoreError> {
        match self.workspace.user() {
            None => Ok(()),
            Some(_) => Err(StoreError::Forbidden(
                "only the operator approves the commands stdio servers run".into(),
            )),
        }
    }

    async fn open_command(&self, name: &str, sealed: &str) -> Result<ApprovedCommand, StoreError> {
        let plain = self
            .unseal_for(&TenantId::default_tenant(), &command_context(name), sealed)
            .await?;
        serde_json::from_str(&plain).map_err(|e| StoreError::Corrupt {
            server: name.to_owned(),
            detail: format!("stored approved command: {e}"),
        })
    }

    /// Seals every approved command again under the default tenant's newest data key; returns
    /// how many were (a command changed meanwhile is left as it was written).
    pub(crate) async fn reseal_approved_commands(&self) -> Result<usize, StoreError> {
        let rows: Vec<(String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT name, sealed_json FROM approved_commands",
        )
        .fetch_all(pool)
        .await)?;
        let tenant = TenantId::default_tenant();
        let mut resealed = 0;
        for (name, sealed) in rows {
            let context = command_context(&name);
            let plain = self.unseal_for(&tenant, &context, &sealed).await?;
            let again = self.seal_for(&tenant, &context, &plain).await?;
            let updated = on_db!(&self.db, pool => sqlx::query(
                "UPDATE approved_commands SET sealed_json = $2 WHERE name = $1 AND sealed_json = $3",
            )
            .bind(&name)
            .bind(&again)
            .bind(&sealed)
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
            resealed += usize::try_from(updated).unwrap_or(0);
        }
        Ok(resealed)
    }
}
