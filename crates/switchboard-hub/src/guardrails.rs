//! Runs a server's guardrails ([`switchboard_core::guardrails`]) on the calls MCP clients make:
//! before the server gets the arguments (masking, then the webhook's `before`), and before the
//! client gets the result (the webhook's `after`, then masking). A server with none costs a
//! call nothing: the front door asks [`Hub::guardrails`] once and skips the rest.
//!
//! The webhook is sent `{"phase", "tenant", "actor", "server", "tool", "called_as",
//! "arguments", "result"?}` as JSON and answers a [`Verdict`]: `allow`, `refuse` (with a
//! `reason` the client is told) or `rewrite` (with the `arguments` or `result` to pass
//! instead). It is reached through the hub's HTTP pools, so a user's workspace reaches only
//! what its servers may. One that does not answer in time, fails, or answers what does not read
//! refuses the call, or lets it through when its `on_failure` is `allow`.

use serde_json::{Map, Value, json};
use switchboard_core::ServerId;
use switchboard_core::guardrails::{
    Action, Guardrails, MAX_VERDICT_BYTES, OnFailure, Phase, Verdict, Webhook,
};
use switchboard_core::redact::redact_with;
use switchboard_upstream::rmcp_model::CallToolResult;

use crate::Hub;

/// Why a guardrail stopped a call or its result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardrailRefusal {
    /// The webhook refused.
    #[error("a guardrail refused this call of tool '{tool}': {reason}")]
    Refused {
        /// The tool, as the client called it.
        tool: String,
        /// The webhook's reason.
        reason: String,
    },
    /// The webhook failed, and its server's guardrails refuse calls then.
    #[error("the guardrail webhook of tool '{tool}' failed, so the call is refused: {reason}")]
    Failed {
        /// The tool, as the client called it.
        tool: String,
        /// What went wrong.
        reason: String,
    },
}

impl GuardrailRefusal {
    /// `refused` or `failed`, for errors' data.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Refused { .. } => "refused",
            Self::Failed { .. } => "failed",
        }
    }
}

/// One call, as the webhook is told of it.
#[derive(Debug, Clone, Copy)]
pub struct GuardedCall<'a> {
    /// The server.
    pub server: &'a ServerId,
    /// The tool, by its name at the server.
    pub tool: &'a str,
    /// The name the client called it by.
    pub exposed: &'a str,
}

impl Hub {
    /// Server `id`'s guardrails, when it has any.
    pub fn guardrails(&self, id: &ServerId) -> Option<Guardrails> {
        let guardrails = &self.slot(id).ok()?.definition().policies.guardrails;
        (!guardrails.is_empty()).then(|| guardrails.clone())
    }

    /// `arguments` as the server is to get them: masked, then as the webhook says; or why
    /// the call is refused.
    pub async fn guard_arguments(
        &self,
        guardrails: &Guardrails,
        call: GuardedCall<'_>,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Option<Map<String, Value>>, GuardrailRefusal> {
        let mut arguments = arguments;
        if !guardrails.redact_arguments.is_empty()
            && let Some(given) = arguments.take()
        {
            arguments = match redact_with(&Value::Object(given), &guardrails.redact_arguments) {
                Value::Object(masked) => Some(masked),
                _ => None,
            };
        }
        let Some(webhook) = &guardrails.webhook else {
            return Ok(arguments);
        };
        let body = self.webhook_body(Phase::Before, call, arguments.as_ref(), None);
        match self.verdict(webhook, call, &body).await? {
            Some(Verdict {
                action: Action::Refuse,
                reason,
                ..
            }) => Err(GuardrailRefusal::Refused {
                tool: call.exposed.to_owned(),
                reason: reason.unwrap_or_else(|| "no reason given".to_owned()),
            }),
            Some(Verdict {
                action: Action::Rewrite,
                arguments: Some(rewritten),
                ..
            }) => Ok(Some(rewritten)),
            _ => Ok(arguments),
        }
    }

    /// `result` as the client is to get it: as the webhook says, then masked. A result the
    /// webhook refuses is withheld: the client gets an error result saying why.
    pub async fn guard_result(
        &self,
        guardrails: &Guardrails,
        call: GuardedCall<'_>,
        arguments: Option<&Map<String, Value>>,
        result: CallToolResult,
    ) -> CallToolResult {
        let mut result = result;
        if let Some(webhook) = &guardrails.webhook {
            let shown = serde_json::to_value(&result).unwrap_or(Value::Null);
            let body = self.webhook_body(Phase::After, call, arguments, Some(shown));
            match self.verdict(webhook, call, &body).await {
                Ok(Some(Verdict {
                    action: Action::Refuse,
                    reason,
                    ..
                })) => {
                    return withheld(&GuardrailRefusal::Refused {
                        tool: call.exposed.to_owned(),
                        reason: reason.unwrap_or_else(|| "no reason given".to_owned()),
                    });
                }
                Ok(Some(Verdict {
                    action: Action::Rewrite,
                    result: Some(rewritten),
                    ..
                })) => match serde_json::from_value::<CallToolResult>(rewritten) {
                    Ok(rewritten) => result = rewritten,
                    Err(error) => {
                        return withheld(&GuardrailRefusal::Failed {
                            tool: call.exposed.to_owned(),
                            reason: format!("its rewritten result is no tool result: {error}"),
                        });
                    }
                },
                Ok(_) => {}
                Err(refusal) => return withheld(&refusal),
            }
        }
        if guardrails.redact_results.is_empty() {
            return result;
        }
        mask_result(result, guardrails)
    }

    fn webhook_body(
        &self,
        phase: Phase,
        call: GuardedCall<'_>,
        arguments: Option<&Map<String, Value>>,
        result: Option<Value>,
    ) -> Value {
        let (tenant, actor) = crate::audit::actor_of(self.store.workspace());
        let mut body = json!({
            "phase": phase,
            "tenant": tenant,
            "actor": actor,
            "server": call.server,
            "tool": call.tool,
            "called_as": call.exposed,
            "arguments": arguments.cloned().unwrap_or_default(),
        });
        if let Some(result) = result {
            body["result"] = result;
        }
        body
    }

    /// The webhook's verdict on `body`; `None` when it failed and failures let calls through.
    async fn verdict(
        &self,
        webhook: &Webhook,
        call: GuardedCall<'_>,
        body: &Value,
    ) -> Result<Option<Verdict>, GuardrailRefusal> {
        match tokio::time::timeout(webhook.timeout(), self.ask(webhook, body)).await {
            Ok(Ok(verdict)) => Ok(Some(verdict)),
            failed => {
                let reason = match failed {
                    Ok(Err(reason)) => reason,
                    _ => format!("no answer within {} ms", webhook.timeout().as_millis()),
                };
                tracing::warn!(server = %call.server, tool = call.tool, "a guardrail webhook failed: {reason}");
                match webhook.on_failure {
                    OnFailure::Allow => Ok(None),
                    OnFailure::Refuse => Err(GuardrailRefusal::Failed {
                        tool: call.exposed.to_owned(),
                        reason,
                    }),
                }
            }
        }
    }

    async fn ask(&self, webhook: &Webhook, body: &Value) -> Result<Verdict, String> {
        let request = self
            .http()
            .reqwest()
            .post(&webhook.url)
            .json(body)
            .build()
            .map_err(|error| format!("cannot ask it: {error}"))?;
        let mut response = self
            .http()
            .execute(request, &self.webhook_connections)
            .await
            .map_err(|error| error.to_string())?;
        if !response.status().is_success() {
            return Err(format!("it answered HTTP {}", response.status()));
        }
        let mut read = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| format!("its answer broke off: {error}"))?
        {
            if read.len() + chunk.len() > MAX_VERDICT_BYTES {
                return Err(format!("its answer is over {MAX_VERDICT_BYTES} bytes"));
            }
            read.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&read).map_err(|error| format!("its answer is no verdict: {error}"))
    }
}

/// The error result a client gets for a result a guardrail withheld.
fn withheld(refusal: &GuardrailRefusal) -> CallToolResult {
    CallToolResult::error(vec![switchboard_upstream::rmcp_model::ContentBlock::text(
        format!("The result was withheld: {refusal}"),
    )])
}

/// `result` with `guardrails`' result patterns masked in its text, its embedded resources'
/// text and its structured content (binary data is left as it is).
fn mask_result(result: CallToolResult, guardrails: &Guardrails) -> CallToolResult {
    let sets = &guardrails.redact_results;
    let Ok(mut value) = serde_json::to_value(&result) else {
        return result;
    };
    if let Some(blocks) = value.get_mut("content").and_then(Value::as_array_mut) {
        for block in blocks {
            if let Some(text) = block.get_mut("text") {
                *text = redact_with(text, sets);
            }
            if let Some(text) = block.get_mut("resource").and_then(|r| r.get_mut("text")) {
                *text = redact_with(text, sets);
            }
        }
    }
    if let Some(structured) = value.get_mut("structuredContent") {
        *structured = redact_with(structured, sets);
    }
    serde_json::from_value(value).unwrap_or(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_core::redact::PatternSet;

    #[test]
    fn a_results_text_and_structured_content_are_masked_and_its_images_are_not() {
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "token ghp_0123456789abcdefghij0123456789abcdef for ada@example.org"},
                {"type": "image", "data": "AAAA4111111111111111", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "password is in AKIAIOSFODNN7EXAMPLE"}},
            ],
            "structuredContent": {"api_key": "abc", "owner": "ada@example.org"},
        }))
        .unwrap();
        let guardrails = Guardrails {
            redact_results: [PatternSet::Secrets].into(),
            ..Default::default()
        };
        let masked = serde_json::to_value(mask_result(result, &guardrails)).unwrap();
        assert_eq!(
            masked["content"][0]["text"], "token [redacted:github_token] for ada@example.org",
            "only the sets asked for"
        );
        assert_eq!(masked["content"][1]["data"], "AAAA4111111111111111");
        assert_eq!(
            masked["content"][2]["resource"]["text"],
            "password is in [redacted:aws_key]"
        );
        assert_eq!(masked["structuredContent"]["api_key"], "[redacted:secret]");
        assert_eq!(masked["structuredContent"]["owner"], "ada@example.org");
    }
}
