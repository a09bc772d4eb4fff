//! What the process does to itself first, before any other thread exists: keeps other
//! processes out of its memory and environment, and keeps the search model's matrix code on one
//! thread a worker.

/// Makes this process not dumpable: other processes of the same user (a stdio server's child
/// among them) can then neither trace it nor read its memory, environment or open files through
/// `/proc/<pid>`, and it leaves no core file. The vault key and every token it unseals live in
/// its memory. Children are dumpable again once they run their own program.
pub(crate) fn keep_memory_from_other_processes() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_DUMPABLE takes plain integers and changes only this process.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// Keeps candle's matrix code (tool search's sentence encoder) on the thread that calls it
/// unless the operator says otherwise: `switchboard_embed::SentenceEncoder::encode` runs a worker
/// per core, which encodes a catalog about a quarter faster than every matrix product split over
/// both cores, and a query is no slower. candle reads `RAYON_NUM_THREADS` for each product (and
/// without it, `/proc/cpuinfo`, which costs a query milliseconds).
pub(crate) fn one_thread_per_encoder_worker() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // SAFETY: this runs in `main` before any other thread exists, so nothing reads or writes
        // the environment meanwhile.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", "1") };
    }
}

/// Moves this process's environment (the vault key, API keys and client secrets among it) out of
/// the block the kernel shows as `/proc/<pid>/environ`, and blanks that block. A process of the
/// same user reads that file even when this one is not dumpable if it runs as root (a stdio
/// server's child of a daemon run as root, say). Every variable keeps its value for this process:
/// `setenv` gives each a copy of its own, and only the originals are blanked.
pub(crate) fn move_environment_out_of_sight() {
    #[cfg(target_os = "linux")]
    {
        unsafe extern "C" {
            static mut environ: *mut *mut libc::c_char;
        }
        // SAFETY: this runs first in `main`, before any other thread exists, so nothing reads or
        // writes the environment meanwhile. `environ` is a NULL-terminated array of
        // NUL-terminated strings; each original is blanked only after `set_var` has pointed
        // `environ` at a copy, and the kernel's block stays mapped (it is this process's stack).
        unsafe {
            let mut originals = Vec::new();
            let mut entry = environ;
            while !entry.is_null() && !(*entry).is_null() {
                originals.push((*entry, libc::strlen(*entry)));
                entry = entry.add(1);
            }
            for (name, value) in std::env::vars_os() {
                std::env::set_var(name, value);
            }
            let mut entry = environ;
            while !entry.is_null() && !(*entry).is_null() {
                // Only strings that are no longer used are blanked.
                originals.retain(|(original, _)| *original != *entry);
                entry = entry.add(1);
            }
            for (original, length) in originals {
                std::ptr::write_bytes(original, 0, length);
            }
        }
    }
}
