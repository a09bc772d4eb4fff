//! Endpoints over HTTP: which endpoint a request was sent to (`/mcp/e/{name}`,
//! `/sse/e/{name}`, `/message/e/{name}`), and the admin API that defines them and issues their
//! keys (`/api/endpoints`). What an endpoint includes is enforced by the aggregated server
//! ([`crate::mcp`]), for every request of every session opened there.

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchboard_core::EndpointDefinition;
use switchboard_hub::StoreError;

use crate::{AppState, api_error};

/// The path segment between a front door and an endpoint's name.
const ENDPOINT_SEGMENT: &str = "/e/";

/// The front doors an endpoint is served at, by the paths of the workspace's own.
pub(crate) const DOORS: [&str; 3] = ["/mcp", "/sse", "/message"];

/// The admin API's reads an endpoint's key may make, for its own endpoint: its tools for a
/// model API, and a search of them.
const KEY_READS: [&str; 2] = ["/api/tools", "/api/tools/search"];

/// A request that presented a key of this endpoint (put on it by the access check).
#[derive(Debug, Clone)]
pub(crate) struct EndpointKeyHolder(pub(crate) String);

/// What a read of the admin API (`/api/tools`, `/api/tools/search`) covers: the endpoint its
/// query names (404 when there is none), or the one whose key it presents (403 for another).
pub(crate) fn boundary_of(
    hub: &switchboard_hub::Hub,
    named: Option<&str>,
    holder: &Option<axum::Extension<EndpointKeyHolder>>,
) -> Result<crate::mcp::conversation::Boundary, crate::ApiError> {
    let held = holder
        .as_ref()
        .map(|axum::Extension(holder)| holder.0.as_str());
    let endpoint = match (named, held) {
        (Some(named), Some(held)) if named != held => {
            return Err(crate::ApiError::new(
                StatusCode::FORBIDDEN,
                format!("this key reaches endpoint '{held}' only"),
            ));
        }
        (named, held) => named.or(held),
    };
    if let Some(refusal) = endpoint.and_then(|name| hub.endpoint_door_refusal(name)) {
        return Err(crate::ApiError::new(StatusCode::FORBIDDEN, refusal));
    }
    match endpoint {
        Some(name) if hub.endpoint(name).is_none() => Err(crate::ApiError::new(
            StatusCode::NOT_FOUND,
            format!("there is no endpoint named '{name}'"),
        )),
        name => Ok(crate::mcp::conversation::Boundary::of(hub, name)),
    }
}

/// An endpoint's Streamable HTTP door.
pub(crate) const MCP_PATH: &str = "/mcp/e/{endpoint}";

/// An endpoint's HTTP+SSE stream.
pub(crate) const SSE_PATH: &str = "/sse/e/{endpoint}";

/// Where an endpoint's HTTP+SSE clients post.
pub(crate) const MESSAGE_PATH: &str = "/message/e/{endpoint}";

/// The endpoint `path` names (`/mcp/e/{name}`, `/sse/e/{name}` or `/message/e/{name}`), if it
/// names one.
pub(crate) fn endpoint_in(path: &str) -> Option<&str> {
    DOORS.iter().find_map(|door| {
        let name = path.strip_prefix(door)?.strip_prefix(ENDPOINT_SEGMENT)?;
        (!name.is_empty() && !name.contains('/')).then_some(name)
    })
}

/// The endpoint the request of `parts` was sent to (`None`: the workspace's own doors, or
/// stdio).
pub(crate) fn endpoint_of(parts: Option<&axum::http::request::Parts>) -> Option<&str> {
    endpoint_in(parts?.uri.path())
}

/// The answer to a request for an endpoint that is not there: 404, as a JSON-RPC error so that
/// MCP clients show the reason.
pub(crate) fn no_such_endpoint(name: &str) -> Response {
    door_refusal(
        StatusCode::NOT_FOUND,
        format!("there is no endpoint named '{name}'"),
    )
}

/// A refusal at an endpoint's door, before any session opens: `status`, with a JSON-RPC error
/// saying `message` so that MCP clients show it.
fn door_refusal(status: StatusCode, message: String) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": message},
    });
    (status, Json(body)).into_response()
}

/// Answers requests for an endpoint that is not defined with 404, and those from a member whose
/// grants do not include it with 403, before any session opens.
pub(crate) async fn require_endpoint(
    crate::AppState { hub, .. }: crate::AppState,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(name) = endpoint_in(request.uri().path()) {
        if let Some(refusal) = hub.endpoint_door_refusal(name) {
            return door_refusal(StatusCode::FORBIDDEN, refusal);
        }
        if hub.endpoint(name).is_none() {
            return no_such_endpoint(name);
        }
    }
    next.run(request).await
}

/// Why a request presenting a key of `endpoint` may not pass: it is sent neither to one of that
/// endpoint's doors nor to a read of its tools (403), or a loopback listener got it under
/// another `Host`.
pub(crate) fn key_refusal(
    endpoint: &str,
    request: &axum::extract::Request,
    access: &crate::Access,
) -> Option<Response> {
    if access.is_loopback() && !crate::request_is_local(request.headers()) {
        return Some(crate::Refusal::NotLoopback.into_response());
    }
    beyond_its_endpoint(endpoint, request)
}

/// Why a request presenting a key of `endpoint` goes beyond what the key reaches: it is sent
/// neither to one of that endpoint's doors nor to a read of its tools (403).
pub(crate) fn beyond_its_endpoint(
    endpoint: &str,
    request: &axum::extract::Request,
) -> Option<Response> {
    let path = request.uri().path();
    if endpoint_in(path) == Some(endpoint)
        || (request.method() == axum::http::Method::GET && KEY_READS.contains(&path))
    {
        return None;
    }
    Some(api_error(
        StatusCode::FORBIDDEN,
        format!(
            "this key reaches endpoint '{endpoint}' only: /mcp/e/{endpoint} (Streamable HTTP) \
             or /sse/e/{endpoint} (HTTP+SSE)"
        ),
    ))
}

fn endpoint_error(error: StoreError) -> Response {
    crate::ApiError::from(error).into_response()
}

/// `GET /api/endpoints`: every endpoint (its keys by id and issue time; a key itself is shown
/// only when it is issued); for a member bound by grants, those granted to them.
pub(crate) async fn list(app: AppState) -> Response {
    let mut endpoints = app.hub.endpoints();
    endpoints.retain(|endpoint| app.hub.endpoint_door_refusal(&endpoint.name).is_none());
    Json(endpoints).into_response()
}

/// `GET /api/endpoints/{name}` (404 for a member whose grants do not include it).
pub(crate) async fn show(app: AppState, Path(name): Path<String>) -> Response {
    let granted = app.hub.endpoint_door_refusal(&name).is_none();
    match app.hub.endpoint(&name).filter(|_| granted) {
        Some(endpoint) => Json(endpoint).into_response(),
        None => endpoint_error(StoreError::Missing(format!("endpoint named '{name}'"))),
    }
}

/// `PUT /api/endpoints/{name}`: defines the endpoint (`{"description"?, "servers": {"<id>":
/// "*" | ["<tool>", ...]}}`), replacing its definition if it exists; 201 when new.
pub(crate) async fn put(
    app: AppState,
    Path(name): Path<String>,
    definition: Result<Json<EndpointDefinition>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let definition = match definition {
        Ok(Json(definition)) => definition,
        Err(rejection) => return api_error(StatusCode::BAD_REQUEST, rejection.body_text()),
    };
    match app.hub.define_endpoint(&name, definition).await {
        Ok(new) => {
            let status = if new {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            (status, Json(app.hub.endpoint(&name))).into_response()
        }
        Err(error) => endpoint_error(error),
    }
}

/// `DELETE /api/endpoints/{name}`: removes it and its keys; its open sessions see nothing.
pub(crate) async fn remove(app: AppState, Path(name): Path<String>) -> Response {
    match app.hub.remove_endpoint(&name).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => endpoint_error(error),
    }
}

/// `POST /api/endpoints/{name}/keys`: issues a key that reaches this endpoint only; the key is
/// in this answer and nowhere else (`{"id", "key", "issued_at_ms"}`).
pub(crate) async fn issue_key(app: AppState, Path(name): Path<String>) -> Response {
    match app.hub.issue_endpoint_key(&name).await {
        Ok((key, kept)) => (
            StatusCode::CREATED,
            Json(serde_json::json!({
                "id": kept.id,
                "key": key,
                "issued_at_ms": kept.issued_at_ms,
            })),
        )
            .into_response(),
        Err(error) => endpoint_error(error),
    }
}

/// `DELETE /api/endpoints/{name}/keys/{id}`: revokes the key.
pub(crate) async fn revoke_key(
    app: AppState,
    Path((name, id)): Path<(String, String)>,
) -> Response {
    match app.hub.revoke_endpoint_key(&name, &id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => endpoint_error(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_named_by_the_last_segment_of_its_doors_paths() {
        assert_eq!(endpoint_in("/mcp/e/support"), Some("support"));
        assert_eq!(endpoint_in("/sse/e/support"), Some("support"));
        assert_eq!(endpoint_in("/message/e/support"), Some("support"));
        for none in [
            "/mcp",
            "/mcp/e/",
            "/mcp/e/a/b",
            "/api/e/x",
            "/mcpx/e/a",
            "/sse",
            "/e/a",
        ] {
            assert_eq!(endpoint_in(none), None, "{none}");
        }
    }
}
