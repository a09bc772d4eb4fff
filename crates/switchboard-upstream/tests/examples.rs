//! The repository's `examples/` folder works: its sample configuration file reads whole (every
//! server usable, as `--config` and `server import` read it), and its program connects to a
//! real server (server-everything on stdio), lists its tools and calls one.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_sample_configuration_reads_whole() {
    let text = std::fs::read_to_string(repository().join("examples/switchboard.toml")).unwrap();
    let report = switchboard_core::config::parse_toml(&text).unwrap();
    assert!(report.skipped.is_empty(), "skipped: {:?}", report.skipped);
    let mut ids: Vec<&str> = report.servers.iter().map(|s| s.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["everything", "human", "internal", "notion"]);
}

/// The example program as `cargo test` built it, beside this test's own binary.
fn example_program() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let program = deps
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples/call_a_tool");
    assert!(
        program.exists(),
        "{} is missing: `cargo test` run without `--test` (as scripts/test runs it) builds the examples",
        program.display()
    );
    program
}

#[test]
fn the_example_program_lists_and_calls_a_real_servers_tools() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.toml");
    let entry = switchboard_fixtures::server_everything_entry();
    std::fs::write(
        &config,
        format!(
            "[servers.everything]\ncommand = \"node\"\nargs = [{:?}]\n",
            entry.display().to_string()
        ),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let output = Command::new(example_program())
            .arg(&config)
            .arg("everything")
            .args(extra)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.success(), stdout, stderr)
    };

    let (ok, listed, stderr) = run(&[]);
    assert!(ok, "{stderr}");
    assert!(
        listed.lines().any(|line| line.starts_with("echo\t")),
        "{listed}"
    );

    let (ok, echoed, stderr) = run(&["echo", r#"{"message": "from the example"}"#]);
    assert!(ok, "{stderr}");
    assert_eq!(echoed.trim(), "Echo: from the example");

    // A server the file does not name is a clear error, not a panic.
    let output = Command::new(example_program())
        .arg(&config)
        .arg("nowhere")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("has no usable server nowhere"));
}
