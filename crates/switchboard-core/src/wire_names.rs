//! Every name Switchboard invents on the wire, in one place.
//!
//! MCP and HTTP leave room for names of an implementation's own: `_meta` keys, request ids,
//! SSE event ids, headers, subprotocols. Whatever Switchboard puts there, a client, a server or
//! another part of Switchboard must spell the same way, so each name is written once, here, and
//! every crate that sends or reads it uses the constant. Nothing here allocates: the names are
//! `&'static str`, and [`EventId`] writes itself into whatever buffer its caller has.
//!
//! | Name | What it is | Sent by | Read by |
//! |---|---|---|---|
//! | [`CALLER_META`] `switchboard/caller` | `_meta` key of a `tools/call` naming who makes the call (`allowed_callers`) | the app | gateway (`mcp::caller`) |
//! | [`RELATED_REQUEST_META`] `dev.switchboard/relatedRequestId` | private `_meta` key tagging a server's message with the id of the call whose stream it came on | upstream (`input_requests::tag_related`) | upstream's handler, which removes it before relaying |
//! | [`SEQUENCE_META`] `dev.switchboard/sequence` | private `_meta` key numbering a call's log and progress notifications in arrival order | upstream (`tag_related`) | upstream (`InFlight::deliver`), removed before relaying |
//! | [`CALLER_HEADER`] `x-switchboard-caller` | header naming the caller for a whole connection | the app (a sandbox's connection) | gateway (`mcp::caller`) |
//! | [`USER_HEADER`] `x-switchboard-user` | header naming the user a request is for (activation layers) | the app; the gateway itself for a `--users` key's user | gateway (`mcp::conversation`, `workspaces`) |
//! | [`THREAD_HEADER`] `x-switchboard-thread` | header naming the conversation (thread) | the app or the model's host | gateway (`mcp::conversation`) |
//! | [`TOOLS_VIEW_HEADER`] `x-switchboard-tools` | header choosing the tools view (`deferred`, ...) | the client | gateway (`mcp::deferred`) |
//! | [`DIRECT_CALL_ID_PREFIX`] `switchboard-direct-N` | request id and progress token of a short-path call in an upstream session | upstream (`direct`) | the upstream server, which echoes it back |
//! | [`ROOTS_HANDOFF_ID_PREFIX`] `switchboard-roots-N` | id a call is registered under while it waits for a server to ask for roots; never sent | upstream (`input_requests`) | upstream (`InFlight::roots_handed_to`) |
//! | [`ASK_REQUEST_ID_PREFIX`] `switchboard-ask-N` | id of a request (elicitation, sampling, roots) the short path puts to a client | gateway (`mcp::short_path::questions`) | the client, whose answer carries it back |
//! | [`INPUT_KEY_PREFIX`] `input-N` | key of an `inputRequests` entry of an `input_required` result, for a question the server gave no key of its own | gateway (`mcp::exchange`) | the client, which answers under the same key |
//! | [`EVENT_ID_PREFIX`] `sb-<stream>-<index>` ([`EventId`]) | SSE event id of the short path's resumable streams | gateway (`mcp::short_path::resumable`) | the client, as `Last-Event-ID`; then the gateway |
//! | [`EVENTS_SUBPROTOCOL`] `switchboard` | WebSocket subprotocol of the console's event stream | the console | gateway (`events`) |
//! | [`BEARER_SUBPROTOCOL_PREFIX`] `bearer.<key>` | a WebSocket subprotocol carrying an API key (base64url), since a browser cannot set headers on a WebSocket | the console | gateway (`access`) |
//! | [`IMPLEMENTATION_NAME`] `switchboard` | the name in `clientInfo` and `serverInfo` | upstream (`connect`) and gateway (`mcp::server`) | servers and clients |
//!
//! Why they look as they do:
//!
//! - `_meta` keys take MCP's `prefix/name` form, so that none can be taken for a key of the
//!   protocol's own or of another implementation's. The key an app sends (`switchboard/caller`)
//!   has the short product name, which apps write by hand; the private keys only Switchboard
//!   writes and reads (`dev.switchboard/...`) have a reversed domain, so that no server's key
//!   can ever be taken for one of them (and removed before it is relayed).
//! - Headers take the `x-switchboard-` prefix, and are spelled in lower case, as HTTP/2 sends
//!   them and `HeaderName::from_static` requires.
//! - Request ids are strings that start with `switchboard-` and a word for what made them, then
//!   a number: they cannot collide with the numbers rmcp gives its own requests, nor with one
//!   another, and they say where they came from in a server's log.
//! - Event ids start with the short `sb-` (every event of a stream carries one), which tells a
//!   resumption of a short-path stream from one of rmcp's, whose ids start with a digit.

use std::fmt;

/// The `_meta` key a `tools/call` names its caller with (`allowed_callers`).
pub const CALLER_META: &str = "switchboard/caller";

/// The private `_meta` key carrying the id of the Switchboard request a server message arrived
/// with (on that request's response stream); removed before anything is relayed.
pub const RELATED_REQUEST_META: &str = "dev.switchboard/relatedRequestId";

/// The private `_meta` key numbering a call's counted notifications in the order they arrived;
/// removed before anything is relayed.
pub const SEQUENCE_META: &str = "dev.switchboard/sequence";

/// The header a connection names its caller with (`allowed_callers`).
pub const CALLER_HEADER: &str = "x-switchboard-caller";

/// The header naming the user a request is for (activation layers).
pub const USER_HEADER: &str = "x-switchboard-user";

/// The header naming the conversation (thread) a request belongs to (activation layers).
pub const THREAD_HEADER: &str = "x-switchboard-thread";

/// The header a client names its tools view with (`deferred`, ...).
pub const TOOLS_VIEW_HEADER: &str = "x-switchboard-tools";

/// The prefix of the request ids and progress tokens of direct calls in an upstream session,
/// followed by a number: rmcp's client numbers its own requests, so these never collide with
/// them.
pub const DIRECT_CALL_ID_PREFIX: &str = "switchboard-direct-";

/// The prefix of the ids under which calls wait for a server to ask for roots, followed by a
/// number. Never sent: it only has to differ from every id that is.
pub const ROOTS_HANDOFF_ID_PREFIX: &str = "switchboard-roots-";

/// The prefix of the ids of requests the short path puts to clients, followed by a number.
pub const ASK_REQUEST_ID_PREFIX: &str = "switchboard-ask-";

/// The prefix of the `inputRequests` keys Switchboard makes up for questions a server gave no
/// key of its own, followed by a number.
pub const INPUT_KEY_PREFIX: &str = "input-";

/// The prefix of the event ids of the short path's resumable streams ([`EventId`]).
pub const EVENT_ID_PREFIX: &str = "sb-";

/// The WebSocket subprotocol of the console's event stream.
pub const EVENTS_SUBPROTOCOL: &str = "switchboard";

/// The prefix of the WebSocket subprotocol that carries an API key (unpadded base64url after
/// it), offered beside [`EVENTS_SUBPROTOCOL`] by a browser, which cannot set headers on a
/// WebSocket.
pub const BEARER_SUBPROTOCOL_PREFIX: &str = "bearer.";

/// The name Switchboard gives itself in MCP's `clientInfo` and `serverInfo`.
pub const IMPLEMENTATION_NAME: &str = "switchboard";

/// The id of event `index` of stream `stream` on the short path: `sb-<stream>-<index>`.
/// Written with `Display` (into the caller's buffer, no allocation of its own) and read back
/// from a `Last-Event-ID` with [`EventId::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventId {
    /// The stream's number in its session.
    pub stream: u64,
    /// The event's number in its stream (0 is the priming event).
    pub index: usize,
}

impl EventId {
    /// The event id `text` names, or `None` when it is not one of the short path's (an id of
    /// rmcp's, or anything else).
    pub fn parse(text: &str) -> Option<Self> {
        let (stream, index) = text.strip_prefix(EVENT_ID_PREFIX)?.split_once('-')?;
        Some(Self {
            stream: stream.parse().ok()?,
            index: index.parse().ok()?,
        })
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{EVENT_ID_PREFIX}{}-{}", self.stream, self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_on_the_wire_keep_their_spelling() {
        // Clients, servers and older daemons know these strings: a change here breaks them.
        assert_eq!(CALLER_META, "switchboard/caller");
        assert_eq!(RELATED_REQUEST_META, "dev.switchboard/relatedRequestId");
        assert_eq!(SEQUENCE_META, "dev.switchboard/sequence");
        assert_eq!(CALLER_HEADER, "x-switchboard-caller");
        assert_eq!(USER_HEADER, "x-switchboard-user");
        assert_eq!(THREAD_HEADER, "x-switchboard-thread");
        assert_eq!(TOOLS_VIEW_HEADER, "x-switchboard-tools");
        assert_eq!(DIRECT_CALL_ID_PREFIX, "switchboard-direct-");
        assert_eq!(ROOTS_HANDOFF_ID_PREFIX, "switchboard-roots-");
        assert_eq!(ASK_REQUEST_ID_PREFIX, "switchboard-ask-");
        assert_eq!(INPUT_KEY_PREFIX, "input-");
        assert_eq!(EVENT_ID_PREFIX, "sb-");
        assert_eq!(EVENTS_SUBPROTOCOL, "switchboard");
        assert_eq!(BEARER_SUBPROTOCOL_PREFIX, "bearer.");
        assert_eq!(IMPLEMENTATION_NAME, "switchboard");
    }

    #[test]
    fn headers_are_lower_case_as_http2_sends_them() {
        for header in [CALLER_HEADER, USER_HEADER, THREAD_HEADER, TOOLS_VIEW_HEADER] {
            assert_eq!(header, header.to_ascii_lowercase());
        }
    }

    #[test]
    fn an_event_id_is_written_as_sb_stream_index_and_read_back() {
        let id = EventId {
            stream: 3,
            index: 17,
        };
        assert_eq!(id.to_string(), "sb-3-17");
        assert_eq!(EventId::parse("sb-3-17"), Some(id));
        let largest = EventId {
            stream: u64::MAX,
            index: usize::MAX,
        };
        assert_eq!(EventId::parse(&largest.to_string()), Some(largest));
    }

    #[test]
    fn ids_that_are_not_the_short_paths_are_not_read_as_event_ids() {
        for other in [
            "", "3", "17/0", "sb-", "sb-3", "sb-3-", "sb--1", "sb-x-1", "sb-3-1-2", "SB-3-1",
        ] {
            assert_eq!(EventId::parse(other), None, "{other}");
        }
    }
}
