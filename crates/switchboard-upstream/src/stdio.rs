//! Starting a stdio MCP server as a child process.
//!
//! The child gets the configured arguments, environment and working directory (and of the
//! daemon's environment only what [`crate::children`] lets through, confined as it says), runs in
//! its own process group (so `npx`/`uvx` wrappers and their children are signalled together), and has its
//! stderr read line by line into Switchboard's log. The last lines are kept so that a server that
//! dies can be explained ("exited: Error: Cannot find module ..."). Shutdown is rmcp's sequence:
//! close stdin, wait, SIGTERM, wait, SIGKILL.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::transport::TokioChildProcess;
use switchboard_core::NamedValue;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::error::UpstreamError;

const STDERR_TAIL_LINES: usize = 20;
/// Longer stderr lines are split.
const MAX_STDERR_LINE_BYTES: usize = 8 * 1024;

/// The last lines a child wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The last non-empty line, for error messages.
    pub fn last_line(&self) -> Option<String> {
        self.lines()
            .into_iter()
            .rev()
            .find(|l| !l.trim().is_empty())
    }
}

/// What a child is started with: its definition's command line, environment values and working
/// directory.
#[derive(Debug, Clone, Copy)]
pub struct ChildCommand<'a> {
    /// The program.
    pub command: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The definition's environment values.
    pub env: &'a [NamedValue],
    /// The working directory, if not the daemon's.
    pub cwd: Option<&'a std::path::Path>,
}

/// Spawns the server process under `policy` and starts copying its stderr into the log and into
/// `tail`.
pub fn spawn(
    server: &str,
    child: ChildCommand<'_>,
    policy: &crate::children::ChildPolicy,
    tail: &StderrTail,
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
            loop {
                buffer.clear();
                match (&mut reader)
                    .take(MAX_STDERR_LINE_BYTES as u64)
                    .read_until(b'\n', &mut buffer)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buffer).trim_end().to_owned();
                        tracing::info!(target: "switchboard::upstream::stderr", server, "{line}");
                        tail.push(line);
                    }
                }
            }
        });
    }
    Ok(child)
}
