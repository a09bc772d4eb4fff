//! MCP over WebSocket: subprotocol `mcp`, one JSON-RPC message per text frame.
//!
//! rmcp has no WebSocket client (its `ws.rs` is empty), so this transport is written here over
//! tokio-tungstenite, on rmcp's `Transport` trait.
//!
//! What a connection may hold is bounded: a message (16 MiB, as an HTTP answer), the messages
//! waiting for the session (64), and the frames waiting to be written. Frames are written as
//! they come (no write buffer to fill first), so a server that floods pings and never reads
//! leaves at most one pong waiting (tungstenite replaces an unsent pong with the next); with
//! tungstenite's default buffering every pong waited, and the daemon grew by the megabyte. Beyond
//! [`MAX_WRITE_BUFFER`] of unwritten frames the connection is dropped. In a guarded workspace the address is resolved and
//! checked by the network rules before connecting (`plain_http::HttpClients::guarded`).

use std::sync::Arc;

use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use http::HeaderValue;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::{CancellationToken, DropGuard};
use url::Url;

use crate::wire::decode_server_message;
use switchboard_core::NamedValue;

type WsSink = SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>;

/// Why the WebSocket transport failed.
#[derive(Debug, thiserror::Error)]
pub enum WebSocketError {
    /// The handshake or a frame failed.
    #[error("WebSocket error: {0}")]
    Socket(#[from] tungstenite::Error),
    /// A configured header is not a valid HTTP header.
    #[error(transparent)]
    BadHeader(#[from] crate::transport::http_client::InvalidHeader),
    /// A message could not be encoded.
    #[error("cannot encode a message: {0}")]
    Encode(#[from] serde_json::Error),
    /// The network rules refuse the address or scheme.
    #[error("not allowed: {0}")]
    Refused(String),
    /// The server could not be reached.
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
}

/// The largest message taken from a server (as an HTTP answer's body).
const MAX_MESSAGE: usize = crate::transport::http_client::MAX_JSON_BODY_BYTES;
/// The most bytes waiting to be written to a server that does not read them (pongs included).
pub(crate) const MAX_WRITE_BUFFER: usize = 4 * 1024 * 1024;

fn config() -> tungstenite::protocol::WebSocketConfig {
    tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
        .write_buffer_size(0)
        .max_write_buffer_size(MAX_WRITE_BUFFER)
}

/// A guarded lookup's failure: a refusal by the rules, or a name that does not resolve.
fn refused_or_unreachable(error: std::io::Error) -> WebSocketError {
    match error.kind() {
        std::io::ErrorKind::PermissionDenied => WebSocketError::Refused(error.to_string()),
        _ => WebSocketError::Connect(error),
    }
}

impl WebSocketError {
    /// The HTTP status that refused the upgrade, if the server answered with one.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::Socket(tungstenite::Error::Http(response)) => Some(response.status().as_u16()),
            _ => None,
        }
    }
}

/// A connected WebSocket transport.
pub struct WebSocketTransport {
    sink: Arc<Mutex<WsSink>>,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    _reader: DropGuard,
}

impl WebSocketTransport {
    /// Connects to `url` asking for the `mcp` subprotocol, with the server's static headers,
    /// where `http`'s network rules allow.
    pub async fn connect(
        url: &Url,
        headers: &[NamedValue],
        server: String,
        http: &crate::transport::plain_http::HttpClients,
    ) -> Result<Self, WebSocketError> {
        let mut request = url.as_str().into_client_request()?;
        request
            .headers_mut()
            .insert("sec-websocket-protocol", HeaderValue::from_static("mcp"));
        request
            .headers_mut()
            .extend(crate::transport::http_client::header_map(headers)?);
        let (socket, response) = match http.policy() {
            None => {
                tokio_tungstenite::connect_async_with_config(request, Some(config()), true).await?
            }
            Some(policy) => {
                if let Some(refusal) = http.refusal(url) {
                    return Err(WebSocketError::Refused(refusal));
                }
                if url.scheme() == "wss" {
                    // tungstenite is built without TLS here, as for unguarded connections.
                    return Err(WebSocketError::Socket(tungstenite::Error::Url(
                        tungstenite::error::UrlError::TlsFeatureNotEnabled,
                    )));
                }
                let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
                let port = url.port_or_known_default().unwrap_or(80);
                let addresses = switchboard_oauth::resolve_guarded(policy, host, port)
                    .await
                    .map_err(refused_or_unreachable)?;
                let stream = tokio::time::timeout(
                    crate::transport::plain_http::CONNECT_TIMEOUT,
                    TcpStream::connect(&addresses[..]),
                )
                .await
                .map_err(|_| WebSocketError::Connect(std::io::ErrorKind::TimedOut.into()))?
                .map_err(WebSocketError::Connect)?;
                let _ = stream.set_nodelay(true);
                tokio_tungstenite::client_async_with_config(
                    request,
                    MaybeTlsStream::Plain(stream),
                    Some(config()),
                )
                .await?
            }
        };
        if response
            .headers()
            .get("sec-websocket-protocol")
            .map(HeaderValue::as_bytes)
            != Some(b"mcp")
        {
            tracing::warn!(
                server,
                "the WebSocket server did not confirm the `mcp` subprotocol"
            );
        }
        let (sink, mut stream) = socket.split();
        let (sender, incoming) = mpsc::channel(64);
        let stop = CancellationToken::new();
        let reader_stop = stop.clone();
        tokio::spawn(async move {
            loop {
                let frame = tokio::select! {
                    _ = reader_stop.cancelled() => break,
                    frame = stream.next() => frame,
                };
                let text = match frame {
                    Some(Ok(Message::Text(text))) => text.to_string(),
                    Some(Ok(Message::Binary(bytes))) => {
                        String::from_utf8_lossy(&bytes).into_owned()
                    }
                    Some(Ok(Message::Close(_))) | None => break,
                    Some(Ok(_)) => continue,
                    Some(Err(error)) => {
                        tracing::warn!(server, %error, "the WebSocket connection broke");
                        break;
                    }
                };
                if let Some(message) = decode_server_message(&text, &server)
                    && sender.send(message).await.is_err()
                {
                    break;
                }
            }
        });
        Ok(Self {
            sink: Arc::new(Mutex::new(sink)),
            incoming,
            _reader: stop.drop_guard(),
        })
    }
}

impl Transport<RoleClient> for WebSocketTransport {
    type Error = WebSocketError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sink = self.sink.clone();
        async move {
            let text = serde_json::to_string(&item)?;
            sink.lock().await.send(Message::text(text)).await?;
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let _ = self.sink.lock().await.close().await;
        Ok(())
    }
}
