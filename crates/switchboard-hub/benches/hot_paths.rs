//! Criterion benches for what every relayed request runs through: finding a tool in the merged
//! catalog, mapping names and URIs between their exposed and upstream forms, and the JSON-RPC
//! relay's decode and encode of a `tools/call` on both sides (beside rmcp's generic decoding of
//! the same messages, which the relay's decoding skips for them).
//!
//! `cargo bench -p switchboard-hub --bench hot_paths`; figures are in `docs/benchmarks.md`.

// criterion's macros write the bench's group and `main` functions, without docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use switchboard_core::ServerId;
use switchboard_core::exposure::{Exposed, NameTable, Prefix};
use switchboard_hub::ExposeUris;
use switchboard_hub::model::{
    CallToolResult, ClientJsonRpcMessage, ContentBlock, Resource, ServerJsonRpcMessage,
    ServerResult, Tool,
};

/// The catalog of the scale target: 500 servers of 50 tools each.
const SERVERS: usize = 500;
const TOOLS: usize = 50;

fn catalog() -> NameTable<Tool> {
    let schema: Arc<serde_json::Map<String, serde_json::Value>> = Arc::new(
        serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }))
        .expect("a schema"),
    );
    NameTable::build(
        "tool",
        (0..SERVERS).flat_map(|s| {
            let server = ServerId::new(format!("server-{s}")).expect("a valid id");
            let prefix = Prefix::of_server(&server);
            let schema = schema.clone();
            (0..TOOLS).map(move |t| {
                let upstream = format!("tool_{t}");
                let exposed = prefix.name(&upstream);
                let item = Tool::new(exposed.clone(), "A tool.", schema.clone());
                (
                    exposed,
                    Exposed {
                        server: server.clone(),
                        upstream,
                        item,
                    },
                )
            })
        }),
    )
}

fn catalog_lookup(c: &mut Criterion) {
    let table = catalog();
    assert_eq!(table.len(), SERVERS * TOOLS);
    let mut group = c.benchmark_group("catalog");
    group.bench_function("lookup of 25000 tools, hit", |b| {
        b.iter(|| {
            table
                .get(black_box("server-250__tool_25"))
                .map(|e| &e.upstream)
        })
    });
    group.bench_function("lookup of 25000 tools, miss", |b| {
        b.iter(|| table.get(black_box("server-250__tool_x")).is_none())
    });
    group.finish();
}

fn name_mapping(c: &mut Criterion) {
    let prefix = Prefix::new("github").expect("a valid prefix");
    let mut group = c.benchmark_group("names");
    group.bench_function("expose a tool name", |b| {
        b.iter(|| prefix.name(black_box("create_issue")))
    });
    group.bench_function("expose a resource URI", |b| {
        b.iter(|| prefix.uri(black_box("repo://octo/hello/README.md")))
    });
    group.bench_function("recover an upstream URI", |b| {
        b.iter(|| prefix.original_uri(black_box("repo://github__octo/hello/README.md")))
    });
    let result = CallToolResult::success(vec![
        ContentBlock::text("Created issue #42."),
        ContentBlock::resource_link(Resource::new("repo://octo/hello/issues/42", "issue 42")),
    ]);
    group.bench_function("expose the URIs of a tool result", |b| {
        b.iter_batched(
            || result.clone(),
            |mut result| {
                result.expose_uris(&prefix);
                result
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn relay(c: &mut Criterion) {
    let request = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"github__create_issue","arguments":{"title":"Crash on start","body":"Steps to reproduce: run it."},"_meta":{"progressToken":7}}}"#;
    let response = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Created issue #42."},{"type":"resource_link","uri":"repo://octo/hello/issues/42","name":"issue 42"}],"isError":false}}"#;
    let mut group = c.benchmark_group("relay");
    group.bench_function("decode a tools/call request", |b| {
        b.iter(|| switchboard_upstream::wire::client_message(black_box(request)).is_ok())
    });
    group.bench_function(
        "decode a tools/call request as any client message (rmcp)",
        |b| b.iter(|| serde_json::from_slice::<ClientJsonRpcMessage>(black_box(request)).is_ok()),
    );
    let decoded: ClientJsonRpcMessage = serde_json::from_slice(request).expect("a request");
    group.bench_function("encode a tools/call request", |b| {
        b.iter(|| switchboard_upstream::wire::encode_client_message(black_box(&decoded)))
    });
    group.bench_function("encode a tools/call request (rmcp)", |b| {
        b.iter(|| serde_json::to_vec(black_box(&decoded)))
    });
    // A call carrying a document: what is done per byte of the arguments shows.
    let document = serde_json::json!({
        "jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {
            "name": "notion__create_page",
            "arguments": {
                "title": "Notes",
                "blocks": (0..200)
                    .map(|n| serde_json::json!({"type": "paragraph", "n": n, "text": "Lorem ipsum dolor sit amet, consectetur adipiscing elit."}))
                    .collect::<Vec<_>>(),
            },
            "_meta": {"progressToken": 8},
        },
    });
    let large = serde_json::to_vec(&document).expect("a request");
    group.bench_function("decode a 20 KB tools/call request", |b| {
        b.iter(|| switchboard_upstream::wire::client_message(black_box(&large)).is_ok())
    });
    group.bench_function("decode a 20 KB tools/call request (rmcp)", |b| {
        b.iter(|| serde_json::from_slice::<ClientJsonRpcMessage>(black_box(&large)).is_ok())
    });
    let large: ClientJsonRpcMessage = serde_json::from_slice(&large).expect("a request");
    group.bench_function("encode a 20 KB tools/call request", |b| {
        b.iter(|| switchboard_upstream::wire::encode_client_message(black_box(&large)))
    });
    group.bench_function("encode a 20 KB tools/call request (rmcp)", |b| {
        b.iter(|| serde_json::to_vec(black_box(&large)))
    });
    let response_text = std::str::from_utf8(response).expect("UTF-8");
    group.bench_function("decode a tools/call response", |b| {
        b.iter(|| switchboard_upstream::wire::call_reply(black_box(response_text)).is_ok())
    });
    group.bench_function(
        "decode a tools/call response as any server message (rmcp)",
        |b| b.iter(|| serde_json::from_slice::<ServerJsonRpcMessage>(black_box(response)).is_ok()),
    );
    let ServerJsonRpcMessage::Response(answer) =
        serde_json::from_slice(response).expect("a response")
    else {
        panic!("the fixture is a response");
    };
    assert!(matches!(answer.result, ServerResult::CallToolResult(_)));
    let answer = ServerJsonRpcMessage::Response(answer);
    group.bench_function("encode a tools/call response", |b| {
        b.iter(|| serde_json::to_vec(black_box(&answer)).map(|v| v.len()))
    });
    group.finish();
}

criterion_group!(hot_paths, catalog_lookup, name_mapping, relay);
criterion_main!(hot_paths);
