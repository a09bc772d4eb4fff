//! The desk: questions waiting for a person, their answers, and who is there to give them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use switchboard_core::sync::lock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

/// What a person is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Asking {
    /// Fill in a form (form elicitation, and the `human` server's tools). `schema` is a flat
    /// object schema, checked by [`check_form`](crate::check_form).
    Form {
        /// What the asker wants, in its words.
        message: String,
        /// The form.
        schema: Value,
    },
    /// Open a page and come back (URL elicitation).
    Url {
        /// What the asker wants, in its words.
        message: String,
        /// The page.
        url: String,
    },
    /// Write the reply a model would have written (sampling).
    Sampling {
        /// The conversation so far (MCP sampling messages).
        messages: Value,
        /// The system prompt, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        system_prompt: Option<String>,
        /// The longest reply wanted, in tokens.
        max_tokens: u64,
    },
}

impl Asking {
    /// `form`, `url` or `sampling`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Form { .. } => "form",
            Self::Url { .. } => "url",
            Self::Sampling { .. } => "sampling",
        }
    }
}

/// A question on the desk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Question {
    /// Its id, for answering it.
    pub id: String,
    /// The server asking.
    pub server: String,
    /// The tool whose call asks, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// What is asked.
    #[serde(flatten)]
    pub asking: Asking,
    /// When it was asked (ms since the Unix epoch).
    pub asked_at_ms: u64,
    /// When the asker stops waiting (ms since the Unix epoch).
    pub expires_at_ms: u64,
}

/// What a person chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Answered (with the form's content, or the reply's text).
    Accept,
    /// Refused to answer.
    Decline,
    /// Dismissed the question without choosing.
    Cancel,
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// What they chose.
    pub action: Action,
    /// With `accept`: the form's fields, or for sampling `{"text": "..."}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

/// How a question left the desk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// A person answered it.
    Accepted,
    /// A person declined it.
    Declined,
    /// A person dismissed it.
    Cancelled,
    /// Nobody answered in time.
    TimedOut,
    /// The asker stopped waiting (its call was cancelled or ended).
    Withdrawn,
}

impl Ending {
    fn label(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Withdrawn => "withdrawn",
        }
    }
}

impl From<Action> for Ending {
    fn from(action: Action) -> Self {
        match action {
            Action::Accept => Self::Accepted,
            Action::Decline => Self::Declined,
            Action::Cancel => Self::Cancelled,
        }
    }
}

/// What consoles hear from the desk.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DeskEvent {
    /// A question arrived.
    QuestionAsked {
        /// The question.
        question: Question,
    },
    /// A question left the desk.
    QuestionEnded {
        /// Its id.
        id: String,
        /// The server that asked.
        server: String,
        /// How.
        ending: Ending,
    },
}

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeskError {
    /// No such question is waiting (it was answered, timed out or withdrawn).
    #[error(
        "question '{0}' is not waiting for an answer (it was answered, timed out or withdrawn)"
    )]
    NotWaiting(String),
    /// The answer does not fit the question; the question still waits.
    #[error("the answer does not fit the question: {0}")]
    Unfit(String),
}

/// Nobody answered before the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("nobody answered within {} s", .0.as_secs())]
pub struct TimedOut(pub Duration);

struct Waiting {
    question: Question,
    since: Instant,
    reply: oneshot::Sender<Answer>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndLabels {
    kind: &'static str,
    ending: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

/// Waits from 1 s to about 68 minutes, doubling.
fn wait_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

struct Metrics {
    ended: Family<EndLabels, Counter>,
    waited: Family<KindLabels, Histogram, fn() -> Histogram>,
    pending: Gauge,
    present: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            ended: Family::default(),
            waited: Family::new_with_constructor(wait_buckets),
            pending: Gauge::default(),
            present: Gauge::default(),
        }
    }
}

struct Inner {
    waiting: Mutex<HashMap<String, Waiting>>,
    /// Made when the first follower subscribes: 256 slots of a `DeskEvent` are about 55 KB,
    /// and a `serve --users` daemon holds a desk per open workspace that mostly nobody follows
    /// (what is sent with no follower is dropped either way).
    events: std::sync::OnceLock<broadcast::Sender<DeskEvent>>,
    present: AtomicUsize,
    metrics: Metrics,
}

/// Where questions wait for a person. Cheap to clone; clones share the desk.
#[derive(Clone)]
pub struct Desk {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desk")
            .field("waiting", &self.pending().len())
            .field("present", &self.inner.present.load(Ordering::Relaxed))
            .finish()
    }
}

impl Default for Desk {
    fn default() -> Self {
        Self::new()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

impl Desk {
    /// An empty desk with nobody at it.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                waiting: Mutex::new(HashMap::new()),
                events: std::sync::OnceLock::new(),
                present: AtomicUsize::new(0),
                metrics: Metrics::default(),
            }),
        }
    }

    /// Registers the desk's metrics: questions by kind and ending, how long they waited, how
    /// many wait now, and how many consoles are there to answer.
    pub fn register_metrics(&self, registry: &mut Registry) {
        let metrics = &self.inner.metrics;
        registry.register(
            "questions",
            "Questions for people by kind (form, url, sampling) and ending (accepted, declined, \
             cancelled, timed_out, withdrawn)",
            metrics.ended.clone(),
        );
        registry.register(
            "question_wait_seconds",
            "Time a question waited for its ending, by kind",
            metrics.waited.clone(),
        );
        registry.register(
            "questions_waiting",
            "Questions waiting for a person now",
            metrics.pending.clone(),
        );
        registry.register(
            "consoles_answering",
            "Consoles connected to answer questions now",
            metrics.present.clone(),
        );
    }

    /// Asks a person `asking` on behalf of `server` (and its `tool`), and waits up to `timeout`
    /// for the answer. Dropping the future withdraws the question.
    pub async fn ask(
        &self,
        server: &str,
        tool: Option<&str>,
        asking: Asking,
        timeout: Duration,
    ) -> Result<Answer, TimedOut> {
        let id = format!("q-{:016x}", rand::random::<u64>());
        let asked_at_ms = now_ms();
        let question = Question {
            id: id.clone(),
            server: server.to_owned(),
            tool: tool.map(str::to_owned),
            asking,
            asked_at_ms,
            expires_at_ms: asked_at_ms
                .saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        };
        let (reply, mut answer) = oneshot::channel();
        {
            // Announced under the lock, so that no ending can be announced before it.
            let mut waiting = self.lock();
            waiting.insert(
                id.clone(),
                Waiting {
                    question: question.clone(),
                    since: Instant::now(),
                    reply,
                },
            );
            self.inner.metrics.pending.inc();
            self.announce(DeskEvent::QuestionAsked { question });
        }
        tracing::debug!(question = %id, %server, "a question waits for a person");
        let withdrawn = Withdrawal {
            desk: self,
            id: &id,
        };
        let outcome = tokio::time::timeout(timeout, &mut answer).await;
        std::mem::forget(withdrawn);
        match outcome {
            Ok(Ok(answer)) => Ok(answer),
            // Taken off the desk without an answer: only `withdraw` does that, for this future.
            Ok(Err(_)) => Err(TimedOut(timeout)),
            // An answer given as the time ran out was sent under the lock `end` takes: if the
            // question was no longer there, the answer is in hand.
            Err(_) if self.end(&id, Ending::TimedOut) => Err(TimedOut(timeout)),
            Err(_) => answer.try_recv().map_err(|_| TimedOut(timeout)),
        }
    }

    /// Answers question `id`. An answer that does not fit (a form's field missing or of the
    /// wrong type, a reply without text) is refused and the question goes on waiting.
    pub fn answer(&self, id: &str, answer: Answer) -> Result<(), DeskError> {
        let mut waiting = self.lock();
        let question = &waiting
            .get(id)
            .ok_or_else(|| DeskError::NotWaiting(id.to_owned()))?
            .question;
        let answer = fit(&question.asking, answer).map_err(DeskError::Unfit)?;
        let Some(entry) = waiting.remove(id) else {
            return Err(DeskError::NotWaiting(id.to_owned()));
        };
        let ending = answer.action.into();
        // Sent under the lock (see `ask`). The asker may have just stopped waiting; then the
        // answer has nowhere to go.
        let _ = entry.reply.send(answer);
        drop(waiting);
        self.ended(&entry.question, entry.since, ending);
        Ok(())
    }

    /// The questions waiting now, oldest first.
    pub fn pending(&self) -> Vec<Question> {
        let mut questions: Vec<Question> =
            self.lock().values().map(|w| w.question.clone()).collect();
        questions.sort_by(|a, b| (a.asked_at_ms, &a.id).cmp(&(b.asked_at_ms, &b.id)));
        questions
    }

    /// What the desk announces from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<DeskEvent> {
        self.inner
            .events
            .get_or_init(|| broadcast::channel(256).0)
            .subscribe()
    }

    /// Sends `event` to the followers, if there are any.
    fn announce(&self, event: DeskEvent) {
        if let Some(events) = self.inner.events.get() {
            let _ = events.send(event);
        }
    }

    /// Marks a console as there to answer until the returned guard is dropped.
    pub fn attend(&self) -> Attendance {
        self.inner.present.fetch_add(1, Ordering::SeqCst);
        self.inner.metrics.present.inc();
        Attendance { desk: self.clone() }
    }

    /// Whether any console is there to answer.
    pub fn attended(&self) -> bool {
        self.inner.present.load(Ordering::SeqCst) > 0
    }

    /// Takes question `id` off the desk with `ending`; whether it was still there.
    fn end(&self, id: &str, ending: Ending) -> bool {
        let entry = self.lock().remove(id);
        match entry {
            Some(entry) => {
                self.ended(&entry.question, entry.since, ending);
                true
            }
            None => false,
        }
    }

    /// Counts and announces a question taken off the desk.
    fn ended(&self, question: &Question, since: Instant, ending: Ending) {
        let metrics = &self.inner.metrics;
        let kind = question.asking.kind();
        metrics.pending.dec();
        metrics
            .ended
            .get_or_create(&EndLabels {
                kind,
                ending: ending.label(),
            })
            .inc();
        metrics
            .waited
            .get_or_create(&KindLabels { kind })
            .observe(since.elapsed().as_secs_f64());
        tracing::debug!(question = %question.id, ending = ending.label(), "a question ended");
        self.announce(DeskEvent::QuestionEnded {
            id: question.id.clone(),
            server: question.server.clone(),
            ending,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        lock(&self.inner.waiting)
    }
}

/// Takes a question off the desk when its asker stops waiting before an ending.
struct Withdrawal<'a> {
    desk: &'a Desk,
    id: &'a str,
}

impl Drop for Withdrawal<'_> {
    fn drop(&mut self) {
        let _ = self.desk.end(self.id, Ending::Withdrawn);
    }
}

/// A console there to answer ([`Desk::attend`]).
pub struct Attendance {
    desk: Desk,
}

impl Drop for Attendance {
    fn drop(&mut self) {
        self.desk.inner.present.fetch_sub(1, Ordering::SeqCst);
        self.desk.inner.metrics.present.dec();
    }
}

/// The answer as the asker gets it, or why it does not fit the question.
fn fit(asking: &Asking, answer: Answer) -> Result<Answer, String> {
    if answer.action != Action::Accept {
        return Ok(Answer {
            action: answer.action,
            content: None,
        });
    }
    let content = match asking {
        Asking::Form { schema, .. } => Some(crate::check_form(schema, answer.content.as_ref())?),
        Asking::Url { .. } => None,
        Asking::Sampling { .. } => {
            let text = answer
                .content
                .as_ref()
                .and_then(|c| c.get("text"))
                .and_then(Value::as_str)
                .filter(|text| !text.trim().is_empty())
                .ok_or("a reply needs its text: {\"text\": \"...\"}")?;
            Some(serde_json::json!({ "text": text }))
        }
    };
    Ok(Answer {
        action: Action::Accept,
        content,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Asking {
        Asking::Form {
            message: "Your name?".into(),
            schema: json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        }
    }

    /// Waits for the next question on `events` and returns its id.
    async fn asked(events: &mut broadcast::Receiver<DeskEvent>) -> String {
        match events.recv().await.unwrap() {
            DeskEvent::QuestionAsked { question } => question.id,
            other => panic!("expected a question, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_answer_reaches_the_asker_and_the_question_leaves_the_desk() {
        let desk = Desk::new();
        let mut events = desk.subscribe();
        let asking = tokio::spawn({
            let desk = desk.clone();
            async move {
                desk.ask("s", Some("t"), form(), Duration::from_secs(60))
                    .await
            }
        });
        let id = asked(&mut events).await;
        assert_eq!(desk.pending().len(), 1);
        assert_eq!(desk.pending()[0].tool.as_deref(), Some("t"));
        let wrong = Answer {
            action: Action::Accept,
            content: Some(json!({})),
        };
        assert_eq!(
            desk.answer(&id, wrong),
            Err(DeskError::Unfit("'name' is required".into()))
        );
        let right = Answer {
            action: Action::Accept,
            content: Some(json!({"name": "Ada"})),
        };
        desk.answer(&id, right.clone()).unwrap();
        assert_eq!(asking.await.unwrap(), Ok(right.clone()));
        assert!(desk.pending().is_empty());
        assert!(matches!(
            events.recv().await.unwrap(),
            DeskEvent::QuestionEnded {
                ending: Ending::Accepted,
                ..
            }
        ));
        assert_eq!(desk.answer(&id, right), Err(DeskError::NotWaiting(id)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_question_times_out() {
        let desk = Desk::new();
        let outcome = desk.ask("s", None, form(), Duration::from_secs(5)).await;
        assert_eq!(outcome, Err(TimedOut(Duration::from_secs(5))));
        assert!(desk.pending().is_empty());
    }

    #[tokio::test]
    async fn a_question_whose_asker_stops_waiting_is_withdrawn() {
        let desk = Desk::new();
        let mut events = desk.subscribe();
        let asking = tokio::spawn({
            let desk = desk.clone();
            async move { desk.ask("s", None, form(), Duration::from_secs(60)).await }
        });
        let id = asked(&mut events).await;
        asking.abort();
        match events.recv().await.unwrap() {
            DeskEvent::QuestionEnded {
                id: ended, ending, ..
            } => {
                assert_eq!((ended, ending), (id, Ending::Withdrawn));
            }
            other => panic!("expected an ending, got {other:?}"),
        }
        assert!(desk.pending().is_empty());
    }

    #[test]
    fn a_reply_needs_text_and_a_refusal_carries_nothing() {
        let sampling = Asking::Sampling {
            messages: json!([]),
            system_prompt: None,
            max_tokens: 10,
        };
        let empty = Answer {
            action: Action::Accept,
            content: Some(json!({"text": " "})),
        };
        assert!(fit(&sampling, empty).is_err());
        let declined = Answer {
            action: Action::Decline,
            content: Some(json!({"anything": 1})),
        };
        assert_eq!(fit(&form(), declined).unwrap().content, None);
    }

    #[test]
    fn attendance_lasts_as_long_as_its_guard() {
        let desk = Desk::new();
        assert!(!desk.attended());
        let first = desk.attend();
        let second = desk.attend();
        drop(first);
        assert!(desk.attended());
        drop(second);
        assert!(!desk.attended());
    }
}
