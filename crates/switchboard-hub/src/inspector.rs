//! The console's inspector: each server's JSON-RPC messages, live, while someone watches.
//!
//! Every connection copies its messages to its server's tap ([`switchboard_upstream::tap`]),
//! which hands them to whoever follows the server's traffic ([`Hub::watch_traffic`]). With no
//! follower a tap copies nothing, so the inspector costs nothing until it is opened; it shows
//! the messages from then on (nothing is kept).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use switchboard_core::ServerId;
use switchboard_upstream::{Direction, MessageTap};
use tokio::sync::broadcast;

use crate::{Hub, HubError};

/// One message a server connection sent or received.
#[derive(Debug, Clone, Serialize)]
pub struct TrafficMessage {
    /// Which way it went.
    pub direction: Direction,
    /// When it passed (ms since the Unix epoch).
    pub at_ms: u64,
    /// The JSON-RPC message as it went over the wire.
    pub message: serde_json::Value,
}

/// One server's tap: the same across its reconnections, so a follower sees them all.
#[derive(Debug)]
struct ServerTap {
    followers: broadcast::Sender<Arc<TrafficMessage>>,
}

impl MessageTap for ServerTap {
    fn watching(&self) -> bool {
        self.followers.receiver_count() > 0
    }

    fn record(&self, direction: Direction, message: serde_json::Value) {
        let _ = self.followers.send(Arc::new(TrafficMessage {
            direction,
            at_ms: crate::event::now_ms(),
            message,
        }));
    }
}

/// Every server's tap, by id.
#[derive(Default)]
pub(crate) struct Inspector {
    taps: Mutex<HashMap<ServerId, Arc<ServerTap>>>,
}

impl Inspector {
    /// Server `id`'s tap.
    pub(crate) fn tap(&self, id: &ServerId) -> Arc<dyn MessageTap> {
        self.server_tap(id)
    }

    /// Drops server `id`'s tap (it was removed or disabled): its followers' streams end once
    /// its last connection is gone.
    pub(crate) fn forget(&self, id: &ServerId) {
        self.taps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    fn server_tap(&self, id: &ServerId) -> Arc<ServerTap> {
        let mut taps = self.taps.lock().unwrap_or_else(|p| p.into_inner());
        taps.entry(id.clone())
            .or_insert_with(|| {
                Arc::new(ServerTap {
                    followers: broadcast::channel(1024).0,
                })
            })
            .clone()
    }
}

impl Hub {
    /// Follows server `id`'s JSON-RPC traffic from now on (a follower too slow to keep up is
    /// told how many messages it missed).
    pub fn watch_traffic(
        &self,
        id: &ServerId,
    ) -> Result<broadcast::Receiver<Arc<TrafficMessage>>, HubError> {
        self.slot(id)?;
        Ok(self.inspector.server_tap(id).followers.subscribe())
    }
}
