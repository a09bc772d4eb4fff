//! The [`Store`] handle, its rows and the contexts its secrets are sealed under; its queries are
//! spread over the crate's modules, one table or concern each (`impl Store` blocks).

use crate::db::{Db, on_db};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use switchboard_core::{
    DetectedTransport, ServerDefinition, ServerId, TenantId, Timeouts, TransportSpec, Workspace,
};
use switchboard_oauth::GrantKey;

use crate::{DATABASE_FILE, KEY_FILE, StoreError, StoreLocation, Vault, VaultError, db, keys};

/// A cached era-probe result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedProbe {
    /// The URL the probe ran against; the cache holds only while the server's URL is unchanged.
    /// Only its SHA-256 digest is stored.
    pub target: String,
    /// What the probe found.
    pub detected: DetectedTransport,
    /// The protocol version negotiated at the time, if known.
    pub protocol_version: Option<String>,
}

/// The store: definitions, credentials and the rest, on SQLite or PostgreSQL, every secret sealed
/// by the vault.
///
/// A store reads and writes for one [`Workspace`]: [`Store::for_workspace`] gives the handle a
/// user's requests go through, which sees their tenant's shared servers and their own, and
/// nobody else's. Tenants, users and API keys themselves are managed through any handle (the
/// operator's tools hold the local one).
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) db: Db,
    pub(crate) vault: std::sync::Arc<Vault>,
    pub(crate) workspace: std::sync::Arc<Workspace>,
    pub(crate) keys: std::sync::Arc<keys::DataKeys>,
}

/// A value that moves whenever the servers, the activation layers or the users change, read without
/// opening any sealed value: a daemon checks it often, and reads what moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFingerprint {
    /// For each tenant and owner ('' for the tenant's shared servers), the number of servers
    /// and of their users' own settings, and the sum of their change times. Kept apart so that
    /// a change wakes only the workspaces that see it ([`StoreFingerprint::servers_seen_by`]).
    pub servers: std::sync::Arc<std::collections::BTreeMap<(String, String), (i64, i64)>>,
    /// The activation layers' number and the sum of their change times.
    pub activations: (i64, i64),
    /// The endpoints' number and the sum of their change times.
    pub endpoints: (i64, i64),
    /// The tool definitions admins accepted: their number and the sum of their times (first
    /// sightings are left out: each workspace compares with them as it lists its tools).
    pub accepted_definitions: (i64, i64),
    /// The users' and API keys' number, and how many times they changed: a key revoked, a
    /// user removed, or either replaced by another between two readings moves it.
    pub principals: (i64, i64),
    /// The groups', memberships' and grants' number, and how many times they changed.
    pub grants: (i64, i64),
}

impl StoreFingerprint {
    /// What of the servers `workspace` sees: its tenant's shared servers, and its user's own
    /// servers and settings.
    pub fn servers_seen_by(&self, workspace: &Workspace) -> [(i64, i64); 2] {
        let tenant = workspace.tenant().as_str().to_owned();
        let user = workspace
            .user()
            .map(ToString::to_string)
            .unwrap_or_default();
        let of = |owner: String| {
            self.servers
                .get(&(tenant.clone(), owner))
                .copied()
                .unwrap_or_default()
        };
        [of(String::new()), of(user)]
    }
}

impl Store {
    /// Closes every connection (an SQLite database and its write-ahead log are then complete on
    /// disk).
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// Opens (creating if needed) the embedded store in `data_dir`: the directory (mode 0700),
    /// the vault key and the SQLite database, then applies pending migrations.
    pub async fn open(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_at(
            &StoreLocation::Sqlite(data_dir.join(DATABASE_FILE)),
            data_dir,
        )
        .await
    }

    /// Opens the store at `location`, its vault key from `SWITCHBOARD_VAULT_KEY` or else the key
    /// file in `data_dir` (created, mode 0600, with the directory, if missing).
    pub async fn open_at(location: &StoreLocation, data_dir: &Path) -> Result<Self, StoreError> {
        create_private_dir(data_dir)?;
        let vault = Vault::load_or_create(&data_dir.join(KEY_FILE))?;
        Self::open_with_vault(location, vault).await
    }

    /// Opens the store at `location` with an explicit vault. A store already holding secrets
    /// sealed with another key is refused here, before anything is written.
    pub async fn open_with_vault(
        location: &StoreLocation,
        vault: Vault,
    ) -> Result<Self, StoreError> {
        let db = match location {
            StoreLocation::Sqlite(path) => Db::open_sqlite(path).await?,
            StoreLocation::Postgres(url) => Db::open_postgres(url).await?,
        };
        let store = Self {
            db,
            vault: std::sync::Arc::new(vault),
            workspace: std::sync::Arc::new(Workspace::Local),
            keys: std::sync::Arc::default(),
        };
        store.check_vault_key().await?;
        Ok(store)
    }

    /// The same store, reading and writing for `workspace`.
    pub fn for_workspace(&self, workspace: Workspace) -> Self {
        Self {
            workspace: std::sync::Arc::new(workspace),
            ..self.clone()
        }
    }

    /// The workspace this handle reads and writes for.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The engine this store runs on: `sqlite` or `postgres`.
    pub fn engine(&self) -> &'static str {
        match self.db {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    /// Checks the key against the value sealed when the store was first opened (sealing one
    /// now if there is none).
    pub(crate) async fn check_vault_key(&self) -> Result<(), StoreError> {
        const CONTEXT: &str = VAULT_CHECK_CONTEXT;
        let sealed = self.vault.seal(CONTEXT, VAULT_CHECK_VALUE);
        // The first writer wins; every later opener (a replica starting at the same moment too)
        // reads what it wrote.
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO store_meta (name, value) VALUES ('vault_check', $1)
             ON CONFLICT(name) DO NOTHING",
        )
        .bind(&sealed)
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        let stored: String = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT value FROM store_meta WHERE name = 'vault_check'",
        )
        .fetch_one(pool)
        .await)?;
        match self.vault.unseal(CONTEXT, &stored) {
            Ok(_) => Ok(()),
            Err(VaultError::Unseal { .. }) => Err(StoreError::OtherVaultKey),
            Err(error) => Err(error.into()),
        }
    }

    /// Adds a new server; fails if the id is taken (in this workspace: by the tenant's shared
    /// servers or the user's own).
    pub async fn add_server(&self, def: &ServerDefinition) -> Result<(), StoreError> {
        if self.get_server(&def.id).await?.is_some() {
            return Err(StoreError::AlreadyExists(def.id.clone()));
        }
        self.put_server(def).await
    }

    /// Inserts or replaces a server. A new one is the tenant's, shared, when this workspace
    /// manages the tenant, else its user's own; a shared one is replaced only by a workspace
    /// that manages the tenant. A changed transport invalidates the cached probe.
    pub async fn put_server(&self, def: &ServerDefinition) -> Result<(), StoreError> {
        let key = match self.stored_row(&def.id).await? {
            Some(row) => self.writable(&def.id, row)?.key,
            None => self.new_row_key(&def.id),
        };
        let (tenant, owner) = self.new_row_owner();
        let now = now_ms();
        let transport = self.seal_transport(&key, &tenant, def).await?;
        let timeouts = serde_json::to_string(&def.timeouts).map_err(|e| corrupt(&def.id, e))?;
        let disabled =
            serde_json::to_string(&def.disabled_tools).map_err(|e| corrupt(&def.id, e))?;
        let task_modes = serde_json::to_string(&def.task_modes).map_err(|e| corrupt(&def.id, e))?;
        let policies = serde_json::to_string(&def.policies).map_err(|e| corrupt(&def.id, e))?;
        let oauth_client = self.seal_oauth_client(&key, &tenant, def).await?;
        on_db!(&self.db, pool => {
        let mut tx = pool.begin().await?;
        sqlx::query(
            "INSERT INTO servers (id, display_name, description, transport_json, timeouts_json,
                                  enabled, disabled_tools_json, created_at_ms, updated_at_ms,
                                  oauth_client_sealed, exposed_prefix, task_modes_json,
                                  tool_policies_json, tenant, owner, name)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12, $13, $14, $15)
             ON CONFLICT(id) DO UPDATE SET display_name = $2, description = $3,
                transport_json = $4, timeouts_json = $5, enabled = $6,
                disabled_tools_json = $7, updated_at_ms = $8, oauth_client_sealed = $9,
                exposed_prefix = $10, task_modes_json = $11, tool_policies_json = $12",
        )
        .bind(&key)
        .bind(&def.display_name)
        .bind(&def.description)
        .bind(transport)
        .bind(timeouts)
        .bind(def.enabled)
        .bind(disabled)
        .bind(now)
        .bind(oauth_client)
        .bind(def.prefix.as_deref())
        .bind(task_modes)
        .bind(policies)
        .bind(tenant.as_str())
        .bind(&owner)
        .bind(def.id.as_str())
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM server_probes WHERE server_id = $1 AND target_digest <> $2")
            .bind(&key)
            .bind(target_digest(&def.transport.target()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
        })?;
        Ok(())
    }

    /// The row this workspace sees under `id`: the user's own server, else the tenant's shared
    /// one.
    pub(crate) async fn stored_row(&self, id: &ServerId) -> Result<Option<StoredRow>, StoreError> {
        let (tenant, user) = self.visible_owners();
        let row: Option<(String, String)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT id, owner FROM servers
             WHERE tenant = $1 AND (owner = '' OR owner = $2) AND name = $3
             ORDER BY owner DESC LIMIT 1",
        )
        .bind(tenant.as_str())
        .bind(user)
        .bind(id.as_str())
        .fetch_optional(pool)
        .await)?;
        Ok(row.map(|(key, owner)| StoredRow { key, owner }))
    }

    /// `row`, if this workspace may change it: a shared server only when it manages the tenant.
    pub(crate) fn writable(&self, id: &ServerId, row: StoredRow) -> Result<StoredRow, StoreError> {
        if row.owner.is_empty() && !self.workspace.manages_tenant() {
            return Err(StoreError::SharedServer(id.clone()));
        }
        Ok(row)
    }

    /// The row key of `id` as this workspace's server: the id itself for the default tenant's
    /// shared servers (as every server stored before tenants was), else
    /// `<tenant>/<owner>/<id>`.
    pub(crate) fn new_row_key(&self, id: &ServerId) -> String {
        let (tenant, owner) = self.new_row_owner();
        if tenant.is_default() && owner.is_empty() {
            id.to_string()
        } else {
            format!("{tenant}/{owner}/{id}")
        }
    }

    /// Whose a server this workspace adds is: shared when it manages the tenant, else its
    /// user's.
    pub(crate) fn new_row_owner(&self) -> (TenantId, String) {
        let owner = match self.workspace.user() {
            Some(user) if !self.workspace.manages_tenant() => user.to_string(),
            _ => String::new(),
        };
        (self.workspace.tenant(), owner)
    }

    /// The tenant, and the owner besides '' whose servers this workspace sees ('' for none).
    pub(crate) fn visible_owners(&self) -> (TenantId, String) {
        let user = self.workspace.user().map(ToString::to_string);
        (self.workspace.tenant(), user.unwrap_or_default())
    }

    /// The servers this workspace's user owns (none in the local workspace): the others it
    /// sees are its tenant's, shared.
    pub async fn own_server_ids(&self) -> Result<std::collections::HashSet<ServerId>, StoreError> {
        let Some(user) = self.workspace.user() else {
            return Ok(std::collections::HashSet::new());
        };
        let names: Vec<String> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT name FROM servers WHERE tenant = $1 AND owner = $2",
        )
        .bind(self.workspace.tenant().as_str())
        .bind(user.as_str())
        .fetch_all(pool)
        .await)?;
        Ok(names
            .into_iter()
            .filter_map(|name| ServerId::new(name).ok())
            .collect())
    }

    /// The row key of `id` in this workspace, or [`StoreError::NotFound`].
    pub(crate) async fn row_key(&self, id: &ServerId) -> Result<String, StoreError> {
        self.stored_row(id)
            .await?
            .map(|row| row.key)
            .ok_or_else(|| StoreError::NotFound(id.clone()))
    }

    /// Where the OAuth tokens of server `id` are kept for this workspace's user: the server's
    /// row (the user's own server, or the shared one) and the user (`default` in the local
    /// workspace), so every user of a shared server signs in as themselves.
    pub async fn grant_key(&self, id: &ServerId) -> Result<GrantKey, StoreError> {
        let server = match self.stored_row(id).await? {
            Some(row) => row.key,
            None => self.new_row_key(id),
        };
        let principal = grant_principal(self.workspace.user());
        Ok(GrantKey { server, principal })
    }

    /// Stores the servers an import found: each one new, or (with `replace`) every one, a
    /// replaced one keeping what a file cannot say
    /// ([`ServerDefinition::keep_unwritten_settings`]). Returns those stored, and the ids
    /// skipped because they are taken.
    pub async fn import_servers(
        &self,
        servers: Vec<ServerDefinition>,
        replace: bool,
    ) -> Result<(Vec<ServerDefinition>, Vec<ServerId>), StoreError> {
        let (mut imported, mut taken) = (Vec::new(), Vec::new());
        for mut def in servers {
            match self.get_server(&def.id).await? {
                Some(_) if !replace => {
                    taken.push(def.id);
                    continue;
                }
                Some(stored) => def.keep_unwritten_settings(&stored),
                None => {}
            }
            self.put_server(&def).await?;
            imported.push(def);
        }
        Ok((imported, taken))
    }

    /// One server by id.
    pub async fn get_server(&self, id: &ServerId) -> Result<Option<ServerDefinition>, StoreError> {
        let (tenant, user) = self.visible_owners();
        let row: Option<ServerRow> = on_db!(&self.db, pool => sqlx::query_as(&format!(
            "{SELECT_SERVER_COLUMNS} AND name = $3 ORDER BY owner DESC LIMIT 1"
        ))
        .bind(tenant.as_str())
        .bind(user)
        .bind(id.as_str())
        .fetch_optional(pool)
        .await)?;
        match row {
            Some(row) => {
                let reach = self.reach().await?;
                self.server_as_seen(row, reach.as_ref()).await
            }
            None => Ok(None),
        }
    }

    /// Every server this workspace sees, ordered by id; where the user's own server and a
    /// shared one have one id, the user's own.
    pub async fn list_servers(&self) -> Result<Vec<ServerDefinition>, StoreError> {
        let (tenant, user) = self.visible_owners();
        let mut rows: Vec<ServerRow> = on_db!(&self.db, pool => sqlx::query_as(&format!(
            "{SELECT_SERVER_COLUMNS} ORDER BY name, owner DESC"
        ))
        .bind(tenant.as_str())
        .bind(user)
        .fetch_all(pool)
        .await)?;
        rows.dedup_by(|later, first| later.name == first.name);
        let reach = self.reach().await?;
        let mut servers = Vec::with_capacity(rows.len());
        for row in rows {
            servers.extend(self.server_as_seen(row, reach.as_ref()).await?);
        }
        Ok(servers)
    }

    /// Whether the database answers a trivial query (for readiness checks).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let _: (i32,) = on_db!(&self.db, pool => sqlx::query_as("SELECT 1").fetch_one(pool).await)?;
        Ok(())
    }

    /// What the servers, activation layers and users are now (see [`StoreFingerprint`]).
    pub async fn fingerprint(&self) -> Result<StoreFingerprint, StoreError> {
        let groups: Vec<(String, String, i64, i64)> = on_db!(&self.db, pool => sqlx::query_as(
                "SELECT tenant, owner, COUNT(*), CAST(COALESCE(SUM(updated_at_ms), 0) AS BIGINT)
                 FROM servers GROUP BY tenant, owner
                 UNION ALL
                 SELECT tenant, user_id, COUNT(*), CAST(COALESCE(SUM(updated_at_ms), 0) AS BIGINT)
                 FROM user_server_settings GROUP BY tenant, user_id",
            )
            .fetch_all(pool)
            .await)?;
        let mut servers = std::collections::BTreeMap::<_, (i64, i64)>::new();
        for (tenant, owner, count, sum) in groups {
            let group = servers.entry((tenant, owner)).or_default();
            *group = (group.0 + count, group.1.wrapping_add(sum));
        }
        let (
            layers,
            layers_sum,
            endpoints,
            endpoints_sum,
            accepted,
            accepted_sum,
            principals,
            principals_sum,
            grants,
            grants_version,
        ): (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) = on_db!(&self.db, pool => sqlx::query_as(
                "SELECT (SELECT COUNT(*) FROM activations),
                        (SELECT CAST(COALESCE(SUM(updated_at_ms), 0) AS BIGINT) FROM activations),
                        (SELECT COUNT(*) FROM endpoints),
                        (SELECT CAST(COALESCE(SUM(updated_at_ms), 0) AS BIGINT) FROM endpoints),
                        (SELECT COUNT(*) FROM tool_definitions WHERE accepted_by <> ''),
                        (SELECT CAST(COALESCE(SUM(approved_at_ms), 0) AS BIGINT)
                         FROM tool_definitions WHERE accepted_by <> ''),
                        (SELECT COUNT(*) FROM users) + (SELECT COUNT(*) FROM api_keys),
                        (SELECT CAST(COALESCE(MAX(value), '0') AS BIGINT) FROM store_meta
                         WHERE name = 'principals_version'),
                        (SELECT COUNT(*) FROM grants) + (SELECT COUNT(*) FROM group_members)
                            + (SELECT COUNT(*) FROM user_groups),
                        (SELECT CAST(COALESCE(MAX(value), '0') AS BIGINT) FROM store_meta
                         WHERE name = 'grants_version')",
            )
            .fetch_one(pool)
            .await)?;
        Ok(StoreFingerprint {
            servers: std::sync::Arc::new(servers),
            activations: (layers, layers_sum),
            endpoints: (endpoints, endpoints_sum),
            accepted_definitions: (accepted, accepted_sum),
            principals: (principals, principals_sum),
            grants: (grants, grants_version),
        })
    }

    /// Removes a server and everything stored for it.
    pub async fn remove_server(&self, id: &ServerId) -> Result<(), StoreError> {
        let Some(row) = self.stored_row(id).await? else {
            return Err(StoreError::NotFound(id.clone()));
        };
        let key = self.writable(id, row)?.key;
        let done = on_db!(&self.db, pool => sqlx::query("DELETE FROM servers WHERE id = $1")
            .bind(&key)
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
        if done == 0 {
            return Err(StoreError::NotFound(id.clone()));
        }
        Ok(())
    }

    /// Enables or disables a server.
    pub async fn set_enabled(&self, id: &ServerId, enabled: bool) -> Result<(), StoreError> {
        let Some(row) = self.stored_row(id).await? else {
            return Err(StoreError::NotFound(id.clone()));
        };
        let key = self.writable(id, row)?.key;
        let done = on_db!(&self.db, pool => sqlx::query("UPDATE servers SET enabled = $2, updated_at_ms = $3 WHERE id = $1")
            .bind(&key)
            .bind(enabled)
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?;
        if done == 0 {
            return Err(StoreError::NotFound(id.clone()));
        }
        Ok(())
    }

    /// The cached probe result for a server whose URL is `target`, if one was stored for that
    /// very URL.
    pub async fn cached_probe(
        &self,
        id: &ServerId,
        target: &str,
    ) -> Result<Option<CachedProbe>, StoreError> {
        let Some(row) = self.stored_row(id).await? else {
            return Ok(None);
        };
        let row: Option<(String, Option<String>)> = on_db!(&self.db, pool => sqlx::query_as(
            "SELECT detected, protocol_version FROM server_probes
             WHERE server_id = $1 AND target_digest = $2",
        )
        .bind(&row.key)
        .bind(target_digest(target))
        .fetch_optional(pool)
        .await)?;
        let Some((detected, protocol_version)) = row else {
            return Ok(None);
        };
        let detected = DetectedTransport::parse(&detected)
            .ok_or_else(|| corrupt(id, format!("unknown probe result '{detected}'")))?;
        Ok(Some(CachedProbe {
            target: target.to_owned(),
            detected,
            protocol_version,
        }))
    }

    /// Records what a probe found.
    pub async fn put_probe(&self, id: &ServerId, probe: &CachedProbe) -> Result<(), StoreError> {
        let key = self.row_key(id).await?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO server_probes (server_id, target_digest, detected, protocol_version,
                                        probed_at_ms)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT(server_id) DO UPDATE SET target_digest = $2, detected = $3,
                protocol_version = $4, probed_at_ms = $5",
        )
        .bind(&key)
        .bind(target_digest(&probe.target))
        .bind(probe.detected.as_str())
        .bind(&probe.protocol_version)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(())
    }

    /// The last catalog this workspace stored for server `id` (JSON, as [`Store::put_catalog`]
    /// took it) and when it was listed (ms since the epoch).
    pub async fn catalog(&self, id: &ServerId) -> Result<Option<(String, i64)>, StoreError> {
        let Some(row) = self.stored_row(id).await? else {
            return Ok(None);
        };
        Ok(on_db!(&self.db, pool => sqlx::query_as(
            "SELECT catalog_json, listed_at_ms FROM server_catalogs
             WHERE server_id = $1 AND workspace = $2",
        )
        .bind(&row.key)
        .bind(self.workspace_key())
        .fetch_optional(pool)
        .await)?)
    }

    /// Keeps `catalog_json`, what server `id` listed just now (to this workspace), as its last
    /// known catalog.
    pub async fn put_catalog(&self, id: &ServerId, catalog_json: &str) -> Result<(), StoreError> {
        let key = self.row_key(id).await?;
        on_db!(&self.db, pool => sqlx::query(
            "INSERT INTO server_catalogs (server_id, workspace, catalog_json, listed_at_ms)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT(server_id, workspace) DO UPDATE SET catalog_json = $3, listed_at_ms = $4",
        )
        .bind(&key)
        .bind(self.workspace_key())
        .bind(catalog_json)
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        Ok(())
    }

    /// The transport as stored: every header and env value sealed, and the URL sealed, with
    /// `tenant`'s data key.
    pub(crate) async fn seal_transport(
        &self,
        key: &str,
        tenant: &TenantId,
        def: &ServerDefinition,
    ) -> Result<String, StoreError> {
        let mut transport = def.transport.clone();
        for value in transport.named_values_mut().iter_mut() {
            value.value = self
                .seal_for(tenant, &secret_context(key, &value.name), &value.value)
                .await?;
        }
        let mut json = serde_json::to_value(&transport).map_err(|e| corrupt(&def.id, e))?;
        if let Some(url) = json.get_mut("url")
            && let Some(plain) = url.as_str().map(str::to_owned)
        {
            *url = self
                .seal_for(tenant, &url_context(key), &plain)
                .await?
                .into();
        }
        // A command's arguments carry credentials as often as its environment does
        // (`--token=...`): sealed too, as one value.
        if let Some(object) = json.as_object_mut()
            && let Some(args) = object.remove("args")
            && args.as_array().is_some_and(|a| !a.is_empty())
        {
            let plain = serde_json::to_string(&args).map_err(|e| corrupt(&def.id, e))?;
            let sealed = self.seal_for(tenant, &args_context(key), &plain).await?;
            object.insert(SEALED_ARGS.into(), sealed.into());
        }
        serde_json::to_string(&json).map_err(|e| corrupt(&def.id, e))
    }

    /// The server's configured OAuth client as stored: sealed with `tenant`'s data key.
    pub(crate) async fn seal_oauth_client(
        &self,
        key: &str,
        tenant: &TenantId,
        def: &ServerDefinition,
    ) -> Result<Option<String>, StoreError> {
        match &def.oauth_client {
            Some(client) => {
                let plain = serde_json::to_string(client).map_err(|e| corrupt(&def.id, e))?;
                Ok(Some(
                    self.seal_for(tenant, &oauth_client_context(key), &plain)
                        .await?,
                ))
            }
            None => Ok(None),
        }
    }

    /// A server as this workspace sees it: a shared one with its user's own settings over it,
    /// and only the tools `reach` (the member's grants, if they are bound by some) includes;
    /// `None` for a shared server `reach` leaves out.
    pub(crate) async fn server_as_seen(
        &self,
        row: ServerRow,
        reach: Option<&switchboard_core::Reach>,
    ) -> Result<Option<ServerDefinition>, StoreError> {
        let shared = row.owner.is_empty();
        let granted = match (shared, reach) {
            (true, Some(reach)) => match reach.server(&row.name) {
                None => return Ok(None),
                Some(switchboard_core::ToolSet::All) => None,
                Some(switchboard_core::ToolSet::Only(tools)) => Some(tools.clone()),
            },
            _ => None,
        };
        let mut def = self.decode_server(row).await?;
        def.granted_tools = granted;
        if shared
            && self.workspace.user().is_some()
            && let Some(mine) = self.my_settings(&def.id).await?
        {
            mine.apply(&mut def).map_err(|detail| StoreError::Corrupt {
                server: def.id.to_string(),
                detail,
            })?;
        }
        Ok(Some(def))
    }

    pub(crate) async fn decode_server(
        &self,
        row: ServerRow,
    ) -> Result<ServerDefinition, StoreError> {
        let id = ServerId::new(row.name.clone()).map_err(|e| StoreError::Corrupt {
            server: row.id.clone(),
            detail: e.to_string(),
        })?;
        let tenant = TenantId::new(row.tenant.clone()).map_err(|e| corrupt(&id, e))?;
        let key = row.id.as_str();
        let mut json: serde_json::Value =
            serde_json::from_str(&row.transport_json).map_err(|e| corrupt(&id, e))?;
        if let Some(url) = json.get_mut("url")
            && let Some(sealed) = url.as_str().map(str::to_owned)
        {
            *url = self
                .unseal_for(&tenant, &url_context(key), &sealed)
                .await?
                .into();
        }
        if let Some(object) = json.as_object_mut()
            && let Some(sealed) = object.remove(SEALED_ARGS)
        {
            let plain = self
                .unseal_for(
                    &tenant,
                    &args_context(key),
                    sealed.as_str().unwrap_or_default(),
                )
                .await?;
            let args: serde_json::Value =
                serde_json::from_str(&plain).map_err(|e| corrupt(&id, e))?;
            object.insert("args".into(), args);
        }
        let mut transport: TransportSpec =
            serde_json::from_value(json).map_err(|e| corrupt(&id, e))?;
        for value in transport.named_values_mut().iter_mut() {
            value.value = self
                .unseal_for(&tenant, &secret_context(key, &value.name), &value.value)
                .await?;
        }
        let timeouts: Timeouts =
            serde_json::from_str(&row.timeouts_json).map_err(|e| corrupt(&id, e))?;
        let disabled_tools =
            serde_json::from_str(&row.disabled_tools_json).map_err(|e| corrupt(&id, e))?;
        let task_modes = serde_json::from_str(&row.task_modes_json).map_err(|e| corrupt(&id, e))?;
        let policies =
            serde_json::from_str(&row.tool_policies_json).map_err(|e| corrupt(&id, e))?;
        let oauth_client = match &row.oauth_client_sealed {
            Some(sealed) => {
                let plain = self
                    .unseal_for(&tenant, &oauth_client_context(key), sealed)
                    .await?;
                Some(serde_json::from_str(&plain).map_err(|e| corrupt(&id, e))?)
            }
            None => None,
        };
        Ok(ServerDefinition {
            id,
            display_name: row.display_name,
            description: row.description,
            transport,
            timeouts,
            enabled: row.enabled,
            disabled_tools,
            oauth_client,
            prefix: row.exposed_prefix,
            task_modes,
            policies,
            granted_tools: None,
        })
    }
}

/// A `servers` row as stored (sealed values still sealed).
#[derive(sqlx::FromRow)]
pub(crate) struct ServerRow {
    /// The row's key (see [`Store::put_server`]).
    pub(crate) id: String,
    /// The id users see.
    pub(crate) name: String,
    /// The tenant whose data key seals its secrets.
    pub(crate) tenant: String,
    /// Its owner ('' when the tenant shares it).
    pub(crate) owner: String,
    pub(crate) display_name: String,
    pub(crate) description: String,
    pub(crate) transport_json: String,
    pub(crate) timeouts_json: String,
    pub(crate) enabled: bool,
    pub(crate) disabled_tools_json: String,
    pub(crate) oauth_client_sealed: Option<String>,
    pub(crate) exposed_prefix: Option<String>,
    pub(crate) task_modes_json: String,
    pub(crate) tool_policies_json: String,
}

/// Every column of the servers a workspace sees (`$1` its tenant, `$2` its user or '').
pub(crate) const SELECT_SERVER_COLUMNS: &str = "SELECT id, name, tenant, owner, display_name, description, transport_json, timeouts_json, enabled, disabled_tools_json, oauth_client_sealed, exposed_prefix, task_modes_json, tool_policies_json FROM servers WHERE tenant = $1 AND (owner = '' OR owner = $2)";

/// A server's row as a workspace finds it.
pub(crate) struct StoredRow {
    pub(crate) key: String,
    pub(crate) owner: String,
}

/// The context and value of the store's check value (sealed with the master key).
pub(crate) const VAULT_CHECK_CONTEXT: &str = "store/vault-check";
pub(crate) const VAULT_CHECK_VALUE: &str = "switchboard";

/// Whose tokens a grant row holds: `default` for the local workspace (as before tenants), else
/// `user:<id>` (so no user id can name the local workspace's grants).
pub(crate) fn grant_principal(user: Option<&switchboard_core::UserId>) -> String {
    user.map_or_else(|| "default".to_owned(), |user| format!("user:{user}"))
}

// Each sealed value is bound to its server's row key, so it opens only there (a value copied to
// another tenant's row does not).
fn secret_context(key: &str, name: &str) -> String {
    format!("server:{key}/value:{name}")
}

fn oauth_client_context(key: &str) -> String {
    format!("server:{key}/oauth-client")
}

fn url_context(key: &str) -> String {
    format!("server:{key}/url")
}

/// Where a stored transport keeps its sealed arguments (rows written before keep `args`).
const SEALED_ARGS: &str = "args_sealed";

fn args_context(key: &str) -> String {
    format!("server:{key}/args")
}

/// The probe cache's key for a URL: its SHA-256, so the cache never holds the URL itself.
fn target_digest(target: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(target.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn corrupt(id: &ServerId, detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        server: id.to_string(),
        detail: detail.to_string(),
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    let err = |error| StoreError::DataDir {
        path: dir.display().to_string(),
        error,
    };
    if dir.is_dir() {
        // A directory made before (by an older version, or by hand) is tightened too.
        db::keep_private(dir, 0o700);
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(err)
}

/// The default data directory: `$SWITCHBOARD_DATA_DIR` if set, else the platform's data directory.
pub fn default_data_dir(platform_dir: Option<PathBuf>) -> PathBuf {
    std::env::var_os("SWITCHBOARD_DATA_DIR")
        .map(PathBuf::from)
        .or(platform_dir)
        .unwrap_or_else(|| PathBuf::from(".switchboard"))
}
