//! Who a multi-user daemon's credentials name: the users and keys in the store, for the front
//! door that sends each request to its caller's workspace (`serve --users`). The front door
//! keeps what it looked up for a while; the store is asked here.

use switchboard_core::{Principal, Role, TenantId, UserId};
use switchboard_store::{EndpointKeyOwner, Store, StoreError};

/// The users, their API keys and the tenants' endpoint keys, as every workspace shares them.
#[derive(Clone)]
pub struct UserDirectory {
    store: Store,
}

impl From<Store> for UserDirectory {
    fn from(store: Store) -> Self {
        Self { store }
    }
}

/// Why a user an identity provider vouched for cannot be recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordUserError {
    /// The user may not be added: their tenant is not set up, or the store refuses them.
    #[error("{0}")]
    Refused(String),
    /// The store did not answer.
    #[error(transparent)]
    Unavailable(StoreError),
}

impl UserDirectory {
    /// Whether `key` has an endpoint key's shape (rather than a user's API key's).
    pub fn is_endpoint_key(key: &str) -> bool {
        key.starts_with(switchboard_store::ENDPOINT_KEY_PREFIX)
    }

    /// Whether `credential` has a user's API key's shape (made with `switchboard user key`).
    pub fn is_api_key(credential: &str) -> bool {
        credential.starts_with(switchboard_store::API_KEY_PREFIX)
    }

    /// The user whose API key `key` is, if anyone's.
    pub async fn principal_for_api_key(&self, key: &str) -> Result<Option<Principal>, StoreError> {
        self.store.principal_for_api_key(key).await
    }

    /// Whom the endpoint key `key` speaks for, if it is one.
    pub async fn endpoint_key_owner(
        &self,
        key: &str,
    ) -> Result<Option<EndpointKeyOwner>, StoreError> {
        self.store.endpoint_key_owner(key).await
    }

    /// Adds the user an identity provider vouched for, unless the store has them already.
    pub async fn record_user(
        &self,
        tenant: &TenantId,
        user: &UserId,
        role: Role,
    ) -> Result<(), RecordUserError> {
        match self.store.ensure_user(tenant, user, role).await {
            Ok(_) => Ok(()),
            Err(StoreError::Missing(what)) => Err(RecordUserError::Refused(format!(
                "{what} is not set up in Switchboard: an operator adds it with `switchboard tenant add`"
            ))),
            Err(StoreError::Forbidden(why)) => Err(RecordUserError::Refused(why)),
            Err(error) => Err(RecordUserError::Unavailable(error)),
        }
    }

    /// Whether user `user` of `tenant` is still in the store (not when their tenant is gone).
    pub async fn user_exists(&self, tenant: &TenantId, user: &UserId) -> Result<bool, StoreError> {
        match self.store.user(tenant, user).await {
            Ok(found) => Ok(found.is_some()),
            // The tenant went with its users.
            Err(StoreError::Missing(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }
}
