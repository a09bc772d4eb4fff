//! `server ...` (what is configured: add, list, show, test, enable, disable, remove, import;
//! each setting of a server's tools dispatched to [`super::server_settings`]), `export`,
//! `catalog`, and the `--config` file every run applies.

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use switchboard_core::{
    DetectedTransport, NamedValue, ServerDefinition, ServerId, TransportSpec, catalog, config,
};
use switchboard_hub::{Hub, OAuthOptions};
use switchboard_store::Store;

use super::{
    DAEMON_PICKS_IT_UP, EXIT_FAILURE, listings, login, parse_id, print_json, server_settings,
};
use crate::cli::{self, AddArgs, ImportArgs, ServerCommand};
use crate::hubs::options;
use crate::render;

/// Runs a `server` subcommand.
pub(crate) async fn server_command(store: &Store, command: ServerCommand) -> anyhow::Result<i32> {
    match command {
        ServerCommand::Add(args) => add_server(store, *args).await,
        ServerCommand::List(flag) => {
            let servers = store.list_servers().await?;
            if flag.json {
                print_json(
                    &servers
                        .iter()
                        .map(ServerDefinition::redacted)
                        .collect::<Vec<_>>(),
                )?;
            } else if servers.is_empty() {
                println!("No servers yet. Add one with `switchboard server add <id> <url>`.");
            } else {
                let rows: Vec<Vec<String>> = servers
                    .iter()
                    .map(|d| {
                        vec![
                            d.id.to_string(),
                            d.transport.kind().to_owned(),
                            if d.enabled { "yes" } else { "no" }.to_owned(),
                            d.transport.display_target(),
                        ]
                    })
                    .collect();
                println!(
                    "{}",
                    render::table(&["ID", "TRANSPORT", "ENABLED", "TARGET"], &rows)
                );
            }
            Ok(0)
        }
        ServerCommand::Check(args) => {
            listings::check(None, store.clone(), &args.id, args.json).await
        }
        ServerCommand::Test(args) => test_server(store, &args).await,
        ServerCommand::Show(args) => {
            let id = parse_id(&args.id)?;
            let def = store
                .get_server(&id)
                .await?
                .with_context(|| format!("no server with id '{id}'"))?;
            let shown = def.redacted();
            if args.json {
                print_json(&shown)?;
            } else {
                print!("{}", toml_like(&shown));
            }
            Ok(0)
        }
        ServerCommand::Remove(args) => {
            let id = parse_id(&args.id)?;
            store.remove_server(&id).await?;
            println!("Removed {id}. {DAEMON_PICKS_IT_UP}");
            Ok(0)
        }
        ServerCommand::Enable(args) => {
            let id = parse_id(&args.id)?;
            store.set_enabled(&id, true).await?;
            println!("Enabled {id}. {DAEMON_PICKS_IT_UP}");
            Ok(0)
        }
        ServerCommand::Disable(args) => {
            let id = parse_id(&args.id)?;
            store.set_enabled(&id, false).await?;
            println!("Disabled {id}. {DAEMON_PICKS_IT_UP}");
            Ok(0)
        }
        ServerCommand::DisableTool(args) => {
            server_settings::set_tools_disabled(store, args, true).await
        }
        ServerCommand::EnableTool(args) => {
            server_settings::set_tools_disabled(store, args, false).await
        }
        ServerCommand::SetPrefix(args) => server_settings::set_prefix(store, args).await,
        ServerCommand::SetTaskMode(args) => server_settings::set_task_mode(store, args).await,
        ServerCommand::Pin(args) => server_settings::pin_tools(store, args, true).await,
        ServerCommand::Unpin(args) => server_settings::pin_tools(store, args, false).await,
        ServerCommand::SetCallers(args) => server_settings::set_callers(store, args).await,
        ServerCommand::SetToolNotes(args) => server_settings::set_tool_notes(store, args).await,
        ServerCommand::SetRateLimit(args) => server_settings::set_rate_limit(store, args).await,
        ServerCommand::SetRetries(args) => server_settings::set_retries(store, args).await,
        ServerCommand::OverrideTool(args) => server_settings::override_tool(store, args).await,
        ServerCommand::SetApproval(args) => server_settings::set_approval(store, args).await,
        ServerCommand::SetGuardrails(args) => server_settings::set_guardrails(store, args).await,
        ServerCommand::SetDefinitionChanges(args) => {
            server_settings::set_definition_changes(store, args).await
        }
        ServerCommand::Definitions(args) => server_settings::show_definitions(store, args).await,
        ServerCommand::AcceptDefinition(args) => {
            server_settings::accept_definitions(store, args).await
        }
        ServerCommand::Import(args) => import(store, args).await,
    }
}

/// `server add`: a server defined from the arguments (or the catalog), tested first with
/// `--test`.
async fn add_server(store: &Store, args: AddArgs) -> anyhow::Result<i32> {
    let mut headers = Vec::new();
    for pair in &args.headers {
        headers.push(parse_named(pair, None)?);
    }
    for pair in &args.secret_headers {
        headers.push(parse_named(pair, Some(true))?);
    }
    let entry = catalog::lookup(&args.id);
    let transport = match (&args.url, args.command.split_first()) {
        (Some(_), Some(_)) => bail!("give either a URL or `-- command args...`, not both"),
        (Some(url), None) => TransportSpec::from_url(url, headers)?,
        (None, Some((command, rest))) => {
            let mut env = Vec::new();
            for pair in &args.env {
                env.push(parse_named(pair, None)?);
            }
            for pair in &args.secret_env {
                env.push(parse_named(pair, Some(true))?);
            }
            TransportSpec::stdio(command.clone(), rest.to_vec(), env, args.cwd.clone())?
        }
        (None, None) => match entry {
            Some(entry) => TransportSpec::from_url(entry.url, headers)?,
            None => bail!(
                "give a URL, or `-- command args...`, or one of the catalog names: {}",
                catalog::CATALOG
                    .iter()
                    .map(|e| e.id)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    };
    let id = ServerId::new(args.id.to_ascii_lowercase())?;
    let mut def = ServerDefinition::new(id.clone(), transport);
    if let Some(entry) = entry.filter(|_| args.url.is_none() && args.command.is_empty()) {
        def.display_name = entry.display_name.to_owned();
        def.description = entry.description.to_owned();
    }
    if let Some(name) = args.name {
        def.display_name = name;
    }
    if let Some(chosen) = args.transport.as_deref() {
        let TransportSpec::Http { pinned, .. } = &mut def.transport else {
            bail!("--transport applies to http:// and https:// servers only");
        };
        *pinned = Some(match chosen {
            "sessions" => DetectedTransport::StreamableHttp,
            "stateless" => DetectedTransport::StreamableHttpStateless,
            _ => DetectedTransport::HttpSse,
        });
    }
    if let Some(client_id) = args.oauth_client_id {
        if !matches!(def.transport, TransportSpec::Http { .. }) {
            bail!("OAuth client credentials apply to HTTP servers only");
        }
        let private_key_pem = match &args.oauth_private_key {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the private key {}", path.display()))?,
            ),
            None => None,
        };
        def.oauth_client = Some(switchboard_core::OAuthClient {
            client_id,
            client_secret: args.oauth_client_secret,
            issuer: args.oauth_issuer,
            grant: match args.oauth_grant.as_deref() {
                Some("client-credentials") => switchboard_core::OAuthGrant::ClientCredentials,
                _ => switchboard_core::OAuthGrant::AuthorizationCode,
            },
            signing_algorithm: private_key_pem
                .as_ref()
                .map(|_| args.oauth_signing_alg.clone()),
            private_key_pem,
            redirect_uri: match args.oauth_redirect_uri {
                Some(uri) => Some(login::loopback_redirect(&uri)?.to_string()),
                None => None,
            },
        });
    }
    if let Some(description) = args.description {
        def.description = description;
    }
    if let Some(ms) = args.request_timeout_ms {
        def.timeouts.request = Duration::from_millis(ms);
    }
    if let Some(ms) = args.tool_timeout_ms {
        def.timeouts.tool_call = Duration::from_millis(ms);
    }
    def.enabled = !args.disabled;
    if let Some(prefix) = args.prefix {
        def.prefix = Some(switchboard_core::exposure::Prefix::new(prefix)?.to_string());
    }
    if args.test {
        let test = test_definition(store, &def).await?;
        if !test.connected && !test.needs_auth {
            bail!(
                "{id} was not added: {}",
                render::safe(test.error.as_deref().unwrap_or("it did not connect"))
            );
        }
    }
    if args.replace {
        store.put_server(&def).await?;
    } else {
        store.add_server(&def).await?;
    }
    println!(
        "Added {id} ({} {}). {DAEMON_PICKS_IT_UP}",
        def.transport.kind(),
        def.transport.display_target()
    );
    Ok(0)
}

/// A `NAME=VALUE` (or `NAME: VALUE`) header or variable; `secret` says whether it is one, else
/// its name decides.
pub(crate) fn parse_named(pair: &str, secret: Option<bool>) -> anyhow::Result<NamedValue> {
    let (name, value) = pair
        .split_once(':')
        .filter(|(name, _)| !name.contains('='))
        .or_else(|| pair.split_once('='))
        // Never echo the text: a mistyped pair is often a bare credential.
        .context("a --header, --secret-header, --env or --secret-env value is not NAME=VALUE")?;
    let mut named = NamedValue::guess(name.trim(), value.trim());
    if let Some(secret) = secret {
        named.secret = secret || named.secret;
    }
    Ok(named)
}

/// `server test <id>`: tries the stored definition (see [`test_definition`]).
async fn test_server(store: &Store, args: &cli::IdArgs) -> anyhow::Result<i32> {
    let (_, def) = configured_server(store, &args.id).await?;
    let test = test_definition(store, &def).await?;
    if args.json {
        print_json(&test)?;
    }
    Ok(if test.connected { 0 } else { EXIT_FAILURE })
}

/// Connects to `def` as the daemon would (this process, whether or not a daemon runs: a test
/// starts the server once and closes it), lists what it offers, keeps nothing running, and
/// says what it found on stderr.
async fn test_definition(
    store: &Store,
    def: &ServerDefinition,
) -> anyhow::Result<switchboard_hub::ConnectionTest> {
    let hub = Hub::builder(store.clone(), options())
        .oauth(OAuthOptions::from_env())
        .build();
    let test = hub.test_definition(def).await;
    hub.shutdown().await;
    let test = test?;
    let id = &def.id;
    if test.connected {
        eprintln!(
            "{id}: connected in {:.0} ms: {} over {} ({}); {} tools, {} resources, {} prompts",
            test.elapsed_ms,
            render::safe(test.server_info.as_deref().unwrap_or("a server")),
            test.detected_transport.unwrap_or(def.transport.kind()),
            test.protocol_version.as_deref().unwrap_or("?"),
            test.tools.len(),
            test.resources,
            test.prompts
        );
    } else if test.needs_auth {
        eprintln!("{id}: it wants an OAuth sign-in: `switchboard login {id}` once it is added");
    } else {
        eprintln!(
            "{id}: did not connect: {}",
            render::safe(test.error.as_deref().unwrap_or("no reason given"))
        );
    }
    Ok(test)
}

/// `server import <file>`: the servers a config file (ours, or another client's) declares.
async fn import(store: &Store, args: ImportArgs) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let report = config::parse_any(&text).with_context(|| format!("{}", args.file.display()))?;
    let (imported, taken) = store.import_servers(report.servers, args.replace).await?;
    let mut skipped = report.skipped;
    skipped.extend(taken.into_iter().map(|id| {
        (
            id.to_string(),
            "a server with this id already exists (use --replace)".to_owned(),
        )
    }));
    if args.json {
        print_json(&json!({
            "imported": imported.iter().map(|d| json!({"id": d.id, "transport": d.transport.kind(), "target": d.transport.display_target()})).collect::<Vec<_>>(),
            "skipped": skipped.iter().map(|(name, reason)| json!({"name": name, "reason": reason})).collect::<Vec<_>>(),
        }))?;
    } else {
        println!(
            "Imported {} server(s). {DAEMON_PICKS_IT_UP}",
            imported.len()
        );
        for def in &imported {
            println!(
                "  + {} ({} {})",
                def.id,
                def.transport.kind(),
                def.transport.display_target()
            );
        }
        if !skipped.is_empty() {
            println!("Skipped {}:", skipped.len());
            for (name, reason) in &skipped {
                println!("  - {name}: {reason}");
            }
        }
    }
    Ok(0)
}

/// The configured server `id` (as the user typed it), or an error naming it.
pub(crate) async fn configured_server(
    store: &Store,
    id: &str,
) -> anyhow::Result<(switchboard_core::ServerId, ServerDefinition)> {
    let id = parse_id(id)?;
    let def = store
        .get_server(&id)
        .await?
        .with_context(|| format!("no server with id '{id}'"))?;
    Ok((id, def))
}

/// `server show`: the definition in lines of `name: value`.
fn toml_like(def: &ServerDefinition) -> String {
    let mut out = format!(
        "id:           {}\nname:         {}\n",
        def.id, def.display_name
    );
    if !def.description.is_empty() {
        out += &format!("description:  {}\n", def.description);
    }
    out += &format!(
        "transport:    {}\ntarget:       {}\nenabled:      {}\n",
        def.transport.kind(),
        def.transport.display_target(),
        def.enabled
    );
    let prefix = def.exposed_prefix();
    out += &match prefix.is_empty() {
        true => "prefix:       none (names unchanged)
"
        .to_owned(),
        false => format!(
            "prefix:       {prefix} (names are {prefix}__<name>)
"
        ),
    };
    if let TransportSpec::Stdio { cwd: Some(cwd), .. } = &def.transport {
        out += &format!("cwd:          {}\n", cwd.display());
    }
    if let TransportSpec::Http {
        pinned: Some(pinned),
        ..
    } = &def.transport
    {
        out += &format!("pinned to:    {} (not detected)\n", pinned.as_str());
    }
    let label = if def.transport.kind() == "stdio" {
        "env"
    } else {
        "header"
    };
    for value in def.transport.named_values() {
        out += &format!(
            "{label}:{:>width$}{}={}\n",
            "",
            value.name,
            value.value,
            width = 13 - label.len() - 1
        );
    }
    out += &format!(
        "timeouts:     request {} ms, notification {} ms, tool call {} ms\n",
        def.timeouts.request.as_millis(),
        def.timeouts.notification.as_millis(),
        def.timeouts.tool_call.as_millis()
    );
    if !def.disabled_tools.is_empty() {
        out += &format!(
            "disabled:     {}\n",
            def.disabled_tools
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for (tool, mode) in &def.task_modes {
        out += &format!("task mode:    {tool}: {}\n", mode.as_str());
    }
    if !def.policies.pinned.is_empty() {
        let pinned: Vec<&str> = def.policies.pinned.iter().map(String::as_str).collect();
        out += &format!("pinned:       {}\n", pinned.join(", "));
    }
    for (tool, callers) in &def.policies.allowed_callers {
        let callers: Vec<String> = callers.iter().map(ToString::to_string).collect();
        out += &format!("callers:      {tool}: {}\n", callers.join(", "));
    }
    if let Some(limit) = def.policies.server_rate_limit {
        out += &format!("rate limit:   {limit}\n");
    }
    for (tool, limit) in &def.policies.rate_limits {
        out += &format!("rate limit:   {tool}: {limit}\n");
    }
    if !def.policies.approval.is_empty() || def.policies.approve_destructive {
        let mut waiting: Vec<&str> = def.policies.approval.iter().map(String::as_str).collect();
        if def.policies.approve_destructive {
            waiting.push("destructive tools");
        }
        out += &format!("approval:     {}\n", waiting.join(", "));
    }
    for (tool, over) in &def.policies.overrides {
        let said = serde_json::to_string(over).unwrap_or_default();
        out += &format!("override:     {tool}: {}\n", render::safe(&said));
    }
    for (tool, notes) in &def.policies.search_notes {
        out += &format!("search notes: {tool}: {}\n", render::safe(notes));
    }
    out
}

/// Adds or updates in `store` the servers the `--config` file declares.
pub(crate) async fn apply_config_file(store: &Store, path: &std::path::Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let report =
        config::parse_toml(&text).with_context(|| format!("config file {}", path.display()))?;
    for (name, reason) in &report.skipped {
        tracing::warn!(config = %path.display(), server = name, "skipped: {reason}");
    }
    for mut def in report.servers {
        // What the file cannot say (prefix, task modes, pinned tools, allowed callers, an OAuth
        // client) stays as the CLI set it.
        if let Some(stored) = store.get_server(&def.id).await? {
            def.keep_unwritten_settings(&stored);
        }
        store.put_server(&def).await?;
    }
    Ok(())
}

/// `catalog`: the built-in catalog of well-known remote servers.
pub(crate) fn show_catalog(json: bool) -> anyhow::Result<i32> {
    if json {
        let entries: Vec<Value> = catalog::CATALOG
            .iter()
            .map(|e| json!({"id": e.id, "name": e.display_name, "description": e.description, "url": e.url}))
            .collect();
        print_json(&entries)?;
    } else {
        let rows: Vec<Vec<String>> = catalog::CATALOG
            .iter()
            .map(|e| vec![e.id.to_owned(), e.url.to_owned(), e.description.to_owned()])
            .collect();
        println!("{}", render::table(&["NAME", "URL", "DESCRIPTION"], &rows));
        println!("\nAdd one with `switchboard server add <name>`.");
    }
    Ok(0)
}

/// `export`: every configured server as a file `server import` (or `--config`) reads back.
pub(crate) async fn export(store: &Store, args: cli::ExportArgs) -> anyhow::Result<i32> {
    let servers = store.list_servers().await?;
    let format = match args.json {
        true => config::ExportFormat::Json,
        false => config::ExportFormat::Toml,
    };
    print!("{}", config::export(&servers, format, args.secrets)?);
    Ok(0)
}
