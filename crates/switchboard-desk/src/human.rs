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
                "Ask a person a question and wait for their written answer (they may decline).",
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
        ]
    }

    /// The form a tool call shows, and the field its answer is in.
    fn form(
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<(String, Value, &'static str), String> {
        let question = arguments
            .get("question")
            .and_then(Value::as_str)
            .filter(|q| !q.trim().is_empty())
            .ok_or("'question' must be a non-empty string")?
            .to_owned();
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
            other => return Err(format!("the human server has no tool '{other}'")),
        };
        let schema =
            json!({"type": "object", "properties": {field: property}, "required": [field]});
        Ok((question, schema, field))
    }

    /// The tool's result for the person's answer.
    fn result(field: &str, answer: Option<Answer>, waited: Duration) -> CallToolResult {
        let Some(answer) = answer else {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "Nobody answered within {} seconds.",
                waited.as_secs()
            ))]);
        };
        let value = answer.content.as_ref().and_then(|c| c.get(field)).cloned();
        let (text, structured) = match (answer.action, value) {
            (Action::Accept, Some(value)) => {
                let text = match &value {
                    Value::String(text) => text.clone(),
                    Value::Bool(true) => "Yes, confirmed.".into(),
                    Value::Bool(false) => "No, not confirmed.".into(),
                    other => other.to_string(),
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
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(structured);
        result
    }
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
