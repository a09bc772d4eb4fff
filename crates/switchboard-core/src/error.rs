//! What every layer's errors share: one way to say an error and its causes in plain words.
//! Each error type is mapped to the wire (JSON-RPC code, HTTP status) in one place, the
//! gateway's `wire` module; whether a failed request is sent again is the upstream's
//! `UpstreamError::is_transient`.

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
