//! The floors: what relaying costs on this machine before any MCP work, measured beside
//! Switchboard by two relays that do nothing else.
//!
//! - [`RelayKind::Tcp`]: every relay between two loopback sockets pays the kernel for one more
//!   read and one more write each way per call, and on a VM most of that cost (loopback
//!   delivery, waking the reader) is charged to the writer. This relay does nothing else: one
//!   thread, bytes copied unparsed between each accepted connection and its own connection to
//!   the target. Its figures are the least any user-space relay can add here.
//! - [`RelayKind::Http`]: a plain HTTP/1.1 reverse proxy on the HTTP stack Switchboard is built
//!   on, run as the daemon runs it: a thread per core, each with a single-threaded runtime that
//!   serves the connections handed to it in turn (hyper's server) and sends their requests over
//!   connections of its own to the target (hyper's HTTP/1 client connections, kept and taken
//!   again when ready, as the daemon's are). Each request is parsed and sent on, its response
//!   parsed and sent back, bodies streamed through unread. Its figures are what the HTTP on both
//!   sides costs before a relay looks at a single JSON-RPC message.
//! - [`RelayKind::Nginx`]: nginx (Debian's) as a keep-alive reverse proxy with unbuffered
//!   answers, one worker process, started with a configuration of its own
//!   ([`switchboard_fixtures::nginx`]). Its figures are what the fastest HTTP relay people run
//!   adds on this machine: the yardstick of `docs/benchmarks.md`.
//!
//! Each runs as a child process (nginx, or this harness re-executed with `--tcp-relay` or
//! `--http-relay`) so that its CPU is read from `/proc` exactly as the daemon's is. Written by hand because each
//! is a few lines over `tokio::io::copy_bidirectional` or hyper's connection builders.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};

/// Which relay a floor is measured through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayKind {
    /// Bytes copied between sockets, unparsed, on one thread.
    Tcp,
    /// A plain HTTP/1.1 reverse proxy on hyper, no JSON-RPC.
    Http,
    /// nginx as a keep-alive reverse proxy.
    Nginx,
}

impl RelayKind {
    /// All three, in the order the report shows them.
    pub const ALL: [RelayKind; 3] = [RelayKind::Tcp, RelayKind::Http, RelayKind::Nginx];

    /// The relay's name in the report.
    pub fn label(self) -> &'static str {
        match self {
            RelayKind::Tcp => "TCP",
            RelayKind::Http => "HTTP",
            RelayKind::Nginx => "nginx",
        }
    }

    /// The hidden option that runs this harness as this relay (`None`: it is another program).
    fn option(self) -> Option<&'static str> {
        match self {
            RelayKind::Tcp => Some("--tcp-relay"),
            RelayKind::Http => Some("--http-relay"),
            RelayKind::Nginx => None,
        }
    }
}

/// Runs the TCP relay in this process until killed: listens on a free loopback port, prints it
/// on standard output, and relays every connection to `target`.
pub fn serve_tcp(target: SocketAddr) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    serve(runtime, move |mut downstream| {
        tokio::spawn(async move {
            let Ok(mut upstream) = TcpStream::connect(target).await else {
                return;
            };
            let _ = upstream.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut downstream, &mut upstream).await;
        });
    })
}

/// Runs the HTTP relay in this process until killed: listens on a free loopback port, prints it
/// on standard output, and sends every request it receives on to `target` (same method, path,
/// headers and body) and the target's response back.
pub fn serve_http(target: SocketAddr) -> anyhow::Result<()> {
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let mut handles = Vec::with_capacity(threads);
    for _ in 0..threads {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        handles.push(runtime.handle().clone());
        std::thread::spawn(move || runtime.block_on(std::future::pending::<()>()));
    }
    let accepting = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The target is named as the daemon names it (servers may check their Host).
    let host = hyper::header::HeaderValue::from_str(&target.to_string())?;
    let mut next = 0;
    serve(accepting, move |downstream| {
        // Moved to its thread's own I/O driver, as the daemon's connection threads do.
        let Ok(downstream) = downstream.into_std() else {
            return;
        };
        let host = host.clone();
        next += 1;
        handles[next % handles.len()].spawn(async move {
            if let Ok(downstream) = TcpStream::from_std(downstream) {
                serve_http_connection(downstream, target, host).await;
            }
        });
    })
}

/// Serves one downstream connection on its thread, relaying each request to `target`.
async fn serve_http_connection(
    downstream: TcpStream,
    target: SocketAddr,
    host: hyper::header::HeaderValue,
) {
    use hyper_util::rt::TokioIo;
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        request
            .headers_mut()
            .insert(hyper::header::HOST, host.clone());
        forward_http(request, target)
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(downstream), service)
        .await;
}

thread_local! {
    /// This thread's connections to the target: each is taken again once it is ready for
    /// another request (its last response read to the end).
    static HTTP_CONNECTIONS: std::cell::RefCell<Vec<hyper::client::conn::http1::SendRequest<hyper::body::Incoming>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Sends `request` to `target` over one of this thread's ready connections (a new one when none
/// is ready) and answers with the target's response.
async fn forward_http(
    request: hyper::Request<hyper::body::Incoming>,
    target: SocketAddr,
) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    let ready = HTTP_CONNECTIONS.with_borrow_mut(|connections| {
        connections.retain(|connection| !connection.is_closed());
        let index = connections
            .iter()
            .position(|connection| connection.is_ready())?;
        Some(connections.swap_remove(index))
    });
    let mut sender = match ready {
        Some(sender) => sender,
        None => {
            let tcp = TcpStream::connect(target).await?;
            let _ = tcp.set_nodelay(true);
            let (sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
            tokio::spawn(connection);
            sender
        }
    };
    let response = sender.send_request(request);
    // Kept while busy: it is ready again once this response is read to its end.
    HTTP_CONNECTIONS.with_borrow_mut(|connections| connections.push(sender));
    Ok(response.await?)
}

/// Listens on a free loopback port, prints it on standard output, and hands every connection
/// accepted (`TCP_NODELAY` set) to `relay`, on `runtime`, until killed.
fn serve(runtime: tokio::runtime::Runtime, mut relay: impl FnMut(TcpStream)) -> anyhow::Result<()> {
    runtime.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        println!("{}", listener.local_addr()?.port());
        loop {
            let (downstream, _) = listener.accept().await?;
            let _ = downstream.set_nodelay(true);
            relay(downstream);
        }
    })
}

/// A relay in front of `target`, stopped on drop.
pub struct Relay {
    running: Running,
    /// The relay's own port on 127.0.0.1.
    pub port: u16,
}

/// The relay's process.
enum Running {
    /// This harness as a relay, killed on drop.
    Harness(Child),
    /// nginx, stopped on drop.
    Nginx(switchboard_fixtures::nginx::Nginx),
}

impl Relay {
    /// Starts a relay of `kind` to `target`.
    pub async fn start(kind: RelayKind, target: SocketAddr) -> anyhow::Result<Self> {
        let Some(option) = kind.option() else {
            let nginx =
                switchboard_fixtures::nginx::Nginx::balancing(&format!("server {target};")).await;
            return Ok(Self {
                port: nginx.port,
                running: Running::Nginx(nginx),
            });
        };
        let mut child = Command::new(std::env::current_exe()?)
            .args([option, &target.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting the {} relay", kind.label()))?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("the relay's stdout")?;
        BufReader::new(stdout).read_line(&mut line)?;
        let port = match line.trim().parse() {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!(
                    "the {} relay did not report its port (said {line:?})",
                    kind.label()
                );
            }
        };
        Ok(Self {
            running: Running::Harness(child),
            port,
        })
    }

    /// The relay's process id.
    pub fn pid(&self) -> u32 {
        match &self.running {
            Running::Harness(child) => child.id(),
            Running::Nginx(nginx) => nginx.pid(),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Running::Harness(child) = &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
