//! Switchboard's own MCP server (`/mcp` and `switchboard stdio`), driven by real clients: an
//! rmcp-based client (Switchboard's own connector, which speaks 2026-07-28 to it) and the
//! official TypeScript SDK client (2025-11-25 sessions), in front of real and fixture servers.
//!
//! One test binary (each file of `tests/` is a binary of its own, linking every dependency again),
//! a module per feature it proves; `support` holds what they share.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

// What the daemon's integration tests share, one directory up.
#[path = "../common/mod.rs"]
mod common;
mod support;

mod activation;
mod cancellation;
mod catalog;
mod connection_pool;
mod deferred_view;
mod eras;
mod legacy_sse;
mod real_clients;
mod resumable_streams;
mod robustness;
mod session_short_path;
mod sessions;
mod stateless;
mod subscriptions;
mod tasks;
mod tool_policies;
