//! What can go wrong when the hub is asked to do something, in one enum.

use std::time::Duration;

use switchboard_core::{ConnectionState, ServerId};

use crate::Limited;

/// Errors from the hub.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// No server with this id is running in the hub.
    #[error("server '{0}' is not configured or not enabled")]
    UnknownServer(ServerId),
    /// The server is known but not connected right now.
    #[error("server '{server}' is not connected ({state}){}", .reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    NotConnected {
        /// The server.
        server: ServerId,
        /// Its state.
        state: ConnectionState,
        /// Why, if known.
        reason: Option<String>,
    },
    /// The tool's policy does not allow this caller.
    #[error("{refused} (server '{server}')")]
    CallerRefused {
        /// The server.
        server: ServerId,
        /// What was refused.
        refused: switchboard_core::CallerRefused,
    },
    /// The store could not be read or written, or refused the change (no such server, a
    /// taken id).
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
    /// A change was refused before anything was written.
    #[error("{0}")]
    Invalid(String),
    /// A rate limit refuses the call for now.
    #[error("rate limit exceeded: {what} are limited to {limit}; try again in {} ms", .retry_after.as_millis().max(1))]
    RateLimited {
        /// What the limit is on.
        what: Limited,
        /// The limit.
        limit: switchboard_core::RateLimit,
        /// How long until a call may pass.
        retry_after: Duration,
    },
    /// The tool exists but the user disabled it.
    #[error("tool '{tool}' of server '{server}' is disabled")]
    ToolDisabled {
        /// The server.
        server: ServerId,
        /// The tool.
        tool: String,
    },
    /// The caller may not define this (a command of their own, an address the network rules
    /// refuse).
    #[error("{0}")]
    Forbidden(String),
}
