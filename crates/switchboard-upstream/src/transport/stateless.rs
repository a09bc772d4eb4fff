//! A 2026-07-28 server's connection, carried without rmcp's Streamable HTTP worker.
//!
//! rmcp's Streamable HTTP client runs a worker task beside each session and talks to it over
//! four channels. A tokio channel allocates its first block of 32 slots when it is made, and
//! rmcp's messages are about 370 bytes, so the worker holds about 80 KB per connection before a
//! message is sent (measured with massif on `switchboard-load --workspaces`: half of what an
//! open workspace of `serve --users` cost). For a server with sessions the worker earns it: it
//! keeps the session id, the GET stream, resumption and re-initialisation. A 2026-07-28 server
//! has none of these. Each message is one POST, answered on its own response, so this transport
//! sends each message in a task that lives as long as its exchange, and keeps what comes back
//! in a queue that holds only what arrived and was not yet taken.
//!
//! What it keeps of the worker's behaviour:
//! - the SEP-2243 headers ([`crate::transport::request_headers`]), with the input schemas of the tools
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

use crate::transport::http_client::StatusAwareHttpClient;
use crate::transport::http_failure::HttpFailure;
use switchboard_core::sync::lock;

/// Most messages that wait for rmcp's client to take them.
pub(crate) const QUEUE_BOUND: usize = 64;
/// How long the end of a response stream is waited for once its response was read.
const STREAM_END_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

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
        // What must follow the order rmcp sends in is done here, before the send runs in a
        // task of its own: a request is registered for cancelling before any cancellation of
        // it can be looked at.
        let outgoing = self.shared.prepare(item);
        let shared = self.shared.clone();
        async move {
            let Some(outgoing) = outgoing else {
                return Ok(());
            };
            // The exchange runs in a task of its own: rmcp awaits the handshake's sends in the
            // task that connects, at the end of a long chain of calls, and an HTTP exchange
            // polled there overflowed a test thread's stack in a debug build.
            let mut exchange = Exchange(tokio::spawn(async move { shared.send(outgoing).await }));
            (&mut exchange.0).await?
        }
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

/// A message's exchange with the server, stopped if whoever sent the message gives up on it.
struct Exchange(tokio::task::JoinHandle<Result<(), SendError>>);

impl Drop for Exchange {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A message to POST, with its headers, and for a request its id and what cancels its reading.
struct Outgoing {
    message: ClientJsonRpcMessage,
    headers: HashMap<http::HeaderName, http::HeaderValue>,
    request: Option<(RequestId, CancellationToken)>,
}

impl Shared {
    /// What `message` needs sent; `None` when nothing is to be sent: a cancellation, which
    /// closes the request's response stream (2026-07-28's cancellation over HTTP), and an
    /// answer to the server, which sends no requests in this revision (none is delivered).
    fn prepare(&self, message: ClientJsonRpcMessage) -> Option<Outgoing> {
        let request = match &message {
            JsonRpcMessage::Request(request) => {
                if let Some(version) =
                    rmcp::model::GetMeta::get_meta(&request.request).protocol_version()
                {
                    *lock(&self.version) = version.to_string();
                }
                let stop = self.closed.child_token();
                lock(&self.reading).insert(request.id.clone(), stop.clone());
                Some((request.id.clone(), stop))
            }
            JsonRpcMessage::Notification(notification) => {
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
                    return None;
                }
                None
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => return None,
        };
        let headers = {
            let version = lock(&self.version).clone();
            crate::transport::request_headers::request_headers(
                &message,
                &version,
                &lock(&self.schemas),
            )
        };
        Some(Outgoing {
            message,
            headers,
            request,
        })
    }

    async fn send(&self, outgoing: Outgoing) -> Result<(), SendError> {
        let Outgoing {
            message,
            headers,
            request,
        } = outgoing;
        let id = request.as_ref().map(|(id, _)| id.clone());
        let stop = match &request {
            Some((_, stop)) => stop.clone(),
            None => self.closed.child_token(),
        };
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
                JsonRpcMessage::Response(response) => {
                    id.is_some_and(|id| same_id(&response.id, id))
                }
                // An error naming no request is the server's answer to this one.
                JsonRpcMessage::Error(error) => match (&error.id, id) {
                    (Some(theirs), Some(ours)) => same_id(theirs, ours),
                    (None, _) => true,
                    (Some(_), None) => false,
                },
                JsonRpcMessage::Request(request) => {
                    // A 2026-07-28 server asks for input with `input_required`, never with a
                    // request of its own; one that does anyway is not answered (as on the
                    // direct route), so nothing in the daemon acts on it.
                    tracing::debug!(id = ?request.id, "a stateless server sent a request on a stream; ignored");
                    continue;
                }
                JsonRpcMessage::Notification(_) => false,
            };
            self.deliver(message).await;
            if answers {
                // The response ends the request. The stream's end is read briefly, so that its
                // connection goes back to the pool instead of closing; a server must send
                // nothing more for the request, so nothing read there is delivered.
                let _ = tokio::time::timeout(STREAM_END_WAIT, async {
                    while events.next().await.is_some() {}
                })
                .await;
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
                match crate::transport::request_headers::broken_marks(&tool.input_schema) {
                    Some(reason) => {
                        tracing::warn!(tool = %tool.name, "left out a tool: {reason}");
                        false
                    }
                    None => {
                        // Only marked schemas are kept: the catalog holds the others.
                        if crate::transport::request_headers::marks_arguments(&tool.input_schema) {
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

/// Whether a server's answer names request `ours`: the same id, or its number as a string
/// (as some servers echo ids).
fn same_id(theirs: &RequestId, ours: &RequestId) -> bool {
    match (theirs, ours) {
        (RequestId::String(text), RequestId::Number(number)) => text.as_ref() == number.to_string(),
        _ => theirs == ours,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server on loopback that answers one POST with `events` as an SSE stream (each a JSON
    /// message), then keeps the connection open a while; with no events it never answers.
    async fn streaming_server(events: Vec<String>) -> url::Url {
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
            if !events.is_empty() {
                let body: String = events
                    .iter()
                    .map(|event| format!("data: {event}\n\n"))
                    .collect();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
                let _ = socket.flush().await;
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        });
        url::Url::parse(&format!("http://{address}/mcp")).expect("a URL")
    }

    fn transport_to(url: &url::Url) -> StatelessTransport {
        let client = StatusAwareHttpClient::new(
            crate::transport::plain_http::HttpClients::new(),
            url,
            http::HeaderMap::new(),
        );
        StatelessTransport::new(client, url)
    }

    fn request(id: i64) -> ClientJsonRpcMessage {
        serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}
        }))
        .expect("a request")
    }

    #[tokio::test]
    async fn a_cancellation_sent_before_its_request_ran_still_closes_it() {
        let url = streaming_server(Vec::new()).await;
        let mut transport = transport_to(&url);
        // rmcp sends each message from a task of its own: the cancellation's may run first.
        let sending = transport.send(request(7));
        let cancel: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}
        }))
        .expect("a cancellation");
        transport
            .send(cancel)
            .await
            .expect("a cancellation is sent");
        let sent = tokio::time::timeout(std::time::Duration::from_secs(2), sending).await;
        assert!(
            matches!(sent, Ok(Ok(()))),
            "the request ended at once, though its server never answers"
        );
        assert!(lock(&transport.shared.reading).is_empty());
    }

    #[tokio::test]
    async fn a_servers_own_request_is_not_delivered_and_an_error_naming_no_request_answers() {
        let url = streaming_server(vec![
            r#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"broke"}}"#.to_owned(),
        ])
        .await;
        let mut transport = transport_to(&url);
        let sent = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            transport.send(request(1)),
        )
        .await;
        assert!(
            matches!(sent, Ok(Ok(()))),
            "the id-less error ended the request"
        );
        assert!(matches!(
            transport.receive().await,
            Some(JsonRpcMessage::Notification(_))
        ));
        assert!(matches!(
            transport.receive().await,
            Some(JsonRpcMessage::Error(_))
        ));
        assert!(
            lock(&transport.shared.queue).is_empty(),
            "the server's ping was not delivered"
        );
    }

    #[tokio::test]
    async fn a_stream_waits_while_the_queue_is_full_and_everything_arrives_in_order() {
        const NOTES: usize = 200;
        let mut events: Vec<String> = (0..NOTES)
            .map(|n| format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":{n}}}}}"#))
            .collect();
        events.push(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_owned());
        let url = streaming_server(events).await;
        let mut transport = transport_to(&url);
        let sending = tokio::spawn(transport.send(request(1)));
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
