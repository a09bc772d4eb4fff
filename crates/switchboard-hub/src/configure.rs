//! Changing the configured servers while the daemon runs: the admin API's writes.
//!
//! Every change goes to the store first (where the CLI of another process writes too) and the
//! running servers are then brought in step with it at once, so the answer to a write already
//! shows its effect. Read-modify-write changes take the hub's edit lock: two requests that
//! change one server never lose each other's change.

use std::borrow::Cow;
use std::sync::Arc;

use switchboard_core::{ApprovalError, ServerDefinition, ServerId, TransportSpec};
use switchboard_store::{Store, StoreError};
use switchboard_upstream::UpstreamError;

use crate::{Hub, HubError};

/// What an import did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ImportOutcome {
    /// The servers stored.
    pub imported: Vec<ServerId>,
    /// Entries not imported, with why: `(name in the file, reason)`.
    pub skipped: Vec<(String, String)>,
}

impl Hub {
    /// Every configured server (enabled or not), ordered by id, with secrets in the clear: show
    /// them only through [`ServerDefinition`]'s redacting views.
    pub async fn definitions(&self) -> Result<Vec<ServerDefinition>, HubError> {
        Ok(self.store.list_servers().await?)
    }

    /// One configured server's definition.
    pub async fn definition(&self, id: &ServerId) -> Result<ServerDefinition, HubError> {
        self.store
            .get_server(id)
            .await?
            .ok_or_else(|| HubError::Store(StoreError::NotFound(id.clone())))
    }

    /// Adds `definition`, or with `replace` replaces the server with its id (keeping what the
    /// definition cannot say and secrets it shows redacted: see
    /// [`ServerDefinition::keep_unwritten_settings`]); a taken id without `replace` is
    /// [`StoreError::AlreadyExists`]. Returns whether a server was replaced.
    pub async fn put_definition(
        self: &std::sync::Arc<Self>,
        mut definition: ServerDefinition,
        replace: bool,
    ) -> Result<bool, HubError> {
        let _edit = self.edits.lock().await;
        let stored = self.store.get_server(&definition.id).await?;
        let replaced = match &stored {
            Some(_) if !replace => {
                return Err(StoreError::AlreadyExists(definition.id.clone()).into());
            }
            Some(stored) => {
                definition.keep_unwritten_settings(stored);
                true
            }
            None => false,
        };
        self.admit(&definition).await?;
        self.store.put_server(&definition).await?;
        self.sync_and_announce(&definition).await?;
        Ok(replaced)
    }

    /// Changes the stored definition of `id` with `change` (which may refuse, with a reason,
    /// before anything is written) and brings the running server in step. Returns the new
    /// definition.
    pub async fn change_definition(
        self: &std::sync::Arc<Self>,
        id: &ServerId,
        change: impl FnOnce(&mut ServerDefinition) -> Result<(), String>,
    ) -> Result<ServerDefinition, HubError> {
        let _edit = self.edits.lock().await;
        let mut definition = self.definition(id).await?;
        change(&mut definition).map_err(HubError::Invalid)?;
        self.store.put_server(&definition).await?;
        self.sync_and_announce(&definition).await?;
        Ok(definition)
    }

    /// Brings the running servers in step with the store after `written` was stored. A
    /// server that was off and stays off starts nothing, so its change is announced here
    /// ([`ConfigChange::Stored`]): consoles show it all the same.
    async fn sync_and_announce(
        self: &std::sync::Arc<Self>,
        written: &ServerDefinition,
    ) -> Result<(), HubError> {
        let was_running = crate::read(&self.servers).contains_key(&written.id);
        self.sync_with_store().await?;
        if !written.enabled && !was_running {
            self.events.send(crate::HubEvent::Configured {
                server: written.id.clone(),
                change: crate::ConfigChange::Stored,
            });
        }
        Ok(())
    }

    /// Removes server `id` and everything stored for it (its tokens among them), stopping it.
    /// A server that was not running (disabled) is announced as stopped all the same, so
    /// consoles drop it.
    pub async fn remove_definition(
        self: &std::sync::Arc<Self>,
        id: &ServerId,
    ) -> Result<(), HubError> {
        let _edit = self.edits.lock().await;
        let was_running = crate::read(&self.servers).contains_key(id);
        self.store.remove_server(id).await?;
        self.sync_with_store().await?;
        if !was_running {
            self.events.send(crate::HubEvent::Configured {
                server: id.clone(),
                change: crate::ConfigChange::Stopped,
            });
        }
        Ok(())
    }

    /// Stores the servers of an import (see [`switchboard_core::config`]): new ids, or every
    /// one with `replace`, each replaced one keeping what the file cannot say.
    pub async fn import_definitions(
        self: &std::sync::Arc<Self>,
        report: switchboard_core::config::ImportReport,
        replace: bool,
    ) -> Result<ImportOutcome, HubError> {
        let _edit = self.edits.lock().await;
        let mut skipped = report.skipped;
        let mut admitted = Vec::with_capacity(report.servers.len());
        for definition in report.servers {
            match self.admit(&definition).await {
                Ok(()) => admitted.push(definition),
                Err(HubError::Forbidden(reason)) => {
                    skipped.push((definition.id.to_string(), reason))
                }
                Err(error) => return Err(error),
            }
        }
        let (imported, taken) = self.store.import_servers(admitted, replace).await?;
        skipped.extend(taken.into_iter().map(|id| {
            (
                id.to_string(),
                "a server with this id already exists (import with replace to overwrite it)"
                    .to_owned(),
            )
        }));
        self.sync_with_store().await?;
        Ok(ImportOutcome {
            imported: imported.into_iter().map(|d| d.id).collect(),
            skipped,
        })
    }
}

/// What connecting to a definition found ([`Hub::test_definition`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConnectionTest {
    /// Whether a session opened and the server listed what it offers.
    pub connected: bool,
    /// Why not, in plain words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The server wants an OAuth sign-in first (add it, then sign in).
    pub needs_auth: bool,
    /// For HTTP: which transport the probe found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected_transport: Option<&'static str>,
    /// The negotiated protocol version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The server's self-reported name and version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<String>,
    /// Its tools' names.
    pub tools: Vec<String>,
    /// How many resources it lists.
    pub resources: usize,
    /// How many prompts it lists.
    pub prompts: usize,
    /// From the first byte sent to the last list read, in milliseconds.
    pub elapsed_ms: f64,
}

impl Hub {
    /// Whether the caller of this workspace may define `definition`: the operator (the local
    /// workspace) anything; a tenant admin or member no command of their own, only one of the
    /// operator's approved commands with what it leaves to users.
    pub async fn admit(&self, definition: &ServerDefinition) -> Result<(), HubError> {
        if self.store.workspace().user().is_none() {
            return Ok(());
        }
        match &definition.transport {
            TransportSpec::Stdio { .. } => Err(HubError::Forbidden(
                "only the operator defines the commands stdio servers run: pick one of the approved commands (GET /api/commands) as \"approvedCommand\", with the \"args\" and \"env\" it lets you set"
                    .into(),
            )),
            TransportSpec::Approved { name, args, env } => {
                let command = self
                    .store
                    .approved_command(name)
                    .await?
                    .ok_or_else(|| ApprovalError::Unknown(name.clone()))
                    .map_err(|e| HubError::Forbidden(e.to_string()))?;
                command
                    .check(args, env)
                    .map_err(|e| HubError::Forbidden(e.to_string()))
            }
            TransportSpec::Http { url, .. } | TransportSpec::WebSocket { url, .. } => {
                self.admit_address(url).await
            }
            TransportSpec::Builtin { .. } => Ok(()),
        }
    }

    /// Whether this workspace's network rules let it reach `url` (a hub whose pools are not
    /// guarded reaches anything): said at once, rather than at every reconnect. The address is
    /// checked again, and pinned, whenever a connection is made.
    async fn admit_address(&self, url: &url::Url) -> Result<(), HubError> {
        let http = &self.options.http;
        let Some(policy) = http.policy() else {
            return Ok(());
        };
        if let Some(refusal) = http.refusal(url) {
            return Err(HubError::Forbidden(network_refusal(&refusal)));
        }
        if let Some(url::Host::Domain(host)) = url.host() {
            let port = url.port_or_known_default().unwrap_or(443);
            if let Err(error) = switchboard_oauth::resolve_guarded(policy, host, port).await
                && error.kind() == std::io::ErrorKind::PermissionDenied
            {
                return Err(HubError::Forbidden(network_refusal(&error.to_string())));
            }
        }
        Ok(())
    }

    /// Connects to `definition` as the daemon would (with the credentials stored for its id, if
    /// it is that server's URL), lists what it offers, and closes the session: nothing is
    /// stored or kept running. A failure is part of the answer, not an error.
    pub async fn test_definition(
        &self,
        definition: &ServerDefinition,
    ) -> Result<ConnectionTest, HubError> {
        self.admit(definition).await?;
        let started = std::time::Instant::now();
        let mut options = self.options.clone();
        // Stored credentials go only to the server they were granted for: a definition with a
        // configured server's id and its URL. Any other is tested signed out.
        let stored = self.store.get_server(&definition.id).await.ok().flatten();
        let same_server =
            stored.is_some_and(|stored| match (&stored.transport, &definition.transport) {
                (TransportSpec::Http { url: stored, .. }, TransportSpec::Http { url, .. }) => {
                    stored == url
                }
                _ => false,
            });
        if same_server {
            options.auth = crate::server_auth(definition, &self.store, &self.oauth)
                .await
                .ok()
                .flatten()
                .map(Arc::new);
        }
        let mut test = ConnectionTest {
            connected: false,
            error: None,
            needs_auth: false,
            detected_transport: None,
            protocol_version: None,
            server_info: None,
            tools: Vec::new(),
            resources: 0,
            prompts: 0,
            elapsed_ms: 0.0,
        };
        let connecting = match ready_to_connect(&self.store, definition).await {
            Ok(ready) => switchboard_upstream::connect(&ready, None, &options).await,
            Err(error) => Err(error),
        };
        match connecting {
            Err(error) => {
                test.needs_auth = matches!(error, UpstreamError::AuthRequired(_));
                test.error = Some(error.to_string());
            }
            Ok(connection) => {
                let upstream = &connection.upstream;
                test.detected_transport = connection.detected.map(|d| d.as_str());
                test.protocol_version = upstream.protocol_version();
                test.server_info = upstream.server_description();
                // Tools must list; resources and prompts are counted where they list (many
                // servers declare them and then refuse the list, which the daemon tolerates).
                match upstream.list_tools().await {
                    Ok(tools) => {
                        test.connected = true;
                        test.tools = tools.into_iter().map(|t| t.name.into()).collect();
                        test.resources = upstream.list_resources().await.map_or(0, |r| r.len());
                        test.prompts = upstream.list_prompts().await.map_or(0, |p| p.len());
                    }
                    Err(error) => test.error = Some(error.to_string()),
                }
                connection.session.close().await;
            }
        }
        test.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(test)
    }
}

/// A refusal by the network rules, with what to do about it.
fn network_refusal(reason: &str) -> String {
    format!(
        "{reason}; servers of tenants and members reach public addresses over https, and the networks the operator allows (serve --allow-upstream-network)"
    )
}

/// `definition` as it connects: a server made from an approved command runs that command as the
/// operator defines it now, with the user's arguments and variables it allows (read at every
/// start, so a withdrawn or narrowed command stops what it no longer allows).
pub(crate) async fn ready_to_connect<'a>(
    store: &Store,
    definition: &'a ServerDefinition,
) -> Result<Cow<'a, ServerDefinition>, UpstreamError> {
    let TransportSpec::Approved { name, args, env } = &definition.transport else {
        return Ok(Cow::Borrowed(definition));
    };
    let refused = |e: ApprovalError| UpstreamError::NotAllowed(e.to_string());
    let command = store
        .approved_command(name)
        .await
        .map_err(|e| {
            UpstreamError::NotAllowed(format!("cannot read the approved command '{name}': {e}"))
        })?
        .ok_or_else(|| refused(ApprovalError::Unknown(name.clone())))?;
    let mut ready = definition.clone();
    ready.transport = command.resolve(args, env).map_err(refused)?;
    Ok(Cow::Owned(ready))
}
