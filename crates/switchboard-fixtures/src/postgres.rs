//! A real PostgreSQL server for tests, started by the test run itself.
//!
//! One server per test process, on 127.0.0.1 and a port of its own, in a fresh temporary cluster
//! (`initdb`, trust authentication for the `switchboard` role, durability off: tests need
//! PostgreSQL's semantics, not its crash safety). Each test takes a database of its own
//! ([`TestPostgres::database`]), so tests running side by side never see each other's rows.
//!
//! The server is run by a small shell that holds the read end of a pipe from the test process:
//! when the test process ends, however it ends, the pipe closes, and the shell stops PostgreSQL
//! and removes the cluster. PostgreSQL refuses to run as root; under root (CI containers) the
//! shell and the server run as the `postgres` user that Debian's package creates.
//!
//! The binaries are found in `$SWITCHBOARD_PG_BINDIR`, else Debian's
//! `/usr/lib/postgresql/<version>/bin` (the newest), else on `PATH`. If there are none, the test
//! fails and says how to install them: nothing is skipped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// A PostgreSQL server running for this test process.
pub struct TestPostgres {
    port: u16,
    bin_dir: PathBuf,
    /// Kept open for the process's life: closing it stops the server.
    _lifeline: Mutex<(Child, ChildStdin)>,
}

/// The role tests connect as (a superuser of the test cluster).
const ROLE: &str = "switchboard";

impl TestPostgres {
    /// The server, started the first time a test asks.
    pub fn shared() -> &'static TestPostgres {
        static SERVER: OnceLock<TestPostgres> = OnceLock::new();
        SERVER.get_or_init(start)
    }

    /// The port it listens on, at 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new, empty database, by its URL.
    pub fn database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let output = Command::new(self.bin_dir.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                ROLE,
                &name,
            ])
            .output()
            .expect("createdb runs");
        assert!(
            output.status.success(),
            "createdb {name} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        format!("postgres://{ROLE}@127.0.0.1:{}/{name}", self.port)
    }
}

fn start() -> TestPostgres {
    let bin_dir = bin_dir();
    let dir = tempfile_dir();
    let port = free_port();
    let mut command = Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(LIFELINE_SCRIPT)
        .arg("postgres-lifeline")
        .arg(&bin_dir)
        .arg(&dir)
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    run_as_postgres_if_root(&mut command, &dir);
    let mut child = command.spawn().expect("/bin/sh starts");
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    // The shell prints `ready` once the server accepts connections; anything else is a failure,
    // whose logs it printed.
    let mut said = String::new();
    let mut lines = BufReader::new(stdout);
    loop {
        let mut line = String::new();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line.trim() == "ready" => {
                return TestPostgres {
                    port,
                    bin_dir,
                    _lifeline: Mutex::new((child, stdin)),
                };
            }
            Ok(_) => said.push_str(&line),
        }
    }
    panic!("the test PostgreSQL server did not start:\n{said}");
}

/// Runs `initdb`, then the server; prints `ready` when it answers, then waits for its standard
/// input to close and stops the server (fast shutdown) and removes the cluster.
const LIFELINE_SCRIPT: &str = r#"
bin="$1"; dir="$2"; port="$3"
if ! "$bin/initdb" -D "$dir/data" -U switchboard --auth=trust --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log"; rm -rf "$dir"; exit 1
fi
"$bin/postgres" -D "$dir/data" -p "$port" -k "$dir" -c listen_addresses=127.0.0.1 \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400 \
    >"$dir/postgres.log" 2>&1 &
pg=$!
tries=0
until "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; do
    tries=$((tries + 1))
    if [ "$tries" -gt 300 ] || ! kill -0 "$pg" 2>/dev/null; then
        echo "the server did not answer within 30 s:"; cat "$dir/postgres.log"
        kill "$pg" 2>/dev/null; wait "$pg"; rm -rf "$dir"; exit 1
    fi
    sleep 0.1
done
echo ready
cat >/dev/null
kill -INT "$pg"
wait "$pg"
rm -rf "$dir"
"#;

fn bin_dir() -> PathBuf {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("SWITCHBOARD_PG_BINDIR").map(PathBuf::from) {
        assert!(
            has_server(&dir),
            "SWITCHBOARD_PG_BINDIR={} has no initdb and postgres",
            dir.display()
        );
        return dir;
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_server(dir))
        .collect();
    debian.sort();
    if let Some((_, dir)) = debian.pop() {
        return dir;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|dir| has_server(dir))
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL's server binaries (initdb, postgres) were not found: install Debian's \
                 package (apt-get install postgresql) or set SWITCHBOARD_PG_BINDIR"
            )
        })
}

/// A new private directory for the cluster (and its socket).
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-pg-{}-{:08x}",
        std::process::id(),
        rand_u32()
    ));
    std::fs::create_dir(&dir).expect("a temporary directory for PostgreSQL");
    dir
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish() as u32
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// PostgreSQL will not run as root: under root, the shell, the server and the cluster's files
/// belong to the `postgres` user.
fn run_as_postgres_if_root(command: &mut Command, dir: &Path) {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let (uid, gid) = passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.first() == Some(&"postgres") && fields.len() > 3)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
        .unwrap_or_else(|| {
            panic!(
                "running as root, and there is no `postgres` user to run the test PostgreSQL \
                 server as (Debian's postgresql package creates it)"
            )
        });
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("chown the PostgreSQL directory");
    command.uid(uid).gid(gid);
}
