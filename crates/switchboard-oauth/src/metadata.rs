//! Discovery: from an MCP server URL (and its 401 challenge) to the authorization server's
//! endpoints (the spec's `basic/authorization` pages: RFC 9728, then RFC 8414 or OpenID
//! discovery, and the older revisions' rules).
//!
//! 1. Protected-resource metadata (RFC 9728): the challenge's `resource_metadata` URL first, then
//!    the path-inserted well-known URL, then the root one. Its `resource` must name the server
//!    being accessed, or nothing more happens.
//! 2. Authorization-server metadata: RFC 8414 and OpenID discovery in the spec's order, with path
//!    insertion and appending for issuers with a path; the document's `issuer` must be the issuer
//!    it was fetched for.
//! 3. When a server publishes no resource metadata at all (the 2025-03-26 revision), the
//!    authorization server is the server's origin: its RFC 8414 metadata, or else the default
//!    endpoints `/authorize`, `/token` and `/register`.

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::challenge::BearerChallenge;
use crate::error::OAuthError;
use crate::net::OAuthHttp;

/// The protocol version sent while discovering (2025-03-26 servers SHOULD receive it).
const DISCOVERY_PROTOCOL_VERSION: &str = "2025-11-25";

/// RFC 9728 protected-resource metadata (the fields Switchboard uses).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProtectedResourceMetadata {
    /// The resource identifier; sent verbatim as the `resource` parameter.
    pub resource: String,
    /// Issuers of authorization servers that protect it.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes the resource knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes_supported: Option<Vec<String>>,
    /// Whether access tokens must be DPoP-bound (RFC 9449 §5.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_bound_access_tokens_required: Option<bool>,
}

/// RFC 8414 / OpenID Connect discovery metadata (the fields Switchboard uses).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct AuthorizationServerMetadata {
    /// The issuer identifier.
    pub issuer: String,
    /// Where the user is sent to authorize.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    /// Where codes and refresh tokens are exchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// Dynamic client registration (RFC 7591).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    /// Token revocation (RFC 7009).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    /// Scopes the server knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes_supported: Option<Vec<String>>,
    /// Grant types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_types_supported: Option<Vec<String>>,
    /// PKCE methods; absent means PKCE cannot be assumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Client authentication methods at the token endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// Signing algorithms for `private_key_jwt` assertions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_signing_alg_values_supported: Option<Vec<String>>,
    /// Client ID metadata documents are accepted as client ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id_metadata_document_supported: Option<bool>,
    /// RFC 9207: the authorization response carries `iss`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_response_iss_parameter_supported: Option<bool>,
    /// RFC 9449: DPoP proof algorithms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
    /// Where the server's signing keys are published (a JSON Web Key Set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
}

impl AuthorizationServerMetadata {
    /// True when `value` is listed in `list` (an absent list lists nothing).
    pub fn lists(list: &Option<Vec<String>>, value: &str) -> bool {
        list.as_ref().is_some_and(|l| l.iter().any(|v| v == value))
    }

    /// A required endpoint, parsed.
    pub fn endpoint(&self, which: &'static str) -> Result<Url, OAuthError> {
        let value = match which {
            "authorization_endpoint" => &self.authorization_endpoint,
            "token_endpoint" => &self.token_endpoint,
            "registration_endpoint" => &self.registration_endpoint,
            "revocation_endpoint" => &self.revocation_endpoint,
            _ => &None,
        };
        let text = value
            .as_deref()
            .ok_or_else(|| OAuthError::InvalidMetadata {
                what: "authorization server metadata",
                url: self.issuer.clone(),
                detail: format!("{which} is missing"),
            })?;
        Url::parse(text).map_err(|e| OAuthError::InvalidMetadata {
            what: "authorization server metadata",
            url: self.issuer.clone(),
            detail: format!("{which} '{text}' is not a URL: {e}"),
        })
    }
}

/// How the authorization server metadata was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetadataSource {
    /// From RFC 8414 or OpenID discovery.
    Discovered,
    /// The 2025-03-26 default endpoints on the server's origin (no metadata published).
    LegacyDefaults,
}

/// Everything discovery found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Discovery {
    /// The `resource` parameter to send: the metadata's `resource` verbatim, or the server's
    /// canonical URI when it publishes no resource metadata.
    pub resource: String,
    /// The protected-resource metadata, when the server publishes it.
    pub resource_metadata: Option<ProtectedResourceMetadata>,
    /// The authorization server.
    pub server: AuthorizationServerMetadata,
    /// How `server` was obtained.
    pub source: MetadataSource,
}

impl Discovery {
    /// The authorization server's issuer.
    pub fn issuer(&self) -> &str {
        &self.server.issuer
    }
}

/// The canonical resource URI of an MCP server (RFC 8707 §2): no fragment, no query, and no
/// trailing slash unless the path is only `/`... in which case it is dropped too.
pub(crate) fn canonical_resource(server_url: &Url) -> String {
    let mut url = server_url.clone();
    url.set_fragment(None);
    url.set_query(None);
    let text = url.to_string();
    text.strip_suffix('/').map(str::to_owned).unwrap_or(text)
}

/// True when the metadata's `resource` identifies the server at `server_url`: same origin, and
/// the resource's path is the server's path or a parent of it on a segment boundary.
pub fn resource_matches(advertised: &str, server_url: &Url) -> bool {
    let Ok(resource) = Url::parse(advertised) else {
        return false;
    };
    if resource.scheme() != server_url.scheme()
        || resource.host_str().map(str::to_ascii_lowercase)
            != server_url.host_str().map(str::to_ascii_lowercase)
        || resource.port_or_known_default() != server_url.port_or_known_default()
        || resource.fragment().is_some()
    {
        return false;
    }
    let base = resource.path().trim_end_matches('/');
    let path = server_url.path().trim_end_matches('/');
    path == base || path.starts_with(&format!("{base}/"))
}

/// Well-known URL with the path inserted: `https://h/p` → `https://h/.well-known/{name}/p`.
fn well_known_inserted(url: &Url, name: &str) -> Url {
    let mut out = url.clone();
    out.set_query(None);
    out.set_fragment(None);
    let path = url.path().trim_end_matches('/');
    out.set_path(&format!("/.well-known/{name}{path}"));
    out
}

/// Well-known URL at the root: `https://h/.well-known/{name}`.
fn well_known_root(url: &Url, name: &str) -> Url {
    let mut out = url.clone();
    out.set_query(None);
    out.set_fragment(None);
    out.set_path(&format!("/.well-known/{name}"));
    out
}

/// The protected-resource metadata URLs to try, in the spec's order.
pub(crate) fn resource_metadata_candidates(
    server_url: &Url,
    challenge: Option<&BearerChallenge>,
) -> Vec<Url> {
    let mut candidates = Vec::new();
    if let Some(url) = challenge
        .and_then(|c| c.resource_metadata.as_deref())
        .and_then(|u| server_url.join(u).ok())
    {
        candidates.push(url);
    }
    let path_inserted = well_known_inserted(server_url, "oauth-protected-resource");
    let root = well_known_root(server_url, "oauth-protected-resource");
    for url in [path_inserted, root] {
        if !candidates.contains(&url) {
            candidates.push(url);
        }
    }
    candidates
}

/// The authorization-server metadata URLs to try for an issuer, in the spec's order.
pub(crate) fn server_metadata_candidates(issuer: &Url) -> Vec<Url> {
    let has_path = !issuer.path().trim_end_matches('/').is_empty();
    if has_path {
        let mut appended = issuer.clone();
        appended.set_path(&format!(
            "{}/.well-known/openid-configuration",
            issuer.path().trim_end_matches('/')
        ));
        vec![
            well_known_inserted(issuer, "oauth-authorization-server"),
            well_known_inserted(issuer, "openid-configuration"),
            appended,
        ]
    } else {
        vec![
            well_known_root(issuer, "oauth-authorization-server"),
            well_known_root(issuer, "openid-configuration"),
        ]
    }
}

fn discovery_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        "mcp-protocol-version",
        http::HeaderValue::from_static(DISCOVERY_PROTOCOL_VERSION),
    );
    headers
}

/// The first candidate that answers with a success status, parsed as `T`, with its URL.
/// `Ok(None)` when every candidate answered with an error status (nothing published there). An
/// unsafe URL ends the search at once; a network failure is reported when no candidate
/// answered, since that is not "nothing published".
async fn first_document<T: serde::de::DeserializeOwned>(
    http: &OAuthHttp,
    candidates: Vec<Url>,
    what: &'static str,
) -> Result<Option<(Url, T)>, OAuthError> {
    let mut network_failure = None;
    for candidate in candidates {
        let reply = match http.get(&candidate, what, discovery_headers()).await {
            Ok(reply) => reply,
            Err(error @ OAuthError::UnsafeUrl { .. }) => return Err(error),
            Err(error) => {
                tracing::debug!(%error, "{what} candidate failed");
                network_failure = Some(error);
                continue;
            }
        };
        if !reply.status.is_success() {
            tracing::debug!(url = %candidate, status = %reply.status, "no {what} here");
            continue;
        }
        let document = reply.json(what, &candidate)?;
        return Ok(Some((candidate, document)));
    }
    match network_failure {
        Some(error) => Err(error),
        None => Ok(None),
    }
}

/// Finds the server's protected-resource metadata. `Ok(None)` when the server publishes none.
pub(crate) async fn fetch_resource_metadata(
    http: &OAuthHttp,
    server_url: &Url,
    challenge: Option<&BearerChallenge>,
) -> Result<Option<ProtectedResourceMetadata>, OAuthError> {
    let candidates = resource_metadata_candidates(server_url, challenge);
    let Some((url, metadata)) = first_document::<ProtectedResourceMetadata>(
        http,
        candidates,
        "protected resource metadata",
    )
    .await?
    else {
        return Ok(None);
    };
    if !resource_matches(&metadata.resource, server_url) {
        return Err(OAuthError::ResourceMismatch {
            advertised: metadata.resource,
            expected: canonical_resource(server_url),
        });
    }
    if metadata.authorization_servers.is_empty() {
        return Err(OAuthError::InvalidMetadata {
            what: "protected resource metadata",
            url: url.to_string(),
            detail: "authorization_servers is empty".into(),
        });
    }
    Ok(Some(metadata))
}

/// Fetches the metadata of the authorization server `issuer`, trying RFC 8414 and OpenID
/// discovery in the spec's order. The document must name exactly `issuer`.
pub(crate) async fn fetch_server_metadata(
    http: &OAuthHttp,
    issuer: &str,
) -> Result<Option<AuthorizationServerMetadata>, OAuthError> {
    let issuer_url = Url::parse(issuer).map_err(|e| OAuthError::InvalidMetadata {
        what: "protected resource metadata",
        url: issuer.to_owned(),
        detail: format!("authorization server '{issuer}' is not a URL: {e}"),
    })?;
    http.policy()
        .check_url(&issuer_url, "authorization server")?;
    let candidates = server_metadata_candidates(&issuer_url);
    let Some((url, metadata)) = first_document::<AuthorizationServerMetadata>(
        http,
        candidates,
        "authorization server metadata",
    )
    .await?
    else {
        return Ok(None);
    };
    if metadata.issuer != issuer {
        return Err(OAuthError::IssuerMismatch {
            url: url.to_string(),
            expected: issuer.to_owned(),
            found: metadata.issuer,
        });
    }
    Ok(Some(metadata))
}

/// Full discovery for a server that answered 401 (with `challenge`, if it sent one).
pub(crate) async fn discover(
    http: &OAuthHttp,
    server_url: &Url,
    challenge: Option<&BearerChallenge>,
) -> Result<Discovery, OAuthError> {
    if let Some(resource_metadata) = fetch_resource_metadata(http, server_url, challenge).await? {
        let mut tried = Vec::new();
        for issuer in &resource_metadata.authorization_servers {
            match fetch_server_metadata(http, issuer).await? {
                Some(server) => {
                    return Ok(Discovery {
                        resource: resource_metadata.resource.clone(),
                        resource_metadata: Some(resource_metadata),
                        server,
                        source: MetadataSource::Discovered,
                    });
                }
                None => tried.push(issuer.clone()),
            }
        }
        return Err(OAuthError::NoAuthorizationServer {
            server: server_url.to_string(),
            detail: format!("no metadata found for {}", tried.join(", ")),
        });
    }
    // 2025-03-26: the authorization server is the server's origin.
    let origin = server_url.origin().ascii_serialization();
    let server = match fetch_server_metadata(http, &origin).await? {
        Some(server) => (server, MetadataSource::Discovered),
        None => (
            AuthorizationServerMetadata {
                issuer: origin.clone(),
                authorization_endpoint: Some(format!("{origin}/authorize")),
                token_endpoint: Some(format!("{origin}/token")),
                registration_endpoint: Some(format!("{origin}/register")),
                // The 2025-03-26 revision makes PKCE S256 mandatory for its default endpoints.
                code_challenge_methods_supported: Some(vec!["S256".into()]),
                ..Default::default()
            },
            MetadataSource::LegacyDefaults,
        ),
    };
    Ok(Discovery {
        resource: canonical_resource(server_url),
        resource_metadata: None,
        server: server.0,
        source: server.1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn resource_metadata_is_looked_up_in_the_spec_order() {
        let challenge = BearerChallenge {
            resource_metadata: Some("https://mcp.example.com/custom/prm".into()),
            ..Default::default()
        };
        let server = url("https://mcp.example.com/public/mcp");
        let got: Vec<String> = resource_metadata_candidates(&server, Some(&challenge))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "https://mcp.example.com/custom/prm",
                "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ]
        );
        let root: Vec<String> =
            resource_metadata_candidates(&url("https://mcp.example.com/"), None)
                .iter()
                .map(Url::to_string)
                .collect();
        assert_eq!(
            root,
            ["https://mcp.example.com/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn server_metadata_is_looked_up_in_the_spec_order() {
        let with_path: Vec<String> =
            server_metadata_candidates(&url("https://auth.example.com/tenant1"))
                .iter()
                .map(Url::to_string)
                .collect();
        assert_eq!(
            with_path,
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        let root: Vec<String> = server_metadata_candidates(&url("https://auth.example.com"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            root,
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn the_resource_must_name_this_server() {
        let server = url("https://mcp.example.com/mcp");
        assert!(resource_matches("https://mcp.example.com/mcp", &server));
        assert!(resource_matches("https://mcp.example.com", &server));
        assert!(resource_matches("https://MCP.example.com:443/", &server));
        assert!(!resource_matches("https://mcp.example.com/other", &server));
        assert!(!resource_matches("https://mcp.example.com/mc", &server));
        assert!(!resource_matches("https://evil.example.com/mcp", &server));
        assert!(!resource_matches("http://mcp.example.com/mcp", &server));
        assert!(!resource_matches("not a url", &server));
    }

    #[test]
    fn canonical_resources_have_no_trailing_slash_or_fragment() {
        assert_eq!(
            canonical_resource(&url("https://MCP.example.com/mcp/#x")),
            "https://mcp.example.com/mcp"
        );
        assert_eq!(
            canonical_resource(&url("https://mcp.example.com")),
            "https://mcp.example.com"
        );
    }
}
