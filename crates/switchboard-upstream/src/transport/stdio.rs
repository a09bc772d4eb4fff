//! Starting a stdio MCP server as a child process.
//!
//! The child gets the configured arguments, environment and working directory (and of the
//! daemon's environment only what [`crate::children`] lets through, confined as it says), runs in
//! its own process group (so `npx`/`uvx` wrappers and their children are signalled together), and has its
//! stderr read line by line into Switchboard's log. The last lines are kept so that a server that
//! dies can be explained ("exited: Error: Cannot find module ..."), and how it ended (its exit
//! code, or the signal that killed it) is recorded when it is reaped ([`ChildExit`]). Shutdown
//! is rmcp's sequence: close stdin, wait, SIGTERM, wait, SIGKILL.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use switchboard_core::sync::lock;

use process_wrap::tokio::{ChildWrapper, CommandWrap, CommandWrapper, ProcessGroup};
use rmcp::transport::TokioChildProcess;
use switchboard_core::NamedValue;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::error::{ProcessEnd, UpstreamError};

const STDERR_TAIL_LINES: usize = 20;
/// Longer stderr lines are split.
const MAX_STDERR_LINE_BYTES: usize = 8 * 1024;

/// Lines of one child's stderr logged at info per window; the rest go to debug and are counted.
const LOGGED_LINES_PER_WINDOW: u32 = 20;
/// The window [`LOGGED_LINES_PER_WINDOW`] is counted over.
const LOG_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

/// How much of a child's stderr the log takes at info: a server that floods its stderr must
/// not flood the daemon's log (or its disk) with it. Lines beyond the window's share are logged
/// at debug only, and how many there were is said at info when the window ends.
#[derive(Debug, Default)]
struct LogBudget {
    window: Option<tokio::time::Instant>,
    logged: u32,
    held_back: u64,
}

/// One server's budget, shared by every process it is started as (a connection may start it
/// more than once, and a crashing one restarts).
type SharedBudget = Arc<Mutex<LogBudget>>;

impl LogBudget {
    /// The budget of server `server`.
    fn of(server: &str) -> SharedBudget {
        static BUDGETS: std::sync::LazyLock<
            Mutex<std::collections::HashMap<String, SharedBudget>>,
        > = std::sync::LazyLock::new(Mutex::default);
        lock(&BUDGETS).entry(server.to_owned()).or_default().clone()
    }

    /// Whether the next line is logged at info.
    fn admit(&mut self, server: &str) -> bool {
        let now = tokio::time::Instant::now();
        if self.window.is_none_or(|start| now >= start + LOG_WINDOW) {
            self.say_dropped(server);
            self.window = Some(now);
            self.logged = 0;
        }
        if self.logged < LOGGED_LINES_PER_WINDOW {
            self.logged += 1;
            true
        } else {
            self.held_back += 1;
            false
        }
    }

    /// When the window holding back lines ends, if it holds any back.
    fn window_end(&self) -> Option<tokio::time::Instant> {
        (self.held_back > 0)
            .then_some(self.window)
            .flatten()
            .map(|start| start + LOG_WINDOW)
    }

    /// Says at info how many lines were held back, if any.
    fn say_dropped(&mut self, server: &str) {
        if self.held_back > 0 {
            tracing::info!(
                target: "switchboard::upstream::stderr",
                server,
                "{} more lines of its stderr were logged at debug only (at most {LOGGED_LINES_PER_WINDOW} every {} s at info)",
                self.held_back,
                LOG_WINDOW.as_secs()
            );
            self.held_back = 0;
        }
    }
}

/// How the last process a connection started ended, once it was reaped (rmcp reaps a child
/// when its transport is dropped; the wrapper [`RecordExit`] sees the status go by).
#[derive(Debug, Clone, Default)]
pub struct ChildExit(Arc<Mutex<Arc<tokio::sync::watch::Sender<Option<ProcessEnd>>>>>);

impl ChildExit {
    /// A fresh record for a process about to start (an earlier one's end is forgotten).
    fn renewed(&self) -> Arc<tokio::sync::watch::Sender<Option<ProcessEnd>>> {
        let fresh = Arc::new(tokio::sync::watch::channel(None).0);
        *lock(&self.0) = fresh.clone();
        fresh
    }

    /// How the process ended, waiting for it to be reaped at most `limit`.
    pub async fn within(&self, limit: std::time::Duration) -> Option<ProcessEnd> {
        let mut ended = lock(&self.0).subscribe();
        let reaped = tokio::time::timeout(limit, ended.wait_for(Option::is_some)).await;
        reaped
            .ok()
            .and_then(|ended| ended.ok().and_then(|end| *end))
    }
}

/// A process-wrap wrapper recording how the child ended when it is waited for.
#[derive(Debug)]
struct RecordExit(Arc<tokio::sync::watch::Sender<Option<ProcessEnd>>>);

impl CommandWrapper for RecordExit {
    fn wrap_child(
        &mut self,
        inner: Box<dyn ChildWrapper>,
        _core: &CommandWrap,
    ) -> std::io::Result<Box<dyn ChildWrapper>> {
        Ok(Box::new(RecordingChild {
            inner,
            ended: self.0.clone(),
        }))
    }
}

/// A child that records its end when waited for (see [`RecordExit`]).
#[derive(Debug)]
struct RecordingChild {
    inner: Box<dyn ChildWrapper>,
    ended: Arc<tokio::sync::watch::Sender<Option<ProcessEnd>>>,
}

impl RecordingChild {
    fn record(&self, status: std::process::ExitStatus) {
        self.record_end(ProcessEnd::of(status));
    }

    fn record_end(&self, end: Option<ProcessEnd>) {
        self.ended.send_if_modified(|kept| {
            let first = kept.is_none() && end.is_some();
            if first {
                *kept = end;
            }
            first
        });
    }
}

impl ChildWrapper for RecordingChild {
    fn inner(&self) -> &dyn ChildWrapper {
        self.inner.as_ref()
    }

    fn inner_mut(&mut self) -> &mut dyn ChildWrapper {
        self.inner.as_mut()
    }

    fn into_inner(self: Box<Self>) -> Box<dyn ChildWrapper> {
        self.inner
    }

    /// Kills and waits. A child that already ended keeps its own end; one still running that
    /// this kill ends was stopped by Switchboard, not killed by a signal of its own.
    fn kill(&mut self) -> Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + '_> {
        Box::new(async {
            if let Ok(Some(_)) = self.try_wait() {
                return Ok(());
            }
            let _ = self.start_kill();
            let status = self.inner.wait().await?;
            match ProcessEnd::of(status) {
                Some(ProcessEnd::Signal(libc::SIGKILL)) => {
                    self.record_end(Some(ProcessEnd::Stopped))
                }
                end => self.record_end(end),
            }
            Ok(())
        })
    }

    fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        let status = self.inner.try_wait()?;
        if let Some(status) = status {
            self.record(status);
        }
        Ok(status)
    }

    fn wait(
        &mut self,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<Output = std::io::Result<std::process::ExitStatus>> + Send + '_,
        >,
    > {
        Box::pin(async {
            let status = self.inner.wait().await?;
            self.record(status);
            Ok(status)
        })
    }
}

/// The last lines a child wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = lock(&self.0);
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        lock(&self.0).iter().cloned().collect()
    }

    /// The line that says best why the process failed, for error messages: npm's first
    /// `npm error` line that says what went wrong (not its `code`, nor its closing "A complete
    /// log of this run can be found in ..."), else the last non-empty line (where Python's
    /// traceback and most programs put the reason).
    pub fn reason(&self) -> Option<String> {
        let lines = self.lines();
        let npm_reason = lines.iter().find(|line| {
            let Some(said) = ["npm error ", "npm ERR! "]
                .iter()
                .find_map(|prefix| line.trim_start().strip_prefix(prefix))
            else {
                return false;
            };
            let said = said.trim();
            !said.is_empty()
                && !said.starts_with("code ")
                && !said.starts_with("errno ")
                && !said.starts_with("A complete log of this run")
                && !said.starts_with("Log files were not written")
        });
        npm_reason
            .or_else(|| lines.iter().rev().find(|l| !l.trim().is_empty()))
            .cloned()
    }
}

/// What a child is started with: its definition's command line, environment values and working
/// directory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildCommand<'a> {
    /// The program.
    pub command: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The definition's environment values.
    pub env: &'a [NamedValue],
    /// The working directory, if not the daemon's.
    pub cwd: Option<&'a std::path::Path>,
}

/// Spawns the server process under `policy`, starts copying its stderr into the log and into
/// `tail`, and records how it ends in `exit`.
pub(crate) fn spawn(
    server: &str,
    child: ChildCommand<'_>,
    policy: &crate::children::ChildPolicy,
    tail: &StderrTail,
    exit: &ChildExit,
) -> Result<TokioChildProcess, UpstreamError> {
    let command = child.command;
    let mut cmd = tokio::process::Command::new(command);
    // Switchboard's own secrets are never handed to third-party server processes: a child gets a
    // fixed set of the daemon's variables, those the operator passes through, and its own.
    cmd.args(child.args)
        .env_clear()
        .envs(policy.inherited_environment())
        .envs(child.env.iter().map(|v| (&v.name, &v.value)))
        .kill_on_drop(true);
    if let Some(dir) = child.cwd {
        cmd.current_dir(dir);
    }
    policy
        .sandbox
        .confine(&mut cmd)
        .map_err(|error| UpstreamError::Spawn {
            command: command.to_owned(),
            error: std::io::Error::other(error),
        })?;
    let mut wrapped = CommandWrap::from(cmd);
    wrapped.wrap(ProcessGroup::leader());
    wrapped.wrap(RecordExit(exit.renewed()));
    let (child, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| UpstreamError::Spawn {
            command: command.to_owned(),
            error,
        })?;
    if let Some(stderr) = stderr {
        let tail = tail.clone();
        let server = server.to_owned();
        tokio::spawn(async move {
            // Read to EOF whatever the bytes are: a child whose stderr pipe fills up blocks.
            let mut reader = BufReader::new(stderr);
            let mut buffer = Vec::new();
            let budget = LogBudget::of(&server);
            loop {
                let mut limited = (&mut reader).take(MAX_STDERR_LINE_BYTES as u64);
                let read = limited.read_until(b'\n', &mut buffer);
                // While lines are held back, say how many once the window ends, even if the
                // child then falls silent. (A line read in part meanwhile stays in `buffer`.)
                let window_end = lock(&budget).window_end();
                let read = match window_end {
                    Some(end) => tokio::select! {
                        read = read => read,
                        () = tokio::time::sleep_until(end) => {
                            lock(&budget).say_dropped(&server);
                            continue;
                        }
                    },
                    None => read.await,
                };
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buffer).trim_end().to_owned();
                        let admitted = lock(&budget).admit(&server);
                        match admitted {
                            true => {
                                tracing::info!(target: "switchboard::upstream::stderr", server, "{line}")
                            }
                            false => {
                                tracing::debug!(target: "switchboard::upstream::stderr", server, "{line}")
                            }
                        }
                        tail.push(line);
                        buffer.clear();
                    }
                }
            }
            lock(&budget).say_dropped(&server);
        });
    }
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_npm_gives_is_its_first_telling_error_line() {
        let tail = StderrTail::default();
        for line in [
            "npm error code E404",
            "npm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fnope - Not found",
            "npm error 404",
            "npm error A complete log of this run can be found in: /root/.npm/_logs/x.log",
        ] {
            tail.push(line.into());
        }
        assert_eq!(
            tail.reason().unwrap(),
            "npm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fnope - Not found"
        );
        let python = StderrTail::default();
        for line in [
            "Traceback (most recent call last):",
            "  File \"/srv/errors.py\", line 1, in <module>",
            "ModuleNotFoundError: No module named 'mcp'",
            "",
        ] {
            python.push(line.into());
        }
        assert_eq!(
            python.reason().unwrap(),
            "ModuleNotFoundError: No module named 'mcp'"
        );
    }
}
