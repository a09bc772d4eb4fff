//! Switchboard's persistence.
//!
//! Server definitions, credentials, probe results and activation layers live in an embedded
//! SQLite database by default (WAL mode, so the CLI and a running daemon can share it), or in
//! PostgreSQL when several replicas share one state ([`db`]: one API, the same SQL on both).
//! Schema changes are versioned migrations under `migrations/<engine>/`, embedded in the binary
//! and applied on open; once released a migration never changes (`migrations/released.sha256`,
//! checked by a test), a change is a new one. Every value marked secret is sealed by the [`vault`] before it is
//! written, and opened again on read; the database never holds a secret in plain text.

mod activations;
mod approved;
mod audit;
mod changes;
mod credentials;
mod db;
mod definitions;
mod endpoints;
mod error;
mod grants;
mod keys;
mod sessions;
mod settings;
mod store;
mod tenancy;
mod vault;
mod vectors;

pub use changes::ChangeWatch;
pub use credentials::{PendingSignIn, SignInOutcome};
pub use db::StoreLocation;
pub use endpoints::{ENDPOINT_KEY_PREFIX, EndpointKeyOwner, endpoint_key_digest};
pub use keys::Resealed;
pub use tenancy::{API_KEY_PREFIX, ApiKeyRecord, TenantRecord, UserRecord};
pub use vault::{Vault, VaultError};
pub use vectors::{TextDigest, text_digest};

/// File name of the database inside the data directory.
pub const DATABASE_FILE: &str = "switchboard.db";
/// File name of the vault key inside the data directory.
pub const KEY_FILE: &str = "vault.key";

pub use error::StoreError;
pub use store::{CachedProbe, Store, StoreFingerprint, default_data_dir};
pub(crate) use store::{
    SELECT_SERVER_COLUMNS, ServerRow, VAULT_CHECK_CONTEXT, VAULT_CHECK_VALUE, grant_principal,
    now_ms,
};
