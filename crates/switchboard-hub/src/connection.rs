//! The per-server connection task.
//!
//! One task per server owns the server's state machine. It connects (probing the era and caching
//! the result), lists the catalog, waits for the session to end while applying `list_changed`
//! refreshes and checking the server's health, and on failure backs off exponentially with full
//! jitter (by default below 1 s, doubling to 30 s) before reconnecting. A server that needs
//! sign-in waits for one instead of retrying.
//!
//! A check can be asked for at any time ([`crate::Hub::check_now`], and each tool call that
//! fails at the transport asks for one): a live server is asked whether it still answers and
//! reconnected if not, one waiting to reconnect tries at once. Checks asked for while one runs
//! are answered by it, so however many come, the server sees one at a time.

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::{Backoff, ConnectionState, StateMachine};
use switchboard_oauth::{AuthEvent, ServerAuth};
use switchboard_store::{CachedProbe, Store};
use switchboard_upstream::ProcessEnd;
use switchboard_upstream::{ConnectOptions, Connection, Upstream, UpstreamError, UpstreamEvent};
use tokio::sync::mpsc;

use crate::event::now_ms;
use crate::{HubEvent, ServerCatalog, ServerSlot, write};

/// How often a server waiting for sign-in checks the store for tokens (stored by
/// `switchboard login` in another process).
const SIGN_IN_POLL: Duration = Duration::from_secs(2);
/// How long a stdio server's end may take to be recorded once its session ended (rmcp reaps
/// the process in a task of its own as the session's transport is dropped; it is at once).
const EXIT_RECORDED_WITHIN: Duration = Duration::from_millis(500);
/// A sign-in started through the admin API that has not finished after this long is given up.
const SIGN_IN_ABANDONED: Duration = Duration::from_secs(600);

pub(crate) struct ConnectionTask {
    slot: Arc<ServerSlot>,
    /// Checks asked for ([`ServerSlot::checks_wanted`]).
    checks: tokio::sync::watch::Receiver<u64>,
    /// When the last connection attempt started, so that checks asked for one after another
    /// cannot make the server's task connect more than once a second.
    last_attempt: Option<tokio::time::Instant>,
    store: Store,
    options: ConnectOptions,
    auth: Option<Arc<ServerAuth>>,
    auth_events: mpsc::UnboundedReceiver<AuthEvent>,
    events: Arc<crate::bus::EventBus>,
    metrics: Arc<crate::metrics::HubMetrics>,
    machine: StateMachine,
}

/// How long a session whose grant died stays open, so the requests that met the refusal report
/// it themselves (closing at once would answer them "connection closed" instead).
const SIGNED_OUT_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

impl ConnectionTask {
    pub(crate) fn new(
        slot: Arc<ServerSlot>,
        store: Store,
        mut options: ConnectOptions,
        auth: Option<ServerAuth>,
        auth_events: mpsc::UnboundedReceiver<AuthEvent>,
        events: Arc<crate::bus::EventBus>,
        metrics: Arc<crate::metrics::HubMetrics>,
    ) -> Self {
        let auth_tx = slot.auth_events.clone();
        let auth = auth.map(|auth| {
            Arc::new(auth.with_listener(move |event| {
                let _ = auth_tx.send(event);
            }))
        });
        options.auth = auth.clone();
        options.call_observer = Some(Arc::new(CheckOnFailure {
            inner: options.call_observer.take(),
            checks_wanted: slot.checks_wanted.clone(),
        }));
        Self {
            checks: slot.checks_wanted.subscribe(),
            last_attempt: None,
            slot,
            store,
            options,
            auth,
            auth_events,
            events,
            metrics,
            machine: StateMachine::default(),
        }
    }

    /// Waits in `needs-auth` until a sign-in stores tokens (from the CLI, which this sees by
    /// checking the store, or from the admin API, whose progress arrives as events and shows as
    /// `registering` and `authorizing`), or the task is stopped. True when it is time to connect
    /// again.
    async fn wait_for_sign_in(&mut self) -> bool {
        let Some(auth) = self.auth.clone() else {
            // Nothing here can sign in; checks are answered with the state as it is.
            let stop = self.slot.stop.clone();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return false,
                    Ok(()) = self.checks.changed() => self.settle_checks(),
                }
            }
        };
        let mut authorizing_since = None;
        loop {
            let event = tokio::select! {
                _ = self.slot.stop.cancelled() => return false,
                event = self.auth_events.recv() => event,
                _ = tokio::time::sleep(SIGN_IN_POLL) => None,
                Ok(()) = self.checks.changed() => {
                    self.settle_checks();
                    None
                }
            };
            let state = self.machine.state();
            match event {
                Some(AuthEvent::Registering) if state == ConnectionState::NeedsAuth => {
                    self.set_state(ConnectionState::Registering, None);
                }
                Some(AuthEvent::Authorizing { .. })
                    if matches!(
                        state,
                        ConnectionState::NeedsAuth | ConnectionState::Registering
                    ) =>
                {
                    self.set_state(ConnectionState::Authorizing, None);
                    authorizing_since = Some(tokio::time::Instant::now());
                }
                Some(AuthEvent::Failed { message })
                    if matches!(
                        state,
                        ConnectionState::Registering | ConnectionState::Authorizing
                    ) =>
                {
                    self.set_state(ConnectionState::Error, Some(message.clone()));
                    self.set_state(ConnectionState::NeedsAuth, Some(message));
                    authorizing_since = None;
                }
                _ => {}
            }
            if authorizing_since.is_some_and(|since| since.elapsed() >= SIGN_IN_ABANDONED) {
                let message = "the sign-in was not completed".to_owned();
                self.set_state(ConnectionState::Error, Some(message.clone()));
                self.set_state(ConnectionState::NeedsAuth, Some(message));
                authorizing_since = None;
            }
            match auth.is_signed_in().await {
                Ok(true) => {
                    if self.machine.state() != ConnectionState::Authorizing {
                        self.set_state(ConnectionState::Authorizing, None);
                    }
                    self.set_state(ConnectionState::Authenticated, None);
                    return true;
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(server = %self.server(), %error, "cannot read stored credentials")
                }
            }
        }
    }

    /// Reflects token refreshes of a live session in its state.
    fn on_auth_event(&mut self, event: AuthEvent) {
        let state = self.machine.state();
        match event {
            AuthEvent::Refreshing if state == ConnectionState::Connected => {
                self.set_state(ConnectionState::TokenRefresh, None);
            }
            AuthEvent::Authenticated if state == ConnectionState::TokenRefresh => {
                self.set_state(ConnectionState::Connected, None);
            }
            AuthEvent::InvalidToken { message }
                if matches!(
                    state,
                    ConnectionState::Connected | ConnectionState::TokenRefresh
                ) =>
            {
                self.set_state(ConnectionState::InvalidToken, Some(message));
            }
            _ => {}
        }
    }

    /// Whether a scope is still wanted: clears the status's `needs_scope` once the tokens
    /// (the ones held, or newer ones a sign-in stored) carry all of it.
    async fn check_needed_scope(&mut self) -> bool {
        let Some(needed) = self.slot.status.borrow().needs_scope.clone() else {
            return false;
        };
        let Some(auth) = &self.auth else {
            return false;
        };
        let granted = match auth.granted_scopes().await {
            Ok(granted) => granted,
            Err(error) => {
                tracing::warn!(server = %self.server(), %error, "cannot read stored credentials");
                return true;
            }
        };
        if needed
            .split_whitespace()
            .all(|s| granted.iter().any(|g| g == s))
        {
            tracing::info!(server = %self.server(), scope = needed, "the scope a call needed is granted");
            self.slot.status.send_modify(|s| s.needs_scope = None);
            self.events.send(HubEvent::ScopeNeeded {
                server: self.server().clone(),
                scope: None,
            });
            return false;
        }
        true
    }

    fn server(&self) -> &switchboard_core::ServerId {
        &self.slot.id
    }

    /// Moves the state machine and publishes the change. An illegal edge is a bug in this task:
    /// it is logged loudly and the state is left as it was.
    fn set_state(&mut self, next: ConnectionState, error: Option<String>) {
        match self.machine.transition(next) {
            Ok(previous) => {
                self.slot.status.send_modify(|status| {
                    status.state = next;
                    status.error = error.clone();
                    status.since_ms = now_ms();
                });
                match &error {
                    Some(reason) => {
                        tracing::warn!(server = %self.server(), from = %previous, to = %next, reason, "server state changed")
                    }
                    None => {
                        tracing::info!(server = %self.server(), from = %previous, to = %next, "server state changed")
                    }
                }
                self.metrics.transition(self.server(), next);
                self.events.send(HubEvent::StateChanged {
                    server: self.server().clone(),
                    from: previous,
                    to: next,
                    error,
                });
            }
            Err(illegal) => {
                tracing::error!(server = %self.server(), %illegal, "bug: connection task tried an illegal transition");
                debug_assert!(false, "{illegal}");
            }
        }
    }

    /// Answers every check asked for so far: the state the task is in now is their answer.
    fn settle_checks(&mut self) {
        let wanted = *self.checks.borrow_and_update();
        self.slot
            .checks_answered
            .send_if_modified(|answered| std::mem::replace(answered, wanted) != wanted);
    }

    /// Waits out `delay` before reconnecting, cut short by a check asked for (though never to
    /// less than [`MIN_ATTEMPT_SPACING`] after the last attempt). False when the task stops.
    async fn wait_to_reconnect(&mut self, delay: Duration) -> bool {
        let stop = self.slot.stop.clone();
        let until = tokio::time::Instant::now() + delay;
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep_until(until) => return true,
            changed = self.checks.changed() => {
                if changed.is_err() {
                    return true;
                }
            }
        }
        let earliest = self
            .last_attempt
            .map_or(until, |last| (last + MIN_ATTEMPT_SPACING).min(until));
        tokio::select! {
            _ = stop.cancelled() => false,
            _ = tokio::time::sleep_until(earliest) => true,
        }
    }

    /// Waits in `error` until a check is asked for (true: connect again) or the task stops.
    async fn rest_until_checked(&mut self) -> bool {
        let stop = self.slot.stop.clone();
        tokio::select! {
            _ = stop.cancelled() => false,
            changed = self.checks.changed() => changed.is_ok(),
        }
    }

    pub(crate) async fn run(mut self) {
        let stop = self.slot.stop.clone();
        let supervision = self.options.supervision.clone();
        let mut backoff = Backoff::from_supervision(&supervision);
        // `serve --lazy`: a server whose last catalog is known (and served) connects when a
        // request first needs it (`Hub::upstream_soon` asks for a check).
        let known = *crate::read(&self.slot.catalog).as_ref() != ServerCatalog::default();
        if supervision.connect_on_first_use && known {
            self.slot
                .status
                .send_modify(|status| status.connects_on_first_use = true);
            let asked = self.rest_until_checked().await;
            self.slot
                .status
                .send_modify(|status| status.connects_on_first_use = false);
            if !asked {
                return;
            }
        }
        loop {
            self.set_state(ConnectionState::Connecting, None);
            self.last_attempt = Some(tokio::time::Instant::now());
            let attempt = tokio::select! {
                _ = stop.cancelled() => break,
                // Boxed, as are the larger awaits in `serve`: a task is as large as its largest
                // state, and connecting is a 30 KB future, which would otherwise stay in every
                // connection's task for as long as it lives (one per server in every open
                // workspace).
                attempt = Box::pin(self.connect()) => attempt,
            };
            let failure = match attempt {
                Ok(connection) => {
                    let started = tokio::time::Instant::now();
                    let ended = self.serve(connection).await;
                    if started.elapsed() >= supervision.stable_session {
                        backoff.reset();
                    }
                    ended
                }
                Err(error) => error,
            };
            if stop.is_cancelled() {
                break;
            }
            self.slot.status.send_modify(|s| s.failures += 1);
            let rejected = self.machine.state() == ConnectionState::InvalidToken;
            if rejected || matches!(failure, UpstreamError::AuthRequired(_)) {
                if self.machine.state() == ConnectionState::TokenRefresh {
                    self.set_state(ConnectionState::InvalidToken, Some(failure.to_string()));
                }
                self.set_state(ConnectionState::NeedsAuth, Some(failure.to_string()));
                self.settle_checks();
                if self.wait_for_sign_in().await {
                    backoff.reset();
                    continue;
                }
                break;
            }
            self.set_state(ConnectionState::Error, Some(failure.to_string()));
            let failures = self.slot.status.borrow().failures;
            if supervision
                .max_reconnect_attempts
                .is_some_and(|most| failures >= most)
            {
                let reason = format!(
                    "{failure}; gave up after {failures} attempts in a row (check the server to try again)"
                );
                tracing::warn!(server = %self.server(), failures, "giving up reconnecting until asked");
                self.slot.status.send_modify(|s| s.error = Some(reason));
                self.settle_checks();
                if !self.rest_until_checked().await {
                    break;
                }
                self.slot.status.send_modify(|s| s.failures = 0);
                backoff.reset();
                continue;
            }
            self.set_state(ConnectionState::Reconnecting, Some(failure.to_string()));
            self.settle_checks();
            let delay = backoff.next_delay(rand::random::<f64>());
            tracing::debug!(server = %self.server(), ?delay, "reconnecting after a delay");
            if !self.wait_to_reconnect(delay).await {
                break;
            }
        }
        *write(&self.slot.upstream) = None;
        if self.machine.state() != ConnectionState::Disconnected {
            self.set_state(ConnectionState::Disconnected, None);
        }
    }

    async fn connect(&self) -> Result<Connection, UpstreamError> {
        let def = self.slot.definition();
        let target = def.transport.target();
        let ready = crate::configure::ready_to_connect(&self.store, &def).await?;
        let cached = match self.store.cached_probe(&def.id, &target).await {
            Ok(probe) => probe.map(|p| p.detected),
            Err(error) => {
                tracing::warn!(server = %def.id, %error, "cannot read the cached probe result");
                None
            }
        };
        let connection = switchboard_upstream::connect(&ready, cached, &self.options).await?;
        if connection.detected.is_some() && connection.detected != cached {
            let probe = CachedProbe {
                target,
                detected: connection
                    .detected
                    .unwrap_or(switchboard_core::DetectedTransport::StreamableHttp),
                protocol_version: connection.upstream.protocol_version(),
            };
            if let Err(error) = self.store.put_probe(&def.id, &probe).await {
                tracing::warn!(server = %def.id, %error, "cannot cache the probe result");
            }
        }
        Ok(connection)
    }

    /// Runs one live session until it ends; returns why it ended.
    async fn serve(&mut self, connection: Connection) -> UpstreamError {
        let Connection {
            upstream,
            mut events,
            detected,
            stderr,
            exit,
            session,
        } = connection;
        if let Err(error) = Box::pin(self.refresh_catalog(&upstream, Refresh::ALL)).await {
            session.close().await;
            return error;
        }
        self.slot.status.send_modify(|status| {
            status.detected_transport = detected.map(|d| d.as_str());
            status.protocol_version = upstream.protocol_version();
            status.server_info = upstream.server_description();
            status.failures = 0;
        });
        // A server that speaks both eras gets a session link for session-era clients when the
        // first of them asks ([`crate::era_link`]); it ends with this session. Its demand is
        // followed before the session is handed out, so no request's ask is missed.
        let link = self.slot.sessions_link.clone();
        let mut link_wanted = link.demand();
        let link_generation = link.start_over();
        let (link_events_tx, mut link_events) = mpsc::unbounded_channel();
        let link_stop = self.slot.stop.child_token();
        *write(&self.slot.upstream) = Some(upstream.clone());
        self.set_state(ConnectionState::Connected, None);
        self.settle_checks();

        // Ending the session (stop, or a failed health check) closes it from our side.
        let end = self.slot.stop.child_token();
        let closed = session.run_until_closed(end.clone().cancelled_owned());
        tokio::pin!(closed);
        let mut health = HealthChecks::new(self.options.supervision.health_interval);
        let mut unhealthy = None;
        let mut signed_out = None;
        // While a scope is wanted, the store is checked now and then for a sign-in granting it.
        let mut scope_check = self
            .slot
            .status
            .borrow()
            .needs_scope
            .is_some()
            .then(|| tokio::time::Instant::now() + SIGN_IN_POLL);
        loop {
            tokio::select! {
                _ = &mut closed => break,
                Some(event) = events.recv() => Box::pin(self.on_events(&upstream, event, &mut events)).await,
                Some(event) = link_events.recv() => Box::pin(self.on_events(&upstream, event, &mut link_events)).await,
                Ok(()) = link_wanted.changed() => {
                    link_wanted.borrow_and_update();
                    if crate::era_link::may_have_sessions(&self.slot.definition(), &upstream) {
                        tokio::spawn(crate::era_link::run(link.clone(), crate::era_link::Opener {
                            definition: self.slot.definition(),
                            store: self.store.clone(),
                            options: self.options.clone(),
                            events: link_events_tx.clone(),
                            stop: link_stop.clone(),
                            generation: link_generation,
                        }));
                    }
                }
                _ = sleep_until_some(scope_check) => {
                    scope_check = self.check_needed_scope().await
                        .then(|| tokio::time::Instant::now() + SIGN_IN_POLL);
                }
                Some(event) = self.auth_events.recv() => {
                    if let AuthEvent::MoreScopeNeeded { scope } = &event {
                        tracing::warn!(server = %self.server(), scope, "a call needs more scope; the next sign-in asks for it");
                        let needed = scopes_a_token_shows(scope);
                        self.slot.status.send_modify(|s| s.needs_scope = Some(needed.clone()));
                        self.events.send(HubEvent::ScopeNeeded {
                            server: self.server().clone(),
                            scope: Some(needed),
                        });
                        scope_check = Some(tokio::time::Instant::now() + SIGN_IN_POLL);
                    }
                    self.on_auth_event(event);
                    // The grant is dead, so no request of this session can succeed any more:
                    // end it and wait for a sign-in, once the requests that found out have had
                    // a moment to take their own error back to their callers.
                    if self.machine.state() == ConnectionState::InvalidToken && unhealthy.is_none() {
                        let reason = self.slot.status.borrow().error.clone().unwrap_or_default();
                        unhealthy = Some(UpstreamError::AuthRequired(reason));
                        signed_out = Some(tokio::time::Instant::now() + SIGNED_OUT_GRACE);
                    }
                }
                _ = sleep_until_some(signed_out) => end.cancel(),
                _ = health.due() => {
                    let checked = Box::pin(upstream.health_check()).await;
                    if let Err(error) = &checked
                        && is_down(error)
                    {
                        tracing::warn!(server = %self.server(), %error, "health check failed; reconnecting");
                        unhealthy = Some(UpstreamError::Protocol(format!("the health check failed: {error}")));
                        end.cancel();
                    } else if checked.is_ok() && upstream.is_stateless() {
                        // A stateless server keeps no session that would tell of its restart,
                        // and one that announces no list changes tells nothing at all: its
                        // lists are read again at each check (an unchanged catalog changes
                        // nothing downstream).
                        if let Err(error) = Box::pin(self.refresh_catalog(&upstream, Refresh::ALL)).await {
                            tracing::warn!(server = %self.server(), %error, "reading the lists again failed; keeping the previous ones");
                        }
                    }
                }
                Ok(()) = self.checks.changed(), if unhealthy.is_none() => {
                    self.checks.borrow_and_update();
                    match Box::pin(upstream.health_check()).await {
                        Ok(()) => {
                            // As at each periodic check, a stateless server's lists are read
                            // again: whoever asked for a check sees what it lists now.
                            if upstream.is_stateless()
                                && let Err(error) = Box::pin(self.refresh_catalog(&upstream, Refresh::ALL)).await
                            {
                                tracing::warn!(server = %self.server(), %error, "reading the lists again failed; keeping the previous ones");
                            }
                            self.settle_checks();
                        }
                        // Busy (429), not down: it answered.
                        Err(error) if !is_down(&error) => self.settle_checks(),
                        Err(error) => {
                            tracing::warn!(server = %self.server(), %error, "the server did not answer a check; reconnecting");
                            unhealthy = Some(UpstreamError::Protocol(format!("the server did not answer a check: {error}")));
                            end.cancel();
                        }
                    }
                }
            }
        }
        *write(&self.slot.upstream) = None;
        link_stop.cancel();
        link.start_over();
        if let Some(error) = unhealthy {
            return error;
        }
        // A stdio server: how its process ended (recorded when rmcp reaps it, which the
        // session's end has just set going), and what it last said of why.
        let ended = match &exit {
            Some(exit) => exit.within(EXIT_RECORDED_WITHIN).await,
            None => None,
        };
        let last_words = stderr.and_then(|tail| tail.reason());
        match (ended, last_words) {
            (Some(end @ ProcessEnd::Signal(_)), _) => UpstreamError::ProcessExited {
                ended: Some(end),
                last_output: None,
            },
            (None, None) => UpstreamError::Closed,
            (ended, last_output) => UpstreamError::ProcessExited { ended, last_output },
        }
    }

    /// Handles `first` and everything already queued behind it, so a burst of `list_changed`
    /// notifications costs one refresh per list, not one per notification.
    async fn on_events(
        &mut self,
        upstream: &Upstream,
        first: UpstreamEvent,
        queued: &mut tokio::sync::mpsc::UnboundedReceiver<UpstreamEvent>,
    ) {
        let mut what = Refresh::NONE;
        let mut restarted = false;
        let mut next = Some(first);
        while let Some(event) = next {
            restarted |= event == UpstreamEvent::SessionRestarted;
            what = what.union(self.note_event(event));
            next = queued.try_recv().ok();
        }
        if self.slot.stop.is_cancelled() || what.is_empty() {
            return;
        }
        if restarted {
            tracing::info!(server = %self.server(), "the server opened a new session: listing everything again");
            if let Err(error) = upstream.renew_resource_subscriptions().await {
                tracing::warn!(server = %self.server(), %error, "subscribing the new session to its resources failed");
            }
        }
        if let Err(error) = self.refresh_catalog(upstream, what).await
            && !self.slot.stop.is_cancelled()
        {
            tracing::warn!(server = %self.server(), %error, "refreshing the catalog failed; keeping the previous one");
        }
    }

    /// Publishes a log event at once; returns which lists a change event asks to refresh.
    fn note_event(&self, event: UpstreamEvent) -> Refresh {
        match event {
            UpstreamEvent::ToolsChanged => Refresh::TOOLS,
            UpstreamEvent::ResourcesChanged => Refresh::RESOURCES,
            UpstreamEvent::PromptsChanged => Refresh::PROMPTS,
            UpstreamEvent::SessionRestarted | UpstreamEvent::ListenReopened => Refresh::ALL,
            UpstreamEvent::ResourceUpdated(uri) => {
                self.events.send(HubEvent::ResourceUpdated {
                    server: self.server().clone(),
                    uri,
                });
                Refresh::NONE
            }
            UpstreamEvent::Log(log) => {
                let switchboard_upstream::ServerLog {
                    level,
                    logger,
                    data,
                    to_caller,
                } = *log;
                // A server's own log messages reach clients and consoles through the events; the
                // daemon's log takes them at debug only (a server may send thousands a second).
                tracing::debug!(target: "switchboard::upstream::log", server = %self.server(), level, logger, %data);
                self.events.send(HubEvent::Log {
                    server: self.server().clone(),
                    level,
                    logger,
                    data,
                    to_caller,
                });
                Refresh::NONE
            }
        }
    }

    async fn refresh_catalog(
        &self,
        upstream: &Upstream,
        what: Refresh,
    ) -> Result<(), UpstreamError> {
        let previous = crate::read(&self.slot.catalog).clone();
        let mut catalog = ServerCatalog::clone(&previous);
        let def = self.slot.definition();
        if what.tools {
            let listed = self.tolerate("tools", upstream.list_tools().await)?;
            catalog.set_tools(listed, &def);
        }
        if what.resources {
            catalog.resources = self.tolerate("resources", upstream.list_resources().await)?;
            catalog.resource_templates = self.tolerate(
                "resource templates",
                upstream.list_resource_templates().await,
            )?;
        }
        if what.prompts {
            catalog.prompts = self.tolerate("prompts", upstream.list_prompts().await)?;
        }
        if catalog == *previous {
            return Ok(());
        }
        // Compared with the approved definitions before it is served (and before its status
        // says it changed, so that whoever reads the status reads the catalog too).
        crate::definitions::Reviewer {
            store: &self.store,
            events: &self.events,
            audit: self.metrics.audit(),
        }
        .review(&self.slot, &catalog)
        .await;
        self.slot.status.send_modify(|status| {
            status.tools = catalog.tools.len();
            status.resources = catalog.resources.len();
            status.resource_templates = catalog.resource_templates.len();
            status.prompts = catalog.prompts.len();
        });
        crate::last_known::save(&self.store, &def, &catalog, &self.slot.catalog_writes);
        *write(&self.slot.catalog) = Arc::new(catalog);
        self.events.send(HubEvent::CatalogChanged {
            server: self.server().clone(),
        });
        Ok(())
    }

    /// A server that answers one list with an error (many declare `resources` but do not
    /// implement templates) keeps its other lists; only a lost connection or a transient failure
    /// (a timeout, 429, 502/503/504) fails the refresh.
    fn tolerate<T>(
        &self,
        what: &str,
        listed: Result<Vec<T>, UpstreamError>,
    ) -> Result<Vec<T>, UpstreamError> {
        match listed {
            Ok(items) => Ok(items),
            // A failure that says nothing of the list (the connection, a timeout, a 429 or a
            // 5xx for a moment) keeps the previous catalog rather than showing none.
            Err(error) if error.is_connection_lost() || error.is_transient() => Err(error),
            // Method not found: the server simply has none of these (common for templates).
            Err(UpstreamError::Rpc { code: -32601, .. }) => {
                tracing::debug!(server = %self.server(), "the server does not list {what}");
                Ok(Vec::new())
            }
            Err(error) => {
                tracing::warn!(server = %self.server(), %error, "listing {what} failed; showing none");
                Ok(Vec::new())
            }
        }
    }
}

/// `scope` (space-separated) without `offline_access`: it asks for a refresh token, and no
/// authorization server lists it among the scopes it granted, so a wanted scope that includes
/// it would never show as granted.
fn scopes_a_token_shows(scope: &str) -> String {
    scope
        .split_whitespace()
        .filter(|s| *s != "offline_access")
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a failed health check means the server is down. One that answers 429 (or asks to
/// be left alone a while) is up and busy: reconnecting would only add to its load.
fn is_down(error: &UpstreamError) -> bool {
    !matches!(error, UpstreamError::HttpStatus { status: 429, .. }) && error.retry_after().is_none()
}

/// The least time between two connection attempts that checks asked for bring forward.
const MIN_ATTEMPT_SPACING: Duration = Duration::from_secs(1);

/// Passes each finished call on to the hub's observer, and asks for a check of the server when
/// a call failed at the transport (refused, reset, a 5xx, no answer in time): the server's
/// status then says at once whether it still answers, instead of at the next health check.
#[derive(Debug)]
struct CheckOnFailure {
    inner: Option<Arc<dyn switchboard_upstream::CallObserver>>,
    checks_wanted: tokio::sync::watch::Sender<u64>,
}

impl switchboard_upstream::CallObserver for CheckOnFailure {
    fn finished(&self, call: switchboard_upstream::CallRecord<'_>) {
        use switchboard_upstream::CallOutcome;
        if matches!(call.outcome, CallOutcome::Failed | CallOutcome::Timeout) {
            self.checks_wanted.send_modify(|count| *count += 1);
        }
        if let Some(inner) = &self.inner {
            inner.finished(call);
        }
    }
}

/// When the next health check is due; never when checks are off.
struct HealthChecks {
    timer: Option<tokio::time::Interval>,
}

impl HealthChecks {
    fn new(interval: Option<Duration>) -> Self {
        let timer = interval.filter(|i| !i.is_zero()).map(|interval| {
            // The first check comes one interval after connecting, not at once.
            let mut timer =
                tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            timer
        });
        Self { timer }
    }

    async fn due(&mut self) {
        match &mut self.timer {
            Some(timer) => {
                timer.tick().await;
            }
            None => std::future::pending().await,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Refresh {
    tools: bool,
    resources: bool,
    prompts: bool,
}

impl Refresh {
    const NONE: Self = Self {
        tools: false,
        resources: false,
        prompts: false,
    };
    const ALL: Self = Self {
        tools: true,
        resources: true,
        prompts: true,
    };
    const TOOLS: Self = Self {
        tools: true,
        resources: false,
        prompts: false,
    };
    const RESOURCES: Self = Self {
        tools: false,
        resources: true,
        prompts: false,
    };
    const PROMPTS: Self = Self {
        tools: false,
        resources: false,
        prompts: true,
    };

    fn union(self, other: Self) -> Self {
        Self {
            tools: self.tools || other.tools,
            resources: self.resources || other.resources,
            prompts: self.prompts || other.prompts,
        }
    }

    fn is_empty(self) -> bool {
        self == Self::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wanted_scope_leaves_out_offline_access_which_no_grant_lists() {
        assert_eq!(
            scopes_a_token_shows("mcp:read offline_access mcp:admin"),
            "mcp:read mcp:admin"
        );
        assert_eq!(scopes_a_token_shows("offline_access"), "");
    }

    /// The size of the future `function` returns, without calling it.
    fn future_size<A, F: Future>(_function: fn(A) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn a_connections_task_keeps_no_room_for_connecting_while_it_serves() {
        // A task is as large as its future's largest state, for as long as it lives. Connecting
        // takes a future of about 30 KB; inline, it made each connection's task that large
        // (one per server in every open workspace of `serve --users`).
        let connecting = future_size(|task: ConnectionTask| async move {
            task.connect().await.ok();
        });
        let running = future_size(ConnectionTask::run);
        println!("connecting: {connecting} bytes; a connection's task: {running} bytes");
        assert!(
            running * 2 < connecting,
            "the task ({running} bytes) holds the connecting future ({connecting} bytes)"
        );
    }
}
