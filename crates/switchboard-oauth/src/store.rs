//! What is persisted about a sign-in, and the trait a credential store implements.
//!
//! The store itself lives in `switchboard-store` (sealed in SQLite); this crate only says what a
//! sign-in needs to survive a restart: the tokens, where to refresh them, the resource they are
//! for, the scopes requested and the DPoP key they are bound to. Client registrations are kept
//! separately, keyed by issuer.

use std::collections::HashMap;
use std::sync::Mutex;
use switchboard_core::sync::lock;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::error::OAuthError;
use crate::registration::ClientRegistration;
use crate::token::TokenSet;

/// Whose tokens: one server, one principal (the user or tenant they were obtained for).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GrantKey {
    /// The server id.
    pub server: String,
    /// The principal; `default` for a single-user daemon.
    pub principal: String,
}

impl GrantKey {
    /// The key for `server` and the default principal.
    pub fn for_server(server: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            principal: "default".into(),
        }
    }
}

/// A sign-in as persisted: enough to use and refresh the tokens after a restart.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoredGrant {
    /// The tokens (sealed at rest).
    pub tokens: TokenSet,
    /// The authorization server's issuer.
    pub issuer: String,
    /// Its token endpoint.
    pub token_endpoint: String,
    /// Its revocation endpoint, if any.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The `resource` the tokens are for.
    pub resource: String,
    /// The client id the tokens were issued to (its registration is stored by issuer).
    pub client_id: String,
    /// The scopes requested so far (step-up adds to them).
    #[serde(default)]
    pub requested_scopes: Vec<String>,
    /// PKCS#8 of the DPoP key the tokens are bound to (sealed at rest).
    #[serde(default)]
    pub dpop_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for StoredGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredGrant")
            .field("tokens", &self.tokens)
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("client_id", &self.client_id)
            .field("requested_scopes", &self.requested_scopes)
            .finish_non_exhaustive()
    }
}

/// Persistence for sign-ins and client registrations.
pub trait CredentialStore: Send + Sync {
    /// The grant stored for `key`.
    fn load_grant<'a>(
        &'a self,
        key: &'a GrantKey,
    ) -> BoxFuture<'a, Result<Option<StoredGrant>, OAuthError>>;
    /// Replaces the grant for `key`. Must be durable when it returns: a rotated refresh token is
    /// saved before it is ever used.
    fn save_grant<'a>(
        &'a self,
        key: &'a GrantKey,
        grant: &'a StoredGrant,
    ) -> BoxFuture<'a, Result<(), OAuthError>>;
    /// Forgets the grant for `key`.
    fn delete_grant<'a>(&'a self, key: &'a GrantKey) -> BoxFuture<'a, Result<(), OAuthError>>;
    /// The client registration Switchboard holds at `issuer`.
    fn load_client<'a>(
        &'a self,
        issuer: &'a str,
    ) -> BoxFuture<'a, Result<Option<ClientRegistration>, OAuthError>>;
    /// Stores a client registration (keyed by its issuer).
    fn save_client<'a>(
        &'a self,
        registration: &'a ClientRegistration,
    ) -> BoxFuture<'a, Result<(), OAuthError>>;
    /// Forgets the client registration held at `issuer` (the server no longer knows it).
    fn delete_client<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<(), OAuthError>>;
    /// Waits until this process alone may refresh the grant for `key`, among every process
    /// sharing the store, until the lease is dropped. A store only one process uses needs none
    /// (the default); one that several share (a daemon and CLI commands on one data directory)
    /// must, or two of them present the same refresh token and a server that detects reuse
    /// revokes the whole grant.
    fn lease_grant<'a>(
        &'a self,
        _key: &'a GrantKey,
    ) -> BoxFuture<'a, Result<GrantLease, OAuthError>> {
        Box::pin(std::future::ready(Ok(GrantLease::new(|| {}))))
    }
}

/// The right to refresh one grant, among the processes sharing a store; given back when dropped.
pub struct GrantLease {
    release: Option<Box<dyn FnOnce() + Send>>,
}

impl GrantLease {
    /// A lease that runs `release` when dropped.
    pub fn new(release: impl FnOnce() + Send + 'static) -> Self {
        Self {
            release: Some(Box::new(release)),
        }
    }
}

impl Drop for GrantLease {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

/// A store in memory, for one-shot processes and tests.
#[derive(Debug, Default)]
pub struct MemoryCredentialStore {
    grants: Mutex<HashMap<GrantKey, StoredGrant>>,
    clients: Mutex<HashMap<String, ClientRegistration>>,
}

impl CredentialStore for MemoryCredentialStore {
    fn load_grant<'a>(
        &'a self,
        key: &'a GrantKey,
    ) -> BoxFuture<'a, Result<Option<StoredGrant>, OAuthError>> {
        Box::pin(async move { Ok(lock(&self.grants).get(key).cloned()) })
    }

    fn save_grant<'a>(
        &'a self,
        key: &'a GrantKey,
        grant: &'a StoredGrant,
    ) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            lock(&self.grants).insert(key.clone(), grant.clone());
            Ok(())
        })
    }

    fn delete_grant<'a>(&'a self, key: &'a GrantKey) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            lock(&self.grants).remove(key);
            Ok(())
        })
    }

    fn delete_client<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            lock(&self.clients).remove(issuer);
            Ok(())
        })
    }

    fn load_client<'a>(
        &'a self,
        issuer: &'a str,
    ) -> BoxFuture<'a, Result<Option<ClientRegistration>, OAuthError>> {
        Box::pin(async move { Ok(lock(&self.clients).get(issuer).cloned()) })
    }

    fn save_client<'a>(
        &'a self,
        registration: &'a ClientRegistration,
    ) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            lock(&self.clients).insert(registration.issuer.clone(), registration.clone());
            Ok(())
        })
    }
}
