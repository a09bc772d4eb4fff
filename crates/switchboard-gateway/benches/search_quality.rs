//! Tool search quality on real catalogs (issue 18): recall and MRR of [`ToolIndex::search`]
//! over the dev set in `tests/search`, and what the deferred view saves in tokens.
//!
//! The dev set is the tools real MCP servers list (`tests/search/tools/*.json`, captured by
//! `tests/search/capture.mjs`) and hand-written queries, each labelled with every tool that
//! would be a right answer (`tests/search/queries.json`). A query is *hard* when none of its
//! words shares a stem with a word of a right tool's exposed name. This prints figures; it asserts
//! nothing.
//!
//! `cargo bench -p switchboard-gateway --bench search_quality`; figures are in `docs/benchmarks.md`.
//!
//! - R@k: the share of queries with a right tool among the first k hits (search limit 10).
//! - MRR: the mean over queries of 1 / the rank of the first right tool (0 when none is in the
//!   first 10).
//! - Tokens (o200k_base): the `tools/list` result of the full catalog, `{"tools": [...]}` with
//!   each tool as its server listed it under its exposed name, against the deferred view's own
//!   tools (`switchboard_gateway::mcp::deferred_view_tools`).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rmcp::model::Tool;
use rust_stemmers::{Algorithm, Stemmer};
use serde_json::{Value, json};
use switchboard_core::ServerId;
use switchboard_core::exposure::Exposed;
use switchboard_core::search::{Hit, ToolDocument, ToolIndex, words};
use switchboard_gateway::mcp::deferred_view_tools;
use switchboard_hub::{SentenceEncoder, tool_document};

/// How many hits each query asks for.
const LIMIT: usize = 10;

/// How many of the worst hard queries to print.
const WORST: usize = 10;

/// One server's captured tools.
struct Capture {
    server: String,
    description: String,
    tools: Vec<Value>,
}

/// One labelled query.
struct Query {
    text: String,
    expected: Vec<String>,
    hard: bool,
}

/// A query's outcome: the rank (1-based) of its first right tool in the full ranking, if any
/// right tool matched at all, and the first hits.
struct Outcome<'a> {
    query: &'a Query,
    rank: Option<usize>,
    top: Vec<String>,
}

fn dev_set() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/search")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn captures() -> Vec<Capture> {
    let directory = dev_set().join("tools");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", directory.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let value = read_json(path);
            let text = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
            Capture {
                server: text("server"),
                description: text("description"),
                tools: value["tools"].as_array().cloned().unwrap_or_default(),
            }
        })
        .collect()
}

fn queries() -> Vec<Query> {
    let value = read_json(&dev_set().join("queries.json"));
    value
        .as_array()
        .expect("queries.json holds an array")
        .iter()
        .map(|q| Query {
            text: q["query"].as_str().unwrap_or_default().to_owned(),
            expected: q["expected"]
                .as_array()
                .map(|e| {
                    e.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            hard: q["hard"].as_bool().unwrap_or(false),
        })
        .collect()
}

fn exposed_name(server: &str, tool: &Value) -> String {
    format!("{server}__{}", tool["name"].as_str().unwrap_or_default())
}

/// The index's view of one tool, as the hub builds it for an exposed tool.
fn document(capture: &Capture, tool: &Value) -> ToolDocument {
    let mut item: Tool = serde_json::from_value(tool.clone())
        .unwrap_or_else(|e| panic!("{}: not an MCP tool: {e}", capture.server));
    item.name = exposed_name(&capture.server, tool).into();
    let exposed = Exposed {
        server: ServerId::new(capture.server.clone()).expect("a server id"),
        upstream: tool["name"].as_str().unwrap_or_default().to_owned(),
        item,
    };
    tool_document(&exposed, capture.description.clone())
}

/// Whether `query` is hard by the dev set's definition: no word shares a stem with any word of
/// any right tool's exposed name.
fn is_hard(stemmer: &Stemmer, query: &Query) -> bool {
    let stems = |text: &str| -> HashSet<String> {
        words(text)
            .iter()
            .map(|w| stemmer.stem(w).into_owned())
            .collect()
    };
    let asked = stems(&query.text);
    query
        .expected
        .iter()
        .all(|name| asked.is_disjoint(&stems(name)))
}

/// Where `query`'s first right tool is in `ranking`.
fn outcome(query: &Query, ranking: Vec<Hit>) -> Outcome<'_> {
    let rank = ranking
        .iter()
        .position(|hit| query.expected.contains(&hit.name))
        .map(|p| p + 1);
    Outcome {
        query,
        rank,
        top: ranking.iter().take(3).map(|h| h.name.clone()).collect(),
    }
}

/// The model directory of the semantic stage: `SWITCHBOARD_SEARCH_MODEL`, else the one
/// `tests/py/install.sh` unpacks, if it is there.
fn semantic_model() -> Option<PathBuf> {
    if let Some(directory) = std::env::var_os("SWITCHBOARD_SEARCH_MODEL") {
        return Some(PathBuf::from(directory));
    }
    let unpacked = dev_set().join("../py/models/all-MiniLM-L6-v2");
    unpacked
        .join("model.safetensors")
        .exists()
        .then_some(unpacked)
}

/// R@1, R@5, R@10 and MRR of `outcomes`.
fn figures(outcomes: &[&Outcome<'_>]) -> (f64, f64, f64, f64) {
    let count = outcomes.len().max(1) as f64;
    let within = |k: usize| {
        outcomes
            .iter()
            .filter(|o| o.rank.is_some_and(|r| r <= k))
            .count() as f64
            / count
    };
    let mrr = outcomes
        .iter()
        .map(|o| match o.rank {
            Some(r) if r <= LIMIT => 1.0 / r as f64,
            _ => 0.0,
        })
        .sum::<f64>()
        / count;
    (within(1), within(5), within(10), mrr)
}

fn main() {
    let captures = captures();
    let queries = queries();

    let mut documents = Vec::new();
    let mut catalog = Vec::new();
    for capture in &captures {
        for tool in &capture.tools {
            documents.push(document(capture, tool));
            let mut exposed = tool.clone();
            exposed["name"] = Value::String(exposed_name(&capture.server, tool));
            catalog.push(exposed);
        }
    }
    let known: HashSet<&str> = documents.iter().map(|d| d.exposed_name.as_str()).collect();
    for query in &queries {
        for name in &query.expected {
            assert!(
                known.contains(name.as_str()),
                "query '{}' expects {name}, which no captured server lists",
                query.text
            );
        }
    }
    let tools = documents.len();

    let started = Instant::now();
    let index = ToolIndex::new(documents);
    let built = started.elapsed();

    // Each query's full ranking, so that a miss still says where its right tool ranked; the
    // first LIMIT hits are the same as a search with limit LIMIT returns.
    let started = Instant::now();
    let lexical: Vec<Outcome> = queries
        .iter()
        .map(|query| outcome(query, index.search(&query.text, tools)))
        .collect();
    let searched = started.elapsed();

    // The semantic stage, when the model tests/py/install.sh unpacks (or SWITCHBOARD_SEARCH_MODEL)
    // is there: the same blend `switchboard-hub` ranks with.
    let blended: Option<(Vec<Outcome>, String)> = semantic_model().map(|directory| {
        let encoder = SentenceEncoder::load(&directory)
            .unwrap_or_else(|e| panic!("cannot load {}: {e}", directory.display()));
        let texts: Vec<String> = index
            .documents()
            .iter()
            .map(ToolIndex::semantic_text)
            .collect();
        let started = Instant::now();
        let vectors = encoder
            .encode(&texts.iter().map(String::as_str).collect::<Vec<_>>())
            .expect("tools encode");
        let encoded = started.elapsed();
        let started = Instant::now();
        let outcomes = queries
            .iter()
            .map(|query| {
                let asked = encoder
                    .encode(&[query.text.as_str()])
                    .expect("query encodes");
                let similarity: Vec<f32> = vectors
                    .iter()
                    .map(|tool| tool.iter().zip(&asked[0]).map(|(a, b)| a * b).sum())
                    .collect();
                outcome(query, index.search_blended(&query.text, &similarity, tools))
            })
            .collect();
        let timing = format!(
            "model {}: {tools} tools encoded in {:.1} s; {} queries encoded and ranked in {:.1} s \
             ({:.1} ms each)",
            encoder.name(),
            encoded.as_secs_f64(),
            queries.len(),
            started.elapsed().as_secs_f64(),
            started.elapsed().as_secs_f64() * 1e3 / queries.len().max(1) as f64
        );
        (outcomes, timing)
    });

    let stemmer = Stemmer::create(Algorithm::English);
    let mislabelled: Vec<&Query> = queries
        .iter()
        .filter(|q| q.hard != is_hard(&stemmer, q))
        .collect();

    // The sections after the figures are about the best ranking there is.
    let outcomes: &[Outcome<'_>] = match &blended {
        Some((outcomes, _)) => outcomes,
        None => &lexical,
    };
    let all: Vec<&Outcome<'_>> = outcomes.iter().collect();
    let hard: Vec<&Outcome<'_>> = outcomes.iter().filter(|o| o.query.hard).collect();

    println!("Tool search quality (tests/search)");
    println!(
        "tools {tools}, servers {}, queries {} (hard {})",
        captures.len(),
        queries.len(),
        hard.len()
    );
    println!(
        "index built in {:.1} ms; {} searches in {:.1} ms",
        built.as_secs_f64() * 1e3,
        queries.len(),
        searched.as_secs_f64() * 1e3
    );
    match &blended {
        Some((_, timing)) => println!("{timing}"),
        None => println!(
            "no semantic model (run `bash tests/py/install.sh` or set SWITCHBOARD_SEARCH_MODEL): \
             words only"
        ),
    }
    if !mislabelled.is_empty() {
        println!(
            "warning: {} queries' hard label disagrees with their words:",
            mislabelled.len()
        );
        for q in &mislabelled {
            println!("  '{}' (labelled hard: {})", q.text, q.hard);
        }
    }
    println!();
    println!("| ranking | queries | count | R@1 | R@5 | R@10 | MRR |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut rankings = vec![("words (BM25F)", &lexical)];
    if let Some((outcomes, _)) = &blended {
        rankings.push(("meaning and words", outcomes));
    }
    for (ranking, outcomes) in rankings {
        for (label, hard_only) in [("all", false), ("hard", true)] {
            let set: Vec<&Outcome<'_>> = outcomes
                .iter()
                .filter(|o| !hard_only || o.query.hard)
                .collect();
            let (r1, r5, r10, mrr) = figures(&set);
            println!(
                "| {ranking} | {label} | {} | {r1:.3} | {r5:.3} | {r10:.3} | {mrr:.3} |",
                set.len()
            );
        }
    }

    let bpe = tiktoken_rs::o200k_base_singleton();
    let count = |value: &Value| bpe.encode_ordinary(&value.to_string()).len();
    let full = count(&json!({ "tools": catalog }));
    let deferred = count(&json!({ "tools": deferred_view_tools(tools) }));
    println!();
    println!("tokens (o200k_base) of tools/list: full catalog {full}, deferred view {deferred}");
    println!(
        "the deferred view is {:.2} % of the full catalog ({:.0}x smaller)",
        100.0 * deferred as f64 / full as f64,
        full as f64 / deferred as f64
    );

    // R@5 by the server of each query's right tools (a query counts for each server it names).
    println!();
    println!("R@5 by server (queries naming a tool of the server; hard in brackets):");
    let mut by_server: BTreeMap<&str, (usize, usize, usize, usize)> = BTreeMap::new();
    for outcome in outcomes {
        let found = outcome.rank.is_some_and(|r| r <= 5);
        let servers: HashSet<&str> = outcome
            .query
            .expected
            .iter()
            .filter_map(|n| n.split_once("__").map(|(s, _)| s))
            .collect();
        for server in servers {
            let entry = by_server.entry(server).or_default();
            entry.0 += 1;
            entry.1 += usize::from(found);
            if outcome.query.hard {
                entry.2 += 1;
                entry.3 += usize::from(found);
            }
        }
    }
    for (server, (n, found, hard_n, hard_found)) in &by_server {
        println!("  {server:<20} {found:>3}/{n:<3} ({hard_found}/{hard_n})");
    }

    // Where the misses at 5 are: right tools that share no word with the query at all (the
    // index cannot rank what no query term matches), or matched but outranked.
    println!();
    println!("Misses at 5: right tools matching no query word / ranked 6-10 / ranked below 10:");
    for (label, set) in [("all", &all), ("hard", &hard)] {
        let unmatched = set.iter().filter(|o| o.rank.is_none()).count();
        let near = set
            .iter()
            .filter(|o| o.rank.is_some_and(|r| (6..=LIMIT).contains(&r)))
            .count();
        let far = set
            .iter()
            .filter(|o| o.rank.is_some_and(|r| r > LIMIT))
            .count();
        println!(
            "  {label}: {} missed: {unmatched} / {near} / {far}",
            unmatched + near + far
        );
    }

    // The worst hard queries: unmatched first, then by rank.
    let mut worst: Vec<&Outcome<'_>> = hard.clone();
    worst.sort_by_key(|o| {
        (
            std::cmp::Reverse(o.rank.unwrap_or(usize::MAX)),
            o.query.text.clone(),
        )
    });
    println!();
    println!("The {WORST} worst-ranked hard queries (unmatched ones by name):");
    for outcome in worst.iter().take(WORST) {
        let rank = match outcome.rank {
            Some(r) => format!("rank {r}"),
            None => "not matched (no query word in any right tool)".to_owned(),
        };
        println!("  '{}': {rank}", outcome.query.text);
        println!("      right: {}", outcome.query.expected.join(", "));
        println!("      found: {}", outcome.top.join(", "));
    }
}
