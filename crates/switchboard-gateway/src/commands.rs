//! The operator's approved commands through the admin API: the stdio servers tenants and
//! members may run ([`switchboard_core::ApprovedCommand`]).
//!
//! - `GET /api/commands`: every approved command, the operator's own values as `********`: what
//!   a tenant admin or member may pick (`"approvedCommand"` in a server's definition) and fill in.
//! - `PUT /api/commands/{name}`, `DELETE /api/commands/{name}`: the operator only (an operator
//!   key, or a daemon without `--users`); anyone else gets 403.

use axum::Json;
use axum::extract::Path;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use switchboard_core::{ApprovedCommand, NamedValue};
use switchboard_hub::HubError;

use crate::{ApiError, AppState};

/// `GET /api/commands`.
pub(crate) async fn list(app: AppState) -> Result<Response, ApiError> {
    let commands: Vec<ApprovedCommand> = app
        .hub
        .approved_commands()
        .await
        .map_err(HubError::from)?
        .iter()
        .map(ApprovedCommand::redacted)
        .collect();
    Ok(Json(json!({ "commands": commands })).into_response())
}

/// The body of `PUT /api/commands/{name}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CommandBody {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    user_env: Vec<String>,
    #[serde(default)]
    user_args: Vec<String>,
}

/// `PUT /api/commands/{name}`: approves a command (the operator only).
pub(crate) async fn put(
    app: AppState,
    Path(name): Path<String>,
    body: Result<Json<CommandBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    let mut command = ApprovedCommand::new(name, body.command, body.args)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    command.description = body.description;
    command.env = body
        .env
        .into_iter()
        .map(|(name, value)| NamedValue::guess(name, value))
        .collect();
    command.user_env = body.user_env;
    command.user_args = body.user_args;
    app.hub
        .approve_command(&command)
        .await
        .map_err(HubError::from)?;
    Ok(Json(command.redacted()).into_response())
}

/// `DELETE /api/commands/{name}`: withdraws a command (the operator only).
pub(crate) async fn remove(app: AppState, Path(name): Path<String>) -> Result<Response, ApiError> {
    let removed = app
        .hub
        .withdraw_command(&name)
        .await
        .map_err(HubError::from)?;
    match removed {
        true => Ok(StatusCode::NO_CONTENT.into_response()),
        false => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no approved command '{name}'"),
        )),
    }
}
