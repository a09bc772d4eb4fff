//! The admin API of activation layers: which servers and tools are on for every conversation
//! (`/api/activation/app`), a user's (`/api/activation/users/{id}`) or one thread's
//! (`/api/activation/threads/{id}`). `GET` reads a layer, `PATCH` changes it
//! (`{"servers": {"github": true}, "tools": {"github__delete_repo": false}}`, `null` forgets a
//! word), `DELETE` empties it. Sessions of the conversations concerned are told their tool
//! list changed.

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchboard_core::{Activation, ActivationChange};
use switchboard_hub::Scope;

use crate::wire::OnTheWire;
use crate::{AppState, api_error};

/// Why a path names no layer: the status and message to answer with.
type Refusal = (StatusCode, String);

/// The layer a path names.
fn scope(kind: &str, id: Option<&str>) -> Result<Scope, Refusal> {
    let bad = |e: switchboard_hub::ActivationError| (e.fault().http_status(), e.to_string());
    match (kind, id) {
        ("app", None) => Ok(Scope::App),
        ("users", Some(id)) => Scope::user(id).map_err(bad),
        ("threads", Some(id)) => Scope::thread(id).map_err(bad),
        _ => Err((
            StatusCode::NOT_FOUND,
            "activation layers are /api/activation/app, /users/{id} and /threads/{id}".to_owned(),
        )),
    }
}

fn layer(scope: &Scope, activation: &Activation) -> Response {
    Json(serde_json::json!({
        "scope": scope.to_string(),
        "servers": activation.servers,
        "tools": activation.tools,
    }))
    .into_response()
}

async fn read(app: &AppState, scope: Result<Scope, Refusal>) -> Response {
    match scope {
        Ok(scope) => layer(&scope, &app.hub.activation(&scope)),
        Err((status, message)) => api_error(status, message),
    }
}

async fn change(
    app: &AppState,
    scope: Result<Scope, Refusal>,
    change: Result<Json<ActivationChange>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let scope = match scope {
        Ok(scope) => scope,
        Err((status, message)) => return api_error(status, message),
    };
    let change = match change {
        Ok(Json(change)) => change,
        Err(rejection) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                format!(
                    "{}; send {{\"servers\": {{\"<id>\": true|false|null}}, \"tools\": {{\"<name>\": true|false|null}}}}",
                    rejection.body_text()
                ),
            );
        }
    };
    match app.hub.change_activation(&scope, &change).await {
        Ok(activation) => layer(&scope, &activation),
        Err(e) => e.api_error().into_response(),
    }
}

async fn clear(app: &AppState, scope: Result<Scope, Refusal>) -> Response {
    let scope = match scope {
        Ok(scope) => scope,
        Err((status, message)) => return api_error(status, message),
    };
    let current = app.hub.activation(&scope);
    let forget = ActivationChange {
        servers: current.servers.keys().map(|k| (k.clone(), None)).collect(),
        tools: current.tools.keys().map(|k| (k.clone(), None)).collect(),
    };
    match app.hub.change_activation(&scope, &forget).await {
        Ok(activation) => layer(&scope, &activation),
        Err(e) => e.api_error().into_response(),
    }
}

/// `GET /api/activation/app`.
pub(crate) async fn get_app(app: AppState) -> Response {
    read(&app, scope("app", None)).await
}

/// `PATCH /api/activation/app`.
pub(crate) async fn patch_app(
    app: AppState,
    body: Result<Json<ActivationChange>, axum::extract::rejection::JsonRejection>,
) -> Response {
    change(&app, scope("app", None), body).await
}

/// `DELETE /api/activation/app`.
pub(crate) async fn delete_app(app: AppState) -> Response {
    clear(&app, scope("app", None)).await
}

/// `GET /api/activation/{users|threads}/{id}`.
pub(crate) async fn get_named(app: AppState, Path((kind, id)): Path<(String, String)>) -> Response {
    read(&app, scope(&kind, Some(&id))).await
}

/// `PATCH /api/activation/{users|threads}/{id}`.
pub(crate) async fn patch_named(
    app: AppState,
    Path((kind, id)): Path<(String, String)>,
    body: Result<Json<ActivationChange>, axum::extract::rejection::JsonRejection>,
) -> Response {
    change(&app, scope(&kind, Some(&id)), body).await
}

/// `DELETE /api/activation/{users|threads}/{id}`.
pub(crate) async fn delete_named(
    app: AppState,
    Path((kind, id)): Path<(String, String)>,
) -> Response {
    clear(&app, scope(&kind, Some(&id))).await
}
