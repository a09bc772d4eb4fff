//! Tool search by meaning (the model `tests/py/install.sh` unpacks into
//! `tests/py/models/all-MiniLM-L6-v2`) over the hub's merged catalog, which is rebuilt as a new
//! snapshot whenever a server's state or catalog moves.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_hub::{Hub, Ranking, SentenceEncoder};
use switchboard_store::Store;
use switchboard_upstream::ConnectOptions;

fn model() -> Arc<SentenceEncoder> {
    let directory =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/models/all-MiniLM-L6-v2");
    assert!(
        directory.join("model.safetensors").exists(),
        "{} has no model: run `bash tests/py/install.sh` (scripts/test does)",
        directory.display()
    );
    Arc::new(SentenceEncoder::load(&directory).unwrap())
}

/// A search prepared for one snapshot of the catalog still ranks by meaning when the catalog
/// was rebuilt in between (a server's state moved): the new snapshot takes the vectors known
/// for its tools, rather than falling back to words, which a question sharing none with any
/// tool would find nothing by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_rebuilt_after_its_vectors_were_prepared_is_still_searched_by_meaning() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let hub = Hub::builder(store, ConnectOptions::new("test"))
        .semantic_search(Some(model()))
        .build();
    let binary = switchboard_fixtures::stdio_fixture_binary();
    hub.start(ServerDefinition::new(
        ServerId::new("fixture").unwrap(),
        TransportSpec::stdio(binary.display().to_string(), vec![], vec![], None).unwrap(),
    ))
    .await;
    hub.wait_settled(Duration::from_secs(20), |_| {}).await;
    hub.rebuild_exposed();
    hub.prepare_semantic_search().await.unwrap();

    hub.rebuild_exposed();
    let found = hub
        .search_tools("what is the sum of 17 and 25", 3, false, None)
        .await
        .unwrap();
    assert_eq!(found.ranking, Ranking::Blended, "{:?}", found.note);
    assert_eq!(
        found.tools.first().map(|tool| tool.name.as_str()),
        Some("fixture__add")
    );
}
