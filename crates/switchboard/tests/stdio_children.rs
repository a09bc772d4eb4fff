//! What a stdio server's process gets of the host, when its command is hostile: a `sh -c` script
//! that tries to read the vault key, the database and the daemon's own environment, and writes
//! down its environment, before it runs the fixture MCP server. It gets none of Switchboard's
//! secrets (only the basic variables, the operator's `--child-env` and its own definition's),
//! and cannot read the data directory or the daemon through `/proc`; the same script with
//! `--child-sandbox off` reads the key, so the test sees the difference.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::process::Stdio;

/// Runs the daemon with secrets in its environment and the probing server added, and returns
/// what the probe wrote down.
async fn what_a_child_sees(sandbox: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let report = dir.path().join("report");
    std::fs::create_dir(&report).unwrap();
    let fixture = switchboard_fixtures::stdio_fixture_binary();
    let script = format!(
        r#"{{
  cat "{data}/vault.key" && echo read-vault-key
  cat "{data}/switchboard.db" >/dev/null && echo read-database
  tr '\0' '\n' < /proc/$PPID/environ | grep SWITCHBOARD && echo read-daemon-environment
  env
}} > "{report}/seen" 2>&1; exec "{fixture}""#,
        data = data.display(),
        report = report.display(),
        fixture = fixture.display(),
    );
    let added = common::switchboard(
        &data,
        &[
            "server",
            "add",
            "probe",
            "--env",
            "OWN_SETTING=from-the-definition",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert!(added.status.success(), "{}", common::text(&added));
    let port = common::free_port();
    let _daemon = common::command(
        &data,
        &[
            "--child-env",
            "HTTPS_PROXY",
            "--child-sandbox",
            sandbox,
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ],
    )
    .env("SWITCHBOARD_API_KEYS", "operator-key-0123456789abcdef")
    .env("SWITCHBOARD_OAUTH_CLIENT_SECRET", "client-secret-value")
    .env("DATABASE_URL", "postgres://app:hunter2@db/app")
    .env("HTTPS_PROXY", "http://proxy.invalid:3128")
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    common::await_health(port).await;
    common::wait_for_state(port, "probe", "connected").await;
    std::fs::read_to_string(report.join("seen")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_gets_no_secret_of_the_daemons_and_cannot_read_its_data_directory() {
    let seen = what_a_child_sees("required").await;
    for forbidden in [
        "read-vault-key",
        "read-database",
        "read-daemon-environment",
        "SWITCHBOARD_",
        "client-secret-value",
        "operator-key",
        "hunter2",
    ] {
        assert!(!seen.contains(forbidden), "{forbidden} in:\n{seen}");
    }
    for given in [
        "OWN_SETTING=from-the-definition",
        "HTTPS_PROXY=http://proxy.invalid:3128",
        "PATH=",
        "HOME=",
    ] {
        assert!(seen.contains(given), "{given} missing from:\n{seen}");
    }

    // Unconfined (the operator's choice), the same script reads the key: the probe works.
    let unconfined = what_a_child_sees("off").await;
    assert!(unconfined.contains("read-vault-key"), "{unconfined}");
    assert!(
        !unconfined.contains("client-secret-value"),
        "the environment stays fixed without the sandbox too: {unconfined}"
    );
}

/// A stdio server that writes thousands of lines to its stderr does not write them into the
/// daemon's log: at most its share reaches it at info, and how many more there were is said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_flooding_its_stderr_does_not_flood_the_daemons_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let fixture = switchboard_fixtures::stdio_fixture_binary();
    let script = format!(
        "i=0; while [ $i -lt 3000 ]; do echo \"flood line $i\" >&2; i=$((i+1)); done; exec \"{}\"",
        fixture.display()
    );
    let added = common::switchboard(
        &data,
        &["server", "add", "noisy", "--", "sh", "-c", &script],
    );
    assert!(added.status.success(), "{}", common::text(&added));
    let log_path = dir.path().join("daemon.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let port = common::free_port();
    let _daemon = common::command(&data, &["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    common::await_health(port).await;
    common::wait_for_state(port, "noisy", "connected").await;
    let mut said = String::new();
    for _ in 0..300 {
        said = std::fs::read_to_string(&log_path).unwrap();
        if said.contains("more lines of its stderr were logged at debug only") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let logged = said.lines().filter(|l| l.contains("flood line")).count();
    assert!(logged <= 20, "{logged} flood lines in the log");
    assert!(logged > 0, "its first lines are logged:\n{said}");
    assert!(
        said.contains("more lines of its stderr were logged at debug only"),
        "the rest are counted:\n{said}"
    );
}
