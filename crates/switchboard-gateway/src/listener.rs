//! Taking connections: how many one client address may hold, and how long a connection may take
//! to say what it wants.
//!
//! A daemon that waits forever is held by anyone who opens connections and sends nothing, or one
//! header byte at a time, or a body one byte at a time: each costs a socket and a task, and a few
//! hundred of them crowd out everyone else. So on every connection:
//!
//! - **headers** must arrive within [`HEADER_TIMEOUT`] of the connection opening or of the
//!   previous answer, which also closes a kept-alive connection that sends no next request
//!   ([`Idle`]: one timer a connection, moved on only when it fires; hyper's own header read
//!   timeout sets a new timer for every request, and tokio wakes the connection's thread through
//!   its eventfd for each, a system call and a turn of the thread's loop a call);
//! - **a request's body** must arrive within [`BODY_TIMEOUT`] of the request ([`DeadlineBody`]);
//!   the request then fails, and its handler sees a body error;
//! - **one client address** holds at most [`Limits::per_client`] connections at once; more are
//!   closed as they come.
//!
//! Answers that stream (SSE, WebSocket) are not limited: once a request is read, the connection
//! is the answer's for as long as it runs. axum's own `serve` sets none of these, so this module
//! runs hyper's connection builder itself (hyper-util's `auto` builder, HTTP/1 and HTTP/2, with
//! upgrades for WebSockets, and its graceful shutdown), each connection on one of the
//! [`crate::connection_threads`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use switchboard_core::sync::lock;

use axum::body::Body;
use bytes::Bytes;
use http_body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt;

/// How long a client has to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to send a request's body, from the start of the request.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections one client address may hold at once, unless configured.
pub const DEFAULT_PER_CLIENT: usize = 256;

/// Limits on connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections one client address may hold at once.
    pub per_client: usize,
    /// How long headers may take.
    pub headers: Duration,
    /// How long a body may take.
    pub body: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_client: DEFAULT_PER_CLIENT,
            headers: HEADER_TIMEOUT,
            body: BODY_TIMEOUT,
        }
    }
}

/// Open connections by client address.
#[derive(Default)]
struct Counts(Mutex<HashMap<IpAddr, usize>>);

/// One counted connection; uncounted when dropped.
struct Counted {
    counts: Arc<Counts>,
    address: IpAddr,
}

impl Counts {
    /// Counts a connection from `address`, unless it holds `limit` already.
    fn admit(self: &Arc<Self>, address: IpAddr, limit: usize) -> Option<Counted> {
        let mut counts = lock(&self.0);
        let open = counts.entry(address).or_default();
        if *open >= limit {
            return None;
        }
        *open += 1;
        Some(Counted {
            counts: self.clone(),
            address,
        })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut counts = lock(&self.counts.0);
        if let Some(open) = counts.get_mut(&self.address) {
            *open -= 1;
            if *open == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes; then takes no more
/// connections and waits for the open ones to finish (the caller's `shutdown` ends the
/// long-lived streams first).
pub(crate) async fn serve<App>(
    listener: tokio::net::TcpListener,
    app: App,
    limits: Limits,
    threads: &crate::connection_threads::ConnectionThreads,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    App: tower::Service<
            axum::extract::Request,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static,
{
    let counts = Arc::new(Counts::default());
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Too many open files and the like pass; keep taking connections.
                    tracing::debug!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(counted) = counts.admit(peer.ip(), limits.per_client) else {
            tracing::debug!(client = %peer.ip(), "too many connections from one address: closing one");
            continue;
        };
        // Responses go out in several writes (SSE): without TCP_NODELAY, Nagle's algorithm and
        // the client's delayed ACK hold each one back by up to 40 ms.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY on a connection");
        }
        let body_limit = limits.body;
        let idle = Arc::new(Idle::new());
        let answering = idle.clone();
        let address = crate::mcp::conversation::ClientAddress::of(peer.ip());
        let service = app
            .clone()
            .map_request(move |mut request: http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(address.clone());
                request.map(|body| {
                    // A request without a body (a GET, a WebSocket upgrade) has nothing to wait for.
                    if http_body::Body::is_end_stream(&body) {
                        Body::new(body)
                    } else {
                        Body::new(DeadlineBody::new(Body::new(body), body_limit))
                    }
                })
            })
            // The request is counted from its call until its answer ends: the guard goes with
            // the answer's body, or is dropped with the future when there is no answer (an
            // HTTP/2 stream the client reset, a connection that closed).
            .map_future(move |answer| {
                let ends = AnswerEnds::begin(answering.clone());
                async move {
                    let response = answer.await?;
                    Ok::<_, std::convert::Infallible>(
                        response.map(|body| Body::new(Answer { body, _ends: ends })),
                    )
                }
            });
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        // Headers are timed by `Idle`, not by hyper (see the module's comment).
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(None);
        builder.http2().timer(TokioTimer::new());
        let headers = limits.headers;
        let watcher = graceful.watcher();
        threads.spawn(tcp, move |tcp| async move {
            let connection = builder
                .serve_connection_with_upgrades(
                    TokioIo::new(tcp),
                    TowerToHyperService::new(service),
                )
                .into_owned();
            let mut connection = std::pin::pin!(watcher.watch(connection));
            let mut deadline = std::pin::pin!(tokio::time::sleep(headers));
            loop {
                tokio::select! {
                    ended = &mut connection => {
                        if let Err(error) = ended {
                            tracing::debug!(%error, "a connection ended with an error");
                        }
                        break;
                    }
                    () = &mut deadline => match idle.idle_for() {
                        // Idle too long: dropping the connection closes it.
                        Some(idle) if idle >= headers => break,
                        Some(idle) => deadline.as_mut().reset(tokio::time::Instant::now() + (headers - idle)),
                        None => deadline.as_mut().reset(tokio::time::Instant::now() + headers),
                    },
                }
            }
            drop(counted);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// How long a connection has had nothing to do: no request being read after its headers or
/// answered. It starts idle; a request's headers read make it busy, and the end of the last
/// answer (its body sent or dropped, or its request dropped unanswered: an HTTP/2 stream the
/// client reset) idle again. The connection's task checks it when its one
/// timer fires, and moves the timer on (at most once per [`HEADER_TIMEOUT`] for a busy
/// connection): nothing is armed or reset per request.
struct Idle {
    opened: std::time::Instant,
    /// Requests whose answers have not ended.
    answering: AtomicUsize,
    /// When the last answer ended, in ms after `opened`.
    since_ms: AtomicU64,
}

impl Idle {
    fn new() -> Self {
        Self {
            opened: std::time::Instant::now(),
            answering: AtomicUsize::new(0),
            since_ms: AtomicU64::new(0),
        }
    }

    fn answer_ended(&self) {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.since_ms.store(now, Ordering::Relaxed);
        self.answering.fetch_sub(1, Ordering::Release);
    }

    /// How long the connection has been idle; `None` while it answers a request.
    fn idle_for(&self) -> Option<Duration> {
        if self.answering.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.since_ms.load(Ordering::Relaxed));
        Some(self.opened.elapsed().saturating_sub(since))
    }
}

/// Counts a request its connection is answering, from its call until dropped: with the
/// answer's body once sent, or with the request's future when it never answers.
struct AnswerEnds(Arc<Idle>);

impl AnswerEnds {
    fn begin(idle: Arc<Idle>) -> Self {
        idle.answering.fetch_add(1, Ordering::Relaxed);
        Self(idle)
    }
}

impl Drop for AnswerEnds {
    fn drop(&mut self) {
        self.0.answer_ended();
    }
}

/// An answer's body, carrying what marks the answer ended.
struct Answer {
    body: Body,
    _ends: AnswerEnds,
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A request body that must arrive whole before its deadline. The timer is set only once the
/// body keeps its reader waiting: a small body that came with its headers (every MCP request,
/// nearly) is read without one.
pub(crate) struct DeadlineBody {
    inner: Body,
    due: tokio::time::Instant,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    limit: Duration,
}

impl DeadlineBody {
    /// `inner`, due within `limit` from now.
    pub(crate) fn new(inner: Body, limit: Duration) -> Self {
        Self {
            inner,
            due: tokio::time::Instant::now() + limit,
            deadline: None,
            limit,
        }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let due = this.due;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(format!(
                "the request body did not arrive within {} s",
                this.limit.as_secs()
            ))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Serves a router echoing request bodies on a loopback port with `limits`, on two
    /// connection threads as the daemon does.
    async fn start(limits: Limits) -> std::net::SocketAddr {
        let app = axum::Router::new()
            .route(
                "/",
                axum::routing::post(|body: String| async move { body }).get(|| async { "ok" }),
            )
            // An answer that takes three header timeouts to come, and one whose body does.
            .route(
                "/slow",
                axum::routing::get(|| async {
                    tokio::time::sleep(Duration::from_millis(900)).await;
                    "slow"
                }),
            )
            .route(
                "/stream",
                axum::routing::get(|| async {
                    let parts = futures::stream::unfold(0, |sent| async move {
                        (sent < 3).then_some(())?;
                        if sent > 0 {
                            tokio::time::sleep(Duration::from_millis(450)).await;
                        }
                        Some((Ok::<_, std::io::Error>(format!("part{sent};")), sent + 1))
                    });
                    Body::from_stream(parts)
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let threads = crate::connection_threads::ConnectionThreads::start(2).unwrap();
        tokio::spawn(async move {
            serve(listener, app, limits, &threads, std::future::pending()).await
        });
        addr
    }

    /// Reads until the peer closes or `within` passes; whether it closed.
    async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
        let mut buffer = [0; 1024];
        tokio::time::timeout(within, async {
            loop {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await
        .is_ok()
    }

    fn quick() -> Limits {
        Limits {
            per_client: 3,
            headers: Duration::from_millis(300),
            body: Duration::from_millis(300),
        }
    }

    #[tokio::test]
    async fn idle_slow_header_and_slow_body_connections_are_closed() {
        let addr = start(quick()).await;
        let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut slow_header = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow_header
            .write_all(b"GET / HTTP/1.1\r\nHo")
            .await
            .unwrap();
        let mut slow_body = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow_body
            .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab")
            .await
            .unwrap();
        assert!(closed_within(&mut idle, Duration::from_secs(5)).await);
        assert!(closed_within(&mut slow_header, Duration::from_secs(5)).await);
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), slow_body.read_to_end(&mut answer))
            .await
            .expect("the slow body's request ends")
            .ok();
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 400") || answer.is_empty(),
            "{answer}"
        );

        // A request sent at once is answered as usual.
        let mut prompt = tokio::net::TcpStream::connect(addr).await.unwrap();
        prompt
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        prompt.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    /// Sends a kept-alive GET of `path` on `stream` and reads its answer whole (chunked).
    async fn get(stream: &mut tokio::net::TcpStream, path: &str) -> String {
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = Vec::new();
        let mut buffer = [0; 1024];
        while !(answer.ends_with(b"0\r\n\r\n")
            || (answer.starts_with(b"HTTP/1.1 200") && answer.ends_with(b"ok"))
            || answer.ends_with(b"slow"))
        {
            let read = stream.read(&mut buffer).await.unwrap();
            assert!(read > 0, "closed in the middle of an answer: {answer:?}");
            answer.extend_from_slice(&buffer[..read]);
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn a_kept_alive_connection_lives_while_it_asks_or_is_answered_and_closes_once_idle() {
        let addr = start(quick()).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        // Requests each within the header timeout of the last answer keep it open for longer
        // than the timeout (the deadline moves on), and answers that take longer than it, to
        // come or to send their body, are never cut.
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            assert!(get(&mut stream, "/").await.ends_with("ok"));
        }
        assert!(get(&mut stream, "/slow").await.ends_with("slow"));
        let streamed = get(&mut stream, "/stream").await;
        assert!(streamed.contains("part2;"), "{streamed}");
        // Then, asked nothing more, it is closed.
        assert!(closed_within(&mut stream, Duration::from_secs(5)).await);
    }

    /// An HTTP/2 request the client gives up on (its stream reset before the answer) leaves
    /// the connection idle, so it is closed once idle like any other.
    #[tokio::test]
    async fn an_http2_connection_whose_only_request_was_reset_is_closed_once_idle() {
        let addr = start(quick()).await;
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .unwrap();
        let connection = tokio::spawn(connection);
        let request = http::Request::get(format!("http://{addr}/slow"))
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        // Dropping the response future before the answer resets the stream.
        let gave_up =
            tokio::time::timeout(Duration::from_millis(100), sender.send_request(request)).await;
        assert!(gave_up.is_err(), "the slow answer came early");
        // Asked nothing more, the server closes the connection: the client's connection task
        // ends, although the client still holds its sender (with which it would keep it open).
        tokio::time::timeout(Duration::from_secs(5), connection)
            .await
            .expect("the idle HTTP/2 connection is closed")
            .unwrap()
            .ok();
        drop(sender);
    }

    #[tokio::test]
    async fn one_address_holds_at_most_its_share_of_connections() {
        let addr = start(Limits {
            headers: Duration::from_secs(30),
            ..quick()
        })
        .await;
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut fourth = tokio::net::TcpStream::connect(addr).await.unwrap();
        assert!(
            closed_within(&mut fourth, Duration::from_secs(5)).await,
            "a fourth connection is closed"
        );
        drop(held.pop());
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut again = tokio::net::TcpStream::connect(addr).await.unwrap();
        again
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        again.read_to_string(&mut answer).await.unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "a closed one makes room: {answer}"
        );
    }
}
