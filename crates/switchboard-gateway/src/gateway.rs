//! The [`Gateway`]: a configured daemon's front doors, served on its listeners until shutdown.

use crate::{
    Access, BrowserOrigins, ConnectionThreads, RouterParts, WebOrigin, Workspace, listener, mcp,
    oauth, one_workspace, workspaces,
};
use std::net::SocketAddr;
use std::sync::Arc;
use switchboard_hub::Hub;
use tower::util::Either;

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

/// The OAuth redirect URI of a daemon listening on `addr`.
pub fn callback_url(addr: SocketAddr) -> String {
    format!("http://{addr}{}", oauth::CALLBACK_PATH)
}

/// A bound listener, so callers learn the real port (for `:0`) before serving.
pub struct Gateway {
    pub(crate) listener: tokio::net::TcpListener,
    pub(crate) sessions: mcp::SessionLimits,
    pub(crate) tools: mcp::ToolsOptions,
    pub(crate) public_url: Option<url::Url>,
    pub(crate) cors_origins: Vec<WebOrigin>,
    pub(crate) limits: listener::Limits,
    pub(crate) app_permissions: Vec<String>,
    pub(crate) connection_threads: ConnectionThreads,
}

impl Gateway {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr) -> Result<Self, GatewayError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|error| GatewayError::Bind { addr, error })?;
        Ok(Self {
            listener,
            sessions: mcp::SessionLimits::default(),
            tools: mcp::ToolsOptions::default(),
            public_url: None,
            cors_origins: Vec::new(),
            limits: listener::Limits::default(),
            app_permissions: Vec::new(),
            connection_threads: ConnectionThreads::none(),
        })
    }

    /// Names the address browsers and authorization servers reach the daemon at (a load
    /// balancer's, in front of several replicas): the OAuth redirect URI is made from it
    /// instead of the listen address.
    pub fn with_public_url(mut self, url: url::Url) -> Self {
        self.public_url = Some(url);
        self
    }

    /// Lets MCP Apps views have these of the permissions they ask for (`camera`,
    /// `microphone`, `geolocation`, `clipboardWrite`); none unless given.
    pub fn with_app_permissions(mut self, permissions: Vec<String>) -> Self {
        self.app_permissions = permissions;
        self
    }

    /// Takes connections within `limits` (per client address, header and body timeouts).
    pub fn with_connection_limits(mut self, limits: listener::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Serves connections on `threads` (each with a single-threaded runtime) rather than on the
    /// runtime `serve` runs on (the default). One per core keeps each call on one thread; see
    /// [`ConnectionThreads`]. The caller keeps a clone for as long as work started by requests
    /// must run: after `serve` returns, until its hub has shut down.
    pub fn with_connection_threads(mut self, threads: ConnectionThreads) -> Self {
        self.connection_threads = threads;
        self
    }

    /// Lets browser apps of `origins` use `/mcp` and the tool routes ([`origins::CORS_PATHS`])
    /// with a credential.
    pub fn with_cors_origins(mut self, origins: Vec<WebOrigin>) -> Self {
        self.cors_origins = origins;
        self
    }

    /// Shows MCP clients the view of `tools` unless they ask for another, and bounds the
    /// deferred view's working set (see [`mcp::ToolsOptions`]).
    pub fn with_tools(mut self, tools: mcp::ToolsOptions) -> Self {
        self.tools = tools;
        self
    }

    /// Serves MCP client sessions within `limits` (see [`mcp::SessionLimits`]).
    pub fn with_session_limits(mut self, limits: mcp::SessionLimits) -> Self {
        self.sessions = limits;
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` completes, then drains: new requests get 503, requests in flight
    /// get up to `drain` to finish, and every stream is closed.
    pub async fn serve(
        self,
        hub: Arc<Hub>,
        access: Access,
        shutdown: impl Future<Output = ()> + Send + 'static,
        drain: std::time::Duration,
    ) -> Result<(), GatewayError> {
        let addr = self.listener.local_addr().map_err(GatewayError::Serve)?;
        let stop = tokio_util::sync::CancellationToken::new();
        let streams = stop.clone();
        let shared = mcp::Shared::with_options(hub, self.sessions, self.tools);
        let draining = shared.clone();
        let callback = match &self.public_url {
            Some(public) => format!(
                "{}{}",
                public.as_str().trim_end_matches('/'),
                oauth::CALLBACK_PATH
            ),
            None => callback_url(addr),
        };
        let origins = BrowserOrigins::new(self.public_url.as_ref(), self.cors_origins);
        let mut parts = RouterParts::new(callback, stop.clone(), self.tools, origins);
        parts.app_permissions = Arc::new(self.app_permissions);
        let (app, workspaces) = match access {
            Access::Users(users) => {
                parts.users = Some(users.clone());
                let dispatcher = workspaces::Dispatcher::new(users, shared, parts);
                (Either::Left(dispatcher.front_door()), Some(dispatcher))
            }
            access => (
                Either::Right(one_workspace(Workspace::new(shared, Some(access), &parts))),
                None,
            ),
        };
        let shutdown = async move {
            shutdown.await;
            let unfinished = match &workspaces {
                Some(workspaces) => {
                    let (local, users) =
                        tokio::join!(draining.drain(drain), workspaces.drain(drain));
                    local + users
                }
                None => draining.drain(drain).await,
            };
            if unfinished > 0 {
                tracing::warn!(
                    unfinished,
                    "requests still in flight after the drain deadline are cut off"
                );
            }
            // A request that just finished has its response queued on its stream: give the
            // streams a moment to flush before closing them.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            // Long-lived SSE streams would hold the graceful shutdown open.
            streams.cancel();
        };
        listener::serve(
            self.listener,
            app,
            self.limits,
            &self.connection_threads,
            shutdown,
        )
        .await
        .map_err(GatewayError::Serve)
    }
}
