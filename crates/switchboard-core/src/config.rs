//! Reading server declarations from the files users already have, and writing them back
//! ([`export`]).
//!
//! Two formats are understood, with one entry shape between them:
//! - the `mcpServers` JSON of Claude Desktop and Cursor (`{"mcpServers": {...}}`) and VS Code's
//!   `mcp.json` (`{"servers": {...}}`, or `{"mcp": {"servers": {...}}}` in `settings.json`), in both
//!   the `command`/`args`/`env` and the `url`/`headers` forms;
//! - Switchboard's own TOML file (`[servers.<id>]` tables with the same keys plus Switchboard's own
//!   settings: description, timeouts, disabled tools).
//!
//! Parsing never fails on one bad entry: each is either imported or skipped with a reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::server::{NamedValue, ServerDefinition, ServerId, Timeouts, TransportSpec};

/// A whole file could not be read as a server list.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The JSON was malformed.
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The TOML was malformed.
    #[error("not valid TOML: {0}")]
    Toml(#[from] toml::de::Error),
    /// The file parsed but held no server table.
    #[error(
        "no server list found: expected an \"mcpServers\" or \"servers\" object (or [servers.<id>] tables in TOML)"
    )]
    NoServers,
    /// The servers could not be written in the format asked for.
    #[error("cannot write the servers: {0}")]
    Write(String),
}

/// What an import found: the servers it can add, and the entries it skipped with why.
#[derive(Debug, Default)]
pub struct ImportReport {
    /// Servers ready to store.
    pub servers: Vec<ServerDefinition>,
    /// Entries that were not imported: (name in the file, reason).
    pub skipped: Vec<(String, String)>,
}

/// Timeouts in a config file, in milliseconds; missing fields keep the defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutsEntry {
    request_ms: Option<u64>,
    notification_ms: Option<u64>,
    tool_call_ms: Option<u64>,
}

/// One server as written in any of the supported files.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerEntry {
    #[serde(rename = "type", alias = "transport", alias = "transportType")]
    kind: Option<String>,
    command: Option<String>,
    /// One of the operator's approved commands, by name (instead of `command`).
    #[serde(alias = "approved_command")]
    approved_command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Environment values to keep secret whatever their names (redacted on display).
    #[serde(default, alias = "secret_env")]
    secret_env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    env_file: Option<String>,
    #[serde(alias = "serverUrl")]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Headers to keep secret whatever their names.
    #[serde(default, alias = "secret_headers")]
    secret_headers: BTreeMap<String, String>,
    disabled: Option<bool>,
    enabled: Option<bool>,
    #[serde(alias = "display_name")]
    display_name: Option<String>,
    description: Option<String>,
    #[serde(default, alias = "disabled_tools")]
    disabled_tools: BTreeSet<String>,
    timeouts: Option<TimeoutsEntry>,
}

#[derive(Debug, Deserialize)]
struct ServerFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<BTreeMap<String, serde_json::Value>>,
    servers: Option<BTreeMap<String, serde_json::Value>>,
    mcp: Option<Box<ServerFile>>,
}

impl ServerFile {
    fn into_entries(self) -> Option<BTreeMap<String, serde_json::Value>> {
        self.mcp_servers
            .or(self.servers)
            .or_else(|| self.mcp.and_then(|inner| inner.into_entries()))
    }
}

/// Reads an `mcpServers` / `servers` JSON document.
pub fn parse_json(text: &str) -> Result<ImportReport, ConfigError> {
    let file: ServerFile = serde_json::from_str(text)?;
    let entries = file.into_entries().ok_or(ConfigError::NoServers)?;
    Ok(build_report(entries))
}

/// Reads Switchboard's TOML file (`[servers.<id>]` tables; `[mcpServers.<id>]` also accepted).
pub fn parse_toml(text: &str) -> Result<ImportReport, ConfigError> {
    let value: toml::Value = toml::from_str(text)?;
    let json = serde_json::to_value(value)?;
    let file: ServerFile = serde_json::from_value(json)?;
    let entries = file.into_entries().ok_or(ConfigError::NoServers)?;
    Ok(build_report(entries))
}

/// Reads either format, choosing by the first non-blank character (`{` means JSON).
pub fn parse_any(text: &str) -> Result<ImportReport, ConfigError> {
    if text.trim_start().starts_with('{') {
        parse_json(text)
    } else {
        parse_toml(text)
    }
}

fn build_report(entries: BTreeMap<String, serde_json::Value>) -> ImportReport {
    let mut report = ImportReport::default();
    let mut seen = BTreeSet::new();
    for (name, raw) in entries {
        match parse_entry(&name, raw) {
            Ok(def) if !seen.insert(def.id.clone()) => report.skipped.push((
                name,
                format!("its id '{}' is already used by another entry", def.id),
            )),
            Ok(def) => report.servers.push(def),
            Err(reason) => report.skipped.push((name, reason)),
        }
    }
    report
}

/// Reads one entry as the files write it (`{"url": ..., "headers": {...}}` or
/// `{"command": ..., "args": [...], "env": {...}}`, plus Switchboard's own keys) under the name
/// `name`, which becomes its id (slugified when it is not one). The error says why not, in
/// words, without quoting values (credentials among them).
pub fn parse_entry(name: &str, raw: serde_json::Value) -> Result<ServerDefinition, String> {
    let entry: ServerEntry = serde_json::from_value(raw).map_err(|e| {
        // serde's text can quote values (credentials among them); keep only its kind.
        let kind = if e.is_data() || e.is_syntax() {
            "a field has the wrong type"
        } else {
            "it cannot be read"
        };
        format!("malformed entry: {kind} (expected an object with 'command' or 'url')")
    })?;
    entry_to_definition(name, entry)
}

/// Name/value pairs: `plain` with their secrecy guessed from their names, `secret` marked
/// secret whatever their names (a file's `secretEnv` and `secretHeaders`).
fn named_values(
    plain: BTreeMap<String, String>,
    secret: BTreeMap<String, String>,
) -> Vec<NamedValue> {
    let marked = secret.into_iter().map(|(name, value)| NamedValue {
        name,
        value,
        secret: true,
    });
    plain
        .into_iter()
        .map(|(k, v)| NamedValue::guess(k, v))
        .chain(marked)
        .collect()
}

fn has_placeholder(text: &str) -> bool {
    // In a URL, `${` is written percent-encoded.
    text.contains("${") || text.contains("$%7B") || text.contains("%24%7B")
}

fn entry_to_definition(name: &str, entry: ServerEntry) -> Result<ServerDefinition, String> {
    let id = ServerId::new(name)
        .ok()
        .or_else(|| ServerId::slugify(name))
        .ok_or_else(|| format!("'{name}' cannot be turned into a server id"))?;
    if entry.env_file.is_some() {
        return Err(
            "uses 'envFile', which Switchboard does not read; put the variables in 'env'".into(),
        );
    }
    let all_values = entry
        .args
        .iter()
        .chain(entry.env.values())
        .chain(entry.secret_env.values())
        .chain(entry.headers.values())
        .chain(entry.secret_headers.values())
        .chain(entry.command.iter())
        .chain(entry.url.iter());
    if all_values.into_iter().any(|v| has_placeholder(v)) {
        return Err(
            "uses ${...} input or environment variables, which Switchboard cannot resolve; add it with `switchboard server add` and real values".into(),
        );
    }
    let kind = entry.kind.as_deref().map(str::to_ascii_lowercase);
    let transport = match (entry.command, entry.url) {
        (Some(_), Some(_)) => return Err("has both 'command' and 'url'; keep one".into()),
        (None, None) => match entry.approved_command {
            Some(name) => {
                if kind.as_deref().is_some_and(|k| k != "stdio") || entry.cwd.is_some() {
                    return Err(
                        "an approved command is a stdio server; only its args and env are yours to give".into(),
                    );
                }
                let env = named_values(entry.env, entry.secret_env);
                TransportSpec::Approved {
                    name,
                    args: entry.args,
                    env,
                }
            }
            None => return Err("has neither 'command' nor 'url'".into()),
        },
        _ if entry.approved_command.is_some() => {
            return Err("gives 'approvedCommand' beside a 'command' or 'url'; keep one".into());
        }
        (Some(command), None) => {
            if let Some(kind) = kind.as_deref().filter(|k| *k != "stdio") {
                return Err(format!("declares type '{kind}' but gives a command"));
            }
            let env = named_values(entry.env, entry.secret_env);
            TransportSpec::stdio(command, entry.args, env, entry.cwd).map_err(|e| e.to_string())?
        }
        (None, Some(url)) => {
            if kind.as_deref() == Some("stdio") {
                return Err("declares type 'stdio' but gives a URL".into());
            }
            let headers = named_values(entry.headers, entry.secret_headers);
            TransportSpec::from_url(&url, headers).map_err(|e| e.to_string())?
        }
    };
    let mut def = ServerDefinition::new(id, transport);
    // The transport's own defaults (a built-in server's calls may wait an hour for a person).
    let defaults = def.timeouts;
    let timeouts = entry.timeouts.map_or(defaults, |t| Timeouts {
        request: t.request_ms.map_or(defaults.request, Duration::from_millis),
        notification: t
            .notification_ms
            .map_or(defaults.notification, Duration::from_millis),
        tool_call: t
            .tool_call_ms
            .map_or(defaults.tool_call, Duration::from_millis),
    });
    def.display_name = entry.display_name.unwrap_or_else(|| name.to_owned());
    def.description = entry.description.unwrap_or_default();
    def.enabled = entry.enabled.unwrap_or(true) && !entry.disabled.unwrap_or(false);
    def.disabled_tools = entry.disabled_tools;
    def.timeouts = timeouts;
    Ok(def)
}

/// The file formats [`export`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Switchboard's TOML file: `[servers.<id>]` tables.
    Toml,
    /// An `mcpServers` JSON document, as Claude Desktop and Cursor keep theirs.
    Json,
}

/// Writes `servers` as a file [`parse_any`] reads back into the same definitions (what the
/// file format can say: transport, values, names, description, enabled, disabled tools,
/// timeouts). Secret values (and URL passwords) are written only with `secrets`; otherwise each
/// is a `${NAME}` placeholder, which an import refuses with a reason rather than storing a
/// false value.
pub fn export(
    servers: &[ServerDefinition],
    format: ExportFormat,
    secrets: bool,
) -> Result<String, ConfigError> {
    let entries: serde_json::Map<String, serde_json::Value> = servers
        .iter()
        .map(|def| (def.id.to_string(), export_entry(def, secrets)))
        .collect();
    Ok(match format {
        ExportFormat::Json => {
            serde_json::to_string_pretty(&serde_json::json!({"mcpServers": entries}))? + "\n"
        }
        ExportFormat::Toml => {
            let value: toml::Value =
                serde_json::from_value(serde_json::json!({"servers": entries}))?;
            toml::to_string_pretty(&value).map_err(|e| ConfigError::Write(e.to_string()))?
        }
    })
}

fn export_entry(def: &ServerDefinition, secrets: bool) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let mut entry = Map::new();
    // Plain values, and secret ones apart (so they stay secret when read back).
    let values = |values: &[NamedValue]| {
        let (mut plain, mut secret) = (Map::new(), Map::new());
        for value in values {
            let shown = match (value.secret, secrets) {
                (true, false) => format!("${{{}}}", value.name),
                _ => value.value.clone(),
            };
            // A value whose name says it is secret is read back as one from the plain map.
            let guessed = NamedValue::guess(value.name.clone(), String::new()).secret;
            let into = if value.secret && !guessed {
                &mut secret
            } else {
                &mut plain
            };
            into.insert(value.name.clone(), Value::String(shown));
        }
        (plain, secret)
    };
    let put_values = |entry: &mut Map<String, Value>, named: &[NamedValue], key: &str| {
        let (plain, secret) = values(named);
        let secret_key = format!("secret{}{}", key[..1].to_ascii_uppercase(), &key[1..]);
        if !plain.is_empty() {
            entry.insert(key.to_owned(), Value::Object(plain));
        }
        if !secret.is_empty() {
            entry.insert(secret_key, Value::Object(secret));
        }
    };
    match &def.transport {
        TransportSpec::Http { url, headers, .. } | TransportSpec::WebSocket { url, headers } => {
            let mut url = url.clone();
            if !secrets {
                // What a URL may hold of secrets (as `redact_url` sees them): its password and
                // its query's values.
                if url.password().is_some() {
                    let _ = url.set_password(Some("${PASSWORD}"));
                }
                if url.query().is_some() {
                    let names: Vec<String> = url
                        .query_pairs()
                        .map(|(name, _)| name.into_owned())
                        .collect();
                    url.query_pairs_mut().clear().extend_pairs(
                        names
                            .iter()
                            .map(|name| (name.as_str(), format!("${{{name}}}"))),
                    );
                }
            }
            entry.insert("url".into(), json!(url.as_str()));
            put_values(&mut entry, headers, "headers");
        }
        TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            entry.insert("command".into(), json!(command));
            if !args.is_empty() {
                entry.insert("args".into(), json!(args));
            }
            put_values(&mut entry, env, "env");
            if let Some(cwd) = cwd {
                entry.insert("cwd".into(), json!(cwd));
            }
        }
        TransportSpec::Approved { name, args, env } => {
            entry.insert("approvedCommand".into(), json!(name));
            if !args.is_empty() {
                entry.insert("args".into(), json!(args));
            }
            put_values(&mut entry, env, "env");
        }
        TransportSpec::Builtin { .. } => {
            entry.insert("url".into(), json!(def.transport.display_target()));
        }
    }
    if def.display_name != def.id.as_str() {
        entry.insert("displayName".into(), json!(def.display_name));
    }
    if !def.description.is_empty() {
        entry.insert("description".into(), json!(def.description));
    }
    if !def.enabled {
        entry.insert("disabled".into(), json!(true));
    }
    if !def.disabled_tools.is_empty() {
        entry.insert("disabledTools".into(), json!(def.disabled_tools));
    }
    let defaults = ServerDefinition::new(def.id.clone(), def.transport.clone()).timeouts;
    if def.timeouts != defaults {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        entry.insert(
            "timeouts".into(),
            json!({
                "request_ms": ms(def.timeouts.request),
                "notification_ms": ms(def.timeouts.notification),
                "tool_call_ms": ms(def.timeouts.tool_call),
            }),
        );
    }
    Value::Object(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `export` writes, `import` reads back into the same definitions, in both formats;
    /// without `secrets`, secret values are placeholders an import refuses with a reason.
    #[test]
    fn exported_servers_import_back_the_same_and_secrets_stay_out_unless_asked() {
        let report = parse_toml(
            r#"
            [servers.everything]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-everything", "a b"]
            env = { MODE = "x" }
            secretEnv = { TOKEN = "s3cret" }
            cwd = "/srv"
            description = "The reference server"
            disabledTools = ["zip"]
            timeouts = { request_ms = 1000, tool_call_ms = 9000 }

            [servers.remote]
            url = "https://user:pw@mcp.example.test/mcp?key=k3y"
            headers = { "X-Team" = "blue", Authorization = "Bearer t0ken" }
            displayName = "Remote"
            disabled = true

            [servers.human]
            url = "builtin:human?wait=always"

            [servers.urlonly]
            url = "https://u:pw2@x.test/mcp?token=t2"
            "#,
        )
        .unwrap();
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        for format in [ExportFormat::Toml, ExportFormat::Json] {
            let written = export(&report.servers, format, true).unwrap();
            let again = parse_any(&written).unwrap();
            assert!(again.skipped.is_empty(), "{written}");
            assert_eq!(again.servers, report.servers, "{written}");

            let masked = export(&report.servers, format, false).unwrap();
            for secret in ["s3cret", "t0ken", ":pw@", "k3y", "pw2", "t2"] {
                assert!(!masked.contains(secret), "{masked}");
            }
            let refused = parse_any(&masked).unwrap();
            let skipped: Vec<&str> = refused.skipped.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(skipped, ["everything", "remote", "urlonly"], "{masked}");
        }
    }

    #[test]
    fn a_built_in_server_from_a_file_keeps_its_long_tool_call_limit() {
        let def = parse_entry("human", serde_json::json!({"url": "builtin:human"})).unwrap();
        assert_eq!(
            def.timeouts.tool_call,
            crate::server::BUILTIN_TOOL_CALL_LIMIT
        );
        let def = parse_entry(
            "human",
            serde_json::json!({"url": "builtin:human", "timeouts": {"request_ms": 1000}}),
        )
        .unwrap();
        assert_eq!(
            def.timeouts.tool_call,
            crate::server::BUILTIN_TOOL_CALL_LIMIT
        );
        assert_eq!(def.timeouts.request, Duration::from_millis(1000));
    }

    #[test]
    fn claude_desktop_command_form_is_imported_with_secret_env() {
        let report = parse_json(
            r#"{"mcpServers": {"everything": {"command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-everything"],
                "env": {"API_KEY": "k", "MODE": "x"}}}}"#,
        )
        .unwrap();
        assert!(report.skipped.is_empty());
        let def = &report.servers[0];
        assert_eq!(def.id.as_str(), "everything");
        let TransportSpec::Stdio {
            command, args, env, ..
        } = &def.transport
        else {
            panic!("expected stdio")
        };
        assert_eq!(command, "npx");
        assert_eq!(args.len(), 2);
        assert!(env.iter().find(|v| v.name == "API_KEY").unwrap().secret);
        assert!(!env.iter().find(|v| v.name == "MODE").unwrap().secret);
    }

    #[test]
    fn a_definition_marks_any_value_secret_whatever_its_name() {
        let report = parse_json(
            r#"{"mcpServers": {
                "db": {"command": "db-mcp", "env": {"MODE": "x"},
                       "secretEnv": {"DB_URL": "postgres://u:pw@h/d"}},
                "web": {"url": "https://web.test/mcp", "secretHeaders": {"X-Team": "blue"}}}}"#,
        )
        .unwrap();
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        for def in &report.servers {
            for value in def.transport.named_values() {
                assert_eq!(value.secret, value.name != "MODE", "{value:?}");
            }
        }
        let db = report
            .servers
            .iter()
            .find(|d| d.id.as_str() == "db")
            .unwrap();
        assert!(!format!("{:?}", db.redacted()).contains("pw@"));
    }

    #[test]
    fn cursor_url_form_and_vscode_servers_form_are_imported() {
        let cursor = parse_json(
            r#"{"mcpServers": {"Linear App": {"url": "https://mcp.linear.app/mcp",
                "headers": {"Authorization": "Bearer t"}}}}"#,
        )
        .unwrap();
        let def = &cursor.servers[0];
        assert_eq!(def.id.as_str(), "linear-app");
        assert_eq!(def.display_name, "Linear App");
        assert!(def.transport.named_values()[0].secret);

        let vscode = parse_json(
            r#"{"mcp": {"servers": {"gh": {"type": "http", "url": "https://x.test/mcp"},
                "local": {"type": "stdio", "command": "node", "args": ["s.js"], "cwd": "/tmp"}}}}"#,
        )
        .unwrap();
        assert_eq!(vscode.servers.len(), 2);
    }

    #[test]
    fn unusable_entries_are_skipped_with_reasons() {
        let report = parse_json(
            r#"{"servers": {
                "empty": {},
                "both": {"command": "a", "url": "http://x"},
                "ftp": {"url": "ftp://x"},
                "inputs": {"command": "a", "env": {"TOKEN": "${input:token}"}},
                "envfile": {"command": "a", "envFile": ".env"},
                "weird": 42,
                "ok": {"command": "a", "disabled": true}
            }}"#,
        )
        .unwrap();
        assert_eq!(report.servers.len(), 1);
        assert!(!report.servers[0].enabled);
        let reasons: BTreeMap<_, _> = report.skipped.into_iter().collect();
        assert_eq!(reasons.len(), 6, "{reasons:?}");
        assert!(reasons["empty"].contains("neither"));
        assert!(reasons["both"].contains("both"));
        assert!(reasons["ftp"].contains("unsupported URL scheme"));
        assert!(reasons["inputs"].contains("${...}"));
        assert!(reasons["envfile"].contains("envFile"));
        assert!(reasons["weird"].contains("malformed"));
    }

    #[test]
    fn colliding_ids_keep_the_first_entry() {
        let report = parse_json(
            r#"{"mcpServers": {"My Server": {"command": "a"}, "my-server": {"command": "b"}}}"#,
        )
        .unwrap();
        assert_eq!(report.servers.len(), 1);
        assert_eq!(report.skipped.len(), 1);
    }

    #[test]
    fn toml_declares_servers_with_switchboard_settings() {
        let report = parse_any(
            r#"
            [servers.notion]
            url = "https://mcp.notion.com/mcp"
            description = "Docs"
            disabled_tools = ["delete-page"]
            timeouts = { tool_call_ms = 120000 }

            [servers.local]
            command = "node"
            args = ["server.js"]
            env = { LOG = "1" }
            "#,
        )
        .unwrap();
        assert_eq!(report.servers.len(), 2, "{:?}", report.skipped);
        let notion = report
            .servers
            .iter()
            .find(|d| d.id.as_str() == "notion")
            .unwrap();
        assert_eq!(notion.timeouts.tool_call, Duration::from_secs(120));
        assert_eq!(notion.timeouts.request, Duration::from_secs(30));
        assert!(!notion.tool_enabled("delete-page"));
    }

    #[test]
    fn files_without_a_server_list_are_errors() {
        assert!(matches!(parse_json("{}"), Err(ConfigError::NoServers)));
        assert!(matches!(parse_json("{"), Err(ConfigError::Json(_))));
        assert!(matches!(parse_toml("x = "), Err(ConfigError::Toml(_))));
    }
}
