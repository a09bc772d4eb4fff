//! Each server's last known catalog, kept in the store.
//!
//! A server that is down keeps its last catalog in the merged one (its tools listed, searchable,
//! and answered with its state when called), and that holds across restarts too: what a server
//! listed is kept in the store (per workspace: a shared server lists to each user what their own
//! credentials show), loaded when the server's task starts, so a daemon whose server is down at
//! start, or one that connects servers only on first use (`serve --lazy`), lists its tools
//! before connecting. Written only when the catalog changed.

use serde::{Deserialize, Serialize};
use switchboard_core::ServerDefinition;
use switchboard_store::Store;
use switchboard_upstream::rmcp_model::{Prompt, Resource, ResourceTemplate, Tool};

use crate::ServerCatalog;

/// Largest catalog kept (as JSON); a larger one is listed while its server is up, not kept.
const MAX_STORED_CATALOG_BYTES: usize = 4 * 1024 * 1024;

/// A catalog as kept: every tool the server listed (those turned off included: the
/// definition decides again when it is loaded).
#[derive(Serialize, Deserialize)]
struct Kept {
    tools: Vec<Tool>,
    resources: Vec<Resource>,
    resource_templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
}

/// The catalog last kept for `def`'s server, split by `def`'s tool settings; `None` when there
/// is none (or it cannot be read: a catalog is a convenience, never a reason to stay down).
pub(crate) async fn load(store: &Store, def: &ServerDefinition) -> Option<ServerCatalog> {
    let (json, _listed_at) = match store.catalog(&def.id).await {
        Ok(found) => found?,
        Err(error) => {
            tracing::warn!(server = %def.id, %error, "cannot read the server's last known catalog");
            return None;
        }
    };
    let kept: Kept = match serde_json::from_str(&json) {
        Ok(kept) => kept,
        Err(error) => {
            tracing::warn!(server = %def.id, %error, "the server's last known catalog does not decode; ignoring it");
            return None;
        }
    };
    let mut catalog = ServerCatalog {
        resources: kept.resources,
        resource_templates: kept.resource_templates,
        prompts: kept.prompts,
        ..ServerCatalog::default()
    };
    catalog.set_tools(kept.tools, def);
    Some(catalog)
}

/// The order of one server's catalog writes, so an older catalog never overwrites a newer one
/// (each write runs in a task of its own).
#[derive(Default)]
pub(crate) struct Writes {
    /// Numbers the catalogs handed to [`save`].
    next: std::sync::atomic::AtomicU64,
    /// The number of the newest catalog written.
    written: tokio::sync::Mutex<u64>,
}

/// Keeps `catalog` as `def`'s server's last known one, in a task of its own (the connection
/// task does not wait for the store).
pub(crate) fn save(
    store: &Store,
    def: &ServerDefinition,
    catalog: &ServerCatalog,
    writes: &std::sync::Arc<Writes>,
) {
    let kept = Kept {
        tools: catalog.all_tools().cloned().collect(),
        resources: catalog.resources.clone(),
        resource_templates: catalog.resource_templates.clone(),
        prompts: catalog.prompts.clone(),
    };
    let json = match serde_json::to_string(&kept) {
        Ok(json) => json,
        Err(error) => {
            tracing::warn!(server = %def.id, %error, "cannot encode the server's catalog to keep it");
            return;
        }
    };
    if json.len() > MAX_STORED_CATALOG_BYTES {
        tracing::info!(server = %def.id, bytes = json.len(), "the server's catalog is too large to keep");
        return;
    }
    let (store, id, writes) = (store.clone(), def.id.clone(), writes.clone());
    let number = writes
        .next
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    tokio::spawn(async move {
        let mut written = writes.written.lock().await;
        if *written > number {
            return;
        }
        match store.put_catalog(&id, &json).await {
            Ok(()) => *written = number,
            Err(error) => {
                tracing::debug!(server = %id, %error, "cannot keep the server's catalog")
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use switchboard_core::{ServerId, TransportSpec};

    use super::*;

    fn tool(description: &str) -> Tool {
        serde_json::from_value(serde_json::json!({
            "name": "t", "description": description, "inputSchema": {"type": "object"}
        }))
        .unwrap()
    }

    /// What is kept comes back split by the definition; a catalog past the bound (an upstream
    /// server decides its size) is not kept, and the last one kept stays.
    #[tokio::test]
    async fn a_catalog_is_kept_and_loaded_but_never_one_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let def = ServerDefinition::new(
            ServerId::new("s").unwrap(),
            TransportSpec::from_url("http://127.0.0.1:9/mcp", vec![]).unwrap(),
        );
        store.add_server(&def).await.unwrap();
        let writes = Arc::new(Writes::default());
        let description = |catalog: Option<ServerCatalog>| {
            catalog.and_then(|c| c.tools.first().and_then(|t| t.description.clone()))
        };

        let small = ServerCatalog {
            tools: vec![tool("small")],
            ..ServerCatalog::default()
        };
        save(&store, &def, &small, &writes);
        let mut loaded = None;
        for _ in 0..100 {
            loaded = description(load(&store, &def).await);
            if loaded.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(loaded.as_deref(), Some("small"));

        let huge = ServerCatalog {
            tools: vec![tool(&"x".repeat(MAX_STORED_CATALOG_BYTES))],
            ..ServerCatalog::default()
        };
        save(&store, &def, &huge, &writes);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(
            description(load(&store, &def).await).as_deref(),
            Some("small")
        );
    }
}
