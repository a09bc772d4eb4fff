//! `switchboard`: the command-line interface and daemon.
//!
//! A thin binary over the library crates: it parses arguments, opens the store, and either runs
//! the daemon (`serve`) or a one-shot command; each group of commands is a module of
//! [`commands`]. One-shot commands that need live servers start the same [`Hub`] the daemon
//! runs, built the same way ([`hubs`]), for just the servers they need, so the CLI and the daemon
//! share every code path to upstream servers.
//!
//! [`Hub`]: switchboard_hub::Hub

mod args;
mod bridge;
mod cli;
mod commands;
mod daemon;
mod hubs;
mod logs;
mod process;
mod reach;
mod render;
mod search_model;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use switchboard_store::{Store, StoreLocation};

use cli::{Cli, Command, ServerCommand};
use commands::EXIT_FAILURE;

fn main() {
    process::keep_memory_from_other_processes();
    process::move_environment_out_of_sight();
    process::one_thread_per_encoder_worker();
    let cli = Cli::parse();
    let export = logs::init_tracing(&cli);
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

/// The data directory: `--data-dir`, or the platform's place for it.
fn data_dir(cli: &Cli) -> PathBuf {
    cli.data_dir.clone().unwrap_or_else(|| {
        let platform = directories::ProjectDirs::from("dev", "switchboard", "switchboard")
            .map(|dirs| dirs.data_dir().to_path_buf());
        switchboard_store::default_data_dir(platform)
    })
}

/// Opens the store and runs `cli`'s command over it (through the daemon when one serves this
/// data directory and the command reads from or calls servers); a change it made is recorded in
/// the audit log as the operator's.
async fn run(cli: Cli) -> anyhow::Result<i32> {
    let dir = data_dir(&cli);
    let location = match &cli.store {
        Some(text) => StoreLocation::parse(text).context("--store")?,
        None => StoreLocation::Sqlite(dir.join(switchboard_store::DATABASE_FILE)),
    };
    let store = Store::open_at(&location, &dir)
        .await
        .with_context(|| format!("cannot open the store at {location}"))?;
    let children = hubs::child_policy(&cli, &dir, &location);
    if matches!(cli.command, Command::Serve(_) | Command::Stdio(_))
        && let Some(reason) = children.sandbox.unconfined_reason()
    {
        tracing::warn!(
            "stdio servers run unconfined and could read {}: {reason}",
            dir.display()
        );
    }
    hubs::set_process_defaults(Arc::new(children), cli.audit.0);
    if let Some(path) = &cli.config {
        commands::servers::apply_config_file(&store, path).await?;
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
    let change = cli_change(&cli.command).map(|words| (words, hubs::audit_log(&store, None)));
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

/// Runs `command` in its group's module.
async fn run_command(
    command: Command,
    store: Store,
    daemon: Option<daemon::Daemon>,
    dir: &std::path::Path,
    location: &StoreLocation,
) -> anyhow::Result<i32> {
    use commands::{
        approved_commands, call, endpoints, grants, listings, login, serve, servers, stdio, tenancy,
    };
    match command {
        Command::Serve(args) => serve::serve(store, *args, dir, location).await,
        Command::Stdio(args) => match daemon {
            Some(daemon) => stdio::stdio_through(&daemon, args).await,
            None => stdio::stdio(store, args).await,
        },
        Command::Server(ServerCommand::Check(args)) => {
            listings::check(daemon, store, &args.id, args.json).await
        }
        Command::Server(command) => servers::server_command(&store, command).await,
        Command::Tools(args) => listings::tools(daemon, store, args).await,
        Command::Search(args) => listings::search(daemon, store, args).await,
        Command::Resources(args) => listings::resources(daemon, store, args).await,
        Command::Prompts(args) => listings::prompts(daemon, store, args).await,
        Command::Call(args) => call::call(daemon, store, args).await,
        Command::Status(flag) => listings::status_of_all(daemon, store, flag.json).await,
        Command::Catalog(flag) => servers::show_catalog(flag.json),
        Command::Export(args) => servers::export(&store, args).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "switchboard", &mut std::io::stdout());
            Ok(0)
        }
        Command::Login(args) => login::login(&store, args).await,
        Command::Logout(args) => login::logout(&store, args).await,
        Command::Commands(command) => approved_commands::approved_commands(&store, command).await,
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
