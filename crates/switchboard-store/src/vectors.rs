//! Stored sentence embeddings of tools (tool search's semantic stage), so that they are
//! computed once per model and text, not at every start.

use std::collections::HashMap;

use crate::db::on_db;
use crate::{Store, StoreError};

/// The SHA-256 of a text a vector was computed from: its key in the store.
pub type TextDigest = [u8; 32];

/// The key of `text`'s vector.
pub fn text_digest(text: &str) -> TextDigest {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

impl Store {
    /// The stored vectors of `model` for every digest in `digests` that has one.
    pub async fn tool_vectors(
        &self,
        model: &str,
        digests: &[TextDigest],
    ) -> Result<HashMap<TextDigest, Vec<f32>>, StoreError> {
        let mut found = HashMap::new();
        // SQLite binds at most 32766 parameters; stay far below.
        for chunk in digests.chunks(500) {
            let placeholders: Vec<String> = (2..chunk.len() + 2).map(|n| format!("${n}")).collect();
            let sql = format!(
                "SELECT text_sha256, vector FROM tool_vectors
                 WHERE model = $1 AND text_sha256 IN ({})",
                placeholders.join(", ")
            );
            let rows: Vec<(Vec<u8>, Vec<u8>)> = on_db!(&self.db, pool => {
                let mut query = sqlx::query_as(&sql).bind(model);
                for digest in chunk {
                    query = query.bind(digest.as_slice());
                }
                query.fetch_all(pool).await
            })?;
            for (digest, bytes) in rows {
                // A row of the wrong shape is ignored: the vector is computed again.
                if let (Ok(digest), true) =
                    (TextDigest::try_from(digest), bytes.len().is_multiple_of(4))
                {
                    let vector = bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    found.insert(digest, vector);
                }
            }
        }
        Ok(found)
    }

    /// Stores vectors of `model`, replacing any for the same digests.
    pub async fn put_tool_vectors(
        &self,
        model: &str,
        vectors: &[(TextDigest, Vec<f32>)],
    ) -> Result<(), StoreError> {
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            for (digest, vector) in vectors {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                sqlx::query(
                    "INSERT INTO tool_vectors (model, text_sha256, vector) VALUES ($1, $2, $3)
                     ON CONFLICT(model, text_sha256) DO UPDATE SET vector = $3",
                )
                .bind(model)
                .bind(digest.as_slice())
                .bind(bytes)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn vectors_are_kept_per_model_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let (a, b) = (text_digest("read a file"), text_digest("send a message"));
        store
            .put_tool_vectors("m1", &[(a, vec![0.5, -1.25]), (b, vec![2.0, 0.0])])
            .await
            .unwrap();
        let found = store.tool_vectors("m1", &[a, b]).await.unwrap();
        assert_eq!(found[&a], [0.5, -1.25]);
        assert_eq!(found[&b], [2.0, 0.0]);
        assert!(store.tool_vectors("m2", &[a]).await.unwrap().is_empty());
        store
            .put_tool_vectors("m1", &[(a, vec![1.0])])
            .await
            .unwrap();
        assert_eq!(store.tool_vectors("m1", &[a]).await.unwrap()[&a], [1.0]);
    }
}
