//! Which web pages may use the daemon: its own, and the browser apps an operator names.
//!
//! A page in the user's browser can send requests to any address, loopback included, and some
//! of them need no permission from the server they reach: a `text/plain` POST, a `GET` for an
//! image, a WebSocket, an `EventSource`. A daemon that ran what such a request asked would let any
//! web page (or any local dev server) drive it, the class of hole of the MCP Inspector's
//! CVE-2025-49596. So every request a browser marks as coming from a page is judged here before
//! anything else:
//!
//! - a page of the daemon's own origin passes: `http(s)://` and the `Host` the request was sent
//!   to (the console, reached by whatever name the person typed), or `--public-url`'s origin
//!   (behind a load balancer);
//! - a page of an origin named with `--cors-origin` passes on the routes browser apps use
//!   ([`CORS_PATHS`]), with a credential (an API key or token; it is checked as any other), a body
//!   only as `application/json`, and the CORS headers its browser needs;
//! - any other page is refused (403), whatever its port: `Origin: http://localhost:3000` is
//!   another origin than `http://127.0.0.1:8750`;
//! - a request without `Origin` that the browser marks as sent from another site
//!   (`Sec-Fetch-Site`, an `<img>` or `<script>` load), other than a navigation, is refused too.
//!
//! Requests without these headers come from programs, not pages (a browser always sends `Origin`
//! with a `POST` and on every CORS request): they are left to the credential checks.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The routes a browser app of a `--cors-origin` may use: the MCP endpoint, and reading and
/// searching the tools.
pub const CORS_PATHS: [&str; 3] = ["/mcp", "/api/tools", "/api/tools/search"];

/// Request headers a browser app may send (answered to its preflight).
const ALLOWED_HEADERS: &str = "authorization, content-type, accept, last-event-id, \
     mcp-session-id, mcp-protocol-version, mcp-method, mcp-name, x-switchboard-user, \
     x-switchboard-thread, x-switchboard-app, x-switchboard-tools";
/// Response headers a browser app may read.
const EXPOSED_HEADERS: &str = "mcp-session-id, mcp-protocol-version, www-authenticate";
/// How long a browser may keep a preflight's answer.
const PREFLIGHT_MAX_AGE: &str = "600";

/// Why an origin cannot be named with `--cors-origin`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// Not `scheme://host[:port]`.
    #[error(
        "'{0}' is not an origin: give the scheme, host and port only, e.g. https://app.example.com or http://localhost:5173"
    )]
    NotAnOrigin(String),
}

/// A web origin, `scheme://host[:port]`, as browsers write it in `Origin` (lowercase, without a
/// default port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebOrigin(String);

impl WebOrigin {
    /// Reads an origin; paths, queries, credentials and other schemes than http(s) are refused.
    pub fn parse(text: &str) -> Result<Self, OriginError> {
        let refuse = || OriginError::NotAnOrigin(text.to_owned());
        let url = url::Url::parse(text).map_err(|_| refuse())?;
        let bare = matches!(url.path(), "" | "/")
            && url.query().is_none()
            && url.fragment().is_none()
            && url.username().is_empty()
            && url.password().is_none();
        if !matches!(url.scheme(), "http" | "https") || !bare || url.host().is_none() {
            return Err(refuse());
        }
        Ok(Self(url.origin().ascii_serialization()))
    }

    /// The origin as `Origin` carries it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for WebOrigin {
    type Err = OriginError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// The pages that may use this daemon besides its own.
#[derive(Debug, Clone, Default)]
pub struct BrowserOrigins {
    /// `--public-url`'s origin: the address browsers reach the daemon at.
    public: Option<WebOrigin>,
    /// `--cors-origin`s.
    cors: Vec<WebOrigin>,
}

/// What a request is, seen from the browser that may have sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sender {
    /// A program, the daemon's own page, or a person's navigation.
    Trusted,
    /// A browser app of an allowed origin (its answer needs CORS headers naming it).
    CorsApp(HeaderValue),
}

/// Why a browser's request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OriginRefusal {
    /// A page of an origin that is neither the daemon's nor allowed.
    Foreign,
    /// An allowed origin on a route browser apps may not use.
    NotForBrowserApps,
    /// An allowed origin without a credential.
    NoCredential,
    /// An allowed origin sending a body that is not JSON.
    NotJson,
}

impl IntoResponse for OriginRefusal {
    fn into_response(self) -> Response {
        let message = match self {
            Self::Foreign => {
                "forbidden: this page's origin may not use Switchboard (only Switchboard's own pages and the origins named with --cors-origin)\n"
            }
            Self::NotForBrowserApps => {
                "forbidden: browser apps of a --cors-origin may use /mcp, /api/tools and /api/tools/search only\n"
            }
            Self::NoCredential => {
                "forbidden: a browser app must present an API key or token (Authorization: Bearer ...)\n"
            }
            Self::NotJson => {
                "forbidden: a browser app's request body must be Content-Type: application/json\n"
            }
        };
        (StatusCode::FORBIDDEN, message).into_response()
    }
}

impl BrowserOrigins {
    /// Pages of `public`'s origin (the daemon's public URL) and of `cors` may use the daemon.
    pub fn new(public: Option<&url::Url>, cors: Vec<WebOrigin>) -> Self {
        let public = public
            .map(|url| url.origin().ascii_serialization())
            .filter(|origin| origin != "null")
            .map(WebOrigin);
        Self { public, cors }
    }

    /// Whether any browser app is allowed.
    pub fn allows_browser_apps(&self) -> bool {
        !self.cors.is_empty()
    }

    /// Judges `request`: who sent it, or why it may not pass.
    pub(crate) fn judge(&self, request: &Request) -> Result<Sender, OriginRefusal> {
        let headers = request.headers();
        let Some(origin) = headers.get(header::ORIGIN) else {
            return match sent_from_another_site(headers) {
                true => Err(OriginRefusal::Foreign),
                false => Ok(Sender::Trusted),
            };
        };
        let Ok(text) = origin.to_str() else {
            return Err(OriginRefusal::Foreign);
        };
        if self.is_own(text, headers) {
            return Ok(Sender::Trusted);
        }
        if !self.cors.iter().any(|allowed| allowed.as_str() == text) {
            return Err(OriginRefusal::Foreign);
        }
        if !CORS_PATHS.contains(&request.uri().path()) {
            return Err(OriginRefusal::NotForBrowserApps);
        }
        if request.method() == Method::OPTIONS {
            return Ok(Sender::CorsApp(origin.clone()));
        }
        if crate::presented_key(headers).is_none() {
            return Err(OriginRefusal::NoCredential);
        }
        if carries_body(request) && !is_json(headers) {
            return Err(OriginRefusal::NotJson);
        }
        Ok(Sender::CorsApp(origin.clone()))
    }

    /// Whether `origin` is the daemon's own: the host it was reached at (`Host`), or its
    /// public URL's.
    fn is_own(&self, origin: &str, headers: &HeaderMap) -> bool {
        if self
            .public
            .as_ref()
            .is_some_and(|own| own.as_str() == origin)
        {
            return true;
        }
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
    }
}

/// The answer to an allowed browser app's preflight.
pub(crate) fn preflight(origin: HeaderValue) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOWED_HEADERS),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(PREFLIGHT_MAX_AGE),
    );
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    response
}

/// Adds to an allowed browser app's answer what its browser needs to hand it over.
pub(crate) fn grant(response: &mut Response, origin: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED_HEADERS),
    );
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// Whether the browser says a page of another site or origin sent this (`Sec-Fetch-Site`), other
/// than by a navigation (a link followed, a redirect from an authorization server).
fn sent_from_another_site(headers: &HeaderMap) -> bool {
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none");
    let mode = headers
        .get("sec-fetch-mode")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    !matches!(site, "same-origin" | "none") && mode != "navigate"
}

fn carries_body(request: &Request) -> bool {
    let length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match length {
        Some(length) => length > 0,
        None => {
            request.headers().contains_key(header::TRANSFER_ENCODING)
                || !matches!(
                    *request.method(),
                    Method::GET | Method::HEAD | Method::OPTIONS | Method::DELETE
                )
        }
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, path: &str, pairs: &[(&'static str, &str)]) -> Request {
        let mut builder = axum::http::Request::builder().method(method).uri(path);
        for (name, value) in pairs {
            builder = builder.header(*name, *value);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    fn origins() -> BrowserOrigins {
        BrowserOrigins::new(
            Some(&url::Url::parse("https://switchboard.example.com/base").unwrap()),
            vec![WebOrigin::parse("http://localhost:5173").unwrap()],
        )
    }

    const HOST: (&str, &str) = ("host", "127.0.0.1:8750");

    #[test]
    fn only_the_daemons_own_origin_passes_not_another_loopback_port() {
        let origins = origins();
        for own in [
            "http://127.0.0.1:8750",
            "https://127.0.0.1:8750",
            "https://switchboard.example.com",
        ] {
            let judged = origins.judge(&request("POST", "/api/servers", &[HOST, ("origin", own)]));
            assert_eq!(judged, Ok(Sender::Trusted), "{own}");
        }
        for foreign in [
            "http://localhost:3000",
            "http://127.0.0.1:3000",
            "http://localhost:8750",
            "http://127.0.0.1:87500",
            "null",
            "https://evil.example",
            "http://127.0.0.1:8750.evil.example",
        ] {
            let judged = origins.judge(&request(
                "POST",
                "/api/servers/import",
                &[HOST, ("origin", foreign), ("content-type", "text/plain")],
            ));
            assert_eq!(judged, Err(OriginRefusal::Foreign), "{foreign}");
        }
    }

    #[test]
    fn a_page_load_from_another_site_without_origin_is_refused_but_navigations_pass() {
        let origins = origins();
        let image = request(
            "GET",
            "/api/events",
            &[
                HOST,
                ("sec-fetch-site", "same-site"),
                ("sec-fetch-mode", "no-cors"),
            ],
        );
        assert_eq!(origins.judge(&image), Err(OriginRefusal::Foreign));
        let redirect = request(
            "GET",
            "/oauth/callback",
            &[
                HOST,
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-mode", "navigate"),
            ],
        );
        assert_eq!(origins.judge(&redirect), Ok(Sender::Trusted));
        let program = request("POST", "/api/servers", &[HOST]);
        assert_eq!(origins.judge(&program), Ok(Sender::Trusted));
    }

    #[test]
    fn an_allowed_browser_app_needs_a_credential_json_and_its_routes() {
        let origins = origins();
        let app = ("origin", "http://localhost:5173");
        let key = ("authorization", "Bearer k3y-0123456789abcdef");
        let json = ("content-type", "application/json");
        let granted = Sender::CorsApp(HeaderValue::from_static("http://localhost:5173"));
        assert_eq!(
            origins.judge(&request("OPTIONS", "/mcp", &[HOST, app])),
            Ok(granted.clone()),
            "a preflight carries no credential"
        );
        assert_eq!(
            origins.judge(&request(
                "POST",
                "/mcp",
                &[HOST, app, key, json, ("content-length", "2")]
            )),
            Ok(granted.clone())
        );
        assert_eq!(
            origins.judge(&request("GET", "/api/tools/search?q=x", &[HOST, app, key])),
            Ok(granted)
        );
        assert_eq!(
            origins.judge(&request("POST", "/mcp", &[HOST, app, json])),
            Err(OriginRefusal::NoCredential)
        );
        assert_eq!(
            origins.judge(&request(
                "POST",
                "/mcp",
                &[
                    HOST,
                    app,
                    key,
                    ("content-type", "text/plain"),
                    ("content-length", "2")
                ]
            )),
            Err(OriginRefusal::NotJson)
        );
        for path in [
            "/api/servers",
            "/api/servers/import",
            "/api/events/ws",
            "/sse",
        ] {
            assert_eq!(
                origins.judge(&request("POST", path, &[HOST, app, key, json])),
                Err(OriginRefusal::NotForBrowserApps),
                "{path}"
            );
        }
    }

    #[test]
    fn cors_origins_are_origins_only() {
        assert_eq!(
            WebOrigin::parse("HTTPS://App.Example.com:443")
                .unwrap()
                .as_str(),
            "https://app.example.com"
        );
        assert_eq!(
            WebOrigin::parse("http://localhost:5173/").unwrap().as_str(),
            "http://localhost:5173"
        );
        for bad in [
            "app.example.com",
            "https://app.example.com/path",
            "https://user@app.example.com",
            "file:///tmp/x",
            "null",
            "*",
        ] {
            assert!(WebOrigin::parse(bad).is_err(), "{bad}");
        }
    }
}
