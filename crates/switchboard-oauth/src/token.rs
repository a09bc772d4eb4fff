//! Token endpoint requests: every grant, every client authentication method, DPoP.
//!
//! One function sends them all ([`request_token`]) so that `resource`, client authentication,
//! DPoP proofs (with the server's nonce, RFC 9449 §8) and error handling are the same for the
//! authorization-code, refresh, client-credentials, JWT-bearer and token-exchange grants.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::error::OAuthError;
use crate::jwt::{AssertionKey, DpopKey, now_secs};
use crate::net::OAuthHttp;
use crate::registration::{ClientRegistration, TokenAuthMethod};

/// Tokens obtained from an authorization server.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TokenSet {
    /// The access token.
    pub access_token: String,
    /// `Bearer` or `DPoP`.
    pub token_type: String,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<String>,
    /// When the access token expires (Unix seconds), if the server said.
    pub expires_at: Option<u64>,
    /// How long the access token was valid for when it was issued (seconds), if the server said:
    /// the refresh margin scales with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_secs: Option<u64>,
    /// The scopes granted (or, when the server did not say, requested).
    pub scope: Option<String>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("token_type", &self.token_type)
            .field("has_refresh_token", &self.refresh_token.is_some())
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl TokenSet {
    /// True when the access token expires within `margin_secs` (or already has).
    /// How long before expiry the token is refreshed: a tenth of its lifetime, at most
    /// `longest` seconds (so a 30-second token is refreshed 3 s before it expires, not on every
    /// request, and an hour-long one `longest` seconds before). Without a known lifetime,
    /// `longest`.
    pub fn refresh_margin(&self, longest: u64) -> u64 {
        self.lifetime_secs
            .map_or(longest, |lifetime| (lifetime / 10).min(longest))
    }

    /// True when the token expires within `margin_secs` seconds (or has expired).
    pub fn expires_within(&self, margin_secs: u64) -> bool {
        self.expires_at
            .is_some_and(|at| at <= now_secs().saturating_add(margin_secs))
    }

    /// True for DPoP-bound tokens.
    pub fn is_dpop(&self) -> bool {
        self.token_type.eq_ignore_ascii_case("dpop")
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    issued_token_type: Option<String>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// The grant of a token request.
#[derive(Debug, Clone)]
pub(crate) enum Grant<'a> {
    /// RFC 6749 §4.1.3, with the PKCE verifier.
    AuthorizationCode {
        /// The code from the redirect.
        code: &'a str,
        /// The PKCE verifier.
        verifier: &'a str,
        /// The redirect URI of the authorization request.
        redirect_uri: &'a str,
    },
    /// RFC 6749 §6.
    RefreshToken {
        /// The refresh token.
        refresh_token: &'a str,
    },
    /// RFC 6749 §4.4.
    ClientCredentials,
    /// RFC 7523 §2.1: an assertion as the grant.
    JwtBearer {
        /// The assertion.
        assertion: &'a str,
    },
    /// RFC 8693 token exchange.
    TokenExchange {
        /// The token exchanged.
        subject_token: &'a str,
        /// Its type URI.
        subject_token_type: &'a str,
        /// The type asked for.
        requested_token_type: &'a str,
        /// `audience`, if any.
        audience: Option<&'a str>,
    },
}

/// Everything a token request needs besides the grant.
pub(crate) struct TokenRequest<'a> {
    /// The token endpoint.
    pub endpoint: &'a Url,
    /// The issuer (the audience of client assertions).
    pub issuer: &'a str,
    /// The client and how it authenticates.
    pub client: &'a ClientRegistration,
    /// The key for `private_key_jwt`.
    pub assertion_key: Option<&'a AssertionKey>,
    /// The `resource` parameter, sent verbatim.
    pub resource: Option<&'a str>,
    /// The `scope` parameter.
    pub scope: Option<&'a str>,
    /// The DPoP key, when tokens are to be DPoP-bound.
    pub dpop: Option<&'a DpopKey>,
}

/// Sends a token request and reads the answer. A DPoP nonce demanded by the server
/// (`use_dpop_nonce`) is honoured once.
pub(crate) async fn request_token(
    http: &OAuthHttp,
    request: &TokenRequest<'_>,
    grant: &Grant<'_>,
) -> Result<TokenSet, OAuthError> {
    let mut nonce: Option<String> = None;
    for _ in 0..2 {
        let (form, headers) = build(request, grant, nonce.as_deref())?;
        let reply = http
            .post_form(request.endpoint, "token", &form, headers)
            .await?;
        if reply.status.is_success() {
            return parse_success(&reply.body, request, grant);
        }
        let error = serde_json::from_slice::<ErrorResponse>(&reply.body).ok();
        let server_nonce = reply
            .headers
            .get("dpop-nonce")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if request.dpop.is_some()
            && nonce.is_none()
            && error.as_ref().is_some_and(|e| e.error == "use_dpop_nonce")
            && server_nonce.is_some()
        {
            nonce = server_nonce;
            continue;
        }
        return Err(match error {
            Some(error) => OAuthError::TokenRefused {
                error: error.error,
                description: error.error_description,
            },
            None => OAuthError::Status {
                what: "token endpoint",
                url: request.endpoint.to_string(),
                status: reply.status.as_u16(),
            },
        });
    }
    Err(OAuthError::TokenRefused {
        error: "use_dpop_nonce".into(),
        description: Some("the server asked for a new DPoP nonce twice".into()),
    })
}

fn build(
    request: &TokenRequest<'_>,
    grant: &Grant<'_>,
    nonce: Option<&str>,
) -> Result<(Vec<(String, String)>, HeaderMap), OAuthError> {
    let mut form: Vec<(String, String)> = Vec::new();
    let mut push = |k: &str, v: &str| form.push((k.to_owned(), v.to_owned()));
    match grant {
        Grant::AuthorizationCode {
            code,
            verifier,
            redirect_uri,
        } => {
            push("grant_type", "authorization_code");
            push("code", code);
            push("code_verifier", verifier);
            push("redirect_uri", redirect_uri);
        }
        Grant::RefreshToken { refresh_token } => {
            push("grant_type", "refresh_token");
            push("refresh_token", refresh_token);
        }
        Grant::ClientCredentials => push("grant_type", "client_credentials"),
        Grant::JwtBearer { assertion } => {
            push("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
            push("assertion", assertion);
        }
        Grant::TokenExchange {
            subject_token,
            subject_token_type,
            requested_token_type,
            audience,
        } => {
            push(
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            );
            push("subject_token", subject_token);
            push("subject_token_type", subject_token_type);
            push("requested_token_type", requested_token_type);
            if let Some(audience) = audience {
                push("audience", audience);
            }
        }
    }
    if let Some(resource) = request.resource {
        push("resource", resource);
    }
    if let Some(scope) = request.scope.filter(|s| !s.is_empty()) {
        push("scope", scope);
    }
    let mut headers = HeaderMap::new();
    authenticate_client(request, &mut form, &mut headers)?;
    if let Some(dpop) = request.dpop {
        let proof = dpop.proof("POST", request.endpoint, None, nonce)?;
        let value = HeaderValue::from_str(&proof)
            .map_err(|_| OAuthError::Jwt("a DPoP proof is not a valid header value".into()))?;
        headers.insert("dpop", value);
    }
    Ok((form, headers))
}

/// Adds the client's authentication (RFC 6749 §2.3, RFC 7523) to a token-endpoint request.
fn authenticate_client(
    request: &TokenRequest<'_>,
    form: &mut Vec<(String, String)>,
    headers: &mut HeaderMap,
) -> Result<(), OAuthError> {
    let mut push = |k: &str, v: &str| form.push((k.to_owned(), v.to_owned()));
    let client = request.client;
    match client.auth_method {
        // A workload presenting only an assertion may have no client id at all.
        TokenAuthMethod::None if client.client_id.is_empty() => {}
        TokenAuthMethod::None => push("client_id", &client.client_id),
        TokenAuthMethod::ClientSecretPost => {
            push("client_id", &client.client_id);
            push("client_secret", client_secret(client)?);
        }
        TokenAuthMethod::ClientSecretBasic => {
            // RFC 6749 §2.3.1: both parts are form-urlencoded before base64.
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let credentials = format!(
                "{}:{}",
                encode(&client.client_id),
                encode(client_secret(client)?)
            );
            let mut value = HeaderValue::from_str(&format!(
                "Basic {}",
                STANDARD.encode(credentials)
            ))
            .map_err(|_| {
                OAuthError::Config("the client credentials are not valid in a header".into())
            })?;
            value.set_sensitive(true);
            headers.insert(http::header::AUTHORIZATION, value);
        }
        TokenAuthMethod::PrivateKeyJwt => {
            let key = request.assertion_key.ok_or_else(|| {
                OAuthError::Config("private_key_jwt needs a private key; none is configured".into())
            })?;
            push("client_id", &client.client_id);
            push(
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            );
            push(
                "client_assertion",
                &key.client_assertion(&client.client_id, request.issuer)?,
            );
        }
    }
    Ok(())
}

/// Revokes a token (RFC 7009). Success means the server no longer honours it.
pub(crate) async fn revoke(
    http: &OAuthHttp,
    endpoint: &Url,
    issuer: &str,
    client: &ClientRegistration,
    assertion_key: Option<&AssertionKey>,
    token: &str,
    hint: &str,
) -> Result<(), OAuthError> {
    let request = TokenRequest {
        endpoint,
        issuer,
        client,
        assertion_key,
        resource: None,
        scope: None,
        dpop: None,
    };
    let mut form = vec![
        ("token".to_owned(), token.to_owned()),
        ("token_type_hint".to_owned(), hint.to_owned()),
    ];
    let mut headers = HeaderMap::new();
    authenticate_client(&request, &mut form, &mut headers)?;
    let reply = http
        .post_form(endpoint, "revocation", &form, headers)
        .await?;
    if reply.status.is_success() {
        return Ok(());
    }
    Err(match serde_json::from_slice::<ErrorResponse>(&reply.body) {
        // RFC 7009 §2.2.1: the server does not revoke this kind of token (often access tokens,
        // which then simply expire).
        Ok(error) => OAuthError::TokenRefused {
            error: error.error,
            description: error.error_description,
        },
        Err(_) => OAuthError::Status {
            what: "revocation endpoint",
            url: endpoint.to_string(),
            status: reply.status.as_u16(),
        },
    })
}

fn client_secret(client: &ClientRegistration) -> Result<&str, OAuthError> {
    client.client_secret.as_deref().ok_or_else(|| {
        OAuthError::Config(format!(
            "the client '{}' authenticates with a secret, but none is stored",
            client.client_id
        ))
    })
}

fn parse_success(
    body: &[u8],
    request: &TokenRequest<'_>,
    grant: &Grant<'_>,
) -> Result<TokenSet, OAuthError> {
    let response: TokenResponse =
        serde_json::from_slice(body).map_err(|e| OAuthError::InvalidMetadata {
            what: "token response",
            url: request.endpoint.to_string(),
            detail: format!("not a token response: {e}"),
        })?;
    let _ = response.issued_token_type;
    let expires_in = match &response.expires_in {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    let token_type = response.token_type.unwrap_or_else(|| "Bearer".to_owned());
    // A refresh answer without a new refresh token keeps the old one (RFC 6749 §6).
    let refresh_token = response.refresh_token.or_else(|| match grant {
        Grant::RefreshToken { refresh_token } => Some((*refresh_token).to_owned()),
        _ => None,
    });
    Ok(TokenSet {
        access_token: response.access_token,
        token_type,
        refresh_token,
        expires_at: expires_in.map(|s| now_secs().saturating_add(s)),
        lifetime_secs: expires_in,
        scope: response.scope.or_else(|| request.scope.map(str::to_owned)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registration::RegistrationKind;

    #[test]
    fn the_refresh_margin_is_a_tenth_of_the_lifetime_at_most_the_longest() {
        let tokens = |lifetime_secs| TokenSet {
            access_token: "a".into(),
            token_type: "Bearer".into(),
            refresh_token: Some("r".into()),
            expires_at: Some(now_secs() + 30),
            lifetime_secs,
            scope: None,
        };
        assert_eq!(tokens(Some(30)).refresh_margin(60), 3);
        assert_eq!(tokens(Some(3600)).refresh_margin(60), 60);
        assert_eq!(tokens(None).refresh_margin(60), 60, "unknown lifetime");
        // A fresh 30-second token is not refreshed on every request.
        assert!(!tokens(Some(30)).expires_within(tokens(Some(30)).refresh_margin(60)));
        assert!(tokens(None).expires_within(60));
    }

    fn client(method: TokenAuthMethod) -> ClientRegistration {
        ClientRegistration {
            issuer: "https://as".into(),
            client_id: "id:1".into(),
            client_secret: Some("s&cret".into()),
            auth_method: method,
            kind: RegistrationKind::Configured,
            redirect_uris: vec![],
        }
    }

    fn form_of(method: TokenAuthMethod) -> (Vec<(String, String)>, HeaderMap) {
        let endpoint = Url::parse("https://as/token").unwrap();
        let client = client(method);
        let request = TokenRequest {
            endpoint: &endpoint,
            issuer: "https://as",
            client: &client,
            assertion_key: None,
            resource: Some("https://mcp.example.com/mcp"),
            scope: Some("a b"),
            dpop: None,
        };
        build(&request, &Grant::RefreshToken { refresh_token: "r" }, None).unwrap()
    }

    fn get<'a>(form: &'a [(String, String)], key: &str) -> Option<&'a str> {
        form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    #[test]
    fn client_authentication_follows_the_method() {
        let (form, headers) = form_of(TokenAuthMethod::None);
        assert_eq!(get(&form, "client_id"), Some("id:1"));
        assert_eq!(get(&form, "client_secret"), None);
        assert!(headers.get("authorization").is_none());
        assert_eq!(get(&form, "resource"), Some("https://mcp.example.com/mcp"));

        let (form, _) = form_of(TokenAuthMethod::ClientSecretPost);
        assert_eq!(get(&form, "client_secret"), Some("s&cret"));

        let (form, headers) = form_of(TokenAuthMethod::ClientSecretBasic);
        assert_eq!(get(&form, "client_id"), None);
        let basic = headers.get("authorization").unwrap().to_str().unwrap();
        let decoded = STANDARD
            .decode(basic.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), "id%3A1:s%26cret");
    }
}
