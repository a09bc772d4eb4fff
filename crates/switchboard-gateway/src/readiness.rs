//! `GET /readyz`: whether a balancer should send this replica new requests.
//!
//! `/healthz` answers as long as the process serves HTTP (liveness: restart it when that
//! stops). Readiness is narrower: a replica that is draining for a shutdown, or whose store does
//! not answer, should get no new requests while it finishes what it has or waits for the store,
//! but it must not be restarted for it. Anyone may ask (balancers carry no key), so the answer
//! names only which of the two it is, and the store is asked at most once a second however
//! often probes come.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_core::sync::lock;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchboard_hub::Hub;

use crate::mcp::Shared;

/// How long one store check's answer is reused.
const REUSED_FOR: Duration = Duration::from_secs(1);
/// How long the store may take to answer a check.
const STORE_PATIENCE: Duration = Duration::from_secs(2);

/// What `/readyz` looks at.
#[derive(Clone)]
pub(crate) struct Readiness {
    shared: Arc<Shared>,
    last_store_check: Arc<Mutex<Option<(Instant, bool)>>>,
}

impl Readiness {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            last_store_check: Arc::default(),
        }
    }

    fn hub(&self) -> &Arc<Hub> {
        self.shared.hub()
    }

    /// Whether the store answered lately (within [`REUSED_FOR`]), asking it if nobody did.
    async fn store_answers(&self) -> bool {
        let reused = lock(&self.last_store_check)
            .filter(|(at, _)| at.elapsed() < REUSED_FOR)
            .map(|(_, answered)| answered);
        if let Some(answered) = reused {
            return answered;
        }
        let answered = match tokio::time::timeout(STORE_PATIENCE, self.hub().store().ping()).await {
            Ok(Ok(())) => true,
            Ok(Err(error)) => {
                tracing::warn!(%error, "readiness: the store does not answer");
                false
            }
            Err(_) => {
                tracing::warn!("readiness: the store did not answer within {STORE_PATIENCE:?}");
                false
            }
        };
        *lock(&self.last_store_check) = Some((Instant::now(), answered));
        answered
    }

    /// The answer to `GET /readyz`: 200 `{"ready": true}`, or 503 with the reason.
    pub(crate) async fn answer(&self) -> Response {
        let unready = if self.shared.is_draining() {
            Some("draining: this replica is shutting down")
        } else if !self.store_answers().await {
            Some("the store does not answer")
        } else {
            None
        };
        match unready {
            None => axum::Json(serde_json::json!({"ready": true})).into_response(),
            Some(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(serde_json::json!({"ready": false, "reason": reason})),
            )
                .into_response(),
        }
    }
}
