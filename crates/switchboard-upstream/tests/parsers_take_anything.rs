//! Every parser that takes input from the network or a file, fed whatever property testing makes
//! of it (random bytes, and valid inputs cut, flipped and spliced): none panics, each stays
//! within its bounds, and the relay's fast JSON-RPC decoder decodes exactly what rmcp's own
//! decoding does.
//!
//! A bounded run is part of `scripts/test` (`PROPTEST_CASES`, 512 per property unless set); the
//! longer run reported in `docs/security.md` is the same file with `PROPTEST_CASES=100000`.

use bytes::Bytes;
use futures::StreamExt;
use proptest::prelude::*;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use switchboard_upstream::{bounded_sse, wire};

/// Valid messages to start from.
const CLIENT_MESSAGES: [&str; 6] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":"p1"}}}"#,
    r#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"cursor":"c"}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"x"}}"#,
    r#"{"jsonrpc":"2.0","id":2,"result":{"action":"accept","content":{"name":"ada"}}}"#,
    r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#,
    r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
];

const SERVER_MESSAGES: [&str; 5] = [
    r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
    r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"s"}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1","progress":1,"total":2}}"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"q","requestedSchema":{"type":"object","properties":{"n":{"type":"string"}}}}}"#,
    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}"#,
];

const CONFIGS: [&str; 3] = [
    r#"{"mcpServers": {"everything": {"command": "npx", "args": ["-y", "x"], "env": {"API_KEY": "k"}},
        "web": {"url": "https://web.test/mcp", "headers": {"Authorization": "Bearer t"}},
        "mine": {"approvedCommand": "fixture", "env": {"FIXTURE_MARK": "m"}}}}"#,
    "[servers.notes]\nurl = \"https://notes.test/mcp\"\n[servers.local]\ncommand = \"node\"\nargs = [\"s.js\"]\n",
    r#"{"servers": {"a": {"type": "stdio", "command": "a", "cwd": "/tmp", "timeouts": {"request_ms": 5}}}}"#,
];

const CHALLENGES: [&str; 3] = [
    r#"Bearer realm="mcp", error="insufficient_scope", scope="a b", resource_metadata="https://r.test/.well-known/oauth-protected-resource""#,
    r#"DPoP algs="ES256", error="use_dpop_nonce", Bearer error="invalid_token""#,
    r#"Basic realm="x", Bearer scope="files:read""#,
];

/// A valid input cut, with bytes flipped and a piece of another spliced in.
fn mutated(seeds: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(seeds),
        prop::sample::select(seeds),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(seed, other, flips, cut, from, to)| {
            let mut bytes = seed.as_bytes().to_vec();
            for (at, byte) in flips {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            let other = other.as_bytes();
            let (a, b) = (from.index(other.len()), to.index(other.len()));
            let piece = &other[a.min(b)..a.max(b)];
            let at = cut.index(bytes.len() + 1);
            bytes.splice(at..at, piece.iter().copied());
            bytes
        })
}

/// Some input: random bytes, random text, or a mutated valid one.
fn input(seeds: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        ".{0,300}".prop_map(String::into_bytes),
        mutated(seeds),
        mutated(seeds),
    ]
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(512);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// The relay's fast decoder of a client's message takes anything, and decodes exactly what
    /// rmcp's own decoding decodes (the same message, or an error both times).
    #[test]
    fn the_fast_client_decoder_agrees_with_rmcps(body in input(&CLIENT_MESSAGES)) {
        let fast = wire::client_message(&body);
        let rmcp = serde_json::from_slice::<ClientJsonRpcMessage>(&body);
        match (&fast, &rmcp) {
            (Ok(fast), Ok(rmcp)) => prop_assert_eq!(
                serde_json::to_value(fast).unwrap(),
                serde_json::to_value(rmcp).unwrap()
            ),
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "they disagree on {:?}: fast {:?}, rmcp {:?}",
                String::from_utf8_lossy(&body), fast.is_ok(), rmcp.is_ok()),
        }
    }

    /// A client's message that decodes is encoded again to the bytes rmcp encodes it to.
    #[test]
    fn the_fast_client_encoder_agrees_with_rmcps(body in input(&CLIENT_MESSAGES)) {
        if let Ok(message) = wire::client_message(&body) {
            prop_assert_eq!(
                wire::encode_client_message(&message).unwrap(),
                serde_json::to_vec(&message).unwrap()
            );
        }
    }

    /// The same for a server's answer to a call, and the message transports' decoding takes
    /// anything.
    #[test]
    fn the_fast_reply_decoder_agrees_with_rmcps(body in input(&SERVER_MESSAGES)) {
        let text = String::from_utf8_lossy(&body);
        let fast = wire::call_reply(&text);
        let rmcp = serde_json::from_str::<ServerJsonRpcMessage>(&text);
        match (&fast, &rmcp) {
            (Ok(fast), Ok(rmcp)) => prop_assert_eq!(
                serde_json::to_value(fast).unwrap(),
                serde_json::to_value(rmcp).unwrap()
            ),
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "they disagree on {:?}", text),
        }
        let _ = wire::decode_server_message(&text, "fuzzed");
    }

    /// SSE in any chunks: events come out whole or the stream fails, never an event over the
    /// bound, never a panic.
    #[test]
    fn sse_in_any_chunks_stays_within_its_bound(
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..2048),
            "(data: [^\r\n]{0,80}\r?\n|event: [a-z]{0,8}\n|id: [0-9a-z]{0,8}\n|retry: [0-9]{0,6}\n|: [^\n]{0,20}\n|\r?\n){0,40}"
                .prop_map(String::into_bytes),
        ],
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for end in at.into_iter().chain([body.len()]) {
            chunks.push(Ok::<_, std::io::Error>(Bytes::copy_from_slice(&body[start..end])));
            start = end;
        }
        const MAX: usize = 256;
        let events = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(bounded_sse(futures::stream::iter(chunks), MAX).collect::<Vec<_>>());
        for event in events.into_iter().flatten() {
            prop_assert!(event.data.as_deref().map_or(0, str::len) <= MAX);
        }
    }

    /// `WWW-Authenticate` from a server or an authorization server: parsed or ignored.
    #[test]
    fn challenges_of_any_shape_are_parsed_or_ignored(header in input(&CHALLENGES)) {
        let text = String::from_utf8_lossy(&header);
        let _ = switchboard_oauth::BearerChallenge::from_header_values([text.as_ref()]);
        if let Ok(value) = http::HeaderValue::from_bytes(&header) {
            let mut headers = http::HeaderMap::new();
            headers.insert(http::header::WWW_AUTHENTICATE, value);
            let _ = switchboard_oauth::BearerChallenge::from_headers(&headers);
        }
    }

    /// OAuth metadata documents of any shape: read or refused, and their `resource` compared
    /// with a server's URL without panicking.
    #[test]
    fn oauth_metadata_of_any_shape_is_read_or_refused(body in input(&[
        r#"{"issuer":"https://as.test","authorization_endpoint":"https://as.test/a","token_endpoint":"https://as.test/t","code_challenge_methods_supported":["S256"]}"#,
        r#"{"resource":"https://mcp.test/mcp","authorization_servers":["https://as.test"],"scopes_supported":["a"]}"#,
    ])) {
        let _ = serde_json::from_slice::<switchboard_oauth::AuthorizationServerMetadata>(&body);
        if let Ok(resource) = serde_json::from_slice::<switchboard_oauth::ProtectedResourceMetadata>(&body) {
            let server = url::Url::parse("https://mcp.test/mcp").unwrap();
            let _ = switchboard_oauth::resource_matches(&resource.resource, &server);
        }
    }

    /// Configuration files of any shape (imports come from people and from pages): each entry
    /// imported as a valid definition or skipped with a reason.
    #[test]
    fn configuration_of_any_shape_is_imported_or_refused(text in input(&CONFIGS)) {
        let text = String::from_utf8_lossy(&text);
        if let Ok(report) = switchboard_core::config::parse_any(&text) {
            for def in report.servers {
                prop_assert!(switchboard_core::ServerId::new(def.id.as_str()).is_ok());
            }
            for (_, reason) in report.skipped {
                prop_assert!(!reason.is_empty());
            }
        }
    }
}

/// Found by the long run of `sse_in_any_chunks_stays_within_its_bound` (2026-11-27): cut after
/// its byte 439, these 703 bytes made the SSE parser give out an event of 305 bytes past a bound
/// of 256 (after a "duplicated id line" error it no longer ended events where the byte counter,
/// which reset at blank lines, thought they ended).
#[tokio::test]
async fn an_event_the_parser_joins_after_an_error_stays_within_the_bound() {
    let body = include_bytes!("data/sse-split-event.bin");
    let chunks = vec![
        Ok::<_, std::io::Error>(Bytes::from_static(&body[..439])),
        Ok(Bytes::from_static(&body[439..])),
    ];
    let events: Vec<_> = bounded_sse(futures::stream::iter(chunks), 256)
        .collect()
        .await;
    for event in events.into_iter().flatten() {
        assert!(event.data.as_deref().map_or(0, str::len) <= 256);
    }
}
