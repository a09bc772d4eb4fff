//! MCP over WebSocket: subprotocol `mcp`, one JSON-RPC message per text frame.
//!
//! rmcp has no WebSocket client (its `ws.rs` is empty), so this transport is written here over
//! tokio-tungstenite, on rmcp's `Transport` trait.

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
    BadHeader(#[from] crate::http_client::InvalidHeader),
    /// A message could not be encoded.
    #[error("cannot encode a message: {0}")]
    Encode(#[from] serde_json::Error),
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
    /// Connects to `url` asking for the `mcp` subprotocol, with the server's static headers.
    pub async fn connect(
        url: &Url,
        headers: &[NamedValue],
        server: String,
    ) -> Result<Self, WebSocketError> {
        let mut request = url.as_str().into_client_request()?;
        request
            .headers_mut()
            .insert("sec-websocket-protocol", HeaderValue::from_static("mcp"));
        request
            .headers_mut()
            .extend(crate::http_client::header_map(headers)?);
        let (socket, response) = tokio_tungstenite::connect_async(request).await?;
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
