//! `GET /api/tools`: the exposed tools in the shape a model API takes, so that an app can hand
//! them to a model directly and run the calls through Switchboard (its MCP endpoint, or the
//! `switchboard call` it wraps).
//!
//! - `format=mcp` (the default): MCP `Tool` objects, as `tools/list` gives them.
//! - `format=anthropic`: Messages API tools (`name`, `description`, `input_schema`), with
//!   `defer_loading: true` on all but pinned tools and the tool search tool
//!   (`tool_search_tool_bm25_20251119`, or `_regex_` with `search=regex`) first, and
//!   `allowed_callers` (`direct`, `code_execution_20250825`) where a tool names its callers.
//! - `format=openai`: Responses API function tools (`type: function`, `name`, `description`,
//!   `parameters`), with `defer_loading` the same way and `{"type": "tool_search"}` first.
//!
//! In the model formats a name those APIs would refuse (a `.`, more than 64 characters, a leading
//! digit) is given in a form they take ([`switchboard_core::exposure::model_tool_name`]), by
//! which calls reach the tool as well.
//!
//! `user=<id>` and `thread=<id>` leave out the tools turned off for that conversation
//! (activation layers). `defer=none` marks nothing deferred (and adds no search tool). A tool only named agents may
//! call is left out of the model formats: no model may call it. OpenAI has no programmatic
//! callers, so a tool the model may not call directly is left out of `openai`.

use serde_json::{Value, json};
use switchboard_core::{Caller, ToolPolicies};

/// The model API a listing is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Format {
    /// MCP `Tool` objects.
    #[default]
    Mcp,
    /// Anthropic's Messages API.
    Anthropic,
    /// OpenAI's Responses API.
    OpenAi,
}

/// Which tools are marked `defer_loading`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Defer {
    /// Every tool but the pinned ones.
    #[default]
    All,
    /// None.
    None,
}

/// The search tool Anthropic's API runs over deferred tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SearchVariant {
    /// Natural-language queries (`tool_search_tool_bm25_20251119`).
    #[default]
    Bm25,
    /// Regular expressions (`tool_search_tool_regex_20251119`).
    Regex,
}

/// The query of `GET /api/tools`.
#[derive(Debug, serde::Deserialize, Default)]
pub(crate) struct ExportQuery {
    #[serde(default)]
    pub(crate) format: Format,
    #[serde(default)]
    pub(crate) defer: Defer,
    #[serde(default)]
    pub(crate) search: SearchVariant,
    /// Only the tools on for this user's conversations…
    pub(crate) user: Option<String>,
    /// …or this thread's.
    pub(crate) thread: Option<String>,
    /// Only what this endpoint includes.
    pub(crate) endpoint: Option<String>,
}

/// One exposed tool and its server's policy for it.
pub(crate) struct ExportedTool<'a> {
    /// The tool as clients list it (exposed name).
    pub(crate) tool: &'a rmcp::model::Tool,
    /// Its name at its server.
    pub(crate) upstream: &'a str,
    /// Its server's policies.
    pub(crate) policies: &'a ToolPolicies,
}

/// Anthropic's name for a programmatic caller (none for agents).
fn anthropic_caller(caller: &Caller) -> Option<&'static str> {
    match caller {
        Caller::Direct => Some("direct"),
        Caller::CodeExecution => Some("code_execution_20250825"),
        Caller::Agent(_) => None,
    }
}

/// The listing of `tools` for `query`'s model API.
pub(crate) fn export(tools: &[ExportedTool<'_>], query: &ExportQuery) -> Value {
    let deferred = |tool: &ExportedTool<'_>| {
        query.defer == Defer::All && !tool.policies.pinned.contains(tool.upstream)
    };
    let description =
        |tool: &ExportedTool<'_>| tool.tool.description.as_deref().unwrap_or("").to_owned();
    let schema = |tool: &ExportedTool<'_>| Value::Object((*tool.tool.input_schema).clone());
    // The model APIs' own rule for names (a `.` or a leading digit refuses the whole list);
    // Switchboard takes the name they get for a call as well.
    let model_name = |tool: &ExportedTool<'_>| {
        switchboard_core::exposure::model_tool_name(&tool.tool.name).into_owned()
    };
    match query.format {
        Format::Mcp => json!({ "tools": tools.iter().map(|t| t.tool).collect::<Vec<_>>() }),
        Format::Anthropic => {
            let mut listed = Vec::new();
            for tool in tools.iter().filter(|t| switchboard_hub::for_models(t.tool)) {
                let mut entry = json!({
                    "name": model_name(tool),
                    "description": description(tool),
                    "input_schema": schema(tool),
                });
                if let Some(callers) = tool.policies.allowed_callers.get(tool.upstream) {
                    let named: Vec<&str> = callers.iter().filter_map(anthropic_caller).collect();
                    if named.is_empty() {
                        continue;
                    }
                    entry["allowed_callers"] = json!(named);
                }
                if deferred(tool) {
                    entry["defer_loading"] = json!(true);
                }
                listed.push(entry);
            }
            if listed.iter().any(|t| t.get("defer_loading").is_some()) {
                let search = match query.search {
                    SearchVariant::Bm25 => json!({
                        "type": "tool_search_tool_bm25_20251119",
                        "name": "tool_search_tool_bm25",
                    }),
                    SearchVariant::Regex => json!({
                        "type": "tool_search_tool_regex_20251119",
                        "name": "tool_search_tool_regex",
                    }),
                };
                listed.insert(0, search);
            }
            json!({ "tools": listed })
        }
        Format::OpenAi => {
            let mut listed = Vec::new();
            for tool in tools.iter().filter(|t| switchboard_hub::for_models(t.tool)) {
                if tool
                    .policies
                    .check_caller(tool.upstream, &Caller::Direct)
                    .is_err()
                {
                    continue;
                }
                let mut entry = json!({
                    "type": "function",
                    "name": model_name(tool),
                    "description": description(tool),
                    "parameters": schema(tool),
                });
                if deferred(tool) {
                    entry["defer_loading"] = json!(true);
                }
                listed.push(entry);
            }
            if listed.iter().any(|t| t.get("defer_loading").is_some()) {
                listed.insert(0, json!({ "type": "tool_search" }));
            }
            json!({ "tools": listed })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn tool(name: &str) -> rmcp::model::Tool {
        let schema = serde_json::from_value(
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        )
        .unwrap();
        rmcp::model::Tool::new(name.to_owned(), format!("Does {name}"), Arc::new(schema))
    }

    fn policies() -> ToolPolicies {
        let mut policies = ToolPolicies::default();
        policies.pinned.insert("search".into());
        policies
            .allowed_callers
            .insert("run".into(), [Caller::CodeExecution].into());
        policies
            .allowed_callers
            .insert("billing".into(), [Caller::Agent("ledger".into())].into());
        policies
    }

    fn listing(query: &ExportQuery) -> Value {
        let (search, run, billing) = (tool("s__search"), tool("s__run"), tool("s__billing"));
        let lookup = tool("s__lookup");
        let policies = policies();
        let tools = [
            ExportedTool {
                tool: &lookup,
                upstream: "lookup",
                policies: &policies,
            },
            ExportedTool {
                tool: &search,
                upstream: "search",
                policies: &policies,
            },
            ExportedTool {
                tool: &run,
                upstream: "run",
                policies: &policies,
            },
            ExportedTool {
                tool: &billing,
                upstream: "billing",
                policies: &policies,
            },
        ];
        export(&tools, query)
    }

    #[test]
    fn a_tool_only_for_mcp_apps_is_not_handed_to_models() {
        let mut app_only = tool("s__increment");
        app_only.meta = Some(rmcp::model::MetaObject(
            serde_json::from_value(json!({"ui": {"visibility": ["app"]}})).unwrap(),
        ));
        let both = tool("s__show");
        let policies = ToolPolicies::default();
        let tools = [&app_only, &both].map(|tool| ExportedTool {
            tool,
            upstream: "x",
            policies: &policies,
        });
        let names = |format: Format| {
            let query = ExportQuery {
                format,
                defer: Defer::None,
                ..Default::default()
            };
            export(&tools, &query)["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(Format::Anthropic), ["s__show"]);
        assert_eq!(names(Format::OpenAi), ["s__show"]);
        assert_eq!(
            names(Format::Mcp),
            ["s__increment", "s__show"],
            "an MCP host decides"
        );
    }

    #[test]
    fn anthropic_tools_defer_all_but_pinned_behind_the_search_tool() {
        let listed = listing(&ExportQuery {
            format: Format::Anthropic,
            ..Default::default()
        });
        assert_eq!(
            listed,
            json!({"tools": [
                {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
                {"name": "s__lookup", "description": "Does s__lookup",
                 "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
                 "defer_loading": true},
                {"name": "s__search", "description": "Does s__search",
                 "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
                {"name": "s__run", "description": "Does s__run",
                 "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
                 "allowed_callers": ["code_execution_20250825"], "defer_loading": true},
            ]})
        );
        let regex = listing(&ExportQuery {
            format: Format::Anthropic,
            search: SearchVariant::Regex,
            ..Default::default()
        });
        assert_eq!(regex["tools"][0]["type"], "tool_search_tool_regex_20251119");
        let eager = listing(&ExportQuery {
            format: Format::Anthropic,
            defer: Defer::None,
            ..Default::default()
        });
        assert_eq!(eager["tools"].as_array().unwrap().len(), 3, "{eager:#}");
        assert!(
            eager["tools"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t.get("defer_loading").is_none())
        );
    }

    #[test]
    fn openai_tools_are_functions_the_model_may_call() {
        let listed = listing(&ExportQuery {
            format: Format::OpenAi,
            ..Default::default()
        });
        assert_eq!(
            listed,
            json!({"tools": [
                {"type": "tool_search"},
                {"type": "function", "name": "s__lookup", "description": "Does s__lookup",
                 "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                 "defer_loading": true},
                {"type": "function", "name": "s__search", "description": "Does s__search",
                 "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
            ]})
        );
        // Only a deferred tool needs the search tool.
        let mut query = ExportQuery {
            format: Format::OpenAi,
            ..Default::default()
        };
        query.defer = Defer::None;
        assert_eq!(listing(&query)["tools"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn mcp_tools_are_listed_as_tools_list_gives_them() {
        let listed = listing(&ExportQuery::default());
        assert_eq!(listed["tools"].as_array().unwrap().len(), 4);
        assert_eq!(listed["tools"][1]["inputSchema"]["type"], "object");
    }
}
