//! Switchboard's domain model and pure logic.
//!
//! This crate exists so that every other layer agrees on what a server *is*, what state a
//! connection can be in, how errors are classified and how tools are searched, without pulling in any network or storage
//! code. Nothing here performs I/O: parsing a config file takes a `&str`, the state machine is a
//! value, the catalog is a constant table.

pub mod activation;
pub mod approved;
pub mod audit;
pub mod catalog;
pub mod config;
pub mod definitions;
pub mod endpoint;
pub mod error;
pub mod exposure;
pub mod grants;
pub mod guardrails;
pub mod hashing;
pub mod network;
pub mod policy;
pub mod rate_limit;
pub mod redact;
pub mod retry;
pub mod search;
pub mod server;
pub mod state;
pub mod supervision;
pub mod sync;
pub mod tenancy;
pub mod tool_override;
pub mod tool_settings;
pub mod wire_names;

pub use activation::{Activation, ActivationChange, Layers};
pub use approved::{ApprovalError, ApprovedCommand};
pub use audit::{AuditArguments, AuditKind, AuditQuery, AuditRecord, CallOrigin};
pub use endpoint::{Endpoint, EndpointDefinition, ToolSet};
pub use grants::{Grant, GroupName, Reach};
pub use policy::{Caller, CallerRefused, ToolPolicies};
pub use rate_limit::RateLimit;
pub use retry::RetryPreset;
pub use server::{
    DetectedTransport, NamedValue, OAuthClient, OAuthGrant, ServerDefinition, ServerId,
    ServerIdError, TaskMode, Timeouts, TransportSpec,
};
pub use state::{ConnectionState, IllegalTransition, StateMachine};
pub use supervision::{Backoff, Supervision};
pub use tenancy::{Principal, Role, TenantId, UserId, UserServerSettings, Workspace};
pub use tool_override::ToolOverride;
pub use tool_settings::{ToolSettings, ToolSettingsChange};
