//! Resource subscriptions held for many subscribers at once: the MCP clients of every front
//! door and the consoles following a resource. The first subscriber to a server's resource
//! subscribes at the server, the last one's end unsubscribes, and a subscriber that arrives
//! while the subscription is being made is answered once it is in place. A server that
//! connects again (a new process, a new session after its connection was lost) forgets every
//! subscription: the held ones are made again there, so subscribers keep getting updates.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use switchboard_core::{ConnectionState, ServerId};
use switchboard_upstream::UpstreamError;
use tokio::sync::broadcast::error::RecvError;

use crate::{ClientEra, Hub, HubError, HubEvent};

/// How long making a held subscription again waits for the server's link to it.
const RENEW_WAIT: Duration = Duration::from_secs(10);

/// How many subscribers hold each (server, resource URI as the server names it), and the era
/// of the first (whose link the subscription went over).
#[derive(Default)]
pub(crate) struct Subscriptions {
    holders: Mutex<HashMap<(ServerId, String), (usize, ClientEra)>>,
    /// Taken while a subscription at a server changes.
    changes: tokio::sync::Mutex<()>,
    /// Whether the task making held subscriptions again after reconnections runs (started
    /// with the first subscription).
    renewing: std::sync::atomic::AtomicBool,
}

impl Subscriptions {
    /// Counts one more subscriber of `key` (the first of `era`); whether it is the first.
    fn hold(&self, key: &(ServerId, String), era: ClientEra) -> bool {
        let mut holders = crate::lock(&self.holders);
        let (count, _) = holders.entry(key.clone()).or_insert((0, era));
        *count += 1;
        *count == 1
    }

    /// Counts one subscriber of `key` fewer; whether none is left (or none was held).
    fn release(&self, key: &(ServerId, String)) -> bool {
        let mut holders = crate::lock(&self.holders);
        let Some((count, _)) = holders.get_mut(key) else {
            return true;
        };
        *count = count.saturating_sub(1);
        let last = *count == 0;
        if last {
            holders.remove(key);
        }
        last
    }
}

/// Why a subscription could not be made or ended.
#[derive(Debug, thiserror::Error)]
pub enum SubscriptionError {
    /// The server could not be reached through the hub (unknown, not connected).
    #[error(transparent)]
    NotRouted(#[from] HubError),
    /// The server refused or failed the request.
    #[error("{1}")]
    Upstream(ServerId, Box<UpstreamError>),
}

impl Hub {
    /// Subscribes one more subscriber of `era` to `server`'s resource `uri` (as the server
    /// names it), or (`subscribe` false) lets one go; only the first subscription and the last
    /// release reach the server, over the link that declares subscriptions. Waits up to `wait`
    /// for a server that is reconnecting. The change runs to its end in a task of its own, so
    /// a caller that goes away meanwhile leaves the count and the server in step.
    pub async fn change_resource_subscription(
        self: &std::sync::Arc<Self>,
        server: &ServerId,
        uri: &str,
        subscribe: bool,
        era: ClientEra,
        wait: Duration,
    ) -> Result<(), SubscriptionError> {
        if subscribe {
            self.renew_after_reconnections();
        }
        let (hub, server, uri) = (self.clone(), server.clone(), uri.to_owned());
        tokio::spawn(async move {
            hub.change_subscription_now(&server, &uri, subscribe, era, wait)
                .await
        })
        .await
        .unwrap_or_else(|joined| {
            Err(SubscriptionError::NotRouted(HubError::Invalid(format!(
                "the subscription change stopped: {joined}"
            ))))
        })
    }

    async fn change_subscription_now(
        &self,
        server: &ServerId,
        uri: &str,
        subscribe: bool,
        era: ClientEra,
        wait: Duration,
    ) -> Result<(), SubscriptionError> {
        let _changing = self.subscriptions.changes.lock().await;
        let key = (server.clone(), uri.to_owned());
        let first_or_last = match subscribe {
            true => self.subscriptions.hold(&key, era),
            false => self.subscriptions.release(&key),
        };
        if !first_or_last {
            return Ok(());
        }
        let changed = match self.upstream_for_subscriptions(server, era, wait).await {
            Ok(upstream) if subscribe => upstream
                .subscribe_resource(uri)
                .await
                .map_err(|e| SubscriptionError::Upstream(server.clone(), Box::new(e))),
            Ok(upstream) => upstream
                .unsubscribe_resource(uri)
                .await
                .map_err(|e| SubscriptionError::Upstream(server.clone(), Box::new(e))),
            Err(error) => Err(error.into()),
        };
        if changed.is_err() && subscribe {
            // Not subscribed after all: the next subscriber tries again.
            self.subscriptions.release(&key);
        }
        changed
    }

    /// Starts (once) the task that makes held subscriptions again at a server that connected
    /// again. It holds the hub weakly, and ends with it.
    fn renew_after_reconnections(self: &std::sync::Arc<Self>) {
        if self
            .subscriptions
            .renewing
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let hub = std::sync::Arc::downgrade(self);
        let mut events = self.subscribe();
        tokio::spawn(async move {
            loop {
                let connected = match events.recv().await {
                    Ok(HubEvent::StateChanged {
                        server,
                        to: ConnectionState::Connected,
                        ..
                    }) => Some(server),
                    Ok(_) => continue,
                    // Some were missed: every server is looked at.
                    Err(RecvError::Lagged(_)) => None,
                    Err(RecvError::Closed) => return,
                };
                let Some(hub) = hub.upgrade() else {
                    return;
                };
                hub.renew_subscriptions(connected.as_ref()).await;
            }
        });
    }

    /// Makes again, at `only` (or every server), each held subscription its session does not
    /// have. A server that refuses it is logged; its subscribers stay counted.
    async fn renew_subscriptions(&self, only: Option<&ServerId>) {
        let _changing = self.subscriptions.changes.lock().await;
        let held: Vec<(ServerId, String, ClientEra)> = crate::lock(&self.subscriptions.holders)
            .iter()
            .filter(|((server, _), _)| only.is_none_or(|only| only == server))
            .map(|((server, uri), (_, era))| (server.clone(), uri.clone(), *era))
            .collect();
        for (server, uri, era) in held {
            let Ok(upstream) = self
                .upstream_for_subscriptions(&server, era, RENEW_WAIT)
                .await
            else {
                continue;
            };
            if upstream.subscribed_to(&uri) {
                continue;
            }
            if let Err(error) = upstream.subscribe_resource(&uri).await {
                tracing::warn!(%server, uri, %error, "a resource subscription could not be made again after the server connected again");
            }
        }
    }
}
