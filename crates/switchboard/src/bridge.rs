//! `switchboard stdio` in front of a running daemon: the client's messages on stdin go to the
//! daemon's `/mcp`, and what the daemon sends comes back on stdout.
//!
//! The daemon has every server connected already, so the client's `initialize` is answered at
//! once, a stdio server runs once however many clients there are, and what a tool asks a
//! person reaches the console. The HTTP side is rmcp's Streamable HTTP client transport, which
//! keeps the session (its GET stream, resumption, the headers of every revision, `DELETE` at
//! the end) and opens a new one when the daemon restarted; this module only passes messages
//! between it and stdio, and answers a request the daemon could not be sent.

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};

use crate::daemon::Daemon;

/// Why the bridge stopped before the client closed stdin.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The daemon's side ended (it stopped, or the session could not be kept).
    #[error("the connection to the daemon at {0} ended")]
    DaemonGone(url::Url),
    /// Writing to stdout failed (the client went away).
    #[error("cannot write to the client: {0}")]
    Client(String),
}

/// Passes messages between stdin/stdout and the daemon's `/mcp` (with `query`, such as
/// `tools=deferred`) until the client closes stdin or the daemon goes away.
pub async fn run(daemon: &Daemon, query: Option<&str>) -> Result<(), BridgeError> {
    let mut url = daemon.url_of("/mcp");
    url.set_query(query);
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
    config.allow_stateless = true;
    config.reinit_on_expired_session = true;
    if let Some(key) = daemon.key() {
        config = config.auth_header(key);
    }
    let mut to_daemon = StreamableHttpClientTransport::with_client(daemon.http().clone(), config);
    let (stdin, stdout) = rmcp::transport::io::stdio();
    let mut to_client = AsyncRwTransport::<rmcp::RoleServer, _, _>::new_server(stdin, stdout);
    // Each send lives until the daemon took the message (dropping one would cancel its
    // request); they start in the order the client sent them.
    let mut sending = FuturesUnordered::new();
    let ended = loop {
        tokio::select! {
            from_client = to_client.receive() => {
                let Some(message) = from_client else { break Ok(()) };
                let request = match &message {
                    JsonRpcMessage::Request(request) => Some(request.id.clone()),
                    _ => None,
                };
                let send = to_daemon.send(message);
                sending.push(async move { (request, send.await) });
            }
            Some((request, sent)) = sending.next(), if !sending.is_empty() => {
                if let (Some(id), Err(error)) = (request, sent) {
                    // The client waits for an answer to every request: it gets one.
                    let refusal = ServerJsonRpcMessage::error(
                        ErrorData::new(
                            ErrorCode::INTERNAL_ERROR,
                            format!("Switchboard's daemon at {} did not take the request: {error}", daemon.url()),
                            None,
                        ),
                        Some(id),
                    );
                    if let Err(error) = to_client.send(refusal).await {
                        break Err(BridgeError::Client(error.to_string()));
                    }
                }
            }
            from_daemon = to_daemon.receive() => {
                let Some(message) = from_daemon else {
                    break Err(BridgeError::DaemonGone(daemon.url().clone()));
                };
                if let Err(error) = to_client.send(message).await {
                    break Err(BridgeError::Client(error.to_string()));
                }
            }
        }
    };
    // Ends the session at the daemon (DELETE) before the process exits.
    let _ = to_daemon.close().await;
    ended
}
