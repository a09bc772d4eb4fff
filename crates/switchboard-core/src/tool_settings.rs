//! One tool's settings in its server's definition, read and changed as a whole.
//!
//! A tool's settings are spread over a [`ServerDefinition`]: whether it is disabled, pinned,
//! how its calls become tasks, who may call it. The CLI (`switchboard server disable-tool`,
//! `pin`, `set-task-mode`, `set-callers`) and the admin API
//! (`PATCH /api/servers/{id}/tools/{tool}`) change them through [`ToolSettingsChange`], so both
//! mean the same thing by each word.

use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer, Serialize};

use crate::policy::Caller;
use crate::rate_limit::RateLimit;
use crate::server::{ServerDefinition, TaskMode};
use crate::tool_override::{OverrideError, ToolOverride};

/// One tool's settings, as shown by the admin API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSettings {
    /// Whether the tool is exposed and may be called.
    pub enabled: bool,
    /// Whether the deferred tool view lists it from the start.
    pub pinned: bool,
    /// How its calls become tasks.
    pub task_mode: TaskMode,
    /// Who may call it; `None`: anyone.
    pub allowed_callers: Option<BTreeSet<Caller>>,
    /// Its own rate limit, if it has one.
    pub rate_limit: Option<RateLimit>,
    /// Whether its calls may be sent again after a transient failure although the server does
    /// not annotate it `readOnlyHint` or `idempotentHint`.
    pub safe_to_retry: bool,
    /// What an admin says of it in place of its server, if anything.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub tool_override: Option<ToolOverride>,
    /// Whether each call of it from an MCP client waits for a person's approval (listed; a
    /// server that approves destructive tools adds those).
    pub approval: bool,
    /// What an operator wrote for search about it, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_notes: Option<String>,
}

/// The longest search notes of one tool, in characters.
pub const MAX_SEARCH_NOTES_CHARS: usize = 2_000;

/// A change to one tool's settings; what is `None` stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSettingsChange {
    /// Expose the tool (`true`) or hide it and refuse its calls (`false`).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Pin it in the deferred view, or unpin it.
    #[serde(default)]
    pub pinned: Option<bool>,
    /// How its calls become tasks.
    #[serde(default)]
    pub task_mode: Option<TaskMode>,
    /// `Some(None)` (JSON `null`): anyone may call it; `Some(Some(callers))`: only these.
    #[serde(default, deserialize_with = "present")]
    pub allowed_callers: Option<Option<BTreeSet<Caller>>>,
    /// `Some(None)` (JSON `null`): no limit of its own; `Some(Some(limit))`: this one.
    #[serde(default, deserialize_with = "present")]
    pub rate_limit: Option<Option<RateLimit>>,
    /// Name it safe to send again after a transient failure, or not.
    #[serde(default)]
    pub safe_to_retry: Option<bool>,
    /// `Some(None)` (JSON `null`): as its server says; `Some(Some(over))`: this override in
    /// place of any before (checked by [`ToolSettingsChange::check`]).
    #[serde(default, rename = "override", deserialize_with = "present")]
    pub tool_override: Option<Option<ToolOverride>>,
    /// Make each call of it wait for a person's approval, or not.
    #[serde(default)]
    pub approval: Option<bool>,
    /// `Some(None)` (JSON `null`, or empty text): no notes; `Some(Some(text))`: these, in place
    /// of any before (at most [`MAX_SEARCH_NOTES_CHARS`] characters).
    #[serde(default, deserialize_with = "present")]
    pub search_notes: Option<Option<String>>,
}

/// Tells a field given as `null` (`Some(None)`) from one left out (`None`); for
/// `#[serde(default, deserialize_with = "present")]` on an `Option<Option<T>>`.
pub fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl ToolSettingsChange {
    /// Whether the change changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Checks what the change sets (an override's shape and size).
    pub fn check(&self) -> Result<(), OverrideError> {
        if let Some(Some(notes)) = &self.search_notes
            && notes.chars().count() > MAX_SEARCH_NOTES_CHARS
        {
            return Err(OverrideError::new(format!(
                "search notes have at most {MAX_SEARCH_NOTES_CHARS} characters"
            )));
        }
        match &self.tool_override {
            Some(Some(over)) => over.check(),
            _ => Ok(()),
        }
    }
}

impl ServerDefinition {
    /// The settings of the upstream tool `tool`.
    pub fn tool_settings(&self, tool: &str) -> ToolSettings {
        ToolSettings {
            enabled: self.tool_enabled(tool),
            pinned: self.policies.pinned.contains(tool),
            task_mode: self.task_mode(tool),
            allowed_callers: self.policies.allowed_callers.get(tool).cloned(),
            rate_limit: self.policies.rate_limits.get(tool).copied(),
            safe_to_retry: self.policies.safe_to_retry.contains(tool),
            tool_override: self.policies.overrides.get(tool).cloned(),
            approval: self.policies.approval.contains(tool),
            search_notes: self.policies.search_notes.get(tool).cloned(),
        }
    }

    /// Applies `change` to the upstream tool `tool`. Defaults are not stored: a tool set back
    /// to them simply follows them.
    pub fn change_tool(&mut self, tool: &str, change: &ToolSettingsChange) {
        // `disabled_tools` holds the tool when it is off.
        mark(&mut self.disabled_tools, tool, change.enabled.map(|on| !on));
        mark(&mut self.policies.pinned, tool, change.pinned);
        mark(&mut self.policies.approval, tool, change.approval);
        mark(&mut self.policies.safe_to_retry, tool, change.safe_to_retry);
        match change.task_mode {
            Some(TaskMode::Optional) => set(&mut self.task_modes, tool, Some(None)),
            mode => set(&mut self.task_modes, tool, mode.map(Some)),
        }
        set(
            &mut self.policies.allowed_callers,
            tool,
            change.allowed_callers.clone(),
        );
        set(&mut self.policies.rate_limits, tool, change.rate_limit);
        // An override that says nothing is none.
        let over = change
            .tool_override
            .clone()
            .map(|over| over.filter(|over| !over.is_empty()));
        set(&mut self.policies.overrides, tool, over);
        // Notes that are only blanks are none.
        let notes = change.search_notes.clone().map(|notes| {
            notes
                .map(|text| text.trim().to_owned())
                .filter(|text| !text.is_empty())
        });
        set(&mut self.policies.search_notes, tool, notes);
    }
}

/// Puts `tool` in `set` (`Some(true)`) or takes it out (`Some(false)`); `None` leaves it.
fn mark(set: &mut BTreeSet<String>, tool: &str, member: Option<bool>) {
    match member {
        Some(true) => {
            set.insert(tool.to_owned());
        }
        Some(false) => {
            set.remove(tool);
        }
        None => {}
    }
}

/// Sets `tool`'s value in `map` (`Some(Some(value))`) or removes it (`Some(None)`: the
/// default, which is not stored); `None` leaves it.
fn set<T>(map: &mut std::collections::BTreeMap<String, T>, tool: &str, value: Option<Option<T>>) {
    match value {
        Some(Some(value)) => {
            map.insert(tool.to_owned(), value);
        }
        Some(None) => {
            map.remove(tool);
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{ServerId, TransportSpec};

    fn definition() -> ServerDefinition {
        ServerDefinition::new(
            ServerId::new("s").unwrap(),
            TransportSpec::from_url("http://127.0.0.1:1/mcp", Vec::new()).unwrap(),
        )
    }

    #[test]
    fn a_change_sets_only_what_it_names_and_defaults_are_not_stored() {
        let mut def = definition();
        let change: ToolSettingsChange = serde_json::from_str(
            r#"{"enabled": false, "pinned": true, "task_mode": "required",
                "allowed_callers": ["direct", "agent:triage"], "rate_limit": "10/s:20",
                "override": {"description": "Reads one file", "fixed_arguments": {"root": "/srv"}},
                "approval": true, "search_notes": "PR, pull request"}"#,
        )
        .unwrap();
        def.change_tool("t", &change);
        let settings = def.tool_settings("t");
        assert!(!settings.enabled && settings.pinned);
        assert_eq!(settings.task_mode, TaskMode::Required);
        assert_eq!(settings.allowed_callers.unwrap().len(), 2);
        assert_eq!(settings.rate_limit.unwrap().to_string(), "10/s:20");
        let over = settings.tool_override.unwrap();
        assert_eq!(over.description.as_deref(), Some("Reads one file"));
        assert_eq!(over.fixed_arguments["root"], "/srv");
        assert!(settings.approval);
        assert_eq!(settings.search_notes.as_deref(), Some("PR, pull request"));
        assert!(def.tool_settings("other").enabled);

        let back: ToolSettingsChange = serde_json::from_str(
            r#"{"enabled": true, "pinned": false, "task_mode": "optional", "allowed_callers": null,
                "rate_limit": null, "override": null, "approval": false, "search_notes": " "}"#,
        )
        .unwrap();
        def.change_tool("t", &back);
        assert_eq!(
            def,
            definition(),
            "a tool set back to the defaults leaves no trace"
        );

        let nothing: ToolSettingsChange = serde_json::from_str("{}").unwrap();
        assert!(nothing.is_empty());
    }

    #[test]
    fn unknown_fields_and_bad_callers_are_refused() {
        assert!(serde_json::from_str::<ToolSettingsChange>(r#"{"enable": true}"#).is_err());
        assert!(
            serde_json::from_str::<ToolSettingsChange>(r#"{"allowed_callers": ["robot"]}"#)
                .is_err()
        );
        assert!(serde_json::from_str::<ToolSettingsChange>(r#"{"rate_limit": "fast"}"#).is_err());
    }
}
