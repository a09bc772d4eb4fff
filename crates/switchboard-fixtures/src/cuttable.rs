//! A TCP relay a test can cut: a dependency (a database, a server) going away mid-run.
//!
//! [`CuttableRelay`] listens on a loopback port of its own and relays every connection to its
//! target. [`CuttableRelay::cut`] closes every relayed connection and stops listening, so new
//! connections are refused, as when the target's machine goes down; [`CuttableRelay::restore`]
//! listens again on the same port.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use switchboard_core::sync::lock;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A relay from a loopback port to `target` that can be cut and restored.
pub struct CuttableRelay {
    /// Where it listens, on 127.0.0.1.
    pub port: u16,
    target: SocketAddr,
    running: Mutex<CancellationToken>,
}

impl CuttableRelay {
    /// Relays a free loopback port to `target`.
    pub async fn to(target: SocketAddr) -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let relay = Arc::new(Self {
            port,
            target,
            running: Mutex::new(CancellationToken::new()),
        });
        relay.serve(listener);
        relay
    }

    /// Closes every relayed connection and refuses new ones.
    pub fn cut(&self) {
        lock(&self.running).cancel();
    }

    /// Listens again (on the same port) after [`Self::cut`].
    pub async fn restore(&self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("the relay's port is free again");
        self.serve(listener);
    }

    fn serve(&self, listener: TcpListener) {
        let token = CancellationToken::new();
        *lock(&self.running) = token.clone();
        let target = self.target;
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = token.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((mut inbound, _)) = accepted else {
                    continue;
                };
                let token = token.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
    }
}
