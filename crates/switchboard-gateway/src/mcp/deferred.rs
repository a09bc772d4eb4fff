//! The deferred tool view: a client sees a few tools instead of hundreds.
//!
//! With thirty servers a client sees hundreds of tools, tens of thousands of tokens of
//! definitions on every model turn, and some clients stop at 40 or 128 tools. In the deferred
//! view `tools/list` holds [`SEARCH_TOOLS`] (find tools by what they do: a compact line each),
//! [`DESCRIBE_TOOLS`] (their full definitions), [`CALL_TOOL`] (call one by name),
//! [`LIST_SERVERS`] and [`SET_ACTIVE`], and the session's [`WorkingSet`]: pinned tools, the
//! latest search's hits and the tools the session called, bounded by [`WorkingSetLimits`], so
//! that a long conversation's list stays small. A change of the working set is announced with
//! `tools/list_changed`. Any exposed tool can still be called by its name.
//!
//! The view is the daemon's (`serve --tools deferred`), or the client's own: `?tools=deferred`
//! (or `all`) on the endpoint's URL, or the `X-Switchboard-Tools` header.

use std::collections::VecDeque;
use std::str::FromStr;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, JsonObject, Tool};
use rmcp::service::{RequestContext, RoleServer};

/// The name of the tool that searches the others.
pub(crate) const SEARCH_TOOLS: &str = "search_tools";

/// The name of the tool that gives tools' full definitions.
pub(crate) const DESCRIBE_TOOLS: &str = "describe_tools";

/// The name of the tool that calls another by name.
pub(crate) const CALL_TOOL: &str = "call_tool";

/// The name of the tool that lists the servers and whether each is on.
pub(crate) const LIST_SERVERS: &str = "list_servers";

/// The name of the tool that turns servers or tools on or off for the conversation.
pub(crate) const SET_ACTIVE: &str = "set_active";

/// The most tools one search returns.
const MAX_FOUND: usize = 50;

/// How many tools a search returns when the model does not say.
const DEFAULT_FOUND: usize = 8;

/// The most tools one `describe_tools` call gives.
const MAX_DESCRIBED: usize = 10;

/// The longest description a search's compact line keeps, in characters.
const SUMMARY_CHARS: usize = 160;

/// The most argument names a search's compact line shows.
const SUMMARY_ARGUMENTS: usize = 12;

/// How many called tools a working set remembers.
const CALLED_KEPT: usize = 64;

/// Which tools `tools/list` shows a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolsView {
    /// Every exposed tool.
    #[default]
    All,
    /// The meta-tools and the session's working set.
    Deferred,
}

/// What bounds a deferred session's working set (the tools its list shows beside the
/// meta-tools, pinned tools and tools it turned on): at most `tools` tools and about `tokens`
/// tokens of their definitions. Tokens are estimated as a quarter of a definition's JSON bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkingSetLimits {
    /// The most tools.
    pub tools: usize,
    /// The most tokens, estimated.
    pub tokens: usize,
}

impl Default for WorkingSetLimits {
    /// 20 tools and 8,000 tokens: a search's default 8 hits and a dozen called tools.
    fn default() -> Self {
        Self {
            tools: 20,
            tokens: 8_000,
        }
    }
}

/// How clients see tools: the view they get unless they ask for another, and the bound of the
/// deferred view's working set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolsOptions {
    /// The view clients get unless they ask for another.
    pub view: ToolsView,
    /// The bound of a deferred session's working set.
    pub working_set: WorkingSetLimits,
}

/// A deferred session's working set: the latest search's hits and the tools it called, by
/// exposed name. What its list shows of them is [`WorkingSet::listed`].
#[derive(Debug, Default)]
pub struct WorkingSet {
    /// The latest search's hits, best first.
    found: Vec<String>,
    /// The tools called, the latest first.
    called: VecDeque<String>,
}

impl WorkingSet {
    /// A search found `hits`, best first; they replace the previous search's. Whether that
    /// changed the set.
    pub fn found(&mut self, hits: Vec<String>) -> bool {
        let changed = hits != self.found;
        self.found = hits;
        changed
    }

    /// The session called `tool`. Whether that changed the set (its first call, or one that
    /// brings it back to the front).
    pub fn called(&mut self, tool: &str) -> bool {
        if self.called.front().is_some_and(|latest| latest == tool) {
            return false;
        }
        self.called.retain(|name| name != tool);
        self.called.push_front(tool.to_owned());
        self.called.truncate(CALLED_KEPT);
        true
    }

    /// Whether `tool` was called.
    pub fn was_called(&self, tool: &str) -> bool {
        self.called.iter().any(|name| name == tool)
    }

    /// The tools the list shows, in the order they are kept when the limits bind: the latest
    /// hits (what the model is about to use), then the called ones, the latest first. `tokens`
    /// estimates a tool's tokens, `None` for a name no longer in the catalog (skipped).
    pub fn listed(
        &self,
        limits: WorkingSetLimits,
        tokens: impl Fn(&str) -> Option<usize>,
    ) -> std::collections::HashSet<String> {
        let mut listed = std::collections::HashSet::new();
        let mut spent = 0;
        for name in self.found.iter().chain(&self.called) {
            if listed.len() >= limits.tools {
                break;
            }
            if listed.contains(name) {
                continue;
            }
            let Some(cost) = tokens(name) else { continue };
            if spent + cost > limits.tokens {
                continue;
            }
            spent += cost;
            listed.insert(name.clone());
        }
        listed
    }
}

/// About how many tokens `tool`'s definition costs a model: a quarter of its JSON's bytes.
pub fn estimated_tokens(tool: &Tool) -> usize {
    serde_json::to_vec(tool).map_or(0, |json| json.len().div_ceil(4))
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
            .get(switchboard_core::wire_names::TOOLS_VIEW_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse().ok())
    })
}

/// Whether `name` is one of the deferred view's own tools.
pub(crate) fn is_meta_tool(name: &str) -> bool {
    [
        SEARCH_TOOLS,
        DESCRIBE_TOOLS,
        CALL_TOOL,
        LIST_SERVERS,
        SET_ACTIVE,
    ]
    .contains(&name)
}

/// The deferred view's own tools; `tools` is how many the catalog holds.
pub(crate) fn meta_tools(tools: usize) -> [Tool; 5] {
    let schema = |value: serde_json::Value| -> Arc<JsonObject> {
        Arc::new(serde_json::from_value(value).unwrap_or_default())
    };
    [
        Tool::new(
            SEARCH_TOOLS,
            format!(
                "Finds tools by what they do among the {tools} tools of every connected \
                 server: a line for each of the best matches, with its arguments (? marks an \
                 optional one). Call one with call_tool, or by its name; describe_tools gives \
                 its full input schema."
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
            DESCRIBE_TOOLS,
            "Gives the full definitions (description, input schema) of tools, by name.",
            schema(serde_json::json!({
                "type": "object",
                "properties": {
                    "names": {"type": "array", "items": {"type": "string"},
                              "minItems": 1, "maxItems": MAX_DESCRIBED,
                              "description": "Tool names, as search_tools gave them"}
                },
                "required": ["names"]
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

/// The tool names of a `describe_tools` call.
pub(crate) fn describe_arguments(arguments: Option<&JsonObject>) -> Result<Vec<String>, ErrorData> {
    let bad = || {
        ErrorData::invalid_params(
            format!("describe_tools needs `names`: 1 to {MAX_DESCRIBED} tool names"),
            None,
        )
    };
    let names = arguments
        .and_then(|a| a.get("names"))
        .and_then(serde_json::Value::as_array)
        .filter(|names| (1..=MAX_DESCRIBED).contains(&names.len()))
        .ok_or_else(bad)?;
    names
        .iter()
        .map(|name| name.as_str().map(str::to_owned).ok_or_else(bad))
        .collect()
}

/// What `describe_tools` answers: each tool's definition as `tools/list` gives it, as JSON text.
pub(crate) fn described_result(tools: &[Tool]) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string(tools).unwrap_or_default(),
    )])
}

/// What `search_tools` answers: a line for each found tool (its name, its arguments with `?`
/// after the optional ones, and the first sentence of its description), or a note that nothing
/// matched. Full schemas are a `describe_tools` call away, so a search costs a model a few
/// hundred tokens, not thousands.
pub fn found_result(found: &[Tool], query: &str) -> CallToolResult {
    if found.is_empty() {
        return CallToolResult::success(vec![ContentBlock::text(format!(
            "No tool matches '{query}'. Try other words, or fewer."
        ))]);
    }
    let mut text = String::new();
    for tool in found {
        text.push_str(&summary(tool));
        text.push('\n');
    }
    text.push_str("Call one by name or with call_tool; describe_tools gives its full schema.");
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// One line for `tool`: `name(a, b?): First sentence of its description.`
pub(crate) fn summary(tool: &Tool) -> String {
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(serde_json::Value::as_array)
        .map(|names| names.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments: Vec<String> = tool
        .input_schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|properties| {
            properties
                .keys()
                .map(|name| {
                    if required.contains(&name.as_str()) {
                        name.clone()
                    } else {
                        format!("{name}?")
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if arguments.len() > SUMMARY_ARGUMENTS {
        arguments.truncate(SUMMARY_ARGUMENTS);
        arguments.push("…".to_owned());
    }
    let description = tool.description.as_deref().unwrap_or_default();
    format!(
        "{}({}): {}",
        tool.name,
        arguments.join(", "),
        first_sentence(description)
    )
}

/// The first sentence (or line) of `text`, at most [`SUMMARY_CHARS`] characters.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let line = text.lines().next().unwrap_or_default().trim();
    let sentence = line
        .match_indices(". ")
        .next()
        .map_or(line, |(at, _)| &line[..=at]);
    if sentence.chars().count() <= SUMMARY_CHARS {
        return sentence.to_owned();
    }
    let mut cut: String = sentence.chars().take(SUMMARY_CHARS - 1).collect();
    cut.push('…');
    cut
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
    fn a_found_tool_is_one_line_with_its_arguments() {
        let tool: Tool = serde_json::from_value(serde_json::json!({
            "name": "files__read",
            "description": "Reads a file. Large files are cut.\nMore here.",
            "inputSchema": {"type": "object", "properties": {"path": {}, "head": {}},
                            "required": ["path"]}
        }))
        .unwrap();
        assert_eq!(summary(&tool), "files__read(path, head?): Reads a file.");
        let long = "word ".repeat(100);
        assert_eq!(first_sentence(&long).chars().count(), SUMMARY_CHARS);
        assert_eq!(first_sentence(""), "");
        assert!(describe_arguments(Some(&object(serde_json::json!({"names": []})))).is_err());
        assert!(describe_arguments(Some(&object(serde_json::json!({"names": [1]})))).is_err());
        assert_eq!(
            describe_arguments(Some(&object(serde_json::json!({"names": ["a"]})))).unwrap(),
            ["a"]
        );
    }

    #[test]
    fn the_working_set_keeps_the_latest_hits_then_the_called_tools_within_its_limits() {
        let mut set = WorkingSet::default();
        assert!(set.found(vec!["a".into(), "b".into()]));
        assert!(!set.found(vec!["a".into(), "b".into()]));
        assert!(set.called("c"));
        assert!(!set.called("c"), "calling the latest again changes nothing");
        assert!(set.called("d"));
        assert!(
            set.found(vec!["e".into()]),
            "a new search replaces the hits"
        );
        let cost = |name: &str| (name != "gone").then_some(10);
        let limits = |tools, tokens| WorkingSetLimits { tools, tokens };
        let sorted = |listed: std::collections::HashSet<String>| {
            let mut names: Vec<String> = listed.into_iter().collect();
            names.sort();
            names
        };
        assert_eq!(sorted(set.listed(limits(10, 1_000), cost)), ["c", "d", "e"]);
        // The hits first, then the latest call.
        assert_eq!(sorted(set.listed(limits(2, 1_000), cost)), ["d", "e"]);
        assert_eq!(sorted(set.listed(limits(10, 25), cost)), ["d", "e"]);
        assert!(set.called("gone"));
        assert_eq!(sorted(set.listed(limits(10, 1_000), cost)), ["c", "d", "e"]);
        assert!(set.was_called("c") && !set.was_called("e"));
    }

    #[test]
    fn views_are_named_all_and_deferred() {
        assert_eq!("deferred".parse::<ToolsView>(), Ok(ToolsView::Deferred));
        assert_eq!("all".parse::<ToolsView>(), Ok(ToolsView::All));
        assert!("some".parse::<ToolsView>().is_err());
    }
}
