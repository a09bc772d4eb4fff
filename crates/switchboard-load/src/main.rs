//! `switchboard-load`: the load harness.
//!
//! It starts two fast Rust fixture servers in this process (one serving 2025-11-25 sessions,
//! one stateless 2026-07-28), starts a real `switchboard serve` (release binary, separate
//! process, its own temporary store) with both plus a few idle servers, and then, for each
//! protocol shape and concurrency, drives the same `echo` tool twice: directly at the fixture,
//! and through Switchboard's `/mcp`. It reports calls/s, p50/p90/p99 latency, errors, the latency
//! Switchboard adds, its CPU seconds per 1,000 relayed calls, its idle and peak RSS, and checks
//! the targets in `docs/benchmarks.md`. Every figure is the median of `--runs` runs.
//!
//! Beside each pair it measures three floors (`relay`): the same calls through a plain one-thread
//! TCP relay, which shows how much of what Switchboard adds this machine's kernel charges any
//! relay; through a plain HTTP reverse proxy on Switchboard's own HTTP stack (hyper), which
//! shows what the HTTP on both sides costs before any MCP work; and through nginx, the fastest
//! HTTP relay people run, against which the targets are set.
//!
//! At one client, the fixtures time each POST they get, so each call's time is split into the
//! part before the upstream, the upstream's own and the part after it ([`Legs`]), for every
//! path alike: which side of the upstream a relay adds its time to.
//!
//! The `everything` load is the 2025-11-25 session shape against a real server instead of the
//! fixture: `@modelcontextprotocol/server-everything` (the TypeScript SDK, answering with SSE),
//! installed by `npm ci --prefix tests/npm`.
//!
//! Loopback only. Exit status 1 when any call failed (every load run must be error-free).

mod client;
mod floors;
mod process;
mod replicas;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use client::{McpClient, Shape};
use floors::RelayKind;
use serde_json::json;
use switchboard_fixtures::{Era, transports};

/// Drive a switchboard daemon and its upstream directly, and compare.
#[derive(Debug, Parser)]
#[command(name = "switchboard-load")]
struct Args {
    /// The switchboard binary (default: `switchboard` next to this program).
    #[arg(long)]
    switchboard: Option<PathBuf>,
    /// Calls per measured run.
    #[arg(long, default_value_t = 5000)]
    calls: usize,
    /// Concurrency levels (clients calling at once), comma-separated.
    #[arg(long, default_value = "1,32", value_delimiter = ',')]
    concurrency: Vec<usize>,
    /// Loads to drive, comma-separated: `stateless` (2026-07-28 against the stateless fixture),
    /// `session` (2025-11-25 against the session fixture), `everything` (2025-11-25 against
    /// the real server-everything).
    #[arg(long, default_value = "stateless,session", value_delimiter = ',')]
    shapes: Vec<Load>,
    /// Runs per measurement; figures are medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Servers configured in the daemon (two serve the load, the rest are connected and idle).
    #[arg(long, default_value_t = 5)]
    servers: usize,
    /// Instead of the load runs, the scale scenario: SERVERSxTOOLS stateless servers (e.g.
    /// `500x50`) all configured at once; reports the time until all are connected, the RSS, and
    /// how long a catalog change takes to reach the daemon's catalog.
    #[arg(long, value_name = "SERVERSxTOOLS")]
    scale: Option<String>,
    /// Instead of the load runs, the replicas scenario: N daemons on one PostgreSQL database
    /// (started here), stateless calls over one and over all of them, and how fast a change
    /// reaches every replica.
    #[arg(long, value_name = "N")]
    replicas: Option<usize>,
    /// Instead of the load runs, the workspaces scenario: one `serve --users` daemon (on a
    /// PostgreSQL database started here) and N members of one tenant, each calling a server
    /// their admin shares once; reports what one open workspace adds to the daemon's RSS.
    #[arg(long, value_name = "N")]
    workspaces: Option<usize>,
    /// Guardrails on the two servers the load calls, to measure what they cost: `redact` (both
    /// pattern sets masked in arguments and results) or `webhook` (that, and an allow-all
    /// webhook on loopback asked before and after each call).
    #[arg(long, value_name = "MODE")]
    guardrails: Option<GuardrailsMode>,
    /// Internal: run as the plain TCP relay to this address (a floor's child process).
    #[arg(long, hide = true, value_name = "ADDR")]
    tcp_relay: Option<std::net::SocketAddr>,
    /// Internal: run as the plain HTTP relay to this address (a floor's child process).
    #[arg(long, hide = true, value_name = "ADDR")]
    http_relay: Option<std::net::SocketAddr>,
}

/// What a load run drives: a protocol shape against an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Load {
    /// Stateless 2026-07-28 requests to the stateless Rust fixture.
    Stateless,
    /// A 2025-11-25 session with the Rust fixture that holds sessions.
    Session,
    /// A 2025-11-25 session with the real `@modelcontextprotocol/server-everything`.
    Everything,
}

impl Load {
    /// The client's protocol shape.
    fn shape(self) -> Shape {
        match self {
            Load::Stateless => Shape::Stateless,
            Load::Session | Load::Everything => Shape::Session,
        }
    }

    /// How the load is named in reports.
    fn label(self) -> &'static str {
        match self {
            Load::Everything => "2025-11-25 session, server-everything",
            load => load.shape().label(),
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    calls: usize,
    errors: usize,
    calls_per_second: f64,
    p50: Duration,
    p90: Duration,
    p99: Duration,
    /// CPU seconds per 1,000 calls of the charged processes (the daemon's, or a relay's).
    cpu_per_1000: f64,
    /// The part of it in user space (their own code and libraries)...
    user_per_1000: f64,
    /// ...and in the kernel.
    system_per_1000: f64,
    /// Their threads' context switches per call.
    switches_per_call: f64,
    /// TCP connections the machine opened per 1,000 calls while they ran
    /// ([`process::tcp_connections_opened`]): none when every client and relay keeps its
    /// connections.
    connections_per_1000: f64,
    /// Where one client's calls spent their time, when the upstream was timed ([`Legs`]).
    legs: Option<Legs>,
}

/// Where a call's time went, p50s over the calls of one client (one at a time) whose upstream,
/// a fixture in this process, timed each POST it got ([`switchboard_fixtures::Exchange`]): from
/// the client's send to the upstream's receipt of the request, the upstream's own time to its
/// answer's last frame, and from there to the client's receipt of the answer. Against the same
/// legs of the direct calls, they tell on which side of the upstream a relay adds its time.
#[derive(Debug, Clone, Copy)]
struct Legs {
    to_upstream: Duration,
    upstream: Duration,
    back: Duration,
    /// Calls timed: those during which exactly one POST reached the upstream.
    timed: usize,
}

impl Legs {
    /// The legs of the calls made in `windows` (each its send and receipt), from the upstream's
    /// `exchanges`; a call during which no POST or several reached the upstream is left out.
    fn of(
        windows: &[(Instant, Instant)],
        exchanges: &mut [switchboard_fixtures::Exchange],
    ) -> Option<Self> {
        exchanges.sort_unstable_by_key(|exchange| exchange.received);
        let mut legs = [const { Vec::new() }; 3];
        for &(sent, received) in windows {
            let first = exchanges.partition_point(|exchange| exchange.received < sent);
            let mut during = exchanges[first..]
                .iter()
                .take_while(|exchange| exchange.received <= received);
            let (Some(exchange), None) = (during.next(), during.next()) else {
                continue;
            };
            if exchange.answered > received {
                continue;
            }
            legs[0].push(exchange.received - sent);
            legs[1].push(exchange.answered - exchange.received);
            legs[2].push(received - exchange.answered);
        }
        let timed = legs[0].len();
        let [to_upstream, upstream, back] = legs.map(|mut leg| {
            leg.sort_unstable();
            percentile(&leg, 0.5)
        });
        (timed > 0).then_some(Self {
            to_upstream,
            upstream,
            back,
            timed,
        })
    }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The process whose CPU a measurement charges (the daemon or the relay), and the clock ticks
/// per second of its `/proc` counters.
#[derive(Debug, Clone, Copy)]
struct Charged {
    pid: u32,
    ticks: f64,
}

impl Charged {
    /// Its CPU seconds in user space and in the kernel, and its context switches, so far.
    fn counters(self) -> anyhow::Result<[f64; 3]> {
        let usage = process::usage(self.pid, self.ticks)?;
        Ok([
            usage.user_seconds,
            usage.system_seconds,
            usage.context_switches as f64,
        ])
    }
}

/// What a measurement drives and charges.
struct Target<'a> {
    /// Where the clients call, spread over these in turn...
    urls: &'a [&'a str],
    /// ...with these API keys in turn, when there are any.
    keys: &'a [String],
    /// The tool they call.
    tool: &'a str,
    /// The processes whose CPU per 1,000 calls is measured over the measured calls.
    charged: &'a [Charged],
    /// The upstream, when it is a fixture of this process that times the POSTs it gets
    /// ([`Legs`]; one client only).
    timed: Option<&'a switchboard_fixtures::FixtureState>,
}

/// Runs `calls` calls of `target`'s tool from `concurrency` clients of `shape`.
async fn measure(
    target: &Target<'_>,
    shape: Shape,
    concurrency: usize,
    calls: usize,
) -> anyhow::Result<Sample> {
    let Target {
        urls,
        keys,
        tool,
        charged,
        timed,
    } = *target;
    // Only one client's calls can be told apart at the upstream (one at a time).
    let timed = timed.filter(|_| concurrency == 1);
    let mut clients = Vec::with_capacity(concurrency);
    for n in 0..concurrency {
        let key = (!keys.is_empty()).then(|| keys[n % keys.len()].clone());
        clients.push(McpClient::open_as(urls[n % urls.len()], shape, key).await?);
    }
    // Warm every connection and code path before measuring, all clients at once: so the
    // relay in between opens as many connections to the upstream as the run will use before
    // it starts, not during it.
    let warming: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let tool = tool.to_owned();
            tokio::spawn(async move {
                for _ in 0..20 {
                    client.call(&tool, json!({"message": "warm"})).await?;
                }
                anyhow::Ok(client)
            })
        })
        .collect();
    let mut clients = Vec::with_capacity(concurrency);
    for warmed in warming {
        clients.push(warmed.await.context("a warming client panicked")??);
    }
    let per_client = (calls / concurrency).max(1);
    let counters = || -> anyhow::Result<[f64; 3]> {
        charged.iter().try_fold([0.0; 3], |sum, c| {
            let [user, system, switches] = c.counters()?;
            Ok([sum[0] + user, sum[1] + system, sum[2] + switches])
        })
    };
    if let Some(upstream) = timed {
        upstream.start_timing();
    }
    let before = counters()?;
    let opened_before = process::tcp_connections_opened()?;
    let started = Instant::now();
    let workers = clients.into_iter().map(|client| {
        let tool = tool.to_owned();
        tokio::spawn(async move {
            let mut windows = Vec::with_capacity(per_client);
            let mut errors = 0;
            for _ in 0..per_client {
                let sent = Instant::now();
                match client.call(&tool, json!({"message": "hello"})).await {
                    Ok(_) => windows.push((sent, Instant::now())),
                    Err(error) => {
                        if errors == 0 {
                            eprintln!("switchboard-load: a call failed: {error:#}");
                        }
                        errors += 1;
                    }
                }
            }
            (windows, errors)
        })
    });
    let mut windows = Vec::with_capacity(per_client * concurrency);
    let mut errors = 0;
    for worker in workers.collect::<Vec<_>>() {
        let (mine, failed) = worker.await.context("a load worker panicked")?;
        windows.extend(mine);
        errors += failed;
    }
    let elapsed = started.elapsed();
    let legs = timed.and_then(|upstream| Legs::of(&windows, &mut upstream.stop_timing()));
    let mut latencies: Vec<Duration> = windows
        .iter()
        .map(|(sent, received)| *received - *sent)
        .collect();
    let total = per_client * concurrency;
    let after = counters()?;
    let per_call = |index: usize| (after[index] - before[index]) / total as f64;
    let opened = process::tcp_connections_opened()?.saturating_sub(opened_before);
    latencies.sort_unstable();
    Ok(Sample {
        calls: total,
        errors,
        calls_per_second: total as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p90: percentile(&latencies, 0.90),
        p99: percentile(&latencies, 0.99),
        cpu_per_1000: (per_call(0) + per_call(1)) * 1000.0,
        user_per_1000: per_call(0) * 1000.0,
        system_per_1000: per_call(1) * 1000.0,
        switches_per_call: per_call(2),
        connections_per_1000: opened as f64 / total as f64 * 1000.0,
        legs,
    })
}

fn median<T: Copy + PartialOrd>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values[values.len() / 2]
}

fn median_sample(samples: &[Sample]) -> Sample {
    Sample {
        calls: samples.iter().map(|s| s.calls).sum(),
        errors: samples.iter().map(|s| s.errors).sum(),
        calls_per_second: median(samples.iter().map(|s| s.calls_per_second).collect()),
        p50: median(samples.iter().map(|s| s.p50).collect()),
        p90: median(samples.iter().map(|s| s.p90).collect()),
        p99: median(samples.iter().map(|s| s.p99).collect()),
        cpu_per_1000: median(samples.iter().map(|s| s.cpu_per_1000).collect()),
        user_per_1000: median(samples.iter().map(|s| s.user_per_1000).collect()),
        system_per_1000: median(samples.iter().map(|s| s.system_per_1000).collect()),
        switches_per_call: median(samples.iter().map(|s| s.switches_per_call).collect()),
        connections_per_1000: median(samples.iter().map(|s| s.connections_per_1000).collect()),
        legs: median_legs(samples.iter().filter_map(|s| s.legs).collect()),
    }
}

/// Each leg's median over the runs that timed their calls.
fn median_legs(legs: Vec<Legs>) -> Option<Legs> {
    (!legs.is_empty()).then(|| Legs {
        to_upstream: median(legs.iter().map(|l| l.to_upstream).collect()),
        upstream: median(legs.iter().map(|l| l.upstream).collect()),
        back: median(legs.iter().map(|l| l.back).collect()),
        timed: legs.iter().map(|l| l.timed).sum(),
    })
}

/// A `switchboard serve` child process, stopped on drop.
struct Daemon {
    child: std::process::Child,
    base: String,
    /// The operator key its admin API wants, if it wants one.
    operator_key: Option<String>,
    _data: tempfile::TempDir,
}

impl Drop for Daemon {
    /// Stops the daemon as a user would (SIGTERM, its graceful shutdown), so that a wrapper
    /// such as callgrind (`scripts/relay-instructions`) sees it exit; killed if it has not
    /// exited within 10 seconds.
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A store several daemons share: its URL and the vault key they all need; they serve many
/// users (`serve --users`), and `operator_key` is the operators'.
#[derive(Clone, Copy)]
struct SharedStore<'a> {
    url: &'a str,
    vault_key: &'a str,
    operator_key: &'a str,
}

/// Starts the daemon with `servers` (on `shared`, else on a store of its own) and waits (up to
/// `limit`) until all are connected; returns it and how long that took from the process start.
async fn start_daemon(
    binary: &std::path::Path,
    servers: &[(String, String)],
    limit: Duration,
    shared: Option<SharedStore<'_>>,
) -> anyhow::Result<(Daemon, Duration)> {
    let data = tempfile::tempdir()?;
    let mut config = String::new();
    for (id, url) in servers {
        config.push_str(&format!("[servers.{id}]\nurl = \"{url}\"\n\n"));
    }
    let config_path = data.path().join("servers.toml");
    std::fs::write(&config_path, config)?;
    let port = free_port()?;
    let started = Instant::now();
    let mut command = std::process::Command::new(binary);
    command.arg("--data-dir").arg(data.path().join("store"));
    // An empty file is no configuration (the daemon refuses it); with no servers, none is given.
    if !servers.is_empty() {
        command.arg("--config").arg(&config_path);
    }
    if let Some(shared) = shared {
        command
            .args(["--store", shared.url])
            .env("SWITCHBOARD_VAULT_KEY", shared.vault_key)
            .env("SWITCHBOARD_API_KEYS", shared.operator_key);
    }
    command.args(["serve", "--listen", &format!("127.0.0.1:{port}")]);
    if shared.is_some() {
        // The users' servers are on loopback, which the operator allows here.
        command.args(["--users", "--allow-upstream-network", "127.0.0.1"]);
    }
    let child = command
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let daemon = Daemon {
        child,
        base: format!("http://127.0.0.1:{port}"),
        operator_key: shared.map(|shared| shared.operator_key.to_owned()),
        _data: data,
    };
    let http = reqwest::Client::new();
    while started.elapsed() < limit {
        if let Ok(status) = status(&http, &daemon).await {
            let connected = status["servers"].as_array().map_or(0, |s| {
                s.iter().filter(|s| s["state"] == "connected").count()
            });
            if connected == servers.len() {
                return Ok((daemon, started.elapsed()));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!(
        "the daemon did not connect all {} servers within {limit:?}",
        servers.len()
    )
}

async fn status(http: &reqwest::Client, daemon: &Daemon) -> anyhow::Result<serde_json::Value> {
    let mut request = http.get(format!("{}/api/status", daemon.base));
    if let Some(key) = &daemon.operator_key {
        request = request.bearer_auth(key);
    }
    Ok(request.send().await?.json().await?)
}

/// The scale scenario: `servers` stateless servers of `tools` tools each.
async fn scale(binary: &std::path::Path, servers: usize, tools: usize) -> anyhow::Result<()> {
    let stop = tokio_util::sync::CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let urls = switchboard_fixtures::wide::serve_many(servers, tools, stop).await?;
    let configured: Vec<(String, String)> = urls
        .iter()
        .enumerate()
        .map(|(i, url)| (format!("s{i:04}"), url.clone()))
        .collect();
    let (daemon, connected_after) =
        start_daemon(binary, &configured, Duration::from_secs(120), None).await?;
    let pid = daemon.child.id();
    let ticks = process::clock_ticks();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let settled = process::usage(pid, ticks)?;

    // A catalog change: one server grows a tool; how long until the daemon's catalog has it.
    let http = reqwest::Client::new();
    let grower = McpClient::open(&urls[0], Shape::Stateless).await?;
    let mut delays = Vec::new();
    for round in 1..=5 {
        let expected = tools + 1 + round; // tool_* plus grow, plus one per round
        let sent = Instant::now();
        grower.call("grow", json!({})).await?;
        loop {
            let now = status(&http, &daemon).await?;
            if now["servers"][0]["tools"] == expected {
                break;
            }
            if sent.elapsed() > Duration::from_secs(10) {
                bail!("the catalog change did not arrive within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        delays.push(sent.elapsed());
    }
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    println!(
        "switchboard-load scale: {servers} servers x {tools} tools ({} tools exposed)",
        servers * (tools + 1)
    );
    println!(
        "| all connected after | RSS when settled | peak RSS | catalog change (median of 5, max) |"
    );
    println!("| --- | --- | --- | --- |");
    let mut sorted = delays.clone();
    sorted.sort();
    println!(
        "| {:.1} s | {:.1} MiB | {:.1} MiB | {:.1} ms, {:.1} ms |",
        connected_after.as_secs_f64(),
        mib(settled.rss),
        mib(process::usage(pid, ticks)?.peak_rss),
        sorted[sorted.len() / 2].as_secs_f64() * 1e3,
        sorted[sorted.len() - 1].as_secs_f64() * 1e3,
    );
    let mut misses = Vec::new();
    if mib(settled.rss) > 300.0 {
        misses.push(format!("RSS {:.1} MiB > 300 MiB", mib(settled.rss)));
    }
    if connected_after > Duration::from_secs(30) {
        misses.push(format!("all connected after {connected_after:?} > 30 s"));
    }
    if sorted[sorted.len() / 2] > Duration::from_millis(50) {
        misses.push("catalog change slower than 50 ms".into());
    }
    if misses.is_empty() {
        println!("targets: all met");
    }
    for miss in misses {
        println!("target missed: {miss}");
    }
    Ok(())
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(target) = args.tcp_relay {
        return floors::serve_tcp(target);
    }
    if let Some(target) = args.http_relay {
        return floors::serve_http(target);
    }
    tokio::runtime::Runtime::new()?.block_on(run(args))
}

/// The same URL with its port replaced by a relay's.
fn through_relay(url: &str, port: u16) -> anyhow::Result<String> {
    let mut url = reqwest::Url::parse(url)?;
    url.set_port(Some(port))
        .map_err(|()| anyhow::anyhow!("{url} takes no port"))?;
    Ok(url.into())
}

/// The socket address a loopback fixture URL names.
fn socket_of(url: &str) -> anyhow::Result<std::net::SocketAddr> {
    let url = reqwest::Url::parse(url)?;
    let host: std::net::IpAddr = url.host_str().context("a host")?.parse()?;
    Ok((host, url.port().context("a port")?).into())
}

async fn run(args: Args) -> anyhow::Result<()> {
    let binary = match args.switchboard.clone() {
        Some(path) => path,
        None => std::env::current_exe()?
            .parent()
            .context("the harness has a directory")?
            .join("switchboard"),
    };
    if let Some(spec) = &args.scale {
        let (servers, tools) = spec
            .split_once('x')
            .and_then(|(s, t)| Some((s.parse().ok()?, t.parse().ok()?)))
            .context("--scale takes SERVERSxTOOLS, e.g. 500x50")?;
        return scale(&binary, servers, tools).await;
    }
    if let Some(users) = args.workspaces {
        return replicas::workspaces(&binary, users).await;
    }
    if let Some(count) = args.replicas {
        return replicas::run(&binary, count, args.calls, &args.concurrency, args.runs).await;
    }
    let ticks = process::clock_ticks();

    let legacy = transports::streamable_http(Era::Legacy).await;
    let modern = transports::streamable_http(Era::Modern).await;
    let everything = args
        .shapes
        .contains(&Load::Everything)
        .then(|| switchboard_fixtures::ServerEverything::start("streamableHttp"));
    let mut servers = vec![
        ("legacy".to_owned(), legacy.url.clone()),
        ("modern".to_owned(), modern.url.clone()),
    ];
    if let Some(everything) = &everything {
        servers.push(("everything".to_owned(), everything.url.clone()));
    }
    for i in servers.len()..args.servers.max(servers.len()) {
        let url = if i % 2 == 0 { &legacy.url } else { &modern.url };
        servers.push((format!("idle-{i}"), url.clone()));
    }
    let (daemon, _) = start_daemon(&binary, &servers, Duration::from_secs(30), None).await?;
    if let Some(mode) = args.guardrails {
        set_guardrails(&daemon, mode).await?;
    }
    let pid = daemon.child.id();
    let charged_daemon = Charged { pid, ticks };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = process::usage(pid, ticks)?;
    let mcp = format!("{}/mcp", daemon.base);

    println!(
        "switchboard-load: {} calls per run, median of {} runs, {} servers connected ({} cores)",
        args.calls,
        args.runs,
        servers.len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "| load | concurrency | direct calls/s | via calls/s | ratio | direct p50 / p90 / p99 | via p50 / p90 / p99 | added p50 | CPU per 1,000 calls | new connections per 1,000 calls, direct / via | errors |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut errors = 0;
    let mut misses = Vec::new();
    let mut floors = Vec::new();
    for &load in &args.shapes {
        let shape = load.shape();
        // The Rust fixtures time the POSTs they get ([`Legs`]); server-everything cannot.
        let (upstream, tool, timed) = match (load, &everything) {
            (Load::Stateless, _) => (&modern.url, "modern__echo", Some(&*modern.state)),
            (Load::Session, _) => (&legacy.url, "legacy__echo", Some(&*legacy.state)),
            (Load::Everything, Some(everything)) => (&everything.url, "everything__echo", None),
            (Load::Everything, None) => bail!("server-everything was not started"),
        };
        let mut relays = Vec::new();
        for kind in RelayKind::ALL {
            let relay = floors::Relay::start(kind, socket_of(upstream)?).await?;
            let url = through_relay(upstream, relay.port)?;
            let charged = Charged {
                pid: relay.pid(),
                ticks,
            };
            relays.push((kind, relay, url, charged));
        }
        for &concurrency in &args.concurrency {
            let mut direct = Vec::new();
            let mut via = Vec::new();
            let mut relayed = vec![Vec::new(); relays.len()];
            for _ in 0..args.runs.max(1) {
                let calls = args.calls;
                let (n, c) = (concurrency, calls);
                let (upstreams, daemons) = ([upstream.as_str()], [mcp.as_str()]);
                let at = Target {
                    urls: &upstreams,
                    keys: &[],
                    tool: "echo",
                    charged: &[],
                    timed,
                };
                direct.push(measure(&at, shape, n, c).await?);
                let daemon = Target {
                    urls: &daemons,
                    tool,
                    charged: std::slice::from_ref(&charged_daemon),
                    ..at
                };
                via.push(measure(&daemon, shape, n, c).await?);
                for ((_, _, url, charged), samples) in relays.iter().zip(&mut relayed) {
                    let urls = [url.as_str()];
                    let charged = std::slice::from_ref(charged);
                    let relay = Target {
                        urls: &urls,
                        charged,
                        ..at
                    };
                    samples.push(measure(&relay, shape, n, c).await?);
                }
            }
            let direct = median_sample(&direct);
            let via = median_sample(&via);
            errors += direct.errors + via.errors;
            let added = via.p50.saturating_sub(direct.p50);
            let ratio = via.calls_per_second / direct.calls_per_second;
            println!(
                "| {} | {concurrency} | {:.0} | {:.0} | {:.2} | {} / {} / {} | {} / {} / {} | {} | {:.0} ms | {:.1} / {:.1} | {} |",
                load.label(),
                direct.calls_per_second,
                via.calls_per_second,
                ratio,
                micros(direct.p50),
                micros(direct.p90),
                micros(direct.p99),
                micros(via.p50),
                micros(via.p90),
                micros(via.p99),
                micros(added),
                via.cpu_per_1000 * 1000.0,
                direct.connections_per_1000,
                via.connections_per_1000,
                direct.errors + via.errors,
            );
            for ((kind, ..), samples) in relays.iter().zip(&relayed) {
                let floor = median_sample(samples);
                errors += floor.errors;
                if *kind == RelayKind::Nginx {
                    misses.extend(against_nginx(load, concurrency, direct, via, floor));
                }
                floors.push((load, concurrency, *kind, direct, via, floor));
            }
        }
    }
    println!();
    println!(
        "The floors: the same calls through a plain TCP relay (one thread, bytes copied, no \
         parsing), a plain HTTP relay (hyper's server and client connections, a single-threaded \
         runtime per core as the daemon runs, no JSON-RPC) and nginx (keep-alive reverse proxy, \
         one worker)"
    );
    println!();
    println!(
        "| load | concurrency | relay | relay calls/s | ratio | relay p50 | relay added p50 | relay CPU per 1,000 calls | relay's new connections per 1,000 calls | Switchboard's added p50 beyond the relay's | Switchboard's CPU beyond the relay's | Switchboard / relay: added p50, CPU, calls/s |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for &(load, concurrency, kind, direct, via, floor) in &floors {
        let floor_added = floor.p50.saturating_sub(direct.p50);
        let via_added = via.p50.saturating_sub(direct.p50);
        println!(
            "| {} | {concurrency} | {} | {:.0} | {:.2} | {} | {} | {:.0} ms | {:.1} | {} | {:.0} ms | {}, {:.1}x, {:.0} % |",
            load.label(),
            kind.label(),
            floor.calls_per_second,
            floor.calls_per_second / direct.calls_per_second,
            micros(floor.p50),
            micros(floor_added),
            floor.cpu_per_1000 * 1000.0,
            floor.connections_per_1000,
            micros(via.p50.saturating_sub(floor.p50)),
            (via.cpu_per_1000 - floor.cpu_per_1000) * 1000.0,
            // A relay whose p50 is not above the upstream's (noise at one client) added
            // nothing to divide by.
            if floor_added.is_zero() {
                "n/a (the relay added nothing measurable)".to_owned()
            } else {
                format!(
                    "{:.1}x",
                    via_added.as_secs_f64() / floor_added.as_secs_f64()
                )
            },
            via.cpu_per_1000 / floor.cpu_per_1000.max(1e-9),
            via.calls_per_second / floor.calls_per_second * 100.0,
        );
    }
    print_legs(&floors);
    println!();
    println!(
        "Where the CPU goes, the daemon's and each relay's (medians of the runs): user space (its \
         own code and libraries) and the kernel (system calls, and on loopback the delivery of \
         what it sends), per 1,000 calls; and its threads' context switches per call (each a \
         sleep and a wake-up, or a preemption)"
    );
    println!();
    println!(
        "| load | concurrency | relay | user CPU per 1,000 calls | kernel CPU per 1,000 calls | context switches per call |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let row = |load: Load, concurrency: usize, label: &str, sample: &Sample| {
        println!(
            "| {} | {concurrency} | {label} | {:.0} ms | {:.0} ms | {:.2} |",
            load.label(),
            sample.user_per_1000 * 1000.0,
            sample.system_per_1000 * 1000.0,
            sample.switches_per_call,
        );
    };
    for (load, concurrency, kind, _, via, floor) in &floors {
        if *kind == RelayKind::ALL[0] {
            row(*load, *concurrency, "Switchboard", via);
        }
        row(*load, *concurrency, kind.label(), floor);
    }
    let end = process::usage(pid, ticks)?;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    println!();
    println!(
        "switchboard RSS: idle {:.1} MiB with {} servers connected; peak {:.1} MiB",
        mib(idle.rss),
        servers.len(),
        mib(end.peak_rss)
    );
    if mib(idle.rss) > 20.0 {
        misses.push(format!("idle RSS {:.1} MiB > 20 MiB", mib(idle.rss)));
    }
    if misses.is_empty() {
        println!("targets: all met");
    } else {
        for miss in &misses {
            println!("target missed: {miss}");
        }
    }
    if errors > 0 {
        bail!("{errors} calls failed; every load run must be error-free");
    }
    Ok(())
}

/// Prints where one client's calls spent their time ([`Legs`]), directly, through Switchboard
/// and through each relay, for every load whose upstream timed them.
fn print_legs(floors: &[(Load, usize, RelayKind, Sample, Sample, Sample)]) {
    let timed: Vec<_> = floors
        .iter()
        .filter_map(|(load, _, kind, direct, via, floor)| {
            Some((*load, *kind, direct.legs?, via.legs?, floor.legs?))
        })
        .collect();
    if timed.is_empty() {
        return;
    }
    println!();
    println!(
        "Where a call's time goes at one client (medians of the runs' p50s), timed in this \
         process: from the client's send to the upstream's receipt of the request, the \
         upstream's own time to its answer's last frame, and from there to the client's receipt; \
         and what each path adds to each leg against the direct calls"
    );
    println!();
    println!(
        "| load | path | to the upstream | upstream | back to the client | added: to the upstream / upstream / back | calls timed |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let signed = |later: Duration, base: Duration| match later.checked_sub(base) {
        Some(more) => format!("+{}", micros(more)),
        None => format!("-{}", micros(base - later)),
    };
    let row = |load: Load, path: &str, legs: Legs, direct: Option<Legs>| {
        let added = match direct {
            Some(direct) => format!(
                "{} / {} / {}",
                signed(legs.to_upstream, direct.to_upstream),
                signed(legs.upstream, direct.upstream),
                signed(legs.back, direct.back)
            ),
            None => "(the base)".to_owned(),
        };
        println!(
            "| {} | {path} | {} | {} | {} | {added} | {} |",
            load.label(),
            micros(legs.to_upstream),
            micros(legs.upstream),
            micros(legs.back),
            legs.timed
        );
    };
    for (load, kind, direct, via, floor) in timed {
        if kind == RelayKind::ALL[0] {
            row(load, "direct", direct, None);
            row(load, "Switchboard", via, Some(direct));
        }
        row(load, kind.label(), floor, Some(direct));
    }
}

/// The targets of `docs/benchmarks.md` that Switchboard (`via`) misses against nginx (`floor`)
/// on `load` at `concurrency`, both relaying to the upstream called `direct`ly: at one client,
/// an added p50 at most 1.5 times nginx's (and under 0.3 ms in front of server-everything); at
/// 32 or more, CPU per call at most twice nginx's and at least 90 % of its calls/s.
fn against_nginx(
    load: Load,
    concurrency: usize,
    direct: Sample,
    via: Sample,
    floor: Sample,
) -> Vec<String> {
    let mut misses = Vec::new();
    let added = via.p50.saturating_sub(direct.p50);
    let nginx_added = floor.p50.saturating_sub(direct.p50);
    if concurrency == 1 && added.as_secs_f64() > 1.5 * nginx_added.as_secs_f64() {
        misses.push(format!(
            "{}: added p50 {} > 1.5 x nginx's {}",
            load.label(),
            micros(added),
            micros(nginx_added)
        ));
    }
    if concurrency == 1 && load == Load::Everything && added > Duration::from_micros(300) {
        misses.push(format!(
            "{}: added p50 {} > 300 µs",
            load.label(),
            micros(added)
        ));
    }
    if concurrency >= 32 {
        if via.cpu_per_1000 > 2.0 * floor.cpu_per_1000 {
            misses.push(format!(
                "{} at {concurrency}: CPU per call {:.1}x nginx's > 2x",
                load.label(),
                via.cpu_per_1000 / floor.cpu_per_1000.max(1e-9)
            ));
        }
        if via.calls_per_second < 0.9 * floor.calls_per_second {
            misses.push(format!(
                "{} at {concurrency}: {:.0} calls/s, {:.0} % of nginx's < 90 %",
                load.label(),
                via.calls_per_second,
                via.calls_per_second / floor.calls_per_second * 100.0
            ));
        }
    }
    misses
}

/// What guardrails the load's servers get (`--guardrails`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum GuardrailsMode {
    /// Both pattern sets masked in arguments and results.
    Redact,
    /// An allow-all webhook on loopback asked before and after each call, and no masking.
    Webhook,
    /// Both: the masking and the webhook.
    Both,
}

/// Gives the two servers the load calls the guardrails of `mode` (a webhook is started here:
/// it answers every call `allow`).
async fn set_guardrails(daemon: &Daemon, mode: GuardrailsMode) -> anyhow::Result<()> {
    let mut guardrails = json!({});
    if matches!(mode, GuardrailsMode::Redact | GuardrailsMode::Both) {
        guardrails["redact_arguments"] = json!(["secrets", "personal"]);
        guardrails["redact_results"] = json!(["secrets", "personal"]);
    }
    if matches!(mode, GuardrailsMode::Webhook | GuardrailsMode::Both) {
        let app = axum::Router::new().route(
            "/check",
            axum::routing::post(|| async { axum::Json(json!({"action": "allow"})) }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        guardrails["webhook"] = json!({"url": format!("http://{}/check", listener.local_addr()?)});
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
    let http = reqwest::Client::new();
    for server in ["legacy", "modern"] {
        let mut request = http
            .patch(format!("{}/api/servers/{server}", daemon.base))
            .json(&json!({"guardrails": guardrails}));
        if let Some(key) = &daemon.operator_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await?;
        anyhow::ensure!(
            response.status().is_success(),
            "setting {server}'s guardrails: {}",
            response.text().await?
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_fixtures::Exchange;

    /// Instants `micros` after a common start.
    fn at(start: Instant, micros: u64) -> Instant {
        start + Duration::from_micros(micros)
    }

    #[test]
    fn a_call_is_split_at_the_one_post_its_upstream_got_during_it() {
        let t0 = Instant::now();
        let exchange = |received, answered| Exchange {
            received: at(t0, received),
            answered: at(t0, answered),
        };
        // Given out of order, as the fixture's connections may push them.
        let mut exchanges = vec![
            exchange(1_030, 1_080),
            exchange(10, 60),
            exchange(2_010, 2_020),
            exchange(2_040, 2_050),
            exchange(3_010, 3_200),
        ];
        let windows = [
            // One POST during it: 10 µs to the upstream, 50 there, 30 back.
            (at(t0, 0), at(t0, 90)),
            // One POST: 30 / 50 / 40.
            (at(t0, 1_000), at(t0, 1_120)),
            // Two POSTs during it (another client's, a ping): which one was the call's is
            // not known, so it is left out.
            (at(t0, 2_000), at(t0, 2_100)),
            // Its POST answered after the client had its answer: not the call's.
            (at(t0, 3_000), at(t0, 3_100)),
            // No POST at all.
            (at(t0, 4_000), at(t0, 4_100)),
        ];
        let legs = Legs::of(&windows, &mut exchanges).expect("two calls timed");
        assert_eq!(legs.timed, 2);
        // The p50 of two is the upper one (the rank rounds half up).
        assert_eq!(legs.to_upstream, Duration::from_micros(30));
        assert_eq!(legs.upstream, Duration::from_micros(50));
        assert_eq!(legs.back, Duration::from_micros(40));
    }

    #[test]
    fn calls_no_post_can_be_told_of_give_no_legs() {
        let t0 = Instant::now();
        let windows = [(at(t0, 0), at(t0, 100))];
        assert!(Legs::of(&windows, &mut []).is_none());
    }
}
