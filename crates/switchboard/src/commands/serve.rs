//! `serve`: the daemon. Its hub (and with `--users`, each user's workspace's hub, built with
//! the same settings over the store as that user sees it), its listeners, who may use them, and
//! the announcement the CLI finds it by, until a signal stops it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use switchboard_hub::{Hub, HubBuilder};
use switchboard_store::{Store, StoreLocation};
use switchboard_upstream::ConnectOptions;
use tokio_util::sync::CancellationToken;

use crate::hubs::{audit_log, load_search_model, relaying_options};
use crate::{cli, daemon};

/// Runs the daemon over `store` until SIGINT or SIGTERM, announced in the data directory `dir`.
pub(crate) async fn serve(
    store: Store,
    args: cli::ServeArgs,
    dir: &std::path::Path,
    location: &StoreLocation,
) -> anyhow::Result<i32> {
    let listen = args.listen;
    let mut oauth = switchboard_hub::OAuthOptions::from_env();
    let supervision = args.supervision();
    if let Some(url) = args.client_metadata_url {
        // The spec: an https URL with a path component, used verbatim as the client id.
        if url.scheme() != "https" || url.path().len() <= 1 {
            bail!(
                "--client-metadata-url must be an https URL with a path, e.g. https://switchboard.example.com/oauth/client-metadata.json"
            );
        }
        oauth.identity.metadata_document_url = Some(url);
    }
    if let Some(url) = &args.public_url
        && (!matches!(url.scheme(), "http" | "https")
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some())
    {
        bail!(
            "--public-url must be an http(s) URL without credentials, query or fragment, e.g. https://switchboard.example.com"
        );
    }
    let options = ConnectOptions {
        supervision,
        ..relaying_options()
    };
    let stop = CancellationToken::new();
    // Servers added, changed or removed by the CLI (another process) or another replica take
    // effect here, in every workspace.
    let follower =
        switchboard_hub::StoreFollower::start(store.clone(), args.store_check, stop.clone());
    let encoder = load_search_model(&args.search_model).await?;
    let audit = audit_log(
        &store,
        Some(switchboard_hub::AuditRetention {
            max_age: Duration::from_secs(u64::from(args.audit_retention_days) * 24 * 3600),
            max_records: args.audit_max_records,
        }),
    );
    // Tenant admins' and members' servers reach public addresses over https and what the
    // operator allows; the operator's own reach anything.
    let allowed = switchboard_core::network::AllowedNetworks::new(
        args.allow_upstream_network.iter().cloned(),
    );
    // The daemon's hub and each workspace's are built alike: one audit log, one limit for each
    // client, the inspector's history, one search model, the store's changes followed.
    let daemon_hub = |options, oauth| {
        Hub::builder(store.clone(), options)
            .oauth(oauth)
            .audit(audit.clone())
            .client_rate_limit(args.client_rate_limit)
            .traffic_history(usize::from(args.inspector_history))
            .semantic_search(encoder.clone())
            .follow(follower.clone())
    };
    // As `switchboard stdio` does: a user's first list should hold the servers that connect at
    // once; later ones are announced.
    let workspaces = daemon_hub(
        ConnectOptions {
            http: switchboard_upstream::HttpClients::guarded(
                switchboard_oauth::NetworkPolicy::public_and(allowed.clone()),
            ),
            ..options.clone()
        },
        switchboard_hub::OAuthOptions {
            allowed,
            ..oauth.clone()
        },
    )
    .settle(WORKSPACE_SETTLE);
    let provider = identity_provider(&args.oidc, args.users, &oauth).await?;
    let access = access_for(
        listen,
        args.users.then(|| UsersSetup {
            store: store.clone(),
            workspaces,
            follower: follower.clone(),
            provider,
        }),
        &args.cors_origin,
    )?;
    let local = daemon_hub(options, oauth);
    // Held until the hub has shut down: requests may have started servers on these threads.
    let threads = switchboard_gateway::ConnectionThreads::start(connection_threads())?;
    let mut gateway = switchboard_gateway::Gateway::bind(listen)
        .await?
        .with_session_limits(switchboard_gateway::mcp::SessionLimits {
            max: args.max_sessions as usize,
            idle: args.session_idle,
        })
        .with_tools(args.tools.options())
        .with_app_permissions(args.app_permission.clone())
        .with_connection_limits(switchboard_gateway::listener::Limits {
            per_client: args.max_connections_per_client as usize,
            ..Default::default()
        })
        .with_connection_threads(threads.clone());
    if let Some(url) = args.public_url {
        gateway = gateway.with_public_url(url);
    }
    gateway = gateway.with_cors_origins(args.cors_origin);
    let hub = local.start().await?;
    let addr = gateway.local_addr().unwrap_or(listen);
    tracing::info!(%addr, servers = hub.status().len(), "switchboard is running: console at http://{addr}/, MCP at http://{addr}/mcp (old HTTP+SSE clients: /sse)");
    // The CLI and `switchboard stdio` on this data directory find the daemon here.
    // A listener on every address is reached on this machine through loopback.
    let reachable = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, addr.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    };
    let announcement = url::Url::parse(&format!("http://{reachable}/"))
        .map_err(std::io::Error::other)
        .and_then(|url| daemon::Announcement::write(dir, url, location.to_string()));
    let _announcement = match announcement {
        Ok(announcement) => Some(announcement),
        Err(error) => {
            tracing::warn!(
                "cannot write {} into {}: the CLI will start servers itself ({error})",
                daemon::DAEMON_FILE,
                dir.display()
            );
            None
        }
    };
    let drain = args.drain_timeout;
    let server =
        tokio::spawn(gateway.serve(hub.clone(), access, stop.clone().cancelled_owned(), drain));
    shutdown_signal().await;
    // Stop taking requests and let those in flight finish (up to the drain timeout), then close
    // every upstream session (DELETE for HTTP sessions, stdio children stopped) and the store.
    tracing::info!(?drain, "shutting down: finishing calls in flight");
    stop.cancel();
    let served = server.await;
    hub.shutdown().await;
    hub.store().close().await;
    drop(threads);
    tracing::info!("stopped");
    served??;
    Ok(0)
}

/// The environment variable with the API keys a non-loopback listener requires.
const API_KEYS_ENV: &str = "SWITCHBOARD_API_KEYS";

/// What `serve --users` needs to let users in.
struct UsersSetup {
    store: Store,
    /// How a user's workspace's hub is built (for the workspace, then started).
    workspaces: HubBuilder,
    follower: switchboard_hub::StoreFollower,
    provider: Option<Provider>,
}

/// The team's identity provider, and how its tokens name users.
type Provider = (
    Arc<switchboard_oauth::IdentityProvider>,
    switchboard_gateway::TokenClaims,
);

/// Who may use the daemon on `listen`: with `users` (`serve --users`: the store, how to open
/// a workspace, the store's follower), every request needs a user's API key or an operator key
/// from `SWITCHBOARD_API_KEYS`; else loopback listeners take this machine's requests and others
/// need an operator key.
fn access_for(
    listen: std::net::SocketAddr,
    users: Option<UsersSetup>,
    cors_origins: &[switchboard_gateway::WebOrigin],
) -> anyhow::Result<switchboard_gateway::Access> {
    let keys = std::env::var(API_KEYS_ENV).unwrap_or_default();
    let keys: Vec<&str> = keys
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect();
    if let Some(short) = keys.iter().find(|k| k.len() < 16) {
        bail!(
            "an API key in {API_KEYS_ENV} is {} characters long; use at least 16 random characters",
            short.len()
        );
    }
    if let Some(UsersSetup {
        store,
        workspaces,
        follower,
        provider,
    }) = users
    {
        let mut users = switchboard_gateway::Users::new(store, keys, workspaces)
            .with_changes(follower.subscribe());
        if let Some((provider, claims)) = provider {
            users = users.with_identity_provider(provider, claims);
        }
        return Ok(switchboard_gateway::Access::Users(Arc::new(users)));
    }
    if listen.ip().is_loopback() {
        if !cors_origins.is_empty() && keys.is_empty() {
            bail!(
                "--cors-origin lets browser apps of other origins use this daemon, and they must present an API key: set {API_KEYS_ENV} to one or more comma-separated keys (e.g. from `openssl rand -hex 32`)"
            );
        }
        return Ok(switchboard_gateway::Access::loopback_with_keys(keys));
    }
    if keys.is_empty() {
        bail!(
            "--listen {listen} is reachable from other machines, so clients must present an API key: set {API_KEYS_ENV} to one or more comma-separated keys (e.g. from `openssl rand -hex 32`), or serve --users with users' own keys"
        );
    }
    Ok(switchboard_gateway::Access::api_keys(keys))
}

/// The identity provider `--oidc-issuer` names, with how its tokens name users; its keys are
/// read now, so a provider that cannot be reached is reported at start (tokens are still
/// checked once it can be).
async fn identity_provider(
    args: &cli::OidcArgs,
    users: bool,
    oauth: &switchboard_hub::OAuthOptions,
) -> anyhow::Result<Option<Provider>> {
    let Some(issuer) = &args.oidc_issuer else {
        return Ok(None);
    };
    if !users {
        bail!("--oidc-issuer names the users of a daemon serving many: add --users");
    }
    let url = url::Url::parse(issuer).with_context(|| format!("--oidc-issuer {issuer}"))?;
    let audience = args
        .oidc_audience
        .clone()
        .context("--oidc-issuer needs --oidc-audience")?;
    let http = switchboard_oauth::OAuthHttp::new(switchboard_oauth::NetworkPolicy::for_server(
        &url,
        oauth.allow_loopback,
        oauth.allow_private,
    ));
    let provider = Arc::new(switchboard_oauth::IdentityProvider::new(
        issuer.clone(),
        audience,
        http,
    ));
    if let Err(error) = provider.prepare().await {
        tracing::warn!(issuer, "{error}; tokens are checked once it answers");
    }
    let tenant = match (&args.oidc_tenant, &args.oidc_tenant_claim) {
        (_, Some(claim)) => switchboard_gateway::TenantFrom::Claim(claim.clone()),
        (Some(tenant), None) => {
            switchboard_gateway::TenantFrom::Fixed(switchboard_core::TenantId::new(tenant.clone())?)
        }
        (None, None) => {
            switchboard_gateway::TenantFrom::Fixed(switchboard_core::TenantId::default_tenant())
        }
    };
    let claims = switchboard_gateway::TokenClaims {
        user: args.oidc_user_claim.clone(),
        tenant,
        admin_role: args.oidc_admin_role.clone(),
        groups: Some(args.oidc_groups_claim.clone()).filter(|claim| claim != "none"),
    };
    Ok(Some((provider, claims)))
}

/// As many connection threads as the runtime has workers (one per core unless
/// `--worker-threads` says otherwise); none on a single-threaded runtime, which already keeps
/// each call on one thread.
fn connection_threads() -> usize {
    let runtime = tokio::runtime::Handle::current();
    match runtime.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => 0,
        _ => runtime.metrics().num_workers(),
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// How long a user's first request waits for their workspace's servers to connect.
const WORKSPACE_SETTLE: Duration = Duration::from_secs(5);
