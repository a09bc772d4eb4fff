//! Reading server declarations from the files users already have.
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
    text.contains("${")
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

#[cfg(test)]
mod tests {
    use super::*;

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
