//! Who makes a tool call (`allowed_callers`): what the app declares in the call's `_meta`
//! (`switchboard/caller`) or, for a whole connection, in the `X-Switchboard-Caller` header.
//! A call that declares nothing is the model's own (`direct`).

use rmcp::model::{CallToolRequestParams, ErrorData, JsonObject};
use switchboard_core::Caller;
use switchboard_core::wire_names::CALLER_META;

/// The header a connection names its caller with.
pub(crate) const CALLER_HEADER: axum::http::HeaderName =
    axum::http::HeaderName::from_static(switchboard_core::wire_names::CALLER_HEADER);

/// The caller `request` declares (its `_meta`, or the request's `_meta` as rmcp moved it to
/// `context`) or its connection does (the header), or an error naming what is wrong with the
/// declaration; a call may not declare another caller than its connection.
pub(crate) fn caller_of(
    request: &CallToolRequestParams,
    context_meta: &JsonObject,
    parts: Option<&axum::http::request::Parts>,
) -> Result<Caller, ErrorData> {
    let declared = request
        .meta
        .as_ref()
        .and_then(|meta| meta.get(CALLER_META))
        .or_else(|| context_meta.get(CALLER_META))
        .map(|value| {
            value.as_str().ok_or_else(|| {
                ErrorData::invalid_params(format!("_meta.{CALLER_META} must be a string"), None)
            })
        })
        .transpose()?;
    let connection = parts
        .and_then(|parts| parts.headers.get(CALLER_HEADER))
        .map(|value| {
            value.to_str().map_err(|_| {
                ErrorData::invalid_params(format!("the {CALLER_HEADER} header is not text"), None)
            })
        })
        .transpose()?;
    // A connection that names its caller speaks for every call on it: code in a sandbox cannot
    // declare itself someone else.
    let text = match (declared, connection) {
        (Some(call), Some(connection)) if call.trim() != connection.trim() => {
            return Err(ErrorData::invalid_params(
                format!(
                    "the call says its caller is '{}', but its connection says '{}'",
                    call.trim(),
                    connection.trim()
                ),
                None,
            ));
        }
        (call, connection) => call.or(connection),
    };
    match text {
        None => Ok(Caller::Direct),
        Some(text) => text
            .trim()
            .parse()
            .map_err(|e: String| ErrorData::invalid_params(e, None)),
    }
}

/// Whether a request declares a caller at all (the short path leaves such calls to the full
/// one, which checks them).
pub(crate) fn declares_caller(meta: Option<&JsonObject>, headers: &axum::http::HeaderMap) -> bool {
    meta.is_some_and(|meta| meta.contains_key(CALLER_META)) || headers.contains_key(CALLER_HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(meta: Option<serde_json::Value>) -> CallToolRequestParams {
        let mut request = CallToolRequestParams::new("x");
        request.meta = meta.map(|m| serde_json::from_value(m).unwrap());
        request
    }

    #[test]
    fn a_call_names_its_caller_in_meta_or_its_connection_in_a_header() {
        let empty = JsonObject::new();
        assert_eq!(
            caller_of(&call(None), &empty, None).unwrap(),
            Caller::Direct
        );
        let coded = call(Some(serde_json::json!({CALLER_META: "code_execution"})));
        assert_eq!(
            caller_of(&coded, &empty, None).unwrap(),
            Caller::CodeExecution
        );
        let (mut parts, ()) = axum::http::Request::new(()).into_parts();
        parts
            .headers
            .insert(CALLER_HEADER, "agent:triage".parse().unwrap());
        assert_eq!(
            caller_of(&call(None), &empty, Some(&parts)).unwrap(),
            Caller::Agent("triage".into())
        );
        // A call may not claim another caller than its connection names.
        let refused = caller_of(&coded, &empty, Some(&parts)).unwrap_err();
        assert!(refused.message.contains("connection says"), "{refused:?}");
        let same = call(Some(serde_json::json!({CALLER_META: "agent:triage"})));
        assert_eq!(
            caller_of(&same, &empty, Some(&parts)).unwrap(),
            Caller::Agent("triage".into())
        );
        let bad = call(Some(serde_json::json!({CALLER_META: "robot"})));
        assert!(caller_of(&bad, &empty, None).is_err());
        let not_text = call(Some(serde_json::json!({CALLER_META: 7})));
        assert!(caller_of(&not_text, &empty, None).is_err());
    }
}
