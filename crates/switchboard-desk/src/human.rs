//! The built-in `human` server: tools whose answer comes from a person at the console.
//!
//! An agent that needs a decision, a fact only a person knows, or a go-ahead calls `ask`,
//! `confirm` or `choose`; the question waits on the [`Desk`] until someone answers it in the
//! web console (or through the admin API), or its time runs out. The server runs inside the
//! daemon and is reached like any other (URL `builtin:human`), so its tools are listed, searched,
//! limited, counted and routed as every other server's are.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use serde_json::{Map, Value, json};
use switchboard_core::ServerId;
use switchboard_upstream::BuiltinServers;

use crate::{Action, Answer, Asking, Desk};

/// How long a question waits when the caller names no `timeout_seconds`.
const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// The longest a caller may make a question wait.
const LONGEST_WAIT: Duration = Duration::from_secs(3000);
/// The answer to a question asked while no console is open (and the server does not wait).
pub const NOBODY_THERE: &str = "No one is available to answer: no Switchboard console is open. \
     Go on without this answer, or ask again later.";
/// How often a waiting call reports progress (when its caller asked for progress), so that
/// clients which reset their timeout on progress keep waiting.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// The `human` server of one configured server id.
#[derive(Clone)]
pub struct HumanServer {
    desk: Desk,
    server: String,
    wait_always: bool,
}

impl HumanServer {
    /// Asks at `desk` on behalf of configured server `server`. A question nobody is there to
    /// see (no console open) is answered at once that no one is available, unless
    /// `wait_always`: then it waits its time for an answer through the API too.
    pub fn new(desk: Desk, server: impl Into<String>, wait_always: bool) -> Self {
        Self {
            desk,
            server: server.into(),
            wait_always,
        }
    }

    fn tools() -> Vec<Tool> {
        let wait = json!({
            "type": "integer",
            "minimum": 1,
            "maximum": LONGEST_WAIT.as_secs(),
            "description": format!("How long to wait for an answer, in seconds (default {}).", DEFAULT_WAIT.as_secs()),
        });
        let question =
            json!({"type": "string", "description": "The question, as the person will read it."});
        let tool = |name: &str, description: &str, extra: Value, required: &[&str]| {
            let mut properties = Map::new();
            properties.insert("question".into(), question.clone());
            if let Value::Object(extra) = extra {
                properties.extend(extra);
            }
            properties.insert("timeout_seconds".into(), wait.clone());
            let schema = json!({"type": "object", "properties": properties, "required": required});
            let schema = match schema {
                Value::Object(map) => Arc::new(map),
                _ => Arc::default(),
            };
            Tool::new(name.to_owned(), description.to_owned(), schema)
                .annotate(ToolAnnotations::new().read_only(true).open_world(false))
        };
        vec![
            tool(
                "ask",
                "Ask a person a question and wait for their written answer (they may decline, \
                 add a comment, or attach files).",
                json!({}),
                &["question"],
            ),
            tool(
                "confirm",
                "Ask a person to confirm or refuse something, such as an action with consequences; \
                 waits for their yes or no.",
                json!({}),
                &["question"],
            ),
            tool(
                "choose",
                "Ask a person to pick from options and wait for their choice.",
                json!({
                    "options": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "The options to pick from."},
                    "multiple": {"type": "boolean", "description": "Whether several may be picked (default false)."}
                }),
                &["question", "options"],
            ),
            tool(
                "approve_plan",
                "Show a person a plan (markdown) and wait for their decision: approve, ask for \
                 changes or reject (or options of your own, each with a description), with a \
                 reply in their words.",
                json!({
                    "plan": {"type": "string", "contentMediaType": "text/markdown", "description": "The plan, in markdown."},
                    "options": {"type": "array", "minItems": 1, "description": "The decisions to offer (default: Approve, Request changes, Reject).",
                        "items": {"type": "object", "properties": {"label": {"type": "string"}, "description": {"type": "string"}}, "required": ["label"]}},
                }),
                &["question", "plan"],
            ),
            tool(
                "request_file",
                "Ask a person for a screenshot or a file and wait for them to attach it (images \
                 come back as images, other files as embedded resources).",
                json!({"accept": {"type": "string", "description": "What kinds of files, as a file picker takes them (\"image/*\", \".pdf\")."}}),
                &["question"],
            ),
        ]
    }

    /// The form a tool call shows (every one also takes a comment and attachments), the
    /// question's text, and the field its answer is in.
    fn form(
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<(String, Value, &'static str), String> {
        let mut question = arguments
            .get("question")
            .and_then(Value::as_str)
            .filter(|q| !q.trim().is_empty())
            .ok_or("'question' must be a non-empty string")?
            .to_owned();
        let attachments = |required: bool, accept: Option<&str>| {
            let mut property = json!({"type": "array", "title": "Attachments",
                "items": {"type": "string", "format": "data-url", "maxLength": MAX_ATTACHMENT_CHARS},
                "maxItems": MAX_ATTACHMENTS});
            if required {
                property["minItems"] = json!(1);
            }
            if let Some(accept) = accept {
                property["accept"] = json!(accept);
            }
            property
        };
        let (field, property) = match tool {
            "ask" => ("answer", json!({"type": "string", "title": "Answer"})),
            "confirm" => (
                "confirmed",
                json!({"type": "boolean", "title": "Confirm", "default": false}),
            ),
            "choose" => {
                let options: Vec<String> = arguments
                    .get("options")
                    .and_then(Value::as_array)
                    .map(|options| {
                        options
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                if options.is_empty() {
                    return Err("'options' must be a non-empty list of strings".into());
                }
                match arguments
                    .get("multiple")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                {
                    true => (
                        "choices",
                        json!({"type": "array", "title": "Choices", "items": {"type": "string", "enum": options}, "minItems": 1}),
                    ),
                    false => (
                        "choice",
                        json!({"type": "string", "title": "Choice", "enum": options}),
                    ),
                }
            }
            "approve_plan" => {
                let plan = arguments
                    .get("plan")
                    .and_then(Value::as_str)
                    .filter(|plan| !plan.trim().is_empty())
                    .ok_or("'plan' must be a non-empty string")?;
                question = format!("{question}\n\n{plan}");
                let options = match arguments.get("options") {
                    None | Some(Value::Null) => vec![
                        json!({"const": "Approve", "title": "Approve", "description": "Go ahead as planned."}),
                        json!({"const": "Request changes", "title": "Request changes", "description": "Change the plan as the reply says, then ask again."}),
                        json!({"const": "Reject", "title": "Reject", "description": "Do not do this."}),
                    ],
                    Some(Value::Array(options)) if !options.is_empty() => options
                        .iter()
                        .map(|option| {
                            let label = option
                                .get("label")
                                .and_then(Value::as_str)
                                .or(option.as_str())
                                .filter(|label| !label.trim().is_empty())
                                .ok_or("each option needs a 'label'")?;
                            let description = option.get("description").and_then(Value::as_str);
                            Ok(json!({"const": label, "title": label, "description": description.unwrap_or("")}))
                        })
                        .collect::<Result<_, String>>()?,
                    _ => return Err("'options' must be a non-empty list".into()),
                };
                let schema = json!({"type": "object", "properties": {
                    "decision": {"type": "string", "title": "Decision", "oneOf": options},
                    "reply": {"type": "string", "title": "Reply", "description": "What to change, or anything else to say."},
                    "attachments": attachments(false, None),
                }, "required": ["decision"]});
                return Ok((question, schema, "decision"));
            }
            "request_file" => {
                let accept = arguments.get("accept").and_then(Value::as_str);
                let schema = json!({"type": "object", "properties": {
                    "attachments": attachments(true, accept),
                    "comment": {"type": "string", "title": "Comment"},
                }, "required": ["attachments"]});
                return Ok((question, schema, "attachments"));
            }
            other => return Err(format!("the human server has no tool '{other}'")),
        };
        let schema = json!({"type": "object", "properties": {
            field: property,
            "comment": {"type": "string", "title": "Comment", "description": "Anything to add (optional)."},
            "attachments": attachments(false, None),
        }, "required": [field]});
        Ok((question, schema, field))
    }

    /// The tool's result for the person's answer: the answer in words (with their comment or
    /// reply), attached images as images and other files as embedded resources, and the
    /// answer as structured content.
    fn result(field: &str, answer: Option<Answer>, waited: Duration) -> CallToolResult {
        let Some(answer) = answer else {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "Nobody answered within {} seconds.",
                waited.as_secs()
            ))]);
        };
        let content = answer.content.unwrap_or_default();
        let value = content.get(field).cloned();
        let (mut text, mut structured) = match (answer.action, value) {
            (Action::Accept, Some(value)) => {
                let text = match (&value, field) {
                    (Value::String(decision), "decision") => format!("Decision: {decision}"),
                    (Value::String(text), _) => text.clone(),
                    (Value::Bool(true), _) => "Yes, confirmed.".into(),
                    (Value::Bool(false), _) => "No, not confirmed.".into(),
                    (Value::Array(files), "attachments") => {
                        format!("The person attached {} file(s).", files.len())
                    }
                    (other, _) => other.to_string(),
                };
                (text, json!({"action": "accept", field: value}))
            }
            (Action::Decline, _) => (
                "The person declined to answer.".into(),
                json!({"action": "decline"}),
            ),
            _ => (
                "The person dismissed the question without answering.".into(),
                json!({"action": "cancel"}),
            ),
        };
        for (key, label) in [("reply", "Reply"), ("comment", "Comment")] {
            if let Some(words) = content
                .get(key)
                .and_then(Value::as_str)
                .filter(|w| !w.trim().is_empty())
            {
                text.push_str(&format!("\n{label}: {words}"));
                structured[key] = json!(words);
            }
        }
        let mut blocks = vec![ContentBlock::text(text)];
        let files: Vec<&str> = content
            .get("attachments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut described = Vec::new();
        for (index, file) in files.iter().enumerate() {
            let Some((mime, data)) = data_url(file) else {
                continue;
            };
            described.push(json!({"mimeType": mime, "bytes": data.len() / 4 * 3}));
            blocks.push(if mime.starts_with("image/") {
                ContentBlock::image(data, mime)
            } else {
                ContentBlock::resource(rmcp::model::ResourceContents::BlobResourceContents {
                    uri: format!("attachment://{}", index + 1),
                    mime_type: Some(mime.to_owned()),
                    blob: data.to_owned(),
                    meta: None,
                })
            });
        }
        if !described.is_empty() {
            structured["attachments"] = Value::Array(described);
        }
        let mut result = CallToolResult::success(blocks);
        result.structured_content = Some(structured);
        result
    }
}

/// The most files one answer may attach.
const MAX_ATTACHMENTS: u64 = 5;
/// The longest attachment, as a data URL: 2 MiB of file, base64 (four characters for three
/// bytes) with room for its header. Five of them fit in one WebSocket frame of the console's
/// answer (16 MiB).
const MAX_ATTACHMENT_CHARS: u64 = 2 * 1024 * 1024 / 3 * 4 + 256;

/// The media type and base64 data of a `data:<type>;base64,<data>` URL.
fn data_url(text: &str) -> Option<(&str, &str)> {
    let (head, data) = text.strip_prefix("data:")?.split_once(',')?;
    let mime = head.strip_suffix(";base64")?;
    Some((
        if mime.is_empty() {
            "application/octet-stream"
        } else {
            mime
        },
        data,
    ))
}

impl ServerHandler for HumanServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "switchboard-human",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Tools that ask a person at the Switchboard console and wait for the answer.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(Self::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let (question, schema, field) = Self::form(&request.name, &arguments)
            .map_err(|message| ErrorData::invalid_params(message, None))?;
        let wait = match arguments.get("timeout_seconds") {
            None | Some(Value::Null) => DEFAULT_WAIT,
            Some(value) => value
                .as_u64()
                .filter(|secs| (1..=LONGEST_WAIT.as_secs()).contains(secs))
                .map(Duration::from_secs)
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!(
                            "'timeout_seconds' must be a whole number from 1 to {}",
                            LONGEST_WAIT.as_secs()
                        ),
                        None,
                    )
                })?,
        };
        if !self.wait_always && !self.desk.attended() {
            return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text(NOBODY_THERE),
            ])));
        }
        let asking = Asking::Form {
            message: question,
            schema,
        };
        let asked = self
            .desk
            .ask(&self.server, Some(&request.name), asking, wait);
        let progress = progress_while_waiting(&context);
        let answer = tokio::select! {
            answer = asked => answer.ok(),
            never = progress => match never {},
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled", None));
            }
        };
        Ok(CallToolResponse::Complete(Self::result(
            field, answer, wait,
        )))
    }
}

/// Reports progress every [`PROGRESS_EVERY`] while the caller waits, if it asked for progress;
/// never ends.
async fn progress_while_waiting(context: &RequestContext<RoleServer>) -> std::convert::Infallible {
    let Some(token) = context.meta.get_progress_token() else {
        return std::future::pending().await;
    };
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    ticks.tick().await;
    let mut waited = 0u32;
    loop {
        ticks.tick().await;
        waited = waited.saturating_add(1);
        let mut report = ProgressNotificationParam::new(token.clone(), f64::from(waited));
        report.message = Some("waiting for a person to answer".into());
        let _ = context.peer.notify_progress(report).await;
    }
}

impl BuiltinServers for Desk {
    fn open(
        &self,
        server: &ServerId,
        name: &str,
        wait_always: bool,
    ) -> Result<tokio::io::DuplexStream, String> {
        if name != "human" {
            return Err(format!("there is no built-in server '{name}'"));
        }
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let handler = HumanServer::new(self.clone(), server.as_str(), wait_always);
        tokio::spawn(async move {
            let (read, write) = tokio::io::split(theirs);
            match handler.serve((read, write)).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(error) => tracing::debug!("the human server did not start: {error}"),
            }
        });
        Ok(ours)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn each_tool_asks_with_a_form_of_its_own() {
        let (_, schema, field) = HumanServer::form(
            "choose",
            &arguments(json!({"question": "Which?", "options": ["a", "b"]})),
        )
        .unwrap();
        assert_eq!(field, "choice");
        assert_eq!(schema["properties"]["choice"]["enum"], json!(["a", "b"]));
        let (_, schema, field) = HumanServer::form(
            "choose",
            &arguments(json!({"question": "Which?", "options": ["a"], "multiple": true})),
        )
        .unwrap();
        assert_eq!(
            (field, &schema["properties"]["choices"]["type"]),
            ("choices", &json!("array"))
        );
        assert!(
            HumanServer::form(
                "choose",
                &arguments(json!({"question": "Which?", "options": []}))
            )
            .is_err()
        );
        assert!(HumanServer::form("ask", &arguments(json!({"question": " "}))).is_err());
        assert_eq!(
            HumanServer::form("confirm", &arguments(json!({"question": "Go?"})))
                .unwrap()
                .2,
            "confirmed"
        );
    }

    /// A client that hands on the progress reports it gets.
    struct Listening(tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>);

    impl rmcp::ClientHandler for Listening {
        async fn on_progress(
            &self,
            params: ProgressNotificationParam,
            _context: rmcp::service::NotificationContext<rmcp::service::RoleClient>,
        ) {
            let _ = self.0.send(params);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_call_reports_progress_until_nobody_answers_in_time() {
        use rmcp::model::{CallToolRequest, ClientRequest, ProgressToken, RequestMetaObject};
        let desk = Desk::new();
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let server = HumanServer::new(desk.clone(), "human", true);
        tokio::spawn(async move {
            if let Ok(running) = server.serve(tokio::io::split(theirs)).await {
                let _ = running.waiting().await;
            }
        });
        let (reports, mut reported) = tokio::sync::mpsc::unbounded_channel();
        let client = Listening(reports)
            .serve(tokio::io::split(ours))
            .await
            .unwrap();
        let mut params = CallToolRequestParams::new("ask");
        params.arguments = Some(arguments(
            json!({"question": "Anyone?", "timeout_seconds": 40}),
        ));
        let mut meta = RequestMetaObject::new();
        meta.set_progress_token(ProgressToken(rmcp::model::NumberOrString::Number(7)));
        let options = rmcp::service::PeerRequestOptions::no_options().with_meta(meta);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = client
            .peer()
            .send_request_with_option(request, options)
            .await
            .unwrap();
        let answer = handle.await_response().await.unwrap();
        let result = match answer {
            rmcp::model::ServerResult::CallToolResult(result) => result,
            other => panic!("not a tool result: {other:?}"),
        };
        assert_eq!(result.is_error, Some(true), "nobody answered within 40 s");
        let mut progress = Vec::new();
        while let Ok(report) = reported.try_recv() {
            assert_eq!(
                report.message.as_deref(),
                Some("waiting for a person to answer")
            );
            progress.push(report.progress);
        }
        assert_eq!(progress, [1.0, 2.0], "at 15 s and 30 s");
    }

    /// Calls `confirm` on a fresh human server at `desk`; its result.
    async fn confirm(desk: &Desk, wait_always: bool) -> CallToolResult {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let server = HumanServer::new(desk.clone(), "human", wait_always);
        tokio::spawn(async move {
            if let Ok(running) = server.serve(tokio::io::split(theirs)).await {
                let _ = running.waiting().await;
            }
        });
        let client = ().serve(tokio::io::split(ours)).await.unwrap();
        let mut params = CallToolRequestParams::new("confirm");
        params.arguments = Some(arguments(
            json!({"question": "Deploy?", "timeout_seconds": 60}),
        ));
        client.peer().call_tool(params).await.unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_console_open_a_question_is_answered_at_once_unless_the_server_waits() {
        let desk = Desk::new();
        let result = confirm(&desk, false).await;
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.content[0].as_text().unwrap().text, NOBODY_THERE);
        assert!(desk.pending().is_empty(), "nothing was put on the desk");

        // Configured to wait, it waits (and times out) though no console is there.
        let result = confirm(&desk, true).await;
        assert!(
            result.content[0]
                .as_text()
                .unwrap()
                .text
                .contains("Nobody answered within 60 seconds"),
            "{result:?}"
        );

        // With a console there, the question waits for it and is answered.
        let _console = desk.attend();
        let answering = {
            let desk = desk.clone();
            tokio::spawn(async move {
                loop {
                    if let Some(question) = desk.pending().first() {
                        let answer = Answer {
                            action: Action::Accept,
                            content: Some(json!({"confirmed": true})),
                        };
                        desk.answer(&question.id, answer).unwrap();
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        let result = confirm(&desk, false).await;
        answering.await.unwrap();
        assert_eq!(result.is_error, Some(false), "{result:?}");
        assert_eq!(
            result.structured_content,
            Some(json!({"action": "accept", "confirmed": true}))
        );
    }

    /// A plan to approve shows the plan under the question and offers decisions with their
    /// descriptions; the answer comes back with the reply, the comment and the attached files
    /// (an image as an image, anything else as an embedded resource).
    #[test]
    fn a_plan_is_decided_with_a_reply_and_files_come_back_as_content() {
        let (question, schema, field) = HumanServer::form(
            "approve_plan",
            &arguments(json!({"question": "Ship it?", "plan": "1. **Build**\n2. Deploy"})),
        )
        .unwrap();
        assert_eq!(question, "Ship it?\n\n1. **Build**\n2. Deploy");
        assert_eq!(field, "decision");
        let decisions = schema["properties"]["decision"]["oneOf"]
            .as_array()
            .unwrap();
        assert_eq!(decisions.len(), 3);
        assert_eq!(decisions[1]["const"], "Request changes");
        assert!(
            decisions[1]["description"]
                .as_str()
                .unwrap()
                .contains("reply")
        );
        let answer = json!({"decision": "Request changes", "reply": "Deploy on Monday",
            "attachments": ["data:image/png;base64,iVBORw0KGgo=", "data:text/csv;base64,YSxiCg=="]});
        crate::form::check_form(&schema, Some(&answer)).unwrap();
        let result = HumanServer::result(
            field,
            Some(Answer {
                action: Action::Accept,
                content: Some(answer),
            }),
            DEFAULT_WAIT,
        );
        assert_eq!(
            result.content[0].as_text().unwrap().text,
            "Decision: Request changes\nReply: Deploy on Monday"
        );
        assert!(
            matches!(&result.content[1], ContentBlock::Image(image) if image.mime_type == "image/png")
        );
        assert!(matches!(&result.content[2], ContentBlock::Resource(_)));
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["attachments"][1]["mimeType"], "text/csv");

        let (_, schema, field) = HumanServer::form(
            "request_file",
            &arguments(json!({"question": "A screenshot?", "accept": "image/*"})),
        )
        .unwrap();
        assert_eq!(field, "attachments");
        assert_eq!(schema["properties"]["attachments"]["accept"], "image/*");
        assert!(crate::form::check_form(&schema, Some(&json!({"attachments": []}))).is_err());
        assert!(
            crate::form::check_form(&schema, Some(&json!({"attachments": ["not a file"]})))
                .unwrap_err()
                .contains("data: URL")
        );
        let (_, schema, _) =
            HumanServer::form("confirm", &arguments(json!({"question": "Go?"}))).unwrap();
        let answer = json!({"confirmed": false, "comment": "Not before the review"});
        crate::form::check_form(&schema, Some(&answer)).unwrap();
        let result = HumanServer::result(
            "confirmed",
            Some(Answer {
                action: Action::Accept,
                content: Some(answer),
            }),
            DEFAULT_WAIT,
        );
        assert_eq!(
            result.content[0].as_text().unwrap().text,
            "No, not confirmed.\nComment: Not before the review"
        );
    }

    #[test]
    fn a_result_says_what_the_person_did() {
        let accepted = Answer {
            action: Action::Accept,
            content: Some(json!({"confirmed": true})),
        };
        let result = HumanServer::result("confirmed", Some(accepted), DEFAULT_WAIT);
        assert_eq!(
            result.structured_content,
            Some(json!({"action": "accept", "confirmed": true}))
        );
        assert_eq!(result.is_error, Some(false));
        let declined = Answer {
            action: Action::Decline,
            content: None,
        };
        let result = HumanServer::result("answer", Some(declined), DEFAULT_WAIT);
        assert_eq!(
            result.structured_content,
            Some(json!({"action": "decline"}))
        );
        let result = HumanServer::result("answer", None, Duration::from_secs(7));
        assert_eq!(result.is_error, Some(true));
    }
}
