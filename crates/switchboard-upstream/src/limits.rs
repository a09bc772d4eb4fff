//! Bounds on the requests in flight to one server.
//!
//! A slow or stuck server must not collect an unbounded pile of waiting requests (each holding a
//! downstream client, memory and a task). [`CallLimiter`] lets a fixed number of requests run at
//! once and a fixed number wait for a slot; a request beyond that is refused at once with
//! [`UpstreamError::Busy`], and one that waits longer than its own timeout gets
//! [`UpstreamError::StayedBusy`]. Nothing has been sent to the server in either case.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::UpstreamError;

/// The request slots of one session; clones share them.
#[derive(Clone, Debug)]
pub(crate) struct CallLimiter {
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    max_running: usize,
    max_waiting: usize,
}

/// Counts a request as waiting until dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl CallLimiter {
    /// `max_running` requests at once (at least one), `max_waiting` more in line.
    pub(crate) fn new(max_running: usize, max_waiting: usize) -> Self {
        let max_running = max_running.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max_running)),
            waiting: Arc::default(),
            max_running,
            max_waiting,
        }
    }

    /// How many requests hold a slot now.
    pub(crate) fn running(&self) -> usize {
        self.max_running
            .saturating_sub(self.slots.available_permits())
    }

    /// A slot for one request, waiting at most `wait` for one to free up. The slot is held
    /// until the permit is dropped.
    pub(crate) async fn acquire(
        &self,
        wait: Duration,
    ) -> Result<OwnedSemaphorePermit, UpstreamError> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let ahead = self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        if ahead >= self.max_waiting {
            return Err(UpstreamError::Busy {
                running: self.max_running,
                waiting: ahead,
            });
        }
        match tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(UpstreamError::Closed),
            Err(_) => Err(UpstreamError::StayedBusy(wait)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_beyond_the_running_and_waiting_bounds_are_refused_at_once() {
        let limiter = CallLimiter::new(2, 1);
        let first = limiter.acquire(Duration::from_secs(5)).await.unwrap();
        let _second = limiter.acquire(Duration::from_secs(5)).await.unwrap();

        // The third waits in line; the fourth finds the line full.
        let waiter = {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.acquire(Duration::from_secs(5)).await.map(|_| ()) })
        };
        while limiter.waiting.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let refused = limiter.acquire(Duration::from_secs(5)).await.unwrap_err();
        assert!(
            matches!(
                refused,
                UpstreamError::Busy {
                    running: 2,
                    waiting: 1
                }
            ),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("busy"), "{refused}");

        // A slot freed goes to the one in line.
        drop(first);
        waiter
            .await
            .unwrap()
            .expect("the waiting request gets the freed slot");
        assert_eq!(limiter.waiting.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_request_that_waits_longer_than_its_timeout_gives_up() {
        let limiter = CallLimiter::new(1, 4);
        let _held = limiter.acquire(Duration::from_secs(5)).await.unwrap();
        let waited = limiter
            .acquire(Duration::from_millis(20))
            .await
            .unwrap_err();
        assert!(matches!(waited, UpstreamError::StayedBusy(_)), "{waited:?}");
        assert_eq!(limiter.waiting.load(Ordering::SeqCst), 0);
    }
}
