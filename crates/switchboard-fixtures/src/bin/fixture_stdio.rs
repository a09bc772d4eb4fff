//! The fixture MCP server over stdio: `switchboard-fixture-stdio [legacy|modern]`.

use std::sync::Arc;

use rmcp::ServiceExt;
use switchboard_fixtures::{Era, FixtureServer, FixtureState};

#[tokio::main]
async fn main() {
    let era = match std::env::args().nth(1).as_deref() {
        Some("modern") => Era::Modern,
        _ => Era::Legacy,
    };
    eprintln!("fixture stdio server starting ({era:?})");
    let server = FixtureServer::new(era, Arc::new(FixtureState::default()));
    match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(error) => {
            eprintln!("fixture stdio server failed: {error}");
            std::process::exit(1);
        }
    }
}
