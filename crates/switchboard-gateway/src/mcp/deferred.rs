//! The deferred tool view: a client sees two tools instead of hundreds.
//!
//! With thirty servers a client sees hundreds of tools, tens of thousands of tokens of
//! definitions on every model turn, and some clients stop at 40 or 128 tools. In the deferred
//! view `tools/list` holds only [`SEARCH_TOOLS`] (find tools by what they do, with their input
//! schemas) and [`CALL_TOOL`] (call one of them by name), and the tools a search found, which
//! join the session's list (announced with `tools/list_changed`) so that a client can also call
//! them as usual. Any exposed tool can still be called by its name.
//!
//! The view is the daemon's (`serve --tools deferred`), or the client's own: `?tools=deferred`
//! (or `all`) on the endpoint's URL, or the `X-Switchboard-Tools` header.

use std::str::FromStr;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, JsonObject, Tool};
use rmcp::service::{RequestContext, RoleServer};

/// The name of the tool that searches the others.
pub(crate) const SEARCH_TOOLS: &str = "search_tools";

/// The name of the tool that calls another by name.
pub(crate) const CALL_TOOL: &str = "call_tool";

/// The name of the tool that lists the servers and whether each is on.
pub(crate) const LIST_SERVERS: &str = "list_servers";

/// The name of the tool that turns servers or tools on or off for the conversation.
pub(crate) const SET_ACTIVE: &str = "set_active";

/// The header a client names its view with.
const VIEW_HEADER: &str = "x-switchboard-tools";

/// The most tools one search returns.
const MAX_FOUND: usize = 50;

/// How many tools a search returns when the model does not say.
const DEFAULT_FOUND: usize = 8;

/// Which tools `tools/list` shows a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolsView {
    /// Every exposed tool.
    #[default]
    All,
    /// `search_tools`, `call_tool`, and the tools the client's searches found.
    Deferred,
}

impl FromStr for ToolsView {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "all" => Ok(Self::All),
            "deferred" => Ok(Self::Deferred),
            other => Err(format!("'{other}' is not a tools view (all or deferred)")),
        }
    }
}

/// The view the client of `context` asked for (query parameter, then header), if any.
pub(crate) fn requested(context: &RequestContext<RoleServer>) -> Option<ToolsView> {
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    let from_query =
        super::conversation::query_param(parts, "tools").and_then(|value| value.parse().ok());
    from_query.or_else(|| {
        parts
            .headers
            .get(VIEW_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse().ok())
    })
}

/// Whether `name` is one of the deferred view's own tools.
pub(crate) fn is_meta_tool(name: &str) -> bool {
    [SEARCH_TOOLS, CALL_TOOL, LIST_SERVERS, SET_ACTIVE].contains(&name)
}

/// The deferred view's own tools; `tools` is how many the catalog holds.
pub(crate) fn meta_tools(tools: usize) -> [Tool; 4] {
    let schema = |value: serde_json::Value| -> Arc<JsonObject> {
        Arc::new(serde_json::from_value(value).unwrap_or_default())
    };
    [
        Tool::new(
            SEARCH_TOOLS,
            format!(
                "Finds tools by what they do among the {tools} tools of every connected \
                 server, and returns the best matches with their descriptions and input \
                 schemas. Call one with call_tool, or by its name."
            ),
            schema(serde_json::json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do, in a few words"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_FOUND,
                              "description": "How many tools to return (default 8)"}
                },
                "required": ["query"]
            })),
        ),
        Tool::new(
            CALL_TOOL,
            "Calls a tool search_tools found, by its name, with its arguments.",
            schema(serde_json::json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name, as search_tools gave it"},
                    "arguments": {"type": "object", "description": "The tool's arguments, as its input schema says"}
                },
                "required": ["name"]
            })),
        ),
        Tool::new(
            LIST_SERVERS,
            "Lists the connected servers: what each is for, how many tools it has, and whether \
             it is on for this conversation.",
            schema(serde_json::json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            SET_ACTIVE,
            "Turns servers or tools on or off for this conversation. Tools of a server turned \
             on are listed; those turned off are hidden and cannot be called.",
            schema(serde_json::json!({
                "type": "object",
                "properties": {
                    "servers": {"type": "array", "items": {"type": "string"},
                                "description": "Server ids, as list_servers gives them"},
                    "tools": {"type": "array", "items": {"type": "string"},
                              "description": "Tool names"},
                    "active": {"type": "boolean", "description": "On (true) or off (false)"}
                },
                "required": ["active"]
            })),
        ),
    ]
}

/// The change a `set_active` call asks for; `is_server` and `is_tool` say which names exist.
pub(crate) fn activation_change(
    arguments: Option<&JsonObject>,
    is_server: impl Fn(&str) -> bool,
    is_tool: impl Fn(&str) -> bool,
) -> Result<switchboard_core::ActivationChange, ErrorData> {
    let bad = |message: String| ErrorData::invalid_params(message, None);
    let active = arguments
        .and_then(|a| a.get("active"))
        .and_then(serde_json::Value::as_bool)
        .ok_or_else(|| bad("set_active needs `active`: true or false".to_owned()))?;
    let names = |key: &str| -> Result<Vec<String>, ErrorData> {
        match arguments.and_then(|a| a.get(key)) {
            None | Some(serde_json::Value::Null) => Ok(Vec::new()),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad(format!("set_active's `{key}` must be names")))
                })
                .collect(),
            Some(_) => Err(bad(format!("set_active's `{key}` must be a list of names"))),
        }
    };
    let (servers, tools) = (names("servers")?, names("tools")?);
    if servers.is_empty() && tools.is_empty() {
        return Err(bad(
            "set_active needs `servers` or `tools` to change".to_owned()
        ));
    }
    if let Some(unknown) = servers.iter().find(|s| !is_server(s)) {
        return Err(bad(format!(
            "no connected server has id '{unknown}'; list_servers gives them"
        )));
    }
    if let Some(unknown) = tools.iter().find(|t| !is_tool(t)) {
        return Err(bad(format!("no tool is named '{unknown}'")));
    }
    Ok(switchboard_core::ActivationChange {
        servers: servers.into_iter().map(|s| (s, Some(active))).collect(),
        tools: tools.into_iter().map(|t| (t, Some(active))).collect(),
    })
}

/// The query and limit of a `search_tools` call.
pub(crate) fn search_arguments(
    arguments: Option<&JsonObject>,
) -> Result<(String, usize), ErrorData> {
    let query = arguments
        .and_then(|a| a.get("query"))
        .and_then(|q| q.as_str())
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| {
            ErrorData::invalid_params(
                "search_tools needs a `query`: what the tool should do",
                None,
            )
        })?;
    let limit = arguments
        .and_then(|a| a.get("limit"))
        .and_then(|l| l.as_u64())
        .map_or(DEFAULT_FOUND, |l| usize::try_from(l).unwrap_or(MAX_FOUND))
        .clamp(1, MAX_FOUND);
    Ok((query.to_owned(), limit))
}

/// The tool name and arguments of a `call_tool` call.
pub(crate) fn call_arguments(
    arguments: Option<&JsonObject>,
) -> Result<(String, Option<JsonObject>), ErrorData> {
    let name = arguments
        .and_then(|a| a.get("name"))
        .and_then(|n| n.as_str())
        .ok_or_else(|| ErrorData::invalid_params("call_tool needs the `name` of a tool", None))?;
    let inner = match arguments.and_then(|a| a.get("arguments")) {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Object(inner)) => Some(inner.clone()),
        Some(_) => {
            return Err(ErrorData::invalid_params(
                "call_tool's `arguments` must be an object",
                None,
            ));
        }
    };
    Ok((name.to_owned(), inner))
}

/// What `search_tools` answers: the found tools (name, description, input schema) as JSON
/// text, or a note that nothing matched.
pub(crate) fn found_result(found: &[Tool], query: &str) -> CallToolResult {
    if found.is_empty() {
        return CallToolResult::success(vec![ContentBlock::text(format!(
            "No tool matches '{query}'. Try other words, or fewer."
        ))]);
    }
    let listed: Vec<serde_json::Value> = found
        .iter()
        .map(|tool| {
            serde_json::json!({
                "name": tool.name,
                "description": tool.description,
                "inputSchema": tool.input_schema,
            })
        })
        .collect();
    CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string(&listed).unwrap_or_default(),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: serde_json::Value) -> JsonObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn meta_tool_arguments_are_checked() {
        let ok = object(serde_json::json!({"query": "weather", "limit": 500}));
        assert_eq!(
            search_arguments(Some(&ok)).unwrap(),
            ("weather".into(), MAX_FOUND)
        );
        assert!(search_arguments(Some(&object(serde_json::json!({"query": " "})))).is_err());
        assert!(search_arguments(None).is_err());
        let call = object(serde_json::json!({"name": "a__b", "arguments": {"x": 1}}));
        let (name, inner) = call_arguments(Some(&call)).unwrap();
        assert_eq!(
            (name.as_str(), inner.unwrap()["x"].as_i64()),
            ("a__b", Some(1))
        );
        assert!(
            call_arguments(Some(&object(
                serde_json::json!({"name": "a", "arguments": 3})
            )))
            .is_err()
        );
        assert!(call_arguments(Some(&object(serde_json::json!({})))).is_err());
    }

    #[test]
    fn views_are_named_all_and_deferred() {
        assert_eq!("deferred".parse::<ToolsView>(), Ok(ToolsView::Deferred));
        assert_eq!("all".parse::<ToolsView>(), Ok(ToolsView::All));
        assert!("some".parse::<ToolsView>().is_err());
    }
}
