//! A WebSocket server that floods its client with pings and never reads a byte: each pong the
//! client owes has nowhere to go. The connection's memory stays flat (with tungstenite's default
//! write buffering it grew by over 100 MiB for 64 MiB of pings). Alone in its test binary, so the
//! process's memory is this connection's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rmcp::transport::Transport;
use switchboard_upstream::{HttpClients, WebSocketTransport};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

/// Pings sent: 32 MiB of 6-byte frames.
const PINGS: usize = 32 * 1024 * 1024 / 6;

/// The process's resident memory, in bytes.
fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

#[tokio::test]
async fn a_server_flooding_pings_without_reading_does_not_grow_the_connection() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        #[allow(clippy::result_large_err)] // tungstenite's callback type, not ours
        let confirm = |_: &Request, mut response: Response| {
            response
                .headers_mut()
                .insert("sec-websocket-protocol", "mcp".parse().unwrap());
            Ok(response)
        };
        let socket = tokio_tungstenite::accept_hdr_async(tcp, confirm)
            .await
            .unwrap();
        let (mut sink, _never_read) = socket.split();
        for n in 0..PINGS {
            if sink
                .feed(Message::Ping(vec![1, 2, 3, 4].into()))
                .await
                .is_err()
            {
                return;
            }
            counter.store(n + 1, Ordering::Relaxed);
            if n % 1024 == 0 && sink.flush().await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    let url = url::Url::parse(&format!("ws://{addr}/")).unwrap();
    let mut transport = WebSocketTransport::connect(&url, &[], "flood".into(), &HttpClients::new())
        .await
        .unwrap();
    let before = resident();
    let mut peak = before;
    let ended = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            tokio::select! {
                message = transport.receive() => return message,
                () = tokio::time::sleep(Duration::from_millis(20)) => peak = peak.max(resident()),
            }
        }
    })
    .await
    .expect("the flood ends");
    assert!(ended.is_none(), "no message came");
    let grew = peak.saturating_sub(before) >> 20;
    assert!(
        grew < 16,
        "the connection grew by {grew} MiB over {} pings",
        sent.load(Ordering::Relaxed)
    );
}
