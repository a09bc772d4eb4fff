//! How the daemon looks after its upstream connections.
//!
//! One value, [`Supervision`], holds the knobs every layer shares: the reconnect backoff and the
//! health checks (used by the hub's connection tasks), and the bounds on calls to one server
//! (used by the upstream request handle). They are daemon-wide settings with defaults that suit
//! remote MCP servers; `switchboard serve` exposes each as a flag.

use std::time::Duration;

/// Reconnect, health-check and load-bounding settings for every server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supervision {
    /// The first reconnect delay's ceiling; each failure doubles it (full jitter: the actual
    /// delay is uniformly random below the ceiling).
    pub reconnect_initial: Duration,
    /// The ceiling the doubling stops at.
    pub reconnect_max: Duration,
    /// A session must stay up this long before the backoff starts over from
    /// [`Self::reconnect_initial`], so a server that fails right after its handshake is not
    /// hammered.
    pub stable_session: Duration,
    /// How often a connected server is checked (`ping`, or `server/discover` for stateless
    /// 2026-07-28 servers); `None` turns checks off. A check that fails or goes unanswered for
    /// the server's request timeout ends the session, and the server reconnects.
    pub health_interval: Option<Duration>,
    /// How many connection attempts in a row may fail before a server rests in `error` until
    /// someone asks for it again (a check, a change of its definition, a restart); `None`
    /// (the default) retries for as long as the daemon runs.
    pub max_reconnect_attempts: Option<u32>,
    /// Whether a server whose last catalog is known connects only when a request first needs
    /// it (`serve --lazy`), its last catalog served meanwhile. A server with none connects at
    /// once, to learn it.
    pub connect_on_first_use: bool,
    /// Most requests in flight to one server at once.
    pub max_concurrent_calls: usize,
    /// Most requests waiting for one of those slots; beyond this a request is refused at once
    /// with a clear "busy" error instead of queueing without bound.
    pub max_queued_calls: usize,
}

impl Default for Supervision {
    fn default() -> Self {
        Self {
            reconnect_initial: Duration::from_secs(1),
            reconnect_max: Duration::from_secs(30),
            stable_session: Duration::from_secs(30),
            health_interval: Some(Duration::from_secs(30)),
            max_reconnect_attempts: None,
            connect_on_first_use: false,
            max_concurrent_calls: 64,
            max_queued_calls: 256,
        }
    }
}

/// Exponential backoff with full jitter: the n-th delay is uniformly random in
/// `[0, min(max, initial * 2^n)]`, so servers that failed together do not retry together.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    ceiling: Duration,
}

impl Backoff {
    /// A backoff starting at `initial` and doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        let max = max.max(initial);
        Self {
            initial,
            max,
            ceiling: initial,
        }
    }

    /// The backoff `supervision` describes.
    pub fn from_supervision(supervision: &Supervision) -> Self {
        Self::new(supervision.reconnect_initial, supervision.reconnect_max)
    }

    /// The next delay, given a uniformly random `unit` in `[0, 1]`; doubles the ceiling.
    pub fn next_delay(&mut self, unit: f64) -> Duration {
        let delay = self.ceiling.mul_f64(unit.clamp(0.0, 1.0));
        self.ceiling = self.ceiling.saturating_mul(2).min(self.max);
        delay
    }

    /// The ceiling the next delay is drawn below.
    pub fn ceiling(&self) -> Duration {
        self.ceiling
    }

    /// Starts over from the initial ceiling (after a stable session).
    pub fn reset(&mut self) {
        self.ceiling = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_doubles_to_the_cap_and_starts_over_on_reset() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let ceilings: Vec<u64> = (0..7)
            .map(|_| {
                let ceiling = backoff.ceiling().as_secs();
                backoff.next_delay(1.0);
                ceiling
            })
            .collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 16, 30, 30]);
        backoff.reset();
        assert_eq!(backoff.ceiling(), Duration::from_secs(1));
    }

    #[test]
    fn delays_are_drawn_from_zero_to_the_ceiling() {
        let mut backoff = Backoff::new(Duration::from_secs(4), Duration::from_secs(30));
        assert_eq!(backoff.next_delay(0.0), Duration::ZERO);
        assert_eq!(backoff.next_delay(0.5), Duration::from_secs(4));
        assert_eq!(
            backoff.next_delay(7.0),
            Duration::from_secs(16),
            "clamped to 1"
        );
    }

    #[test]
    fn a_cap_below_the_start_is_raised_to_it() {
        let mut backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(1));
        backoff.next_delay(1.0);
        assert_eq!(backoff.ceiling(), Duration::from_secs(5));
    }
}
