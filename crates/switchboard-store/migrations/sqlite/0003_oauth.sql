-- OAuth sign-ins. Both documents are sealed by the vault as a whole (tokens, refresh tokens,
-- client secrets and DPoP keys are inside); only the keys are in the clear.

-- Client registrations, one per authorization server (keyed by issuer, as the spec requires).
CREATE TABLE oauth_clients (
    issuer        TEXT PRIMARY KEY NOT NULL,
    sealed_json   TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL
);

-- Tokens, one set per (server, principal).
CREATE TABLE oauth_grants (
    server_id     TEXT NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    principal     TEXT NOT NULL,
    sealed_json   TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (server_id, principal)
);
