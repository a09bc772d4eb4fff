//! Reading Server-Sent Events with a bound on event size.
//!
//! Both the Streamable HTTP client and the legacy HTTP+SSE transport read SSE from the network. A
//! hostile or broken server could send one endless event; this wrapper fails the stream with a
//! clear error once a single event grows past the limit instead of buffering without end. (rmcp
//! has the same guard but keeps it crate-private, so this small piece is ours.)

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt, stream::BoxStream};
use sse_stream::{Error as SseError, Sse, SseStream};

/// Largest single SSE event accepted (16 MiB, as rmcp's own default).
pub const MAX_SSE_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// An SSE event larger than the limit.
#[derive(Debug, thiserror::Error)]
#[error("an SSE event exceeded {0} bytes")]
pub struct EventTooLarge(pub usize);

struct BoundedBytes<S> {
    inner: S,
    max: usize,
    since_boundary: usize,
    previous_was_newline: bool,
    failed: bool,
}

impl<S, E> Stream for BoundedBytes<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match self.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                for &byte in chunk.iter() {
                    match byte {
                        b'\n' if self.previous_was_newline => self.since_boundary = 0,
                        b'\n' => self.previous_was_newline = true,
                        b'\r' => {}
                        _ => self.previous_was_newline = false,
                    }
                    self.since_boundary += 1;
                    if self.since_boundary > self.max {
                        self.failed = true;
                        return Poll::Ready(Some(Err(std::io::Error::other(EventTooLarge(
                            self.max,
                        )))));
                    }
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(std::io::Error::other(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Parses a byte stream as SSE, failing once one event exceeds `max_event_bytes`.
pub fn bounded_sse<S, E>(
    bytes: S,
    max_event_bytes: usize,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let bounded = BoundedBytes {
        inner: bytes,
        max: max_event_bytes,
        since_boundary: 0,
        previous_was_newline: false,
        failed: false,
    };
    SseStream::from_bytes_stream(bounded).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(
        parts: &[&'static str],
    ) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin + use<> {
        futures::stream::iter(
            parts
                .iter()
                .map(|p| Ok(Bytes::from_static(p.as_bytes())))
                .collect::<Vec<_>>(),
        )
    }

    #[tokio::test]
    async fn events_within_the_limit_pass_even_when_split_across_chunks() {
        let events: Vec<_> = bounded_sse(
            chunks(&["event: endpoint\nda", "ta: /m\n\n", "data: x\r\n\r\n"]),
            32,
        )
        .collect()
        .await;
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].as_ref().unwrap().data.as_deref(), Some("/m"));
        assert_eq!(events[1].as_ref().unwrap().data.as_deref(), Some("x"));
    }

    #[tokio::test]
    async fn an_endless_event_fails_the_stream() {
        let big: &'static str = Box::leak("a".repeat(100).into_boxed_str());
        let mut stream = bounded_sse(chunks(&["data: ", big, big]), 64);
        let mut saw_error = false;
        while let Some(item) = stream.next().await {
            if item.is_err() {
                saw_error = true;
            }
        }
        assert!(saw_error);
    }
}
