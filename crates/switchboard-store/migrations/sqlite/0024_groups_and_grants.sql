-- Groups of a tenant's users, and grants of the tenant's endpoints, servers and tools to users
-- and groups. Once a tenant holds a grant, its members reach only what they were granted.
CREATE TABLE user_groups (
    tenant          TEXT NOT NULL,
    name            TEXT NOT NULL,
    description     TEXT,
    updated_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (tenant, name)
);

CREATE TABLE group_members (
    tenant          TEXT NOT NULL,
    group_name      TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    PRIMARY KEY (tenant, group_name, user_id)
);

-- A member's groups are looked up by user when their workspace reads its servers.
CREATE INDEX group_members_by_user ON group_members (tenant, user_id);

-- `subject` is `user:<id>` or `group:<name>`; `grant_json` the whole grant as written, one
-- row per distinct grant.
CREATE TABLE grants (
    tenant          TEXT NOT NULL,
    id              TEXT NOT NULL,
    subject         TEXT NOT NULL,
    grant_json      TEXT NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (tenant, id),
    UNIQUE (tenant, grant_json)
);
