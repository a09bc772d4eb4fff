//! Talking back to the downstream client: asking it for input, and forwarding progress and log
//! messages to the request they belong to, by the rules of the client's era.

// Logging, sampling and roots: deprecated in 2026-07-28, still served to legacy clients.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ErrorData, GetExtensions, InputRequest, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    RequestId, ServerRequest,
};
use rmcp::service::{OriginatingRequestId, Peer, RequestContext, RoleServer};
use switchboard_upstream::Progress;

/// Whether the request comes from a 2026-07-28 (stateless) client, which cannot be sent
/// requests and gets log messages only when the request asks for them.
pub(crate) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The era of the client behind `context`, so its requests go over a link of its own era
/// ([`switchboard_hub::ClientEra`]).
pub(crate) fn era(context: &RequestContext<RoleServer>) -> switchboard_hub::ClientEra {
    if is_modern(context) {
        switchboard_hub::ClientEra::Stateless
    } else {
        switchboard_hub::ClientEra::Sessions
    }
}

/// Refuses an input request the client did not declare the capability for.
pub(crate) fn supports(
    capabilities: &ClientCapabilities,
    request: &InputRequest,
) -> Result<(), ErrorData> {
    let (supported, what) = match request {
        InputRequest::Elicitation(elicit) => {
            let url_mode = matches!(
                elicit.params,
                rmcp::model::ElicitRequestParams::UrlElicitationParams { .. }
            );
            let declared = capabilities.elicitation.as_ref();
            let supported = match declared {
                None => false,
                Some(elicitation) if url_mode => elicitation.url.is_some(),
                Some(_) => true,
            };
            (
                supported,
                if url_mode {
                    "URL elicitation"
                } else {
                    "elicitation"
                },
            )
        }
        InputRequest::CreateMessage(_) => (capabilities.sampling.is_some(), "sampling"),
        InputRequest::ListRoots(_) => (capabilities.roots.is_some(), "roots"),
        _ => (false, "this kind of input request"),
    };
    if supported {
        Ok(())
    } else {
        Err(ErrorData::invalid_params(
            format!("the client connected to Switchboard does not support {what}"),
            None,
        ))
    }
}

/// Asks a legacy client, on its session, and returns its answer as JSON. The question is about
/// the client's request `originating` and goes on that request's stream.
///
/// rmcp marks an outgoing request with the request whose handler task sends it, and this runs in
/// the task of the upstream server's request (a different session, whose ids mean nothing here):
/// the mark would send the question to whichever of the client's requests has the same id, or to
/// the session's GET stream. So the request is sent from a task of its own, carrying the client's
/// request as its mark.
pub(crate) async fn ask(
    peer: Peer<RoleServer>,
    originating: RequestId,
    request: InputRequest,
) -> Result<serde_json::Value, ErrorData> {
    let mut request = match request {
        InputRequest::Elicitation(elicit) => ServerRequest::ElicitRequest(elicit),
        InputRequest::CreateMessage(sample) => {
            sample
                .params
                .validate()
                .map_err(|e| ErrorData::invalid_params(e, None))?;
            ServerRequest::CreateMessageRequest(sample)
        }
        InputRequest::ListRoots(roots) => ServerRequest::ListRootsRequest(roots),
        _ => {
            return Err(ErrorData::invalid_params(
                "Switchboard cannot relay this kind of input request",
                None,
            ));
        }
    };
    request
        .extensions_mut()
        .insert(OriginatingRequestId(originating));
    let answer = tokio::spawn(async move { peer.send_request(request).await })
        .await
        .map_err(|e| ErrorData::internal_error(format!("asking the client failed: {e}"), None))?;
    match answer {
        Ok(result) => {
            serde_json::to_value(result).map_err(|e| ErrorData::internal_error(e.to_string(), None))
        }
        Err(rmcp::ServiceError::McpError(error)) => Err(error),
        Err(error) => Err(ErrorData::internal_error(
            format!("the client did not answer: {error}"),
            None,
        )),
    }
}

/// Sends one request's progress and log messages to its client.
pub(crate) struct Forwarder {
    peer: Peer<RoleServer>,
    progress_token: Option<ProgressToken>,
    log_level: Option<LoggingLevel>,
    patience: Duration,
}

/// Whether a message reached the client's stream, or the client took none for as long as the
/// request may wait (it stopped reading; the request is to be given up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Forwarded {
    /// Sent, or not wanted.
    Sent,
    /// The client did not take it in time.
    Stuck,
}

impl Forwarder {
    /// For the request `context`; `session_level` is the level a legacy session set with
    /// `logging/setLevel` (2026-07-28 requests carry theirs in `_meta`). A message the client
    /// does not take within `patience` (the request's own timeout) means it stopped reading.
    pub(crate) fn new(
        context: &RequestContext<RoleServer>,
        session_level: Option<LoggingLevel>,
        patience: Duration,
    ) -> Self {
        let log_level = if is_modern(context) {
            context.meta.log_level()
        } else {
            session_level
        };
        Self {
            peer: context.peer.clone(),
            progress_token: context.meta.get_progress_token(),
            log_level,
            patience,
        }
    }

    /// Waits for `sending` at most `patience`.
    async fn within_patience(&self, sending: impl Future<Output = ()>) -> Forwarded {
        match tokio::time::timeout(self.patience, sending).await {
            Ok(()) => Forwarded::Sent,
            Err(_) => Forwarded::Stuck,
        }
    }

    /// Whether the client asked for progress reports.
    pub(crate) fn wants_progress(&self) -> bool {
        self.progress_token.is_some()
    }

    /// The least severe level of log message the client wants for this request.
    pub(crate) fn log_level(&self) -> Option<LoggingLevel> {
        self.log_level
    }

    /// Forwards a progress report, if the client asked for progress.
    pub(crate) async fn progress(&self, report: Progress) -> Forwarded {
        let Some(token) = &self.progress_token else {
            return Forwarded::Sent;
        };
        let mut params = ProgressNotificationParam::new(token.clone(), report.progress);
        params.total = report.total;
        params.message = report.message;
        self.within_patience(async {
            let _ = self.peer.notify_progress(params).await;
        })
        .await
    }

    /// Forwards a log message at or above the client's level. A legacy session that never set
    /// a level gets everything (as from a server it talked to directly); a 2026-07-28 request
    /// gets messages only when it asked for them.
    #[allow(deprecated)]
    pub(crate) async fn log(&self, message: LoggingMessageNotificationParam) -> Forwarded {
        let wanted = match self.log_level {
            Some(level) => severity(message.level) >= severity(level),
            None => !self.modern(),
        };
        if !wanted {
            return Forwarded::Sent;
        }
        self.within_patience(async {
            let _ = self.peer.notify_logging_message(message).await;
        })
        .await
    }

    fn modern(&self) -> bool {
        self.peer
            .peer_info()
            .is_none_or(|info| !info.protocol_version.has_initialize())
    }
}

/// RFC 5424 severity, low to high.
#[allow(deprecated)]
pub(crate) fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
