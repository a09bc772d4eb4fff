//! Questions for people.
//!
//! Some tools need a person. An upstream server may ask for input (elicitation, sampling) that
//! no connected client can give, and the built-in `human` server's tools exist only to ask. This
//! crate is where such questions wait: the [`Desk`] holds each with an id and a deadline and
//! announces it to consoles, a person answers it there (the admin API, or the console's
//! WebSocket), and the asker gets the answer, or learns that time ran out. [`PeopleResponder`]
//! puts an upstream server's requests on the desk when a person is at a console to see them;
//! [`HumanServer`] is the `human` server, which Switchboard runs inside itself.
//!
//! Nothing here is stored: a question lives as long as its asker waits.

mod desk;
mod form;
mod human;
mod responder;

pub use desk::{
    Action, Answer, Asking, Attendance, Desk, DeskError, DeskEvent, Ending, Question, TimedOut,
};
pub use form::check_form;
pub use human::HumanServer;
pub use responder::{PeopleResponder, QUESTION_TIMEOUT};
