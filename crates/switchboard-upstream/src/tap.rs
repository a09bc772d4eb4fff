//! Copies of the JSON-RPC messages a connection exchanges with its server, for the console's
//! inspector.
//!
//! Every message crosses one of two places: the Streamable HTTP client (for both the session
//! and the short path, in [`crate::transport::http_client`]) or a message transport (stdio, WebSocket,
//! HTTP+SSE, built-in), which [`Tapped`] wraps. Each copies what passes to the connection's
//! [`MessageTap`], but only while the tap says someone is watching: a message is turned into
//! JSON for the copy then, and at no other time, so an unwatched connection pays one atomic
//! load per message.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::SseError;
use sse_stream::Sse;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From Switchboard to the server.
    Sent,
    /// From the server to Switchboard.
    Received,
}

/// Where a connection's messages are copied to.
pub trait MessageTap: Send + Sync + std::fmt::Debug {
    /// Whether anyone wants copies now; nothing is copied otherwise.
    fn watching(&self) -> bool;

    /// Takes the copy of one message.
    fn record(&self, direction: Direction, message: serde_json::Value);
}

/// Copies `message` to `tap` if it is watching.
pub(crate) fn copy(
    tap: Option<&Arc<dyn MessageTap>>,
    direction: Direction,
    message: &impl serde::Serialize,
) {
    if let Some(tap) = tap.filter(|tap| tap.watching())
        && let Ok(value) = serde_json::to_value(message)
    {
        tap.record(direction, value);
    }
}

/// `events` (a server's SSE stream), copying each message event's data to `tap` as it passes.
pub(crate) fn copy_events(
    tap: Option<Arc<dyn MessageTap>>,
    events: BoxStream<'static, Result<Sse, SseError>>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let Some(tap) = tap else {
        return events;
    };
    events
        .inspect(move |event| {
            if let Ok(Sse {
                data: Some(data), ..
            }) = event
                && tap.watching()
                && let Ok(value) = serde_json::from_str(data)
            {
                tap.record(Direction::Received, value);
            }
        })
        .boxed()
}

/// A message transport whose traffic is copied to a tap.
pub(crate) struct Tapped<T> {
    inner: T,
    tap: Option<Arc<dyn MessageTap>>,
}

impl<T> Tapped<T> {
    /// Wraps `inner`; with no tap it only passes messages on.
    pub(crate) fn new(inner: T, tap: Option<Arc<dyn MessageTap>>) -> Self {
        Self { inner, tap }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Tapped<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        copy(self.tap.as_ref(), Direction::Sent, &item);
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        let message = self.inner.receive().await?;
        copy(self.tap.as_ref(), Direction::Received, &message);
        Some(message)
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::late_discover::tests::Canned;

    #[derive(Debug, Default)]
    struct Recorder {
        on: AtomicBool,
        seen: Mutex<Vec<(Direction, serde_json::Value)>>,
    }

    impl MessageTap for Recorder {
        fn watching(&self) -> bool {
            self.on.load(Ordering::SeqCst)
        }
        fn record(&self, direction: Direction, message: serde_json::Value) {
            switchboard_core::sync::lock(&self.seen).push((direction, message));
        }
    }

    #[tokio::test]
    async fn messages_are_copied_only_while_watched() {
        let recorder = Arc::new(Recorder::default());
        let reply: ServerJsonRpcMessage =
            serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
                .unwrap();
        let ping: ClientJsonRpcMessage = serde_json::from_value(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        )
        .unwrap();
        let tap: Arc<dyn MessageTap> = recorder.clone();
        let mut transport = Tapped::new(Canned(VecDeque::from([reply.clone(), reply])), Some(tap));
        transport.send(ping.clone()).await.unwrap();
        transport.receive().await.unwrap();
        assert!(switchboard_core::sync::lock(&recorder.seen).is_empty());
        recorder.on.store(true, Ordering::SeqCst);
        transport.send(ping).await.unwrap();
        transport.receive().await.unwrap();
        let seen = switchboard_core::sync::lock(&recorder.seen);
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].0, Direction::Sent);
        assert_eq!(seen[0].1["method"], "ping");
        assert_eq!(
            (seen[1].0, &seen[1].1["id"]),
            (Direction::Received, &serde_json::json!(1))
        );
    }
}
