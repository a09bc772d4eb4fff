//! The hub's event channels, which cost nothing until someone listens.
//!
//! A tokio broadcast channel allocates every slot of its buffer when it is made: 1,024 slots of
//! a [`HubEvent`] are about 180 KB. A `serve --users` daemon holds a hub for every open
//! workspace, with a bus, a call announcer and a traffic tap per server, and most of them are
//! never followed (a stateless client, no open console). Made eagerly they took more than half
//! of what an open workspace cost. A value sent while nobody listens is dropped either way (a
//! receiver sees only what is sent after it subscribed), so making the channel when its first
//! receiver subscribes changes nothing but the memory.
//!
//! The hub's own reaction to catalog and state changes (rebuilding the merged catalog) does not
//! listen on the bus, so that a hub nobody follows has none: [`EventBus::send`] wakes it
//! through a [`Notify`] instead.

use std::sync::OnceLock;

use tokio::sync::{Notify, broadcast};

use crate::HubEvent;

/// A broadcast channel of `capacity` made when its first receiver subscribes.
#[derive(Debug)]
pub(crate) struct OnDemandBroadcast<T> {
    capacity: usize,
    sender: OnceLock<broadcast::Sender<T>>,
}

impl<T: Clone> OnDemandBroadcast<T> {
    /// A channel that will keep `capacity` values for its slowest receiver.
    pub(crate) const fn new(capacity: usize) -> Self {
        Self {
            capacity,
            sender: OnceLock::new(),
        }
    }

    /// Sends `value` to the receivers, if there are any.
    pub(crate) fn send(&self, value: T) {
        if let Some(sender) = self.sender.get() {
            let _ = sender.send(value);
        }
    }

    /// A receiver of the values sent from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<T> {
        self.sender
            .get_or_init(|| broadcast::channel(self.capacity).0)
            .subscribe()
    }

    /// How many receivers there are now.
    pub(crate) fn receiver_count(&self) -> usize {
        self.sender
            .get()
            .map_or(0, broadcast::Sender::receiver_count)
    }
}

/// How many events a slow follower of the bus may fall behind before it is told it lagged.
const BUS_CAPACITY: usize = 1024;

/// The hub's bus: [`HubEvent`]s for whoever follows them, and the signal that the merged
/// catalog is stale.
#[derive(Debug)]
pub(crate) struct EventBus {
    events: OnDemandBroadcast<HubEvent>,
    /// Stored as one permit however many changes come before the rebuild runs.
    exposure_stale: Notify,
}

impl EventBus {
    pub(crate) const fn new() -> Self {
        Self {
            events: OnDemandBroadcast::new(BUS_CAPACITY),
            exposure_stale: Notify::const_new(),
        }
    }

    /// Announces `event`; a catalog or state change also marks the merged catalog stale.
    pub(crate) fn send(&self, event: HubEvent) {
        if matches!(
            event,
            HubEvent::CatalogChanged { .. } | HubEvent::StateChanged { .. }
        ) {
            self.mark_exposure_stale();
        }
        self.events.send(event);
    }

    /// A receiver of the events sent from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.events.subscribe()
    }

    /// Wakes the task that rebuilds the merged catalog (also how it learns its hub is gone).
    pub(crate) fn mark_exposure_stale(&self) {
        self.exposure_stale.notify_one();
    }

    /// Waits until the merged catalog is stale.
    pub(crate) async fn exposure_went_stale(&self) {
        self.exposure_stale.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_nobody_follows_is_never_made() {
        let bus = OnDemandBroadcast::<u32>::new(1024);
        bus.send(1);
        assert!(bus.sender.get().is_none());
        assert_eq!(bus.receiver_count(), 0);
    }

    #[tokio::test]
    async fn a_receiver_gets_what_is_sent_after_it_subscribed() {
        let bus = OnDemandBroadcast::<u32>::new(4);
        bus.send(1);
        let mut receiver = bus.subscribe();
        bus.send(2);
        assert_eq!(receiver.recv().await.unwrap(), 2);
        assert_eq!(bus.receiver_count(), 1);
    }

    #[test]
    fn changes_before_a_rebuild_ask_for_one_rebuild() {
        use futures::FutureExt;
        let bus = EventBus::new();
        for _ in 0..3 {
            bus.send(HubEvent::CatalogChanged {
                server: switchboard_core::ServerId::new("a").unwrap(),
            });
        }
        assert!(bus.exposure_went_stale().now_or_never().is_some());
        assert!(
            bus.exposure_went_stale().now_or_never().is_none(),
            "one permit for the three changes"
        );
        bus.send(HubEvent::ActivationChanged {
            scope: "app".into(),
        });
        assert!(
            bus.exposure_went_stale().now_or_never().is_none(),
            "an activation change leaves the catalog as it is"
        );
    }
}
