//! The floor: a plain TCP relay, to show what relaying costs on this machine before any HTTP or
//! MCP work.
//!
//! Every relay between two loopback sockets pays the kernel for one more read and one more
//! write each way per call, and on a VM most of that cost (loopback delivery, waking the reader)
//! is charged to the writer. This relay does nothing else: one thread, bytes copied unparsed
//! between each accepted connection and its own connection to the target. It runs as a child
//! process (this harness, re-executed with `--tcp-relay`) so that its CPU is read from `/proc`
//! exactly as the daemon's is. Its figures are the least any user-space relay can add here.
//!
//! Written by hand because it is a few lines over `tokio::io::copy_bidirectional`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};

/// Runs the relay in this process until killed: listens on a free loopback port, prints it on
/// standard output, and relays every connection to `target`.
pub fn serve(target: SocketAddr) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        println!("{}", listener.local_addr()?.port());
        loop {
            let (mut downstream, _) = listener.accept().await?;
            tokio::spawn(async move {
                let Ok(mut upstream) = TcpStream::connect(target).await else {
                    return;
                };
                let _ = downstream.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut downstream, &mut upstream).await;
            });
        }
    })
}

/// A relay child process in front of `target`, killed on drop.
pub struct Relay {
    child: Child,
    /// The relay's own port on 127.0.0.1.
    pub port: u16,
}

impl Relay {
    /// Starts this harness as a relay to `target`.
    pub fn start(target: SocketAddr) -> anyhow::Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--tcp-relay", &target.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the TCP relay")?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("the relay's stdout")?;
        BufReader::new(stdout).read_line(&mut line)?;
        let port = match line.trim().parse() {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!("the TCP relay did not report its port (said {line:?})");
            }
        };
        Ok(Self { child, port })
    }

    /// The relay's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
