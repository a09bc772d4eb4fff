//! What Switchboard answers when an upstream server talks to it.
//!
//! The handler forwards change notifications and log messages to the connection's event channel,
//! routes progress notifications to the call that asked for them, and answers server-to-client
//! requests (elicitation, sampling, roots) by one policy, shared with the 2026-07-28
//! `input_required` path so that both eras get the same answers.

use std::collections::BTreeMap;

use rmcp::ClientHandler;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, ErrorData,
    Implementation, InputRequest, ListRootsResult, LoggingMessageNotificationParam,
    ProgressNotificationParam, ResourceUpdatedNotificationParam, RootsCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use tokio::sync::mpsc;

/// Something an upstream server told Switchboard without being asked.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamEvent {
    /// The tool list changed.
    ToolsChanged,
    /// The resource list changed.
    ResourcesChanged,
    /// The prompt list changed.
    PromptsChanged,
    /// A subscribed resource changed.
    ResourceUpdated(String),
    /// A log message.
    Log {
        /// RFC 5424 level.
        level: String,
        /// The logger name, if any.
        logger: Option<String>,
        /// The message payload.
        data: serde_json::Value,
    },
}

/// How Switchboard answers a server's request for user input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputPolicy {
    /// Declare no elicitation capability; decline any elicitation that arrives anyway.
    #[default]
    Decline,
    /// Declare form elicitation and accept with the schema's default values.
    AcceptDefaults,
}

impl InputPolicy {
    /// The capabilities declared to servers under this policy.
    pub fn capabilities(self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(RootsCapabilities::default());
        if self == Self::AcceptDefaults {
            capabilities.elicitation = Some(ElicitationCapability::default());
        }
        capabilities
    }

    /// Answers an elicitation request.
    pub fn elicit(self, params: &ElicitRequestParams) -> ElicitResult {
        match self {
            Self::Decline => ElicitResult::new(ElicitationAction::Decline),
            Self::AcceptDefaults => {
                let content = schema_defaults(params);
                ElicitResult::new(ElicitationAction::Accept).with_content(content)
            }
        }
    }

    /// Answers one 2026-07-28 `input_required` request with the same policy as legacy requests.
    pub fn answer(self, request: &InputRequest) -> Result<serde_json::Value, ErrorData> {
        let value = match request {
            InputRequest::Elicitation(elicit) => serde_json::to_value(self.elicit(&elicit.params)),
            InputRequest::ListRoots(_) => serde_json::to_value(no_roots()),
            InputRequest::CreateMessage(_) => {
                return Err(ErrorData::method_not_found::<
                    rmcp::model::CreateMessageRequestMethod,
                >());
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "Switchboard does not know this kind of input request",
                    None,
                ));
            }
        };
        value.map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }
}

/// Switchboard exposes no filesystem roots to upstream servers.
fn no_roots() -> ListRootsResult {
    ListRootsResult::new(Vec::new())
}

fn schema_defaults(params: &ElicitRequestParams) -> serde_json::Value {
    let schema = serde_json::to_value(params).unwrap_or_default();
    let mut content = BTreeMap::new();
    if let Some(properties) = schema
        .pointer("/requestedSchema/properties")
        .and_then(|p| p.as_object())
    {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    serde_json::to_value(content).unwrap_or_default()
}

/// The `ClientHandler` of every upstream connection.
#[derive(Clone)]
pub struct UpstreamHandler {
    info: ClientConfig,
    policy: InputPolicy,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    progress: ProgressDispatcher,
}

impl UpstreamHandler {
    /// A handler announcing `client` and answering input requests by `policy`.
    pub fn new(
        client: Implementation,
        policy: InputPolicy,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        progress: ProgressDispatcher,
    ) -> Self {
        Self {
            info: ClientConfig::new(policy.capabilities(), client),
            policy,
            events,
            progress,
        }
    }

    /// The handler's client info with another protocol version.
    pub fn with_protocol_version(mut self, version: rmcp::model::ProtocolVersion) -> Self {
        self.info = self.info.with_protocol_version(version);
        self
    }

    fn emit(&self, event: UpstreamEvent) {
        let _ = self.events.send(event);
    }
}

impl ClientHandler for UpstreamHandler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.policy.elicit(&params))
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(ErrorData::method_not_found::<
            rmcp::model::CreateMessageRequestMethod,
        >())
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(no_roots())
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "info".into());
        self.emit(UpstreamEvent::Log {
            level,
            logger: params.logger,
            data: params.data,
        });
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.emit(UpstreamEvent::ResourceUpdated(params.uri));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(UpstreamEvent::ResourcesChanged);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(UpstreamEvent::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(UpstreamEvent::PromptsChanged);
    }
}
