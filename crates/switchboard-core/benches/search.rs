//! Criterion benches for tool search: building the index over 10,000 tools, and a query over
//! it, for word queries of a few lengths and a regex. After criterion's figures it prints the
//! latency percentiles of 10,000 queries (p50, p99), which criterion does not report.
//!
//! `cargo bench -p switchboard-core --bench search`; figures are in `docs/benchmarks.md`.

// criterion's macros write the bench's group and `main` functions, without docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use switchboard_core::search::{ToolDocument, ToolIndex};

/// The scale target: 10,000 tools (200 servers of 50).
const SERVERS: usize = 200;
const TOOLS: usize = 50;

const VERBS: &[&str] = &[
    "get", "list", "create", "update", "delete", "search", "send", "read", "write", "sync",
];
const NOUNS: &[&str] = &[
    "issue",
    "page",
    "file",
    "message",
    "event",
    "user",
    "invoice",
    "ticket",
    "repository",
    "document",
    "channel",
    "comment",
    "forecast",
    "order",
    "contact",
    "task",
    "calendar",
    "branch",
    "report",
    "dashboard",
];
const WORDS: &[&str] = &[
    "returns",
    "the",
    "matching",
    "items",
    "for",
    "a",
    "given",
    "query",
    "with",
    "pagination",
    "filters",
    "by",
    "status",
    "owner",
    "date",
    "range",
    "workspace",
    "project",
    "team",
    "label",
];

/// 10,000 tools with names, descriptions and parameters drawn from a small vocabulary, as
/// real catalogs repeat a few verbs and nouns across servers.
fn documents() -> Vec<ToolDocument> {
    let mut documents = Vec::with_capacity(SERVERS * TOOLS);
    for s in 0..SERVERS {
        let server = format!("server-{s}");
        for t in 0..TOOLS {
            let verb = VERBS[(s + t) % VERBS.len()];
            let noun = NOUNS[(s * 7 + t) % NOUNS.len()];
            let name = format!("{verb}_{noun}_{t}");
            let description = (0..24)
                .map(|i| WORDS[(s * 31 + t * 17 + i * 5) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ");
            documents.push(ToolDocument {
                exposed_name: format!("{server}__{name}"),
                upstream_name: name,
                server: server.clone(),
                server_description: format!("Server {s} for {noun}s"),
                title: format!("{verb} {noun}"),
                description: format!("{verb}s a {noun}: {description}"),
                parameters: vec![
                    ("query".into(), "What to look for".into()),
                    (format!("{noun}_id"), format!("The {noun}'s id")),
                ],
                notes: String::new(),
            });
        }
    }
    documents
}

fn search(c: &mut Criterion) {
    let documents = documents();
    c.bench_function("search/build 10k tools", |b| {
        b.iter(|| ToolIndex::new(black_box(documents.clone())))
    });
    let index = ToolIndex::new(documents);
    for query in [
        "invoice",
        "create a github issue",
        "list the comments on a ticket by date",
    ] {
        c.bench_function(&format!("search/10k tools: '{query}'"), |b| {
            b.iter(|| index.search(black_box(query), 10))
        });
    }
    c.bench_function("search/10k tools: regex '^server-1.*invoice'", |b| {
        b.iter(|| index.search_regex(black_box("^server-1.*invoice"), 10))
    });

    // Percentiles over 10,000 queries of every shape, which criterion's means hide.
    let queries = [
        "invoice",
        "create a github issue",
        "list the comments on a ticket by date",
    ];
    let mut took: Vec<f64> = (0..10_000)
        .map(|i| {
            let started = Instant::now();
            black_box(index.search(queries[i % queries.len()], 10));
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    took.sort_by(f64::total_cmp);
    let at = |p: f64| took[((took.len() as f64 * p) as usize).min(took.len() - 1)];
    println!(
        "search/10k tools, 10,000 queries: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        at(0.50),
        at(0.99),
        took[took.len() - 1]
    );
}

criterion_group!(benches, search);
criterion_main!(benches);
