//! PKCE (RFC 7636, S256 only) and the random values of an authorization request.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// 32 random bytes, base64url: 43 characters, 256 bits of entropy.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A PKCE verifier and its S256 challenge.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Pkce {
    /// The secret verifier, sent only to the token endpoint.
    pub verifier: String,
    /// `BASE64URL(SHA256(verifier))`, sent in the authorization request.
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce")
            .field("challenge", &self.challenge)
            .finish_non_exhaustive()
    }
}

impl Pkce {
    /// A fresh verifier and challenge.
    pub(crate) fn generate() -> Self {
        let verifier = random_token();
        let challenge = s256(&verifier);
        Self {
            verifier,
            challenge,
        }
    }
}

/// `BASE64URL(SHA256(input))`.
pub(crate) fn s256(input: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(input.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_the_base64url_sha256_of_the_verifier() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r7wW1gFWFOEjXk"),
            // Computed independently: python3 hashlib.sha256 + urlsafe_b64encode.
            "bwWFMyPfdG9qreDhH2lmftFx_dFeLDalzcT1gb_j68g"
        );
        let pkce = Pkce::generate();
        assert_eq!(pkce.verifier.len(), 43);
        assert_ne!(Pkce::generate().verifier, pkce.verifier);
        assert!(!format!("{pkce:?}").contains(&pkce.verifier));
    }
}
