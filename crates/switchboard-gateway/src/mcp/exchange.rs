//! One downstream request's trip through an upstream server, across as many rounds as it takes.
//!
//! Every `tools/call`, `resources/read` and `prompts/get` runs upstream in its own task. What
//! the upstream says along the way comes back to the handler as [`Step`]s: progress, log
//! messages, requests for input, and finally the result. A legacy downstream client is asked for
//! input directly (a server-to-client request on its session); a 2026-07-28 client cannot be
//! asked anything, so the handler answers its request with `input_required`, parks the running
//! exchange under a random handle sent as `requestState`, and resumes it when the client retries
//! with the answers. That one mechanism bridges the eras both ways: a legacy upstream's
//! elicitation reaches a modern client as `input_required`, and a modern upstream's
//! `input_required` reaches a legacy client as real requests (see `switchboard-upstream`'s
//! input rounds).

// Logging, sampling and roots: deprecated in 2026-07-28, still served to legacy clients.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_core::sync::lock;
use switchboard_core::wire_names::INPUT_KEY_PREFIX;

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ErrorData, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, LoggingMessageNotificationParam, ServerResult,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use switchboard_upstream::{InputResponder, Progress, UpstreamError};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::downstream::{self, Forwarded};

/// How long a parked exchange waits for the client to retry before it is cancelled upstream.
pub(crate) const PARKED_LIMIT: Duration = Duration::from_secs(600);

/// Where the answer to one input request goes.
type Reply = oneshot::Sender<Result<serde_json::Value, ErrorData>>;

/// One question from the server; the answer goes back on `reply`. `key` is the server's own
/// key for it (2026-07-28 servers), kept so the client sees the server's names.
pub(crate) struct Question {
    key: Option<String>,
    request: InputRequest,
    reply: Reply,
}

/// What the upstream side of an exchange reports.
#[expect(
    clippy::large_enum_variant,
    reason = "a handful per request, each moved once through a channel; boxing the result \
              would only add an allocation to every call"
)]
pub(crate) enum Step {
    /// The server wants input: questions it asked together arrive in one step, so the client
    /// is asked them together.
    Input(Vec<Question>),
    /// A progress report.
    Progress(Progress),
    /// A log message the server sent while working on the request.
    Log(LoggingMessageNotificationParam),
    /// The final result.
    Done(Result<ServerResult, UpstreamError>),
}

/// Answers the upstream server's requests for input on behalf of one downstream request.
pub(crate) struct DownstreamResponder {
    steps: mpsc::UnboundedSender<Step>,
    /// A legacy client's session, which can be asked directly, and its request the questions
    /// are about; `None` for 2026-07-28 clients.
    peer: Option<(Peer<RoleServer>, rmcp::model::RequestId)>,
    capabilities: ClientCapabilities,
    /// The downstream session's key (see [`InputResponder::client`]).
    client: String,
}

impl InputResponder for DownstreamResponder {
    fn answer(
        &self,
        key: Option<&str>,
        request: InputRequest,
    ) -> BoxFuture<'static, Result<serde_json::Value, ErrorData>> {
        let mut answers = self.ask_together(vec![(key.map(str::to_owned), request)]);
        answers
            .pop()
            .unwrap_or_else(|| Box::pin(async { Err(gone()) }))
    }

    fn answer_all(
        &self,
        requests: Vec<(String, InputRequest)>,
    ) -> Vec<BoxFuture<'static, Result<serde_json::Value, ErrorData>>> {
        self.ask_together(requests.into_iter().map(|(k, r)| (Some(k), r)).collect())
    }

    fn log(&self, message: LoggingMessageNotificationParam) {
        let _ = self.steps.send(Step::Log(message));
    }

    /// A legacy client's session; a 2026-07-28 request is a client of its own, whose answers
    /// hold for that request only (so a server keeps nothing of it).
    fn client(&self) -> Option<&str> {
        self.peer.as_ref().map(|_| self.client.as_str())
    }

    /// The client answers what it declared it can; the rest may go to the connection's
    /// fallback (a person at the console) rather than fail.
    fn takes(&self, request: &InputRequest) -> bool {
        downstream::supports(&self.capabilities, request).is_ok()
    }
}

impl DownstreamResponder {
    /// Asks the client `requests`: a legacy client each on its session, a 2026-07-28 client
    /// all in one `input_required` result. Requests it cannot answer fail at once.
    fn ask_together(
        &self,
        requests: Vec<(Option<String>, InputRequest)>,
    ) -> Vec<BoxFuture<'static, Result<serde_json::Value, ErrorData>>> {
        let mut answers = Vec::with_capacity(requests.len());
        let mut questions = Vec::new();
        for (key, request) in requests {
            if let Err(missing) = downstream::supports(&self.capabilities, &request) {
                answers.push(Box::pin(std::future::ready(Err(missing))) as BoxFuture<'static, _>);
                continue;
            }
            match &self.peer {
                Some((peer, originating)) => answers.push(Box::pin(downstream::ask(
                    peer.clone(),
                    originating.clone(),
                    request,
                ))),
                None => {
                    let (reply, answer) = oneshot::channel();
                    questions.push(Question {
                        key,
                        request,
                        reply,
                    });
                    answers.push(Box::pin(async move {
                        answer.await.unwrap_or_else(|_| Err(gone()))
                    }));
                }
            }
        }
        if !questions.is_empty() {
            // If the exchange is gone the replies are dropped, and the answers say so.
            let _ = self.steps.send(Step::Input(questions));
        }
        answers
    }
}

fn gone() -> ErrorData {
    ErrorData::internal_error("the client's request ended before it answered", None)
}

/// What a task's exchange reports ([`Exchange::next_event`]).
#[expect(
    clippy::large_enum_variant,
    reason = "a handful per task, each handled at once; boxing the result would only add an \
              allocation to every task"
)]
pub(crate) enum TaskEvent {
    /// The server asked questions; they are among [`Exchange::input_requests`].
    Asked,
    /// A progress report.
    Progress(Progress),
    /// The upstream finished.
    Done(Result<ServerResult, UpstreamError>),
}

/// How an exchange ended for the current downstream request.
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, moved once; boxing would only add an allocation"
)]
pub(crate) enum Outcome {
    /// The upstream finished.
    Done(Result<ServerResult, UpstreamError>),
    /// The client must answer these and retry with the `requestState` inside.
    InputRequired(InputRequiredResult),
}

/// A running upstream request and the questions it is waiting on.
pub(crate) struct Exchange {
    /// What it is (`tools/call weather__get`), so a `requestState` cannot resume another request.
    purpose: String,
    steps: mpsc::UnboundedReceiver<Step>,
    pending: Vec<(String, InputRequest, Reply)>,
    next_key: u32,
    cancel: CancellationToken,
    /// The upstream work (and the forwarding of its progress), run inside the handler's own
    /// task while the handler waits for it: a plain call costs no extra task and no hop between
    /// threads. It moves to a task of its own only when the exchange is parked or dropped
    /// unfinished. `None` once it finished or moved.
    running: Option<BoxFuture<'static, ()>>,
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // Nobody can resume it any more: stop the upstream work, and let it finish stopping
        // (a cancelled call tells its server) on its own.
        self.cancel.cancel();
        self.detach();
    }
}

impl Exchange {
    /// Starts `work` upstream with a responder for the client behind `context` (in the
    /// downstream session `client`); answers the client sent without a `requestState` go with
    /// the first upstream request.
    pub(crate) fn start<F>(
        purpose: String,
        input_responses: Option<InputResponses>,
        request_state: Option<String>,
        client: String,
        context: &RequestContext<RoleServer>,
        forward: &downstream::Forwarder,
        work: F,
    ) -> Self
    where
        F: FnOnce(
            switchboard_upstream::CallContext,
        ) -> BoxFuture<'static, Result<ServerResult, UpstreamError>>,
    {
        let (steps_tx, steps) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let peer =
            (!downstream::is_modern(context)).then(|| (context.peer.clone(), context.id.clone()));
        let capabilities = context.client_capabilities().unwrap_or_default();
        let call_capabilities = switchboard_upstream::relay_capabilities_for(&capabilities);
        let responder = DownstreamResponder {
            steps: steps_tx.clone(),
            peer,
            capabilities,
            client,
        };
        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel();
        let call = switchboard_upstream::CallContext {
            progress: forward.wants_progress().then_some(progress_tx),
            cancel: cancel.clone(),
            responder: Some(Arc::new(responder)),
            log_level: forward.log_level(),
            client_capabilities: Some(call_capabilities),
            input_responses,
            request_state,
            repeatable: false,
            trace: super::incoming_trace(context),
            origin: None,
        };
        let upstream = work(call);
        // One future forwards progress and then the result, so the last reports are never
        // overtaken by the result they came with.
        let running = Box::pin(
            async move {
                tokio::pin!(upstream);
                let result = loop {
                    tokio::select! {
                        biased;
                        Some(report) = progress_rx.recv() => {
                            let _ = steps_tx.send(Step::Progress(report));
                        }
                        result = &mut upstream => break result,
                    }
                };
                while let Ok(report) = progress_rx.try_recv() {
                    let _ = steps_tx.send(Step::Progress(report));
                }
                let _ = steps_tx.send(Step::Done(result));
            }
            // Its exchanges with the server belong to the request's span, wherever it runs on.
            .instrument(tracing::Span::current()),
        );
        Self {
            purpose,
            steps,
            pending: Vec::new(),
            next_key: 0,
            cancel,
            running: Some(running),
        }
    }

    /// Moves unfinished upstream work to a task of its own, for when no handler drives it.
    fn detach(&mut self) {
        if let Some(running) = self.running.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(running);
        }
    }

    /// Hands the client's answers to the questions they belong to; unanswered ones stay open.
    pub(crate) fn deliver(&mut self, responses: Option<InputResponses>) {
        let Some(mut responses) = responses else {
            return;
        };
        let pending = std::mem::take(&mut self.pending);
        for (key, request, reply) in pending {
            match responses.remove(&key) {
                Some(answer) => {
                    let _ = reply.send(Ok(answer));
                }
                None => self.pending.push((key, request, reply)),
            }
        }
    }

    fn note_inputs(&mut self, questions: Vec<Question>) {
        for Question {
            key,
            request,
            reply,
        } in questions
        {
            self.note_input(key, request, reply);
        }
    }

    fn note_input(&mut self, key: Option<String>, request: InputRequest, reply: Reply) {
        let taken = |key: &str| self.pending.iter().any(|(k, _, _)| k == key);
        let key = match key {
            Some(key) if !taken(&key) => key,
            _ => loop {
                self.next_key += 1;
                let key = format!("{INPUT_KEY_PREFIX}{}", self.next_key);
                if !taken(&key) {
                    break key;
                }
            },
        };
        self.pending.push((key, request, reply));
    }

    /// Runs the exchange for the downstream request `context` until the upstream finishes or
    /// needs input the client must give; then parks it in `parked`. With a `deadline`, the
    /// exchange comes back unfinished (`Err`) if neither is in by then: its request then
    /// becomes a task.
    pub(crate) async fn advance_until(
        mut self,
        context: &RequestContext<RoleServer>,
        forward: &downstream::Forwarder,
        parked: &Parked,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Outcome, Self> {
        // Due already (a call that is a task from the start): not a step is taken, so nothing
        // the upstream says first can be mistaken for an answer before the deadline.
        if deadline.is_some_and(|deadline| deadline <= tokio::time::Instant::now()) {
            return Err(self);
        }
        let deadline = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        loop {
            if !self.pending.is_empty() {
                // Take everything already queued, so questions asked together are asked together.
                while let Ok(step) = self.steps.try_recv() {
                    if let Some(outcome) = self.take(step, forward).await {
                        return Ok(outcome);
                    }
                }
                let requests = self.input_requests();
                self.detach();
                let handle = parked.park(self);
                let mut result = InputRequiredResult::from_request_state(handle);
                result.input_requests = Some(requests);
                return Ok(Outcome::InputRequired(result));
            }
            let step = tokio::select! {
                step = self.steps.recv() => step,
                () = &mut deadline => return Err(self),
                () = run(&mut self.running) => {
                    // Its result is queued as the last step.
                    self.running = None;
                    continue;
                }
                _ = context.ct.cancelled() => {
                    self.cancel.cancel();
                    return Ok(Outcome::Done(Err(UpstreamError::Cancelled)));
                }
            };
            let Some(step) = step else {
                return Ok(Outcome::Done(Err(UpstreamError::Closed)));
            };
            if let Some(outcome) = self.take(step, forward).await {
                return Ok(outcome);
            }
        }
    }

    /// What happens next in an exchange no handler drives (a task's): questions are noted (see
    /// [`Self::input_requests`]), log messages dropped.
    pub(crate) async fn next_event(&mut self) -> TaskEvent {
        loop {
            let step = tokio::select! {
                step = self.steps.recv() => step,
                () = run(&mut self.running) => {
                    self.running = None;
                    continue;
                }
            };
            match step {
                None => return TaskEvent::Done(Err(UpstreamError::Closed)),
                Some(Step::Input(questions)) => {
                    self.note_inputs(questions);
                    return TaskEvent::Asked;
                }
                Some(Step::Progress(report)) => return TaskEvent::Progress(report),
                Some(Step::Log(_)) => {}
                Some(Step::Done(result)) => return TaskEvent::Done(result),
            }
        }
    }

    /// The questions waiting for the client's answers, by key.
    pub(crate) fn input_requests(&self) -> InputRequests {
        self.pending
            .iter()
            .map(|(key, request, _)| (key.clone(), request.clone()))
            .collect()
    }

    /// Stops the upstream work (a task cancelled by its client).
    pub(crate) fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Acts on one step: notes questions, forwards progress and log messages. Returns the
    /// outcome when the exchange ends with it.
    ///
    /// A client that takes no message for as long as the request may wait has stopped reading
    /// its stream. Waiting on would hold the request's slot on the server for as long as the
    /// client keeps the stream open, so the request ends here, and the caller's dropping the
    /// exchange cancels the upstream work; the answer is the client's to miss.
    async fn take(&mut self, step: Step, forward: &downstream::Forwarder) -> Option<Outcome> {
        let forwarded = match step {
            Step::Input(questions) => {
                self.note_inputs(questions);
                Forwarded::Sent
            }
            Step::Progress(report) => forward.progress(report).await,
            Step::Log(message) => forward.log(message).await,
            Step::Done(result) => return Some(Outcome::Done(result)),
        };
        (forwarded == Forwarded::Stuck).then(|| {
            tracing::info!(request = %self.purpose, "the client stopped reading; its request is given up");
            Outcome::Done(Err(UpstreamError::Cancelled))
        })
    }
}

/// Drives an exchange's upstream work while it has some; pending forever once it finished
/// (its result is then queued as the last step).
async fn run(running: &mut Option<BoxFuture<'static, ()>>) {
    match running {
        Some(running) => running.await,
        None => std::future::pending().await,
    }
}

/// Refuses answers that cannot be results of an input request: each one is an `ElicitResult`,
/// `CreateMessageResult` or `ListRootsResult`, so a JSON object. Nothing malformed is passed on
/// to a server as if the client had answered.
pub(crate) fn check_input_responses(responses: &InputResponses) -> Result<(), ErrorData> {
    match responses.iter().find(|(_, answer)| !answer.is_object()) {
        Some((key, _)) => Err(ErrorData::invalid_params(
            format!(
                "inputResponses['{key}'] is not an object (an elicitation, sampling or roots \
                 result)"
            ),
            None,
        )),
        None => Ok(()),
    }
}

/// Exchanges waiting for their client to retry, by `requestState` handle.
#[derive(Default)]
pub(crate) struct Parked {
    exchanges: Mutex<HashMap<String, (Instant, Exchange)>>,
}

impl Parked {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Exchange)>> {
        lock(&self.exchanges)
    }

    /// Parks `exchange` and returns its handle: 128 random bits, a bearer capability for this
    /// one retry, valid for [`PARKED_LIMIT`].
    fn park(&self, exchange: Exchange) -> String {
        let handle = format!("{:032x}", rand::random::<u128>());
        let mut parked = self.lock();
        parked.retain(|_, (since, _)| since.elapsed() < PARKED_LIMIT);
        parked.insert(handle.clone(), (Instant::now(), exchange));
        handle
    }

    /// Whether `handle` is one of ours (a `requestState` another server issued is not).
    pub(crate) fn holds(&self, handle: &str) -> bool {
        self.lock().contains_key(handle)
    }

    /// Takes the exchange behind `handle`, if it is for `purpose` and has not expired.
    pub(crate) fn resume(&self, handle: &str, purpose: &str) -> Result<Exchange, ErrorData> {
        let mut parked = self.lock();
        parked.retain(|_, (since, _)| since.elapsed() < PARKED_LIMIT);
        match parked.remove(handle) {
            Some((_, exchange)) if exchange.purpose == purpose => Ok(exchange),
            Some((since, exchange)) => {
                parked.insert(handle.to_owned(), (since, exchange));
                Err(ErrorData::invalid_params(
                    "requestState belongs to another request",
                    None,
                ))
            }
            None => Err(ErrorData::invalid_params(
                switchboard_upstream::UNKNOWN_REQUEST_STATE,
                None,
            )),
        }
    }
}
