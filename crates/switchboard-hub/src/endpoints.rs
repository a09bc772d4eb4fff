//! The tenant's endpoints the hub serves ([`switchboard_core::Endpoint`]): read from the store at
//! start and whenever another process changes them ([`Hub::follow`]), written through on every
//! change, which goes out on the bus as [`HubEvent::EndpointChanged`] so that the sessions of
//! an endpoint see their lists change at once. Beside them, the workspace's reach
//! ([`switchboard_core::Reach`]): which endpoints' doors its member's grants open.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use switchboard_core::endpoint::EndpointKey;
use switchboard_core::{Endpoint, EndpointDefinition, Reach};
use switchboard_store::{StoreError, endpoint_key_digest};

use crate::{Hub, HubEvent, read, write};

/// The endpoints in memory.
#[derive(Default)]
pub(crate) struct Endpoints {
    by_name: RwLock<BTreeMap<String, Arc<Endpoint>>>,
    /// Changes are written one at a time, so the store and memory agree.
    changing: tokio::sync::Mutex<()>,
    /// What the workspace's member was granted, when grants bound them.
    reach: RwLock<Option<Arc<Reach>>>,
}

impl Hub {
    /// Reads the stored endpoints (done by [`Hub::start_all`], and by [`Hub::follow`] when
    /// another process changed them), announcing each one that changed.
    pub async fn load_endpoints(&self) -> Result<(), StoreError> {
        let _one_at_a_time = self.endpoints.changing.lock().await;
        let loaded: BTreeMap<String, Arc<Endpoint>> = self
            .store
            .endpoints()
            .await?
            .into_iter()
            .map(|endpoint| (endpoint.name.clone(), Arc::new(endpoint)))
            .collect();
        let previous = std::mem::replace(&mut *write(&self.endpoints.by_name), loaded.clone());
        let changed = previous
            .iter()
            .filter(|(name, endpoint)| loaded.get(*name) != Some(*endpoint))
            .map(|(name, _)| name)
            .chain(loaded.keys().filter(|name| !previous.contains_key(*name)));
        for name in changed {
            self.events
                .send(HubEvent::EndpointChanged { name: name.clone() });
        }
        drop(_one_at_a_time);
        self.load_reach().await
    }

    /// Reads what the workspace's member was granted again (their grants, groups, or an
    /// endpoint granted to them changed).
    pub(crate) async fn load_reach(&self) -> Result<(), StoreError> {
        let reach = self.store.reach().await?.map(Arc::new);
        *write(&self.endpoints.reach) = reach;
        Ok(())
    }

    /// What the workspace's member was granted; `None` when grants do not bound the workspace
    /// (the operator, a tenant admin, a tenant without grants).
    pub fn reach(&self) -> Option<Arc<Reach>> {
        read(&self.endpoints.reach).clone()
    }

    /// Why this workspace may not use the door of the endpoint `name`: its member's grants do
    /// not include it.
    pub fn endpoint_door_refusal(&self, name: &str) -> Option<String> {
        self.reach()
            .filter(|reach| !reach.includes_endpoint(name))
            .map(|_| format!("you have no grant for endpoint '{name}': a tenant admin grants it"))
    }

    /// Every endpoint, by name.
    pub fn endpoints(&self) -> Vec<Arc<Endpoint>> {
        read(&self.endpoints.by_name).values().cloned().collect()
    }

    /// The endpoint `name`, if there is one.
    pub fn endpoint(&self, name: &str) -> Option<Arc<Endpoint>> {
        read(&self.endpoints.by_name).get(name).cloned()
    }

    /// The endpoint a presented `key` was issued for and the key's id, if it is one of an
    /// endpoint's keys.
    pub fn endpoint_of_key(&self, key: &str) -> Option<(String, String)> {
        let endpoints = read(&self.endpoints.by_name);
        // Most requests present no endpoint key: no digest unless some endpoint holds one.
        if endpoints.values().all(|endpoint| endpoint.keys.is_empty()) {
            return None;
        }
        let digest = endpoint_key_digest(key);
        endpoints.values().find_map(|endpoint| {
            endpoint
                .key_with(&digest)
                .map(|kept| (endpoint.name.clone(), kept.id.clone()))
        })
    }

    /// Defines the endpoint `name` as `definition`, replacing its definition if it exists (its
    /// keys stay); whether it is new.
    pub async fn define_endpoint(
        &self,
        name: &str,
        definition: EndpointDefinition,
    ) -> Result<bool, StoreError> {
        let _one_at_a_time = self.endpoints.changing.lock().await;
        let new = self.store.define_endpoint(name, definition).await?;
        self.reload_endpoint(name).await?;
        Ok(new)
    }

    /// Removes the endpoint `name` and its keys; its sessions reach nothing from now on.
    pub async fn remove_endpoint(&self, name: &str) -> Result<(), StoreError> {
        let _one_at_a_time = self.endpoints.changing.lock().await;
        self.store.remove_endpoint(name).await?;
        self.reload_endpoint(name).await
    }

    /// Issues a new key for the endpoint `name`: the key (shown once, never kept) and what is
    /// kept of it.
    pub async fn issue_endpoint_key(
        &self,
        name: &str,
    ) -> Result<(String, EndpointKey), StoreError> {
        let _one_at_a_time = self.endpoints.changing.lock().await;
        let issued = self.store.issue_endpoint_key(name).await?;
        self.reload_endpoint(name).await?;
        Ok(issued)
    }

    /// Revokes the key `id` of the endpoint `name`: requests presenting it are refused from
    /// now on.
    pub async fn revoke_endpoint_key(&self, name: &str, id: &str) -> Result<(), StoreError> {
        let _one_at_a_time = self.endpoints.changing.lock().await;
        self.store.revoke_endpoint_key(name, id).await?;
        self.reload_endpoint(name).await
    }

    /// Takes the endpoint `name` as stored now into memory, and announces it.
    async fn reload_endpoint(&self, name: &str) -> Result<(), StoreError> {
        let stored = self.store.endpoint(name).await?;
        let mut endpoints = write(&self.endpoints.by_name);
        match stored {
            Some(endpoint) => endpoints.insert(name.to_owned(), Arc::new(endpoint)),
            None => endpoints.remove(name),
        };
        drop(endpoints);
        self.events.send(HubEvent::EndpointChanged {
            name: name.to_owned(),
        });
        Ok(())
    }
}
