//! Per-tool policies a user sets on a server: which tools the deferred view always lists
//! (pinned), and who may call a tool (`allowed_callers`).
//!
//! Programmatic tool calling lets code a model wrote call tools in a loop, and agents call tools
//! for each other; a tool that sends money or deletes data may be meant for the model's own,
//! visible calls only. A call says who makes it (`direct`, `code_execution`, `agent:<name>`);
//! a tool with allowed callers refuses everyone else. The caller is what the app declares
//! (`_meta` of the call, or a header): it tells apart an app's own paths, it does not
//! authenticate anyone.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Who makes a tool call.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Caller {
    /// The model itself, a call it chose and the app shows (the default).
    #[default]
    Direct,
    /// Code a model wrote, run in a sandbox (programmatic tool calling).
    CodeExecution,
    /// A named agent.
    Agent(String),
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Direct => f.write_str("direct"),
            Self::CodeExecution => f.write_str("code_execution"),
            Self::Agent(name) => write!(f, "agent:{name}"),
        }
    }
}

impl FromStr for Caller {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "direct" => Ok(Self::Direct),
            "code_execution" => Ok(Self::CodeExecution),
            other => match other.strip_prefix("agent:") {
                Some(name)
                    if !name.is_empty()
                        && name.len() <= 128
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
                {
                    Ok(Self::Agent(name.to_owned()))
                }
                _ => Err(format!(
                    "'{other}' is not a caller: direct, code_execution or agent:<name> (letters, \
                     digits, '-', '_', '.')"
                )),
            },
        }
    }
}

impl Serialize for Caller {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Caller {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A server's per-tool policies, by upstream tool name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolPolicies {
    /// Tools the deferred view lists from the start, beside `search_tools` and `call_tool`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub pinned: BTreeSet<String>,
    /// Who may call a tool; a tool not listed may be called by anyone.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allowed_callers: BTreeMap<String, BTreeSet<Caller>>,
    /// The rate limit of calls to any of the server's tools together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_rate_limit: Option<crate::RateLimit>,
    /// The rate limit of calls to one tool; a tool not listed has none of its own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rate_limits: BTreeMap<String, crate::RateLimit>,
    /// How requests that are safe to repeat are retried after a transient failure.
    #[serde(default, skip_serializing_if = "is_default_retries")]
    pub retries: crate::RetryPreset,
    /// Tools whose calls may be sent again after a transient failure although the server
    /// annotates them neither `readOnlyHint` nor `idempotentHint`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub safe_to_retry: BTreeSet<String>,
    /// What an admin says of a tool in place of its server (name, description, annotations,
    /// fixed arguments); a tool not listed is as its server says.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, crate::ToolOverride>,
    /// Tools whose every call from an MCP client waits for a person's approval.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub approval: BTreeSet<String>,
    /// What an operator wrote for search about a tool: aliases, the words its users say,
    /// example requests. They join the tool's indexed text (words and meaning) and are never
    /// shown to clients.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub search_notes: BTreeMap<String, String>,
    /// Whether every tool annotated `destructiveHint: true` (by its server or an override)
    /// waits for approval too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approve_destructive: bool,
    /// How long a call waits for approval before it is refused, in seconds (default
    /// [`DEFAULT_APPROVAL_WAIT_SECS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout_secs: Option<u64>,
    /// What happens when a tool's definition is not the one approved (first seen, or accepted
    /// by an admin): warned of, held back from clients, or not looked for.
    #[serde(default, skip_serializing_if = "is_default_definition_changes")]
    pub definition_changes: crate::definitions::DefinitionChanges,
    /// What is checked and rewritten on each call's way (masking, a webhook).
    #[serde(
        default,
        skip_serializing_if = "crate::guardrails::Guardrails::is_empty"
    )]
    pub guardrails: crate::guardrails::Guardrails,
}

fn is_default_definition_changes(setting: &crate::definitions::DefinitionChanges) -> bool {
    *setting == crate::definitions::DefinitionChanges::default()
}

/// How long a call waits for a person's approval unless the server says otherwise: 5 minutes.
pub const DEFAULT_APPROVAL_WAIT_SECS: u64 = 300;

/// The longest approval wait a server may set: a day.
pub const MAX_APPROVAL_WAIT_SECS: u64 = 86_400;

fn is_default_retries(preset: &crate::RetryPreset) -> bool {
    *preset == crate::RetryPreset::default()
}

/// Why a call is refused by a tool's policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool '{tool}' may not be called by {caller}; it allows {}",
    allowed.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
)]
pub struct CallerRefused {
    /// The tool (as its server names it).
    pub tool: String,
    /// Who asked.
    pub caller: Caller,
    /// Who may.
    pub allowed: BTreeSet<Caller>,
}

impl ToolPolicies {
    /// How long a call of `tool` waits for a person's approval, if it needs one: the tool is
    /// listed, or it is `destructive` (as annotated) and the server approves those.
    pub fn approval_wait(&self, tool: &str, destructive: bool) -> Option<std::time::Duration> {
        (self.approval.contains(tool) || (destructive && self.approve_destructive)).then(|| {
            std::time::Duration::from_secs(
                self.approval_timeout_secs
                    .unwrap_or(DEFAULT_APPROVAL_WAIT_SECS)
                    .clamp(1, MAX_APPROVAL_WAIT_SECS),
            )
        })
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        // Every field's default, so that a policy added later is never left out of the JSON.
        *self == Self::default()
    }

    /// Whether `caller` may call `tool`.
    pub fn check_caller(&self, tool: &str, caller: &Caller) -> Result<(), CallerRefused> {
        match self.allowed_callers.get(tool) {
            Some(allowed) if !allowed.contains(caller) => Err(CallerRefused {
                tool: tool.to_owned(),
                caller: caller.clone(),
                allowed: allowed.clone(),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn every_policy_set_is_in_a_servers_json() {
        let set = [
            ToolPolicies {
                definition_changes: crate::definitions::DefinitionChanges::Hold,
                ..Default::default()
            },
            ToolPolicies {
                approve_destructive: true,
                ..Default::default()
            },
            ToolPolicies {
                guardrails: serde_json::from_value(
                    serde_json::json!({"redact_arguments": ["secrets"]}),
                )
                .unwrap(),
                ..Default::default()
            },
        ];
        for policies in set {
            assert!(!policies.is_empty(), "{policies:?}");
            let mut def = crate::ServerDefinition::new(
                crate::ServerId::new("s").unwrap(),
                crate::TransportSpec::from_url("https://s.test/mcp", vec![]).unwrap(),
            );
            def.policies = policies.clone();
            let json = serde_json::to_value(&def).unwrap();
            let back: ToolPolicies = serde_json::from_value(json["policies"].clone()).unwrap();
            assert_eq!(back, policies);
        }
        assert!(ToolPolicies::default().is_empty());
    }
    use super::*;

    #[test]
    fn callers_read_and_print_the_same() {
        for text in ["direct", "code_execution", "agent:billing-bot"] {
            assert_eq!(text.parse::<Caller>().unwrap().to_string(), text);
        }
        assert!("agent:".parse::<Caller>().is_err());
        assert!("agent:a b".parse::<Caller>().is_err());
        assert!("model".parse::<Caller>().unwrap_err().contains("direct"));
    }

    #[test]
    fn a_tool_with_allowed_callers_refuses_the_others_and_says_who_may() {
        let mut policies = ToolPolicies::default();
        policies.allowed_callers.insert(
            "transfer".into(),
            [Caller::Direct, Caller::Agent("billing".into())].into(),
        );
        assert!(policies.check_caller("transfer", &Caller::Direct).is_ok());
        assert!(
            policies
                .check_caller("transfer", &Caller::Agent("billing".into()))
                .is_ok()
        );
        let refused = policies
            .check_caller("transfer", &Caller::CodeExecution)
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "tool 'transfer' may not be called by code_execution; it allows direct, agent:billing"
        );
        assert!(
            policies
                .check_caller("lookup", &Caller::CodeExecution)
                .is_ok()
        );
    }

    #[test]
    fn a_call_waits_for_approval_when_its_tool_is_listed_or_destructive_on_a_server_that_says_so() {
        let mut policies = ToolPolicies::default();
        assert_eq!(policies.approval_wait("delete", true), None);
        policies.approval.insert("merge".into());
        let default = std::time::Duration::from_secs(DEFAULT_APPROVAL_WAIT_SECS);
        assert_eq!(policies.approval_wait("merge", false), Some(default));
        assert_eq!(policies.approval_wait("delete", true), None);
        policies.approve_destructive = true;
        assert_eq!(policies.approval_wait("delete", true), Some(default));
        assert_eq!(policies.approval_wait("read", false), None);
        policies.approval_timeout_secs = Some(0);
        assert_eq!(
            policies.approval_wait("merge", false),
            Some(std::time::Duration::from_secs(1)),
            "at least a second"
        );
    }

    #[test]
    fn policies_round_trip_through_json() {
        let mut policies = ToolPolicies::default();
        policies.pinned.insert("search".into());
        policies
            .allowed_callers
            .insert("run".into(), [Caller::CodeExecution].into());
        let json = serde_json::to_string(&policies).unwrap();
        assert_eq!(
            json,
            r#"{"pinned":["search"],"allowed_callers":{"run":["code_execution"]}}"#
        );
        assert_eq!(
            serde_json::from_str::<ToolPolicies>(&json).unwrap(),
            policies
        );
        assert!(
            serde_json::from_str::<ToolPolicies>("{}")
                .unwrap()
                .is_empty()
        );
    }
}
