//! The replicas scenario (`--replicas N`): N `switchboard serve --users` processes on one
//! PostgreSQL database (a server started here from Debian's binaries, as the tests start
//! theirs), all serving one stateless upstream. It reports stateless calls through the
//! operators' workspace spread over one replica and over all N (each client keeps to one
//! replica, as a load balancer spreading connections does), the same calls made by as many
//! users as clients, each in their own workspace, to a server their tenant shares, and how long
//! a change written through one replica takes to reach every other.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use switchboard_fixtures::postgres::TestPostgres;
use switchboard_fixtures::{Era, transports};

use crate::client::Shape;
use crate::{Charged, Sample, median_sample, micros, process};

/// Runs the scenario and prints its tables.
pub async fn run(
    binary: &Path,
    count: usize,
    calls: usize,
    concurrency: &[usize],
    runs: usize,
) -> anyhow::Result<()> {
    if count < 2 {
        bail!("--replicas needs 2 or more");
    }
    let modern = transports::streamable_http(Era::Modern).await;
    let database = SharedDatabase::new();
    let operator = database.operator_key.clone();
    let servers = vec![("modern".to_owned(), modern.url.clone())];
    let mut daemons = Vec::new();
    for _ in 0..count {
        let (daemon, _) = crate::start_daemon(
            binary,
            &servers,
            Duration::from_secs(30),
            Some(database.for_daemon()),
        )
        .await?;
        daemons.push(daemon);
    }
    let ticks = process::clock_ticks();
    println!(
        "switchboard-load replicas: {count} replicas on one PostgreSQL database, {calls} stateless calls per run, median of {runs} runs ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "| replicas | concurrency | calls/s | p50 / p90 / p99 | CPU per 1,000 calls (all replicas) | errors |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut errors = 0;
    for &clients in concurrency {
        for spread in [1, count] {
            let load = Load {
                daemons: &daemons[..spread],
                keys: std::slice::from_ref(&operator),
                ticks,
            };
            let sample = load.measure(clients, calls, runs).await?;
            errors += sample.errors;
            println!("| {spread} | {clients} | {} |", cells(&sample));
        }
    }

    // As many users as clients, of one tenant whose admin shares the upstream: each client
    // calls as its own user, in that user's workspace on the replica it keeps to.
    let users = concurrency.iter().copied().max().unwrap_or(1);
    let keys = add_users(binary, &database.url, &database.vault_key, users).await?;
    let http = reqwest::Client::new();
    let shared = http
        .post(format!("{}/api/servers", daemons[0].base))
        .bearer_auth(&keys[0])
        .json(&serde_json::json!({"id": "modern", "url": modern.url}))
        .send()
        .await?;
    if !shared.status().is_success() {
        bail!(
            "the tenant's admin could not share the server: {}",
            shared.status()
        );
    }
    let user_keys = &keys[1..];
    println!();
    println!(
        "| users | replicas | concurrency | calls/s | p50 / p90 / p99 | CPU per 1,000 calls (all replicas) | errors |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for &clients in concurrency {
        let load = Load {
            daemons: &daemons,
            keys: &user_keys[..clients],
            ticks,
        };
        let sample = load.measure(clients, calls, runs).await?;
        errors += sample.errors;
        println!("| {clients} | {count} | {clients} | {} |", cells(&sample));
    }

    // A change through the first replica (a server's display name), until every other one
    // shows it.
    let mut delays = Vec::new();
    for round in 1..=9 {
        let name = format!("round-{round}");
        let sent = Instant::now();
        let answer = http
            .patch(format!("{}/api/servers/modern", daemons[0].base))
            .bearer_auth(&operator)
            .json(&serde_json::json!({"display_name": name}))
            .send()
            .await?;
        if !answer.status().is_success() {
            bail!("the change was refused: {}", answer.status());
        }
        for daemon in &daemons[1..] {
            loop {
                let status = crate::status(&http, daemon).await?;
                if status["servers"][0]["display_name"] == name.as_str() {
                    break;
                }
                if sent.elapsed() > Duration::from_secs(10) {
                    bail!("a change did not reach a replica within 10 s");
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        delays.push(sent.elapsed());
    }
    delays.sort();
    println!();
    println!(
        "a change through one replica reached all {} others after {:.1} ms (median of {}), {:.1} ms at most",
        count - 1,
        delays[delays.len() / 2].as_secs_f64() * 1e3,
        delays.len(),
        delays[delays.len() - 1].as_secs_f64() * 1e3,
    );
    if delays[delays.len() / 2] > Duration::from_secs(1) {
        println!("target missed: changes reach every replica within a second");
    } else {
        println!("targets: all met");
    }
    if errors > 0 {
        bail!("{errors} calls failed; every load run must be error-free");
    }
    Ok(())
}

/// A database on the harness's PostgreSQL server, with the vault key and operator key every
/// daemon on it is started with.
struct SharedDatabase {
    url: String,
    vault_key: String,
    operator_key: String,
}

impl SharedDatabase {
    fn new() -> Self {
        let key = || switchboard_store::Vault::encode_key(&switchboard_store::Vault::generate().0);
        Self {
            url: TestPostgres::shared().database(),
            vault_key: key(),
            operator_key: key(),
        }
    }

    fn for_daemon(&self) -> crate::SharedStore<'_> {
        crate::SharedStore {
            url: &self.url,
            vault_key: &self.vault_key,
            operator_key: &self.operator_key,
        }
    }
}

/// The workspaces scenario (`--workspaces N`): one `switchboard serve --users` daemon on a
/// PostgreSQL database, a tenant whose admin shares one stateless server, and N members who
/// each make one call, which opens their workspace. Reports the daemon's RSS before and after,
/// and what one open workspace costs (the difference over N).
pub async fn workspaces(binary: &Path, users: usize) -> anyhow::Result<()> {
    if users < 2 {
        bail!("--workspaces needs 2 or more (the first member's workspace is the baseline)");
    }
    let modern = transports::streamable_http(Era::Modern).await;
    let database = SharedDatabase::new();
    let keys = add_users(binary, &database.url, &database.vault_key, users).await?;
    let (daemon, _) = crate::start_daemon(
        binary,
        &[],
        Duration::from_secs(30),
        Some(database.for_daemon()),
    )
    .await?;
    let http = reqwest::Client::new();
    let answer = http
        .post(format!("{}/api/servers", daemon.base))
        .bearer_auth(&keys[0])
        .json(&serde_json::json!({"id": "modern", "url": modern.url}))
        .send()
        .await?;
    if !answer.status().is_success() {
        bail!(
            "the tenant's admin could not share the server: {}",
            answer.status()
        );
    }
    let ticks = process::clock_ticks();
    let pid = daemon.child.id();
    // The admin's own workspace is open now; one member's call first, so that what every
    // workspace shares (the connection to the shared server, code paths) is counted before.
    let mcp = format!("{}/mcp", daemon.base);
    let first =
        crate::client::McpClient::open_as(&mcp, Shape::Stateless, Some(keys[1].clone())).await?;
    first
        .call("modern__echo", serde_json::json!({"message": "first"}))
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = process::usage(pid, ticks)?;
    let opened = users.saturating_sub(1);
    for key in &keys[2..] {
        let client =
            crate::client::McpClient::open_as(&mcp, Shape::Stateless, Some(key.clone())).await?;
        client
            .call("modern__echo", serde_json::json!({"message": "hello"}))
            .await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = process::usage(pid, ticks)?;
    let kib = |bytes: u64| bytes as f64 / 1024.0;
    let per_workspace = kib(after.rss.saturating_sub(before.rss)) / opened.max(1) as f64;
    let anonymous_per_workspace =
        kib(after.anonymous.saturating_sub(before.anonymous)) / opened.max(1) as f64;
    println!(
        "switchboard-load workspaces: {users} members of one tenant, each calling a server their \
         admin shares once"
    );
    println!();
    println!("| | with two workspaces open | with {opened} more | per workspace |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| RSS | {:.1} MiB | {:.1} MiB | {:.0} KiB |",
        kib(before.rss) / 1024.0,
        kib(after.rss) / 1024.0,
        per_workspace
    );
    println!(
        "| of which anonymous | {:.1} MiB | {:.1} MiB | {:.0} KiB |",
        kib(before.anonymous) / 1024.0,
        kib(after.anonymous) / 1024.0,
        anonymous_per_workspace
    );
    if per_workspace > 100.0 {
        println!("target missed: an open workspace takes {per_workspace:.0} KiB > 100 KiB");
    } else {
        println!("targets: all met");
    }
    Ok(())
}

/// Stateless `echo` calls to `daemons`, each client keeping to one of them and calling with one
/// of `keys`, charged with all of their CPU.
struct Load<'a> {
    daemons: &'a [crate::Daemon],
    keys: &'a [String],
    ticks: f64,
}

impl Load<'_> {
    /// The median of `runs` runs of `calls` calls from `clients` clients.
    async fn measure(&self, clients: usize, calls: usize, runs: usize) -> anyhow::Result<Sample> {
        let urls: Vec<String> = self
            .daemons
            .iter()
            .map(|d| format!("{}/mcp", d.base))
            .collect();
        let targets: Vec<&str> = urls.iter().map(String::as_str).collect();
        let charged: Vec<Charged> = self
            .daemons
            .iter()
            .map(|d| Charged {
                pid: d.child.id(),
                ticks: self.ticks,
            })
            .collect();
        let mut samples = Vec::new();
        for _ in 0..runs.max(1) {
            samples.push(
                crate::measure(
                    &crate::Target {
                        urls: &targets,
                        keys: self.keys,
                        tool: "modern__echo",
                        charged: &charged,
                        timed: None,
                    },
                    Shape::Stateless,
                    clients,
                    calls,
                )
                .await?,
            );
        }
        Ok(median_sample(&samples))
    }
}

/// A sample's cells: calls/s, percentiles, CPU per 1,000 calls, errors.
fn cells(sample: &Sample) -> String {
    format!(
        "{:.0} | {} / {} / {} | {:.0} ms | {}",
        sample.calls_per_second,
        micros(sample.p50),
        micros(sample.p90),
        micros(sample.p99),
        sample.cpu_per_1000 * 1000.0,
        sample.errors,
    )
}

/// Adds tenant `load` with an admin and `users` members through the CLI on `store`; their API
/// keys, the admin's first.
async fn add_users(
    binary: &Path,
    store: &str,
    vault_key: &str,
    users: usize,
) -> anyhow::Result<Vec<String>> {
    let data = tempfile::tempdir()?;
    let cli = |args: Vec<String>| {
        let mut command = tokio::process::Command::new(binary);
        command
            .arg("--data-dir")
            .arg(data.path())
            .args(["--store", store])
            .args(args)
            .env("SWITCHBOARD_VAULT_KEY", vault_key);
        async move {
            let output = command.output().await?;
            if !output.status.success() {
                bail!(
                    "switchboard: {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                );
            }
            Ok(String::from_utf8(output.stdout)?.trim().to_owned())
        }
    };
    let words = |text: &str| text.split(' ').map(str::to_owned).collect::<Vec<_>>();
    cli(words("tenant add load")).await?;
    cli(words("user add load/admin --admin")).await?;
    let mut keys = vec![cli(words("user key load/admin")).await?];
    for n in 0..users {
        cli(words(&format!("user add load/user-{n}"))).await?;
        keys.push(cli(words(&format!("user key load/user-{n}"))).await?);
    }
    Ok(keys)
}
