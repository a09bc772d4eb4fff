//! The deprecated HTTP+SSE transport of protocol revision 2024-11-05.
//!
//! rmcp removed its client for this transport, so it is written here on rmcp's `Transport` trait:
//! GET the SSE URL, wait for the `endpoint` event, refuse an endpoint on another origin, POST every
//! client message there, and pass every `message` event to the service.

use std::time::Duration;

use futures::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use url::Url;

use crate::transport::http_client::StatusAwareHttpClient;
use crate::transport::http_failure::HttpFailure;
use crate::transport::sse::{MAX_SSE_EVENT_BYTES, bounded_sse};
use crate::wire::decode_server_message;

/// Why the HTTP+SSE transport failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LegacySseError {
    /// The HTTP request failed before an answer (what failed, and why).
    #[error("{0}")]
    Request(String),
    /// Signing in failed.
    #[error("{0}")]
    Auth(switchboard_oauth::OAuthError),
    /// The GET of the SSE stream was refused.
    #[error("the SSE stream was refused with HTTP {0}")]
    Status(u16),
    /// The GET did not return an event stream.
    #[error("the URL did not return an event stream (content type {0:?})")]
    NotEventStream(Option<String>),
    /// No `endpoint` event arrived in time.
    #[error("the server sent no `endpoint` event within {0:?}")]
    NoEndpoint(Duration),
    /// The stream ended or broke before the `endpoint` event.
    #[error("the SSE stream ended before the `endpoint` event")]
    EndedBeforeEndpoint,
    /// The endpoint is not a valid URL reference.
    #[error("the `endpoint` event's data is not a valid URL: {0}")]
    BadEndpoint(String),
    /// The endpoint is on another origin; following it could leak requests to a third party.
    #[error("refused the `endpoint` on {0}: it is on a different origin than the SSE stream")]
    CrossOrigin(String),
    /// A POST of a message was refused.
    #[error("posting a message was refused with HTTP {0}")]
    PostStatus(u16),
}

/// A connected HTTP+SSE transport.
pub(crate) struct LegacySseTransport {
    client: StatusAwareHttpClient,
    post_url: Url,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    _reader: DropGuard,
}

impl From<HttpFailure> for LegacySseError {
    fn from(error: HttpFailure) -> Self {
        match error {
            HttpFailure::Request(e) => Self::Request(e),
            HttpFailure::Refused(reason) => Self::Request(format!("not allowed: {reason}")),
            HttpFailure::Auth(e) => Self::Auth(e),
            HttpFailure::Status { status, .. } => Self::Status(status),
        }
    }
}

impl From<reqwest::Error> for LegacySseError {
    fn from(error: reqwest::Error) -> Self {
        // Described as every request failure is, without the URL (it may carry credentials).
        Self::from(HttpFailure::from(error))
    }
}

impl LegacySseTransport {
    /// Opens the SSE stream at `url` and waits up to `wait` for the `endpoint` event.
    pub(crate) async fn connect(
        client: StatusAwareHttpClient,
        url: &Url,
        wait: Duration,
        server: String,
    ) -> Result<Self, LegacySseError> {
        let response = client
            .send_authorized(&reqwest::Method::GET, url, |credentials| {
                client
                    .http()
                    .get(url.clone())
                    .headers(client.static_headers().clone())
                    .headers(credentials)
                    .header(ACCEPT, "text/event-stream")
            })
            .await?;
        if !response.status().is_success() {
            return Err(LegacySseError::Status(response.status().as_u16()));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase());
        if !content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            return Err(LegacySseError::NotEventStream(content_type));
        }
        let mut events = bounded_sse(response.bytes_stream(), MAX_SSE_EVENT_BYTES);
        let endpoint = tokio::time::timeout(wait, async {
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) if event.event.as_deref() == Some("endpoint") => {
                        return Ok(event.data.unwrap_or_default());
                    }
                    Ok(_) => continue,
                    Err(_) => break,
                }
            }
            Err(LegacySseError::EndedBeforeEndpoint)
        })
        .await
        .map_err(|_| LegacySseError::NoEndpoint(wait))??;
        let post_url = url
            .join(endpoint.trim())
            .map_err(|e| LegacySseError::BadEndpoint(e.to_string()))?;
        if post_url.origin() != url.origin() {
            return Err(LegacySseError::CrossOrigin(
                post_url.origin().ascii_serialization(),
            ));
        }

        let (sender, incoming) = mpsc::channel(64);
        let stop = CancellationToken::new();
        let reader_stop = stop.clone();
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = reader_stop.cancelled() => break,
                    event = events.next() => event,
                };
                match event {
                    Some(Ok(event)) => {
                        let is_message = matches!(event.event.as_deref(), None | Some("message"));
                        let Some(data) = event.data.filter(|_| is_message) else {
                            continue;
                        };
                        if let Some(message) = decode_server_message(&data, &server)
                            && sender.send(message).await.is_err()
                        {
                            break;
                        }
                    }
                    Some(Err(error)) => {
                        tracing::warn!(server, %error, "the HTTP+SSE stream broke");
                        break;
                    }
                    None => {
                        tracing::info!(server, "the HTTP+SSE stream ended");
                        break;
                    }
                }
            }
        });
        Ok(Self {
            client,
            post_url,
            incoming,
            _reader: stop.drop_guard(),
        })
    }
}

impl Transport<RoleClient> for LegacySseTransport {
    type Error = LegacySseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let client = self.client.clone();
        let post_url = self.post_url.clone();
        async move {
            let response = client
                .send_authorized(&reqwest::Method::POST, &post_url, |credentials| {
                    client
                        .http()
                        .post(post_url.clone())
                        .headers(client.static_headers().clone())
                        .headers(credentials)
                        .json(&item)
                })
                .await?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(LegacySseError::PostStatus(response.status().as_u16()))
            }
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}
