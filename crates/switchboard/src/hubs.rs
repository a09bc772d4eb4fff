//! How this process builds its hubs: the settings every command that starts servers shares
//! (how stdio children start, the audit log, the connection options), and the hub a one-shot
//! command starts for just the servers it needs. Every hub is built with
//! [`switchboard_hub::HubBuilder`]; the commands differ only in what they tell it.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use switchboard_core::ConnectionState;
use switchboard_hub::{Hub, HubBuilder, ServerStatus};
use switchboard_store::{Store, StoreLocation};
use switchboard_upstream::ConnectOptions;

use crate::cli::{Cli, Command};
use crate::commands::parse_id;
use crate::{cli, daemon, reach, render};

/// How stdio children start, for every command that starts servers (set once, by
/// [`set_process_defaults`]).
static CHILDREN: std::sync::OnceLock<Arc<switchboard_upstream::ChildPolicy>> =
    std::sync::OnceLock::new();

/// The children's policy `cli` asks for: the daemon's variables passed through by name, and
/// the data directory, the database file and the configuration file hidden from them.
pub(crate) fn child_policy(
    cli: &Cli,
    dir: &std::path::Path,
    location: &StoreLocation,
) -> switchboard_upstream::ChildPolicy {
    let mut hidden = vec![dir.to_path_buf()];
    if let StoreLocation::Sqlite(file) = location {
        hidden.push(file.clone());
    }
    hidden.extend(cli.config.clone());
    switchboard_upstream::ChildPolicy {
        pass_env: cli.child_env.clone(),
        sandbox: switchboard_upstream::ChildSandbox::hiding(hidden, cli.child_sandbox),
        // A one-shot command's user waits for its children to end.
        stop_at_once: !matches!(cli.command, Command::Serve(_) | Command::Stdio(_)),
    }
}

/// What the audit log keeps of calls' arguments (`None`: no log), for every command (set once,
/// by [`set_process_defaults`]).
static AUDIT: std::sync::OnceLock<Option<switchboard_core::AuditArguments>> =
    std::sync::OnceLock::new();

/// Sets how this process's stdio children start and what its audit log keeps of calls'
/// arguments (`None`: no log), for every hub it builds; only the first call counts.
pub(crate) fn set_process_defaults(
    children: Arc<switchboard_upstream::ChildPolicy>,
    audit: Option<switchboard_core::AuditArguments>,
) {
    let _ = CHILDREN.set(children);
    let _ = AUDIT.set(audit);
}

/// Starts this process's audit log over `store`, unless `--audit off`; with `retention` it
/// also deletes old records (the daemon does; a command's run only adds its own).
pub(crate) fn audit_log(
    store: &Store,
    retention: Option<switchboard_hub::AuditRetention>,
) -> Option<Arc<switchboard_hub::AuditLog>> {
    let arguments = (*AUDIT.get()?)?;
    Some(switchboard_hub::AuditLog::start(
        store.clone(),
        arguments,
        retention,
    ))
}

/// The connection options of every hub this process builds: its version, and how stdio
/// children start.
pub(crate) fn options() -> ConnectOptions {
    ConnectOptions {
        children: CHILDREN.get().cloned().unwrap_or_default(),
        ..ConnectOptions::new(env!("CARGO_PKG_VERSION"))
    }
}

/// Options for Switchboard as an MCP server: servers' requests for input go to the client
/// behind each call.
pub(crate) fn relaying_options() -> ConnectOptions {
    ConnectOptions {
        relay_input: true,
        ..options()
    }
}

/// The daemon when one is used, else the enabled servers (or only `only`) started here.
pub(crate) async fn reach_for(
    daemon: Option<daemon::Daemon>,
    store: Store,
    only: Option<String>,
) -> anyhow::Result<reach::Reach> {
    Ok(match daemon {
        Some(daemon) => reach::Reach::Daemon(daemon),
        None => reach::Reach::Here(connected_hub(store, only.as_deref()).await?),
    })
}

/// Starts a hub for the enabled servers (or just `only`) and waits until each has connected or
/// failed. Progress goes to stderr when it is a terminal.
pub(crate) async fn connected_hub(store: Store, only: Option<&str>) -> anyhow::Result<Arc<Hub>> {
    connected_hub_with(store, only, |hub| hub).await
}

/// [`connected_hub`] with more `settings` than a command's hub has (this process's connection
/// options, OAuth from the environment, the audit log).
pub(crate) async fn connected_hub_with(
    store: Store,
    only: Option<&str>,
    settings: impl FnOnce(HubBuilder) -> HubBuilder,
) -> anyhow::Result<Arc<Hub>> {
    let definitions = match only {
        Some(id) => {
            let id = parse_id(id)?;
            let Some(def) = store.get_server(&id).await? else {
                let ids: Vec<String> = store
                    .list_servers()
                    .await?
                    .into_iter()
                    .map(|d| d.id.to_string())
                    .collect();
                bail!(
                    "no server with id '{id}'{}",
                    did_you_mean(id.as_str(), ids.iter().map(String::as_str))
                );
            };
            if !def.enabled {
                bail!("server '{id}' is disabled; enable it with `switchboard server enable {id}`");
            }
            vec![def]
        }
        None => store
            .list_servers()
            .await?
            .into_iter()
            .filter(|d| d.enabled)
            .collect(),
    };
    let limit = definitions
        .iter()
        .map(|d| d.timeouts.request * 3)
        .max()
        .unwrap_or_default()
        + Duration::from_secs(5);
    let audit = audit_log(&store, None);
    let hub = settings(
        Hub::builder(store, options())
            .oauth(switchboard_hub::OAuthOptions::from_env())
            .audit(audit),
    )
    .build();
    let total = definitions.len();
    for def in definitions {
        hub.start(def).await;
    }
    let interactive = std::io::stderr().is_terminal();
    if interactive && total > 0 {
        eprintln!("Connecting to {total} server(s)...");
    }
    let mut done = 0;
    hub.wait_settled(limit, |status| {
        done += 1;
        if interactive {
            eprintln!("  [{done}/{total}] {}", one_line_status(&status.into()));
        }
    })
    .await;
    for status in hub.status() {
        if status.state != ConnectionState::Connected {
            eprintln!("warning: {}", one_line_status(&(&status).into()));
        }
    }
    Ok(hub)
}

impl From<&ServerStatus> for reach::StatusLine {
    fn from(status: &ServerStatus) -> Self {
        Self {
            server: status.server.to_string(),
            state: status.state,
            transport: status.transport.to_owned(),
            detected_transport: status.detected_transport.map(str::to_owned),
            protocol_version: status.protocol_version.clone(),
            tools: status.tools,
            resources: status.resources,
            prompts: status.prompts,
            error: status.error.clone(),
        }
    }
}

/// One server's state in a line: its counts when connected, else what went wrong.
pub(crate) fn one_line_status(status: &reach::StatusLine) -> String {
    match status.state {
        ConnectionState::Connected => format!(
            "{}: connected ({} tools, {} resources, {} prompts)",
            status.server, status.tools, status.resources, status.prompts
        ),
        state => format!(
            "{}: {state}{}",
            status.server,
            status
                .error
                .as_deref()
                .map(|e| format!(": {}", render::safe(e)))
                .unwrap_or_default()
        ),
    }
}

/// ` (did you mean 'x'?)` for the name among `known` closest to `wanted`, if one is close;
/// empty otherwise.
pub(crate) fn did_you_mean<'a>(wanted: &str, known: impl Iterator<Item = &'a str>) -> String {
    const CLOSE_ENOUGH: f64 = 0.7;
    known
        .map(|name| (strsim::jaro_winkler(wanted, name), name))
        .filter(|(score, _)| *score >= CLOSE_ENOUGH)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| format!(" (did you mean '{}'?)", render::safe(name)))
        .unwrap_or_default()
}

/// The sentence encoder `--search-model` names, loaded (one for every workspace).
pub(crate) async fn load_search_model(
    arg: &cli::SearchModelArg,
) -> anyhow::Result<Option<Arc<switchboard_hub::SentenceEncoder>>> {
    let Some(directory) = arg.search_model.clone() else {
        return Ok(None);
    };
    let encoder = tokio::task::spawn_blocking(move || {
        switchboard_hub::SentenceEncoder::load(&directory)
            .with_context(|| format!("cannot load the search model in {}", directory.display()))
    })
    .await??;
    tracing::info!(
        model = encoder.name(),
        "tool search ranks by meaning and words"
    );
    Ok(Some(Arc::new(encoder)))
}
