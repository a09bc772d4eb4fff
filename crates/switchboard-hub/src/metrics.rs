//! What Prometheus scrapes at `/metrics`: tool calls, their errors and latencies per server and
//! tool, each server's connection state, reconnects and token refreshes.
//!
//! Counters and histograms are kept as things happen ([`HubMetrics`] is the upstreams'
//! [`CallObserver`], and connection tasks count their transitions); connection states are read
//! from the servers' status at each scrape. The exposition format is `prometheus-client`'s.
//! Every finished call is also announced as [`HubEvent::ToolCalled`] for the console's live
//! view, on a channel of its own ([`Hub::subscribe_calls`](crate::Hub::subscribe_calls)): the
//! main bus wakes every client session's task, which calls must not do.

use std::sync::{Arc, Mutex, RwLock};
use switchboard_core::hashing::FastMap;
use switchboard_core::sync::lock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use switchboard_core::{ConnectionState, ServerId};
use switchboard_upstream::{CallObserver, CallOutcome, CallRecord};

use crate::audit::AuditRecorder;
use crate::{HubEvent, ServerStatus, read, write};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    server: String,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    server: String,
    state: &'static str,
}

/// Call latencies from 1 ms to about 65 s, doubling.
fn call_duration() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The hub's metrics.
pub struct HubMetrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Family<ToolLabels, Histogram, fn() -> Histogram>,
    reconnects: Family<ServerLabels, Counter>,
    refreshes: Family<ServerLabels, Counter>,
    states: Family<StateLabels, Gauge>,
    /// One scrape at a time sets the state gauges.
    scraping: Mutex<()>,
    /// Finished calls, for whoever listens.
    pub(crate) calls_announced: crate::bus::OnDemandBroadcast<HubEvent>,
    /// Each called tool's handles, by server and tool.
    handles: RwLock<FastMap<String, FastMap<String, Arc<ToolHandles>>>>,
    /// Where finished calls are recorded, once the hub keeps an audit log.
    audit: std::sync::OnceLock<Arc<AuditRecorder>>,
    /// Audit records the log dropped (its queue full), read at each scrape.
    audit_dropped: Gauge,
}

impl std::fmt::Debug for HubMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubMetrics").finish_non_exhaustive()
    }
}

impl HubMetrics {
    pub(crate) fn new(desk: &switchboard_desk::Desk) -> Self {
        let mut registry = Registry::with_prefix("switchboard");
        desk.register_metrics(&mut registry);
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls by server, tool and outcome (ok, tool_error, rpc_error, timeout, cancelled, failed)",
            calls.clone(),
        );
        let durations: Family<ToolLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(call_duration);
        registry.register(
            "tool_call_duration_seconds",
            "Time from a tool call's start to its answer, by server and tool",
            durations.clone(),
        );
        let reconnects = Family::<ServerLabels, Counter>::default();
        registry.register(
            "server_reconnects",
            "Times a server's connection was lost or failed and is being retried",
            reconnects.clone(),
        );
        let refreshes = Family::<ServerLabels, Counter>::default();
        registry.register(
            "server_token_refreshes",
            "OAuth token refreshes a server's connection went through",
            refreshes.clone(),
        );
        let states = Family::<StateLabels, Gauge>::default();
        registry.register(
            "server_state",
            "1 for each server's current connection state",
            states.clone(),
        );
        let audit_dropped = Gauge::default();
        registry.register(
            "audit_dropped",
            "Audit records dropped because the store could not keep up (0 unless the audit log is behind)",
            audit_dropped.clone(),
        );
        Self {
            registry,
            calls,
            durations,
            reconnects,
            refreshes,
            states,
            scraping: Mutex::new(()),
            calls_announced: crate::bus::OnDemandBroadcast::new(1024),
            handles: RwLock::default(),
            audit: std::sync::OnceLock::new(),
            audit_dropped,
        }
    }

    /// Where finished calls are recorded, if anywhere.
    pub(crate) fn audit(&self) -> Option<&AuditRecorder> {
        self.audit.get().map(|audit| &**audit)
    }

    /// Records every finished call in `audit` from now on.
    pub(crate) fn record_calls_in(&self, audit: Arc<AuditRecorder>) {
        let _ = self.audit.set(audit);
    }

    /// A server's connection moved to `to`.
    pub(crate) fn transition(&self, server: &ServerId, to: ConnectionState) {
        let labels = ServerLabels {
            server: server.to_string(),
        };
        match to {
            ConnectionState::Reconnecting => {
                self.reconnects.get_or_create(&labels).inc();
            }
            ConnectionState::TokenRefresh => {
                self.refreshes.get_or_create(&labels).inc();
            }
            _ => {}
        }
    }

    /// The metrics in Prometheus' text format, with every server in `servers` at its state.
    pub(crate) fn render(&self, servers: &[ServerStatus]) -> String {
        let _one_scrape = lock(&self.scraping);
        self.states.clear();
        for status in servers {
            self.states
                .get_or_create(&StateLabels {
                    server: status.server.to_string(),
                    state: status.state.as_str(),
                })
                .set(1);
        }
        if let Some(audit) = self.audit.get() {
            self.audit_dropped
                .set(i64::try_from(audit.dropped()).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(%error, "encoding the metrics failed");
        }
        text
    }
}

/// One tool's metrics handles, so that counting a call looks them up without building labels.
struct ToolHandles {
    /// A counter per [`CallOutcome`], made when first needed (a series appears with its first
    /// call).
    outcomes: [std::sync::OnceLock<Counter>; CallOutcome::ALL.len()],
    duration: Histogram,
}

impl HubMetrics {
    /// The handles of `tool` on `server`, made on its first call.
    fn handles(&self, server: &ServerId, tool: &str) -> Arc<ToolHandles> {
        if let Some(found) = read(&self.handles)
            .get(server.as_str())
            .and_then(|tools| tools.get(tool))
        {
            return found.clone();
        }
        let made = Arc::new(ToolHandles {
            outcomes: Default::default(),
            duration: self
                .durations
                .get_or_create(&ToolLabels {
                    server: server.to_string(),
                    tool: tool.to_owned(),
                })
                .clone(),
        });
        write(&self.handles)
            .entry(server.to_string())
            .or_default()
            .entry(tool.to_owned())
            .or_insert(made)
            .clone()
    }
}

impl CallObserver for HubMetrics {
    fn finished(&self, call: CallRecord<'_>) {
        let handles = self.handles(call.server, call.tool);
        handles.outcomes[call.outcome as usize]
            .get_or_init(|| {
                self.calls
                    .get_or_create(&CallLabels {
                        server: call.server.to_string(),
                        tool: call.tool.to_owned(),
                        outcome: call.outcome.as_str(),
                    })
                    .clone()
            })
            .inc();
        handles.duration.observe(call.elapsed.as_secs_f64());
        if let Some(audit) = self.audit.get() {
            audit.call(&call);
        }
        if self.calls_announced.receiver_count() > 0 {
            self.calls_announced.send(HubEvent::ToolCalled {
                server: call.server.clone(),
                tool: call.tool.to_owned(),
                outcome: call.outcome,
                elapsed_ms: call.elapsed.as_secs_f64() * 1000.0,
            });
        }
    }
}
