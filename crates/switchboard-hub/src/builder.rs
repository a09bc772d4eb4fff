//! The one place a [`Hub`] is built: the daemon's own hub, each user's workspace, `switchboard
//! stdio` and the one-shot commands all build theirs with a [`HubBuilder`], and differ only in
//! the settings they give it.

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::{RateLimit, Workspace};
use switchboard_store::{Store, StoreError};
use switchboard_upstream::ConnectOptions;

use crate::{AuditLog, Hub, OAuthOptions, SentenceEncoder, StoreFollower};

/// What a hub is built with: its store and connection options, and what else it keeps (an audit
/// log, a limit for each client, traffic history, a search model), follows (the store's
/// changes) and waits for (its servers) when [started](Self::start). Cloning it gives another
/// hub the same settings ([`Self::for_workspace`]).
#[derive(Clone)]
pub struct HubBuilder {
    store: Store,
    options: ConnectOptions,
    oauth: OAuthOptions,
    audit: Option<Arc<AuditLog>>,
    client_rate_limit: Option<RateLimit>,
    traffic_history: usize,
    encoder: Option<Arc<SentenceEncoder>>,
    follower: Option<StoreFollower>,
    settle: Option<Duration>,
}

impl Hub {
    /// A builder of a hub over `store` that connects with `options`, signs in with the default
    /// [`OAuthOptions`] and keeps nothing else until told to.
    pub fn builder(store: Store, options: ConnectOptions) -> HubBuilder {
        HubBuilder {
            store,
            options,
            oauth: OAuthOptions::default(),
            audit: None,
            client_rate_limit: None,
            traffic_history: 0,
            encoder: None,
            follower: None,
            settle: None,
        }
    }
}

impl HubBuilder {
    /// Its servers sign in with `oauth`.
    pub fn oauth(mut self, oauth: OAuthOptions) -> Self {
        self.oauth = oauth;
        self
    }

    /// Records its calls, approvals and changes in `log` (`None`: no audit log).
    pub fn audit(mut self, log: Option<Arc<AuditLog>>) -> Self {
        self.audit = log;
        self
    }

    /// Limits each client's calls to `limit` (`None`: no limit but the servers' and tools').
    pub fn client_rate_limit(mut self, limit: Option<RateLimit>) -> Self {
        self.client_rate_limit = limit;
        self
    }

    /// Keeps each server's last `messages` JSON-RPC messages for the inspector (0: none).
    pub fn traffic_history(mut self, messages: usize) -> Self {
        self.traffic_history = messages;
        self
    }

    /// Ranks tool searches by meaning as well as words with `encoder` (`None`: by words only).
    pub fn semantic_search(mut self, encoder: Option<Arc<SentenceEncoder>>) -> Self {
        self.encoder = encoder;
        self
    }

    /// Once [started](Self::start), keeps its servers in step with the store as `follower`
    /// reads it ([`Hub::follow`]).
    pub fn follow(mut self, follower: StoreFollower) -> Self {
        self.follower = Some(follower);
        self
    }

    /// Has [`Self::start`] wait (up to `limit`) for its servers to connect or fail, and bring
    /// the merged catalog up to date, so that the first list a client gets holds the servers
    /// that connect at once; later arrivals are announced.
    pub fn settle(mut self, limit: Duration) -> Self {
        self.settle = Some(limit);
        self
    }

    /// The same settings over the store as `workspace` sees it.
    pub fn for_workspace(&self, workspace: Workspace) -> Self {
        Self {
            store: self.store.for_workspace(workspace),
            ..self.clone()
        }
    }

    /// The hub, with no server started yet.
    pub fn build(self) -> Arc<Hub> {
        let hub = Hub::with_settings(self.store, self.options, self.oauth);
        if let Some(log) = self.audit {
            hub.enable_audit(log);
        }
        if let Some(limit) = self.client_rate_limit {
            hub.limit_each_client(limit);
        }
        hub.keep_traffic(self.traffic_history);
        if let Some(encoder) = self.encoder {
            hub.enable_semantic_search(encoder);
        }
        hub
    }

    /// The hub with every enabled server of its store starting ([`Hub::start_all`]), following
    /// the store if [told to](Self::follow), and settled if [told to](Self::settle).
    pub async fn start(mut self) -> Result<Arc<Hub>, StoreError> {
        let follower = self.follower.take();
        let settle = self.settle.take();
        let hub = self.build();
        hub.start_all().await?;
        if let Some(follower) = follower {
            hub.follow(follower.subscribe());
        }
        if let Some(limit) = settle {
            hub.wait_settled(limit, |_| {}).await;
            // The merged catalog follows the servers' states from a task of its own; bring it
            // up to date now, or the first list may still lack the server that connected last.
            hub.rebuild_exposed();
        }
        Ok(hub)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::disallowed_methods)]

    use super::*;
    use switchboard_core::{
        AuditArguments, Principal, Role, ServerDefinition, ServerId, TenantId, TransportSpec,
        UserId,
    };

    fn settings(store: &Store) -> HubBuilder {
        Hub::builder(store.clone(), ConnectOptions::new("test"))
            .audit(Some(AuditLog::start(
                store.clone(),
                AuditArguments::Digest,
                None,
            )))
            .settle(Duration::from_secs(5))
    }

    #[tokio::test]
    async fn a_built_hub_records_into_the_audit_log_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let store = switchboard_store::Store::open(dir.path()).await.unwrap();
        assert!(settings(&store).build().audits());
        let bare = Hub::builder(store, ConnectOptions::new("test")).build();
        assert!(!bare.audits());
    }

    #[tokio::test]
    async fn a_workspace_hub_starts_the_servers_its_user_sees_with_the_same_settings() {
        let dir = tempfile::tempdir().unwrap();
        let store = switchboard_store::Store::open(dir.path()).await.unwrap();
        let ana = Workspace::User(Principal {
            tenant: TenantId::default_tenant(),
            user: UserId::new("ana").unwrap(),
            role: Role::Member,
            groups: Default::default(),
        });
        let own = ServerDefinition::new(
            ServerId::new("anas").unwrap(),
            TransportSpec::from_url("http://127.0.0.1:9/mcp", Vec::new()).unwrap(),
        );
        store
            .for_workspace(ana.clone())
            .add_server(&own)
            .await
            .unwrap();
        let daemon = settings(&store);

        let workspace = daemon.for_workspace(ana.clone()).start().await.unwrap();
        assert_eq!(workspace.store().workspace(), &ana);
        assert!(workspace.audits());
        let started: Vec<_> = workspace.status().into_iter().map(|s| s.server).collect();
        assert_eq!(started, [own.id]);

        let local = daemon.start().await.unwrap();
        assert!(local.status().is_empty(), "a user's own server is theirs");
        workspace.shutdown().await;
        local.shutdown().await;
    }
}
