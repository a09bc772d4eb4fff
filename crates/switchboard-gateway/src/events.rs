//! The hub's live events for consoles: `GET /api/events` as Server-Sent Events, and
//! `GET /api/events/ws` as a WebSocket, with the same JSON objects.
//!
//! The first object is a `status` snapshot (every server's status, as `/api/status` has it),
//! taken after subscribing, so no change falls between the snapshot and the events that follow.
//! Then every hub event (`state_changed`, `configured`, `tool_called`, `catalog_changed`,
//! `resource_updated`, `activation_changed`, `log`, ...), each an object with its `type`. A console too slow to
//! keep up gets `{"type": "lagged", "missed": N}` and should read `/api/status` again. SSE
//! events are named by their `type`. Both streams end when the daemon shuts down.

use std::convert::Infallible;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::AppState;

/// The events as JSON objects, starting with the status snapshot; ends on shutdown.
fn events(app: &AppState) -> impl Stream<Item = Value> + Send + 'static {
    let (bus, calls) = (app.hub.subscribe(), app.hub.subscribe_calls());
    let snapshot = json!({"type": "status", "servers": app.hub.status()});
    let rest = futures::stream::select(follow(bus), follow(calls));
    futures::stream::iter([snapshot])
        .chain(rest)
        .take_until(app.stop.clone().cancelled_owned())
}

/// One channel's events as JSON objects, `lagged` where some were missed.
fn follow(
    receiver: tokio::sync::broadcast::Receiver<switchboard_hub::HubEvent>,
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
pub(crate) async fn sse(State(app): State<AppState>) -> Response {
    let stream = events(&app).map(|value| {
        let kind = value["type"].as_str().unwrap_or("event").to_owned();
        Ok::<_, Infallible>(Event::default().event(kind).data(value.to_string()))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `GET /api/events/ws`.
pub(crate) async fn websocket(State(app): State<AppState>, upgrade: WebSocketUpgrade) -> Response {
    let stream = events(&app);
    upgrade.on_upgrade(move |socket| forward(socket, stream))
}

/// Sends each event as a text message until the stream or the socket ends. What the console
/// sends is read (pings are answered by the library) and otherwise ignored.
async fn forward(mut socket: WebSocket, events: impl Stream<Item = Value> + Send + 'static) {
    let mut events = std::pin::pin!(events);
    loop {
        tokio::select! {
            next = events.next() => {
                let Some(value) = next else { break };
                if socket.send(Message::Text(value.to_string().into())).await.is_err() {
                    return;
                }
            }
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}
