//! [`AggregateServer`]: the rmcp `ServerHandler` of one downstream session, answering each
//! method over the hub's merged catalog (the full path; `tools/call` itself is in `tool_call`).

use std::sync::{Arc, Mutex};
use switchboard_core::sync::lock;

use futures::FutureExt;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientRequest, CompleteRequestParams, CompleteResult,
    ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, Request, ServerCapabilities, ServerInfo, ServerResult,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use switchboard_core::ServerId;
use switchboard_hub::{ExposeUris, ExposedCatalog, Hub};
use switchboard_upstream::Upstream;

use super::admission::Admission;
use super::exchange::Outcome;
pub use deferred::ToolsView;

use super::*;

/// The aggregated MCP server, one per downstream session.
#[derive(Clone)]
pub struct AggregateServer {
    pub(super) shared: Arc<Shared>,
    pub(super) session: Arc<SessionState>,
    /// The session's place among those served at once, taken by `initialize` and given back
    /// when the session's server is dropped. Kept apart from `session`, which the session's
    /// notification task holds a little longer.
    slot: Arc<Mutex<Option<tokio::sync::OwnedSemaphorePermit>>>,
    /// Cancels the session's `ended` when the session's server is dropped.
    _ending: Arc<tokio_util::sync::DropGuard>,
}

impl AggregateServer {
    /// A handler for a new session.
    pub fn new(shared: Arc<Shared>) -> Self {
        let session = Arc::<SessionState>::default();
        let ending = Arc::new(session.ended.clone().drop_guard());
        Self {
            shared,
            session,
            slot: Arc::default(),
            _ending: ending,
        }
    }

    /// A handler for a new session that takes its place among the sessions served at once
    /// now rather than at `initialize`; `None` when there is no room.
    pub(crate) fn with_session_slot(shared: Arc<Shared>) -> Option<Self> {
        let slot = shared.session_slot()?;
        let server = Self::new(shared);
        *lock(&server.slot) = Some(slot);
        Some(server)
    }

    pub(super) fn hub(&self) -> &Hub {
        &self.shared.hub
    }

    pub(super) fn catalog(&self) -> Arc<ExposedCatalog> {
        self.hub().exposed()
    }

    /// The server's handle for a request (of `tool`, for a call) of the client behind
    /// `context`: over a link of the client's own era where the server has two, and waiting a
    /// moment for a server that is reconnecting ([`Hub::upstream_for_client`]).
    pub(super) async fn upstream_soon(
        &self,
        server: &ServerId,
        tool: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Upstream, ErrorData> {
        self.hub()
            .upstream_for_client(server, tool, downstream::era(context), WAIT_FOR_RECONNECT)
            .await
            .map_err(|error| error.json_rpc())
    }

    pub(super) fn log_level(&self) -> Option<LoggingLevel> {
        *lock(&self.session.log_level)
    }

    /// The tools view of the client behind `context`: what its request asks for (remembered
    /// for the session), else what it asked for before, else the daemon's.
    pub(super) fn tools_view(&self, context: &RequestContext<RoleServer>) -> ToolsView {
        match deferred::requested(context) {
            Some(view) => *self.session.tools_view.get_or_init(|| view),
            None => self
                .session
                .tools_view
                .get()
                .copied()
                .unwrap_or(self.shared.tools.view),
        }
    }

    /// The conversation of `context`'s request: what it names, else what its session named.
    pub(super) fn conversation(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<conversation::Conversation, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        admission::session_conversation(&self.session, parts)
            .map_err(|e| ErrorData::invalid_params(e, None))
    }

    /// What `context`'s request may reach: the boundary of the endpoint it was sent to.
    pub(super) fn boundary(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<conversation::Boundary, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        admission::session_boundary(self.hub(), Some(&self.session), parts)
            .map_err(|e| ErrorData::invalid_request(e, None))
    }

    /// What decides which tools are on for `context`'s conversation.
    pub(super) fn activity(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<conversation::Activity, ErrorData> {
        self.admission(context).activity()
    }

    /// The admission of calls made by `context`'s request.
    pub(super) fn admission<'a>(
        &'a self,
        context: &'a RequestContext<RoleServer>,
    ) -> Admission<'a> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        Admission::new(self.hub(), Some(&self.session), parts)
    }

    /// The server and upstream URI of the exposed `uri`, if the request's endpoint includes its
    /// server: a resource outside it is not found, as one no server has.
    pub(super) fn resolve_uri(
        &self,
        catalog: &ExposedCatalog,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(ServerId, String), ErrorData> {
        let boundary = self.boundary(context)?;
        let not_found = |message: String| {
            ErrorData::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                message,
                Some(serde_json::json!({"uri": uri})),
            )
        };
        // Inside an endpoint, every miss reads alike: an ambiguous URI's error would name
        // servers outside it.
        let unknown =
            || not_found(switchboard_hub::UnknownResource::NoOwner(uri.to_owned()).to_string());
        match catalog.resolve_uri(uri) {
            Ok((server, upstream)) if boundary.includes_server(server.as_str()) => {
                Ok((server, upstream))
            }
            Err(error) if boundary.is_everything() => Err(not_found(error.to_string())),
            _ => Err(unknown()),
        }
    }

    /// What tells this session's calls from other clients' when a server asks something
    /// without naming the call: the Streamable HTTP session id of the request (the short path
    /// knows its calls by it too), else this session's own address.
    pub(super) fn client_key(&self, context: &RequestContext<RoleServer>) -> String {
        let header = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get(http::SESSION_HEADER))
            .and_then(|id| id.to_str().ok());
        match header.or(self.session.http_session.get().map(|id| &**id)) {
            Some(id) => id.to_owned(),
            None => format!("session@{:p}", Arc::as_ptr(&self.session)),
        }
    }
}

impl ServerHandler for AggregateServer {
    fn get_info(&self) -> ServerInfo {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            .enable_tasks()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(
                switchboard_core::wire_names::IMPLEMENTATION_NAME,
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Switchboard: the tools, resources and prompts of every connected MCP server, \
                 named {server}__{name}.",
            )
    }

    /// The exposed tool, so rmcp can check a 2026-07-28 request's `Mcp-Param-*` headers
    /// against its `x-mcp-header` annotations.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let catalog = self.catalog();
        match catalog.tools.get(name) {
            Some(tool) => Some(tool.item.clone()),
            None => deferred::meta_tools(catalog.tools.len())
                .into_iter()
                .find(|tool| tool.name == name),
        }
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        {
            // A session that already holds its place (HTTP+SSE, from its stream's opening)
            // keeps it; a repeated `initialize` does not take a second one.
            let mut slot = lock(&self.slot);
            if slot.is_none() {
                *slot = Some(
                    self.shared
                        .session_slot()
                        .ok_or_else(|| self.shared.sessions_full())?,
                );
            }
        }
        context.peer.set_peer_info(request.clone());
        // The session's user and thread, if its client names them (so that changes of their
        // layers reach it before it sends anything else), and the door it is opened at (an
        // endpoint's, or the workspace's own), which it keeps.
        self.conversation(&context)?;
        self.boundary(&context)?;
        let result = self.negotiate_initialize(&request)?;
        let _ = self.session.negotiated.set(Negotiated {
            version: result.protocol_version.clone(),
            capabilities: request.capabilities.clone(),
            client: switchboard_core::audit::bounded(&request.client_info.name),
        });
        Ok(result)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A Streamable HTTP session names itself on this notification's POST; its calls may
        // take the short path from now on.
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get(http::SESSION_HEADER))
            .and_then(|id| id.to_str().ok());
        if let Some(id) = session {
            let _ = self.session.http_session.set(id.into());
            let mut sessions = lock(&self.shared.short_path_sessions);
            sessions.retain(|_, state| state.strong_count() > 0);
            sessions.insert(id.to_owned(), Arc::downgrade(&self.session));
        }
        self.watch_changes(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let catalog = self.catalog();
        let activity = self.activity(&context)?;
        let layers = activity.layers();
        let active = catalog.tools.iter().filter(|tool| activity.is_on(tool));
        let tools = match self.tools_view(&context) {
            ToolsView::All => active.map(|t| t.item.clone()).collect(),
            ToolsView::Deferred => {
                // The meta-tools, then the tools pinned, turned on for this conversation, or in
                // the session's working set (within its bound).
                let working =
                    lock(&self.session.working_set).listed(self.shared.tools.working_set, |name| {
                        catalog
                            .tools
                            .get(name)
                            .filter(|tool| activity.is_on(tool))
                            .map(|tool| deferred::estimated_tokens(&tool.item))
                    });
                let hub = self.hub();
                let listed = active.filter(|tool| {
                    let name = tool.item.name.as_ref();
                    working.contains(name)
                        || hub.is_pinned(&tool.server, &tool.upstream)
                        || layers.turned_on_for_conversation(tool.server.as_str(), name)
                });
                let reachable = catalog
                    .tools
                    .iter()
                    .filter(|tool| {
                        activity
                            .boundary()
                            .includes_tool(tool.server.as_str(), &tool.upstream)
                    })
                    .count();
                deferred::meta_tools(reachable)
                    .into_iter()
                    .chain(listed.map(|tool| tool.item.clone()))
                    .collect()
            }
        };
        Ok(complete(ListToolsResult::with_all_items(tools)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = switchboard_telemetry::server_span("tools/call", Some(&request.name), || {
            incoming_trace(&context)
        });
        let response = in_span(&span, self.call_tool_traced(request, context)).await;
        if let Ok(CallToolResponse::Complete(result)) = &response
            && result.is_error == Some(true)
        {
            switchboard_telemetry::record_error(&span, "tool_error", None);
        }
        response
    }

    /// `tasks/get`: the task as it stands (rmcp checked that the client declared tasks).
    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let task = self.shared.tasks.get(&request.task_id)?;
        Ok(rmcp::model::GetTaskResult::new(task))
    }

    /// `tasks/update`: the client's answers to a task's questions.
    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared
            .tasks
            .update(&request.task_id, request.input_responses)
            .await
    }

    /// `tasks/cancel`: stops a task and its upstream call.
    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.cancel(&request.task_id).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let boundary = self.boundary(&context)?;
        let prompts = boundary.items_of(&self.catalog().prompts);
        Ok(complete(ListPromptsResult::with_all_items(prompts)))
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let span = switchboard_telemetry::server_span("prompts/get", Some(&request.name), || {
            incoming_trace(&context)
        });
        in_span(&span, async move {
            let catalog = self.catalog();
            let boundary = self.boundary(&context)?;
            let Some(prompt) = catalog
                .prompts
                .get(&request.name)
                .filter(|p| boundary.includes_server(p.server.as_str()))
            else {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt '{}'", request.name),
                    None,
                ));
            };
            let server = prompt.server.clone();
            self.shared.subscribing.settled(&server).await;
            let upstream = self.upstream_soon(&server, None, &context).await?;
            let name = prompt.upstream.clone();
            let arguments = request.arguments.take();
            let patience = upstream.timeouts().request;
            let outcome = self
                .exchange(
                    format!("prompts/get {}", request.name),
                    request.request_state.take(),
                    request.input_responses.take(),
                    &context,
                    patience,
                    move |call| {
                        async move {
                            upstream
                                .get_prompt(&name, arguments, &call)
                                .await
                                .map(ServerResult::GetPromptResult)
                        }
                        .boxed()
                    },
                )
                .await?;
            match outcome {
                Outcome::InputRequired(required) => Ok(GetPromptResponse::InputRequired(required)),
                Outcome::Done(Ok(ServerResult::GetPromptResult(result))) => {
                    Ok(GetPromptResponse::Complete(complete(
                        result.exposed(&prefix_of(&catalog, &server)),
                    )))
                }
                Outcome::Done(Ok(_)) => Err(ErrorData::internal_error(
                    format!("server '{server}' answered prompts/get with another kind of result"),
                    None,
                )),
                Outcome::Done(Err(error)) => Err(upstream_json_rpc(&server, &error)),
            }
        })
        .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let boundary = self.boundary(&context)?;
        let resources = boundary.items_of(&self.catalog().resources);
        Ok(complete(ListResourcesResult::with_all_items(resources)))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let boundary = self.boundary(&context)?;
        let templates = boundary.items_of(&self.catalog().resource_templates);
        Ok(complete(ListResourceTemplatesResult::with_all_items(
            templates,
        )))
    }

    async fn read_resource(
        &self,
        mut request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let span =
            switchboard_telemetry::server_span("resources/read", None, || incoming_trace(&context));
        in_span(&span, async move {
            let catalog = self.catalog();
            let (server, uri) = self.resolve_uri(&catalog, &request.uri, &context)?;
            self.shared.subscribing.settled(&server).await;
            let upstream = self.upstream_soon(&server, None, &context).await?;
            let patience = upstream.timeouts().request;
            let outcome = self
                .exchange(
                    format!("resources/read {}", request.uri),
                    request.request_state.take(),
                    request.input_responses.take(),
                    &context,
                    patience,
                    move |call| {
                        async move {
                            upstream
                                .read_resource(&uri, &call)
                                .await
                                .map(ServerResult::ReadResourceResult)
                        }
                        .boxed()
                    },
                )
                .await?;
            match outcome {
                Outcome::InputRequired(required) => {
                    Ok(ReadResourceResponse::InputRequired(required))
                }
                Outcome::Done(Ok(ServerResult::ReadResourceResult(result))) => {
                    Ok(ReadResourceResponse::Complete(complete(
                        result.exposed(&prefix_of(&catalog, &server)),
                    )))
                }
                Outcome::Done(Ok(_)) => Err(ErrorData::internal_error(
                    format!(
                        "server '{server}' answered resources/read with another kind of result"
                    ),
                    None,
                )),
                Outcome::Done(Err(error)) => Err(upstream_json_rpc(&server, &error)),
            }
        })
        .await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.resolve_uri(&self.catalog(), &request.uri, &context)?;
        // Claimed first, so a second subscribe to it waits for nothing and counts nothing.
        if !lock(&self.session.subscribed).insert(request.uri.clone()) {
            return Ok(());
        }
        // Runs to its end even when the client cancels the request: a subscription made at
        // the server is then the session's, and ends with it; one that failed is let go.
        let (shared, session) = (self.shared.clone(), self.session.clone());
        tokio::spawn(async move {
            let era = switchboard_hub::ClientEra::Sessions;
            let made = super::changes::forward_subscription(&shared, &request.uri, true, era).await;
            if made.is_err() {
                lock(&session.subscribed).remove(&request.uri);
            }
            made
        })
        .await
        .unwrap_or_else(|stopped| Err(ErrorData::internal_error(stopped.to_string(), None)))
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if lock(&self.session.subscribed).remove(&request.uri) {
            self.forward_subscription(&request.uri, false, switchboard_hub::ClientEra::Sessions)
                .await?;
        }
        Ok(())
    }

    /// Everything asked for. Runs before rmcp acknowledges the request: the servers of the
    /// resources asked for are marked as being subscribed at, so that the client's next requests
    /// to them wait for [`ServerHandler::listen`] to have subscribed there.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let catalog = self.catalog();
        let uris = requested.resource_subscriptions.clone().unwrap_or_default();
        let servers: Vec<ServerId> = uris
            .iter()
            .filter_map(|uri| catalog.resolve_uri(uri).ok().map(|(server, _)| server))
            .collect();
        if !servers.is_empty() {
            let underway = self.shared.subscribing.begin(servers);
            lock(&self.session.listen_underway).push((uris, underway));
        }
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // Listening from before the first subscription, so no update after it is missed.
        let events = self.hub().subscribe();
        let boundary = self.boundary(context.request_context())?;
        let catalog = self.catalog();
        // Resources of servers outside the request's endpoint are not subscribed to.
        let resources: Vec<String> = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|uri| {
                catalog
                    .resolve_uri(uri)
                    .is_ok_and(|(server, _)| boundary.includes_server(server.as_str()))
            })
            .collect();
        // This request's own (several may be acknowledged at once on one stdio session).
        let underway = {
            let asked = context
                .requested()
                .resource_subscriptions
                .clone()
                .unwrap_or_default();
            let mut underway = lock(&self.session.listen_underway);
            underway
                .iter()
                .position(|(uris, _)| *uris == asked)
                .map(|at| underway.swap_remove(at).1)
        };
        let mut subscribed = Vec::new();
        for uri in resources {
            if self
                .forward_subscription(&uri, true, switchboard_hub::ClientEra::Stateless)
                .await
                .is_ok()
            {
                subscribed.push(uri);
            }
        }
        drop(underway);
        let outcome = self
            .listen_until_cancelled(&context, &boundary, events)
            .await;
        for uri in subscribed {
            let _ = self
                .forward_subscription(&uri, false, switchboard_hub::ClientEra::Stateless)
                .await;
        }
        outcome
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let catalog = self.catalog();
        let mut params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let reference = &mut params["ref"];
        let boundary = self.boundary(&context)?;
        let server = if let Some(name) = reference.get("name").and_then(|n| n.as_str()) {
            let prompt = catalog
                .prompts
                .get(name)
                .filter(|p| boundary.includes_server(p.server.as_str()))
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("unknown prompt '{name}'"), None)
                })?;
            reference["name"] = prompt.upstream.clone().into();
            prompt.server.clone()
        } else if let Some(uri) = reference.get("uri").and_then(|u| u.as_str()) {
            let (server, upstream_uri) = catalog
                .resolve_uri(uri)
                .ok()
                .filter(|(server, _)| boundary.includes_server(server.as_str()))
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("unknown resource '{uri}'"), None)
                })?;
            reference["uri"] = upstream_uri.into();
            server
        } else {
            return Err(ErrorData::invalid_params(
                "completion/complete needs a prompt or resource reference",
                None,
            ));
        };
        let params: CompleteRequestParams = serde_json::from_value(params)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let upstream = self.upstream_soon(&server, None, &context).await?;
        if upstream.capabilities().completions.is_none() {
            return Ok(CompleteResult::default());
        }
        match upstream
            .request(ClientRequest::CompleteRequest(Request::new(params)))
            .await
        {
            Ok(ServerResult::CompleteResult(result)) => Ok(complete(result)),
            Ok(_) => Err(ErrorData::internal_error(
                format!(
                    "server '{server}' answered completion/complete with another kind of result"
                ),
                None,
            )),
            Err(error) => Err(upstream_json_rpc(&server, &error)),
        }
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *lock(&self.session.log_level) = Some(request.level);
        // Servers filter at the source: pass the level on to every server that logs.
        for server in self.hub().server_ids() {
            let links = self.hub().upstream(&server).ok().into_iter();
            for upstream in links.chain(self.hub().open_sessions_link(&server)) {
                if upstream.capabilities().logging.is_some() {
                    let params = SetLevelRequestParams::new(request.level);
                    let _ = upstream
                        .request(ClientRequest::SetLevelRequest(Request::new(params)))
                        .await;
                }
            }
        }
        Ok(())
    }
}
