//! Resumable streams of session calls on the short path (SEP-1699): each call's stream is primed
//! and its events numbered and kept, so a client whose connection dropped comes back with
//! `Last-Event-ID` and reads on from where it was.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::ServerJsonRpcMessage;

use super::*;
use crate::mcp::Shared;
use switchboard_core::sync::lock;
use switchboard_core::wire_names::EventId;

/// How long a client is told to wait before resuming a stream, as rmcp tells it.
pub(super) const RESUME_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

/// How long a session call may run before its client is given a resumable stream: primed at
/// once, so that a client whose connection drops while the call runs can come back for the rest.
/// A call answered sooner is answered with one JSON body: as a stream it would go out in one
/// write with the answer, leaving the client nothing to resume. A server on the same machine or
/// network answers a plain call well within this (the Rust fixture in under a millisecond,
/// server-everything in about two); a call that runs longer is one worth resuming.
pub(super) const PRIME_AFTER: std::time::Duration = std::time::Duration::from_millis(20);
// Armed through the thread's timer anchor, which fires at least this often.
const _: () = assert!(PRIME_AFTER.as_millis() > crate::timer_anchor::TICK.as_millis() + 1);

/// The longest answer of a complete stream sent as one body (a longer one is followed event by
/// event, as a stream still running is).
const ONE_BODY_MOST: usize = 64 * 1024;

/// How many of a session's latest streams are kept for resumption.
pub(super) const KEPT_STREAMS: usize = 16;

/// A session's streams on the short path, kept so that its client can resume them.
#[derive(Default)]
pub(crate) struct SessionStreams {
    next: u64,
    kept: std::collections::VecDeque<(u64, Arc<StreamLog>)>,
}

impl SessionStreams {
    /// Keeps `log` as a new stream (forgetting the oldest beyond [`KEPT_STREAMS`]); its number.
    pub(super) fn keep(&mut self, log: Arc<StreamLog>) -> u64 {
        let stream = self.next;
        self.next += 1;
        if self.kept.len() >= KEPT_STREAMS {
            self.kept.pop_front();
        }
        self.kept.push_back((stream, log));
        stream
    }

    pub(super) fn find(&self, stream: u64) -> Option<Arc<StreamLog>> {
        self.kept
            .iter()
            .find(|(number, _)| *number == stream)
            .map(|(_, log)| log.clone())
    }
}

/// How many bytes of a stream's events are kept for resumption besides its latest one: a server
/// that streams for as long as its call runs does not grow the daemon's memory for that time.
/// A client that comes back for events older than the kept ones is refused (410).
const KEPT_BYTES: usize = 1024 * 1024;

/// The messages of one stream to a session client, as sent, and whether it is complete.
#[derive(Default)]
pub(crate) struct StreamLog {
    messages: std::sync::Mutex<Kept>,
    changed: tokio::sync::Notify,
    /// A client that comes back for the rest after the stream paused.
    polling: Option<switchboard_upstream::CallerPolling>,
}

/// The latest events of a [`StreamLog`], up to [`KEPT_BYTES`] besides the newest.
#[derive(Default)]
struct Kept {
    entries: std::collections::VecDeque<Entry>,
    /// The index in the stream of `entries`' first (the events before it were let go).
    first: usize,
    /// The bytes `entries` hold.
    bytes: usize,
    complete: bool,
}

impl Kept {
    /// The stream's events from `index` on; `Err` when some of them were let go.
    fn since(&self, index: usize) -> Result<std::collections::vec_deque::Iter<'_, Entry>, Gone> {
        let kept = index.checked_sub(self.first).ok_or(Gone)?;
        Ok(self.entries.range(kept.min(self.entries.len())..))
    }

    /// The stream's event at `index`; `Err` when it was let go.
    fn get(&self, index: usize) -> Result<Option<&Entry>, Gone> {
        Ok(self.since(index)?.next())
    }

    /// The index in the stream after its last event.
    fn end(&self) -> usize {
        self.first + self.entries.len()
    }

    /// Adds `entry`, letting the oldest go while the others take more than [`KEPT_BYTES`].
    fn push(&mut self, entry: Entry) {
        self.bytes += entry.size();
        self.entries.push_back(entry);
        while self.bytes > KEPT_BYTES + self.entries.back().map_or(0, Entry::size)
            && let Some(oldest) = self.entries.pop_front()
        {
            self.bytes -= oldest.size();
            self.first += 1;
        }
    }
}

/// The events a client asked for were let go (beyond [`KEPT_BYTES`]).
struct Gone;

/// One event of a [`StreamLog`].
pub(super) enum Entry {
    /// A message, as its JSON.
    Message(String),
    /// The server ended its stream before the response: the client's stream ends here too,
    /// with the server's reconnection delay in milliseconds, if it gave one.
    Pause(Option<u128>),
}

impl Entry {
    /// The bytes it holds, counted against [`KEPT_BYTES`].
    fn size(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                Entry::Message(data) => data.len(),
                Entry::Pause(_) => 0,
            }
    }
}

impl StreamLog {
    /// A log whose pauses `polling`'s client comes back from.
    pub(super) fn polled_by(polling: Option<switchboard_upstream::CallerPolling>) -> Self {
        Self {
            polling,
            ..Self::default()
        }
    }

    pub(super) fn push(&self, message: &ServerJsonRpcMessage) {
        let data = serde_json::to_string(message).unwrap_or_default();
        lock(&self.messages).push(Entry::Message(data));
        self.changed.notify_waiters();
    }

    pub(super) fn pause(&self, retry: Option<std::time::Duration>) {
        let retry = retry.map(|retry| retry.as_millis());
        lock(&self.messages).push(Entry::Pause(retry));
        self.changed.notify_waiters();
    }

    /// The client came back for the events after the one numbered `after`: when that one
    /// paused the stream and the server's is still paused, the server's is resumed now.
    pub(super) fn came_back(&self, after: usize) {
        let messages = lock(&self.messages);
        let paused_there = after > 0
            && after == messages.end()
            && matches!(messages.get(after - 1), Ok(Some(Entry::Pause(_))));
        if paused_there && let Some(polling) = &self.polling {
            polling.came_back();
        }
    }

    pub(super) fn finish(&self) {
        lock(&self.messages).complete = true;
        self.changed.notify_waiters();
    }

    /// The stream `stream` as an SSE answer: from the start (the priming event first) when
    /// `after` is 0, else the events after the one numbered `after`; it follows the log until
    /// it is complete or pauses, with a keep-alive comment every 15 s. Written by hand: the
    /// priming event carries an empty `data` field (SEP-1699), which axum's events leave out, and
    /// a pause is an event with an id, the server's `retry` and empty data, after which the
    /// response ends.
    ///
    /// A log already complete, or paused (a client coming back after its call ended, or after
    /// the server's stream paused), up to [`ONE_BODY_MOST`] bytes, is answered as one body of
    /// known length: no stream to poll, no keep-alive timer to arm (which costs the connection's
    /// thread a wake-up of its own), one write. (A call answered in its first message is not
    /// kept at all: its client gets the answer as JSON, [`super::relay`].)
    pub(super) fn follow(self: Arc<Self>, stream: u64, after: usize) -> Response {
        let priming = (after == 0).then(|| {
            let retry = RESUME_AFTER.as_millis();
            let id = EventId { stream, index: 0 };
            format!("id: {id}\nretry: {retry}\ndata: \n\n")
        });
        if let Some(whole) = self.complete_from(stream, after, priming.as_deref()) {
            return sse_answer(axum::body::Body::from(whole));
        }
        let events = futures::stream::unfold(Some((self, after)), move |state| async move {
            let (log, next) = state?;
            loop {
                let changed = log.changed.notified();
                let mut changed = std::pin::pin!(changed);
                changed.as_mut().enable();
                {
                    let messages = lock(&log.messages);
                    match messages.get(next) {
                        Ok(Some(entry)) => {
                            let mut event = String::new();
                            let ends = write_event(&mut event, stream, next + 1, entry);
                            let rest = (!ends).then(|| (log.clone(), next + 1));
                            return Some((Bytes::from(event), rest));
                        }
                        // The client fell behind what is kept: its stream ends, and coming back
                        // for the rest is refused.
                        Err(Gone) => return None,
                        Ok(None) if messages.complete => return None,
                        Ok(None) => {}
                    }
                }
                changed.await;
            }
        });
        let events = futures::stream::iter(priming.map(Bytes::from))
            .chain(events)
            .map(Some)
            .chain(futures::stream::once(async { None }));
        let every = std::time::Duration::from_secs(15);
        let ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        let pings = futures::stream::unfold(ticks, |mut ticks| async move {
            ticks.tick().await;
            Some((Some(Bytes::from_static(b": keep-alive\n\n")), ticks))
        });
        let body = futures::stream::select(events, pings)
            .take_while(|chunk| std::future::ready(chunk.is_some()))
            .filter_map(|chunk| std::future::ready(chunk.map(Ok::<_, Infallible>)));
        sse_answer(axum::body::Body::from_stream(body))
    }

    /// The whole answer of stream `stream` after event `after` (`priming` first), when the log
    /// holds all of it (complete, or paused after `after`: a pause ends the response) and it is
    /// at most [`ONE_BODY_MOST`] bytes; a longer one is followed, so the log is not copied whole.
    /// When events after `after` were let go, the answer is followed (and ends at once).
    fn complete_from(&self, stream: u64, after: usize, priming: Option<&str>) -> Option<String> {
        let messages = lock(&self.messages);
        let entries = messages.since(after).ok()?;
        let pauses = entries
            .clone()
            .any(|entry| matches!(entry, Entry::Pause(_)));
        if !messages.complete && !pauses {
            return None;
        }
        // Each event's id and fields take less than 64 bytes beside its data.
        let size = priming.map_or(0, str::len)
            + entries
                .clone()
                .map(|entry| match entry {
                    Entry::Message(data) => data.len() + 64,
                    Entry::Pause(_) => 64,
                })
                .sum::<usize>();
        if size > ONE_BODY_MOST {
            return None;
        }
        let mut whole = String::with_capacity(size);
        whole.push_str(priming.unwrap_or_default());
        for (index, entry) in entries.enumerate() {
            if write_event(&mut whole, stream, after + index + 1, entry) {
                break;
            }
        }
        Some(whole)
    }

    /// Whether the events after the one numbered `after` are all kept.
    fn keeps_after(&self, after: usize) -> bool {
        lock(&self.messages).since(after).is_ok()
    }
}

/// Writes `entry`, event `index` of stream `stream`, to `out` as SSE; whether it ends the
/// response (a pause).
fn write_event(out: &mut String, stream: u64, index: usize, entry: &Entry) -> bool {
    use std::fmt::Write;
    let _ = writeln!(out, "id: {}", EventId { stream, index });
    match entry {
        // Compact JSON has no raw line breaks, so one `data` line carries it.
        Entry::Message(data) => {
            out.push_str("data: ");
            out.push_str(data);
            out.push_str("\n\n");
            false
        }
        Entry::Pause(retry) => {
            if let Some(ms) = retry {
                let _ = writeln!(out, "retry: {ms}");
            }
            out.push_str("data: \n\n");
            true
        }
    }
}

/// An SSE answer with `body`.
fn sse_answer(body: axum::body::Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Resumes a stream of the short path for a session client's GET with `Last-Event-ID` naming
/// one of its events; `None` when it names none (rmcp's, then).
pub(crate) fn try_resume(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let session = single(headers, &crate::mcp::http::SESSION_HEADER)?;
    let EventId { stream, index } = EventId::parse(single(headers, &LAST_EVENT_ID)?)?;
    let state = lock(&shared.short_path_sessions)
        .get(session)
        .and_then(std::sync::Weak::upgrade)?;
    let log = lock(&state.short_path_streams).find(stream)?;
    if !log.keeps_after(index) {
        return Some(crate::mcp::http::jsonrpc_error(
            axum::http::StatusCode::GONE,
            rmcp::model::ErrorCode::INVALID_REQUEST.0,
            "the events after this Last-Event-ID are no longer kept: the stream outgrew what is \
             kept for resumption",
        ));
    }
    log.came_back(index);
    Some(log.follow(stream, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(value: serde_json::Value) -> ServerJsonRpcMessage {
        serde_json::from_value(value).unwrap()
    }

    async fn text_of(answer: Response) -> String {
        use http_body_util::BodyExt;
        let bytes = answer.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_complete_log_is_answered_whole_with_the_events_a_followed_one_sends() {
        let progress = message(serde_json::json!({"jsonrpc": "2.0",
            "method": "notifications/progress", "params": {"progressToken": "p", "progress": 1}}));
        let result = message(serde_json::json!({"jsonrpc": "2.0", "id": 4,
            "result": {"content": [{"type": "text", "text": "done"}]}}));

        let complete = Arc::new(StreamLog::default());
        complete.push(&progress);
        complete.push(&result);
        complete.finish();
        let whole = complete.clone().follow(7, 0);
        assert!(
            http_body::Body::size_hint(whole.body()).exact().is_some(),
            "one body of known length"
        );

        let following = Arc::new(StreamLog::default());
        following.push(&progress);
        let followed = following.clone().follow(7, 0);
        assert!(
            http_body::Body::size_hint(followed.body())
                .exact()
                .is_none()
        );
        let reading = tokio::spawn(text_of(followed));
        following.push(&result);
        following.finish();
        let followed = reading.await.unwrap();

        let whole = text_of(whole).await;
        assert_eq!(whole, followed);
        assert!(
            whole.starts_with("id: sb-7-0\nretry: 3000\ndata: \n\n"),
            "{whole}"
        );
        assert!(whole.contains("id: sb-7-2\ndata: {"), "{whole}");
        // From an event on, and up to a pause, which ends the answer.
        assert_eq!(
            text_of(complete.clone().follow(7, 1)).await,
            whole[whole.find("id: sb-7-2").unwrap()..]
        );
        // A long log is followed rather than copied whole, with the same events.
        let long = Arc::new(StreamLog::default());
        let big = message(serde_json::json!({"jsonrpc": "2.0", "id": 5,
            "result": {"content": [{"type": "text", "text": "x".repeat(ONE_BODY_MOST)}]}}));
        long.push(&progress);
        long.push(&big);
        long.finish();
        let streamed = long.follow(8, 0);
        assert!(
            http_body::Body::size_hint(streamed.body())
                .exact()
                .is_none()
        );
        let streamed = text_of(streamed).await;
        assert!(streamed.starts_with("id: sb-8-0\n") && streamed.contains("id: sb-8-2\ndata: {"));
        assert!(
            streamed.contains(&"x".repeat(ONE_BODY_MOST)) && streamed.ends_with("\n\n"),
            "the long answer whole"
        );

        let paused = Arc::new(StreamLog::default());
        paused.push(&progress);
        paused.pause(Some(std::time::Duration::from_millis(250)));
        paused.push(&result);
        let until_pause = text_of(paused.follow(7, 0)).await;
        assert!(
            until_pause.ends_with("id: sb-7-2\nretry: 250\ndata: \n\n"),
            "{until_pause}"
        );
    }

    #[tokio::test]
    async fn a_long_stream_keeps_its_latest_events_and_a_client_behind_them_is_ended() {
        let report = |step: u64| {
            message(
                serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p", "progress": step, "message": "x".repeat(100_000)}}),
            )
        };
        let log = Arc::new(StreamLog::default());
        // A client following from the start, not reading yet.
        let behind = log.clone().follow(3, 0);
        for step in 1..=40 {
            log.push(&report(step));
        }
        let (first, bytes, kept) = {
            let messages = lock(&log.messages);
            (messages.first, messages.bytes, messages.entries.len())
        };
        assert!(first > 0, "the oldest events were let go");
        assert!(bytes <= KEPT_BYTES + 101_000, "{bytes} bytes kept");
        assert_eq!(first + kept, 40, "the latest events kept");
        assert!(!log.keeps_after(first - 1) && log.keeps_after(first));

        // The client behind what is kept gets the priming event and an end, not a gap.
        log.finish();
        let text = text_of(behind).await;
        assert_eq!(text, "id: sb-3-0\nretry: 3000\ndata: \n\n");
        // One from the kept events on reads them all, in order.
        let rest = text_of(log.clone().follow(3, first)).await;
        let ids: Vec<&str> = rest
            .lines()
            .filter_map(|line| line.strip_prefix("id: sb-3-"))
            .collect();
        let expected: Vec<String> = (first + 1..=40).map(|n| n.to_string()).collect();
        assert_eq!(ids, expected);

        // The newest event is kept whatever its size, and up to 1 MiB of the others beside it.
        let huge = Arc::new(StreamLog::default());
        huge.push(&report(1));
        huge.push(&message(serde_json::json!({"jsonrpc": "2.0", "id": 1,
            "result": {"content": [{"type": "text", "text": "y".repeat(2 * KEPT_BYTES)}]}})));
        huge.finish();
        assert!(huge.keeps_after(0));
        let last = text_of(huge.follow(4, 1)).await;
        assert!(
            last.starts_with("id: sb-4-2\ndata: {") && last.contains(&"y".repeat(2 * KEPT_BYTES))
        );
    }
}
