//! The commands, a module for each group of the command line ([`crate::cli::Command`]), and
//! what they share: how they print and how they read what was typed.

pub(crate) mod approved_commands;
pub(crate) mod call;
pub(crate) mod endpoints;
pub(crate) mod grants;
pub(crate) mod listings;
pub(crate) mod login;
pub(crate) mod serve;
pub(crate) mod server_settings;
pub(crate) mod servers;
pub(crate) mod stdio;
pub(crate) mod tenancy;

use anyhow::Context;
use switchboard_core::ServerId;

/// Exit code for a command that failed, or a tool call that returned `isError`.
pub(crate) const EXIT_FAILURE: i32 = 1;

/// Said after a change to the servers: it reaches a running daemon by itself.
pub(crate) const DAEMON_PICKS_IT_UP: &str =
    "A running `switchboard serve` on this store applies it within seconds (its --store-check).";

/// Prints `value` as indented JSON (what `--json` asks for).
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The server id the user typed, or why it is none.
pub(crate) fn parse_id(id: &str) -> anyhow::Result<ServerId> {
    ServerId::new(id).map_err(Into::into)
}

/// `<server>/<name>` split in two, or an error showing `shape`.
pub(crate) fn split_target<'a>(target: &'a str, shape: &str) -> anyhow::Result<(&'a str, &'a str)> {
    target
        .split_once('/')
        .filter(|(s, t)| !s.is_empty() && !t.is_empty())
        .with_context(|| format!("the target must be {shape}"))
}
