//! Guardrails: what is checked and rewritten on a tool call's way through Switchboard, before
//! its server gets the arguments and before its client gets the result. Built in: masking
//! secrets and personal data ([`crate::redact`]'s pattern sets). External: a webhook asked
//! before and after each call, which may allow it, refuse it or rewrite what passes, with a
//! timeout and a choice of what a webhook that does not answer means (refuse, or let through).
//!
//! A server's guardrails are part of its tool policies; this module says what they are, checks
//! them, and reads a webhook's verdict. The hub runs them.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::redact::PatternSet;

/// How long a webhook may take when its server's guardrails name no timeout.
pub const DEFAULT_WEBHOOK_TIMEOUT_MS: u64 = 2_000;

/// The longest a webhook may be given.
pub const MAX_WEBHOOK_TIMEOUT_MS: u64 = 30_000;

/// The most bytes a webhook's answer may have.
pub const MAX_VERDICT_BYTES: usize = 1024 * 1024;

/// A server's guardrails.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guardrails {
    /// Pattern sets masked in a call's arguments before the server gets them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub redact_arguments: BTreeSet<PatternSet>,
    /// Pattern sets masked in a call's result before the client gets it.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub redact_results: BTreeSet<PatternSet>,
    /// An external check asked before and after each call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
}

/// An external check of each call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Where it is asked (`POST`, JSON), an http(s) URL.
    pub url: String,
    /// How long it may take, in ms ([`DEFAULT_WEBHOOK_TIMEOUT_MS`] when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What a webhook that fails (no answer in time, an error, an answer that does not read)
    /// means for the call.
    #[serde(default)]
    pub on_failure: OnFailure,
}

impl Webhook {
    /// How long it may take.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms.unwrap_or(DEFAULT_WEBHOOK_TIMEOUT_MS))
    }
}

/// What a failed webhook means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The call is refused (fail closed).
    #[default]
    Refuse,
    /// The call goes on as if the webhook had allowed it (fail open).
    Allow,
}

/// Why guardrails cannot be kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardrailError {
    /// The webhook's URL is not an http(s) URL.
    #[error("the guardrail webhook's URL must be an http(s) URL without credentials: {0}")]
    Url(String),
    /// The timeout is out of range.
    #[error("the guardrail webhook's timeout is 1 to {MAX_WEBHOOK_TIMEOUT_MS} ms")]
    Timeout,
}

impl Guardrails {
    /// Whether there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.redact_arguments.is_empty() && self.redact_results.is_empty() && self.webhook.is_none()
    }

    /// Checks what a person set: an http(s) webhook URL without credentials, a timeout in
    /// range.
    pub fn check(&self) -> Result<(), GuardrailError> {
        let Some(webhook) = &self.webhook else {
            return Ok(());
        };
        let url = url::Url::parse(&webhook.url)
            .map_err(|error| GuardrailError::Url(error.to_string()))?;
        if !matches!(url.scheme(), "http" | "https")
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err(GuardrailError::Url(webhook.url.clone()));
        }
        if webhook
            .timeout_ms
            .is_some_and(|ms| ms == 0 || ms > MAX_WEBHOOK_TIMEOUT_MS)
        {
            return Err(GuardrailError::Timeout);
        }
        Ok(())
    }
}

/// When a webhook is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before the server gets the arguments.
    Before,
    /// Before the client gets the result.
    After,
}

/// What a webhook answers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Verdict {
    /// Allow, refuse or rewrite.
    pub action: Action,
    /// Why (said to the client when it refuses).
    #[serde(default)]
    pub reason: Option<String>,
    /// The arguments to send instead (`before`, with `rewrite`).
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    /// The result to give instead (`after`, with `rewrite`): a `CallToolResult`.
    #[serde(default)]
    pub result: Option<Value>,
}

/// A webhook's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Let it pass as it is.
    Allow,
    /// Refuse the call (before), or withhold the result (after).
    Refuse,
    /// Pass what the verdict gives instead.
    Rewrite,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn guardrails_read_from_json_and_bad_ones_are_refused() {
        let guardrails: Guardrails = serde_json::from_value(json!({
            "redact_arguments": ["secrets"],
            "redact_results": ["secrets", "personal"],
            "webhook": {"url": "https://policy.example/check", "timeout_ms": 500, "on_failure": "allow"},
        }))
        .unwrap();
        assert!(!guardrails.is_empty());
        assert_eq!(guardrails.check(), Ok(()));
        assert_eq!(
            guardrails.webhook.as_ref().unwrap().timeout(),
            std::time::Duration::from_millis(500)
        );
        assert!(Guardrails::default().is_empty());
        for (url, timeout) in [
            ("file:///etc/passwd", None),
            ("https://user:pw@policy.example/", None),
            ("not a url", None),
            ("https://policy.example/", Some(0)),
            ("https://policy.example/", Some(MAX_WEBHOOK_TIMEOUT_MS + 1)),
        ] {
            let bad = Guardrails {
                webhook: Some(Webhook {
                    url: url.into(),
                    timeout_ms: timeout,
                    on_failure: OnFailure::Refuse,
                }),
                ..Default::default()
            };
            assert!(bad.check().is_err(), "{url} {timeout:?}");
        }
        assert!(serde_json::from_value::<Guardrails>(json!({"redact": ["secrets"]})).is_err());
        assert!(
            serde_json::from_value::<Guardrails>(json!({"redact_results": ["everything"]}))
                .is_err()
        );
    }

    #[test]
    fn a_verdict_reads_each_action() {
        let verdict: Verdict = serde_json::from_value(json!({
            "action": "rewrite", "arguments": {"q": "safe"}
        }))
        .unwrap();
        assert_eq!(verdict.action, Action::Rewrite);
        assert_eq!(verdict.arguments.unwrap()["q"], "safe");
        assert!(serde_json::from_value::<Verdict>(json!({"action": "maybe"})).is_err());
    }
}
