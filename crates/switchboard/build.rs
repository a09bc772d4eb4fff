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
//! `SWITCHBOARD_FUNCTION_ORDER=off` builds without it (for a linker other than LLD).

fn main() {
    println!("cargo:rerun-if-changed=function-order.txt");
    println!("cargo:rerun-if-env-changed=SWITCHBOARD_FUNCTION_ORDER");
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let lld_by_default =
        std::env::var("TARGET").is_ok_and(|target| target == "x86_64-unknown-linux-gnu");
    let turned_off = std::env::var("SWITCHBOARD_FUNCTION_ORDER").is_ok_and(|v| v == "off");
    if !(release && lld_by_default) || turned_off {
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
