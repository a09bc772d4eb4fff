//! Questions waiting for a person ([`switchboard_hub::desk`]): `GET /api/questions` lists
//! them, `POST /api/questions/{id}` answers one. The console answers over its WebSocket
//! (`/api/events/ws`) with the same answer object; both go through [`answer`].

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchboard_hub::desk::{Answer, Desk};

use crate::{ApiError, AppState};

/// `GET /api/questions`: the questions waiting now, oldest first.
pub(crate) async fn list(app: AppState) -> Response {
    Json(serde_json::json!({"questions": app.hub.desk().pending()})).into_response()
}

/// `POST /api/questions/{id}`: answers one (204), or says why not (404 when it no longer
/// waits, 422 when the answer does not fit; the question then goes on waiting).
pub(crate) async fn answer_one(
    app: AppState,
    Path(id): Path<String>,
    body: Result<Json<Answer>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(given) = match body {
        Ok(body) => body,
        Err(rejection) => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "the answer must be {{\"action\": \"accept\" | \"decline\" | \"cancel\", \
                     \"content\": {{...}}}}: {}",
                    rejection.body_text()
                ),
            )
            .into_response();
        }
    };
    match answer(app.hub.desk(), &id, given) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => error.into_response(),
    }
}

/// Answers question `id` at `desk`, as an API error when it cannot be.
pub(crate) fn answer(desk: &Desk, id: &str, given: Answer) -> Result<(), ApiError> {
    Ok(desk.answer(id, given)?)
}
