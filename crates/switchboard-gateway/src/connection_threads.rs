//! Threads the front door runs its connections on: each has a single-threaded runtime of its
//! own, so a request, the relay of it upstream and the answer run on one thread.
//!
//! On tokio's multi-threaded runtime a connection's task, the upstream connection's task and the
//! I/O driver's wake-ups land on whichever worker is free: a relayed call at one client switched
//! threads 5.4 times (`perf stat -e context-switches` on the daemon over 10,000 calls), against
//! 2.4 on a single-threaded runtime, and cost half as much CPU again. A thread that owns its
//! connections keeps those hand-offs away, and one such thread per core still uses every core.
//! pingora's "no steal" runtimes and linkerd2-proxy's single-core runtime make the same choice.
//!
//! Each accepted connection goes to the next thread in turn. Its socket is moved into that
//! thread's runtime (registered with its I/O driver), and the tasks its requests start (an
//! upstream connection, taken again only by requests sent from that thread, a session's
//! workers, a stream) stay there. The
//! hub's own work started at start-up (connections to servers, catalogs, the store) stays on
//! the main runtime. Work that would hold a thread (a catalog rebuild, an encoder) already goes
//! to a blocking pool, so one slow request does not hold the other connections of its thread.
//!
//! A request can start work that outlives it on its thread: a server added through the admin
//! API, a user's workspace and its servers. So the threads run until every holder of them is
//! gone: the daemon holds them until its hub has shut down (sessions closed, stdio children
//! stopped gracefully), not only until the gateway stops serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::oneshot;

/// The connection threads. Clones share them; they stop when the last clone is dropped, and
/// the tasks left on them are dropped with them.
#[derive(Clone)]
pub struct ConnectionThreads(Arc<Threads>);

struct Threads {
    /// Each thread's runtime, to spawn connections on.
    handles: Vec<tokio::runtime::Handle>,
    /// Told when the threads may stop; each thread ends when its sender is dropped.
    _stops: Vec<oneshot::Sender<()>>,
    /// Which thread the next connection goes to.
    next: AtomicUsize,
}

impl std::fmt::Debug for ConnectionThreads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionThreads")
            .field("threads", &self.0.handles.len())
            .finish()
    }
}

impl ConnectionThreads {
    /// None: connections are served on the runtime that accepts them.
    pub fn none() -> Self {
        Self(Arc::new(Threads {
            handles: Vec::new(),
            _stops: Vec::new(),
            next: AtomicUsize::new(0),
        }))
    }

    /// Starts `count` threads, each running a single-threaded runtime until the last clone of
    /// the result is dropped.
    pub fn start(count: usize) -> std::io::Result<Self> {
        let mut handles = Vec::with_capacity(count);
        let mut stops = Vec::with_capacity(count);
        for index in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(runtime.handle().clone());
            let (stop, stopped) = oneshot::channel::<()>();
            stops.push(stop);
            std::thread::Builder::new()
                .name(format!("switchboard-connections-{index}"))
                .spawn(move || {
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                    // Connections still open at shutdown are cut off with their runtime.
                    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
                })?;
        }
        Ok(Self(Arc::new(Threads {
            handles,
            _stops: stops,
            next: AtomicUsize::new(0),
        })))
    }

    /// Serves `tcp` with `serve` on the next thread, or on the current runtime if there are no
    /// threads (a single-threaded daemon already keeps everything on one thread).
    pub(crate) fn spawn<F, R>(&self, tcp: tokio::net::TcpStream, serve: F)
    where
        F: FnOnce(tokio::net::TcpStream) -> R + Send + 'static,
        R: Future<Output = ()> + Send + 'static,
    {
        let threads = &self.0;
        if threads.handles.is_empty() {
            tokio::spawn(serve(tcp));
            return;
        }
        // The socket is registered with the accepting runtime's I/O driver: moved to the
        // thread's own, its readiness wakes that thread rather than a worker of this runtime.
        let tcp = match tcp.into_std() {
            Ok(tcp) => tcp,
            Err(error) => {
                tracing::debug!(%error, "cannot hand a connection to its thread");
                return;
            }
        };
        let index = threads.next.fetch_add(1, Ordering::Relaxed) % threads.handles.len();
        threads.handles[index].spawn(async move {
            match tokio::net::TcpStream::from_std(tcp) {
                Ok(tcp) => serve(tcp).await,
                Err(error) => tracing::debug!(%error, "cannot take a connection on its thread"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Every connection is served, each on a connection thread, spread over all of them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_are_served_on_the_connection_threads_in_turn() {
        let threads = ConnectionThreads::start(2).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let clients = tokio::spawn(async move {
            let mut names = Vec::new();
            for _ in 0..4 {
                let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                let mut name = String::new();
                stream.read_to_string(&mut name).await.unwrap();
                names.push(name);
            }
            names
        });
        for _ in 0..4 {
            let (tcp, _) = listener.accept().await.unwrap();
            threads.spawn(tcp, |mut tcp| async move {
                let name = std::thread::current().name().unwrap_or("").to_owned();
                tcp.write_all(name.as_bytes()).await.unwrap();
            });
        }
        let names = clients.await.unwrap();
        assert_eq!(
            names,
            [
                "switchboard-connections-0",
                "switchboard-connections-1",
                "switchboard-connections-0",
                "switchboard-connections-1"
            ]
        );
    }

    /// Work a connection started goes on after the connection, until the last holder of the
    /// threads lets go of them; then it is stopped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_started_on_a_thread_runs_until_the_last_holder_lets_go() {
        let threads = ConnectionThreads::start(1).unwrap();
        let held = threads.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let (ticks, mut ticked) = tokio::sync::mpsc::unbounded_channel();
        threads.spawn(tcp, move |tcp| async move {
            drop(tcp);
            // Outlives its connection, as a server added through the admin API does.
            tokio::spawn(async move {
                loop {
                    if ticks.send(()).is_err() {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            });
        });
        drop(threads);
        for _ in 0..3 {
            ticked
                .recv()
                .await
                .expect("the work goes on while one holder remains");
        }
        drop(held);
        // The thread's runtime drops the task, and with it the sender: the channel ends.
        while ticked.recv().await.is_some() {}
    }
}
