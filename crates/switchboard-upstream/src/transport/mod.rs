//! The transports a session runs over, one module each: what carries a server's messages, apart
//! from what the messages mean (the session, in the crate's other modules).
//!
//! - Streamable HTTP with sessions (2025-03-26 .. 2025-11-25): rmcp's client worker over our
//!   status-aware HTTP client ([`http_client`]), whose plain `http://` requests go on connections
//!   the clients of one origin hold together ([`plain_http`], `held_connections`);
//! - stateless Streamable HTTP (2026-07-28): each message one POST ([`stateless`], with the
//!   SEP-2243 request headers of `request_headers`);
//! - HTTP+SSE (2024-11-05): [`legacy_sse`];
//! - WebSocket: [`websocket`];
//! - stdio child processes: [`stdio`];
//! - and the bounded SSE reader every HTTP transport reads streams with ([`sse`]).

pub(crate) mod held_connections;
pub mod http_client;
pub mod legacy_sse;
pub mod plain_http;
mod request_headers;
pub mod sse;
pub(crate) mod stateless;
pub mod stdio;
pub mod websocket;
