//! How an HTTP exchange with a server failed, kept with its status.
//!
//! Every HTTP transport and the shared connections under them report failures as
//! [`HttpFailure`]; it lives apart from the status-aware client ([`super::http_client`]) so that
//! the layers below that client (the shared pools of [`super::plain_http`] and the connections
//! they hold) name it without depending on the client above them.

use switchboard_oauth::describe_reqwest;

/// Longest excerpt of a body an error quotes, in characters.
const ERROR_EXCERPT_CHARS: usize = 200;

/// A failure of an HTTP exchange with a server, reported with its HTTP status intact.
#[derive(Debug, thiserror::Error)]
pub enum HttpFailure {
    /// The request never got an HTTP answer (connect, TLS, I/O): what failed, and why. Never
    /// with the URL: it may carry credentials, and rmcp formats this error with `{:?}`.
    #[error("{0}")]
    Request(String),
    /// Signing in (or refreshing, or stepping up) failed; the message says what to do.
    #[error("{0}")]
    Auth(switchboard_oauth::OAuthError),
    /// The request was not sent: the network rules refuse its address or scheme.
    #[error("not allowed: {0}")]
    Refused(String),
    /// The server answered with a non-success status and no JSON-RPC error body.
    #[error("HTTP {status}{}", excerpt_suffix(.excerpt))]
    Status {
        /// The status code.
        status: u16,
        /// The start of the body, for the user.
        excerpt: String,
        /// How long the server asked to be left alone (`Retry-After`, on a 429 or 503).
        retry_after: Option<std::time::Duration>,
    },
}

impl From<reqwest::Error> for HttpFailure {
    fn from(error: reqwest::Error) -> Self {
        Self::Request(describe_reqwest(&error.without_url()))
    }
}

fn excerpt_suffix(excerpt: &str) -> String {
    if excerpt.is_empty() {
        String::new()
    } else {
        format!(" ({excerpt})")
    }
}

/// The start of an answer's body that an error may quote: printable characters only.
pub(crate) fn excerpt(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(ERROR_EXCERPT_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_and_printable() {
        let body = format!("bad\n\x07{}", "x".repeat(500));
        let text = excerpt(body.as_bytes());
        assert!(text.starts_with("bad") && text.len() == ERROR_EXCERPT_CHARS);
    }
}
