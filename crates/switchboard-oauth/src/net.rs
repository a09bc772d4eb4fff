//! The HTTP client every OAuth request goes through, with SSRF guards.
//!
//! Metadata documents name URLs that Switchboard then fetches or hands to a browser, so a hostile
//! server could point them at the cloud metadata service or a router's admin page (the spec's
//! security best practices, server-side request forgery). Every URL is therefore checked before
//! use: `https` only (plain `http` only to a loopback address, and only when loopback is allowed),
//! no credentials in it, and every address its host resolves to must be public. The check runs in
//! the DNS resolver reqwest uses, so the address that is checked is the address that is connected
//! to (no rebinding window), and on every redirect. Bodies are read up to a size limit and every
//! request has a deadline.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::{HeaderMap, StatusCode};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use switchboard_core::network::{AddressClass, AllowedNetworks, classify};

use crate::error::OAuthError;

/// Largest metadata or token response read.
pub(crate) const MAX_RESPONSE_BYTES: usize = 256 * 1024;
/// Deadline of one OAuth request, connection included.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Redirects followed for a metadata fetch; each target is checked again.
const MAX_REDIRECTS: usize = 3;

/// Which addresses requests may reach: every OAuth request's, and every upstream connection a
/// tenant admin's or member's definition names (see `switchboard_upstream::HttpClients`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// Loopback addresses (127.0.0.0/8, ::1, `localhost`), and plain `http` to them: for local
    /// development and tests. Allowed automatically for a server that is itself on loopback.
    pub allow_loopback: bool,
    /// Private networks (RFC 1918, unique-local IPv6, shared address space): for authorization
    /// servers inside a company network. Link-local and cloud metadata addresses stay refused.
    pub allow_private: bool,
    /// Networks and hosts the operator allows besides (`--allow-upstream-network`), plain `http`
    /// to them included: the operator vouches for them.
    pub allowed: AllowedNetworks,
}

impl NetworkPolicy {
    /// The policy for a server at `server_url`: loopback is allowed when the server itself is on
    /// loopback (the user has chosen a local setup), or when `allow_loopback` is set.
    pub fn for_server(server_url: &Url, allow_loopback: bool, allow_private: bool) -> Self {
        Self {
            allow_loopback: allow_loopback || is_loopback_host(server_url),
            allow_private,
            allowed: AllowedNetworks::default(),
        }
    }

    /// Public addresses and the operator's `allowed` networks only: what a tenant admin's or
    /// member's servers may reach.
    pub fn public_and(allowed: AllowedNetworks) -> Self {
        Self {
            allow_loopback: false,
            allow_private: false,
            allowed,
        }
    }

    /// Also the operator's `allowed` networks and hosts.
    pub fn with_allowed(mut self, allowed: AllowedNetworks) -> Self {
        self.allowed = allowed;
        self
    }

    /// Whether `ip`, which `host` resolved to (`None`: the URL named the address), may be
    /// connected to; why not, in words.
    pub fn allows(&self, host: Option<&str>, ip: IpAddr) -> Result<(), &'static str> {
        if host.is_some_and(|host| self.allowed.names(host)) || self.allowed.contains(ip) {
            return Ok(());
        }
        match classify(ip) {
            AddressClass::Public => Ok(()),
            AddressClass::Loopback if self.allow_loopback => Ok(()),
            AddressClass::Private if self.allow_private => Ok(()),
            class => Err(class.refusal()),
        }
    }

    /// Whether plain `http` (or `ws`) may be used to `url`: to an address or host the operator
    /// allows, or to loopback where loopback is allowed.
    pub fn allows_plain(&self, url: &Url) -> bool {
        match url.host() {
            Some(Host::Domain(name)) => {
                self.allowed.names(name) || (self.allow_loopback && is_loopback_host(url))
            }
            Some(Host::Ipv4(ip)) => {
                self.allowed.contains(IpAddr::V4(ip)) || (self.allow_loopback && ip.is_loopback())
            }
            Some(Host::Ipv6(ip)) => {
                self.allowed.contains(IpAddr::V6(ip)) || (self.allow_loopback && ip.is_loopback())
            }
            None => false,
        }
    }

    /// Checks a URL's host before anything is sent to it, when the host is an address (names
    /// are checked as they resolve): why not, in words.
    pub fn check_host(&self, url: &Url) -> Result<(), &'static str> {
        match url.host() {
            None => Err("it has no host"),
            Some(Host::Ipv4(ip)) => self.allows(None, IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => self.allows(None, IpAddr::V6(ip)),
            Some(Host::Domain(name)) => {
                if name.eq_ignore_ascii_case("localhost") || name.ends_with(".localhost") {
                    self.allows(Some(name), IpAddr::V4(Ipv4Addr::LOCALHOST))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Checks a URL before anything is fetched from it or shown to a user: scheme, credentials,
    /// and the host when it is an address literal (names are checked when resolved).
    pub fn check_url(&self, url: &Url, what: &'static str) -> Result<(), OAuthError> {
        let refuse = |reason: &str| OAuthError::UnsafeUrl {
            what,
            url: url.to_string(),
            reason: reason.to_owned(),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("it carries credentials"));
        }
        match url.scheme() {
            "https" => {}
            "http" if self.allows_plain(url) => {}
            "http" => {
                return Err(refuse(
                    "plain http is only allowed to loopback in development",
                ));
            }
            _ => return Err(refuse("only https URLs are allowed")),
        }
        self.check_host(url).map_err(refuse)
    }
}

/// True when the URL's host is a loopback address or `localhost`.
pub(crate) fn is_loopback_host(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The addresses `host` resolves to that `policy` allows; an error naming the refusal when it
/// allows none. Every connection guarded by a policy connects only to what this returns, so the
/// address checked is the address connected to (no window for a rebinding name).
pub async fn resolve_guarded(
    policy: &NetworkPolicy,
    host: &str,
    port: u16,
) -> std::io::Result<Vec<SocketAddr>> {
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    let mut refusal = "it did not resolve";
    let allowed: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|addr| match policy.allows(Some(host), addr.ip()) {
            Ok(()) => true,
            Err(reason) => {
                refusal = reason;
                false
            }
        })
        .collect();
    if allowed.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("refusing to connect to {host}: {refusal}"),
        ));
    }
    Ok(allowed)
}

/// Resolves names for reqwest and drops every address the policy refuses; a name left with none
/// fails.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: NetworkPolicy,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: NetworkPolicy) -> Self {
        Self { policy }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let allowed = resolve_guarded(&policy, &host, 0).await?;
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// An HTTP answer read in full (up to the limit).
#[derive(Debug)]
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON of the given shape.
    pub fn json<T: serde::de::DeserializeOwned>(
        &self,
        what: &'static str,
        url: &Url,
    ) -> Result<T, OAuthError> {
        serde_json::from_slice(&self.body).map_err(|e| OAuthError::InvalidMetadata {
            what,
            url: url.to_string(),
            detail: format!("not the expected JSON: {e}"),
        })
    }
}

/// The guarded HTTP client.
///
/// Its two reqwest clients (each with its own TLS configuration and pool) are built on the
/// first OAuth request: every HTTP server has an `OAuthHttp`, and most never sign in, so a
/// daemon with hundreds of servers does not carry hundreds of idle clients.
#[derive(Clone, Debug)]
pub struct OAuthHttp {
    clients: Arc<std::sync::OnceLock<Clients>>,
    policy: NetworkPolicy,
}

/// One client that follows checked redirects and one that follows none.
#[derive(Debug)]
struct Clients {
    follow: reqwest::Client,
    no_follow: reqwest::Client,
}

impl OAuthHttp {
    /// A client enforcing `policy`.
    pub fn new(policy: NetworkPolicy) -> Self {
        Self {
            clients: Arc::default(),
            policy,
        }
    }

    fn clients(&self) -> &Clients {
        let policy = self.policy.clone();
        self.clients.get_or_init(|| {
            let resolver = Arc::new(GuardedResolver::new(policy.clone()));
            let build = |redirect: reqwest::redirect::Policy| {
                reqwest::Client::builder()
                    .dns_resolver(resolver.clone())
                    .redirect(redirect)
                    .timeout(REQUEST_TIMEOUT)
                    .connect_timeout(Duration::from_secs(10))
                    .user_agent(concat!("switchboard/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .unwrap_or_else(|_| reqwest::Client::new())
            };
            let follow = reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    attempt.error("too many redirects")
                } else if let Err(error) = policy.check_url(attempt.url(), "redirect") {
                    attempt.error(error.to_string())
                } else {
                    attempt.follow()
                }
            });
            Clients {
                follow: build(follow),
                no_follow: build(reqwest::redirect::Policy::none()),
            }
        })
    }

    /// The policy in force.
    pub fn policy(&self) -> &NetworkPolicy {
        &self.policy
    }

    /// GET, following checked redirects.
    pub async fn get(
        &self,
        url: &Url,
        what: &'static str,
        headers: HeaderMap,
    ) -> Result<Reply, OAuthError> {
        self.policy.check_url(url, what)?;
        let request = self.clients().follow.get(url.clone()).headers(headers);
        read(request, url, what).await
    }

    /// GET without following redirects (the headless authorizer reads `Location` itself).
    pub async fn get_no_redirect(
        &self,
        url: &Url,
        what: &'static str,
    ) -> Result<Reply, OAuthError> {
        self.policy.check_url(url, what)?;
        read(self.clients().no_follow.get(url.clone()), url, what).await
    }

    /// POST a form (never follows redirects: a token request must not be replayed elsewhere).
    pub async fn post_form(
        &self,
        url: &Url,
        what: &'static str,
        form: &[(String, String)],
        headers: HeaderMap,
    ) -> Result<Reply, OAuthError> {
        self.policy.check_url(url, what)?;
        let request = self
            .clients()
            .no_follow
            .post(url.clone())
            .headers(headers)
            .header(http::header::ACCEPT, "application/json")
            .form(form);
        read(request, url, what).await
    }

    /// POST a JSON document (client registration).
    pub async fn post_json(
        &self,
        url: &Url,
        what: &'static str,
        body: &serde_json::Value,
    ) -> Result<Reply, OAuthError> {
        self.policy.check_url(url, what)?;
        let request = self
            .clients()
            .no_follow
            .post(url.clone())
            .header(http::header::ACCEPT, "application/json")
            .json(body);
        read(request, url, what).await
    }
}

async fn read(
    request: reqwest::RequestBuilder,
    url: &Url,
    what: &'static str,
) -> Result<Reply, OAuthError> {
    let http_error = |detail: String| OAuthError::Http {
        what,
        url: url.to_string(),
        detail,
    };
    let response = request
        .send()
        .await
        .map_err(|e| http_error(describe_reqwest(&e.without_url())))?;
    let status = response.status();
    let headers = response.headers().clone();
    let too_large = || OAuthError::TooLarge {
        what,
        url: url.to_string(),
        limit: MAX_RESPONSE_BYTES,
    };
    if response
        .content_length()
        .is_some_and(|len| len > MAX_RESPONSE_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| http_error(describe_reqwest(&e.without_url())))?;
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// Describes a reqwest error with its whole cause chain (reqwest's own text is terse). Shared
/// by every HTTP client of Switchboard's.
pub fn describe_reqwest(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_redirect() {
        "redirect refused"
    } else if error.is_connect() {
        "connection failed"
    } else if error.is_body() || error.is_decode() {
        "reading the response failed"
    } else {
        "request failed"
    };
    with_causes(kind, error)
}

/// `what` (what failed), then `error`'s causes, each after a colon.
pub fn with_causes(what: &str, error: &dyn std::error::Error) -> String {
    let mut text = what.to_owned();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn clients_are_built_on_the_first_request_and_shared_by_clones() {
        let http = OAuthHttp::new(NetworkPolicy::default());
        let clone = http.clone();
        assert!(http.clients.get().is_none(), "no client before a request");
        // A refused address fails the policy before any client is needed.
        let refused = clone
            .get(
                &url("http://169.254.169.254/x"),
                "metadata",
                HeaderMap::new(),
            )
            .await;
        assert!(refused.is_err());
        assert!(
            http.clients.get().is_none(),
            "a refused request builds none"
        );
        let _ = clone.clients();
        assert!(http.clients.get().is_some(), "clones share one set");
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn only_https_is_allowed_except_http_to_allowed_loopback() {
        let strict = NetworkPolicy::default();
        let dev = NetworkPolicy {
            allow_loopback: true,
            ..NetworkPolicy::default()
        };
        assert!(
            strict
                .check_url(&url("https://auth.example.com/token"), "t")
                .is_ok()
        );
        assert!(
            strict
                .check_url(&url("http://auth.example.com/token"), "t")
                .is_err()
        );
        assert!(
            strict
                .check_url(&url("http://127.0.0.1:9/token"), "t")
                .is_err()
        );
        assert!(dev.check_url(&url("http://127.0.0.1:9/token"), "t").is_ok());
        assert!(dev.check_url(&url("http://localhost:9/token"), "t").is_ok());
        assert!(dev.check_url(&url("http://10.0.0.1/token"), "t").is_err());
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "ftp://auth.example.com/",
            "data:text/html,x",
        ] {
            assert!(dev.check_url(&url(bad), "t").is_err(), "{bad}");
        }
        assert!(
            strict
                .check_url(&url("https://user:pw@auth.example.com/"), "t")
                .is_err()
        );
    }

    #[test]
    fn metadata_link_local_and_private_addresses_are_refused() {
        let policy = NetworkPolicy {
            allow_loopback: true,
            ..NetworkPolicy::default()
        };
        for bad in [
            "https://169.254.169.254/latest/meta-data",
            "https://[fd00:ec2::254]/",
            "https://[fe80::1]/",
            "https://10.1.2.3/",
            "https://192.168.0.1/",
            "https://172.16.0.1/",
            "https://100.64.0.1/",
            "https://[fc00::1]/",
            "https://0.0.0.0/",
            "https://[::ffff:169.254.169.254]/",
            "https://[::ffff:10.0.0.1]/",
            "https://[64:ff9b::a9fe:a9fe]/",
        ] {
            assert!(policy.check_url(&url(bad), "t").is_err(), "{bad}");
        }
        let private = NetworkPolicy {
            allow_private: true,
            ..NetworkPolicy::default()
        };
        assert!(private.check_url(&url("https://10.1.2.3/"), "t").is_ok());
        assert!(
            private
                .check_url(&url("https://169.254.169.254/"), "t")
                .is_err()
        );
        assert!(
            policy
                .check_url(&url("https://93.184.216.34/"), "t")
                .is_ok()
        );
    }

    #[test]
    fn loopback_is_allowed_for_a_loopback_server_only() {
        assert!(
            NetworkPolicy::for_server(&url("http://127.0.0.1:3000/mcp"), false, false)
                .allow_loopback
        );
        assert!(
            !NetworkPolicy::for_server(&url("https://mcp.example.com/mcp"), false, false)
                .allow_loopback
        );
    }
}
