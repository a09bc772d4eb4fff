//! The relay of a call the short path took: sent to the server as one HTTP exchange, and the
//! server's messages brought back to the client (mapped, finished for its era), as one JSON
//! answer or a stream.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::{
    CallToolRequest, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, JsonRpcRequest,
    JsonRpcResponse, LoggingLevel, RequestId, ServerJsonRpcMessage, ServerNotification,
    ServerResult,
};
use switchboard_hub::ExposedCatalog;
use switchboard_upstream::{DirectReply, Upstream, UpstreamError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::mcp::{Shared, call_result, downstream::severity};
use switchboard_core::sync::lock;

/// The client's protocol era, which decides how answers are finished and which log messages
/// it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Era {
    /// 2026-07-28: no session; log messages only when the request asked for them.
    Stateless,
    /// 2025-03-26 .. 2025-11-25 in a session: everything unless the session set a level.
    Session,
}

/// The responder of a call no server can ask anything on (see [`relay`]).
static DECLINE: std::sync::LazyLock<Arc<dyn switchboard_upstream::InputResponder>> =
    std::sync::LazyLock::new(|| Arc::new(switchboard_upstream::InputPolicy::Decline));

/// A call this path relays.
pub(super) struct Call {
    pub(super) upstream: Upstream,
    /// The request with the server's own tool name, the caller's id and `_meta`.
    pub(super) request: JsonRpcRequest<CallToolRequest>,
    pub(super) server: switchboard_core::ServerId,
    pub(super) era: Era,
    /// The least severe log message the client wants (see [`Era`] when there is none).
    pub(super) log_level: Option<LoggingLevel>,
    /// Fires when the client cancels the call (sessions).
    pub(super) cancelled: Option<CancellationToken>,
    /// For a session call, the responder that asks the client on the call's stream, and that
    /// stream's questions.
    pub(super) asking: Option<(AskOnStream, mpsc::Receiver<Box<ServerJsonRpcMessage>>)>,
    /// For a session call, the session, which keeps the call's stream for resumption.
    pub(super) session: Option<Arc<crate::mcp::SessionState>>,
    /// The client resumes a stream that ends early (a 2025-11-25 session client): when the
    /// server ends the call's stream before its response, the client's stream ends too, and the
    /// server's is resumed when the client comes back ([`switchboard_upstream::CallerPolling`]).
    pub(super) caller_polls: bool,
    /// The call may be sent again after a transient failure ([`ServerView::repeatable`]).
    pub(super) repeatable: bool,
    /// The client's request as traces show it ([`request_span`]).
    pub(super) span: tracing::Span,
    /// Where it came in, for the audit log (when one is kept).
    pub(super) origin: Option<Arc<switchboard_core::CallOrigin>>,
}

/// Sends `call` and answers the client with what comes back; `None` when nothing was sent
/// and the full path is to answer.
///
/// `call` is taken apart here, before the future: an `async fn` would keep it whole in its
/// future beside the parts taken out of it, a kilobyte more in every call's (`docs/benchmarks.md`).
pub(super) fn relay<'a>(
    shared: &'a Arc<Shared>,
    stop: &'a CancellationToken,
    catalog: Arc<ExposedCatalog>,
    call: Call,
) -> impl Future<Output = Option<Response>> + Send + 'a {
    let Call {
        upstream,
        request,
        server,
        era,
        log_level,
        cancelled,
        asking,
        session,
        caller_polls,
        repeatable,
        span,
        origin,
    } = call;
    async move {
        tracing::trace!(tool = %request.request.params.name, %server, "relayed directly");
        shared.subscribing.settled(&server).await;
        let in_flight = shared.in_flight.token();
        let cancelled = cancelled.unwrap_or_default();
        let (input, questions): (Arc<dyn switchboard_upstream::InputResponder>, _) = match asking {
            Some((asker, questions)) => (Arc::new(asker), Some(questions)),
            // A stateless server asks with `input_required`, never on the call's stream (its route
            // ignores requests there), so no responder is ever called: one serves every call.
            None => (DECLINE.clone(), None),
        };
        let (polling, mut pauses) = match caller_polls {
            true => {
                let (polling, pauses) = switchboard_upstream::CallerPolling::new();
                (Some(polling), Some(pauses))
            }
            false => (None, None),
        };
        let id = request.id.clone();
        let cancel = cancelled.clone();
        let passed = polling.clone();
        let parent = span.clone();
        let sent = async move {
            upstream
                .call_tool_direct(request, input, cancel, passed, repeatable, origin, &parent)
                .await
        };
        let relayed = Relayed {
            source: Source::Sending(Box::pin(sent)),
            span,
            questions,
            catalog,
            server,
            id,
            era,
            log_level,
        };
        let mut waiting = Waiting {
            call: Some((relayed, in_flight)),
            runs_out: session.is_some(),
            cancelled: cancelled.clone(),
            stop: stop.clone(),
        };
        // Whatever happens once the call went out is answered here, never by the full path.
        let first = tokio::select! {
            biased;
            first = waiting.first() => first,
            // The server ended the call's stream before its first message: so does the client's,
            // once primed, and the call goes on in the background until the client is back.
            Some(retry) = next_pause(&mut pauses) => {
                let (Some(session), Some(call)) = (session, waiting.call.take()) else {
                    return Some(unanswered());
                };
                let pause = |log: &StreamLog| log.pause(retry);
                return Some(resumable(&session, polling, call, pauses, stop, cancelled, pause));
            }
            // A session call not answered within a moment is given its resumable stream now,
            // primed, so that a client whose connection drops while the call runs can come back
            // for the rest; a call answered sooner is answered as one JSON body (below).
            () = primed_after(session.is_some()) => {
                let (Some(session), Some(call)) = (session, waiting.call.take()) else {
                    return Some(unanswered());
                };
                return Some(resumable(&session, polling, call, pauses, stop, cancelled, |_| {}));
            }
            () = stop.cancelled() => {
                return Some(match &waiting.call {
                    Some((relayed, _)) => json(era, &relayed.finish(Err(UpstreamError::Cancelled))),
                    None => unanswered(),
                });
            }
            // A cancelled request is not answered.
            () = cancelled.cancelled() => return Some(unanswered()),
        };
        // Always there: only dropping `waiting` takes it otherwise.
        let Some((relayed, in_flight)) = waiting.call.take() else {
            return Some(unanswered());
        };
        let first = match first {
            Some(Next::Message(first)) => first,
            Some(Next::NotSent) => return None,
            None => relayed.finish(Err(UpstreamError::Closed)),
        };
        // The server's answer came first (and soon), so it is the client's whole answer: one JSON
        // body, in every era (a POST may be answered so, and every client must read both). As a
        // resumable stream it would go out in the same single write, its priming event with the
        // answer, so a client that lost it would have no event id to come back with: the stream
        // would add only its cost (docs/benchmarks.md).
        if is_final(&first) {
            return Some(json(era, &first));
        }
        if let Some(session) = session {
            let call = (relayed, in_flight);
            let begin = |log: &StreamLog| log.push(&first);
            return Some(resumable(
                &session, polling, call, pauses, stop, cancelled, begin,
            ));
        }
        // The stream stays counted as in flight until it ends, so a shutdown lets it finish.
        let rest = futures::stream::unfold(relayed, |mut relayed| async move {
            match relayed.next().await? {
                Next::Message(message) => Some((message, relayed)),
                Next::NotSent => None,
            }
        });
        let events = futures::stream::iter([first])
            .chain(rest)
            .take_until(stop.clone().cancelled_owned())
            .take_until(cancelled.cancelled_owned())
            .map(move |message| {
                let _counted = &in_flight;
                let data = serde_json::to_string(&message).unwrap_or_default();
                Ok::<_, Infallible>(Event::default().data(data))
            });
        Some(
            Sse::new(events)
                .keep_alive(KeepAlive::default())
                .into_response(),
        )
    }
}

/// A session call's answer as a stream its client can resume (SEP-1699), as rmcp's are: primed,
/// its events numbered and kept in `session`, beginning with what `begin` writes to it. The call
/// runs on in a task of its own, whether or not the client stays to read it.
fn resumable(
    session: &crate::mcp::SessionState,
    polling: Option<switchboard_upstream::CallerPolling>,
    (relayed, in_flight): (Relayed, tokio_util::task::task_tracker::TaskTrackerToken),
    pauses: Option<mpsc::UnboundedReceiver<Option<std::time::Duration>>>,
    stop: &CancellationToken,
    cancelled: CancellationToken,
    begin: impl FnOnce(&StreamLog),
) -> Response {
    let log = Arc::new(StreamLog::polled_by(polling));
    let stream = lock(&session.short_path_streams).keep(log.clone());
    begin(&log);
    keep_logging(
        log.clone(),
        relayed,
        pauses,
        in_flight,
        stop.clone(),
        cancelled,
    );
    log.follow(stream, 0)
}

/// Resolves [`PRIME_AFTER`] from now for a session call (`primes`); never for a stateless one.
async fn primed_after(primes: bool) {
    match primes {
        true => crate::timer_anchor::sleep(PRIME_AFTER).await,
        false => std::future::pending().await,
    }
}

/// The next pause of the server's stream, if the client resumes streams itself.
pub(super) async fn next_pause(
    pauses: &mut Option<mpsc::UnboundedReceiver<Option<std::time::Duration>>>,
) -> Option<Option<std::time::Duration>> {
    match pauses {
        Some(pauses) => pauses.recv().await,
        None => std::future::pending().await,
    }
}

/// Runs a session call on in a task of its own, whether or not its client stays to read it:
/// its messages, and the pauses of the server's stream, go to `log` until the response (or
/// the client's cancellation, or the daemon's stop). A message already on its way comes
/// before a pause that came after it.
pub(super) fn keep_logging(
    log: Arc<StreamLog>,
    mut relayed: Relayed,
    mut pauses: Option<mpsc::UnboundedReceiver<Option<std::time::Duration>>>,
    in_flight: tokio_util::task::task_tracker::TaskTrackerToken,
    stop: CancellationToken,
    cancelled: CancellationToken,
) {
    tokio::spawn(async move {
        let _counted = in_flight;
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                () = cancelled.cancelled() => break,
                next = relayed.next() => match next {
                    Some(Next::Message(message)) => log.push(&message),
                    Some(Next::NotSent) | None => break,
                },
                Some(retry) = next_pause(&mut pauses) => log.pause(retry),
            }
        }
        log.finish();
    });
}

/// A call sent, its client waiting for the first message. In a session, a client that goes away
/// then (its connection closed, so the handler is dropped) does not cancel the call: a closed
/// stream is no cancellation there (the spec's rule, and the full path's). The call runs on to
/// its end in a task of its own, its messages dropped (the client was never given a stream to
/// resume), unless it is cancelled (by the client, or its session's end) or the daemon stops.
pub(super) struct Waiting {
    call: Option<(Relayed, tokio_util::task::task_tracker::TaskTrackerToken)>,
    runs_out: bool,
    cancelled: CancellationToken,
    stop: CancellationToken,
}

impl Waiting {
    pub(super) async fn first(&mut self) -> Option<Next> {
        match &mut self.call {
            Some((relayed, _)) => relayed.next().await,
            None => None,
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some((mut relayed, in_flight)) = self.call.take() else {
            return;
        };
        if !self.runs_out
            || self.cancelled.is_cancelled()
            || self.stop.is_cancelled()
            || tokio::runtime::Handle::try_current().is_err()
        {
            return;
        }
        let (cancelled, stop) = (self.cancelled.clone(), self.stop.clone());
        tokio::spawn(async move {
            let _counted = in_flight;
            let run_out = async { while let Some(Next::Message(_)) = relayed.next().await {} };
            tokio::select! {
                () = run_out => {}
                () = cancelled.cancelled() => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

/// Where a relayed call's messages come from: the call being sent, then its reply.
pub(super) enum Source {
    Sending(futures::future::BoxFuture<'static, Result<DirectReply, UpstreamError>>),
    Streaming(futures::stream::BoxStream<'static, Result<ServerJsonRpcMessage, UpstreamError>>),
    Ended,
}

/// What a relayed call has for its client next.
pub(super) enum Next {
    /// A message for the client: a question of the server's, a notification it wants, or the
    /// response (the last). Boxed, as the server's answer comes ([`DirectReply::Message`]).
    Message(Box<ServerJsonRpcMessage>),
    /// The call was not sent; the full path is to take it.
    NotSent,
}

/// A call on its way: the server's messages, mapped and filtered for the client, and the
/// server's questions to it, in the order they come, until the response.
pub(super) struct Relayed {
    source: Source,
    /// Requests for the client from the call's responder ([`AskOnStream`]).
    questions: Option<mpsc::Receiver<Box<ServerJsonRpcMessage>>>,
    catalog: Arc<ExposedCatalog>,
    server: switchboard_core::ServerId,
    /// The client's id for the call.
    id: RequestId,
    era: Era,
    /// The least severe log message the client wants (see [`Era`] when there is none).
    log_level: Option<LoggingLevel>,
    /// The client's request in traces, open until its answer.
    span: tracing::Span,
}

impl Relayed {
    /// The next message for the client; `None` after the response.
    pub(super) async fn next(&mut self) -> Option<Next> {
        loop {
            let question = async {
                match &mut self.questions {
                    Some(questions) => questions.recv().await,
                    None => std::future::pending().await,
                }
            };
            let reply = match &mut self.source {
                Source::Ended => return None,
                Source::Sending(sent) => tokio::select! {
                    Some(question) = question => return Some(Next::Message(question)),
                    reply = sent => reply,
                },
                Source::Streaming(messages) => tokio::select! {
                    Some(question) = question => return Some(Next::Message(question)),
                    message = messages.next() => match message {
                        Some(Ok(JsonRpcMessage::Notification(notification))) => {
                            if wants(self.era, self.log_level, &notification.notification) {
                                return Some(Next::Message(Box::new(
                                    JsonRpcMessage::Notification(notification),
                                )));
                            }
                            continue;
                        }
                        Some(outcome) => {
                            outcome.map(|message| DirectReply::Message(Box::new(message)))
                        }
                        None => Err(UpstreamError::Closed),
                    },
                },
            };
            let outcome = match reply {
                Ok(DirectReply::Stream(messages)) => {
                    self.source = Source::Streaming(messages);
                    continue;
                }
                Ok(DirectReply::NotSent) => {
                    self.source = Source::Ended;
                    return Some(Next::NotSent);
                }
                Ok(DirectReply::Message(message)) => Ok(message),
                Err(error) => Err(error),
            };
            self.source = Source::Ended;
            return Some(Next::Message(self.finish(outcome)));
        }
    }

    /// The client's answer to the server's response, or to the failure to get one.
    pub(super) fn finish(
        &self,
        outcome: Result<Box<ServerJsonRpcMessage>, UpstreamError>,
    ) -> Box<ServerJsonRpcMessage> {
        let outcome = outcome.map(|message| *message);
        let answer = Box::new(answer(
            &self.catalog,
            &self.server,
            &self.id,
            self.era,
            outcome,
        ));
        match &*answer {
            JsonRpcMessage::Error(error) => crate::mcp::trace_error(&self.span, &error.error),
            JsonRpcMessage::Response(JsonRpcResponse {
                result: ServerResult::CallToolResult(result),
                ..
            }) if result.is_error == Some(true) => {
                switchboard_telemetry::record_error(&self.span, "tool_error", None);
            }
            _ => {}
        }
        answer
    }
}

/// Whether a client of `era` that wants log messages from `log_level` up wants this
/// notification about its call.
pub(super) fn wants(
    era: Era,
    log_level: Option<LoggingLevel>,
    notification: &ServerNotification,
) -> bool {
    match notification {
        ServerNotification::ProgressNotification(_) => true,
        ServerNotification::LoggingMessageNotification(log) => match (era, log_level) {
            (_, Some(level)) => severity(log.params.level) >= severity(level),
            (Era::Session, None) => true,
            (Era::Stateless, None) => false,
        },
        _ => false,
    }
}

/// The answer to a request the client cancelled: a stream that ends without a message.
pub(super) fn unanswered() -> Response {
    Sse::new(futures::stream::empty::<Result<Event, Infallible>>()).into_response()
}

/// The client's answer to the server's response (or to the failure to get one), mapped as the
/// full path maps it and finished for the client's `era` as rmcp finishes it.
pub(super) fn answer(
    catalog: &ExposedCatalog,
    server: &switchboard_core::ServerId,
    id: &RequestId,
    era: Era,
    outcome: Result<ServerJsonRpcMessage, UpstreamError>,
) -> ServerJsonRpcMessage {
    let result = match outcome {
        Ok(JsonRpcMessage::Response(response)) => Ok(response.result),
        Ok(JsonRpcMessage::Error(error)) => Err(UpstreamError::Rpc {
            code: error.error.code.0,
            message: error.error.message.into_owned(),
            data: error.error.data,
        }),
        Ok(_) => Err(UpstreamError::Protocol(
            "a message that does not answer the call".into(),
        )),
        Err(error) => Err(error),
    };
    // As rmcp finishes every answer on the full path: for a 2026-07-28 client, cache hints
    // filled in and the standard code for a missing resource; for a legacy one, no
    // `resultType`, and no `input_required` (which it cannot read).
    let finished = call_result(catalog, server, result).and_then(|response| {
        let mut result = ServerResult::from(response);
        match era {
            Era::Stateless => result.fill_missing_cache_hints(),
            Era::Session if matches!(result, ServerResult::InputRequiredResult(_)) => {
                return Err(ErrorData::invalid_request(
                    "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                    None,
                ));
            }
            Era::Session => result.strip_result_type_for_legacy_peer(),
        }
        Ok(result)
    });
    match finished {
        Ok(result) => JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: Default::default(),
            id: id.clone(),
            result,
        }),
        Err(mut error) => {
            if era == Era::Stateless && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            JsonRpcMessage::Error(JsonRpcError::new(Some(id.clone()), error))
        }
    }
}

pub(super) fn is_final(message: &ServerJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)
    )
}

/// One message as the whole HTTP answer, with the status a server of the client's era gives
/// it (as rmcp does on the full path: to a 2026-07-28 client some errors are HTTP errors too).
pub(super) fn json(era: Era, message: &ServerJsonRpcMessage) -> Response {
    let status = match message {
        JsonRpcMessage::Error(error) if era == Era::Stateless => match error.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    };
    let body = switchboard_upstream::wire::encode(message).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Bytes::from(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_finished_as_rmcp_finishes_them_for_2026_clients() {
        let catalog = switchboard_hub::ExposedCatalog::default();
        let server = switchboard_core::ServerId::new("files").unwrap();
        let id = RequestId::Number(3);
        let missing = JsonRpcMessage::Error(JsonRpcError::new(
            Some(id.clone()),
            rmcp::model::ErrorData::resource_not_found("no such file", None),
        ));
        let JsonRpcMessage::Error(error) =
            answer(&catalog, &server, &id, Era::Stateless, Ok(missing))
        else {
            panic!("an error stays an error");
        };
        assert_eq!(error.error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(error.error.message, "no such file");

        let failed = answer(
            &catalog,
            &server,
            &id,
            Era::Stateless,
            Err(UpstreamError::Closed),
        );
        let text = serde_json::to_value(&failed).unwrap();
        assert_eq!(text["id"], 3);
        assert_eq!(text["result"]["isError"], true, "{text}");
        assert_eq!(text["result"]["resultType"], "complete", "{text}");
    }
}
