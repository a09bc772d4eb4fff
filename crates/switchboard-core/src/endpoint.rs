//! Endpoints: named, enforced subsets of a workspace's servers and tools.
//!
//! An admin gives each client the tools it needs and no more: an endpoint names servers (all
//! their tools, or only some) and is served at its own MCP path (`/mcp/e/{name}`,
//! `/sse/e/{name}`). Activation layers choose among what is on; an endpoint is the boundary they
//! choose inside: a client of an endpoint cannot list, search, turn on or call a tool outside
//! it, nor list or read another server's prompts and resources. Keys issued for an endpoint
//! reach that endpoint only.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The longest endpoint name.
pub const MAX_NAME_CHARS: usize = 64;

/// The most servers one endpoint names, and tools one server's entry names.
pub const MAX_ENTRIES: usize = 1_000;

/// The most keys one endpoint holds.
pub const MAX_KEYS: usize = 32;

/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;

/// Which tools of one server an endpoint includes: every one (written `"*"`), or only the named
/// ones (a list of the server's own, upstream, names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WrittenToolSet", into = "WrittenToolSet")]
pub enum ToolSet {
    /// Every tool.
    All,
    /// Only these, by the server's own (upstream) names.
    Only(BTreeSet<String>),
}

/// How a [`ToolSet`] is written.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum WrittenToolSet {
    Word(String),
    List(BTreeSet<String>),
}

impl TryFrom<WrittenToolSet> for ToolSet {
    type Error = String;

    fn try_from(written: WrittenToolSet) -> Result<Self, String> {
        match written {
            WrittenToolSet::Word(word) if word == "*" => Ok(Self::All),
            WrittenToolSet::Word(word) => Err(format!(
                "'{word}' is not a tool list: write \"*\" for every tool, or a list of names"
            )),
            WrittenToolSet::List(tools) => Ok(Self::Only(tools)),
        }
    }
}

impl From<ToolSet> for WrittenToolSet {
    fn from(set: ToolSet) -> Self {
        match set {
            ToolSet::All => Self::Word("*".to_owned()),
            ToolSet::Only(tools) => Self::List(tools),
        }
    }
}

impl ToolSet {
    /// Whether `tool` (upstream name) is in the set.
    pub fn contains(&self, tool: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(tools) => tools.contains(tool),
        }
    }
}

/// An endpoint, as an admin defines it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointDefinition {
    /// What it is for, shown to admins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its servers (by id) and which of their tools it includes.
    pub servers: BTreeMap<String, ToolSet>,
}

/// An endpoint: its name, definition and the digests of the keys issued for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Its name, the last segment of its paths.
    pub name: String,
    /// What it includes.
    #[serde(flatten)]
    pub definition: EndpointDefinition,
    /// Its keys: SHA-256 of each, lower-case hex, with a label and when it was issued.
    #[serde(default)]
    pub keys: Vec<EndpointKey>,
}

/// A key issued for an endpoint, as kept: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointKey {
    /// A short public id to name the key by (revoking it, listing it).
    pub id: String,
    /// SHA-256 of the key, lower-case hex.
    pub sha256: String,
    /// When it was issued, in milliseconds since the Unix epoch.
    pub issued_at_ms: i64,
    /// Who issued it, on a daemon with users: the key acts as them, inside its endpoint
    /// (`None`: the operator's, in the local workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<crate::UserId>,
}

/// Why an endpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The name is not a plain name.
    #[error(
        "'{0}' is not a valid endpoint name (1 to {MAX_NAME_CHARS} of a-z 0-9 - _, starting \
         with a letter or digit)"
    )]
    BadName(String),
    /// It includes nothing.
    #[error("an endpoint needs at least one server")]
    Empty,
    /// A list is longer than allowed.
    #[error("{0}")]
    TooLarge(String),
}

/// Whether `name` may name an endpoint: lower-case letters, digits, `-` and `_`, at most
/// [`MAX_NAME_CHARS`], starting with a letter or digit (it is a URL path segment).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

impl EndpointDefinition {
    /// Checks the definition's size; the name is checked by [`Endpoint::new`].
    pub fn check(&self) -> Result<(), EndpointError> {
        if self.servers.is_empty() {
            return Err(EndpointError::Empty);
        }
        if self.servers.len() > MAX_ENTRIES {
            return Err(EndpointError::TooLarge(format!(
                "an endpoint names at most {MAX_ENTRIES} servers"
            )));
        }
        for (server, tools) in &self.servers {
            if let ToolSet::Only(tools) = tools
                && tools.len() > MAX_ENTRIES
            {
                return Err(EndpointError::TooLarge(format!(
                    "an endpoint names at most {MAX_ENTRIES} tools of server '{server}'"
                )));
            }
        }
        if self
            .description
            .as_ref()
            .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS)
        {
            return Err(EndpointError::TooLarge(format!(
                "a description has at most {MAX_DESCRIPTION_CHARS} characters"
            )));
        }
        Ok(())
    }
}

impl Endpoint {
    /// A new endpoint with no keys, if its name and definition are valid.
    pub fn new(name: &str, definition: EndpointDefinition) -> Result<Self, EndpointError> {
        if !valid_name(name) {
            return Err(EndpointError::BadName(name.to_owned()));
        }
        definition.check()?;
        Ok(Self {
            name: name.to_owned(),
            definition,
            keys: Vec::new(),
        })
    }

    /// Whether the endpoint includes server `server` (its prompts and resources, and the tools
    /// its entry names).
    pub fn includes_server(&self, server: &str) -> bool {
        self.definition.servers.contains_key(server)
    }

    /// Whether the endpoint includes `tool` (upstream name) of `server`.
    pub fn includes_tool(&self, server: &str, tool: &str) -> bool {
        self.definition
            .servers
            .get(server)
            .is_some_and(|tools| tools.contains(tool))
    }

    /// The key whose SHA-256 is `digest`, if it is one of this endpoint's.
    pub fn key_with(&self, digest: &[u8; 32]) -> Option<&EndpointKey> {
        let hex = hex_of(digest);
        self.keys.iter().find(|key| key.sha256 == hex)
    }
}

/// `bytes` as lower-case hex (a digest on every audited call: two table lookups a byte, not a
/// formatter's).
pub fn hex_of(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    push_hex(bytes, &mut text);
    text
}

/// Appends `bytes` to `text` as [`hex_of`] writes them.
pub fn push_hex(bytes: &[u8], text: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(hex_of(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex_of(&[]), "");
    }

    #[test]
    fn an_endpoint_includes_the_tools_it_names_and_every_tool_of_a_starred_server() {
        let definition: EndpointDefinition = serde_json::from_value(serde_json::json!({
            "description": "support agents",
            "servers": {"github": ["search_issues"], "docs": "*"},
        }))
        .unwrap();
        let endpoint = Endpoint::new("support", definition).unwrap();
        assert!(endpoint.includes_tool("github", "search_issues"));
        assert!(!endpoint.includes_tool("github", "delete_repo"));
        assert!(endpoint.includes_tool("docs", "anything"));
        assert!(!endpoint.includes_tool("slack", "post"));
        assert!(endpoint.includes_server("github") && !endpoint.includes_server("slack"));
        let round = serde_json::to_value(&endpoint).unwrap();
        assert_eq!(round["servers"]["docs"], "*");
        assert_eq!(serde_json::from_value::<Endpoint>(round).unwrap(), endpoint);
    }

    #[test]
    fn names_and_definitions_that_cannot_be_served_are_refused() {
        let one = |servers: serde_json::Value| {
            serde_json::from_value::<EndpointDefinition>(serde_json::json!({"servers": servers}))
        };
        let fine = one(serde_json::json!({"a": "*"})).unwrap();
        for bad in ["", "Support", "a/b", "-x", "a b", &"x".repeat(65)] {
            assert_eq!(
                Endpoint::new(bad, fine.clone()).unwrap_err(),
                EndpointError::BadName(bad.to_owned())
            );
        }
        assert!(Endpoint::new("ok-1_a", fine).is_ok());
        assert_eq!(
            Endpoint::new("e", one(serde_json::json!({})).unwrap()).unwrap_err(),
            EndpointError::Empty
        );
        let error = one(serde_json::json!({"a": "all"}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("'all' is not a tool list"), "{error}");
        assert!(
            serde_json::from_value::<EndpointDefinition>(
                serde_json::json!({"servers": {"a": "*"}, "extra": 1})
            )
            .is_err()
        );
        let many: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("t{i}")).collect();
        assert!(matches!(
            Endpoint::new("e", one(serde_json::json!({"a": many})).unwrap()),
            Err(EndpointError::TooLarge(_))
        ));
    }

    #[test]
    fn a_key_is_known_by_its_digest() {
        let mut endpoint = Endpoint::new(
            "e",
            EndpointDefinition {
                description: None,
                servers: [("a".to_owned(), ToolSet::All)].into(),
            },
        )
        .unwrap();
        let digest = [7u8; 32];
        assert!(endpoint.key_with(&digest).is_none());
        endpoint.keys.push(EndpointKey {
            id: "k1".into(),
            sha256: hex_of(&digest),
            issued_at_ms: 0,
            user: None,
        });
        assert_eq!(
            endpoint.key_with(&digest).map(|k| k.id.as_str()),
            Some("k1")
        );
        assert!(endpoint.key_with(&[8u8; 32]).is_none());
    }
}
