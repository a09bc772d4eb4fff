//! Groups and grants on the admin API, for the workspace's tenant: `/api/groups` and
//! `/api/grants` (see [`switchboard_core::grants`]). The operator and tenant admins manage
//! them; a member gets 403 here, and reads their own groups and reach at `GET /api/me`.

use axum::Json;
use axum::extract::Path;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchboard_core::grants::{Group, GroupName};
use switchboard_core::{Grant, UserId};

use crate::{ApiError, AppState};

type Answer = Result<Response, ApiError>;

fn body<T>(payload: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    payload
        .map(|Json(value)| value)
        .map_err(|rejection| ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text()))
}

fn group_name(name: String) -> Result<GroupName, ApiError> {
    GroupName::new(name).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))
}

/// A group as written to `PUT /api/groups/{name}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GroupBody {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    members: std::collections::BTreeSet<UserId>,
}

/// `GET /api/groups`: the tenant's groups with their members.
pub(crate) async fn list_groups(app: AppState) -> Answer {
    Ok(Json(app.hub.groups().await?).into_response())
}

/// `PUT /api/groups/{name}` (`{"description"?, "members": ["<user>", ...]}`): defines the
/// group with exactly these members; 201 when new.
pub(crate) async fn put_group(
    app: AppState,
    Path(name): Path<String>,
    payload: Result<Json<GroupBody>, JsonRejection>,
) -> Answer {
    let GroupBody {
        description,
        members,
    } = body(payload)?;
    let group = Group {
        name: group_name(name)?,
        description,
        members,
    };
    let new = app.hub.put_group(&group).await?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(group)).into_response())
}

/// `DELETE /api/groups/{name}`: removes the group and the grants made to it.
pub(crate) async fn remove_group(app: AppState, Path(name): Path<String>) -> Answer {
    app.hub.remove_group(&group_name(name)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /api/grants`: the tenant's grants, oldest first.
pub(crate) async fn list_grants(app: AppState) -> Answer {
    Ok(Json(app.hub.grants().await?).into_response())
}

/// `POST /api/grants` (`{"subject": "user:<id>" | "group:<name>", "endpoint": "<name>"}`, or
/// `"server"`, or `"server"` and `"tool"`): grants it; 201 when new, 200 when it was granted
/// already.
pub(crate) async fn add_grant(
    app: AppState,
    payload: Result<Json<Grant>, JsonRejection>,
) -> Answer {
    let grant = body(payload)?;
    let (kept, new) = app.hub.add_grant(grant).await?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(kept)).into_response())
}

/// `DELETE /api/grants/{id}`: revokes the grant.
pub(crate) async fn revoke_grant(app: AppState, Path(id): Path<String>) -> Answer {
    app.hub.revoke_grant(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
