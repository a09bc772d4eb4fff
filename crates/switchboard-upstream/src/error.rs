//! Errors from talking to one upstream server.

use std::time::Duration;

use rmcp::transport::streamable_http_client::StreamableHttpError;

use crate::transport::http_failure::HttpFailure;

/// Most items one list of one server may hold (tools, resources, templates or prompts).
pub(crate) const MAX_LIST_ITEMS: usize = 10_000;
/// Most bytes one list of one server may hold, as JSON: with four lists, a server holds at most
/// four times this of the daemon's memory in its catalog, however it pages.
pub(crate) const MAX_LIST_BYTES: usize = 16 * 1024 * 1024;

/// Everything that can go wrong between Switchboard and one upstream MCP server.
///
/// Messages are written for the person reading `switchboard status`: they say what failed in plain
/// words and, where possible, what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The server could not be reached at all (DNS, refused connection, TLS).
    #[error("cannot reach the server: {0}")]
    Unreachable(String),
    /// A stdio server's process could not be started.
    #[error("cannot start '{command}': {error}")]
    Spawn {
        /// The program.
        command: String,
        /// The OS error (in the message, so not also a `source`).
        error: std::io::Error,
    },
    /// A list the server pages through outgrew what one server may hold.
    #[error(
        "the server's {what} list grew past what Switchboard holds for one server ({items} items, {} MiB so far; at most {} items and {} MiB): it is not taken",
        .bytes / (1024 * 1024),
        MAX_LIST_ITEMS,
        MAX_LIST_BYTES / (1024 * 1024)
    )]
    ListTooLarge {
        /// Which list.
        what: &'static str,
        /// Items read so far.
        items: usize,
        /// Bytes read so far.
        bytes: usize,
    },
    /// The server may not be started or reached as defined (an approved command that is gone,
    /// or a choice it does not allow; an address the network rules refuse).
    #[error("not allowed: {0}")]
    NotAllowed(String),
    /// The server answered with an HTTP status that ends the attempt.
    #[error("the server answered HTTP {status}{}{}", detail_suffix(.detail), retry_suffix(.retry_after))]
    HttpStatus {
        /// The status code.
        status: u16,
        /// A short excerpt of the body, if any.
        detail: String,
        /// How long the server asked to be left alone (`Retry-After`).
        retry_after: Option<std::time::Duration>,
    },
    /// The server requires signing in (HTTP 401) and there are no usable credentials.
    #[error("the server requires authorization: {0}")]
    AuthRequired(String),
    /// Signing in failed for a reason other than missing credentials (discovery, registration,
    /// an unsafe URL, a refused token request).
    #[error("signing in failed: {0}")]
    Auth(String),
    /// No transport worked for this URL.
    #[error("no MCP transport answered at this URL: {0}")]
    NoTransport(String),
    /// The MCP handshake failed.
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    /// The server sent something that is not valid MCP.
    #[error("the server sent an invalid response: {0}")]
    Protocol(String),
    /// The server answered a request with a JSON-RPC error.
    #[error("the server returned error {code}: {message}")]
    Rpc {
        /// JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
        /// The error's `data`, passed on untouched (e.g. the versions or capabilities a
        /// 2026-07-28 server requires).
        data: Option<serde_json::Value>,
    },
    /// No answer within the configured time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The call was cancelled by the caller.
    #[error("the call was cancelled")]
    Cancelled,
    /// The connection closed (the stream ended, the socket closed).
    #[error("the connection to the server closed")]
    Closed,
    /// A stdio server's process ended.
    #[error(
        "the server process {}{}",
        .ended.map(|end| end.to_string()).unwrap_or_else(|| "exited".into()),
        .last_output.as_ref().map(|l| format!("; its last output: {l}")).unwrap_or_default()
    )]
    ProcessExited {
        /// How it ended, when that is known.
        ended: Option<ProcessEnd>,
        /// The line of its stderr that says best why, if any (none when a signal ended it: what
        /// it wrote before says nothing of that).
        last_output: Option<String>,
    },
    /// A list method returned the same cursor twice.
    #[error(
        "the server repeated pagination cursor '{0}' while listing {1}; stopped to avoid an endless loop"
    )]
    RepeatedCursor(String, &'static str),
    /// The server asked for more input rounds than Switchboard allows.
    #[error("the server kept asking for more input after {0} rounds")]
    TooManyInputRounds(usize),
    /// The server does not offer what was asked (a capability it did not declare).
    #[error("the server does not support {0}")]
    Unsupported(&'static str),
    /// Too many requests to this server are running and waiting already; nothing was sent.
    #[error(
        "the server is busy: {running} requests are running and {waiting} waiting, the most \
         Switchboard lets pile up; try again shortly"
    )]
    Busy {
        /// Requests running (the limit).
        running: usize,
        /// Requests waiting (the limit).
        waiting: usize,
    },
    /// The request waited its whole timeout for a free slot; nothing was sent.
    #[error("the server stayed busy: no request slot freed up within {0:?}")]
    StayedBusy(Duration),
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

fn retry_suffix(retry_after: &Option<std::time::Duration>) -> String {
    match retry_after {
        Some(wait) => format!(" (it asks to be retried after {} s)", wait.as_secs()),
        None => String::new(),
    }
}

impl UpstreamError {
    /// Whether the same request may well succeed if sent again shortly: the server could not
    /// be reached, a proxy or the server said it is briefly unavailable (429, 502, 503, 504),
    /// no answer came in time, or its request slots were full. Sending again is for requests
    /// that are safe to repeat only (see `switchboard_core::retry`).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unreachable(_)
                | Self::Timeout(_)
                | Self::Busy { .. }
                | Self::StayedBusy(_)
                | Self::HttpStatus {
                    status: 429 | 502 | 503 | 504,
                    ..
                }
        )
    }

    /// How long the server asked to be left alone before the request is sent again
    /// (`Retry-After` on a 429 or 503).
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::HttpStatus { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether this error means the connection itself is gone (so the hub should reconnect).
    pub fn is_connection_lost(&self) -> bool {
        matches!(
            self,
            Self::Closed | Self::Unreachable(_) | Self::ProcessExited { .. }
        )
    }
}

/// An error and its causes in plain words ([`switchboard_core::error::error_chain`]), without
/// the Rust type names rmcp puts in its transport errors (`Transport [rmcp::transport::…<…>]
/// error: …`), which mean nothing to a user.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    without_transport_names(&switchboard_core::error::error_chain(error))
}

/// `text` with every `Transport [<type name>] error: ` left out.
fn without_transport_names(text: &str) -> String {
    const OPEN: &str = "Transport [";
    const CLOSE: &str = "] error: ";
    let mut plain = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let Some(length) = rest[start..].find(CLOSE) else {
            break;
        };
        plain.push_str(&rest[..start]);
        rest = &rest[start + length + CLOSE.len()..];
    }
    plain.push_str(rest);
    plain
}

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessEnd {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (a crash, the out-of-memory killer, someone's `kill`).
    Signal(i32),
    /// Switchboard ended it (it was still running when its connection was dropped).
    Stopped,
}

impl ProcessEnd {
    pub(crate) fn of(status: std::process::ExitStatus) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            if let Some(signal) = status.signal() {
                return Some(Self::Signal(signal));
            }
        }
        status.code().map(Self::Code)
    }
}

impl std::fmt::Display for ProcessEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Code(code) => write!(f, "exited with code {code}"),
            Self::Stopped => write!(f, "was stopped by Switchboard"),
            Self::Signal(signal) => {
                let name = match signal {
                    1 => " (SIGHUP)",
                    2 => " (SIGINT)",
                    4 => " (SIGILL)",
                    6 => " (SIGABRT)",
                    7 => " (SIGBUS)",
                    8 => " (SIGFPE)",
                    9 => " (SIGKILL)",
                    11 => " (SIGSEGV)",
                    13 => " (SIGPIPE)",
                    15 => " (SIGTERM)",
                    _ => "",
                };
                write!(f, "was killed by signal {signal}{name}")
            }
        }
    }
}

/// What a 401 means when no OAuth layer could act on it.
pub(crate) const NO_CREDENTIALS: &str =
    "the server answered HTTP 401 and no credentials are available";

/// Maps an OAuth failure: missing or dead credentials mean "sign in"; anything else is a
/// failure of the sign-in itself.
pub(crate) fn auth_error(error: &switchboard_oauth::OAuthError) -> UpstreamError {
    if error.needs_sign_in() {
        UpstreamError::AuthRequired(error.to_string())
    } else {
        UpstreamError::Auth(error.to_string())
    }
}

/// Errors every probe step treats alike: unreachable hosts and auth challenges end the probe.
pub(crate) fn fatal_http_error(error: &StreamableHttpError<HttpFailure>) -> Option<UpstreamError> {
    match error {
        StreamableHttpError::Client(HttpFailure::Request(e)) => {
            Some(UpstreamError::Unreachable(e.clone()))
        }
        StreamableHttpError::Client(HttpFailure::Refused(reason)) => {
            Some(UpstreamError::NotAllowed(reason.clone()))
        }
        StreamableHttpError::Client(HttpFailure::Auth(e)) => Some(auth_error(e)),
        StreamableHttpError::AuthRequired(_)
        | StreamableHttpError::Client(HttpFailure::Status { status: 401, .. }) => {
            Some(UpstreamError::AuthRequired(NO_CREDENTIALS.into()))
        }
        StreamableHttpError::InsufficientScope(e) => Some(UpstreamError::AuthRequired(format!(
            "the server needs more scope ({})",
            e.required_scope.as_deref().unwrap_or("unspecified")
        ))),
        _ => None,
    }
}

/// Maps an rmcp service error to ours, keeping JSON-RPC codes and timeouts distinct.
pub(crate) fn from_service_error(error: rmcp::ServiceError) -> UpstreamError {
    use rmcp::ServiceError;
    match error {
        ServiceError::McpError(error) => UpstreamError::Rpc {
            code: error.code.0,
            message: error.message.into_owned(),
            data: error.data,
        },
        ServiceError::Timeout { timeout } => UpstreamError::Timeout(timeout),
        ServiceError::Cancelled { .. } => UpstreamError::Cancelled,
        ServiceError::TransportClosed => UpstreamError::Closed,
        ServiceError::UnexpectedResponse => {
            UpstreamError::Protocol("a response that does not match the request".into())
        }
        ServiceError::InputRequiredRoundsExceeded { max_rounds } => {
            UpstreamError::TooManyInputRounds(max_rounds)
        }
        ServiceError::TransportSend(e) => {
            // The Streamable HTTP client's own failures say what they are: a sign-in that is
            // needed or was refused (a step-up among them) is no unreachable server.
            type HttpError = StreamableHttpError<HttpFailure>;
            let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e.error.as_ref());
            let mut http = None;
            while let Some(error) = cause {
                if let Some(found) = error.downcast_ref::<HttpError>() {
                    http = Some(found);
                    break;
                }
                cause = error.source();
            }
            // A transient status (429, 502, 503, 504) is told as such, with how long the
            // server asked to wait.
            if let Some(StreamableHttpError::Client(HttpFailure::Status {
                status: status @ (429 | 502 | 503 | 504),
                excerpt,
                retry_after,
            })) = http
            {
                return UpstreamError::HttpStatus {
                    status: *status,
                    detail: excerpt.clone(),
                    retry_after: *retry_after,
                };
            }
            match http.and_then(fatal_http_error) {
                Some(UpstreamError::Unreachable(_)) | None => {
                    UpstreamError::Unreachable(error_chain(&e))
                }
                Some(meaningful) => meaningful,
            }
        }
        other => UpstreamError::Protocol(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_type_names_are_left_out_of_transport_errors() {
        let raw = "Send message error Transport [rmcp::transport::worker::WorkerTransport<\
                   rmcp::transport::streamable_http_client::StreamableHttpClientWorker<\
                   switchboard_upstream::transport::http_client::StatusAwareHttpClient>>] error: \
                   connection refused, when send initialize request";
        assert_eq!(
            without_transport_names(raw),
            "Send message error connection refused, when send initialize request"
        );
        assert_eq!(without_transport_names("plain words"), "plain words");
        assert_eq!(
            without_transport_names("Transport [unclosed"),
            "Transport [unclosed"
        );
    }
}
