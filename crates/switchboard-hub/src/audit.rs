//! The audit log's writer: records are handed over without waiting (a call never waits for the
//! disk) and written by one task in batches, one transaction each; old records are deleted as
//! the retention setting says.
//!
//! One [`AuditLog`] serves the daemon: every hub (the local one and each user's workspace)
//! records into it with its own tenant and actor ([`Hub::enable_audit`]). Calls are recorded
//! where every call ends, whichever path relayed it (the hub's call observer), with the origin
//! the front door gave the call; approvals where they are decided; changes and sign-ins by
//! whoever makes them ([`Hub::audit`]).
//!
//! The hand-over queue is bounded ([`QUEUE`]): when the store cannot keep up, records beyond it
//! are counted (`switchboard_audit_dropped_total`) and warned of, not queued without bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchboard_core::audit::{
    AuditArguments, AuditKind, AuditQuery, AuditRecord, CallOrigin, KeptJson, bounded,
    bounded_owned,
};
use switchboard_core::{ServerId, Workspace};
use switchboard_store::{Store, StoreError};
use switchboard_upstream::CallOutcome;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::Hub;

/// The most records waiting to be written.
pub const QUEUE: usize = 65_536;

/// The most records written in one transaction.
const BATCH: usize = 1024;

/// How long the writer waits for more records to write with the first of a batch.
const LINGER: Duration = Duration::from_millis(100);

/// How often old records are deleted (and once at start).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// How long a read waits for the records handed over before it to be written.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// How long the daemon keeps audit records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditRetention {
    /// Records older than this are deleted.
    pub max_age: Duration,
    /// The most records kept; the oldest beyond go first.
    pub max_records: u64,
}

impl Default for AuditRetention {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(90 * 24 * 3600),
            max_records: 10_000_000,
        }
    }
}

enum Message {
    Record(Box<AuditRecord>),
    /// A finished call, made a record on the writer ([`FinishedCall`]).
    Call(FinishedCall),
    /// Answered once every record handed over before it is written.
    Flush(oneshot::Sender<()>),
}

/// The daemon's audit log: hand records to [`AuditLog::record`]; one task writes them.
#[derive(Debug)]
pub struct AuditLog {
    queue: mpsc::Sender<Message>,
    /// Wakes the writer from its wait for more records when a flush is waiting.
    flush_asked: Arc<Notify>,
    arguments: AuditArguments,
    dropped: AtomicU64,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Record(_) => "Record",
            Self::Call(_) => "Call",
            Self::Flush(_) => "Flush",
        })
    }
}

impl AuditLog {
    /// Starts the log's writer over `store` (any workspace's: records carry their tenant),
    /// keeping calls' arguments as `arguments` says; with `retention`, also its deleting of old
    /// records (the daemon's; a command-line run only adds records).
    pub fn start(
        store: Store,
        arguments: AuditArguments,
        retention: Option<AuditRetention>,
    ) -> Arc<Self> {
        Self::start_with_queue(store, arguments, retention, QUEUE)
    }

    fn start_with_queue(
        store: Store,
        arguments: AuditArguments,
        retention: Option<AuditRetention>,
        queue: usize,
    ) -> Arc<Self> {
        let (queue, waiting) = mpsc::channel(queue);
        let flush_asked = Arc::new(Notify::new());
        let log = Arc::new(Self {
            queue,
            flush_asked: flush_asked.clone(),
            arguments,
            dropped: AtomicU64::new(0),
        });
        tokio::spawn(write_records(store, retention, waiting, flush_asked));
        log
    }

    /// A record of `kind` by the operator (in the default tenant), now, ending as `outcome`.
    pub fn operators(kind: AuditKind, outcome: &str) -> AuditRecord {
        let (tenant, actor) = actor_of(&Workspace::Local);
        AuditRecord::new(kind, crate::event::now_ms(), &tenant, &actor, outcome)
    }

    /// How many records were dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Hands `record` to the writer without waiting; when the queue is full it is dropped and
    /// counted.
    pub fn record(&self, record: AuditRecord) {
        self.hand_over(Message::Record(Box::new(record)));
    }

    /// Hands a record (or a finished call) to the writer without waiting; when the queue is
    /// full it is dropped and counted.
    fn hand_over(&self, message: Message) {
        if self.queue.try_send(message).is_err() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(
                    dropped,
                    "the audit log cannot keep up with the store: records are being dropped"
                );
            }
        }
    }

    /// Waits (up to a few seconds) until every record handed over before now is written.
    pub async fn flushed(&self) {
        let (done, written) = oneshot::channel();
        // Bounded as a whole: a queue full behind a store that does not answer waits no longer.
        let _ = tokio::time::timeout(FLUSH_WAIT, async {
            if self.queue.send(Message::Flush(done)).await.is_ok() {
                self.flush_asked.notify_one();
                let _ = written.await;
            }
        })
        .await;
    }
}

/// The writer: waits a moment after the first record of a batch, then takes what is waiting
/// (up to [`BATCH`] records a transaction, until none is left) and writes it; answers flushes
/// once what came before them is written. Deletes old records at start and every
/// [`PRUNE_EVERY`].
async fn write_records(
    store: Store,
    retention: Option<AuditRetention>,
    mut waiting: mpsc::Receiver<Message>,
    flush_asked: Arc<Notify>,
) {
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut batch = Vec::with_capacity(BATCH);
    let mut flushes = Vec::new();
    loop {
        tokio::select! {
            received = waiting.recv() => {
                let Some(first) = received else { return };
                // What comes within a moment joins the batch: one commit (one sync of the
                // database file) for many records, so a busy log takes the store's write lock
                // at most a few times a second. The writer sleeps through that moment rather
                // than taking each record as it comes: a record handed over meanwhile wakes no
                // thread (one wake-up a batch, not one a call). A flush cuts it short.
                if !matches!(first, Message::Flush(_)) {
                    tokio::select! {
                        () = tokio::time::sleep(LINGER) => {}
                        () = flush_asked.notified() => {}
                    }
                }
                let mut next = Some(first);
                while next.is_some() {
                    while let Some(message) = next.take() {
                        match message {
                            Message::Record(record) => batch.push(*record),
                            Message::Call(call) => batch.push(call.into_record()),
                            Message::Flush(done) => flushes.push(done),
                        }
                        if batch.len() >= BATCH {
                            break;
                        }
                        next = waiting.try_recv().ok();
                    }
                    let full = batch.len() >= BATCH;
                    if !batch.is_empty() {
                        let records = batch.len();
                        if let Err(error) = store.append_audit(batch.drain(..)).await {
                            tracing::error!(records, "could not write audit records: {error}");
                        }
                    }
                    for done in flushes.drain(..) {
                        let _ = done.send(());
                    }
                    // A full batch may have left records waiting: they go in the next one.
                    // Records that came while this one was written wait for the next moment.
                    if full {
                        next = waiting.try_recv().ok();
                    }
                }
            }
            _ = prune.tick(), if retention.is_some() => {
                if let Some(retention) = retention {
                    prune_old(&store, retention).await;
                }
            }
        }
    }
}

async fn prune_old(store: &Store, retention: AuditRetention) {
    let before = crate::event::now_ms()
        .saturating_sub(u64::try_from(retention.max_age.as_millis()).unwrap_or(u64::MAX));
    match store.prune_audit(before, retention.max_records).await {
        Ok(0) => {}
        Ok(deleted) => tracing::info!(deleted, "deleted audit records past their retention"),
        Err(error) => tracing::warn!("could not delete old audit records: {error}"),
    }
}

/// Who a hub's records name: its tenant and actor.
#[derive(Debug)]
pub(crate) struct AuditRecorder {
    log: Arc<AuditLog>,
    who: Arc<Actor>,
}

/// The tenant and actor a hub's records name, shared with its finished calls.
#[derive(Debug)]
struct Actor {
    tenant: String,
    actor: String,
}

/// A finished call as its connection hands it to the log: shared handles (the hub's actor,
/// the server's id, the call's origin) and numbers, so that the connection copies no text but
/// the tool's name. Its record is made on the writer ([`FinishedCall::into_record`]), where the
/// origin's text is moved into it: the record's text is made once, where it is written.
#[derive(Debug)]
struct FinishedCall {
    at_ms: u64,
    who: Arc<Actor>,
    server: ServerId,
    tool: Box<str>,
    outcome: CallOutcome,
    elapsed: Duration,
    origin: Option<Arc<CallOrigin>>,
}

impl FinishedCall {
    fn into_record(self) -> AuditRecord {
        let mut record = AuditRecord::new(
            AuditKind::Call,
            self.at_ms,
            &self.who.tenant,
            &self.who.actor,
            self.outcome.as_str(),
        );
        record.server = Some(bounded(self.server.as_str()));
        record.tool = Some(bounded_owned(self.tool.into()));
        if let Some(origin) = self.origin {
            record = record.from_origin(origin);
        }
        record.duration_ms = Some(u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX));
        record
    }
}

/// The tenant and actor records of `workspace` name: the operator's, or the user's.
pub(crate) fn actor_of(workspace: &Workspace) -> (String, String) {
    match workspace {
        Workspace::Local => (workspace.tenant().to_string(), "operator".to_owned()),
        Workspace::User(principal) => (principal.tenant.to_string(), principal.user.to_string()),
    }
}

impl AuditRecorder {
    fn new(log: Arc<AuditLog>, workspace: &Workspace) -> Self {
        let (tenant, actor) = actor_of(workspace);
        let who = Arc::new(Actor { tenant, actor });
        Self { log, who }
    }

    /// Who this hub's records name.
    pub(crate) fn actor(&self) -> &str {
        &self.who.actor
    }

    /// Hands `record` to the log.
    pub(crate) fn record(&self, record: AuditRecord) {
        self.log.record(record);
    }

    /// How many records the log dropped.
    pub(crate) fn dropped(&self) -> u64 {
        self.log.dropped()
    }

    /// A record of `kind` by this hub's actor, now, ending as `outcome`.
    pub(crate) fn record_of(&self, kind: AuditKind, outcome: &str) -> AuditRecord {
        AuditRecord::new(
            kind,
            crate::event::now_ms(),
            &self.who.tenant,
            &self.who.actor,
            outcome,
        )
    }

    /// Records a finished call: handed over as it is, made a record on the writer.
    pub(crate) fn call(&self, call: &switchboard_upstream::CallRecord<'_>) {
        self.log.hand_over(Message::Call(FinishedCall {
            at_ms: crate::event::now_ms(),
            who: self.who.clone(),
            server: call.server.clone(),
            tool: call.tool.into(),
            outcome: call.outcome,
            elapsed: call.elapsed,
            origin: call.origin.cloned(),
        }));
    }
}

/// Why the audit log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AuditReadError {
    /// This daemon keeps no audit log.
    #[error("this daemon keeps no audit log (started with --audit off)")]
    Off,
    /// The store could not be read, or the query was not valid.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Hub {
    /// Records this hub's calls, approvals and changes in `log`, as its workspace's actor. A
    /// second call changes nothing.
    pub fn enable_audit(&self, log: Arc<AuditLog>) {
        let recorder = Arc::new(AuditRecorder::new(log, self.store.workspace()));
        let _ = self.audit.set(recorder.clone());
        self.metrics.record_calls_in(recorder);
    }

    /// Whether this hub keeps an audit log.
    pub fn audits(&self) -> bool {
        self.audit.get().is_some()
    }

    /// The origin of a call coming in at `door` (through `endpoint`, from `client`, called as
    /// `exposed` with `arguments`), for its audit record; `None` when no log is kept (so an
    /// unaudited call computes nothing).
    pub fn call_origin(
        &self,
        door: &'static str,
        endpoint: Option<&str>,
        client: Option<Arc<str>>,
        exposed: &str,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Option<Arc<CallOrigin>> {
        let recorder = self.audit.get()?;
        Some(Arc::new(CallOrigin {
            door,
            endpoint: endpoint.map(str::to_owned),
            client,
            exposed: exposed.to_owned(),
            arguments: switchboard_core::audit::kept_arguments(
                recorder.log.arguments,
                arguments,
                || crate::approval::arguments_sha256(arguments),
            ),
        }))
    }

    /// Records something this hub's actor did (a change, a sign-in), if a log is kept:
    /// `build` completes the record begun with `kind` and `outcome`.
    pub fn audit(
        &self,
        kind: AuditKind,
        outcome: &str,
        build: impl FnOnce(AuditRecord) -> AuditRecord,
    ) {
        if let Some(recorder) = self.audit.get() {
            recorder
                .log
                .record(build(recorder.record_of(kind, outcome)));
        }
    }

    /// Records how a sign-in to server `id` that `workspace` started ended (`failed`: why it
    /// failed, if it did); the sign-in's callback may reach another workspace's hub.
    pub fn audit_sign_in(&self, workspace: &Workspace, id: &ServerId, failed: Option<&str>) {
        let Some(recorder) = self.audit.get() else {
            return;
        };
        let (tenant, actor) = actor_of(workspace);
        let outcome = if failed.is_some() { "failed" } else { "ok" };
        let mut record = AuditRecord::new(
            AuditKind::SignIn,
            crate::event::now_ms(),
            &tenant,
            &actor,
            outcome,
        )
        .about(id.as_str(), None);
        if let Some(reason) = failed {
            record = record.with_detail(serde_json::json!({
                "reason": switchboard_core::audit::bounded(reason)
            }));
        }
        recorder.log.record(record);
    }

    /// Records a call refused before it reached server `id` (`reason`: why).
    pub fn audit_refused_call(
        &self,
        id: &ServerId,
        tool: &str,
        origin: Arc<CallOrigin>,
        reason: &str,
    ) {
        self.audit(AuditKind::Call, "refused", |record| {
            let record = record.about(id.as_str(), Some(tool)).from_origin(origin);
            let mut detail = record
                .detail
                .as_ref()
                .map_or_else(|| serde_json::json!({}), KeptJson::to_value);
            detail["reason"] = serde_json::Value::String(switchboard_core::audit::bounded(reason));
            record.with_detail(detail)
        });
    }

    /// Waits (up to a few seconds) until every record this hub handed over is written.
    pub async fn audit_flushed(&self) {
        if let Some(recorder) = self.audit.get() {
            recorder.log.flushed().await;
        }
    }

    /// A page of the audit log as this hub's workspace may read it, once everything handed
    /// over before the query is written.
    pub async fn audit_page(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, AuditReadError> {
        let recorder = self.audit.get().ok_or(AuditReadError::Off)?;
        recorder.log.flushed().await;
        Ok(self.store.audit_page(query).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that cannot keep up loses the records beyond the queue, counted, and never makes
    /// a caller wait; what was queued is written.
    #[tokio::test(flavor = "current_thread")]
    async fn records_beyond_a_full_queue_are_dropped_and_counted_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let log = AuditLog::start_with_queue(store.clone(), AuditArguments::Digest, None, 2);
        // The writer has not run yet (one thread, nothing awaited): the queue fills.
        for outcome in ["a", "b", "c", "d", "e"] {
            log.record(AuditLog::operators(AuditKind::Change, outcome));
        }
        assert_eq!(log.dropped(), 3);
        log.flushed().await;
        let kept = store.audit_page(&AuditQuery::default()).await.unwrap();
        let outcomes: Vec<&str> = kept.iter().map(|r| r.outcome.as_str()).collect();
        assert_eq!(outcomes, ["b", "a"]);
    }

    /// More records than one transaction takes are all written, in order, before a flush
    /// handed over after them is answered.
    #[tokio::test(flavor = "current_thread")]
    async fn records_beyond_one_batch_are_all_written_before_a_later_flush_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let log = AuditLog::start(store.clone(), AuditArguments::Digest, None);
        let handed = 2 * BATCH + 10;
        for n in 0..handed {
            log.record(AuditLog::operators(AuditKind::Change, &n.to_string()));
        }
        log.flushed().await;
        let mut outcomes = Vec::new();
        let mut query = AuditQuery {
            limit: Some(switchboard_core::audit::MAX_PAGE),
            ..AuditQuery::default()
        };
        loop {
            let page = store.audit_page(&query).await.unwrap();
            let Some(last) = page.last() else { break };
            query.before = last.id;
            outcomes.extend(page.iter().map(|r| r.outcome.parse::<usize>().unwrap()));
        }
        outcomes.reverse();
        assert_eq!(outcomes, (0..handed).collect::<Vec<_>>());
        assert_eq!(log.dropped(), 0);
    }
}
