//! Stored activation layers (which servers and tools are on for the app, a user, a thread).
//!
//! A workspace sees its tenant's app layer, its user's layer and its user's threads. The local
//! workspace's layers keep the keys they always had (`app`, `user:<id>`, `thread:<id>`, all in
//! the default tenant); another tenant's are `<tenant>/app` and `<tenant>/user:<id>`, and a
//! signed-in user's threads `<tenant>/<user>/thread:<id>`, so two users' threads of one name
//! are two layers.

use switchboard_core::{Activation, Workspace};

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

impl Store {
    /// Every stored layer, by scope (`app`, `user:<id>`, `thread:<id>`). A row that does not
    /// decode is left out with a warning: a layer is a preference, not a reason to stay down.
    pub async fn activations(&self) -> Result<Vec<(String, Activation)>, StoreError> {
        let rows: Vec<(String, String)> = match &*self.workspace {
            Workspace::Local => on_db!(&self.db, pool => sqlx::query_as(
                "SELECT scope, activation_json FROM activations WHERE scope NOT LIKE '%/%'
                 ORDER BY scope",
            )
            .fetch_all(pool)
            .await)?,
            Workspace::User(principal) => {
                let app = self.stored_scope("app")?;
                let user = self.stored_scope(&format!("user:{}", principal.user))?;
                let threads = self.stored_scope("thread:")?;
                on_db!(&self.db, pool => sqlx::query_as(
                    "SELECT scope, activation_json FROM activations
                     WHERE scope = $1 OR scope = $2 OR substr(scope, 1, length($3)) = $3
                     ORDER BY scope",
                )
                .bind(&app)
                .bind(&user)
                .bind(&threads)
                .fetch_all(pool)
                .await)?
            }
        };
        let mut layers = Vec::with_capacity(rows.len());
        for (stored, json) in rows {
            let scope = self.workspace_scope(&stored);
            match serde_json::from_str(&json) {
                Ok(activation) => layers.push((scope, activation)),
                Err(error) => {
                    tracing::warn!(scope, %error, "ignoring a stored activation that does not decode")
                }
            }
        }
        layers.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(layers)
    }

    /// Stores the layer of `scope`; a layer that says nothing is deleted.
    pub async fn put_activation(
        &self,
        scope: &str,
        activation: &Activation,
    ) -> Result<(), StoreError> {
        if scope == "app" && !self.workspace.manages_tenant() {
            return Err(StoreError::Forbidden(
                "only a tenant admin can change the tenant's app layer".into(),
            ));
        }
        let scope = &self.stored_scope(scope)?;
        if activation.is_empty() {
            on_db!(&self.db, pool => sqlx::query("DELETE FROM activations WHERE scope = $1")
                .bind(scope)
                .execute(pool)
                .await
                .map(|done| done.rows_affected()))?;
            return Ok(());
        }
        let json = serde_json::to_string(activation).map_err(|e| StoreError::Corrupt {
            server: format!("activation {scope}"),
            detail: e.to_string(),
        })?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO activations (scope, activation_json, updated_at_ms) VALUES ($1, $2, $3)
             ON CONFLICT(scope) DO UPDATE SET activation_json = $2, updated_at_ms = $3",
        )
        .bind(scope)
        .bind(json)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(())
    }
}

impl Store {
    /// The key of this workspace's layer `scope` in the table.
    fn stored_scope(&self, scope: &str) -> Result<String, StoreError> {
        let Workspace::User(principal) = &*self.workspace else {
            return Ok(scope.to_owned());
        };
        let tenant = if principal.tenant.is_default() {
            String::new()
        } else {
            format!("{}/", principal.tenant)
        };
        match scope.split_once(':') {
            None if scope == "app" => Ok(format!("{tenant}app")),
            Some(("user", id)) if id == principal.user.as_str() => Ok(format!("{tenant}{scope}")),
            Some(("user", _)) => Err(StoreError::Forbidden(
                "a user's activation layer is theirs alone".into(),
            )),
            Some(("thread", _)) => Ok(format!("{}/{}/{scope}", principal.tenant, principal.user)),
            _ => Ok(format!("{}/{}/{scope}", principal.tenant, principal.user)),
        }
    }

    /// The layer name this workspace knows a stored key by.
    fn workspace_scope(&self, stored: &str) -> String {
        match &*self.workspace {
            Workspace::Local => stored.to_owned(),
            Workspace::User(_) => stored.rsplit('/').next().unwrap_or(stored).to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn layers_are_stored_and_an_empty_one_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let mut thread = Activation::default();
        thread.servers.insert("github".into(), true);
        store.put_activation("thread:t1", &thread).await.unwrap();
        store
            .put_activation("app", &Activation::default())
            .await
            .unwrap();
        assert_eq!(
            store.activations().await.unwrap(),
            [("thread:t1".to_owned(), thread)]
        );
        store
            .put_activation("thread:t1", &Activation::default())
            .await
            .unwrap();
        assert!(store.activations().await.unwrap().is_empty());
        on_db!(&store.db, pool => sqlx::query("INSERT INTO activations VALUES ('user:x', '{not json', 0)")
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))
            .unwrap();
        assert!(store.activations().await.unwrap().is_empty(), "left out");
    }
}
