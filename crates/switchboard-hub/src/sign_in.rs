//! Sign-in driven by a person in a browser, through the daemon (the admin API's
//! `POST /api/servers/{id}/login` and the `/oauth/callback` route, which only carry HTTP in and
//! out): [`Hub::start_sign_in`] runs discovery, registration and the authorization request and
//! keeps the pending sign-in in the store; [`Hub::complete_sign_in`] claims it by `state`,
//! redeems the code into the workspace that started it (whichever workspace's route the
//! redirect reached), records it in the audit log and lets the server connect.
//!
//! A pending sign-in is kept in the store for [`SIGN_IN_LIFETIME`], sealed with the tenant's key
//! and found by the SHA-256 of its `state`, so the redirect may reach any replica behind a load
//! balancer (whose address `serve --public-url` names) and survives a restart; nothing about it
//! is logged. The process that started it also keeps, in memory ([`SignIns`], one per daemon,
//! shared by every workspace's routes), the listener that shows its progress in the server's
//! state; a sign-in completed elsewhere shows when the server's task next finds the tokens in
//! the store, and one that failed elsewhere through the store's record of how it ended.
//!
//! [`Hub::sign_out`] undoes it: the tokens revoked where the server supports that, deleted,
//! and the server restarted so it shows that it needs a sign-in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard_core::{ServerId, TransportSpec};
use switchboard_oauth::{AuthEvent, AuthorizationCallback, OAuthError};
use switchboard_store::StoreError;
use switchboard_store::{PendingSignIn, SignInOutcome};

use crate::{Hub, SignInError, begin_sign_in, lock, server_auth_for};

/// How long a started sign-in may wait for its redirect.
pub const SIGN_IN_LIFETIME: Duration = Duration::from_secs(600);

/// How often a process checks the store for how its sign-ins ended elsewhere.
const OUTCOME_CHECK: Duration = Duration::from_secs(2);

/// Shows a sign-in's progress in its server's state (see [`Hub::sign_in_listener`]).
type Listener = Arc<dyn Fn(AuthEvent) + Send + Sync>;

/// The listeners of the sign-ins this process started, by `state`, until their redirect comes
/// back or they expire. One per daemon: a redirect may come back through another workspace's
/// route than the one that started it.
#[derive(Default)]
pub struct SignIns {
    by_state: Mutex<HashMap<String, (Listener, Instant)>>,
}

impl SignIns {
    /// Remembers `listener` for the sign-in with `state`, and follows it in `hub`'s store until
    /// it ends: a redirect completed by another process (another replica) that failed is shown
    /// here too, through `listener`.
    fn insert(self: &Arc<Self>, state: &str, listener: Listener, store: switchboard_store::Store) {
        {
            let mut map = lock(&self.by_state);
            map.retain(|_, (_, started)| started.elapsed() < SIGN_IN_LIFETIME);
            map.insert(state.to_owned(), (listener, Instant::now()));
        }
        let (sign_ins, state) = (Arc::downgrade(self), state.to_owned());
        tokio::spawn(async move {
            let started = Instant::now();
            while started.elapsed() < SIGN_IN_LIFETIME {
                tokio::time::sleep(OUTCOME_CHECK).await;
                let Some(sign_ins) = sign_ins.upgrade() else {
                    return;
                };
                if !sign_ins.holds(&state) {
                    return; // completed here
                }
                match store.pending_sign_in_outcome(&state).await {
                    Ok(SignInOutcome::Waiting) => {}
                    Ok(SignInOutcome::Failed(message)) => {
                        if let Some(listener) = sign_ins.take(&state) {
                            listener(AuthEvent::Failed { message });
                        }
                        return;
                    }
                    // Completed elsewhere: the server's task finds the tokens in the store.
                    Ok(SignInOutcome::Gone) => {
                        sign_ins.take(&state);
                        return;
                    }
                    Err(error) => {
                        tracing::debug!(%error, "cannot read how a sign-in ended; trying again");
                    }
                }
            }
        });
    }

    fn holds(&self, state: &str) -> bool {
        lock(&self.by_state).contains_key(state)
    }

    fn take(&self, state: &str) -> Option<Listener> {
        lock(&self.by_state)
            .remove(state)
            .map(|(listener, _)| listener)
    }
}

/// How a redirect that named a pending sign-in ended.
#[derive(Debug)]
pub struct CompletedSignIn {
    /// The server it signed in to.
    pub server: ServerId,
    /// Whether its tokens were stored; why not, when they were not.
    pub outcome: Result<(), String>,
}

/// What signing out of a server did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedOut {
    /// Whether it had tokens to sign out of.
    pub signed_out: bool,
    /// Whether the authorization server revoked them.
    pub revoked: bool,
}

/// Why signing out of a server failed.
#[derive(Debug, thiserror::Error)]
pub enum SignOutError {
    /// The server is unknown or not an HTTP server, or the store could not be read.
    #[error(transparent)]
    Server(#[from] SignInError),
    /// Whether the server has tokens could not be read.
    #[error(transparent)]
    Unreadable(OAuthError),
    /// Revoking or deleting the tokens failed.
    #[error(transparent)]
    Revocation(OAuthError),
}

impl Hub {
    /// Signs the workspace out of server `id`: revokes its tokens where the server supports
    /// that, deletes them, and restarts the server (so it shows that it needs a sign-in).
    pub async fn sign_out(self: &Arc<Self>, id: &ServerId) -> Result<SignedOut, SignOutError> {
        let (def, auth) = server_auth_for(&self.store, id, &self.oauth).await?;
        if !auth
            .is_signed_in()
            .await
            .map_err(SignOutError::Unreadable)?
        {
            return Ok(SignedOut {
                signed_out: false,
                revoked: false,
            });
        }
        let revoked = auth.sign_out().await.map_err(SignOutError::Revocation)?;
        if def.enabled {
            self.start(def).await;
        }
        Ok(SignedOut {
            signed_out: true,
            revoked,
        })
    }

    /// Starts a sign-in to server `id` that a person completes in a browser, redirected to
    /// `redirect_uri` (see [`begin_sign_in`]; `more_scopes` on top of those asked before); the
    /// browser that started it is `browser` (its cookie). Returns the authorization URL to send
    /// the person to; the pending sign-in waits in the store for [`SIGN_IN_LIFETIME`], its
    /// progress shown in the server's state.
    pub async fn start_sign_in(
        &self,
        sign_ins: &Arc<SignIns>,
        id: &ServerId,
        redirect_uri: &str,
        more_scopes: &[String],
        browser: &str,
    ) -> Result<url::Url, SignInError> {
        let (def, auth) = server_auth_for(&self.store, id, &self.oauth).await?;
        let listener: Listener = Arc::new(self.sign_in_listener(id));
        let auth = {
            let listener = listener.clone();
            auth.with_listener(move |event| listener(event))
        };
        let pending = begin_sign_in(self.http(), &def, &auth, redirect_uri, more_scopes).await?;
        let TransportSpec::Http {
            url: server_url, ..
        } = &def.transport
        else {
            return Err(SignInError::NotHttp(id.clone()));
        };
        self.store
            .put_pending_sign_in(
                id,
                server_url.as_str(),
                &pending,
                Some(browser),
                SIGN_IN_LIFETIME,
            )
            .await?;
        sign_ins.insert(&pending.state, listener, self.store.clone());
        Ok(pending.authorization_url)
    }

    /// The sign-in waiting for the redirect with `state`, if one does (in whichever workspace
    /// started it).
    pub async fn pending_sign_in(&self, state: &str) -> Result<Option<PendingSignIn>, StoreError> {
        self.store.pending_sign_in(state).await
    }

    /// Completes the sign-in `callback` names: claims it (once, on any replica), redeems its
    /// code into the workspace that started it and the server row it started for, records it in
    /// the audit log, and says how it ended where it started (through its listener when that is
    /// this process, which connects the server at once, else through the store). `None` when no
    /// sign-in waits for `callback`'s `state`.
    pub async fn complete_sign_in(
        &self,
        sign_ins: &SignIns,
        callback: &AuthorizationCallback,
    ) -> Result<Option<CompletedSignIn>, StoreError> {
        let Some(state) = callback.state.as_deref() else {
            return Ok(None);
        };
        let listener = sign_ins.take(state);
        let Some(login) = self.store.claim_pending_sign_in(state).await? else {
            return Ok(None);
        };
        let server = login.server.clone();
        let workspace = login.workspace.clone();
        let outcome = self.redeem(login, callback).await;
        self.audit_sign_in(
            &workspace,
            &server,
            outcome.as_ref().err().map(String::as_str),
        );
        let failure_elsewhere = outcome.as_ref().err().filter(|_| listener.is_none());
        if let Err(error) = self
            .store
            .finish_pending_sign_in(state, failure_elsewhere.map(String::as_str))
            .await
        {
            tracing::warn!(%error, "cannot record how a sign-in ended");
        }
        // The server's task sees the new tokens (at once through the listener here, or in the
        // store on another replica) and connects.
        if let Some(listener) = listener {
            listener(match &outcome {
                Ok(()) => AuthEvent::Authenticated,
                Err(message) => AuthEvent::Failed {
                    message: message.clone(),
                },
            });
        }
        Ok(Some(CompletedSignIn { server, outcome }))
    }

    /// Redeems the code of a claimed sign-in; why not, when it fails.
    async fn redeem(
        &self,
        login: PendingSignIn,
        callback: &AuthorizationCallback,
    ) -> Result<(), String> {
        let store = self.store.for_workspace(login.workspace);
        let id = &login.server;
        let (def, auth) = server_auth_for(&store, id, &self.oauth)
            .await
            .map_err(|error| error.to_string())?;
        // The tokens are for the server the sign-in started for: not for one redefined,
        // replaced or shadowed meanwhile.
        let same_server = match (&def.transport, store.grant_key(id).await) {
            (TransportSpec::Http { url, .. }, Ok(key)) => {
                url.as_str() == login.url && key.server == login.row_key
            }
            _ => false,
        };
        if !same_server {
            return Err("the server changed since the sign-in started; start it again".into());
        }
        auth.complete_sign_in(&login.authorization, callback)
            .await
            .map_err(|error| error.to_string())
    }
}
