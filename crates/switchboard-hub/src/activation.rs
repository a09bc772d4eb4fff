//! The activation layers the hub keeps: the app's, each user's and each named thread's, read
//! from the store at start and written through on every change (which goes out on the bus as
//! [`HubEvent::ActivationChanged`], so front doors can tell their clients the list changed).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use switchboard_core::activation::valid_conversation_id;
use switchboard_core::{Activation, ActivationChange, Layers};

use crate::{Hub, HubEvent, read, write};

/// Which layer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every conversation's.
    App,
    /// One user's conversations'.
    User(String),
    /// One named conversation's.
    Thread(String),
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::App => f.write_str("app"),
            Self::User(id) => write!(f, "user:{id}"),
            Self::Thread(id) => write!(f, "thread:{id}"),
        }
    }
}

/// Why a layer could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    /// The user or thread id is not a plain name.
    #[error("'{0}' is not a valid user or thread id (1 to 128 of A-Z a-z 0-9 . _ : @ + | -)")]
    BadId(String),
    /// The store refused the change.
    #[error("cannot store the activation: {0}")]
    Store(#[from] switchboard_store::StoreError),
}

impl Scope {
    /// The user layer of `id`, if `id` is a valid name.
    pub fn user(id: &str) -> Result<Self, ActivationError> {
        valid_conversation_id(id)
            .then(|| Self::User(id.to_owned()))
            .ok_or_else(|| ActivationError::BadId(id.to_owned()))
    }

    /// The thread layer of `id`, if `id` is a valid name.
    pub fn thread(id: &str) -> Result<Self, ActivationError> {
        valid_conversation_id(id)
            .then(|| Self::Thread(id.to_owned()))
            .ok_or_else(|| ActivationError::BadId(id.to_owned()))
    }

    fn parse(stored: &str) -> Option<Self> {
        match stored.split_once(':') {
            None if stored == "app" => Some(Self::App),
            Some(("user", id)) => Self::user(id).ok(),
            Some(("thread", id)) => Self::thread(id).ok(),
            _ => None,
        }
    }
}

/// The layers in memory.
#[derive(Default)]
pub(crate) struct Activations {
    layers: RwLock<HashMap<Scope, Arc<Activation>>>,
    /// Changes are written one at a time, so the store and memory agree.
    changing: tokio::sync::Mutex<()>,
}

/// The hub's layers for one conversation, held so that a session's own layer can join them.
#[derive(Debug, Clone, Default)]
pub struct ConversationLayers {
    app: Option<Arc<Activation>>,
    user: Option<Arc<Activation>>,
    thread: Option<Arc<Activation>>,
}

impl ConversationLayers {
    /// The layers, with `own` as the thread layer when no named thread's is there.
    pub fn with_own<'a>(&'a self, own: Option<&'a Activation>) -> Layers<'a> {
        Layers {
            app: self.app.as_deref(),
            user: self.user.as_deref(),
            thread: self.thread.as_deref().or(own),
        }
    }
}

impl Hub {
    /// Reads the stored layers (done by [`Hub::start_all`], and by [`Hub::follow`] when
    /// another process changed them), announcing each layer that changed.
    pub async fn load_activations(&self) -> Result<(), switchboard_store::StoreError> {
        let _one_at_a_time = self.activations.changing.lock().await;
        let stored = self.store.activations().await?;
        let mut loaded = HashMap::with_capacity(stored.len());
        for (scope, activation) in stored {
            match Scope::parse(&scope) {
                Some(scope) => {
                    loaded.insert(scope, Arc::new(activation));
                }
                None => tracing::warn!(scope, "ignoring a stored activation of an unknown scope"),
            }
        }
        let previous = std::mem::replace(&mut *write(&self.activations.layers), loaded.clone());
        let changed = previous
            .iter()
            .filter(|(scope, layer)| loaded.get(*scope) != Some(*layer))
            .map(|(scope, _)| scope)
            .chain(loaded.keys().filter(|scope| !previous.contains_key(*scope)));
        for scope in changed {
            self.events.send(HubEvent::ActivationChanged {
                scope: scope.to_string(),
            });
        }
        Ok(())
    }

    /// The layer of `scope` (empty if it says nothing).
    pub fn activation(&self, scope: &Scope) -> Activation {
        read(&self.activations.layers)
            .get(scope)
            .map(|layer| (**layer).clone())
            .unwrap_or_default()
    }

    /// Applies `change` to the layer of `scope`, stores it, and says so on the bus; returns
    /// the layer as it is now.
    pub async fn change_activation(
        &self,
        scope: &Scope,
        change: &ActivationChange,
    ) -> Result<Activation, ActivationError> {
        let _one_at_a_time = self.activations.changing.lock().await;
        let mut layer = self.activation(scope);
        if layer.apply(change) {
            self.store
                .put_activation(&scope.to_string(), &layer)
                .await?;
            let mut layers = write(&self.activations.layers);
            if layer.is_empty() {
                layers.remove(scope);
            } else {
                layers.insert(scope.clone(), Arc::new(layer.clone()));
            }
            drop(layers);
            self.events.send(HubEvent::ActivationChanged {
                scope: scope.to_string(),
            });
        }
        Ok(layer)
    }

    /// The app's layer and, if named, the user's and the thread's.
    pub fn conversation_layers(
        &self,
        user: Option<&str>,
        thread: Option<&str>,
    ) -> ConversationLayers {
        let layers = read(&self.activations.layers);
        let get = |scope: Scope| layers.get(&scope).cloned();
        ConversationLayers {
            app: get(Scope::App),
            user: user.and_then(|id| get(Scope::User(id.to_owned()))),
            thread: thread.and_then(|id| get(Scope::Thread(id.to_owned()))),
        }
    }
}
