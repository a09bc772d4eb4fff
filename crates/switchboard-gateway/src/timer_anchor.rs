//! Short timers that a request arms on a connection thread without waking that thread's I/O
//! driver.
//!
//! tokio's time driver sleeps until its earliest timer. A timer armed earlier than that (a
//! session call's 20 ms before it is primed, on a thread whose next timer is a connection's
//! header timeout, seconds away) makes it unpark its thread's driver, even when that thread is
//! the one arming it and is wide awake: a `write` to the driver's eventfd and one more
//! `epoll_wait` that returns at once, on every call (`time::Handle::reregister`; counted with
//! `perf stat -e 'syscalls:sys_enter_*'` in `docs/benchmarks.md`). So a thread that arms such
//! timers keeps an anchor while it does: timers of its own, one firing every [`TICK`], never
//! later than any timer [`sleep`] arms, so a new one is never the earliest. The anchor stops
//! after [`LINGER`] without a timer armed, so an idle daemon is not woken by it.
//!
//! tokio has no setting for this (its timer wheel is its own); the anchor is ours.

use std::cell::Cell;
use std::time::Duration;

/// How often an anchor fires: at most the shortest timer [`sleep`] arms, less the driver's 1 ms
/// resolution.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// How long an anchor keeps firing after the last timer [`sleep`] armed on its thread.
pub(crate) const LINGER: Duration = Duration::from_secs(1);

thread_local! {
    /// Timers [`sleep`] has armed on this thread, counted so that its anchor sees whether any
    /// were armed since it last fired.
    static ARMED: Cell<u64> = const { Cell::new(0) };
    /// Whether this thread's anchor is running.
    static ANCHORED: Cell<bool> = const { Cell::new(false) };
}

/// Sleeps for `duration` (at least [`TICK`] plus a millisecond), anchored as above when the
/// runtime is a single-threaded one (a connection thread's; on a multi-threaded runtime the
/// anchor could run on another worker, so it sleeps as `tokio::time::sleep` does).
pub(crate) async fn sleep(duration: Duration) {
    let single_threaded = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
        runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
    });
    if single_threaded {
        ARMED.set(ARMED.get().wrapping_add(1));
        if !ANCHORED.replace(true) {
            tokio::spawn(anchor());
        }
    }
    tokio::time::sleep(duration).await
}

/// Fires every [`TICK`] until no timer has been armed on its thread for [`LINGER`].
///
/// Two timers, [`TICK`] apart, each armed again two ticks on when it fires: the other is then
/// the earliest, so arming it again does not wake the driver either.
async fn anchor() {
    // Cleared however the anchor ends, its runtime dropped with it too.
    struct Anchored;
    impl Drop for Anchored {
        fn drop(&mut self) {
            let _ = ANCHORED.try_with(|anchored| anchored.set(false));
        }
    }
    let _anchored = Anchored;
    let mut next = std::pin::pin!(tokio::time::sleep(TICK));
    let mut after = std::pin::pin!(tokio::time::sleep(TICK * 2));
    let quiet_ticks = LINGER.as_millis() / TICK.as_millis();
    let (mut seen, mut quiet) = (ARMED.get(), 0);
    while quiet < quiet_ticks {
        next.as_mut().await;
        let again = next.deadline() + TICK * 2;
        next.as_mut().reset(again);
        std::mem::swap(&mut next, &mut after);
        let armed = ARMED.get();
        quiet = if armed == seen { quiet + 1 } else { 0 };
        seen = armed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive_tasks() -> usize {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_anchor_runs_while_timers_are_armed_and_stops_a_linger_after_the_last() {
        assert_eq!(alive_tasks(), 0);
        sleep(Duration::from_millis(20)).await;
        sleep(Duration::from_millis(20)).await;
        assert_eq!(alive_tasks(), 1, "one anchor a thread, however many timers");
        tokio::time::sleep(LINGER / 2).await;
        sleep(Duration::from_millis(20)).await;
        tokio::time::sleep(LINGER / 2).await;
        assert_eq!(
            alive_tasks(),
            1,
            "a timer armed within the linger keeps the anchor"
        );
        tokio::time::sleep(LINGER).await;
        assert_eq!(alive_tasks(), 0, "stopped a linger after the last timer");
        sleep(Duration::from_millis(20)).await;
        assert_eq!(alive_tasks(), 1, "started again by the next timer");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_multi_threaded_runtime_sleeps_without_an_anchor() {
        sleep(Duration::from_millis(11)).await;
        assert_eq!(alive_tasks(), 0);
    }

    /// The write system calls this thread has made (`syscw` of `/proc/thread-self/io`).
    fn writes_of_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io")
            .expect("this test reads /proc/thread-self/io (Linux)");
        io.lines()
            .find_map(|line| line.strip_prefix("syscw:"))
            .and_then(|count| count.trim().parse().ok())
            .expect("/proc/thread-self/io has syscw")
    }

    /// The writes this thread makes while, 50 times, it is woken from its driver's sleep by
    /// another thread and arms a 20 ms timer with `arm` (and drops it).
    async fn writes_arming_timers_when_woken<F: Future<Output = ()>>(arm: impl Fn() -> F) -> u64 {
        let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (ready, waiting) = std::sync::mpsc::channel::<()>();
        let waker = std::thread::spawn(move || {
            while waiting.recv().is_ok() {
                // Long enough for the runtime's thread to go to sleep in its driver.
                std::thread::sleep(Duration::from_millis(2));
                if wake.send(()).is_err() {
                    break;
                }
            }
        });
        let before = writes_of_this_thread();
        for _ in 0..50 {
            ready.send(()).unwrap();
            woken.recv().await.unwrap();
            let timer = std::pin::pin!(arm());
            // Polled once, so armed; then dropped, as a call answered in time drops it.
            let _ = futures::poll!(timer);
        }
        let writes = writes_of_this_thread() - before;
        drop(ready);
        waker.join().unwrap();
        writes
    }

    #[tokio::test(flavor = "current_thread")]
    async fn arming_a_short_timer_when_woken_does_not_wake_the_driver_again() {
        // Without the anchor, each timer makes the thread write to its driver's eventfd; with
        // it, only the anchor's start does (the call's timer and its own two).
        let plain =
            writes_arming_timers_when_woken(|| tokio::time::sleep(Duration::from_millis(20))).await;
        let anchored = writes_arming_timers_when_woken(|| sleep(Duration::from_millis(20))).await;
        assert!(
            plain >= 20,
            "the probe sees the driver woken: {plain} writes for 50 timers"
        );
        assert!(
            anchored <= 10,
            "{anchored} writes for 50 anchored timers ({plain} without)"
        );
    }
}
