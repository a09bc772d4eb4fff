//! The deferred view's own tools, answered for a session: `list_servers`, `set_active`,
//! `search_tools` and `describe_tools` (`call_tool` becomes a plain call in `tool_call`).

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData};
use rmcp::service::{RequestContext, RoleServer};
use switchboard_core::ServerId;
use switchboard_core::sync::lock;

use super::*;

impl AggregateServer {
    /// `list_servers` in the deferred view: every server with tools, what it is for, and
    /// whether it is on for this conversation.
    pub(super) fn list_servers_for_client(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let activity = self.activity(context)?;
        let layers = activity.layers();
        let catalog = self.catalog();
        let mut servers: std::collections::BTreeMap<&ServerId, usize> = Default::default();
        for tool in catalog.tools.iter().filter(|tool| {
            activity
                .boundary()
                .includes_tool(tool.server.as_str(), &tool.upstream)
        }) {
            *servers.entry(&tool.server).or_default() += 1;
        }
        let listed: Vec<serde_json::Value> = servers
            .into_iter()
            .map(|(server, tools)| {
                serde_json::json!({
                    "server": server,
                    "description": self.hub().description(server),
                    "tools": tools,
                    "active": layers.is_active(server.as_str(), ""),
                })
            })
            .collect();
        Ok(CallToolResponse::Complete(complete(
            CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                serde_json::to_string(&listed).unwrap_or_default(),
            )]),
        )))
    }

    /// `set_active` in the deferred view: turns servers or tools on or off for this
    /// conversation (its named thread's layer, else its session's own).
    pub(super) async fn set_active_for_client(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let catalog = self.catalog();
        // Only what the endpoint includes can be named: a layer chooses inside it.
        let boundary = self.boundary(context)?;
        let within = |tool: &switchboard_core::exposure::Exposed<rmcp::model::Tool>| {
            boundary.includes_tool(tool.server.as_str(), &tool.upstream)
        };
        let change = deferred::activation_change(
            request.arguments.as_ref(),
            |server| {
                catalog
                    .tools
                    .iter()
                    .any(|t| t.server.as_str() == server && within(t))
            },
            |tool| catalog.tools.get(tool).is_some_and(within),
        )?;
        let named = self.conversation(context)?;
        let said = match &named.thread {
            Some(thread) => {
                let scope =
                    switchboard_hub::Scope::thread(thread).map_err(|error| error.json_rpc())?;
                self.hub()
                    .change_activation(&scope, &change)
                    .await
                    .map_err(|error| error.json_rpc())?;
                format!("Done, for thread '{thread}'.")
            }
            None if downstream::is_modern(context) => {
                return Err(ErrorData::invalid_params(
                    "this request has no session to remember the change in: name the \
                     conversation with the X-Switchboard-Thread header or ?thread= on the URL",
                    None,
                ));
            }
            None => {
                let changed = lock(&self.session.own_activation).apply(&change);
                if changed {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                "Done, for this session.".to_owned()
            }
        };
        Ok(CallToolResponse::Complete(complete(
            CallToolResult::success(vec![rmcp::model::ContentBlock::text(said)]),
        )))
    }

    /// `search_tools` in the deferred view: the best matches, a line each; they become the
    /// hits of the session's working set (a change announced to a session client with
    /// `tools/list_changed`).
    pub(super) async fn search_for_client(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (query, limit) = deferred::search_arguments(request.arguments.as_ref())?;
        let catalog = self.catalog();
        let activity = self.activity(context)?;
        let active = |_: &ServerId, name: &str| {
            catalog
                .tools
                .get(name)
                .is_some_and(|tool| activity.is_on(tool))
        };
        // Only a conversation whose layers or endpoint leave something out needs its tools
        // filtered.
        let filter = (!activity.layers().is_empty() || !activity.boundary().is_everything())
            .then_some(&active as &switchboard_hub::ToolFilter<'_>);
        let found: Vec<rmcp::model::Tool> = self
            .hub()
            .search_tools(&query, limit, false, filter)
            .await
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?
            .tools
            .iter()
            .filter_map(|hit| catalog.tools.get(&hit.name).map(|t| t.item.clone()))
            .collect();
        let hits = found.iter().map(|tool| tool.name.to_string()).collect();
        let changed = lock(&self.session.working_set).found(hits);
        if changed && !downstream::is_modern(context) {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(CallToolResponse::Complete(complete(
            deferred::found_result(&found, &query),
        )))
    }

    /// `describe_tools` in the deferred view: the full definitions of the named tools, of
    /// those this conversation may call.
    pub(super) fn describe_for_client(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let names = deferred::describe_arguments(request.arguments.as_ref())?;
        let catalog = self.catalog();
        let activity = self.activity(context)?;
        let tools = names
            .iter()
            .map(|name| {
                catalog
                    .tools
                    .get(name)
                    .filter(|tool| activity.is_on(tool))
                    .map(|tool| tool.item.clone())
                    .ok_or_else(|| {
                        ErrorData::invalid_params(format!("unknown tool '{name}'"), None)
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CallToolResponse::Complete(complete(
            deferred::described_result(&tools),
        )))
    }
}
