//! The audit log's records: who did what through Switchboard, kept in the store so that a
//! platform team can show what ran (every tool call, every configuration change, sign-in and
//! approval decision).
//!
//! A call's arguments are kept as the daemon's [`AuditArguments`] setting says: their SHA-256
//! (the default, the digest an approval names), the arguments with secrets and personal data
//! masked ([`crate::redact`]), or not at all. The store writes and reads records; the hub
//! makes them; this module says what they hold and how a query filters them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The most records one page of a query returns.
pub const MAX_PAGE: u32 = 1000;

/// The page size when a query names none.
pub const DEFAULT_PAGE: u32 = 100;

/// The longest text a record keeps in one field (an actor, a tool name, an outcome): longer
/// text is cut, so that no caller makes a record large by sending a long name.
pub const MAX_FIELD_CHARS: usize = 256;

/// The most bytes a record's redacted arguments or detail keep; beyond that the record keeps
/// their digest instead.
pub const MAX_DETAIL_BYTES: usize = 16 * 1024;

/// What a record is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    /// A tool call that reached a server, or was refused on its way.
    Call,
    /// A person's answer to an approval question (or its timeout).
    Approval,
    /// A change of the configuration (servers, endpoints, keys, users, settings).
    Change,
    /// A sign-in to an upstream server.
    SignIn,
    /// A tool's definition found changed (held or warned of), or a new one accepted.
    Definition,
}

impl AuditKind {
    /// Every kind, in the order the API lists them.
    pub const ALL: [Self; 5] = [
        Self::Call,
        Self::Approval,
        Self::Change,
        Self::SignIn,
        Self::Definition,
    ];

    /// Its name in records and queries.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Call => "call",
            Self::Approval => "approval",
            Self::Change => "change",
            Self::SignIn => "sign_in",
            Self::Definition => "definition",
        }
    }
}

impl fmt::Display for AuditKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AuditKind {
    type Err = AuditError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| AuditError::UnknownKind(text.to_owned()))
    }
}

/// How a call's arguments are kept in the audit log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditArguments {
    /// Their SHA-256 only (of their JSON, as an approval names it).
    #[default]
    Digest,
    /// The arguments, with secrets and personal data masked ([`crate::redact`]).
    Redacted,
    /// Nothing of them.
    Omitted,
}

impl FromStr for AuditArguments {
    type Err = AuditError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "digest" => Ok(Self::Digest),
            "redacted" => Ok(Self::Redacted),
            "omitted" => Ok(Self::Omitted),
            other => Err(AuditError::UnknownArguments(other.to_owned())),
        }
    }
}

/// Why an audit query or setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    /// A kind that is not one of [`AuditKind::ALL`].
    #[error("unknown audit record kind '{0}' (call, approval, change, sign_in or definition)")]
    UnknownKind(String),
    /// An arguments setting that is not one of digest, redacted or omitted.
    #[error("unknown audit arguments setting '{0}' (digest, redacted or omitted)")]
    UnknownArguments(String),
    /// A page size out of range.
    #[error("a page holds 1 to {MAX_PAGE} records")]
    PageSize,
}

/// Where a call came in, for its audit record: the door, the endpoint, the client and the
/// arguments as the log keeps them. Made by the front door for each call it relays.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOrigin {
    /// The door: `mcp` (Streamable HTTP), `sse` (HTTP+SSE), `ws`, `stdio`, `api` (the admin
    /// API's call), `cli` (`switchboard call` in-process).
    pub door: &'static str,
    /// The endpoint the client came through, if any.
    pub endpoint: Option<String>,
    /// The client, as it named itself (`clientInfo`) or its `X-Switchboard-Client`; shared, as
    /// one client's calls name it alike.
    pub client: Option<std::sync::Arc<str>>,
    /// The name the client called the tool by.
    pub exposed: String,
    /// The arguments, as the log keeps them.
    pub arguments: Option<KeptJson>,
}

/// JSON a record keeps (a call's arguments, a record's detail), as its text. It is serialized
/// once, where the record is made, and written to the store as it is: no tree of values is
/// copied into the record, walked by the store's writer, and freed on the writer's thread.
/// The API shows it as the JSON it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeptJson(Box<RawValue>);

impl KeptJson {
    /// `value`, serialized.
    pub fn of(value: &impl Serialize) -> Self {
        // Serializing JSON values and structs of strings does not fail; `null` if it ever did.
        Self(serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }

    /// What the store kept: text that is not JSON is shown as the string it is.
    pub fn from_stored(text: String) -> Self {
        if serde_json::from_str::<&RawValue>(&text).is_err() {
            return Self::of(&text);
        }
        match RawValue::from_string(text) {
            Ok(raw) => Self(raw),
            Err(_) => Self(RawValue::NULL.to_owned()),
        }
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The JSON text, owned, without a copy.
    pub fn into_string(self) -> String {
        String::from(Box::<str>::from(self.0))
    }

    /// The JSON as a value (`null` if it were not JSON, which [`KeptJson`] never holds).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.as_str()).unwrap_or(Value::Null)
    }
}

impl PartialEq for KeptJson {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for KeptJson {}

impl KeptJson {
    /// The digest a record keeps of a call's arguments, `{"sha256":"<hex>"}` (with `"cut":true`
    /// when the redacted arguments were too large to keep). Written as its text at once: every
    /// audited call keeps one.
    fn arguments_digest(sha256: &[u8], cut: bool) -> Self {
        const BEGIN: &str = r#"{"sha256":""#;
        let end = if cut { r#"","cut":true}"# } else { r#""}"# };
        let mut text = String::with_capacity(BEGIN.len() + 2 * sha256.len() + end.len());
        text.push_str(BEGIN);
        crate::endpoint::push_hex(sha256, &mut text);
        text.push_str(end);
        // JSON by construction (hex digits only between the quotes); `null` if it ever were not.
        Self(RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }
}

/// One record of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Its number in the log, rising with time; set by the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// When it happened (ms since the Unix epoch).
    pub at_ms: u64,
    /// What it is of.
    pub kind: AuditKind,
    /// The tenant it happened in.
    pub tenant: String,
    /// Who did it: `operator`, a user's id, or `cli:<login>` for the command line.
    pub actor: String,
    /// The door it came through (see [`CallOrigin::door`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub door: Option<String>,
    /// The endpoint it came through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The client it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The server it concerns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The tool it concerns, by its name at the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A call's arguments, as the log keeps them: `{"sha256": ...}` or the redacted object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<KeptJson>,
    /// How it ended: `ok`, `tool_error`, `failed`, `timeout`, `cancelled`, `refused`,
    /// `approved`, `timed_out`, or an HTTP status for a change.
    pub outcome: String,
    /// How long it took, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What else there is to say (a change's method and path, a refusal's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<KeptJson>,
}

impl AuditRecord {
    /// A record of `kind` by `actor` in `tenant`, now (`at_ms`), ending as `outcome`; the rest
    /// empty. Every text is cut to [`MAX_FIELD_CHARS`].
    pub fn new(kind: AuditKind, at_ms: u64, tenant: &str, actor: &str, outcome: &str) -> Self {
        Self {
            id: None,
            at_ms,
            kind,
            tenant: bounded(tenant),
            actor: bounded(actor),
            door: None,
            endpoint: None,
            client: None,
            server: None,
            tool: None,
            arguments: None,
            outcome: bounded(outcome),
            duration_ms: None,
            detail: None,
        }
    }

    /// This record with the server and tool it concerns.
    pub fn about(mut self, server: &str, tool: Option<&str>) -> Self {
        self.server = Some(bounded(server));
        self.tool = tool.map(bounded);
        self
    }

    /// This record with a call's origin: its door, endpoint, client and arguments, and the
    /// name it was called by (in the detail when it differs from the tool's). The origin's
    /// text is moved into the record, not copied, when nothing else holds it (a finished call's,
    /// on the audit log's writer).
    pub fn from_origin(mut self, origin: std::sync::Arc<CallOrigin>) -> Self {
        let origin = std::sync::Arc::unwrap_or_clone(origin);
        self.door = Some(origin.door.to_owned());
        self.endpoint = origin.endpoint.map(bounded_owned);
        self.client = origin.client.as_deref().map(bounded);
        self.arguments = origin.arguments;
        if self.tool.as_deref() != Some(origin.exposed.as_str()) {
            #[derive(Serialize)]
            struct CalledAs {
                called_as: String,
            }
            self.detail = Some(KeptJson::of(&CalledAs {
                called_as: bounded_owned(origin.exposed),
            }));
        }
        self
    }

    /// This record with `detail` (`{"cut": true}` instead when larger than
    /// [`MAX_DETAIL_BYTES`]).
    pub fn with_detail(mut self, detail: Value) -> Self {
        let kept = KeptJson::of(&detail);
        self.detail = Some(if kept.as_str().len() > MAX_DETAIL_BYTES {
            KeptJson::of(&serde_json::json!({"cut": true}))
        } else {
            kept
        });
        self
    }
}

/// `text` cut to [`MAX_FIELD_CHARS`] characters.
pub fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_FIELD_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// [`bounded`], keeping `text` as it is (not copied) when it has no more bytes than
/// [`MAX_FIELD_CHARS`], so no more characters either.
pub fn bounded_owned(text: String) -> String {
    if text.len() <= MAX_FIELD_CHARS {
        text
    } else {
        bounded(&text)
    }
}

/// What a query of the audit log asks for: every filter optional, newest first, a page at a
/// time (`before`: the last page's smallest id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only records of this kind.
    pub kind: Option<AuditKind>,
    /// Only records by this actor.
    pub actor: Option<String>,
    /// Only records of this server.
    pub server: Option<String>,
    /// Only records of this tool.
    pub tool: Option<String>,
    /// Only records that ended so.
    pub outcome: Option<String>,
    /// Only records that came through this endpoint.
    pub endpoint: Option<String>,
    /// Only records of this tenant (the operator's queries; a tenant's are always its own).
    pub tenant: Option<String>,
    /// Only records at or after this time (ms since the Unix epoch).
    pub since: Option<u64>,
    /// Only records before this time (ms since the Unix epoch).
    pub until: Option<u64>,
    /// Only records numbered below this (the next page).
    pub before: Option<i64>,
    /// The most records to return ([`DEFAULT_PAGE`] when absent, at most [`MAX_PAGE`]).
    pub limit: Option<u32>,
}

impl AuditQuery {
    /// The page size this query asks for, checked.
    pub fn page_size(&self) -> Result<u32, AuditError> {
        match self.limit {
            None => Ok(DEFAULT_PAGE),
            Some(limit) if (1..=MAX_PAGE).contains(&limit) => Ok(limit),
            Some(_) => Err(AuditError::PageSize),
        }
    }
}

/// A call's arguments as `setting` keeps them: `{"sha256": digest}` (with `digest`, the one
/// an approval names, computed by the caller), the redacted arguments (their digest when
/// they are larger than [`MAX_DETAIL_BYTES`]), or nothing.
pub fn kept_arguments(
    setting: AuditArguments,
    arguments: Option<&Map<String, Value>>,
    digest: impl FnOnce() -> [u8; 32],
) -> Option<KeptJson> {
    let digest_of = |cut: bool| KeptJson::arguments_digest(&digest(), cut);
    match setting {
        AuditArguments::Omitted => None,
        AuditArguments::Digest => Some(digest_of(false)),
        AuditArguments::Redacted => {
            let redacted = KeptJson::of(&crate::redact::redact(&Value::Object(
                arguments.cloned().unwrap_or_default(),
            )));
            if redacted.as_str().len() > MAX_DETAIL_BYTES {
                Some(digest_of(true))
            } else {
                Some(redacted)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_and_settings_read_back_from_their_names() {
        for kind in AuditKind::ALL {
            assert_eq!(kind.as_str().parse::<AuditKind>(), Ok(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                json!(kind.as_str()),
                "the API and the store name it alike"
            );
        }
        assert!("login".parse::<AuditKind>().is_err());
        assert_eq!(
            "redacted".parse::<AuditArguments>(),
            Ok(AuditArguments::Redacted)
        );
        assert!("all".parse::<AuditArguments>().is_err());
    }

    #[test]
    fn long_text_is_cut_so_no_caller_makes_a_record_large() {
        let long = "x".repeat(10_000);
        let record = AuditRecord::new(AuditKind::Call, 1, "default", &long, "ok");
        assert_eq!(record.actor.chars().count(), MAX_FIELD_CHARS + 1);
        assert!(record.actor.ends_with('…'));
        assert_eq!(bounded("é".repeat(300).as_str()).chars().count(), 257);
        assert_eq!(
            bounded_owned("é".repeat(300)),
            bounded("é".repeat(300).as_str())
        );
        let within = "é".repeat(MAX_FIELD_CHARS);
        assert_eq!(
            bounded_owned(within.clone()),
            within,
            "more bytes, not more characters"
        );
        let origin = CallOrigin {
            door: "mcp",
            endpoint: Some(long.clone()),
            client: Some(long.as_str().into()),
            exposed: long.clone(),
            arguments: None,
        };
        let record = AuditRecord::new(AuditKind::Call, 1, "default", "operator", "ok")
            .about("alpha", Some("echo"))
            .from_origin(std::sync::Arc::new(origin));
        for kept in [&record.endpoint, &record.client] {
            assert_eq!(
                kept.as_deref().map(|t| t.chars().count()),
                Some(MAX_FIELD_CHARS + 1)
            );
        }
        let called_as = record.detail.unwrap().to_value()["called_as"].clone();
        assert_eq!(
            called_as.as_str().map(|t| t.chars().count()),
            Some(MAX_FIELD_CHARS + 1)
        );
    }

    #[test]
    fn arguments_are_kept_as_the_setting_says() {
        let arguments = json!({"query": "weather", "api_key": "sk-live-0123456789abcdef"});
        let arguments = arguments.as_object();
        let digest = || {
            let mut digest = [0u8; 32];
            digest[0] = 0xab;
            digest[31] = 0x09;
            digest
        };
        let hex = format!("ab{}09", "0".repeat(60));
        let kept = kept_arguments(AuditArguments::Digest, arguments, digest);
        assert_eq!(kept, Some(KeptJson::of(&json!({"sha256": hex}))));
        assert_eq!(
            kept.map(KeptJson::into_string),
            Some(format!(r#"{{"sha256":"{hex}"}}"#)),
            "as serde_json writes it"
        );
        assert_eq!(
            kept_arguments(AuditArguments::Omitted, arguments, digest),
            None
        );
        let redacted = kept_arguments(AuditArguments::Redacted, arguments, digest)
            .unwrap()
            .to_value();
        assert_eq!(redacted["query"], "weather");
        assert_ne!(redacted["api_key"], "sk-live-0123456789abcdef");
        let huge = json!({"text": "a".repeat(MAX_DETAIL_BYTES + 1)});
        assert_eq!(
            kept_arguments(AuditArguments::Redacted, huge.as_object(), digest),
            Some(KeptJson::of(&json!({"sha256": hex, "cut": true})))
        );
    }

    #[test]
    fn kept_json_reads_back_as_the_json_it_was_and_other_text_as_a_string() {
        let kept = KeptJson::of(&json!({"called_as": "alpha__echo", "n": [1, 2]}));
        let stored = kept.clone().into_string();
        assert_eq!(stored, r#"{"called_as":"alpha__echo","n":[1,2]}"#);
        assert_eq!(KeptJson::from_stored(stored), kept);
        let record = serde_json::to_value(
            AuditRecord::new(AuditKind::Change, 1, "default", "operator", "ok")
                .with_detail(json!({"path": "/api/servers"})),
        )
        .unwrap();
        assert_eq!(
            record["detail"],
            json!({"path": "/api/servers"}),
            "the API shows JSON"
        );
        assert_eq!(
            KeptJson::from_stored("not {json".to_owned()).to_value(),
            json!("not {json")
        );
    }

    #[test]
    fn a_page_size_out_of_range_is_refused() {
        let mut query = AuditQuery::default();
        assert_eq!(query.page_size(), Ok(DEFAULT_PAGE));
        query.limit = Some(0);
        assert_eq!(query.page_size(), Err(AuditError::PageSize));
        query.limit = Some(MAX_PAGE + 1);
        assert_eq!(query.page_size(), Err(AuditError::PageSize));
        query.limit = Some(MAX_PAGE);
        assert_eq!(query.page_size(), Ok(MAX_PAGE));
    }
}
