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

pub use server::{Era, FixtureServer, FixtureState, LATE_STREAM_END, hostile_tool_names};
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
    /// 20 s) until it accepts connections.
    pub fn start(mode: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let path = if mode == "sse" { "sse" } else { "mcp" };
        Self {
            child: Self::spawn(mode, port),
            mode: mode.to_owned(),
            port,
            url: format!("http://127.0.0.1:{port}/{path}"),
        }
    }

    /// Kills it and starts a new process on the same port, as a deployment restarts a server:
    /// the new one knows none of the old one's sessions.
    pub fn restart(&mut self) {
        self.stop();
        self.child = Self::spawn(&self.mode, self.port);
    }

    /// Kills it (and waits until it is gone); [`Self::restart`] starts it again.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn spawn(mode: &str, port: u16) -> std::process::Child {
        let child = std::process::Command::new("node")
            .arg(server_everything_entry())
            .arg(mode)
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node starts (Node.js must be installed)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "server-everything did not listen on port {port} within 20 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        child
    }
}

impl Drop for ServerEverything {
    fn drop(&mut self) {
        self.stop();
    }
}
