//! Whose conversation a request belongs to, for activation layers (which servers and tools are
//! on): the user (`X-Switchboard-User`) and the thread (`X-Switchboard-Thread`, or `?thread=`
//! on the endpoint's URL, for clients that cannot set headers). A session that names no thread
//! is its own thread, with a layer of its own that ends with it.
//!
//! Until API keys tie requests to principals, the user is what the app declares, like the
//! caller of `allowed_callers`: it separates an app's own users, it authenticates nobody.

use std::sync::Arc;

use switchboard_core::activation::valid_conversation_id;
use switchboard_core::exposure::Exposed;
use switchboard_core::{Activation, Endpoint, Layers};
use switchboard_hub::{ConversationLayers, Hub};

/// The header naming the user.
pub(crate) const USER_HEADER: axum::http::HeaderName =
    axum::http::HeaderName::from_static(switchboard_core::wire_names::USER_HEADER);

/// The header naming the thread.
pub(crate) const THREAD_HEADER: axum::http::HeaderName =
    axum::http::HeaderName::from_static(switchboard_core::wire_names::THREAD_HEADER);

/// A request's user and thread, as far as it names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Conversation {
    pub(crate) user: Option<String>,
    pub(crate) thread: Option<String>,
}

impl Conversation {
    /// Whether the request names neither.
    pub(crate) fn is_unnamed(&self) -> bool {
        self.user.is_none() && self.thread.is_none()
    }

    /// "user 'ana', thread 't1'", as far as it is named.
    pub(crate) fn describe(&self) -> String {
        let named: Vec<String> = [("user", &self.user), ("thread", &self.thread)]
            .into_iter()
            .filter_map(|(kind, id)| id.as_ref().map(|id| format!("{kind} '{id}'")))
            .collect();
        if named.is_empty() {
            "no named conversation".to_owned()
        } else {
            named.join(", ")
        }
    }
}

/// What a request may reach at all: everything (the workspace's `/mcp`), or what the endpoint
/// it was sent to includes. Layers choose inside it; nothing turns on what it leaves out.
#[derive(Debug, Clone)]
pub(crate) enum Boundary {
    /// No endpoint: every server and tool of the workspace.
    Everything,
    /// The endpoint's servers and tools, as defined now.
    Endpoint(Arc<Endpoint>),
    /// An endpoint that is no longer there: nothing.
    Removed,
}

impl Boundary {
    /// The items of `table` whose server is inside the boundary, as clients see them.
    pub(crate) fn items_of<T: Clone>(
        &self,
        table: &switchboard_core::exposure::NameTable<T>,
    ) -> Vec<T> {
        table
            .iter()
            .filter(|exposed| self.includes_server(exposed.server.as_str()))
            .map(|exposed| exposed.item.clone())
            .collect()
    }

    /// The boundary of the endpoint `name` as `hub` defines it now (`None`: no endpoint).
    pub(crate) fn of(hub: &Hub, name: Option<&str>) -> Self {
        match name {
            None => Self::Everything,
            Some(name) => hub.endpoint(name).map_or(Self::Removed, Self::Endpoint),
        }
    }

    /// Whether it includes `server` (its prompts, resources and any of its tools).
    pub(crate) fn includes_server(&self, server: &str) -> bool {
        match self {
            Self::Everything => true,
            Self::Endpoint(endpoint) => endpoint.includes_server(server),
            Self::Removed => false,
        }
    }

    /// Whether it includes `tool` (the server's own name) of `server`.
    pub(crate) fn includes_tool(&self, server: &str, tool: &str) -> bool {
        match self {
            Self::Everything => true,
            Self::Endpoint(endpoint) => endpoint.includes_tool(server, tool),
            Self::Removed => false,
        }
    }

    /// Whether it leaves anything out.
    pub(crate) fn is_everything(&self) -> bool {
        matches!(self, Self::Everything)
    }
}

/// What decides which tools are on for one request: the boundary of the endpoint it came
/// through, the hub's layers for its conversation, and its session's own layer.
pub(crate) struct Activity {
    boundary: Boundary,
    layers: ConversationLayers,
    own: Activation,
}

impl Activity {
    /// The layers of `conversation` now, with `own` (its session's layer) as the thread's when
    /// it names no thread, inside `boundary`.
    pub(crate) fn of(
        hub: &Hub,
        boundary: Boundary,
        conversation: Conversation,
        own: Activation,
    ) -> Self {
        let layers =
            hub.conversation_layers(conversation.user.as_deref(), conversation.thread.as_deref());
        let own = if conversation.thread.is_none() {
            own
        } else {
            Activation::default()
        };
        Self {
            boundary,
            layers,
            own,
        }
    }

    /// The layers, narrowest deciding.
    pub(crate) fn layers(&self) -> Layers<'_> {
        self.layers.with_own(Some(&self.own))
    }

    /// What the request may reach at all.
    pub(crate) fn boundary(&self) -> &Boundary {
        &self.boundary
    }

    /// Whether `tool` of the merged catalog is on: inside the boundary, and on by the layers.
    pub(crate) fn is_on(&self, tool: &Exposed<rmcp::model::Tool>) -> bool {
        self.boundary
            .includes_tool(tool.server.as_str(), &tool.upstream)
            && self
                .layers()
                .is_active(tool.server.as_str(), tool.item.name.as_ref())
    }

    /// Whether a change of the layer `scope` (as the hub names it) concerns this conversation.
    pub(crate) fn concerns(conversation: &Conversation, scope: &str) -> bool {
        scope == "app"
            || conversation
                .user
                .as_ref()
                .is_some_and(|user| scope == format!("user:{user}"))
            || conversation
                .thread
                .as_ref()
                .is_some_and(|thread| scope == format!("thread:{thread}"))
    }
}

/// The value of `key` in the query of `parts`' URL, decoded.
pub(crate) fn query_param(parts: &axum::http::request::Parts, key: &str) -> Option<String> {
    url::form_urlencoded::parse(parts.uri.query()?.as_bytes())
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.into_owned())
}

/// The user and thread `parts` name (headers first, then the URL's query), or what is wrong
/// with them.
pub(crate) fn named_by(parts: Option<&axum::http::request::Parts>) -> Result<Conversation, String> {
    let Some(parts) = parts else {
        return Ok(Conversation::default());
    };
    let read = |header: axum::http::HeaderName, key: &str| -> Result<Option<String>, String> {
        let value = match parts.headers.get(&header) {
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| format!("the {header} header is not text"))?
                    .trim()
                    .to_owned(),
            ),
            None => query_param(parts, key),
        };
        match value {
            Some(id) if !valid_conversation_id(&id) => Err(format!(
                "'{id}' is not a valid {key} id (1 to 128 of A-Z a-z 0-9 . _ : @ + | -)"
            )),
            other => Ok(other),
        }
    };
    Ok(Conversation {
        user: read(USER_HEADER, "user")?,
        thread: read(THREAD_HEADER, "thread")?,
    })
}

/// Who a request comes from, as the access checks established it: a user of a multi-user daemon,
/// or the holder of a checked API key. Only the front door's own checks put it on a request (a
/// client cannot: it is no header), so a rate limit keyed on it cannot be dodged by naming
/// someone else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedClient(pub String);

/// The address a request came from, as [`client_of`] names it (`address 127.0.0.1`): named once
/// for its connection by the listener, which puts it on every request of the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddress(Arc<str>);

impl ClientAddress {
    /// The client at `address`.
    pub fn of(address: std::net::IpAddr) -> Self {
        Self(format!("address {address}").into())
    }
}

/// Who a request comes from, for the per-client rate limit and the audit log: the user or key
/// the access checks verified, else the address it came from, else `anonymous`; `stdio` for the
/// client on standard input. Never what the request says of itself (`X-Switchboard-User`, a
/// session id, an unchecked key), which its sender could change on every call.
pub(crate) fn client_of(parts: Option<&axum::http::request::Parts>) -> Arc<str> {
    let Some(parts) = parts else {
        return Arc::from("stdio");
    };
    if let Some(VerifiedClient(client)) = parts.extensions.get::<VerifiedClient>() {
        return Arc::from(client.as_str());
    }
    match parts.extensions.get::<ClientAddress>() {
        Some(ClientAddress(address)) => address.clone(),
        None => Arc::from("anonymous"),
    }
}

/// How a checked API key names its holder for the rate limit: a digest's prefix, never the key.
pub(crate) fn key_holder(key: &str) -> VerifiedClient {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.trim().as_bytes());
    let prefix: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    VerifiedClient(format!("api key {prefix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uri: &str, headers: &[(&str, &str)]) -> axum::http::request::Parts {
        let mut request = axum::http::Request::builder().uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn a_request_names_its_user_and_thread_by_header_or_query() {
        assert!(named_by(None).unwrap().is_unnamed());
        let by_header = parts(
            "/mcp",
            &[
                (USER_HEADER.as_str(), "ana"),
                (THREAD_HEADER.as_str(), "t-1"),
            ],
        );
        assert_eq!(
            named_by(Some(&by_header)).unwrap(),
            Conversation {
                user: Some("ana".into()),
                thread: Some("t-1".into())
            }
        );
        let by_query = parts("/mcp?tools=deferred&thread=support%3A42", &[]);
        assert_eq!(
            named_by(Some(&by_query)).unwrap().thread.as_deref(),
            Some("support:42")
        );
        let bad = parts("/mcp?thread=a%20b", &[]);
        assert!(
            named_by(Some(&bad))
                .unwrap_err()
                .contains("not a valid thread id")
        );
    }

    #[test]
    fn a_client_is_who_the_access_checks_verified_else_its_address() {
        assert_eq!(&*client_of(None), "stdio");
        let mut claimed = parts(
            "/mcp",
            &[
                (USER_HEADER.as_str(), "ana"),
                ("authorization", "Bearer k"),
                ("mcp-session-id", "s"),
            ],
        );
        assert_eq!(
            &*client_of(Some(&claimed)),
            "anonymous",
            "a user named, a key not checked and a session are the caller's to choose"
        );
        claimed
            .extensions
            .insert(ClientAddress::of("127.0.0.1".parse().unwrap()));
        assert_eq!(&*client_of(Some(&claimed)), "address 127.0.0.1");
        claimed.extensions.insert(key_holder("secret-key-1"));
        let named = client_of(Some(&claimed));
        assert!(
            named.starts_with("api key ") && !named.contains("secret"),
            "{named}"
        );
        assert_ne!(
            key_holder("secret-key-2").0.as_str(),
            &*named,
            "each key its own client"
        );
        claimed
            .extensions
            .insert(VerifiedClient("user acme/ana".into()));
        assert_eq!(&*client_of(Some(&claimed)), "user acme/ana");
    }
}
