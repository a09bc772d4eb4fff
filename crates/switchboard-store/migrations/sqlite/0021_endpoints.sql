-- Endpoints: named, enforced subsets of a tenant's servers and tools, each served at its own
-- MCP path. The definition (its servers and tools, its description) and the SHA-256 digests of
-- the keys issued for it are one JSON document; a key itself is never kept.
CREATE TABLE endpoints (
    tenant          TEXT NOT NULL,
    name            TEXT NOT NULL,
    endpoint_json   TEXT NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (tenant, name)
);
