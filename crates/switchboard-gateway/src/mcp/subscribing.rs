//! Keeps a 2026-07-28 client's requests behind its resource subscriptions.
//!
//! rmcp acknowledges `subscriptions/listen` before it calls the handler's `listen`, which is
//! where Switchboard subscribes at the resources' servers. A client may act as soon as it has the
//! acknowledgement (call the tool that changes the resource it just subscribed to), and without
//! this the call could reach the server before the subscription does, so the update would never
//! come. `accepted_subscription_filter`, which runs before the acknowledgement, marks the
//! servers whose resources are being subscribed to ([`Subscribing::begin`]), and requests for
//! those servers wait until `listen` has subscribed there ([`Subscribing::settled`]), at most
//! [`SETTLE_LIMIT`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_core::ServerId;

use switchboard_core::sync::lock;

/// The longest a request waits for a subscription at its server to be in place.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// The servers at which subscriptions are being made, with how many are under way at each.
#[derive(Default)]
pub(crate) struct Subscribing {
    pending: Mutex<HashMap<ServerId, usize>>,
    /// The sum of `pending`, read without the lock by every request.
    total: AtomicUsize,
    settled: tokio::sync::Notify,
}

/// Subscriptions under way at some servers, until dropped.
pub(crate) struct Underway {
    subscribing: Arc<Subscribing>,
    servers: Vec<ServerId>,
}

impl Subscribing {
    /// Marks subscriptions under way at `servers` (a server may appear more than once).
    pub(crate) fn begin(self: &Arc<Self>, servers: Vec<ServerId>) -> Underway {
        {
            let mut pending = lock(&self.pending);
            for server in &servers {
                *pending.entry(server.clone()).or_default() += 1;
            }
            self.total.fetch_add(servers.len(), Ordering::SeqCst);
        }
        Underway {
            subscribing: self.clone(),
            servers,
        }
    }

    /// Waits until no subscription is under way at `server` (at once when none is, anywhere).
    pub(crate) async fn settled(&self, server: &ServerId) {
        if self.total.load(Ordering::SeqCst) == 0 {
            return;
        }
        let _ = tokio::time::timeout(SETTLE_LIMIT, async {
            loop {
                let settled = self.settled.notified();
                let mut settled = std::pin::pin!(settled);
                settled.as_mut().enable();
                if !lock(&self.pending).contains_key(server) {
                    return;
                }
                settled.await;
            }
        })
        .await;
    }
}

impl Drop for Underway {
    fn drop(&mut self) {
        {
            let mut pending = lock(&self.subscribing.pending);
            for server in &self.servers {
                if let Some(count) = pending.get_mut(server) {
                    *count -= 1;
                    if *count == 0 {
                        pending.remove(server);
                    }
                }
            }
            self.subscribing
                .total
                .fetch_sub(self.servers.len(), Ordering::SeqCst);
        }
        self.subscribing.settled.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_wait_for_subscriptions_at_their_server_only() {
        let subscribing = Arc::new(Subscribing::default());
        let (notes, other) = (
            ServerId::new("notes").unwrap(),
            ServerId::new("other").unwrap(),
        );
        let underway = subscribing.begin(vec![notes.clone(), notes.clone()]);
        // Another server's requests go at once.
        tokio::time::timeout(Duration::from_secs(1), subscribing.settled(&other))
            .await
            .expect("not held");
        let waiting = tokio::spawn({
            let subscribing = subscribing.clone();
            async move { subscribing.settled(&notes).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "held while the subscription is under way"
        );
        drop(underway);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("released")
            .unwrap();
        assert_eq!(subscribing.total.load(Ordering::SeqCst), 0);
    }
}
