//! The transports a session runs over, one module each: what carries a server's messages, apart
//! from what the messages mean (the session, in the crate's other modules).
//!
//! - Streamable HTTP with sessions (2025-03-26 .. 2025-11-25): rmcp's client worker over our
//!   status-aware HTTP client ([`http_client`]), whose plain `http://` requests go on connections
//!   the clients of one origin hold together ([`plain_http`], `held_connections`, with names
//!   resolved by `dns`); every HTTP transport reports its failures as an [`http_failure`];
//! - stateless Streamable HTTP (2026-07-28): each message one POST ([`stateless`], with the
//!   SEP-2243 request headers of `request_headers`);
//! - HTTP+SSE (2024-11-05): [`legacy_sse`];
//! - WebSocket: [`websocket`];
//! - stdio child processes: [`stdio`];
//! - and the bounded SSE reader every HTTP transport reads streams with ([`sse`]).

mod dns;
pub(crate) mod held_connections;
pub(crate) mod http_client;
pub(crate) mod http_failure;
pub(crate) mod legacy_sse;
pub(crate) mod plain_http;
mod request_headers;
pub(crate) mod sse;
pub(crate) mod stateless;
pub(crate) mod stdio;
pub(crate) mod websocket;

// Dependencies among these point one way, down: `http_client` uses `plain_http`, which uses
// `held_connections`; all three report failures as an `http_failure`, and the pools' connector
// resolves names through `dns`; those two use no other module of the crate.
