//! Taking connections: how many one client address may hold, and how long a connection may take
//! to say what it wants.
//!
//! A daemon that waits forever is held by anyone who opens connections and sends nothing, or one
//! header byte at a time, or a body one byte at a time: each costs a socket and a task, and a few
//! hundred of them crowd out everyone else. So on every connection:
//!
//! - **headers** must arrive within [`HEADER_TIMEOUT`] of the connection opening or of the
//!   previous answer (hyper's header read timeout, which also closes a kept-alive connection
//!   that sends no next request);
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
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use switchboard_core::sync::lock;

use axum::Router;
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
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: Limits,
    threads: &crate::connection_threads::ConnectionThreads,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
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
        let service =
            app.clone()
                .map_request(move |mut request: http::Request<hyper::body::Incoming>| {
                    request
                        .extensions_mut()
                        .insert(crate::mcp::conversation::ClientAddress(peer.ip()));
                    request.map(|body| {
                        // A request without a body (a GET, a WebSocket upgrade) has nothing to wait for.
                        if http_body::Body::is_end_stream(&body) {
                            Body::new(body)
                        } else {
                            Body::new(DeadlineBody::new(Body::new(body), body_limit))
                        }
                    })
                });
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.headers);
        builder.http2().timer(TokioTimer::new());
        let headers = limits.headers;
        let watcher = graceful.watcher();
        threads.spawn(tcp, move |tcp| async move {
            // hyper's header timeout starts once it knows the HTTP version, which takes the
            // first bytes: a connection that sends none is closed here.
            let mut first = [0u8; 1];
            if !matches!(
                tokio::time::timeout(headers, tcp.peek(&mut first)).await,
                Ok(Ok(1..))
            ) {
                return;
            }
            let connection = builder
                .serve_connection_with_upgrades(
                    TokioIo::new(tcp),
                    TowerToHyperService::new(service),
                )
                .into_owned();
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%error, "a connection ended with an error");
            }
            drop(counted);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
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
        let app = Router::new().route(
            "/",
            axum::routing::post(|body: String| async move { body }).get(|| async { "ok" }),
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
