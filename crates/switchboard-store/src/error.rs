//! What can go wrong reading or writing the store, in one enum.

use switchboard_core::ServerId;

use crate::VaultError;

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data directory could not be created.
    #[error("cannot create data directory {path}: {error}")]
    DataDir {
        /// The directory.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The database could not be opened or queried.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A migration failed.
    #[error("cannot migrate the database schema: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// A secret could not be sealed or opened.
    #[error(transparent)]
    Vault(#[from] VaultError),
    /// A stored row could not be decoded.
    #[error("stored data for server '{server}' is corrupt: {detail}")]
    Corrupt {
        /// The server the row belongs to.
        server: String,
        /// What is wrong.
        detail: String,
    },
    /// A server with this id already exists.
    #[error("a server with id '{0}' already exists")]
    AlreadyExists(ServerId),
    /// No server has this id.
    #[error("no server with id '{0}'")]
    NotFound(ServerId),
    /// A user who does not manage their tenant tried to change one of its shared servers.
    #[error("server '{0}' is shared by your tenant; only a tenant admin can change it")]
    SharedServer(ServerId),
    /// The workspace may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// A tenant, user or API key that already exists.
    #[error("{0} already exists")]
    Exists(String),
    /// A tenant, user, API key or endpoint that does not exist.
    #[error("there is no {0}")]
    Missing(String),
    /// A definition that is not valid.
    #[error("{0}")]
    Invalid(String),
    /// `--store` is not a place a store can be.
    #[error("not a store location: {0}")]
    Location(String),
    /// The database holds secrets sealed with another vault key than this process has.
    #[error(
        "this store's secrets were sealed with a different vault key; give every process that \
         shares the store the same key (SWITCHBOARD_VAULT_KEY or the same vault.key file)"
    )]
    OtherVaultKey,
}

impl StoreError {
    /// Whether the database could not be reached (refused, reset, no connection free in time):
    /// the request may succeed later, and nothing was written.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Self::Database(
                sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
            )
        )
    }
}
