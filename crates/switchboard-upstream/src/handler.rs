//! What Switchboard answers when an upstream server talks to it.
//!
//! The handler forwards change notifications and log messages to the connection's event channel,
//! routes progress notifications to the call that asked for them, and hands server-to-client
//! requests (elicitation, sampling, roots) to the responder of the call they belong to
//! ([`crate::input_requests`]), falling back to one policy, shared with the 2026-07-28 `input_required`
//! path so that both eras get the same answers.

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

use crate::input_requests::{
    InFlight, InputResponder, Related, take_related, take_related_numbered,
};
use switchboard_core::wire_names::RELATED_REQUEST_META;

/// `params` without the related-request tag in its `_meta`, and the tag.
fn untag<P>(params: P) -> (P, Option<rmcp::model::RequestId>)
where
    P: serde::Serialize + serde::de::DeserializeOwned,
{
    let Ok(mut value) = serde_json::to_value(&params) else {
        return (params, None);
    };
    let Some(meta) = value.get_mut("_meta").and_then(|m| m.as_object_mut()) else {
        return (params, None);
    };
    let Some(tag) = meta.remove(RELATED_REQUEST_META) else {
        return (params, None);
    };
    if meta.is_empty()
        && let Some(object) = value.as_object_mut()
    {
        object.remove("_meta");
    }
    let related = serde_json::from_value(tag).ok();
    match serde_json::from_value(value) {
        Ok(untagged) => (untagged, related),
        Err(_) => (params, related),
    }
}

/// The related-request tag of a notification, with its number. rmcp takes a notification's
/// `_meta` out of its params and hands it to the handler in the context's extensions (its `meta`
/// is left empty), so both of the context's places are read.
fn related_of(context: &mut NotificationContext<RoleClient>) -> Option<Related> {
    take_related_numbered(&mut context.meta.0).or_else(|| {
        context
            .extensions
            .get_mut::<rmcp::model::NotificationMetaObject>()
            .and_then(|meta| take_related_numbered(&mut meta.0))
    })
}

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
    /// The server forgot the session (it restarted, or expired it) and Switchboard opened a new
    /// one: what the server offers may have changed, and the new session holds none of the old
    /// one's subscriptions.
    SessionRestarted,
    /// A stateless server's `subscriptions/listen` stream was opened again after it dropped:
    /// changes may have gone unannounced meanwhile (the server may have restarted), so its
    /// lists are read again.
    ListenReopened,
    /// A log message (boxed: the events of every connection go through a channel whose first
    /// block holds 32 of them from the start, and this is by far the largest).
    Log(Box<ServerLog>),
}

/// A log message a server sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLog {
    /// RFC 5424 level.
    pub level: String,
    /// The logger name, if any.
    pub logger: Option<String>,
    /// The message payload.
    pub data: serde_json::Value,
    /// Whether it was delivered to the caller of the request it belongs to.
    pub to_caller: bool,
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

impl crate::input_requests::InputResponder for InputPolicy {
    /// A policy answers without asking anyone: a fallback that asks someone goes first.
    fn takes(&self, _request: &InputRequest) -> bool {
        false
    }

    fn answer(
        &self,
        _key: Option<&str>,
        request: InputRequest,
    ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, ErrorData>> {
        let answer = InputPolicy::answer(*self, &request);
        Box::pin(std::future::ready(answer))
    }
}

/// The capabilities declared to servers when their requests are relayed to downstream clients:
/// everything a client may be asked for, since the downstream client that will answer is only
/// known per call.
pub(crate) fn relay_capabilities() -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    capabilities.roots = Some(RootsCapabilities::default());
    capabilities.sampling = Some(Default::default());
    capabilities.elicitation =
        serde_json::from_value(serde_json::json!({"form": {}, "url": {}})).ok();
    capabilities
}

/// What a 2026-07-28 server may rely on during one relayed request: the input kinds the caller
/// declared (sampling, elicitation, roots), since those are what Switchboard can relay.
pub fn relay_capabilities_for(caller: &ClientCapabilities) -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    capabilities.roots = caller.roots.clone();
    capabilities.sampling = caller.sampling.clone();
    capabilities.elicitation = caller.elicitation.clone();
    capabilities
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
pub(crate) struct UpstreamHandler {
    info: ClientConfig,
    /// Answers what no call's responder takes.
    fallback: std::sync::Arc<dyn InputResponder>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    progress: ProgressDispatcher,
    in_flight: InFlight,
    /// Whether requests for input are relayed to the client behind each call (Switchboard as a
    /// proxy) rather than answered by Switchboard itself.
    relay: bool,
}

impl UpstreamHandler {
    /// A handler announcing `client`, handing input requests to the responders of `in_flight`
    /// and the rest to `fallback`. With `relay`, it declares every client capability
    /// ([`relay_capabilities`]); otherwise those of `policy`.
    pub(crate) fn new(
        client: Implementation,
        policy: InputPolicy,
        fallback: std::sync::Arc<dyn InputResponder>,
        relay: bool,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        progress: ProgressDispatcher,
        in_flight: InFlight,
    ) -> Self {
        let capabilities = if relay {
            relay_capabilities()
        } else {
            policy.capabilities()
        };
        Self {
            info: ClientConfig::new(capabilities, client),
            fallback,
            events,
            progress,
            in_flight,
            relay,
        }
    }

    /// Answers `request` through the responder of the call it belongs to, or by the policy.
    async fn relay<P, R>(
        &self,
        params: P,
        context_meta: &mut rmcp::model::MetaObject,
        wrap: impl FnOnce(P) -> InputRequest,
    ) -> Result<R, ErrorData>
    where
        P: serde::Serialize + serde::de::DeserializeOwned,
        R: serde::de::DeserializeOwned,
    {
        let (params, tagged) = untag(params);
        let related = tagged.or_else(|| take_related(context_meta));
        let request = wrap(params);
        // A roots request no call is named in goes to the client a call is waiting to hand the
        // roots to, if any (see `InFlight::hand_roots_to`).
        let handing_over = match &request {
            InputRequest::ListRoots(_) => {
                self.in_flight.roots_asked();
                related
                    .is_none()
                    .then(|| self.in_flight.roots_handed_to())
                    .flatten()
            }
            _ => None,
        };
        let found = match handing_over {
            Some(responder) => Some(responder),
            None => self.in_flight.find_when_set_up(related.as_ref()).await,
        };
        let responder: std::sync::Arc<dyn InputResponder> = match found {
            Some(responder) => responder,
            // As a proxy Switchboard has no roots of its own: a server that asks when no
            // client's call can be told apart (at connect time, or with calls of several
            // clients in flight on an untagged stream) is told so, rather than given an
            // invented empty list.
            None if self.relay && matches!(request, InputRequest::ListRoots(_)) => {
                return Err(ErrorData::internal_error(
                    "Switchboard relays roots/list to the client whose call the server is \
                         working on, and cannot tell which call this request belongs to (none \
                         is in flight, or calls of several clients are)",
                    None,
                ));
            }
            None => self.fallback.clone(),
        };
        let responder = crate::input_requests::chosen(&responder, &self.fallback, &request);
        let is_roots = matches!(request, InputRequest::ListRoots(_));
        let answer = responder.answer(None, request).await?;
        if is_roots {
            self.in_flight.roots_given_by(responder.client());
        }
        serde_json::from_value(answer).map_err(|e| {
            ErrorData::internal_error(format!("the client's answer is malformed: {e}"), None)
        })
    }

    /// The handler's client info with another protocol version.
    pub(crate) fn with_protocol_version(mut self, version: rmcp::model::ProtocolVersion) -> Self {
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
        mut context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.relay(params, &mut context.meta.0, |p| {
            InputRequest::Elicitation(rmcp::model::Request::new(p))
        })
        .await
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        mut context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.relay(params, &mut context.meta.0, |p| {
            InputRequest::CreateMessage(rmcp::model::Request::new(p))
        })
        .await
    }

    async fn list_roots(
        &self,
        mut context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.relay(serde_json::json!({}), &mut context.meta.0, |_| {
            InputRequest::ListRoots(rmcp::model::RequestNoParam::default())
        })
        .await
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        mut context: NotificationContext<RoleClient>,
    ) {
        let related = related_of(&mut context);
        self.in_flight
            .deliver(related.as_ref(), self.progress.handle_notification(params))
            .await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        mut context: NotificationContext<RoleClient>,
    ) {
        let related = related_of(&mut context);
        let responder = self
            .in_flight
            .deliver(related.as_ref(), async {
                let responder = self.in_flight.find(related.as_ref().map(|r| &r.id));
                if let Some(responder) = &responder {
                    responder.log(params.clone());
                }
                responder
            })
            .await;
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "info".into());
        self.emit(UpstreamEvent::Log(Box::new(ServerLog {
            level,
            logger: params.logger,
            data: params.data,
            to_caller: responder.is_some(),
        })));
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
