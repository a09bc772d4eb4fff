//! Rate limits of tool calls: per server, per tool (both from the server's policies), and per
//! client of the daemon (one limit for every client, each with its own bucket).
//!
//! Each limit is a token bucket (the `governor` crate's GCRA). A call takes a token from each
//! bucket that applies; the first empty one refuses it with the time until it has one again.
//! A bucket lives as long as its limit is unchanged, across restarts of its server, so changing
//! a server's other settings does not reset it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use switchboard_core::sync::lock;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use switchboard_core::{RateLimit, ServerId};

use crate::{Hub, HubError, ServerView};

/// More client buckets than this and the idle ones are dropped.
const CLIENT_BUCKETS_KEPT: usize = 4096;

/// What a limit is on, for the refusal's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limited {
    /// The whole server.
    Server(ServerId),
    /// One tool of a server.
    Tool(ServerId, String),
    /// One client of the daemon.
    Client(String),
}

impl std::fmt::Display for Limited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Server(server) => write!(f, "calls to server '{server}'"),
            Self::Tool(server, tool) => write!(f, "calls to tool '{tool}' of server '{server}'"),
            Self::Client(client) => write!(f, "calls by client {client}"),
        }
    }
}

fn quota(limit: &RateLimit) -> Quota {
    // A limit's period over its count is never zero (at least 1 s over u32::MAX).
    Quota::with_period(limit.replenish_every())
        .unwrap_or_else(|| Quota::per_second(limit.count))
        .allow_burst(limit.burst)
}

/// A server's bucket (tool `None`) or one of its tools'.
type BucketKey = (ServerId, Option<String>);

/// A bucket, with the limit it was made for.
type Bucket = (RateLimit, Arc<DefaultDirectRateLimiter>);

/// The buckets.
#[derive(Default)]
pub(crate) struct RateLimits {
    /// Per server and per tool.
    buckets: Mutex<HashMap<BucketKey, Bucket>>,
    /// The per-client limit, with a bucket per client.
    clients: std::sync::OnceLock<(RateLimit, DefaultKeyedRateLimiter<String>)>,
}

impl RateLimits {
    fn bucket(
        &self,
        server: &ServerId,
        tool: Option<&str>,
        limit: RateLimit,
    ) -> Arc<DefaultDirectRateLimiter> {
        let mut buckets = lock(&self.buckets);
        let key = (server.clone(), tool.map(str::to_owned));
        match buckets.get(&key) {
            Some((made_for, bucket)) if *made_for == limit => bucket.clone(),
            _ => {
                let bucket = Arc::new(RateLimiter::direct(quota(&limit)));
                buckets.insert(key, (limit, bucket.clone()));
                bucket
            }
        }
    }
}

/// Why a bucket refused, for how long: the time until it has a token.
type NotUntil = governor::NotUntil<<DefaultClock as Clock>::Instant>;

/// The refusal of a call by the limit on `what`.
fn refused(what: Limited, limit: RateLimit, not_until: NotUntil) -> HubError {
    HubError::RateLimited {
        what,
        limit,
        retry_after: not_until.wait_time_from(DefaultClock::default().now()),
    }
}

impl Hub {
    /// Limits every client of the daemon to `limit` (each client with its own bucket). Set once,
    /// at startup; a second call changes nothing.
    pub fn limit_each_client(&self, limit: RateLimit) {
        let _ = self
            .rate_limits
            .clients
            .set((limit, RateLimiter::keyed(quota(&limit))));
    }

    /// Takes a token for a call of `tool` on `server` from every bucket that applies, or says
    /// which limit refuses it and for how long. `client` names who makes the call (`None` when
    /// no client limit applies to it); it is asked only when clients are limited.
    pub fn admit_call(
        &self,
        server: &ServerId,
        tool: &str,
        client: impl FnOnce() -> Option<String>,
    ) -> Result<(), HubError> {
        let view = self.server_view(server).ok();
        self.take_tokens(server, view.as_ref(), tool, client)
    }

    /// [`Hub::admit_call`] for a call to a server the caller holds a view of.
    pub fn admit_call_to(
        &self,
        server: &ServerView,
        tool: &str,
        client: impl FnOnce() -> Option<String>,
    ) -> Result<(), HubError> {
        self.take_tokens(server.id(), Some(server), tool, client)
    }

    /// Takes the tokens of a call of `tool` on `server` (seen as `view`; `None` when the hub
    /// does not run it, when only the client's limit applies).
    fn take_tokens(
        &self,
        server: &ServerId,
        view: Option<&ServerView>,
        tool: &str,
        client: impl FnOnce() -> Option<String>,
    ) -> Result<(), HubError> {
        if let Some((limit, buckets)) = self.rate_limits.clients.get()
            && let Some(client) = client()
        {
            if let Err(not_until) = buckets.check_key(&client) {
                return Err(refused(Limited::Client(client), *limit, not_until));
            }
            if buckets.len() > CLIENT_BUCKETS_KEPT {
                buckets.retain_recent();
            }
        }
        let Some(view) = view else {
            return Ok(());
        };
        let policies = &view.definition().policies;
        if let Some(limit) = policies.server_rate_limit
            && let Err(not_until) = self.rate_limits.bucket(server, None, limit).check()
        {
            return Err(refused(Limited::Server(server.clone()), limit, not_until));
        }
        if let Some(limit) = policies.rate_limits.get(tool).copied()
            && let Err(not_until) = self.rate_limits.bucket(server, Some(tool), limit).check()
        {
            let what = Limited::Tool(server.clone(), tool.to_owned());
            return Err(refused(what, limit, not_until));
        }
        Ok(())
    }
}
