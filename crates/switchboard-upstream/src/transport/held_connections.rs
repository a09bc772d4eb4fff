//! The plain HTTP/1 connections that the users of the shared clients hold (the clients of a
//! server's origin together, a hub's guardrails webhook caller): a short list of idle
//! connections, the one put back last taken first.
//!
//! hyper-util's pooled client served these before. A request through it hashes the pool's key
//! (scheme and authority, a byte at a time with SipHash) about five times for its checkout and
//! its put-back, and spawns a task per request that puts the connection back once its answer
//! has been read: about 8,800 instructions a request more than a held connection
//! (`docs/benchmarks.md`). A server's client sends to one origin, so it needs no keyed pool.
//! No crate offers a pool without one, so this one is written here, on hyper's own
//! `client::conn::http1`.
//!
//! What the pool gave, kept here:
//! - connections are opened by the shared connector ([`crate::transport::plain_http`]): its connect
//!   timeout, keepalive, `TCP_USER_TIMEOUT`, no Nagle, and the guarded resolver of tenants'
//!   servers;
//! - a connection is taken again only by the thread that opened it (its task runs there), so a
//!   request sent from a connection thread of the front door is written and answered on that
//!   thread;
//! - an idle connection is kept at most [`IDLE_TIMEOUT`] (a sweep closes those nobody took),
//!   is taken only when its server has not closed it, and a request that a reused connection
//!   could not start is sent on a new one (a request is never sent twice);
//! - a connection goes back to the list only once its answer's body has been read to its end;
//!   one dropped before (a client gone, a stream cut) is closed.
//!
//! Every client of one origin through the same pools holds the same list ([`ListsByOrigin`]):
//! in `serve --users`, each open workspace has its own client of a server its tenant shares,
//! and a list each kept an idle connection (its buffers, its task) per workspace, where one
//! list keeps a few for all of them. A connection carries nothing of the client that opened
//! it (each request brings its own headers), and the pools it came from decide what it may
//! reach, as reqwest's pool of the same pools is shared by all of their clients already.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::thread::ThreadId;
use std::time::{Duration, Instant};
use switchboard_core::sync::lock;

use bytes::Bytes;
use http::uri::Authority;
use http::{HeaderValue, Uri};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

use crate::transport::dns::Dns;
use crate::transport::http_failure::HttpFailure;

/// How long an idle connection is kept: under the 5 s after which the servers MCP servers are
/// most often run on (Node's `http`, uvicorn) close an idle connection. A connection kept
/// longer can be taken for a request just as the server closes it, and the request then fails
/// ("connection closed before message completed"); a POST cannot safely be sent again.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// At most this many idle connections are kept (more are closed): enough for as many calls at
/// once as the relay is measured with (`switchboard-load`, 32 clients) on every thread.
const MOST_IDLE: usize = 64;

/// The idle connections of one user of the shared clients. Cloning shares them.
#[derive(Clone, Default)]
pub struct HeldConnections(Arc<Mutex<IdleList>>);

impl std::fmt::Debug for HeldConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldConnections").finish_non_exhaustive()
    }
}

/// The idle lists of one set of pools, by origin: the clients of an origin share one, for as
/// long as any of them lives.
#[derive(Default)]
pub(crate) struct ListsByOrigin(Mutex<HashMap<String, Weak<Mutex<IdleList>>>>);

impl ListsByOrigin {
    /// The idle list of `origin`'s clients (`scheme://host:port`), made if none is alive.
    pub(crate) fn of(&self, origin: &str) -> HeldConnections {
        let mut lists = lock(&self.0);
        if let Some(list) = lists.get(origin).and_then(Weak::upgrade) {
            return HeldConnections(list);
        }
        // The lists of origins nobody calls any more go as a new one comes.
        lists.retain(|_, list| list.strong_count() > 0);
        let held = HeldConnections::default();
        lists.insert(origin.to_owned(), Arc::downgrade(&held.0));
        held
    }
}

/// The idle connections, and whether a sweep of them is due.
struct IdleList {
    connections: Vec<Held>,
    /// Whether a sweep is due (one task at a time closes what stayed idle too long).
    sweeping: bool,
    /// [`IDLE_TIMEOUT`], but in tests.
    idle_timeout: Duration,
}

impl Default for IdleList {
    fn default() -> Self {
        Self {
            connections: Vec::new(),
            sweeping: false,
            idle_timeout: IDLE_TIMEOUT,
        }
    }
}

/// One connection: where it goes, the `Host` its requests name, the thread that opened it (where
/// its task runs, on a connection thread).
struct Held {
    authority: Authority,
    host: HeaderValue,
    thread: ThreadId,
    sender: SendRequest<reqwest::Body>,
    /// When it was last put back.
    since: Instant,
}

impl Held {
    /// Whether it may be taken at `now`: open, and idle less than `idle_timeout`.
    fn usable(&self, now: Instant, idle_timeout: Duration) -> bool {
        !self.sender.is_closed() && now.duration_since(self.since) < idle_timeout
    }
}

impl HeldConnections {
    /// Sends `request` (a plain `http://` URL with a host, which no proxy takes) on an idle
    /// connection to its origin that this thread opened, or on a new one.
    ///
    /// An `async` block rather than an `async fn`: an `async fn` keeps each argument twice in
    /// its future (as passed, and moved into its body), and this future is part of every relayed
    /// call's (`docs/benchmarks.md`). Opening a connection is boxed for the same reason: it is
    /// rare, and its future would make every call's larger.
    pub(crate) fn send<'a>(
        &'a self,
        connector: &'a HttpConnector<Dns>,
        mut request: http::Request<reqwest::Body>,
    ) -> impl Future<Output = Result<http::Response<ReturnsConnection>, HttpFailure>> + Send + 'a
    {
        let uri = request.uri().clone();
        let authority = uri.authority().cloned();
        *request.uri_mut() = origin_form(&uri);
        async move {
            let Some(authority) = authority else {
                return Err(HttpFailure::Request("the URL names no host".into()));
            };
            let thread = std::thread::current().id();
            loop {
                let (mut held, reused) = match self.take(&authority, thread) {
                    Some(held) => (held, true),
                    None => (
                        Box::pin(connect(connector, &uri, authority.clone(), thread)).await?,
                        false,
                    ),
                };
                if held.sender.ready().await.is_err() {
                    // Closed since it was put back: another one, or a new one.
                    if reused {
                        continue;
                    }
                    return Err(HttpFailure::Request(
                        "request failed: the server closed the connection".into(),
                    ));
                }
                request
                    .headers_mut()
                    .entry(http::header::HOST)
                    .or_insert_with(|| held.host.clone());
                match held.sender.try_send_request(request).await {
                    Ok(response) => {
                        let back = Arc::downgrade(&self.0);
                        return Ok(response.map(|body| ReturnsConnection {
                            body,
                            back: Some((back, held)),
                        }));
                    }
                    Err(mut error) => match error.take_message() {
                        // Not started: the connection closed as it was taken.
                        Some(unsent) if reused => request = unsent,
                        _ => {
                            return Err(HttpFailure::Request(describe(
                                "request failed",
                                &error.into_error(),
                            )));
                        }
                    },
                }
            }
        }
    }

    /// The idle connection to `authority` that `thread` put back last, if one is usable; those
    /// found unusable on the way are closed.
    fn take(&self, authority: &Authority, thread: ThreadId) -> Option<Held> {
        let mut idle = lock(&self.0);
        let now = Instant::now();
        while let Some(at) = idle
            .connections
            .iter()
            .rposition(|held| held.thread == thread && held.authority == *authority)
        {
            let held = idle.connections.remove(at);
            if held.usable(now, idle.idle_timeout) {
                return Some(held);
            }
        }
        None
    }

    /// Puts `held` back after its answer was read, and makes sure a sweep is due.
    fn put_back(list: &Arc<Mutex<IdleList>>, mut held: Held) {
        held.since = Instant::now();
        let start_sweep = {
            let mut idle = lock(list);
            if idle.connections.len() >= MOST_IDLE {
                return;
            }
            idle.connections.push(held);
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) if !idle.sweeping => {
                    idle.sweeping = true;
                    Some((runtime, idle.idle_timeout))
                }
                _ => None,
            }
        };
        // Spawned without the lock: a sweep dropped unstarted takes it (see `SweepDue`).
        if let Some((runtime, every)) = start_sweep {
            runtime.spawn(sweep(Arc::downgrade(list), every));
        }
    }

    /// Connections kept idle at most `idle_timeout`.
    #[cfg(test)]
    fn with_idle_timeout(idle_timeout: Duration) -> Self {
        let held = Self::default();
        lock(&held.0).idle_timeout = idle_timeout;
        held
    }

    /// Whether `other` holds the same list.
    #[cfg(test)]
    pub(crate) fn same_list(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// How many idle connections are held, and how many of them their server closed.
    #[cfg(test)]
    fn idle(&self) -> (usize, usize) {
        let idle = lock(&self.0);
        let closed = idle
            .connections
            .iter()
            .filter(|held| held.sender.is_closed());
        (idle.connections.len(), closed.count())
    }
}

/// Closes the idle connections of `list` as they pass [`IDLE_TIMEOUT`] (or their server closes
/// them), until none is left or the list is gone.
fn sweep(list: Weak<Mutex<IdleList>>, every: Duration) -> impl Future<Output = ()> {
    // Made before the future is first polled, so that even a sweep that never ran is marked.
    let mut due = SweepDue(list);
    async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(list) = due.0.upgrade() else {
                return;
            };
            let mut idle = lock(&list);
            let (now, timeout) = (Instant::now(), idle.idle_timeout);
            idle.connections.retain(|held| held.usable(now, timeout));
            if idle.connections.is_empty() {
                // Done, under the lock a put-back takes: the next one starts another sweep.
                idle.sweeping = false;
                due.done();
                return;
            }
        }
    }
}

/// Marks a list's sweep as no longer due when the sweep is dropped before its end (its runtime
/// shut down, whether or not it ever ran), so that the next put-back starts another.
struct SweepDue(Weak<Mutex<IdleList>>);

impl SweepDue {
    /// The sweep ended itself and marked the list (under its lock): nothing left to mark.
    fn done(&mut self) {
        self.0 = Weak::new();
    }
}

impl Drop for SweepDue {
    fn drop(&mut self) {
        if let Some(list) = self.0.upgrade() {
            lock(&list).sweeping = false;
        }
    }
}

/// Opens a connection to `uri` with `connector` and starts its task on this thread.
async fn connect(
    connector: &HttpConnector<Dns>,
    uri: &Uri,
    authority: Authority,
    thread: ThreadId,
) -> Result<Held, HttpFailure> {
    let mut connector = connector.clone();
    let connected = async {
        std::future::poll_fn(|cx| connector.poll_ready(cx)).await?;
        connector.call(uri.clone()).await
    };
    let io = connected
        .await
        .map_err(|error| HttpFailure::Request(describe("connection failed", &error)))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|error| HttpFailure::Request(describe("connection failed", &error)))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "an upstream connection ended with an error");
        }
    });
    Ok(Held {
        host: host_header(&authority),
        authority,
        thread,
        sender,
        since: Instant::now(),
    })
}

/// The `Host` header for `authority`: its host, and its port unless it is HTTP's default.
fn host_header(authority: &Authority) -> HeaderValue {
    let text = match authority.port_u16() {
        Some(port) if port != 80 => format!("{}:{port}", authority.host()),
        _ => authority.host().to_owned(),
    };
    // A parsed authority's host and port are valid header text.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("localhost"))
}

/// `uri` as a request line names it to the server itself: its path and query.
fn origin_form(uri: &Uri) -> Uri {
    match uri.path_and_query() {
        Some(path) if path.as_str() != "/" => Uri::from(path.clone()),
        _ => Uri::from_static("/"),
    }
}

/// What failed and why, never the URL (hyper's errors do not carry it): `what`, the error,
/// then its causes.
fn describe(what: &str, error: &(dyn std::error::Error + 'static)) -> String {
    switchboard_oauth::with_causes(&format!("{what}: {error}"), error)
}

/// An answer's body, which puts its connection back once read to its end.
pub(crate) struct ReturnsConnection {
    body: Incoming,
    back: Option<(Weak<Mutex<IdleList>>, Held)>,
}

impl ReturnsConnection {
    fn give_back(&mut self) {
        if let Some((list, held)) = self.back.take()
            && let Some(list) = list.upgrade()
        {
            HeldConnections::put_back(&list, held);
        }
    }
}

impl Body for ReturnsConnection {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.give_back(),
            Poll::Ready(Some(Ok(_))) if self.body.is_end_stream() => self.give_back(),
            // A broken answer leaves its connection broken.
            Poll::Ready(Some(Err(_))) => self.back = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for ReturnsConnection {
    /// An answer without a body (`202 Accepted`) is done without being read.
    fn drop(&mut self) {
        if self.body.is_end_stream() {
            self.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A loopback HTTP/1 server that answers every request with `{"ok":true}` and counts the
    /// connections it accepted and saw closed. With `close_after_answer` it closes each
    /// connection after its first answer (as a server whose idle timeout ran out).
    struct Server {
        address: std::net::SocketAddr,
        accepted: Arc<AtomicUsize>,
        closed: Arc<AtomicUsize>,
    }

    impl Server {
        async fn start(close_after_answer: bool) -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let accepted = Arc::new(AtomicUsize::new(0));
            let closed = Arc::new(AtomicUsize::new(0));
            let (counted, ended) = (accepted.clone(), closed.clone());
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let ended = ended.clone();
                    tokio::spawn(async move {
                        serve(socket, close_after_answer).await;
                        ended.fetch_add(1, Ordering::SeqCst);
                    });
                }
            });
            Self {
                address,
                accepted,
                closed,
            }
        }

        fn accepted(&self) -> usize {
            self.accepted.load(Ordering::SeqCst)
        }

        fn closed(&self) -> usize {
            self.closed.load(Ordering::SeqCst)
        }

        fn request(&self) -> http::Request<reqwest::Body> {
            http::Request::post(format!("http://{}/mcp", self.address))
                .header("content-type", "application/json")
                .body(reqwest::Body::from(
                    r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                ))
                .unwrap()
        }
    }

    /// Answers the requests on `socket` until the client closes it (or after the first, with
    /// `close_after_answer`).
    async fn serve(mut socket: TcpStream, close_after_answer: bool) {
        let mut received = Vec::new();
        let mut buffer = [0; 4096];
        loop {
            // One request: the head, then as many body bytes as its Content-Length says.
            let length = loop {
                if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
                    let body = head
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length: "))
                        .map_or(0, |length| length.trim().parse::<usize>().unwrap());
                    if received.len() >= end + 4 + body {
                        break end + 4 + body;
                    }
                }
                match socket.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(read) => received.extend_from_slice(&buffer[..read]),
                }
            };
            received.drain(..length);
            let body = r#"{"ok":true}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            if socket.write_all(answer.as_bytes()).await.is_err() || close_after_answer {
                return;
            }
        }
    }

    async fn read(response: http::Response<ReturnsConnection>) -> String {
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(body.to_vec()).unwrap()
    }

    /// Waits (a bounded while) until `done` holds.
    async fn until(mut done: impl FnMut() -> bool) {
        for _ in 0..200 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not within 2 s");
    }

    fn connector() -> HttpConnector<Dns> {
        HttpConnector::new_with_resolver(Dns::System(
            hyper_util::client::legacy::connect::dns::GaiResolver::new(),
        ))
    }

    #[tokio::test]
    async fn the_clients_of_one_origin_share_its_idle_connections_while_any_of_them_lives() {
        let server = Server::start(false).await;
        let lists = ListsByOrigin::default();
        let origin = format!("http://{}", server.address);
        let (first, second) = (lists.of(&origin), lists.of(&origin));
        read(first.send(&connector(), server.request()).await.unwrap()).await;
        read(second.send(&connector(), server.request()).await.unwrap()).await;
        assert_eq!(
            server.accepted(),
            1,
            "the second client sent on the connection the first put back"
        );
        // Another origin has a list of its own.
        let elsewhere = lists.of(&format!("http://localhost:{}", server.address.port()));
        assert!(elsewhere.idle() == (0, 0), "{:?}", elsewhere.idle());
        assert_eq!(first.idle(), (1, 0));

        // Once no client of the origin is left, its idle connections close with the list, and
        // the next client starts another.
        drop((first, second));
        until(|| server.closed() == 1).await;
        let next = lists.of(&origin);
        assert_eq!(next.idle(), (0, 0));
        read(next.send(&connector(), server.request()).await.unwrap()).await;
        assert_eq!(server.accepted(), 2);
    }

    #[tokio::test]
    async fn answers_read_to_their_end_leave_their_connection_for_the_next_request() {
        let server = Server::start(false).await;
        let held = HeldConnections::default();
        for _ in 0..3 {
            let response = held.send(&connector(), server.request()).await.unwrap();
            assert_eq!(read(response).await, r#"{"ok":true}"#);
        }
        assert_eq!(server.accepted(), 1, "one connection for three requests");
        assert_eq!(held.idle(), (1, 0));
    }

    #[tokio::test]
    async fn requests_at_once_each_get_a_connection_and_all_are_kept() {
        let server = Server::start(false).await;
        let held = HeldConnections::default();
        let connecting = connector();
        let (first, second) = tokio::join!(
            held.send(&connecting, server.request()),
            held.send(&connecting, server.request()),
        );
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!(server.accepted(), 2);
        read(first).await;
        read(second).await;
        assert_eq!(held.idle(), (2, 0));
        read(held.send(&connector(), server.request()).await.unwrap()).await;
        assert_eq!(server.accepted(), 2, "a kept one was taken again");
    }

    #[tokio::test]
    async fn a_connection_its_server_closed_is_not_used_again() {
        let server = Server::start(true).await;
        let held = HeldConnections::default();
        read(held.send(&connector(), server.request()).await.unwrap()).await;
        until(|| held.idle() == (1, 1)).await;
        let again = held.send(&connector(), server.request()).await.unwrap();
        assert_eq!(read(again).await, r#"{"ok":true}"#);
        assert_eq!(
            server.accepted(),
            2,
            "a new connection for the second request"
        );
    }

    #[tokio::test]
    async fn an_answer_dropped_unread_closes_its_connection() {
        let server = Server::start(false).await;
        let held = HeldConnections::default();
        let unread = held.send(&connector(), server.request()).await.unwrap();
        drop(unread);
        assert_eq!(held.idle(), (0, 0), "not put back");
        until(|| server.closed() == 1).await;
        read(held.send(&connector(), server.request()).await.unwrap()).await;
        assert_eq!(server.accepted(), 2);
    }

    #[tokio::test]
    async fn connections_idle_past_the_timeout_are_closed() {
        let server = Server::start(false).await;
        let held = HeldConnections::with_idle_timeout(Duration::from_millis(100));
        read(held.send(&connector(), server.request()).await.unwrap()).await;
        assert_eq!(held.idle(), (1, 0));
        // Swept with nothing sent: the server sees the connection closed.
        until(|| server.closed() == 1).await;
        assert_eq!(held.idle(), (0, 0));
        read(held.send(&connector(), server.request()).await.unwrap()).await;
        assert_eq!(server.accepted(), 2);
    }

    #[test]
    fn a_sweep_ended_with_its_runtime_is_started_again_by_the_next_put_back() {
        let held = HeldConnections::with_idle_timeout(Duration::from_millis(100));
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let first = runtime();
        let server = first.block_on(Server::start(false));
        first.block_on(async {
            read(held.send(&connector(), server.request()).await.unwrap()).await;
        });
        // The server, the connection and the sweep end with the runtime that ran them.
        drop(first);
        let second = runtime();
        second.block_on(async {
            let server = Server::start(false).await;
            read(held.send(&connector(), server.request()).await.unwrap()).await;
            // Swept: the closed one at once, the new one after its idle timeout.
            until(|| server.closed() == 1).await;
            assert_eq!(held.idle(), (0, 0));
        });
    }

    #[tokio::test]
    async fn requests_name_their_host_and_only_their_path() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let received = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buffer = [0; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let read = socket.read(&mut buffer).await.unwrap();
                assert!(read > 0);
                head.extend_from_slice(&buffer[..read]);
            }
            String::from_utf8_lossy(&head).to_ascii_lowercase()
        });
        let request = http::Request::get(format!("http://{address}/mcp?x=1"))
            .body(reqwest::Body::from(""))
            .unwrap();
        let held = HeldConnections::default();
        let sending = tokio::spawn(async move { held.send(&connector(), request).await.is_ok() });
        let head = received.await.unwrap();
        assert!(head.starts_with("get /mcp?x=1 http/1.1\r\n"), "{head}");
        assert!(head.contains(&format!("host: {address}\r\n")), "{head}");
        sending.abort();
        assert_eq!(
            host_header(&"example.com:80".parse().unwrap()),
            "example.com"
        );
        assert_eq!(origin_form(&"http://a:1".parse().unwrap()), "/");
    }
}
