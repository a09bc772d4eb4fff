//! Server-to-client requests on the short path: a question the server asks on a session call's
//! stream is put to the client on the client's stream for that call, and its answer, or its
//! `notifications/cancelled`, finds its way back.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    ClientJsonRpcMessage, ErrorData, InputRequest, JsonRpcMessage, JsonRpcRequest, LoggingLevel,
    RequestId, ServerJsonRpcMessage, ServerNotification, ServerRequest,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::mcp::Shared;
use switchboard_core::sync::lock;
use switchboard_core::wire_names::ASK_REQUEST_ID_PREFIX;

/// Hands the client's `answer` to the question `id` it was asked in `session` on the short
/// path: 202, as for any answer; `None` when no such question waits (rmcp's, then).
pub(super) fn answered(
    shared: &Shared,
    session: &str,
    id: RequestId,
    answer: ClientJsonRpcMessage,
) -> Option<Response> {
    let waiting = lock(&shared.short_path_questions).remove(&(Arc::from(session), id))?;
    let _ = waiting.send(answer);
    Some(StatusCode::ACCEPTED.into_response())
}

/// Cancels the call `id` of `session` relayed here, if there is one.
pub(super) fn cancel(shared: &Shared, session: &str, id: RequestId) {
    if let Some((_, call)) = lock(&shared.short_path_calls).get(&(Arc::from(session), id)) {
        call.cancel();
    }
}

/// A call's place among those [`cancel`] finds, until dropped.
pub(super) struct Registered {
    shared: Arc<Shared>,
    key: (Arc<str>, RequestId),
    /// Tells this call's entry from a later one under the same id (a client may reuse an id).
    serial: u64,
}

impl Registered {
    pub(super) fn new(
        shared: &Arc<Shared>,
        session: &Arc<str>,
        id: &RequestId,
        call: &CancellationToken,
    ) -> Self {
        static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = (session.clone(), id.clone());
        lock(&shared.short_path_calls).insert(key.clone(), (serial, call.clone()));
        Self {
            shared: shared.clone(),
            key,
            serial,
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut calls = lock(&self.shared.short_path_calls);
        if calls
            .get(&self.key)
            .is_some_and(|(serial, _)| *serial == self.serial)
        {
            calls.remove(&self.key);
        }
    }
}

/// A client's answer to a question the short path put to it.
pub(crate) type Answer = oneshot::Sender<ClientJsonRpcMessage>;

/// The responder of a session call on the short path: the server's requests for input go to
/// the client on the call's own stream (as the full path puts them on the request's stream),
/// under ids of Switchboard's own, and the client's answers, which it POSTs in its session, are
/// taken by [`try_call`] on their way to rmcp. Requests the client did not declare the
/// capability for are refused as on the full path.
pub(super) struct AskOnStream {
    pub(super) shared: Arc<Shared>,
    /// The session's id, shared with its state.
    pub(super) session: Arc<str>,
    /// The session, whose negotiated capabilities say what its client may be asked.
    pub(super) state: Arc<crate::mcp::SessionState>,
    /// The log level the session asked for when the call began.
    pub(super) log_level: Option<LoggingLevel>,
    /// The call's stream to the client. Its messages are boxed: a tokio channel allocates
    /// room for 32 of them when made, 16 KB for this 500-byte message and 256 bytes for a box,
    /// and every session call makes one while few ever carry a question.
    pub(super) questions: mpsc::Sender<Box<ServerJsonRpcMessage>>,
    /// The call's place among those the client's `notifications/cancelled` reaches.
    pub(super) _registered: Registered,
}

impl switchboard_upstream::InputResponder for AskOnStream {
    /// The session: the full path knows this session's calls by its id too.
    fn client(&self) -> Option<&str> {
        Some(&self.session)
    }

    /// A log message the server sent about the call on its session's GET stream (those on the
    /// call's own stream are read by the short path itself) goes on the call's stream too, if
    /// the session wants it.
    fn log(&self, message: rmcp::model::LoggingMessageNotificationParam) {
        let notification =
            ServerNotification::LoggingMessageNotification(rmcp::model::Notification::new(message));
        if !wants(Era::Session, self.log_level, &notification) {
            return;
        }
        let message = Box::new(JsonRpcMessage::notification(notification));
        if let Err(mpsc::error::TrySendError::Full(message)) = self.questions.try_send(message) {
            let questions = self.questions.clone();
            tokio::spawn(async move { questions.send(message).await });
        }
    }

    fn answer(
        &self,
        _key: Option<&str>,
        request: InputRequest,
    ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, ErrorData>> {
        // Always negotiated: a call is relayed here only in a session that was.
        let none = rmcp::model::ClientCapabilities::default();
        let capabilities = (self.state.negotiated.get()).map_or(&none, |n| &n.capabilities);
        if let Err(refused) = crate::mcp::downstream::supports(capabilities, &request) {
            return Box::pin(std::future::ready(Err(refused)));
        }
        let request = match request {
            InputRequest::CreateMessage(r) => ServerRequest::CreateMessageRequest(r),
            InputRequest::Elicitation(r) => ServerRequest::ElicitRequest(r),
            InputRequest::ListRoots(r) => ServerRequest::ListRootsRequest(r),
            _ => {
                let refused = ErrorData::invalid_params(
                    "Switchboard cannot relay this kind of input request",
                    None,
                );
                return Box::pin(std::future::ready(Err(refused)));
            }
        };
        static QUESTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let number = QUESTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = RequestId::String(format!("{ASK_REQUEST_ID_PREFIX}{number}").into());
        let (answer, answered) = oneshot::channel();
        let key = (self.session.clone(), id.clone());
        lock(&self.shared.short_path_questions).insert(key.clone(), answer);
        let unregister = Unregister {
            shared: self.shared.clone(),
            key,
        };
        let questions = self.questions.clone();
        let question = Box::new(JsonRpcMessage::Request(JsonRpcRequest::new(id, request)));
        Box::pin(async move {
            let _unregister = unregister;
            let gone =
                || ErrorData::internal_error("the client's request ended before it answered", None);
            questions.send(question).await.map_err(|_| gone())?;
            // Until the client answers, or the call's stream to it ends.
            let answer = tokio::select! {
                answer = answered => answer.map_err(|_| gone())?,
                () = questions.closed() => return Err(gone()),
            };
            match answer {
                JsonRpcMessage::Response(response) => serde_json::to_value(response.result)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
                JsonRpcMessage::Error(error) => Err(error.error),
                _ => Err(gone()),
            }
        })
    }
}

/// Removes a question from those waiting for an answer when dropped.
pub(super) struct Unregister {
    shared: Arc<Shared>,
    key: (Arc<str>, RequestId),
}

impl Drop for Unregister {
    fn drop(&mut self) {
        lock(&self.shared.short_path_questions).remove(&self.key);
    }
}
