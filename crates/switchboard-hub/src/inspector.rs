//! The console's inspector: each server's JSON-RPC messages, live, while someone watches.
//!
//! Every connection copies its messages to its server's tap ([`switchboard_upstream::MessageTap`]),
//! which hands them to whoever follows the server's traffic ([`Hub::watch_traffic`]). With no
//! follower a tap copies nothing, so the inspector costs nothing until it is opened; it shows
//! the messages from then on. A daemon told to keep a history ([`Hub::keep_traffic`], off by
//! default) keeps each server's last messages while nobody watches (at most the number asked
//! for, and [`HISTORY_BYTES`] of them), and a follower gets those first.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use switchboard_core::ServerId;
use switchboard_upstream::{Direction, MessageTap};
use tokio::sync::broadcast;

use crate::{Hub, HubError, lock};

/// The most a server's kept history holds, in bytes of JSON (held as parsed values, which take
/// a few times that in memory).
pub const HISTORY_BYTES: usize = 4 * 1024 * 1024;

/// The most messages a server's kept history may be asked to hold.
pub const MAX_HISTORY_MESSAGES: usize = 10_000;

/// The live messages of a server's traffic, as they pass.
pub type TrafficReceiver = broadcast::Receiver<Arc<TrafficMessage>>;

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

/// A server's last messages, bounded in number and bytes.
#[derive(Debug)]
struct History {
    messages: VecDeque<(Arc<TrafficMessage>, usize)>,
    bytes: usize,
    most: usize,
}

impl History {
    /// Keeps `message` (`size` bytes of JSON), dropping the oldest beyond the bounds.
    fn keep(&mut self, message: Arc<TrafficMessage>, size: usize) {
        self.messages.push_back((message, size));
        self.bytes += size;
        while self.messages.len() > self.most || self.bytes > HISTORY_BYTES {
            let Some((_, dropped)) = self.messages.pop_front() else {
                break;
            };
            self.bytes -= dropped;
        }
    }
}

/// One server's tap: the same across its reconnections, so a follower sees them all.
#[derive(Debug)]
struct ServerTap {
    followers: crate::bus::OnDemandBroadcast<Arc<TrafficMessage>>,
    /// The kept history, when the daemon keeps one.
    history: Option<Mutex<History>>,
}

impl MessageTap for ServerTap {
    fn watching(&self) -> bool {
        self.history.is_some() || self.followers.receiver_count() > 0
    }

    fn record(&self, direction: Direction, message: serde_json::Value) {
        let message = Arc::new(TrafficMessage {
            direction,
            at_ms: crate::event::now_ms(),
            message,
        });
        match &self.history {
            // Kept and sent under one lock, so a new follower's history and live messages
            // neither miss nor repeat one.
            Some(history) => {
                let size = message.message.to_string().len();
                let mut history = lock(history);
                history.keep(message.clone(), size);
                self.followers.send(message);
            }
            None => {
                self.followers.send(message);
            }
        }
    }
}

/// Every server's tap, by id.
#[derive(Default)]
pub(crate) struct Inspector {
    taps: Mutex<HashMap<ServerId, Arc<ServerTap>>>,
    /// How many messages each server's history keeps (0: none).
    keep: AtomicUsize,
}

impl Inspector {
    /// Server `id`'s tap.
    pub(crate) fn tap(&self, id: &ServerId) -> Arc<dyn MessageTap> {
        self.server_tap(id)
    }

    /// Drops server `id`'s tap (it was removed or disabled): its followers' streams end once
    /// its last connection is gone.
    pub(crate) fn forget(&self, id: &ServerId) {
        lock(&self.taps).remove(id);
    }

    fn server_tap(&self, id: &ServerId) -> Arc<ServerTap> {
        let keep = self.keep.load(Ordering::Relaxed);
        lock(&self.taps)
            .entry(id.clone())
            .or_insert_with(|| {
                Arc::new(ServerTap {
                    followers: crate::bus::OnDemandBroadcast::new(1024),
                    history: (keep > 0).then(|| {
                        Mutex::new(History {
                            messages: VecDeque::new(),
                            bytes: 0,
                            most: keep,
                        })
                    }),
                })
            })
            .clone()
    }
}

impl Hub {
    /// Keeps each server's last `messages` JSON-RPC messages (at most
    /// [`MAX_HISTORY_MESSAGES`], and [`HISTORY_BYTES`] of them) while nobody watches, for the
    /// inspector to show first. Set before servers start; 0 keeps none (the default), so
    /// nothing is copied until someone watches.
    pub fn keep_traffic(&self, messages: usize) {
        self.inspector
            .keep
            .store(messages.min(MAX_HISTORY_MESSAGES), Ordering::Relaxed);
    }

    /// Follows server `id`'s JSON-RPC traffic: the kept history (oldest first; empty unless the
    /// daemon keeps one), then every message from now on (a follower too slow to keep up is
    /// told how many messages it missed).
    pub fn watch_traffic(
        &self,
        id: &ServerId,
    ) -> Result<(Vec<Arc<TrafficMessage>>, TrafficReceiver), HubError> {
        self.slot(id)?;
        let tap = self.inspector.server_tap(id);
        let Some(history) = &tap.history else {
            return Ok((Vec::new(), tap.followers.subscribe()));
        };
        let history = lock(history);
        let receiver = tap.followers.subscribe();
        let kept = history.messages.iter().map(|(m, _)| m.clone()).collect();
        Ok((kept, receiver))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_keeps_the_last_messages_within_its_bounds() {
        let message = |n: usize| {
            Arc::new(TrafficMessage {
                direction: Direction::Sent,
                at_ms: 0,
                message: serde_json::json!({"n": n, "pad": "x".repeat(1000)}),
            })
        };
        let mut history = History {
            messages: VecDeque::new(),
            bytes: 0,
            most: 3,
        };
        for n in 0..5 {
            history.keep(message(n), message(n).message.to_string().len());
        }
        let kept: Vec<u64> = history
            .messages
            .iter()
            .map(|(m, _)| m.message["n"].as_u64().unwrap())
            .collect();
        assert_eq!(kept, [2, 3, 4]);
        let mut history = History {
            messages: VecDeque::new(),
            bytes: 0,
            most: MAX_HISTORY_MESSAGES,
        };
        for n in 0..10_000 {
            history.keep(message(n), message(n).message.to_string().len());
        }
        assert!(history.bytes <= HISTORY_BYTES, "{}", history.bytes);
        assert!(history.messages.len() < 10_000);
        assert_eq!(
            history.messages.back().unwrap().0.message["n"],
            9_999,
            "the newest are kept"
        );
    }
}
