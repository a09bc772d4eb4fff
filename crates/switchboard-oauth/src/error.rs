//! What can go wrong while signing in, in words a user can act on.

/// Errors of the OAuth client. Messages name the URL or issuer concerned and never carry a
/// token, a code or a client secret.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// A URL was refused before any request was made (scheme, address, or shape).
    #[error("refusing {what} URL {url}: {reason}")]
    UnsafeUrl {
        /// What the URL was for ("token endpoint", "protected resource metadata", ...).
        what: &'static str,
        /// The URL, as received.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The request got no HTTP answer, or the answer could not be read.
    #[error("{what} request to {url} failed: {detail}")]
    Http {
        /// What the request was for.
        what: &'static str,
        /// The URL.
        url: String,
        /// What happened.
        detail: String,
    },
    /// The answer was larger than the limit for its kind.
    #[error("{what} response from {url} is larger than {limit} bytes")]
    TooLarge {
        /// What the request was for.
        what: &'static str,
        /// The URL.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// An endpoint answered with an unexpected status.
    #[error("{what} at {url} answered HTTP {status}")]
    Status {
        /// What the request was for.
        what: &'static str,
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// A metadata document was not what the spec requires.
    #[error("{what} from {url} is invalid: {detail}")]
    InvalidMetadata {
        /// Which document.
        what: &'static str,
        /// Where it came from.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The protected-resource metadata describes another resource; no authorization request is
    /// made, since a token for it could be sent to the wrong place.
    #[error(
        "the protected resource metadata is for '{advertised}', not for this server ({expected}); \
         refusing to authorize"
    )]
    ResourceMismatch {
        /// The `resource` the metadata names.
        advertised: String,
        /// The server being accessed.
        expected: String,
    },
    /// No authorization server could be found for the server.
    #[error("cannot find the authorization server for {server}: {detail}")]
    NoAuthorizationServer {
        /// The MCP server URL.
        server: String,
        /// What was tried.
        detail: String,
    },
    /// The authorization server metadata names another issuer than the one it was fetched for.
    #[error("authorization server metadata at {url} names issuer '{found}', expected '{expected}'")]
    IssuerMismatch {
        /// Where the metadata came from.
        url: String,
        /// The issuer it was fetched for.
        expected: String,
        /// The issuer it names.
        found: String,
    },
    /// The authorization server does not advertise PKCE with S256.
    #[error(
        "authorization server {issuer} does not advertise PKCE S256 support \
         (code_challenge_methods_supported: {advertised}); refusing to proceed"
    )]
    PkceUnsupported {
        /// The issuer.
        issuer: String,
        /// What it advertises, or "absent".
        advertised: String,
    },
    /// There is no way to obtain a client id at this authorization server.
    #[error(
        "cannot register with authorization server {issuer}: it supports neither client ID \
         metadata documents{cimd_hint} nor dynamic client registration. Configure a client id for \
         this server (e.g. `switchboard server add <id> <url> --oauth-client-id <id> \
         [--oauth-client-secret <secret>]`)"
    )]
    NoRegistration {
        /// The issuer.
        issuer: String,
        /// A hint about the client ID metadata document URL, when that is what is missing.
        cimd_hint: &'static str,
    },
    /// Dynamic client registration was refused.
    #[error("client registration at {url} failed: {detail}")]
    Registration {
        /// The registration endpoint.
        url: String,
        /// The server's answer.
        detail: String,
    },
    /// The authorization response does not belong to a request we made.
    #[error("the authorization response's state does not match the request; ignoring it")]
    StateMismatch,
    /// The authorization response's `iss` is missing or wrong (RFC 9207).
    #[error("the authorization response {detail}; ignoring it")]
    ResponseIssuer {
        /// What is wrong.
        detail: String,
    },
    /// The user or the authorization server declined the authorization request.
    #[error("authorization was refused: {error}{}", suffix(.description))]
    AuthorizationRefused {
        /// The OAuth error code.
        error: String,
        /// The server's description, if any.
        description: Option<String>,
    },
    /// The token endpoint refused the request.
    #[error("the token endpoint refused the request: {error}{}", suffix(.description))]
    TokenRefused {
        /// The OAuth error code (`invalid_grant`, `invalid_client`, ...).
        error: String,
        /// The server's description, if any.
        description: Option<String>,
    },
    /// There are no usable credentials: the user has to sign in.
    #[error("not signed in: {0}")]
    SignInRequired(String),
    /// The server keeps asking for more scope.
    #[error(
        "the server still reports insufficient scope after {attempts} re-authorizations \
         (last challenge asked for '{scope}')"
    )]
    StepUpExhausted {
        /// How many times we re-authorized.
        attempts: u32,
        /// The last scope asked for.
        scope: String,
    },
    /// A JWT could not be built or signed (bad key, unsupported algorithm).
    #[error("cannot sign a JWT: {0}")]
    Jwt(String),
    /// The configured client credentials are unusable.
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// Reading or writing stored credentials failed.
    #[error("credential store: {0}")]
    Store(String),
    /// The browser or callback step failed.
    #[error("authorization step failed: {0}")]
    Authorizer(String),
}

fn suffix(description: &Option<String>) -> String {
    description
        .as_deref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default()
}

impl OAuthError {
    /// True when the token endpoint refused the client itself (`invalid_client`).
    pub fn is_invalid_client(&self) -> bool {
        matches!(self, Self::TokenRefused { error, .. } if error == "invalid_client")
    }

    /// True when only a new interactive sign-in can fix this (the refresh token is gone or
    /// revoked, or there was never one).
    pub fn needs_sign_in(&self) -> bool {
        match self {
            Self::SignInRequired(_) => true,
            // `invalid_client`: the server forgot (or refuses) the client the tokens belong
            // to; only a new sign-in (after a new registration) helps.
            Self::TokenRefused { error, .. } => {
                error == "invalid_grant" || error == "invalid_client"
            }
            _ => false,
        }
    }
}
