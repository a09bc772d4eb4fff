//! Tool search quality on real catalogs (issue 18): recall and MRR of [`ToolIndex::search`]
//! over the dev set in `tests/search`, and what the deferred view saves in tokens.
//!
//! The dev set is the tools real MCP servers list (`tests/search/tools/*.json`, captured by
//! `tests/search/capture.mjs`) and hand-written queries, each labelled with every tool that
//! would be a right answer (`tests/search/queries.json`). A query is *hard* when none of its
//! words shares a stem with a word of a right tool's exposed name. This prints figures; it asserts
//! nothing.
//!
//! The queries fall in two halves by the first byte of the SHA-256 of their text: even bytes
//! are the *tuning* half, odd ones the *test* half. Weights and choices of the ranking are tuned
//! on the tuning half only; the figures to report are the test half's. The diagnostics after the
//! figures (by server, misses, worst queries) look at the tuning half only, so that reading them
//! never tunes on the test half.
//!
//! `cargo bench -p switchboard-gateway --bench search_quality`; figures are in `docs/benchmarks.md`.
//!
//! - R@k: the share of queries with a right tool among the first k hits (search limit 10).
//! - MRR: the mean over queries of 1 / the rank of the first right tool (0 when none is in the
//!   first 10).
//! - Tokens (o200k_base): the `tools/list` result of the full catalog, `{"tools": [...]}` with
//!   each tool as its server listed it under its exposed name, against the deferred view's own
//!   tools (`switchboard_gateway::mcp::deferred_view_tools`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rmcp::model::Tool;
use rust_stemmers::{Algorithm, Stemmer};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_core::ServerId;
use switchboard_core::exposure::Exposed;
use switchboard_core::search::{Hit, ToolDocument, ToolIndex, words};
use switchboard_gateway::mcp::{
    WorkingSet, WorkingSetLimits, deferred_view_tools, estimated_tokens, found_result,
};
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
    /// Whether it is in the tuning half (else the test half).
    tuning: bool,
}

/// Whether `text` is in the tuning half: the first byte of its SHA-256 is even.
fn in_tuning_half(text: &str) -> bool {
    Sha256::digest(text.as_bytes())[0] % 2 == 0
}

/// A query's outcome: the rank (1-based) of its first right tool in the full ranking, if any
/// right tool matched at all, and the first hits.
struct Outcome<'a> {
    query: &'a Query,
    rank: Option<usize>,
    /// The first hits' names, best first.
    hits: Vec<String>,
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
            tuning: in_tuning_half(q["query"].as_str().unwrap_or_default()),
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
        hits: ranking.iter().take(LIMIT).map(|h| h.name.clone()).collect(),
    }
}

/// The model directory of the semantic stage: `SWITCHBOARD_SEARCH_MODEL`, else the one
/// `tests/py/install.sh` unpacks, if it is there.
/// How many tools the encoding time of a large catalog is measured on (issue 32's target:
/// ready to search by meaning in under 20 s).
const WIDE_CATALOG: usize = 1_234;

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
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // SAFETY: first thing in `main`, before any other thread exists. The daemon runs the
        // encoder so (see `one_thread_per_encoder_worker` in the switchboard binary).
        unsafe { std::env::set_var("RAYON_NUM_THREADS", "1") };
    }
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
        // A catalog the size of the held-out set's widest (1,234 tools): the dev set's texts
        // again under other server names, so that no text is cached and lengths stay real.
        let wide: Vec<String> = (0..)
            .flat_map(|copy| {
                texts
                    .iter()
                    .map(move |text| format!("copy {copy} of {text}"))
            })
            .take(WIDE_CATALOG)
            .collect();
        let started = Instant::now();
        encoder
            .encode(&wide.iter().map(String::as_str).collect::<Vec<_>>())
            .expect("tools encode");
        let wide_encoded = started.elapsed();
        let mut latencies = Vec::with_capacity(queries.len());
        let outcomes = queries
            .iter()
            .map(|query| {
                let started = Instant::now();
                let asked = encoder
                    .encode(&[query.text.as_str()])
                    .expect("query encodes");
                let similarity: Vec<f32> = vectors
                    .iter()
                    .map(|tool| tool.iter().zip(&asked[0]).map(|(a, b)| a * b).sum())
                    .collect();
                let ranking = index.search_blended(&query.text, &similarity, tools);
                latencies.push(started.elapsed());
                outcome(query, ranking)
            })
            .collect();
        latencies.sort();
        let quantile = |q: f64| {
            let at = ((latencies.len() as f64 - 1.0) * q).round() as usize;
            latencies.get(at).map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        let timing = format!(
            "model {}: {tools} tools encoded in {:.1} s, {WIDE_CATALOG} in {:.1} s; a query \
             encoded and ranked in p50 {:.1} ms, p99 {:.1} ms ({} queries)",
            encoder.name(),
            encoded.as_secs_f64(),
            wide_encoded.as_secs_f64(),
            quantile(0.5),
            quantile(0.99),
            queries.len(),
        );
        (outcomes, timing)
    });

    let stemmer = Stemmer::create(Algorithm::English);
    let mislabelled: Vec<&Query> = queries
        .iter()
        .filter(|q| q.hard != is_hard(&stemmer, q))
        .collect();

    // The sections after the figures are about the best ranking there is, on the tuning half.
    let outcomes: Vec<&Outcome<'_>> = match &blended {
        Some((outcomes, _)) => outcomes,
        None => &lexical,
    }
    .iter()
    .filter(|o| o.query.tuning)
    .collect();
    let all: Vec<&Outcome<'_>> = outcomes.clone();
    let hard: Vec<&Outcome<'_>> = outcomes.iter().copied().filter(|o| o.query.hard).collect();

    let queries_in = |tuning: bool, hard_only: bool| {
        queries
            .iter()
            .filter(|q| q.tuning == tuning && (q.hard || !hard_only))
            .count()
    };
    println!("Tool search quality (tests/search)");
    println!(
        "tools {tools}, servers {}, queries {}: test half {} (hard {}), tuning half {} (hard {})",
        captures.len(),
        queries.len(),
        queries_in(false, false),
        queries_in(false, true),
        queries_in(true, false),
        queries_in(true, true),
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
    println!("| ranking | half | queries | count | R@1 | R@5 | R@10 | MRR |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut rankings = vec![("words (BM25F)", &lexical)];
    if let Some((outcomes, _)) = &blended {
        rankings.push(("meaning and words", outcomes));
    }
    for (ranking, outcomes) in rankings {
        for (half, label, tuning, hard_only) in [
            ("test", "all", false, false),
            ("test", "hard", false, true),
            ("tuning", "all", true, false),
            ("tuning", "hard", true, true),
        ] {
            let set: Vec<&Outcome<'_>> = outcomes
                .iter()
                .filter(|o| o.query.tuning == tuning && (!hard_only || o.query.hard))
                .collect();
            let (r1, r5, r10, mrr) = figures(&set);
            println!(
                "| {ranking} | {half} | {label} | {} | {r1:.3} | {r5:.3} | {r10:.3} | {mrr:.3} |",
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

    // What a search costs a model: the compact result of the best ranking's first 8 hits for
    // each test-half query, against the full definitions (name, description, input schema) a
    // result gave before; and a session's list after 20 searches, each fifth hit called.
    let by_name: HashMap<String, Tool> = catalog
        .iter()
        .filter_map(|tool| serde_json::from_value::<Tool>(tool.clone()).ok())
        .map(|tool| (tool.name.to_string(), tool))
        .collect();
    let hits_of = |outcome: &Outcome<'_>| -> Vec<Tool> {
        outcome
            .hits
            .iter()
            .take(8)
            .filter_map(|name| by_name.get(name).cloned())
            .collect()
    };
    let ranked: &[Outcome<'_>] = match &blended {
        Some((outcomes, _)) => outcomes,
        None => &lexical,
    };
    let test_half: Vec<&Outcome<'_>> = ranked.iter().filter(|o| !o.query.tuning).collect();
    let mut compact = Vec::new();
    let mut full_results = Vec::new();
    for outcome in &test_half {
        let found = hits_of(outcome);
        let result = found_result(&found, &outcome.query.text);
        compact.push(count(&serde_json::to_value(&result).unwrap_or_default()));
        let listed: Vec<Value> = found
            .iter()
            .map(|tool| {
                json!({"name": tool.name, "description": tool.description,
                       "inputSchema": tool.input_schema})
            })
            .collect();
        full_results.push(count(
            &json!([{"type": "text", "text": Value::Array(listed).to_string()}]),
        ));
    }
    compact.sort_unstable();
    full_results.sort_unstable();
    let middle = |sorted: &[usize]| sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    let most = |sorted: &[usize]| sorted.last().copied().unwrap_or(0);
    println!(
        "tokens of one search_tools result (8 hits, test half): compact p50 {}, max {}; \
         with full schemas p50 {}, max {}",
        middle(&compact),
        most(&compact),
        middle(&full_results),
        most(&full_results)
    );
    let mut working = WorkingSet::default();
    for (at, outcome) in test_half.iter().take(20).enumerate() {
        let found = hits_of(outcome);
        working.found(found.iter().map(|t| t.name.to_string()).collect());
        if at % 4 == 0
            && let Some(first) = found.first()
        {
            working.called(&first.name);
        }
    }
    let listed = working.listed(WorkingSetLimits::default(), |name| {
        by_name.get(name).map(estimated_tokens)
    });
    let session_list: Vec<Value> = deferred_view_tools(tools)
        .into_iter()
        .chain(listed.iter().filter_map(|name| by_name.get(name).cloned()))
        .filter_map(|tool| serde_json::to_value(tool).ok())
        .collect();
    println!(
        "a deferred session's tools/list after 20 searches and 5 calls: {} tools, {} tokens \
         ({:.1} % of the full catalog)",
        session_list.len(),
        count(&json!({ "tools": session_list })),
        100.0 * count(&json!({ "tools": session_list })) as f64 / full as f64
    );

    // R@5 by the server of each query's right tools (a query counts for each server it names).
    println!();
    println!("R@5 by server, tuning half (queries naming a tool of the server; hard in brackets):");
    let mut by_server: BTreeMap<&str, (usize, usize, usize, usize)> = BTreeMap::new();
    for outcome in &outcomes {
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
    println!(
        "Misses at 5, tuning half: right tools matching no query word / ranked 6-10 / ranked \
         below 10:"
    );
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
    println!("The {WORST} worst-ranked hard queries of the tuning half (unmatched ones by name):");
    for outcome in worst.iter().take(WORST) {
        let rank = match outcome.rank {
            Some(r) => format!("rank {r}"),
            None => "not matched (no query word in any right tool)".to_owned(),
        };
        println!("  '{}': {rank}", outcome.query.text);
        println!("      right: {}", outcome.query.expected.join(", "));
        println!(
            "      found: {}",
            outcome.hits[..outcome.hits.len().min(3)].join(", ")
        );
    }
}
