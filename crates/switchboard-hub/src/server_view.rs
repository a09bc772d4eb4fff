//! One server as a request sees it: its shared state and its definition, looked up once.
//!
//! A `tools/call` asks several things of the server it goes to (whether the tool is enabled,
//! how it runs as a task, who may call it, its rate limits, whether it may be sent again, the
//! handle to send it with). Asked of the [`Hub`] by id, each question looks the server up
//! again: a hash of its id, a read lock and two reference counts, seven times a call on the
//! short path. A [`ServerView`] is looked up once ([`Hub::server_view`]) and answers them all
//! from one definition, so one call also sees one version of the server's settings. The hub's
//! by-id questions are answered by a view too, so each answer lives in one place.

use std::sync::Arc;

use switchboard_core::{Caller, ServerDefinition, ServerId, TaskMode};
use switchboard_upstream::Upstream;
use switchboard_upstream::rmcp_model::ToolAnnotations;

use crate::{Hub, HubError, ServerSlot, read};

/// One running server as one request sees it ([`Hub::server_view`]).
pub struct ServerView {
    slot: Arc<ServerSlot>,
    definition: Arc<ServerDefinition>,
}

impl Hub {
    /// The server `id` as a request sees it now (its settings as they are at this moment).
    pub fn server_view(&self, id: &ServerId) -> Result<ServerView, HubError> {
        let slot = self.slot(id)?;
        let definition = slot.definition();
        Ok(ServerView { slot, definition })
    }
}

impl ServerView {
    /// The server's id.
    pub fn id(&self) -> &ServerId {
        &self.slot.id
    }

    /// Its shared state.
    pub(crate) fn slot(&self) -> &ServerSlot {
        &self.slot
    }

    /// Its definition, as this view took it.
    pub(crate) fn definition(&self) -> &ServerDefinition {
        &self.definition
    }

    /// A request handle for the server, while it is connected.
    pub fn upstream(&self) -> Result<Upstream, HubError> {
        let upstream = read(&self.slot.upstream).clone();
        upstream.ok_or_else(|| {
            let status = self.slot.status.borrow();
            HubError::NotConnected {
                server: self.slot.id.clone(),
                state: status.state,
                reason: status.error.clone(),
            }
        })
    }

    /// A request handle for calling `tool`, refusing tools the user disabled.
    pub fn upstream_for_tool(&self, tool: &str) -> Result<Upstream, HubError> {
        if !self.definition.tool_enabled(tool) {
            return Err(HubError::ToolDisabled {
                server: self.slot.id.clone(),
                tool: tool.to_owned(),
            });
        }
        self.upstream()
    }

    /// The session link of a server that speaks both eras, when one is open now (nothing is
    /// opened or waited for; see [`Hub::upstream_for_client`]).
    pub fn open_sessions_link(&self) -> Option<Upstream> {
        self.slot.sessions_link.open()
    }

    /// How calls of the upstream tool `tool` become tasks for clients that can take them.
    pub fn task_mode(&self, tool: &str) -> TaskMode {
        self.definition.task_mode(tool)
    }

    /// Whether `caller` may call the upstream tool `tool` (its allowed callers).
    pub fn check_caller(&self, tool: &str, caller: &Caller) -> Result<(), HubError> {
        self.definition
            .policies
            .check_caller(tool, caller)
            .map_err(|refused| HubError::CallerRefused {
                server: self.slot.id.clone(),
                refused,
            })
    }

    /// Whether the server's policies check or change every call of its upstream tool `tool`:
    /// it names the callers allowed to call it, its calls may wait for approval, the server has
    /// guardrails, or an admin fixed some of its arguments.
    pub fn policies_apply_to_calls(&self, tool: &str) -> bool {
        let policies = &self.definition.policies;
        policies.allowed_callers.contains_key(tool)
            || policies.approval.contains(tool)
            || policies.approve_destructive
            || !policies.guardrails.is_empty()
            || policies
                .overrides
                .get(tool)
                .is_some_and(|over| !over.fixed_arguments.is_empty())
    }

    /// Whether a call of the upstream tool `tool` (annotated `annotations`, as the server lists
    /// it) may be sent again after a transient failure: the server annotates it `readOnlyHint`
    /// or `idempotentHint`, or the server's settings name it safe to retry.
    pub fn repeatable(&self, tool: &str, annotations: Option<&ToolAnnotations>) -> bool {
        annotations.is_some_and(|hints| {
            hints.read_only_hint == Some(true) || hints.idempotent_hint == Some(true)
        }) || self.definition.policies.safe_to_retry.contains(tool)
    }
}
