//! What the harness reads about the daemon's process from `/proc` (Linux).

use anyhow::Context;

/// CPU time and memory of one process.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident memory now, in bytes.
    pub rss: u64,
    /// Peak resident memory so far, in bytes.
    pub peak_rss: u64,
    /// The anonymous part of `rss` (heap and stacks, not code or files mapped), in bytes: what
    /// the process itself holds, steadier than `rss`, which moves with the code pages touched.
    pub anonymous: u64,
}

/// Clock ticks per second for `/proc/<pid>/stat` (from `getconf CLK_TCK`, else the usual 100).
pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Reads the usage of process `pid`.
pub fn usage(pid: u32, ticks_per_second: f64) -> anyhow::Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may hold spaces): state is
    // field 3, utime 14 and stime 15, so 11 and 12 after the closing parenthesis.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("malformed /proc stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |index: usize| -> anyhow::Result<f64> {
        fields
            .get(index)
            .and_then(|f| f.parse::<f64>().ok())
            .context("malformed /proc stat field")
    };
    let cpu_seconds = (tick(11)? + tick(12)?) / ticks_per_second;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Ok(Usage {
        cpu_seconds,
        rss: kib("VmRSS:"),
        peak_rss: kib("VmHWM:"),
        anonymous: kib("RssAnon:"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harness_can_read_its_own_usage() {
        let usage = usage(std::process::id(), clock_ticks()).expect("/proc is readable");
        assert!(usage.rss > 0 && usage.peak_rss >= usage.rss, "{usage:?}");
        assert!(
            usage.anonymous > 0 && usage.anonymous <= usage.rss,
            "{usage:?}"
        );
    }
}
