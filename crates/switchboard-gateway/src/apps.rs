//! MCP Apps views for the console: a server's `ui://` resource served as a page of its own,
//! sandboxed, under the Content-Security-Policy its metadata asks for.
//!
//! The console asks for a view with `POST /api/apps/views` (`{"server", "uri"}`); the daemon
//! reads the resource at the server, checks that it is an MCP App (`text/html;profile=mcp-app`),
//! builds its policy from `_meta.ui.csp` and keeps it under an unguessable id for a while. The
//! console then frames `GET /apps/view/{id}` in an `<iframe sandbox="allow-scripts">`, and the
//! page's own header says `sandbox allow-scripts` too: the view runs in an opaque origin, cannot
//! touch the console or call the API as it (its requests carry `Origin: null`, which the access
//! guard refuses), and can reach only the domains it declared. The console speaks the MCP Apps
//! postMessage protocol with it (`ui/app.js`).
//!
//! This is the single-origin form of the extension's sandbox: the extension asks web hosts for
//! a proxy frame on a second origin; the opaque origin gives the view the same isolation from
//! the console, and the view cannot tell the difference.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use switchboard_core::sync::lock;

use axum::Json;
use axum::extract::Path;
use axum::extract::rejection::JsonRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_core::ServerId;
use switchboard_upstream::CallContext;

use crate::{ApiError, AppState};

/// The MIME type of an MCP App view.
pub(crate) const VIEW_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// Where views are served; public, since the id is the capability (a frame cannot send an API
/// key).
pub(crate) const VIEW_PATH: &str = "/apps/view/";

/// How long a view stays servable after the console asked for it.
const VIEW_LIFETIME: Duration = Duration::from_secs(600);

/// How many views are kept at most (the oldest go first).
const MOST_VIEWS: usize = 64;

/// A view ready to be framed.
struct View {
    html: String,
    policy: String,
    created: Instant,
}

/// The views the console asked for, by id.
#[derive(Default)]
pub(crate) struct Views {
    views: Mutex<HashMap<String, View>>,
}

impl Views {
    fn keep(&self, view: View) -> String {
        let id = format!(
            "{:016x}{:016x}",
            rand::random::<u64>(),
            rand::random::<u64>()
        );
        let mut views = lock(&self.views);
        views.retain(|_, v| v.created.elapsed() < VIEW_LIFETIME);
        while views.len() >= MOST_VIEWS {
            let Some(oldest) = views
                .iter()
                .min_by_key(|(_, v)| v.created)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            views.remove(&oldest);
        }
        views.insert(id.clone(), view);
        id
    }

    fn get(&self, id: &str) -> Option<(String, String)> {
        let views = lock(&self.views);
        views
            .get(id)
            .filter(|v| v.created.elapsed() < VIEW_LIFETIME)
            .map(|v| (v.html.clone(), v.policy.clone()))
    }
}

/// What `POST /api/apps/views` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ViewRequest {
    server: String,
    uri: String,
}

/// `POST /api/apps/views`: reads the server's view and answers where to frame it
/// (`{"url", "csp", "prefers_border", "permissions"}`). 422 when the resource is not an MCP App
/// view.
pub(crate) async fn create(
    app: AppState,
    payload: Result<Json<ViewRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = payload?;
    let server =
        ServerId::new(&request.server).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    if !request.uri.starts_with("ui://") {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("'{}' is not a ui:// resource", request.uri),
        ));
    }
    let upstream = app.hub.upstream(&server)?;
    let read = upstream
        .read_resource(&request.uri, &CallContext::default())
        .await?;
    let read = serde_json::to_value(read).unwrap_or_default();
    let content = read["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["mimeType"].as_str().is_some_and(is_view_mime_type))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "'{}' is not an MCP App view: none of its contents is {VIEW_MIME_TYPE}",
                    request.uri
                ),
            )
        })?;
    let html = html_of(content).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("'{}' has no HTML text", request.uri),
        )
    })?;
    let ui = content
        .pointer("/_meta/ui")
        .or_else(|| content.pointer("/meta/ui"))
        .cloned()
        .unwrap_or(Value::Null);
    let policy = policy_for(&ui["csp"]);
    let id = app.views.keep(View {
        html,
        policy: policy.clone(),
        created: Instant::now(),
    });
    Ok(Json(json!({
        "url": format!("{VIEW_PATH}{id}"),
        "csp": policy,
        "prefers_border": ui.get("prefersBorder"),
        "permissions": granted(&ui["permissions"], &app.app_permissions),
    }))
    .into_response())
}

/// Of the permissions a view asks for (`_meta.ui.permissions`: `camera`, `microphone`,
/// `geolocation`, `clipboardWrite`), those the operator lets views have
/// (`serve --app-permission`); none otherwise. A server's view does not get a person's camera
/// because it asked: the console frames it with only what this grants.
pub(crate) fn granted(asked: &Value, allowed: &[String]) -> Value {
    let granted: serde_json::Map<String, Value> = asked
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| allowed.iter().any(|a| a == *name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    Value::Object(granted)
}

/// `GET /apps/view/{id}`: the view's page, under its policy and sandboxed.
pub(crate) async fn serve(app: AppState, Path(id): Path<String>) -> Response {
    let Some((html, policy)) = app.views.get(&id) else {
        return (
            StatusCode::NOT_FOUND,
            "no such view (it expired): open the app again\n",
        )
            .into_response();
    };
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_owned()),
            (header::CONTENT_SECURITY_POLICY, policy),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            (header::REFERRER_POLICY, "no-referrer".to_owned()),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        html,
    )
        .into_response()
}

fn is_view_mime_type(mime: &str) -> bool {
    let compact: String = mime.chars().filter(|c| !c.is_whitespace()).collect();
    compact.eq_ignore_ascii_case(VIEW_MIME_TYPE)
}

/// The HTML of a contents item: its text, or its base64 blob decoded as UTF-8.
fn html_of(content: &Value) -> Option<String> {
    if let Some(text) = content["text"].as_str() {
        return Some(text.to_owned());
    }
    use base64::Engine;
    let blob = content["blob"].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The sources a list of declared domains allows: those that are plain sources (no quotes,
/// separators or spaces, which could smuggle in directives or keywords) are kept.
fn sources(declared: &Value) -> Vec<&str> {
    declared
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|source| {
            !source.is_empty()
                && !source
                    .chars()
                    .any(|c| matches!(c, ';' | ',' | '\'' | '"' | '\\') || c.is_whitespace())
        })
        .collect()
}

/// The view's Content-Security-Policy, from its `_meta.ui.csp` (the extension's recipe, made
/// stricter where it allows: nothing of the daemon's own origin, which the view has no use for,
/// and no `<base>` unless declared), with `sandbox allow-scripts` so the page runs in an opaque
/// origin even when opened on its own.
pub(crate) fn policy_for(csp: &Value) -> String {
    let with = |base: &str, declared: &[&str]| {
        let mut directive = base.to_owned();
        for source in declared {
            directive.push(' ');
            directive.push_str(source);
        }
        directive
    };
    let or_none = |declared: &[&str]| match declared.is_empty() {
        true => "'none'".to_owned(),
        false => declared.join(" "),
    };
    let resources = sources(&csp["resourceDomains"]);
    let connect = sources(&csp["connectDomains"]);
    let frames = sources(&csp["frameDomains"]);
    let base = sources(&csp["baseUriDomains"]);
    [
        "sandbox allow-scripts allow-forms".to_owned(),
        "default-src 'none'".to_owned(),
        with("script-src 'unsafe-inline'", &resources),
        with("style-src 'unsafe-inline'", &resources),
        with("img-src data:", &resources),
        with("media-src data:", &resources),
        format!("font-src {}", or_none(&resources)),
        format!("connect-src {}", or_none(&connect)),
        format!("frame-src {}", or_none(&frames)),
        "object-src 'none'".to_owned(),
        format!("base-uri {}", or_none(&base)),
        "form-action 'none'".to_owned(),
    ]
    .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_gets_only_the_permissions_the_operator_allows() {
        let asked = json!({"camera": {}, "microphone": {}, "clipboardWrite": {}});
        assert_eq!(granted(&asked, &[]), json!({}), "nothing by default");
        assert_eq!(
            granted(&asked, &["clipboardWrite".to_owned()]),
            json!({"clipboardWrite": {}})
        );
        assert_eq!(granted(&Value::Null, &["camera".to_owned()]), json!({}));
    }

    #[test]
    fn a_view_without_metadata_gets_the_strict_default() {
        let policy = policy_for(&Value::Null);
        assert_eq!(
            policy,
            "sandbox allow-scripts allow-forms; default-src 'none'; script-src 'unsafe-inline'; \
             style-src 'unsafe-inline'; img-src data:; media-src data:; font-src 'none'; \
             connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'none'; \
             form-action 'none'"
        );
    }

    #[test]
    fn declared_domains_open_their_directives_and_nothing_else() {
        let policy = policy_for(&json!({
            "connectDomains": ["https://api.example.com", "wss://live.example.com"],
            "resourceDomains": ["https://*.cdn.example"],
            "frameDomains": ["https://www.youtube.com"],
        }));
        assert!(policy.contains("connect-src https://api.example.com wss://live.example.com;"));
        assert!(policy.contains("script-src 'unsafe-inline' https://*.cdn.example;"));
        assert!(policy.contains("font-src https://*.cdn.example;"));
        assert!(policy.contains("frame-src https://www.youtube.com;"));
        assert!(policy.contains("base-uri 'none'"));
    }

    #[test]
    fn hostile_domains_cannot_add_directives_or_keywords() {
        let policy = policy_for(&json!({
            "connectDomains": ["https://ok.example", "x; script-src *", "'unsafe-eval'", "a b", ""],
            "resourceDomains": "not a list",
        }));
        assert!(
            policy.contains("connect-src https://ok.example;"),
            "{policy}"
        );
        assert!(!policy.contains("unsafe-eval") && !policy.contains("script-src *"));
        assert!(policy.contains("font-src 'none'"));
    }

    #[test]
    fn the_view_mime_type_is_read_as_written_by_servers() {
        assert!(is_view_mime_type("text/html;profile=mcp-app"));
        assert!(is_view_mime_type("text/html; profile=mcp-app"));
        assert!(!is_view_mime_type("text/html"));
    }
}
