//! What a session hears without asking: `list_changed` notifications when the catalog moves,
//! resource updates it subscribed to, servers' own log messages, and `subscriptions/listen`
//! streams (2026-07-28).

use rmcp::model::{ErrorData, LoggingLevel, ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{Peer, RoleServer, SubscriptionContext};
use switchboard_core::ServerId;
use switchboard_core::sync::lock;
use switchboard_hub::{HubEvent, Revisions};
use tokio::sync::broadcast;

use super::*;

impl AggregateServer {
    /// Sends this session the `list_changed` notifications its client should see, and resource
    /// updates it subscribed to, until the client goes away.
    pub(super) fn watch_changes(&self, peer: Peer<RoleServer>) {
        let mut catalog = self.hub().watch_exposed();
        let mut events = self.hub().subscribe();
        let session = self.session.clone();
        let hub = self.shared.hub.clone();
        tokio::spawn(async move {
            let mut seen = catalog.borrow_and_update().revisions;
            loop {
                tokio::select! {
                    changed = catalog.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let now = catalog.borrow_and_update().revisions;
                        let sent = notify_list_changes(&peer, seen, now).await;
                        seen = now;
                        if sent.is_err() {
                            return;
                        }
                    }
                    event = events.recv() => match event {
                        Ok(HubEvent::ResourceUpdated { server, uri }) => {
                            let exposed = prefix_of(&hub.exposed(), &server).uri(&uri);
                            if lock(&session.subscribed).contains(&exposed) {
                                let params = ResourceUpdatedNotificationParam::new(exposed);
                                if peer.notify_resource_updated(params).await.is_err() {
                                    return;
                                }
                            }
                        }
                        Ok(HubEvent::ActivationChanged { scope }) => {
                            let mine = session.conversation.get().cloned().unwrap_or_default();
                            if conversation::Activity::concerns(&mine, &scope)
                                && peer.notify_tool_list_changed().await.is_err()
                            {
                                return;
                            }
                        }
                        Ok(HubEvent::EndpointChanged { name })
                            if session.endpoint.get().and_then(Option::as_deref) == Some(&name) =>
                        {
                            if notify_list_changes(&peer, Revisions::default(), Revisions::EVERY_LIST).await.is_err() {
                                return;
                            }
                        }
                        Ok(HubEvent::Log { server, level, logger, data, to_caller: false }) => {
                            let wanted = *lock(&session.log_level);
                            if let Some(message) = unsolicited_log(wanted, &server, &level, logger, data)
                                && peer.notify_logging_message(message).await.is_err()
                            {
                                return;
                            }
                        }
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    _ = tokio::time::sleep(SESSION_CHECK) => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }

    /// Subscribes to (or unsubscribes from) `uri` at its server (see [`forward_subscription`]).
    pub(super) async fn forward_subscription(
        &self,
        uri: &str,
        subscribe: bool,
        era: switchboard_hub::ClientEra,
    ) -> Result<(), ErrorData> {
        forward_subscription(&self.shared, uri, subscribe, era).await
    }
}

/// Subscribes to (or unsubscribes from) `uri` at its server on behalf of a client of `era`,
/// the first subscriber subscribing and the last one's end unsubscribing (the hub counts
/// every front door's subscribers, and the consoles').
pub(super) async fn forward_subscription(
    shared: &Shared,
    uri: &str,
    subscribe: bool,
    era: switchboard_hub::ClientEra,
) -> Result<(), ErrorData> {
    let (server, upstream_uri) = shared
        .hub
        .exposed()
        .resolve_uri(uri)
        .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
    shared
        .hub
        .change_resource_subscription(&server, &upstream_uri, subscribe, era, WAIT_FOR_RECONNECT)
        .await
        .map_err(|error| match error {
            switchboard_hub::SubscriptionError::NotRouted(error) => error.json_rpc(),
            switchboard_hub::SubscriptionError::Upstream(server, error) => {
                upstream_json_rpc(&server, &error)
            }
        })
}

async fn notify_list_changes(
    peer: &Peer<RoleServer>,
    seen: switchboard_hub::Revisions,
    now: switchboard_hub::Revisions,
) -> Result<(), rmcp::ServiceError> {
    if now.tools != seen.tools {
        peer.notify_tool_list_changed().await?;
    }
    if now.prompts != seen.prompts {
        peer.notify_prompt_list_changed().await?;
    }
    if now.resources != seen.resources {
        peer.notify_resource_list_changed().await?;
    }
    Ok(())
}

/// The `list_changed` notifications a `subscriptions/listen` stream that `accepted` them is
/// sent when the lists' revisions move from `seen` to `now`.
fn list_changes(
    accepted: &SubscriptionFilter,
    seen: Revisions,
    now: Revisions,
) -> Vec<rmcp::model::ServerNotification> {
    use rmcp::model::ServerNotification;
    let mut notes = Vec::new();
    if now.tools != seen.tools && accepted.tools_list_changed == Some(true) {
        notes.push(ServerNotification::ToolListChangedNotification(
            Default::default(),
        ));
    }
    if now.prompts != seen.prompts && accepted.prompts_list_changed == Some(true) {
        notes.push(ServerNotification::PromptListChangedNotification(
            Default::default(),
        ));
    }
    if now.resources != seen.resources && accepted.resources_list_changed == Some(true) {
        notes.push(ServerNotification::ResourceListChangedNotification(
            Default::default(),
        ));
    }
    notes
}

/// A server's own log message (not about any request) as a session that set `wanted` with
/// `logging/setLevel` should see it: only at or above that level, and only if it set one;
/// the logger names the server.
fn unsolicited_log(
    wanted: Option<LoggingLevel>,
    server: &ServerId,
    level: &str,
    logger: Option<String>,
    data: serde_json::Value,
) -> Option<rmcp::model::LoggingMessageNotificationParam> {
    let wanted = wanted?;
    let level: LoggingLevel = serde_json::from_value(level.into()).ok()?;
    if downstream::severity(level) < downstream::severity(wanted) {
        return None;
    }
    let logger = match logger {
        Some(logger) => format!("{server}/{logger}"),
        None => server.to_string(),
    };
    let mut message = rmcp::model::LoggingMessageNotificationParam::new(level, data);
    message.logger = Some(logger);
    Some(message)
}

impl AggregateServer {
    pub(super) async fn listen_until_cancelled(
        &self,
        context: &SubscriptionContext,
        boundary: &conversation::Boundary,
        mut events: broadcast::Receiver<HubEvent>,
    ) -> Result<(), ErrorData> {
        let mut catalog = self.hub().watch_exposed();
        let mut seen = catalog.borrow_and_update().revisions;
        let sink = context.sink();
        let accepted = context.accepted().clone();
        let endpoint = crate::endpoints::endpoint_of(
            context
                .request_context()
                .extensions
                .get::<axum::http::request::Parts>(),
        );
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = catalog.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let now = catalog.borrow_and_update().revisions;
                    let notes = list_changes(&accepted, seen, now);
                    seen = now;
                    for note in notes {
                        if sink.send(note).await.is_err() {
                            return Ok(());
                        }
                    }
                }
                event = events.recv() => match event {
                    Ok(HubEvent::EndpointChanged { name }) if endpoint == Some(name.as_str()) => {
                        for note in list_changes(&accepted, Revisions::default(), Revisions::EVERY_LIST) {
                            if sink.send(note).await.is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Ok(HubEvent::ResourceUpdated { server, uri }) => {
                        let exposed = prefix_of(&self.catalog(), &server).uri(&uri);
                        if boundary.includes_server(server.as_str())
                            && accepted.resource_subscriptions.as_ref().is_some_and(|uris| uris.contains(&exposed)) {
                            let note = rmcp::model::ServerNotification::ResourceUpdatedNotification(
                                rmcp::model::Notification::new(ResourceUpdatedNotificationParam::new(exposed)),
                            );
                            if sink.send(note).await.is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_own_log_messages_reach_sessions_that_asked_at_their_level() {
        let server = ServerId::new("notes").unwrap();
        let data = serde_json::json!("disk almost full");
        assert!(
            unsolicited_log(None, &server, "error", None, data.clone()).is_none(),
            "a session that never set a level is not flooded with every server's logs"
        );
        assert!(
            unsolicited_log(
                Some(LoggingLevel::Warning),
                &server,
                "info",
                None,
                data.clone()
            )
            .is_none()
        );
        let message = unsolicited_log(
            Some(LoggingLevel::Warning),
            &server,
            "error",
            Some("disk".into()),
            data.clone(),
        )
        .expect("an error is at or above warning");
        assert_eq!(message.logger.as_deref(), Some("notes/disk"));
        assert_eq!(message.data, data);
        assert!(
            unsolicited_log(Some(LoggingLevel::Debug), &server, "loud", None, data).is_none(),
            "an unknown level is dropped, not guessed"
        );
    }
}
