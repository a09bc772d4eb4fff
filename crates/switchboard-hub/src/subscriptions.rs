//! Resource subscriptions held for many subscribers at once: the MCP clients of every front
//! door and the consoles following a resource. The first subscriber to a server's resource
//! subscribes at the server, the last one's end unsubscribes, and a subscriber that arrives
//! while the subscription is being made is answered once it is in place.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use switchboard_core::ServerId;
use switchboard_upstream::UpstreamError;

use crate::{ClientEra, Hub, HubError};

/// How many subscribers hold each (server, resource URI as the server names it).
#[derive(Default)]
pub(crate) struct Subscriptions {
    holders: Mutex<HashMap<(ServerId, String), usize>>,
    /// Taken while a subscription at a server changes.
    changes: tokio::sync::Mutex<()>,
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
        let first_or_last = {
            let mut holders = crate::lock(&self.subscriptions.holders);
            let count = holders.entry(key.clone()).or_default();
            if subscribe {
                *count += 1;
                *count == 1
            } else {
                *count = count.saturating_sub(1);
                let last = *count == 0;
                if last {
                    holders.remove(&key);
                }
                last
            }
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
            let mut holders = crate::lock(&self.subscriptions.holders);
            if let Some(count) = holders.get_mut(&key) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    holders.remove(&key);
                }
            }
        }
        changed
    }
}
