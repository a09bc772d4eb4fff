-- Tenants, their users, and the users' API keys (kept as SHA-256 digests; the key itself is
-- shown once, when it is made). The default tenant is the one a single-user daemon always had.
CREATE TABLE tenants (
    id            TEXT PRIMARY KEY NOT NULL,
    display_name  TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
INSERT INTO tenants (id, display_name, created_at_ms) VALUES ('default', 'Default', 0);

CREATE TABLE users (
    tenant        TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    display_name  TEXT NOT NULL DEFAULT '',
    role          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE TABLE api_keys (
    digest        TEXT PRIMARY KEY NOT NULL,
    tenant        TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    name          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    FOREIGN KEY (tenant, user_id) REFERENCES users(tenant, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX api_keys_by_name ON api_keys (tenant, user_id, name);

-- Whose a server is: its tenant, and its owner ('' when the tenant shares it with every user).
-- `name` is the id users see; `id` stays the row's key, equal to the name for the default
-- tenant's shared servers (every server stored before this migration) and
-- `<tenant>/<owner>/<name>` for the others, so grants and probes keep referring to one row.
ALTER TABLE servers ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE servers ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE servers ADD COLUMN name TEXT NOT NULL DEFAULT '';
UPDATE servers SET name = id;
CREATE INDEX servers_by_workspace ON servers (tenant, owner, name);
