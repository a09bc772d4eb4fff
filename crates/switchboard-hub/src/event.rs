//! What the hub tells the world: server status and events on the bus.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use switchboard_core::{ConnectionState, ServerDefinition, ServerId};

/// Every server's status and what the merged names need, as `switchboard status` and
/// `GET /api/status` show them.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    /// Switchboard's version.
    pub version: &'static str,
    /// Every server, ordered by id.
    pub servers: Vec<ServerStatus>,
    /// Names more than one server exposes, withheld from the aggregated MCP server.
    pub collisions: Vec<switchboard_core::exposure::Collision>,
    /// Tools exposed under another name than their server's, which is not a valid tool name.
    pub renamed: Vec<crate::Renamed>,
    /// What to do about the names, in words, one line each ([`crate::ExposedCatalog::advice`]).
    pub advice: Vec<String>,
}

/// The current status of one server, as `switchboard status` and `/api/status` show it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServerStatus {
    /// The server.
    pub server: ServerId,
    /// Its display name.
    pub display_name: String,
    /// `http`, `websocket` or `stdio`.
    pub transport: &'static str,
    /// The URL (password and query values redacted) or command line.
    pub target: String,
    /// Connection state.
    pub state: ConnectionState,
    /// For HTTP: which transport the probe found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected_transport: Option<&'static str>,
    /// The negotiated protocol version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The server's self-reported name and version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<String>,
    /// What is wrong, in plain words, when the state is not healthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Scopes a call was refused for lacking (403 `insufficient_scope`) with nobody at hand to
    /// grant them, space-separated, with the ones granted before: the next sign-in
    /// (`switchboard login <id>`, or `POST /api/servers/{id}/login`) asks for them. Cleared once
    /// a sign-in granted them. The server stays connected meanwhile; its other calls go on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_scope: Option<String>,
    /// Number of (enabled) tools.
    pub tools: usize,
    /// Number of resources.
    pub resources: usize,
    /// Number of resource templates.
    pub resource_templates: usize,
    /// Number of prompts.
    pub prompts: usize,
    /// Consecutive failed attempts since the last success.
    pub failures: u32,
    /// Not connected yet, by choice (`serve --lazy`): the first request that needs the server
    /// connects it; its last known catalog is served meanwhile.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub connects_on_first_use: bool,
    /// The prefix of its exposed names (empty: names unchanged).
    pub prefix: String,
    /// Names it shares with other servers, withheld from the merged catalog.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub collisions: Vec<switchboard_core::exposure::Collision>,
    /// When the state last changed (ms since the Unix epoch).
    pub since_ms: u64,
}

impl ServerStatus {
    pub(crate) fn new(def: &ServerDefinition) -> Self {
        Self {
            server: def.id.clone(),
            display_name: def.display_name.clone(),
            transport: def.transport.kind(),
            target: def.transport.display_target(),
            state: ConnectionState::Disconnected,
            detected_transport: None,
            protocol_version: None,
            server_info: None,
            error: None,
            needs_scope: None,
            tools: 0,
            resources: 0,
            resource_templates: 0,
            prompts: 0,
            failures: 0,
            connects_on_first_use: false,
            prefix: def.exposed_prefix().to_string(),
            collisions: Vec::new(),
            since_ms: now_ms(),
        }
    }

    /// Whether the server has finished trying for now: connected, or failed, or waiting for
    /// the user.
    pub fn is_settled(&self) -> bool {
        match self.state {
            ConnectionState::Connected
            | ConnectionState::NeedsAuth
            | ConnectionState::InvalidToken => true,
            ConnectionState::Error | ConnectionState::Reconnecting => self.failures > 0,
            ConnectionState::Disconnected => self.connects_on_first_use,
            _ => false,
        }
    }
}

/// What the hub did about a changed configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigChange {
    /// Added or enabled: started.
    Started,
    /// Its connection changed (URL, command, headers, credentials, timeouts): restarted
    /// with the new definition.
    Restarted,
    /// Something else changed (names, tool settings, policies, task modes, rate limits):
    /// applied to the running connection, whose calls go on.
    Changed,
    /// Removed or disabled: stopped.
    Stopped,
    /// Written while disabled (added disabled, or changed while off): nothing runs.
    Stored,
}

/// An event on the hub's bus.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HubEvent {
    /// A server changed state.
    StateChanged {
        /// The server.
        server: ServerId,
        /// Previous state.
        from: ConnectionState,
        /// New state.
        to: ConnectionState,
        /// The reason, for error states.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The configuration of a server changed and the hub acted on it.
    Configured {
        /// The server.
        server: ServerId,
        /// What the hub did.
        change: ConfigChange,
    },
    /// A tool call finished (through `/mcp`, `switchboard stdio` or the admin API); sent on
    /// [`Hub::subscribe_calls`](crate::Hub::subscribe_calls), not the main bus.
    ToolCalled {
        /// The server.
        server: ServerId,
        /// The tool, by its name at the server.
        tool: String,
        /// How it ended.
        outcome: switchboard_upstream::CallOutcome,
        /// How long it took, in milliseconds.
        elapsed_ms: f64,
    },
    /// A call was refused for lack of scope (`scope`: what the next sign-in asks for), or a
    /// sign-in granted it (`scope` absent): the server's `needs_scope` changed.
    ScopeNeeded {
        /// The server.
        server: ServerId,
        /// The scopes wanted, space-separated; absent once granted.
        #[serde(skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
    },
    /// A server's tools, resources or prompts changed.
    CatalogChanged {
        /// The server.
        server: ServerId,
    },
    /// A resource the server was subscribed to changed (`uri` as the server names it).
    ResourceUpdated {
        /// The server.
        server: ServerId,
        /// The resource.
        uri: String,
    },
    /// An activation layer changed (`app`, `user:<id>` or `thread:<id>`): the tools its
    /// conversations see may have changed.
    ActivationChanged {
        /// The layer.
        scope: String,
    },
    /// A tool's definition is not the one approved (first seen, or accepted): `held` when it is
    /// kept from clients until someone accepts it.
    ToolDefinitionChanged {
        /// The server.
        server: ServerId,
        /// The tool, by its name at the server.
        tool: String,
        /// Whether it is held back.
        held: bool,
    },
    /// An endpoint was defined, changed or removed: what its clients see may have changed.
    EndpointChanged {
        /// The endpoint.
        name: String,
    },
    /// A server sent a log message.
    Log {
        /// The server.
        server: ServerId,
        /// Level.
        level: String,
        /// The server's logger name, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        logger: Option<String>,
        /// Payload.
        data: serde_json::Value,
        /// Whether it went to the client whose request it belongs to (otherwise it is the
        /// server's own, unsolicited).
        to_caller: bool,
    },
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
