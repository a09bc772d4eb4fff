//! The loopback guard the Node test harnesses run under (`.ci/loopback-guard.mjs`, preloaded
//! into the conformance harness and everything it spawns) lets loopback through and refuses
//! every other connection, datagram and DNS query itself, before anything goes out.
//!
//! The check (`tests/npm/loopback-guard-check.mjs`) runs inside a network namespace this test
//! makes with `unshare --net` (as root, which CI is; anything else fails saying so), with only
//! `lo` up: an attempt the guard let through would fail with the network's own error there
//! (unreachable, no resolver), which the check tells from the guard's, and leaves nothing either
//! way. The same check without the guard fails, so it cannot pass vacuously.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the check in a fresh network namespace, with `preload` when given; its exit status and
/// output.
fn check_in_a_namespace(preload: Option<&Path>) -> (bool, String) {
    let root = repository();
    let mut node = String::from("exec node");
    if let Some(preload) = preload {
        node.push_str(&format!(" --import={}", preload.display()));
    }
    let script = format!(
        "set -e; ip link set lo up; {node} {}",
        root.join("tests/npm/loopback-guard-check.mjs").display()
    );
    let output = Command::new("timeout")
        .args(["60", "unshare", "--net", "sh", "-c", &script])
        .output()
        .expect("timeout and unshare run (coreutils, util-linux)");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn node_harnesses_reach_loopback_only_under_the_guard() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc_geteuid() } == 0;
    assert!(
        root,
        "this test makes a network namespace (unshare --net), which needs root: run the suite as root, as CI does"
    );
    let guard = repository().join(".ci/loopback-guard.mjs");
    assert!(guard.is_file(), "the guard is in the repository");

    let (passed, text) = check_in_a_namespace(Some(&guard));
    assert!(passed, "under the guard:\n{text}");
    assert!(
        text.contains("loopback-guard-check: 19 passed, 0 failed"),
        "every check ran:\n{text}"
    );
    assert!(
        text.contains("[loopback-guard] refused a connection to 192.0.2.1"),
        "the guard says what it refused:\n{text}"
    );

    // Without it, the same attempts reach the (empty) network and fail there: the check tells.
    let (passed, text) = check_in_a_namespace(None);
    assert!(!passed, "without the guard the check fails:\n{text}");
    assert!(
        text.contains("FAIL net.connect to an address (port, host): not the guard: ENETUNREACH"),
        "{text}"
    );
    assert!(text.contains("FAIL a UDP datagram: went through"), "{text}");
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
