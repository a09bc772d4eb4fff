//! Sealing secrets before they reach the database.
//!
//! Secret values (header values, environment values, URLs, OAuth tokens and client secrets) are
//! encrypted with XChaCha20-Poly1305 under a 256-bit key. The master key comes from
//! `SWITCHBOARD_VAULT_KEY` (base64) or from a key file that is created with mode 0600 on first run;
//! it wraps each tenant's data key ([`crate::keys`]), which seals that tenant's secrets. Each
//! sealed value binds the context it belongs to (server row and field name) as associated data,
//! so a sealed value copied to another row does not open.
//!
//! While the master key is being replaced, `SWITCHBOARD_VAULT_PREVIOUS_KEY` holds the old one:
//! what the new key does not open is tried with it.

use std::fs;
use std::io::Write;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;

/// Name of the environment variable that may carry the key (base64 of 32 bytes).
pub(crate) const KEY_ENV: &str = switchboard_core::server::VAULT_KEY_ENV;
/// Name of the environment variable that may carry the previous master key, while it is being
/// replaced.
pub(crate) const PREVIOUS_KEY_ENV: &str = "SWITCHBOARD_VAULT_PREVIOUS_KEY";
/// Prefix marking a value sealed with the master key inside stored JSON.
const SEALED_PREFIX: &str = "sealed:v1:";
const NONCE_LEN: usize = 24;

/// Errors from the vault.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The key in the environment or the key file is not 32 bytes of base64.
    #[error("the vault key from {origin} is not valid: expected base64 of 32 bytes")]
    BadKey {
        /// Where the key came from.
        origin: String,
    },
    /// The key file could not be read or created.
    #[error("cannot use vault key file {path}: {error}")]
    KeyFile {
        /// The key file's path.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A sealed value did not open: wrong key, corrupted data, or moved to another context.
    #[error(
        "cannot unseal a secret for {context}: it was sealed with a different vault key or has been altered"
    )]
    Unseal {
        /// What the secret belongs to.
        context: String,
    },
    /// A stored value claims to be sealed but is not in the sealed format.
    #[error("a stored secret for {context} is malformed")]
    Malformed {
        /// What the secret belongs to.
        context: String,
    },
}

/// The key that seals and opens secrets.
pub struct Vault {
    cipher: XChaCha20Poly1305,
    /// The key this one replaces, tried for what this one does not open.
    previous: Option<XChaCha20Poly1305>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault(..)")
    }
}

impl Vault {
    /// A vault from raw key bytes.
    pub fn from_key(key: [u8; 32]) -> Self {
        Self {
            cipher: XChaCha20Poly1305::new(&key.into()),
            previous: None,
        }
    }

    /// A fresh random key, and the vault of it.
    pub fn generate() -> ([u8; 32], Self) {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        (key, Self::from_key(key))
    }

    /// The key as the key file and `SWITCHBOARD_VAULT_KEY` hold it (base64).
    pub fn encode_key(key: &[u8; 32]) -> String {
        B64.encode(key)
    }

    /// This vault, also opening what `previous` sealed.
    pub fn with_previous(mut self, previous: Vault) -> Self {
        self.previous = Some(previous.cipher);
        self
    }

    fn from_base64(text: &str, origin: &str) -> Result<Self, VaultError> {
        let bytes = B64.decode(text.trim()).map_err(|_| VaultError::BadKey {
            origin: origin.into(),
        })?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| VaultError::BadKey {
            origin: origin.into(),
        })?;
        Ok(Self::from_key(key))
    }

    /// Loads the key from `SWITCHBOARD_VAULT_KEY` if set, else from `key_file`, creating that file
    /// (mode 0600) with a fresh random key if it does not exist.
    pub fn load_or_create(key_file: &Path) -> Result<Self, VaultError> {
        let vault = Self::load_current(key_file)?;
        match std::env::var(PREVIOUS_KEY_ENV) {
            Ok(text) => Ok(vault.with_previous(Self::from_base64(&text, PREVIOUS_KEY_ENV)?)),
            Err(_) => Ok(vault),
        }
    }

    /// The key in `key_file`, creating the file (mode 0600) with a fresh key if it is missing.
    pub fn load_or_create_file(key_file: &Path) -> Result<Self, VaultError> {
        let io_err = |error| VaultError::KeyFile {
            path: key_file.display().to_string(),
            error,
        };
        match fs::read_to_string(key_file) {
            Ok(text) => {
                warn_if_readable_by_others(key_file);
                Self::from_base64(&text, &key_file.display().to_string())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (key, vault) = Self::generate();
                let mut options = fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut file = options.open(key_file).map_err(io_err)?;
                file.write_all(B64.encode(key).as_bytes()).map_err(io_err)?;
                file.sync_all().map_err(io_err)?;
                Ok(vault)
            }
            Err(e) => Err(io_err(e)),
        }
    }

    fn load_current(key_file: &Path) -> Result<Self, VaultError> {
        if let Ok(text) = std::env::var(KEY_ENV) {
            return Self::from_base64(&text, KEY_ENV);
        }
        Self::load_or_create_file(key_file)
    }

    /// Seals `plain`, binding it to `context` (e.g. `server:notion/value:Authorization`).
    pub fn seal(&self, context: &str, plain: &str) -> String {
        format!("{SEALED_PREFIX}{}", self.seal_bare(context, plain))
    }

    /// [`Self::seal`] without the format prefix (the nonce and ciphertext, base64): for
    /// formats that say more about the key (a tenant's data key and its version).
    pub(crate) fn seal_bare(&self, context: &str, plain: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let ciphertext = self
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain.as_bytes(),
                    aad: context.as_bytes(),
                },
            )
            // XChaCha20-Poly1305 encryption only fails for messages beyond 256 GiB.
            .expect("sealing a value below the AEAD size limit cannot fail");
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&ciphertext);
        B64.encode(blob)
    }

    /// Opens a value produced by [`Self::seal`] with the same `context`.
    pub fn unseal(&self, context: &str, sealed: &str) -> Result<String, VaultError> {
        let encoded = sealed
            .strip_prefix(SEALED_PREFIX)
            .ok_or_else(|| VaultError::Malformed {
                context: context.into(),
            })?;
        self.unseal_bare(context, encoded)
    }

    /// Opens what [`Self::seal_bare`] made.
    pub(crate) fn unseal_bare(&self, context: &str, encoded: &str) -> Result<String, VaultError> {
        let malformed = || VaultError::Malformed {
            context: context.into(),
        };
        let blob = B64.decode(encoded).map_err(|_| malformed())?;
        if blob.len() < NONCE_LEN {
            return Err(malformed());
        }
        let (nonce, ciphertext) = blob.split_at(NONCE_LEN);
        let payload = || Payload {
            msg: ciphertext,
            aad: context.as_bytes(),
        };
        let plain = self
            .cipher
            .decrypt(XNonce::from_slice(nonce), payload())
            .or_else(|error| match &self.previous {
                Some(previous) => previous.decrypt(XNonce::from_slice(nonce), payload()),
                None => Err(error),
            })
            .map_err(|_| VaultError::Unseal {
                context: context.into(),
            })?;
        String::from_utf8(plain).map_err(|_| malformed())
    }
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            "the vault key file is readable by other users; run chmod 600 on it"
        );
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_the_same_key_and_context() {
        let vault = Vault::from_key([7; 32]);
        let sealed = vault.seal("server:a/header:Authorization", "Bearer secret");
        assert!(!sealed.contains("secret"));
        assert_eq!(
            vault
                .unseal("server:a/header:Authorization", &sealed)
                .unwrap(),
            "Bearer secret"
        );
        assert!(matches!(
            vault.unseal("server:b/header:Authorization", &sealed),
            Err(VaultError::Unseal { .. })
        ));
        assert!(matches!(
            Vault::from_key([8; 32]).unseal("server:a/header:Authorization", &sealed),
            Err(VaultError::Unseal { .. })
        ));
        assert!(matches!(
            vault.unseal("x", "sealed:v1:AAAA"),
            Err(VaultError::Malformed { .. })
        ));
        assert!(matches!(
            vault.unseal("x", "plain"),
            Err(VaultError::Malformed { .. })
        ));
    }

    #[test]
    fn key_file_is_created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vault.key");
        let first = Vault::load_or_create(&path).unwrap();
        let sealed = first.seal("c", "v");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let second = Vault::load_or_create(&path).unwrap();
        assert_eq!(second.unseal("c", &sealed).unwrap(), "v");
        fs::write(&path, "not base64!").unwrap();
        assert!(matches!(
            Vault::load_or_create(&path),
            Err(VaultError::BadKey { .. })
        ));
    }
}

#[cfg(test)]
mod rotation_tests {
    use super::*;

    #[test]
    fn a_vault_with_the_previous_key_opens_what_either_key_sealed() {
        let old = Vault::from_key([1; 32]);
        let sealed = old.seal("c", "secret");
        let new = Vault::from_key([2; 32]);
        assert!(new.unseal("c", &sealed).is_err());
        let both = Vault::from_key([2; 32]).with_previous(Vault::from_key([1; 32]));
        assert_eq!(both.unseal("c", &sealed).unwrap(), "secret");
        assert_eq!(both.unseal("c", &new.seal("c", "fresh")).unwrap(), "fresh");
        assert!(
            both.unseal("other", &sealed).is_err(),
            "the context still binds"
        );
    }
}
