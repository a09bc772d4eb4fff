//! The tenant's groups and grants, managed through the hub of the workspace that manages them
//! (see [`switchboard_core::grants`]): the store checks who may, and every workspace follows
//! the change through the store ([`Hub::follow`]), its member's reach read again.

use switchboard_core::grants::{Group, GroupName, KeptGrant};
use switchboard_core::{Grant, TenantId};
use switchboard_store::StoreError;

use crate::Hub;

impl Hub {
    fn tenant(&self) -> TenantId {
        self.store.workspace().tenant()
    }

    /// The tenant's groups, with their stored members.
    pub async fn groups(&self) -> Result<Vec<Group>, StoreError> {
        self.store.groups(&self.tenant()).await
    }

    /// Defines the group `group.name` as `group`; whether it is new.
    pub async fn put_group(&self, group: &Group) -> Result<bool, StoreError> {
        self.store.put_group(&self.tenant(), group).await
    }

    /// Removes the group `name` and the grants made to it.
    pub async fn remove_group(&self, name: &GroupName) -> Result<(), StoreError> {
        self.store.remove_group(&self.tenant(), name).await
    }

    /// The tenant's grants.
    pub async fn grants(&self) -> Result<Vec<KeptGrant>, StoreError> {
        self.store.grants(&self.tenant()).await
    }

    /// Grants `grant`; the grant as kept and whether it is new.
    pub async fn add_grant(&self, grant: Grant) -> Result<(KeptGrant, bool), StoreError> {
        self.store.add_grant(&self.tenant(), grant).await
    }

    /// Revokes the grant `id`.
    pub async fn revoke_grant(&self, id: &str) -> Result<(), StoreError> {
        self.store.revoke_grant(&self.tenant(), id).await
    }

    /// The groups the workspace's user is in.
    pub async fn my_groups(&self) -> Result<std::collections::BTreeSet<GroupName>, StoreError> {
        self.store.my_groups().await
    }
}
