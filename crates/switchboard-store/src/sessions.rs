//! The Streamable HTTP sessions clients opened at `/mcp`, kept so a session outlives the
//! replica (or the process) that opened it: another replica that sees the session's id loads
//! what the client's `initialize` said and takes the session over, with no 404 and no new
//! `initialize` from the client. A session is found only in the workspace it was opened in,
//! and is forgotten once no replica has heard its client for the session's idle time.

use switchboard_core::Workspace;

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

impl Store {
    /// The key of this handle's workspace in the tables kept per workspace (sessions,
    /// catalogs): `local`, or `<tenant>/<user>`.
    pub(crate) fn workspace_key(&self) -> String {
        match &*self.workspace {
            Workspace::Local => "local".to_owned(),
            Workspace::User(principal) => format!("{}/{}", principal.tenant, principal.user),
        }
    }

    /// Records session `id`, opened in this workspace, with what its client's `initialize`
    /// said (`state_json`).
    pub async fn put_mcp_session(&self, id: &str, state_json: &str) -> Result<(), StoreError> {
        let workspace = self.workspace_key();
        let now = now_ms();
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO mcp_sessions (id, workspace, state_json, created_at_ms, seen_at_ms)
             VALUES ($1, $2, $3, $4, $4)
             ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace,
                 state_json = excluded.state_json, created_at_ms = excluded.created_at_ms,
                 seen_at_ms = excluded.seen_at_ms",
        )
        .bind(id)
        .bind(&workspace)
        .bind(state_json)
        .bind(now)
        .execute(pool)
        .await
        .map(|_| ()))?;
        Ok(())
    }

    /// What session `id`'s client said at `initialize`, if the session was opened in this
    /// workspace and not ended since.
    pub async fn mcp_session(&self, id: &str) -> Result<Option<String>, StoreError> {
        let workspace = self.workspace_key();
        let row: Option<(String,)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT state_json FROM mcp_sessions WHERE id = $1 AND workspace = $2",
        )
        .bind(id)
        .bind(&workspace)
        .fetch_optional(pool)
        .await)?;
        Ok(row.map(|(json,)| json))
    }

    /// Notes that this replica heard the clients of sessions `ids` (of this workspace) just now.
    pub async fn heard_mcp_sessions(&self, ids: &[String]) -> Result<(), StoreError> {
        let workspace = self.workspace_key();
        let now = now_ms();
        for id in ids {
            on_db!(&self.db, pool => sqlx::query(
                "UPDATE mcp_sessions SET seen_at_ms = $1 WHERE id = $2 AND workspace = $3",
            )
            .bind(now)
            .bind(id)
            .bind(&workspace)
            .execute(pool)
            .await
            .map(|_| ()))?;
        }
        Ok(())
    }

    /// Forgets session `id` of this workspace (its client ended it).
    pub async fn remove_mcp_session(&self, id: &str) -> Result<(), StoreError> {
        self.remove_mcp_session_quiet_for(id, 0).await
    }

    /// Forgets session `id` of this workspace unless some replica heard its client within the
    /// last `quiet_ms` (this replica found it idle; another may be serving it).
    pub async fn remove_mcp_session_quiet_for(
        &self,
        id: &str,
        quiet_ms: i64,
    ) -> Result<(), StoreError> {
        let workspace = self.workspace_key();
        let before = now_ms().saturating_sub(quiet_ms);
        on_db!(&self.db, pool => sqlx::query(
            "DELETE FROM mcp_sessions WHERE id = $1 AND workspace = $2 AND seen_at_ms <= $3",
        )
        .bind(id)
        .bind(&workspace)
        .bind(before)
        .execute(pool)
        .await
        .map(|_| ()))?;
        Ok(())
    }

    /// Forgets every session, of every workspace, whose client no replica has heard for
    /// `quiet_ms` (sessions of replicas that stopped, whose clients never came back).
    pub async fn forget_mcp_sessions_quiet_for(&self, quiet_ms: i64) -> Result<u64, StoreError> {
        let before = now_ms().saturating_sub(quiet_ms);
        let removed = on_db!(&self.db, pool => sqlx::query(
            "DELETE FROM mcp_sessions WHERE seen_at_ms < $1",
        )
        .bind(before)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(removed)
    }
}
