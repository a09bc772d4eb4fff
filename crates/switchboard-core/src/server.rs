//! What a configured upstream MCP server is.
//!
//! A [`ServerDefinition`] is the user's intent: how to reach the server and how to treat it. It is
//! what the store persists and what the upstream layer connects from. Secrets travel in plain text
//! inside this type (it lives in memory only); the store seals the values marked secret.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

/// What a secret looks like on display.
pub const REDACTED: &str = "********";

/// The environment variable that may carry the vault key. Defined here so that every layer (the
/// store reads it, the stdio transport strips it from child processes) names the same variable.
pub const VAULT_KEY_ENV: &str = "SWITCHBOARD_VAULT_KEY";

/// A server's identifier: a slug of lowercase ASCII letters, digits and single hyphens.
///
/// Ids become prefixes of exposed tool names (`{server}__{tool}`), so they exclude `_` to keep
/// that separator unambiguous, and are at most 64 characters long. A clone shares the text: ids
/// are copied into every exposed entry, event and call record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ServerId(Arc<str>);

/// Why a string is not a valid [`ServerId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerIdError {
    /// The id was empty.
    #[error("a server id cannot be empty")]
    Empty,
    /// The id was longer than 64 characters.
    #[error("server id '{0}' is longer than 64 characters")]
    TooLong(String),
    /// The id had a character outside `a-z`, `0-9` and `-`, or a misplaced hyphen.
    #[error(
        "server id '{0}' must use only lowercase letters, digits and single hyphens, and start and end with a letter or digit"
    )]
    BadCharacters(String),
}

impl ServerId {
    /// Maximum length of an id.
    pub const MAX_LEN: usize = 64;

    /// Validates `id` as a slug.
    pub fn new(id: impl Into<String>) -> Result<Self, ServerIdError> {
        let id = id.into();
        if id.is_empty() {
            return Err(ServerIdError::Empty);
        }
        if id.len() > Self::MAX_LEN {
            return Err(ServerIdError::TooLong(id));
        }
        let valid_chars = id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid_chars || id.starts_with('-') || id.ends_with('-') || id.contains("--") {
            return Err(ServerIdError::BadCharacters(id));
        }
        Ok(Self(id.into()))
    }

    /// Turns any display name into the closest valid id ("My Server_2" -> "my-server-2").
    /// Returns `None` when nothing usable is left.
    pub fn slugify(name: &str) -> Option<Self> {
        let mut slug = String::new();
        for c in name.chars() {
            if c.is_ascii_alphanumeric() {
                slug.push(c.to_ascii_lowercase());
            } else if !slug.is_empty() && !slug.ends_with('-') {
                slug.push('-');
            }
        }
        let mut slug = slug.trim_end_matches('-').to_owned();
        slug.truncate(Self::MAX_LEN);
        Self::new(slug.trim_end_matches('-')).ok()
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ServerId {
    type Err = ServerIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<String> for ServerId {
    type Error = ServerIdError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<ServerId> for String {
    fn from(id: ServerId) -> Self {
        id.0.to_string()
    }
}

/// A name/value pair (an HTTP header or an environment variable) whose value may be secret.
///
/// Secret values are sealed at rest and never printed; `Debug` redacts them.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedValue {
    /// Header or variable name.
    pub name: String,
    /// The value, in plain text (in memory only).
    pub value: String,
    /// Whether the value must be sealed at rest and redacted on display.
    #[serde(default)]
    pub secret: bool,
}

impl NamedValue {
    /// A value whose secrecy is guessed from its name: credentials, tokens, keys, passwords,
    /// cookies and authorization headers are secret.
    pub fn guess(name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        let secret = looks_secret(&name);
        Self {
            name,
            value: value.into(),
            secret,
        }
    }

    /// The value as it may be shown to a person: `********` when secret.
    pub fn display_value(&self) -> &str {
        if self.secret { REDACTED } else { &self.value }
    }
}

impl fmt::Debug for NamedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.display_value())
    }
}

fn looks_secret(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "authorization",
        "token",
        "secret",
        "key",
        "password",
        "passwd",
        "cookie",
        "credential",
        "auth",
    ]
    .iter()
    .any(|marker| lower.contains(marker))
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TransportSpec {
    /// An `http://` or `https://` URL; the protocol era is detected by probing.
    Http {
        /// The MCP endpoint (or, for HTTP+SSE servers, the SSE endpoint).
        url: Url,
        /// Static headers sent with every request.
        #[serde(default)]
        headers: Vec<NamedValue>,
        /// The one transport to use, when the user chose it: nothing else is probed. For a
        /// server whose stateless face offers less than its sessions (a client cannot tell
        /// without sending `initialize` to a server that answered `server/discover`, which the
        /// spec forbids), or one that misreads the probe.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pinned: Option<DetectedTransport>,
    },
    /// A `ws://` or `wss://` URL, subprotocol `mcp`.
    WebSocket {
        /// The WebSocket endpoint.
        url: Url,
        /// Static headers sent with the upgrade request.
        #[serde(default)]
        headers: Vec<NamedValue>,
    },
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        /// The program to run.
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Extra environment variables.
        #[serde(default)]
        env: Vec<NamedValue>,
        /// Working directory, if not the daemon's.
        #[serde(default)]
        cwd: Option<PathBuf>,
    },
    /// A stdio server from one of the operator's approved commands
    /// ([`crate::approved::ApprovedCommand`]), with the user's own arguments and variables from
    /// those it allows; the command line is the approved command's, read when the server starts.
    Approved {
        /// The approved command's name.
        name: String,
        /// The user's arguments, added after the command's own.
        #[serde(default)]
        args: Vec<String>,
        /// The user's values for the variables the command lets them set.
        #[serde(default)]
        env: Vec<NamedValue>,
    },
    /// A server Switchboard runs inside itself (URL `builtin:<name>`; see [`BUILTIN_SERVERS`]).
    Builtin {
        /// Which one.
        name: String,
        /// For `human`: its questions wait for a person even while no console is open
        /// (`builtin:human?wait=always`, for people who answer through the API). By default a
        /// question nobody is there to see is answered at once that no one is available.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        wait_always: bool,
    },
}

/// The servers Switchboard carries inside itself, added by URL `builtin:<name>`: `human`, whose
/// tools (ask, confirm, choose) wait for a person to answer in the web console.
pub const BUILTIN_SERVERS: &[&str] = &["human"];

/// How long a built-in server's tool call may run: a person may take minutes to answer.
pub const BUILTIN_TOOL_CALL_LIMIT: Duration = Duration::from_secs(3600);

/// Why a URL cannot be a server transport.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportSpecError {
    /// The text is not a URL at all.
    #[error("'{0}' is not a valid URL: {1}")]
    BadUrl(String, String),
    /// The URL's scheme is not one Switchboard can speak.
    #[error("unsupported URL scheme '{0}': use http, https, ws, wss or builtin")]
    UnsupportedScheme(String),
    /// The text is an address without a scheme (`example.com/mcp`, `localhost:3000/mcp`).
    #[error("'{0}' has no scheme: did you mean '{1}'?")]
    NoScheme(String, String),
    /// A `builtin:` URL named no built-in server.
    #[error("there is no built-in server '{0}': the built-in servers are {list}", list = BUILTIN_SERVERS.join(", "))]
    UnknownBuiltin(String),
    /// A `builtin:` URL's query was not one a built-in server takes.
    #[error("a built-in server takes only '?wait=always' or '?wait=console', not '?{0}'")]
    BuiltinOption(String),
    /// A stdio command was empty.
    #[error("a stdio server needs a command")]
    EmptyCommand,
    /// A configured header is one the transports set themselves.
    #[error("header '{0}' is set by Switchboard itself and cannot be configured")]
    ReservedHeader(String),
}

/// Whether a parsed "URL" is really a host and port without a scheme: `localhost:3000/mcp`
/// parses with the scheme `localhost`.
fn looks_like_host_and_port(parsed: &Url) -> bool {
    !matches!(parsed.scheme(), "http" | "https" | "ws" | "wss" | "builtin")
        && parsed.cannot_be_a_base()
        && parsed.path().starts_with(|c: char| c.is_ascii_digit())
}

/// Whether text that is no URL reads as an address a scheme would make one of
/// (`mcp.example.com/mcp`, `localhost/mcp`): no spaces, and a host with a dot, or `localhost`.
fn looks_like_an_address(text: &str) -> bool {
    let host = text.split(['/', ':']).next().unwrap_or_default();
    !text.contains(char::is_whitespace)
        && (host == "localhost" || (host.contains('.') && !host.starts_with('.')))
}

/// `address` with the scheme it most likely lacks: `http://` for this machine, else `https://`.
fn with_scheme(address: &str) -> String {
    let host = address.split(['/', ':']).next().unwrap_or_default();
    let local = host == "localhost" || host.starts_with("127.") || host == "[::1]";
    format!("{}://{address}", if local { "http" } else { "https" })
}

/// Headers the MCP transports set per request; a configured copy would be sent twice or
/// contradict the body, which strict 2026-07-28 servers reject.
fn is_reserved_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "accept"
            | "content-type"
            | "content-length"
            | "host"
            | "connection"
            | "upgrade"
            | "mcp-session-id"
            | "mcp-protocol-version"
            | "last-event-id"
            | "mcp-method"
            | "mcp-name"
    ) || lower.starts_with("mcp-param-")
        || lower.starts_with("sec-websocket-")
}

impl TransportSpec {
    /// Builds an HTTP or WebSocket transport from a URL, by scheme.
    pub fn from_url(url: &str, headers: Vec<NamedValue>) -> Result<Self, TransportSpecError> {
        let parsed = match Url::parse(url) {
            Ok(parsed) if !looks_like_host_and_port(&parsed) => parsed,
            Ok(_) => return Err(TransportSpecError::NoScheme(url.into(), with_scheme(url))),
            Err(url::ParseError::RelativeUrlWithoutBase) if looks_like_an_address(url) => {
                return Err(TransportSpecError::NoScheme(url.into(), with_scheme(url)));
            }
            Err(e) => return Err(TransportSpecError::BadUrl(url.into(), e.to_string())),
        };
        if let Some(reserved) = headers.iter().find(|h| is_reserved_header(&h.name)) {
            return Err(TransportSpecError::ReservedHeader(reserved.name.clone()));
        }
        match parsed.scheme() {
            "http" | "https" => Ok(Self::Http {
                url: parsed,
                headers,
                pinned: None,
            }),
            "ws" | "wss" => Ok(Self::WebSocket {
                url: parsed,
                headers,
            }),
            "builtin" => {
                let name = parsed.path();
                if !BUILTIN_SERVERS.contains(&name) || !headers.is_empty() {
                    return Err(TransportSpecError::UnknownBuiltin(name.into()));
                }
                let wait_always = match parsed.query() {
                    None | Some("" | "wait=console") => false,
                    Some("wait=always") => true,
                    Some(other) => return Err(TransportSpecError::BuiltinOption(other.into())),
                };
                Ok(Self::Builtin {
                    name: name.into(),
                    wait_always,
                })
            }
            other => Err(TransportSpecError::UnsupportedScheme(other.into())),
        }
    }

    /// Builds a stdio transport.
    pub fn stdio(
        command: impl Into<String>,
        args: Vec<String>,
        env: Vec<NamedValue>,
        cwd: Option<PathBuf>,
    ) -> Result<Self, TransportSpecError> {
        let command = command.into();
        if command.trim().is_empty() {
            return Err(TransportSpecError::EmptyCommand);
        }
        Ok(Self::Stdio {
            command,
            args,
            env,
            cwd,
        })
    }

    /// A short label of the transport kind: `http`, `websocket`, `stdio` or `builtin`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Http { .. } => "http",
            Self::WebSocket { .. } => "websocket",
            Self::Stdio { .. } | Self::Approved { .. } => "stdio",
            Self::Builtin { .. } => "builtin",
        }
    }

    /// Where the server is, for display: the URL, or the command line.
    pub fn target(&self) -> String {
        match self {
            Self::Http { url, .. } | Self::WebSocket { url, .. } => url.to_string(),
            Self::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Self::Approved { name, args, .. } => std::iter::once(format!("approved:{name}"))
                .chain(args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" "),
            Self::Builtin { name, wait_always } => match wait_always {
                true => format!("builtin:{name}?wait=always"),
                false => format!("builtin:{name}"),
            },
        }
    }

    /// [`Self::target`] safe to show and log: a URL's password and query values (where API
    /// keys often travel) are replaced by `********`.
    pub fn display_target(&self) -> String {
        match self {
            Self::Http { url, .. } | Self::WebSocket { url, .. } => redact_url(url),
            Self::Stdio { .. } | Self::Approved { .. } | Self::Builtin { .. } => self.target(),
        }
    }

    /// A copy safe to show: secret values, and the URL's password and query values, replaced by
    /// `********`.
    pub fn redacted(&self) -> Self {
        let mut shown = self.clone();
        if let Self::Http { url, .. } | Self::WebSocket { url, .. } = &mut shown
            && let Ok(redacted) = Url::parse(&redact_url(url))
        {
            *url = redacted;
        }
        for value in shown.named_values_mut() {
            if value.secret {
                value.value = value.display_value().to_owned();
            }
        }
        shown
    }

    /// A copy safe to show to someone the server is shared with who may not change it: every
    /// header and environment value, and every argument, as `********`, whatever their names
    /// (`DB_URL=postgres://user:password@...` looks harmless), besides what [`Self::redacted`]
    /// hides.
    pub fn redacted_for_users(&self) -> Self {
        let mut shown = self.redacted();
        for value in shown.named_values_mut() {
            value.value = REDACTED.to_owned();
        }
        if let Self::Stdio { args, .. } | Self::Approved { args, .. } = &mut shown {
            for arg in args.iter_mut() {
                *arg = REDACTED.to_owned();
            }
        }
        shown
    }

    /// Every name/value pair that belongs to this transport (headers or env).
    pub fn named_values(&self) -> &[NamedValue] {
        match self {
            Self::Http { headers, .. } | Self::WebSocket { headers, .. } => headers,
            Self::Stdio { env, .. } | Self::Approved { env, .. } => env,
            Self::Builtin { .. } => &[],
        }
    }

    /// Mutable access to the name/value pairs, so the store can seal and unseal them in place.
    /// A built-in server has none; its list is always empty.
    pub fn named_values_mut(&mut self) -> &mut [NamedValue] {
        match self {
            Self::Http { headers, .. } | Self::WebSocket { headers, .. } => headers,
            Self::Stdio { env, .. } | Self::Approved { env, .. } => env,
            Self::Builtin { .. } => &mut [],
        }
    }

    /// Sets a header (HTTP, WebSocket; names compared without case) or environment variable
    /// (stdio), replacing one of the same name. False for a transport that has neither, or a
    /// header the transport sets itself.
    pub fn set_named_value(&mut self, value: NamedValue) -> bool {
        let (values, headers) = match self {
            Self::Http { headers, .. } | Self::WebSocket { headers, .. } => (headers, true),
            Self::Stdio { env, .. } | Self::Approved { env, .. } => (env, false),
            Self::Builtin { .. } => return false,
        };
        if headers && is_reserved_header(&value.name) {
            return false;
        }
        let same = |existing: &NamedValue| {
            if headers {
                existing.name.eq_ignore_ascii_case(&value.name)
            } else {
                existing.name == value.name
            }
        };
        match values.iter_mut().find(|existing| same(existing)) {
            Some(existing) => *existing = value,
            None => values.push(value),
        }
        true
    }
}

fn redact_url(url: &Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some(REDACTED));
    }
    if shown.query().is_some() {
        let names: Vec<String> = shown
            .query_pairs()
            .map(|(name, _)| name.into_owned())
            .collect();
        shown
            .query_pairs_mut()
            .clear()
            .extend_pairs(names.iter().map(|name| (name.as_str(), "********")));
    }
    shown.to_string()
}

/// Per-server timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeouts {
    /// Ordinary requests (list, read, get), and the connection handshake.
    #[serde(with = "millis")]
    pub request: Duration,
    /// Sending a notification.
    #[serde(with = "millis")]
    pub notification: Duration,
    /// `tools/call`.
    #[serde(with = "millis")]
    pub tool_call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            request: Duration::from_secs(30),
            notification: Duration::from_secs(10),
            tool_call: Duration::from_secs(60),
        }
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// A configured upstream MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerDefinition {
    /// Unique slug.
    pub id: ServerId,
    /// Human-readable name.
    pub display_name: String,
    /// What the server is for.
    #[serde(default)]
    pub description: String,
    /// How to reach it.
    pub transport: TransportSpec,
    /// Per-server timeouts.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Whether the daemon connects to it.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// Upstream tool names that are hidden and cannot be called.
    #[serde(default)]
    pub disabled_tools: BTreeSet<String>,
    /// OAuth client credentials registered for this server, if the user has some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_client: Option<OAuthClient>,
    /// The prefix of the server's exposed names; `None` means the server id, `Some("")` none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// How calls of its tools become tasks (the tasks extension) for clients that can take
    /// them, by upstream tool name; a tool not listed is [`TaskMode::Optional`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_modes: BTreeMap<String, TaskMode>,
    /// Pinned tools and allowed callers, by upstream tool name.
    #[serde(default, skip_serializing_if = "crate::ToolPolicies::is_empty")]
    pub policies: crate::ToolPolicies,
    /// The only tools (by upstream name) a member bound by grants may reach of this shared
    /// server, set as their workspace reads it (see [`crate::grants`]); `None`: every tool.
    /// Never stored or shown: the tools outside it are withheld, not disabled.
    #[serde(skip)]
    pub granted_tools: Option<BTreeSet<String>>,
}

/// Whether the front door runs a call of a tool as a task (the `io.modelcontextprotocol/tasks`
/// extension, SEP-2663) for a client that declared the extension on its request. Switchboard
/// runs such tasks itself, whatever the server behind the tool supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskMode {
    /// Never: the call is answered as it runs.
    Forbidden,
    /// When it runs longer than a moment: an answer (or a request for input) that comes
    /// sooner is given as usual, a longer call becomes a task the client polls.
    #[default]
    Optional,
    /// Always, from the start (requests for input are asked through the task); a client that
    /// cannot take tasks is refused with -32021.
    Required,
}

impl TaskMode {
    /// The mode's name as written in configuration (`forbidden`, `optional`, `required`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

impl FromStr for TaskMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "forbidden" => Ok(Self::Forbidden),
            "optional" => Ok(Self::Optional),
            "required" => Ok(Self::Required),
            other => Err(format!(
                "'{other}' is not a task mode (forbidden, optional or required)"
            )),
        }
    }
}

/// OAuth client credentials the user registered with a server's authorization server. They take
/// priority over client ID metadata documents and dynamic registration, and are only ever sent
/// to `issuer` when it is set.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OAuthClient {
    /// The client id.
    pub client_id: String,
    /// The client secret, for confidential clients. Sealed at rest, redacted on display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The authorization server (issuer) the credentials belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// How tokens are obtained.
    #[serde(default)]
    pub grant: OAuthGrant,
    /// A PEM private key for `private_key_jwt` client authentication. Sealed at rest, redacted
    /// on display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_pem: Option<String>,
    /// The JWS algorithm of that key (`RS256`, `ES256`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_algorithm: Option<String>,
    /// The redirect URI registered with the client, when the authorization server insists on
    /// an exact one: `switchboard login` listens there (an `http://127.0.0.1:<port>/<path>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
}

/// How a server's tokens are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OAuthGrant {
    /// A person signs in (`switchboard login`).
    #[default]
    AuthorizationCode,
    /// Machine to machine: the client's own credentials, no person involved.
    ClientCredentials,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| REDACTED),
            )
            .field("issuer", &self.issuer)
            .field("grant", &self.grant)
            .field(
                "private_key_pem",
                &self.private_key_pem.as_ref().map(|_| REDACTED),
            )
            .finish()
    }
}

impl OAuthClient {
    /// The credentials as they may be shown: the secret replaced.
    pub fn redacted(&self) -> Self {
        Self {
            client_secret: self.client_secret.as_ref().map(|_| REDACTED.to_owned()),
            private_key_pem: self.private_key_pem.as_ref().map(|_| REDACTED.to_owned()),
            ..self.clone()
        }
    }
}

fn enabled_by_default() -> bool {
    true
}

impl ServerDefinition {
    /// Whether `other` reaches the server as this does (transport, timeouts, OAuth client):
    /// a definition that differs only elsewhere (names, description, prefix, tool settings,
    /// policies, task modes, rate limits) applies to a running connection without reconnecting.
    pub fn connects_like(&self, other: &Self) -> bool {
        self.id == other.id
            && self.enabled == other.enabled
            && self.transport == other.transport
            && self.timeouts == other.timeouts
            && self.oauth_client == other.oauth_client
    }

    /// A definition with defaults for everything but the id and transport.
    pub fn new(id: ServerId, transport: TransportSpec) -> Self {
        let mut timeouts = Timeouts::default();
        if let TransportSpec::Builtin { .. } = transport {
            timeouts.tool_call = BUILTIN_TOOL_CALL_LIMIT;
        }
        Self {
            display_name: id.to_string(),
            id,
            description: String::new(),
            transport,
            timeouts,
            enabled: true,
            disabled_tools: BTreeSet::new(),
            oauth_client: None,
            prefix: None,
            task_modes: BTreeMap::new(),
            policies: crate::ToolPolicies::default(),
            granted_tools: None,
        }
    }

    /// A copy safe to show: secret values, URL credentials and the OAuth client's secrets
    /// replaced by `********`.
    pub fn redacted(&self) -> Self {
        Self {
            transport: self.transport.redacted(),
            oauth_client: self.oauth_client.as_ref().map(OAuthClient::redacted),
            ..self.clone()
        }
    }

    /// Carries over from `stored` (this server's stored definition) what a file entry cannot
    /// say and what was shown redacted: the prefix, task modes, per-tool policies and OAuth
    /// client stay as set (unless this definition names a client), a transport pinned for the
    /// same URL stays pinned, and a header or variable whose value is `********`, or a URL
    /// equal to the stored one's redacted form, keeps the stored value. A definition read back
    /// from the API or a file and written again so loses nothing.
    pub fn keep_unwritten_settings(&mut self, stored: &ServerDefinition) {
        self.prefix = stored.prefix.clone();
        self.task_modes = stored.task_modes.clone();
        self.policies = stored.policies.clone();
        self.oauth_client = self.oauth_client.take().or(stored.oauth_client.clone());
        let stored_values = stored.transport.named_values();
        for value in self.transport.named_values_mut() {
            if value.value == REDACTED
                && let Some(kept) = stored_values.iter().find(|v| v.name == value.name)
            {
                value.value = kept.value.clone();
                value.secret = kept.secret;
            }
        }
        match (&mut self.transport, &stored.transport) {
            (
                TransportSpec::Http { url, .. } | TransportSpec::WebSocket { url, .. },
                TransportSpec::Http { url: old, .. } | TransportSpec::WebSocket { url: old, .. },
            ) if *url != *old && url.as_str() == redact_url(old) => *url = old.clone(),
            _ => {}
        }
        if let (
            TransportSpec::Http { url, pinned, .. },
            TransportSpec::Http {
                url: old,
                pinned: Some(kept),
                ..
            },
        ) = (&mut self.transport, &stored.transport)
            && pinned.is_none()
            && url == old
        {
            *pinned = Some(*kept);
        }
    }

    /// How calls of the upstream tool `tool` become tasks.
    pub fn task_mode(&self, tool: &str) -> TaskMode {
        self.task_modes.get(tool).copied().unwrap_or_default()
    }

    /// The prefix of the server's exposed names: the configured one if it is valid, else the id.
    pub fn exposed_prefix(&self) -> crate::exposure::Prefix {
        self.prefix
            .as_deref()
            .and_then(|p| crate::exposure::Prefix::new(p).ok())
            .unwrap_or_else(|| crate::exposure::Prefix::of_server(&self.id))
    }

    /// Whether the upstream tool `name` may be exposed and called.
    pub fn tool_enabled(&self, name: &str) -> bool {
        self.tool_granted(name) && !self.disabled_tools.contains(name)
    }

    /// Whether the grants of the workspace's member reach the upstream tool `name` (always,
    /// when grants do not bound them). A tool they do not is withheld: not even named.
    pub fn tool_granted(&self, name: &str) -> bool {
        self.granted_tools
            .as_ref()
            .is_none_or(|granted| granted.contains(name))
    }
}

/// What the era probe found behind an HTTP URL; cached per server so the probe runs once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetectedTransport {
    /// Stateless Streamable HTTP, 2026-07-28 and later (`server/discover`, per-request `_meta`).
    StreamableHttpStateless,
    /// Streamable HTTP with `initialize` and sessions (2025-03-26 .. 2025-11-25).
    StreamableHttp,
    /// The deprecated HTTP+SSE transport (2024-11-05).
    HttpSse,
}

impl DetectedTransport {
    /// Stable text form used in the store and in `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StreamableHttpStateless => "streamable_http_stateless",
            Self::StreamableHttp => "streamable_http",
            Self::HttpSse => "http_sse",
        }
    }

    /// Parses the text form written by [`Self::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "streamable_http_stateless" => Some(Self::StreamableHttpStateless),
            "streamable_http" => Some(Self::StreamableHttp),
            "http_sse" => Some(Self::HttpSse),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ids_are_lowercase_slugs() {
        assert!(ServerId::new("notion").is_ok());
        assert!(ServerId::new("my-server-2").is_ok());
        assert_eq!(ServerId::new(""), Err(ServerIdError::Empty));
        for bad in ["Notion", "a_b", "-a", "a-", "a--b", "a b", "a/b", "é"] {
            assert!(
                matches!(ServerId::new(bad), Err(ServerIdError::BadCharacters(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            ServerId::new("a".repeat(65)),
            Err(ServerIdError::TooLong(_))
        ));
    }

    #[test]
    fn a_redacted_definition_written_back_keeps_its_secrets_and_settings() {
        let id = ServerId::new("s").unwrap();
        let headers = vec![
            NamedValue::guess("Authorization", "Bearer real"),
            NamedValue::guess("X-Mode", "fast"),
        ];
        let url = "https://user:pw@mcp.test/mcp?key=k1";
        let mut stored =
            ServerDefinition::new(id.clone(), TransportSpec::from_url(url, headers).unwrap());
        stored.prefix = Some("p".into());
        stored.policies.pinned.insert("t".into());
        if let TransportSpec::Http { pinned, .. } = &mut stored.transport {
            *pinned = Some(DetectedTransport::StreamableHttp);
        }

        // Written back as a file entry says it: redacted, and with no word of the pinned
        // transport.
        let mut entry = stored.transport.redacted();
        if let TransportSpec::Http { pinned, .. } = &mut entry {
            *pinned = None;
        }
        let mut written = ServerDefinition::new(id, entry);
        written.keep_unwritten_settings(&stored);
        assert_eq!(written.transport, stored.transport);
        assert_eq!(written.prefix.as_deref(), Some("p"));
        assert!(written.policies.pinned.contains("t"));

        // A new value, or a new URL, is taken as written.
        let fresh = vec![NamedValue::guess("Authorization", "Bearer new")];
        let mut changed = ServerDefinition::new(
            stored.id.clone(),
            TransportSpec::from_url("https://mcp.test/other", fresh.clone()).unwrap(),
        );
        changed.keep_unwritten_settings(&stored);
        assert_eq!(changed.transport.named_values(), &fresh[..]);
        assert_eq!(changed.transport.target(), "https://mcp.test/other");
    }

    #[test]
    fn slugify_makes_valid_ids_from_display_names() {
        assert_eq!(
            ServerId::slugify("My Server_2").unwrap().as_str(),
            "my-server-2"
        );
        assert_eq!(ServerId::slugify("  GitHub  ").unwrap().as_str(), "github");
        assert_eq!(ServerId::slugify("__"), None);
        let long = ServerId::slugify(&"ab-".repeat(40)).unwrap();
        assert!(long.as_str().len() <= 64 && !long.as_str().ends_with('-'));
    }

    #[test]
    fn secret_values_are_guessed_from_names_and_redacted() {
        assert!(NamedValue::guess("Authorization", "Bearer x").secret);
        assert!(NamedValue::guess("GITHUB_TOKEN", "x").secret);
        assert!(NamedValue::guess("OPENAI_API_KEY", "x").secret);
        assert!(!NamedValue::guess("LOG_LEVEL", "debug").secret);
        let v = NamedValue::guess("X-Api-Key", "hunter2");
        assert_eq!(format!("{v:?}"), "X-Api-Key=********");
    }

    #[test]
    fn transport_from_url_dispatches_on_scheme() {
        assert_eq!(
            TransportSpec::from_url("https://mcp.example/mcp", vec![])
                .unwrap()
                .kind(),
            "http"
        );
        assert_eq!(
            TransportSpec::from_url("ws://127.0.0.1:1/ws", vec![])
                .unwrap()
                .kind(),
            "websocket"
        );
        assert!(matches!(
            TransportSpec::from_url("ftp://x", vec![]),
            Err(TransportSpecError::UnsupportedScheme(_))
        ));
        assert!(matches!(
            TransportSpec::from_url("not a url", vec![]),
            Err(TransportSpecError::BadUrl(..))
        ));
    }

    #[test]
    fn an_address_without_a_scheme_gets_the_url_it_likely_meant() {
        for (typed, meant) in [
            ("mcp.example.com/mcp", "https://mcp.example.com/mcp"),
            ("localhost:3000/mcp", "http://localhost:3000/mcp"),
            ("127.0.0.1:8080/mcp", "http://127.0.0.1:8080/mcp"),
            ("localhost/mcp", "http://localhost/mcp"),
        ] {
            let error = TransportSpec::from_url(typed, vec![]).unwrap_err();
            assert_eq!(
                error,
                TransportSpecError::NoScheme(typed.into(), meant.into()),
                "{typed}"
            );
            assert!(
                error
                    .to_string()
                    .contains(&format!("did you mean '{meant}'"))
            );
        }
        assert!(matches!(
            TransportSpec::from_url("mailto:someone@example.com", vec![]),
            Err(TransportSpecError::UnsupportedScheme(_))
        ));
    }

    #[test]
    fn reserved_headers_are_refused_and_urls_are_shown_redacted() {
        for name in [
            "Accept",
            "mcp-session-id",
            "MCP-Protocol-Version",
            "Mcp-Param-Region",
        ] {
            assert!(matches!(
                TransportSpec::from_url("https://x.test/mcp", vec![NamedValue::guess(name, "v")]),
                Err(TransportSpecError::ReservedHeader(_))
            ));
        }
        let spec =
            TransportSpec::from_url("https://user:pw@x.test/mcp?api_key=abc&v=1", vec![]).unwrap();
        let shown = spec.display_target();
        assert!(!shown.contains("pw") && !shown.contains("abc"), "{shown}");
        assert!(
            shown.contains("api_key=") && shown.contains("x.test/mcp"),
            "{shown}"
        );
        let plain = TransportSpec::from_url("https://x.test/mcp", vec![]).unwrap();
        assert_eq!(plain.display_target(), "https://x.test/mcp");
    }

    #[test]
    fn definitions_round_trip_through_json_with_defaults() {
        let def = ServerDefinition::new(
            ServerId::new("everything").unwrap(),
            TransportSpec::stdio("npx", vec!["-y".into()], vec![], None).unwrap(),
        );
        let json = serde_json::to_string(&def).unwrap();
        let back: ServerDefinition = serde_json::from_str(&json).unwrap();
        assert_eq!(back, def);
        assert_eq!(back.timeouts.tool_call, Duration::from_secs(60));
    }
}
