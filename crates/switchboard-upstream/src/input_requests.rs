//! Getting an upstream server's requests for input to the client whose call caused them.
//!
//! A server may ask for input while it works on a call: legacy servers send `elicitation/create`,
//! `sampling/createMessage` or `roots/list` as requests of their own, 2026-07-28 servers return
//! `input_required`. Either way the question belongs to whoever made the call. Each call may
//! carry an [`InputResponder`] (the downstream client behind it, or a fixed [`InputPolicy`]);
//! [`InFlight`] remembers which upstream request id each responder belongs to.
//!
//! Legacy servers do not say which call a request of theirs is about, but on Streamable HTTP
//! they send it on that call's response stream. [`tag_related`] marks every message on such a
//! stream with the id of the request it answers (a private `_meta` key, removed again before
//! anything is relayed), so the handler can find the right responder even with many calls in
//! flight. On other transports (stdio, WebSocket, HTTP+SSE, the GET stream) a request goes to
//! the only call in flight that has a responder, and is answered by the fallback policy when
//! there is none or several.
//!
//! The same tag keeps a call's own log messages and progress ahead of its result. rmcp hands
//! each notification to the handler in a task of its own but the response straight to the
//! caller, so a message the server sent just before its response could reach the caller after
//! it (under load it does), and be lost. [`tag_related`] therefore also counts the log and
//! progress notifications it tags, the handler counts them off once delivered
//! ([`InFlight::deliver`]), and the call waits for its count to reach zero before it returns
//! ([`InFlight::all_delivered`]). At the other end, a server can answer before the caller has
//! registered for its call's messages; while a call is being sent ([`InFlight::setting_up`]) a
//! tagged notification of a call not yet registered waits for it (also in `deliver`). An untagged
//! one (stdio, WebSocket, HTTP+SSE, a session's GET stream) cannot be told apart, so it waits
//! until no call is being sent: otherwise a server that reports progress as soon as a call
//! arrives (over stdio, within a millisecond) could find nobody subscribed to its progress token
//! yet, and the report would be dropped.
//!
//! The same tasks would also shuffle a call's messages among themselves: progress sent as 0, 50,
//! 100 in one burst could reach the client as 50, 0, 100, which breaks the rule that progress
//! only grows. [`tag_related`] therefore numbers the counted notifications of each call in the
//! order they arrived (a second private key, [`SEQUENCE_META`]), and [`InFlight::deliver`] hands
//! each to the handler only after the one before it (waiting at most [`DELIVERY_LIMIT`] for one
//! that never comes).
//!
//! [`InputPolicy`]: crate::InputPolicy

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_core::sync::lock;
use switchboard_core::wire_names::{RELATED_REQUEST_META, ROOTS_HANDOFF_ID_PREFIX, SEQUENCE_META};

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use rmcp::model::{ErrorData, InputRequest, LoggingMessageNotificationParam, RequestId};
use rmcp::transport::streamable_http_client::SseError;
use sse_stream::Sse;
use tokio_util::sync::CancellationToken;

/// Which call a server message arrived with, and for a counted notification its place among
/// that call's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Related {
    /// The id of the Switchboard request on whose response stream it came.
    pub(crate) id: RequestId,
    /// Its number among the call's counted notifications (from 0).
    pub(crate) sequence: Option<u64>,
}

/// Answers a server's requests for input on behalf of one call.
pub trait InputResponder: Send + Sync {
    /// Answers one request; the value is the `ElicitResult`, `CreateMessageResult` or
    /// `ListRootsResult` as JSON. `key` is the request's key in a 2026-07-28 server's
    /// `inputRequests` (none for a legacy server's request).
    ///
    fn answer(
        &self,
        key: Option<&str>,
        request: InputRequest,
    ) -> BoxFuture<'static, Result<serde_json::Value, ErrorData>>;

    /// Answers requests a server asked together (a 2026-07-28 `inputRequests` map), one future
    /// per request in order. The default answers each on its own; a responder that asks its
    /// client in batches asks these as one batch.
    fn answer_all(
        &self,
        requests: Vec<(String, InputRequest)>,
    ) -> Vec<BoxFuture<'static, Result<serde_json::Value, ErrorData>>> {
        requests
            .into_iter()
            .map(|(key, request)| self.answer(Some(&key), request))
            .collect()
    }

    /// Delivers a log message the server sent while working on the call. The default drops it.
    fn log(&self, _message: LoggingMessageNotificationParam) {}

    /// Who answers: the same value for every call of one downstream client (its session), so
    /// that a request the server does not tie to a call can still go to the client when all
    /// the calls in flight are that client's. `None` (the default) when it cannot be told.
    fn client(&self) -> Option<&str> {
        None
    }

    /// Whether it gives `request` a real answer (someone is asked), rather than refusing it or
    /// answering by a fixed policy; where it does not and the connection's fallback does
    /// ([`ConnectOptions::input_fallback`](crate::ConnectOptions::input_fallback), a person at
    /// the console), the fallback answers instead. The default: it does.
    fn takes(&self, _request: &InputRequest) -> bool {
        true
    }
}

/// `responder`, or `fallback` where only the fallback takes `request`.
pub(crate) fn chosen<'a>(
    responder: &'a Arc<dyn InputResponder>,
    fallback: &'a Arc<dyn InputResponder>,
    request: &InputRequest,
) -> &'a Arc<dyn InputResponder> {
    match !responder.takes(request) && fallback.takes(request) {
        true => fallback,
        false => responder,
    }
}

/// Answers requests asked together: those `responder` takes (or nobody does) in one batch of
/// its own, the others by `fallback` ([`chosen`]); one future per request, in order.
pub(crate) fn answer_all_with(
    responder: &Arc<dyn InputResponder>,
    fallback: &Arc<dyn InputResponder>,
    requests: Vec<(String, InputRequest)>,
) -> Vec<BoxFuture<'static, Result<serde_json::Value, ErrorData>>> {
    let mut answers: Vec<Option<BoxFuture<'static, _>>> = Vec::with_capacity(requests.len());
    let (mut batch, mut places) = (Vec::new(), Vec::new());
    for (key, request) in requests {
        if !Arc::ptr_eq(responder, fallback)
            && !responder.takes(&request)
            && fallback.takes(&request)
        {
            answers.push(Some(fallback.answer(Some(&key), request)));
        } else {
            places.push(answers.len());
            answers.push(None);
            batch.push((key, request));
        }
    }
    for (place, answer) in places.into_iter().zip(responder.answer_all(batch)) {
        answers[place] = Some(answer);
    }
    answers
        .into_iter()
        .map(|answer| {
            answer.unwrap_or_else(|| {
                Box::pin(std::future::ready(Err(ErrorData::internal_error(
                    "the request went unanswered",
                    None,
                ))))
            })
        })
        .collect()
}

/// One call in flight with a responder.
struct Call {
    id: RequestId,
    responder: Arc<dyn InputResponder>,
    /// A cancelled call wants no more input, even before it has finished unwinding.
    cancel: CancellationToken,
}

/// The calls in flight on one session that have a responder, by upstream request id, and the
/// notifications tagged with a call that the handler has not delivered yet.
#[derive(Clone, Default)]
pub(crate) struct InFlight {
    calls: Arc<Mutex<Vec<Call>>>,
    undelivered: Arc<Undelivered>,
    roots: Arc<RootsGiven>,
}

/// Whose roots the server was last given: the client whose responder answered its latest
/// `roots/list`. Servers keep the roots they were given (server-everything does, per session),
/// and every client of Switchboard shares the one session, so before a call of another client
/// the server is told the roots changed ([`InFlight::hand_roots_to`]).
struct RootsGiven {
    client: tokio::sync::watch::Sender<GivenTo>,
    /// Whether the server asked again the last time it was told: one that did not is not
    /// waited for again, until it asks for roots again.
    asks_again: std::sync::atomic::AtomicBool,
    /// Whether the server has asked again after being told, at least once: such a server is
    /// waited for longer ([`ROOTS_ASKED_AGAIN_BY_ONE_THAT_DID`]).
    asked_again_before: std::sync::atomic::AtomicBool,
    /// Numbers the registrations that take the server's `roots/list` while a call waits.
    next: std::sync::atomic::AtomicU64,
}

/// Whose roots a server was last given.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GivenTo {
    /// None yet.
    Nobody,
    /// An answer no client's session stands behind (a 2026-07-28 request's, a fixed policy's):
    /// another than any client's.
    Anonymous,
    /// The client of this key's roots.
    Client(String),
}

impl Default for RootsGiven {
    fn default() -> Self {
        Self {
            client: tokio::sync::watch::channel(GivenTo::Nobody).0,
            asks_again: std::sync::atomic::AtomicBool::new(true),
            asked_again_before: std::sync::atomic::AtomicBool::new(false),
            next: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// How long a call waits for a server told that the roots changed to ask its client for them.
/// A server that does not ask within it is taken for one that never asks again, so this leaves
/// room for a busy machine: one second was seen to pass before a Node server asked while two
/// cores ran the test suite (over 3 s while they also ran a profiler). A server that never asks
/// again makes a call wait this long, once, so it stays short.
const ROOTS_ASKED_AGAIN: Duration = Duration::from_secs(3);

/// How long a call waits for a server that asked again before: it will ask, and only a machine
/// under load makes it slow (a Node server was seen to take over 3 s while two cores ran the
/// test suite, and the call then went on with another client's roots).
const ROOTS_ASKED_AGAIN_BY_ONE_THAT_DID: Duration = Duration::from_secs(15);

/// Tagged log and progress notifications on their way through rmcp to the handler, by request,
/// and the calls being sent whose caller is not yet listening for them.
#[derive(Default)]
struct Undelivered {
    counts: Mutex<HashMap<RequestId, Numbered>>,
    delivered: tokio::sync::Notify,
    setting_up: std::sync::atomic::AtomicUsize,
    set_up: tokio::sync::Notify,
}

/// One call's counted notifications: how many were tagged, and the number of the next one to
/// deliver (all before it were delivered, or given up on).
#[derive(Debug, Default, Clone, Copy)]
struct Numbered {
    tagged: u64,
    next: u64,
}

/// How long a tagged notification waits for calls being sent to be ready for it (a server can
/// answer before the caller has registered for its messages; the gap is microseconds).
const SETUP_LIMIT: Duration = Duration::from_millis(100);

/// A call being sent: until dropped, tagged notifications wait before delivery
/// ([`InFlight::ready_for`]).
pub(crate) struct SettingUp(Arc<Undelivered>);

impl Drop for SettingUp {
    fn drop(&mut self) {
        self.0
            .setting_up
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.set_up.notify_waiters();
    }
}

/// How long a call waits, after its response, for its tagged notifications to be delivered
/// (they only have to pass through rmcp's handler tasks; this bounds a lost one).
const DELIVERY_LIMIT: Duration = Duration::from_secs(1);

/// Most requests with undelivered notifications counted at once.
const MAX_COUNTED_REQUESTS: usize = 4096;

/// Keeps a call registered in [`InFlight`] until dropped.
pub(crate) struct Registration {
    in_flight: InFlight,
    id: RequestId,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.in_flight.lock().retain(|call| call.id != self.id);
    }
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("calls", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Call>> {
        lock(&self.calls)
    }

    pub(crate) fn register(
        &self,
        id: RequestId,
        responder: Arc<dyn InputResponder>,
        cancel: CancellationToken,
    ) -> Registration {
        self.lock().push(Call {
            id: id.clone(),
            responder,
            cancel,
        });
        Registration {
            in_flight: self.clone(),
            id,
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Numbered>> {
        lock(&self.undelivered.counts)
    }

    /// A call is about to be sent; drop the guard once its caller listens for its messages
    /// (responder registered, progress subscribed).
    pub(crate) fn setting_up(&self) -> SettingUp {
        self.undelivered
            .setting_up
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        SettingUp(self.undelivered.clone())
    }

    /// Delivers a notification tagged with request `related` (if it is) by running `delivery`:
    /// once its call is ready for it and, for a numbered one, the one before it was delivered;
    /// counted off afterwards.
    pub(crate) async fn deliver<T>(
        &self,
        related: Option<&Related>,
        delivery: impl Future<Output = T>,
    ) -> T {
        let Some(related) = related else {
            // It may belong to a call whose caller is not listening yet (progress subscribed,
            // responder registered): rmcp's dispatcher drops a report nobody is subscribed to.
            self.set_up().await;
            return delivery.await;
        };
        self.ready_for(&related.id).await;
        let Some(sequence) = related.sequence else {
            return delivery.await;
        };
        let its_turn = || {
            self.counts()
                .get(&related.id)
                .is_none_or(|numbered| numbered.next >= sequence)
        };
        if !wait_until(&self.undelivered.delivered, DELIVERY_LIMIT, its_turn).await {
            tracing::debug!(id = ?related.id, sequence, "a call's earlier notification was lost");
        }
        let delivered = delivery.await;
        self.delivered(&related.id, sequence);
        delivered
    }

    /// Waits until a notification tagged with request `related` can be delivered: its call is
    /// registered, or no call is being set up (at most [`SETUP_LIMIT`]).
    /// [`Self::find`], once the calls being sent are registered (waiting at most
    /// [`SETUP_LIMIT`]): a server may ask about a call before its caller has registered for it,
    /// on its GET stream as well as on the call's.
    pub(crate) async fn find_when_set_up(
        &self,
        related: Option<&RequestId>,
    ) -> Option<Arc<dyn InputResponder>> {
        match related {
            Some(related) => self.ready_for(related).await,
            None => self.set_up().await,
        }
        self.find(related)
    }

    /// Waits until no call is being set up (at most [`SETUP_LIMIT`]): an untagged message may
    /// belong to any of them.
    async fn set_up(&self) {
        wait_until(&self.undelivered.set_up, SETUP_LIMIT, || {
            self.undelivered
                .setting_up
                .load(std::sync::atomic::Ordering::SeqCst)
                == 0
        })
        .await;
    }

    async fn ready_for(&self, related: &RequestId) {
        wait_until(&self.undelivered.set_up, SETUP_LIMIT, || {
            let busy = self
                .undelivered
                .setting_up
                .load(std::sync::atomic::Ordering::SeqCst);
            busy == 0 || self.lock().iter().any(|call| call.id == *related)
        })
        .await;
    }

    /// A log or progress notification tagged with request `id` is on its way to the handler;
    /// returns its number among that request's.
    fn expect(&self, id: &RequestId) -> u64 {
        let mut counts = self.counts();
        // Counts of requests nobody waits for are left behind only when rmcp drops a message
        // (one it cannot read); never let those pile up.
        if counts.len() >= MAX_COUNTED_REQUESTS && !counts.contains_key(id) {
            counts.clear();
        }
        let numbered = counts.entry(id.clone()).or_default();
        numbered.tagged += 1;
        numbered.tagged - 1
    }

    /// The handler delivered notification number `sequence` tagged with request `id`.
    fn delivered(&self, id: &RequestId, sequence: u64) {
        let mut counts = self.counts();
        if let Some(numbered) = counts.get_mut(id) {
            numbered.next = numbered.next.max(sequence + 1);
            if numbered.next >= numbered.tagged {
                counts.remove(id);
            }
        }
        drop(counts);
        self.undelivered.delivered.notify_waiters();
    }

    /// Waits (at most [`DELIVERY_LIMIT`]) until every notification tagged with request `id` so
    /// far has been delivered; called once its response is in, so that is all of them.
    pub(crate) async fn all_delivered(&self, id: &RequestId) {
        let done = || !self.counts().contains_key(id);
        if !wait_until(&self.undelivered.delivered, DELIVERY_LIMIT, done).await {
            tracing::debug!(?id, "a call's notifications were not all delivered");
            self.counts().remove(id);
        }
    }

    /// Notes that the server was given the roots of `client` (of the responder that answered
    /// its `roots/list`; `None` for a fixed policy's answer).
    pub(crate) fn roots_given_by(&self, client: Option<&str>) {
        let now = match client {
            Some(client) => GivenTo::Client(client.to_owned()),
            None => GivenTo::Anonymous,
        };
        self.roots.client.send_if_modified(|given| {
            let changed = *given != now;
            if changed {
                *given = now;
            }
            changed
        });
    }

    /// The responder of the latest call waiting for the server to ask for its client's roots
    /// ([`InFlight::hand_roots_to`]): a roots request no call is named in goes there, even
    /// while calls of other clients are in flight.
    pub(crate) fn roots_handed_to(&self) -> Option<Arc<dyn InputResponder>> {
        self.lock()
            .iter()
            .rev()
            .find(|call| matches!(&call.id, RequestId::String(id) if id.starts_with(ROOTS_HANDOFF_ID_PREFIX)))
            .map(|call| call.responder.clone())
    }

    /// Notes that the server asked for roots: one that asks is waited for again.
    pub(crate) fn roots_asked(&self) {
        self.roots
            .asks_again
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the server holds roots that are not `client`'s.
    pub(crate) fn roots_held_by_another(&self, client: &str) -> bool {
        match &*self.roots.client.borrow() {
            GivenTo::Nobody => false,
            GivenTo::Anonymous => true,
            GivenTo::Client(given) => given != client,
        }
    }

    /// Before a request of `responder`'s client to a server holding another client's roots:
    /// `tell` the server the roots changed (`notifications/roots/list_changed`) and wait (at
    /// most [`ROOTS_ASKED_AGAIN`], or [`ROOTS_ASKED_AGAIN_BY_ONE_THAT_DID`] for a server that
    /// asked again before) for it to ask, the question going to `responder` meanwhile. A server
    /// that does not ask again is told from then on, but not waited for. Whether the server
    /// asked and was answered.
    pub(crate) async fn hand_roots_to<F>(
        &self,
        responder: &Arc<dyn InputResponder>,
        tell: F,
    ) -> bool
    where
        F: Future<Output = bool>,
    {
        use std::sync::atomic::Ordering;
        let Some(client) = responder.client() else {
            return false;
        };
        let roots = InputRequest::ListRoots(rmcp::model::RequestNoParam::default());
        if !self.roots_held_by_another(client) || !responder.takes(&roots) {
            return false;
        }
        let number = self.roots.next.fetch_add(1, Ordering::Relaxed);
        let _asking = self.register(
            RequestId::String(format!("{ROOTS_HANDOFF_ID_PREFIX}{number}").into()),
            responder.clone(),
            CancellationToken::new(),
        );
        let mut given = self.roots.client.subscribe();
        if !tell.await || !self.roots.asks_again.load(Ordering::Relaxed) {
            return false;
        }
        let limit = match self.roots.asked_again_before.load(Ordering::Relaxed) {
            true => ROOTS_ASKED_AGAIN_BY_ONE_THAT_DID,
            false => ROOTS_ASKED_AGAIN,
        };
        let asked = tokio::time::timeout(
            limit,
            given.wait_for(|given| matches!(given, GivenTo::Client(c) if c == client)),
        )
        .await;
        match asked {
            Ok(_) => {
                self.roots.asked_again_before.store(true, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.roots.asks_again.store(false, Ordering::Relaxed);
                false
            }
        }
    }

    /// The responder for a server message: the call it was tagged with, else the only call in
    /// flight that has not been cancelled, or the latest when all of them are one client's
    /// (roots, say, are the client's whatever call they were asked about).
    pub(crate) fn find(&self, related: Option<&RequestId>) -> Option<Arc<dyn InputResponder>> {
        let calls = self.lock();
        let mut live = calls.iter().filter(|call| !call.cancel.is_cancelled());
        match related {
            Some(related) => live
                .find(|call| call.id == *related)
                .map(|call| call.responder.clone()),
            None => {
                let latest = live.next_back()?;
                let client = latest.responder.client();
                let one_client =
                    live.all(|call| client.is_some() && call.responder.client() == client);
                one_client.then(|| latest.responder.clone())
            }
        }
    }
}

/// Waits (at most `limit`) until `done()` holds, checking again each time `changed` is
/// notified; returns whether it held.
async fn wait_until(
    changed: &tokio::sync::Notify,
    limit: Duration,
    done: impl Fn() -> bool,
) -> bool {
    let wait = async {
        loop {
            let notified = changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done() {
                return;
            }
            notified.await;
        }
    };
    tokio::time::timeout(limit, wait).await.is_ok()
}

/// Reads (and removes) the related-request tag from a message's `_meta`.
pub(crate) fn take_related(meta: &mut rmcp::model::MetaObject) -> Option<RequestId> {
    let value = meta.0.remove(RELATED_REQUEST_META)?;
    serde_json::from_value(value).ok()
}

/// Reads (and removes) the related-request tag and the sequence number from a notification's
/// `_meta`.
pub(crate) fn take_related_numbered(meta: &mut rmcp::model::MetaObject) -> Option<Related> {
    let sequence = meta.0.remove(SEQUENCE_META).and_then(|n| n.as_u64());
    let id = take_related(meta)?;
    Some(Related { id, sequence })
}

/// Marks every server request and notification on the response stream of request `id` with
/// that id, under [`RELATED_REQUEST_META`], and counts and numbers the log and progress
/// notifications in `in_flight` ([`SEQUENCE_META`]) until the handler delivers them. Events that
/// are not JSON-RPC messages with a method pass unchanged.
pub(crate) fn tag_related<S>(
    stream: S,
    id: RequestId,
    in_flight: InFlight,
) -> futures::stream::BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Sse, SseError>> + Send + 'static,
{
    let tag_value = serde_json::to_value(&id).unwrap_or_default();
    stream
        .map(move |event| {
            event.map(|mut sse| {
                if let Some(tagged) = sse
                    .data
                    .as_deref()
                    .and_then(|data| tag(data, &tag_value, || in_flight.expect(&id)))
                {
                    sse.data = Some(tagged);
                }
                sse
            })
        })
        .boxed()
}

/// Notifications the handler counts off when it has delivered them (`UpstreamHandler`'s
/// `on_logging_message` and `on_progress`).
const COUNTED_NOTIFICATIONS: [&str; 2] = ["notifications/message", "notifications/progress"];

/// The message with its tag; a notification counted until delivered also gets the number
/// `number()` gives it.
fn tag(data: &str, id: &serde_json::Value, number: impl FnOnce() -> u64) -> Option<String> {
    let mut message: serde_json::Value = serde_json::from_str(data).ok()?;
    let object = message.as_object_mut()?;
    let counted = object.get("method")?.as_str().is_some_and(|method| {
        COUNTED_NOTIFICATIONS.contains(&method) && !object.contains_key("id")
    });
    let params = object
        .entry("params")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()?;
    let meta = params
        .entry("_meta")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()?;
    meta.insert(RELATED_REQUEST_META.to_owned(), id.clone());
    if counted {
        meta.insert(SEQUENCE_META.to_owned(), number().into());
    }
    serde_json::to_string(&message).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_notifications_are_tagged_and_responses_are_not() {
        let id = serde_json::json!(7);
        let numbers = std::cell::Cell::new(0);
        let number = || {
            numbers.set(numbers.get() + 1);
            numbers.get() + 40
        };
        let request =
            r#"{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"hi"}}"#;
        let tagged = tag(request, &id, number).unwrap();
        let tagged: serde_json::Value = serde_json::from_str(&tagged).unwrap();
        assert_eq!(tagged["params"]["_meta"][RELATED_REQUEST_META], 7);
        assert_eq!(tagged["params"]["message"], "hi");
        assert!(
            tagged["params"]["_meta"].get(SEQUENCE_META).is_none(),
            "requests are answered, not counted"
        );
        let bare = r#"{"jsonrpc":"2.0","method":"notifications/message"}"#;
        let tagged = tag(bare, &id, number).unwrap();
        let tagged: serde_json::Value = serde_json::from_str(&tagged).unwrap();
        assert_eq!(tagged["params"]["_meta"][RELATED_REQUEST_META], 7);
        assert_eq!(
            tagged["params"]["_meta"][SEQUENCE_META], 41,
            "log messages are counted and numbered until delivered"
        );
        let changed = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        let tagged: serde_json::Value =
            serde_json::from_str(&tag(changed, &id, number).unwrap()).unwrap();
        assert!(tagged["params"]["_meta"].get(SEQUENCE_META).is_none());
        assert_eq!(numbers.get(), 1, "only counted notifications take a number");
        assert!(tag(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, &id, number).is_none());
        assert!(tag("not json", &id, number).is_none());
        assert!(tag("", &id, number).is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_calls_notifications_are_delivered_in_the_order_they_arrived() {
        let in_flight = InFlight::default();
        let id = RequestId::Number(3);
        let _call = in_flight.register(id.clone(), Arc::new(Named), Default::default());
        let numbers: Vec<u64> = (0..20).map(|_| in_flight.expect(&id)).collect();
        assert_eq!(numbers, (0..20).collect::<Vec<_>>());
        // Handed to the handler in tasks of their own, the last first, as rmcp may run them.
        let order = Arc::new(Mutex::new(Vec::new()));
        let deliveries: Vec<_> = numbers
            .iter()
            .rev()
            .map(|&sequence| {
                let in_flight = in_flight.clone();
                let order = order.clone();
                let related = Related {
                    id: id.clone(),
                    sequence: Some(sequence),
                };
                tokio::spawn(async move {
                    in_flight
                        .deliver(Some(&related), async {
                            switchboard_core::sync::lock(&order).push(sequence);
                        })
                        .await
                })
            })
            .collect();
        for delivery in deliveries {
            delivery.await.unwrap();
        }
        assert_eq!(*switchboard_core::sync::lock(&order), numbers);
        in_flight.all_delivered(&id).await;
        assert!(in_flight.counts().is_empty(), "nothing left counted");
    }

    #[tokio::test]
    async fn a_lost_notification_does_not_hold_the_next_one_back_for_good() {
        let in_flight = InFlight::default();
        let id = RequestId::Number(4);
        let _lost = in_flight.expect(&id);
        let second = in_flight.expect(&id);
        let related = Related {
            id: id.clone(),
            sequence: Some(second),
        };
        // Bounded by DELIVERY_LIMIT; the outer bound only keeps a regression from hanging.
        let delivered = tokio::time::timeout(
            DELIVERY_LIMIT * 10,
            in_flight.deliver(Some(&related), async { 5 }),
        )
        .await;
        assert_eq!(delivered, Ok(5));
        assert!(in_flight.counts().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_untagged_notification_waits_for_the_calls_being_sent() {
        let in_flight = InFlight::default();
        let setting_up = in_flight.setting_up();
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let registering = {
            let ready = ready.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                // The caller subscribes to the call's progress here, then stops setting up.
                ready.store(true, std::sync::atomic::Ordering::SeqCst);
                drop(setting_up);
            })
        };
        let delivered_when_ready = in_flight
            .deliver(None, async {
                ready.load(std::sync::atomic::Ordering::SeqCst)
            })
            .await;
        assert!(
            delivered_when_ready,
            "an untagged progress report reaches the call's caller once it listens"
        );
        registering.await.unwrap();
        // Nothing being sent: delivered at once (the paused clock does not move).
        let started = tokio::time::Instant::now();
        in_flight.deliver(None, async {}).await;
        assert_eq!(tokio::time::Instant::now(), started);
    }

    struct Named;
    impl InputResponder for Named {
        fn answer(
            &self,
            _key: Option<&str>,
            _request: InputRequest,
        ) -> BoxFuture<'static, Result<serde_json::Value, ErrorData>> {
            Box::pin(async { Ok(serde_json::Value::Null) })
        }
    }

    /// A responder of one client (`client()` names it).
    struct ClientNamed(&'static str);
    impl InputResponder for ClientNamed {
        fn answer(
            &self,
            _key: Option<&str>,
            _request: InputRequest,
        ) -> BoxFuture<'static, Result<serde_json::Value, ErrorData>> {
            Box::pin(async { Ok(serde_json::json!({"roots": []})) })
        }
        fn client(&self) -> Option<&str> {
            Some(self.0)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_holding_another_clients_roots_is_told_and_asks_the_caller() {
        let in_flight = InFlight::default();
        let b: Arc<dyn InputResponder> = Arc::new(ClientNamed("b"));
        let told = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tell = |in_flight: InFlight| {
            let told = told.clone();
            async move {
                told.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // The server asks at once: its question reaches the waiting caller's responder,
                // though a call of another client is in flight too.
                assert!(in_flight.find(None).is_none(), "two clients' calls");
                let asking = in_flight
                    .roots_handed_to()
                    .expect("the caller takes the question");
                in_flight.roots_given_by(asking.client());
                true
            }
        };
        let _long_call_of_a = in_flight.register(
            RequestId::Number(9),
            Arc::new(ClientNamed("a")),
            Default::default(),
        );
        // Nobody's roots given yet: nothing to tell.
        in_flight.hand_roots_to(&b, tell(in_flight.clone())).await;
        assert_eq!(told.load(std::sync::atomic::Ordering::SeqCst), 0);

        in_flight.roots_given_by(Some("a"));
        assert!(in_flight.roots_held_by_another("b"));
        in_flight.hand_roots_to(&b, tell(in_flight.clone())).await;
        assert_eq!(told.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(!in_flight.roots_held_by_another("b"), "b's roots given");
        assert!(
            in_flight.roots_handed_to().is_none(),
            "the waiting registration is gone"
        );
        // The same client again: nothing to tell.
        in_flight.hand_roots_to(&b, tell(in_flight.clone())).await;
        assert_eq!(told.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_does_not_ask_again_is_not_waited_for_twice() {
        let in_flight = InFlight::default();
        let b: Arc<dyn InputResponder> = Arc::new(ClientNamed("b"));
        in_flight.roots_given_by(Some("a"));
        let started = tokio::time::Instant::now();
        in_flight.hand_roots_to(&b, async { true }).await;
        assert_eq!(started.elapsed(), ROOTS_ASKED_AGAIN, "waited once");
        let started = tokio::time::Instant::now();
        in_flight.hand_roots_to(&b, async { true }).await;
        assert_eq!(started.elapsed(), Duration::ZERO, "told, not waited for");
        // Once it asks for roots again, it is waited for again.
        in_flight.roots_asked();
        let started = tokio::time::Instant::now();
        in_flight.hand_roots_to(&b, async { true }).await;
        assert_eq!(started.elapsed(), ROOTS_ASKED_AGAIN);
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_asked_again_before_is_waited_for_longer() {
        let in_flight = InFlight::default();
        let (a, b): (Arc<dyn InputResponder>, Arc<dyn InputResponder>) =
            (Arc::new(ClientNamed("a")), Arc::new(ClientNamed("b")));
        // Told, it asks at once.
        in_flight.roots_given_by(Some("a"));
        let asks_at_once = async {
            in_flight.roots_given_by(Some("b"));
            true
        };
        in_flight.hand_roots_to(&b, asks_at_once).await;
        // Next time it is slower than a first wait allows, and is still waited for.
        let slow = ROOTS_ASKED_AGAIN + Duration::from_secs(2);
        let asks_late = {
            let in_flight = in_flight.clone();
            async move {
                tokio::spawn(async move {
                    tokio::time::sleep(slow).await;
                    in_flight.roots_given_by(Some("a"));
                });
                true
            }
        };
        let started = tokio::time::Instant::now();
        in_flight.hand_roots_to(&a, asks_late).await;
        assert_eq!(started.elapsed(), slow);
        assert!(!in_flight.roots_held_by_another("a"), "a's roots given");
    }

    #[test]
    fn roots_no_client_stands_behind_are_anothers_for_every_client() {
        let in_flight = InFlight::default();
        assert!(!in_flight.roots_held_by_another("a"), "none given");
        in_flight.roots_given_by(None);
        assert!(in_flight.roots_held_by_another("a"));
        in_flight.roots_given_by(Some("a"));
        assert!(!in_flight.roots_held_by_another("a"));
        assert!(in_flight.roots_held_by_another("b"));
    }

    #[test]
    fn untagged_requests_go_to_the_only_call_in_flight() {
        let in_flight = InFlight::default();
        assert!(in_flight.find(None).is_none());
        let first = in_flight.register(RequestId::Number(1), Arc::new(Named), Default::default());
        assert!(in_flight.find(None).is_some());
        let cancel = CancellationToken::new();
        let second = in_flight.register(RequestId::Number(2), Arc::new(Named), cancel.clone());
        assert!(in_flight.find(None).is_none(), "ambiguous");
        assert!(in_flight.find(Some(&RequestId::Number(2))).is_some());
        cancel.cancel();
        assert!(
            in_flight.find(None).is_some(),
            "a cancelled call wants no input"
        );
        assert!(in_flight.find(Some(&RequestId::Number(2))).is_none());
        drop(second);
        assert!(in_flight.find(Some(&RequestId::Number(2))).is_none());
        assert!(in_flight.find(None).is_some());
        drop(first);
        assert!(in_flight.find(None).is_none());
    }

    #[tokio::test]
    async fn a_request_about_a_call_being_sent_waits_for_its_registration() {
        let in_flight = InFlight::default();
        let setting_up = in_flight.setting_up();
        let registering = {
            let in_flight = in_flight.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let registration =
                    in_flight.register(RequestId::Number(1), Arc::new(Named), Default::default());
                drop(setting_up);
                registration
            })
        };
        assert!(in_flight.find(None).is_none(), "not registered yet");
        assert!(
            in_flight.find_when_set_up(None).await.is_some(),
            "found once the call is registered"
        );
        drop(registering.await.unwrap());
        // Nothing in flight and nothing being sent: nothing found.
        assert!(in_flight.find_when_set_up(None).await.is_none());
    }
}
