//! The hub's live events for consoles: `GET /api/events` as Server-Sent Events, and
//! `GET /api/events/ws` as a WebSocket, with the same JSON objects.
//!
//! The first object is a `status` snapshot (every server's status, as `/api/status` has it, and
//! the questions waiting for a person), taken after subscribing, so no change falls between the
//! snapshot and the events that follow. Then every hub event (`state_changed`, `configured`,
//! `tool_called`, `catalog_changed`, `scope_needed`, `resource_updated`, `activation_changed`,
//! `log`, ...) and
//! every desk event (`question_asked`, `question_ended`), each an object with its `type`. A
//! console too slow to keep up gets `{"type": "lagged", "missed": N}` and should read
//! `/api/status` again. SSE events are named by their `type`. Both streams end when the daemon
//! shuts down.
//!
//! The WebSocket is also how a person answers: while it is open its console counts as there to
//! answer (so servers' requests for input go to the desk rather than being declined at once),
//! and it takes `{"type": "answer", "id": ..., "action": ..., "content": ...}` messages. A
//! refused answer comes back as `{"type": "answer_refused", "id": ..., "error": ...}`.

use std::convert::Infallible;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use switchboard_hub::desk::{Answer, Desk};
use tokio::sync::broadcast::error::RecvError;

use crate::AppState;

/// The events as JSON objects, starting with the status snapshot; ends on shutdown.
fn events(app: &AppState) -> impl Stream<Item = Value> + Send + 'static {
    let (bus, calls, desk) = (
        app.hub.subscribe(),
        app.hub.subscribe_calls(),
        app.hub.desk().subscribe(),
    );
    let snapshot = json!({
        "type": "status",
        "servers": app.hub.status(),
        "questions": app.hub.desk().pending(),
    });
    let rest = futures::stream::select(
        futures::stream::select(follow(bus), follow(calls)),
        follow(desk),
    );
    futures::stream::iter([snapshot])
        .chain(rest)
        .take_until(app.stop.clone().cancelled_owned())
}

/// One channel's events as JSON objects, `lagged` where some were missed.
fn follow<E: serde::Serialize + Clone + Send + 'static>(
    receiver: tokio::sync::broadcast::Receiver<E>,
) -> impl Stream<Item = Value> + Send + 'static {
    futures::stream::unfold(receiver, |mut receiver| async move {
        let next = match receiver.recv().await {
            Ok(event) => serde_json::to_value(&event).unwrap_or_default(),
            Err(RecvError::Lagged(missed)) => json!({"type": "lagged", "missed": missed}),
            Err(RecvError::Closed) => return None,
        };
        Some((next, receiver))
    })
}

/// `GET /api/events`.
pub(crate) async fn sse(app: AppState) -> Response {
    let stream = events(&app).map(|value| {
        let kind = value["type"].as_str().unwrap_or("event").to_owned();
        Ok::<_, Infallible>(Event::default().event(kind).data(value.to_string()))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `GET /api/servers/{id}/traffic`: the server's JSON-RPC messages as Server-Sent Events
/// (`message` events of `{"direction", "at_ms", "message"}`, `lagged` when some were missed):
/// the kept history first (with `serve --inspector-history`), then from now until the reader
/// leaves or the daemon stops. Copies are made only while someone reads, or a history is
/// kept.
pub(crate) async fn traffic(
    app: AppState,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Response, crate::ApiError> {
    let id = switchboard_core::ServerId::new(&id)
        .map_err(|e| crate::ApiError::new(axum::http::StatusCode::BAD_REQUEST, e))?;
    // An unknown server is 404; a known one that is not running, 409.
    app.hub.definition(&id).await?;
    let (kept, receiver) = app.hub.watch_traffic(&id)?;
    let kept = kept
        .into_iter()
        .map(|message| serde_json::to_value(&*message).unwrap_or_default());
    let stream = futures::stream::iter(kept)
        .chain(follow(receiver))
        .take_until(app.stop.clone().cancelled_owned())
        .map(|value| {
            let kind = match value["type"].as_str() {
                Some("lagged") => "lagged",
                _ => "message",
            };
            Ok::<_, Infallible>(Event::default().event(kind).data(value.to_string()))
        });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// How long following a resource waits for a server that is reconnecting.
const SUBSCRIBE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Which resource `GET /api/servers/{id}/resource-updates` follows.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FollowedResource {
    uri: String,
}

/// `GET /api/servers/{id}/resource-updates?uri=...`: subscribes to the server's resource `uri`
/// (as the server names it) while the stream is open, sending an `updated` event
/// (`{"uri", "at_ms"}`) each time the server says it changed (`lagged` when some were missed).
/// The subscription is shared with every other subscriber (MCP clients included): the server
/// is unsubscribed when the last one leaves. 404 for an unknown server, 409 for one not
/// running, 422 when the server refuses the subscription (or offers none).
pub(crate) async fn resource_updates(
    app: AppState,
    axum::extract::Path(id): axum::extract::Path<String>,
    query: Result<axum::extract::Query<FollowedResource>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, crate::ApiError> {
    use switchboard_hub::SubscriptionError;
    let bad = |e: String| crate::ApiError::new(axum::http::StatusCode::BAD_REQUEST, e);
    let id = switchboard_core::ServerId::new(&id).map_err(|e| bad(e.to_string()))?;
    let axum::extract::Query(FollowedResource { uri }) = query.map_err(|e| bad(e.body_text()))?;
    app.hub.definition(&id).await?;
    // Listening first: an update right after the subscription is not missed.
    let bus = app.hub.subscribe();
    // Held from here: should this request go away before the subscription is made, it is let
    // go once made.
    let (hub, server, followed) = (app.hub.clone(), id.clone(), uri.clone());
    let mut held = HeldSubscription {
        hub: app.hub.clone(),
        server: id.clone(),
        uri: uri.clone(),
        subscribing: Some(tokio::spawn(async move {
            hub.change_resource_subscription(
                &server,
                &followed,
                true,
                switchboard_hub::ClientEra::Sessions,
                SUBSCRIBE_WAIT,
            )
            .await
        })),
        made: false,
    };
    let subscribed = match held.subscribing.as_mut() {
        Some(task) => task.await,
        None => Ok(Ok(())),
    };
    held.subscribing = None;
    match subscribed {
        Ok(Ok(())) => held.made = true,
        Ok(Err(SubscriptionError::NotRouted(error))) => return Err(error.into()),
        Ok(Err(SubscriptionError::Upstream(_, error))) => return Err((*error).into()),
        Err(stopped) => {
            return Err(crate::ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("the subscription stopped: {stopped}"),
            ));
        }
    }
    let server = id.to_string();
    let stream = follow(bus)
        .filter_map(move |value| {
            let shown = match value["type"].as_str() {
                Some("lagged") => Some(("lagged", value)),
                Some("resource_updated")
                    if value["server"] == server.as_str() && value["uri"] == uri.as_str() =>
                {
                    Some(("updated", json!({"uri": uri, "at_ms": now_ms()})))
                }
                _ => None,
            };
            std::future::ready(shown)
        })
        .take_until(app.stop.clone().cancelled_owned())
        .map(move |(kind, value)| {
            // The subscription lives as long as the stream.
            let _held = &held;
            Ok::<_, Infallible>(Event::default().event(kind).data(value.to_string()))
        });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// A console's subscription, let go when its stream ends (or, when the request went away
/// while it was being made, once it is made).
struct HeldSubscription {
    hub: std::sync::Arc<switchboard_hub::Hub>,
    server: switchboard_core::ServerId,
    uri: String,
    /// The subscription being made, while it is.
    subscribing: Option<tokio::task::JoinHandle<Result<(), switchboard_hub::SubscriptionError>>>,
    /// It was made.
    made: bool,
}

impl Drop for HeldSubscription {
    fn drop(&mut self) {
        let (hub, server, uri) = (self.hub.clone(), self.server.clone(), self.uri.clone());
        let subscribing = self.subscribing.take();
        let made = self.made;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let made = match subscribing {
                    Some(task) => matches!(task.await, Ok(Ok(()))),
                    None => made,
                };
                if !made {
                    return;
                }
                let _ = hub
                    .change_resource_subscription(
                        &server,
                        &uri,
                        false,
                        switchboard_hub::ClientEra::Sessions,
                        SUBSCRIBE_WAIT,
                    )
                    .await;
            });
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// `GET /api/events/ws`. A browser cannot set `Authorization` on a WebSocket, so a console that
/// needs an API key also offers a `bearer.<key, base64url>` subprotocol ([`crate::Access`] reads
/// it); the answer names only the event stream's own.
pub(crate) async fn websocket(app: AppState, upgrade: WebSocketUpgrade) -> Response {
    let stream = events(&app);
    let desk = app.hub.desk().clone();
    upgrade
        .protocols([switchboard_core::wire_names::EVENTS_SUBPROTOCOL])
        .on_upgrade(move |socket| forward(socket, stream, desk))
}

/// What a console sends on its WebSocket.
#[derive(serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Incoming {
    /// An answer to a question.
    Answer {
        id: String,
        #[serde(flatten)]
        answer: Answer,
    },
}

/// How often a console's WebSocket is pinged (browsers answer pings by themselves).
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a console may stay silent (no pong, no message) before it counts as gone: a tab
/// frozen or closed without a goodbye, a machine asleep, a network gone. Questions are then
/// no longer held for it.
const SILENCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(25);

/// Sends each event as a text message until the stream or the socket ends, and takes the
/// console's answers meanwhile. The console counts as there to answer while this runs and it
/// answers the heartbeat's pings.
async fn forward(
    mut socket: WebSocket,
    events: impl Stream<Item = Value> + Send + 'static,
    desk: Desk,
) {
    let _present = desk.attend();
    let mut events = std::pin::pin!(events);
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_heard = tokio::time::Instant::now();
    loop {
        let reply = tokio::select! {
            next = events.next() => match next {
                Some(value) => value,
                None => break,
            },
            incoming = socket.recv() => {
                last_heard = tokio::time::Instant::now();
                match incoming {
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                    Some(Ok(Message::Text(text))) => match take(&desk, &text) {
                        Some(refusal) => refusal,
                        None => continue,
                    },
                    Some(Ok(_)) => continue,
                }
            },
            _ = heartbeat.tick() => {
                if last_heard.elapsed() > SILENCE_LIMIT {
                    tracing::debug!("a console stopped answering its heartbeat; it counts as gone");
                    return;
                }
                match tokio::time::timeout(HEARTBEAT, socket.send(Message::Ping(Default::default()))).await {
                    Ok(Ok(())) => continue,
                    _ => return,
                }
            }
        };
        // A console that stops reading is as gone as one that stops answering.
        let sent = tokio::time::timeout(
            SILENCE_LIMIT,
            socket.send(Message::Text(reply.to_string().into())),
        )
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            return;
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}

/// Carries out one message from a console; what to tell it if that failed.
fn take(desk: &Desk, text: &str) -> Option<Value> {
    match serde_json::from_str::<Incoming>(text) {
        Ok(Incoming::Answer { id, answer }) => crate::questions::answer(desk, &id, answer)
            .err()
            .map(|error| json!({"type": "answer_refused", "id": id, "error": error.message()})),
        Err(error) => Some(json!({
            "type": "message_refused",
            "error": format!(
                "not a console message ({{\"type\": \"answer\", \"id\": ..., \"action\": ..., \
                 \"content\": ...}}): {error}"
            ),
        })),
    }
}
