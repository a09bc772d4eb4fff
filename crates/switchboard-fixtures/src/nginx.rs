//! nginx (Debian's, `/usr/sbin/nginx`) as the load balancer in front of Switchboard replicas,
//! started with a configuration of the test's own, on a free loopback port.
//!
//! `.ci/run` installs Debian's `nginx-light` when it is missing; a test that needs nginx fails
//! with that hint rather than skipping.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where Debian's package puts nginx.
pub const NGINX: &str = "/usr/sbin/nginx";

/// A running nginx in the foreground; stopped when dropped.
pub struct Nginx {
    child: Child,
    /// The loopback port it listens on.
    pub port: u16,
    /// Its working directory (configuration, logs, temporary files).
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx listening on 127.0.0.1 with `upstream` (an `upstream balanced { ... }`
    /// block's body: the balancing directive and `server` lines) proxied at every path, as a
    /// keep-alive reverse proxy that streams answers (SSE) unbuffered. Waits (up to 10 s)
    /// until it listens.
    ///
    /// Its connections are kept as Switchboard keeps its own: up to 64 idle ones to the
    /// upstream (enough for the 32 clients `switchboard-load` measures with; with 16, nginx
    /// closed and opened upstream connections all through a run at 32 clients), and no limit
    /// on the requests a connection carries (nginx closes one after 1,000 by default). Anything
    /// less would make nginx pay for connections Switchboard does not, and flatter Switchboard.
    pub async fn balancing(upstream: &str) -> Self {
        assert!(
            Path::new(NGINX).exists(),
            "nginx is not installed at {NGINX} (apt-get install nginx-light; .ci/run does)"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let root = dir.path().display();
        let config = format!(
            "daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    upstream balanced {{
        {upstream}
        keepalive 64;
        keepalive_requests 4294967295;
    }}
    keepalive_requests 4294967295;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://balanced;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_read_timeout 300s;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"
        );
        let config_path = dir.path().join("nginx.conf");
        std::fs::write(&config_path, config).expect("the configuration is written");
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&config_path)
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let nginx = Self { child, port, dir };
        for _ in 0..200 {
            if crate::process_listens_on(nginx.child.id(), port) {
                return nginx;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("nginx did not listen within 10 s: {}", nginx.error_log());
    }

    /// Its process id (one process: it runs without a master, as one worker).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What nginx logged.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
