//! The audit log on the admin API: `GET /api/audit` (a page, newest first, with filters) and
//! `GET /api/audit/export` (every matching record as JSON lines), for the operator and tenant
//! admins; and the record of each change made through the API ([`record_change`]).

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, rejection::QueryRejection};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchboard_core::audit::{AuditKind, AuditQuery, MAX_PAGE};
use switchboard_hub::Hub;

use crate::{ApiError, AppState};

/// The query asked for, checked.
fn query_of(query: Result<Query<AuditQuery>, QueryRejection>) -> Result<AuditQuery, ApiError> {
    let Query(query) =
        query.map_err(|rejection| ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text()))?;
    query
        .page_size()
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    Ok(query)
}

/// `GET /api/audit?kind=&actor=&server=&tool=&outcome=&endpoint=&tenant=&since=&until=&before=&limit=`:
/// `{"records": [...], "next": <id>}`, newest first; `next` (present when the page is full)
/// is the `before` of the next page.
pub(crate) async fn list(
    app: AppState,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let query = query_of(query)?;
    let full = query.page_size().unwrap_or(MAX_PAGE) as usize;
    let records = app.hub.audit_page(&query).await?;
    let next = (records.len() == full)
        .then(|| records.last().and_then(|record| record.id))
        .flatten();
    Ok(Json(serde_json::json!({"records": records, "next": next})).into_response())
}

/// `GET /api/audit/export` with the same filters: every matching record, newest first, one
/// JSON object per line (`application/x-ndjson`), read from the store a page at a time.
pub(crate) async fn export(
    app: AppState,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let mut query = query_of(query)?;
    query.limit = Some(MAX_PAGE);
    // The first page now, so that a refusal is an HTTP status rather than a cut stream.
    let first = app.hub.audit_page(&query).await?;
    let hub = app.hub.clone();
    let pages = futures::stream::unfold(Some((first, query, hub)), |state| async move {
        let (records, mut query, hub) = state?;
        if records.is_empty() {
            return None;
        }
        let mut lines = String::new();
        for record in &records {
            if let Ok(line) = serde_json::to_string(record) {
                lines.push_str(&line);
                lines.push('\n');
            }
        }
        if records.len() < MAX_PAGE as usize {
            return Some((Ok::<_, std::convert::Infallible>(lines), None));
        }
        query.before = records.last().and_then(|record| record.id);
        match hub.audit_page(&query).await {
            Ok(next) => Some((Ok(lines), Some((next, query, hub)))),
            Err(error) => {
                // Said on the last line: the status was sent with the first page.
                lines.push_str(&serde_json::json!({"error": error.to_string()}).to_string());
                lines.push('\n');
                Some((Ok(lines), None))
            }
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"switchboard-audit.jsonl\"",
            ),
        ],
        Body::from_stream(pages),
    )
        .into_response())
}

/// A request to the admin API that changes something, to be recorded once answered.
pub(crate) struct Change {
    method: Method,
    path: String,
}

/// The change `request` makes, if it is one and `hub` keeps an audit log: a write to the
/// admin API. Calls (recorded as calls), checks, completions, prompts got, answers to
/// questions, connection tests and app views change no configuration. Everything else is let
/// through without a copy of anything.
pub(crate) fn change_in(hub: &Hub, request: &axum::extract::Request) -> Option<Change> {
    let method = request.method();
    let path = request.uri().path();
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        || !path.starts_with("/api/")
        || path.ends_with("/call")
        || path.ends_with("/check")
        || path.ends_with("/complete")
        || path.ends_with("/get")
        || path.starts_with("/api/questions")
        || path.starts_with("/api/apps/")
        || path == "/api/test-connection"
        || !hub.audits()
    {
        return None;
    }
    Some(Change {
        method: method.clone(),
        path: switchboard_core::audit::bounded(path),
    })
}

impl Change {
    /// Records the change, answered with `status`: who, what and how it ended; never the body
    /// or the query, which may carry secrets.
    pub(crate) fn record(self, hub: &Hub, status: StatusCode) {
        let outcome = if status.is_success() {
            "ok".to_owned()
        } else {
            status.as_u16().to_string()
        };
        let server = self
            .path
            .strip_prefix("/api/servers/")
            .and_then(|rest| rest.split('/').next())
            .filter(|id| !id.is_empty() && *id != "import")
            .map(str::to_owned);
        hub.audit(AuditKind::Change, &outcome, |mut record| {
            record.server = server;
            record.with_detail(serde_json::json!({
                "method": self.method.as_str(),
                "path": self.path,
            }))
        });
    }
}
