//! Test-only fixture MCP servers for every transport and era.
//!
//! Never a dependency of release code: only `[dev-dependencies]` name this crate. One hand-written
//! [`FixtureServer`] (hand-written rather than macro-built so its schemas, cursors and failures are
//! exactly what a test needs) is served over:
//! - Streamable HTTP with sessions (2025-11-25 and older; `server/discover` refused),
//! - stateless Streamable HTTP (2026-07-28 only),
//! - the legacy HTTP+SSE transport (2024-11-05),
//! - WebSocket (subprotocol `mcp`),
//! - stdio (the `switchboard-fixture-stdio` binary).
//!
//! [`conformance`] is the upstream behind Switchboard when the official conformance suite tests
//! its server side. [`chaos`] has servers that misbehave on purpose. [`postgres`] starts a real
//! PostgreSQL server for the store's tests. Everything binds 127.0.0.1 only.

pub mod chaos;
pub mod conformance;
pub mod cuttable;
pub mod nginx;
pub mod oauth;
pub mod postgres;
mod server;
pub mod transports;
pub mod wide;

pub use server::{Era, Exchange, FixtureServer, FixtureState, LATE_STREAM_END, hostile_tool_names};
pub use transports::RunningFixture;

/// The path of the `switchboard-fixture-stdio` binary, freshly built: `cargo test` builds a
/// package's binaries only for that package's own tests, so this asks cargo once per test process
/// (a no-op when the binary is up to date).
pub fn stdio_fixture_binary() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test binary has a path");
            let profile_dir = exe
                .parent()
                .and_then(|deps| deps.parent())
                .expect("test binaries live in target/<profile>/deps");
            let release = profile_dir
                .file_name()
                .is_some_and(|name| name == "release");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut build = std::process::Command::new(cargo);
            build.args([
                "build",
                "--quiet",
                "-p",
                "switchboard-fixtures",
                "--bin",
                "switchboard-fixture-stdio",
            ]);
            if release {
                build.arg("--release");
            }
            let status = build.status().expect("cargo runs");
            assert!(status.success(), "building the stdio fixture failed");
            profile_dir.join("switchboard-fixture-stdio")
        })
        .clone()
}

/// The repository root (for test data such as the npm-installed MCP servers).
pub fn repository_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// The entry point of the real `@modelcontextprotocol/server-everything`, installed by
/// `npm ci --prefix tests/npm`. Panics with instructions when it is missing: tests that need a
/// real server never skip silently.
pub fn server_everything_entry() -> std::path::PathBuf {
    let entry = repository_root()
        .join("tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.exists(),
        "{} is missing: run `npm ci --prefix tests/npm` (the README's test command does)",
        entry.display()
    );
    entry
}

/// A real `@modelcontextprotocol/server-everything` process for tests; killed on drop.
pub struct ServerEverything {
    child: std::process::Child,
    mode: String,
    port: u16,
    /// Its URL on 127.0.0.1 (`/mcp` for Streamable HTTP, `/sse` for HTTP+SSE).
    pub url: String,
}

impl ServerEverything {
    /// Starts it with `mode` `streamableHttp` or `sse` on a free loopback port and waits (up to
    /// 20 s) until its own socket listens there.
    ///
    /// The port is found by binding port 0 and letting it go, so another process may take it
    /// before server-everything binds it (it then exits with `EADDRINUSE`): that try is
    /// repeated on a new port, a few times.
    pub fn start(mode: &str) -> Self {
        let path = if mode == "sse" { "sse" } else { "mcp" };
        let mut refused = Vec::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            match Self::spawn(mode, port) {
                Ok(child) => {
                    return Self {
                        child,
                        mode: mode.to_owned(),
                        port,
                        url: format!("http://127.0.0.1:{port}/{path}"),
                    };
                }
                Err(why) => refused.push(why),
            }
        }
        panic!("server-everything did not start: {refused:#?}");
    }

    /// Kills it and starts a new process on the same port, as a deployment restarts a server:
    /// the new one knows none of the old one's sessions.
    pub fn restart(&mut self) {
        self.stop();
        self.child = Self::spawn(&self.mode, self.port)
            .unwrap_or_else(|why| panic!("server-everything did not start again: {why}"));
    }

    /// Kills it (and waits until it is gone); [`Self::restart`] starts it again.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it on `port` and waits until the port's listening socket is its own.
    ///
    /// Neither a connection to the port (it may be another process's listener) nor its
    /// "listening on port" line (Express 5 calls the listen callback with the error too, and
    /// server-everything prints the line either way) proves it started. Its error output is
    /// kept for the failure message, and read to the end so it never blocks.
    fn spawn(mode: &str, port: u16) -> Result<std::process::Child, String> {
        use std::io::BufRead;
        let mut child = std::process::Command::new("node")
            .arg(server_everything_entry())
            .arg(mode)
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("node starts (Node.js must be installed)");
        let stderr = child.stderr.take().expect("stderr is piped");
        let printed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = std::thread::spawn({
            let printed = printed.clone();
            move || {
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(Result::ok)
                {
                    let mut printed = switchboard_core::sync::lock(&printed);
                    if printed.len() < 20 {
                        printed.push(line);
                    }
                }
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if process_listens_on(child.id(), port) {
                return Ok(child);
            }
            let exited = child.try_wait().ok().flatten();
            if exited.is_some() || std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let status = child.wait();
                // Its error output ends with it: everything it printed has been read.
                let _ = reader.join();
                let printed = switchboard_core::sync::lock(&printed).join("\n");
                return Err(format!(
                    "port {port}: not listening within 20 s or gone ({status:?}); it printed:\n{printed}"
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Whether process `pid` holds a TCP socket listening on `port` (any address, IPv4 or IPv6):
/// the inodes of the listening sockets in `/proc/net/tcp{,6}` against the sockets among the
/// process's open files. Linux only, as the test suite is.
///
/// This is how a test knows a server process it started on a port it picked is up: a
/// connection to the port may reach another process that took the port in between (the
/// server then fails to bind it and exits, and the test talks to a port nobody serves).
pub fn process_listens_on(pid: u32, port: u16) -> bool {
    const LISTEN: &str = "0A";
    let port = format!("{port:04X}");
    let listening: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|row| {
                    let fields: Vec<&str> = row.split_whitespace().collect();
                    let local_port = fields.get(1)?.rsplit(':').next()?;
                    let inode = fields.get(9)?;
                    (local_port == port && *fields.get(3)? == LISTEN)
                        .then(|| format!("socket:[{inode}]"))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if listening.is_empty() {
        return false;
    }
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|target| listening.iter().any(|l| target.as_os_str() == l.as_str()))
}

impl Drop for ServerEverything {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::ServerEverything;

    /// A port another process holds is a failed start, not a start: the earlier check (a
    /// connection to the port succeeds) took the other process for server-everything.
    #[test]
    fn server_everything_on_a_taken_port_is_a_failed_start() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let why = ServerEverything::spawn("streamableHttp", port).unwrap_err();
        assert!(why.contains("already in use"), "{why}");
        let started = ServerEverything::start("streamableHttp");
        assert!(std::net::TcpStream::connect(("127.0.0.1", started.port)).is_ok());
    }
}
