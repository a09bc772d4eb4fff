//! Who Switchboard works for: tenants, their users, and the workspace each request runs in.
//!
//! A platform team runs one Switchboard for many people. Each person is a user of a tenant (a
//! team, a customer), signs in with an API key of their own or a token from the team's identity
//! provider, and works in a *workspace* of their own: the tenant's shared servers and their own,
//! their own sign-ins, sessions, events and activation layers. The local workspace is the one a
//! single-user daemon always had: the default tenant, seen by its operator, with no user.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The tenant every single-user daemon's data belongs to.
pub const DEFAULT_TENANT: &str = "default";

/// Why an id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenancyError {
    /// Not a tenant id.
    #[error(
        "'{0}' is not a valid tenant id (1 to 64 of a-z 0-9 . _ -, starting with a letter or digit)"
    )]
    BadTenant(String),
    /// Not a user id.
    #[error("'{0}' is not a valid user id (1 to 128 of A-Z a-z 0-9 . _ : @ + | -)")]
    BadUser(String),
    /// Not a role.
    #[error("'{0}' is not a role (admin or member)")]
    BadRole(String),
}

/// A tenant's id: lowercase, so that `Acme` and `acme` are never two tenants.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TenantId(String);

impl TenantId {
    /// Checks `id`.
    pub fn new(id: impl Into<String>) -> Result<Self, TenancyError> {
        let id = id.into();
        let valid = !id.is_empty()
            && id.len() <= 64
            && id.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
        if valid {
            Ok(Self(id))
        } else {
            Err(TenancyError::BadTenant(id))
        }
    }

    /// The default tenant.
    pub fn default_tenant() -> Self {
        Self(DEFAULT_TENANT.into())
    }

    /// Whether this is the default tenant.
    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_TENANT
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TenantId {
    type Error = TenancyError;
    fn try_from(id: String) -> Result<Self, Self::Error> {
        Self::new(id)
    }
}

impl From<TenantId> for String {
    fn from(id: TenantId) -> Self {
        id.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A user's id within a tenant: an email, a name, or an identity provider's subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserId(String);

impl UserId {
    /// Checks `id`.
    pub fn new(id: impl Into<String>) -> Result<Self, TenancyError> {
        let id = id.into();
        // The same names as a conversation's user: a signed-in user's layer is theirs.
        if crate::activation::valid_conversation_id(&id) {
            Ok(Self(id))
        } else {
            Err(TenancyError::BadUser(id))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for UserId {
    type Error = TenancyError;
    fn try_from(id: String) -> Result<Self, Self::Error> {
        Self::new(id)
    }
}

impl From<UserId> for String {
    fn from(id: UserId) -> Self {
        id.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a user may do in their tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Manages the tenant's shared servers and its app layer, besides their own.
    Admin,
    /// Uses the shared servers, and manages their own servers and layers.
    Member,
}

impl Role {
    /// `admin` or `member`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Member => "member",
        }
    }

    /// Reads `admin` or `member`.
    pub fn parse(text: &str) -> Result<Self, TenancyError> {
        match text {
            "admin" => Ok(Self::Admin),
            "member" => Ok(Self::Member),
            other => Err(TenancyError::BadRole(other.into())),
        }
    }
}

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Principal {
    /// Their tenant.
    pub tenant: TenantId,
    /// Who they are in it.
    pub user: UserId,
    /// What they may do there.
    pub role: Role,
    /// The groups their identity provider's token names (the store's groups add theirs); a
    /// name no group of the tenant has gives nothing.
    #[serde(skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub groups: std::collections::BTreeSet<crate::GroupName>,
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.user)
    }
}

/// Whose data a request reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Workspace {
    /// The single-user daemon's: the default tenant, as its operator sees it (everything shared
    /// there, no user of its own).
    Local,
    /// One user's: their tenant's shared servers and their own.
    User(Principal),
}

impl Workspace {
    /// The tenant.
    pub fn tenant(&self) -> TenantId {
        match self {
            Self::Local => TenantId::default_tenant(),
            Self::User(principal) => principal.tenant.clone(),
        }
    }

    /// The user, if there is one.
    pub fn user(&self) -> Option<&UserId> {
        match self {
            Self::Local => None,
            Self::User(principal) => Some(&principal.user),
        }
    }

    /// Whether it may change what the tenant shares (its servers, its app layer).
    pub fn manages_tenant(&self) -> bool {
        match self {
            Self::Local => true,
            Self::User(principal) => principal.role == Role::Admin,
        }
    }
}

impl fmt::Display for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local => f.write_str("local"),
            Self::User(principal) => principal.fmt(f),
        }
    }
}

/// A user's own settings for a server their tenant shares: the user layer of its
/// configuration, over the tenant's (the app layer) and under a conversation's activation (the
/// thread layer). Their own credentials for it (headers, environment values), and the tools
/// they pin in the deferred view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserServerSettings {
    /// Headers (HTTP, WebSocket) or environment values (stdio) that replace or join the
    /// shared definition's, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<crate::NamedValue>,
    /// Tools (by upstream name) pinned for this user beside the shared ones.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub pinned: std::collections::BTreeSet<String>,
}

impl UserServerSettings {
    /// Whether it says nothing.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.pinned.is_empty()
    }

    /// `shared` as this user has it. A value the transport cannot take (a header it sets
    /// itself, any value of a built-in server) is named in the error.
    pub fn apply(&self, shared: &mut crate::ServerDefinition) -> Result<(), String> {
        for value in &self.values {
            if !shared.transport.set_named_value(value.clone()) {
                return Err(format!(
                    "'{}' cannot be set on server '{}'",
                    value.name, shared.id
                ));
            }
        }
        shared.policies.pinned.extend(self.pinned.iter().cloned());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        assert!(TenantId::new("acme").is_ok());
        assert!(TenantId::new("acme-2.eu_west").is_ok());
        for bad in ["", "Acme", "-acme", "a/b", "a b", &"a".repeat(65)] {
            assert!(TenantId::new(bad).is_err(), "{bad}");
        }
        for good in ["ana", "ana@acme.com", "auth0|5f1c", "google-oauth2|1+2"] {
            assert!(UserId::new(good).is_ok(), "{good}");
        }
        for bad in ["", "a/b", "a b", "ä", &"a".repeat(129)] {
            assert!(UserId::new(bad).is_err(), "{bad}");
        }
        assert_eq!(Role::parse("admin"), Ok(Role::Admin));
        assert!(Role::parse("root").is_err());
    }

    #[test]
    fn a_users_settings_replace_and_add_values_and_pin_tools_over_the_shared_definition() {
        let mut shared = crate::ServerDefinition::new(
            crate::ServerId::new("github").unwrap(),
            crate::TransportSpec::from_url(
                "https://github.test/mcp",
                vec![
                    crate::NamedValue::guess("Authorization", "Bearer shared"),
                    crate::NamedValue::guess("X-Team", "blue"),
                ],
            )
            .unwrap(),
        );
        shared.policies.pinned.insert("search".into());
        let mine = UserServerSettings {
            values: vec![
                crate::NamedValue::guess("authorization", "Bearer ana"),
                crate::NamedValue::guess("X-Extra", "1"),
            ],
            pinned: ["create_issue".to_owned()].into(),
        };
        mine.apply(&mut shared).unwrap();
        let crate::TransportSpec::Http { headers, .. } = &shared.transport else {
            unreachable!()
        };
        let shown: Vec<(&str, &str)> = headers
            .iter()
            .map(|h| (h.name.as_str(), h.value.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("authorization", "Bearer ana"),
                ("X-Team", "blue"),
                ("X-Extra", "1")
            ]
        );
        assert_eq!(shared.policies.pinned.len(), 2);
        let reserved = UserServerSettings {
            values: vec![crate::NamedValue::guess("Mcp-Session-Id", "x")],
            ..Default::default()
        };
        assert!(reserved.apply(&mut shared).is_err());
    }

    #[test]
    fn the_local_workspace_manages_the_default_tenant() {
        assert!(Workspace::Local.manages_tenant());
        assert!(Workspace::Local.tenant().is_default());
        let member = Workspace::User(Principal {
            tenant: TenantId::new("acme").unwrap(),
            user: UserId::new("ana").unwrap(),
            role: Role::Member,
            groups: Default::default(),
        });
        assert!(!member.manages_tenant());
        assert_eq!(member.to_string(), "acme/ana");
    }
}
