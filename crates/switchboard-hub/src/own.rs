//! Whose workspace a hub serves, and what its user has of their own there: their own servers,
//! and their own settings for a server their tenant shares (credentials as headers or
//! environment values, pinned tools; `user_server_settings`), written through the hub, which
//! restarts the server with them.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use switchboard_core::server::REDACTED;
use switchboard_core::{NamedValue, ServerId, UserServerSettings, Workspace};
use switchboard_store::StoreError;

use crate::{Hub, HubError};

impl Hub {
    /// The workspace the hub serves: the operator's (`Local`) or a user's.
    pub fn workspace(&self) -> &Workspace {
        self.store.workspace()
    }

    /// The servers the workspace's user defined themselves (none in the local workspace, whose
    /// servers are all the tenant's).
    pub async fn own_server_ids(&self) -> Result<HashSet<ServerId>, StoreError> {
        self.store.own_server_ids().await
    }

    /// The workspace's user's own settings for server `id` (empty when they have none).
    pub async fn my_settings(&self, id: &ServerId) -> Result<UserServerSettings, StoreError> {
        if self.store.get_server(id).await?.is_none() {
            return Err(StoreError::NotFound(id.clone()));
        }
        Ok(self.store.my_settings(id).await?.unwrap_or_default())
    }

    /// Replaces the user's own settings for server `id` with `values` (headers or environment
    /// values, by name; one given as `********` keeps the stored value of that name) and
    /// `pinned`, and restarts the server with them. Returns the settings now stored.
    pub async fn put_my_settings(
        self: &Arc<Self>,
        id: &ServerId,
        values: impl IntoIterator<Item = (String, String)>,
        pinned: BTreeSet<String>,
    ) -> Result<UserServerSettings, HubError> {
        let stored = self.store.my_settings(id).await?;
        let kept = |name: &str, value: String| -> NamedValue {
            match stored.as_ref().and_then(|s| {
                s.values
                    .iter()
                    .find(|v| v.name.eq_ignore_ascii_case(name))
                    .filter(|_| value == REDACTED)
            }) {
                Some(existing) => existing.clone(),
                None => NamedValue::guess(name, value),
            }
        };
        let settings = UserServerSettings {
            values: values
                .into_iter()
                .map(|(name, value)| kept(&name, value))
                .collect(),
            pinned,
        };
        self.store.put_my_settings(id, &settings).await?;
        self.sync_with_store().await?;
        Ok(settings)
    }

    /// Forgets the user's own settings for server `id`, and restarts the server without them.
    pub async fn forget_my_settings(self: &Arc<Self>, id: &ServerId) -> Result<(), HubError> {
        self.store
            .put_my_settings(id, &UserServerSettings::default())
            .await?;
        self.sync_with_store().await?;
        Ok(())
    }
}
