//! Approved tool definitions ([`switchboard_core::definitions`]), per server: written as first
//! seen by whichever workspace lists a tool first (the first writer wins, so every replica and
//! workspace compares with the same one), and replaced when someone who may change the server's
//! tool settings accepts a new one.

use switchboard_core::ServerId;
use switchboard_core::definitions::ApprovedDefinition;

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

type Row = (String, String, String, i64, String);

fn approved_of(row: Row) -> Option<ApprovedDefinition> {
    let (tool, sha256, json, approved_at_ms, accepted_by) = row;
    match serde_json::from_str(&json) {
        Ok(definition) => Some(ApprovedDefinition {
            tool,
            sha256,
            definition,
            approved_at_ms: u64::try_from(approved_at_ms).unwrap_or(0),
            accepted_by,
        }),
        Err(error) => {
            tracing::warn!(tool, %error, "ignoring an approved tool definition that does not decode");
            None
        }
    }
}

impl Store {
    /// The approved definitions of the tools of server `id` (as this workspace sees it).
    pub async fn approved_definitions(
        &self,
        id: &ServerId,
    ) -> Result<Vec<ApprovedDefinition>, StoreError> {
        let Some(row) = self.stored_row(id).await? else {
            return Ok(Vec::new());
        };
        let rows: Vec<Row> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT tool, sha256, definition_json, approved_at_ms, accepted_by
             FROM tool_definitions WHERE server_id = $1 ORDER BY tool",
        )
        .bind(&row.key)
        .fetch_all(pool)
        .await)?;
        Ok(rows.into_iter().filter_map(approved_of).collect())
    }

    /// Approves `definitions` of server `id`'s tools as first seen, each only if its tool has
    /// no approved definition yet. Any workspace that sees the server may: it is what the
    /// server listed first, not anyone's decision.
    pub async fn approve_first_seen(
        &self,
        id: &ServerId,
        definitions: &[ApprovedDefinition],
    ) -> Result<(), StoreError> {
        let Some(row) = self.stored_row(id).await? else {
            return Err(StoreError::NotFound(id.clone()));
        };
        let now = now_ms();
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            for approved in definitions {
                sqlx::query(
                    "INSERT INTO tool_definitions
                         (server_id, tool, sha256, definition_json, approved_at_ms, accepted_by)
                     VALUES ($1, $2, $3, $4, $5, '')
                     ON CONFLICT (server_id, tool) DO NOTHING",
                )
                .bind(&row.key)
                .bind(&approved.tool)
                .bind(&approved.sha256)
                .bind(approved.definition.to_string())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Accepts `definition` as the approved one of its tool of server `id`, by `who`: only a
    /// workspace that may change the server (its owner; for a shared server, the tenant's
    /// admins and the operator).
    pub async fn accept_definition(
        &self,
        id: &ServerId,
        definition: &ApprovedDefinition,
        who: &str,
    ) -> Result<(), StoreError> {
        let Some(row) = self.stored_row(id).await? else {
            return Err(StoreError::NotFound(id.clone()));
        };
        let row = self.writable(id, row)?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO tool_definitions
                 (server_id, tool, sha256, definition_json, approved_at_ms, accepted_by)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (server_id, tool) DO UPDATE SET sha256 = $3, definition_json = $4,
                 approved_at_ms = $5, accepted_by = $6",
        )
        .bind(&row.key)
        .bind(&definition.tool)
        .bind(&definition.sha256)
        .bind(definition.definition.to_string())
        .bind(now_ms())
        .bind(who)
        .execute(pool)
        .await
        .map(|_| ()))?;
        Ok(())
    }
}
