//! Admission: whether a client's `tools/call` may run, decided in one place for both of the
//! paths a call can take, the short one ([`super::short_path`]) and the full one
//! (`AggregateServer::call_tool`).
//!
//! The checks, in order: the tool is inside the endpoint the request was sent to (else it is
//! unknown there, as one no server has); it is on for the request's conversation (the
//! activation layers); the request's caller may call it (`allowed_callers`); and the rate
//! limits let it through, which takes their tokens. A refusal is marked on the admission span
//! and kept in the audit log (when one is kept). How a call may run as a task is decided here
//! too ([`task_mode`]).
//!
//! A request is charged once. When the short path admits a call and then finds it cannot send
//! it (the server's session expired), the full path answers the same request: the short path
//! marks it [`Charged`], and the full path's admission takes no tokens for it a second time.

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::model::{ErrorData, JsonObject, Tool};
use switchboard_core::exposure::Exposed;
use switchboard_core::{Caller, TaskMode};
use switchboard_hub::{ExposedCatalog, Hub, ServerView};

use super::{OnTheWire, SessionState, conversation, trace_error};
use switchboard_core::sync::lock;

/// Marks a request whose call the short path admitted (its rate-limit tokens are taken) and
/// then handed to the full path. Put in the request's extensions by the short path only, so no
/// client can set it; one request carries one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Charged;

/// The admission of calls made by one request: the hub, the request's session (if it has one)
/// and its HTTP request (none on standard input).
pub(super) struct Admission<'a> {
    hub: &'a Hub,
    session: Option<&'a SessionState>,
    parts: Option<&'a Parts>,
}

impl<'a> Admission<'a> {
    /// The admission of calls in `session`'s request `parts`.
    pub(super) fn new(
        hub: &'a Hub,
        session: Option<&'a SessionState>,
        parts: Option<&'a Parts>,
    ) -> Self {
        Self {
            hub,
            session,
            parts,
        }
    }

    /// The tool called `exposed`, if the request's endpoint includes it: "unknown tool"
    /// otherwise, as for a tool no server has.
    pub(super) fn tool<'c>(
        &self,
        catalog: &'c ExposedCatalog,
        exposed: &str,
    ) -> Result<&'c Exposed<Tool>, ErrorData> {
        let boundary = session_boundary(self.hub, self.session, self.parts)
            .map_err(|e| ErrorData::invalid_request(e, None))?;
        catalog
            .tools
            .get(exposed)
            .filter(|tool| boundary.includes_tool(tool.server.as_str(), &tool.upstream))
            .ok_or_else(|| ErrorData::invalid_params(format!("unknown tool '{exposed}'"), None))
    }

    /// Admits a call of `tool` (exposed as `exposed`, on `server`: `None` when the hub no longer
    /// runs it) by `caller` with `arguments`, inside `span` (the admission's): on for the
    /// conversation, allowed for the caller, within the rate limits. A refusal is marked on
    /// `span` and audited.
    pub(super) fn admit(
        &self,
        tool: &Exposed<Tool>,
        server: Option<&ServerView>,
        exposed: &str,
        caller: Result<Caller, ErrorData>,
        arguments: Option<&JsonObject>,
        span: &tracing::Span,
    ) -> Result<(), ErrorData> {
        let admitted = span.in_scope(|| self.check(tool, server, exposed, caller));
        if let Err(error) = &admitted {
            trace_error(span, error);
            self.audit_refusal(tool, exposed, arguments, error);
        }
        admitted
    }

    fn check(
        &self,
        tool: &Exposed<Tool>,
        server: Option<&ServerView>,
        exposed: &str,
        caller: Result<Caller, ErrorData>,
    ) -> Result<(), ErrorData> {
        let activity = self.activity()?;
        if let Some((false, layer)) = activity.layers().decision(tool.server.as_str(), exposed) {
            return Err(ErrorData::invalid_params(
                format!(
                    "tool '{exposed}' is turned off for this conversation (by the {layer}'s \
                     activation); turn it or its server '{}' on first",
                    tool.server
                ),
                None,
            ));
        }
        let caller = caller?;
        if let Some(server) = server {
            server
                .check_caller(&tool.upstream, &caller)
                .map_err(|error| error.json_rpc())?;
        }
        if self.charged() {
            return Ok(());
        }
        let client = || Some(conversation::client_of(self.parts).to_string());
        match server {
            Some(server) => self.hub.admit_call_to(server, &tool.upstream, client),
            None => self.hub.admit_call(&tool.server, &tool.upstream, client),
        }
        .map_err(|error| error.json_rpc())
    }

    /// Whether the short path already took this request's rate-limit tokens.
    fn charged(&self) -> bool {
        self.parts
            .is_some_and(|parts| parts.extensions.get::<Charged>().is_some())
    }

    /// What decides which tools are on for the request's conversation.
    pub(super) fn activity(&self) -> Result<conversation::Activity, ErrorData> {
        let boundary = session_boundary(self.hub, self.session, self.parts)
            .map_err(|e| ErrorData::invalid_request(e, None))?;
        let named = match self.session {
            Some(session) => session_conversation(session, self.parts),
            None => conversation::named_by(self.parts),
        }
        .map_err(|e| ErrorData::invalid_params(e, None))?;
        let own = self
            .session
            .map(|session| lock(&session.own_activation).clone())
            .unwrap_or_default();
        Ok(conversation::Activity::of(self.hub, boundary, named, own))
    }

    /// Records in the audit log (when one is kept) that a call of `tool` with `arguments` was
    /// refused with `error`, before or after admission.
    pub(super) fn audit_refusal(
        &self,
        tool: &Exposed<Tool>,
        exposed: &str,
        arguments: Option<&JsonObject>,
        error: &ErrorData,
    ) {
        if let Some(origin) = self.origin(exposed, arguments) {
            self.hub
                .audit_refused_call(&tool.server, &tool.upstream, origin, &error.message);
        }
    }

    /// Where a call of `exposed` with `arguments` came in, for its audit record; `None`,
    /// computing nothing, when the hub keeps no audit log. The client is named by its
    /// `clientInfo` and by who the access checks verified it is.
    pub(super) fn origin(
        &self,
        exposed: &str,
        arguments: Option<&JsonObject>,
    ) -> Option<Arc<switchboard_core::CallOrigin>> {
        if !self.hub.audits() {
            return None;
        }
        let verified = conversation::client_of(self.parts);
        let client = match self.session {
            Some(session) => session.audit_client(verified),
            None => verified,
        };
        let endpoint = match self.session.and_then(|session| session.endpoint.get()) {
            Some(bound) => bound.as_deref(),
            None => crate::endpoints::endpoint_of(self.parts),
        };
        self.hub.call_origin(
            door_of(self.parts),
            endpoint,
            Some(client),
            exposed,
            arguments,
        )
    }
}

/// How a call of `tool` (exposed as `exposed`, on `server`: `None` when the hub no longer runs it)
/// runs for a client that does or does not take tasks (`takes_tasks`), with or without guardrails
/// on its server (`guarded`: their result check needs the result here, so such a call runs to its
/// result); an error when it cannot run at all. The short path takes only calls that run to their
/// result ([`TaskMode::Forbidden`]).
pub(super) fn task_mode(
    server: Option<&ServerView>,
    tool: &Exposed<Tool>,
    exposed: &str,
    takes_tasks: bool,
    guarded: bool,
) -> Result<TaskMode, ErrorData> {
    let mode = server.map_or_else(TaskMode::default, |server| server.task_mode(&tool.upstream));
    Ok(match mode {
        TaskMode::Required if guarded => {
            return Err(ErrorData::invalid_params(
                format!(
                    "tool '{exposed}' runs only as a task, and its server's guardrails check \
                     every result: it cannot be called through Switchboard"
                ),
                None,
            ));
        }
        _ if guarded => TaskMode::Forbidden,
        TaskMode::Required if !takes_tasks => {
            return Err(ErrorData::missing_required_client_capability(
                rmcp::model::ClientCapabilities::builder()
                    .enable_tasks()
                    .build(),
            ));
        }
        _ if !takes_tasks => TaskMode::Forbidden,
        mode => mode,
    })
}

/// What a request (in `session`, if it has one) may reach: the boundary of the endpoint it was
/// sent to, which must be its session's; or why it may reach nothing. A request on standard
/// input (no `parts`) has no path: its session's endpoint is the one it was started for.
pub(super) fn session_boundary(
    hub: &Hub,
    session: Option<&SessionState>,
    parts: Option<&Parts>,
) -> Result<conversation::Boundary, String> {
    let Some(parts) = parts else {
        let bound = session.and_then(|session| session.endpoint.get().cloned().flatten());
        return Ok(conversation::Boundary::of(hub, bound.as_deref()));
    };
    let named = crate::endpoints::endpoint_of(Some(parts));
    if let Some(session) = session {
        let first = session.endpoint.get_or_init(|| named.map(str::to_owned));
        if first.as_deref() != named {
            return Err(match first {
                Some(endpoint) => format!(
                    "this session was opened at endpoint '{endpoint}': send its requests there"
                ),
                None => "this session was opened at the workspace's own door, not an endpoint: \
                         open another session at the endpoint"
                    .to_owned(),
            });
        }
    }
    Ok(conversation::Boundary::of(hub, named))
}

/// The conversation a request in `session` belongs to: what `parts` name (remembered as the
/// session's, the first time; naming another later is refused), else what the session named.
pub(super) fn session_conversation(
    session: &SessionState,
    parts: Option<&Parts>,
) -> Result<conversation::Conversation, String> {
    let named = conversation::named_by(parts)?;
    if named.is_unnamed() {
        return Ok(session.conversation.get().cloned().unwrap_or_default());
    }
    // A session belongs to one conversation: the one its client named first.
    let first = session.conversation.get_or_init(|| named.clone());
    if *first != named {
        return Err(format!(
            "this session belongs to {}; a session cannot change conversations (start another)",
            first.describe()
        ));
    }
    Ok(named)
}

/// The door a request came in at, as the audit log names it: `sse` for HTTP+SSE, `stdio` for
/// standard input (no HTTP request), `mcp` for Streamable HTTP.
fn door_of(parts: Option<&Parts>) -> &'static str {
    match parts.map(|parts| parts.uri.path()) {
        None => "stdio",
        Some(path) if path.starts_with("/sse") || path.starts_with("/message") => "sse",
        Some(_) => "mcp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_the_first_conversation_it_names() {
        let parts = |user: &str| {
            axum::http::Request::builder()
                .header(conversation::USER_HEADER, user)
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        let session = SessionState::default();
        assert!(session_conversation(&session, None).unwrap().is_unnamed());
        let ana = session_conversation(&session, Some(&parts("ana"))).unwrap();
        assert_eq!(ana.user.as_deref(), Some("ana"));
        // Later requests that name nothing are Ana's; one that names Bob is refused.
        assert_eq!(session_conversation(&session, None).unwrap(), ana);
        let refused = session_conversation(&session, Some(&parts("bob"))).unwrap_err();
        assert!(refused.contains("user 'ana'"), "{refused}");
    }
}
