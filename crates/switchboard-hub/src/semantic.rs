//! Tool search's semantic stage: each exposed tool's sentence embedding, kept current as the
//! catalog changes, and the query's, so that search ranks by meaning as well as by words.
//!
//! Vectors are computed off the async runtime (tens of milliseconds a tool on a CPU) and kept by
//! the SHA-256 of the text encoded, in memory and in the store, so a restart or a one-shot
//! `switchboard search` computes only what is new. Until every current tool has its vector, a
//! search ranks by words alone and says so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchboard_core::search::ToolIndex;
use switchboard_embed::{EmbedError, SentenceEncoder};
use switchboard_store::Store;
use switchboard_store::{TextDigest, text_digest};

use crate::ExposedCatalog;

/// Why the semantic stage could not run.
#[derive(Debug, thiserror::Error)]
pub enum SemanticError {
    /// The encoder failed.
    #[error(transparent)]
    Encode(#[from] EmbedError),
    /// Stored vectors could not be read or written.
    #[error("cannot read or store tool vectors: {0}")]
    Store(#[from] switchboard_store::StoreError),
    /// The encoding task was cancelled or panicked.
    #[error("the encoding task ended early: {0}")]
    Task(String),
}

/// A sentence encoder and the vectors it made.
pub(crate) struct SemanticSearch {
    encoder: Arc<SentenceEncoder>,
    vectors: Mutex<HashMap<TextDigest, Arc<[f32]>>>,
    /// One catalog is prepared at a time: a second caller waits and then finds the work done.
    preparing: tokio::sync::Mutex<()>,
    /// Why the latest preparation failed, until one succeeds.
    failure: Mutex<Option<String>>,
}

use crate::lock;

impl SemanticSearch {
    pub(crate) fn new(encoder: Arc<SentenceEncoder>) -> Self {
        Self {
            encoder,
            vectors: Mutex::new(HashMap::new()),
            preparing: tokio::sync::Mutex::new(()),
            failure: Mutex::new(None),
        }
    }

    /// The encoder's model name.
    pub(crate) fn model(&self) -> &str {
        self.encoder.name()
    }

    /// The digests and texts of `index`'s tools, in its order.
    fn digests(index: &ToolIndex) -> Vec<(TextDigest, String)> {
        index
            .documents()
            .iter()
            .map(|document| {
                let text = ToolIndex::semantic_text(document);
                (text_digest(&text), text)
            })
            .collect()
    }

    /// Why the latest preparation failed, if it did (and none succeeded since).
    pub(crate) fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// Gives every tool of `catalog` its vector (from memory, else from the store, else
    /// encoded and then stored), and hands the catalog its vectors in index order. A failure
    /// is remembered for [`failure`](Self::failure).
    pub(crate) async fn prepare(
        &self,
        store: &Store,
        catalog: &ExposedCatalog,
    ) -> Result<(), SemanticError> {
        let outcome = self.prepare_once(store, catalog).await;
        *lock(&self.failure) = outcome.as_ref().err().map(ToString::to_string);
        outcome
    }

    async fn prepare_once(
        &self,
        store: &Store,
        catalog: &ExposedCatalog,
    ) -> Result<(), SemanticError> {
        if catalog.tool_vectors.get().is_some() {
            return Ok(());
        }
        let _one_at_a_time = self.preparing.lock().await;
        let all = Self::digests(catalog.search_index());
        let wanted: Vec<(TextDigest, String)> = {
            let vectors = lock(&self.vectors);
            let mut seen = std::collections::HashSet::new();
            all.iter()
                .filter(|(digest, _)| !vectors.contains_key(digest) && seen.insert(*digest))
                .cloned()
                .collect()
        };
        if !wanted.is_empty() {
            let found = self.fetch_or_encode(store, wanted).await?;
            let mut vectors = lock(&self.vectors);
            for (digest, vector) in found {
                vectors.insert(digest, vector.into());
            }
        }
        self.align(catalog, &all);
        Ok(())
    }

    /// Gives `catalog` its tools' vectors (`all`: their digests, in the index's order) if every
    /// one is known already.
    fn align(&self, catalog: &ExposedCatalog, all: &[(TextDigest, String)]) {
        let vectors = lock(&self.vectors);
        let aligned: Option<Vec<Arc<[f32]>>> = all
            .iter()
            .map(|(digest, _)| vectors.get(digest).cloned())
            .collect();
        if let Some(aligned) = aligned {
            let _ = catalog.tool_vectors.set(aligned);
        }
    }

    /// The vectors of `wanted` texts: those the store has, and the rest encoded and stored.
    async fn fetch_or_encode(
        &self,
        store: &Store,
        wanted: Vec<(TextDigest, String)>,
    ) -> Result<Vec<(TextDigest, Vec<f32>)>, SemanticError> {
        let model = self.encoder.name().to_owned();
        let digests: Vec<TextDigest> = wanted.iter().map(|(digest, _)| *digest).collect();
        let stored = store.tool_vectors(&model, &digests).await?;
        let dimensions = self.encoder.dimensions();
        let mut found = Vec::new();
        let mut to_encode = Vec::new();
        for (digest, text) in wanted {
            match stored.get(&digest) {
                Some(vector) if vector.len() == dimensions => found.push((digest, vector.clone())),
                _ => to_encode.push((digest, text)),
            }
        }
        if to_encode.is_empty() {
            return Ok(found);
        }
        tracing::info!(
            tools = to_encode.len(),
            model = %model,
            "encoding tools for semantic search"
        );
        let encoder = self.encoder.clone();
        let texts: Vec<String> = to_encode.iter().map(|(_, text)| text.clone()).collect();
        let encoded = tokio::task::spawn_blocking(move || {
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            encoder.encode(&texts)
        })
        .await
        .map_err(|e| SemanticError::Task(e.to_string()))??;
        let new: Vec<(TextDigest, Vec<f32>)> = to_encode
            .into_iter()
            .map(|(digest, _)| digest)
            .zip(encoded)
            .collect();
        store.put_tool_vectors(&model, &new).await?;
        found.extend(new);
        Ok(found)
    }

    /// Each of `catalog`'s tools' similarity to `query`, in its index's order, or `None` while
    /// the catalog's vectors are not all there yet.
    pub(crate) async fn similarities(
        &self,
        catalog: &ExposedCatalog,
        query: &str,
    ) -> Result<Option<Vec<f32>>, SemanticError> {
        // A catalog rebuilt since the last preparation (the same tools, a new snapshot) takes
        // the vectors known already: only tools never seen wait for theirs.
        if catalog.tool_vectors.get().is_none() {
            self.align(catalog, &Self::digests(catalog.search_index()));
        }
        let Some(tools) = catalog.tool_vectors.get() else {
            return Ok(None);
        };
        let encoder = self.encoder.clone();
        let query = query.to_owned();
        let mut encoded = tokio::task::spawn_blocking(move || encoder.encode(&[query.as_str()]))
            .await
            .map_err(|e| SemanticError::Task(e.to_string()))??;
        let asked = encoded.pop().unwrap_or_default();
        Ok(Some(
            tools
                .iter()
                .map(|tool| tool.iter().zip(&asked).map(|(a, b)| a * b).sum())
                .collect(),
        ))
    }
}
