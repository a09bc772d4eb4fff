//! OAuth state for the hub's servers: one [`ServerAuth`] per HTTP server, persisted in the store.
//!
//! The hub has no person at hand, so its `ServerAuth`s have no authorizer: they use and refresh
//! stored tokens, and a server that needs a sign-in waits in `needs-auth` until
//! `switchboard login` (or the admin API) stores tokens. The CLI's `login` builds its
//! `ServerAuth` with [`server_auth`] too, so both see the same credentials.

use std::sync::Arc;

use switchboard_core::{OAuthGrant, ServerDefinition, ServerId, TransportSpec};
use switchboard_oauth::{
    AuthSettings, ClientIdentity, ConfiguredClient, GrantKind, NetworkPolicy, OAuthError,
    OAuthHttp, PendingAuthorization, ServerAuth,
};
use switchboard_store::Store;

/// OAuth settings shared by every server of a hub.
#[derive(Clone, Default)]
pub struct OAuthOptions {
    /// How Switchboard presents itself to authorization servers.
    pub identity: ClientIdentity,
    /// Allow authorization servers on loopback (always allowed for a server on loopback).
    pub allow_loopback: bool,
    /// Allow authorization servers on private networks.
    pub allow_private: bool,
    /// Networks and hosts the operator allows besides (`--allow-upstream-network`).
    pub allowed: switchboard_core::network::AllowedNetworks,
    /// A person who can be asked for more scope when a server answers 403
    /// `insufficient_scope` (a CLI command's browser); without one, the scope is remembered for
    /// the next sign-in and the call fails saying so.
    pub step_up: Option<std::sync::Arc<dyn switchboard_oauth::Authorizer>>,
}

impl std::fmt::Debug for OAuthOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthOptions")
            .field("identity", &self.identity)
            .field("allow_loopback", &self.allow_loopback)
            .field("allow_private", &self.allow_private)
            .field("allowed", &self.allowed)
            .field("step_up", &self.step_up.is_some())
            .finish()
    }
}

/// Environment variable that lets OAuth requests reach private networks (`1` or `true`).
pub const ALLOW_PRIVATE_ENV: &str = "SWITCHBOARD_OAUTH_ALLOW_PRIVATE";

impl OAuthOptions {
    /// Defaults, plus [`ALLOW_PRIVATE_ENV`] for authorization servers inside a company network.
    pub fn from_env() -> Self {
        let allow_private = std::env::var(ALLOW_PRIVATE_ENV)
            .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes"));
        Self {
            allow_private,
            ..Self::default()
        }
    }
}

/// The OAuth state for `def`, or `None` for transports that do not use OAuth (stdio,
/// WebSocket).
pub async fn server_auth(
    def: &ServerDefinition,
    store: &Store,
    options: &OAuthOptions,
) -> Result<Option<ServerAuth>, switchboard_store::StoreError> {
    let TransportSpec::Http { url, .. } = &def.transport else {
        return Ok(None);
    };
    // The workspace's user signs in as themselves, to the server's row.
    let key = store.grant_key(&def.id).await?;
    let policy = NetworkPolicy::for_server(url, options.allow_loopback, options.allow_private)
        .with_allowed(options.allowed.clone());
    let configured = def.oauth_client.as_ref();
    let settings = AuthSettings {
        client: configured.map(|c| ConfiguredClient {
            client_id: c.client_id.clone(),
            client_secret: c.client_secret.clone(),
            private_key_pem: c.private_key_pem.clone(),
            signing_algorithm: c.signing_algorithm.clone(),
            auth_method: None,
        }),
        client_issuer: configured.and_then(|c| c.issuer.clone()),
        grant: match configured.map(|c| c.grant) {
            Some(OAuthGrant::ClientCredentials) => GrantKind::ClientCredentials,
            _ => GrantKind::AuthorizationCode,
        },
        ..AuthSettings::default()
    };
    let auth = ServerAuth::new(
        url.clone(),
        key,
        OAuthHttp::new(policy),
        options.identity.clone(),
        settings,
        Arc::new(store.clone()),
    );
    // A user of a multi-user daemon signs in through it: the CLI signs in for the local
    // workspace only.
    let auth = if store.workspace().user().is_some() {
        auth.with_sign_in_how(format!(
            "the console's Sign in (POST /api/servers/{}/login)",
            def.id
        ))
    } else {
        auth
    };
    Ok(Some(match &options.step_up {
        Some(person) => auth.with_step_up_authorizer(person.clone()),
        None => auth,
    }))
}

/// Why a person-driven sign-in cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// No server has this id.
    #[error("no server with id '{0}'")]
    UnknownServer(ServerId),
    /// The server is not reached over HTTP.
    #[error("'{0}' is not an HTTP server; OAuth sign-in applies to HTTP servers only")]
    NotHttp(ServerId),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
    /// Discovery, registration or the authorization request failed.
    #[error("cannot start signing in to '{server}': {detail}")]
    OAuth {
        /// The server.
        server: ServerId,
        /// What failed (kept whole in the message, so it is not also a `source`).
        detail: OAuthError,
    },
}

/// The OAuth state of the configured server `id` (for `login`, `logout` and the admin API).
pub async fn server_auth_for(
    store: &Store,
    id: &ServerId,
    options: &OAuthOptions,
) -> Result<(ServerDefinition, ServerAuth), SignInError> {
    let def = store
        .get_server(id)
        .await?
        .ok_or_else(|| SignInError::UnknownServer(id.clone()))?;
    let auth = server_auth(&def, store, options)
        .await?
        .ok_or_else(|| SignInError::NotHttp(id.clone()))?;
    Ok((def, auth))
}

/// Starts a sign-in that a person completes in a browser: asks the server for its challenge
/// (resource metadata URL, scope), then runs discovery, registration and the authorization
/// request with `redirect_uri`, asking again for the scopes of any earlier sign-in and of a
/// step-up the server asked for since, and for `more_scopes`.
pub async fn begin_sign_in(
    http: &switchboard_upstream::HttpClients,
    def: &ServerDefinition,
    auth: &ServerAuth,
    redirect_uri: &str,
    more_scopes: &[String],
) -> Result<PendingAuthorization, SignInError> {
    let TransportSpec::Http { url, headers, .. } = &def.transport else {
        return Err(SignInError::NotHttp(def.id.clone()));
    };
    let challenge = switchboard_upstream::auth_challenge(http, url, headers).await;
    // What the last sign-in asked for, what a server's step-up asked for since (remembered with
    // the grant), and what the user asks for now.
    let mut previously = auth.requested_scopes().await;
    for scope in more_scopes {
        if !previously.contains(scope) {
            previously.push(scope.clone());
        }
    }
    auth.begin_sign_in(redirect_uri, challenge.as_ref(), &previously)
        .await
        .map_err(|detail| SignInError::OAuth {
            server: def.id.clone(),
            detail,
        })
}
