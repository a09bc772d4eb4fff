//! `docs/openapi.json` tells the truth about the router: every operation it lists is routed
//! (a request for it reaches a handler, not axum's "no route" or "method not allowed"), and
//! every path the router serves is listed.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::Value;
use switchboard_gateway::{Access, mcp, router};
use tower::ServiceExt;

fn repository_file(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn spec() -> Value {
    serde_json::from_str(&repository_file("docs/openapi.json")).expect("openapi.json is JSON")
}

#[tokio::test]
async fn every_documented_operation_reaches_a_handler() {
    let dir = tempfile::tempdir().unwrap();
    let store = switchboard_store::Store::open(dir.path()).await.unwrap();
    let hub = switchboard_hub::Hub::new(store, switchboard_upstream::ConnectOptions::new("test"));
    let addr: SocketAddr = "127.0.0.1:8750".parse().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let app = router(
        mcp::Shared::new(hub),
        addr,
        Access::loopback(),
        stop.clone(),
    );
    let spec = spec();
    let paths = spec["paths"].as_object().expect("paths");
    let mut checked = 0;
    for (path, operations) in paths {
        let concrete = path
            .replace("{id}", "nope")
            .replace("{tool}", "t")
            .replace("{kind}", "users");
        for method in operations.as_object().unwrap().keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let request = Request::builder()
                .method(method.clone())
                .uri(&concrete)
                .header("host", "127.0.0.1:8750")
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(Body::from("{}"))
                .unwrap();
            let response = app.clone().oneshot(request).await.unwrap();
            let status = response.status();
            // Streams (events, MCP) are not read: their status says enough.
            let streams = response
                .headers()
                .get("content-type")
                .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
            let body = if streams {
                axum::body::Bytes::from_static(b"a stream")
            } else {
                axum::body::to_bytes(response.into_body(), 1 << 20)
                    .await
                    .unwrap_or_default()
            };
            assert_ne!(
                status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path} is documented but not routed"
            );
            assert!(
                !(status == StatusCode::NOT_FOUND && body.is_empty()),
                "{method} {path} is documented but no route serves it"
            );
            checked += 1;
        }
    }
    stop.cancel();
    assert!(checked >= 30, "only {checked} operations checked");
}

/// The paths the router's source declares: string literals and the path constants in its
/// `.route(...)` and `.route_service(...)` calls.
fn routed_paths() -> BTreeSet<String> {
    let constants = [
        ("mcp::http::MCP_PATH", "/mcp"),
        ("SSE_PATH", "/sse"),
        ("MESSAGE_PATH", "/message"),
        ("oauth::CALLBACK_PATH", "/oauth/callback"),
        ("endpoints::MCP_PATH", "/mcp/e/{endpoint}"),
        ("crate::endpoints::SSE_PATH", "/sse/e/{endpoint}"),
        ("crate::endpoints::MESSAGE_PATH", "/message/e/{endpoint}"),
    ];
    let mut found = BTreeSet::new();
    for file in [
        "crates/switchboard-gateway/src/router.rs",
        "crates/switchboard-gateway/src/mcp/legacy_sse.rs",
    ] {
        let source = repository_file(file);
        for call in source.split(".route").skip(1) {
            let argument = call
                .trim_start_matches("_service")
                .trim_start_matches('(')
                .trim_start();
            if let Some(literal) = argument.strip_prefix('"') {
                found.insert(literal.split('"').next().unwrap_or_default().to_owned());
            } else if let Some((_, path)) = constants.iter().find(|(c, _)| argument.starts_with(c))
            {
                found.insert((*path).to_owned());
            } else {
                panic!(
                    "{file}: a route whose path this test cannot read: {}",
                    argument.chars().take(40).collect::<String>()
                );
            }
        }
    }
    found
}

#[test]
fn every_routed_path_is_documented() {
    let spec = spec();
    let documented: BTreeSet<String> = spec["paths"].as_object().unwrap().keys().cloned().collect();
    let routed = routed_paths();
    assert!(routed.len() >= 20, "{routed:?}");
    let missing: Vec<_> = routed.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "routed but not in docs/openapi.json: {missing:?}"
    );
}
