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
use crate::mcp::{Shared, lock};

/// How long a client is told to wait before resuming a stream, as rmcp tells it.
pub(super) const RESUME_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

/// The longest answer of a complete stream sent as one body (a longer one is followed event by
/// event, as a stream still running is).
const ONE_BODY_MOST: usize = 64 * 1024;

/// How many of a session's latest streams are kept for resumption.
pub(super) const KEPT_STREAMS: usize = 16;

/// The prefix of the event ids of the short path's streams (`sb-<stream>-<index>`), which tells
/// a resumption of one of them from one of rmcp's.
pub(super) const EVENT_ID_PREFIX: &str = "sb-";

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

/// The messages of one stream to a session client, as sent, and whether it is complete.
#[derive(Default)]
pub(crate) struct StreamLog {
    messages: std::sync::Mutex<(Vec<Entry>, bool)>,
    changed: tokio::sync::Notify,
    /// A client that comes back for the rest after the stream paused.
    polling: Option<switchboard_upstream::CallerPolling>,
}

/// One event of a [`StreamLog`].
pub(super) enum Entry {
    /// A message, as its JSON.
    Message(String),
    /// The server ended its stream before the response: the client's stream ends here too,
    /// with the server's reconnection delay in milliseconds, if it gave one.
    Pause(Option<u128>),
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
        lock(&self.messages).0.push(Entry::Message(data));
        self.changed.notify_waiters();
    }

    pub(super) fn pause(&self, retry: Option<std::time::Duration>) {
        let retry = retry.map(|retry| retry.as_millis());
        lock(&self.messages).0.push(Entry::Pause(retry));
        self.changed.notify_waiters();
    }

    /// The client came back for the events after the one numbered `after`: when that one
    /// paused the stream and the server's is still paused, the server's is resumed now.
    pub(super) fn came_back(&self, after: usize) {
        let messages = lock(&self.messages);
        let paused_there = after > 0
            && after == messages.0.len()
            && matches!(messages.0.get(after - 1), Some(Entry::Pause(_)));
        if paused_there && let Some(polling) = &self.polling {
            polling.came_back();
        }
    }

    pub(super) fn finish(&self) {
        lock(&self.messages).1 = true;
        self.changed.notify_waiters();
    }

    /// The stream `stream` as an SSE answer: from the start (the priming event first) when
    /// `after` is 0, else the events after the one numbered `after`; it follows the log until
    /// it is complete or pauses, with a keep-alive comment every 15 s. Written by hand: the
    /// priming event carries an empty `data` field (SEP-1699), which axum's events leave out, and
    /// a pause is an event with an id, the server's `retry` and empty data, after which the
    /// response ends.
    ///
    /// A log already complete (the commonest case: the server answered in one message), up to
    /// [`ONE_BODY_MOST`] bytes, is answered as one body of known length: no stream to poll, no keep-alive timer to arm (which
    /// costs the connection's thread a wake-up of its own), one write.
    pub(super) fn follow(self: Arc<Self>, stream: u64, after: usize) -> Response {
        let priming = (after == 0).then(|| {
            let retry = RESUME_AFTER.as_millis();
            format!("id: {EVENT_ID_PREFIX}{stream}-0\nretry: {retry}\ndata: \n\n")
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
                    match messages.0.get(next) {
                        Some(entry) => {
                            let mut event = String::new();
                            let ends = write_event(&mut event, stream, next + 1, entry);
                            let rest = (!ends).then(|| (log.clone(), next + 1));
                            return Some((Bytes::from(event), rest));
                        }
                        None if messages.1 => return None,
                        None => {}
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
    fn complete_from(&self, stream: u64, after: usize, priming: Option<&str>) -> Option<String> {
        let messages = lock(&self.messages);
        let entries = messages.0.get(after..).unwrap_or_default();
        let pauses = entries.iter().any(|entry| matches!(entry, Entry::Pause(_)));
        if !messages.1 && !pauses {
            return None;
        }
        // Each event's id and fields take less than 64 bytes beside its data.
        let size = priming.map_or(0, str::len)
            + entries
                .iter()
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
        for (index, entry) in entries.iter().enumerate() {
            if write_event(&mut whole, stream, after + index + 1, entry) {
                break;
            }
        }
        Some(whole)
    }
}

/// Writes `entry`, event `number` of stream `stream`, to `out` as SSE; whether it ends the
/// response (a pause).
fn write_event(out: &mut String, stream: u64, number: usize, entry: &Entry) -> bool {
    use std::fmt::Write;
    let _ = writeln!(out, "id: {EVENT_ID_PREFIX}{stream}-{number}");
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
    let last = single(headers, &LAST_EVENT_ID)?.strip_prefix(EVENT_ID_PREFIX)?;
    let (stream, index) = last.split_once('-')?;
    let (stream, index) = (stream.parse::<u64>().ok()?, index.parse::<usize>().ok()?);
    let state = lock(&shared.short_path_sessions)
        .get(session)
        .and_then(std::sync::Weak::upgrade)?;
    let log = lock(&state.short_path_streams).find(stream)?;
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
}
