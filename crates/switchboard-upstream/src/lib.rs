//! Talking to one upstream MCP server.
//!
//! This crate turns a [`ServerDefinition`](switchboard_core::ServerDefinition) into a live,
//! initialised MCP client session, whatever the server's transport and protocol era:
//! Streamable HTTP (2025-03-26 .. 2025-11-25 with sessions, and stateless 2026-07-28), the
//! deprecated HTTP+SSE transport, WebSocket and stdio. rmcp provides the MCP model, the client
//! service and the Streamable HTTP and stdio transports; the era probe, the status-aware HTTP
//! client, the HTTP+SSE and WebSocket transports (every transport is in the crate's `transport` module)
//! and the request helpers are ours.
//!
//! The modules are private; what other crates use is re-exported here, and [`wire`] (the
//! message decoders and encoders, read as `wire::client_message`) is the one public module
//! (`docs/architecture.md`, "Conventions").

mod children;
mod connect;
mod direct;
mod error;
// Logging, sampling and roots are deprecated in 2026-07-28 but legacy servers still use them.
#[allow(deprecated)]
mod handler;
#[allow(deprecated)]
mod input_requests;
mod late_discover;
mod limits;
mod observe;
mod tap;
mod transport;
mod upstream;
pub mod wire;

pub use children::{ChildPolicy, ChildSandbox, SandboxError, SandboxMode};
pub use connect::{BuiltinServers, ConnectOptions, Connection, Session, auth_challenge, connect};
pub use direct::{CallerPolling, DirectReply};
pub use error::{ProcessEnd, UpstreamError};
pub use handler::{InputPolicy, ServerLog, UpstreamEvent, relay_capabilities_for};
pub use input_requests::InputResponder;
pub use observe::{CallObserver, CallOutcome, CallRecord};
pub use tap::{Direction, MessageTap};
pub use transport::held_connections::HeldConnections;
pub use transport::http_client::InvalidHeader;
pub use transport::http_failure::HttpFailure;
pub use transport::plain_http::HttpClients;
pub use transport::sse::{MAX_SSE_EVENT_BYTES, bounded_sse};
pub use transport::stdio::{ChildExit, StderrTail};
pub use transport::websocket::{WebSocketError, WebSocketTransport};
pub use upstream::{CallContext, Progress, UNKNOWN_REQUEST_STATE, Upstream};

/// The MCP model types (rmcp), re-exported so that higher layers name one version of them.
pub use rmcp::model as rmcp_model;
