//! Every error a client can be answered with, mapped to the wire in one place: each error type
//! says what kind of failure it is (a [`Fault`]), and each fault has one JSON-RPC code (what MCP
//! clients get) and one HTTP status (what the admin API answers). So a server that is not
//! connected reads alike on `tools/call`, `prompts/get`, `resources/read` and the admin API.
//! `docs/api.md` ("Errors on the wire") shows the same table; a test holds the two together.
//!
//! MCP's own rule for `tools/call` is kept: a failure of the tool's execution (the server could
//! not be reached, timed out, closed the connection) is a result with `isError: true` the model
//! can read ([`tool_call_failure`]); a request that cannot be routed (unknown tool, a server not
//! connected, a refusal) is a JSON-RPC error, as on every other method.

use axum::http::StatusCode;
use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, ErrorData};
use serde_json::{Value, json};
use switchboard_core::ServerId;
use switchboard_hub::desk::DeskError;
use switchboard_hub::{
    AcceptError, ActivationError, ApprovalError, AuditReadError, GuardrailRefusal, HubError,
    SignInError, SignOutError, StoreError,
};
use switchboard_upstream::UpstreamError;

use crate::ApiError;

/// The JSON-RPC error code of a call a rate limit refused (implementation-defined server
/// error range; 429 in spirit).
pub const RATE_LIMITED: i32 = -32029;

/// What kind of failure an error is, as both wires tell it: one row of "Errors on the wire".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The request is malformed or invalid.
    Invalid,
    /// It names something that does not exist.
    NotFound,
    /// The server is not running, the tool is disabled, or the id is taken.
    Conflict,
    /// It is not the caller's to do, or a person or guardrail refused it.
    Forbidden,
    /// An answer that does not fit the question.
    Unfit,
    /// A rate limit refuses it for now.
    RateLimited,
    /// The server exists but is not connected right now.
    NotConnected,
    /// The store does not answer right now.
    StoreUnavailable,
    /// The server answered with a JSON-RPC error of its own.
    ServerError,
    /// The server did not answer within its timeout.
    TimedOut,
    /// The server could not be reached, or said it is briefly unavailable.
    Unreachable,
    /// The server failed otherwise (a closed connection, an invalid answer, a failed sign-in).
    ServerFailed,
    /// A failure inside Switchboard.
    Internal,
}

impl Fault {
    /// Every fault, in the order `docs/api.md` lists them.
    #[cfg(test)]
    const ALL: [Fault; 13] = [
        Fault::Invalid,
        Fault::NotFound,
        Fault::Conflict,
        Fault::Forbidden,
        Fault::Unfit,
        Fault::RateLimited,
        Fault::NotConnected,
        Fault::StoreUnavailable,
        Fault::ServerError,
        Fault::TimedOut,
        Fault::Unreachable,
        Fault::ServerFailed,
        Fault::Internal,
    ];

    /// The JSON-RPC code an MCP client gets; `None` for the server's own error, whose code is
    /// passed on.
    pub(crate) fn json_rpc_code(self) -> Option<ErrorCode> {
        Some(match self {
            Fault::Invalid
            | Fault::NotFound
            | Fault::Conflict
            | Fault::Forbidden
            | Fault::Unfit => ErrorCode::INVALID_PARAMS,
            Fault::RateLimited => ErrorCode(RATE_LIMITED),
            Fault::ServerError => return None,
            Fault::NotConnected
            | Fault::StoreUnavailable
            | Fault::TimedOut
            | Fault::Unreachable
            | Fault::ServerFailed
            | Fault::Internal => ErrorCode::INTERNAL_ERROR,
        })
    }

    /// The HTTP status the admin API answers with.
    pub(crate) fn http_status(self) -> StatusCode {
        match self {
            Fault::Invalid => StatusCode::BAD_REQUEST,
            Fault::NotFound => StatusCode::NOT_FOUND,
            Fault::Conflict => StatusCode::CONFLICT,
            Fault::Forbidden => StatusCode::FORBIDDEN,
            Fault::Unfit | Fault::ServerError => StatusCode::UNPROCESSABLE_ENTITY,
            Fault::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Fault::NotConnected | Fault::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Fault::TimedOut => StatusCode::GATEWAY_TIMEOUT,
            Fault::Unreachable | Fault::ServerFailed => StatusCode::BAD_GATEWAY,
            Fault::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Whether Switchboard sends the request again by itself (a call only when it is safe to
    /// repeat), as `docs/api.md` says: its tests hold it to [`UpstreamError::is_transient`],
    /// which decides.
    #[cfg(test)]
    fn retried(self) -> bool {
        matches!(self, Fault::TimedOut | Fault::Unreachable)
    }
}

/// An error a client can be answered with: what kind of failure it is, and the details an MCP
/// client gets as the JSON-RPC error's `data`.
pub(crate) trait OnTheWire: std::fmt::Display {
    /// What kind of failure it is.
    fn fault(&self) -> Fault;

    /// The JSON-RPC error's `data`.
    fn data(&self) -> Option<Value> {
        None
    }

    /// The JSON-RPC error an MCP client is answered with.
    fn json_rpc(&self) -> ErrorData {
        let code = self
            .fault()
            .json_rpc_code()
            .unwrap_or(ErrorCode::INTERNAL_ERROR);
        ErrorData::new(code, self.to_string(), self.data())
    }

    /// The admin API's answer.
    fn api_error(&self) -> ApiError {
        ApiError::new(self.fault().http_status(), self)
    }
}

impl OnTheWire for HubError {
    fn fault(&self) -> Fault {
        match self {
            HubError::Invalid(_) => Fault::Invalid,
            HubError::UnknownServer(_) | HubError::ToolDisabled { .. } => Fault::Conflict,
            HubError::CallerRefused { .. } | HubError::Forbidden(_) => Fault::Forbidden,
            HubError::RateLimited { .. } => Fault::RateLimited,
            HubError::NotConnected { .. } => Fault::NotConnected,
            HubError::Store(error) => error.fault(),
        }
    }

    /// A server not connected is named with its state and why (so the client knows the tool
    /// exists and may be tried again); a rate limit says when a call may pass.
    fn data(&self) -> Option<Value> {
        match self {
            HubError::NotConnected {
                server,
                state,
                reason,
            } => Some(json!({"server": server, "state": state, "reason": reason})),
            HubError::RateLimited {
                limit, retry_after, ..
            } => Some(json!({
                "retry_after_ms": retry_after.as_millis().max(1),
                "limit": limit.to_string(),
            })),
            _ => None,
        }
    }
}

impl OnTheWire for StoreError {
    fn fault(&self) -> Fault {
        match self {
            StoreError::NotFound(_) | StoreError::Missing(_) => Fault::NotFound,
            StoreError::AlreadyExists(_) | StoreError::Exists(_) => Fault::Conflict,
            StoreError::SharedServer(_) | StoreError::Forbidden(_) => Fault::Forbidden,
            StoreError::Invalid(_) => Fault::Invalid,
            error if error.is_unavailable() => Fault::StoreUnavailable,
            _ => Fault::Internal,
        }
    }
}

impl OnTheWire for ActivationError {
    fn fault(&self) -> Fault {
        match self {
            ActivationError::BadId(_) => Fault::Invalid,
            ActivationError::Store(error) => error.fault(),
        }
    }
}

impl OnTheWire for AcceptError {
    fn fault(&self) -> Fault {
        match self {
            AcceptError::NothingToAccept { .. } => Fault::NotFound,
            AcceptError::ChangedAgain { .. } => Fault::Conflict,
            AcceptError::Hub(error) => error.fault(),
            AcceptError::Store(error) => error.fault(),
        }
    }
}

impl OnTheWire for AuditReadError {
    fn fault(&self) -> Fault {
        match self {
            AuditReadError::Off => Fault::NotFound,
            AuditReadError::Store(error) => error.fault(),
        }
    }
}

impl OnTheWire for DeskError {
    fn fault(&self) -> Fault {
        match self {
            DeskError::NotWaiting(_) => Fault::NotFound,
            DeskError::Unfit(_) => Fault::Unfit,
        }
    }
}

impl OnTheWire for ApprovalError {
    fn fault(&self) -> Fault {
        Fault::Forbidden
    }

    fn data(&self) -> Option<Value> {
        Some(json!({"approval": self.kind()}))
    }
}

impl OnTheWire for GuardrailRefusal {
    fn fault(&self) -> Fault {
        Fault::Forbidden
    }

    fn data(&self) -> Option<Value> {
        Some(json!({"guardrail": self.kind()}))
    }
}

impl OnTheWire for SignInError {
    fn fault(&self) -> Fault {
        match self {
            SignInError::UnknownServer(_) => Fault::NotFound,
            SignInError::NotHttp(_) => Fault::Invalid,
            SignInError::Store(error) => error.fault(),
            SignInError::OAuth { .. } => Fault::ServerFailed,
        }
    }
}

impl OnTheWire for SignOutError {
    fn fault(&self) -> Fault {
        match self {
            SignOutError::Server(error) => error.fault(),
            SignOutError::Unreadable(_) => Fault::Internal,
            SignOutError::Revocation(_) => Fault::ServerFailed,
        }
    }
}

impl OnTheWire for UpstreamError {
    fn fault(&self) -> Fault {
        match self {
            UpstreamError::Rpc { .. } => Fault::ServerError,
            UpstreamError::Timeout(_) => Fault::TimedOut,
            error if error.is_transient() => Fault::Unreachable,
            _ => Fault::ServerFailed,
        }
    }

    /// The server's own error passes on with its code, message and data.
    fn json_rpc(&self) -> ErrorData {
        match self {
            UpstreamError::Rpc {
                code,
                message,
                data,
            } => ErrorData::new(ErrorCode(*code), message.clone(), data.clone()),
            other => ErrorData::internal_error(other.to_string(), None),
        }
    }
}

/// An upstream failure as an MCP client is told it: the server's own JSON-RPC error keeps its
/// code; anything else names the server.
pub(crate) fn upstream_json_rpc(server: &ServerId, error: &UpstreamError) -> ErrorData {
    let mut answer = error.json_rpc();
    if !matches!(error, UpstreamError::Rpc { .. }) {
        answer.message = format!("server '{server}': {}", answer.message).into();
    }
    answer
}

/// A `tools/call` that failed at its server, as the client is told: the server's own JSON-RPC
/// error as such; any other failure of the tool's execution as a tool error the model can read.
pub(crate) fn tool_call_failure(
    server: &ServerId,
    error: UpstreamError,
) -> Result<CallToolResult, ErrorData> {
    match error {
        UpstreamError::Rpc { .. } => Err(upstream_json_rpc(server, &error)),
        error => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "Switchboard could not complete the call: server '{server}': {error}"
        ))])),
    }
}

macro_rules! api_error_from {
    ($($error:ty),*) => {$(
        impl From<$error> for ApiError {
            fn from(error: $error) -> Self {
                error.api_error()
            }
        }
    )*};
}

api_error_from!(
    HubError,
    StoreError,
    ActivationError,
    AcceptError,
    AuditReadError,
    DeskError,
    UpstreamError
);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use switchboard_core::ConnectionState;

    use super::*;

    fn server() -> ServerId {
        ServerId::new("files").unwrap()
    }

    fn not_connected() -> HubError {
        HubError::NotConnected {
            server: server(),
            state: ConnectionState::Reconnecting,
            reason: Some("connection refused".into()),
        }
    }

    /// The row of `docs/api.md`'s table for `fault`, as the code says it must read.
    fn row(fault: Fault) -> String {
        let code = match fault.json_rpc_code() {
            Some(code) => code.0.to_string(),
            None => "the server's own".into(),
        };
        let retried = if fault.retried() {
            "when safe to repeat"
        } else {
            "no"
        };
        format!("| {code} | {} | {retried} |", fault.http_status().as_u16())
    }

    #[test]
    fn the_table_in_the_api_docs_is_the_one_the_code_answers_with() {
        let docs = include_str!("../../../docs/api.md");
        let table: Vec<&str> = docs
            .split("## Errors on the wire")
            .nth(1)
            .expect("docs/api.md has a section 'Errors on the wire'")
            .lines()
            .skip_while(|line| !line.starts_with("| error |"))
            .skip(2)
            .take_while(|line| line.starts_with("| "))
            .collect();
        assert_eq!(table.len(), Fault::ALL.len(), "one row a fault: {table:#?}");
        for (line, fault) in table.iter().zip(Fault::ALL) {
            assert!(
                line.ends_with(&row(fault)),
                "{fault:?}: {line} should end {}",
                row(fault)
            );
        }
    }

    #[test]
    fn a_server_not_connected_is_an_internal_error_with_its_state_and_503() {
        let error = not_connected();
        let answer = error.json_rpc();
        assert_eq!(answer.code, ErrorCode::INTERNAL_ERROR);
        assert!(
            answer.message.contains("not connected"),
            "{}",
            answer.message
        );
        let data = answer.data.unwrap();
        assert_eq!(data["server"], "files");
        assert_eq!(data["state"], "reconnecting");
        assert_eq!(data["reason"], "connection refused");
        assert_eq!(error.api_error().status, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn the_callers_mistakes_are_invalid_params_and_4xx() {
        let cases: Vec<(Box<dyn OnTheWire>, StatusCode)> = vec![
            (
                Box::new(HubError::UnknownServer(server())),
                StatusCode::CONFLICT,
            ),
            (
                Box::new(HubError::ToolDisabled {
                    server: server(),
                    tool: "read".into(),
                }),
                StatusCode::CONFLICT,
            ),
            (
                Box::new(HubError::Invalid("bad".into())),
                StatusCode::BAD_REQUEST,
            ),
            (
                Box::new(HubError::Forbidden("no".into())),
                StatusCode::FORBIDDEN,
            ),
            (
                Box::new(HubError::Store(StoreError::NotFound(server()))),
                StatusCode::NOT_FOUND,
            ),
            (
                Box::new(StoreError::AlreadyExists(server())),
                StatusCode::CONFLICT,
            ),
            (
                Box::new(ActivationError::BadId("a b".into())),
                StatusCode::BAD_REQUEST,
            ),
            (
                Box::new(ApprovalError::Refused { tool: "rm".into() }),
                StatusCode::FORBIDDEN,
            ),
        ];
        for (error, status) in cases {
            assert_eq!(error.json_rpc().code, ErrorCode::INVALID_PARAMS, "{error}");
            assert_eq!(error.api_error().status, status, "{error}");
        }
        let refused = GuardrailRefusal::Refused {
            tool: "rm".into(),
            reason: "no".into(),
        };
        assert_eq!(refused.json_rpc().data.unwrap()["guardrail"], "refused");
    }

    #[test]
    fn a_rate_limit_says_when_to_come_back() {
        let error = HubError::RateLimited {
            what: switchboard_hub::Limited::Server(server()),
            limit: "1/min".parse().unwrap(),
            retry_after: Duration::from_millis(1500),
        };
        let answer = error.json_rpc();
        assert_eq!(answer.code, ErrorCode(RATE_LIMITED));
        assert_eq!(answer.data.unwrap()["retry_after_ms"], 1500);
        assert_eq!(error.api_error().status, StatusCode::TOO_MANY_REQUESTS);
    }

    #[test]
    fn the_servers_own_error_passes_on_and_other_failures_name_the_server() {
        let own = UpstreamError::Rpc {
            code: -32002,
            message: "no such file".into(),
            data: Some(json!({"uri": "file:///x"})),
        };
        let answer = upstream_json_rpc(&server(), &own);
        assert_eq!(answer.code, ErrorCode(-32002));
        assert_eq!(answer.message, "no such file");
        assert_eq!(answer.data.unwrap()["uri"], "file:///x");
        assert_eq!(own.api_error().status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(tool_call_failure(&server(), own).is_err());

        let timeout = UpstreamError::Timeout(Duration::from_secs(30));
        let answer = upstream_json_rpc(&server(), &timeout);
        assert_eq!(answer.code, ErrorCode::INTERNAL_ERROR);
        assert!(
            answer.message.starts_with("server 'files': "),
            "{}",
            answer.message
        );
        assert_eq!(timeout.api_error().status, StatusCode::GATEWAY_TIMEOUT);
        let result = tool_call_failure(&server(), timeout).unwrap();
        assert_eq!(result.is_error, Some(true));
    }

    #[test]
    fn the_faults_told_as_retried_are_those_the_upstream_retries() {
        let errors = [
            UpstreamError::Unreachable("refused".into()),
            UpstreamError::Timeout(Duration::from_secs(1)),
            UpstreamError::Busy {
                running: 1,
                waiting: 1,
            },
            UpstreamError::StayedBusy(Duration::from_secs(1)),
            UpstreamError::HttpStatus {
                status: 503,
                detail: String::new(),
                retry_after: None,
            },
            UpstreamError::HttpStatus {
                status: 500,
                detail: String::new(),
                retry_after: None,
            },
            UpstreamError::Closed,
            UpstreamError::AuthRequired("sign in".into()),
            UpstreamError::Protocol("garbage".into()),
            UpstreamError::Rpc {
                code: -32603,
                message: "boom".into(),
                data: None,
            },
        ];
        for error in errors {
            assert_eq!(error.fault().retried(), error.is_transient(), "{error}");
        }
    }
}
