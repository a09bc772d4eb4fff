//! Decoding and encoding JSON-RPC messages.
//!
//! A message that does not parse is never dropped silently: if it carries a request id, the waiting
//! request gets a clear local error at once instead of hanging until its timeout.
//!
//! The two messages of every relayed `tools/call`, the client's request and the server's
//! response, are decoded straight into their types here ([`client_message`],
//! [`call_reply`]). rmcp decodes a message of unknown kind by trying each of its types in turn
//! over a buffered copy (`#[serde(untagged)]`): a `tools/call` is tried as about ten other
//! requests first, and its result as fifteen other results, each failure building an error
//! message. That was a third of the instructions the relay spent per call. Here a message is
//! decoded in one pass as the one shape expected (its top-level keys, and the request's
//! parameters or the call's result as their types); a message of any other shape, or one that
//! fails to decode so, goes to rmcp's decoding, so what is decoded is never different from what
//! rmcp would decode, only reached sooner. That includes the keys neither uses: rmcp buffers a
//! message before it decodes it, reading every value in it, so it refuses one with a lone
//! surrogate, a number out of range, bytes that are not UTF-8 or nesting past serde_json's limit
//! in a key it then skips; serde's own skipping only finds where such a value ends, so here the
//! other keys are read as rmcp reads them (an `OtherKeys` field), which costs nothing when there
//! are none. No library offers this for rmcp's model, so it is ours.
//!
//! The other way, a `tools/call` going to a server is encoded straight from its fields
//! ([`encode_client_message`]): rmcp encodes a request's `params` by building a `Value` tree of
//! them first (a deep copy of the arguments, so it can merge `_meta` into them), then encoding
//! that tree. The bytes are the same; only the copy is skipped.

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ClientRequest,
    ContentBlock, ErrorCode, ErrorData, InputResponses, JsonObject, JsonRpcError, JsonRpcMessage,
    JsonRpcRequest, JsonRpcResponse, JsonRpcVersion2_0, MetaObject, RequestId, RequestMetaObject,
    ResultType, ServerJsonRpcMessage, ServerResult,
};
use serde::{Deserialize, Serialize};

/// Room a message's text starts with: the whole of most calls' requests and answers, so their
/// text is written without growing (`serde_json::to_vec` starts at 128 bytes and doubles, each
/// step a new allocation and a copy), and small enough for glibc's per-thread cache of freed
/// blocks (up to 1,032 bytes), which serves it again without taking a lock.
const MESSAGE_ROOM: usize = 1024;

/// `value` as JSON text, written into [`MESSAGE_ROOM`] to begin with.
pub fn encode(value: &impl Serialize) -> serde_json::Result<Vec<u8>> {
    let mut text = Vec::with_capacity(MESSAGE_ROOM);
    serde_json::to_writer(&mut text, value)?;
    Ok(text)
}

/// `message` as the JSON text rmcp would send; a `tools/call` request whose `_meta` is in one
/// place (the request's, not its parameters' or a legacy one too: those rmcp merges) is written
/// straight from its fields.
pub fn encode_client_message(message: &ClientJsonRpcMessage) -> serde_json::Result<Vec<u8>> {
    if let JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc,
        id,
        request: ClientRequest::CallToolRequest(call),
    }) = message
        && call.params.meta.is_none()
        && call.extensions.get::<MetaObject>().is_none()
    {
        let params = &call.params;
        return encode(&ToolCallOut {
            jsonrpc,
            id,
            method: &call.method,
            params: ToolCallParamsOut {
                meta: call
                    .extensions
                    .get::<RequestMetaObject>()
                    .map(|meta| &meta.0.0),
                name: &params.name,
                arguments: params.arguments.as_ref(),
                input_responses: params.input_responses.as_ref(),
                request_state: params.request_state.as_deref(),
            },
        });
    }
    encode(message)
}

/// A `tools/call` request as rmcp lays it out: the envelope's keys, then `method` and `params`.
#[derive(Serialize)]
struct ToolCallOut<'a, M> {
    jsonrpc: &'a JsonRpcVersion2_0,
    id: &'a RequestId,
    method: &'a M,
    params: ToolCallParamsOut<'a>,
}

/// A `tools/call`'s parameters as rmcp lays them out: `_meta` first, then the fields in the
/// order rmcp declares them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolCallParamsOut<'a> {
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a JsonObject>,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a JsonObject>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_responses: Option<&'a InputResponses>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_state: Option<&'a str>,
}

/// A client's message; a `tools/call` request is decoded as one directly.
pub fn client_message(body: &[u8]) -> serde_json::Result<ClientJsonRpcMessage> {
    match tool_call(body) {
        Some(call) => Ok(call),
        None => serde_json::from_slice(body),
    }
}

/// `body` decoded as a `tools/call` request, if it is one: in one pass, straight into its
/// fields (rmcp's own decoding of a request buffers its `params` to split `_meta` off them).
fn tool_call(body: &[u8]) -> Option<ClientJsonRpcMessage> {
    let ToolCallIn {
        _other: _,
        jsonrpc,
        id: Some(id),
        method: Method::ToolsCall,
        params: Some(params),
        result: Present(false),
        error: Present(false),
    } = serde_json::from_slice::<ToolCallIn>(body).ok()?
    else {
        return None;
    };
    let mut decoded = CallToolRequestParams::new(params.name);
    decoded.arguments = params.arguments;
    decoded.input_responses = params.input_responses;
    decoded.request_state = params.request_state;
    let mut request = CallToolRequest::new(decoded);
    if let Some(meta) = params.meta {
        request.extensions.insert(RequestMetaObject::from(meta));
    }
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc,
        id,
        request: ClientRequest::CallToolRequest(request),
    }))
}

/// A request's keys as a `tools/call` has them; other keys are read and dropped, as rmcp drops
/// them. A key given twice fails it, as it fails rmcp's decoding.
#[derive(Deserialize)]
struct ToolCallIn {
    #[serde(flatten)]
    _other: OtherKeys,
    jsonrpc: JsonRpcVersion2_0,
    id: Option<RequestId>,
    #[serde(default)]
    method: Method,
    params: Option<ToolCallParamsIn>,
    #[serde(default)]
    result: Present,
    #[serde(default)]
    error: Present,
}

/// A `tools/call`'s parameters, `_meta` with them (rmcp keeps it in the request's
/// extensions); other keys are read and dropped, as rmcp drops them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolCallParamsIn {
    #[serde(flatten)]
    _other: OtherKeys,
    #[serde(rename = "_meta")]
    meta: Option<JsonObject>,
    name: Cow<'static, str>,
    arguments: Option<JsonObject>,
    input_responses: Option<InputResponses>,
    request_state: Option<String>,
}

/// A server's message on the stream of a `tools/call`; its response is decoded as a
/// `CallToolResult` directly (other results, such as `input_required`, as rmcp decodes them).
pub fn call_reply(text: &str) -> serde_json::Result<ServerJsonRpcMessage> {
    match call_result(text) {
        Some(reply) => Ok(reply),
        None => serde_json::from_str(text),
    }
}

/// `text` decoded as a response carrying a `CallToolResult`, if it is one, in one pass.
fn call_result(text: &str) -> Option<ServerJsonRpcMessage> {
    let CallReplyIn {
        _other: _,
        jsonrpc,
        id: Some(id),
        method: Method::None,
        result: Some(result),
        error: Present(false),
    } = serde_json::from_str::<CallReplyIn>(text).ok()?
    else {
        return None;
    };
    // What rmcp's decoding of a `CallToolResult` refuses (so that another result is tried)
    // is rmcp's to decide, and so is a result with other keys: rmcp tries most other results
    // first, each of which needs a key of its own (`action`, `messages`, ...).
    if result.other.any
        || result
            .result_type
            .as_ref()
            .is_some_and(|result_type| !result_type.is_complete())
        || (result.content.is_none()
            && result.structured_content.is_none()
            && result.is_error.is_none())
    {
        return None;
    }
    let mut decoded = CallToolResult::default();
    decoded.result_type = result.result_type;
    decoded.content = result.content.unwrap_or_default();
    decoded.structured_content = result.structured_content;
    decoded.is_error = result.is_error;
    decoded.meta = result.meta;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc,
        id,
        result: ServerResult::CallToolResult(decoded),
    }))
}

/// A response's keys as the answer to a `tools/call` has them; other keys are read and
/// dropped, as rmcp drops them. A key given twice fails it, as it fails rmcp's decoding.
#[derive(Deserialize)]
struct CallReplyIn {
    #[serde(flatten)]
    _other: OtherKeys,
    jsonrpc: JsonRpcVersion2_0,
    id: Option<RequestId>,
    #[serde(default)]
    method: Method,
    result: Option<CallToolResultIn>,
    #[serde(default)]
    error: Present,
}

/// A `CallToolResult`'s keys as rmcp's decoding reads them; other keys are read and dropped
/// (rmcp's own decoding of the type skips them unread: it relies on the message having been
/// buffered first).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallToolResultIn {
    #[serde(flatten)]
    other: OtherKeys,
    #[serde(default)]
    result_type: Option<ResultType>,
    content: Option<Vec<ContentBlock>>,
    /// `null` too is `Some` (rmcp keeps a present `null` apart from an absent key).
    #[serde(default, deserialize_with = "present")]
    structured_content: Option<serde_json::Value>,
    is_error: Option<bool>,
    #[serde(rename = "_meta")]
    meta: Option<MetaObject>,
}

/// A value that is there, `null` too.
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(deserializer).map(Some)
}

/// A `flatten`ed field that takes a struct's other keys: serde buffers them, so every value in
/// them is read (and refused where rmcp's buffering refuses it), then they are dropped, noting
/// whether there were any. With no other keys there is nothing to buffer.
struct OtherKeys {
    any: bool,
}

impl<'de> Deserialize<'de> for OtherKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Goes through the keys serde set aside.
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = OtherKeys;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("keys")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut keys: A,
            ) -> Result<OtherKeys, A::Error> {
                let mut any = false;
                while keys
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {
                    any = true;
                }
                Ok(OtherKeys { any })
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// Whether a key is there at all, whatever its value (`null` too: rmcp tells messages apart
/// by which keys they have).
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer)?;
        Ok(Self(true))
    }
}

/// The `method` key: absent, `tools/call`, or another.
#[derive(Default, PartialEq)]
enum Method {
    #[default]
    None,
    ToolsCall,
    Other,
}

impl<'de> Deserialize<'de> for Method {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Compares the method's name where it lies (no copy of it is made).
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = Method;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a method name")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Method, E> {
                Ok(if name == "tools/call" {
                    Method::ToolsCall
                } else {
                    Method::Other
                })
            }
        }
        deserializer.deserialize_str(Name)
    }
}

/// The protocol version a request's `_meta` names (2026-07-28), read in place: what rmcp's
/// `RequestMetaObject::protocol_version` decodes, without the copy that makes (every stateless
/// call reads it).
pub fn protocol_version_in(meta: &RequestMetaObject) -> Option<&str> {
    meta.get("io.modelcontextprotocol/protocolVersion")
        .and_then(serde_json::Value::as_str)
}

/// Decodes one server message; malformed replies to a request become an error for that request.
pub fn decode_server_message(text: &str, server: &str) -> Option<ServerJsonRpcMessage> {
    match serde_json::from_str::<ServerJsonRpcMessage>(text) {
        Ok(message) => Some(message),
        Err(parse_error) => {
            let id = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|value| value.get("id").cloned())
                .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
            tracing::warn!(server, error = %parse_error, "ignored a malformed message from the server");
            id.map(|id| {
                JsonRpcMessage::Error(JsonRpcError {
                    jsonrpc: Default::default(),
                    id: Some(id),
                    error: ErrorData::new(
                        ErrorCode::INTERNAL_ERROR,
                        format!("Switchboard could not parse the server's reply: {parse_error}"),
                        None,
                    ),
                })
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_version_read_in_place_is_the_one_rmcp_decodes() {
        for meta in [
            r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"2099-01-01","k":1}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":""}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":20260728}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":null}"#,
            r#"{"io.modelcontextprotocol/protocolversion":"2026-07-28"}"#,
            r#"{}"#,
        ] {
            let meta = RequestMetaObject::from(serde_json::from_str::<JsonObject>(meta).unwrap());
            assert_eq!(
                protocol_version_in(&meta),
                meta.protocol_version().as_ref().map(|v| v.as_str()),
                "{meta:?}"
            );
        }
    }

    /// Messages around the fast path's edges: each must decode exactly as rmcp decodes it.
    const CLIENT_MESSAGES: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.50,"big":18446744073709551615,"s":"a\"b"},"_meta":{"progressToken":"p","io.x/y":[1]}}}"#,
        r#"{"id":"a","method":"tools\/call","jsonrpc":"2.0","params":{"name":"e\u0301"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":1},"inputResponses":{"k":{"action":"decline"}},"requestState":"s"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","task":{"ttl":1000}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"extra":{"x":1}}"#,
        // Not tools/call requests, or not well-formed ones: rmcp's decoding decides.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"result":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call","params":{"name":"echo"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":7,"params":{"name":"echo"}}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"result":{"action":"accept","content":{"a":1}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}]"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}"#,
        // Values in skipped keys that rmcp's buffering refuses.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","x":"\ud800"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"x":[1e400]}"#,
    ];

    const SERVER_MESSAGES: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"a://b","name":"b"}],"isError":false,"_meta":{"k":1}}}"#,
        r#"{"result":{"content":[],"structuredContent":null,"resultType":"complete"},"id":"x","jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"n":2.50}}}"#,
        // Other results and messages: rmcp's decoding decides.
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"unknown":true}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"t","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z"}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]},"error":{"code":1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"nope"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}}}"#,
        r#"{"jsonrpc":"2.0","result":{"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[],"x":{"y":-1e999}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]},"x":"\udc00"}"#,
        // A result with a key of another result's: rmcp tries that one first.
        r#"{"jsonrpc":"2.0","id":7,"result":{"action":"accept","content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[],"messages":[]}}"#,
    ];

    /// What a decoding gave, comparable: the message as JSON, or the error's text.
    fn outcome<T: serde::Serialize>(
        decoded: serde_json::Result<T>,
    ) -> Result<serde_json::Value, String> {
        decoded
            .map(|message| serde_json::to_value(message).expect("a decoded message encodes"))
            .map_err(|error| error.to_string())
    }

    /// How many of the messages above, from the first, take the fast path.
    const FAST_CLIENT_MESSAGES: usize = 5;
    const FAST_SERVER_MESSAGES: usize = 3;

    #[test]
    fn tool_calls_encode_to_the_bytes_rmcp_encodes_them_to() {
        let mut messages: Vec<ClientJsonRpcMessage> = CLIENT_MESSAGES
            .iter()
            .filter_map(|text| serde_json::from_str(text).ok())
            .collect();
        // `_meta` in the parameters, and a legacy one, beside the request's own: rmcp merges.
        let call = |meta: &str| {
            serde_json::from_str::<ClientJsonRpcMessage>(&format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"e","arguments":{{"z":1,"a":[true,null]}}{meta}}}}}"#
            ))
            .expect("a tools/call")
        };
        let meta: JsonObject = serde_json::from_str(r#"{"k":"params","p":1}"#).unwrap();
        for (in_params, legacy) in [(true, false), (false, true), (true, true)] {
            let mut message = call(r#","_meta":{"k":"request","progressToken":"t"}"#);
            if let JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::CallToolRequest(request),
                ..
            }) = &mut message
            {
                if in_params {
                    request.params.meta = Some(RequestMetaObject::from(meta.clone()));
                }
                if legacy {
                    request.extensions.insert(MetaObject(meta.clone()));
                }
            }
            messages.push(message);
        }
        messages.push(call(""));
        let tool_calls = messages
            .iter()
            .filter(|message| {
                matches!(
                    message,
                    JsonRpcMessage::Request(JsonRpcRequest {
                        request: ClientRequest::CallToolRequest(_),
                        ..
                    })
                )
            })
            .count();
        assert!(tool_calls >= 9, "{tool_calls} tool calls");
        for message in &messages {
            assert_eq!(
                String::from_utf8(encode_client_message(message).unwrap()).unwrap(),
                serde_json::to_string(message).unwrap(),
            );
        }
    }

    #[test]
    fn tool_calls_and_their_results_are_decoded_directly_and_nothing_else_is() {
        for (n, text) in CLIENT_MESSAGES.iter().enumerate() {
            assert_eq!(
                tool_call(text.as_bytes()).is_some(),
                n < FAST_CLIENT_MESSAGES,
                "{text}"
            );
        }
        for (n, text) in SERVER_MESSAGES.iter().enumerate() {
            assert_eq!(
                call_result(text).is_some(),
                n < FAST_SERVER_MESSAGES,
                "{text}"
            );
        }
    }

    #[test]
    fn client_messages_decode_exactly_as_rmcp_decodes_them() {
        for text in CLIENT_MESSAGES {
            assert_eq!(
                outcome(client_message(text.as_bytes())),
                outcome(serde_json::from_str::<ClientJsonRpcMessage>(text)),
                "{text}"
            );
        }
    }

    /// Bytes that are not UTF-8 in a key the fast path skips, as the fuzzing found them
    /// (`tests/parsers_take_anything.rs`), and in one it reads.
    #[test]
    fn client_messages_that_are_not_utf8_are_refused_as_rmcp_refuses_them() {
        for body in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"x\":{\"\x80m\":\"hi\"}}}"[..],
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"ech\xffo\"}}"[..],
        ] {
            assert!(client_message(body).is_err(), "{body:?}");
            assert!(serde_json::from_slice::<ClientJsonRpcMessage>(body).is_err());
        }
    }

    /// Nesting past serde_json's limit in a key the fast path does not use: rmcp's buffering
    /// refuses it, so must the fast path.
    #[test]
    fn deep_values_in_other_keys_are_refused_as_rmcp_refuses_them() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","x":{deep}}}}}"#
        );
        assert!(serde_json::from_str::<ClientJsonRpcMessage>(&request).is_err());
        assert!(client_message(request.as_bytes()).is_err());
        let reply = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[],"x":{deep}}}}}"#);
        assert!(serde_json::from_str::<ServerJsonRpcMessage>(&reply).is_err());
        assert!(call_reply(&reply).is_err());
    }

    #[test]
    fn replies_to_a_call_decode_exactly_as_rmcp_decodes_them() {
        for text in SERVER_MESSAGES {
            let fast = call_reply(text);
            let rmcp = serde_json::from_str::<ServerJsonRpcMessage>(text);
            // The variant too, not only the encoding.
            assert_eq!(
                fast.as_ref().map(|m| format!("{m:?}")).ok(),
                rmcp.as_ref().map(|m| format!("{m:?}")).ok(),
                "{text}"
            );
            assert_eq!(outcome(fast), outcome(rmcp), "{text}");
        }
    }

    /// A result with no keys but a `CallToolResult`'s own is one to rmcp's decoding too, with
    /// any of them: no result rmcp tries before it matches such a result.
    #[test]
    fn results_with_only_a_call_results_keys_are_call_results_to_rmcp() {
        let keys = [
            r#""resultType":"complete""#,
            r#""content":[{"type":"text","text":"t"}]"#,
            r#""structuredContent":{"a":1}"#,
            r#""isError":true"#,
            r#""_meta":{"k":1}"#,
        ];
        for set in 0..1u32 << keys.len() {
            let result: Vec<&str> = (0..keys.len())
                .filter(|n| set & 1 << n != 0)
                .map(|n| keys[n])
                .collect();
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{{}}}}}"#,
                result.join(",")
            );
            let fast = call_result(&text);
            let rmcp = serde_json::from_str::<ServerJsonRpcMessage>(&text).ok();
            assert_eq!(
                fast.is_some(),
                // At least one of the three keys rmcp asks for.
                set & 0b1110 != 0,
                "{text}"
            );
            if let Some(fast) = fast {
                assert_eq!(
                    Some(format!("{fast:?}")),
                    rmcp.map(|m| format!("{m:?}")),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn malformed_replies_with_an_id_become_errors_for_that_request() {
        let message = decode_server_message(
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":1}]}}"#,
            "s",
        );
        // Untyped results fall through to a custom result in rmcp; genuinely broken JSON does not.
        assert!(message.is_some());
        let broken = decode_server_message(r#"{"jsonrpc":"2.0","id":7,"result":"#, "s");
        assert!(broken.is_none(), "unparseable text has no id to answer");
        let wrong_shape =
            decode_server_message(r#"{"jsonrpc":"2.0","id":"a","result":1,"error":{}}"#, "s");
        match wrong_shape {
            Some(JsonRpcMessage::Error(e)) => {
                assert_eq!(e.id, Some(RequestId::String("a".into())));
                assert!(e.error.message.contains("could not parse"));
            }
            other => panic!("expected an error, got {other:?}"),
        }
    }
}
