//! Switchboard's front doors, on axum.
//!
//! The aggregated MCP server ([`mcp`]) at `/mcp` (and over stdio), `GET /healthz` (liveness),
//! `GET /api/status` (every server's status and the merged catalog's name collisions, as JSON),
//! and sign-in through the daemon ([`oauth`]: `POST /api/servers/{id}/login`,
//! `GET /oauth/callback`, the client ID metadata document). The rest of the admin API and the
//! web UI are built on this router.
//!
//! Every request passes a DNS-rebinding guard: its `Host` must name a loopback address and an
//! `Origin`, when present, must be a loopback origin; anything else is refused with 403. (API keys
//! for non-loopback use arrive with the admin API.)

pub mod mcp;
mod oauth;

pub use oauth::callback_page;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use switchboard_hub::{Hub, ServerStatus};

/// Errors from serving.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// The server failed while running.
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

/// The body of `GET /api/status`.
#[derive(Debug, Serialize)]
pub struct StatusResponse {
    /// Switchboard's version.
    pub version: &'static str,
    /// Every server.
    pub servers: Vec<ServerStatus>,
    /// Names more than one server exposes, withheld from the aggregated MCP server.
    pub collisions: Vec<switchboard_core::exposure::Collision>,
}

/// What every route shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) hub: Arc<Hub>,
    /// This daemon's OAuth redirect URI.
    pub(crate) callback_url: String,
    pub(crate) logins: Arc<oauth::PendingLogins>,
}

/// The router with every front door; `addr` is where it is served (for the OAuth redirect URI).
/// Cancelling `stop` ends every MCP session and stream.
pub fn router(
    hub: Arc<Hub>,
    addr: SocketAddr,
    stop: tokio_util::sync::CancellationToken,
) -> Router {
    let mcp = mcp::http::service(mcp::Shared::new(hub.clone()), stop);
    let state = AppState {
        hub,
        callback_url: callback_url(addr),
        logins: Arc::default(),
    };
    Router::new()
        .merge(
            Router::new()
                .route_service(mcp::http::MCP_PATH, mcp)
                .layer(middleware::from_fn(mcp::http::check_body)),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/status", get(status))
        .route("/api/servers/{id}/login", post(oauth::start_login))
        .route(oauth::CALLBACK_PATH, get(oauth::callback))
        .route("/oauth/client-metadata.json", get(oauth::client_metadata))
        .layer(middleware::from_fn(refuse_foreign_hosts))
        .with_state(state)
}

/// The OAuth redirect URI of a daemon listening on `addr`.
pub fn callback_url(addr: SocketAddr) -> String {
    format!("http://{addr}{}", oauth::CALLBACK_PATH)
}

/// Whether `host` (a `Host` value or an origin's host, with or without port) is loopback.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn is_loopback_origin(origin: &str) -> bool {
    origin
        .split_once("://")
        .is_some_and(|(scheme, host)| matches!(scheme, "http" | "https") && is_loopback_host(host))
}

fn request_is_local(headers: &HeaderMap) -> bool {
    let host_ok = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(is_loopback_host);
    let origin_ok = headers
        .get(header::ORIGIN)
        .map(|o| o.to_str().is_ok_and(is_loopback_origin))
        .unwrap_or(true);
    host_ok && origin_ok
}

/// DNS-rebinding defence: a page on another site that resolves its own name to 127.0.0.1 still
/// sends its own `Host` and `Origin`, which this refuses.
async fn refuse_foreign_hosts(request: Request, next: Next) -> Response {
    if request_is_local(request.headers()) {
        next.run(request).await
    } else {
        (
            StatusCode::FORBIDDEN,
            "forbidden: not a loopback Host or Origin\n",
        )
            .into_response()
    }
}

async fn status(State(app): State<AppState>) -> Json<StatusResponse> {
    Json(StatusResponse {
        version: env!("CARGO_PKG_VERSION"),
        servers: app.hub.status(),
        collisions: app.hub.exposed().collisions().cloned().collect(),
    })
}

/// A bound listener, so callers learn the real port (for `:0`) before serving.
pub struct Gateway {
    listener: tokio::net::TcpListener,
}

impl Gateway {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr) -> Result<Self, GatewayError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|error| GatewayError::Bind { addr, error })?;
        Ok(Self { listener })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` completes.
    pub async fn serve(
        self,
        hub: Arc<Hub>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        let addr = self.listener.local_addr().map_err(GatewayError::Serve)?;
        let stop = tokio_util::sync::CancellationToken::new();
        let streams = stop.clone();
        axum::serve(self.listener, router(hub, addr, stop))
            .with_graceful_shutdown(async move {
                shutdown.await;
                // Long-lived SSE streams would hold the graceful shutdown open.
                streams.cancel();
            })
            .await
            .map_err(GatewayError::Serve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_loopback_hosts_and_origins_pass() {
        for host in [
            "127.0.0.1:8750",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8750",
            "127.0.0.2",
        ] {
            assert!(request_is_local(&headers(&[("host", host)])), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8750",
            "10.0.0.1:8750",
            "[2001:db8::1]:1",
        ] {
            assert!(!request_is_local(&headers(&[("host", host)])), "{host}");
        }
        assert!(
            !request_is_local(&headers(&[])),
            "a Host header is required"
        );
        assert!(request_is_local(&headers(&[
            ("host", "127.0.0.1"),
            ("origin", "http://localhost:3000")
        ])));
        assert!(!request_is_local(&headers(&[
            ("host", "127.0.0.1"),
            ("origin", "https://evil.example")
        ])));
        assert!(!request_is_local(&headers(&[
            ("host", "127.0.0.1"),
            ("origin", "null")
        ])));
    }
}
