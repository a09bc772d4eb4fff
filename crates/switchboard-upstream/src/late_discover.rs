//! Ignoring late answers to an abandoned `server/discover` probe.
//!
//! On stdio and WebSocket, rmcp's `Auto` lifecycle sends `server/discover`, waits up to 10 s,
//! and on silence sends `initialize` on the same connection. A server that was merely slow to
//! start (an `npx` download, say) then answers both, the stale discover first, and rmcp takes
//! that stale answer as a reply to `initialize` and fails the handshake ("uncorrelated error
//! response"). This wrapper drops replies to discover requests once `initialize` has been sent,
//! so the legacy handshake sees only its own reply, and notes that a late *answer* came: the
//! server speaks 2026-07-28 after all. A server that then refuses `initialize` on that
//! connection (the Python SDK does: "connection is serving the 2026-07-28 protocol") is started
//! again and reached with `server/discover` alone (see `connect::serve_message_transport`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use switchboard_core::sync::lock;

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;

/// A message transport that forgets abandoned discover probes.
pub(crate) struct LateDiscoverFilter<T> {
    inner: T,
    discover_ids: Arc<Mutex<HashSet<RequestId>>>,
    initialize_sent: Arc<AtomicBool>,
    answered_late: Arc<AtomicBool>,
}

impl<T> LateDiscoverFilter<T> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: T) -> Self {
        Self {
            inner,
            discover_ids: Arc::default(),
            initialize_sent: Arc::default(),
            answered_late: Arc::default(),
        }
    }

    /// Set once a result (not an error) to an abandoned `server/discover` arrived: the server
    /// speaks 2026-07-28 but was too slow for the probe.
    pub(crate) fn answered_late(&self) -> Arc<AtomicBool> {
        self.answered_late.clone()
    }

    fn is_stale_discover_reply(&self, message: &ServerJsonRpcMessage) -> bool {
        if !self.initialize_sent.load(Ordering::SeqCst) {
            return false;
        }
        let id = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        id.is_some_and(|id| lock(&self.discover_ids).contains(id))
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for LateDiscoverFilter<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &item {
            match &request.request {
                ClientRequest::DiscoverRequest(_) => {
                    lock(&self.discover_ids).insert(request.id.clone());
                }
                ClientRequest::InitializeRequest(_) => {
                    self.initialize_sent.store(true, Ordering::SeqCst);
                }
                _ => {}
            }
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            if self.is_stale_discover_reply(&message) {
                tracing::debug!("ignored a late reply to an abandoned server/discover probe");
                if matches!(message, JsonRpcMessage::Response(_)) {
                    self.answered_late.store(true, Ordering::SeqCst);
                }
                continue;
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// Replays canned server messages and records nothing.
    pub(crate) struct Canned(pub(crate) VecDeque<ServerJsonRpcMessage>);

    impl Transport<RoleClient> for Canned {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: ClientJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
            self.0.pop_front()
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    fn message(json: serde_json::Value) -> ServerJsonRpcMessage {
        serde_json::from_value(json).unwrap()
    }

    fn request(json: serde_json::Value) -> ClientJsonRpcMessage {
        serde_json::from_value(json).unwrap()
    }

    #[tokio::test]
    async fn a_late_discover_reply_is_dropped_once_initialize_was_sent() {
        let stale = message(serde_json::json!({"jsonrpc": "2.0", "id": 0,
            "error": {"code": -32601, "message": "Method not found"}}));
        let fresh = message(serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "serverInfo": {"name": "slow", "version": "1"}}}));
        let mut filter = LateDiscoverFilter::new(Canned(VecDeque::from([stale.clone(), fresh])));
        filter
            .send(request(
                serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
            ))
            .await
            .unwrap();
        filter
            .send(request(
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}}),
            ))
            .await
            .unwrap();
        let received = filter.receive().await.unwrap();
        assert!(
            matches!(received, JsonRpcMessage::Response(ref r) if r.id == RequestId::Number(1))
        );
        assert!(filter.receive().await.is_none());

        // Before initialize, a discover reply is the probe's answer and passes through.
        let mut filter = LateDiscoverFilter::new(Canned(VecDeque::from([stale])));
        filter
            .send(request(
                serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
            ))
            .await
            .unwrap();
        assert!(filter.receive().await.is_some());
    }
}
