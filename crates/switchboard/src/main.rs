//! `switchboard`: the command-line interface and daemon.
//!
//! A thin binary over the library crates: it parses arguments, opens the store, and either runs
//! the daemon (`serve`) or a one-shot command. One-shot commands that need live servers start the
//! same [`Hub`] the daemon runs, for just the servers they need, so the CLI and the daemon share
//! every code path to upstream servers.

mod args;
mod bridge;
mod cli;
mod daemon;
mod endpoints;
mod grants;
mod login;
mod reach;
mod render;
mod search_model;
mod tenancy;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::{Value, json};
use switchboard_core::{
    ConnectionState, DetectedTransport, NamedValue, ServerDefinition, ServerId, ToolSettingsChange,
    TransportSpec, catalog, config,
};
use switchboard_hub::{Hub, ServerStatus};
use switchboard_store::{Store, StoreLocation};
use switchboard_upstream::ConnectOptions;
use tokio_util::sync::CancellationToken;

use cli::{AddArgs, CallArgs, Cli, Command, ImportArgs, ListArgs, ServerCommand};

/// Exit code for a tool call that returned `isError` or failed.
const EXIT_FAILURE: i32 = 1;

fn main() {
    keep_memory_from_other_processes();
    move_environment_out_of_sight();
    one_thread_per_encoder_worker();
    let cli = Cli::parse();
    let export = init_tracing(&cli);
    let runtime = match cli.worker_threads {
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(threads) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(usize::from(threads))
            .enable_all()
            .build(),
        None => tokio::runtime::Runtime::new(),
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            std::process::exit(EXIT_FAILURE);
        }
    };
    let code = runtime.block_on(async {
        match run(cli).await {
            Ok(code) => code,
            Err(error) => {
                eprintln!("error: {error:#}");
                EXIT_FAILURE
            }
        }
    });
    // Do not wait for stray blocking tasks (e.g. a stdin reader of a child) at exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    if let Some(export) = export {
        export.shutdown();
    }
    std::process::exit(code);
}

/// Logs to stderr, and when `serve --otlp-endpoint` names a collector, traces to it (see
/// [`switchboard_telemetry`]); the export's handle, to send what is left at exit.
fn init_tracing(cli: &Cli) -> Option<switchboard_telemetry::export::Export> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let default = match (&cli.command, cli.verbose) {
        (_, 2..) => "debug",
        (Command::Serve(_), _) | (_, 1) => "info",
        _ => "warn",
    };
    // A one-shot command says itself what became of each server (`warning: <server>: ...`),
    // so the connection's own state-change warnings, meant for a daemon's log, would only say
    // it twice.
    let quiet_states = match cli.command {
        Command::Serve(_) | Command::Stdio(_) => "",
        _ if cli.verbose > 0 => "",
        _ => ",switchboard_hub::connection=error",
    };
    // The spans of calls are traces' (below), not the log's.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "{default}{quiet_states},rmcp=warn,rmcp::transport::worker=off,{}=off",
            switchboard_telemetry::TARGET
        ))
    });
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    let endpoint = match &cli.command {
        Command::Serve(args) => args.otlp_endpoint.as_deref().filter(|e| !e.is_empty()),
        _ => None,
    };
    let Some(endpoint) = endpoint else {
        tracing_subscriber::registry().with(log).init();
        return None;
    };
    match switchboard_telemetry::export::layer(endpoint) {
        Ok((traces, export)) => {
            tracing_subscriber::registry().with(log).with(traces).init();
            Some(export)
        }
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(EXIT_FAILURE);
        }
    }
}

/// Makes this process not dumpable: other processes of the same user (a stdio server's child
/// among them) can then neither trace it nor read its memory, environment or open files through
/// `/proc/<pid>`, and it leaves no core file. The vault key and every token it unseals live in
/// its memory. Children are dumpable again once they run their own program.
fn keep_memory_from_other_processes() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_DUMPABLE takes plain integers and changes only this process.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// Keeps candle's matrix code (tool search's sentence encoder) on the thread that calls it
/// unless the operator says otherwise: `switchboard_embed::SentenceEncoder::encode` runs a worker
/// per core, which encodes a catalog about a quarter faster than every matrix product split over
/// both cores, and a query is no slower. candle reads `RAYON_NUM_THREADS` for each product (and
/// without it, `/proc/cpuinfo`, which costs a query milliseconds).
fn one_thread_per_encoder_worker() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // SAFETY: this runs in `main` before any other thread exists, so nothing reads or writes
        // the environment meanwhile.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", "1") };
    }
}

/// Moves this process's environment (the vault key, API keys and client secrets among it) out of
/// the block the kernel shows as `/proc/<pid>/environ`, and blanks that block. A process of the
/// same user reads that file even when this one is not dumpable if it runs as root (a stdio
/// server's child of a daemon run as root, say). Every variable keeps its value for this process:
/// `setenv` gives each a copy of its own, and only the originals are blanked.
fn move_environment_out_of_sight() {
    #[cfg(target_os = "linux")]
    {
        unsafe extern "C" {
            static mut environ: *mut *mut libc::c_char;
        }
        // SAFETY: this runs first in `main`, before any other thread exists, so nothing reads or
        // writes the environment meanwhile. `environ` is a NULL-terminated array of
        // NUL-terminated strings; each original is blanked only after `set_var` has pointed
        // `environ` at a copy, and the kernel's block stays mapped (it is this process's stack).
        unsafe {
            let mut originals = Vec::new();
            let mut entry = environ;
            while !entry.is_null() && !(*entry).is_null() {
                originals.push((*entry, libc::strlen(*entry)));
                entry = entry.add(1);
            }
            for (name, value) in std::env::vars_os() {
                std::env::set_var(name, value);
            }
            let mut entry = environ;
            while !entry.is_null() && !(*entry).is_null() {
                // Only strings that are no longer used are blanked.
                originals.retain(|(original, _)| *original != *entry);
                entry = entry.add(1);
            }
            for (original, length) in originals {
                std::ptr::write_bytes(original, 0, length);
            }
        }
    }
}

/// How stdio children start, for every command that starts servers (set once in [`run`]).
static CHILDREN: std::sync::OnceLock<Arc<switchboard_upstream::ChildPolicy>> =
    std::sync::OnceLock::new();

/// The children's policy `cli` asks for: the daemon's variables passed through by name, and
/// the data directory, the database file and the configuration file hidden from them.
fn child_policy(
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

/// What the audit log keeps of calls' arguments (`None`: no log), for every command (set once
/// in [`run`]).
static AUDIT: std::sync::OnceLock<Option<switchboard_core::AuditArguments>> =
    std::sync::OnceLock::new();

/// Starts this process's audit log over `store`, unless `--audit off`; with `retention` it
/// also deletes old records (the daemon does; a command's run only adds its own).
fn audit_log(
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

fn data_dir(cli: &Cli) -> PathBuf {
    cli.data_dir.clone().unwrap_or_else(|| {
        let platform = directories::ProjectDirs::from("dev", "switchboard", "switchboard")
            .map(|dirs| dirs.data_dir().to_path_buf());
        switchboard_store::default_data_dir(platform)
    })
}

async fn run(cli: Cli) -> anyhow::Result<i32> {
    let dir = data_dir(&cli);
    let location = match &cli.store {
        Some(text) => StoreLocation::parse(text).context("--store")?,
        None => StoreLocation::Sqlite(dir.join(switchboard_store::DATABASE_FILE)),
    };
    let store = Store::open_at(&location, &dir)
        .await
        .with_context(|| format!("cannot open the store at {location}"))?;
    let children = child_policy(&cli, &dir, &location);
    if matches!(cli.command, Command::Serve(_) | Command::Stdio(_))
        && let Some(reason) = children.sandbox.unconfined_reason()
    {
        tracing::warn!(
            "stdio servers run unconfined and could read {}: {reason}",
            dir.display()
        );
    }
    let _ = CHILDREN.set(Arc::new(children));
    let _ = AUDIT.set(cli.audit.0);
    if let Some(path) = &cli.config {
        apply_config_file(&store, path).await?;
    }
    let daemon = match uses_servers(&cli.command) && !cli.standalone {
        true => daemon::Daemon::find(cli.daemon.as_ref(), &dir, &location.to_string()).await?,
        false => None,
    };
    if let Some(daemon) = &daemon {
        eprintln!(
            "Through the daemon at {} (--standalone starts the servers here instead).",
            daemon.url()
        );
    }
    // A model named rather than given as a directory is fetched once, where it is used.
    let mut cli = cli;
    if (daemon.is_none() || matches!(cli.command, Command::Serve(_)))
        && let Some(arg) = cli.command.search_model_mut()
        && let Some(value) = arg.search_model.take()
    {
        arg.search_model = Some(search_model::resolve(&value, &dir).await?);
    }
    // A change made here (the store written directly) is recorded as the operator's.
    let change = cli_change(&cli.command).map(|words| (words, audit_log(&store, None)));
    let sign_in = match &cli.command {
        Command::Login(args) => Some(args.server.clone()),
        _ => None,
    };
    let ran = run_command(cli.command, store, daemon, &dir, &location).await;
    if let Some((words, Some(log))) = change {
        let outcome = match &ran {
            Ok(0) => "ok",
            _ => "failed",
        };
        let mut record =
            switchboard_hub::AuditLog::operators(switchboard_core::AuditKind::Change, outcome)
                .with_detail(serde_json::json!({"command": words}));
        record.door = Some("cli".to_owned());
        if let Some(server) = sign_in {
            record = record.about(&server, None);
            record.kind = switchboard_core::AuditKind::SignIn;
        }
        log.record(record);
        log.flushed().await;
    }
    ran
}

/// The words of `command` (its subcommands' names, never a value given to them) when it
/// changes what the store holds: servers, approved commands, endpoints, tenants, users, the
/// vault, sign-ins. Reads (`list`, `show`, `check`, `test`) are none.
fn cli_change(command: &Command) -> Option<String> {
    use clap::CommandFactory;
    if !matches!(
        command,
        Command::Server(_)
            | Command::Commands(_)
            | Command::Endpoint(_)
            | Command::Tenant(_)
            | Command::User(_)
            | Command::Group(_)
            | Command::Grant(_)
            | Command::Vault(_)
            | Command::Login(_)
            | Command::Logout(_)
    ) {
        return None;
    }
    let matches = Cli::command()
        .try_get_matches_from(std::env::args_os())
        .ok()?;
    let mut words = Vec::new();
    let mut at = matches.subcommand();
    while let Some((name, below)) = at {
        words.push(name.to_owned());
        at = below.subcommand();
    }
    let last = words.last()?;
    (!matches!(last.as_str(), "list" | "show" | "check" | "test")).then(|| words.join(" "))
}

async fn run_command(
    command: Command,
    store: Store,
    daemon: Option<daemon::Daemon>,
    dir: &std::path::Path,
    location: &StoreLocation,
) -> anyhow::Result<i32> {
    let only = |id: &str| Some(id.to_owned());
    match command {
        Command::Serve(args) => serve(store, *args, dir, location).await,
        Command::Stdio(args) => match daemon {
            Some(daemon) => stdio_through(&daemon, args).await,
            None => stdio(store, args).await,
        },
        Command::Server(ServerCommand::Check(args)) => {
            let reach = reach_for(daemon, store, only(&args.id)).await?;
            status(reach, Some(&args.id), args.json).await
        }
        Command::Server(command) => server_command(&store, command).await,
        Command::Tools(args) => {
            let reach = reach_for(daemon, store, args.server.clone()).await?;
            list_tools(reach, args).await
        }
        Command::Search(args) => search_tools(daemon, store, args).await,
        Command::Resources(args) => match args.read {
            Some(cli::ResourcesCommand::Read { server, uri, json }) => {
                let reach = reach_for(daemon, store, only(&server)).await?;
                read_resource(reach, &server, &uri, json).await
            }
            None => {
                let reach = reach_for(daemon, store, args.list.server.clone()).await?;
                list_resources(reach, args.list).await
            }
        },
        Command::Prompts(args) => match args.get {
            Some(cli::PromptsCommand::Get { target, arg, json }) => {
                let (server, prompt) = split_target(&target, "<server>/<prompt>")?;
                let reach = reach_for(daemon, store, only(server)).await?;
                get_prompt(reach, server, prompt, &arg, json).await
            }
            None => {
                let reach = reach_for(daemon, store, args.list.server.clone()).await?;
                list_prompts(reach, args.list).await
            }
        },
        Command::Call(args) => call(daemon, store, args).await,
        Command::Status(flag) => {
            status(reach_for(daemon, store, None).await?, None, flag.json).await
        }
        Command::Catalog(flag) => show_catalog(flag.json),
        Command::Export(args) => {
            let servers = store.list_servers().await?;
            let format = match args.json {
                true => config::ExportFormat::Json,
                false => config::ExportFormat::Toml,
            };
            print!("{}", config::export(&servers, format, args.secrets)?);
            Ok(0)
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "switchboard", &mut std::io::stdout());
            Ok(0)
        }
        Command::Login(args) => login::login(&store, args).await,
        Command::Logout(args) => login::logout(&store, args).await,
        Command::Commands(command) => approved_commands(&store, command).await,
        Command::Endpoint(command) => endpoints::endpoint_command(&store, command).await,
        Command::Tenant(command) => tenancy::tenant_command(&store, command).await,
        Command::User(command) => tenancy::user_command(&store, command).await,
        Command::Group(command) => grants::group_command(&store, command).await,
        Command::Grant(command) => grants::grant_command(&store, command).await,
        Command::Vault(command) => tenancy::vault_command(&store, command).await,
    }
}

/// Whether `command` reads from or calls servers, and so goes through a running daemon.
fn uses_servers(command: &Command) -> bool {
    matches!(
        command,
        Command::Stdio(_)
            | Command::Tools(_)
            | Command::Search(_)
            | Command::Resources(_)
            | Command::Prompts(_)
            | Command::Call(_)
            | Command::Status(_)
            | Command::Server(ServerCommand::Check(_))
    )
}

/// The daemon when one is used, else the enabled servers (or only `only`) started here.
async fn reach_for(
    daemon: Option<daemon::Daemon>,
    store: Store,
    only: Option<String>,
) -> anyhow::Result<reach::Reach> {
    Ok(match daemon {
        Some(daemon) => reach::Reach::Daemon(daemon),
        None => reach::Reach::Here(connected_hub(store, only.as_deref()).await?),
    })
}

/// `<server>/<name>` split in two, or an error showing `shape`.
fn split_target<'a>(target: &'a str, shape: &str) -> anyhow::Result<(&'a str, &'a str)> {
    target
        .split_once('/')
        .filter(|(s, t)| !s.is_empty() && !t.is_empty())
        .with_context(|| format!("the target must be {shape}"))
}

async fn apply_config_file(store: &Store, path: &std::path::Path) -> anyhow::Result<()> {
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

fn options() -> ConnectOptions {
    ConnectOptions {
        children: CHILDREN.get().cloned().unwrap_or_default(),
        ..ConnectOptions::new(env!("CARGO_PKG_VERSION"))
    }
}

/// The environment variable with the API keys a non-loopback listener requires.
const API_KEYS_ENV: &str = "SWITCHBOARD_API_KEYS";

/// Loopback listeners serve this machine only; any other address needs API keys.
/// What `serve --users` needs to let users in.
struct UsersSetup {
    store: Store,
    workspaces: Arc<DaemonWorkspaces>,
    follower: switchboard_hub::StoreFollower,
    provider: Option<Provider>,
}

/// The team's identity provider, and how its tokens name users.
type Provider = (
    Arc<switchboard_oauth::IdentityProvider>,
    switchboard_gateway::TokenClaims,
);

/// Who may use the daemon on `listen`: with `users` (`serve --users`: the store, how to open
/// a workspace, the store's follower), every request needs a user's API key or an operator key
/// from `SWITCHBOARD_API_KEYS`; else loopback listeners take this machine's requests and others
/// need an operator key.
fn access_for(
    listen: std::net::SocketAddr,
    users: Option<UsersSetup>,
    cors_origins: &[switchboard_gateway::WebOrigin],
) -> anyhow::Result<switchboard_gateway::Access> {
    let keys = std::env::var(API_KEYS_ENV).unwrap_or_default();
    let keys: Vec<&str> = keys
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect();
    if let Some(short) = keys.iter().find(|k| k.len() < 16) {
        bail!(
            "an API key in {API_KEYS_ENV} is {} characters long; use at least 16 random characters",
            short.len()
        );
    }
    if let Some(UsersSetup {
        store,
        workspaces,
        follower,
        provider,
    }) = users
    {
        let mut users = switchboard_gateway::Users::new(store, keys, workspaces)
            .with_changes(follower.subscribe());
        if let Some((provider, claims)) = provider {
            users = users.with_identity_provider(provider, claims);
        }
        return Ok(switchboard_gateway::Access::Users(Arc::new(users)));
    }
    if listen.ip().is_loopback() {
        if !cors_origins.is_empty() && keys.is_empty() {
            bail!(
                "--cors-origin lets browser apps of other origins use this daemon, and they must present an API key: set {API_KEYS_ENV} to one or more comma-separated keys (e.g. from `openssl rand -hex 32`)"
            );
        }
        return Ok(switchboard_gateway::Access::loopback_with_keys(keys));
    }
    if keys.is_empty() {
        bail!(
            "--listen {listen} is reachable from other machines, so clients must present an API key: set {API_KEYS_ENV} to one or more comma-separated keys (e.g. from `openssl rand -hex 32`), or serve --users with users' own keys"
        );
    }
    Ok(switchboard_gateway::Access::api_keys(keys))
}

/// The identity provider `--oidc-issuer` names, with how its tokens name users; its keys are
/// read now, so a provider that cannot be reached is reported at start (tokens are still
/// checked once it can be).
async fn identity_provider(
    args: &cli::OidcArgs,
    users: bool,
    oauth: &switchboard_hub::OAuthOptions,
) -> anyhow::Result<Option<Provider>> {
    let Some(issuer) = &args.oidc_issuer else {
        return Ok(None);
    };
    if !users {
        bail!("--oidc-issuer names the users of a daemon serving many: add --users");
    }
    let url = url::Url::parse(issuer).with_context(|| format!("--oidc-issuer {issuer}"))?;
    let audience = args
        .oidc_audience
        .clone()
        .context("--oidc-issuer needs --oidc-audience")?;
    let http = switchboard_oauth::OAuthHttp::new(switchboard_oauth::NetworkPolicy::for_server(
        &url,
        oauth.allow_loopback,
        oauth.allow_private,
    ));
    let provider = Arc::new(switchboard_oauth::IdentityProvider::new(
        issuer.clone(),
        audience,
        http,
    ));
    if let Err(error) = provider.prepare().await {
        tracing::warn!(issuer, "{error}; tokens are checked once it answers");
    }
    let tenant = match (&args.oidc_tenant, &args.oidc_tenant_claim) {
        (_, Some(claim)) => switchboard_gateway::TenantFrom::Claim(claim.clone()),
        (Some(tenant), None) => {
            switchboard_gateway::TenantFrom::Fixed(switchboard_core::TenantId::new(tenant.clone())?)
        }
        (None, None) => {
            switchboard_gateway::TenantFrom::Fixed(switchboard_core::TenantId::default_tenant())
        }
    };
    let claims = switchboard_gateway::TokenClaims {
        user: args.oidc_user_claim.clone(),
        tenant,
        admin_role: args.oidc_admin_role.clone(),
        groups: Some(args.oidc_groups_claim.clone()).filter(|claim| claim != "none"),
    };
    Ok(Some((provider, claims)))
}

/// Options for Switchboard as an MCP server: servers' requests for input go to the client
/// behind each call.
fn relaying_options() -> ConnectOptions {
    ConnectOptions {
        relay_input: true,
        ..options()
    }
}

/// `switchboard stdio`: the aggregated server on stdin/stdout. It runs its own connections
/// from the same store as any daemon (SQLite in WAL mode takes both), and logs only to stderr.
async fn stdio(store: Store, args: cli::StdioArgs) -> anyhow::Result<i32> {
    let oauth = switchboard_hub::OAuthOptions::from_env();
    let audit = audit_log(&store, None);
    let hub = Hub::with_oauth(store, relaying_options(), oauth);
    if let Some(audit) = audit {
        hub.enable_audit(audit);
    }
    enable_search_model(&hub, &args.search_model).await?;
    hub.start_all().await?;
    // Give servers a moment to connect, so the first tools/list is complete; later arrivals
    // are announced with list_changed.
    hub.wait_settled(Duration::from_secs(10), |_| {}).await;
    // The merged catalog follows the servers' states from a task of its own; bring it up to
    // date now, or the first list may still lack the server that connected last.
    hub.rebuild_exposed();
    let shared = switchboard_gateway::mcp::Shared::with_options(
        hub.clone(),
        switchboard_gateway::mcp::SessionLimits::default(),
        args.tools.options(),
    );
    let served = switchboard_gateway::mcp::stdio::serve(shared, args.endpoint).await;
    hub.shutdown().await;
    served?;
    Ok(0)
}

/// `switchboard stdio` in front of the running daemon: a bridge from stdin/stdout to its `/mcp`.
async fn stdio_through(daemon: &daemon::Daemon, args: cli::StdioArgs) -> anyhow::Result<i32> {
    if args.search_model.search_model.is_some() {
        eprintln!(
            "The daemon ranks searches with its own --search-model; this one applies with --standalone."
        );
    }
    if let Some(name) = &args.endpoint
        && !switchboard_core::endpoint::valid_name(name)
    {
        bail!("'{name}' is not an endpoint name (see `switchboard endpoint list`)");
    }
    let view = match args.tools.tools {
        switchboard_gateway::mcp::ToolsView::All => "tools=all",
        switchboard_gateway::mcp::ToolsView::Deferred => "tools=deferred",
    };
    bridge::run(daemon, args.endpoint.as_deref(), Some(view)).await?;
    Ok(0)
}

/// As many connection threads as the runtime has workers (one per core unless
/// `--worker-threads` says otherwise); none on a single-threaded runtime, which already keeps
/// each call on one thread.
fn connection_threads() -> usize {
    let runtime = tokio::runtime::Handle::current();
    match runtime.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => 0,
        _ => runtime.metrics().num_workers(),
    }
}

async fn serve(
    store: Store,
    args: cli::ServeArgs,
    dir: &std::path::Path,
    location: &StoreLocation,
) -> anyhow::Result<i32> {
    let listen = args.listen;
    let mut oauth = switchboard_hub::OAuthOptions::from_env();
    let supervision = args.supervision();
    if let Some(url) = args.client_metadata_url {
        // The spec: an https URL with a path component, used verbatim as the client id.
        if url.scheme() != "https" || url.path().len() <= 1 {
            bail!(
                "--client-metadata-url must be an https URL with a path, e.g. https://switchboard.example.com/oauth/client-metadata.json"
            );
        }
        oauth.identity.metadata_document_url = Some(url);
    }
    if let Some(url) = &args.public_url
        && (!matches!(url.scheme(), "http" | "https")
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some())
    {
        bail!(
            "--public-url must be an http(s) URL without credentials, query or fragment, e.g. https://switchboard.example.com"
        );
    }
    let options = ConnectOptions {
        supervision,
        ..relaying_options()
    };
    let stop = CancellationToken::new();
    // Servers added, changed or removed by the CLI (another process) or another replica take
    // effect here, in every workspace.
    let follower =
        switchboard_hub::StoreFollower::start(store.clone(), args.store_check, stop.clone());
    let encoder = load_search_model(&args.search_model).await?;
    let audit = audit_log(
        &store,
        Some(switchboard_hub::AuditRetention {
            max_age: Duration::from_secs(u64::from(args.audit_retention_days) * 24 * 3600),
            max_records: args.audit_max_records,
        }),
    );
    // Tenant admins' and members' servers reach public addresses over https and what the
    // operator allows; the operator's own reach anything.
    let allowed = switchboard_core::network::AllowedNetworks::new(
        args.allow_upstream_network.iter().cloned(),
    );
    let workspaces = Arc::new(DaemonWorkspaces {
        store: store.clone(),
        options: ConnectOptions {
            http: switchboard_upstream::HttpClients::guarded(
                switchboard_oauth::NetworkPolicy::public_and(allowed.clone()),
            ),
            ..options.clone()
        },
        oauth: switchboard_hub::OAuthOptions {
            allowed,
            ..oauth.clone()
        },
        follower: follower.clone(),
        client_rate_limit: args.client_rate_limit,
        inspector_history: usize::from(args.inspector_history),
        encoder: encoder.clone(),
        audit: audit.clone(),
    });
    let provider = identity_provider(&args.oidc, args.users, &oauth).await?;
    let access = access_for(
        listen,
        args.users.then(|| UsersSetup {
            store: store.clone(),
            workspaces,
            follower: follower.clone(),
            provider,
        }),
        &args.cors_origin,
    )?;
    let hub = Hub::with_oauth(store, options, oauth);
    if let Some(audit) = audit {
        hub.enable_audit(audit);
    }
    if let Some(limit) = args.client_rate_limit {
        hub.limit_each_client(limit);
    }
    hub.keep_traffic(usize::from(args.inspector_history));
    if let Some(encoder) = encoder {
        hub.enable_semantic_search(encoder);
    }
    // Held until the hub has shut down: requests may have started servers on these threads.
    let threads = switchboard_gateway::ConnectionThreads::start(connection_threads())?;
    let mut gateway = switchboard_gateway::Gateway::bind(listen)
        .await?
        .with_session_limits(switchboard_gateway::mcp::SessionLimits {
            max: args.max_sessions as usize,
            idle: args.session_idle,
        })
        .with_tools(args.tools.options())
        .with_app_permissions(args.app_permission.clone())
        .with_connection_limits(switchboard_gateway::listener::Limits {
            per_client: args.max_connections_per_client as usize,
            ..Default::default()
        })
        .with_connection_threads(threads.clone());
    if let Some(url) = args.public_url {
        gateway = gateway.with_public_url(url);
    }
    gateway = gateway.with_cors_origins(args.cors_origin);
    let started = hub.start_all().await?;
    let addr = gateway.local_addr().unwrap_or(listen);
    tracing::info!(%addr, servers = started, "switchboard is running: console at http://{addr}/, MCP at http://{addr}/mcp (old HTTP+SSE clients: /sse)");
    // The CLI and `switchboard stdio` on this data directory find the daemon here.
    // A listener on every address is reached on this machine through loopback.
    let reachable = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, addr.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    };
    let announcement = url::Url::parse(&format!("http://{reachable}/"))
        .map_err(std::io::Error::other)
        .and_then(|url| daemon::Announcement::write(dir, url, location.to_string()));
    let _announcement = match announcement {
        Ok(announcement) => Some(announcement),
        Err(error) => {
            tracing::warn!(
                "cannot write {} into {}: the CLI will start servers itself ({error})",
                daemon::DAEMON_FILE,
                dir.display()
            );
            None
        }
    };
    hub.follow(follower.subscribe());
    let drain = args.drain_timeout;
    let server =
        tokio::spawn(gateway.serve(hub.clone(), access, stop.clone().cancelled_owned(), drain));
    shutdown_signal().await;
    // Stop taking requests and let those in flight finish (up to the drain timeout), then close
    // every upstream session (DELETE for HTTP sessions, stdio children stopped) and the store.
    tracing::info!(?drain, "shutting down: finishing calls in flight");
    stop.cancel();
    let served = server.await;
    hub.shutdown().await;
    hub.store().close().await;
    drop(threads);
    tracing::info!("stopped");
    served??;
    Ok(0)
}

/// How long `call` waits for a person to grant more scope in the browser.
const STEP_UP_WAIT_SECS: u64 = 300;

/// Said after a change to the servers: it reaches a running daemon by itself.
pub(crate) const DAEMON_PICKS_IT_UP: &str =
    "A running `switchboard serve` on this store applies it within seconds (its --store-check).";

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn parse_id(id: &str) -> anyhow::Result<ServerId> {
    ServerId::new(id).map_err(Into::into)
}

fn parse_named(pair: &str, secret: Option<bool>) -> anyhow::Result<NamedValue> {
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

/// `switchboard commands ...`: the operator approves what tenants and members may run.
async fn approved_commands(store: &Store, command: cli::CommandsCommand) -> anyhow::Result<i32> {
    match command {
        cli::CommandsCommand::Add {
            name,
            command,
            description,
            env,
            user_env,
            user_arg,
            cwd,
        } => {
            let mut words = command.into_iter();
            let program = words.next().unwrap_or_default();
            let mut approved =
                switchboard_core::ApprovedCommand::new(&name, program, words.collect())?;
            approved.description = description.unwrap_or_default();
            approved.env = env
                .iter()
                .map(|pair| parse_named(pair, None))
                .collect::<anyhow::Result<_>>()?;
            approved.user_env = user_env;
            approved.user_args = user_arg;
            approved.cwd = cwd;
            store.put_approved_command(&approved).await?;
            println!(
                "Approved '{name}'. Tenant admins and members add it with {{\"approvedCommand\": \"{name}\"}}; {DAEMON_PICKS_IT_UP}"
            );
        }
        cli::CommandsCommand::List(flag) => {
            let commands: Vec<_> = store
                .approved_commands()
                .await?
                .iter()
                .map(switchboard_core::ApprovedCommand::redacted)
                .collect();
            if flag.json {
                print_json(&commands)?;
            } else if commands.is_empty() {
                println!(
                    "No approved commands: tenant admins and members cannot run stdio servers. Approve one with `switchboard commands add <name> -- <program> [args...]`."
                );
            } else {
                for command in commands {
                    let line = std::iter::once(command.command.as_str())
                        .chain(command.args.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" ");
                    println!(
                        "{}\t{}\tusers may set: {}\tand add: {}",
                        render::safe(&command.name),
                        render::safe(&line),
                        render::safe(&command.user_env.join(", ")),
                        render::safe(&command.user_args.join(" "))
                    );
                }
            }
        }
        cli::CommandsCommand::Remove { name } => {
            if !store.remove_approved_command(&name).await? {
                bail!("there is no approved command '{name}'");
            }
            println!("Withdrew '{name}': servers made from it no longer start.");
        }
    }
    Ok(0)
}

async fn server_command(store: &Store, command: ServerCommand) -> anyhow::Result<i32> {
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
            let reach = reach::Reach::Here(connected_hub(store.clone(), Some(&args.id)).await?);
            status(reach, Some(&args.id), args.json).await
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
        ServerCommand::DisableTool(args) => set_tools_disabled(store, args, true).await,
        ServerCommand::EnableTool(args) => set_tools_disabled(store, args, false).await,
        ServerCommand::SetPrefix(args) => set_prefix(store, args).await,
        ServerCommand::SetTaskMode(args) => set_task_mode(store, args).await,
        ServerCommand::Pin(args) => pin_tools(store, args, true).await,
        ServerCommand::Unpin(args) => pin_tools(store, args, false).await,
        ServerCommand::SetCallers(args) => set_callers(store, args).await,
        ServerCommand::SetToolNotes(args) => set_tool_notes(store, args).await,
        ServerCommand::SetRateLimit(args) => set_rate_limit(store, args).await,
        ServerCommand::SetRetries(args) => set_retries(store, args).await,
        ServerCommand::OverrideTool(args) => override_tool(store, args).await,
        ServerCommand::SetApproval(args) => set_approval(store, args).await,
        ServerCommand::SetGuardrails(args) => {
            use switchboard_core::guardrails::{Guardrails, OnFailure, Webhook};
            let (id, mut def) = configured_server(store, &args.id).await?;
            let guardrails = Guardrails {
                redact_arguments: args.redact_arguments.into_iter().collect(),
                redact_results: args.redact_results.into_iter().collect(),
                webhook: args.webhook.map(|url| Webhook {
                    url,
                    timeout_ms: args.webhook_timeout,
                    on_failure: if args.fail_open {
                        OnFailure::Allow
                    } else {
                        OnFailure::Refuse
                    },
                }),
            };
            guardrails.check()?;
            let said = match guardrails.is_empty() {
                true => "Calls of {id} pass without guardrails.".replace("{id}", id.as_str()),
                false => format!(
                    "Calls of {id} pass through its guardrails: {}.",
                    serde_json::to_string(&guardrails)?
                ),
            };
            def.policies.guardrails = guardrails;
            store.put_server(&def).await?;
            println!("{said} {DAEMON_PICKS_IT_UP}");
            Ok(0)
        }
        ServerCommand::SetDefinitionChanges(args) => {
            let (id, mut def) = configured_server(store, &args.id).await?;
            def.policies.definition_changes = args.setting;
            store.put_server(&def).await?;
            let said = match args.setting {
                switchboard_core::definitions::DefinitionChanges::Warn => {
                    "served and announced until someone accepts them"
                }
                switchboard_core::definitions::DefinitionChanges::Hold => {
                    "held back from clients until someone accepts them"
                }
                switchboard_core::definitions::DefinitionChanges::Off => "not looked for",
            };
            println!("Changed tool definitions of {id} are {said}. {DAEMON_PICKS_IT_UP}");
            Ok(0)
        }
        ServerCommand::Definitions(args) => {
            let id = parse_id(&args.id)?;
            let hub = connected_hub(store.clone(), Some(&args.id)).await?;
            let changed = hub.changed_definitions(&id);
            hub.shutdown().await;
            let changed = changed?;
            if args.json {
                print_json(&changed)?;
            } else if changed.is_empty() {
                println!("Every tool of {id} is as approved.");
            } else {
                for change in &changed {
                    println!("{}", render::changed_definition(change));
                }
            }
            Ok(0)
        }
        ServerCommand::AcceptDefinition(args) => {
            let id = parse_id(&args.id)?;
            let hub = connected_hub(store.clone(), Some(&args.id)).await?;
            let mut accepted = Ok(());
            for tool in &args.tools {
                accepted = hub.accept_definition(&id, tool, None).await;
                if accepted.is_err() {
                    break;
                }
            }
            hub.shutdown().await;
            accepted?;
            println!(
                "Accepted the current definitions of {} on {id}. {DAEMON_PICKS_IT_UP}",
                args.tools.join(", ")
            );
            Ok(0)
        }
        ServerCommand::Import(args) => import(store, args).await,
    }
}

async fn set_tools_disabled(
    store: &Store,
    args: cli::ToolArgs,
    disabled: bool,
) -> anyhow::Result<i32> {
    let change = ToolSettingsChange {
        enabled: Some(!disabled),
        ..Default::default()
    };
    let id = change_tools(store, &args.id, &args.tools, &change).await?;
    let verb = if disabled { "Disabled" } else { "Enabled" };
    println!(
        "{verb} {} on {id}. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", ")
    );
    Ok(0)
}

/// Applies `change` to each of `tools` of the configured server `id` and stores the result.
async fn change_tools(
    store: &Store,
    id: &str,
    tools: &[String],
    change: &ToolSettingsChange,
) -> anyhow::Result<switchboard_core::ServerId> {
    let (id, mut def) = configured_server(store, id).await?;
    for tool in tools {
        def.change_tool(tool, change);
    }
    store.put_server(&def).await?;
    Ok(id)
}

/// The configured server `id` (as the user typed it), or an error naming it.
async fn configured_server(
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

async fn set_prefix(store: &Store, args: cli::PrefixArgs) -> anyhow::Result<i32> {
    let (id, mut def) = configured_server(store, &args.id).await?;
    let prefix = switchboard_core::exposure::Prefix::new(args.prefix)?;
    def.prefix = Some(prefix.to_string());
    store.put_server(&def).await?;
    if prefix.to_string().is_empty() {
        println!("{id}'s names are now exposed unchanged. {DAEMON_PICKS_IT_UP}");
    } else {
        println!("{id}'s names are now exposed as {prefix}__<name>. {DAEMON_PICKS_IT_UP}");
    }
    Ok(0)
}

async fn set_task_mode(store: &Store, args: cli::TaskModeArgs) -> anyhow::Result<i32> {
    let change = ToolSettingsChange {
        task_mode: Some(args.mode),
        ..Default::default()
    };
    let id = change_tools(store, &args.id, &args.tools, &change).await?;
    println!(
        "Calls of {} on {id} are now {} as tasks. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", "),
        match args.mode {
            switchboard_core::TaskMode::Forbidden => "never run",
            switchboard_core::TaskMode::Optional => "run, when they take long,",
            switchboard_core::TaskMode::Required => "always run",
        }
    );
    Ok(0)
}

async fn pin_tools(store: &Store, args: cli::ToolArgs, pin: bool) -> anyhow::Result<i32> {
    let change = ToolSettingsChange {
        pinned: Some(pin),
        ..Default::default()
    };
    let id = change_tools(store, &args.id, &args.tools, &change).await?;
    println!(
        "{} of {id} {} the deferred tool view. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", "),
        if pin {
            "are now pinned in"
        } else {
            "are no longer pinned in"
        }
    );
    Ok(0)
}

async fn set_callers(store: &Store, args: cli::CallersArgs) -> anyhow::Result<i32> {
    let callers: std::collections::BTreeSet<_> = args.callers.iter().cloned().collect();
    let change = ToolSettingsChange {
        allowed_callers: Some((!args.any).then(|| callers.clone())),
        ..Default::default()
    };
    let id = change_tools(store, &args.id, &args.tools, &change).await?;
    let who = if args.any {
        "anyone".to_owned()
    } else {
        callers
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "{} of {id} may now be called by {who}. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", ")
    );
    Ok(0)
}

async fn set_tool_notes(store: &Store, args: cli::ToolNotesArgs) -> anyhow::Result<i32> {
    let change = ToolSettingsChange {
        search_notes: Some(args.notes.filter(|_| !args.clear)),
        ..Default::default()
    };
    change.check()?;
    let id = change_tools(store, &args.id, std::slice::from_ref(&args.tool), &change).await?;
    let what = if args.clear {
        "no search notes"
    } else {
        "your search notes"
    };
    println!(
        "{} of {id} is searched with {what} now. {DAEMON_PICKS_IT_UP}",
        args.tool
    );
    Ok(0)
}

async fn set_approval(store: &Store, args: cli::ApprovalArgs) -> anyhow::Result<i32> {
    if args.tools.is_empty() && !args.destructive && args.timeout.is_none() {
        bail!("name tools, or --destructive, or a --timeout");
    }
    let (id, mut def) = configured_server(store, &args.id).await?;
    let change = ToolSettingsChange {
        approval: Some(!args.off),
        ..Default::default()
    };
    for tool in &args.tools {
        def.change_tool(tool, &change);
    }
    if args.destructive {
        def.policies.approve_destructive = !args.off;
    }
    if args.timeout.is_some() {
        def.policies.approval_timeout_secs = args.timeout;
    }
    store.put_server(&def).await?;
    let policies = &def.policies;
    let mut waiting: Vec<&str> = policies.approval.iter().map(String::as_str).collect();
    if policies.approve_destructive {
        waiting.push("every tool annotated destructive");
    }
    let secs = policies
        .approval_timeout_secs
        .unwrap_or(switchboard_core::policy::DEFAULT_APPROVAL_WAIT_SECS);
    if waiting.is_empty() {
        println!("No call of {id} waits for approval. {DAEMON_PICKS_IT_UP}");
    } else {
        println!(
            "Calls of {} on {id} wait for a person's approval (in the console), {secs} s at most. {DAEMON_PICKS_IT_UP}",
            waiting.join(", ")
        );
    }
    Ok(0)
}

async fn override_tool(store: &Store, args: cli::OverrideArgs) -> anyhow::Result<i32> {
    let tool_override = if args.clear {
        None
    } else {
        let value_of = |text: &str| -> Value {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
        };
        let pairs = |items: &[String], what: &str| -> anyhow::Result<Vec<(String, Value)>> {
            items
                .iter()
                .map(|item| match item.split_once('=') {
                    Some((name, value)) => Ok((name.trim().to_owned(), value_of(value))),
                    None => bail!("{what} {item}: write NAME=VALUE"),
                })
                .collect()
        };
        Some(switchboard_core::ToolOverride {
            name: args.name,
            title: args.title,
            description: args.description,
            annotations: pairs(&args.annotations, "--annotation")?
                .into_iter()
                .collect(),
            fixed_arguments: pairs(&args.fixed, "--fixed")?.into_iter().collect(),
        })
    };
    let change = ToolSettingsChange {
        tool_override: Some(tool_override),
        ..Default::default()
    };
    change.check()?;
    let id = change_tools(store, &args.id, std::slice::from_ref(&args.tool), &change).await?;
    if args.clear {
        println!(
            "{} of {id} is as its server says again. {DAEMON_PICKS_IT_UP}",
            args.tool
        );
    } else {
        println!(
            "Clients see {} of {id} as you said (`server show {id}` lists it). {DAEMON_PICKS_IT_UP}",
            args.tool
        );
    }
    Ok(0)
}

async fn set_rate_limit(store: &Store, args: cli::RateLimitArgs) -> anyhow::Result<i32> {
    let limit = if args.none { None } else { args.limit };
    let what = if args.tools.is_empty() {
        let (id, mut def) = configured_server(store, &args.id).await?;
        def.policies.server_rate_limit = limit;
        store.put_server(&def).await?;
        format!("Calls to {id}")
    } else {
        let change = ToolSettingsChange {
            rate_limit: Some(limit),
            ..Default::default()
        };
        let id = change_tools(store, &args.id, &args.tools, &change).await?;
        format!("Calls to each of {} on {id}", args.tools.join(", "))
    };
    match limit {
        Some(limit) => println!("{what} are now limited to {limit}. {DAEMON_PICKS_IT_UP}"),
        None => println!("{what} are no longer limited. {DAEMON_PICKS_IT_UP}"),
    }
    Ok(0)
}

async fn set_retries(store: &Store, args: cli::RetriesArgs) -> anyhow::Result<i32> {
    let (id, mut def) = configured_server(store, &args.id).await?;
    def.policies.retries = args.preset;
    for (tools, safe) in [(&args.safe, true), (&args.not_safe, false)] {
        let change = ToolSettingsChange {
            safe_to_retry: Some(safe),
            ..Default::default()
        };
        for tool in tools {
            def.change_tool(tool, &change);
        }
    }
    store.put_server(&def).await?;
    let safe = &def.policies.safe_to_retry;
    println!(
        "Requests to {id} that are safe to repeat are retried: {} ({} tries at most){}. \
         {DAEMON_PICKS_IT_UP}",
        args.preset.as_str(),
        args.preset.tries(),
        if safe.is_empty() {
            String::new()
        } else {
            format!(
                "; calls of {} count as safe",
                safe.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    );
    Ok(0)
}

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
    let hub = Hub::with_oauth(
        store.clone(),
        options(),
        switchboard_hub::OAuthOptions::from_env(),
    );
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

/// Starts a hub for the enabled servers (or just `only`) and waits until each has connected or
/// failed. Progress goes to stderr when it is a terminal.
async fn connected_hub(store: Store, only: Option<&str>) -> anyhow::Result<Arc<Hub>> {
    connected_hub_with(store, only, switchboard_hub::OAuthOptions::from_env()).await
}

/// [`connected_hub`] with these OAuth options.
async fn connected_hub_with(
    store: Store,
    only: Option<&str>,
    oauth: switchboard_hub::OAuthOptions,
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
    let hub = Hub::with_oauth(store, options(), oauth);
    if let Some(audit) = audit {
        hub.enable_audit(audit);
    }
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

/// Exit code of a listing: a failure when the one server asked for is not connected. Listings
/// over every server show what they can and warn about the rest.
fn listing_exit_code(lines: &[reach::StatusLine], only: Option<&str>) -> i32 {
    let failed = only.is_some()
        && lines
            .iter()
            .any(|line| line.state != ConnectionState::Connected);
    if failed { EXIT_FAILURE } else { 0 }
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

fn one_line_status(status: &reach::StatusLine) -> String {
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

/// Loads the `--search-model` directory, if one is given, and has `hub` rank tool searches with
/// it.
async fn enable_search_model(hub: &Arc<Hub>, arg: &cli::SearchModelArg) -> anyhow::Result<()> {
    if let Some(encoder) = load_search_model(arg).await? {
        hub.enable_semantic_search(encoder);
    }
    Ok(())
}

/// The sentence encoder `--search-model` names, loaded (one for every workspace).
async fn load_search_model(
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

/// How the daemon opens a user's workspace: a hub like its own, over the store as that user
/// sees it, following the same store follower.
struct DaemonWorkspaces {
    store: Store,
    options: ConnectOptions,
    oauth: switchboard_hub::OAuthOptions,
    follower: switchboard_hub::StoreFollower,
    client_rate_limit: Option<switchboard_core::RateLimit>,
    /// Messages each server's inspector history keeps (0: none).
    inspector_history: usize,
    encoder: Option<Arc<switchboard_hub::SentenceEncoder>>,
    /// The daemon's audit log, which every workspace records into.
    audit: Option<Arc<switchboard_hub::AuditLog>>,
}

impl switchboard_gateway::WorkspaceHubs for DaemonWorkspaces {
    fn start(
        &self,
        workspace: switchboard_core::Workspace,
    ) -> futures::future::BoxFuture<'static, Result<Arc<Hub>, String>> {
        let hub = Hub::with_oauth(
            self.store.for_workspace(workspace),
            self.options.clone(),
            self.oauth.clone(),
        );
        if let Some(audit) = &self.audit {
            hub.enable_audit(audit.clone());
        }
        if let Some(limit) = self.client_rate_limit {
            hub.limit_each_client(limit);
        }
        hub.keep_traffic(self.inspector_history);
        if let Some(encoder) = &self.encoder {
            hub.enable_semantic_search(encoder.clone());
        }
        let changes = self.follower.subscribe();
        Box::pin(async move {
            hub.start_all().await.map_err(|e| e.to_string())?;
            hub.follow(changes);
            // As `switchboard stdio` does: the first list should hold the servers that connect
            // at once; later ones are announced.
            hub.wait_settled(WORKSPACE_SETTLE, |_| {}).await;
            hub.rebuild_exposed();
            Ok(hub)
        })
    }
}

/// How long a user's first request waits for their workspace's servers to connect.
const WORKSPACE_SETTLE: Duration = Duration::from_secs(5);

async fn search_tools(
    daemon: Option<daemon::Daemon>,
    store: Store,
    args: cli::SearchArgs,
) -> anyhow::Result<i32> {
    let reach = match daemon {
        Some(daemon) => {
            if args.search_model.search_model.is_some() {
                eprintln!(
                    "The daemon ranks with its own --search-model; this one applies with --standalone."
                );
            }
            reach::Reach::Daemon(daemon)
        }
        None => {
            let hub = connected_hub(store, None).await?;
            enable_search_model(&hub, &args.search_model).await?;
            reach::Reach::Here(hub)
        }
    };
    let found = reach
        .search(&args.query, args.limit, args.regex, args.min_score)
        .await;
    // Printed first: a stdio server's shutdown grace is no reason to keep the user waiting.
    let printed = found.and_then(|found| {
        if let Some(note) = &found.note {
            eprintln!("Ranked by words only: {note}.");
        }
        if args.json {
            print_json(&found.tools)?;
            return Ok(0);
        }
        if found.tools.is_empty() {
            eprintln!("No tool matches '{}'.", args.query);
            return Ok(EXIT_FAILURE);
        }
        let rows: Vec<Vec<String>> = found
            .tools
            .iter()
            .map(|tool| {
                vec![
                    format!("{:.2}", tool.score),
                    tool.name.clone(),
                    render::short(Some(&tool.description), 70),
                ]
            })
            .collect();
        println!(
            "{}",
            render::table(&["SCORE", "TOOL", "DESCRIPTION"], &rows)
        );
        Ok(0)
    });
    reach.close().await;
    printed
}

/// `item` as JSON with its server (and `extra` fields) added: a row of a `--json` listing.
fn json_row(
    item: &impl serde::Serialize,
    server: &str,
    extra: &[(&str, &str)],
) -> anyhow::Result<Value> {
    let mut value = serde_json::to_value(item)?;
    if let Value::Object(map) = &mut value {
        map.insert("server".into(), json!(server));
        for (key, text) in extra {
            map.insert((*key).into(), json!(text));
        }
    }
    Ok(value)
}

/// Prints a listing (`--json`: the rows' JSON; else a table) and closes `reach`.
async fn print_listing(
    reach: reach::Reach,
    json: bool,
    header: &[&str],
    rows: (Vec<Vec<String>>, Vec<Value>),
    code: i32,
) -> anyhow::Result<i32> {
    let printed = if json {
        print_json(&rows.1)
    } else {
        println!("{}", render::table(header, &rows.0));
        Ok(())
    };
    // Printed first: a stdio server's shutdown grace is no reason to keep the user waiting.
    reach.close().await;
    printed.map(|()| code)
}

async fn list_tools(reach: reach::Reach, args: ListArgs) -> anyhow::Result<i32> {
    let (catalogs, lines) = reach.catalogs(args.server.as_deref()).await?;
    let mut rows = (Vec::new(), Vec::new());
    for (id, catalog) in &catalogs {
        for tool in &catalog.tools {
            rows.0.push(vec![
                id.clone(),
                tool.name.to_string(),
                render::short(tool.description.as_deref(), 80),
            ]);
            rows.1.push(json_row(tool, id, &[])?);
        }
    }
    let code = listing_exit_code(&lines, args.server.as_deref());
    let header = ["SERVER", "TOOL", "DESCRIPTION"];
    print_listing(reach, args.json, &header, rows, code).await
}

async fn list_resources(reach: reach::Reach, args: ListArgs) -> anyhow::Result<i32> {
    let (catalogs, lines) = reach.catalogs(args.server.as_deref()).await?;
    let mut rows = (Vec::new(), Vec::new());
    for (id, catalog) in &catalogs {
        for resource in &catalog.resources {
            rows.0.push(vec![
                id.clone(),
                resource.uri.clone(),
                resource.name.clone(),
            ]);
            rows.1
                .push(json_row(resource, id, &[("kind", "resource")])?);
        }
        for template in &catalog.resource_templates {
            rows.0.push(vec![
                id.clone(),
                template.uri_template.clone(),
                template.name.clone(),
            ]);
            rows.1
                .push(json_row(template, id, &[("kind", "template")])?);
        }
    }
    let code = listing_exit_code(&lines, args.server.as_deref());
    print_listing(reach, args.json, &["SERVER", "URI", "NAME"], rows, code).await
}

async fn list_prompts(reach: reach::Reach, args: ListArgs) -> anyhow::Result<i32> {
    let (catalogs, lines) = reach.catalogs(args.server.as_deref()).await?;
    let mut rows = (Vec::new(), Vec::new());
    for (id, catalog) in &catalogs {
        for prompt in &catalog.prompts {
            rows.0.push(vec![
                id.clone(),
                prompt.name.clone(),
                render::short(prompt.description.as_deref(), 80),
            ]);
            rows.1.push(json_row(prompt, id, &[])?);
        }
    }
    let code = listing_exit_code(&lines, args.server.as_deref());
    let header = ["SERVER", "PROMPT", "DESCRIPTION"];
    print_listing(reach, args.json, &header, rows, code).await
}

/// `resources read <server> <uri>`: the contents, text as text.
async fn read_resource(
    reach: reach::Reach,
    server: &str,
    uri: &str,
    json: bool,
) -> anyhow::Result<i32> {
    let read = reach
        .read_resource(server, uri)
        .await
        .with_context(|| format!("reading {uri} at {server}"));
    let printed = read.and_then(|read| {
        if json {
            print_json(&read)
        } else {
            println!("{}", render::read_contents(&read.contents));
            Ok(())
        }
    });
    reach.close().await;
    printed.map(|()| 0)
}

/// `prompts get <server>/<prompt>`: its messages.
async fn get_prompt(
    reach: reach::Reach,
    server: &str,
    prompt: &str,
    pairs: &[String],
    json: bool,
) -> anyhow::Result<i32> {
    let mut arguments = serde_json::Map::new();
    for pair in pairs {
        let (name, value) = pair
            .split_once('=')
            .with_context(|| format!("'{pair}' is not NAME=VALUE"))?;
        // Prompt arguments are strings, whatever they look like.
        arguments.insert(name.to_owned(), Value::String(value.to_owned()));
    }
    let got = reach
        .get_prompt(server, prompt, arguments)
        .await
        .with_context(|| format!("getting {server}/{prompt}"));
    let printed = got.and_then(|got| {
        if json {
            print_json(&got)
        } else {
            println!("{}", render::prompt_messages(&got));
            Ok(())
        }
    });
    reach.close().await;
    printed.map(|()| 0)
}

async fn call(daemon: Option<daemon::Daemon>, store: Store, args: CallArgs) -> anyhow::Result<i32> {
    let (server, tool) = split_target(&args.target, "<server>/<tool>")?;
    let reach = match daemon {
        // The daemon asks for more scope the way it always does: the server's card in the
        // console, or `switchboard login`.
        Some(daemon) => reach::Reach::Daemon(daemon),
        None => {
            // A person at this terminal (or one who asked for the URL with --no-browser) can
            // grant a scope the server asks for during the call; a script gets the error, and
            // the scope is remembered for the next `switchboard login`.
            let mut oauth = switchboard_hub::OAuthOptions::from_env();
            if args.no_browser || std::io::stderr().is_terminal() {
                let person = login::BrowserAuthorizer::bind(
                    server,
                    !args.no_browser,
                    Duration::from_secs(STEP_UP_WAIT_SECS),
                )?;
                oauth.step_up = Some(Arc::new(person));
            }
            reach::Reach::Here(connected_hub_with(store, Some(server), oauth).await?)
        }
    };
    let outcome = call_through(&reach, server, tool, &args).await;
    // Said before the shutdown: a stdio server's shutdown grace is no reason to keep the user
    // waiting for the answer.
    let printed = outcome.and_then(|result| {
        let failed = result.is_error == Some(true);
        if args.json {
            print_json(&result)?;
        } else if failed {
            eprintln!(
                "error: the tool reported a failure:\n{}",
                render::call_result(&result)
            );
        } else {
            println!("{}", render::call_result(&result));
        }
        Ok(if failed { EXIT_FAILURE } else { 0 })
    });
    reach.close().await;
    printed
}

async fn call_through(
    reach: &reach::Reach,
    server: &str,
    tool: &str,
    args: &CallArgs,
) -> anyhow::Result<switchboard_hub::model::CallToolResult> {
    let schema = reach.tool_schema(server, tool).await?;
    let arguments = match &args.args {
        Some(text) => args::parse_json_object(text)?,
        None => args::from_pairs(&args.arg, &schema)?,
    };
    let missing = args::missing_required(&arguments, &schema);
    if !missing.is_empty() {
        bail!(
            "{server}/{tool} needs {}: pass {}",
            missing
                .iter()
                .map(|(name, kind)| format!("'{name}' ({kind})"))
                .collect::<Vec<_>>()
                .join(", "),
            missing
                .iter()
                .map(|(name, _)| format!("--arg {name}=..."))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let (progress_tx, mut progress_rx) =
        tokio::sync::mpsc::unbounded_channel::<switchboard_upstream::Progress>();
    let show_progress = std::io::stderr().is_terminal();
    let printer = tokio::spawn(async move {
        while let Some(p) = progress_rx.recv().await {
            if show_progress {
                let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
                let message = p
                    .message
                    .map(|m| format!(" {}", render::safe(&m)))
                    .unwrap_or_default();
                eprintln!("progress {}{total}{message}", p.progress);
            }
        }
    });
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let result = reach
        .call(server, tool, arguments, progress_tx, cancel)
        .await;
    interrupt.abort();
    let _ = printer.await;
    result.with_context(|| format!("calling {server}/{tool}"))
}

/// ` (did you mean 'x'?)` for the name among `known` closest to `wanted`, if one is close;
/// empty otherwise.
fn did_you_mean<'a>(wanted: &str, known: impl Iterator<Item = &'a str>) -> String {
    const CLOSE_ENOUGH: f64 = 0.7;
    known
        .map(|name| (strsim::jaro_winkler(wanted, name), name))
        .filter(|(score, _)| *score >= CLOSE_ENOUGH)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| format!(" (did you mean '{}'?)", render::safe(name)))
        .unwrap_or_default()
}

/// Shows how each server (or only `only`) is doing, with advice on the names; fails unless
/// all shown are connected. Through the daemon, `only` is checked now first.
async fn status(reach: reach::Reach, only: Option<&str>, json: bool) -> anyhow::Result<i32> {
    if let (reach::Reach::Daemon(daemon), Some(id)) = (&reach, only) {
        let path = format!("/api/servers/{}/check", reach::path_segment(id));
        let _: Value = daemon.post(&path, &json!({})).await?;
    }
    let (mut report, view) = reach.status().await?;
    let shown = |server: &str| only.is_none_or(|id| id == server);
    let lines: Vec<&reach::StatusLine> = view.servers.iter().filter(|s| shown(&s.server)).collect();
    if let Some(id) = only
        && lines.is_empty()
    {
        bail!("no server with id '{id}' is running");
    }
    if json {
        let mut servers = report["servers"].take();
        if let Value::Array(all) = &mut servers {
            all.retain(|s| s["server"].as_str().is_some_and(shown));
        }
        print_json(&servers)?;
    } else if lines.is_empty() {
        println!("No enabled servers.");
    } else {
        let rows: Vec<Vec<String>> = lines
            .iter()
            .map(|s| {
                vec![
                    s.server.clone(),
                    s.state.to_string(),
                    s.detected_transport.clone().unwrap_or(s.transport.clone()),
                    s.protocol_version.clone().unwrap_or_default(),
                    s.tools.to_string(),
                    s.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        println!(
            "{}",
            render::table(
                &[
                    "SERVER",
                    "STATE",
                    "TRANSPORT",
                    "PROTOCOL",
                    "TOOLS",
                    "PROBLEM"
                ],
                &rows
            )
        );
        if only.is_none() {
            for advice in &view.advice {
                println!("warning: {}", render::safe(advice));
            }
            for renamed in &view.renamed {
                println!(
                    "note: {}'s tool \"{}\" is not a valid tool name; it is exposed as {}",
                    renamed.server,
                    render::safe(&renamed.original),
                    renamed.exposed
                );
            }
        }
    }
    // Printed first: a stdio server's shutdown grace is no reason to keep the user waiting.
    reach.close().await;
    let unhealthy = lines.iter().any(|s| s.state != ConnectionState::Connected);
    Ok(if unhealthy { EXIT_FAILURE } else { 0 })
}

fn show_catalog(json: bool) -> anyhow::Result<i32> {
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
