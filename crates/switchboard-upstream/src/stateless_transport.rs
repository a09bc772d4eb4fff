//! A 2026-07-28 server's connection, carried without rmcp's Streamable HTTP worker.
//!
//! rmcp's Streamable HTTP client runs a worker task beside each session and talks to it over
//! four channels. A tokio channel allocates its first block of 32 slots when it is made, and
//! rmcp's messages are about 370 bytes, so the worker holds about 80 KB per connection before a
//! message is sent (measured with massif on `switchboard-load --workspaces`: half of what an
//! open workspace of `serve --users` cost). For a server with sessions the worker earns it: it
//! keeps the session id, the GET stream, resumption and re-initialisation. A 2026-07-28 server
//! has none of these. Each message is one POST, answered on its own response, so this transport
//! sends each message from the task rmcp sends it in, and keeps what comes back in a queue that
//! holds only what arrived and was not yet taken.
//!
//! What it keeps of the worker's behaviour:
//! - the SEP-2243 headers ([`crate::request_headers`]), with the input schemas of the tools
//!   listed so far for `Mcp-Param-*`, and tools whose `x-mcp-header` marks break the rules left
//!   out of the list;
//! - cancellation by closing the request's response stream, which is how 2026-07-28 cancels
//!   over HTTP (no `notifications/cancelled` is sent);
//! - the HTTP client's errors as they are ([`StreamableHttpError`] of [`HttpFailure`]), so the
//!   probe and the error mapping read them as before.
//!
//! What comes back is bounded: at most [`QUEUE_BOUND`] messages wait to be taken; a stream with
//! more to deliver waits for room.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, JsonObject, JsonRpcMessage, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::held_connections::lock;
use crate::http_client::{HttpFailure, StatusAwareHttpClient};

/// Most messages that wait for rmcp's client to take them.
pub(crate) const QUEUE_BOUND: usize = 64;

/// The transport: a handle on what its sends and its receiver share.
pub(crate) struct StatelessTransport {
    shared: Arc<Shared>,
}

struct Shared {
    client: StatusAwareHttpClient,
    url: Arc<str>,
    /// Messages that arrived and were not yet taken.
    queue: Mutex<VecDeque<ServerJsonRpcMessage>>,
    arrived: Notify,
    /// One permit per free place in the queue.
    room: Semaphore,
    /// The protocol version of the last request sent (for notifications, which name none).
    version: Mutex<String>,
    /// Input schemas of the listed tools that mark arguments for `Mcp-Param-*` headers.
    schemas: Mutex<HashMap<String, Arc<JsonObject>>>,
    /// The requests whose responses are being read, to close one when it is cancelled.
    reading: Mutex<HashMap<RequestId, CancellationToken>>,
    /// Cancelled when the transport closes: ends every reading and the receiver.
    closed: CancellationToken,
}

impl StatelessTransport {
    /// A transport to the server at `url`, reached through `client`.
    pub(crate) fn new(client: StatusAwareHttpClient, url: &url::Url) -> Self {
        Self {
            shared: Arc::new(Shared {
                client,
                url: Arc::from(url.as_str()),
                queue: Mutex::new(VecDeque::new()),
                arrived: Notify::new(),
                room: Semaphore::new(QUEUE_BOUND),
                version: Mutex::new(rmcp::model::ProtocolVersion::V_2026_07_28.to_string()),
                schemas: Mutex::new(HashMap::new()),
                reading: Mutex::new(HashMap::new()),
                closed: CancellationToken::new(),
            }),
        }
    }
}

impl Drop for StatelessTransport {
    fn drop(&mut self) {
        self.shared.closed.cancel();
    }
}

type SendError = StreamableHttpError<HttpFailure>;

impl Transport<RoleClient> for StatelessTransport {
    type Error = SendError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let shared = self.shared.clone();
        async move { shared.send(item).await }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            if let Some(message) = lock(&self.shared.queue).pop_front() {
                self.shared.room.add_permits(1);
                return Some(message);
            }
            if self.shared.closed.is_cancelled() {
                return None;
            }
            // A message queued since the look above left a permit: this returns at once.
            tokio::select! {
                () = self.shared.arrived.notified() => {}
                () = self.shared.closed.cancelled() => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.shared.closed.cancel();
        Ok(())
    }
}

impl Shared {
    async fn send(&self, message: ClientJsonRpcMessage) -> Result<(), SendError> {
        let id = match &message {
            JsonRpcMessage::Request(request) => {
                if let Some(version) =
                    rmcp::model::GetMeta::get_meta(&request.request).protocol_version()
                {
                    *lock(&self.version) = version.to_string();
                }
                Some(request.id.clone())
            }
            JsonRpcMessage::Notification(notification) => {
                // Closing the request's response stream is the cancellation.
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                {
                    if let Some(reading) = cancelled
                        .params
                        .request_id
                        .as_ref()
                        .and_then(|id| lock(&self.reading).remove(id))
                    {
                        reading.cancel();
                    }
                    return Ok(());
                }
                None
            }
            // A client answers nothing in this revision: the server sends no requests.
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => return Ok(()),
        };
        let headers = {
            let version = lock(&self.version).clone();
            crate::request_headers::request_headers(&message, &version, &lock(&self.schemas))
        };
        let stop = self.closed.child_token();
        if let Some(id) = &id {
            lock(&self.reading).insert(id.clone(), stop.clone());
        }
        let read = async {
            let response = self
                .client
                .post_message(self.url.clone(), message, None, None, headers)
                .await?;
            match (response, &id) {
                (StreamableHttpPostResponse::Accepted, None) => Ok(()),
                (StreamableHttpPostResponse::Accepted, Some(_)) => {
                    Err(StreamableHttpError::UnexpectedServerResponse(
                        "202 Accepted to a request".into(),
                    ))
                }
                (StreamableHttpPostResponse::Json(message, _), _) => {
                    self.deliver(message).await;
                    Ok(())
                }
                (StreamableHttpPostResponse::Sse(events, _), id) => {
                    self.read_stream(events, id.as_ref()).await
                }
                (other, _) => Err(StreamableHttpError::UnexpectedServerResponse(
                    format!("{other:?}").into(),
                )),
            }
        };
        let result = tokio::select! {
            result = read => result,
            // Dropping the reading closes the stream: the server takes it as the cancellation.
            () = stop.cancelled() => Ok(()),
        };
        if let Some(id) = &id {
            lock(&self.reading).remove(id);
        }
        result
    }

    /// Delivers the messages of a response stream until the response to `id` (or, for a
    /// notification's stream, its end).
    async fn read_stream(
        &self,
        mut events: futures::stream::BoxStream<
            'static,
            Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
        >,
        id: Option<&RequestId>,
    ) -> Result<(), SendError> {
        while let Some(event) = events.next().await {
            // Events without data (priming events, comments) carry no message.
            let Some(data) = event?.data.filter(|data| !data.is_empty()) else {
                continue;
            };
            let message = match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                Ok(message) => message,
                Err(error) => {
                    tracing::warn!(%error, "skipped an event that is not a JSON-RPC message");
                    continue;
                }
            };
            let answers = match &message {
                JsonRpcMessage::Response(response) => Some(&response.id) == id,
                JsonRpcMessage::Error(error) => error.id.as_ref() == id,
                _ => false,
            };
            self.deliver(message).await;
            if answers {
                // The response ends the request; what the stream still holds is not read.
                return Ok(());
            }
        }
        match id {
            Some(_) => Err(StreamableHttpError::UnexpectedEndOfStream),
            None => Ok(()),
        }
    }

    /// Queues `message` for rmcp's client, once there is room; a tool list first loses the
    /// tools whose header marks break the rules, and lends its schemas to later calls' headers.
    async fn deliver(&self, mut message: ServerJsonRpcMessage) {
        if let JsonRpcMessage::Response(response) = &mut message
            && let ServerResult::ListToolsResult(list) = &mut response.result
        {
            let mut schemas = lock(&self.schemas);
            list.tools.retain(|tool| {
                match crate::request_headers::broken_marks(&tool.input_schema) {
                    Some(reason) => {
                        tracing::warn!(tool = %tool.name, "left out a tool: {reason}");
                        false
                    }
                    None => {
                        // Only marked schemas are kept: the catalog holds the others.
                        if crate::request_headers::marks_arguments(&tool.input_schema) {
                            schemas.insert(tool.name.to_string(), tool.input_schema.clone());
                        } else {
                            schemas.remove(tool.name.as_ref());
                        }
                        true
                    }
                }
            });
        }
        let Ok(permit) = self.room.acquire().await else {
            return;
        };
        permit.forget();
        lock(&self.queue).push_back(message);
        self.arrived.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server on loopback that answers one POST with an SSE stream of `notes` progress
    /// notifications and then the response to request 1.
    async fn streaming_server(notes: usize) -> url::Url {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            // The request is small: read until its body (the JSON-RPC message) is in.
            while !request.ends_with(b"}") {
                match socket.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buffer[..n]),
                }
            }
            let mut body = String::new();
            for n in 0..notes {
                body.push_str(&format!(
                    "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":\"t\",\"progress\":{n}}}}}\n\n"
                ));
            }
            body.push_str("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n");
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.flush().await;
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        });
        url::Url::parse(&format!("http://{address}/mcp")).expect("a URL")
    }

    #[tokio::test]
    async fn a_stream_waits_while_the_queue_is_full_and_everything_arrives_in_order() {
        const NOTES: usize = 200;
        let url = streaming_server(NOTES).await;
        let client = StatusAwareHttpClient::new(
            crate::plain_http::HttpClients::new(),
            &url,
            http::HeaderMap::new(),
        );
        let mut transport = StatelessTransport::new(client, &url);
        let request: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}
        }))
        .expect("a request");
        let sending = tokio::spawn(transport.send(request));
        // Nobody takes messages yet: the queue fills to its bound and the stream waits.
        let mut waited = 0;
        while lock(&transport.shared.queue).len() < QUEUE_BOUND && waited < 500 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            waited += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(lock(&transport.shared.queue).len(), QUEUE_BOUND);
        assert!(!sending.is_finished(), "the stream waits for room");
        for n in 0..NOTES {
            let Some(JsonRpcMessage::Notification(note)) = transport.receive().await else {
                panic!("notification {n} did not arrive");
            };
            let rmcp::model::ServerNotification::ProgressNotification(progress) = note.notification
            else {
                panic!("notification {n} is not progress");
            };
            assert_eq!(progress.params.progress, n as f64);
        }
        assert!(matches!(
            transport.receive().await,
            Some(JsonRpcMessage::Response(_))
        ));
        sending
            .await
            .expect("the send task")
            .expect("the request was sent");
        transport.close().await.expect("closed");
        assert!(
            transport.receive().await.is_none(),
            "a closed transport ends"
        );
    }
}
