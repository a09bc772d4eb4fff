//! What an admin says of a tool in place of its server: another name, title or description,
//! annotations of their own, and arguments fixed to a value and hidden from the model.
//!
//! A server's description of a tool goes into every model's context, and a server can change
//! it at any time: an admin neutralises a poisoned description, marks a tool destructive that
//! its server does not, or pins an argument (the repository, the workspace) so the model neither
//! sees nor chooses it, without waiting for the server. Overrides apply wherever the tool is
//! listed or searched, and fixed arguments to every call of it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The longest name, title or description an override may give.
pub const MAX_NAME_CHARS: usize = 128;
/// The longest title.
pub const MAX_TITLE_CHARS: usize = 256;
/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 10_000;
/// The most fixed arguments.
pub const MAX_FIXED_ARGUMENTS: usize = 64;
/// The largest fixed value, as JSON.
pub const MAX_FIXED_VALUE_BYTES: usize = 16 * 1024;

/// The annotations MCP defines for tools, and their kinds: what an override may set.
const ANNOTATIONS: [(&str, AnnotationKind); 5] = [
    ("title", AnnotationKind::Text),
    ("readOnlyHint", AnnotationKind::Flag),
    ("destructiveHint", AnnotationKind::Flag),
    ("idempotentHint", AnnotationKind::Flag),
    ("openWorldHint", AnnotationKind::Flag),
];

#[derive(Clone, Copy)]
enum AnnotationKind {
    Text,
    Flag,
}

/// One tool's override; what is absent stays as its server says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// The name clients call it by (before the server's prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Annotations set over the server's (`readOnlyHint`, `destructiveHint`,
    /// `idempotentHint`, `openWorldHint`, `title`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub annotations: Map<String, Value>,
    /// Arguments every call gets with these values, whatever the client sends; they are left
    /// out of the schema clients see.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fixed_arguments: BTreeMap<String, Value>,
}

/// Why an override was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OverrideError(String);

impl OverrideError {
    /// A refusal that says `message`.
    pub(crate) fn new(message: String) -> Self {
        Self(message)
    }
}

/// Whether `name` may name a tool: 1 to 128 of `A-Z a-z 0-9 _ - .` (what MCP asks of names).
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

impl ToolOverride {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Checks every field's shape and size.
    pub fn check(&self) -> Result<(), OverrideError> {
        let refuse = |message: String| Err(OverrideError(message));
        if let Some(name) = &self.name
            && !valid_tool_name(name)
        {
            return refuse(format!(
                "'{name}' is not a tool name (1 to {MAX_NAME_CHARS} of A-Z a-z 0-9 _ - .)"
            ));
        }
        for (what, text, most) in [
            ("title", &self.title, MAX_TITLE_CHARS),
            ("description", &self.description, MAX_DESCRIPTION_CHARS),
        ] {
            if text.as_ref().is_some_and(|t| t.chars().count() > most) {
                return refuse(format!("a {what} has at most {most} characters"));
            }
        }
        for (key, value) in &self.annotations {
            let Some((_, kind)) = ANNOTATIONS.iter().find(|(name, _)| name == key) else {
                return refuse(format!(
                    "'{key}' is not a tool annotation: {}",
                    ANNOTATIONS.map(|(name, _)| name).join(", ")
                ));
            };
            let fits = match kind {
                AnnotationKind::Flag => value.is_boolean(),
                AnnotationKind::Text => value
                    .as_str()
                    .is_some_and(|t| t.chars().count() <= MAX_TITLE_CHARS),
            };
            if !fits {
                return refuse(format!(
                    "annotation '{key}' takes {}",
                    match kind {
                        AnnotationKind::Flag => "true or false".to_owned(),
                        AnnotationKind::Text =>
                            format!("text of at most {MAX_TITLE_CHARS} characters"),
                    }
                ));
            }
        }
        if self.fixed_arguments.len() > MAX_FIXED_ARGUMENTS {
            return refuse(format!(
                "at most {MAX_FIXED_ARGUMENTS} arguments can be fixed"
            ));
        }
        for (name, value) in &self.fixed_arguments {
            if name.is_empty() || name.len() > MAX_NAME_CHARS {
                return refuse(format!(
                    "a fixed argument's name has 1 to {MAX_NAME_CHARS} characters"
                ));
            }
            if value.to_string().len() > MAX_FIXED_VALUE_BYTES {
                return refuse(format!(
                    "the value fixed for '{name}' is over {MAX_FIXED_VALUE_BYTES} bytes"
                ));
            }
        }
        Ok(())
    }

    /// `schema` (a tool's input schema) as clients see it: without the fixed arguments, in its
    /// properties and in `required`.
    pub fn hide_fixed(&self, schema: &mut Map<String, Value>) {
        if self.fixed_arguments.is_empty() {
            return;
        }
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            properties.retain(|name, _| !self.fixed_arguments.contains_key(name));
        }
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            required.retain(|name| {
                name.as_str()
                    .is_none_or(|name| !self.fixed_arguments.contains_key(name))
            });
        }
    }

    /// `arguments` as the server gets them: the fixed ones set to their values, whatever the
    /// client sent for them.
    pub fn fix(&self, arguments: Option<Map<String, Value>>) -> Option<Map<String, Value>> {
        if self.fixed_arguments.is_empty() {
            return arguments;
        }
        let mut arguments = arguments.unwrap_or_default();
        for (name, value) in &self.fixed_arguments {
            arguments.insert(name.clone(), value.clone());
        }
        Some(arguments)
    }

    /// `annotations` (the server's, as JSON) with this override's set over them.
    pub fn annotate(&self, annotations: Option<Map<String, Value>>) -> Option<Map<String, Value>> {
        if self.annotations.is_empty() {
            return annotations;
        }
        let mut annotations = annotations.unwrap_or_default();
        for (key, value) in &self.annotations {
            annotations.insert(key.clone(), value.clone());
        }
        Some(annotations)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(value: Value) -> ToolOverride {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn fixed_arguments_leave_the_schema_and_win_over_what_a_client_sends() {
        let over = parsed(json!({"fixed_arguments": {"repo": "acme/site", "limit": 5}}));
        over.check().unwrap();
        let mut schema = json!({"type": "object", "properties": {
            "repo": {"type": "string"}, "query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["repo", "query"]});
        over.hide_fixed(schema.as_object_mut().unwrap());
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {"query": {"type": "string"}},
                "required": ["query"]})
        );
        let sent = json!({"query": "bug", "repo": "evil/other"});
        let fixed = over.fix(sent.as_object().cloned()).unwrap();
        assert_eq!(
            Value::Object(fixed),
            json!({"query": "bug", "repo": "acme/site", "limit": 5})
        );
        assert_eq!(
            Value::Object(over.fix(None).unwrap()),
            json!({"repo": "acme/site", "limit": 5})
        );
        assert_eq!(ToolOverride::default().fix(None), None, "nothing to fix");
    }

    #[test]
    fn annotations_are_set_over_the_servers() {
        let over = parsed(json!({"annotations": {"destructiveHint": true}}));
        let server = json!({"readOnlyHint": false, "destructiveHint": false});
        assert_eq!(
            Value::Object(over.annotate(server.as_object().cloned()).unwrap()),
            json!({"readOnlyHint": false, "destructiveHint": true})
        );
    }

    #[test]
    fn overrides_that_are_not_well_formed_are_refused_with_the_reason() {
        for (bad, says) in [
            (json!({"name": "has space"}), "not a tool name"),
            (
                json!({"annotations": {"dangerous": true}}),
                "not a tool annotation",
            ),
            (
                json!({"annotations": {"readOnlyHint": "yes"}}),
                "takes true or false",
            ),
            (json!({"description": "x".repeat(10_001)}), "at most 10000"),
            (
                json!({"fixed_arguments": {"a": "x".repeat(20_000)}}),
                "over 16384 bytes",
            ),
        ] {
            let error = parsed(bad).check().unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
        assert!(serde_json::from_value::<ToolOverride>(json!({"rename": "x"})).is_err());
        assert!(parsed(json!({})).is_empty());
    }
}
