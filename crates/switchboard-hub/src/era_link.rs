//! The second link of a server that speaks both eras.
//!
//! A server may answer both `server/discover` (2026-07-28, stateless) and `initialize` (the
//! session revisions), and its two faces need not offer the same: the conformance suite's
//! reference server bolts a stateless face onto a TypeScript SDK v1 server, and that face lacks
//! resource subscriptions, logging, completions, sampling and elicitation. The connection probe
//! keeps the newest era (a 2026-07-28 client may not send `initialize` to a server that answered
//! `server/discover`), so that is what 2026-07-28 clients are served over. A client of the
//! session revisions, served over that link, would get less than it gets talking to the server
//! directly.
//!
//! So a server reached statelessly over HTTP, unless its transport is pinned, gets a second link
//! on demand: the first request of a session-era client asks the connection task to open a
//! session with the server (`initialize`, as that client would), and that client's requests go
//! over it. The session link lives and dies with the main one. A server that refuses sessions
//! (it speaks 2026-07-28 only), or answers `initialize` without giving a session (a stateless
//! server's shim for older clients, which on the TypeScript SDK v2 cannot ask them anything
//! mid-call), is not asked again for [`REFUSED_FOR`], and its session-era clients are bridged
//! over the stateless link, which gives them more.

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::{DetectedTransport, ServerDefinition, TransportSpec};
use switchboard_store::Store;
use switchboard_upstream::{ConnectOptions, Upstream, UpstreamEvent};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a server that refused a session (or could not be reached for one) is left alone
/// before a session-era client's request asks again.
pub(crate) const REFUSED_FOR: Duration = Duration::from_secs(60);

/// Which revisions a downstream client speaks, so its requests can go over a link of its own
/// era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientEra {
    /// 2025-03-26 .. 2025-11-25 (and 2024-11-05): `initialize` and a session.
    Sessions,
    /// 2026-07-28: stateless requests.
    Stateless,
}

/// Where a server's session link stands.
#[derive(Clone, Default)]
pub(crate) enum LinkState {
    /// None open (none asked for yet, or the last one ended): the next session-era request asks.
    #[default]
    Closed,
    /// Asked for; the connection task is opening it.
    Opening,
    /// Open.
    Open(Box<Upstream>),
    /// The server refused a session, or could not be reached for one: not asked again before
    /// `until`.
    Refused { until: Instant },
}

/// A server's session link: its state (with the generation of the main link it belongs to),
/// and the demand the connection task follows.
pub(crate) struct SessionsLink {
    state: watch::Sender<(u64, LinkState)>,
    /// Counts requests for a link; the connection task opens one when it changes.
    wanted: watch::Sender<u64>,
}

impl Default for SessionsLink {
    fn default() -> Self {
        Self {
            state: watch::channel((0, LinkState::Closed)).0,
            wanted: watch::channel(0).0,
        }
    }
}

impl SessionsLink {
    /// The open link, if any, without asking for one.
    pub(crate) fn open(&self) -> Option<Upstream> {
        match &self.state.borrow().1 {
            LinkState::Open(upstream) => Some(Upstream::clone(upstream)),
            _ => None,
        }
    }

    /// The link, opened now if need be (waiting at most `limit`); `None` when the server has
    /// none to give (it refused one, or opening takes longer than `limit`).
    pub(crate) async fn get(&self, limit: Duration) -> Option<Upstream> {
        let deadline = Instant::now() + limit;
        let mut changes = self.state.subscribe();
        loop {
            let state = changes.borrow_and_update().1.clone();
            match state {
                LinkState::Open(upstream) => return Some(*upstream),
                LinkState::Refused { until } if Instant::now() < until => return None,
                LinkState::Closed | LinkState::Refused { .. } => {
                    // One request asks; those that come meanwhile wait for the same link.
                    let asked = self.state.send_if_modified(|(_, state)| {
                        let ask = match state {
                            LinkState::Closed => true,
                            LinkState::Refused { until } => Instant::now() >= *until,
                            LinkState::Opening | LinkState::Open(_) => false,
                        };
                        if ask {
                            *state = LinkState::Opening;
                        }
                        ask
                    });
                    if asked {
                        self.wanted.send_modify(|n| *n += 1);
                    }
                    continue;
                }
                LinkState::Opening => {}
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => return None,
            }
        }
    }

    /// Follows the requests for a link (for the connection task).
    pub(crate) fn demand(&self) -> watch::Receiver<u64> {
        self.wanted.subscribe()
    }

    /// Starts over for a main link that just connected, or ended: forgets the link (a
    /// refusal is kept), and returns the generation a link opened from now on belongs to. A
    /// link of an earlier generation can no longer change the state.
    pub(crate) fn start_over(&self) -> u64 {
        let mut generation = 0;
        self.state.send_modify(|(current, state)| {
            *current += 1;
            generation = *current;
            if !matches!(state, LinkState::Refused { .. }) {
                *state = LinkState::Closed;
            }
        });
        generation
    }

    /// The number of requests running over the open link.
    pub(crate) fn requests_running(&self) -> usize {
        self.open()
            .map_or(0, |upstream| upstream.requests_running())
    }

    /// Sets the state, if the link of `generation` is still the one wanted.
    fn set(&self, generation: u64, state: LinkState) {
        self.state.send_if_modified(|(current, now)| {
            let ours = *current == generation;
            if ours {
                *now = state;
            }
            ours
        });
    }
}

/// Whether a server reached over `main` may have a session face worth a link of its own: it is
/// an HTTP server Switchboard reaches statelessly, and the user did not pin its transport.
pub(crate) fn may_have_sessions(definition: &ServerDefinition, main: &Upstream) -> bool {
    matches!(
        definition.transport,
        TransportSpec::Http { pinned: None, .. }
    ) && main.is_stateless()
}

/// What opening a session link needs, taken from the connection task.
pub(crate) struct Opener {
    pub(crate) definition: Arc<ServerDefinition>,
    pub(crate) store: Store,
    pub(crate) options: ConnectOptions,
    /// Where the link's events go: the connection task handles them as the main link's (list
    /// changes refresh the catalog, resource updates and log messages reach clients).
    pub(crate) events: mpsc::UnboundedSender<UpstreamEvent>,
    /// Ends the link (the main link ended, or the server stops).
    pub(crate) stop: CancellationToken,
    /// The generation of the main link it belongs to ([`SessionsLink::start_over`]).
    pub(crate) generation: u64,
}

/// Opens the session link of `link`'s server and keeps it until it ends or `opener.stop` fires.
pub(crate) async fn run(link: Arc<SessionsLink>, opener: Opener) {
    let server = opener.definition.id.clone();
    let generation = opener.generation;
    let ready = match crate::configure::ready_to_connect(&opener.store, &opener.definition).await {
        Ok(ready) => ready.into_owned(),
        Err(error) => {
            tracing::warn!(%server, %error, "cannot open a session link");
            link.set(
                generation,
                LinkState::Refused {
                    until: Instant::now() + REFUSED_FOR,
                },
            );
            return;
        }
    };
    let mut pinned = ready;
    if let TransportSpec::Http { pinned: pin, .. } = &mut pinned.transport {
        *pin = Some(DetectedTransport::StreamableHttp);
    }
    let connected = tokio::select! {
        _ = opener.stop.cancelled() => {
            link.set(generation, LinkState::Closed);
            return;
        }
        // Boxed: connecting is a 30 KB future, which would stay in the link's task for as long
        // as the link lives.
        connected = Box::pin(switchboard_upstream::connect(&pinned, None, &opener.options)) => connected,
    };
    let connection = match connected {
        Ok(connection) => connection,
        Err(error) => {
            tracing::info!(%server, %error, "the server offers no session to session-era clients; they are served over its stateless link");
            link.set(
                generation,
                LinkState::Refused {
                    until: Instant::now() + REFUSED_FOR,
                },
            );
            return;
        }
    };
    if !connection.upstream.holds_session_id() {
        // A stateless server's shim for older clients (the TypeScript SDK v2 answers
        // `initialize` this way) serves each request on its own and cannot ask the client
        // anything mid-call: the stateless link, bridged, gives those clients more.
        tracing::info!(%server, "the server answers session-era clients without a session; they are served over its stateless link");
        connection.session.close().await;
        link.set(
            generation,
            LinkState::Refused {
                until: Instant::now() + REFUSED_FOR,
            },
        );
        return;
    }
    tracing::info!(%server, version = ?connection.upstream.protocol_version(), "opened a session link for session-era clients");
    let upstream = connection.upstream;
    let mut events = connection.events;
    link.set(generation, LinkState::Open(Box::new(upstream.clone())));
    let closed = connection
        .session
        .run_until_closed(opener.stop.clone().cancelled_owned());
    tokio::pin!(closed);
    loop {
        tokio::select! {
            _ = &mut closed => break,
            Some(event) = events.recv() => {
                if event == UpstreamEvent::SessionRestarted {
                    // Its subscriptions are this link's own, not the main link's.
                    if let Err(error) = upstream.renew_resource_subscriptions().await {
                        tracing::warn!(%server, %error, "subscribing the new session to its resources failed");
                    }
                    continue;
                }
                let _ = opener.events.send(event);
            }
        }
    }
    link.set(generation, LinkState::Closed);
}
