//! Stored groups and grants ([`switchboard_core::grants`]), per tenant, and the reach they give
//! a member's workspace: the store leaves the shared servers a member is not granted out of
//! every read of that workspace, and marks which tools of the others they may reach, so every
//! door that reads the workspace's servers (MCP, the admin API, the console, search, exports)
//! serves only what was granted.
//!
//! The operator manages any tenant's groups and grants; a tenant admin their own tenant's; a
//! member none, and reads only their own groups.

use std::collections::BTreeSet;

use switchboard_core::grants::{
    Group, GroupName, KeptGrant, MAX_GRANTS, MAX_GROUPS, Reach, Subject, Target,
};
use switchboard_core::{Grant, Role, TenantId, UserId, Workspace};

use crate::db::on_db;
use crate::{Store, StoreError, now_ms};

fn corrupt(detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        server: "grants".into(),
        detail: detail.to_string(),
    }
}

impl Store {
    /// Whether this workspace may manage `tenant`'s groups and grants: the operator any
    /// tenant's, a tenant admin their own.
    fn manages_grants_of(&self, tenant: &TenantId) -> Result<(), StoreError> {
        match self.workspace.as_ref() {
            Workspace::Local => Ok(()),
            Workspace::User(principal)
                if principal.role == Role::Admin && principal.tenant == *tenant =>
            {
                Ok(())
            }
            Workspace::User(_) => Err(StoreError::Forbidden(
                "only a tenant admin manages the tenant's groups and grants".into(),
            )),
        }
    }

    /// `tenant`'s groups with their stored members, by name.
    pub async fn groups(&self, tenant: &TenantId) -> Result<Vec<Group>, StoreError> {
        self.manages_grants_of(tenant)?;
        let groups: Vec<(String, Option<String>)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT name, description FROM user_groups WHERE tenant = $1 ORDER BY name",
        )
        .bind(tenant.as_str())
        .fetch_all(pool)
        .await)?;
        let members: Vec<(String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT group_name, user_id FROM group_members WHERE tenant = $1",
        )
        .bind(tenant.as_str())
        .fetch_all(pool)
        .await)?;
        let mut found = Vec::with_capacity(groups.len());
        for (name, description) in groups {
            let mut group = Group {
                name: GroupName::new(name).map_err(corrupt)?,
                description,
                members: BTreeSet::new(),
            };
            for (_, user) in members.iter().filter(|(g, _)| g == group.name.as_str()) {
                group
                    .members
                    .insert(UserId::new(user.clone()).map_err(corrupt)?);
            }
            found.push(group);
        }
        Ok(found)
    }

    /// Defines `tenant`'s group `group.name` with exactly `group`'s description and members
    /// (each a user of the tenant), replacing one of that name; whether it is new.
    pub async fn put_group(&self, tenant: &TenantId, group: &Group) -> Result<bool, StoreError> {
        self.manages_grants_of(tenant)?;
        group
            .check()
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.require_tenant(tenant).await?;
        let users: BTreeSet<String> = self
            .users(tenant)
            .await?
            .into_iter()
            .map(|user| user.id.to_string())
            .collect();
        if let Some(stranger) = group
            .members
            .iter()
            .find(|member| !users.contains(member.as_str()))
        {
            return Err(StoreError::Missing(format!(
                "user '{tenant}/{stranger}' (add them with `switchboard user add` first)"
            )));
        }
        let existing = self.group_names(tenant).await?;
        let new = !existing.iter().any(|name| name == group.name.as_str());
        if new && existing.len() >= MAX_GROUPS {
            return Err(StoreError::Forbidden(format!(
                "a tenant holds at most {MAX_GROUPS} groups"
            )));
        }
        let (tenant_id, name) = (tenant.as_str(), group.name.as_str());
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "INSERT INTO user_groups (tenant, name, description, updated_at_ms)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT(tenant, name) DO UPDATE SET description = $3, updated_at_ms = $4",
            )
            .bind(tenant_id)
            .bind(name)
            .bind(group.description.as_deref())
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM group_members WHERE tenant = $1 AND group_name = $2")
                .bind(tenant_id)
                .bind(name)
                .execute(&mut *tx)
                .await?;
            for member in &group.members {
                sqlx::query(
                    "INSERT INTO group_members (tenant, group_name, user_id) VALUES ($1, $2, $3)",
                )
                .bind(tenant_id)
                .bind(name)
                .bind(member.as_str())
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        });
        self.grants_changed().await?;
        Ok(new)
    }

    /// Removes `tenant`'s group `name`, its memberships and the grants made to it.
    pub async fn remove_group(
        &self,
        tenant: &TenantId,
        name: &GroupName,
    ) -> Result<(), StoreError> {
        self.manages_grants_of(tenant)?;
        let subject = Subject::Group(name.clone()).to_string();
        let removed = self
            .delete_together(&[
                (
                    "DELETE FROM grants WHERE tenant = $1 AND subject = $2",
                    &[tenant.as_str(), &subject],
                ),
                (
                    "DELETE FROM group_members WHERE tenant = $1 AND group_name = $2",
                    &[tenant.as_str(), name.as_str()],
                ),
                (
                    "DELETE FROM user_groups WHERE tenant = $1 AND name = $2",
                    &[tenant.as_str(), name.as_str()],
                ),
            ])
            .await?;
        if removed == 0 {
            return Err(StoreError::Missing(format!("group '{name}'")));
        }
        self.grants_changed().await
    }

    /// The names of `tenant`'s groups.
    async fn group_names(&self, tenant: &TenantId) -> Result<Vec<String>, StoreError> {
        Ok(on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT name FROM user_groups WHERE tenant = $1",
        )
        .bind(tenant.as_str())
        .fetch_all(pool)
        .await)?)
    }

    /// `tenant`'s grants, oldest first.
    pub async fn grants(&self, tenant: &TenantId) -> Result<Vec<KeptGrant>, StoreError> {
        self.manages_grants_of(tenant)?;
        self.tenant_grants(tenant).await
    }

    async fn tenant_grants(&self, tenant: &TenantId) -> Result<Vec<KeptGrant>, StoreError> {
        let rows: Vec<(String, String, i64)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT id, grant_json, created_at_ms FROM grants WHERE tenant = $1
             ORDER BY created_at_ms, id",
        )
        .bind(tenant.as_str())
        .fetch_all(pool)
        .await)?;
        rows.into_iter()
            .map(|(id, json, created_at_ms)| {
                Ok(KeptGrant {
                    id,
                    grant: serde_json::from_str(&json).map_err(corrupt)?,
                    created_at_ms,
                })
            })
            .collect()
    }

    /// Grants `grant` in `tenant`: its subject (a user or group of the tenant) reaches its
    /// target (an endpoint or shared server of the tenant, or a tool of one) from now on. The
    /// grant as kept, and whether it is new (granting it again changes nothing).
    pub async fn add_grant(
        &self,
        tenant: &TenantId,
        grant: Grant,
    ) -> Result<(KeptGrant, bool), StoreError> {
        self.manages_grants_of(tenant)?;
        self.require_tenant(tenant).await?;
        match &grant.subject {
            Subject::User(user) => {
                if self.user(tenant, user).await?.is_none() {
                    return Err(StoreError::Missing(format!("user '{tenant}/{user}'")));
                }
            }
            Subject::Group(group) => {
                if !self
                    .group_names(tenant)
                    .await?
                    .iter()
                    .any(|name| name == group.as_str())
                {
                    return Err(StoreError::Missing(format!("group '{group}'")));
                }
            }
        }
        match &grant.target {
            Target::Endpoint(name) => {
                let endpoints = self.endpoints_of(tenant).await?;
                if !endpoints.iter().any(|e| &e.name == name) {
                    return Err(StoreError::Missing(format!("endpoint named '{name}'")));
                }
            }
            Target::Server(server) | Target::Tool { server, .. } => {
                let shared: Option<String> = on_db!(&self.db, pool => sqlx::query_scalar(
                    "SELECT name FROM servers WHERE tenant = $1 AND owner = '' AND name = $2",
                )
                .bind(tenant.as_str())
                .bind(server)
                .fetch_optional(pool)
                .await)?;
                if shared.is_none() {
                    return Err(StoreError::Missing(format!(
                        "shared server '{server}' in tenant '{tenant}'"
                    )));
                }
            }
        }
        let existing = self.tenant_grants(tenant).await?;
        if let Some(kept) = existing.iter().find(|kept| kept.grant == grant) {
            return Ok((kept.clone(), false));
        }
        if existing.len() >= MAX_GRANTS {
            return Err(StoreError::Forbidden(format!(
                "a tenant holds at most {MAX_GRANTS} grants"
            )));
        }
        let kept = KeptGrant {
            id: switchboard_core::endpoint::hex_of(&rand::random::<[u8; 6]>()),
            grant,
            created_at_ms: now_ms(),
        };
        let json = serde_json::to_string(&kept.grant).map_err(corrupt)?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO grants (tenant, id, subject, grant_json, created_at_ms)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(tenant.as_str())
        .bind(&kept.id)
        .bind(kept.grant.subject.to_string())
        .bind(json)
        .bind(kept.created_at_ms)
        .execute(pool)
        .await
        .map(drop))?;
        self.grants_changed().await?;
        Ok((kept, true))
    }

    /// Revokes `tenant`'s grant `id`.
    pub async fn revoke_grant(&self, tenant: &TenantId, id: &str) -> Result<(), StoreError> {
        self.manages_grants_of(tenant)?;
        let removed = self
            .delete_together(&[(
                "DELETE FROM grants WHERE tenant = $1 AND id = $2",
                &[tenant.as_str(), id],
            )])
            .await?;
        if removed == 0 {
            return Err(StoreError::Missing(format!("grant '{id}'")));
        }
        self.grants_changed().await
    }

    /// The groups this workspace's user is in: the tenant's groups that list them, and those
    /// their identity provider's token names that the tenant has.
    pub async fn my_groups(&self) -> Result<BTreeSet<GroupName>, StoreError> {
        let Workspace::User(principal) = self.workspace.as_ref() else {
            return Ok(BTreeSet::new());
        };
        let tenant = principal.tenant.as_str();
        let mut groups: BTreeSet<GroupName> =
            on_db!(&self.db, pool => sqlx::query_scalar::<_, String>(
            "SELECT group_name FROM group_members WHERE tenant = $1 AND user_id = $2",
        )
        .bind(tenant)
        .bind(principal.user.as_str())
        .fetch_all(pool)
        .await)?
            .into_iter()
            .filter_map(|name| GroupName::new(name).ok())
            .collect();
        if !principal.groups.is_empty() {
            let defined = self.group_names(&principal.tenant).await?;
            groups.extend(
                principal
                    .groups
                    .iter()
                    .filter(|claimed| defined.iter().any(|name| name == claimed.as_str()))
                    .cloned(),
            );
        }
        Ok(groups)
    }

    /// What this workspace reaches of its tenant's shared servers: `None` when grants do not
    /// bound it (the operator, a tenant admin, or any member of a tenant without grants),
    /// else what its member's grants and their groups' give.
    pub async fn reach(&self) -> Result<Option<Reach>, StoreError> {
        let Workspace::User(principal) = self.workspace.as_ref() else {
            return Ok(None);
        };
        if principal.role == Role::Admin {
            return Ok(None);
        }
        let grants = self.tenant_grants(&principal.tenant).await?;
        if grants.is_empty() {
            return Ok(None);
        }
        let grants: Vec<Grant> = grants.into_iter().map(|kept| kept.grant).collect();
        let groups = self.my_groups().await?;
        let endpoints = self.endpoints().await?;
        Ok(Some(Reach::of(
            &grants,
            &principal.user,
            &groups,
            &endpoints,
        )))
    }

    /// Marks that groups or grants changed, for the fingerprint (a removal and an addition
    /// between two readings leave the numbers as they were).
    async fn grants_changed(&self) -> Result<(), StoreError> {
        self.bump_version("grants_version").await
    }
}
