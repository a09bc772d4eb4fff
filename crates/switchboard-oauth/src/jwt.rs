//! JWTs Switchboard signs: `private_key_jwt` client assertions (RFC 7523) and DPoP proofs
//! (RFC 9449).
//!
//! Signing is jsonwebtoken's (on aws-lc-rs); the JOSE header is assembled here because DPoP needs
//! `typ: dpop+jwt` and an embedded public JWK, which is simpler to state directly than through the
//! crate's generic header type.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{Value, json};
use url::Url;

use crate::error::OAuthError;
use crate::pkce::{random_token, s256};

/// Lifetime of a client assertion.
const ASSERTION_LIFETIME_SECS: u64 = 300;

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn sign(
    header: &Value,
    claims: &Value,
    key: &EncodingKey,
    alg: Algorithm,
) -> Result<String, OAuthError> {
    let encode = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let message = format!("{}.{}", encode(header), encode(claims));
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), key, alg)
        .map_err(|e| OAuthError::Jwt(e.to_string()))?;
    Ok(format!("{message}.{signature}"))
}

/// A private key for signing client assertions.
#[derive(Clone)]
pub struct AssertionKey {
    key: EncodingKey,
    alg: Algorithm,
}

impl std::fmt::Debug for AssertionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssertionKey")
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl AssertionKey {
    /// Reads a PEM private key for the JWS algorithm `alg` (`RS256`, `ES256`, `PS256`, `EdDSA`, ...).
    pub fn from_pem(pem: &str, alg: &str) -> Result<Self, OAuthError> {
        let alg: Algorithm = alg
            .parse()
            .map_err(|_| OAuthError::Config(format!("unsupported signing algorithm '{alg}'")))?;
        let bad_key = |e: jsonwebtoken::errors::Error| {
            OAuthError::Config(format!(
                "the private key is not a valid {alg:?} PEM key: {e}"
            ))
        };
        let key = match alg {
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => EncodingKey::from_rsa_pem(pem.as_bytes()).map_err(bad_key)?,
            Algorithm::ES256 | Algorithm::ES384 => {
                EncodingKey::from_ec_pem(pem.as_bytes()).map_err(bad_key)?
            }
            Algorithm::EdDSA => EncodingKey::from_ed_pem(pem.as_bytes()).map_err(bad_key)?,
            _ => {
                return Err(OAuthError::Config(format!(
                    "'{alg:?}' is a shared-secret algorithm; private_key_jwt needs a private key"
                )));
            }
        };
        Ok(Self { key, alg })
    }

    /// A client assertion for `client_id` addressed to `audience` (RFC 7523 §3).
    pub fn client_assertion(&self, client_id: &str, audience: &str) -> Result<String, OAuthError> {
        let now = now_secs();
        let header = json!({"alg": self.alg, "typ": "JWT"});
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME_SECS,
            "jti": random_token(),
        });
        sign(&header, &claims, &self.key, self.alg)
    }

    /// Signs arbitrary claims with this key (used for assertion grants).
    pub fn sign_claims(&self, claims: &Value, typ: &str) -> Result<String, OAuthError> {
        sign(
            &json!({"alg": self.alg, "typ": typ}),
            claims,
            &self.key,
            self.alg,
        )
    }
}

/// A DPoP key pair (P-256). Tokens bound to it are only usable with proofs it signs, so it is
/// kept (sealed) with the tokens.
pub struct DpopKey {
    pkcs8: Vec<u8>,
    key: EncodingKey,
    jwk: Value,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpopKey")
            .field("jwk", &self.jwk)
            .finish_non_exhaustive()
    }
}

impl Clone for DpopKey {
    fn clone(&self) -> Self {
        Self {
            pkcs8: self.pkcs8.clone(),
            key: self.key.clone(),
            jwk: self.jwk.clone(),
        }
    }
}

impl DpopKey {
    /// A new random key.
    pub fn generate() -> Result<Self, OAuthError> {
        let document =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .map_err(|_| OAuthError::Jwt("cannot generate a P-256 key".into()))?;
        Self::from_pkcs8(document.as_ref())
    }

    /// The key from its PKCS#8 DER encoding.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, OAuthError> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8)
            .map_err(|e| OAuthError::Jwt(format!("stored DPoP key is invalid: {e}")))?;
        let public = pair.public_key().as_ref();
        // Uncompressed point: 0x04 || x (32 bytes) || y (32 bytes).
        if public.len() != 65 || public[0] != 4 {
            return Err(OAuthError::Jwt(
                "unexpected P-256 public key encoding".into(),
            ));
        }
        let jwk = json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&public[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&public[33..65]),
        });
        Ok(Self {
            pkcs8: pkcs8.to_vec(),
            key: EncodingKey::from_ec_der(pkcs8),
            jwk,
        })
    }

    /// The PKCS#8 encoding, for sealed storage.
    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The public key as a JWK.
    pub fn public_jwk(&self) -> &Value {
        &self.jwk
    }

    /// The RFC 7638 thumbprint of the public key.
    pub fn thumbprint(&self) -> String {
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            self.jwk["x"].as_str().unwrap_or_default(),
            self.jwk["y"].as_str().unwrap_or_default()
        );
        URL_SAFE_NO_PAD.encode(<sha2::Sha256 as sha2::Digest>::digest(canonical.as_bytes()))
    }

    /// A DPoP proof for `method` on `url`; with `access_token` for resource requests (`ath`),
    /// and the server's `nonce` when it demanded one.
    pub fn proof(
        &self,
        method: &str,
        url: &Url,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, OAuthError> {
        let mut htu = url.clone();
        htu.set_query(None);
        htu.set_fragment(None);
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk});
        let mut claims = json!({
            "jti": random_token(),
            "htm": method,
            "htu": htu.as_str(),
            "iat": now_secs(),
        });
        if let Some(token) = access_token {
            claims["ath"] = json!(s256(token));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        sign(&header, &claims, &self.key, Algorithm::ES256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_part(jwt: &str, index: usize) -> Value {
        let part = jwt.split('.').nth(index).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn a_dpop_proof_carries_the_public_key_and_request_binding() {
        let key = DpopKey::generate().unwrap();
        let url = Url::parse("https://mcp.example.com/mcp?x=1#f").unwrap();
        let proof = key.proof("POST", &url, Some("token"), Some("n1")).unwrap();
        let header = decode_part(&proof, 0);
        let claims = decode_part(&proof, 1);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["crv"], "P-256");
        assert!(
            header["jwk"].get("d").is_none(),
            "the private key must never be sent"
        );
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example.com/mcp");
        assert_eq!(claims["ath"], s256("token"));
        assert_eq!(claims["nonce"], "n1");
        let restored = DpopKey::from_pkcs8(key.pkcs8()).unwrap();
        assert_eq!(restored.thumbprint(), key.thumbprint());
    }

    #[test]
    fn shared_secret_algorithms_are_refused_for_assertions() {
        assert!(AssertionKey::from_pem("x", "HS256").is_err());
        assert!(AssertionKey::from_pem("not a key", "RS256").is_err());
        assert!(AssertionKey::from_pem("x", "nope").is_err());
    }
}
