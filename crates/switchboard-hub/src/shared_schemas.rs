//! Tool schemas held once, however many workspaces list them.
//!
//! Every open workspace keeps the catalog of each server it reaches, and the members of a
//! tenant reach the same shared servers: without this, a tenant of 1,000 members would hold
//! each shared tool's input and output schemas (most of what a tool weighs) 1,000 times. A
//! schema equal to one some catalog in the process already holds is replaced by that one's
//! `Arc`. The table keeps weak references only, so a schema no catalog holds any more is freed
//! as before; a server listing a changed schema gets it held as it sent it.
//!
//! Schemas are found by a keyed hash of their JSON text (keys drawn once per process, so a
//! server cannot pick schemas that pile into one bucket) and then compared in full.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use switchboard_upstream::rmcp_model::{JsonObject, Tool};

/// After this many schemas taken, the table drops the entries of schemas freed meanwhile.
const SWEEP_EVERY: usize = 1024;

struct Held {
    keys: RandomState,
    by_digest: HashMap<u64, Vec<Weak<JsonObject>>>,
    taken_since_sweep: usize,
}

static HELD: LazyLock<Mutex<Held>> = LazyLock::new(|| {
    Mutex::new(Held {
        keys: RandomState::new(),
        by_digest: HashMap::new(),
        taken_since_sweep: 0,
    })
});

/// `tool` with its schemas replaced by equal ones already held, where there are any.
pub(crate) fn share_schemas(mut tool: Tool) -> Tool {
    tool.input_schema = shared(tool.input_schema);
    tool.output_schema = tool.output_schema.map(shared);
    tool
}

fn shared(schema: Arc<JsonObject>) -> Arc<JsonObject> {
    // A map of JSON values always serializes; were it ever not to, the schema stays unshared.
    let Ok(text) = serde_json::to_vec(&*schema) else {
        return schema;
    };
    let mut held = crate::lock(&HELD);
    let digest = held.keys.hash_one(&text);
    held.taken_since_sweep += 1;
    if held.taken_since_sweep >= SWEEP_EVERY {
        held.taken_since_sweep = 0;
        held.by_digest.retain(|_, bucket| {
            bucket.retain(|schema| schema.strong_count() > 0);
            !bucket.is_empty()
        });
    }
    let bucket = held.by_digest.entry(digest).or_default();
    bucket.retain(|schema| schema.strong_count() > 0);
    if let Some(same) = bucket
        .iter()
        .filter_map(Weak::upgrade)
        .find(|candidate| **candidate == *schema)
    {
        return same;
    }
    bucket.push(Arc::downgrade(&schema));
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &'static str, schema: serde_json::Value) -> Tool {
        let serde_json::Value::Object(schema) = schema else {
            panic!("a schema is an object");
        };
        Tool::new(name, "a tool", Arc::new(schema))
    }

    #[test]
    fn equal_schemas_listed_by_two_workspaces_are_held_once() {
        let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let first = share_schemas(tool("search", schema.clone()));
        let second = share_schemas(tool("search", schema));
        assert!(Arc::ptr_eq(&first.input_schema, &second.input_schema));
    }

    #[test]
    fn different_schemas_stay_apart() {
        let first = share_schemas(tool(
            "a",
            serde_json::json!({"type": "object", "title": "one"}),
        ));
        let second = share_schemas(tool(
            "b",
            serde_json::json!({"type": "object", "title": "two"}),
        ));
        assert!(!Arc::ptr_eq(&first.input_schema, &second.input_schema));
        assert_eq!(
            second.input_schema.get("title"),
            Some(&serde_json::json!("two"))
        );
    }

    #[test]
    fn a_schema_no_catalog_holds_is_freed() {
        let listed = share_schemas(tool(
            "gone",
            serde_json::json!({"type": "object", "title": "gone"}),
        ));
        let weak = Arc::downgrade(&listed.input_schema);
        drop(listed);
        assert!(weak.upgrade().is_none());
        // Listed again, it is held afresh.
        let again = share_schemas(tool(
            "gone",
            serde_json::json!({"type": "object", "title": "gone"}),
        ));
        assert_eq!(
            again.input_schema.get("title"),
            Some(&serde_json::json!("gone"))
        );
    }
}
