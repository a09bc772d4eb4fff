//! The connection state machine.
//!
//! Every upstream connection moves through these states, and only along the edges listed in
//! [`ConnectionState::can_transition_to`]. The connection task owns one [`StateMachine`]; an
//! illegal transition is a bug in that task and is reported as an error, not silently applied.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a connection to one upstream server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionState {
    /// Not connected and not trying (initial state, disabled, or shut down).
    Disconnected,
    /// The server requires the user to sign in.
    NeedsAuth,
    /// Registering Switchboard as an OAuth client.
    Registering,
    /// Waiting for the user to finish signing in.
    Authorizing,
    /// Signed in; about to connect.
    Authenticated,
    /// Opening the transport and performing the handshake.
    Connecting,
    /// Live: requests can be sent.
    Connected,
    /// Refreshing an access token while connected.
    TokenRefresh,
    /// The last attempt failed; see the status message.
    Error,
    /// The upstream rejected the credentials; the user must sign in again.
    InvalidToken,
    /// Waiting to reconnect after a failure.
    Reconnecting,
}

impl ConnectionState {
    /// Every state, for tests and documentation.
    pub const ALL: [Self; 11] = [
        Self::Disconnected,
        Self::NeedsAuth,
        Self::Registering,
        Self::Authorizing,
        Self::Authenticated,
        Self::Connecting,
        Self::Connected,
        Self::TokenRefresh,
        Self::Error,
        Self::InvalidToken,
        Self::Reconnecting,
    ];

    /// Whether a live session serves requests in this state (connected, or refreshing its
    /// token while connected).
    pub fn is_serving(self) -> bool {
        matches!(self, Self::Connected | Self::TokenRefresh)
    }

    /// Whether the machine may move from `self` to `next`.
    pub fn can_transition_to(self, next: Self) -> bool {
        use ConnectionState::*;
        // Shutting down is always allowed.
        if next == Disconnected {
            return self != Disconnected;
        }
        matches!(
            (self, next),
            (Disconnected, Connecting | NeedsAuth)
                | (NeedsAuth, Registering | Authorizing | Error)
                | (Registering, Authorizing | Error)
                | (Authorizing, Authenticated | Error)
                | (Authenticated, Connecting)
                | (Connecting, Connected | Error | NeedsAuth | InvalidToken)
                | (
                    Connected,
                    TokenRefresh | Error | InvalidToken | Reconnecting | Connected
                )
                | (TokenRefresh, Connected | InvalidToken | Error)
                | (InvalidToken, NeedsAuth)
                | (Error, Reconnecting | Connecting | NeedsAuth)
                | (Reconnecting, Connecting | Error)
        )
    }

    /// Stable text form (`needs-auth`, `connected`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disconnected => "disconnected",
            Self::NeedsAuth => "needs-auth",
            Self::Registering => "registering",
            Self::Authorizing => "authorizing",
            Self::Authenticated => "authenticated",
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::TokenRefresh => "token-refresh",
            Self::Error => "error",
            Self::InvalidToken => "invalid-token",
            Self::Reconnecting => "reconnecting",
        }
    }
}

impl fmt::Display for ConnectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An attempt to take an edge the state machine does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal connection state transition from {from} to {to}")]
pub struct IllegalTransition {
    /// The current state.
    pub from: ConnectionState,
    /// The refused next state.
    pub to: ConnectionState,
}

/// A connection's current state, changed only along legal edges.
#[derive(Debug, Clone)]
pub struct StateMachine {
    state: ConnectionState,
}

impl Default for StateMachine {
    fn default() -> Self {
        Self {
            state: ConnectionState::Disconnected,
        }
    }
}

impl StateMachine {
    /// The current state.
    pub fn state(&self) -> ConnectionState {
        self.state
    }

    /// Moves to `next`, or refuses with [`IllegalTransition`].
    pub fn transition(
        &mut self,
        next: ConnectionState,
    ) -> Result<ConnectionState, IllegalTransition> {
        if self.state.can_transition_to(next) {
            let previous = self.state;
            self.state = next;
            Ok(previous)
        } else {
            Err(IllegalTransition {
                from: self.state,
                to: next,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ConnectionState::*;
    use super::*;

    #[test]
    fn the_happy_path_and_the_auth_path_are_legal() {
        let mut machine = StateMachine::default();
        for next in [Connecting, Connected, Reconnecting, Connecting, Connected] {
            machine.transition(next).unwrap();
        }
        let mut machine = StateMachine::default();
        for next in [
            NeedsAuth,
            Registering,
            Authorizing,
            Authenticated,
            Connecting,
            Connected,
            TokenRefresh,
            Connected,
            InvalidToken,
            NeedsAuth,
        ] {
            machine.transition(next).unwrap();
        }
    }

    #[test]
    fn illegal_edges_are_refused_and_leave_the_state_alone() {
        let mut machine = StateMachine::default();
        let err = machine.transition(Connected).unwrap_err();
        assert_eq!(
            err,
            IllegalTransition {
                from: Disconnected,
                to: Connected
            }
        );
        assert_eq!(machine.state(), Disconnected);
        assert!(!Reconnecting.can_transition_to(Connected));
        assert!(!Authorizing.can_transition_to(Connected));
        assert!(!Disconnected.can_transition_to(Disconnected));
    }

    #[test]
    fn every_state_can_shut_down_and_every_state_has_a_way_out() {
        for state in ConnectionState::ALL {
            if state != Disconnected {
                assert!(state.can_transition_to(Disconnected), "{state}");
            }
            assert!(
                ConnectionState::ALL
                    .iter()
                    .any(|next| *next != Disconnected && state.can_transition_to(*next)),
                "{state} is a dead end"
            );
        }
    }

    #[test]
    fn text_form_matches_serde() {
        for state in ConnectionState::ALL {
            assert_eq!(
                serde_json::to_value(state).unwrap(),
                serde_json::Value::String(state.as_str().into())
            );
        }
    }
}
