-- The PostgreSQL schema, as the SQLite migrations 0001 to 0010 left theirs: the same tables and
-- columns (see migrations/sqlite for what each holds), in PostgreSQL's types. Later migrations
-- keep the same numbers on both engines.

CREATE TABLE servers (
    id                  TEXT PRIMARY KEY NOT NULL,
    display_name        TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    transport_json      TEXT NOT NULL,
    timeouts_json       TEXT NOT NULL,
    enabled             BOOLEAN NOT NULL DEFAULT TRUE,
    disabled_tools_json TEXT NOT NULL DEFAULT '[]',
    created_at_ms       BIGINT NOT NULL,
    updated_at_ms       BIGINT NOT NULL,
    oauth_client_sealed TEXT,
    exposed_prefix      TEXT,
    task_modes_json     TEXT NOT NULL DEFAULT '{}',
    tool_policies_json  TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE server_probes (
    server_id        TEXT PRIMARY KEY NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    target_digest    TEXT NOT NULL,
    detected         TEXT NOT NULL,
    protocol_version TEXT,
    probed_at_ms     BIGINT NOT NULL
);

CREATE TABLE oauth_clients (
    issuer        TEXT PRIMARY KEY NOT NULL,
    sealed_json   TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);

CREATE TABLE oauth_grants (
    server_id     TEXT NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    principal     TEXT NOT NULL,
    sealed_json   TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (server_id, principal)
);

-- On PostgreSQL a refresh is single-flight through a row lock on this table (held by the
-- refreshing replica's transaction, so released when it ends or its connection is lost); the
-- holder and expiry columns serve SQLite's leases.
CREATE TABLE oauth_grant_leases (
    server_id     TEXT NOT NULL,
    principal     TEXT NOT NULL,
    holder        TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    PRIMARY KEY (server_id, principal)
);

CREATE TABLE tool_vectors (
    model       TEXT NOT NULL,
    text_sha256 BYTEA NOT NULL,
    vector      BYTEA NOT NULL,
    PRIMARY KEY (model, text_sha256)
);

CREATE TABLE activations (
    scope           TEXT PRIMARY KEY NOT NULL,
    activation_json TEXT NOT NULL,
    updated_at_ms   BIGINT NOT NULL
);

-- Every replica listens on the channel `switchboard_changes`: a committed write to one of these
-- tables names the table there, and the replicas read it again (servers are restarted, layers
-- reloaded) without waiting for their next poll.
CREATE FUNCTION switchboard_announce_change() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('switchboard_changes', TG_TABLE_NAME);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER servers_changed AFTER INSERT OR UPDATE OR DELETE ON servers
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_announce_change();
CREATE TRIGGER activations_changed AFTER INSERT OR UPDATE OR DELETE ON activations
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_announce_change();
CREATE TRIGGER oauth_grants_changed AFTER INSERT OR UPDATE OR DELETE ON oauth_grants
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_announce_change();
