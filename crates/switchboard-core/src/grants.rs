//! Groups and grants: who in a tenant may reach which of its shared servers, tools and
//! endpoints.
//!
//! A platform team shares servers with a whole tenant; not every member should reach every one
//! of them. A tenant admin puts users in *groups* (by hand, or as the identity provider's
//! `groups` claim says) and *grants* endpoints, servers and tools to users and groups. Once a
//! tenant holds any grant, its members reach only what they were granted (deny by default):
//! what is not granted is not listed, searched, turned on, read or called through any door.
//! A tenant with no grant works as before, every member reaching every shared server. Tenant
//! admins (and the operator) are not bound by grants: they write them. A member's own servers
//! are theirs whatever the grants say.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::endpoint::{Endpoint, ToolSet};
use crate::tenancy::UserId;

/// The most groups one tenant holds.
pub const MAX_GROUPS: usize = 1_000;

/// The most members one group holds.
pub const MAX_MEMBERS: usize = 10_000;

/// The most grants one tenant holds.
pub const MAX_GRANTS: usize = 10_000;

/// The longest group description.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;

/// The longest server, tool or endpoint name a grant names.
const MAX_TARGET_CHARS: usize = 256;

/// Why a group or grant was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// Not a group name.
    #[error("'{0}' is not a valid group name (1 to 128 of A-Z a-z 0-9 . _ : @ + | -)")]
    BadGroup(String),
    /// Not a subject.
    #[error("'{0}' is not a subject: write user:<id> or group:<name>")]
    BadSubject(String),
    /// The target is not one thing.
    #[error(
        "a grant names an endpoint (\"endpoint\"), a server (\"server\"), or a tool of a server \
         (\"server\" and \"tool\")"
    )]
    BadTarget,
    /// A list or text is longer than allowed.
    #[error("{0}")]
    TooLarge(String),
}

/// A group's name: the same characters as a user id, so that identity providers' group names
/// (`eng`, `team:platform`, `admins@acme.com`) fit as they are.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GroupName(String);

impl GroupName {
    /// Checks `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, GrantError> {
        let name = name.into();
        if crate::activation::valid_conversation_id(&name) {
            Ok(Self(name))
        } else {
            Err(GrantError::BadGroup(name))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for GroupName {
    type Error = GrantError;
    fn try_from(name: String) -> Result<Self, Self::Error> {
        Self::new(name)
    }
}

impl From<GroupName> for String {
    fn from(name: GroupName) -> Self {
        name.0
    }
}

impl fmt::Display for GroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A group of a tenant's users.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// Its name.
    pub name: GroupName,
    /// What it is, shown to admins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its members as stored (the identity provider's claims add more, request by request).
    #[serde(default)]
    pub members: BTreeSet<UserId>,
}

impl Group {
    /// Checks the sizes of its description and member list.
    pub fn check(&self) -> Result<(), GrantError> {
        if self.members.len() > MAX_MEMBERS {
            return Err(GrantError::TooLarge(format!(
                "a group has at most {MAX_MEMBERS} members"
            )));
        }
        if self
            .description
            .as_ref()
            .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS)
        {
            return Err(GrantError::TooLarge(format!(
                "a description has at most {MAX_DESCRIPTION_CHARS} characters"
            )));
        }
        Ok(())
    }
}

/// Whom a grant is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// One user.
    User(UserId),
    /// Every member of a group.
    Group(GroupName),
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::User(user) => write!(f, "user:{user}"),
            Self::Group(group) => write!(f, "group:{group}"),
        }
    }
}

impl std::str::FromStr for Subject {
    type Err = GrantError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || GrantError::BadSubject(text.to_owned());
        match text.split_once(':') {
            Some(("user", id)) => UserId::new(id).map(Self::User).map_err(|_| bad()),
            Some(("group", name)) => GroupName::new(name).map(Self::Group).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

/// What a grant gives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// An endpoint: its door, and everything it includes.
    Endpoint(String),
    /// A shared server: every tool of it, its prompts and resources.
    Server(String),
    /// One tool of a shared server (by the server's own name), with the server's prompts and
    /// resources.
    Tool {
        /// The server's id.
        server: String,
        /// The tool's upstream name.
        tool: String,
    },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Endpoint(name) => write!(f, "endpoint {name}"),
            Self::Server(server) => write!(f, "server {server}"),
            Self::Tool { server, tool } => write!(f, "tool {tool} of server {server}"),
        }
    }
}

/// A grant: a subject may reach a target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "WrittenGrant", into = "WrittenGrant")]
pub struct Grant {
    /// Whom it is for.
    pub subject: Subject,
    /// What it gives.
    pub target: Target,
}

/// How a [`Grant`] is written: `{"subject": "group:eng", "server": "github", "tool": "x"}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WrittenGrant {
    subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
}

impl TryFrom<WrittenGrant> for Grant {
    type Error = GrantError;

    fn try_from(written: WrittenGrant) -> Result<Self, GrantError> {
        let subject = written.subject.parse()?;
        let name = |text: String| {
            if text.is_empty() || text.len() > MAX_TARGET_CHARS {
                Err(GrantError::BadTarget)
            } else {
                Ok(text)
            }
        };
        let target = match (written.endpoint, written.server, written.tool) {
            (Some(endpoint), None, None) => Target::Endpoint(name(endpoint)?),
            (None, Some(server), None) => Target::Server(name(server)?),
            (None, Some(server), Some(tool)) => Target::Tool {
                server: name(server)?,
                tool: name(tool)?,
            },
            _ => return Err(GrantError::BadTarget),
        };
        Ok(Self { subject, target })
    }
}

impl From<Grant> for WrittenGrant {
    fn from(grant: Grant) -> Self {
        let subject = grant.subject.to_string();
        match grant.target {
            Target::Endpoint(endpoint) => Self {
                subject,
                endpoint: Some(endpoint),
                server: None,
                tool: None,
            },
            Target::Server(server) => Self {
                subject,
                endpoint: None,
                server: Some(server),
                tool: None,
            },
            Target::Tool { server, tool } => Self {
                subject,
                endpoint: None,
                server: Some(server),
                tool: Some(tool),
            },
        }
    }
}

impl Grant {
    /// Whether it is for `user`, a member of `groups`.
    pub fn is_for(&self, user: &UserId, groups: &BTreeSet<GroupName>) -> bool {
        match &self.subject {
            Subject::User(granted) => granted == user,
            Subject::Group(group) => groups.contains(group),
        }
    }
}

/// A grant as kept: with the id it is revoked by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptGrant {
    /// Its id.
    pub id: String,
    /// The grant.
    #[serde(flatten)]
    pub grant: Grant,
    /// When it was made, in milliseconds since the Unix epoch.
    pub created_at_ms: i64,
}

/// What one member may reach of their tenant's shared servers, when grants bound them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reach {
    /// The servers (by id) and which of their tools.
    pub servers: BTreeMap<String, ToolSet>,
    /// The endpoints whose doors they may use.
    pub endpoints: BTreeSet<String>,
}

impl ToolSet {
    /// Adds `other`'s tools to this set.
    pub fn add(&mut self, other: &ToolSet) {
        match (&mut *self, other) {
            (Self::All, _) => {}
            (_, Self::All) => *self = Self::All,
            (Self::Only(mine), Self::Only(theirs)) => mine.extend(theirs.iter().cloned()),
        }
    }
}

impl Reach {
    /// What the `grants` for `user`, a member of `groups`, give: the servers and tools they
    /// name, and the doors and contents of the `endpoints` they name (an endpoint that is not
    /// there gives nothing).
    pub fn of(
        grants: &[Grant],
        user: &UserId,
        groups: &BTreeSet<GroupName>,
        endpoints: &[Endpoint],
    ) -> Self {
        let mut reach = Self::default();
        let mut add = |server: &str, tools: &ToolSet| {
            reach
                .servers
                .entry(server.to_owned())
                .and_modify(|set| set.add(tools))
                .or_insert_with(|| tools.clone());
        };
        let mut doors = BTreeSet::new();
        for grant in grants.iter().filter(|grant| grant.is_for(user, groups)) {
            match &grant.target {
                Target::Server(server) => add(server, &ToolSet::All),
                Target::Tool { server, tool } => {
                    add(server, &ToolSet::Only([tool.clone()].into()));
                }
                Target::Endpoint(name) => {
                    if let Some(endpoint) = endpoints.iter().find(|e| &e.name == name) {
                        for (server, tools) in &endpoint.definition.servers {
                            add(server, tools);
                        }
                        doors.insert(name.clone());
                    }
                }
            }
        }
        reach.endpoints = doors;
        reach
    }

    /// Which tools of `server` it includes, if it includes the server at all.
    pub fn server(&self, server: &str) -> Option<&ToolSet> {
        self.servers.get(server)
    }

    /// Whether the door of the endpoint `name` is granted.
    pub fn includes_endpoint(&self, name: &str) -> bool {
        self.endpoints.contains(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::EndpointDefinition;

    fn grant(json: serde_json::Value) -> Grant {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn grants_are_written_with_a_subject_and_one_target() {
        let tool =
            grant(serde_json::json!({"subject": "group:eng", "server": "github", "tool": "x"}));
        assert_eq!(
            tool.target,
            Target::Tool {
                server: "github".into(),
                tool: "x".into()
            }
        );
        assert_eq!(
            serde_json::to_value(&tool).unwrap(),
            serde_json::json!({"subject": "group:eng", "server": "github", "tool": "x"})
        );
        for bad in [
            serde_json::json!({"subject": "group:eng"}),
            serde_json::json!({"subject": "group:eng", "endpoint": "a", "server": "b"}),
            serde_json::json!({"subject": "group:eng", "tool": "x"}),
            serde_json::json!({"subject": "team:eng", "server": "b"}),
            serde_json::json!({"subject": "user:a b", "server": "b"}),
            serde_json::json!({"subject": "user:ana", "server": ""}),
            serde_json::json!({"subject": "user:ana", "server": "b", "extra": 1}),
        ] {
            assert!(
                serde_json::from_value::<Grant>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_members_reach_is_the_union_of_their_own_and_their_groups_grants() {
        let ana = UserId::new("ana").unwrap();
        let eng: BTreeSet<GroupName> = [GroupName::new("eng").unwrap()].into();
        let support = Endpoint::new(
            "support",
            EndpointDefinition {
                description: None,
                servers: [
                    ("docs".to_owned(), ToolSet::All),
                    (
                        "github".to_owned(),
                        ToolSet::Only(["search".to_owned()].into()),
                    ),
                ]
                .into(),
            },
        )
        .unwrap();
        let grants = [
            grant(serde_json::json!({"subject": "user:ana", "server": "github", "tool": "get"})),
            grant(serde_json::json!({"subject": "group:eng", "endpoint": "support"})),
            grant(serde_json::json!({"subject": "group:ops", "server": "pager"})),
            grant(serde_json::json!({"subject": "user:bob", "server": "linear"})),
            grant(serde_json::json!({"subject": "user:ana", "endpoint": "gone"})),
        ];
        let reach = Reach::of(&grants, &ana, &eng, &[support]);
        assert_eq!(reach.server("docs"), Some(&ToolSet::All));
        assert_eq!(
            reach.server("github"),
            Some(&ToolSet::Only(
                ["get".to_owned(), "search".to_owned()].into()
            ))
        );
        assert_eq!(reach.server("pager"), None);
        assert_eq!(reach.server("linear"), None);
        assert!(reach.includes_endpoint("support"));
        assert!(!reach.includes_endpoint("gone"));
        let nobody = Reach::of(&grants, &UserId::new("cy").unwrap(), &BTreeSet::new(), &[]);
        assert!(nobody.servers.is_empty() && nobody.endpoints.is_empty());
    }

    #[test]
    fn a_whole_server_grant_covers_a_tool_grant_of_it() {
        let mut set = ToolSet::Only(["a".to_owned()].into());
        set.add(&ToolSet::All);
        assert_eq!(set, ToolSet::All);
        let mut all = ToolSet::All;
        all.add(&ToolSet::Only(["b".to_owned()].into()));
        assert_eq!(all, ToolSet::All);
    }
}
