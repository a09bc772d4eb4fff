//! The error taxonomy shared by every layer.
//!
//! Every error a user can see is classified by where it came from and whether retrying can help,
//! in the spirit of pingora's error type. Module error enums implement [`Classified`] so the hub can
//! decide what to do (back off and reconnect, ask for re-authorisation, give up) without matching
//! on messages.

use serde::{Deserialize, Serialize};

/// Who is responsible for an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorSource {
    /// The caller asked for something invalid (unknown tool, bad arguments, bad config).
    Caller,
    /// The upstream MCP server failed, answered garbage, or could not be reached.
    Upstream,
    /// Authentication or authorisation with the upstream failed.
    Auth,
    /// A bug or resource problem inside Switchboard.
    Internal,
}

/// Whether an operation that failed may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryClass {
    /// Retrying cannot help (the request itself is wrong).
    Never,
    /// Retrying is safe: nothing reached the server, or the failure was transient.
    Safe,
    /// The request may have reached the server; retry only if it is idempotent.
    OnlyIfIdempotent,
    /// Retrying can succeed once the user has signed in again.
    AfterReauth,
}

/// An error that knows its source and retry class.
pub trait Classified: std::error::Error {
    /// Who is responsible for this error.
    fn source_kind(&self) -> ErrorSource;
    /// Whether retrying can help.
    fn retry_class(&self) -> RetryClass;
}

/// Renders an error and its whole `source()` chain as one plain-language line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
