//! `call <server>/<tool>`: one tool call, through the daemon or a server started here, with
//! its progress on stderr and its result on stdout.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use switchboard_store::Store;
use tokio_util::sync::CancellationToken;

use super::{EXIT_FAILURE, login, print_json, split_target};
use crate::cli::CallArgs;
use crate::hubs::connected_hub_with;
use crate::{args, daemon, reach, render};

/// Calls the tool `args` names and prints its result; fails when the tool reported a failure.
pub(crate) async fn call(
    daemon: Option<daemon::Daemon>,
    store: Store,
    args: CallArgs,
) -> anyhow::Result<i32> {
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
            reach::Reach::Here(
                connected_hub_with(store, Some(server), |hub| hub.oauth(oauth)).await?,
            )
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

/// The result of calling `server`'s `tool` with the arguments `args` gives (checked against
/// its schema), its progress shown on a terminal; Ctrl-C cancels it.
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

/// How long `call` waits for a person to grant more scope in the browser.
const STEP_UP_WAIT_SECS: u64 = 300;
