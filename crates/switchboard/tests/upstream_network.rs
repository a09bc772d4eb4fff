//! Where a member's servers may reach, held inside a network namespace this test makes: only
//! `lo` is up, with the cloud metadata address, private addresses and an operator-allowed one
//! bound to it, and an `/etc/hosts` of its own naming some of them. Nothing here touches a
//! network outside that namespace.
//!
//! The test runs itself again inside `unshare --net --mount` (as root, which CI is; anything else
//! fails saying so): the copy inside finds `SWITCHBOARD_TEST_NETNS` set and does the work.
//! Recording HTTP servers listen on the metadata and private addresses; a `serve --users` daemon
//! allows one address and one host name (`--allow-upstream-network 10.9.9.9,allowed.test`). A member's connection test, server
//! and WebSocket server at every spelling of those addresses (names resolving to them, decimal,
//! IPv4-mapped IPv6, another loopback port) are refused and the servers never see a request; the
//! allowed network works, and a non-MCP answer's body never comes back in the error. The
//! operator's own connection test reaches the same recording server, so the refusals are the
//! rules', not the network's.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_fixtures::{Era, transports};

const INSIDE: &str = "SWITCHBOARD_TEST_NETNS";
const OPERATOR_KEY: &str = "operator-key-0123456789abcdef";
/// The addresses bound to `lo` inside the namespace.
const ADDRESSES: [&str; 6] = [
    "169.254.169.254",
    "10.1.2.3",
    "192.168.1.1",
    "172.16.0.1",
    "100.64.0.1",
    "10.9.9.9",
];
const HOSTS: &str = "127.0.0.1 localhost\n::1 localhost\n169.254.169.254 metadata.test\n\
                     10.1.2.3 internal.test\n10.9.9.9 allowed.test\n";

#[test]
fn a_members_servers_reach_public_addresses_and_the_operators_networks_only() {
    if std::env::var_os(INSIDE).is_some() {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(inside_the_namespace());
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc_geteuid() } == 0;
    assert!(
        root,
        "this test makes a network namespace (unshare --net), which needs root: run the suite as root, as CI does"
    );
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, HOSTS).unwrap();
    let mut setup = String::from("set -e; ip link set lo up; ");
    for address in ADDRESSES {
        setup.push_str(&format!("ip addr add {address}/32 dev lo; "));
    }
    setup.push_str(&format!(
        "mount --bind {} /etc/hosts; exec \"$0\" \"$@\"",
        hosts.display()
    ));
    let me = std::env::current_exe().unwrap();
    let output = std::process::Command::new("unshare")
        .args(["--net", "--mount", "sh", "-c", &setup])
        .arg(&me)
        .args([
            "--exact",
            "a_members_servers_reach_public_addresses_and_the_operators_networks_only",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(INSIDE, "1")
        .output()
        .expect("unshare runs (util-linux)");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "inside the namespace:\n{text}");
    assert!(
        text.contains("test result: ok. 1 passed"),
        "the test ran inside the namespace:\n{text}"
    );
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// An HTTP server at `addr` that counts the requests it gets and answers each with 500 and a
/// body no error may quote.
async fn recording_server(addr: SocketAddr) -> Arc<AtomicUsize> {
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let app = axum::Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                [(axum::http::header::CONTENT_TYPE, "text/plain")],
                "AccessKeyId=AKIAEXAMPLE\nSecretAccessKey=do-not-leak-this\n",
            )
        }
    });
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    seen
}

async fn inside_the_namespace() {
    let metadata = recording_server("169.254.169.254:80".parse().unwrap()).await;
    let private: Vec<Arc<AtomicUsize>> = futures::future::join_all(
        [
            "10.1.2.3:80",
            "192.168.1.1:443",
            "172.16.0.1:443",
            "100.64.0.1:443",
        ]
        .iter()
        .map(|addr| recording_server(addr.parse().unwrap())),
    )
    .await;
    let leaky_allowed = recording_server("10.9.9.9:8081".parse().unwrap()).await;
    let allowed_mcp =
        transports::streamable_http_at(Era::Modern, "10.9.9.9:8080".parse().unwrap()).await;

    let dir = tempfile::tempdir().unwrap();
    for args in [&["tenant", "add", "acme"][..], &["user", "add", "acme/ana"]] {
        let done = common::run(dir.path(), args).await;
        assert!(done.status.success(), "{}", common::text(&done));
    }
    let made = common::run(dir.path(), &["user", "key", "acme/ana"]).await;
    let ana = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    let port = common::free_port();
    let _daemon = common::command(
        dir.path(),
        &[
            "serve",
            "--users",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--allow-upstream-network",
            "10.9.9.9,allowed.test",
        ],
    )
    .env("SWITCHBOARD_API_KEYS", OPERATOR_KEY)
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    common::await_health(port).await;
    let base = format!("http://127.0.0.1:{port}");
    let send = |key: &str, path: &str, body: Value| {
        let (base, key, path) = (base.clone(), key.to_owned(), path.to_owned());
        async move { common::with_token(&base, &key, reqwest::Method::POST, &path, Some(body)).await }
    };

    let refused_urls = [
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "https://169.254.169.254/latest/meta-data/".to_owned(),
        "http://metadata.test/computeMetadata/v1/".to_owned(),
        "https://metadata.test/computeMetadata/v1/".to_owned(),
        "http://2852039166/latest/meta-data/".to_owned(),
        "https://[::ffff:169.254.169.254]/latest/meta-data/".to_owned(),
        "http://10.1.2.3/mcp".to_owned(),
        "https://internal.test/mcp".to_owned(),
        "https://192.168.1.1/mcp".to_owned(),
        "https://172.16.0.1/mcp".to_owned(),
        "https://100.64.0.1/mcp".to_owned(),
        format!("http://127.0.0.1:{port}/mcp"),
        "ws://10.1.2.3/mcp".to_owned(),
        "wss://metadata.test/mcp".to_owned(),
        "http://allowed-by-nobody.test/mcp".to_owned(),
    ];
    for url in &refused_urls {
        for path in ["/api/test-connection", "/api/servers"] {
            let body = json!({"id": "probe", "url": url,
                              "headers": {"Metadata-Flavor": "Google"}});
            let (status, answer) = send(&ana, path, body).await;
            assert_eq!(status, 403, "{path} {url}: {answer}");
        }
    }
    let (status, listed) =
        common::with_token(&base, &ana, reqwest::Method::GET, "/api/servers", None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["servers"], json!([]), "nothing refused was stored");

    // The operator's networks: her server there connects, and an answer that is not MCP comes
    // back as a status and a content type, never its body.
    for url in [
        allowed_mcp.url.clone(),
        allowed_mcp.url.replace("10.9.9.9", "allowed.test"),
    ] {
        let (status, tested) = send(&ana, "/api/test-connection", json!({"url": url})).await;
        assert_eq!(status, 200, "{url}: {tested}");
        assert_eq!(tested["connected"], true, "{url}: {tested}");
    }
    let (status, tested) = send(
        &ana,
        "/api/test-connection",
        json!({"url": "http://10.9.9.9:8081/mcp"}),
    )
    .await;
    assert_eq!(status, 200, "{tested}");
    let error = tested["error"].as_str().unwrap_or_default();
    assert!(error.contains("500"), "{tested}");
    assert!(
        !error.contains("SecretAccessKey") && !error.contains("AKIA"),
        "{tested}"
    );
    assert!(leaky_allowed.load(Ordering::SeqCst) > 0);

    for (seen, what) in std::iter::once((&metadata, "the metadata service"))
        .chain(private.iter().map(|seen| (seen, "a private address")))
    {
        assert_eq!(seen.load(Ordering::SeqCst), 0, "{what} got a request");
    }
    // The operator reaches what members may not: the refusals above are the rules'.
    let (status, tested) = send(
        OPERATOR_KEY,
        "/api/test-connection",
        json!({"url": "http://10.1.2.3/mcp"}),
    )
    .await;
    assert_eq!(status, 200, "{tested}");
    assert!(private[0].load(Ordering::SeqCst) > 0, "{tested}");
    let operator_error = tested["error"].as_str().unwrap_or_default();
    assert!(
        operator_error.contains("SecretAccessKey"),
        "the operator sees the body: {tested}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
}
