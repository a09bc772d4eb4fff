//! The headers a 2026-07-28 request carries besides its body (SEP-2243), and the rule that
//! decides which tools may ask for them.
//!
//! Every POST names its protocol version (`MCP-Protocol-Version`) and its method (`Mcp-Method`);
//! a request also names, for the methods that have one, what it is about (`Mcp-Name`: a tool's or
//! prompt's name, a resource's URI, a task's id). A `tools/call` also copies each argument its
//! tool's input schema marks with `x-mcp-header` into an `Mcp-Param-<name>` header, so that
//! proxies can route on it without reading the body. Values that cannot travel as they are
//! (non-ASCII, control characters, surrounding blanks) travel Base64-encoded as
//! `=?base64?…?=`.
//!
//! rmcp's client does the same inside its worker and keeps it private there; the transport that
//! carries 2026-07-28 sessions without that worker ([`crate::transport::stateless`]) needs it too,
//! so it is written here.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use base64::Engine;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonObject};
use serde_json::Value;

/// How a header value that cannot travel as it is starts and ends.
const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// The headers of `message` sent at protocol `version`; `schemas` holds the input schemas of
/// the tools listed so far, by name (for `Mcp-Param-*`).
pub(crate) fn request_headers(
    message: &ClientJsonRpcMessage,
    version: &str,
    schemas: &HashMap<String, Arc<JsonObject>>,
) -> HashMap<HeaderName, HeaderValue> {
    let mut headers = HashMap::new();
    if let Ok(value) = HeaderValue::from_str(version) {
        headers.insert(HeaderName::from_static("mcp-protocol-version"), value);
    }
    if !matches!(
        message,
        ClientJsonRpcMessage::Request(_) | ClientJsonRpcMessage::Notification(_)
    ) {
        return headers;
    }
    // Messages other than calls are few (lists, reads, the listen stream, notifications):
    // reading their fields from JSON keeps one rule for every method.
    let Ok(request) = serde_json::to_value(message) else {
        return headers;
    };
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return headers;
    };
    let params = request.get("params");
    let mut put = |name: &str, value: &str| {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(name, value);
        }
    };
    put("mcp-method", method);
    let named_by = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(name) = named_by
        .and_then(|key| params?.get(key))
        .and_then(Value::as_str)
    {
        put("mcp-name", &header_value(name));
    }
    if method != "tools/call" {
        return headers;
    }
    let tool = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    let (Some(schema), Some(arguments)) = (
        tool.and_then(|name| schemas.get(name)),
        params.and_then(|p| p.get("arguments")),
    ) else {
        return headers;
    };
    for mark in marks(schema) {
        let Value::String(header) = mark.header else {
            continue;
        };
        let argument = mark
            .path
            .iter()
            .try_fold(arguments, |value, key| value.get(key));
        let text = match argument {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Bool(flag)) => flag.to_string(),
            Some(Value::Number(number)) => number.to_string(),
            _ => continue,
        };
        if !header.is_empty() {
            put(&format!("mcp-param-{header}"), &header_value(&text));
        }
    }
    headers
}

/// `text` as a header value: as it is when it can travel so, else Base64-encoded.
fn header_value(text: &str) -> String {
    let blank_edge = text.starts_with([' ', '\t']) || text.ends_with([' ', '\t']);
    let unprintable = text.chars().any(|c| !(' '..='~').contains(&c));
    let looks_encoded = text.starts_with(BASE64_PREFIX) && text.ends_with(BASE64_SUFFIX);
    if blank_edge || unprintable || looks_encoded {
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        format!("{BASE64_PREFIX}{encoded}{BASE64_SUFFIX}")
    } else {
        text.to_owned()
    }
}

/// One `x-mcp-header` mark: the property's path from the schema's root, its schema, and the
/// header it names.
struct Mark<'a> {
    path: Vec<&'a str>,
    schema: &'a Value,
    header: &'a Value,
}

/// The marks on properties reached from the root through `properties` alone.
fn marks(schema: &JsonObject) -> Vec<Mark<'_>> {
    fn walk<'a>(properties: Option<&'a Value>, path: &mut Vec<&'a str>, out: &mut Vec<Mark<'a>>) {
        let Some(Value::Object(properties)) = properties else {
            return;
        };
        for (name, schema) in properties {
            path.push(name);
            if let Some(header) = schema.get("x-mcp-header") {
                out.push(Mark {
                    path: path.clone(),
                    schema,
                    header,
                });
            }
            walk(schema.get("properties"), path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(schema.get("properties"), &mut Vec::new(), &mut out);
    out
}

/// Whether a tool's schema marks any argument for a header.
pub(crate) fn marks_arguments(schema: &JsonObject) -> bool {
    !marks(schema).is_empty()
}

/// Why a tool's `x-mcp-header` marks break SEP-2243's rules, if they do: a client leaves such a
/// tool out of its list. Marks must sit on properties reached through `properties` alone, name
/// distinct (ignoring case) HTTP tokens, and mark strings, integers or booleans.
pub(crate) fn broken_marks(schema: &JsonObject) -> Option<String> {
    if schema.contains_key("x-mcp-header") {
        return Some("x-mcp-header must annotate a property, not the schema root".into());
    }
    if marked_elsewhere(schema, true) {
        return Some("x-mcp-header must sit on a `properties`-only path from the root".into());
    }
    let mut seen = HashSet::new();
    for mark in marks(schema) {
        let property = mark.path.join(".");
        let Value::String(header) = mark.header else {
            return Some(format!(
                "property `{property}`: x-mcp-header must be a string"
            ));
        };
        if header.is_empty() {
            return Some(format!(
                "property `{property}`: x-mcp-header must not be empty"
            ));
        }
        if !header.chars().all(is_token_char) {
            return Some(format!(
                "property `{property}`: x-mcp-header `{header}` is not a valid HTTP token"
            ));
        }
        if !seen.insert(header.to_ascii_lowercase()) {
            return Some(format!(
                "property `{property}`: duplicate x-mcp-header `{header}` (case-insensitive)"
            ));
        }
        match mark.schema.get("type").and_then(Value::as_str) {
            Some("string" | "integer" | "boolean") => {}
            other => {
                return Some(format!(
                    "property `{property}`: x-mcp-header requires a primitive type \
                     (string/integer/boolean), got {other:?}"
                ));
            }
        }
    }
    None
}

/// Whether a mark sits anywhere but on a property reached through `properties` alone;
/// `on_path`: whether `schema` itself is such a property (or the root).
fn marked_elsewhere(schema: &JsonObject, on_path: bool) -> bool {
    fn in_value(value: &Value, on_path: bool) -> bool {
        match value {
            Value::Object(schema) => marked_elsewhere(schema, on_path),
            Value::Array(items) => items.iter().any(|item| in_value(item, false)),
            _ => false,
        }
    }
    schema.iter().any(|(key, value)| match key.as_str() {
        "x-mcp-header" => !on_path,
        "properties" => value
            .as_object()
            .is_some_and(|properties| properties.values().any(|p| in_value(p, on_path))),
        "$defs" | "definitions" | "dependentSchemas" | "patternProperties" => value
            .as_object()
            .is_some_and(|schemas| schemas.values().any(|s| in_value(s, false))),
        // Values, not schemas.
        "default" | "const" | "enum" | "examples" => false,
        _ => in_value(value, false),
    })
}

/// RFC 9110's `tchar`.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        }
    }

    fn call(name: &str, arguments: Value) -> ClientJsonRpcMessage {
        serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}
        }))
        .expect("a call")
    }

    fn header<'a>(headers: &'a HashMap<HeaderName, HeaderValue>, name: &str) -> Option<&'a str> {
        headers
            .get(&HeaderName::from_bytes(name.as_bytes()).expect("a name"))
            .and_then(|value| value.to_str().ok())
    }

    #[test]
    fn a_call_names_its_method_tool_and_marked_arguments() {
        let schema = object(serde_json::json!({"properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "page": {"type": "object", "properties": {"size": {"type": "integer", "x-mcp-header": "Size"}}},
            "note": {"type": "string"}
        }}));
        let schemas = HashMap::from([("search".to_owned(), Arc::new(schema))]);
        let message = call(
            "search",
            serde_json::json!({"region": "eu", "page": {"size": 20}, "note": "x"}),
        );
        let headers = request_headers(&message, "2026-07-28", &schemas);
        assert_eq!(header(&headers, "mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(header(&headers, "mcp-method"), Some("tools/call"));
        assert_eq!(header(&headers, "mcp-name"), Some("search"));
        assert_eq!(header(&headers, "mcp-param-region"), Some("eu"));
        assert_eq!(header(&headers, "mcp-param-size"), Some("20"));
        assert_eq!(headers.len(), 5, "unmarked arguments stay in the body only");
    }

    #[test]
    fn values_that_cannot_travel_as_they_are_are_base64_encoded() {
        assert_eq!(header_value("plain value"), "plain value");
        assert_eq!(header_value("naïve"), "=?base64?bmHDr3Zl?=");
        assert_eq!(header_value(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(
            header_value("=?base64?eA==?="),
            "=?base64?PT9iYXNlNjQ/ZUE9PT89?="
        );
    }

    #[test]
    fn a_resource_read_is_named_by_its_uri_and_a_notification_by_its_method_alone() {
        let read: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "file:///a"}
        }))
        .expect("a read");
        let headers = request_headers(&read, "2026-07-28", &HashMap::new());
        assert_eq!(header(&headers, "mcp-name"), Some("file:///a"));
        let note: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/roots/list_changed"
        }))
        .expect("a notification");
        let headers = request_headers(&note, "2026-07-28", &HashMap::new());
        assert_eq!(
            header(&headers, "mcp-method"),
            Some("notifications/roots/list_changed")
        );
        assert_eq!(headers.len(), 2, "the version and the method: {headers:?}");
    }

    #[test]
    fn marks_that_break_the_rules_are_found() {
        let broken = |schema: Value| broken_marks(&object(schema));
        assert_eq!(
            broken(
                serde_json::json!({"properties": {"q": {"type": "string", "x-mcp-header": "Q"}}})
            ),
            None
        );
        for schema in [
            serde_json::json!({"x-mcp-header": "Root"}),
            serde_json::json!({"properties": {"q": {"type": "string", "x-mcp-header": "Bad Name"}}}),
            serde_json::json!({"properties": {"q": {"type": "array", "x-mcp-header": "Q"}}}),
            serde_json::json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}}),
            serde_json::json!({"anyOf": [{"properties": {"r": {"type": "string", "x-mcp-header": "R"}}}]}),
            serde_json::json!({"properties": {"q": {"type": "string", "x-mcp-header": ""}}}),
        ] {
            assert!(broken(schema.clone()).is_some(), "{schema}");
        }
        // A value that happens to hold the key is no mark.
        assert_eq!(
            broken(
                serde_json::json!({"properties": {"q": {"type": "object", "default": {"x-mcp-header": 1}}}})
            ),
            None
        );
    }
}
