//! The OAuth 2.1 client Switchboard uses to sign in to upstream MCP servers.
//!
//! It implements the client side of the MCP authorization spec for every revision from 2025-03-26
//! to 2026-07-28 (the spec's `basic/authorization` pages): discovery ([`metadata`]), client
//! registration ([`registration`]), the authorization-code flow with PKCE S256, `resource` and RFC
//! 9207 checks ([`flow`]), every token grant and client authentication method, DPoP ([`token`],
//! [`jwt`]), and staying signed in: refresh, step-up and revocation ([`server_auth`]); and, the
//! other way round, checking the tokens a team's identity provider gives its people ([`idp`]).
//! Every request goes through an SSRF-guarded HTTP client ([`net`]).
//!
//! Why not rmcp's `auth` module: Switchboard needs credentials keyed by issuer and by (server,
//! principal) in its own sealed store, client secrets persisted, one flow shared by three ways of
//! reaching the user, DPoP, and an SSRF policy applied to every fetch. rmcp's
//! `AuthorizationManager` keeps its state per manager in memory and covers only part of that, so
//! the protocol steps are written here against the RFCs, with jsonwebtoken and aws-lc-rs for the
//! cryptography. Nothing here knows about MCP transports or storage engines.

pub mod challenge;
pub mod error;
pub mod flow;
pub mod idp;
pub mod jwt;
pub mod metadata;
pub mod net;
pub mod pkce;
pub mod registration;
pub mod server_auth;
pub mod store;
pub mod token;

pub use challenge::BearerChallenge;
pub use error::OAuthError;
pub use flow::{AuthorizationCallback, Authorizer, HeadlessAuthorizer, PendingAuthorization};
pub use net::{NetworkPolicy, OAuthHttp};
pub use registration::{ClientIdentity, ClientRegistration, ConfiguredClient, TokenAuthMethod};
pub use server_auth::{AuthEvent, AuthHeaders, AuthSettings, GrantKind, ServerAuth};
pub use store::{CredentialStore, GrantKey, GrantLease, MemoryCredentialStore, StoredGrant};
pub use token::TokenSet;
