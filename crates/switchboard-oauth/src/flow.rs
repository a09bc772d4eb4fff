//! The authorization-code flow: building the request, validating the redirect, redeeming the
//! code (the spec's `basic/authorization` pages: scopes, PKCE, the request and the token exchange).
//!
//! How the user agent gets to the authorization URL and back is an [`Authorizer`]: the system
//! browser with a loopback callback (`switchboard login`), the daemon's `/oauth/callback` route
//! (admin API and web UI), or the [`HeadlessAuthorizer`] that tests and the conformance adapter
//! use. All of them share every other step, which lives here.

use futures::future::BoxFuture;
use url::Url;

use crate::challenge::split_scopes;
use crate::error::OAuthError;
use crate::jwt::DpopKey;
use crate::metadata::{AuthorizationServerMetadata, Discovery};
use crate::net::OAuthHttp;
use crate::pkce::{Pkce, random_token};
use crate::registration::ClientRegistration;
use crate::token::{Grant, TokenRequest, TokenSet, request_token};

/// What came back to the redirect URI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizationCallback {
    /// The authorization code.
    pub code: Option<String>,
    /// The state echoed back.
    pub state: Option<String>,
    /// RFC 9207 issuer identifier.
    pub iss: Option<String>,
    /// An OAuth error code, when the request was refused.
    pub error: Option<String>,
    /// The error's description.
    pub error_description: Option<String>,
}

impl AuthorizationCallback {
    /// Reads the parameters of a redirect URL's query.
    pub fn from_url(url: &Url) -> Self {
        Self::from_query_pairs(url.query_pairs())
    }

    /// Reads the parameters from decoded query pairs (as a web framework hands them over).
    pub fn from_query_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: AsRef<str>,
        V: Into<String>,
    {
        let mut callback = Self::default();
        for (key, value) in pairs {
            let value = Some(value.into());
            match key.as_ref() {
                "code" => callback.code = value,
                "state" => callback.state = value,
                "iss" => callback.iss = value,
                "error" => callback.error = value,
                "error_description" => callback.error_description = value,
                _ => {}
            }
        }
        callback
    }
}

/// Has a user agent visit an authorization URL and returns what came back to the redirect URI.
pub trait Authorizer: Send + Sync {
    /// The redirect URI this authorizer receives callbacks on.
    fn redirect_uri(&self) -> String;

    /// Sends the user agent to `url` and waits for the redirect.
    fn authorize<'a>(
        &'a self,
        url: &'a Url,
    ) -> BoxFuture<'a, Result<AuthorizationCallback, OAuthError>>;
}

/// An authorization request in flight: everything needed to check and redeem its answer. It
/// holds the PKCE verifier, so it is never logged, and is only written down sealed (a daemon
/// keeps it in its store, so that any replica can take the redirect).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PendingAuthorization {
    /// Where to send the user agent.
    pub authorization_url: Url,
    /// The state parameter.
    pub state: String,
    /// The redirect URI.
    pub redirect_uri: String,
    /// What discovery found (the issuer recorded for RFC 9207 checks).
    pub discovery: Discovery,
    /// The client the request was made as.
    pub client: ClientRegistration,
    /// The scopes requested, space-separated.
    pub scope: Option<String>,
    /// Whether the tokens are to be bound to a new DPoP key.
    pub bind_dpop: bool,
    pkce: Pkce,
}

impl std::fmt::Debug for PendingAuthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingAuthorization")
            .field("issuer", &self.discovery.issuer())
            .field("client_id", &self.client.client_id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// Chooses the scopes to request (the spec's scope selection, and the 2026-07-28 step-up union):
/// the challenge's scopes, else everything the resource lists, else none; plus whatever was
/// requested before (on step-up); plus `offline_access` when the authorization server lists it,
/// to get a refresh token.
pub(crate) fn select_scope(
    discovery: &Discovery,
    challenged: Option<&str>,
    previously_requested: &[String],
) -> Option<String> {
    let mut scopes: Vec<String> = previously_requested.to_vec();
    let base = match challenged.filter(|s| !s.trim().is_empty()) {
        Some(challenged) => split_scopes(Some(challenged)),
        None => discovery
            .resource_metadata
            .as_ref()
            .and_then(|m| m.scopes_supported.clone())
            .unwrap_or_default(),
    };
    for scope in base {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    if !scopes.is_empty()
        && AuthorizationServerMetadata::lists(&discovery.server.scopes_supported, "offline_access")
        && !scopes.iter().any(|s| s == "offline_access")
    {
        scopes.push("offline_access".into());
    }
    (!scopes.is_empty()).then(|| scopes.join(" "))
}

/// Builds the authorization request. Refuses when the server does not advertise PKCE S256, and
/// when its authorization endpoint is not a URL Switchboard may hand to a browser.
pub fn start_authorization(
    http: &OAuthHttp,
    discovery: Discovery,
    client: ClientRegistration,
    redirect_uri: &str,
    scope: Option<String>,
) -> Result<PendingAuthorization, OAuthError> {
    let server = &discovery.server;
    if !AuthorizationServerMetadata::lists(&server.code_challenge_methods_supported, "S256") {
        return Err(OAuthError::PkceUnsupported {
            issuer: server.issuer.clone(),
            advertised: server
                .code_challenge_methods_supported
                .as_ref()
                .map(|m| format!("[{}]", m.join(", ")))
                .unwrap_or_else(|| "absent".into()),
        });
    }
    let endpoint = server.endpoint("authorization_endpoint")?;
    http.policy()
        .check_url(&endpoint, "authorization endpoint")?;
    let pkce = Pkce::generate();
    let state = random_token();
    let mut url = endpoint;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &discovery.resource);
        if let Some(scope) = &scope {
            query.append_pair("scope", scope);
        }
        if needs_consent_prompt(server, scope.as_deref()) {
            query.append_pair("prompt", "consent");
        }
    }
    Ok(PendingAuthorization {
        authorization_url: url,
        state,
        redirect_uri: redirect_uri.to_owned(),
        discovery,
        client,
        scope,
        bind_dpop: false,
        pkce,
    })
}

/// Whether the authorization request must carry `prompt=consent`: an OpenID Provider (one that
/// lists the `openid` scope) grants `offline_access`, and so a refresh token, only when the
/// request asks for consent (OpenID Connect Core 1.0 §11), and ignores the scope otherwise.
fn needs_consent_prompt(server: &AuthorizationServerMetadata, scope: Option<&str>) -> bool {
    let offline = scope.is_some_and(|s| s.split(' ').any(|s| s == "offline_access"));
    offline && AuthorizationServerMetadata::lists(&server.scopes_supported, "openid")
}

/// Checks a redirect against the request (state, then RFC 9207 `iss`) and returns the code.
/// An error response is only believed once `iss` checks out.
pub(crate) fn validate_callback(
    pending: &PendingAuthorization,
    callback: &AuthorizationCallback,
) -> Result<String, OAuthError> {
    if callback.state.as_deref() != Some(pending.state.as_str()) {
        return Err(OAuthError::StateMismatch);
    }
    let expected = pending.discovery.issuer();
    let advertised = pending
        .discovery
        .server
        .authorization_response_iss_parameter_supported
        == Some(true);
    match (&callback.iss, advertised) {
        (Some(iss), _) if iss != expected => {
            return Err(OAuthError::ResponseIssuer {
                detail: format!("comes from issuer '{iss}', but the request went to '{expected}'"),
            });
        }
        (None, true) => {
            return Err(OAuthError::ResponseIssuer {
                detail: format!(
                    "has no 'iss' parameter, but '{expected}' advertises \
                     authorization_response_iss_parameter_supported"
                ),
            });
        }
        _ => {}
    }
    if let Some(error) = &callback.error {
        return Err(OAuthError::AuthorizationRefused {
            error: error.clone(),
            description: callback.error_description.clone(),
        });
    }
    callback
        .code
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| OAuthError::AuthorizationRefused {
            error: "invalid_response".into(),
            description: Some("the redirect carries neither a code nor an error".into()),
        })
}

/// Redeems the code at the token endpoint.
pub(crate) async fn finish(
    http: &OAuthHttp,
    pending: &PendingAuthorization,
    callback: &AuthorizationCallback,
    assertion_key: Option<&crate::jwt::AssertionKey>,
    dpop: Option<&DpopKey>,
) -> Result<TokenSet, OAuthError> {
    let code = validate_callback(pending, callback)?;
    let endpoint = pending.discovery.server.endpoint("token_endpoint")?;
    let request = TokenRequest {
        endpoint: &endpoint,
        issuer: pending.discovery.issuer(),
        client: &pending.client,
        assertion_key,
        resource: Some(&pending.discovery.resource),
        scope: None,
        dpop,
    };
    let mut tokens = request_token(
        http,
        &request,
        &Grant::AuthorizationCode {
            code: &code,
            verifier: &pending.pkce.verifier,
            redirect_uri: &pending.redirect_uri,
        },
    )
    .await?;
    if tokens.scope.is_none() {
        tokens.scope = pending.scope.clone();
    }
    Ok(tokens)
}

/// Fetches the authorization URL without following its redirect and reads the code from
/// `Location`: for tests and the conformance suite, whose authorization servers answer at once.
#[derive(Debug, Clone)]
pub struct HeadlessAuthorizer {
    http: OAuthHttp,
    redirect_uri: String,
}

impl HeadlessAuthorizer {
    /// An authorizer that claims `redirect_uri` (nothing needs to listen there).
    pub fn new(http: OAuthHttp, redirect_uri: impl Into<String>) -> Self {
        Self {
            http,
            redirect_uri: redirect_uri.into(),
        }
    }
}

impl Authorizer for HeadlessAuthorizer {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize<'a>(
        &'a self,
        url: &'a Url,
    ) -> BoxFuture<'a, Result<AuthorizationCallback, OAuthError>> {
        Box::pin(async move {
            let reply = self
                .http
                .get_no_redirect(url, "authorization endpoint")
                .await?;
            if !reply.status.is_redirection() {
                return Err(OAuthError::Authorizer(format!(
                    "the authorization endpoint answered HTTP {} instead of redirecting back \
                     (it needs a person at a browser: use `switchboard login`)",
                    reply.status.as_u16()
                )));
            }
            let location = reply
                .headers
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| OAuthError::Authorizer("the redirect has no Location".into()))?;
            let target = url.join(location).map_err(|e| {
                OAuthError::Authorizer(format!("the redirect Location is invalid: {e}"))
            })?;
            let expected = Url::parse(&self.redirect_uri)
                .map_err(|e| OAuthError::Config(format!("redirect URI is invalid: {e}")))?;
            if target.origin() != expected.origin() || target.path() != expected.path() {
                return Err(OAuthError::Authorizer(
                    "the authorization server redirected somewhere other than our redirect URI"
                        .into(),
                ));
            }
            Ok(AuthorizationCallback::from_url(&target))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{MetadataSource, ProtectedResourceMetadata};
    use crate::net::NetworkPolicy;
    use crate::registration::{RegistrationKind, TokenAuthMethod};

    fn discovery(iss_supported: Option<bool>) -> Discovery {
        Discovery {
            resource: "https://mcp.example.com/mcp".into(),
            resource_metadata: Some(ProtectedResourceMetadata {
                resource: "https://mcp.example.com/mcp".into(),
                authorization_servers: vec!["https://auth.example.com".into()],
                scopes_supported: Some(vec!["read".into(), "write".into()]),
                dpop_bound_access_tokens_required: None,
            }),
            server: AuthorizationServerMetadata {
                issuer: "https://auth.example.com".into(),
                authorization_endpoint: Some("https://auth.example.com/authorize".into()),
                token_endpoint: Some("https://auth.example.com/token".into()),
                code_challenge_methods_supported: Some(vec!["S256".into()]),
                authorization_response_iss_parameter_supported: iss_supported,
                scopes_supported: Some(vec!["read".into(), "offline_access".into()]),
                ..Default::default()
            },
            source: MetadataSource::Discovered,
        }
    }

    fn client() -> ClientRegistration {
        ClientRegistration {
            issuer: "https://auth.example.com".into(),
            client_id: "c".into(),
            client_secret: None,
            auth_method: TokenAuthMethod::None,
            kind: RegistrationKind::Dynamic,
            redirect_uris: vec![],
        }
    }

    fn pending(iss_supported: Option<bool>) -> PendingAuthorization {
        let http = OAuthHttp::new(NetworkPolicy::default());
        start_authorization(
            &http,
            discovery(iss_supported),
            client(),
            "http://127.0.0.1:1/cb",
            Some("read".into()),
        )
        .unwrap()
    }

    #[test]
    fn the_request_carries_pkce_state_and_resource() {
        let pending = pending(None);
        let query: std::collections::HashMap<_, _> = pending
            .authorization_url
            .query_pairs()
            .into_owned()
            .collect();
        assert_eq!(query["code_challenge_method"], "S256");
        assert_eq!(query["resource"], "https://mcp.example.com/mcp");
        assert_eq!(query["state"], pending.state);
        assert_eq!(query["scope"], "read");
        assert!(
            !pending
                .authorization_url
                .as_str()
                .contains(&pending.pkce.verifier)
        );
    }

    #[test]
    fn an_openid_provider_is_asked_for_consent_when_offline_access_is_requested() {
        let http = OAuthHttp::new(NetworkPolicy::default());
        let prompt = |scopes_supported: &[&str], scope: &str| {
            let mut d = discovery(None);
            d.server.scopes_supported =
                Some(scopes_supported.iter().map(|s| (*s).to_owned()).collect());
            let pending = start_authorization(
                &http,
                d,
                client(),
                "http://127.0.0.1:1/cb",
                Some(scope.into()),
            )
            .unwrap();
            pending
                .authorization_url
                .query_pairs()
                .find(|(k, _)| k == "prompt")
                .map(|(_, v)| v.into_owned())
        };
        let provider = ["openid", "read", "offline_access"];
        assert_eq!(
            prompt(&provider, "read offline_access").as_deref(),
            Some("consent")
        );
        assert_eq!(prompt(&provider, "read"), None, "no offline access asked");
        assert_eq!(
            prompt(&["read", "offline_access"], "read offline_access"),
            None,
            "a plain OAuth server needs no prompt"
        );
    }

    #[test]
    fn pkce_support_is_required() {
        let http = OAuthHttp::new(NetworkPolicy::default());
        let mut d = discovery(None);
        d.server.code_challenge_methods_supported = None;
        assert!(matches!(
            start_authorization(&http, d.clone(), client(), "http://127.0.0.1:1/cb", None),
            Err(OAuthError::PkceUnsupported { .. })
        ));
        d.server.code_challenge_methods_supported = Some(vec!["plain".into()]);
        assert!(start_authorization(&http, d, client(), "http://127.0.0.1:1/cb", None).is_err());
    }

    #[test]
    fn the_iss_parameter_is_checked_per_rfc_9207() {
        let callback = |state: &str, iss: Option<&str>| AuthorizationCallback {
            code: Some("code".into()),
            state: Some(state.into()),
            iss: iss.map(str::to_owned),
            ..Default::default()
        };
        let advertised = pending(Some(true));
        let s = advertised.state.clone();
        assert!(
            validate_callback(&advertised, &callback(&s, Some("https://auth.example.com"))).is_ok()
        );
        assert!(validate_callback(&advertised, &callback(&s, None)).is_err());
        assert!(
            validate_callback(
                &advertised,
                &callback(&s, Some("https://auth.example.com/"))
            )
            .is_err()
        );
        assert!(
            validate_callback(
                &advertised,
                &callback("other", Some("https://auth.example.com"))
            )
            .is_err()
        );
        let silent = pending(None);
        let s = silent.state.clone();
        assert!(validate_callback(&silent, &callback(&s, None)).is_ok());
        assert!(
            validate_callback(&silent, &callback(&s, Some("https://evil.example.com"))).is_err()
        );
    }

    #[test]
    fn an_error_response_is_believed_only_from_the_right_issuer() {
        let pending = pending(Some(true));
        let mut callback = AuthorizationCallback {
            state: Some(pending.state.clone()),
            iss: Some("https://evil.example.com".into()),
            error: Some("access_denied".into()),
            ..Default::default()
        };
        assert!(matches!(
            validate_callback(&pending, &callback),
            Err(OAuthError::ResponseIssuer { .. })
        ));
        callback.iss = Some("https://auth.example.com".into());
        assert!(matches!(
            validate_callback(&pending, &callback),
            Err(OAuthError::AuthorizationRefused { .. })
        ));
    }

    #[test]
    fn scopes_come_from_the_challenge_then_the_metadata_and_step_up_keeps_earlier_ones() {
        let d = discovery(None);
        assert_eq!(
            select_scope(&d, Some("write"), &[]).as_deref(),
            Some("write offline_access")
        );
        assert_eq!(
            select_scope(&d, None, &[]).as_deref(),
            Some("read write offline_access")
        );
        assert_eq!(
            select_scope(&d, Some("admin"), &["read".into()]).as_deref(),
            Some("read admin offline_access")
        );
        let mut bare = d.clone();
        bare.resource_metadata.as_mut().unwrap().scopes_supported = None;
        assert_eq!(select_scope(&bare, None, &[]), None);
        bare.server.scopes_supported = None;
        assert_eq!(select_scope(&bare, Some("x"), &[]).as_deref(), Some("x"));
    }
}
