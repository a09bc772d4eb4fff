//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) at the front door.
//!
//! A client that declares the extension on a `tools/call` may be answered with a task instead
//! of the result: it polls `tasks/get` for the outcome, answers the server's questions with
//! `tasks/update`, and can stop the call with `tasks/cancel`. Switchboard runs these tasks
//! itself, whatever the server behind the tool supports: the call runs upstream as every call
//! does (an [`Exchange`]), only driven by a task of its own instead of the client's request,
//! so it goes on when the client's connection does not (a client that went away, or one that
//! only comes back to poll).
//!
//! Which calls become tasks is set per tool ([`switchboard_core::TaskMode`]): by default a
//! call becomes one only when it is still running after [`TASK_AFTER`] (an answer, or a
//! question, that comes sooner is given as usual); `required` makes every call a task from the
//! start, its questions asked through the task; `forbidden` none.
//!
//! Tasks live in the daemon's memory for [`TASK_TTL`] from their creation, at most
//! [`MAX_TASKS`] at once; their ids are 128 random bits, a bearer capability (as the
//! `requestState` handles of parked exchanges are).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rmcp::model::{
    DetailedTask, ErrorData, InputResponses, JsonObject, ServerResult, Task, TaskPayload,
};
use switchboard_upstream::UpstreamError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::exchange::{Exchange, TaskEvent};
use switchboard_core::sync::lock;

/// How long a call may run before it becomes a task (for tools whose task mode is optional).
pub(crate) const TASK_AFTER: Duration = Duration::from_millis(500);

/// How long a task, and its outcome, is kept from its creation (`ttlMs`).
pub(crate) const TASK_TTL: Duration = Duration::from_secs(3600);

/// How often clients are asked to poll (`pollIntervalMs`).
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// How many tasks are held at once; beyond it, finished ones are dropped first, and a call
/// that would need a task while all are running is refused.
const MAX_TASKS: usize = 1024;

/// Turns the upstream's outcome into what `tasks/get` shows: `completed` with the result
/// (tool errors included, as `isError`), or `failed` with the JSON-RPC error.
pub(crate) type Finish = Box<dyn FnOnce(Result<ServerResult, UpstreamError>) -> TaskPayload + Send>;

/// The daemon's tasks, by id.
#[derive(Default)]
pub(crate) struct Tasks {
    held: Mutex<HashMap<String, Arc<Held>>>,
}

/// One task: its state as `tasks/get` shows it, and the way to its driver.
struct Held {
    expires: Instant,
    state: Mutex<DetailedTask>,
    commands: mpsc::UnboundedSender<Command>,
}

/// What a client asks of a running task; answered once its driver has acted on it, so that a
/// `tasks/get` after the acknowledgement sees the change.
enum Command {
    Update(InputResponses, oneshot::Sender<()>),
    Cancel(oneshot::Sender<()>),
}

impl Tasks {
    /// Makes `exchange` a task: it is held (so `tasks/get` finds it) before this returns, and
    /// driven to its end by a task of its own. The task as created, for `CreateTaskResult`.
    pub(crate) fn start(&self, exchange: Exchange, finish: Finish) -> Result<Task, ErrorData> {
        let id = format!("{:032x}", rand::random::<u128>());
        let now = timestamp();
        let task = Task::new(id.clone(), rmcp::model::TaskStatus::Working, &now, &now)
            .with_ttl_ms(millis(TASK_TTL))
            .with_poll_interval_ms(millis(POLL_INTERVAL));
        let (commands, received) = mpsc::unbounded_channel();
        let held = Arc::new(Held {
            expires: Instant::now() + TASK_TTL,
            state: Mutex::new(DetailedTask::new(task.clone(), TaskPayload::Working)),
            commands,
        });
        {
            let mut tasks = lock(&self.held);
            let now = Instant::now();
            tasks.retain(|_, held| held.expires > now);
            if tasks.len() >= MAX_TASKS {
                let finished: Vec<String> = tasks
                    .iter()
                    .filter(|(_, held)| lock(&held.state).status().is_terminal())
                    .map(|(id, _)| id.clone())
                    .take(tasks.len() + 1 - MAX_TASKS)
                    .collect();
                for id in finished {
                    tasks.remove(&id);
                }
            }
            if tasks.len() >= MAX_TASKS {
                return Err(ErrorData::internal_error(
                    format!("Switchboard is running {MAX_TASKS} tasks already; try again later"),
                    None,
                ));
            }
            tasks.insert(id, held.clone());
        }
        tokio::spawn(drive(held, exchange, finish, received));
        Ok(task)
    }

    /// The task `id` as `tasks/get` shows it.
    pub(crate) fn get(&self, id: &str) -> Result<DetailedTask, ErrorData> {
        Ok(lock(&self.find(id)?.state).clone())
    }

    /// Hands the client's answers to the questions of task `id` they belong to. A task that is
    /// over takes no answers, and says nothing about it (the update is eventually consistent).
    pub(crate) async fn update(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<(), ErrorData> {
        super::exchange::check_input_responses(&responses)?;
        let held = self.find(id)?;
        let (done, acted) = oneshot::channel();
        if held.commands.send(Command::Update(responses, done)).is_ok() {
            let _ = acted.await;
        }
        Ok(())
    }

    /// Cancels task `id` (its upstream call too); a task already over stays as it ended.
    pub(crate) async fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let held = self.find(id)?;
        let (done, acted) = oneshot::channel();
        if held.commands.send(Command::Cancel(done)).is_ok() {
            let _ = acted.await;
        }
        Ok(())
    }

    fn find(&self, id: &str) -> Result<Arc<Held>, ErrorData> {
        let tasks = lock(&self.held);
        match tasks.get(id) {
            Some(held) if held.expires > Instant::now() => Ok(held.clone()),
            _ => Err(ErrorData::invalid_params(
                format!("no task '{id}' (unknown, or past its TTL)"),
                None,
            )),
        }
    }
}

impl Held {
    fn set(&self, payload: TaskPayload) {
        let mut state = lock(&self.state);
        let mut task = state.task.clone();
        task.last_updated_at = timestamp();
        if payload.status().is_terminal() {
            task.status_message = None;
        }
        *state = DetailedTask::new(task, payload);
    }

    fn note_progress(&self, report: switchboard_upstream::Progress) {
        let mut state = lock(&self.state);
        let done = match report.total {
            Some(total) => format!("{}/{total}", report.progress),
            None => report.progress.to_string(),
        };
        state.task.status_message = Some(match report.message {
            Some(message) => format!("{done}: {message}"),
            None => done,
        });
        state.task.last_updated_at = timestamp();
    }
}

/// Runs a task's exchange to its end: the server's questions show as `input_required`, the
/// client's answers and cancellation reach the exchange, the outcome is kept. A task still
/// running at its TTL is stopped (dropping the exchange cancels its upstream call).
async fn drive(
    held: Arc<Held>,
    mut exchange: Exchange,
    finish: Finish,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let expiry = tokio::time::sleep_until(held.expires);
    tokio::pin!(expiry);
    loop {
        tokio::select! {
            biased;
            Some(command) = commands.recv() => match command {
                Command::Update(responses, done) => {
                    exchange.deliver(Some(responses));
                    held.set(waiting(&exchange));
                    let _ = done.send(());
                }
                Command::Cancel(done) => {
                    exchange.cancel();
                    held.set(TaskPayload::Cancelled);
                    let _ = done.send(());
                    return;
                }
            },
            event = exchange.next_event() => match event {
                TaskEvent::Asked => held.set(waiting(&exchange)),
                TaskEvent::Progress(report) => held.note_progress(report),
                TaskEvent::Done(outcome) => {
                    held.set(finish(outcome));
                    return;
                }
            },
            () = &mut expiry => return,
        }
    }
}

/// `input_required` with the questions still unanswered, or `working` when there are none.
fn waiting(exchange: &Exchange) -> TaskPayload {
    let input_requests = exchange.input_requests();
    if input_requests.is_empty() {
        TaskPayload::Working
    } else {
        TaskPayload::InputRequired { input_requests }
    }
}

/// `completed` with `result`, or `failed` with `error` (as JSON objects).
pub(crate) fn payload(outcome: Result<impl serde::Serialize, ErrorData>) -> TaskPayload {
    let object = |value: serde_json::Value| match value {
        serde_json::Value::Object(object) => object,
        other => JsonObject::from_iter([("value".to_owned(), other)]),
    };
    match outcome.map(|result| serde_json::to_value(result)) {
        Ok(Ok(result)) => TaskPayload::Completed {
            result: object(result),
        },
        Ok(Err(error)) => TaskPayload::Failed {
            error: object(serde_json::json!({"code": -32603, "message": error.to_string()})),
        },
        Err(error) => TaskPayload::Failed {
            error: object(serde_json::to_value(error).unwrap_or_default()),
        },
    }
}

/// Now, as RFC 3339 with milliseconds (the spec's ISO 8601 timestamps).
fn timestamp() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
