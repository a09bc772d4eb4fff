//! Rate limits of tool calls: per server, per tool (both from the server's policies), and per
//! client of the daemon (one limit for every client, each with its own bucket).
//!
//! Each limit is a token bucket (the `governor` crate's GCRA). A call takes a token from each
//! bucket that applies; the first empty one refuses it with the time until it has one again.
//! A bucket lives as long as its limit is unchanged, across restarts of its server, so changing
//! a server's other settings does not reset it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use switchboard_core::{RateLimit, ServerId};

use crate::{Hub, HubError};

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
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
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

/// A refusal: how long until the bucket has a token.
fn refused(what: Limited, limit: RateLimit, wait: Duration) -> HubError {
    HubError::RateLimited {
        what,
        limit,
        retry_after: wait,
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

    /// Takes a token for a call of `tool` on `server` by `client` (when the front door knows
    /// who that is) from every bucket that applies, or says which limit refuses it and for how
    /// long.
    pub fn admit_call(
        &self,
        server: &ServerId,
        tool: &str,
        client: Option<&str>,
    ) -> Result<(), HubError> {
        let now = DefaultClock::default().now();
        if let (Some((limit, buckets)), Some(client)) = (self.rate_limits.clients.get(), client) {
            let key = client.to_owned();
            if let Err(not_until) = buckets.check_key(&key) {
                return Err(refused(
                    Limited::Client(key),
                    *limit,
                    not_until.wait_time_from(now),
                ));
            }
            if buckets.len() > CLIENT_BUCKETS_KEPT {
                buckets.retain_recent();
            }
        }
        let Ok(slot) = self.slot(server) else {
            return Ok(());
        };
        let policies = &slot.definition.policies;
        if let Some(limit) = policies.server_rate_limit
            && let Err(not_until) = self.rate_limits.bucket(server, None, limit).check()
        {
            return Err(refused(
                Limited::Server(server.clone()),
                limit,
                not_until.wait_time_from(now),
            ));
        }
        if let Some(limit) = policies.rate_limits.get(tool).copied()
            && let Err(not_until) = self.rate_limits.bucket(server, Some(tool), limit).check()
        {
            return Err(refused(
                Limited::Tool(server.clone(), tool.to_owned()),
                limit,
                not_until.wait_time_from(now),
            ));
        }
        Ok(())
    }
}
