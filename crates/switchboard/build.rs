//! Lays out the daemon's release build in the order it runs its code.
//!
//! The daemon's code is about 38 MB, and the few megabytes it runs when started and serving
//! are scattered across all of it. The kernel maps code in windows around each page touched
//! (fault-around), so an idle daemon had most of its code resident: about 27 of its 36 MiB
//! RSS. `function-order.txt` lists the functions a short run executed (made by
//! `scripts/function-order`, hottest first); the linker (LLD, Rust's default on
//! x86_64-unknown-linux-gnu) places them first and together. A function the list does not name
//! (new code, or a renamed dependency) is placed as before, so a stale list costs memory, never
//! correctness; `scripts/function-order --check` says when it is stale.
//!
//! Rust links with LLD by default on that target from 1.90 on; an older compiler (the workspace
//! takes 1.88) links with the system's linker, which does not take the list, so it builds
//! without it. `SWITCHBOARD_FUNCTION_ORDER=off` builds without it too (for a linker other than
//! LLD chosen by hand).

/// The first Rust release (major, minor) that links with LLD by default on
/// x86_64-unknown-linux-gnu.
const LLD_BY_DEFAULT_SINCE: (u32, u32) = (1, 90);

fn main() {
    // Set by scripts/rustc-with-profile on release builds it guides with pgo/'s profile; a new
    // profile builds the daemon again.
    println!("cargo::rustc-check-cfg=cfg(switchboard_profile_guided)");
    println!("cargo:rerun-if-changed=pgo");
    println!("cargo:rerun-if-changed=function-order.txt");
    println!("cargo:rerun-if-env-changed=SWITCHBOARD_FUNCTION_ORDER");
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let lld_target =
        std::env::var("TARGET").is_ok_and(|target| target == "x86_64-unknown-linux-gnu");
    let turned_off = std::env::var("SWITCHBOARD_FUNCTION_ORDER").is_ok_and(|v| v == "off");
    if !(release && lld_target) || turned_off || !links_with_lld_by_default() {
        return;
    }
    let Ok(manifest_dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let order = std::path::Path::new(&manifest_dir).join("function-order.txt");
    println!(
        "cargo:rustc-link-arg-bin=switchboard=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    // Names the list has and this build does not are expected (see above).
    println!("cargo:rustc-link-arg-bin=switchboard=-Wl,--no-warn-symbol-ordering");
}

/// Whether the compiler building this is Rust 1.90 or newer (`rustc -vV`'s `release:` line);
/// `false` when that cannot be told.
fn links_with_lld_by_default() -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let Ok(output) = std::process::Command::new(rustc).arg("-vV").output() else {
        return false;
    };
    let described = String::from_utf8_lossy(&output.stdout);
    let version = described
        .lines()
        .find_map(|line| line.strip_prefix("release: "))
        .and_then(|release| {
            let mut numbers = release.split(['.', '-']).map(|n| n.parse::<u32>().ok());
            Some((numbers.next()??, numbers.next()??))
        });
    version.is_some_and(|version| version >= LLD_BY_DEFAULT_SINCE)
}
