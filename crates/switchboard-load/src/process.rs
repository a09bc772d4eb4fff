//! What the harness reads about the daemon's process from `/proc` (Linux).

use anyhow::Context;

/// CPU time and memory of one process.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// CPU time spent in the process's own code and its libraries, in seconds.
    pub user_seconds: f64,
    /// CPU time spent in the kernel on its behalf (system calls, and on loopback the delivery
    /// of what it sends).
    pub system_seconds: f64,
    /// How often its threads were switched off their CPU so far, waiting (voluntary) or
    /// preempted, summed over the threads it has now.
    pub context_switches: u64,
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
    let user_seconds = tick(11)? / ticks_per_second;
    let system_seconds = tick(12)? / ticks_per_second;
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
        user_seconds,
        system_seconds,
        context_switches: context_switches(pid),
        rss: kib("VmRSS:"),
        peak_rss: kib("VmHWM:"),
        anonymous: kib("RssAnon:"),
    })
}

/// The context switches of process `pid`'s threads (`/proc/<pid>/task/*/status`); a thread
/// that ends between two readings takes its count with it, which the threads measured here
/// (the daemon's and the relays', all started before a run) do not.
fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .map(|status| switches_in(&status))
        .sum()
}

/// Voluntary plus involuntary context switches in the text of a task's `status`.
fn switches_in(status: &str) -> u64 {
    status
        .lines()
        .filter_map(|line| {
            line.strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
        })
        .filter_map(|count| count.trim().parse::<u64>().ok())
        .sum()
}

/// How many TCP connections this machine has opened so far (`ActiveOpens` in `/proc/net/snmp`):
/// read before and after a run, what the run's clients and relays opened. A relay that opens
/// a connection a call pays for it in CPU and latency, and so does the upstream that accepts
/// it: the harness shows it beside each relay's figures, so a floor that pays for connections
/// the daemon does not (or a daemon that pays for more) is seen, not guessed.
pub fn tcp_connections_opened() -> anyhow::Result<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").context("reading /proc/net/snmp")?;
    tcp_active_opens(&snmp).context("no TCP ActiveOpens in /proc/net/snmp")
}

/// `ActiveOpens` in the text of `/proc/net/snmp`: its `Tcp:` lines are names, then values.
fn tcp_active_opens(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|line| line.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let column = names
        .split_whitespace()
        .position(|name| name == "ActiveOpens")?;
    values.split_whitespace().nth(column)?.parse().ok()
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
        // The test thread has been scheduled at least once, off its CPU and back.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let later = super::usage(std::process::id(), clock_ticks()).expect("/proc is readable");
        assert!(later.context_switches > 0, "{later:?}");
    }

    #[test]
    fn context_switches_count_both_kinds() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(switches_in(status), 15);
        assert_eq!(switches_in("Name:\tx\n"), 0);
    }

    #[test]
    fn active_opens_are_read_from_the_tcp_lines() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens\n\
                    Tcp: 1 200 120000 -1 36352 36298\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(tcp_active_opens(snmp), Some(36352));
        assert_eq!(tcp_active_opens("Tcp: RtoAlgorithm\nTcp: 1\n"), None);
        assert_eq!(tcp_active_opens("Tcp: ActiveOpens\n"), None);
        assert!(
            tcp_connections_opened().is_ok(),
            "this machine has /proc/net/snmp"
        );
    }
}
