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
//! tagged notification of a call not yet registered waits for it (also in `deliver`).
//!
//! [`InputPolicy`]: crate::InputPolicy

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use rmcp::model::{ErrorData, InputRequest, LoggingMessageNotificationParam, RequestId};
use rmcp::transport::streamable_http_client::SseError;
use sse_stream::Sse;
use tokio_util::sync::CancellationToken;

/// The private `_meta` key carrying the id of the Switchboard request a server message arrived
/// with (on that request's response stream).
pub const RELATED_REQUEST_META: &str = "dev.switchboard/relatedRequestId";

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
pub struct InFlight {
    calls: Arc<Mutex<Vec<Call>>>,
    undelivered: Arc<Undelivered>,
}

/// Tagged log and progress notifications on their way through rmcp to the handler, by request,
/// and the calls being sent whose caller is not yet listening for them.
#[derive(Default)]
struct Undelivered {
    counts: Mutex<HashMap<RequestId, usize>>,
    delivered: tokio::sync::Notify,
    setting_up: std::sync::atomic::AtomicUsize,
    set_up: tokio::sync::Notify,
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
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
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

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, usize>> {
        self.undelivered
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
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
    /// once its call is ready for it, and counted off afterwards.
    pub(crate) async fn deliver<T>(
        &self,
        related: Option<&RequestId>,
        delivery: impl Future<Output = T>,
    ) -> T {
        let Some(related) = related else {
            return delivery.await;
        };
        self.ready_for(related).await;
        let delivered = delivery.await;
        self.delivered(related);
        delivered
    }

    /// Waits until a notification tagged with request `related` can be delivered: its call is
    /// registered, or no call is being set up (at most [`SETUP_LIMIT`]).
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

    /// A log or progress notification tagged with request `id` is on its way to the handler.
    fn expect(&self, id: &RequestId) {
        let mut counts = self.counts();
        // Counts of requests nobody waits for are left behind only when rmcp drops a message
        // (one it cannot read); never let those pile up.
        if counts.len() >= MAX_COUNTED_REQUESTS && !counts.contains_key(id) {
            counts.clear();
        }
        *counts.entry(id.clone()).or_default() += 1;
    }

    /// The handler delivered a notification tagged with request `id`.
    fn delivered(&self, id: &RequestId) {
        let mut counts = self.counts();
        if let Some(count) = counts.get_mut(id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(id);
                drop(counts);
                self.undelivered.delivered.notify_waiters();
            }
        }
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

    /// The responder for a server message: the call it was tagged with, else the only call in
    /// flight that has not been cancelled.
    pub(crate) fn find(&self, related: Option<&RequestId>) -> Option<Arc<dyn InputResponder>> {
        let calls = self.lock();
        let mut live = calls.iter().filter(|call| !call.cancel.is_cancelled());
        match related {
            Some(related) => live
                .find(|call| call.id == *related)
                .map(|call| call.responder.clone()),
            None => match (live.next(), live.next()) {
                (Some(only), None) => Some(only.responder.clone()),
                _ => None,
            },
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

/// Marks every server request and notification on the response stream of request `id` with
/// that id, under [`RELATED_REQUEST_META`], and counts the log and progress notifications in
/// `in_flight` until the handler delivers them. Events that are not JSON-RPC messages with a
/// method pass unchanged.
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
                if let Some((tagged, counted)) =
                    sse.data.as_deref().and_then(|data| tag(data, &tag_value))
                {
                    if counted {
                        in_flight.expect(&id);
                    }
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

/// The message with its tag, and whether it is a notification counted until delivered.
fn tag(data: &str, id: &serde_json::Value) -> Option<(String, bool)> {
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
    Some((serde_json::to_string(&message).ok()?, counted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_notifications_are_tagged_and_responses_are_not() {
        let id = serde_json::json!(7);
        let request =
            r#"{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"hi"}}"#;
        let (tagged, counted) = tag(request, &id).unwrap();
        let tagged: serde_json::Value = serde_json::from_str(&tagged).unwrap();
        assert_eq!(tagged["params"]["_meta"][RELATED_REQUEST_META], 7);
        assert_eq!(tagged["params"]["message"], "hi");
        assert!(!counted, "requests are answered, not counted");
        let bare = r#"{"jsonrpc":"2.0","method":"notifications/message"}"#;
        let (tagged, counted) = tag(bare, &id).unwrap();
        let tagged: serde_json::Value = serde_json::from_str(&tagged).unwrap();
        assert_eq!(tagged["params"]["_meta"][RELATED_REQUEST_META], 7);
        assert!(counted, "log messages are counted until delivered");
        let changed = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert!(!tag(changed, &id).unwrap().1);
        assert!(tag(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, &id).is_none());
        assert!(tag("not json", &id).is_none());
        assert!(tag("", &id).is_none());
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
}
