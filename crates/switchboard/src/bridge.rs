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

/// How long answers to requests already sent are awaited once the client closed stdin.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

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

/// Passes messages between stdin/stdout and the daemon's `/mcp`, or `endpoint`'s
/// `/mcp/e/<name>` (with `query`, such as `tools=deferred`), until the client closes stdin or
/// the daemon goes away.
pub async fn run(
    daemon: &Daemon,
    endpoint: Option<&str>,
    query: Option<&str>,
) -> Result<(), BridgeError> {
    let path = match endpoint {
        Some(name) => format!("/mcp/e/{name}"),
        None => "/mcp".to_owned(),
    };
    let mut url = daemon.url_of(&path);
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
    // The client's requests not answered yet: when stdin closes, their answers are still
    // awaited (for at most DRAIN_LIMIT), as a client that pipes its requests in expects.
    let mut unanswered = std::collections::HashSet::new();
    let mut drain_until: Option<tokio::time::Instant> = None;
    let ended = loop {
        if drain_until.is_some() && unanswered.is_empty() && sending.is_empty() {
            break Ok(());
        }
        let drained = async {
            match drain_until {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            from_client = to_client.receive(), if drain_until.is_none() => {
                let Some(message) = from_client else {
                    drain_until = Some(tokio::time::Instant::now() + DRAIN_LIMIT);
                    continue;
                };
                let request = match &message {
                    JsonRpcMessage::Request(request) => {
                        unanswered.insert(request.id.clone());
                        Some(request.id.clone())
                    }
                    _ => None,
                };
                let send = to_daemon.send(message);
                sending.push(async move { (request, send.await) });
            }
            Some((request, sent)) = sending.next(), if !sending.is_empty() => {
                let Err(error) = sent else { continue };
                let Some(id) = request else {
                    eprintln!("switchboard stdio: a message could not be sent to the daemon at {}: {error}", daemon.url());
                    continue;
                };
                // The client waits for an answer to every request: it gets one.
                unanswered.remove(&id);
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
            from_daemon = to_daemon.receive() => {
                let Some(message) = from_daemon else {
                    break Err(BridgeError::DaemonGone(daemon.url().clone()));
                };
                match &message {
                    JsonRpcMessage::Response(response) => {
                        unanswered.remove(&response.id);
                    }
                    JsonRpcMessage::Error(error) => {
                        if let Some(id) = &error.id {
                            unanswered.remove(id);
                        }
                    }
                    _ => {}
                }
                if let Err(error) = to_client.send(message).await {
                    break Err(BridgeError::Client(error.to_string()));
                }
            }
            () = drained => break Ok(()),
        }
    };
    // Ends the session at the daemon (DELETE) before the process exits.
    let _ = to_daemon.close().await;
    ended
}
