//! A status-aware HTTP client for rmcp's Streamable HTTP transport.
//!
//! rmcp's own reqwest client folds most non-success answers into an error string, which would make
//! era detection depend on matching text. This client implements rmcp's `StreamableHttpClient`
//! trait itself so that every failure keeps its HTTP status ([`HttpFailure`]), which the probe in
//! [`crate::connect`] reads to choose between the 2026-07-28, Streamable HTTP and HTTP+SSE
//! transports. It also applies the server's static headers to every request and bounds the size of
//! every body it reads.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use switchboard_core::sync::lock;

use bytes::Bytes;
use futures::{StreamExt, stream::BoxStream};
use http::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse,
};
use sse_stream::Sse;
use switchboard_oauth::ServerAuth;

use crate::transport::http_failure::{HttpFailure, excerpt};
use crate::transport::plain_http::HttpClients;
use crate::transport::sse::bounded_sse;

const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_ID_HEADER: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";
/// What every request accepts: a JSON body or an SSE stream.
const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// Largest JSON response body accepted.
pub(crate) const MAX_JSON_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Largest error body read (only an excerpt is kept).
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// How long a 429 or 503 answer asks the client to wait (`Retry-After`: seconds, or an HTTP
/// date); `None` for other statuses and for a value that is neither.
pub(crate) fn retry_after(response: &reqwest::Response) -> Option<std::time::Duration> {
    if !matches!(response.status().as_u16(), 429 | 503) {
        return None;
    }
    let value = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    match value.parse::<u64>() {
        Ok(seconds) => Some(std::time::Duration::from_secs(seconds)),
        Err(_) => httpdate::parse_http_date(value).ok().map(|when| {
            when.duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
        }),
    }
}

/// A configured header that HTTP cannot carry.
#[derive(Debug, thiserror::Error)]
#[error("header '{0}' is not a valid HTTP header (bad name or value)")]
pub struct InvalidHeader(pub String);

/// Builds the static headers of a server; values are marked sensitive so that HTTP libraries
/// keep them out of debug output.
pub(crate) fn header_map(
    headers: &[switchboard_core::NamedValue],
) -> Result<HeaderMap, InvalidHeader> {
    let mut map = HeaderMap::new();
    for header in headers {
        let bad = || InvalidHeader(header.name.clone());
        let name = HeaderName::from_bytes(header.name.as_bytes()).map_err(|_| bad())?;
        let mut value = HeaderValue::from_str(&header.value).map_err(|_| bad())?;
        value.set_sensitive(true);
        map.append(name, value);
    }
    Ok(map)
}

type HttpResult<T> = Result<T, StreamableHttpError<HttpFailure>>;

/// The client: a shared connection pool, the server's static headers, and its OAuth state.
#[derive(Clone, Debug)]
pub(crate) struct StatusAwareHttpClient {
    http: HttpClients,
    /// The plain connections to the server that this client holds, with every other client
    /// of its origin ([`HttpClients::held_connections`]).
    connections: crate::HeldConnections,
    static_headers: Arc<HeaderMap>,
    auth: Option<Arc<ServerAuth>>,
    standalone: Arc<StandaloneStream>,
    /// The session's calls, for tagging messages on their response streams.
    in_flight: crate::input_requests::InFlight,
    /// The session rmcp's client is in, as its requests name it.
    session: Arc<std::sync::Mutex<Option<SessionInUse>>>,
    /// Numbers rmcp's requests in the order they are sent, so that a slow request in an old
    /// session cannot record that session over a newer one.
    sent: Arc<std::sync::atomic::AtomicU64>,
    /// Whether a session was opened before: a later `initialize` is a new session after the
    /// server forgot the old one, which is told on `events`.
    opened_before: Arc<std::sync::atomic::AtomicBool>,
    events: Option<tokio::sync::mpsc::UnboundedSender<crate::UpstreamEvent>>,
    /// Where copies of the messages go while someone watches ([`crate::tap`]).
    tap: Option<Arc<dyn crate::MessageTap>>,
}

/// A session as rmcp's client uses it: its id and the protocol version header its requests
/// carry. Calls sent beside rmcp's client ([`crate::direct`]) go to the same session.
#[derive(Debug, Clone)]
pub(crate) struct SessionInUse {
    /// The `Mcp-Session-Id`.
    pub(crate) id: Arc<str>,
    /// The `MCP-Protocol-Version` header, when rmcp sends one.
    pub(crate) version: Option<HeaderValue>,
    /// The number of the request that recorded it (see `StatusAwareHttpClient::sent`).
    sent: u64,
}

/// Attempts of one request: the first, a refresh or sign-in, a DPoP nonce, and the step-ups.
const MAX_AUTH_ATTEMPTS: u32 = 3 + switchboard_oauth::MAX_STEP_UPS;

/// Whether the server-initiated channel (the standalone GET stream of a session) is ready.
///
/// Servers send unsolicited requests (elicitation, sampling, roots) on that stream and drop them
/// when it is not open yet, so a session is only fully usable once the first GET has been
/// answered, one way or the other.
#[derive(Debug)]
struct StandaloneStream {
    session_assigned: std::sync::atomic::AtomicBool,
    first_get_settled: tokio::sync::watch::Sender<bool>,
}

impl StatusAwareHttpClient {
    /// A client of the server at `url` that adds `static_headers` to every request.
    pub(crate) fn new(http: HttpClients, url: &url::Url, static_headers: HeaderMap) -> Self {
        Self {
            connections: http.held_connections(url),
            http,
            static_headers: Arc::new(static_headers),
            auth: None,
            standalone: Arc::new(StandaloneStream {
                session_assigned: std::sync::atomic::AtomicBool::new(false),
                first_get_settled: tokio::sync::watch::Sender::new(false),
            }),
            in_flight: crate::input_requests::InFlight::default(),
            session: Arc::default(),
            sent: Arc::default(),
            opened_before: Arc::default(),
            events: None,
            tap: None,
        }
    }

    /// Copies the messages it sends and receives to `tap` while it watches.
    pub(crate) fn with_tap(mut self, tap: Option<Arc<dyn crate::MessageTap>>) -> Self {
        self.tap = tap;
        self
    }

    /// Where copies of its messages go.
    pub(crate) fn tap(&self) -> Option<Arc<dyn crate::MessageTap>> {
        self.tap.clone()
    }

    /// The session rmcp's client last sent a request in (other than `initialize`), unless the
    /// server has since said it expired.
    pub(crate) fn session_in_use(&self) -> Option<SessionInUse> {
        self.lock_session().clone()
    }

    /// Forgets `id` as the session in use (the server answered 404 for it).
    pub(crate) fn session_expired(&self, id: &str) {
        let mut session = self.lock_session();
        if session.as_ref().is_some_and(|s| &*s.id == id) {
            *session = None;
        }
    }

    fn lock_session(&self) -> std::sync::MutexGuard<'_, Option<SessionInUse>> {
        lock(&self.session)
    }

    /// The session's calls with a responder.
    pub(crate) fn in_flight(&self) -> &crate::input_requests::InFlight {
        &self.in_flight
    }

    /// Tells `events` when a session is opened again after the server forgot the first one.
    pub(crate) fn with_events(
        mut self,
        events: tokio::sync::mpsc::UnboundedSender<crate::UpstreamEvent>,
    ) -> Self {
        self.events = Some(events);
        self
    }

    /// Tags the messages on a request's response stream for the calls of `in_flight`.
    pub(crate) fn with_in_flight(mut self, in_flight: crate::input_requests::InFlight) -> Self {
        self.in_flight = in_flight;
        self
    }

    /// Signs requests with `auth`'s tokens and lets it handle 401 and 403 answers.
    pub(crate) fn with_auth(mut self, auth: Option<Arc<ServerAuth>>) -> Self {
        self.auth = auth;
        self
    }

    /// Sends the request `build` makes, with the server's credentials when it has OAuth state.
    /// A 401, or a 403 asking for more scope, goes to the OAuth layer, which refreshes, signs in
    /// or steps up as it can; the request is then sent again. Whatever answer is left (including
    /// a final 401) is returned for the caller to interpret.
    ///
    /// Without OAuth state the request is built here and the future returned only sends it;
    /// with it, the future (its loop, the OAuth layer's futures) is boxed. Either way the
    /// future of every relayed call is not made larger by those of a sign-in
    /// (`docs/benchmarks.md`).
    pub(crate) fn send_authorized<'a>(
        &'a self,
        method: &'a reqwest::Method,
        url: &'a url::Url,
        build: impl Fn(HeaderMap) -> reqwest::RequestBuilder + 'a,
    ) -> impl Future<Output = Result<reqwest::Response, HttpFailure>> + 'a {
        use futures::future::Either;
        let Some(auth) = &self.auth else {
            return Either::Left(self.send(build(HeaderMap::new())));
        };
        Either::Right(Box::pin(async move {
            let mut attempt = 0;
            loop {
                attempt += 1;
                let sent = auth
                    .request_headers(method.as_str(), url)
                    .await
                    .map_err(HttpFailure::Auth)?;
                let headers = sent.as_ref().map(|s| s.headers.clone()).unwrap_or_default();
                let response = self.send(build(headers)).await?;
                let status = response.status();
                let refused = status == StatusCode::UNAUTHORIZED
                    || (status == StatusCode::FORBIDDEN
                        && switchboard_oauth::BearerChallenge::from_headers(response.headers())
                            .is_some_and(|c| c.is_insufficient_scope()));
                if !refused || attempt >= MAX_AUTH_ATTEMPTS {
                    auth.observe_response(status, response.headers());
                    return Ok(response);
                }
                auth.on_refused(status, response.headers(), sent.as_ref())
                    .await
                    .map_err(HttpFailure::Auth)?;
            }
        }))
    }

    /// Sends a request built with [`Self::http`]'s builder, on a connection this client holds
    /// or through reqwest's pool ([`HttpClients::execute`]). Built here, so that the future
    /// returned holds only the sending.
    fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> impl Future<Output = Result<reqwest::Response, HttpFailure>> + Send + '_ {
        use futures::future::Either;
        match request.build() {
            Ok(request) => Either::Left(self.http.execute(request, &self.connections)),
            Err(error) => Either::Right(std::future::ready(Err(error.into()))),
        }
    }

    /// Waits, at most `limit`, until the first standalone GET stream of a session has been
    /// opened or refused. Returns at once when the server assigned no session (no GET stream is
    /// opened then).
    pub(crate) async fn standalone_stream_settled(&self, limit: std::time::Duration) {
        if !self
            .standalone
            .session_assigned
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let mut settled = self.standalone.first_get_settled.subscribe();
        let _ = tokio::time::timeout(limit, settled.wait_for(|done| *done)).await;
    }

    /// The reqwest client requests are built with ([`Self::send_authorized`] sends them through
    /// the pool they belong to).
    pub(crate) fn http(&self) -> &reqwest::Client {
        self.http.reqwest()
    }

    /// The static headers.
    pub(crate) fn static_headers(&self) -> &HeaderMap {
        &self.static_headers
    }

    /// A request to `url` with the headers every request to the server carries, in this order:
    /// the static ones, `Accept`, rmcp's token, the caller's own, the credentials (which
    /// replace any of the same name) and the session. Made in place, as reqwest's builder would
    /// make it: the builder moves the whole request at each header and converts each name
    /// again, on every call relayed. A token or session id that is no header value makes a
    /// builder that fails to build, as the builder would.
    fn request(
        &self,
        method: reqwest::Method,
        url: &url::Url,
        session_id: Option<&str>,
        auth_token: Option<&str>,
        custom_headers: &HashMap<HeaderName, HeaderValue>,
        credentials: HeaderMap,
    ) -> reqwest::RequestBuilder {
        let refused = |name: HeaderName, value: String| {
            self.http()
                .request(method.clone(), url.clone())
                .header(name, value)
        };
        let mut request = reqwest::Request::new(method.clone(), url.clone());
        // Room for every header at once: a copy of the static ones would grow (and move) as
        // the rest are added.
        let room = self.static_headers.len() + custom_headers.len() + credentials.len() + 3;
        let headers = request.headers_mut();
        *headers = HeaderMap::with_capacity(room);
        for (name, value) in self.static_headers.iter() {
            headers.append(name.clone(), value.clone());
        }
        headers.append(ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
        if let Some(token) = auth_token {
            let bearer = format!("Bearer {token}");
            let Ok(mut value) = HeaderValue::from_str(&bearer) else {
                return refused(http::header::AUTHORIZATION, bearer);
            };
            value.set_sensitive(true);
            headers.append(http::header::AUTHORIZATION, value);
        }
        for (name, value) in custom_headers {
            headers.append(name.clone(), value.clone());
        }
        replace_headers(headers, credentials);
        if let Some(session_id) = session_id {
            let Ok(value) = HeaderValue::from_str(session_id) else {
                return refused(
                    HeaderName::from_static(SESSION_HEADER),
                    session_id.to_owned(),
                );
            };
            headers.append(SESSION_HEADER, value);
        }
        reqwest::RequestBuilder::from_parts(self.http().clone(), request)
    }
}

/// Puts `headers` into `into`, each name's values in place of the ones it had: the rule of
/// reqwest's `RequestBuilder::headers`, which is not public on its own.
fn replace_headers(into: &mut HeaderMap, headers: HeaderMap) {
    let mut last: Option<http::header::OccupiedEntry<'_, HeaderValue>> = None;
    for (name, value) in headers {
        match (name, &mut last) {
            (Some(name), _) => {
                last = Some(match into.entry(name) {
                    http::header::Entry::Occupied(mut entry) => {
                        entry.insert(value);
                        entry
                    }
                    http::header::Entry::Vacant(entry) => entry.insert_entry(value),
                });
            }
            // More values of the name before: a header map yields a name with its first value.
            (None, Some(entry)) => entry.append(value),
            (None, None) => {}
        }
    }
}

fn failure(error: HttpFailure) -> StreamableHttpError<HttpFailure> {
    StreamableHttpError::Client(error)
}

/// The server URL rmcp hands over as text, parsed once per request.
fn parse_url(uri: &str) -> HttpResult<url::Url> {
    url::Url::parse(uri).map_err(|e| {
        failure(HttpFailure::Auth(switchboard_oauth::OAuthError::Config(
            format!("the server URL is invalid: {e}"),
        )))
    })
}

/// 401/403 carrying a Bearer challenge become rmcp's auth errors (reached only when the OAuth
/// layer could not resolve them, or there is none).
fn auth_challenge(response: &reqwest::Response) -> Option<StreamableHttpError<HttpFailure>> {
    let header = response
        .headers()
        .get(WWW_AUTHENTICATE)?
        .to_str()
        .ok()?
        .to_owned();
    match response.status() {
        StatusCode::UNAUTHORIZED => Some(StreamableHttpError::AuthRequired(
            AuthRequiredError::new(header),
        )),
        StatusCode::FORBIDDEN => {
            let scope = switchboard_oauth::BearerChallenge::from_headers(response.headers())
                .and_then(|c| c.scope);
            Some(StreamableHttpError::InsufficientScope(
                InsufficientScopeError::new(header, scope),
            ))
        }
        _ => None,
    }
}

async fn read_bounded(response: reqwest::Response, max: usize) -> HttpResult<Bytes> {
    if response
        .content_length()
        .is_some_and(|len| len > max as u64)
    {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| failure(e.into()))?;
        if body.len() + chunk.len() > max {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.into())
}

fn content_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
}

/// For a redirect, where it points, said for the user: Switchboard follows no redirects (an MCP
/// endpoint that moved is a configuration to fix, and following could carry credentials
/// elsewhere).
fn redirect_target(response: &reqwest::Response) -> Option<String> {
    if !response.status().is_redirection() {
        return None;
    }
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|value| excerpt(value.as_bytes()));
    Some(match location {
        Some(location) => format!(
            "it redirects to {location}; Switchboard follows no redirects: if the \
             server moved, give it that URL"
        ),
        None => "a redirect without a Location".to_owned(),
    })
}

/// The `MCP-Protocol-Version` header among rmcp's per-request headers. Looked up by
/// `HeaderName`: a `&str` key hashes differently from a header name and misses the entry at
/// random (then calls beside rmcp went without the header, and servers that read it, such as the
/// TypeScript SDK's, took them for 2025-03-26 ones: no priming event, nothing to resume).
fn protocol_version_header(headers: &HashMap<HeaderName, HeaderValue>) -> Option<HeaderValue> {
    headers
        .get(&HeaderName::from_static("mcp-protocol-version"))
        .cloned()
}

/// Whether a refusal of a request sent in a session says the server no longer knows the session
/// besides the spec's 404 (answered before the body is read): the 400 "Bad Request: No valid
/// session ID provided" that servers built on the TypeScript SDK's examples (server-everything
/// among them) answer after a restart. Either way the server ran nothing, so the request may be
/// sent again in a new session (rmcp's worker does that once).
fn forgot_session(status: StatusCode, body: &[u8]) -> bool {
    const BODY_PREFIX_CHECKED: usize = 1024;
    status == StatusCode::BAD_REQUEST
        && String::from_utf8_lossy(&body[..body.len().min(BODY_PREFIX_CHECKED)])
            .to_ascii_lowercase()
            .contains("session")
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Request(request)
            if matches!(request.request, rmcp::model::ClientRequest::InitializeRequest(_))
    )
}

fn expects_no_reply(message: &ClientJsonRpcMessage) -> bool {
    !matches!(message, JsonRpcMessage::Request(_))
}

impl StreamableHttpClient for StatusAwareHttpClient {
    type Error = HttpFailure;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            crate::transport::sse::MAX_SSE_EVENT_BYTES,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        // The session is in use once the server took a request in it (rmcp re-initialising a
        // session sends `notifications/initialized` first, so no call goes before it).
        let order = self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let initializing = is_initialize(&message);
        let in_use = session_id
            .clone()
            .filter(|_| !initializing)
            .map(|id| SessionInUse {
                id,
                version: protocol_version_header(&custom_headers),
                sent: order,
            });
        let sent = self
            .post(
                &parse_url(&uri)?,
                message,
                session_id.clone(),
                auth_token,
                custom_headers,
                max_sse_event_size,
                true,
            )
            .await;
        if initializing
            && sent.is_ok()
            && self
                .opened_before
                .swap(true, std::sync::atomic::Ordering::SeqCst)
            && let Some(events) = &self.events
        {
            let _ = events.send(crate::UpstreamEvent::SessionRestarted);
        }
        match (&sent, in_use) {
            (Ok(_), Some(in_use)) => {
                let mut session = self.lock_session();
                if session.as_ref().is_none_or(|s| s.sent < in_use.sent) {
                    *session = Some(in_use);
                }
            }
            (Err(StreamableHttpError::SessionExpired), Some(in_use)) => {
                self.session_expired(&in_use.id)
            }
            _ => {}
        }
        sent
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        let method = reqwest::Method::DELETE;
        let url = parse_url(&uri)?;
        let response = self
            .send_authorized(&method, &url, |credentials| {
                self.request(
                    method.clone(),
                    &url,
                    Some(&session_id),
                    auth_token.as_deref(),
                    &custom_headers,
                    credentials,
                )
            })
            .await
            .map_err(failure)?;
        let status = response.status();
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            Ok(())
        } else {
            Err(failure(HttpFailure::Status {
                status: status.as_u16(),
                excerpt: String::new(),
                retry_after: retry_after(&response),
            }))
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_token,
            custom_headers,
            crate::transport::sse::MAX_SSE_EVENT_BYTES,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let resuming = last_event_id.is_some();
        let outcome = self
            .open_event_stream(
                uri,
                session_id,
                last_event_id,
                auth_token,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        if !resuming {
            self.standalone.first_get_settled.send_replace(true);
        }
        outcome
    }
}

impl StatusAwareHttpClient {
    /// POSTs `message` to `url`: the body of rmcp's `post_message`, for callers that hold the
    /// URL already parsed. With `tag`, messages on a request's response stream are tagged
    /// with its id for the handler (see [`crate::input_requests`]); callers that relay them as they
    /// came pass `false`.
    #[expect(
        clippy::too_many_arguments,
        reason = "rmcp's post_message with the parsed URL and the tagging choice"
    )]
    #[expect(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps each argument twice in its future (rust-lang/rust#62958), and this one is part of every relayed call's (docs/benchmarks.md)"
    )]
    pub(crate) fn post<'a>(
        &'a self,
        url: &'a url::Url,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        mut custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
        tag: bool,
    ) -> impl Future<Output = HttpResult<StreamableHttpPostResponse>> + 'a {
        async move {
            crate::tap::copy(self.tap.as_ref(), crate::tap::Direction::Sent, &message);
            // The request's trace context goes in its HTTP headers too, for HTTP-level tracing.
            if let ClientJsonRpcMessage::Request(request) = &message {
                use rmcp::model::GetMeta;
                let meta = &request.request.get_meta().0;
                custom_headers.extend(switchboard_telemetry::TraceContext::headers_of(meta));
            }
            let method = reqwest::Method::POST;
            // Encoded once, whatever number of times the request is sent (a refreshed token).
            let body = crate::wire::encode_client_message(&message).map(Bytes::from);
            let response = self
                .send_authorized(&method, url, |credentials| {
                    let request = self.request(
                        method.clone(),
                        url,
                        session_id.as_deref(),
                        auth_token.as_deref(),
                        &custom_headers,
                        credentials,
                    );
                    match &body {
                        Ok(body) => request
                            .header(CONTENT_TYPE, HeaderValue::from_static(JSON))
                            .body(body.clone()),
                        // reqwest's encoding reports the error as the request's.
                        Err(_) => request.json(&message),
                    }
                })
                .await
                .map_err(failure)?;
            if let Some(error) = auth_challenge(&response) {
                return Err(error);
            }
            let status = response.status();
            if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
                return Ok(StreamableHttpPostResponse::Accepted);
            }
            if status == StatusCode::NOT_FOUND && session_id.is_some() {
                return Err(StreamableHttpError::SessionExpired);
            }
            let new_session = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if new_session.is_some() {
                self.standalone
                    .session_assigned
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let kind = content_type(&response);
            let is_json = kind.as_deref().is_some_and(|k| k.starts_with(JSON));
            if !status.is_success() {
                let moved = redirect_target(&response);
                let wait = retry_after(&response);
                let body = read_bounded(response, MAX_ERROR_BODY_BYTES)
                    .await
                    .unwrap_or_default();
                // A JSON-RPC error body is the server's answer to the request; pass it on correlated
                // to the request id (modern servers put -32022/-32021/-32020 here with HTTP 400).
                // Except for `initialize` refused with 400/404/405: that status is the spec's signal
                // to fall back to HTTP+SSE, so it must reach the probe as a status.
                let initialize_refused =
                    is_initialize(&message) && matches!(status.as_u16(), 400 | 404 | 405);
                if session_id.is_some() && !initialize_refused && forgot_session(status, &body) {
                    return Err(StreamableHttpError::SessionExpired);
                }
                if is_json
                    && !initialize_refused
                    && !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                    && let Ok(JsonRpcMessage::Error(mut error)) =
                        serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                    && let JsonRpcMessage::Request(request) = &message
                {
                    error.id = Some(request.id.clone());
                    crate::tap::copy(self.tap.as_ref(), crate::tap::Direction::Received, &error);
                    return Ok(StreamableHttpPostResponse::Json(
                        JsonRpcMessage::Error(error),
                        new_session,
                    ));
                }
                return Err(failure(HttpFailure::Status {
                    status: status.as_u16(),
                    excerpt: moved.unwrap_or_else(|| self.http.quote(kind.as_deref(), &body)),
                    retry_after: wait,
                }));
            }
            match kind.as_deref() {
                Some(k) if k.starts_with(EVENT_STREAM) => {
                    let events = crate::tap::copy_events(
                        self.tap.clone(),
                        bounded_sse(response.bytes_stream(), max_sse_event_size),
                    );
                    let events = match &message {
                        JsonRpcMessage::Request(request) if tag => {
                            crate::input_requests::tag_related(
                                events,
                                request.id.clone(),
                                self.in_flight.clone(),
                            )
                        }
                        _ => events,
                    };
                    Ok(StreamableHttpPostResponse::Sse(events, new_session))
                }
                _ if expects_no_reply(&message) => Ok(StreamableHttpPostResponse::Accepted),
                Some(k) if k.starts_with(JSON) => {
                    let body = read_bounded(response, MAX_JSON_BODY_BYTES).await?;
                    let parsed =
                        serde_json::from_slice::<ServerJsonRpcMessage>(&body).map_err(|e| {
                            StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                                "the JSON body is not a JSON-RPC message ({e}): {}",
                                self.http.quote(kind.as_deref(), &body)
                            )))
                        })?;
                    crate::tap::copy(self.tap.as_ref(), crate::tap::Direction::Received, &parsed);
                    Ok(StreamableHttpPostResponse::Json(parsed, new_session))
                }
                Some(k) if k.starts_with("text/html") => Err(not_mcp_but_a_web_page()),
                other => Err(StreamableHttpError::UnexpectedContentType(
                    other.map(str::to_owned),
                )),
            }
        }
    }

    /// Opens (or, with `last_event_id`, resumes) an SSE stream with a GET: the body of rmcp's
    /// `get_stream`.
    pub(crate) async fn open_event_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let method = reqwest::Method::GET;
        let url = parse_url(&uri)?;
        let response = self
            .send_authorized(&method, &url, |credentials| {
                let request = self.request(
                    method.clone(),
                    &url,
                    session_id.as_deref(),
                    auth_token.as_deref(),
                    &custom_headers,
                    credentials,
                );
                match &last_event_id {
                    Some(id) => request.header(LAST_EVENT_ID_HEADER, id),
                    None => request,
                }
            })
            .await
            .map_err(failure)?;
        if let Some(error) = auth_challenge(&response) {
            return Err(error);
        }
        let status = response.status();
        // The GET stream is optional: any 4xx refusal (405 by the spec, but 400 and 404 are
        // common) means "no stream here", which rmcp treats as non-fatal, keeping the session.
        if status.is_client_error() {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(failure(HttpFailure::Status {
                status: status.as_u16(),
                excerpt: redirect_target(&response).unwrap_or_default(),
                retry_after: retry_after(&response),
            }));
        }
        match content_type(&response) {
            Some(k) if k.starts_with(EVENT_STREAM) => Ok(crate::tap::copy_events(
                self.tap.clone(),
                bounded_sse(response.bytes_stream(), max_sse_event_size),
            )),
            Some(k) if k.starts_with("text/html") => Err(not_mcp_but_a_web_page()),
            other => Err(StreamableHttpError::UnexpectedContentType(other)),
        }
    }
}

/// What a URL that answers with a web page is told: a person pasted a home or docs page, not
/// the server's MCP endpoint.
fn not_mcp_but_a_web_page() -> StreamableHttpError<HttpFailure> {
    StreamableHttpError::UnexpectedServerResponse(Cow::Borrowed(
        "the URL answered with an HTML page, not MCP: use the server's MCP endpoint (often a \
         path such as /mcp or /sse; its documentation names it)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_version_is_found_among_request_headers_every_time() {
        // Every map hashes with keys of its own; a lookup that works only by chance fails in
        // some of these.
        for _ in 0..64 {
            let mut headers = HashMap::new();
            headers.insert(
                HeaderName::from_static("mcp-method"),
                HeaderValue::from_static("tools/call"),
            );
            headers.insert(
                HeaderName::from_static("mcp-protocol-version"),
                HeaderValue::from_static("2025-11-25"),
            );
            assert_eq!(
                protocol_version_header(&headers),
                Some(HeaderValue::from_static("2025-11-25"))
            );
        }
        assert_eq!(protocol_version_header(&HashMap::new()), None);
    }

    /// A request carries the headers reqwest's builder gave it, as the builder did: the static
    /// ones, `Accept`, the caller's own added to them, the credentials in place of any of the
    /// same name (every value of theirs kept), then the session; a session id that is no
    /// header value fails the request instead of being left out.
    #[test]
    fn a_request_carries_its_headers_as_the_builder_made_them() {
        let url = url::Url::parse("http://127.0.0.1:9/mcp").unwrap();
        let mut fixed = HeaderMap::new();
        fixed.insert("x-team", HeaderValue::from_static("blue"));
        let client = StatusAwareHttpClient::new(HttpClients::new(), &url, fixed);
        let mut custom = HashMap::new();
        custom.insert(
            HeaderName::from_static("x-team"),
            HeaderValue::from_static("green"),
        );
        custom.insert(
            HeaderName::from_static("authorization"),
            HeaderValue::from_static("Bearer stale"),
        );
        let mut credentials = HeaderMap::new();
        credentials.append("authorization", HeaderValue::from_static("Bearer fresh"));
        credentials.append("x-proof", HeaderValue::from_static("one"));
        credentials.append("x-proof", HeaderValue::from_static("two"));
        let request = client
            .request(
                reqwest::Method::POST,
                &url,
                Some("session-1"),
                None,
                &custom,
                credentials,
            )
            .build()
            .unwrap();
        let headers = request.headers();
        let all = |name: &str| {
            headers
                .get_all(name)
                .iter()
                .map(|value| value.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(all("x-team"), ["blue", "green"]);
        assert_eq!(all("accept"), [ACCEPT_BOTH]);
        assert_eq!(all("authorization"), ["Bearer fresh"]);
        assert_eq!(all("x-proof"), ["one", "two"]);
        assert_eq!(all(SESSION_HEADER), ["session-1"]);
        assert_eq!(request.url(), &url);

        let refused = client
            .request(
                reqwest::Method::POST,
                &url,
                Some("bad\nid"),
                None,
                &HashMap::new(),
                HeaderMap::new(),
            )
            .build();
        assert!(refused.is_err(), "a session id that is no header value");
        let bearer = client
            .request(
                reqwest::Method::GET,
                &url,
                None,
                Some("token"),
                &HashMap::new(),
                HeaderMap::new(),
            )
            .build()
            .unwrap();
        let token = bearer.headers().get("authorization").unwrap();
        assert_eq!(token, "Bearer token");
        assert!(token.is_sensitive(), "kept out of debug output");
    }

    /// The future of a POST, part of every relayed call's, holds what it sends once: built as
    /// `async fn`s, each layer below it (the OAuth loop, the request's sending, the held
    /// connection's) kept its arguments twice and the sign-in's futures inline, 5,512 bytes in a
    /// release build where it is now 1,760 (`docs/benchmarks.md`). The bound is that (the same in
    /// a test build) with a tenth to spare: one layer keeping its request twice again (256
    /// bytes) goes past it.
    #[test]
    fn a_posts_future_holds_what_it_sends_once() {
        let url = url::Url::parse("http://127.0.0.1:9/mcp").unwrap();
        let client = StatusAwareHttpClient::new(HttpClients::new(), &url, HeaderMap::new());
        let message: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}
        }))
        .unwrap();
        let post = client.post(&url, message, None, None, HashMap::new(), 1024, false);
        let size = std::mem::size_of_val(&post);
        assert!(
            size <= 1_936,
            "a POST's future is {size} bytes: does a layer keep its arguments twice again?"
        );
    }
}
