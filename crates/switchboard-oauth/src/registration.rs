//! Getting a client id at an authorization server (the spec's `basic/authorization` pages, client
//! registration).
//!
//! In priority order: credentials the user configured for the server; a client ID metadata
//! document, when the authorization server accepts them and Switchboard has a public https URL
//! to serve one from; dynamic client registration (RFC 7591, with `application_type`); otherwise
//! an error that tells the user what to configure. Registrations are keyed by issuer: one made at
//! one authorization server is never presented to another.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use url::Url;

use crate::error::OAuthError;
use crate::metadata::AuthorizationServerMetadata;
use crate::net::OAuthHttp;

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuthMethod {
    /// A public client: `client_id` in the form, no secret.
    None,
    /// HTTP Basic with the client id and secret.
    ClientSecretBasic,
    /// Client id and secret in the form.
    ClientSecretPost,
    /// A JWT assertion signed with the client's private key (RFC 7523).
    PrivateKeyJwt,
}

impl TokenAuthMethod {
    /// The RFC 7591 name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::ClientSecretBasic => "client_secret_basic",
            Self::ClientSecretPost => "client_secret_post",
            Self::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// Parses an RFC 7591 name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "none" => Self::None,
            "client_secret_basic" => Self::ClientSecretBasic,
            "client_secret_post" => Self::ClientSecretPost,
            "private_key_jwt" => Self::PrivateKeyJwt,
            _ => return None,
        })
    }
}

/// Where a client id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegistrationKind {
    /// The user configured it.
    Configured,
    /// Switchboard's client ID metadata document URL.
    MetadataDocument,
    /// Dynamic client registration.
    Dynamic,
}

/// A client id (and secret) usable at one authorization server.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientRegistration {
    /// The issuer this registration belongs to.
    pub issuer: String,
    /// The client id.
    pub client_id: String,
    /// The client secret, for confidential clients. Sealed at rest, never displayed.
    pub client_secret: Option<String>,
    /// How to authenticate at the token endpoint.
    pub auth_method: TokenAuthMethod,
    /// Where the client id came from.
    pub kind: RegistrationKind,
    /// Redirect URIs registered with it (empty when unknown, e.g. configured clients).
    #[serde(default)]
    pub redirect_uris: Vec<String>,
}

impl std::fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .field("kind", &self.kind)
            .finish()
    }
}

/// How Switchboard presents itself to authorization servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// `client_name` in registrations and the metadata document.
    pub client_name: String,
    /// The public https URL the client ID metadata document is served at, if Switchboard has
    /// one (`oauth.client_metadata_url` in the configuration). It is used verbatim as the
    /// client id.
    pub metadata_document_url: Option<Url>,
    /// `application_type` for dynamic registration: `native` for a local daemon or CLI.
    pub application_type: String,
}

impl Default for ClientIdentity {
    fn default() -> Self {
        Self {
            client_name: "Switchboard".into(),
            metadata_document_url: None,
            application_type: "native".into(),
        }
    }
}

impl ClientIdentity {
    /// The client ID metadata document to serve at `metadata_document_url`, listing the
    /// redirect URIs the daemon receives callbacks on.
    pub fn metadata_document(&self, redirect_uris: &[String]) -> Option<Value> {
        let url = self.metadata_document_url.as_ref()?;
        Some(json!({
            "client_id": url.as_str(),
            "client_name": self.client_name,
            "redirect_uris": redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": self.application_type,
        }))
    }
}

/// Client credentials the user configured for a server.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ConfiguredClient {
    /// The client id.
    pub client_id: String,
    /// The client secret, if the client is confidential.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// A PEM private key for `private_key_jwt`.
    #[serde(default)]
    pub private_key_pem: Option<String>,
    /// The JWS algorithm for that key (`RS256`, `ES256`, ...).
    #[serde(default)]
    pub signing_algorithm: Option<String>,
    /// The token endpoint auth method, when the user wants a particular one.
    #[serde(default)]
    pub auth_method: Option<TokenAuthMethod>,
}

impl std::fmt::Debug for ConfiguredClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfiguredClient")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "private_key_pem",
                &self.private_key_pem.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

/// Chooses how a client with (or without) a secret authenticates, from what the server lists.
pub(crate) fn choose_auth_method(
    server: &AuthorizationServerMetadata,
    has_secret: bool,
    has_key: bool,
) -> TokenAuthMethod {
    let supported = |m: TokenAuthMethod| {
        server
            .token_endpoint_auth_methods_supported
            .as_ref()
            .is_none_or(|list| list.iter().any(|s| s == m.as_str()))
    };
    if has_key && supported(TokenAuthMethod::PrivateKeyJwt) {
        TokenAuthMethod::PrivateKeyJwt
    } else if has_secret {
        // RFC 8414: an absent list means client_secret_basic.
        if supported(TokenAuthMethod::ClientSecretBasic) {
            TokenAuthMethod::ClientSecretBasic
        } else {
            TokenAuthMethod::ClientSecretPost
        }
    } else {
        TokenAuthMethod::None
    }
}

/// The registration for a configured client.
pub(crate) fn configured_registration(
    server: &AuthorizationServerMetadata,
    configured: &ConfiguredClient,
) -> ClientRegistration {
    let auth_method = configured.auth_method.unwrap_or_else(|| {
        choose_auth_method(
            server,
            configured.client_secret.is_some(),
            configured.private_key_pem.is_some(),
        )
    });
    ClientRegistration {
        issuer: server.issuer.clone(),
        client_id: configured.client_id.clone(),
        client_secret: configured.client_secret.clone(),
        auth_method,
        kind: RegistrationKind::Configured,
        redirect_uris: Vec::new(),
    }
}

/// Whether a client registered with redirect URI `registered` may use `wanted`: the same URI,
/// or, for loopback redirects (`http://127.0.0.1:<port>/...`, `[::1]`), the same one on another
/// port, which authorization servers must accept (RFC 8252 §7.3). The CLI's sign-in listens on
/// whatever port is free, and registering a new client for each would fill the server with them.
fn same_redirect(registered: &str, wanted: &str) -> bool {
    if registered == wanted {
        return true;
    }
    let (Ok(registered), Ok(wanted)) = (Url::parse(registered), Url::parse(wanted)) else {
        return false;
    };
    let loopback = |url: &Url| {
        url.scheme() == "http"
            && match url.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                _ => false,
            }
    };
    loopback(&registered)
        && loopback(&wanted)
        && registered.host() == wanted.host()
        && registered.path() == wanted.path()
        && registered.query() == wanted.query()
}

/// Decides how to identify at `server` for an authorization-code flow with `redirect_uri`,
/// registering dynamically when that is the way. `stored` is an earlier registration at the
/// same issuer; it is reused when it was made for this redirect URI (a loopback one on any
/// port).
pub(crate) async fn register(
    http: &OAuthHttp,
    server: &AuthorizationServerMetadata,
    identity: &ClientIdentity,
    configured: Option<&ConfiguredClient>,
    stored: Option<ClientRegistration>,
    redirect_uri: &str,
) -> Result<ClientRegistration, OAuthError> {
    if let Some(configured) = configured {
        return Ok(configured_registration(server, configured));
    }
    let cimd_supported = server.client_id_metadata_document_supported == Some(true);
    if cimd_supported && let Some(url) = &identity.metadata_document_url {
        return Ok(ClientRegistration {
            issuer: server.issuer.clone(),
            client_id: url.to_string(),
            client_secret: None,
            auth_method: TokenAuthMethod::None,
            kind: RegistrationKind::MetadataDocument,
            redirect_uris: vec![redirect_uri.to_owned()],
        });
    }
    if let Some(stored) = stored.filter(|s| {
        s.issuer == server.issuer
            && s.kind == RegistrationKind::Dynamic
            && s.redirect_uris
                .iter()
                .any(|u| same_redirect(u, redirect_uri))
    }) {
        return Ok(stored);
    }
    if server.registration_endpoint.is_some() {
        return register_dynamically(http, server, identity, redirect_uri).await;
    }
    Err(OAuthError::NoRegistration {
        issuer: server.issuer.clone(),
        cimd_hint: if cimd_supported {
            " (it does accept client ID metadata documents, but no public https URL is \
             configured to serve one: set oauth.client_metadata_url)"
        } else {
            ""
        },
    })
}

#[derive(Deserialize)]
struct RegistrationResponse {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    redirect_uris: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct OAuthErrorBody {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// RFC 7591 dynamic client registration.
async fn register_dynamically(
    http: &OAuthHttp,
    server: &AuthorizationServerMetadata,
    identity: &ClientIdentity,
    redirect_uri: &str,
) -> Result<ClientRegistration, OAuthError> {
    let endpoint = server.endpoint("registration_endpoint")?;
    // Ask to be a public client when the server allows it; otherwise take a secret.
    let requested = if AuthorizationServerMetadata::lists(
        &server.token_endpoint_auth_methods_supported,
        "none",
    ) || server.token_endpoint_auth_methods_supported.is_none()
    {
        TokenAuthMethod::None
    } else {
        choose_auth_method(server, true, false)
    };
    let body = json!({
        "client_name": identity.client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": requested.as_str(),
        "application_type": identity.application_type,
    });
    let reply = http
        .post_json(&endpoint, "client registration", &body)
        .await?;
    if !reply.status.is_success() {
        let detail = match serde_json::from_slice::<OAuthErrorBody>(&reply.body) {
            Ok(error) => format!(
                "HTTP {}: {}{}",
                reply.status.as_u16(),
                error.error,
                error
                    .error_description
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ),
            Err(_) => format!("HTTP {}", reply.status.as_u16()),
        };
        return Err(OAuthError::Registration {
            url: endpoint.to_string(),
            detail,
        });
    }
    let response: RegistrationResponse = reply.json("client registration response", &endpoint)?;
    let auth_method = response
        .token_endpoint_auth_method
        .as_deref()
        .and_then(TokenAuthMethod::parse)
        .unwrap_or(if response.client_secret.is_some() {
            TokenAuthMethod::ClientSecretBasic
        } else {
            TokenAuthMethod::None
        });
    Ok(ClientRegistration {
        issuer: server.issuer.clone(),
        client_id: response.client_id,
        client_secret: response.client_secret,
        auth_method,
        kind: RegistrationKind::Dynamic,
        redirect_uris: response
            .redirect_uris
            .unwrap_or_else(|| vec![redirect_uri.to_owned()]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_redirect_matches_on_any_port_and_nothing_else_does() {
        let registered = "http://127.0.0.1:51234/oauth/callback";
        assert!(same_redirect(registered, registered));
        assert!(same_redirect(
            registered,
            "http://127.0.0.1:40001/oauth/callback"
        ));
        assert!(same_redirect(
            "http://[::1]:1/oauth/callback",
            "http://[::1]:2/oauth/callback"
        ));
        for other in [
            "http://127.0.0.1:40001/elsewhere",
            "http://[::1]:40001/oauth/callback",
            "http://localhost:40001/oauth/callback",
            "https://127.0.0.1:40001/oauth/callback",
        ] {
            assert!(!same_redirect(registered, other), "{other}");
        }
        assert!(!same_redirect(
            "https://app.example.com:443/cb",
            "https://app.example.com:8443/cb"
        ));
    }

    #[test]
    fn auth_method_follows_what_the_server_supports() {
        let mut server = AuthorizationServerMetadata::default();
        assert_eq!(
            choose_auth_method(&server, true, false),
            TokenAuthMethod::ClientSecretBasic
        );
        assert_eq!(
            choose_auth_method(&server, false, false),
            TokenAuthMethod::None
        );
        server.token_endpoint_auth_methods_supported = Some(vec!["client_secret_post".into()]);
        assert_eq!(
            choose_auth_method(&server, true, false),
            TokenAuthMethod::ClientSecretPost
        );
        server.token_endpoint_auth_methods_supported = Some(vec!["private_key_jwt".into()]);
        assert_eq!(
            choose_auth_method(&server, false, true),
            TokenAuthMethod::PrivateKeyJwt
        );
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let registration = ClientRegistration {
            issuer: "https://a".into(),
            client_id: "id".into(),
            client_secret: Some("hunter2".into()),
            auth_method: TokenAuthMethod::ClientSecretBasic,
            kind: RegistrationKind::Dynamic,
            redirect_uris: vec![],
        };
        assert!(!format!("{registration:?}").contains("hunter2"));
        let configured = ConfiguredClient {
            client_id: "id".into(),
            client_secret: Some("hunter2".into()),
            private_key_pem: Some("-----BEGIN".into()),
            ..Default::default()
        };
        let text = format!("{configured:?}");
        assert!(!text.contains("hunter2") && !text.contains("BEGIN"));
    }
}
