//! An upstream server's requests for input, put to a person when no client can answer them.

use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{ErrorCode, ErrorData, InputRequest};
use serde_json::{Value, json};
use switchboard_upstream::{InputPolicy, InputResponder};

use crate::{Action, Asking, Desk};

/// How long a server's question waits for a person before it is answered `cancel` (an
/// elicitation) or refused (a sampling request).
pub const QUESTION_TIMEOUT: Duration = Duration::from_secs(120);

/// Answers one server's elicitation and sampling requests through the [`Desk`] while a console
/// is there to answer, and everything else (roots, and every request while nobody is there) by
/// the input policy, at once: a question nobody can see would only hold the server up. As a
/// connection's fallback it also takes the requests of calls whose client cannot answer them (a
/// client without elicitation, say): see [`InputResponder::takes`].
pub struct PeopleResponder {
    desk: Desk,
    server: String,
    otherwise: InputPolicy,
}

impl PeopleResponder {
    /// Asks for `server` at `desk`, falling back to `otherwise`.
    pub fn new(desk: Desk, server: impl Into<String>, otherwise: InputPolicy) -> Self {
        Self {
            desk,
            server: server.into(),
            otherwise,
        }
    }
}

impl InputResponder for PeopleResponder {
    /// A person is asked elicitation and sampling requests while a console is there.
    fn takes(&self, request: &InputRequest) -> bool {
        self.desk.attended()
            && matches!(
                request,
                InputRequest::Elicitation(_) | InputRequest::CreateMessage(_)
            )
    }

    fn answer(
        &self,
        key: Option<&str>,
        request: InputRequest,
    ) -> BoxFuture<'static, Result<Value, ErrorData>> {
        let asking = match &request {
            _ if !self.desk.attended() => None,
            InputRequest::Elicitation(elicit) => elicitation(&elicit.params),
            InputRequest::CreateMessage(sample) => sampling(&sample.params),
            _ => None,
        };
        let Some(asking) = asking else {
            return InputResponder::answer(&self.otherwise, key, request);
        };
        let (desk, server) = (self.desk.clone(), self.server.clone());
        Box::pin(async move {
            let is_sampling = matches!(asking, Asking::Sampling { .. });
            let answer = desk.ask(&server, None, asking, QUESTION_TIMEOUT).await;
            match (is_sampling, answer) {
                (false, Ok(answer)) => Ok(match answer.content {
                    Some(content) => json!({"action": answer.action, "content": content}),
                    None => json!({"action": answer.action}),
                }),
                (false, Err(_)) => Ok(json!({"action": "cancel"})),
                (true, Ok(answer)) if answer.action == Action::Accept => {
                    let text = answer.content.as_ref().and_then(|c| c.get("text")).cloned();
                    Ok(json!({
                        "role": "assistant",
                        "content": {"type": "text", "text": text.unwrap_or_default()},
                        "model": "person",
                        "stopReason": "endTurn",
                    }))
                }
                (true, Ok(_)) => Err(refused("the person declined the sampling request")),
                (true, Err(timed_out)) => Err(refused(&format!(
                    "nobody wrote the sampling reply: {timed_out}"
                ))),
            }
        })
    }
}

/// The MCP code clients use when their user rejects a sampling request.
fn refused(message: &str) -> ErrorData {
    ErrorData::new(ErrorCode(-1), message.to_owned(), None)
}

/// An elicitation as a desk question.
fn elicitation(params: &impl serde::Serialize) -> Option<Asking> {
    let params = serde_json::to_value(params).ok()?;
    let message = params.get("message")?.as_str()?.to_owned();
    match params.get("mode").and_then(Value::as_str) {
        // Only a web page is put before a person; any other URL is answered by the policy.
        Some("url") => {
            let url = params.get("url")?.as_str()?;
            let scheme = url.split_once("://")?.0.to_ascii_lowercase();
            matches!(scheme.as_str(), "http" | "https").then(|| Asking::Url {
                message,
                url: url.to_owned(),
            })
        }
        _ => Some(Asking::Form {
            message,
            schema: params.get("requestedSchema")?.clone(),
        }),
    }
}

/// A sampling request as a desk question.
fn sampling(params: &impl serde::Serialize) -> Option<Asking> {
    let params = serde_json::to_value(params).ok()?;
    Some(Asking::Sampling {
        messages: params.get("messages")?.clone(),
        system_prompt: params
            .get("systemPrompt")
            .and_then(Value::as_str)
            .map(str::to_owned),
        max_tokens: params.get("maxTokens").and_then(Value::as_u64).unwrap_or(0),
    })
}
