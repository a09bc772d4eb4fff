//! Reading Server-Sent Events with a bound on event size.
//!
//! Both the Streamable HTTP client and the legacy HTTP+SSE transport read SSE from the network. A
//! hostile or broken server could send one endless event; this wrapper fails the stream with a
//! clear error once a single event grows past the limit instead of buffering without end. (rmcp
//! has the same guard but keeps it crate-private, so this small piece is ours.)

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt, stream::BoxStream};
use sse_stream::{Error as SseError, Sse, SseStream};

/// Largest single SSE event accepted (16 MiB, as rmcp's own default).
pub const MAX_SSE_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// An SSE event larger than the limit.
#[derive(Debug, thiserror::Error)]
#[error("an SSE event exceeded {0} bytes")]
pub(crate) struct EventTooLarge(pub usize);

/// The bytes of a stream counted since the parser last gave out an event (or an error): what the
/// parser may be holding. Counting from the last blank line in the bytes instead trusted the
/// parser to end its events at the same blank lines, which it does not after some errors
/// (property testing found an event of 305 bytes passing a bound of 256).
struct BoundedBytes<S> {
    inner: S,
    max: usize,
    held: Arc<AtomicUsize>,
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
                let held = self.held.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
                if held > self.max {
                    self.failed = true;
                    return Poll::Ready(Some(Err(std::io::Error::other(EventTooLarge(self.max)))));
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(std::io::Error::other(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Parses a byte stream as SSE, failing once what one event may hold grows past
/// `max_event_bytes`: bytes received since the last event out, or the event's own data.
pub fn bounded_sse<S, E>(
    bytes: S,
    max_event_bytes: usize,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let held = Arc::new(AtomicUsize::new(0));
    let bounded = BoundedBytes {
        inner: bytes,
        max: max_event_bytes,
        held: held.clone(),
        failed: false,
    };
    let mut over = false;
    SseStream::from_bytes_stream(bounded)
        .map(move |event| {
            held.store(0, Ordering::Relaxed);
            match event {
                Ok(event) if event.data.as_deref().map_or(0, str::len) > max_event_bytes => {
                    Err(SseError::Body(Box::new(EventTooLarge(max_event_bytes))))
                }
                other => other,
            }
        })
        .take_while(move |event| {
            let go_on = !over;
            over = over || matches!(event, Err(SseError::Body(_)));
            std::future::ready(go_on)
        })
        .boxed()
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
