//! Switchboard's front doors, on axum.
//!
//! The aggregated MCP server ([`mcp`]) at `/mcp` (HTTP+SSE clients: `/sse`; and over stdio), `GET /healthz` (liveness),
//! `GET /api/status` (every server's status and the merged catalog's name collisions, as JSON),
//! and sign-in through the daemon ([`oauth`]: `POST /api/servers/{id}/login`,
//! `GET /oauth/callback`, the client ID metadata document), the rest of the admin API
//! ([`servers`], [`events`], `/metrics`; docs/api.md) and the web console at `/` ([`ui`]).
//!
//! Every request a browser sends for a page is judged by [`origins`] first: only the daemon's
//! own pages, and the browser apps of origins the operator names (`--cors-origin`), may use it.
//! Then it passes an [`Access`] guard. On a loopback listener that is a DNS-rebinding guard: its
//! `Host` must name a loopback address; anything else is refused with 403. A listener on any
//! other address requires an API key (`Authorization: Bearer <key>`, else 401) on everything but
//! `/healthz` and the OAuth redirect and metadata routes.

mod access;
mod activation;
mod api_error;
mod apps;
mod audit;
mod commands;
mod connection_threads;
mod endpoints;
mod events;
mod export;
mod gateway;
mod grants;
pub mod listener;
pub mod mcp;
mod oauth;
mod origins;
mod questions;
mod readiness;
mod router;
mod servers;
mod timer_anchor;
mod ui;
mod wire;
mod workspaces;

pub use oauth::callback_page;
pub use origins::{BrowserOrigins, WebOrigin};
pub use workspaces::{TenantFrom, TokenClaims, Users};

pub use access::Access;
pub use connection_threads::ConnectionThreads;
pub use gateway::{Gateway, GatewayError, callback_url};
pub use router::router;

pub(crate) use access::{Refusal, digest, is_public_path, presented_key, request_is_local};
pub(crate) use api_error::{ApiError, api_error, shutting_down};
pub(crate) use router::{AppState, RouterParts, Workspace, one_workspace, routes};
