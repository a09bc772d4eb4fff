//! The OAuth 2.1 client Switchboard uses to sign in to upstream MCP servers.
//!
//! It implements the client side of the MCP authorization spec for every revision from 2025-03-26
//! to 2026-07-28 (the spec's `basic/authorization` pages): discovery (`metadata`), client
//! registration (`registration`), the authorization-code flow with PKCE S256, `resource` and RFC
//! 9207 checks (`flow`), every token grant and client authentication method, DPoP (`token`,
//! `jwt`), and staying signed in: refresh, step-up and revocation ([`ServerAuth`]); and, the
//! other way round, checking the tokens a team's identity provider gives its people
//! ([`IdentityProvider`]). Every request goes through an SSRF-guarded HTTP client
//! ([`OAuthHttp`]).
//!
//! Why not rmcp's `auth` module: Switchboard needs credentials keyed by issuer and by (server,
//! principal) in its own sealed store, client secrets persisted, one flow shared by three ways of
//! reaching the user, DPoP, and an SSRF policy applied to every fetch. rmcp's
//! `AuthorizationManager` keeps its state per manager in memory and covers only part of that, so
//! the protocol steps are written here against the RFCs, with jsonwebtoken and aws-lc-rs for the
//! cryptography. Nothing here knows about MCP transports or storage engines.
//!
//! The modules are private; what other crates use is re-exported here (`docs/architecture.md`,
//! "Conventions").

mod challenge;
mod error;
mod flow;
mod idp;
mod jwt;
mod metadata;
mod net;
mod pkce;
mod registration;
mod server_auth;
mod store;
mod token;

pub use challenge::BearerChallenge;
pub use error::OAuthError;
pub use flow::{
    AuthorizationCallback, Authorizer, HeadlessAuthorizer, PendingAuthorization,
    start_authorization,
};
pub use idp::{IdentityProvider, IdpError};
pub use jwt::{AssertionKey, DpopKey};
pub use metadata::{
    AuthorizationServerMetadata, Discovery, MetadataSource, ProtectedResourceMetadata,
    resource_matches,
};
pub use net::{
    GuardedResolver, NetworkPolicy, OAuthHttp, Reply, describe_reqwest, resolve_guarded,
    with_causes,
};
pub use pkce::random_token;
pub use registration::{
    ClientIdentity, ClientRegistration, ConfiguredClient, RegistrationKind, TokenAuthMethod,
};
pub use server_auth::{
    AuthEvent, AuthHeaders, AuthSettings, EnterpriseIdp, GrantKind, MAX_STEP_UPS, ServerAuth,
    WorkloadAssertion,
};
pub use store::{CredentialStore, GrantKey, GrantLease, MemoryCredentialStore, StoredGrant};
pub use token::TokenSet;
