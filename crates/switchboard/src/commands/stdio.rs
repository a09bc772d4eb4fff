//! `stdio`: every enabled server as one MCP server on stdin/stdout, for clients that launch
//! MCP servers as commands; in front of the daemon when one runs, else over servers started
//! here.

use std::time::Duration;

use anyhow::bail;
use switchboard_hub::{Hub, OAuthOptions};
use switchboard_store::Store;

use crate::hubs::{audit_log, load_search_model, relaying_options};
use crate::{bridge, cli, daemon};

/// How long `stdio` waits for its servers to connect before it takes the first request.
const SETTLE: Duration = Duration::from_secs(10);

/// `switchboard stdio`: the aggregated server on stdin/stdout. It runs its own connections
/// from the same store as any daemon (SQLite in WAL mode takes both), and logs only to stderr.
pub(crate) async fn stdio(store: Store, args: cli::StdioArgs) -> anyhow::Result<i32> {
    let audit = audit_log(&store, None);
    let encoder = load_search_model(&args.search_model).await?;
    // Servers get a moment to connect, so the first tools/list is complete; later arrivals
    // are announced with list_changed.
    let hub = Hub::builder(store, relaying_options())
        .oauth(OAuthOptions::from_env())
        .audit(audit)
        .semantic_search(encoder)
        .settle(SETTLE)
        .start()
        .await?;
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
pub(crate) async fn stdio_through(
    daemon: &daemon::Daemon,
    args: cli::StdioArgs,
) -> anyhow::Result<i32> {
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
