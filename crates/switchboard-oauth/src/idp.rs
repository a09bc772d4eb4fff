//! Verifying the bearer tokens a team's identity provider gives its people, so they can use
//! Switchboard as themselves (the other direction from the rest of this crate, which signs
//! Switchboard in to upstream servers).
//!
//! The provider is named by its issuer URL. Its OpenID Connect discovery document (or RFC 8414
//! metadata, with the same exact-`issuer` check as upstream discovery) gives its `jwks_uri`, and
//! its JSON Web Key Set the keys. A token is taken only when it is a JWT signed with an
//! asymmetric algorithm (never `none` or an HMAC, whose "key" would be public) by a key of that
//! set, names the issuer, names Switchboard's audience, and is within its lifetime (`exp`, and
//! `nbf` when it has one; 60 s of clock skew allowed). A token signed by a key not in the set
//! makes Switchboard read the set again (the provider rotated its keys), at most once a minute,
//! whether that reading succeeds or not: a provider answering errors is not asked once per
//! token. Every fetch goes through the SSRF-guarded client.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use url::Url;

use crate::metadata::fetch_server_metadata;
use crate::net::OAuthHttp;

/// Why a token was not taken.
#[derive(Debug, thiserror::Error)]
pub enum IdpError {
    /// The token is not acceptable (bad signature, wrong issuer or audience, expired, ...).
    #[error("the token is not accepted: {0}")]
    Rejected(String),
    /// The provider could not be asked for its keys.
    #[error("the identity provider's keys cannot be read: {0}")]
    Unavailable(String),
}

/// Algorithms a provider may sign with: asymmetric only.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// How often the key set may be read again for an unknown key.
const REFRESH_AT_MOST_EVERY: Duration = Duration::from_secs(60);

/// A provider's keys, as last read.
#[derive(Default)]
struct Keys {
    by_id: HashMap<String, DecodingKey>,
    /// Keys without an id, tried in turn.
    unnamed: Vec<DecodingKey>,
    /// When the set was last asked for, read or not.
    asked_at: Option<Instant>,
    /// Why the last reading failed, while it is the last.
    failure: Option<String>,
}

/// One identity provider, whose tokens name Switchboard as their audience.
pub struct IdentityProvider {
    issuer: String,
    audience: String,
    http: OAuthHttp,
    jwks_uri: tokio::sync::OnceCell<Url>,
    keys: tokio::sync::RwLock<Keys>,
    /// How often the key set may be read again for an unknown key.
    refresh_at_most_every: Duration,
    /// Taken while the key set is read, so a burst of tokens reads it once.
    reading: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl IdentityProvider {
    /// The provider whose issuer is `issuer` (exactly as its tokens and metadata write it),
    /// for tokens whose audience is `audience`, reached through `http`.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>, http: OAuthHttp) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            http,
            jwks_uri: tokio::sync::OnceCell::new(),
            keys: tokio::sync::RwLock::default(),
            refresh_at_most_every: REFRESH_AT_MOST_EVERY,
            reading: tokio::sync::Mutex::new(()),
        }
    }

    /// Reads the key set again for an unknown key at most once per `every` (a minute unless
    /// set).
    pub fn with_key_refresh_interval(mut self, every: Duration) -> Self {
        self.refresh_at_most_every = every;
        self
    }

    /// The issuer, as tokens must name it.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Checks `token` and returns its claims.
    pub async fn verify(&self, token: &str) -> Result<serde_json::Map<String, Value>, IdpError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| IdpError::Rejected(format!("not a JWT: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(IdpError::Rejected(format!(
                "signed with {:?}, which Switchboard does not take from an identity provider",
                header.alg
            )));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        // A token valid only from later is not valid now.
        validation.validate_nbf = true;
        let mut refreshed = false;
        loop {
            let found = self.key_for(header.kid.as_deref()).await;
            for key in &found {
                match jsonwebtoken::decode::<serde_json::Map<String, Value>>(
                    token,
                    key,
                    &validation,
                ) {
                    Ok(data) => return Ok(data.claims),
                    // Another key may have signed it: one this set holds, or, once the set is
                    // read again, one the provider rotated in.
                    Err(error)
                        if matches!(
                            error.kind(),
                            jsonwebtoken::errors::ErrorKind::InvalidSignature
                        ) => {}
                    Err(error) => return Err(IdpError::Rejected(error.to_string())),
                }
            }
            if refreshed || !self.read_keys(false).await? {
                return Err(IdpError::Rejected(
                    "signed by a key the identity provider does not publish".into(),
                ));
            }
            refreshed = true;
        }
    }

    /// The keys that may have signed a token naming `kid` (all unnamed keys when it names
    /// none).
    async fn key_for(&self, kid: Option<&str>) -> Vec<DecodingKey> {
        let keys = self.keys.read().await;
        match kid {
            Some(kid) => keys.by_id.get(kid).cloned().into_iter().collect(),
            None => keys
                .unnamed
                .iter()
                .chain(keys.by_id.values())
                .cloned()
                .collect(),
        }
    }

    /// Reads the key set again, unless it was asked for less than a minute ago (`force` aside),
    /// successfully or not; whether it was read. Within the minute after a failed reading, the
    /// failure is the answer.
    async fn read_keys(&self, force: bool) -> Result<bool, IdpError> {
        let _one_reader = self.reading.lock().await;
        if !force {
            let keys = self.keys.read().await;
            if keys
                .asked_at
                .is_some_and(|at| at.elapsed() < self.refresh_at_most_every)
            {
                return match &keys.failure {
                    Some(failure) => Err(IdpError::Unavailable(failure.clone())),
                    None => Ok(false),
                };
            }
        }
        self.keys.write().await.asked_at = Some(Instant::now());
        match self.fetch_keys().await {
            Ok(mut keys) => {
                keys.asked_at = Some(Instant::now());
                *self.keys.write().await = keys;
                Ok(true)
            }
            Err(error) => {
                self.keys.write().await.failure = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// The provider's key set, read now.
    async fn fetch_keys(&self) -> Result<Keys, IdpError> {
        let uri = self
            .jwks_uri
            .get_or_try_init(|| async {
                let metadata = fetch_server_metadata(&self.http, &self.issuer)
                    .await
                    .map_err(|e| IdpError::Unavailable(e.to_string()))?
                    .ok_or_else(|| {
                        IdpError::Unavailable(format!(
                            "{} publishes no discovery document",
                            self.issuer
                        ))
                    })?;
                let uri = metadata.jwks_uri.ok_or_else(|| {
                    IdpError::Unavailable(format!("{} names no jwks_uri", self.issuer))
                })?;
                Url::parse(&uri).map_err(|e| {
                    IdpError::Unavailable(format!("its jwks_uri '{uri}' is not a URL: {e}"))
                })
            })
            .await?
            .clone();
        let reply = self
            .http
            .get(&uri, "JSON Web Key Set", reqwest::header::HeaderMap::new())
            .await
            .map_err(|e| IdpError::Unavailable(e.to_string()))?;
        if !reply.status.is_success() {
            return Err(IdpError::Unavailable(format!(
                "{uri} answered {}",
                reply.status
            )));
        }
        let set: JwkSet = reply
            .json("JSON Web Key Set", &uri)
            .map_err(|e| IdpError::Unavailable(e.to_string()))?;
        let mut keys = Keys::default();
        for jwk in &set.keys {
            // A key of a kind that cannot verify signatures (an encryption key) is left out.
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_id.insert(kid.clone(), key);
                }
                None => keys.unnamed.push(key),
            }
        }
        Ok(keys)
    }

    /// Reads the provider's discovery document and keys now, so a misconfigured provider is
    /// reported at start rather than at the first token.
    pub async fn prepare(&self) -> Result<(), IdpError> {
        self.read_keys(true).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use switchboard_fixtures::oauth::OpenIdProvider;

    use super::*;
    use crate::jwt::DpopKey;
    use crate::net::NetworkPolicy;

    /// The fixture provider (its key set replaced at will), with this module's ways of publishing
    /// keys, signing tokens and verifying them.
    struct Provider(OpenIdProvider);

    impl Provider {
        async fn start() -> Self {
            Self(OpenIdProvider::start(Vec::new()).await)
        }

        /// Publishes `keys` (each with its `kid`, if given), in place of the set it had.
        fn publish(&self, keys: &[(&DpopKey, Option<&str>)]) {
            self.0.publish(
                keys.iter()
                    .map(|(key, kid)| {
                        let mut jwk = key.public_jwk().clone();
                        if let Some(kid) = kid {
                            jwk["kid"] = json!(kid);
                        }
                        jwk
                    })
                    .collect(),
            );
        }

        /// A token for Switchboard signed with `key`, naming `kid` if given.
        fn token(&self, key: &DpopKey, kid: Option<&str>) -> String {
            self.token_with(key, kid, json!({}))
        }

        /// [`Self::token`] with `more` claims.
        fn token_with(&self, key: &DpopKey, kid: Option<&str>, more: Value) -> String {
            let mut header = jsonwebtoken::Header::new(Algorithm::ES256);
            header.kid = kid.map(str::to_owned);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let mut claims = json!({"iss": self.0.issuer, "sub": "ana", "aud": "switchboard",
                                    "iat": now, "exp": now + 300});
            if let (Some(claims), Some(more)) = (claims.as_object_mut(), more.as_object()) {
                claims.extend(more.clone());
            }
            jsonwebtoken::encode(
                &header,
                &claims,
                &jsonwebtoken::EncodingKey::from_ec_der(key.pkcs8()),
            )
            .unwrap()
        }

        fn verifier(&self) -> IdentityProvider {
            let policy = NetworkPolicy {
                allow_loopback: true,
                ..NetworkPolicy::default()
            };
            IdentityProvider::new(&self.0.issuer, "switchboard", OAuthHttp::new(policy))
        }
    }

    #[tokio::test]
    async fn a_key_the_provider_rotates_in_is_taken_and_one_it_retired_is_refused() {
        let provider = Provider::start().await;
        let (old, new) = (DpopKey::generate().unwrap(), DpopKey::generate().unwrap());
        provider.publish(&[(&old, Some("old"))]);
        let verifier = provider
            .verifier()
            .with_key_refresh_interval(Duration::ZERO);
        verifier.prepare().await.unwrap();
        assert!(
            verifier
                .verify(&provider.token(&old, Some("old")))
                .await
                .is_ok()
        );
        let early = verifier.verify(&provider.token(&new, Some("new"))).await;
        assert!(
            matches!(&early, Err(IdpError::Rejected(why)) if why.contains("does not publish")),
            "{early:?}"
        );

        // The provider publishes the new key beside the old, then retires the old one.
        provider.publish(&[(&old, Some("old")), (&new, Some("new"))]);
        assert!(
            verifier
                .verify(&provider.token(&new, Some("new")))
                .await
                .is_ok()
        );
        provider.publish(&[(&new, Some("new"))]);
        let unknown = DpopKey::generate().unwrap();
        assert!(
            verifier
                .verify(&provider.token(&unknown, Some("x")))
                .await
                .is_err()
        );
        let retired = verifier.verify(&provider.token(&old, Some("old"))).await;
        assert!(
            matches!(&retired, Err(IdpError::Rejected(why)) if why.contains("does not publish")),
            "{retired:?}"
        );

        // Keys without ids (a token naming none) rotate the same way.
        let unnamed = DpopKey::generate().unwrap();
        provider.publish(&[(&new, Some("new")), (&unnamed, None)]);
        assert!(
            verifier
                .verify(&provider.token(&unnamed, None))
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn unknown_keys_make_the_set_be_read_again_at_most_once_a_minute() {
        let provider = Provider::start().await;
        let known = DpopKey::generate().unwrap();
        provider.publish(&[(&known, Some("known"))]);
        let verifier = provider.verifier();
        verifier.prepare().await.unwrap();
        assert_eq!(provider.0.key_set_reads(), 1);
        for n in 0..5 {
            let stranger = DpopKey::generate().unwrap();
            let kid = format!("stranger-{n}");
            let token = provider.token(&stranger, Some(&kid));
            assert!(verifier.verify(&token).await.is_err());
        }
        assert_eq!(
            provider.0.key_set_reads(),
            1,
            "a burst of unknown keys reads the set no more than the minute allows"
        );
        assert!(
            verifier
                .verify(&provider.token(&known, Some("known")))
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_token_valid_only_later_is_refused_now() {
        let provider = Provider::start().await;
        let key = DpopKey::generate().unwrap();
        provider.publish(&[(&key, Some("k"))]);
        let verifier = provider.verifier();
        verifier.prepare().await.unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let tomorrow = provider.token_with(
            &key,
            Some("k"),
            json!({"nbf": now + 86_400, "exp": now + 2 * 86_400}),
        );
        let refused = verifier.verify(&tomorrow).await;
        assert!(
            matches!(&refused, Err(IdpError::Rejected(why)) if why.contains("ImmatureSignature")),
            "{refused:?}"
        );
        let started = provider.token_with(&key, Some("k"), json!({"nbf": now - 10}));
        assert!(verifier.verify(&started).await.is_ok());
    }

    #[tokio::test]
    async fn a_provider_answering_errors_is_asked_for_its_keys_at_most_once_a_minute() {
        let provider = Provider::start().await;
        let known = DpopKey::generate().unwrap();
        provider.publish(&[(&known, Some("known"))]);
        let interval = Duration::from_secs(2);
        let verifier = provider.verifier().with_key_refresh_interval(interval);
        verifier.prepare().await.unwrap();
        provider.0.fail(true);
        tokio::time::sleep(interval).await;
        for n in 0..60 {
            let stranger = DpopKey::generate().unwrap();
            let token = provider.token(&stranger, Some(&format!("stranger-{n}")));
            assert!(verifier.verify(&token).await.is_err());
        }
        assert_eq!(
            provider.0.key_set_reads(),
            2,
            "the first unknown key asks once; the failure answers the rest of the interval"
        );
        assert!(
            verifier
                .verify(&provider.token(&known, Some("known")))
                .await
                .is_ok(),
            "tokens of known keys are still taken"
        );
    }
}
