//! Each server's tools, compared with their approved definitions
//! ([`switchboard_core::definitions`]): a tool seen for the first time is approved as it is; a
//! tool whose definition is no longer the approved one is announced
//! ([`HubEvent::ToolDefinitionChanged`], and in the audit log) and, on a server whose setting is
//! `hold`, left out of the merged catalog (not listed, found or called) until someone who may
//! change the server accepts the new definition ([`Hub::accept_definition`]).
//!
//! The comparison runs before a catalog is served: when a server's task starts (its last known
//! catalog) and whenever it lists its tools again. An accepted definition, here or on another
//! replica (the store's fingerprint), makes every server compare again.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use switchboard_core::ServerId;
use switchboard_core::audit::AuditKind;
use switchboard_core::definitions::{
    ApprovedDefinition, DefinitionChanges, definition_of, digest_of, room_for_first_sightings,
};
use switchboard_store::Store;

use crate::audit::AuditRecorder;
use crate::{Hub, HubError, HubEvent, ServerCatalog, ServerSlot, read, write};

/// A tool whose definition is not the approved one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangedDefinition {
    /// The tool, by its name at the server.
    pub tool: String,
    /// The definition approved (first seen, or accepted).
    pub approved: ApprovedDefinition,
    /// Its definition now.
    pub current: Value,
    /// SHA-256 of its definition now.
    pub current_sha256: String,
    /// Whether it is held back from clients (its server's setting is `hold`).
    pub held: bool,
}

impl ServerSlot {
    /// Its tools held back from clients: those whose definitions changed, on a server whose
    /// setting is `hold`.
    pub(crate) fn held_tools(&self) -> std::collections::BTreeSet<String> {
        if self.definition().policies.definition_changes != DefinitionChanges::Hold {
            return Default::default();
        }
        read(&self.changed_definitions).keys().cloned().collect()
    }
}

/// The changed definitions of one server's tools, by tool.
pub(crate) type Changed = Arc<BTreeMap<String, ChangedDefinition>>;

/// What a review reports to: the hub's event bus and audit log.
pub(crate) struct Reviewer<'a> {
    pub(crate) store: &'a Store,
    pub(crate) events: &'a crate::bus::EventBus,
    pub(crate) audit: Option<&'a AuditRecorder>,
}

impl Reviewer<'_> {
    /// Compares the tools of `catalog` (server `slot`'s) with their approved definitions,
    /// approving those first seen, and keeps the changed ones in `slot`; a newly changed one is
    /// announced. When the store cannot be read the last review stands.
    pub(crate) async fn review(&self, slot: &ServerSlot, catalog: &ServerCatalog) {
        let setting = slot.definition().policies.definition_changes;
        if setting == DefinitionChanges::Off {
            *write(&slot.changed_definitions) = Changed::default();
            return;
        }
        let listed: Vec<(String, Value)> = catalog
            .tools
            .iter()
            .chain(&catalog.disabled_tools)
            .filter_map(|tool| {
                let json = serde_json::to_value(tool).ok()?;
                Some((tool.name.to_string(), definition_of(&json)))
            })
            .collect();
        if listed.is_empty() {
            *write(&slot.changed_definitions) = Changed::default();
            return;
        }
        let Some(approved) = self.approved(slot, &listed).await else {
            return;
        };
        let held = setting == DefinitionChanges::Hold;
        let mut changed = BTreeMap::new();
        for (tool, definition) in listed {
            let Some(approved) = approved.get(&tool) else {
                continue;
            };
            let sha256 = digest_of(&definition);
            if approved.sha256 != sha256 {
                changed.insert(
                    tool.clone(),
                    ChangedDefinition {
                        tool,
                        approved: approved.clone(),
                        current: definition,
                        current_sha256: sha256,
                        held,
                    },
                );
            }
        }
        let before = read(&slot.changed_definitions).clone();
        for change in changed.values() {
            let seen = before
                .get(&change.tool)
                .is_some_and(|was| was.current_sha256 == change.current_sha256);
            if !seen {
                self.announce(&slot.id, change);
            }
        }
        *write(&slot.changed_definitions) = Arc::new(changed);
    }

    /// The approved definitions of `slot`'s tools by tool, those of `listed` first seen now
    /// approved as they are; `None` when the store cannot be read.
    async fn approved(
        &self,
        slot: &ServerSlot,
        listed: &[(String, Value)],
    ) -> Option<BTreeMap<String, ApprovedDefinition>> {
        let read_approved = || async {
            match self.store.approved_definitions(&slot.id).await {
                Ok(approved) => Some(
                    approved
                        .into_iter()
                        .map(|approved| (approved.tool.clone(), approved))
                        .collect::<BTreeMap<_, _>>(),
                ),
                Err(error) => {
                    tracing::warn!(server = %slot.id, %error, "cannot read the tools' approved definitions; keeping the last comparison");
                    None
                }
            }
        };
        let approved = read_approved().await?;
        let mut first_seen: Vec<ApprovedDefinition> = listed
            .iter()
            .filter(|(tool, _)| !approved.contains_key(tool))
            .map(|(tool, definition)| ApprovedDefinition {
                tool: tool.clone(),
                sha256: digest_of(definition),
                definition: definition.clone(),
                approved_at_ms: 0,
                accepted_by: String::new(),
            })
            .collect();
        let room = room_for_first_sightings(approved.len(), first_seen.len());
        if room < first_seen.len() {
            tracing::warn!(
                server = %slot.id,
                left_out = first_seen.len() - room,
                "the server names more tools than are kept; the rest are not compared"
            );
            first_seen.truncate(room);
        }
        if first_seen.is_empty() {
            return Some(approved);
        }
        if let Err(error) = self.store.approve_first_seen(&slot.id, &first_seen).await {
            tracing::warn!(server = %slot.id, %error, "cannot keep the tools' first definitions");
            return None;
        }
        // Another workspace or replica may have approved a tool first: its definition counts.
        read_approved().await
    }

    fn announce(&self, server: &ServerId, change: &ChangedDefinition) {
        tracing::warn!(
            server = %server,
            tool = change.tool,
            held = change.held,
            "a tool's definition is not the one approved"
        );
        self.events.send(HubEvent::ToolDefinitionChanged {
            server: server.clone(),
            tool: change.tool.clone(),
            held: change.held,
        });
        if let Some(audit) = self.audit {
            let outcome = if change.held { "held" } else { "warned" };
            audit.record(
                audit
                    .record_of(AuditKind::Definition, outcome)
                    .about(server.as_str(), Some(&change.tool))
                    .with_detail(serde_json::json!({
                        "approved_sha256": change.approved.sha256,
                        "current_sha256": change.current_sha256,
                    })),
            );
        }
    }
}

/// Why a definition could not be accepted.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The server has no such tool, or its definition is the approved one.
    #[error("tool '{tool}' of server '{server}' has no definition waiting to be accepted")]
    NothingToAccept {
        /// The server.
        server: ServerId,
        /// The tool.
        tool: String,
    },
    /// The definition changed again since it was shown (`sha256` named another).
    #[error("tool '{tool}' changed again since it was shown; look at its definition again")]
    ChangedAgain {
        /// The tool.
        tool: String,
    },
    /// The server is unknown.
    #[error(transparent)]
    Hub(#[from] HubError),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
}

impl Hub {
    fn reviewer(&self) -> Reviewer<'_> {
        Reviewer {
            store: &self.store,
            events: &self.events,
            audit: self.audit.get().map(|audit| &**audit),
        }
    }

    /// Compares `slot`'s `catalog` with the approved definitions (see [`Reviewer::review`]).
    pub(crate) async fn review_definitions(&self, slot: &ServerSlot, catalog: &ServerCatalog) {
        self.reviewer().review(slot, catalog).await;
    }

    /// Compares every server's tools again (an accepted definition, a changed setting), and
    /// serves the result.
    pub(crate) async fn review_all_definitions(&self) {
        let slots: Vec<Arc<ServerSlot>> = read(&self.servers).values().cloned().collect();
        for slot in slots {
            let catalog = read(&slot.catalog).clone();
            self.review_definitions(&slot, &catalog).await;
        }
        self.rebuild_exposed();
    }

    /// The tools of server `id` whose definitions are not the approved ones.
    pub fn changed_definitions(&self, id: &ServerId) -> Result<Vec<ChangedDefinition>, HubError> {
        let slot = self.slot(id)?;
        let setting = slot.definition().policies.definition_changes;
        if setting == DefinitionChanges::Off {
            return Ok(Vec::new());
        }
        Ok(read(&slot.changed_definitions)
            .values()
            .map(|change| ChangedDefinition {
                held: setting == DefinitionChanges::Hold,
                ..change.clone()
            })
            .collect())
    }

    /// Accepts the current definition of server `id`'s tool `tool` (the one whose SHA-256 is
    /// `sha256`, when given: what the person saw), so that it is served again; only who may
    /// change the server's tool settings may.
    pub async fn accept_definition(
        &self,
        id: &ServerId,
        tool: &str,
        sha256: Option<&str>,
    ) -> Result<(), AcceptError> {
        let slot = self.slot(id)?;
        let change = read(&slot.changed_definitions)
            .get(tool)
            .cloned()
            .ok_or_else(|| AcceptError::NothingToAccept {
                server: id.clone(),
                tool: tool.to_owned(),
            })?;
        if sha256.is_some_and(|seen| seen != change.current_sha256) {
            return Err(AcceptError::ChangedAgain {
                tool: tool.to_owned(),
            });
        }
        let who = self
            .audit
            .get()
            .map(|audit| audit.actor().to_owned())
            .unwrap_or_else(|| crate::audit::actor_of(self.store.workspace()).1);
        let accepted = ApprovedDefinition {
            tool: tool.to_owned(),
            sha256: change.current_sha256.clone(),
            definition: change.current.clone(),
            approved_at_ms: crate::event::now_ms(),
            accepted_by: who,
        };
        self.store
            .accept_definition(id, &accepted, &accepted.accepted_by)
            .await?;
        self.audit(AuditKind::Definition, "accepted", |record| {
            record
                .about(id.as_str(), Some(tool))
                .with_detail(serde_json::json!({
                    "approved_sha256": change.approved.sha256,
                    "accepted_sha256": change.current_sha256,
                }))
        });
        let catalog = read(&slot.catalog).clone();
        self.review_definitions(&slot, &catalog).await;
        self.rebuild_exposed();
        self.events
            .send(HubEvent::CatalogChanged { server: id.clone() });
        Ok(())
    }
}
