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
    /// The endpoint asked for is not defined.
    #[error("there is no endpoint named '{0}' (see `switchboard endpoint list`)")]
    NoSuchEndpoint(String),
}

/// Serves the aggregated server on stdin/stdout until the client closes stdin; with
/// `endpoint`, only what that endpoint includes.
pub async fn serve(shared: Arc<Shared>, endpoint: Option<String>) -> Result<(), StdioError> {
    if let Some(name) = &endpoint
        && shared.hub().endpoint(name).is_none()
    {
        return Err(StdioError::NoSuchEndpoint(name.clone()));
    }
    let server = AggregateServer::new(shared);
    let _ = server.session.endpoint.set(endpoint);
    let running = server
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| StdioError::Handshake(e.to_string()))?;
    let _ = running.waiting().await;
    Ok(())
}
