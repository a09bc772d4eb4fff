//! Where the process's logs and traces go: stderr, as verbose as asked, and with `serve
//! --otlp-endpoint`, traces to that collector.

use std::io::IsTerminal;

use crate::cli::{Cli, Command};
use crate::commands::EXIT_FAILURE;

/// Logs to stderr, and when `serve --otlp-endpoint` names a collector, traces to it (see
/// [`switchboard_telemetry`]); the export's handle, to send what is left at exit.
pub(crate) fn init_tracing(cli: &Cli) -> Option<switchboard_telemetry::export::Export> {
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
