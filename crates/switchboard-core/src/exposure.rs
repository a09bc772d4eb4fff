//! How upstream tools, prompts and resources are named to downstream clients.
//!
//! Switchboard re-exposes every connected server's catalog as one. Each server has a prefix (its
//! id unless the user set another, possibly empty): tools and prompts are exposed as
//! `{prefix}__{name}` and resource URIs get the prefix spliced in after their scheme
//! (`ui://widget/a.html` -> `ui://{prefix}__widget/a.html`), which keeps the scheme (MCP Apps
//! need `ui://`) and can be undone exactly. A [`NameTable`] maps exposed names back to the one
//! upstream that owns them and reports names claimed by more than one server: such names are
//! withheld from everyone rather than letting one server shadow another.

use std::collections::BTreeMap;

use crate::hashing::FastMap;

use serde::Serialize;

use crate::ServerId;

/// What separates a prefix from the upstream name.
pub const SEPARATOR: &str = "__";

/// The longest tool name the spec allows.
pub const MAX_TOOL_NAME: usize = 128;
/// The longest tool name model APIs take (OpenAI, Gemini and Anthropic alike).
pub const MAX_MODEL_TOOL_NAME: usize = 64;

/// Whether `name` is a tool name by the spec's rule: 1 to 128 of `A-Za-z0-9_.-`.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `name` as a valid tool (or prompt) name: itself when it is one; otherwise every character
/// outside the alphabet replaced by `_`, cut to fit, and a digest of the original added, so the
/// name is stable across restarts and two different names never become one. A server's name
/// with escapes, line breaks, `../..`, ten thousand characters, or nothing at all is exposed
/// this way (the original still goes to the server).
pub fn valid_tool_name(name: &str) -> std::borrow::Cow<'_, str> {
    if is_valid_tool_name(name) {
        return std::borrow::Cow::Borrowed(name);
    }
    std::borrow::Cow::Owned(sanitized(name, MAX_TOOL_NAME, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
    }))
}

/// The name tool (or prompt) `name` of a server with `prefix` is exposed by: the prefixed name
/// when both it and `name` are valid tool names ([`valid_tool_name`] of each otherwise).
pub fn exposed_tool_name(prefix: &Prefix, name: &str) -> String {
    valid_tool_name(&prefix.name(&valid_tool_name(name))).into_owned()
}

/// `name` as model APIs take a function's name (OpenAI's and Gemini's refuse a whole tool list
/// over one bad name): 1 to 64 of `A-Za-z0-9_-`, starting with a letter or `_`. Itself when it
/// is one already; otherwise made one as [`valid_tool_name`] does. Switchboard takes either
/// name for a call ([`NameTable::get`]).
pub fn model_tool_name(name: &str) -> std::borrow::Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-');
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if starts_well && name.len() <= MAX_MODEL_TOOL_NAME && name.chars().all(allowed) {
        return std::borrow::Cow::Borrowed(name);
    }
    let made = sanitized(name, MAX_MODEL_TOOL_NAME, allowed);
    std::borrow::Cow::Owned(
        match made.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            true => made,
            false => {
                let mut prefixed = format!("_{made}");
                if prefixed.len() > MAX_MODEL_TOOL_NAME {
                    // The last kept character makes room (the digest stays whole).
                    prefixed.remove(prefixed.len() - 10);
                }
                prefixed
            }
        },
    )
}

/// `name` with characters `allowed` refuses replaced by `_`, cut to `max` with room for `_`
/// and an 8-digit digest of the original (FNV-1a: stable everywhere, not a secret).
fn sanitized(name: &str, max: usize, allowed: impl Fn(char) -> bool) -> String {
    let digest = name.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    let kept: String = name
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(max - 9)
        .collect();
    format!("{kept}_{digest:08x}")
}

/// A validated exposed-name prefix: empty, or up to 64 characters of `A-Za-z0-9_.-` that neither
/// start nor end with `_` and contain no `__` (so the separator stays unambiguous).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Prefix(String);

/// Why a string cannot be a prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// Longer than 64 characters.
    #[error("prefix '{0}' is longer than 64 characters")]
    TooLong(String),
    /// Characters outside the tool-name alphabet, or a misplaced underscore.
    #[error(
        "prefix '{0}' may use only letters, digits, '.', '-' and single '_' not at either end (or be empty)"
    )]
    BadCharacters(String),
}

impl Prefix {
    /// Most characters a prefix may have.
    pub const MAX_LEN: usize = 64;

    /// Validates `prefix`.
    pub fn new(prefix: impl Into<String>) -> Result<Self, PrefixError> {
        let prefix = prefix.into();
        if prefix.len() > Self::MAX_LEN {
            return Err(PrefixError::TooLong(prefix));
        }
        let alphabet = prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !alphabet || prefix.starts_with('_') || prefix.ends_with('_') || prefix.contains("__") {
            return Err(PrefixError::BadCharacters(prefix));
        }
        Ok(Self(prefix))
    }

    /// The prefix of a server with no configured prefix: its id.
    pub fn of_server(id: &ServerId) -> Self {
        Self(id.as_str().to_owned())
    }

    /// The prefix as text (empty for none).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether names pass through unchanged.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The exposed name of upstream tool or prompt `name`.
    pub fn name(&self, name: &str) -> String {
        if self.is_empty() {
            name.to_owned()
        } else {
            format!("{}{SEPARATOR}{name}", self.0)
        }
    }

    /// The exposed form of upstream resource URI (or URI template) `uri`.
    pub fn uri(&self, uri: &str) -> String {
        if self.is_empty() {
            return uri.to_owned();
        }
        let (head, rest) = split_uri(uri);
        format!("{head}{}{SEPARATOR}{rest}", self.0)
    }

    /// The upstream URI behind exposed URI `exposed`, if it carries this prefix.
    pub fn original_uri(&self, exposed: &str) -> Option<String> {
        if self.is_empty() {
            return Some(exposed.to_owned());
        }
        let (head, rest) = split_uri(exposed);
        let rest = rest
            .strip_prefix(self.0.as_str())?
            .strip_prefix(SEPARATOR)?;
        Some(format!("{head}{rest}"))
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Splits a URI into the part the prefix goes after (`scheme://` or `scheme:`, or nothing when
/// there is no valid scheme) and the rest.
fn split_uri(uri: &str) -> (&str, &str) {
    let Some(colon) = uri.find(':') else {
        return ("", uri);
    };
    let scheme = &uri[..colon];
    let valid_scheme = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-'));
    if !valid_scheme {
        return ("", uri);
    }
    let head_len = if uri[colon + 1..].starts_with("//") {
        colon + 3
    } else {
        colon + 1
    };
    uri.split_at(head_len)
}

/// An exposed entry and the upstream it belongs to.
#[derive(Debug, Clone)]
pub struct Exposed<T> {
    /// The server that owns it.
    pub server: ServerId,
    /// Its name (or URI) upstream.
    pub upstream: String,
    /// The entry as exposed downstream.
    pub item: T,
}

/// A name more than one server exposes; withheld until the user sets a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Collision {
    /// `tool`, `prompt`, `resource` or `resource template`.
    pub kind: &'static str,
    /// The contested exposed name or URI.
    pub name: String,
    /// Every server that exposes it, ordered.
    pub servers: Vec<ServerId>,
}

impl std::fmt::Display for Collision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers: Vec<&str> = self.servers.iter().map(ServerId::as_str).collect();
        // The last server gets its own id as the prefix: ids are unique, so that ends it.
        let last = servers.last().copied().unwrap_or("<id>");
        write!(
            f,
            "{} '{}' is exposed by {}; it is hidden until one of them gets a different prefix \
             (for example `switchboard server set-prefix {last} {last}`)",
            self.kind,
            self.name,
            servers.join(" and ")
        )
    }
}

/// Exposed names (or URIs) of one kind, each owned by exactly one server, in a stable order
/// (servers in the order given, entries in their upstream order).
#[derive(Debug, Clone)]
pub struct NameTable<T> {
    entries: Vec<(String, Exposed<T>)>,
    index: FastMap<String, usize>,
    /// Other names entries are also known by ([`NameTable::with_aliases`]).
    aliases: FastMap<String, usize>,
    collisions: Vec<Collision>,
}

impl<T> Default for NameTable<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            index: FastMap::default(),
            aliases: FastMap::default(),
            collisions: Vec::new(),
        }
    }
}

impl<T> NameTable<T> {
    /// Also takes, for each entry whose name `alias` changes, the changed name (unless another
    /// entry is already known by it): names model APIs take ([`model_tool_name`]).
    pub fn with_aliases(mut self, alias: impl Fn(&str) -> std::borrow::Cow<'_, str>) -> Self {
        let mut aliases = FastMap::default();
        for (i, (name, _)) in self.entries.iter().enumerate() {
            let other = alias(name);
            if other != name.as_str() && !self.index.contains_key(other.as_ref()) {
                aliases.entry(other.into_owned()).or_insert(i);
            }
        }
        self.aliases = aliases;
        self
    }

    /// Builds a table from `(exposed name, entry)` pairs; names claimed by several servers are
    /// left out and reported as collisions of `kind`. A server repeating one of its own names
    /// keeps the first.
    pub fn build(
        kind: &'static str,
        candidates: impl IntoIterator<Item = (String, Exposed<T>)>,
    ) -> Self {
        let mut entries: Vec<(String, Exposed<T>)> = Vec::new();
        let mut index: FastMap<String, usize> = FastMap::default();
        // Names claimed again after their first entry, with every server claiming them.
        let mut claimed_again: BTreeMap<String, Vec<ServerId>> = BTreeMap::new();
        for (name, entry) in candidates {
            match index.get(name.as_str()) {
                None => {
                    index.insert(name.clone(), entries.len());
                    entries.push((name, entry));
                }
                Some(&first) => {
                    let servers = claimed_again
                        .entry(name)
                        .or_insert_with(|| vec![entries[first].1.server.clone()]);
                    if !servers.contains(&entry.server) {
                        servers.push(entry.server);
                    }
                }
            }
        }
        // A server naming one thing twice keeps the first; names of several servers are
        // withheld from all of them.
        let mut collisions = Vec::new();
        for (name, mut servers) in claimed_again {
            if servers.len() > 1 {
                servers.sort();
                collisions.push(Collision {
                    kind,
                    name,
                    servers,
                });
            }
        }
        if !collisions.is_empty() {
            let contested: std::collections::HashSet<&str> =
                collisions.iter().map(|c| c.name.as_str()).collect();
            entries.retain(|(name, _)| !contested.contains(name.as_str()));
            index = entries
                .iter()
                .enumerate()
                .map(|(i, (name, _))| (name.clone(), i))
                .collect();
        }
        // Every open workspace keeps its tables for as long as it lives: no room to grow.
        entries.shrink_to_fit();
        index.shrink_to_fit();
        Self {
            entries,
            index,
            aliases: FastMap::default(),
            collisions,
        }
    }

    /// The entry exposed as `name`, or known by it as an alias.
    pub fn get(&self, name: &str) -> Option<&Exposed<T>> {
        self.index
            .get(name)
            .or_else(|| self.aliases.get(name))
            .map(|&i| &self.entries[i].1)
    }

    /// Every exposed entry, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Exposed<T>> {
        self.entries.iter().map(|(_, entry)| entry)
    }

    /// How many entries are exposed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is exposed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Names withheld because several servers claim them.
    pub fn collisions(&self) -> &[Collision] {
        &self.collisions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ServerId {
        ServerId::new(s).unwrap()
    }

    #[test]
    fn names_get_the_prefix_and_an_empty_prefix_changes_nothing() {
        let p = Prefix::new("notion").unwrap();
        assert_eq!(p.name("search"), "notion__search");
        assert_eq!(Prefix::new("").unwrap().name("search"), "search");
        assert_eq!(Prefix::of_server(&id("my-db")).name("q"), "my-db__q");
    }

    #[test]
    fn uris_keep_their_scheme_and_round_trip() {
        let p = Prefix::new("apps").unwrap();
        for (uri, exposed) in [
            ("ui://widget/a.html", "ui://apps__widget/a.html"),
            ("test://static-text", "test://apps__static-text"),
            ("file:///tmp/x", "file://apps__/tmp/x"),
            ("urn:isbn:1", "urn:apps__isbn:1"),
            ("no scheme here", "apps__no scheme here"),
            (
                "test://template/{id}/data",
                "test://apps__template/{id}/data",
            ),
        ] {
            assert_eq!(p.uri(uri), exposed);
            assert_eq!(p.original_uri(exposed).as_deref(), Some(uri));
        }
        assert_eq!(p.original_uri("ui://other__widget/a.html"), None);
        assert_eq!(p.original_uri("ui://widget/a.html"), None);
        let none = Prefix::new("").unwrap();
        assert_eq!(none.uri("ui://w"), "ui://w");
        assert_eq!(none.original_uri("ui://w").as_deref(), Some("ui://w"));
    }

    #[test]
    fn prefixes_that_would_make_names_ambiguous_are_refused() {
        for bad in ["a__b", "_a", "a_", "sp ace", "slash/", &"x".repeat(65)] {
            assert!(Prefix::new(bad).is_err(), "{bad}");
        }
        for good in ["", "a", "a_b", "A.b-c", "x1"] {
            assert!(Prefix::new(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn names_outside_the_spec_become_stable_valid_names_that_never_meet() {
        for name in ["echo", "get-sum", "a.b_c", &"x".repeat(128)] {
            assert_eq!(valid_tool_name(name), name);
        }
        let hostile = [
            "",
            "evil\u{1b}[2J\u{7}",
            "line\r\nbreak",
            "../../etc/passwd",
            &"y".repeat(10_000),
            "café",
            "two words",
            "two_words",
        ];
        let mut made = std::collections::HashSet::new();
        for name in hostile {
            let valid = valid_tool_name(name);
            assert!(is_valid_tool_name(&valid), "{name:?} -> {valid:?}");
            assert_eq!(valid, valid_tool_name(name), "stable");
            assert!(made.insert(valid.into_owned()), "{name:?} met another");
        }
        assert_eq!(valid_tool_name("two_words"), "two_words");
        assert_ne!(valid_tool_name("two words"), "two_words");
    }

    #[test]
    fn model_names_follow_the_model_apis_rule_and_are_taken_for_calls() {
        let rule = |n: &str| {
            n.len() <= MAX_MODEL_TOOL_NAME
                && n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        for name in [
            "everything__get-sum",
            "docs.v2__read.page",
            "1password__get",
            &format!("s__{}", "z".repeat(100)),
        ] {
            let model = model_tool_name(name);
            assert!(rule(&model), "{name} -> {model}");
        }
        assert_eq!(model_tool_name("everything__echo"), "everything__echo");
        let table = NameTable::build(
            "tool",
            [(
                "docs.v2__read.page".to_owned(),
                Exposed {
                    server: id("docs"),
                    upstream: "read.page".to_owned(),
                    item: (),
                },
            )],
        )
        .with_aliases(model_tool_name);
        let alias = model_tool_name("docs.v2__read.page");
        assert_eq!(table.get(&alias).unwrap().upstream, "read.page");
        assert_eq!(
            table.get("docs.v2__read.page").unwrap().upstream,
            "read.page"
        );
    }

    #[test]
    fn colliding_names_are_withheld_and_reported_with_every_owner() {
        let entry = |server: &str, name: &str| {
            (
                name.to_owned(),
                Exposed {
                    server: id(server),
                    upstream: name.to_owned(),
                    item: (),
                },
            )
        };
        let table = NameTable::build(
            "tool",
            [
                entry("a", "echo"),
                entry("a", "only-a"),
                entry("b", "echo"),
                entry("b", "only-b"),
                entry("b", "only-b"),
            ],
        );
        assert!(table.get("echo").is_none());
        assert_eq!(table.get("only-a").unwrap().server, id("a"));
        assert_eq!(table.get("only-b").unwrap().server, id("b"));
        let order: Vec<_> = table.iter().map(|e| e.upstream.as_str()).collect();
        assert_eq!(order, ["only-a", "only-b"]);
        assert_eq!(
            table.collisions(),
            [Collision {
                kind: "tool",
                name: "echo".into(),
                servers: vec![id("a"), id("b")]
            }]
        );
        assert!(table.collisions()[0].to_string().contains("a and b"));
    }
}
