//! Stored activation layers (which servers and tools are on for the app, a user, a thread).

use switchboard_core::Activation;

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

impl Store {
    /// Every stored layer, by scope (`app`, `user:<id>`, `thread:<id>`). A row that does not
    /// decode is left out with a warning: a layer is a preference, not a reason to stay down.
    pub async fn activations(&self) -> Result<Vec<(String, Activation)>, StoreError> {
        let rows: Vec<(String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT scope, activation_json FROM activations ORDER BY scope",
        )
        .fetch_all(pool)
        .await)?;
        let mut layers = Vec::with_capacity(rows.len());
        for (scope, json) in rows {
            match serde_json::from_str(&json) {
                Ok(activation) => layers.push((scope, activation)),
                Err(error) => {
                    tracing::warn!(scope, %error, "ignoring a stored activation that does not decode")
                }
            }
        }
        Ok(layers)
    }

    /// Stores the layer of `scope`; a layer that says nothing is deleted.
    pub async fn put_activation(
        &self,
        scope: &str,
        activation: &Activation,
    ) -> Result<(), StoreError> {
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
