//! The HTTP clients every upstream connection shares: reqwest's, and hyper's own HTTP/1
//! connections for plain `http://` requests that go through no proxy.
//!
//! reqwest wraps hyper's pooled client in layers of its own that every request pays for: a
//! redirect policy and a response that each parse the request's URL again from text, a retry
//! layer, boxed tower services and futures. On the relay's hot path that came to about 25,000
//! instructions per relayed call, an eighth of all the daemon runs for it and more than hyper's
//! client itself (`docs/benchmarks.md`). Switchboard follows no redirects and retries nothing
//! at this level, so a request that needs neither TLS nor a proxy goes straight to a connection
//! its sender holds ([`HttpClients::execute`], [`HeldConnections`]); everything else
//! (`https://`, and any URL the environment's proxy settings route through a proxy) goes
//! through reqwest, which reads the same proxy settings. Requests are built with reqwest's
//! builder either way, and answers come back as [`reqwest::Response`]s, so callers see one
//! client.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::GaiResolver;
use hyper_util::client::proxy::matcher::Matcher;
use reqwest::ResponseBuilderExt;
use switchboard_oauth::{GuardedResolver, NetworkPolicy};

use crate::transport::dns::Dns;
use crate::transport::held_connections::{HeldConnections, ListsByOrigin};
use crate::transport::http_failure::{HttpFailure, excerpt};

/// How long connecting to a server may take. reqwest's client has the same bound over the
/// whole connect, name lookup included; hyper's bounds the TCP connect, split across the
/// addresses a name resolves to (the system resolver bounds its own lookups).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP keepalive as reqwest sets it by default: probes after 15 s of silence, every 15 s, three
/// of them; on Linux, unacknowledged data fails the connection after 30 s. Nothing else notices
/// a peer that vanished (a killed host, an expired NAT entry) under a quiet stream.
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_RETRIES: u32 = 3;
#[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);
/// The shared clients: reqwest's pool for TLS and proxied requests, and what plain
/// connections are opened with. Cloning shares them (one reference count: every call clones
/// its connection's client).
///
/// Pools made with [`HttpClients::guarded`] connect only where a [`NetworkPolicy`] allows (the
/// pools of tenant admins' and members' servers): every name is resolved through the policy and
/// only the addresses it allows are connected to (the address checked is the address used), an
/// address written in the URL is checked before anything is sent, plain `http` goes only to
/// what the operator allows, and an answer's body is never quoted in an error (a request a user
/// aimed at an internal service must not read it back through the error).
#[derive(Clone)]
pub struct HttpClients(Arc<Pools>);

struct Pools {
    reqwest: reqwest::Client,
    /// What plain connections are opened with ([`HeldConnections`]).
    connector: HttpConnector<Dns>,
    /// The environment's proxy settings (`HTTP_PROXY`, `NO_PROXY`, ...), read as reqwest reads
    /// them: a plain request they route through a proxy goes through reqwest.
    proxies: Matcher,
    /// What these pools may reach, when they are guarded.
    policy: Option<NetworkPolicy>,
    /// The plain connections held idle for these pools' clients, by origin.
    held: ListsByOrigin,
}

impl std::fmt::Debug for HttpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClients").finish_non_exhaustive()
    }
}

impl Default for HttpClients {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClients {
    /// Fresh pools, with connect timeouts, following no redirects (an MCP endpoint that
    /// redirects elsewhere is a configuration error to surface, not follow), and the
    /// environment's proxy settings.
    pub fn new() -> Self {
        Self::with(reqwest_client(None), Matcher::from_system(), None)
    }

    /// Fresh pools that connect only where `policy` allows.
    pub fn guarded(policy: NetworkPolicy) -> Self {
        Self::with(
            reqwest_client(Some(&policy)),
            Matcher::from_system(),
            Some(policy),
        )
    }

    /// What these pools may reach, when they are guarded.
    pub fn policy(&self) -> Option<&NetworkPolicy> {
        self.0.policy.as_ref()
    }

    /// Why `url` may not be requested with these pools, if it may not: a scheme other than
    /// `https` to what the operator does not allow, or an address the policy refuses.
    pub fn refusal(&self, url: &url::Url) -> Option<String> {
        let policy = self.0.policy.as_ref()?;
        let plain = matches!(url.scheme(), "http" | "ws");
        if plain && !policy.allows_plain(url) {
            return Some(format!(
                "plain {} is allowed only to the networks the operator allows; use {}",
                url.scheme(),
                if url.scheme() == "ws" { "wss" } else { "https" }
            ));
        }
        policy.check_host(url).err().map(|reason| {
            format!(
                "refusing to connect to {}: {reason}",
                url.host_str().unwrap_or_default()
            )
        })
    }

    /// What an error may say of an answer's body: an excerpt, or for guarded pools only its
    /// type and size.
    pub(crate) fn quote(&self, content_type: Option<&str>, body: &[u8]) -> String {
        match self.0.policy {
            None => excerpt(body),
            Some(_) if body.is_empty() => String::new(),
            Some(_) => format!(
                "a {} body of {} bytes, not shown",
                content_type.unwrap_or("untyped"),
                body.len()
            ),
        }
    }

    /// `reqwest`, and hyper's client for the plain requests `proxies` routes through no proxy
    /// (`reqwest` must route the others as `proxies` says), resolving through `policy` if any.
    fn with(reqwest: reqwest::Client, proxies: Matcher, policy: Option<NetworkPolicy>) -> Self {
        let dns = match &policy {
            Some(policy) => Dns::Guarded(policy.clone()),
            None => Dns::System(GaiResolver::new()),
        };
        let mut connector = HttpConnector::new_with_resolver(dns);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        connector.set_keepalive(Some(KEEPALIVE));
        connector.set_keepalive_interval(Some(KEEPALIVE));
        connector.set_keepalive_retries(Some(KEEPALIVE_RETRIES));
        #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
        connector.set_tcp_user_timeout(Some(TCP_USER_TIMEOUT));
        Self(Arc::new(Pools {
            reqwest,
            connector,
            proxies,
            policy,
            held: ListsByOrigin::default(),
        }))
    }

    /// The idle plain connections that every client of `url`'s origin through these pools
    /// holds ([`HeldConnections`]).
    pub fn held_connections(&self, url: &url::Url) -> HeldConnections {
        self.0.held.of(&url.origin().ascii_serialization())
    }

    /// reqwest's client, for requests built and sent with it directly.
    pub fn reqwest(&self) -> &reqwest::Client {
        &self.0.reqwest
    }

    /// Sends `request`: a plain `http://` one that no proxy takes on one of `held`'s
    /// connections, any other through reqwest.
    ///
    /// The request is looked at and converted here, and the future returned only sends it:
    /// an `async fn` would keep the request twice in its future (as passed, and moved into its
    /// body) on every relayed call (`docs/benchmarks.md`).
    pub fn execute<'a>(
        &'a self,
        request: reqwest::Request,
        held: &'a HeldConnections,
    ) -> impl Future<Output = Result<reqwest::Response, HttpFailure>> + Send + 'a {
        use futures::future::{Either, FutureExt, TryFutureExt};
        let failed = |failure: HttpFailure| Either::Left(std::future::ready(Err(failure)));
        if let Some(refusal) = self.refusal(request.url()) {
            return failed(HttpFailure::Refused(refusal));
        }
        // A timeout set on the request is reqwest's to keep.
        if request.url().scheme() != "http" || request.timeout().is_some() {
            return Either::Right(Either::Left(self.0.reqwest.execute(request).err_into()));
        }
        let url = request.url().clone();
        let mut request = match http::Request::<reqwest::Body>::try_from(request) {
            Ok(request) => request,
            Err(error) => return failed(error.into()),
        };
        // reqwest's one default header, which it adds to requests that have none.
        request
            .headers_mut()
            .entry(http::header::ACCEPT)
            .or_insert(http::HeaderValue::from_static("*/*"));
        if self.0.proxies.intercept(request.uri()).is_some() {
            return match reqwest::Request::try_from(request) {
                Ok(request) => {
                    Either::Right(Either::Left(self.0.reqwest.execute(request).err_into()))
                }
                Err(error) => failed(error.into()),
            };
        }
        let sent = held.send(&self.0.connector, request).map(move |sent| {
            let (mut parts, body) = sent?.into_parts();
            // The response's URL is the request's; without it reqwest would parse a placeholder.
            if let Ok(marker) = http::Response::builder().url(url).body(()) {
                parts.extensions.extend(marker.into_parts().0.extensions);
            }
            let response = http::Response::from_parts(parts, reqwest::Body::wrap(body));
            Ok(reqwest::Response::from(response))
        });
        Either::Right(Either::Right(sent))
    }
}

/// The reqwest client Switchboard uses for upstreams: pooled, with connect timeouts, no
/// redirects (an MCP endpoint that redirects elsewhere is a configuration error to surface, not
/// follow), the environment's proxy settings.
pub(crate) fn reqwest_client(policy: Option<&NetworkPolicy>) -> reqwest::Client {
    let builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none());
    let builder = match policy {
        Some(policy) => builder.dns_resolver(Arc::new(GuardedResolver::new(policy.clone()))),
        None => builder,
    };
    builder.build().unwrap_or_else(|_| reqwest::Client::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-request HTTP server on loopback that answers `{"ok": true}` and hands back the
    /// request it received (head and body, as text).
    async fn one_answer() -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let served = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut received = Vec::new();
            let mut buffer = [0; 4096];
            // The head, then as many body bytes as its Content-Length says.
            loop {
                let read = socket.read(&mut buffer).await.unwrap();
                assert!(
                    read > 0,
                    "the client closed before its request was complete"
                );
                received.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&received).into_owned();
                let Some((head, body)) = text.split_once("\r\n\r\n") else {
                    continue;
                };
                let length = head
                    .lines()
                    .find_map(|line| {
                        line.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_owned)
                    })
                    .map_or(0, |length| length.trim().parse::<usize>().unwrap());
                if body.len() >= length {
                    break;
                }
            }
            let body = r#"{"ok":true}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&received).into_owned()
        });
        (address, served)
    }

    /// A loopback address nothing listens at.
    async fn closed_address() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    }

    static PING: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(
        || serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    );

    fn post(clients: &HttpClients, url: &str) -> reqwest::Request {
        clients
            .reqwest()
            .post(url)
            .header("x-test", "yes")
            .json(&*PING)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_plain_request_reaches_its_server_with_its_headers_and_body() {
        let (address, served) = one_answer().await;
        let clients = HttpClients::with(reqwest::Client::new(), Matcher::builder().build(), None);
        let request = post(&clients, &format!("http://{address}/mcp"));
        let response = clients
            .execute(request, &HeldConnections::default())
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.url().as_str(), format!("http://{address}/mcp"));
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.text().await.unwrap(), r#"{"ok":true}"#);
        let received = served.await.unwrap().to_ascii_lowercase();
        assert!(received.starts_with("post /mcp http/1.1\r\n"), "{received}");
        assert!(
            received.contains(&format!("host: {address}\r\n")),
            "{received}"
        );
        assert!(received.contains("x-test: yes\r\n"), "{received}");
        assert!(
            received.contains("accept: */*\r\n"),
            "reqwest's default: {received}"
        );
        assert!(
            received.contains("content-type: application/json\r\n"),
            "{received}"
        );
        assert!(received.ends_with(&PING.to_string()), "{received}");
    }

    #[tokio::test]
    async fn a_plain_request_a_proxy_takes_goes_through_that_proxy() {
        let (proxy, served) = one_answer().await;
        let proxy_url = format!("http://{proxy}");
        let reqwest = reqwest::Client::builder()
            .proxy(reqwest::Proxy::http(&proxy_url).unwrap())
            .build()
            .unwrap();
        let clients = HttpClients::with(reqwest, Matcher::builder().http(proxy_url).build(), None);
        // Nothing listens at the server's own address: only the proxy can answer.
        let server = closed_address().await;
        let request = post(&clients, &format!("http://{server}/mcp"));
        let response = clients
            .execute(request, &HeldConnections::default())
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let received = served.await.unwrap().to_ascii_lowercase();
        assert!(
            received.starts_with(&format!("post http://{server}/mcp http/1.1\r\n")),
            "a proxy is asked for the whole URL: {received}"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_described_without_the_url() {
        let address = closed_address().await;
        let clients = HttpClients::with(reqwest::Client::new(), Matcher::builder().build(), None);
        let request = post(&clients, &format!("http://{address}/mcp?token=secret"));
        match clients.execute(request, &HeldConnections::default()).await {
            Err(HttpFailure::Request(text)) => {
                assert!(text.starts_with("connection failed: "), "{text}");
                assert!(
                    !text.contains("secret") && !text.contains(&address.to_string()),
                    "{text}"
                );
            }
            other => panic!("expected a request failure, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn guarded_pools_refuse_addresses_their_policy_refuses_before_connecting() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = tokio::spawn(async move { listener.accept().await.is_ok() });
        let guarded = HttpClients::guarded(NetworkPolicy::public_and(Default::default()));
        for url in [
            format!("https://127.0.0.1:{port}/mcp"),
            format!("https://localhost:{port}/mcp"),
            format!("http://127.0.0.1:{port}/mcp"),
            "https://169.254.169.254/latest/meta-data/".to_owned(),
            "https://[::ffff:169.254.169.254]/".to_owned(),
            "https://2852039166/".to_owned(),
            "http://93.184.216.34/mcp".to_owned(),
        ] {
            let request = post(&guarded, &url);
            match guarded.execute(request, &HeldConnections::default()).await {
                Err(HttpFailure::Refused(reason)) => {
                    assert!(!reason.is_empty(), "{url}")
                }
                Err(HttpFailure::Request(text)) => assert!(
                    text.contains("refusing to connect to localhost"),
                    "{url}: {text}"
                ),
                other => panic!("{url}: expected a refusal, got {other:?}"),
            }
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(200), accepted)
                .await
                .is_err(),
            "nothing connected"
        );
        // Allowed by the operator: the same loopback server is reached, plain http included.
        let (address, served) = one_answer().await;
        let allowed = HttpClients::guarded(NetworkPolicy::public_and(
            switchboard_core::network::AllowedNetworks::new(["127.0.0.1".parse().unwrap()]),
        ));
        let response = allowed
            .execute(
                post(&allowed, &format!("http://{address}/mcp")),
                &HeldConnections::default(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        served.await.unwrap();
    }

    #[test]
    fn idle_connections_are_shared_by_origin_within_one_set_of_pools_only() {
        let url = |text: &str| url::Url::parse(text).unwrap();
        let open = HttpClients::new();
        let mcp = open.held_connections(&url("http://127.0.0.1:9/mcp"));
        assert!(mcp.same_list(&open.held_connections(&url("http://127.0.0.1:9/other"))));
        assert!(!mcp.same_list(&open.held_connections(&url("http://127.0.0.1:10/mcp"))));
        // Pools guarded by a policy never take a connection that other pools opened.
        let guarded = HttpClients::guarded(NetworkPolicy::default());
        assert!(!mcp.same_list(&guarded.held_connections(&url("http://127.0.0.1:9/mcp"))));
    }

    #[test]
    fn guarded_pools_quote_no_body_in_errors() {
        let guarded = HttpClients::guarded(NetworkPolicy::public_and(Default::default()));
        let quoted = guarded.quote(Some("text/plain"), b"SecretAccessKey=abc");
        assert!(!quoted.contains("Secret"), "{quoted}");
        assert!(
            quoted.contains("text/plain") && quoted.contains("19 bytes"),
            "{quoted}"
        );
        let open = HttpClients::new().quote(Some("text/plain"), b"SecretAccessKey=abc");
        assert!(
            open.contains("SecretAccessKey"),
            "the operator's own see it: {open}"
        );
    }
}
