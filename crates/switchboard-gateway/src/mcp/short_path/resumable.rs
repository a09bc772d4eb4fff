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
    pub(super) fn follow(self: Arc<Self>, stream: u64, after: usize) -> Response {
        let priming = (after == 0).then(|| {
            let retry = RESUME_AFTER.as_millis();
            Bytes::from(format!(
                "id: {EVENT_ID_PREFIX}{stream}-0\nretry: {retry}\ndata: \n\n"
            ))
        });
        let events = futures::stream::unfold(Some((self, after)), move |state| async move {
            let (log, next) = state?;
            loop {
                let changed = log.changed.notified();
                let mut changed = std::pin::pin!(changed);
                changed.as_mut().enable();
                {
                    let messages = lock(&log.messages);
                    let id = format!("{EVENT_ID_PREFIX}{stream}-{}", next + 1);
                    match messages.0.get(next) {
                        // Compact JSON has no raw line breaks, so one `data` line carries it.
                        Some(Entry::Message(data)) => {
                            let event = format!("id: {id}\ndata: {data}\n\n");
                            return Some((Bytes::from(event), Some((log.clone(), next + 1))));
                        }
                        Some(Entry::Pause(retry)) => {
                            let retry =
                                retry.map(|ms| format!("retry: {ms}\n")).unwrap_or_default();
                            let event = format!("id: {id}\n{retry}data: \n\n");
                            return Some((Bytes::from(event), None));
                        }
                        None if messages.1 => return None,
                        None => {}
                    }
                }
                changed.await;
            }
        });
        let events = futures::stream::iter(priming)
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
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            axum::body::Body::from_stream(body),
        )
            .into_response()
    }
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
