//! The upstream behind Switchboard when the official conformance suite tests its server side.
//!
//! The suite's server scenarios (`conformance server --url ...`) call tools, resources and prompts
//! by fixed names (`test_simple_text`, `test://static-text`, `test_prompt_with_arguments`, ...)
//! and check what comes back. Switchboard has none of its own: it re-exposes its upstreams. So
//! CI puts this server behind Switchboard (with an empty prefix) and points the suite at
//! Switchboard's `/mcp`; every check then proves that the front door carries the behaviour
//! through unchanged, in both eras.
//!
//! The behaviour mirrors the suite's reference "everything" server (the names, texts and
//! payloads the scenarios expect), written with rmcp. One difference by design: where the
//! reference answers a 2026-07-28 request for sampling or elicitation only on its stateless
//! path, this server asks the way the caller's era allows: a server-to-client request in a
//! legacy session, an `input_required` result for a 2026-07-28 request. That is what a real
//! server speaking both eras does, and it makes Switchboard bridge the eras for the legacy
//! scenarios.

// Logging, sampling and roots are deprecated by SEP-2577, but the suite still tests them.
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_core::sync::lock;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse, Implementation,
    InputRequiredResult, InputResponses, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, ServerRequest, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// A 1x1 red PNG.
const IMAGE_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const AUDIO_WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// The logger name on the server's own log messages.
const LOGGER: &str = "conformance-test-server";

/// What the server announces as changed.
#[derive(Debug, Clone)]
enum Changed {
    Tools,
    Prompts,
    /// A resource's content (to the clients subscribed to it).
    Resource(String),
}

/// State shared by every session and request of one server.
struct Shared {
    /// List changes, for `subscriptions/listen` streams and legacy sessions.
    changes: broadcast::Sender<Changed>,
    /// Signs `requestState` for the tamper test.
    state_key: aws_lc_rs::hmac::Key,
    /// How many times each list was changed: each change adds or removes one extra entry,
    /// so that a client which refetches the list sees a real difference.
    tool_changes: AtomicUsize,
    prompt_changes: AtomicUsize,
}

/// The conformance "everything" server; cheap to clone, one per session.
#[derive(Clone)]
pub struct ConformanceServer {
    shared: Arc<Shared>,
    legacy_only: bool,
    /// The URIs this legacy session subscribed to (see [`Self::for_session`]).
    subscriptions: Arc<Mutex<HashSet<String>>>,
}

impl Default for ConformanceServer {
    fn default() -> Self {
        Self::new()
    }
}

impl ConformanceServer {
    /// The same server speaking only the legacy revisions (up to 2025-11-25), so a client
    /// talks to it in a session, with server-to-client requests and `resources/subscribe`.
    pub fn legacy_only(mut self) -> Self {
        self.legacy_only = true;
        self
    }

    /// A server with a fresh request-state key, speaking every revision.
    pub fn new() -> Self {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let state_key = aws_lc_rs::hmac::Key::generate(aws_lc_rs::hmac::HMAC_SHA256, &rng)
            .expect("the system random source works");
        Self {
            shared: Arc::new(Shared {
                changes: broadcast::channel(16).0,
                state_key,
                tool_changes: AtomicUsize::new(0),
                prompt_changes: AtomicUsize::new(0),
            }),
            legacy_only: false,
            subscriptions: Arc::default(),
        }
    }

    /// This server for one more session: the shared state, with subscriptions of its own.
    pub fn for_session(&self) -> Self {
        Self {
            subscriptions: Arc::default(),
            ..self.clone()
        }
    }

    fn sign_state(&self, payload: Value) -> String {
        let data = payload.to_string();
        let tag = aws_lc_rs::hmac::sign(&self.shared.state_key, data.as_bytes());
        json!({"data": data, "hmac": hex(tag.as_ref())}).to_string()
    }

    fn verify_state(&self, raw: &str) -> Option<Value> {
        let outer: Value = serde_json::from_str(raw).ok()?;
        let data = outer.get("data")?.as_str()?;
        let tag = unhex(outer.get("hmac")?.as_str()?)?;
        aws_lc_rs::hmac::verify(&self.shared.state_key, data.as_bytes(), &tag).ok()?;
        serde_json::from_str(data).ok()
    }
}

/// `server` as a Streamable HTTP service (mount it at `/mcp`): legacy sessions and stateless
/// 2026-07-28 requests on the one path, a fresh [`ConformanceServer::for_session`] per session.
pub fn http_service(
    server: ConformanceServer,
    stop: tokio_util::sync::CancellationToken,
) -> rmcp::transport::StreamableHttpService<
    ConformanceServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    rmcp::transport::StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::default(),
        rmcp::transport::StreamableHttpServerConfig::default()
            .with_sse_keep_alive(None)
            .with_cancellation_token(stop),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn nonce() -> String {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system random source works");
    hex(&bytes)
}

/// Builds an rmcp model value from its JSON form (the payloads here are the suite's, verbatim).
fn from_json<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn text(text: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    from_json::<CallToolResult>(json!({"content": [{"type": "text", "text": text.into()}]}))
        .map(CallToolResponse::Complete)
}

fn input_required(
    requests: Value,
    state: Option<String>,
) -> Result<InputRequiredResult, ErrorData> {
    let mut value = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(state) = state {
        value["requestState"] = state.into();
    }
    from_json(value)
}

fn ask_for_input(requests: Value, state: Option<String>) -> Result<CallToolResponse, ErrorData> {
    input_required(requests, state).map(CallToolResponse::InputRequired)
}

/// The text field `field` of an elicitation answer, or "unknown".
fn answered_text(answer: Option<&Value>, field: &str) -> String {
    answer
        .and_then(|a| a.get("content"))
        .and_then(|c| c.get(field))
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned()
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}}})
}

fn sample(prompt: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens}})
}

/// Whether the request came as a 2026-07-28 (per-request metadata) request.
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context.meta.protocol_version().is_some()
}

/// One question put to the client, answered the way its era allows.
enum Asked {
    /// The client's answer (the result of its elicitation, sampling or roots request).
    Answer(Value),
    /// A 2026-07-28 request: the question goes back as an `input_required` result.
    Retry(InputRequiredResult),
}

/// Asks the client `request` (`{"method", "params"}`) under `key`: a server-to-client request in
/// a legacy session, `input_required` (or the answer from `inputResponses`) in 2026-07-28.
async fn ask(
    context: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
    key: &str,
    request: Value,
) -> Result<Asked, ErrorData> {
    if is_modern(context) {
        return match responses.and_then(|r| r.get(key)) {
            Some(answer) => Ok(Asked::Answer(answer.clone())),
            None => input_required(json!({key: request}), None).map(Asked::Retry),
        };
    }
    let request: ServerRequest = from_json(request)?;
    let answer =
        context.peer.send_request(request).await.map_err(|e| {
            ErrorData::internal_error(format!("the client did not answer: {e}"), None)
        })?;
    serde_json::to_value(answer)
        .map(Asked::Answer)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

async fn log(context: &RequestContext<RoleServer>, message: &str) {
    let _ = context
        .peer
        .notify_logging_message(
            LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message))
                .with_logger(LOGGER),
        )
        .await;
}

/// Every tool; `changed` adds `test_dynamic_tool` (after an odd number of tool list changes).
fn tools(changed: bool) -> Value {
    let empty = json!({"type": "object", "properties": {}});
    let mut tools = vec![
        (
            "test_simple_text",
            "Tests simple text content response",
            empty.clone(),
        ),
        (
            "test_image_content",
            "Tests image content response",
            empty.clone(),
        ),
        (
            "test_audio_content",
            "Tests audio content response",
            empty.clone(),
        ),
        (
            "test_embedded_resource",
            "Tests embedded resource content response",
            empty.clone(),
        ),
        (
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            empty.clone(),
        ),
        (
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
            empty.clone(),
        ),
        (
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
            empty.clone(),
        ),
        (
            "test_error_handling",
            "Tests error response handling",
            empty.clone(),
        ),
        (
            "test_reconnection",
            "Tests SSE stream disconnection and client reconnection (SEP-1699)",
            empty.clone(),
        ),
        // The tasks extension's fixtures (SEP-2663): the front door runs their calls as tasks
        // (`.ci/conformance.sh` sets the task modes the suite's fixture list names).
        (
            "greet",
            "Returns a greeting at once (sync-only)",
            json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        ),
        (
            "slow_compute",
            "Sleeps `seconds` seconds, then answers (task-supporting)",
            json!({"type": "object", "properties": {
                "seconds": {"type": "number"}, "label": {"type": "string"}}}),
        ),
        (
            "confirm_delete",
            "Asks the user to confirm deleting `filename` (task-supporting)",
            json!({"type": "object", "properties": {"filename": {"type": "string"}}}),
        ),
        (
            "multi_input",
            "Asks two questions at once (task-supporting)",
            empty.clone(),
        ),
        (
            "failing_job",
            "Works for a second, then reports a tool error (task-supporting)",
            empty.clone(),
        ),
        (
            "protocol_error_job",
            "Works for a second, then fails with a JSON-RPC error (task-supporting)",
            empty.clone(),
        ),
        (
            "test_tool_with_task",
            "Asks for the user's name, then works for a second (escalates to a task)",
            empty.clone(),
        ),
        (
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            json!({"type": "object", "properties": {
                "prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
                "required": ["prompt"]}),
        ),
        (
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            json!({"type": "object", "properties": {
                "message": {"type": "string", "description": "The message to show the user"}},
                "required": ["message"]}),
        ),
        (
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
            empty.clone(),
        ),
        (
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
            empty.clone(),
        ),
        (
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
                    "street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}},
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }),
        ),
        (
            "test_missing_capability",
            "Test tool requiring sampling",
            empty.clone(),
        ),
        (
            "test_input_required_result_elicitation",
            "MRTR: returns InputRequiredResult with elicitation request",
            empty.clone(),
        ),
        (
            "test_input_required_result_sampling",
            "MRTR: returns InputRequiredResult with sampling request",
            empty.clone(),
        ),
        (
            "test_input_required_result_list_roots",
            "MRTR: returns InputRequiredResult with roots/list request",
            empty.clone(),
        ),
        (
            "test_input_required_result_request_state",
            "MRTR: returns InputRequiredResult with requestState",
            empty.clone(),
        ),
        (
            "test_input_required_result_multiple_inputs",
            "MRTR: returns InputRequiredResult with multiple input requests",
            empty.clone(),
        ),
        (
            "test_input_required_result_multi_round",
            "MRTR: multi-round InputRequiredResult workflow",
            empty.clone(),
        ),
        (
            "test_input_required_result_tampered_state",
            "MRTR: HMAC-signed requestState integrity test",
            empty.clone(),
        ),
        (
            "test_input_required_result_capabilities",
            "MRTR: respects client capabilities in inputRequests",
            empty.clone(),
        ),
        (
            "test_streaming_elicitation",
            "Diagnostic tool validating response progress streams",
            empty.clone(),
        ),
        (
            "test_logging_tool",
            "Diagnostic logging validator tool",
            empty.clone(),
        ),
        (
            "test_trigger_tool_change",
            "Announces a change of the tool list",
            empty.clone(),
        ),
        (
            "test_trigger_prompt_change",
            "Announces a change of the prompt list",
            empty.clone(),
        ),
        (
            "test_update_watched_resource",
            "Announces an update of test://watched-resource to its subscribers",
            empty.clone(),
        ),
    ];
    tools.push((
        "test_header_param",
        "Echoes `region`, which 2026-07-28 clients also send as the Mcp-Param-Region header",
        json!({"type": "object", "properties": {
            "region": {"type": "string", "description": "A region name", "x-mcp-header": "Region"}},
            "required": ["region"]}),
    ));
    if changed {
        tools.push((
            "test_dynamic_tool",
            "Listed after an odd number of tool list changes",
            empty,
        ));
    }
    Value::Array(
        tools
            .drain(..)
            .map(|(name, description, schema)| {
                json!({"name": name, "description": description, "inputSchema": schema})
            })
            .collect(),
    )
}

impl ConformanceServer {
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let responses = request.input_responses.as_ref();
        let state = request.request_state.as_deref();
        let arguments = request.arguments.clone().unwrap_or_default();
        let argument = |name: &str| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match request.name.as_ref() {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => from_json::<CallToolResult>(json!({"content": [
                {"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"}]}))
            .map(Into::into),
            "test_audio_content" => from_json::<CallToolResult>(json!({"content": [
                {"type": "audio", "data": AUDIO_WAV, "mimeType": "audio/wav"}]}))
            .map(Into::into),
            "test_embedded_resource" => from_json::<CallToolResult>(json!({"content": [
                {"type": "resource", "resource": {"uri": "test://embedded-resource",
                    "mimeType": "text/plain", "text": "This is an embedded resource content."}}]}))
            .map(Into::into),
            "test_multiple_content_types" => from_json::<CallToolResult>(json!({"content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                    "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}]}))
            .map(Into::into),
            "test_tool_with_logging" => {
                for (i, message) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .into_iter()
                .enumerate()
                {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    log(&context, message).await;
                }
                text("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                let token = context.meta.get_progress_token();
                for step in [0u32, 50, 100] {
                    if step > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if let Some(token) = &token {
                        let _ = context
                            .peer
                            .notify_progress(
                                ProgressNotificationParam::new(token.clone(), f64::from(step))
                                    .with_total(100.0)
                                    .with_message(format!("Completed step {step} of 100")),
                            )
                            .await;
                    }
                }
                let token = token
                    .map(|t| serde_json::to_value(&t.0).unwrap_or_default())
                    .map(|t| t.as_str().map(str::to_owned).unwrap_or(t.to_string()))
                    .unwrap_or_else(|| "0".into());
                text(token)
            }
            "test_error_handling" => from_json::<CallToolResult>(json!({"isError": true, "content": [
                {"type": "text", "text": "This tool intentionally returns an error for testing"}]}))
            .map(Into::into),
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                text(
                    "Reconnection test completed successfully. If you received this, the client \
                     properly reconnected after stream closure.",
                )
            }
            "test_sampling" => {
                match ask(&context, responses, "sampling", sample(&argument("prompt"), 100)).await? {
                    Asked::Retry(required) => Ok(required.into()),
                    Asked::Answer(answer) => {
                        let reply = answer
                            .pointer("/content/text")
                            .and_then(Value::as_str)
                            .unwrap_or("No response");
                        text(format!("LLM response: {reply}"))
                    }
                }
            }
            "test_elicitation" => {
                let question = json!({"method": "elicitation/create", "params": {
                    "message": argument("message"),
                    "requestedSchema": {"type": "object", "properties": {
                        "response": {"type": "string", "description": "User's response"}},
                        "required": ["response"]}}});
                self.elicitation(&context, responses, question, "User response")
                    .await
            }
            "test_elicitation_sep1034_defaults" => {
                let question = json!({"method": "elicitation/create", "params": {
                    "message": "Please review and update the form fields with defaults",
                    "requestedSchema": {"type": "object", "properties": {
                        "name": {"type": "string", "description": "User name", "default": "John Doe"},
                        "age": {"type": "integer", "description": "User age", "default": 30},
                        "score": {"type": "number", "description": "User score", "default": 95.5},
                        "status": {"type": "string", "description": "User status",
                            "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "description": "Verification status", "default": true}},
                        "required": []}}});
                self.elicitation(&context, responses, question, "Elicitation completed")
                    .await
            }
            "test_elicitation_sep1330_enums" => {
                let question = json!({"method": "elicitation/create", "params": {
                    "message": "Please select options from the enum fields",
                    "requestedSchema": {"type": "object", "properties": {
                        "untitledSingle": {"type": "string", "description": "Select one option",
                            "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "description": "Select one option with titles",
                            "oneOf": [{"const": "value1", "title": "First Option"},
                                      {"const": "value2", "title": "Second Option"},
                                      {"const": "value3", "title": "Third Option"}]},
                        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                            "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "description": "Select multiple options",
                            "minItems": 1, "maxItems": 3,
                            "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                            "minItems": 1, "maxItems": 3,
                            "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                {"const": "value2", "title": "Second Choice"},
                                                {"const": "value3", "title": "Third Choice"}]}}},
                        "required": []}}});
                self.elicitation(&context, responses, question, "Elicitation completed")
                    .await
            }
            "json_schema_2020_12_tool" => text(format!(
                "JSON Schema 2020-12 tool called with: {}",
                Value::Object(arguments.clone())
            )),
            "test_missing_capability" => {
                let capabilities = context.client_capabilities().unwrap_or_default();
                if capabilities.sampling.is_none() {
                    return Err(ErrorData::new(
                        ErrorCode(-32021),
                        "MissingRequiredClientCapabilityError",
                        Some(json!({"requiredCapabilities": {"sampling": {}}})),
                    ));
                }
                text("Success")
            }
            "test_input_required_result_elicitation" => match responses.and_then(|r| r.get("user_name")) {
                Some(answer) => text(format!("Hello, {}!", answered_text(Some(answer), "name"))),
                None => ask_for_input(
                    json!({"user_name": elicit("What is your name?", "name", "string")}),
                    None,
                ),
            },
            "test_input_required_result_sampling" => match responses.and_then(|r| r.get("sample_request")) {
                Some(answer) => text(format!(
                    "Sampling result: {}",
                    answer.pointer("/content/text").and_then(Value::as_str).unwrap_or("no response")
                )),
                None => ask_for_input(
                    json!({"sample_request": sample("What is the capital of France?", 100)}),
                    None,
                ),
            },
            "test_input_required_result_list_roots" => match responses.and_then(|r| r.get("roots_request")) {
                Some(answer) => text(format!("Found {} root(s)", roots(answer))),
                None => ask_for_input(
                    json!({"roots_request": {"method": "roots/list", "params": {}}}),
                    None,
                ),
            },
            "test_input_required_result_request_state" => {
                let state: Option<Value> = state.and_then(|s| serde_json::from_str(s).ok());
                let confirmed = responses
                    .and_then(|r| r.get("confirm"))
                    .and_then(|a| a.pointer("/content/ok"))
                    == Some(&Value::Bool(true));
                if confirmed && state.as_ref().and_then(|s| s.get("kind")) == Some(&json!("request-state")) {
                    return text("state-ok: requestState validated");
                }
                ask_for_input(
                    json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                    Some(json!({"kind": "request-state", "nonce": nonce()}).to_string()),
                )
            }
            "test_input_required_result_multiple_inputs" => {
                let state: Option<Value> = state.and_then(|s| serde_json::from_str(s).ok());
                let answers = responses.map(|r| (r.get("user_name"), r.get("greeting"), r.get("client_roots")));
                if let Some((Some(name), Some(greeting), Some(client_roots))) = answers
                    && state.as_ref().and_then(|s| s.get("kind")) == Some(&json!("multiple-inputs"))
                {
                    let greeting = greeting
                        .pointer("/content/text")
                        .and_then(Value::as_str)
                        .unwrap_or("Hello there!");
                    return text(format!(
                        "Name: {}; Greeting: {greeting}; Roots: {}",
                        answered_text(Some(name), "name"),
                        roots(client_roots)
                    ));
                }
                ask_for_input(
                    json!({
                        "user_name": elicit("What is your name?", "name", "string"),
                        "greeting": sample("Generate a greeting", 50),
                        "client_roots": {"method": "roots/list", "params": {}}
                    }),
                    Some(json!({"kind": "multiple-inputs", "nonce": nonce()}).to_string()),
                )
            }
            "test_input_required_result_multi_round" => {
                let state: Option<Value> = state.and_then(|s| serde_json::from_str(s).ok());
                let round = state.as_ref().and_then(|s| s.get("round")).and_then(Value::as_u64);
                let first_round = || {
                    ask_for_input(
                        json!({"step1": elicit("Step 1: What is your name?", "name", "string")}),
                        Some(json!({"round": 1, "nonce": nonce()}).to_string()),
                    )
                };
                match (round, responses) {
                    (Some(1), Some(r)) if r.contains_key("step1") => ask_for_input(
                        json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                        Some(json!({"round": 2, "name": answered_text(r.get("step1"), "name"), "nonce": nonce()}).to_string()),
                    ),
                    (Some(2), Some(r)) if r.contains_key("step2") => {
                        let name = state
                            .as_ref()
                            .and_then(|s| s.get("name"))
                            .and_then(Value::as_str)
                            .unwrap_or("friend");
                        text(format!(
                            "Multi-round complete for {name} who likes {}",
                            answered_text(r.get("step2"), "color")
                        ))
                    }
                    _ => first_round(),
                }
            }
            "test_input_required_result_tampered_state" => {
                if let Some(raw) = state {
                    let Some(verified) = self.verify_state(raw) else {
                        return Err(ErrorData::invalid_params(
                            "requestState integrity check failed",
                            None,
                        ));
                    };
                    if verified.get("kind") == Some(&json!("tamper-test"))
                        && responses.is_some_and(|r| r.contains_key("confirm"))
                    {
                        return text("integrity-ok: state verified");
                    }
                }
                ask_for_input(
                    json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                    Some(self.sign_state(json!({"kind": "tamper-test", "nonce": nonce()}))),
                )
            }
            "test_input_required_result_capabilities" => {
                if let Some(r) = responses.filter(|r| !r.is_empty()) {
                    let keys: Vec<&str> = r.keys().map(String::as_str).collect();
                    return text(format!("capabilities-ok: received {}", keys.join(",")));
                }
                let capabilities = context.client_capabilities().unwrap_or_default();
                let mut requests = serde_json::Map::new();
                if capabilities.elicitation.is_some() {
                    requests.insert("elicit_input".into(), elicit("Elicitation input", "value", "string"));
                }
                if capabilities.sampling.is_some() {
                    requests.insert("sample_input".into(), sample("Sample request", 50));
                }
                if requests.is_empty() {
                    return text("No supported capabilities declared");
                }
                ask_for_input(
                    Value::Object(requests),
                    Some(self.sign_state(json!({"kind": "capabilities-test", "nonce": nonce()}))),
                )
            }
            "test_streaming_elicitation" => {
                if let Some(token) = context.meta.get_progress_token() {
                    let _ = context
                        .peer
                        .notify_progress(ProgressNotificationParam::new(token, 50.0).with_total(100.0))
                        .await;
                }
                text("Streaming complete")
            }
            "test_logging_tool" => {
                // Logs only when the request asked for a level (2026-07-28 requests without
                // `_meta` log level must not get any).
                if context.meta.log_level().is_some() {
                    log(&context, "Diagnostic trace logging activated").await;
                }
                text("Logging evaluated")
            }
            "test_dynamic_tool" => text("A tool that comes and goes."),
            "test_header_param" => text(format!("region={}", argument("region"))),
            "test_trigger_tool_change" => {
                self.shared.tool_changes.fetch_add(1, Ordering::SeqCst);
                let _ = self.shared.changes.send(Changed::Tools);
                text("Mutation triggered")
            }
            "test_update_watched_resource" => {
                let uri = "test://watched-resource".to_owned();
                let _ = self.shared.changes.send(Changed::Resource(uri));
                text("Update announced")
            }
            "test_trigger_prompt_change" => {
                self.shared.prompt_changes.fetch_add(1, Ordering::SeqCst);
                let _ = self.shared.changes.send(Changed::Prompts);
                text("Mutation triggered")
            }
            "greet" => text(format!("Hello, {}!", argument("name"))),
            "slow_compute" => {
                let seconds = arguments.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
                tokio::time::sleep(Duration::from_secs_f64(seconds.clamp(0.0, 600.0))).await;
                text(format!("Computed {} in {seconds}s", argument("label")))
            }
            "confirm_delete" => {
                let filename = argument("filename");
                let question = elicit(&format!("Delete {filename}?"), "confirm", "boolean");
                match ask(&context, responses, "confirm_delete", question).await? {
                    Asked::Retry(required) => Ok(required.into()),
                    Asked::Answer(answer) => {
                        let yes = answer.pointer("/content/confirm") == Some(&Value::Bool(true));
                        text(if yes { format!("Deleted {filename}") } else { format!("Kept {filename}") })
                    }
                }
            }
            "multi_input" => {
                let first = elicit("What is your name?", "name", "string");
                let second = elicit("What is your favorite color?", "color", "string");
                if is_modern(&context) {
                    return match responses.map(|r| (r.get("name"), r.get("color"))) {
                        Some((Some(name), Some(color))) => text(format!(
                            "{} likes {}",
                            answered_text(Some(name), "name"),
                            answered_text(Some(color), "color")
                        )),
                        _ => ask_for_input(json!({"name": first, "color": second}), None),
                    };
                }
                let (name, color) = tokio::join!(
                    ask(&context, None, "name", first),
                    ask(&context, None, "color", second)
                );
                match (name?, color?) {
                    (Asked::Answer(name), Asked::Answer(color)) => text(format!(
                        "{} likes {}",
                        answered_text(Some(&name), "name"),
                        answered_text(Some(&color), "color")
                    )),
                    _ => Err(ErrorData::internal_error("no answers", None)),
                }
            }
            "failing_job" => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                from_json::<CallToolResult>(json!({"isError": true, "content": [
                    {"type": "text", "text": "The job failed: the input was not valid"}]}))
                .map(Into::into)
            }
            "protocol_error_job" => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Err(ErrorData::internal_error("the job crashed", None))
            }
            "test_tool_with_task" => {
                let question = elicit("What is your name?", "name", "string");
                match ask(&context, responses, "user_name", question).await? {
                    Asked::Retry(required) => Ok(required.into()),
                    Asked::Answer(answer) => {
                        // The work that makes this call worth a task.
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        text(format!("Hello, {}! The task is done.", answered_text(Some(&answer), "name")))
                    }
                }
            }
            other => Err(ErrorData::invalid_params(format!("unknown tool '{other}'"), None)),
        }
    }

    /// Records a legacy session's (un)subscription and logs it, as the reference server does.
    async fn track_subscription(
        &self,
        context: &RequestContext<RoleServer>,
        uri: String,
        subscribe: bool,
    ) {
        let verb = if subscribe {
            "Subscribed to"
        } else {
            "Unsubscribed from"
        };
        log(context, &format!("{verb} resource: {uri}")).await;
        let mut subscriptions = lock(&self.subscriptions);
        if subscribe {
            subscriptions.insert(uri);
        } else {
            subscriptions.remove(&uri);
        }
    }

    async fn elicitation(
        &self,
        context: &RequestContext<RoleServer>,
        responses: Option<&InputResponses>,
        question: Value,
        label: &str,
    ) -> Result<CallToolResponse, ErrorData> {
        match ask(context, responses, "elicitation", question).await? {
            Asked::Retry(required) => Ok(required.into()),
            Asked::Answer(answer) => text(format!(
                "{label}: action={}, content={}",
                answer
                    .get("action")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown"),
                answer.get("content").cloned().unwrap_or(json!({}))
            )),
        }
    }
}

fn roots(answer: &Value) -> usize {
    answer
        .get("roots")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

impl ServerHandler for ConformanceServer {
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.legacy_only {
            std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        } else {
            std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_completions()
            .build();
        capabilities.logging = Some(Default::default());
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("mcp-conformance-test-server", "1.0.0"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let changed = self.shared.tool_changes.load(Ordering::SeqCst) % 2 == 1;
        from_json(json!({"tools": tools(changed)}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        from_json(json!({"resources": [
            {"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
             "description": "A static text resource for testing", "mimeType": "text/plain"},
            {"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
             "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
            {"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
             "description": "A resource clients can subscribe to", "mimeType": "text/plain"}
        ]}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        from_json(json!({"resourceTemplates": [
            {"uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template",
             "description": "A resource template with parameter substitution", "mimeType": "application/json"}
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "This is the content of the static text resource."}),
            "test://static-binary" => {
                json!({"uri": uri, "mimeType": "image/png", "blob": IMAGE_PNG})
            }
            "test://watched-resource" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "Watched resource content"}),
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'))
            {
                Some(id) => json!({"uri": uri, "mimeType": "application/json",
                    "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()}),
                None => {
                    return Err(ErrorData::invalid_params(
                        format!("Resource {uri} not found"),
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        from_json::<rmcp::model::ReadResourceResult>(json!({"contents": [contents]}))
            .map(ReadResourceResponse::Complete)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.track_subscription(&context, request.uri, true).await;
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.track_subscription(&context, request.uri, false).await;
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.shared.changes.subscribe();
        let accepted = context.accepted().clone();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                change = changes.recv() => {
                    let sent = match change {
                        Ok(Changed::Tools) if accepted.tools_list_changed == Some(true) => {
                            context.sink().notify_tool_list_changed().await
                        }
                        Ok(Changed::Prompts) if accepted.prompts_list_changed == Some(true) => {
                            context.sink().notify_prompt_list_changed().await
                        }
                        Ok(Changed::Resource(uri))
                            if accepted.resource_subscriptions.as_ref().is_some_and(|u| u.contains(&uri)) =>
                        {
                            context.sink().notify_resource_updated(uri).await
                        }
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => Ok(()),
                        Err(broadcast::error::RecvError::Closed) => return Ok(()),
                    };
                    if sent.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        // A legacy session hears list changes on its own stream.
        let mut changes = self.shared.changes.subscribe();
        let peer = context.peer;
        let subscriptions = self.subscriptions.clone();
        tokio::spawn(async move {
            loop {
                let sent = match changes.recv().await {
                    Ok(Changed::Tools) => peer.notify_tool_list_changed().await,
                    Ok(Changed::Prompts) => peer.notify_prompt_list_changed().await,
                    Ok(Changed::Resource(uri)) => {
                        let subscribed = lock(&subscriptions).contains(&uri);
                        if !subscribed {
                            continue;
                        }
                        let params = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                        peer.notify_resource_updated(params).await
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => Ok(()),
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if sent.is_err() {
                    return;
                }
            }
        });
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut prompts = json!({"prompts": [
            {"name": "test_simple_prompt", "title": "Simple Test Prompt",
             "description": "A simple prompt without arguments"},
            {"name": "test_prompt_with_arguments", "title": "Prompt With Arguments",
             "description": "A prompt with required arguments", "arguments": [
                {"name": "arg1", "description": "First test argument", "required": true},
                {"name": "arg2", "description": "Second test argument", "required": true}]},
            {"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
             "description": "A prompt that includes an embedded resource", "arguments": [
                {"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]},
            {"name": "test_prompt_with_image", "title": "Prompt With Image",
             "description": "A prompt that includes image content"},
            {"name": "test_input_required_result_prompt",
             "description": "MRTR: prompt that requires elicitation input"}
        ]});
        if self.shared.prompt_changes.load(Ordering::SeqCst) % 2 == 1
            && let Some(list) = prompts["prompts"].as_array_mut()
        {
            list.push(json!({"name": "test_dynamic_prompt",
                "description": "Listed after an odd number of prompt list changes"}));
        }
        from_json(prompts)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let arguments = request.arguments.clone().unwrap_or_default();
        let argument = |name: &str| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let user = |content: Value| json!({"role": "user", "content": content});
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![user(
                json!({"type": "text", "text": "This is a simple prompt for testing."}),
            )],
            "test_prompt_with_arguments" => vec![user(json!({"type": "text", "text": format!(
                "Prompt with arguments: arg1='{}', arg2='{}'", argument("arg1"), argument("arg2"))}))],
            "test_prompt_with_embedded_resource" => vec![
                user(
                    json!({"type": "resource", "resource": {"uri": argument("resourceUri"),
                    "mimeType": "text/plain", "text": "Embedded resource content for testing."}}),
                ),
                user(
                    json!({"type": "text", "text": "Please process the embedded resource above."}),
                ),
            ],
            "test_dynamic_prompt" => vec![user(
                json!({"type": "text", "text": "A prompt that comes and goes."}),
            )],
            "test_prompt_with_image" => vec![
                user(json!({"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."})),
            ],
            "test_input_required_result_prompt" => {
                match request
                    .input_responses
                    .as_ref()
                    .and_then(|r| r.get("user_context"))
                {
                    Some(answer) => vec![user(json!({"type": "text", "text": format!(
                        "Prompt with context: {}", answered_text(Some(answer), "context"))}))],
                    None => {
                        return input_required(
                            json!({"user_context": elicit("What context should the prompt use?", "context", "string")}),
                            None,
                        )
                        .map(GetPromptResponse::InputRequired);
                    }
                }
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt '{other}'"),
                    None,
                ));
            }
        };
        from_json::<rmcp::model::GetPromptResult>(json!({"messages": messages}))
            .map(GetPromptResponse::Complete)
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        from_json(json!({"completion": {"values": [], "total": 0, "hasMore": false}}))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let level = serde_json::to_value(request.level).unwrap_or_default();
        log(
            &context,
            &format!("Log level set to: {}", level.as_str().unwrap_or("?")),
        )
        .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_request_state_verifies_and_a_tampered_one_does_not() {
        let server = ConformanceServer::new();
        let state = server.sign_state(json!({"kind": "tamper-test"}));
        assert_eq!(
            server.verify_state(&state),
            Some(json!({"kind": "tamper-test"}))
        );
        let tampered = state.replace("tamper-test", "tamper-tesT");
        assert_eq!(server.verify_state(&tampered), None);
        assert_eq!(server.verify_state("not json"), None);
        assert_eq!(
            ConformanceServer::new().verify_state(&state),
            None,
            "another key"
        );
    }

    #[test]
    fn every_tool_has_a_valid_name_and_a_description() {
        let Value::Array(tools) = tools(true) else {
            panic!("a list")
        };
        let mut names = HashSet::new();
        for tool in &tools {
            let name = tool["name"].as_str().expect("a name");
            assert!(
                name.len() <= 128
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            );
            assert!(names.insert(name), "{name} listed twice");
            assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
        }
        let _: ListToolsResult = from_json(json!({"tools": tools})).expect("rmcp accepts the list");
    }
}
