//! Switchboard's front doors, on axum.
//!
//! For now: `GET /healthz` (liveness) and `GET /api/status` (every server's status as JSON). The
//! aggregated MCP endpoint, the rest of the admin API and the web UI are built on this router.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use switchboard_hub::{Hub, ServerStatus};

/// Errors from serving.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
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
}

/// The router with every front door.
pub fn router(hub: Arc<Hub>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/status", get(status))
        .with_state(hub)
}

async fn status(State(hub): State<Arc<Hub>>) -> Json<StatusResponse> {
    Json(StatusResponse {
        version: env!("CARGO_PKG_VERSION"),
        servers: hub.status(),
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
            .map_err(|source| GatewayError::Bind { addr, source })?;
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
        axum::serve(self.listener, router(hub))
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(GatewayError::Serve)
    }
}
