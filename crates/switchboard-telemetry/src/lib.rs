//! Traces of relayed calls, for following one call from the MCP client through Switchboard to
//! the upstream server and back.
//!
//! A call that is slow or fails crosses three programs; an operator who runs a tracing backend
//! wants one trace of it, not three logs to line up by hand. So:
//!
//! - [`TraceContext`] is the W3C trace context (`traceparent`, `tracestate`) a request carries,
//!   read from its `_meta` (where MCP puts it, SEP-414) or else its HTTP headers, and only when
//!   it parses as W3C Trace Context says.
//! - [`server_span`], [`admission_span`] and [`exchange_span`] are the spans of a call: the
//!   client's request as Switchboard serves it (a child of the client's own span when it sent
//!   one), the checks that admit it, and the exchange with the upstream server. Their names and
//!   attributes follow OpenTelemetry's semantic conventions for MCP (`{mcp.method.name}
//!   {target}`, `mcp.method.name`, `gen_ai.tool.name`, `error.type`). They hold no arguments,
//!   results, session ids or people: traces often leave the operator's hands.
//! - [`TraceContext::outgoing`] is what the upstream server is given: the exchange span's own
//!   context while traces are exported, so the server's spans hang under it; otherwise the
//!   client's, passed through unchanged, as a proxy that takes no part in tracing does.
//! - [`export`] sends the spans over OTLP/HTTP when the operator names a collector.
//!
//! The spans are `tracing` spans under the target [`TARGET`]; only the export layer listens to
//! that target, so with no collector they are disabled at their call sites and cost a check.

pub mod export;

use http::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rmcp::model::MetaObject;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of every span this crate makes (and the only one exported).
pub const TARGET: &str = "switchboard::trace";

/// The W3C header (and `_meta` key) naming the caller's span.
pub const TRACEPARENT: &str = "traceparent";

/// The W3C header (and `_meta` key) carrying vendors' trace state.
pub const TRACESTATE: &str = "tracestate";

/// The longest `tracestate` passed on: W3C Trace Context asks that at least 512 characters be
/// propagated, and a value longer than that may be dropped.
const MAX_TRACESTATE: usize = 512;

/// A W3C trace context: the span a request was sent from, and vendors' state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// `traceparent`: version, trace id, parent span id and flags.
    pub traceparent: String,
    /// `tracestate`, when there is one.
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The context a request came with: its `_meta` keys, or else its HTTP headers. `None`
    /// when neither holds a valid `traceparent` (a malformed one is ignored, as W3C asks).
    pub fn incoming(meta: Option<&MetaObject>, headers: Option<&HeaderMap>) -> Option<Self> {
        let from_meta =
            meta.and_then(|meta| Self::checked(meta.get_traceparent()?, meta.get_tracestate()));
        from_meta.or_else(|| {
            let headers = headers?;
            let text = |name| headers.get(name).and_then(|value| value.to_str().ok());
            Self::checked(text(TRACEPARENT)?, text(TRACESTATE))
        })
    }

    /// The pair, when `traceparent` is valid; a `tracestate` that is malformed or too long
    /// is dropped and the parent kept.
    pub fn checked(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let tracestate = tracestate.filter(|state| valid_tracestate(state));
        let carrier = Pair {
            traceparent: Some(traceparent.trim().to_owned()),
            tracestate: tracestate.map(str::to_owned),
        };
        let context = TraceContextPropagator::new().extract(&carrier);
        let span = context.span();
        let parent = span.span_context();
        if !parent.is_valid() {
            return None;
        }
        let mut checked = Pair::default();
        TraceContextPropagator::new().inject_context(&context, &mut checked);
        Some(Self {
            traceparent: checked.traceparent?,
            tracestate: checked.tracestate.filter(|state| !state.is_empty()),
        })
    }

    /// What a request to an upstream server carries, made inside its [`exchange_span`]: that
    /// span's context while traces are exported, else `passed_on` (the client's) unchanged.
    pub fn outgoing(passed_on: Option<&TraceContext>) -> Option<TraceContext> {
        let current = Span::current();
        if !current.is_disabled() {
            let context = current.context();
            if context.span().span_context().is_valid() {
                let mut pair = Pair::default();
                TraceContextPropagator::new().inject_context(&context, &mut pair);
                if let Some(traceparent) = pair.traceparent {
                    return Some(TraceContext {
                        traceparent,
                        tracestate: pair.tracestate.filter(|state| !state.is_empty()),
                    });
                }
            }
        }
        passed_on.cloned()
    }

    /// Puts the context in a request's `_meta`, replacing any there.
    pub fn write_to(&self, meta: &mut MetaObject) {
        meta.set_traceparent(self.traceparent.clone());
        match &self.tracestate {
            Some(state) => meta.set_tracestate(state.clone()),
            None => {
                meta.remove(TRACESTATE);
            }
        }
    }

    /// The context of this message's `_meta` as HTTP headers, for the request carrying it:
    /// HTTP-level tracing (a collector's proxy, the server's HTTP middleware) sees the same
    /// parent as the MCP server does.
    pub fn headers_of(meta: &MetaObject) -> Vec<(http::HeaderName, http::HeaderValue)> {
        let Some(context) = meta
            .get_traceparent()
            .and_then(|parent| Self::checked(parent, meta.get_tracestate()))
        else {
            return Vec::new();
        };
        [
            (TRACEPARENT, Some(context.traceparent)),
            (TRACESTATE, context.tracestate),
        ]
        .into_iter()
        .filter_map(|(name, value)| {
            let value = http::HeaderValue::from_str(&value?).ok()?;
            Some((http::HeaderName::from_static(name), value))
        })
        .collect()
    }

    /// The OpenTelemetry context naming this as the remote parent.
    fn parent(&self) -> opentelemetry::Context {
        TraceContextPropagator::new().extract(&Pair {
            traceparent: Some(self.traceparent.clone()),
            tracestate: self.tracestate.clone(),
        })
    }
}

/// Whether `state` is a `tracestate` W3C Trace Context allows: at most 32 `key=value` members
/// (empty ones skipped), keys of lower-case letters, digits and `_-*/` (with one `@` for a
/// tenant), values of printable ASCII without `,` or `=` and not ending in a space; at most
/// [`MAX_TRACESTATE`] characters in all. Checked here because the SDK's parser takes
/// malformed members, and what is not checked would be passed on to servers.
fn valid_tracestate(state: &str) -> bool {
    let key_char = |c: char| matches!(c, 'a'..='z' | '0'..='9' | '_' | '-' | '*' | '/');
    let valid_key = |key: &str| {
        let (tenant, system) = match key.split_once('@') {
            Some((tenant, system)) => (tenant, Some(system)),
            None => (key, None),
        };
        let part = |part: &str, limit: usize| {
            !part.is_empty() && part.len() <= limit && part.chars().all(key_char)
        };
        match system {
            None => part(tenant, 256) && tenant.starts_with(|c: char| c.is_ascii_lowercase()),
            Some(system) => {
                part(tenant, 241)
                    && part(system, 14)
                    && system.starts_with(|c: char| c.is_ascii_lowercase())
            }
        }
    };
    let valid_value = |value: &str| {
        !value.is_empty()
            && value.len() <= 256
            && !value.ends_with(' ')
            && value
                .chars()
                .all(|c| matches!(c, ' '..='~') && c != ',' && c != '=')
    };
    let members: Vec<&str> = state
        .split(',')
        .map(|member| member.trim_matches([' ', '\t']))
        .filter(|member| !member.is_empty())
        .collect();
    state.len() <= MAX_TRACESTATE
        && members.len() <= 32
        && members.iter().all(|member| {
            member
                .split_once('=')
                .is_some_and(|(key, value)| valid_key(key) && valid_value(value))
        })
}

/// A carrier of just the two W3C fields.
#[derive(Default)]
struct Pair {
    traceparent: Option<String>,
    tracestate: Option<String>,
}

impl Extractor for Pair {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.traceparent.as_deref(),
            TRACESTATE => self.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

impl Injector for Pair {
    fn set(&mut self, key: &str, value: String) {
        match key {
            TRACEPARENT => self.traceparent = Some(value),
            TRACESTATE => self.tracestate = Some(value),
            _ => {}
        }
    }
}

/// `{method} {target}`, the span name the conventions ask for (the method alone without a
/// low-cardinality target: a resource's URI is not one).
fn span_name(method: &str, target: Option<&str>) -> String {
    match target {
        Some(target) => format!("{method} {target}"),
        None => method.to_owned(),
    }
}

/// Records what the conventions name the call's target: the tool or the prompt.
fn record_target(span: &Span, method: &str, target: Option<&str>) {
    match (method, target) {
        ("tools/call", Some(tool)) => {
            span.record("gen_ai.tool.name", tool);
            span.record("gen_ai.operation.name", "execute_tool");
        }
        ("prompts/get", Some(prompt)) => {
            span.record("gen_ai.prompt.name", prompt);
        }
        _ => {}
    }
}

/// The span of a client's request as Switchboard serves it (kind server): `method` on
/// `target` (the tool or prompt name the client used), a child of the context `incoming`
/// finds when the client sent its own (looked for only while traces are exported). Enter it
/// (or instrument the request's future with it) for the request's whole life.
pub fn server_span(
    method: &str,
    target: Option<&str>,
    incoming: impl FnOnce() -> Option<TraceContext>,
) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "mcp.request",
        otel.name = %span_name(method, target),
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = method,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        gen_ai.operation.name = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    record_target(&span, method, target);
    if let Some(incoming) = incoming() {
        // Fails only for a span already started, which this one is not.
        let _ = span.set_parent(incoming.parent());
    }
    span
}

/// The span of the checks admitting a call: its caller, the conversation's activation, rate
/// limits, a connection to wait for.
pub fn admission_span() -> Span {
    tracing::info_span!(
        target: TARGET,
        "admission",
        otel.status_code = Empty,
        error.type = Empty,
    )
}

/// The span of one exchange with the upstream server `server` (kind client): `method` on
/// `target`, the server's own name for it, a child of `parent` (the client's request; named
/// rather than entered, so the exchange's future needs no wrapper).
pub fn exchange_span(method: &str, target: Option<&str>, server: &str, parent: &Span) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        parent: parent,
        "mcp.upstream",
        otel.name = %span_name(method, target),
        otel.kind = "client",
        otel.status_code = Empty,
        mcp.method.name = method,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        gen_ai.operation.name = Empty,
        switchboard.server = server,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    if !span.is_disabled() {
        record_target(&span, method, target);
    }
    span
}

/// Marks `span` failed: `error_type` names the kind of failure (a JSON-RPC error code as
/// text, `tool_error` for a result with `isError`, `timeout`, ...), `code` the JSON-RPC error
/// code when there is one.
pub fn record_error(span: &Span, error_type: &str, code: Option<i32>) {
    if span.is_disabled() {
        return;
    }
    span.record("otel.status_code", "ERROR");
    span.record("error.type", error_type);
    if let Some(code) = code {
        span.record("rpc.response.status_code", code.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn only_a_valid_traceparent_is_taken() {
        let taken = TraceContext::checked(PARENT, Some("vendor=value")).expect("valid");
        assert_eq!(taken.traceparent, PARENT);
        assert_eq!(taken.tracestate.as_deref(), Some("vendor=value"));
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        ] {
            assert_eq!(TraceContext::checked(bad, None), None, "{bad:?}");
        }
    }

    #[test]
    fn a_tracestate_too_long_or_malformed_is_dropped_and_the_parent_kept() {
        let long = format!("vendor={}", "x".repeat(MAX_TRACESTATE));
        let taken = TraceContext::checked(PARENT, Some(&long)).expect("parent kept");
        assert_eq!(taken.tracestate, None);
        for bad in ["=no key,,", "Upper=1", "k=a=b", "k=\u{7f}"] {
            let taken = TraceContext::checked(PARENT, Some(bad)).expect("parent kept");
            assert_eq!(taken.tracestate, None, "{bad:?}");
        }
        let many = (0..33)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            TraceContext::checked(PARENT, Some(&many))
                .expect("kept")
                .tracestate,
            None
        );
        let taken = TraceContext::checked(PARENT, Some("rojo=00f067aa0ba902b7, t@sys=x y"));
        assert_eq!(
            taken.expect("kept").tracestate.as_deref(),
            Some("rojo=00f067aa0ba902b7,t@sys=x y")
        );
    }

    #[test]
    fn meta_wins_over_headers_and_headers_serve_when_meta_has_none() {
        let mut meta = MetaObject::new();
        meta.set_traceparent(PARENT);
        let mut headers = HeaderMap::new();
        let other = "00-11111111111111111111111111111111-2222222222222222-01";
        headers.insert(TRACEPARENT, other.parse().expect("header"));
        let taken = TraceContext::incoming(Some(&meta), Some(&headers)).expect("meta");
        assert_eq!(taken.traceparent, PARENT);
        let taken = TraceContext::incoming(Some(&MetaObject::new()), Some(&headers));
        assert_eq!(taken.expect("headers").traceparent, other);
        assert_eq!(TraceContext::incoming(None, None), None);
    }

    #[test]
    fn with_nothing_exporting_the_clients_context_is_passed_on_unchanged() {
        let client = TraceContext::checked(PARENT, Some("vendor=value"));
        let span = exchange_span("tools/call", Some("echo"), "everything", &Span::current());
        let _entered = span.enter();
        assert_eq!(TraceContext::outgoing(client.as_ref()), client);
        assert_eq!(TraceContext::outgoing(None), None);
    }

    #[test]
    fn written_to_meta_the_context_replaces_what_was_there_and_reads_back_as_headers() {
        let mut meta = MetaObject::new();
        meta.set_tracestate("stale=1");
        let context = TraceContext::checked(PARENT, None).expect("valid");
        context.write_to(&mut meta);
        assert_eq!(meta.get_traceparent(), Some(PARENT));
        assert_eq!(meta.get_tracestate(), None);
        let headers = TraceContext::headers_of(&meta);
        assert_eq!(headers.len(), 1, "no tracestate header for none");
        assert_eq!(headers[0].0, TRACEPARENT);
        assert_eq!(headers[0].1, PARENT);
    }
}
