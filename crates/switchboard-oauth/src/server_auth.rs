//! Signing in to one server and staying signed in: [`ServerAuth`].
//!
//! A transport asks it for the headers of each request ([`ServerAuth::request_headers`]) and
//! reports each 401/403 ([`ServerAuth::on_refused`]), which answers "retry" or an error. Behind
//! those two calls:
//! - tokens are refreshed ahead of expiry and once on a 401, single-flight: one lock per
//!   (server, principal), and a caller whose token was already replaced while it waited retries
//!   with the new one instead of refreshing again;
//! - a refreshed (possibly rotated) refresh token is saved before anything uses it;
//! - `invalid_grant` forgets the tokens and reports that the user must sign in again;
//! - a 403 `insufficient_scope` re-authorizes with the union of the scopes requested so far and
//!   the challenged ones, at most [`MAX_STEP_UPS`] times in a row;
//! - DPoP nonces from the resource server are remembered and used.
//!
//! Interactive steps need an [`Authorizer`]. With one (the headless authorizer in tests and the
//! conformance adapter, or a browser during `switchboard login`) a 401 without tokens runs the
//! whole flow; without one (the daemon) it reports [`OAuthError::SignInRequired`] and the
//! connection waits in `needs-auth` for the user.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use switchboard_core::sync::lock;

use http::{HeaderMap, HeaderValue, StatusCode};
use url::Url;

use crate::challenge::{BearerChallenge, split_scopes};
use crate::error::OAuthError;
use crate::flow::{self, AuthorizationCallback, Authorizer, PendingAuthorization};
use crate::jwt::{AssertionKey, DpopKey};
use crate::metadata::{self, Discovery};
use crate::net::OAuthHttp;
use crate::registration::{self, ClientIdentity, ConfiguredClient};
use crate::store::{CredentialStore, GrantKey, StoredGrant};
use crate::token::{Grant, TokenRequest, TokenSet, request_token};

/// Refresh at most this long before the access token expires (a tenth of a shorter token's
/// lifetime: [`TokenSet::refresh_margin`]).
pub(crate) const REFRESH_MARGIN_SECS: u64 = 60;
/// Consecutive step-up re-authorizations allowed before giving up.
pub const MAX_STEP_UPS: u32 = 3;

/// Progress of a sign-in, for status displays and the event bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthEvent {
    /// Obtaining a client id.
    Registering,
    /// Waiting for the user (or the headless authorizer) at this URL.
    Authorizing {
        /// The authorization URL.
        url: String,
    },
    /// Signed in.
    Authenticated,
    /// Refreshing the access token.
    Refreshing,
    /// The refresh token was refused; the user has to sign in again.
    InvalidToken {
        /// Why.
        message: String,
    },
    /// A request was refused for lack of scope (403 `insufficient_scope`) and nobody is at hand
    /// to grant more: the next sign-in asks for `scope` (what the server wanted, with what was
    /// asked for before). Signed in as before, other requests go on.
    MoreScopeNeeded {
        /// The scopes the next sign-in asks for, space-separated.
        scope: String,
    },
    /// A sign-in failed (discovery, registration, a refused or forged redirect, the token
    /// exchange).
    Failed {
        /// Why.
        message: String,
    },
}

/// How the server's tokens are obtained.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum GrantKind {
    /// A person signs in with the authorization-code flow (the default).
    #[default]
    AuthorizationCode,
    /// Machine to machine: the client-credentials grant with the configured client's secret or
    /// private key (extension `io.modelcontextprotocol/oauth-client-credentials`).
    ClientCredentials,
    /// Workload identity: a JWT the platform issues to this workload, presented with the
    /// JWT-bearer grant (RFC 7523 §2.1).
    WorkloadIdentity(WorkloadAssertion),
    /// Enterprise-managed authorization: the user's ID token is exchanged at the enterprise
    /// identity provider for an ID-JAG (RFC 8693), which the authorization server accepts with
    /// the JWT-bearer grant.
    EnterpriseManaged(EnterpriseIdp),
}

impl GrantKind {
    /// True for grants that need no person: a 401 is answered by getting a new token at once.
    pub fn is_unattended(&self) -> bool {
        !matches!(self, Self::AuthorizationCode)
    }
}

/// Where a workload identity JWT comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum WorkloadAssertion {
    /// The JWT itself.
    Value(String),
    /// A file the platform keeps fresh (a projected service-account token); read at each use.
    File(std::path::PathBuf),
}

impl std::fmt::Debug for WorkloadAssertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Value(_) => f.write_str("Value(<redacted>)"),
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

impl WorkloadAssertion {
    fn read(&self) -> Result<String, OAuthError> {
        match self {
            Self::Value(value) => Ok(value.clone()),
            Self::File(path) => std::fs::read_to_string(path)
                .map(|text| text.trim().to_owned())
                .map_err(|e| {
                    OAuthError::Config(format!(
                        "cannot read the workload identity token {}: {e}",
                        path.display()
                    ))
                }),
        }
    }
}

/// The enterprise identity provider of an enterprise-managed sign-in.
#[derive(Clone, PartialEq, Eq)]
pub struct EnterpriseIdp {
    /// The IdP's token endpoint (token exchange).
    pub token_endpoint: String,
    /// Switchboard's client id at the IdP, if it needs one.
    pub client_id: Option<String>,
    /// Switchboard's client secret at the IdP, if it needs one.
    pub client_secret: Option<String>,
    /// The user's ID token from the IdP.
    pub id_token: String,
}

impl std::fmt::Debug for EnterpriseIdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnterpriseIdp")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// What the user configured about signing in to one server.
#[derive(Debug, Clone, Default)]
pub struct AuthSettings {
    /// Client credentials for this server's authorization server.
    pub client: Option<ConfiguredClient>,
    /// The issuer those credentials belong to, when known; they are never sent to another.
    pub client_issuer: Option<String>,
    /// How tokens are obtained.
    pub grant: GrantKind,
    /// Bind tokens to a DPoP key when the authorization server supports it.
    pub dpop: bool,
}

type Listener = Arc<dyn Fn(AuthEvent) + Send + Sync>;

/// Signing in to one server as one principal.
pub struct ServerAuth {
    server_url: Url,
    key: GrantKey,
    http: OAuthHttp,
    identity: ClientIdentity,
    settings: AuthSettings,
    store: Arc<dyn CredentialStore>,
    authorizer: Option<Arc<dyn Authorizer>>,
    /// Asks a person for more scope only (a CLI command can; a first sign-in stays `login`'s).
    step_up_authorizer: Option<Arc<dyn Authorizer>>,
    listener: Option<Listener>,
    /// How a person signs in to this server, for the messages that ask them to.
    sign_in_how: String,
    /// The current grant; the lock is also what makes refresh and sign-in single-flight.
    grant: tokio::sync::Mutex<Option<Loaded>>,
    /// The store has been read since the slot was last empty.
    store_checked: AtomicBool,
    /// The latest DPoP nonce from the resource server.
    resource_nonce: std::sync::Mutex<Option<String>>,
    step_ups: AtomicU32,
}

/// A grant with its DPoP key parsed.
struct Loaded {
    grant: StoredGrant,
    dpop: Option<DpopKey>,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("server", &self.key.server)
            .field("principal", &self.key.principal)
            .finish_non_exhaustive()
    }
}

/// Headers to add to one request.
#[derive(Debug, Clone, Default)]
pub struct AuthHeaders {
    /// `Authorization`, and `DPoP` for DPoP-bound tokens.
    pub headers: HeaderMap,
    /// The access token used, to tell later whether it has been replaced.
    pub token: String,
}

impl ServerAuth {
    /// Sign-in state for `server_url`, persisted in `store` under `key`.
    pub fn new(
        server_url: Url,
        key: GrantKey,
        http: OAuthHttp,
        identity: ClientIdentity,
        settings: AuthSettings,
        store: Arc<dyn CredentialStore>,
    ) -> Self {
        Self {
            sign_in_how: format!("`switchboard login {}`", key.server),
            server_url,
            key,
            http,
            identity,
            settings,
            store,
            authorizer: None,
            step_up_authorizer: None,
            listener: None,
            grant: tokio::sync::Mutex::new(None),
            store_checked: AtomicBool::new(false),
            resource_nonce: std::sync::Mutex::new(None),
            step_ups: AtomicU32::new(0),
        }
    }

    /// Lets a 401 or 403 run the interactive flow with `authorizer` instead of waiting for the
    /// user.
    pub fn with_authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// Lets a 403 `insufficient_scope` re-authorize with `authorizer` (a person at hand), while a
    /// missing sign-in is still reported rather than started.
    pub fn with_step_up_authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.step_up_authorizer = Some(authorizer);
        self
    }

    /// Reports sign-in progress to `listener`.
    pub fn with_listener(mut self, listener: impl Fn(AuthEvent) + Send + Sync + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Says how a person signs in to this server where a message asks them to (by default
    /// `` `switchboard login <server>` ``).
    pub fn with_sign_in_how(mut self, how: impl Into<String>) -> Self {
        self.sign_in_how = how.into();
        self
    }

    /// The server this is for.
    pub fn key(&self) -> &GrantKey {
        &self.key
    }

    fn emit(&self, event: AuthEvent) {
        if let Some(listener) = &self.listener {
            listener(event);
        }
    }

    /// Loads the stored grant into `slot` when the slot is empty and the store has not been
    /// read yet: a server without tokens (most servers need none) costs one store read, not one
    /// per request.
    async fn load(&self, slot: &mut Option<Loaded>) -> Result<(), OAuthError> {
        if slot.is_some() || self.store_checked.load(Ordering::SeqCst) {
            return Ok(());
        }
        *slot = self.read_store().await?;
        self.store_checked.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Reads the store again on the next [`Self::load`]: another process (`switchboard login`,
    /// a sign-in through the admin API) may have stored tokens.
    fn recheck_store(&self) {
        self.store_checked.store(false, Ordering::SeqCst);
    }

    async fn read_store(&self) -> Result<Option<Loaded>, OAuthError> {
        let Some(grant) = self.store.load_grant(&self.key).await? else {
            return Ok(None);
        };
        let dpop = grant
            .dpop_key
            .as_deref()
            .map(DpopKey::from_pkcs8)
            .transpose()?;
        Ok(Some(Loaded { grant, dpop }))
    }

    /// True when tokens are stored for this server.
    pub async fn is_signed_in(&self) -> Result<bool, OAuthError> {
        let mut slot = self.grant.lock().await;
        if slot.is_none() {
            self.recheck_store();
        }
        self.load(&mut slot).await?;
        Ok(slot.is_some())
    }

    /// Takes the tokens stored for this server when they differ from the ones held here (a
    /// sign-in or refresh by another process, or by another `ServerAuth` of this one); true when
    /// it took them.
    async fn take_newer_from_store(&self, slot: &mut Option<Loaded>) -> Result<bool, OAuthError> {
        let Some(stored) = self.read_store().await? else {
            return Ok(false);
        };
        let newer = slot
            .as_ref()
            .is_none_or(|held| held.grant.tokens.access_token != stored.grant.tokens.access_token);
        if newer {
            *slot = Some(stored);
            self.emit(AuthEvent::Authenticated);
        }
        Ok(newer)
    }

    /// The scopes the tokens held for this server carry (the ones asked for, when the server
    /// did not say), after taking newer tokens from the store: what a later sign-in granted is
    /// seen here without waiting for a request to be refused.
    pub async fn granted_scopes(&self) -> Result<Vec<String>, OAuthError> {
        let mut slot = self.grant.lock().await;
        self.take_newer_from_store(&mut slot).await?;
        Ok(slot
            .as_ref()
            .map_or_else(Vec::new, |held| match held.grant.tokens.scope.as_deref() {
                Some(scope) => split_scopes(Some(scope)),
                None => held.grant.requested_scopes.clone(),
            }))
    }

    /// The scopes requested by the current sign-in (a new sign-in asks for them again).
    pub async fn requested_scopes(&self) -> Vec<String> {
        let mut slot = self.grant.lock().await;
        if self.load(&mut slot).await.is_err() {
            return Vec::new();
        }
        slot.as_ref()
            .map(|l| l.grant.requested_scopes.clone())
            .unwrap_or_default()
    }

    /// The headers for a request to `url`, refreshing first when the token is about to expire.
    /// `None` when there are no tokens yet (the request goes out unauthenticated and the 401
    /// starts the flow).
    pub async fn request_headers(
        &self,
        method: &str,
        url: &Url,
    ) -> Result<Option<AuthHeaders>, OAuthError> {
        let mut slot = self.grant.lock().await;
        self.load(&mut slot).await?;
        let Some(loaded) = slot.as_ref() else {
            return Ok(None);
        };
        let margin = loaded.grant.tokens.refresh_margin(REFRESH_MARGIN_SECS);
        if loaded.grant.tokens.expires_within(margin) && loaded.grant.tokens.refresh_token.is_some()
        {
            match self.refresh_locked(&mut slot).await {
                Ok(()) => {}
                // An expired token may still be accepted for a moment; let the server decide
                // unless the refresh token is definitely dead.
                Err(error) if error.needs_sign_in() => return Err(error),
                Err(error) => {
                    tracing::warn!(server = %self.key.server, %error, "proactive token refresh failed")
                }
            }
        }
        match slot.as_ref() {
            Some(loaded) => self.headers_for(loaded, method, url).map(Some),
            None => Ok(None),
        }
    }

    fn headers_for(
        &self,
        loaded: &Loaded,
        method: &str,
        url: &Url,
    ) -> Result<AuthHeaders, OAuthError> {
        let tokens = &loaded.grant.tokens;
        let mut headers = HeaderMap::new();
        let dpop = loaded.dpop.as_ref().filter(|_| tokens.is_dpop());
        let scheme = if dpop.is_some() { "DPoP" } else { "Bearer" };
        let mut value = HeaderValue::from_str(&format!("{scheme} {}", tokens.access_token))
            .map_err(|_| {
                OAuthError::Config("the access token is not a valid header value".into())
            })?;
        value.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, value);
        if let Some(key) = dpop {
            let nonce = lock(&self.resource_nonce).clone();
            let proof = key.proof(method, url, Some(&tokens.access_token), nonce.as_deref())?;
            let value = HeaderValue::from_str(&proof)
                .map_err(|_| OAuthError::Jwt("a DPoP proof is not a valid header value".into()))?;
            headers.insert("dpop", value);
        }
        Ok(AuthHeaders {
            headers,
            token: tokens.access_token.clone(),
        })
    }

    /// Remembers a DPoP nonce the resource server sent on any response.
    pub fn observe_response(&self, status: StatusCode, headers: &HeaderMap) {
        if let Some(nonce) = headers.get("dpop-nonce").and_then(|v| v.to_str().ok()) {
            *lock(&self.resource_nonce) = Some(nonce.to_owned());
        }
        if status.is_success() {
            self.step_ups.store(0, Ordering::SeqCst);
        }
    }

    /// A request sent with `sent` (or without a token) was refused with `status`. `Ok(())`
    /// means the request should be sent again with fresh headers.
    pub async fn on_refused(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        sent: Option<&AuthHeaders>,
    ) -> Result<(), OAuthError> {
        self.observe_response(status, headers);
        let challenge = BearerChallenge::from_headers(headers);
        let mut slot = self.grant.lock().await;
        if slot.is_none() {
            self.recheck_store();
        }
        self.load(&mut slot).await?;
        let current = slot.as_ref().map(|l| l.grant.tokens.access_token.clone());
        // Someone else already refreshed or signed in while this request was in flight.
        if current.is_some() && current.as_deref() != sent.map(|s| s.token.as_str()) {
            return Ok(());
        }
        if status == StatusCode::FORBIDDEN {
            let Some(challenge) = challenge.filter(BearerChallenge::is_insufficient_scope) else {
                return Err(OAuthError::SignInRequired(
                    "the server refused the request (HTTP 403) without asking for more scope"
                        .into(),
                ));
            };
            // A sign-in by another process (`switchboard login`, or the daemon's API) may have
            // granted the scope since these tokens were loaded: try its tokens first.
            if self.take_newer_from_store(&mut slot).await? {
                return Ok(());
            }
            return self.step_up(&mut slot, &challenge).await;
        }
        if challenge.as_ref().and_then(|c| c.error.as_deref()) == Some("use_dpop_nonce")
            && headers.contains_key("dpop-nonce")
            && sent.is_some()
        {
            return Ok(()); // retry with the nonce just remembered
        }
        // 401: refresh once, else sign in.
        let mut refresh_failure = None;
        if slot
            .as_ref()
            .is_some_and(|l| l.grant.tokens.refresh_token.is_some())
        {
            match self.refresh_locked(&mut slot).await {
                Ok(()) => return Ok(()),
                Err(error) if error.needs_sign_in() => refresh_failure = Some(error),
                Err(error) => return Err(error),
            }
        } else if slot.is_some() {
            // A rejected token with no way to refresh it.
            self.forget(&mut slot).await?;
        }
        if self.settings.grant.is_unattended() {
            return self
                .machine_grant_locked(&mut slot, challenge.as_ref())
                .await;
        }
        match &self.authorizer {
            Some(authorizer) => {
                let authorizer = authorizer.clone();
                self.sign_in_locked(&mut slot, authorizer.as_ref(), challenge.as_ref(), &[])
                    .await
            }
            None => Err(refresh_failure.unwrap_or_else(|| {
                OAuthError::SignInRequired(format!("sign in with {}", self.sign_in_how))
            })),
        }
    }

    async fn step_up(
        &self,
        slot: &mut Option<Loaded>,
        challenge: &BearerChallenge,
    ) -> Result<(), OAuthError> {
        // Asking again for scopes the current token already carries cannot help.
        let granted = slot
            .as_ref()
            .map(|l| split_scopes(l.grant.tokens.scope.as_deref()))
            .unwrap_or_default();
        let challenged = challenge.scopes();
        let futile = !challenged.is_empty() && challenged.iter().all(|s| granted.contains(s));
        let attempts = self.step_ups.fetch_add(1, Ordering::SeqCst) + 1;
        if futile || attempts > MAX_STEP_UPS {
            self.step_ups.store(0, Ordering::SeqCst);
            return Err(OAuthError::StepUpExhausted {
                attempts: attempts - 1,
                scope: challenge.scope.clone().unwrap_or_default(),
            });
        }
        let previously = slot
            .as_ref()
            .map(|l| l.grant.requested_scopes.clone())
            .unwrap_or_default();
        if self.settings.grant.is_unattended() {
            return self.machine_grant_locked(slot, Some(challenge)).await;
        }
        let Some(authorizer) = self
            .authorizer
            .clone()
            .or_else(|| self.step_up_authorizer.clone())
        else {
            // Remembered with the grant, so that the next sign-in (`switchboard login` in
            // another process, or the daemon's login) asks for these scopes too.
            if let Some(loaded) = slot.as_mut() {
                let mut wanted = loaded.grant.requested_scopes.clone();
                for scope in &challenged {
                    if !wanted.contains(scope) {
                        wanted.push(scope.clone());
                    }
                }
                if wanted != loaded.grant.requested_scopes {
                    loaded.grant.requested_scopes = wanted.clone();
                    self.store.save_grant(&self.key, &loaded.grant).await?;
                }
                self.emit(AuthEvent::MoreScopeNeeded {
                    scope: wanted.join(" "),
                });
            }
            return Err(OAuthError::SignInRequired(format!(
                "the server needs more scope ({}); sign in again with {} to grant it",
                challenge.scope.as_deref().unwrap_or("unspecified"),
                self.sign_in_how
            )));
        };
        self.sign_in_locked(slot, authorizer.as_ref(), Some(challenge), &previously)
            .await
    }

    async fn forget(&self, slot: &mut Option<Loaded>) -> Result<(), OAuthError> {
        *slot = None;
        self.store.delete_grant(&self.key).await
    }

    async fn refresh_locked(&self, slot: &mut Option<Loaded>) -> Result<(), OAuthError> {
        // Only one process sharing the store refreshes at a time, and each reads the store
        // first: tokens another process got since ours were loaded are taken as they are, and
        // the refresh token they retired is never presented (a server that detects reuse
        // revokes the whole grant for it).
        let _lease = self.store.lease_grant(&self.key).await?;
        match self.read_store().await? {
            // Signed out by another process: the tokens held here are not used again.
            None => {
                *slot = None;
                return Err(OAuthError::SignInRequired(format!(
                    "signed out; sign in again with {}",
                    self.sign_in_how
                )));
            }
            Some(stored)
                if slot.as_ref().is_none_or(|ours| {
                    stored.grant.tokens.access_token != ours.grant.tokens.access_token
                }) =>
            {
                *slot = Some(stored);
                self.emit(AuthEvent::Authenticated);
                return Ok(());
            }
            Some(_) => {}
        }
        let Some(loaded) = slot.as_ref() else {
            return Err(OAuthError::SignInRequired(
                "there are no tokens to refresh".into(),
            ));
        };
        let Some(refresh_token) = loaded.grant.tokens.refresh_token.clone() else {
            return Err(OAuthError::SignInRequired(
                "there is no refresh token".into(),
            ));
        };
        self.emit(AuthEvent::Refreshing);
        let grant = &loaded.grant;
        let client = self.client_for(&grant.issuer, &grant.client_id).await?;
        let endpoint = Url::parse(&grant.token_endpoint)
            .map_err(|e| OAuthError::Store(format!("stored token endpoint is not a URL: {e}")))?;
        let assertion_key = self.assertion_key()?;
        let request = TokenRequest {
            endpoint: &endpoint,
            issuer: &grant.issuer,
            client: &client,
            assertion_key: assertion_key.as_ref(),
            resource: Some(&grant.resource),
            scope: None,
            dpop: loaded.dpop.as_ref(),
        };
        match request_token(
            &self.http,
            &request,
            &Grant::RefreshToken {
                refresh_token: &refresh_token,
            },
        )
        .await
        {
            Ok(mut tokens) => {
                if tokens.scope.is_none() {
                    tokens.scope = grant.tokens.scope.clone();
                }
                let mut updated = grant.clone();
                updated.tokens = tokens;
                // Persist before use: a rotated refresh token must survive a crash right here.
                self.store.save_grant(&self.key, &updated).await?;
                if let Some(loaded) = slot.as_mut() {
                    loaded.grant = updated;
                }
                self.emit(AuthEvent::Authenticated);
                Ok(())
            }
            Err(error) if error.needs_sign_in() => {
                // Another process sharing the store (the daemon and a CLI command) may have
                // refreshed first, and the server rotated the token we sent: take theirs.
                if let Some(stored) = self.read_store().await?
                    && stored.grant.tokens.refresh_token.as_deref() != Some(refresh_token.as_str())
                {
                    *slot = Some(stored);
                    self.emit(AuthEvent::Authenticated);
                    return Ok(());
                }
                let message = if error.is_invalid_client() {
                    match client.kind {
                        registration::RegistrationKind::Configured => format!(
                            "the authorization server refused the configured OAuth client \
                             ({error}); check its id and secret (`switchboard server add {} ... \
                             --oauth-client-id ... --replace`), then sign in with {}",
                            self.key.server, self.sign_in_how
                        ),
                        // A dynamic registration the server dropped is registered anew at the
                        // next sign-in.
                        _ => {
                            self.store.delete_client(&grant.issuer).await?;
                            format!(
                                "the authorization server no longer knows Switchboard's client \
                                 ({error}); sign in again with {}",
                                self.sign_in_how
                            )
                        }
                    }
                } else {
                    format!(
                        "the refresh token was refused ({error}); sign in again with {}",
                        self.sign_in_how
                    )
                };
                self.forget(slot).await?;
                self.emit(AuthEvent::InvalidToken {
                    message: message.clone(),
                });
                Err(OAuthError::SignInRequired(message))
            }
            Err(error) => Err(error),
        }
    }

    async fn client_for(
        &self,
        issuer: &str,
        client_id: &str,
    ) -> Result<registration::ClientRegistration, OAuthError> {
        if let Some(configured) = self.configured_client(issuer)?
            && configured.client_id == client_id
        {
            let metadata = registration::configured_registration(
                &crate::metadata::AuthorizationServerMetadata {
                    issuer: issuer.to_owned(),
                    ..Default::default()
                },
                configured,
            );
            return Ok(metadata);
        }
        match self.store.load_client(issuer).await? {
            Some(client) if client.client_id == client_id => Ok(client),
            _ => Ok(registration::ClientRegistration {
                issuer: issuer.to_owned(),
                client_id: client_id.to_owned(),
                client_secret: None,
                auth_method: registration::TokenAuthMethod::None,
                kind: registration::RegistrationKind::MetadataDocument,
                redirect_uris: Vec::new(),
            }),
        }
    }

    /// The configured client, if it may be used at `issuer`.
    fn configured_client(&self, issuer: &str) -> Result<Option<&ConfiguredClient>, OAuthError> {
        let Some(client) = &self.settings.client else {
            return Ok(None);
        };
        match &self.settings.client_issuer {
            Some(bound) if bound != issuer => Err(OAuthError::Config(format!(
                "the configured client '{}' belongs to {bound}, but this server now uses the \
                 authorization server {issuer}; configure credentials for {issuer}",
                client.client_id
            ))),
            _ => Ok(Some(client)),
        }
    }

    fn assertion_key(&self) -> Result<Option<AssertionKey>, OAuthError> {
        match &self.settings.client {
            Some(ConfiguredClient {
                private_key_pem: Some(pem),
                signing_algorithm,
                ..
            }) => AssertionKey::from_pem(pem, signing_algorithm.as_deref().unwrap_or("RS256"))
                .map(Some),
            _ => Ok(None),
        }
    }

    async fn discover(&self, challenge: Option<&BearerChallenge>) -> Result<Discovery, OAuthError> {
        metadata::discover(&self.http, &self.server_url, challenge).await
    }

    /// DPoP-bound tokens are requested when the authorization server supports ES256 proofs and
    /// the resource server wants them: it challenged with the `DPoP` scheme, or its metadata
    /// requires bound tokens, or the user asked for DPoP. A server that only knows `Bearer` never
    /// gets a DPoP token it could not accept.
    fn wants_dpop(&self, discovery: &Discovery, challenge: Option<&BearerChallenge>) -> bool {
        let required = discovery
            .resource_metadata
            .as_ref()
            .and_then(|m| m.dpop_bound_access_tokens_required)
            == Some(true);
        let challenged = challenge.is_some_and(|c| c.scheme.eq_ignore_ascii_case("dpop"));
        let supported = crate::metadata::AuthorizationServerMetadata::lists(
            &discovery.server.dpop_signing_alg_values_supported,
            "ES256",
        );
        supported && (self.settings.dpop || required || challenged)
    }

    /// Starts an interactive sign-in: discovery, registration, and the authorization request.
    /// The caller sends the user agent to `authorization_url` and passes what comes back to
    /// [`ServerAuth::complete_sign_in`].
    pub async fn begin_sign_in(
        &self,
        redirect_uri: &str,
        challenge: Option<&BearerChallenge>,
        previously_requested: &[String],
    ) -> Result<PendingAuthorization, OAuthError> {
        let started = self
            .start_sign_in(redirect_uri, challenge, previously_requested)
            .await;
        self.reported(started)
    }

    /// Reports a failed sign-in step to the listener.
    fn reported<T>(&self, result: Result<T, OAuthError>) -> Result<T, OAuthError> {
        if let Err(error) = &result {
            self.emit(AuthEvent::Failed {
                message: error.to_string(),
            });
        }
        result
    }

    async fn start_sign_in(
        &self,
        redirect_uri: &str,
        challenge: Option<&BearerChallenge>,
        previously_requested: &[String],
    ) -> Result<PendingAuthorization, OAuthError> {
        let discovery = self.discover(challenge).await?;
        self.emit(AuthEvent::Registering);
        let configured = self.configured_client(discovery.issuer())?;
        let stored = self.store.load_client(discovery.issuer()).await?;
        let client = registration::register(
            &self.http,
            &discovery.server,
            &self.identity,
            configured,
            stored,
            redirect_uri,
        )
        .await?;
        if client.kind == registration::RegistrationKind::Dynamic {
            self.store.save_client(&client).await?;
        }
        let scope = flow::select_scope(
            &discovery,
            challenge.and_then(|c| c.scope.as_deref()),
            previously_requested,
        );
        let bind_dpop = self.wants_dpop(&discovery, challenge);
        let mut pending =
            flow::start_authorization(&self.http, discovery, client, redirect_uri, scope)?;
        pending.bind_dpop = bind_dpop;
        self.emit(AuthEvent::Authorizing {
            url: pending.authorization_url.to_string(),
        });
        Ok(pending)
    }

    /// Finishes a sign-in started with [`ServerAuth::begin_sign_in`]: validates the redirect,
    /// redeems the code and stores the tokens.
    pub async fn complete_sign_in(
        &self,
        pending: &PendingAuthorization,
        callback: &AuthorizationCallback,
    ) -> Result<(), OAuthError> {
        let mut slot = self.grant.lock().await;
        let completed = self.complete_locked(&mut slot, pending, callback).await;
        self.reported(completed)
    }

    async fn complete_locked(
        &self,
        slot: &mut Option<Loaded>,
        pending: &PendingAuthorization,
        callback: &AuthorizationCallback,
    ) -> Result<(), OAuthError> {
        let dpop = if pending.bind_dpop {
            Some(DpopKey::generate()?)
        } else {
            None
        };
        let assertion_key = self.assertion_key()?;
        let tokens = flow::finish(
            &self.http,
            pending,
            callback,
            assertion_key.as_ref(),
            dpop.as_ref(),
        )
        .await?;
        let requested = split_scopes(pending.scope.as_deref());
        self.store_tokens(
            slot,
            &pending.discovery,
            &pending.client.client_id,
            tokens,
            requested,
            dpop,
        )
        .await
    }

    async fn store_tokens(
        &self,
        slot: &mut Option<Loaded>,
        discovery: &Discovery,
        client_id: &str,
        tokens: TokenSet,
        requested_scopes: Vec<String>,
        dpop: Option<DpopKey>,
    ) -> Result<(), OAuthError> {
        let grant = StoredGrant {
            tokens,
            issuer: discovery.issuer().to_owned(),
            token_endpoint: discovery.server.endpoint("token_endpoint")?.to_string(),
            revocation_endpoint: discovery.server.revocation_endpoint.clone(),
            resource: discovery.resource.clone(),
            client_id: client_id.to_owned(),
            requested_scopes,
            dpop_key: dpop.as_ref().map(|k| k.pkcs8().to_vec()),
        };
        self.store.save_grant(&self.key, &grant).await?;
        *slot = Some(Loaded { grant, dpop });
        self.emit(AuthEvent::Authenticated);
        Ok(())
    }

    /// Runs the whole interactive flow with `authorizer`.
    pub async fn sign_in(
        &self,
        authorizer: &dyn Authorizer,
        challenge: Option<&BearerChallenge>,
    ) -> Result<(), OAuthError> {
        let mut slot = self.grant.lock().await;
        self.load(&mut slot).await?;
        let previously = slot
            .as_ref()
            .map(|l| l.grant.requested_scopes.clone())
            .unwrap_or_default();
        self.sign_in_locked(&mut slot, authorizer, challenge, &previously)
            .await
    }

    async fn sign_in_locked(
        &self,
        slot: &mut Option<Loaded>,
        authorizer: &dyn Authorizer,
        challenge: Option<&BearerChallenge>,
        previously_requested: &[String],
    ) -> Result<(), OAuthError> {
        let pending = self
            .begin_sign_in(&authorizer.redirect_uri(), challenge, previously_requested)
            .await?;
        let callback = authorizer.authorize(&pending.authorization_url).await?;
        self.complete_locked(slot, &pending, &callback).await
    }

    /// Gets a token without a person: client credentials, workload identity, or the
    /// enterprise-managed exchange.
    async fn machine_grant_locked(
        &self,
        slot: &mut Option<Loaded>,
        challenge: Option<&BearerChallenge>,
    ) -> Result<(), OAuthError> {
        let discovery = self.discover(challenge).await?;
        let scope = flow::select_scope(&discovery, challenge.and_then(|c| c.scope.as_deref()), &[])
            .map(|s| {
                // No refresh tokens for machine grants: a new token is one request away.
                s.split(' ')
                    .filter(|s| *s != "offline_access")
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|s| !s.is_empty());
        let endpoint = discovery.server.endpoint("token_endpoint")?;
        let dpop = if self.wants_dpop(&discovery, challenge) {
            Some(DpopKey::generate()?)
        } else {
            None
        };
        let assertion_key = self.assertion_key()?;
        let configured = self.configured_client(discovery.issuer())?;
        let public_client = |client_id: Option<&str>| registration::ClientRegistration {
            issuer: discovery.issuer().to_owned(),
            client_id: client_id.unwrap_or_default().to_owned(),
            client_secret: None,
            auth_method: registration::TokenAuthMethod::None,
            kind: registration::RegistrationKind::Configured,
            redirect_uris: Vec::new(),
        };
        let (client, assertion) = match &self.settings.grant {
            GrantKind::AuthorizationCode => {
                return Err(OAuthError::SignInRequired("a person has to sign in".into()));
            }
            GrantKind::ClientCredentials => {
                let configured = configured.ok_or_else(|| {
                    OAuthError::Config(
                        "the client-credentials grant needs a configured client id with a secret \
                         or a private key"
                            .into(),
                    )
                })?;
                (
                    registration::configured_registration(&discovery.server, configured),
                    None,
                )
            }
            GrantKind::WorkloadIdentity(source) => {
                let client = match configured {
                    Some(c) if c.client_secret.is_some() || c.private_key_pem.is_some() => {
                        registration::configured_registration(&discovery.server, c)
                    }
                    other => public_client(other.map(|c| c.client_id.as_str())),
                };
                (client, Some(source.read()?))
            }
            GrantKind::EnterpriseManaged(idp) => {
                let configured = configured.ok_or_else(|| {
                    OAuthError::Config(
                        "enterprise-managed authorization needs the client id (and secret) \
                         Switchboard has at the authorization server"
                            .into(),
                    )
                })?;
                let id_jag = self.exchange_for_id_jag(idp, &discovery).await?;
                (
                    registration::configured_registration(&discovery.server, configured),
                    Some(id_jag),
                )
            }
        };
        let request = TokenRequest {
            endpoint: &endpoint,
            issuer: discovery.issuer(),
            client: &client,
            assertion_key: assertion_key.as_ref(),
            resource: Some(&discovery.resource),
            scope: scope.as_deref(),
            dpop: dpop.as_ref(),
        };
        let grant = match &assertion {
            Some(assertion) => Grant::JwtBearer { assertion },
            None => Grant::ClientCredentials,
        };
        let tokens = request_token(&self.http, &request, &grant).await?;
        let requested = split_scopes(scope.as_deref());
        self.store_tokens(slot, &discovery, &client.client_id, tokens, requested, dpop)
            .await
    }

    /// RFC 8693 at the enterprise IdP: the user's ID token for an ID-JAG naming this
    /// authorization server (`audience`) and this resource.
    async fn exchange_for_id_jag(
        &self,
        idp: &EnterpriseIdp,
        discovery: &Discovery,
    ) -> Result<String, OAuthError> {
        let endpoint = Url::parse(&idp.token_endpoint)
            .map_err(|e| OAuthError::Config(format!("the IdP token endpoint is not a URL: {e}")))?;
        let client = registration::ClientRegistration {
            issuer: idp.token_endpoint.clone(),
            client_id: idp.client_id.clone().unwrap_or_default(),
            client_secret: idp.client_secret.clone(),
            auth_method: if idp.client_secret.is_some() {
                registration::TokenAuthMethod::ClientSecretBasic
            } else {
                registration::TokenAuthMethod::None
            },
            kind: registration::RegistrationKind::Configured,
            redirect_uris: Vec::new(),
        };
        let request = TokenRequest {
            endpoint: &endpoint,
            issuer: &idp.token_endpoint,
            client: &client,
            assertion_key: None,
            resource: Some(&discovery.resource),
            scope: None,
            dpop: None,
        };
        let exchanged = request_token(
            &self.http,
            &request,
            &Grant::TokenExchange {
                subject_token: &idp.id_token,
                subject_token_type: "urn:ietf:params:oauth:token-type:id_token",
                requested_token_type: "urn:ietf:params:oauth:token-type:id-jag",
                audience: Some(discovery.issuer()),
            },
        )
        .await?;
        Ok(exchanged.access_token)
    }

    /// Signs out: revokes the tokens where the server supports revocation (RFC 7009), then
    /// deletes them. Returns whether the server confirmed the revocation.
    pub async fn sign_out(&self) -> Result<bool, OAuthError> {
        let mut slot = self.grant.lock().await;
        self.load(&mut slot).await?;
        let Some(loaded) = slot.as_ref() else {
            return Ok(false);
        };
        let grant = loaded.grant.clone();
        let mut revoked = false;
        if let Some(endpoint) = grant
            .revocation_endpoint
            .as_deref()
            .and_then(|e| Url::parse(e).ok())
        {
            let client = self.client_for(&grant.issuer, &grant.client_id).await?;
            let assertion_key = self.assertion_key()?;
            revoked = true;
            for (token, hint) in [
                (grant.tokens.refresh_token.as_deref(), "refresh_token"),
                (Some(grant.tokens.access_token.as_str()), "access_token"),
            ] {
                let Some(token) = token else { continue };
                match crate::token::revoke(
                    &self.http,
                    &endpoint,
                    &grant.issuer,
                    &client,
                    assertion_key.as_ref(),
                    token,
                    hint,
                )
                .await
                {
                    Ok(()) => {}
                    // The server does not revoke this kind of token (RFC 7009 §2.2.1): nothing
                    // is left to do for it (an access token simply expires).
                    Err(OAuthError::TokenRefused { error, .. })
                        if error == "unsupported_token_type" =>
                    {
                        tracing::debug!(server = %self.key.server, hint, "the server does not revoke this kind of token");
                    }
                    Err(error) => {
                        tracing::warn!(server = %self.key.server, %error, "token revocation failed");
                        revoked = false;
                    }
                }
            }
        }
        self.forget(&mut slot).await?;
        Ok(revoked)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use futures::future::BoxFuture;

    use super::*;
    use crate::store::MemoryCredentialStore;

    /// A store that counts grant reads.
    #[derive(Default)]
    struct CountingStore {
        inner: MemoryCredentialStore,
        grant_reads: AtomicUsize,
    }

    impl CredentialStore for CountingStore {
        fn load_grant<'a>(
            &'a self,
            key: &'a GrantKey,
        ) -> BoxFuture<'a, Result<Option<StoredGrant>, OAuthError>> {
            self.grant_reads.fetch_add(1, Ordering::SeqCst);
            self.inner.load_grant(key)
        }
        fn save_grant<'a>(
            &'a self,
            key: &'a GrantKey,
            grant: &'a StoredGrant,
        ) -> BoxFuture<'a, Result<(), OAuthError>> {
            self.inner.save_grant(key, grant)
        }
        fn delete_grant<'a>(&'a self, key: &'a GrantKey) -> BoxFuture<'a, Result<(), OAuthError>> {
            self.inner.delete_grant(key)
        }
        fn load_client<'a>(
            &'a self,
            issuer: &'a str,
        ) -> BoxFuture<'a, Result<Option<registration::ClientRegistration>, OAuthError>> {
            self.inner.load_client(issuer)
        }
        fn save_client<'a>(
            &'a self,
            registration: &'a registration::ClientRegistration,
        ) -> BoxFuture<'a, Result<(), OAuthError>> {
            self.inner.save_client(registration)
        }
        fn delete_client<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<(), OAuthError>> {
            self.inner.delete_client(issuer)
        }
    }

    #[tokio::test]
    async fn a_server_without_tokens_costs_one_store_read_not_one_per_request() {
        let store = Arc::new(CountingStore::default());
        let url = Url::parse("http://127.0.0.1:1/mcp").unwrap();
        let auth = ServerAuth::new(
            url.clone(),
            GrantKey::for_server("plain"),
            OAuthHttp::new(crate::NetworkPolicy::for_server(&url, false, false)),
            ClientIdentity::default(),
            AuthSettings::default(),
            store.clone(),
        );
        for _ in 0..10 {
            assert!(auth.request_headers("POST", &url).await.unwrap().is_none());
        }
        assert_eq!(store.grant_reads.load(Ordering::SeqCst), 1);
        // Asking whether a sign-in happened meanwhile reads the store again.
        assert!(!auth.is_signed_in().await.unwrap());
        assert_eq!(store.grant_reads.load(Ordering::SeqCst), 2);
    }
}
