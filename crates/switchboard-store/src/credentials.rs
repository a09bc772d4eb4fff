//! OAuth credentials in the store: the `CredentialStore` the sign-in layer persists through.
//!
//! A grant (access and refresh token, DPoP key, where to refresh) and a client registration
//! (client id and secret) are each sealed as one JSON document, bound by the vault to their key,
//! so a row copied to another server or issuer does not open. Writes commit before they return
//! (SQLite's FULL synchronous mode), which is what lets a rotated refresh token be saved before
//! it is used.

use futures::future::BoxFuture;
use switchboard_core::{Principal, ServerId, Workspace};
use switchboard_oauth::{
    ClientRegistration, CredentialStore, GrantKey, GrantLease, OAuthError, PendingAuthorization,
    StoredGrant,
};

use crate::db::{Db, on_db};
use crate::{Store, StoreError, now_ms};

fn grant_context(key: &GrantKey) -> String {
    grant_context_of(&key.server, &key.principal)
}

/// What a grant's sealed tokens are bound to: its server row and principal.
pub(crate) fn grant_context_of(server: &str, principal: &str) -> String {
    format!("oauth-grant:{server}/{principal}")
}

pub(crate) fn client_context(issuer: &str) -> String {
    format!("oauth-client:{issuer}")
}

/// What a pending sign-in's sealed request is bound to: its row's state, tenant, user and
/// server, so a row altered to name another user does not open.
fn pending_context(state_digest: &str, tenant: &str, user: Option<&str>, server: &str) -> String {
    format!(
        "oauth-pending:{state_digest}/{tenant}/{}/{server}",
        user.unwrap_or("")
    )
}

/// A sign-in that was waiting for its redirect, read from the store by its `state`.
#[derive(Debug)]
pub struct PendingSignIn {
    /// The workspace it was started in (its user as they are now).
    pub workspace: Workspace,
    /// The server it signs in to.
    pub server: ServerId,
    /// The server's row when it started (see [`Store::grant_key`]): the tokens go to it only.
    pub row_key: String,
    /// The server's URL when it started: the tokens are for it only.
    pub url: String,
    /// Whether the browser that started it held a cookie, and its SHA-256 (hex).
    pub browser_digest: Option<String>,
    /// The authorization request, to check and redeem the redirect with.
    pub authorization: PendingAuthorization,
}

impl PendingSignIn {
    /// Whether the browser holding `cookie` (its `switchboard_browser` cookie, if it sent one)
    /// is the one that started this sign-in.
    pub fn started_by_browser(&self, cookie: Option<&str>) -> bool {
        match (&self.browser_digest, cookie) {
            (Some(digest), Some(cookie)) => *digest == crate::tenancy::digest(cookie),
            _ => false,
        }
    }
}

/// How a pending sign-in stands (see [`Store::pending_sign_in_outcome`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInOutcome {
    /// Waiting for its redirect, or being completed.
    Waiting,
    /// Its redirect was taken and the sign-in failed, for this reason.
    Failed(String),
    /// Completed, or expired.
    Gone,
}

/// What is sealed for a pending sign-in (`A` is the request: borrowed when sealing, owned
/// when opening).
#[derive(serde::Serialize, serde::Deserialize)]
struct SealedSignIn<A> {
    authorization: A,
    row_key: String,
    url: String,
}

/// A pending sign-in's row: tenant, user, server, sealed request, browser digest, expiry.
type PendingRow = (String, Option<String>, String, String, Option<String>, i64);

fn store_error(error: impl std::fmt::Display) -> OAuthError {
    OAuthError::Store(error.to_string())
}

impl Store {
    /// Keeps `authorization`, started in this workspace for `server` at `url`, until its
    /// redirect comes back (to any process on this store) or `lifetime` passes; `browser` is
    /// the cookie the starting browser holds, if any. Expired ones are dropped.
    pub async fn put_pending_sign_in(
        &self,
        server: &ServerId,
        url: &str,
        authorization: &PendingAuthorization,
        browser: Option<&str>,
        lifetime: std::time::Duration,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        on_db!(&self.db, pool => sqlx::query("DELETE FROM pending_sign_ins WHERE expires_at_ms < $1")
            .bind(now)
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
        let state_digest = crate::tenancy::digest(&authorization.state);
        let corrupt = |e: serde_json::Error| StoreError::Corrupt {
            server: server.to_string(),
            detail: e.to_string(),
        };
        let row_key = self.grant_key(server).await?.server;
        let plain = serde_json::to_string(&SealedSignIn {
            authorization,
            row_key,
            url: url.to_owned(),
        })
        .map_err(corrupt)?;
        let tenant = self.workspace.tenant();
        let user = self.workspace.user().map(|user| user.as_str().to_owned());
        let context = pending_context(
            &state_digest,
            tenant.as_str(),
            user.as_deref(),
            server.as_str(),
        );
        let sealed = self.seal_for(&tenant, &context, &plain).await?;
        let expires = now.saturating_add(i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX));
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO pending_sign_ins
                 (state_digest, tenant, user_id, server_id, sealed_json, browser_digest, expires_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&state_digest)
        .bind(tenant.as_str())
        .bind(&user)
        .bind(server.as_str())
        .bind(&sealed)
        .bind(browser.map(crate::tenancy::digest))
        .bind(expires)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(())
    }

    /// The sign-in whose request carried `state`, whichever workspace started it, left in
    /// place: to say whose it is before anyone completes it.
    pub async fn pending_sign_in(&self, state: &str) -> Result<Option<PendingSignIn>, StoreError> {
        let state_digest = crate::tenancy::digest(state);
        let row: Option<PendingRow> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT tenant, user_id, server_id, sealed_json, browser_digest, expires_at_ms
             FROM pending_sign_ins WHERE state_digest = $1 AND NOT claimed",
        )
        .bind(&state_digest)
        .fetch_optional(pool)
        .await)?;
        self.open_pending(&state_digest, row).await
    }

    /// Claims the sign-in whose request carried `state`, whichever workspace started it: once
    /// (a second redirect with the same `state` finds nothing), and only before it expires and
    /// while its user still exists. The claimer then says how it ended
    /// ([`Self::finish_pending_sign_in`]).
    pub async fn claim_pending_sign_in(
        &self,
        state: &str,
    ) -> Result<Option<PendingSignIn>, StoreError> {
        let state_digest = crate::tenancy::digest(state);
        let row: Option<PendingRow> = on_db!(&self.db, pool => sqlx::query_as(
            "UPDATE pending_sign_ins SET claimed = TRUE WHERE state_digest = $1 AND NOT claimed
             RETURNING tenant, user_id, server_id, sealed_json, browser_digest, expires_at_ms",
        )
        .bind(&state_digest)
        .fetch_optional(pool)
        .await)?;
        self.open_pending(&state_digest, row).await
    }

    /// Ends a claimed sign-in: forgotten when it succeeded, or kept with why it `failed` for the
    /// process that started it to show ([`Self::pending_sign_in_outcome`]).
    pub async fn finish_pending_sign_in(
        &self,
        state: &str,
        failed: Option<&str>,
    ) -> Result<(), StoreError> {
        let state_digest = crate::tenancy::digest(state);
        match failed {
            None => on_db!(&self.db, pool => sqlx::query(
                "DELETE FROM pending_sign_ins WHERE state_digest = $1",
            )
            .bind(&state_digest)
            .execute(pool)
            .await
            .map(drop))?,
            Some(why) => on_db!(&self.db, pool => sqlx::query(
                "UPDATE pending_sign_ins SET failure = $2 WHERE state_digest = $1",
            )
            .bind(&state_digest)
            .bind(why)
            .execute(pool)
            .await
            .map(drop))?,
        }
        Ok(())
    }

    /// How the sign-in whose request carried `state` stands, for the process that started it:
    /// still waiting for its redirect (or being completed), failed (read once: the row is then
    /// forgotten), or gone (completed, or expired).
    pub async fn pending_sign_in_outcome(&self, state: &str) -> Result<SignInOutcome, StoreError> {
        let state_digest = crate::tenancy::digest(state);
        let failure: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar(
            "DELETE FROM pending_sign_ins WHERE state_digest = $1 AND failure IS NOT NULL
             RETURNING failure",
        )
        .bind(&state_digest)
        .fetch_optional(pool)
        .await)?;
        if let Some(failure) = failure {
            return Ok(SignInOutcome::Failed(failure));
        }
        let expires: Option<i64> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT expires_at_ms FROM pending_sign_ins WHERE state_digest = $1",
        )
        .bind(&state_digest)
        .fetch_optional(pool)
        .await)?;
        Ok(match expires {
            Some(at) if at >= now_ms() => SignInOutcome::Waiting,
            _ => SignInOutcome::Gone,
        })
    }

    /// A pending sign-in's row, opened: nothing once expired or once its user is gone.
    async fn open_pending(
        &self,
        state_digest: &str,
        row: Option<PendingRow>,
    ) -> Result<Option<PendingSignIn>, StoreError> {
        let Some((tenant, user, server, sealed, browser_digest, expires)) = row else {
            return Ok(None);
        };
        if expires < now_ms() {
            return Ok(None);
        }
        let corrupt = |detail: String| StoreError::Corrupt {
            server: server.clone(),
            detail,
        };
        let context = pending_context(state_digest, &tenant, user.as_deref(), &server);
        let tenant = switchboard_core::TenantId::new(tenant).map_err(|e| corrupt(e.to_string()))?;
        let workspace = match user {
            None => Workspace::Local,
            Some(user) => {
                let user =
                    switchboard_core::UserId::new(user).map_err(|e| corrupt(e.to_string()))?;
                let Some(record) = self.user(&tenant, &user).await? else {
                    return Ok(None);
                };
                Workspace::User(Principal {
                    tenant: record.tenant,
                    user: record.id,
                    role: record.role,
                    groups: Default::default(),
                })
            }
        };
        let plain = self.unseal_for(&tenant, &context, &sealed).await?;
        let opened: SealedSignIn<PendingAuthorization> =
            serde_json::from_str(&plain).map_err(|e| corrupt(format!("a stored sign-in: {e}")))?;
        let server = ServerId::new(server.clone()).map_err(|e| corrupt(e.to_string()))?;
        Ok(Some(PendingSignIn {
            workspace,
            server,
            row_key: opened.row_key,
            url: opened.url,
            browser_digest,
            authorization: opened.authorization,
        }))
    }

    /// The grant stored for `key`, opened.
    pub async fn oauth_grant(&self, key: &GrantKey) -> Result<Option<StoredGrant>, StoreError> {
        let sealed: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT sealed_json FROM oauth_grants WHERE server_id = $1 AND principal = $2",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .fetch_optional(pool)
        .await)?;
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        let plain = self
            .unseal_for(&self.workspace.tenant(), &grant_context(key), &sealed)
            .await?;
        serde_json::from_str(&plain)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                server: key.server.clone(),
                detail: format!("stored OAuth tokens: {e}"),
            })
    }

    /// Stores (replaces) the grant for `key`.
    pub async fn put_oauth_grant(
        &self,
        key: &GrantKey,
        grant: &StoredGrant,
    ) -> Result<(), StoreError> {
        let plain = serde_json::to_string(grant).map_err(|e| StoreError::Corrupt {
            server: key.server.clone(),
            detail: e.to_string(),
        })?;
        let sealed = self
            .seal_for(&self.workspace.tenant(), &grant_context(key), &plain)
            .await?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO oauth_grants (server_id, principal, sealed_json, updated_at_ms)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT(server_id, principal) DO UPDATE SET sealed_json = $3, updated_at_ms = $4",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .bind(&sealed)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(())
    }

    /// Forgets the grant for `key`.
    pub async fn delete_oauth_grant(&self, key: &GrantKey) -> Result<(), StoreError> {
        on_db!(&self.db, pool => sqlx::query("DELETE FROM oauth_grants WHERE server_id = $1 AND principal = $2")
            .bind(&key.server)
            .bind(&key.principal)
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
        Ok(())
    }

    /// Takes the refresh lease of `key` for `holder` for `ttl`, if nobody else holds it (or the
    /// holder's lease ran out); whether it was taken.
    pub async fn try_lease_grant(
        &self,
        key: &GrantKey,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let until = now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
        let taken = on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO oauth_grant_leases (server_id, principal, holder, expires_at_ms)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT(server_id, principal) DO UPDATE SET holder = $3, expires_at_ms = $4
             WHERE oauth_grant_leases.expires_at_ms < $5 OR oauth_grant_leases.holder = $3",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .bind(holder)
        .bind(until)
        .bind(now)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(taken == 1)
    }

    /// Drops the refresh lease of `key` if its holder is a process that no longer runs (it was
    /// killed mid-refresh): nobody has to wait for the lease to run out. Every process sharing
    /// an SQLite file runs on this machine, so a process id says whether the holder lives.
    pub async fn clear_dead_grant_lease(&self, key: &GrantKey) -> Result<(), StoreError> {
        let holder: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT holder FROM oauth_grant_leases WHERE server_id = $1 AND principal = $2",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .fetch_optional(pool)
        .await)?;
        let Some(holder) = holder else {
            return Ok(());
        };
        let pid = holder.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !process_runs(pid)) {
            self.release_grant_lease(key, &holder).await?;
        }
        Ok(())
    }

    /// Gives back a lease taken with [`Self::try_lease_grant`].
    pub async fn release_grant_lease(
        &self,
        key: &GrantKey,
        holder: &str,
    ) -> Result<(), StoreError> {
        on_db!(&self.db, pool => sqlx::query(
            "DELETE FROM oauth_grant_leases WHERE server_id = $1 AND principal = $2 AND holder = $3",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .bind(holder)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(())
    }

    /// The client registration held at `issuer`, opened.
    pub async fn oauth_client(
        &self,
        issuer: &str,
    ) -> Result<Option<ClientRegistration>, StoreError> {
        let sealed: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar("SELECT sealed_json FROM oauth_clients WHERE issuer = $1")
            .bind(issuer)
            .fetch_optional(pool)
            .await)?;
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        let plain = self.vault.unseal(&client_context(issuer), &sealed)?;
        serde_json::from_str(&plain)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                server: issuer.to_owned(),
                detail: format!("stored client registration: {e}"),
            })
    }

    /// Stores a client registration under its issuer.
    pub async fn put_oauth_client(
        &self,
        registration: &ClientRegistration,
    ) -> Result<(), StoreError> {
        let plain = serde_json::to_string(registration).map_err(|e| StoreError::Corrupt {
            server: registration.issuer.clone(),
            detail: e.to_string(),
        })?;
        let sealed = self
            .vault
            .seal(&client_context(&registration.issuer), &plain);
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO oauth_clients (issuer, sealed_json, updated_at_ms) VALUES ($1, $2, $3)
             ON CONFLICT(issuer) DO UPDATE SET sealed_json = $2, updated_at_ms = $3",
        )
        .bind(&registration.issuer)
        .bind(&sealed)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(())
    }
}

/// How long a refresh lease lasts if its holder never gives it back (it died).
const LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a process waits for another's refresh before giving up.
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(40);
/// How often a waiting process checks the lease again.
const LEASE_POLL: std::time::Duration = std::time::Duration::from_millis(25);

fn refreshed_elsewhere_too_long(key: &GrantKey) -> OAuthError {
    OAuthError::Store(format!(
        "another process has been refreshing the tokens of '{}' for {} s",
        key.server,
        LEASE_WAIT.as_secs()
    ))
}

/// PostgreSQL's lease: a row lock on the grant's lease row, held by an open transaction until
/// the lease is dropped. Replicas on other machines cannot be asked whether a process lives, but
/// the database knows when a connection is gone: a replica that dies mid-refresh releases the
/// lock with its connection, and nobody waits for an expiry.
async fn lock_grant(pool: &sqlx::PgPool, key: &GrantKey) -> Result<GrantLease, OAuthError> {
    let locked = async {
        // The row must exist, committed, before it can be locked.
        sqlx::query(
            "INSERT INTO oauth_grant_leases (server_id, principal, holder, expires_at_ms)
             VALUES ($1, $2, '', 0) ON CONFLICT(server_id, principal) DO NOTHING",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .execute(pool)
        .await?;
        let mut tx = pool.begin().await?;
        sqlx::query(&format!(
            "SET LOCAL lock_timeout = '{}s'",
            LEASE_WAIT.as_secs()
        ))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "SELECT holder FROM oauth_grant_leases WHERE server_id = $1 AND principal = $2
             FOR UPDATE",
        )
        .bind(&key.server)
        .bind(&key.principal)
        .execute(&mut *tx)
        .await?;
        Ok::<_, sqlx::Error>(tx)
    };
    let tx = match locked.await {
        Ok(tx) => tx,
        // lock_not_available: the lock timeout passed while another replica held the row.
        Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some("55P03") => {
            return Err(refreshed_elsewhere_too_long(key));
        }
        Err(error) => return Err(store_error(StoreError::from(error))),
    };
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = released.await;
        // Ending the transaction releases the lock; if even that fails, the connection is
        // closed when the pool drops it, which releases it too.
        let _ = tx.rollback().await;
    });
    Ok(GrantLease::new(move || drop(release)))
}

/// Whether the process `pid` still runs.
fn process_runs(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 sends nothing; kill only checks that the process exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// A holder name unique to this lease: the process id and a random number.
fn lease_holder() -> String {
    format!("{}-{:016x}", std::process::id(), rand::random::<u64>())
}

impl CredentialStore for Store {
    fn load_grant<'a>(
        &'a self,
        key: &'a GrantKey,
    ) -> BoxFuture<'a, Result<Option<StoredGrant>, OAuthError>> {
        Box::pin(async move { self.oauth_grant(key).await.map_err(store_error) })
    }

    fn save_grant<'a>(
        &'a self,
        key: &'a GrantKey,
        grant: &'a StoredGrant,
    ) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move { self.put_oauth_grant(key, grant).await.map_err(store_error) })
    }

    fn delete_grant<'a>(&'a self, key: &'a GrantKey) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move { self.delete_oauth_grant(key).await.map_err(store_error) })
    }

    fn load_client<'a>(
        &'a self,
        issuer: &'a str,
    ) -> BoxFuture<'a, Result<Option<ClientRegistration>, OAuthError>> {
        Box::pin(async move { self.oauth_client(issuer).await.map_err(store_error) })
    }

    fn delete_client<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            on_db!(&self.db, pool => sqlx::query("DELETE FROM oauth_clients WHERE issuer = $1")
                .bind(issuer)
                .execute(pool)
                .await
                .map(|done| done.rows_affected()))
            .map(|_| ())
            .map_err(|e| store_error(StoreError::from(e)))
        })
    }

    fn lease_grant<'a>(
        &'a self,
        key: &'a GrantKey,
    ) -> BoxFuture<'a, Result<GrantLease, OAuthError>> {
        Box::pin(async move {
            if let Db::Postgres(pool) = &self.db {
                return lock_grant(pool, key).await;
            }
            let holder = lease_holder();
            let deadline = tokio::time::Instant::now() + LEASE_WAIT;
            loop {
                if self
                    .try_lease_grant(key, &holder, LEASE_TTL)
                    .await
                    .map_err(store_error)?
                {
                    break;
                }
                self.clear_dead_grant_lease(key)
                    .await
                    .map_err(store_error)?;
                if tokio::time::Instant::now() >= deadline {
                    return Err(refreshed_elsewhere_too_long(key));
                }
                tokio::time::sleep(LEASE_POLL).await;
            }
            let (store, key) = (self.clone(), key.clone());
            Ok(GrantLease::new(move || {
                // Given back in the background; if that fails, the lease runs out by itself.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        let _ = store.release_grant_lease(&key, &holder).await;
                    });
                }
            }))
        })
    }

    fn save_client<'a>(
        &'a self,
        registration: &'a ClientRegistration,
    ) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            self.put_oauth_client(registration)
                .await
                .map_err(store_error)
        })
    }
}
