//! The command-line interface: argument definitions.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The version `--version` prints, and whether this build was optimized with the daemon's
/// profile (`scripts/rustc-with-profile` sets `switchboard_profile_guided` when it adds one).
const VERSION: &str = if cfg!(switchboard_profile_guided) {
    concat!(env!("CARGO_PKG_VERSION"), " (profile-guided)")
} else {
    env!("CARGO_PKG_VERSION")
};

/// Switchboard connects AI applications to many MCP servers through one daemon.
#[derive(Debug, Parser)]
#[command(name = "switchboard", version = VERSION, about)]
pub struct Cli {
    /// Where Switchboard keeps its database and vault key.
    #[arg(long, global = true, env = "SWITCHBOARD_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Keep the store in PostgreSQL (`postgres://user:password@host/db`) instead of the SQLite
    /// file in the data directory, so several replicas share one state; `sqlite://<file>` names
    /// another SQLite file. The vault key still comes from SWITCHBOARD_VAULT_KEY or the data
    /// directory's key file, and every process sharing the store needs the same one.
    #[arg(
        long,
        global = true,
        env = "SWITCHBOARD_STORE",
        value_name = "URL",
        hide_env_values = true
    )]
    pub store: Option<String>,

    /// A TOML file declaring servers; they are added or updated in the store on every run.
    #[arg(long, global = true, env = "SWITCHBOARD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Threads that run Switchboard's work. 1 keeps everything on one thread, which on a small
    /// machine costs the least CPU per call (no hand-offs between threads); more serve more
    /// traffic on more cores. Default: one per core.
    #[arg(
        long,
        global = true,
        env = "SWITCHBOARD_WORKER_THREADS",
        value_name = "N",
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub worker_threads: Option<u16>,

    /// A variable of Switchboard's environment that stdio servers inherit too (repeatable, or
    /// comma-separated in SWITCHBOARD_CHILD_ENV): a proxy, a CA bundle. Besides these they get
    /// only PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE, LC_ALL, LC_CTYPE, LC_MESSAGES, TZ,
    /// TMPDIR and TERM, and what their own definition sets.
    #[arg(
        long,
        global = true,
        env = "SWITCHBOARD_CHILD_ENV",
        value_name = "NAME",
        value_delimiter = ','
    )]
    pub child_env: Vec<String>,

    /// Whether stdio servers are kept out of the data directory with Landlock: `on` (where the
    /// kernel can; otherwise they run unconfined and the daemon says so), `required` (refuse to
    /// start one the kernel cannot confine) or `off`.
    #[arg(
        long,
        global = true,
        env = "SWITCHBOARD_CHILD_SANDBOX",
        value_name = "MODE",
        default_value = "on"
    )]
    pub child_sandbox: switchboard_upstream::SandboxMode,

    /// The running daemon to send reads, calls and `stdio` through (its URL, such as
    /// `http://127.0.0.1:8750`). By default the CLI uses the daemon serving this data directory
    /// when one runs, and starts the servers itself when none does.
    #[arg(long, global = true, env = "SWITCHBOARD_DAEMON", value_name = "URL")]
    pub daemon: Option<url::Url>,

    /// Start the servers in this process even when a daemon serves this data directory (or
    /// SWITCHBOARD_DAEMON names one).
    #[arg(long, global = true)]
    pub standalone: bool,

    /// What the audit log keeps of each tool call's arguments: `digest` (their SHA-256, the
    /// default), `redacted` (the arguments, with secrets and personal data masked) or
    /// `omitted`; `off` keeps no audit log. Calls, changes, sign-ins and approvals are recorded
    /// in the store (`GET /api/audit`).
    #[arg(
        long,
        global = true,
        env = "SWITCHBOARD_AUDIT",
        value_name = "MODE",
        default_value = "digest",
        value_parser = parse_audit
    )]
    pub audit: AuditMode,

    /// Log more (repeat for more detail). `RUST_LOG` overrides this.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// `--audit`: how calls' arguments are kept, or `None` for no audit log.
#[derive(Debug, Clone, Copy)]
pub struct AuditMode(pub Option<switchboard_core::AuditArguments>);

fn parse_audit(text: &str) -> Result<AuditMode, String> {
    match text {
        "off" => Ok(AuditMode(None)),
        other => other
            .parse()
            .map(|arguments| AuditMode(Some(arguments)))
            .map_err(|e: switchboard_core::audit::AuditError| format!("{e}, or off")),
    }
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: connect every enabled server, keep it connected, and serve them all as
    /// one MCP server at http://<listen>/mcp.
    Serve(Box<ServeArgs>),
    /// Serve every enabled server as one MCP server on stdin/stdout, for clients that launch
    /// MCP servers as commands (Claude Desktop, Cursor, VS Code).
    Stdio(StdioArgs),
    /// Manage configured servers.
    #[command(subcommand)]
    Server(ServerCommand),
    /// List the tools of connected servers.
    Tools(ListArgs),
    /// List the resources and resource templates of connected servers.
    Resources(ResourcesArgs),
    /// List the prompts of connected servers.
    Prompts(PromptsArgs),
    /// Find tools among those of every connected server: ranked exposed names with scores.
    Search(SearchArgs),
    /// Call a tool: `switchboard call <server>/<tool>`.
    Call(CallArgs),
    /// Connect to every enabled server and show how each one is doing.
    Status(JsonFlag),
    /// Sign in to a server that requires OAuth: opens the browser (or prints the URL) and waits
    /// for the redirect on a loopback port.
    Login(LoginArgs),
    /// Sign out of a server: revokes its tokens where the server supports it and deletes them.
    Logout(LogoutArgs),
    /// Show the built-in catalog of well-known remote servers.
    Catalog(JsonFlag),
    /// Write every configured server as a file `server import` (or `--config`) reads back:
    /// Switchboard's TOML, or with `--json` an `mcpServers` document. Secret values are
    /// `${NAME}` placeholders unless `--secrets` asks for them.
    Export(ExportArgs),
    /// Print a completion script for a shell: `switchboard completions bash > ...` (also zsh,
    /// fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Approve the commands tenants and members may run as stdio servers (`serve --users`):
    /// nobody but the operator defines what runs on this host.
    #[command(subcommand)]
    Commands(CommandsCommand),
    /// Define endpoints: named sets of servers and tools, each served at its own MCP path
    /// (`/mcp/e/<name>`, `/sse/e/<name>`), whose clients reach nothing else.
    #[command(subcommand)]
    Endpoint(EndpointCommand),
    /// Manage tenants, for a daemon serving many users (`serve --users`).
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Manage users and their API keys, for a daemon serving many users (`serve --users`).
    #[command(subcommand)]
    User(UserCommand),
    /// Manage a tenant's groups of users (`serve --users`).
    #[command(subcommand)]
    Group(GroupCommand),
    /// Grant a tenant's endpoints, servers and tools to users and groups (`serve --users`):
    /// once a tenant holds a grant, its members reach only what they were granted.
    #[command(subcommand)]
    Grant(GrantCommand),
    /// Rotate the keys that seal secrets at rest.
    #[command(subcommand)]
    Vault(VaultCommand),
}

/// `commands` subcommands.
#[derive(Debug, Subcommand)]
pub enum CommandsCommand {
    /// Approve a command (replacing one of the same name): `add <name> -- <program> [args...]`.
    /// Users pick it by name, and may set only the variables and add only the arguments named
    /// here.
    Add {
        /// The name users pick it by (lowercase letters, digits and single hyphens).
        name: String,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
        /// What it is, for people choosing one.
        #[arg(long)]
        description: Option<String>,
        /// An environment value of the operator's (repeatable; sealed at rest, never shown to
        /// users).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// A variable users may set for themselves, e.g. their own token (repeatable).
        #[arg(long = "user-env", value_name = "NAME")]
        user_env: Vec<String>,
        /// An argument users may add after the command's own (repeatable; each exactly as given).
        #[arg(long = "user-arg", value_name = "ARG", allow_hyphen_values = true)]
        user_arg: Vec<String>,
        /// Its working directory.
        #[arg(long)]
        cwd: Option<PathBuf>,
    },
    /// List the approved commands.
    List(JsonFlag),
    /// Withdraw an approved command: servers made from it stop starting.
    Remove {
        /// Its name.
        name: String,
    },
}

/// `endpoint` subcommands.
#[derive(Debug, Subcommand)]
pub enum EndpointCommand {
    /// Define an endpoint, or replace what it includes (its keys stay): `set support --server
    /// docs --server github:search_issues,get_issue`.
    Set {
        /// Its name (a-z 0-9 - _), the last segment of its paths.
        name: String,
        /// A server it includes: `<id>` for all its tools, `<id>:<tool>,<tool>` for only these
        /// (by the server's own names). Repeatable; its prompts and resources come with it.
        #[arg(long = "server", value_name = "ID[:TOOLS]", required = true)]
        servers: Vec<String>,
        /// What it is for.
        #[arg(long)]
        description: Option<String>,
    },
    /// List the endpoints.
    List(JsonFlag),
    /// Remove an endpoint and its keys.
    Remove {
        /// Its name.
        name: String,
    },
    /// Issue a key that reaches this endpoint only; it is printed once and never kept.
    AddKey {
        /// The endpoint.
        name: String,
    },
    /// Revoke one of an endpoint's keys, by the id `list` shows.
    RevokeKey {
        /// The endpoint.
        name: String,
        /// The key's id.
        id: String,
    },
}

/// `vault` subcommands.
#[derive(Debug, Subcommand)]
pub enum VaultCommand {
    /// Replace the master key: every secret is sealed again under its tenant's data key, and the
    /// data keys are wrapped with the new master key. The new key is read from FILE (created,
    /// mode 0600, with a fresh key if it does not exist); afterwards every process sharing the
    /// store must use it.
    RotateMaster {
        /// Where the new key is, or is to be written.
        #[arg(long, value_name = "FILE")]
        new_key_file: PathBuf,
    },
    /// Give a tenant a new data key and seal its secrets again with it.
    RotateTenant {
        /// The tenant.
        #[arg(default_value = switchboard_core::tenancy::DEFAULT_TENANT)]
        tenant: String,
    },
}

/// `tenant` subcommands.
#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Add a tenant.
    Add {
        /// Its id: 1 to 64 of a-z 0-9 . _ -.
        id: String,
        /// Its name for people (default: the id).
        #[arg(long)]
        name: Option<String>,
    },
    /// List the tenants.
    List(JsonFlag),
    /// Remove a tenant with its users, servers, tokens and layers.
    Remove {
        /// Its id.
        id: String,
    },
}

/// `user` subcommands. A user is named `<tenant>/<user>`, or `<user>` in the default tenant.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user.
    Add {
        /// `<tenant>/<user>`.
        user: String,
        /// A tenant admin: manages the tenant's shared servers and app layer.
        #[arg(long)]
        admin: bool,
        /// Their name for people.
        #[arg(long, default_value = "")]
        name: String,
        /// They sign in with the team's identity provider (`serve --oidc-issuer`): its tokens
        /// naming this id reach their workspace.
        #[arg(long)]
        identity_provider: bool,
    },
    /// Let the identity provider's tokens naming a user made here reach that user's workspace
    /// (their keys, servers and sign-ins): only once the provider's account is known to be
    /// theirs.
    Link {
        /// `<tenant>/<user>`.
        user: String,
    },
    /// List a tenant's users.
    List {
        /// The tenant.
        #[arg(default_value = switchboard_core::tenancy::DEFAULT_TENANT)]
        tenant: String,
        /// Print machine-readable JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Remove a user with their keys, own servers, tokens and layers.
    Remove {
        /// `<tenant>/<user>`.
        user: String,
    },
    /// Make an API key for a user and print it (the only time it is shown).
    Key {
        /// `<tenant>/<user>`.
        user: String,
        /// A name for the key, unique among the user's, to revoke it by.
        #[arg(long, default_value = "default")]
        name: String,
    },
    /// List a user's API keys (their names, never the keys).
    Keys {
        /// `<tenant>/<user>`.
        user: String,
        /// Print machine-readable JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Revoke one of a user's API keys.
    RevokeKey {
        /// `<tenant>/<user>`.
        user: String,
        /// The key's name.
        name: String,
    },
}

/// `--tenant`, for the commands that work in one tenant.
#[derive(Debug, Args)]
pub struct TenantFlag {
    /// The tenant.
    #[arg(long, default_value = switchboard_core::tenancy::DEFAULT_TENANT)]
    pub tenant: String,
}

/// `--tenant` and `--json`, for the lists of one tenant's things.
#[derive(Debug, Args)]
pub struct TenantList {
    #[command(flatten)]
    pub tenant: TenantFlag,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `group` subcommands.
#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Define a group with exactly these members (replacing one of that name).
    Set {
        /// Its name (as the identity provider's `groups` claim names it, if it does).
        name: String,
        /// A member: a user id of the tenant (repeatable).
        #[arg(long = "member", value_name = "USER")]
        members: Vec<String>,
        /// What it is.
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        tenant: TenantFlag,
    },
    /// List the tenant's groups and their members.
    List(TenantList),
    /// Remove a group and the grants made to it.
    Remove {
        /// Its name.
        name: String,
        #[command(flatten)]
        tenant: TenantFlag,
    },
}

/// `grant` subcommands.
#[derive(Debug, Subcommand)]
pub enum GrantCommand {
    /// Grant an endpoint, a shared server, or one tool of it to a user or group: `add --to
    /// group:eng --server github --tool create_issue`.
    Add {
        /// Whom: `user:<id>` or `group:<name>`.
        #[arg(long, value_name = "SUBJECT")]
        to: String,
        /// An endpoint: its door, and everything it includes.
        #[arg(long, conflicts_with_all = ["server", "tool"], required_unless_present = "server")]
        endpoint: Option<String>,
        /// A shared server: all its tools, prompts and resources.
        #[arg(long)]
        server: Option<String>,
        /// Only this tool of the server (by the server's own name).
        #[arg(long, requires = "server")]
        tool: Option<String>,
        #[command(flatten)]
        tenant: TenantFlag,
    },
    /// List the tenant's grants.
    List(TenantList),
    /// Revoke a grant by its id.
    Revoke {
        /// The grant's id (from `grant list`).
        id: String,
        #[command(flatten)]
        tenant: TenantFlag,
    },
}

/// `--json`.
#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Options of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address for the MCP endpoint (`/mcp`) and the health and status endpoints (loopback by
    /// default).
    #[arg(long, default_value = "127.0.0.1:8750", env = "SWITCHBOARD_LISTEN")]
    pub listen: std::net::SocketAddr,
    #[command(flatten)]
    pub tools: ToolsViewArg,
    #[command(flatten)]
    pub search_model: SearchModelArg,
    /// The public https URL (with a path) at which this daemon's
    /// `/oauth/client-metadata.json` is reachable; authorization servers that accept client ID
    /// metadata documents then know Switchboard by this URL instead of a dynamic registration.
    #[arg(long, env = "SWITCHBOARD_CLIENT_METADATA_URL")]
    pub client_metadata_url: Option<url::Url>,
    /// The URL browsers reach this daemon at, when it is not the listen address: a load
    /// balancer's in front of several replicas, or a reverse proxy's. Sign-ins started through
    /// the admin API redirect to `<URL>/oauth/callback`, which any replica on the same store
    /// completes.
    #[arg(long, value_name = "URL", env = "SWITCHBOARD_PUBLIC_URL")]
    pub public_url: Option<url::Url>,
    /// Let AI apps that run in a browser, on pages of this origin (`https://app.example.com`,
    /// `http://localhost:5173`; repeatable), use `/mcp`, `/api/tools` and `/api/tools/search`.
    /// Their requests must present an API key or token (on a loopback daemon, a key from
    /// SWITCHBOARD_API_KEYS). No other page than the daemon's own may use it.
    #[arg(
        long,
        value_name = "ORIGIN",
        env = "SWITCHBOARD_CORS_ORIGINS",
        value_delimiter = ','
    )]
    pub cors_origin: Vec<switchboard_gateway::WebOrigin>,
    /// Seconds below which the first reconnect after a failure happens (full jitter); each
    /// further failure doubles it, up to --reconnect-max.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = seconds, env = "SWITCHBOARD_RECONNECT_INITIAL")]
    pub reconnect_initial: std::time::Duration,
    /// The most seconds between reconnect attempts.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = seconds, env = "SWITCHBOARD_RECONNECT_MAX")]
    pub reconnect_max: std::time::Duration,
    /// After this many failed connection attempts in a row, a server rests in `error` until
    /// it is checked (`switchboard server check`, the console, the API), changed or the daemon
    /// restarts. Without it, servers are retried for as long as the daemon runs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), env = "SWITCHBOARD_RECONNECT_ATTEMPTS")]
    pub reconnect_attempts: Option<u32>,
    /// Connect each server only when a request first needs it, serving its last known tools
    /// (kept in the store) meanwhile; a server never listed before connects at once.
    #[arg(long, env = "SWITCHBOARD_LAZY")]
    pub lazy: bool,
    /// Seconds between health checks of each connected server (`ping`, or `server/discover`
    /// for stateless servers); 0 turns them off.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = seconds, env = "SWITCHBOARD_HEALTH_INTERVAL")]
    pub health_interval: std::time::Duration,
    /// Most requests in flight to one server at once.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..), env = "SWITCHBOARD_MAX_CONCURRENT_CALLS")]
    pub max_concurrent_calls: u32,
    /// Most requests waiting for a slot on one server; more are refused with a "busy" error.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 256,
        env = "SWITCHBOARD_MAX_QUEUED_CALLS"
    )]
    pub max_queued_calls: u32,
    /// Most MCP client sessions served at once (Streamable HTTP and HTTP+SSE together); an
    /// `initialize` beyond that is refused with an error saying so.
    #[arg(long, value_name = "N", default_value_t = switchboard_gateway::mcp::DEFAULT_MAX_SESSIONS as u32, value_parser = clap::value_parser!(u32).range(1..), env = "SWITCHBOARD_MAX_SESSIONS")]
    pub max_sessions: u32,
    /// A permission MCP Apps views may have when they ask for it (repeatable, or
    /// comma-separated): `camera`, `microphone`, `geolocation`, `clipboardWrite`. Views get none
    /// unless given here.
    #[arg(long, value_name = "PERMISSION", env = "SWITCHBOARD_APP_PERMISSIONS", value_delimiter = ',', value_parser = ["camera", "microphone", "geolocation", "clipboardWrite"])]
    pub app_permission: Vec<String>,
    /// Most connections one client address may hold at once; more are closed as they come.
    /// Every connection also must send its request's headers within 10 s and its body within
    /// 30 s.
    #[arg(long, value_name = "N", default_value_t = switchboard_gateway::listener::DEFAULT_PER_CLIENT as u32, value_parser = clap::value_parser!(u32).range(1..), env = "SWITCHBOARD_MAX_CONNECTIONS_PER_CLIENT")]
    pub max_connections_per_client: u32,
    /// Seconds a Streamable HTTP session lives without a request from its client (an open
    /// stream counts as one); then it ends and its client must initialize again.
    #[arg(long, value_name = "SECS", default_value = "300", value_parser = seconds, env = "SWITCHBOARD_SESSION_IDLE")]
    pub session_idle: std::time::Duration,
    /// On SIGTERM or Ctrl-C, seconds to let calls in flight finish before closing everything.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = seconds, env = "SWITCHBOARD_DRAIN_TIMEOUT")]
    pub drain_timeout: std::time::Duration,
    /// Seconds between checks of the store for changes other processes made (servers added by
    /// the CLI, another replica's edits). On PostgreSQL, changes are also announced as they
    /// commit and read at once; this check then only covers announcements lost while the
    /// listening connection was down.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = positive_seconds, env = "SWITCHBOARD_STORE_CHECK")]
    pub store_check: std::time::Duration,
    /// Serve many users, each in a workspace of their own: every request needs a user's API
    /// key (`switchboard user key`) or an operator key from SWITCHBOARD_API_KEYS, which reaches
    /// the default tenant's shared servers as the operator.
    #[arg(long, env = "SWITCHBOARD_USERS")]
    pub users: bool,
    /// A network or host the servers of tenant admins and members may reach besides public
    /// addresses over https (repeatable, or comma-separated): a CIDR range (`10.20.0.0/16`), an
    /// address, a host name (`mcp.internal`) or a domain (`*.corp.example.com`); plain http is
    /// allowed to these. The operator's own servers reach anything.
    #[arg(
        long,
        value_name = "NETWORK",
        env = "SWITCHBOARD_ALLOW_UPSTREAM_NETWORK",
        value_delimiter = ','
    )]
    pub allow_upstream_network: Vec<switchboard_core::network::AllowedNetwork>,
    #[command(flatten)]
    pub oidc: OidcArgs,
    /// Days the audit log keeps its records; older ones are deleted every hour.
    #[arg(
        long,
        env = "SWITCHBOARD_AUDIT_RETENTION_DAYS",
        value_name = "DAYS",
        default_value_t = 90,
        value_parser = clap::value_parser!(u32).range(1..=36_500)
    )]
    pub audit_retention_days: u32,
    /// The most records the audit log keeps; the oldest beyond it are deleted every hour.
    #[arg(
        long,
        env = "SWITCHBOARD_AUDIT_MAX_RECORDS",
        value_name = "N",
        default_value_t = 10_000_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub audit_max_records: u64,
    /// Most tool calls each client may make, as `10/s`, `600/min` or `1000/h` with an optional
    /// burst (`10/s:40`). A client is the user a request names (`X-Switchboard-User`), else its
    /// API key, else its MCP session. Calls beyond it are refused with error -32029.
    #[arg(long, value_name = "LIMIT", env = "SWITCHBOARD_CLIENT_RATE_LIMIT")]
    pub client_rate_limit: Option<switchboard_core::RateLimit>,
    /// Keep each server's last N JSON-RPC messages (at most 10,000, and 4 MiB) while nobody
    /// watches, so the console's inspector shows what happened before it was opened. Off (0)
    /// by default: then nothing is copied until someone watches.
    #[arg(
        long,
        env = "SWITCHBOARD_INSPECTOR_HISTORY",
        value_name = "N",
        default_value_t = 0,
        value_parser = clap::value_parser!(u16).range(0..=10_000)
    )]
    pub inspector_history: u16,
    /// Export traces of each call (the client's request, its admission, the exchange with the
    /// server) to this OpenTelemetry collector over OTLP/HTTP: its base URL
    /// (`http://127.0.0.1:4318`, to which `/v1/traces` is added) or its traces URL. Servers are
    /// then given each exchange's W3C trace context (`_meta.traceparent` and the HTTP
    /// `traceparent` header). The standard `OTEL_*` variables apply (service name, the
    /// collector's headers, batching, sampling). Off by default: the client's own trace context
    /// is then passed on unchanged.
    #[arg(long, value_name = "URL", env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

/// The team's identity provider, whose tokens are credentials with `serve --users`.
#[derive(Debug, Args)]
pub struct OidcArgs {
    /// Also take bearer tokens (JWTs) from this OpenID Connect provider: its issuer URL, exactly
    /// as its tokens name it. Its keys are read from its discovery document's `jwks_uri`.
    #[arg(long, env = "SWITCHBOARD_OIDC_ISSUER", requires = "oidc_audience")]
    pub oidc_issuer: Option<String>,
    /// The audience the provider's tokens must name (Switchboard's client id or API identifier
    /// there).
    #[arg(long, env = "SWITCHBOARD_OIDC_AUDIENCE")]
    pub oidc_audience: Option<String>,
    /// The claim holding the user id.
    #[arg(long, env = "SWITCHBOARD_OIDC_USER_CLAIM", default_value = "sub")]
    pub oidc_user_claim: String,
    /// The tenant every user of the provider belongs to (default: the default tenant).
    #[arg(
        long,
        env = "SWITCHBOARD_OIDC_TENANT",
        conflicts_with = "oidc_tenant_claim"
    )]
    pub oidc_tenant: Option<String>,
    /// The claim naming each user's tenant instead (the tenant must have been added).
    #[arg(long, env = "SWITCHBOARD_OIDC_TENANT_CLAIM")]
    pub oidc_tenant_claim: Option<String>,
    /// A value that, in a token's `roles` or `groups` claim, makes its user a tenant admin.
    #[arg(long, env = "SWITCHBOARD_OIDC_ADMIN_ROLE")]
    pub oidc_admin_role: Option<String>,
    /// The claim listing a token's groups: those the tenant has (`switchboard group set`) are
    /// its user's, for the grants made to them. `none` takes no groups from tokens.
    #[arg(long, env = "SWITCHBOARD_OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
}

impl ServeArgs {
    /// The supervision settings these options describe.
    pub fn supervision(&self) -> switchboard_core::Supervision {
        switchboard_core::Supervision {
            reconnect_initial: self.reconnect_initial,
            reconnect_max: self.reconnect_max,
            health_interval: Some(self.health_interval).filter(|i| !i.is_zero()),
            max_reconnect_attempts: self.reconnect_attempts,
            connect_on_first_use: self.lazy,
            max_concurrent_calls: self.max_concurrent_calls as usize,
            max_queued_calls: self.max_queued_calls as usize,
            ..Default::default()
        }
    }
}

/// Parses a number of seconds (fractions allowed) into a duration.
fn seconds(text: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number of seconds"))?;
    std::time::Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("'{text}' is not a usable number of seconds (0 or more)"))
}

/// Parses a positive number of seconds.
fn positive_seconds(text: &str) -> Result<std::time::Duration, String> {
    seconds(text).and_then(|secs| {
        (!secs.is_zero())
            .then_some(secs)
            .ok_or_else(|| format!("'{text}' must be more than 0 seconds"))
    })
}

/// Options of the listing commands.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this server.
    #[arg(long)]
    pub server: Option<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `resources`: list them, or read one.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ResourcesArgs {
    /// Read one instead of listing.
    #[command(subcommand)]
    pub read: Option<ResourcesCommand>,
    #[command(flatten)]
    pub list: ListArgs,
}

/// `resources` subcommands.
#[derive(Debug, Subcommand)]
pub enum ResourcesCommand {
    /// Read a resource: `resources read <server> <uri>` (a listed URI or a template's, filled in).
    Read {
        /// The server's id.
        server: String,
        /// The resource's URI, as the server lists it.
        uri: String,
        /// Print the server's result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `prompts`: list them, or get one.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct PromptsArgs {
    /// Get one instead of listing.
    #[command(subcommand)]
    pub get: Option<PromptsCommand>,
    #[command(flatten)]
    pub list: ListArgs,
}

/// `prompts` subcommands.
#[derive(Debug, Subcommand)]
pub enum PromptsCommand {
    /// Get a prompt's messages: `prompts get <server>/<prompt> --arg name=value`.
    Get {
        /// `<server>/<prompt>`.
        target: String,
        /// One argument as `name=value` (repeatable).
        #[arg(long = "arg", value_name = "NAME=VALUE")]
        arg: Vec<String>,
        /// Print the server's result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Options of `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write an `mcpServers` JSON document instead of TOML.
    #[arg(long)]
    pub json: bool,
    /// Write secret values (tokens, keys, URL passwords) as they are; without it they are
    /// placeholders, and the file is safe to share.
    #[arg(long)]
    pub secrets: bool,
}

/// Options of `stdio`.
#[derive(Debug, Args)]
pub struct StdioArgs {
    #[command(flatten)]
    pub tools: ToolsViewArg,
    /// Serve only what this endpoint includes (see `switchboard endpoint`).
    #[arg(long, value_name = "NAME")]
    pub endpoint: Option<String>,
    #[command(flatten)]
    pub search_model: SearchModelArg,
}

/// `--search-model`, of `serve`, `stdio` and `search`.
#[derive(Debug, Args)]
pub struct SearchModelArg {
    /// Rank tool searches by meaning as well as words, with a sentence-embedding model: a name
    /// (`all-MiniLM-L6-v2`, fetched once from the model hub into the data directory with each
    /// file's SHA-256 checked, then read from there offline; `SWITCHBOARD_MODEL_HUB` names a
    /// mirror), or a model directory (sentence-transformers layout: config.json,
    /// tokenizer.json, model.safetensors), read as it is.
    #[arg(long, value_name = "NAME|DIR", env = "SWITCHBOARD_SEARCH_MODEL")]
    pub search_model: Option<std::path::PathBuf>,
}

impl Command {
    /// The `--search-model` of a command that takes one.
    pub fn search_model_mut(&mut self) -> Option<&mut SearchModelArg> {
        match self {
            Command::Serve(args) => Some(&mut args.search_model),
            Command::Stdio(args) => Some(&mut args.search_model),
            Command::Search(args) => Some(&mut args.search_model),
            _ => None,
        }
    }
}

/// `--tools` and the deferred view's bound, of `serve` and `stdio`.
#[derive(Debug, Args)]
pub struct ToolsViewArg {
    /// The tools clients see: `all`, or `deferred` (`search_tools`, `describe_tools`,
    /// `call_tool`, `list_servers`, `set_active`, and a working set: pinned tools, the latest
    /// search's hits and the tools the session called). A client may ask for the other with
    /// `?tools=` on the URL or the `X-Switchboard-Tools` header.
    #[arg(
        long,
        value_name = "VIEW",
        default_value = "all",
        env = "SWITCHBOARD_TOOLS"
    )]
    pub tools: switchboard_gateway::mcp::ToolsView,
    /// The most tools a deferred session's working set lists (its latest hits, then the tools
    /// it called, the latest first; pinned tools and tools turned on come on top).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        env = "SWITCHBOARD_DEFERRED_MAX_TOOLS"
    )]
    pub deferred_max_tools: usize,
    /// The most tokens of definitions a deferred session's working set lists (estimated as a
    /// quarter of their JSON bytes).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 8_000,
        env = "SWITCHBOARD_DEFERRED_MAX_TOKENS"
    )]
    pub deferred_max_tokens: usize,
}

impl ToolsViewArg {
    /// The gateway's tools options these arguments say.
    pub fn options(&self) -> switchboard_gateway::mcp::ToolsOptions {
        switchboard_gateway::mcp::ToolsOptions {
            view: self.tools,
            working_set: switchboard_gateway::mcp::WorkingSetLimits {
                tools: self.deferred_max_tools,
                tokens: self.deferred_max_tokens,
            },
        }
    }
}

/// Options of `search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What the tool is for, in words ("create a github issue"); with `--regex`, a regular
    /// expression matched against names, titles and descriptions.
    pub query: String,
    /// How many tools to show at most.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Match a regular expression instead of ranking words.
    #[arg(long)]
    pub regex: bool,
    /// Leave out tools scoring below this, in the ranking's scale (meaning and words: about
    /// -1 to 1.1, with 0.05 the floor already applied; words alone: BM25F, unbounded).
    #[arg(long, value_parser = finite_score)]
    pub min_score: Option<f32>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub search_model: SearchModelArg,
}

/// A score given on the command line: a finite number.
fn finite_score(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(score) if score.is_finite() => Ok(score),
        _ => Err(format!("'{text}' is not a finite number")),
    }
}

/// Options of `call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// `<server>/<tool>`.
    pub target: String,
    /// All arguments as one JSON object.
    #[arg(long, conflicts_with = "arg")]
    pub args: Option<String>,
    /// One argument as `key=value` (repeatable); values are converted to the type the tool's
    /// schema declares.
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    pub arg: Vec<String>,
    /// Print the tool result as JSON.
    #[arg(long)]
    pub json: bool,
    /// When the server wants more OAuth scope for this call, print the sign-in URL instead of
    /// opening the browser.
    #[arg(long)]
    pub no_browser: bool,
}

/// `server` subcommands.
#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Add a server: `add <id> <url>`, `add <id> -- <command> [args...]`, or `add <catalog-name>`.
    Add(Box<AddArgs>),
    /// List configured servers.
    List(JsonFlag),
    /// Show one server's configuration.
    Show(IdArgs),
    /// Connect to one server now and show how it is doing (fails unless it connects).
    Check(IdArgs),
    /// Try a server's definition: connect as the daemon would, list what it offers, and close
    /// (nothing is kept running; fails unless it connects).
    Test(IdArgs),
    /// Remove a server.
    Remove(IdArgs),
    /// Enable a server.
    Enable(IdArgs),
    /// Disable a server (kept, but not connected).
    Disable(IdArgs),
    /// Hide tools of a server from listings and refuse calls to them.
    DisableTool(ToolArgs),
    /// Make previously disabled tools available again.
    EnableTool(ToolArgs),
    /// Set the prefix of a server's exposed names (`{prefix}__{name}`; `''` for none).
    SetPrefix(PrefixArgs),
    /// Set whether calls of tools become tasks for clients that can take them:
    /// `forbidden`, `optional` (the default: when a call runs long) or `required`.
    SetTaskMode(TaskModeArgs),
    /// Pin tools: the deferred tool view lists them from the start, beside search_tools and
    /// call_tool.
    Pin(ToolArgs),
    /// Unpin tools.
    Unpin(ToolArgs),
    /// Set who may call tools (`allowed_callers`): `--callers direct,code_execution,agent:<name>`,
    /// or `--any` for everyone again.
    SetCallers(CallersArgs),
    /// Give a tool search notes: aliases, the words its users say, example requests
    /// ("PR, pull request; bring my branch up to date with main"). They join what tool search
    /// reads of it (words and meaning) and are never shown to clients; `--clear` removes them.
    SetToolNotes(ToolNotesArgs),
    /// Limit calls to a server (no tools named) or to each of some of its tools:
    /// `--limit 10/s` (or `600/min`, `1000/h`, with an optional burst: `10/s:40`), or `--none`.
    SetRateLimit(RateLimitArgs),
    /// How the server's requests that are safe to repeat (lists, reads, prompts, calls of
    /// tools annotated read-only or idempotent) are sent again after a transient failure:
    /// `off`, `quick` (2 tries, 1 s; the default) or `standard` (3 tries, 1 s doubling).
    /// `--safe TOOL` counts a tool's calls as safe to repeat too; `--not-safe TOOL` no longer.
    SetRetries(RetriesArgs),
    /// Say what clients see of a tool in place of its server: `--name`, `--title`,
    /// `--description`, `--annotation destructiveHint=true`, and `--fixed repo='"acme/site"'`
    /// (a JSON value the call always gets, hidden from the model); `--clear` for the server's
    /// own again.
    OverrideTool(OverrideArgs),
    /// Make each call of some tools from MCP clients wait for a person's approval (in the
    /// console, or `POST /api/questions/{id}`): `set-approval <id> <tool>...`, `--destructive`
    /// for every tool annotated destructive, `--off` to undo, `--timeout SECS` for the wait
    /// (300 by default; then the call is refused).
    SetApproval(ApprovalArgs),
    /// What happens when a tool's definition (name, title, description, schemas, annotations)
    /// is no longer the approved one (first seen, or accepted): `warn` (served and announced;
    /// the default), `hold` (kept from clients until someone accepts it) or `off`.
    SetDefinitionChanges(DefinitionChangesArgs),
    /// Connect to a server and show its tools whose definitions are not the approved ones, with
    /// what changed.
    Definitions(IdArgs),
    /// Accept the current definitions of a server's tools, so that held ones are served again.
    AcceptDefinition(ToolArgs),
    /// Check and rewrite every call of a server's tools on its way: mask secrets or personal
    /// data in the arguments (`--redact-arguments secrets,personal`) or the results
    /// (`--redact-results ...`), and ask a webhook before and after each call (`--webhook URL`,
    /// which may allow, refuse or rewrite; `--fail-open` lets calls through when it fails).
    /// `--clear` removes them all.
    SetGuardrails(GuardrailsArgs),
    /// Import servers from a Claude Desktop / Cursor / VS Code JSON file or a Switchboard TOML file.
    Import(ImportArgs),
}

/// Options of `server set-approval`.
#[derive(Debug, Args)]
pub struct ApprovalArgs {
    /// The server's id.
    pub id: String,
    /// Upstream tool names.
    pub tools: Vec<String>,
    /// Every tool annotated `destructiveHint: true` (by the server or an override).
    #[arg(long)]
    pub destructive: bool,
    /// No longer wait for approval (for the tools named, or with `--destructive`).
    #[arg(long)]
    pub off: bool,
    /// How long a call waits for approval, in seconds (1 to 86400), before it is refused.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: Option<u64>,
}

/// Options of `server set-guardrails`.
#[derive(Debug, Args)]
pub struct GuardrailsArgs {
    /// The server's id.
    pub id: String,
    /// Pattern sets masked in the arguments before the server gets them: `secrets`, `personal`.
    #[arg(long, value_delimiter = ',', value_name = "SETS")]
    pub redact_arguments: Vec<switchboard_core::redact::PatternSet>,
    /// Pattern sets masked in the results before clients get them.
    #[arg(long, value_delimiter = ',', value_name = "SETS")]
    pub redact_results: Vec<switchboard_core::redact::PatternSet>,
    /// The webhook asked before and after each call (`POST`, JSON).
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// How long the webhook may take, in ms (2000 by default; at most 30000).
    #[arg(long, value_name = "MS")]
    pub webhook_timeout: Option<u64>,
    /// Let calls through when the webhook fails (by default they are refused).
    #[arg(long)]
    pub fail_open: bool,
    /// Remove the server's guardrails.
    #[arg(long, conflicts_with_all = ["redact_arguments", "redact_results", "webhook"])]
    pub clear: bool,
}

/// Options of `server set-definition-changes`.
#[derive(Debug, Args)]
pub struct DefinitionChangesArgs {
    /// The server's id.
    pub id: String,
    /// `warn`, `hold` or `off`.
    pub setting: switchboard_core::definitions::DefinitionChanges,
}

/// Options of `server override-tool`.
#[derive(Debug, Args)]
pub struct OverrideArgs {
    /// The server's id.
    pub id: String,
    /// The tool, by the server's own name.
    pub tool: String,
    /// The name clients call it by (before the server's prefix).
    #[arg(long)]
    pub name: Option<String>,
    /// Its title.
    #[arg(long)]
    pub title: Option<String>,
    /// Its description, in place of the server's.
    #[arg(long)]
    pub description: Option<String>,
    /// An annotation set over the server's: `readOnlyHint`, `destructiveHint`,
    /// `idempotentHint`, `openWorldHint` (`=true` or `=false`), `title` (repeatable).
    #[arg(long = "annotation", value_name = "NAME=VALUE")]
    pub annotations: Vec<String>,
    /// An argument fixed to a JSON value (a bare word is taken as a string), left out of the
    /// schema clients see (repeatable).
    #[arg(long = "fixed", value_name = "NAME=JSON")]
    pub fixed: Vec<String>,
    /// Forget the override: the tool is as its server says.
    #[arg(long, conflicts_with_all = ["name", "title", "description", "annotations", "fixed"])]
    pub clear: bool,
}

/// Options of `login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server id.
    pub server: String,
    /// Print the URL instead of opening the system browser.
    #[arg(long)]
    pub no_browser: bool,
    /// Give up after this many seconds without a redirect.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Ask for this scope too (repeatable), on top of those of the last sign-in and of any
    /// step-up the server asked for since.
    #[arg(long, value_name = "SCOPE")]
    pub scope: Vec<String>,
}

/// Options of `logout`.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The server id.
    pub server: String,
}

/// Options of `server add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The new server's id (lowercase letters, digits, hyphens), or a catalog name.
    pub id: String,
    /// An http(s):// or ws(s):// URL.
    pub url: Option<String>,
    /// For stdio servers: the command and its arguments, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
    /// Display name.
    #[arg(long)]
    pub name: Option<String>,
    /// Description.
    #[arg(long)]
    pub description: Option<String>,
    /// A header `Name: value` or `Name=value` (repeatable); credentials are detected and redacted.
    #[arg(long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    /// A header whose value is always redacted on display (repeatable).
    #[arg(long = "secret-header", value_name = "NAME=VALUE")]
    pub secret_headers: Vec<String>,
    /// An environment variable for a stdio server (repeatable); credentials are detected.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// An environment variable whose value is always redacted on display (repeatable).
    #[arg(long = "secret-env", value_name = "NAME=VALUE")]
    pub secret_env: Vec<String>,
    /// Working directory for a stdio server.
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Timeout for ordinary requests, in milliseconds.
    #[arg(long)]
    pub request_timeout_ms: Option<u64>,
    /// Timeout for tool calls, in milliseconds.
    #[arg(long)]
    pub tool_timeout_ms: Option<u64>,
    /// Add it disabled.
    #[arg(long)]
    pub disabled: bool,
    /// Try the definition first (as `server test` does) and add it only if it connects or
    /// wants an OAuth sign-in.
    #[arg(long)]
    pub test: bool,
    /// The prefix of its tools, prompts and resource URIs in Switchboard's own MCP server
    /// (`{prefix}__{name}`); the server id by default, `''` for names unchanged.
    #[arg(long)]
    pub prefix: Option<String>,
    /// An OAuth client id registered for this server (used before client ID metadata documents
    /// and dynamic registration).
    #[arg(long)]
    pub oauth_client_id: Option<String>,
    /// The secret of that OAuth client (sealed at rest; prefer the environment variable so it
    /// stays out of shell history).
    #[arg(
        long,
        requires = "oauth_client_id",
        env = "SWITCHBOARD_OAUTH_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub oauth_client_secret: Option<String>,
    /// The authorization server (issuer) the OAuth client belongs to; the credentials are never
    /// sent to another one.
    #[arg(long, requires = "oauth_client_id")]
    pub oauth_issuer: Option<String>,
    /// How tokens are obtained: `authorization-code` (a person signs in with
    /// `switchboard login`) or `client-credentials` (machine to machine, with the client's
    /// secret or private key).
    #[arg(long, requires = "oauth_client_id", value_parser = ["authorization-code", "client-credentials"])]
    pub oauth_grant: Option<String>,
    /// A PEM private key file for `private_key_jwt` client authentication (sealed at rest).
    #[arg(long, requires = "oauth_client_id")]
    pub oauth_private_key: Option<PathBuf>,
    /// For an HTTP URL: use only this transport instead of detecting it. `sessions` is
    /// Streamable HTTP with `initialize` (2025-03-26 .. 2025-11-25), `stateless` the 2026-07-28
    /// revision, `sse` the old HTTP+SSE transport (2024-11-05). Detection prefers the newest
    /// a server answers; pin `sessions` for a server whose stateless side offers less.
    #[arg(long, value_parser = ["sessions", "stateless", "sse"])]
    pub transport: Option<String>,
    /// The redirect URI registered with that client, when its authorization server wants an
    /// exact one: an `http://127.0.0.1:<port>/<path>` where `switchboard login` listens.
    #[arg(long, requires = "oauth_client_id")]
    pub oauth_redirect_uri: Option<String>,
    /// The JWS algorithm of that key.
    #[arg(long, requires = "oauth_private_key", default_value = "RS256")]
    pub oauth_signing_alg: String,
    /// Replace an existing server with the same id.
    #[arg(long)]
    pub replace: bool,
}

/// A server id.
#[derive(Debug, Args)]
pub struct IdArgs {
    /// The server's id.
    pub id: String,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A server id and tool names.
#[derive(Debug, Args)]
pub struct ToolArgs {
    /// The server's id.
    pub id: String,
    /// Upstream tool names.
    #[arg(required = true)]
    pub tools: Vec<String>,
}

/// Options of `server set-prefix`.
#[derive(Debug, Args)]
pub struct PrefixArgs {
    /// The server's id.
    pub id: String,
    /// The new prefix (lowercase letters, digits, hyphens), or `''` for names unchanged.
    pub prefix: String,
}

/// Options of `server set-tool-notes`.
#[derive(Debug, Args)]
pub struct ToolNotesArgs {
    /// The server's id.
    pub id: String,
    /// The tool, by the server's own name.
    pub tool: String,
    /// The notes (at most 2,000 characters).
    #[arg(required_unless_present = "clear", conflicts_with = "clear")]
    pub notes: Option<String>,
    /// Remove the tool's notes.
    #[arg(long)]
    pub clear: bool,
}

/// Options of `server set-callers`.
#[derive(Debug, Args)]
pub struct CallersArgs {
    /// The server's id.
    pub id: String,
    /// Who may call the tools: `direct` (the model's own calls), `code_execution` (code a
    /// model wrote), `agent:<name>`; comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        required_unless_present = "any",
        conflicts_with = "any"
    )]
    pub callers: Vec<switchboard_core::Caller>,
    /// Let anyone call the tools again.
    #[arg(long)]
    pub any: bool,
    /// Upstream tool names.
    #[arg(required = true)]
    pub tools: Vec<String>,
}

/// Options of `server set-rate-limit`.
#[derive(Debug, Args)]
pub struct RateLimitArgs {
    /// The server's id.
    pub id: String,
    /// Calls per period: `10/s`, `600/min`, `1000/h`, with an optional burst (`10/s:40`).
    #[arg(long, required_unless_present = "none", conflicts_with = "none")]
    pub limit: Option<switchboard_core::RateLimit>,
    /// Remove the limit.
    #[arg(long)]
    pub none: bool,
    /// Upstream tool names, each limited on its own; none: the whole server.
    pub tools: Vec<String>,
}

/// Options of `server set-retries`.
#[derive(Debug, Args)]
pub struct RetriesArgs {
    /// The server's id.
    pub id: String,
    /// `off`, `quick` or `standard`.
    pub preset: switchboard_core::RetryPreset,
    /// An upstream tool whose calls may be sent again (repeatable).
    #[arg(long = "safe", value_name = "TOOL")]
    pub safe: Vec<String>,
    /// An upstream tool whose calls are no longer sent again unless the server annotates it
    /// read-only or idempotent (repeatable).
    #[arg(long = "not-safe", value_name = "TOOL")]
    pub not_safe: Vec<String>,
}

/// Options of `server set-task-mode`.
#[derive(Debug, Args)]
pub struct TaskModeArgs {
    /// The server's id.
    pub id: String,
    /// `forbidden` (never a task), `optional` (a task when the call runs long) or `required`
    /// (always a task; clients that cannot take tasks are refused).
    pub mode: switchboard_core::TaskMode,
    /// Upstream tool names.
    #[arg(required = true)]
    pub tools: Vec<String>,
}

/// Options of `server import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file to read.
    pub file: PathBuf,
    /// Replace servers that already exist (otherwise they are skipped).
    #[arg(long)]
    pub replace: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}
