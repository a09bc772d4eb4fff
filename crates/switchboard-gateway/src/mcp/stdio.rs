//! The aggregated server over stdio, for desktop clients that launch MCP servers as commands
//! (`switchboard stdio`).

use std::sync::Arc;

use rmcp::ServiceExt;

use super::{AggregateServer, Shared};

/// Errors of the stdio front door.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The client's first messages were not a valid MCP opening.
    #[error("the client did not open an MCP session on stdin: {0}")]
    Handshake(String),
}

/// Serves the aggregated server on stdin/stdout until the client closes stdin.
pub async fn serve(shared: Arc<Shared>) -> Result<(), StdioError> {
    let running = AggregateServer::new(shared)
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| StdioError::Handshake(e.to_string()))?;
    let _ = running.waiting().await;
    Ok(())
}
