//! The web console at `/`: a page, a script and a style sheet (in `ui/`), compiled into the
//! binary so nothing is needed at run time. The page talks to the admin API only (docs/api.md).
//!
//! The files are public on every listener: they hold no data, and on a listener with API keys
//! the page asks for one before it reads anything. Their Content-Security-Policy allows only
//! this origin's own script, style, requests and app views, and no framing of the console.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../ui/index.html");
const SCRIPT: &str = include_str!("../ui/app.js");
const STYLE: &str = include_str!("../ui/app.css");

/// The console's own paths, which need no API key.
pub(crate) const PATHS: [&str; 3] = ["/", "/ui/app.js", "/ui/app.css"];

/// What the console may load and do: its own files and API, and frame its own MCP Apps views
/// (`/apps/view/...`, sandboxed by their own policy), and show the images and audio tool results
/// carry (`data:` URLs), nothing else.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; media-src 'self' data:; frame-src 'self'; \
     form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            // A new daemon version's files replace the old at once.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /`.
pub(crate) async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX)
}

/// `GET /ui/app.js`.
pub(crate) async fn script() -> Response {
    file("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /ui/app.css`.
pub(crate) async fn style() -> Response {
    file("text/css; charset=utf-8", STYLE)
}
