//! Who may reach the daemon: the [`Access`] guard of a listener (loopback `Host` names, or API
//! keys) and the keys a request presents.

use crate::{Users, apps, mcp, oauth, origins, ui};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Who may use the front doors.
#[derive(Clone)]
pub enum Access {
    /// Only this machine: a loopback `Host` required. This is the DNS-rebinding defence: a page
    /// on another site that resolves its own name to 127.0.0.1 still sends its own `Host`.
    /// Browser apps of a `--cors-origin` present one of `keys` (SHA-256 digests).
    Loopback {
        /// The operator's API keys, for browser apps.
        keys: Arc<Vec<[u8; 32]>>,
    },
    /// Anyone holding one of these API keys (kept as SHA-256 digests).
    ApiKeys(Arc<Vec<[u8; 32]>>),
    /// Many users, each in a workspace of their own (see [`Users`]).
    Users(Arc<Users>),
}

impl Access {
    /// Whether only loopback `Host`s are served.
    pub(crate) fn is_loopback(&self) -> bool {
        matches!(self, Self::Loopback { .. })
    }

    /// Only this machine, without keys (so without browser apps of other origins).
    pub fn loopback() -> Self {
        Self::loopback_with_keys([])
    }

    /// Only this machine; browser apps of a `--cors-origin` present one of `keys`.
    pub fn loopback_with_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> Self {
        Self::Loopback {
            keys: Arc::new(keys.into_iter().map(digest).collect()),
        }
    }

    /// Access for holders of `keys`.
    pub fn api_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> Self {
        Self::ApiKeys(Arc::new(keys.into_iter().map(digest).collect()))
    }

    /// Who holds the key `request` presents, when it is one of these keys (the rate limit's
    /// client then).
    pub(crate) fn key_holder(
        &self,
        request: &Request,
    ) -> Option<mcp::conversation::VerifiedClient> {
        let keys = match self {
            Self::Loopback { keys } | Self::ApiKeys(keys) => keys,
            Self::Users(_) => return None,
        };
        let key = presented_key(request.headers())?;
        keys.contains(&digest(&key))
            .then(|| mcp::conversation::key_holder(&key))
    }

    /// Why `request`, sent by `sender`, may not pass, if it may not.
    pub(crate) fn refusal(&self, request: &Request, sender: &origins::Sender) -> Option<Refusal> {
        let headers = request.headers();
        let holds_one_of = |keys: &[[u8; 32]]| {
            presented_key(headers)
                .map(|key| digest(&key))
                .is_some_and(|key| keys.contains(&key))
        };
        match self {
            Self::Loopback { keys } => {
                if !request_is_local(headers) {
                    return Some(Refusal::NotLoopback);
                }
                let browser_app = matches!(sender, origins::Sender::CorsApp(_));
                (browser_app && !holds_one_of(keys)).then_some(Refusal::NoApiKey)
            }
            Self::ApiKeys(keys) => {
                if is_public_path(request.uri().path()) {
                    return None;
                }
                (!holds_one_of(keys)).then_some(Refusal::NoApiKey)
            }
            // Checked by the dispatcher before any workspace's routes.
            Self::Users(_) => None,
        }
    }
}

/// Why a request was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A loopback listener got a non-loopback `Host`.
    NotLoopback,
    /// No valid API key.
    NoApiKey,
    /// The credential could not be checked now (the store did not answer).
    Unavailable,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Self::NotLoopback => {
                (StatusCode::FORBIDDEN, "forbidden: not a loopback Host\n").into_response()
            }
            Self::NoApiKey => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer realm=\"switchboard\"")],
                "an API key is required: Authorization: Bearer <key>\n",
            )
                .into_response(),
            Self::Unavailable => crate::api_error::unavailable(
                "credentials cannot be checked right now (the store does not answer); try again \
                 shortly",
            ),
        }
    }
}

/// Comparing digests keeps the comparison's timing independent of how much of a key matched.
pub(crate) fn digest(key: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).into()
}

/// Routes anyone may reach: liveness, the OAuth redirect and metadata document, which
/// authorization servers and browsers fetch without an API key (`state` protects the redirect),
/// and the console's files (which hold no data; the page asks for a key).
pub(crate) fn is_public_path(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | oauth::CALLBACK_PATH | "/oauth/client-metadata.json"
    ) || ui::PATHS.contains(&path)
        || path.starts_with(apps::VIEW_PATH)
}

/// Whether `host` (a `Host` value or an origin's host, with or without port) is loopback.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The API key a request presents: `Authorization: Bearer <key>`, or on a WebSocket upgrade a
/// `bearer.<key, base64url>` subprotocol (a browser cannot set headers on a WebSocket).
pub(crate) fn presented_key(headers: &HeaderMap) -> Option<String> {
    use base64::Engine;
    use switchboard_core::wire_names::BEARER_SUBPROTOCOL_PREFIX;
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110, 11.1).
            let (scheme, key) = v.trim_start().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(key)
        })
        .map(|key| key.trim().to_owned());
    bearer.or_else(|| {
        let upgrade = headers.get(header::UPGRADE)?.to_str().ok()?;
        if !upgrade.eq_ignore_ascii_case("websocket") {
            return None;
        }
        let offered = headers.get(header::SEC_WEBSOCKET_PROTOCOL)?.to_str().ok()?;
        let encoded = offered
            .split(',')
            .find_map(|protocol| protocol.trim().strip_prefix(BEARER_SUBPROTOCOL_PREFIX))?;
        let key = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded.trim_end_matches('='))
            .ok()?;
        String::from_utf8(key).ok()
    })
}

/// Whether the request was sent to a loopback name (`Host`).
pub(crate) fn request_is_local(headers: &HeaderMap) -> bool {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(is_loopback_host)
}
