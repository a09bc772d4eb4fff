//! Tool search: finding the right tool among hundreds without reading them all.
//!
//! A client with thirty servers sees hundreds of tools, tens of thousands of tokens of
//! definitions; a model does better, and cheaper, when it can look the right one up. This is the
//! index that lookup runs on: every exposed tool is a document with fields (its names, title,
//! description, parameters, and its server), ranked by BM25F ([`ToolIndex::search`]): terms are
//! weighted per field, each field's length normalised on its own, then the weighted frequencies
//! summed before saturation (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25
//! and Beyond", 2009, §3.4). Identifiers are split into words (`get_weather`, `getWeather`,
//! `get-weather`), words are stemmed (Snowball English, `rust-stemmers`), so "forecasts" finds
//! `get_forecast`. [`ToolIndex::search_regex`] matches a regular expression instead.
//!
//! An index is built whole from the current catalog and never changed: the catalog is rebuilt
//! when a server's tools change, and so is the index (10,000 tools take a few milliseconds),
//! swapped in as one value. Written here rather than taken from a search engine crate (tantivy
//! and the like): those are built for documents on disk and bring a query language, segments
//! and threads, where this needs a few thousand short documents in memory and one ranking.

use std::collections::{BinaryHeap, HashMap};

use rust_stemmers::{Algorithm, Stemmer};

/// One tool as the index sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolDocument {
    /// The name clients call it by (`{prefix}__{name}`).
    pub exposed_name: String,
    /// Its server's own name for it.
    pub upstream_name: String,
    /// The server's id.
    pub server: String,
    /// The server's description, if the user gave one.
    pub server_description: String,
    /// Its title, if any.
    pub title: String,
    /// Its description.
    pub description: String,
    /// Its parameters: name and description.
    pub parameters: Vec<(String, String)>,
    /// Words for search beyond the description: what the tool's server says in its `_meta`
    /// (tags, keywords, when to use it), then what an operator wrote (aliases, words users say,
    /// examples: [`crate::ToolPolicies::search_notes`]); searched with the description.
    pub notes: String,
}

/// The fields of a document, each with its own weight and length normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Name = 0,
    Title = 1,
    Description = 2,
    Parameters = 3,
    Server = 4,
}

const FIELDS: usize = 5;

/// How much a term in each field counts (BM25F's `w_f`): the name says most about what a tool
/// is for, its server least.
const WEIGHTS: [f32; FIELDS] = [3.0, 2.0, 1.0, 0.6, 0.4];

/// BM25F's length normalisation per field (`b_f`): names are all short, descriptions vary.
const LENGTH_NORMALISATION: [f32; FIELDS] = [0.3, 0.3, 0.75, 0.5, 0.3];

/// BM25's term-frequency saturation (`k1`).
const SATURATION: f32 = 1.2;

/// How much the lexical ranking counts in [`ToolIndex::search_blended`], as a share of the best
/// BM25F score, beside a similarity in [-1, 1]. Chosen on the dev set (`tests/search`, bench
/// `search_quality`): 0.1 gave R@5 0.869, 0.05 and 0.3 less.
pub const LEXICAL_SHARE: f32 = 0.1;

/// The lowest score a hit of [`ToolIndex::search_blended`] may have: below it a tool is no
/// answer to the query, however the others rank, so a request nothing serves finds nothing (by
/// words alone a hit needs a word of the query). A sentence encoder's cosine is weak evidence
/// near zero, so the floor is low: on the tuning half of the dev set (bench `search_quality`)
/// every right tool found in the first 5 scored 0.2 or more, and with the test fixture's terse
/// descriptions "repeat my words to me" scores its echo tool 0.091 while "bake a chocolate
/// cake" and "book a flight to Paris" score no tool above 0.045.
pub const MIN_BLENDED_SCORE: f32 = 0.05;

/// The longest regular expression [`ToolIndex::search_regex`] compiles, in bytes of its
/// compiled program (the `regex` crate matches in linear time; this bounds its memory).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Why a search could not run.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The pattern of a regex search does not compile.
    #[error("not a valid regular expression: {0}")]
    BadRegex(String),
}

/// One ranked tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The tool's exposed name.
    pub name: String,
    /// Its server.
    pub server: String,
    /// Its BM25F score, or its blended score (similarity plus a share of BM25F), or 1.0 for
    /// every regex match; higher ranks first.
    pub score: f32,
}

/// A term's occurrences: per document, its frequency in each field.
type Postings = Vec<(u32, [u16; FIELDS])>;

/// A search index over a catalog's tools, immutable once built.
#[derive(Debug)]
pub struct ToolIndex {
    documents: Vec<ToolDocument>,
    /// Each document's length in terms, per field.
    lengths: Vec<[u16; FIELDS]>,
    average_lengths: [f32; FIELDS],
    postings: HashMap<String, Postings>,
}

impl Default for ToolIndex {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl ToolIndex {
    /// Indexes `documents`.
    pub fn new(documents: Vec<ToolDocument>) -> Self {
        let analyzer = Analyzer::new();
        let mut postings: HashMap<String, Postings> = HashMap::new();
        let mut lengths = Vec::with_capacity(documents.len());
        let mut totals = [0f64; FIELDS];
        for (id, document) in documents.iter().enumerate() {
            let mut counts: HashMap<String, [u16; FIELDS]> = HashMap::new();
            let mut length = [0u16; FIELDS];
            for (field, text) in fields_of(document) {
                for term in analyzer.terms(&text) {
                    let slot = &mut counts.entry(term).or_default()[field as usize];
                    *slot = slot.saturating_add(1);
                    length[field as usize] = length[field as usize].saturating_add(1);
                }
            }
            for (field, total) in totals.iter_mut().enumerate() {
                *total += f64::from(length[field]);
            }
            lengths.push(length);
            let id = u32::try_from(id).unwrap_or(u32::MAX);
            for (term, frequencies) in counts {
                postings.entry(term).or_default().push((id, frequencies));
            }
        }
        let count = documents.len().max(1) as f64;
        let average_lengths = totals.map(|total| ((total / count) as f32).max(1.0));
        Self {
            documents,
            lengths,
            average_lengths,
            postings,
        }
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.documents.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }

    /// The `limit` tools that match `query` best, best first (ties by name). A query with no
    /// word the index knows finds nothing.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        self.best(self.lexical_scores(query).into_iter(), limit)
    }

    /// The `limit` tools that match best by meaning and words together: each tool's
    /// `similarity` to the query (its sentence embedding's dot product with the query's, in the
    /// order the documents were given to [`ToolIndex::new`]) plus [`LEXICAL_SHARE`] times its
    /// BM25F score over the best one's. Similarity finds tools that share no word with the
    /// query; the lexical part keeps exact names and rare words on top. Hits scoring below
    /// [`MIN_BLENDED_SCORE`] are left out. A `similarity` of the wrong length is a caller's
    /// bug: the lexical ranking is returned then.
    pub fn search_blended(&self, query: &str, similarity: &[f32], limit: usize) -> Vec<Hit> {
        if similarity.len() != self.documents.len() {
            return self.search(query, limit);
        }
        let lexical = self.lexical_scores(query);
        let top = lexical
            .values()
            .copied()
            .fold(0f32, f32::max)
            .max(f32::MIN_POSITIVE);
        let blended = similarity.iter().enumerate().map(|(id, similarity)| {
            let id = u32::try_from(id).unwrap_or(u32::MAX);
            let words = lexical.get(&id).map_or(0.0, |score| score / top);
            (id, similarity + LEXICAL_SHARE * words)
        });
        self.best(
            blended.filter(|(_, score)| *score >= MIN_BLENDED_SCORE),
            limit,
        )
    }

    /// The text a sentence encoder reads for `document` (the `similarity` of
    /// [`search_blended`](Self::search_blended) compares the query with it): its server as
    /// words, with the server's description, its name as words, title and description, then
    /// any search notes. The server's description carries what a tool's own words leave out
    /// ("wiki" for a Notion tool): on the dev set it raised R@5 from 0.869 to 0.880
    /// (`docs/benchmarks.md`).
    pub fn semantic_text(document: &ToolDocument) -> String {
        let server = words(&document.server).join(" ");
        let server = match document.server_description.trim() {
            "" => server,
            described => format!("{server} ({described})"),
        };
        let mut text = format!(
            "{server}. {}. {} {}",
            words(&document.upstream_name).join(" "),
            document.title,
            document.description
        );
        if !document.notes.trim().is_empty() {
            text.push_str(". ");
            text.push_str(document.notes.trim());
        }
        text
    }

    /// The documents, in the order they were given.
    pub fn documents(&self) -> &[ToolDocument] {
        &self.documents
    }

    /// Each matching document's BM25F score for `query`.
    fn lexical_scores(&self, query: &str) -> HashMap<u32, f32> {
        let analyzer = Analyzer::new();
        let mut terms = analyzer.terms(query);
        terms.sort();
        terms.dedup();
        let total = self.documents.len() as f32;
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for term in &terms {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let found = postings.len() as f32;
            // BM25's idf, kept positive for terms in most documents.
            let idf = ((total - found + 0.5) / (found + 0.5) + 1.0).ln();
            for (id, frequencies) in postings {
                let length = &self.lengths[*id as usize];
                let weighted: f32 = (0..FIELDS)
                    .map(|f| {
                        let normalised = 1.0 - LENGTH_NORMALISATION[f]
                            + LENGTH_NORMALISATION[f]
                                * (f32::from(length[f]) / self.average_lengths[f]);
                        WEIGHTS[f] * f32::from(frequencies[f]) / normalised
                    })
                    .sum();
                *scores.entry(*id).or_default() += idf * weighted / (SATURATION + weighted);
            }
        }
        scores
    }

    /// The tools whose name, title or description `pattern` matches (case-insensitive), at
    /// most `limit`, by name.
    pub fn search_regex(&self, pattern: &str, limit: usize) -> Result<Vec<Hit>, SearchError> {
        let regex = regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| SearchError::BadRegex(e.to_string()))?;
        let matches = self.documents.iter().enumerate().filter(|(_, d)| {
            regex.is_match(&d.exposed_name)
                || regex.is_match(&d.title)
                || regex.is_match(&d.description)
        });
        Ok(self.best(
            matches.map(|(id, _)| (u32::try_from(id).unwrap_or(u32::MAX), 1.0)),
            limit,
        ))
    }

    /// The `limit` best of `scores`, best first, ties by name.
    fn best(&self, scores: impl Iterator<Item = (u32, f32)>, limit: usize) -> Vec<Hit> {
        if limit == 0 {
            return Vec::new();
        }
        // A bounded min-heap: the worst kept hit is on top, replaced by any better one.
        let mut kept: BinaryHeap<Ranked<'_>> = BinaryHeap::with_capacity(limit + 1);
        for (id, score) in scores {
            let Some(document) = self.documents.get(id as usize) else {
                continue;
            };
            kept.push(Ranked {
                score,
                name: &document.exposed_name,
                id,
            });
            if kept.len() > limit {
                kept.pop();
            }
        }
        let mut hits: Vec<Ranked<'_>> = kept.into_vec();
        hits.sort();
        hits.into_iter()
            .map(|ranked| Hit {
                name: ranked.name.to_owned(),
                server: self.documents[ranked.id as usize].server.clone(),
                score: ranked.score,
            })
            .collect()
    }
}

/// A scored document, ordered best first (higher score, then name).
struct Ranked<'a> {
    score: f32,
    name: &'a str,
    id: u32,
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Ranked<'_> {}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.name.cmp(other.name))
    }
}

/// The text of each field of `document`.
fn fields_of(document: &ToolDocument) -> [(Field, String); FIELDS] {
    let parameters = document
        .parameters
        .iter()
        .map(|(name, description)| format!("{name} {description}"))
        .collect::<Vec<_>>()
        .join(" ");
    [
        (
            Field::Name,
            format!("{} {}", document.upstream_name, document.exposed_name),
        ),
        (Field::Title, document.title.clone()),
        (
            Field::Description,
            format!("{} {}", document.description, document.notes),
        ),
        (Field::Parameters, parameters),
        (
            Field::Server,
            format!("{} {}", document.server, document.server_description),
        ),
    ]
}

/// Turns text into index terms: words split out of identifiers, lowercased, stop words dropped,
/// stemmed.
struct Analyzer {
    stemmer: Stemmer,
}

/// Words too common in tool descriptions to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into", "is", "it",
    "its", "of", "on", "or", "that", "the", "this", "to", "with", "you", "your",
];

impl Analyzer {
    fn new() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    fn terms(&self, text: &str) -> Vec<String> {
        words(text)
            .into_iter()
            .filter(|word| !STOP_WORDS.contains(&word.as_str()))
            .map(|word| self.stemmer.stem(&word).into_owned())
            .collect()
    }
}

/// The lowercase words of `text`: split at anything not a letter or digit, and inside
/// identifiers at case changes (`getWeather`, `HTTPServer` → `http`, `server`) and between
/// letters and digits (`v2api` → `v`, `2`, `api`). The index's terms are these, less stop words,
/// stemmed.
pub fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in text.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = chunk.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (before, here) = (chars[i - 1], chars[i]);
            let next_is_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let boundary = (before.is_lowercase() && here.is_uppercase())
                || (before.is_uppercase() && here.is_uppercase() && next_is_lower)
                || (before.is_alphabetic() != here.is_alphabetic());
            if boundary {
                words.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        if start < chars.len() {
            words.push(chars[start..].iter().collect::<String>().to_lowercase());
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(server: &str, name: &str, description: &str) -> ToolDocument {
        ToolDocument {
            exposed_name: format!("{server}__{name}"),
            upstream_name: name.to_owned(),
            server: server.to_owned(),
            description: description.to_owned(),
            ..ToolDocument::default()
        }
    }

    fn names(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.name.as_str()).collect()
    }

    #[test]
    fn search_notes_make_a_tool_findable_by_words_its_server_never_used() {
        let mut pulls = tool("github", "update_pull_request_branch", "Update a branch.");
        let other = tool("github", "create_branch", "Create a new branch.");
        let asked = "rebase my PR on main";
        let index = ToolIndex::new(vec![pulls.clone(), other.clone()]);
        assert_ne!(
            names(&index.search(asked, 2)).first(),
            Some(&"github__update_pull_request_branch")
        );
        pulls.notes = "PR, rebase, bring up to date with main".into();
        assert!(ToolIndex::semantic_text(&pulls).ends_with("bring up to date with main"));
        let index = ToolIndex::new(vec![pulls, other]);
        assert_eq!(
            names(&index.search(asked, 2)).first(),
            Some(&"github__update_pull_request_branch")
        );
    }

    #[test]
    fn blending_ranks_a_tool_similar_in_meaning_above_word_matches_nothing_else_supports() {
        let index = ToolIndex::new(vec![
            tool("chat", "post_message", "Posts a message to a channel"),
            tool("ci", "deploy_status", "Whether the deploy is done"),
        ]);
        let query = "tell the team the deploy is done";
        // By words alone the CI tool wins; the encoder says the chat tool is what was meant.
        assert_eq!(names(&index.search(query, 2))[0], "ci__deploy_status");
        let hits = index.search_blended(query, &[0.62, 0.30], 2);
        assert_eq!(names(&hits), ["chat__post_message", "ci__deploy_status"]);
        // The lexical share: the best word match adds exactly LEXICAL_SHARE.
        assert!((hits[1].score - (0.30 + LEXICAL_SHARE)).abs() < 1e-6);
    }

    #[test]
    fn blending_finds_tools_that_share_no_word_with_the_query_and_none_below_the_floor() {
        let index = ToolIndex::new(vec![
            tool("chat", "post_message", "Posts a message to a channel"),
            tool("maps", "directions", "Route between two places"),
        ]);
        assert!(index.search("walk to the museum", 5).is_empty());
        let hits = index.search_blended("walk to the museum", &[0.2, 0.5], 5);
        assert_eq!(names(&hits), ["maps__directions", "chat__post_message"]);
        // A tool barely like the query is no answer to it.
        let hits = index.search_blended("walk to the museum", &[0.03, 0.5], 5);
        assert_eq!(names(&hits), ["maps__directions"]);
        let nothing = index.search_blended("bake a cake", &[0.02, 0.045], 5);
        assert!(nothing.is_empty(), "{nothing:?}");
    }

    #[test]
    fn blending_with_a_similarity_per_other_catalog_falls_back_to_words() {
        let index = ToolIndex::new(vec![tool("chat", "post_message", "Posts a message")]);
        assert_eq!(
            index.search_blended("post", &[0.1, 0.2], 5),
            index.search("post", 5)
        );
    }

    #[test]
    fn identifiers_are_split_into_words_of_every_style() {
        assert_eq!(words("get_weather"), ["get", "weather"]);
        assert_eq!(words("getWeather"), ["get", "weather"]);
        assert_eq!(words("get-weather-v2"), ["get", "weather", "v", "2"]);
        assert_eq!(words("HTTPServerList"), ["http", "server", "list"]);
        assert_eq!(words("notion__search_pages"), ["notion", "search", "pages"]);
        assert_eq!(words(""), Vec::<String>::new());
    }

    #[test]
    fn stemming_matches_other_forms_of_a_word() {
        let index = ToolIndex::new(vec![
            tool("weather", "get_forecast", "Returns the forecast for a city"),
            tool("files", "read_file", "Reads a file from disk"),
        ]);
        assert_eq!(
            names(&index.search("forecasts", 5)),
            ["weather__get_forecast"]
        );
        assert_eq!(
            names(&index.search("reading files", 5)),
            ["files__read_file"]
        );
    }

    #[test]
    fn a_word_in_the_name_outranks_the_same_word_in_a_description() {
        let index = ToolIndex::new(vec![
            tool("a", "list_issues", "Lists the issues of a repository"),
            tool(
                "b",
                "create_comment",
                "Comments on issues, pull requests and commits",
            ),
        ]);
        let hits = index.search("issues", 5);
        assert_eq!(names(&hits), ["a__list_issues", "b__create_comment"]);
        assert!(hits[0].score > hits[1].score);
    }

    #[test]
    fn rare_words_count_more_than_common_ones() {
        let mut documents: Vec<ToolDocument> = (0..20)
            .map(|i| tool("s", &format!("list_things_{i}"), "Lists things"))
            .collect();
        documents.push(tool("s", "list_invoices", "Lists invoices"));
        let index = ToolIndex::new(documents);
        assert_eq!(index.search("list invoices", 1)[0].name, "s__list_invoices");
    }

    #[test]
    fn parameters_and_servers_are_searched_too() {
        let mut by_param = tool("maps", "lookup", "Looks something up");
        by_param.parameters = vec![("latitude".into(), "Degrees north".into())];
        let mut by_server = tool("jira", "find", "Finds things");
        by_server.server_description = "Atlassian ticket tracker".into();
        let index = ToolIndex::new(vec![by_param, by_server]);
        assert_eq!(names(&index.search("latitude", 5)), ["maps__lookup"]);
        assert_eq!(names(&index.search("ticket", 5)), ["jira__find"]);
    }

    #[test]
    fn nothing_is_found_for_unknown_words_and_limits_hold() {
        let index = ToolIndex::new(
            (0..50)
                .map(|i| tool("s", &format!("echo_{i}"), "Echoes"))
                .collect(),
        );
        assert!(index.search("zebra", 10).is_empty());
        assert!(index.search("", 10).is_empty());
        assert_eq!(index.search("echo", 7).len(), 7);
        assert!(index.search("echo", 0).is_empty());
        assert!(ToolIndex::default().search("echo", 5).is_empty());
    }

    #[test]
    fn ties_are_broken_by_name_so_results_are_stable() {
        let index = ToolIndex::new(vec![
            tool("b", "echo", "Echoes"),
            tool("a", "echo", "Echoes"),
        ]);
        assert_eq!(names(&index.search("echo", 5)), ["a__echo", "b__echo"]);
    }

    #[test]
    fn regex_search_matches_names_and_descriptions_and_refuses_bad_patterns() {
        let index = ToolIndex::new(vec![
            tool("gh", "list_issues", "Lists issues"),
            tool("gh", "create_issue", "Opens an issue"),
            tool("fs", "read_file", "Reads a file"),
        ]);
        let hits = index.search_regex("^gh__.*issue", 10).unwrap();
        assert_eq!(names(&hits), ["gh__create_issue", "gh__list_issues"]);
        assert_eq!(
            names(&index.search_regex("READS", 10).unwrap()),
            ["fs__read_file"]
        );
        assert!(matches!(
            index.search_regex("(unclosed", 10),
            Err(SearchError::BadRegex(_))
        ));
        // A pattern whose program would be huge is refused, not compiled.
        assert!(index.search_regex(&"a{1000}".repeat(100), 10).is_err());
    }
}
