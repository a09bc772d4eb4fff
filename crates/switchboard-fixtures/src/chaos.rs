//! Servers that misbehave on purpose, for failure tests.

use std::sync::Arc;
use std::time::Duration;
use switchboard_core::sync::lock;

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{FixtureState, RunningFixture};

fn running(url: String, stop: CancellationToken) -> RunningFixture {
    RunningFixture::from_parts(url, Arc::new(FixtureState::default()), stop)
}

async fn serve(router: Router) -> RunningFixture {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    let stop = CancellationToken::new();
    crate::transports::spawn_router(listener, router, stop.clone(), None);
    running(format!("http://{addr}/mcp"), stop)
}

/// Answers every request with 200 and a body that is not JSON-RPC.
pub async fn garbage_json() -> RunningFixture {
    serve(Router::new().route(
        "/mcp",
        any(|| async {
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{\"this is\": not json"))
                .unwrap_or_default()
        }),
    ))
    .await
}

/// A way for a fixture server to fail a `tools/call`, armed on a running fixture (HTTP
/// transports) per call ([`FixtureState::arm`]) or on a schedule ([`FixtureState::arm_every`],
/// [`FixtureState::arm_for`]). A restart is not a response but an event:
/// [`RunningFixture::restart`](crate::transports::RunningFixture::restart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No answer at all; the connection stays open.
    Hang,
    /// An SSE response that breaks off in the middle of an event.
    CloseMidResponse,
    /// A 200 JSON response that is not valid JSON.
    Malformed,
    /// An error status (a burst: arm it for several calls).
    Status(u16),
    /// An SSE response that trickles a byte every 100 ms and never completes.
    Drip,
    /// A JSON response far larger than any client should accept (20 MiB).
    Oversized,
    /// 404 for the request's session, as when a server forgot it.
    ExpireSession,
    /// 429 Too Many Requests with `Retry-After` in seconds.
    TooManyRequests {
        /// The `Retry-After` value, in seconds.
        retry_after_secs: u64,
    },
    /// 401 with a Bearer `invalid_token` challenge: the server no longer accepts the token the
    /// request carried (revoked or expired early), in the middle of a session.
    RejectToken,
}

/// When an armed fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// The next this many calls, then never again.
    Next(usize),
    /// Every `nth` call (the `nth`, `2 * nth`, ...) until disarmed.
    Every {
        /// The period, in calls.
        nth: usize,
        /// Calls seen since arming.
        seen: usize,
    },
    /// Every call until this moment.
    Until(std::time::Instant),
}

/// A fault and its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Armed {
    /// The fault.
    pub fault: Fault,
    /// When it strikes.
    pub schedule: Schedule,
}

/// Whether the armed fault strikes this call (and counts the call against its schedule).
pub(crate) fn take_fault(state: &FixtureState) -> Option<Fault> {
    let mut slot = lock(&state.fault);
    let armed = slot.as_mut()?;
    let fault = armed.fault;
    match &mut armed.schedule {
        Schedule::Next(left) => {
            *left = left.saturating_sub(1);
            if *left == 0 {
                *slot = None;
            }
            Some(fault)
        }
        Schedule::Every { nth, seen } => {
            *seen += 1;
            (*seen % (*nth).max(1) == 0).then_some(fault)
        }
        Schedule::Until(end) => {
            if std::time::Instant::now() < *end {
                Some(fault)
            } else {
                *slot = None;
                None
            }
        }
    }
}

impl FixtureState {
    /// Arms `fault` for the next `calls` tool calls.
    pub fn arm(&self, fault: Fault, calls: usize) {
        self.arm_schedule(fault, Schedule::Next(calls));
    }

    /// Arms `fault` for every `nth` tool call until [`FixtureState::disarm`].
    pub fn arm_every(&self, fault: Fault, nth: usize) {
        self.arm_schedule(fault, Schedule::Every { nth, seen: 0 });
    }

    /// Arms `fault` for every tool call during the next `window`.
    pub fn arm_for(&self, fault: Fault, window: Duration) {
        self.arm_schedule(fault, Schedule::Until(std::time::Instant::now() + window));
    }

    /// Stops any armed fault.
    pub fn disarm(&self) {
        *lock(&self.fault) = None;
    }

    /// Whether a fault is armed.
    pub fn is_armed(&self) -> bool {
        lock(&self.fault).is_some()
    }

    fn arm_schedule(&self, fault: Fault, schedule: Schedule) {
        *lock(&self.fault) = Some(Armed { fault, schedule });
    }
}

impl Fault {
    /// The response that carries the fault.
    pub(crate) async fn respond(self) -> Response {
        let sse =
            |chunks: futures::stream::BoxStream<'static, Result<bytes::Bytes, std::io::Error>>| {
                Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "text/event-stream")
                    .body(Body::from_stream(chunks))
                    .unwrap_or_default()
            };
        match self {
            Fault::Hang => {
                std::future::pending::<()>().await;
                Response::default()
            }
            Fault::CloseMidResponse => sse(Box::pin(futures::stream::iter([
                Ok(bytes::Bytes::from_static(
                    b"id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\"",
                )),
                Err(std::io::Error::other("connection reset by the fixture")),
            ]))),
            Fault::Malformed => Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    "{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {oops",
                ))
                .unwrap_or_default(),
            Fault::Status(code) => Response::builder()
                .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
                .body(Body::from("the fixture fails on purpose"))
                .unwrap_or_default(),
            Fault::TooManyRequests { retry_after_secs } => Response::builder()
                .status(StatusCode::TOO_MANY_REQUESTS)
                .header(header::RETRY_AFTER, retry_after_secs.to_string())
                .body(Body::from("slow down"))
                .unwrap_or_default(),
            Fault::Drip => sse(Box::pin(futures::stream::unfold((), |()| async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Some((Ok(bytes::Bytes::from_static(b":")), ()))
            }))),
            Fault::Oversized => {
                let mut body = String::from(
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"",
                );
                body.push_str(&"x".repeat(20 * 1024 * 1024));
                body.push_str("\"}]}}");
                Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(body))
                    .unwrap_or_default()
            }
            Fault::RejectToken => Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .header(
                    header::WWW_AUTHENTICATE,
                    "Bearer error=\"invalid_token\", error_description=\"the token was revoked\"",
                )
                .body(Body::from("the token was revoked"))
                .unwrap_or_default(),
            Fault::ExpireSession => Response::builder()
                .status(StatusCode::NOT_FOUND)
                .body(Body::from("session not found"))
                .unwrap_or_default(),
        }
    }
}

/// Answers every POST with an SSE stream that breaks off in the middle of an event.
pub async fn broken_sse() -> RunningFixture {
    serve(Router::new().route(
        "/mcp",
        any(|| async {
            // Headers and half an event go out; then the stream breaks.
            let chunks = futures::stream::unfold(0u8, |step| async move {
                match step {
                    0 => Some((
                        Ok::<_, std::io::Error>(bytes::Bytes::from_static(
                            b"id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\"",
                        )),
                        1,
                    )),
                    1 => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        Some((
                            Err(std::io::Error::other("connection reset by the fixture")),
                            2,
                        ))
                    }
                    _ => None,
                }
            });
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(chunks))
                .unwrap_or_default()
        }),
    ))
    .await
}

/// Accepts TCP connections, reads the request, and never answers.
pub async fn hang() -> RunningFixture {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    let stop = CancellationToken::new();
    let accept_stop = stop.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            tokio::select! {
                _ = accept_stop.cancelled() => break,
                accepted = listener.accept() => {
                    if let Ok((mut stream, _)) = accepted {
                        let mut buffer = [0u8; 4096];
                        let _ = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buffer)).await;
                        held.push(stream);
                    }
                }
            }
        }
    });
    running(format!("http://{addr}/mcp"), stop)
}

/// Answers every request with the given status and a plain-text body.
pub async fn status(code: u16) -> RunningFixture {
    serve(Router::new().route(
        "/mcp",
        any(move || async move {
            Response::builder()
                .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
                .body(Body::from("fixture status"))
                .unwrap_or_default()
        }),
    ))
    .await
}

/// Answers every request with `308 Permanent Redirect` to `location`, as a server that moved.
pub async fn moved(location: &'static str) -> RunningFixture {
    serve(Router::new().route(
        "/mcp",
        any(move || async move {
            Response::builder()
                .status(StatusCode::PERMANENT_REDIRECT)
                .header(axum::http::header::LOCATION, location)
                .body(Body::from("moved"))
                .unwrap_or_default()
        }),
    ))
    .await
}

/// An HTTP+SSE server whose `endpoint` event points at another origin.
pub async fn cross_origin_endpoint() -> RunningFixture {
    let fixture = serve(Router::new().route(
        "/sse",
        axum::routing::get(|| async {
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from(
                    "event: endpoint\ndata: http://127.0.0.1:9/message?sessionId=x\n\n",
                ))
                .unwrap_or_default()
        }),
    ))
    .await;
    let url = fixture.url.replace("/mcp", "/sse");
    RunningFixture::from_parts(url, fixture.state.clone(), fixture.take_stop())
}
