//! The running Switchboard: one supervised connection per configured server.
//!
//! The [`Hub`] owns a task per enabled server. Each task drives its server's
//! [`StateMachine`](switchboard_core::StateMachine) (connect, list, stay connected, back off and
//! reconnect), keeps the server's catalog (tools, resources, templates, prompts) fresh on
//! `list_changed`, and publishes every state change on the hub's event bus. Callers take a cheap
//! [`Upstream`](switchboard_upstream::Upstream) handle and call the server directly: no hop through
//! the task on the hot path. A server that is down, slow or broken only ever affects its own task.

mod activation;
mod approval;
mod approved_commands;
mod audit;
mod auth;
mod builder;
mod bus;
mod configure;
mod connection;
mod definitions;
mod endpoints;
mod era_link;
mod error;
mod event;
mod exposed;
mod grants;
mod guardrails;
mod hub;
mod inspector;
mod last_known;
mod metrics;
mod own;
mod rate_limits;
mod semantic;
mod server_view;
mod shared_schemas;
mod sign_in;
mod subscriptions;
mod users;

pub(crate) use switchboard_core::sync::{lock, read, write};

pub use activation::{ActivationError, ConversationLayers, Scope};
pub use approval::{ApprovalError, DIGEST_FIELD, arguments_digest};
pub use audit::{AuditLog, AuditReadError, AuditRetention};
pub use auth::{OAuthOptions, SignInError, begin_sign_in, server_auth, server_auth_for};
pub use builder::HubBuilder;
pub use configure::{ConnectionTest, ImportOutcome};
pub use definitions::{AcceptError, ChangedDefinition};
pub use era_link::ClientEra;
pub use event::{ConfigChange, HubEvent, ServerStatus, StatusReport};
pub use exposed::{
    ExposeUris, ExposedCatalog, LONG_NAME, Renamed, Revisions, UnknownResource, for_models,
    tool_document,
};
pub use guardrails::{GuardedCall, GuardrailRefusal};
pub use inspector::{TrafficMessage, TrafficReceiver};
pub use rate_limits::Limited;
pub use semantic::SemanticError;
pub use server_view::ServerView;
pub use sign_in::{CompletedSignIn, SIGN_IN_LIFETIME, SignIns, SignOutError, SignedOut};
pub use subscriptions::SubscriptionError;
pub use switchboard_desk as desk;
pub use switchboard_embed::SentenceEncoder;
pub use switchboard_store::PendingSignIn;
pub use switchboard_store::{EndpointKeyOwner, StoreError, StoreFingerprint};
pub use switchboard_upstream::rmcp_model as model;
pub use users::{RecordUserError, UserDirectory};

pub use error::HubError;
pub(crate) use hub::ServerSlot;
pub use hub::{FoundTool, Hub, Ranking, ServerCatalog, StoreFollower, ToolFilter, ToolSearch};
