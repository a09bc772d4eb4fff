-- Sign-ins started through the admin API and waiting for their redirect (ten minutes at most),
-- kept here rather than in one process's memory so that the redirect may reach any replica.
-- A row is found by the SHA-256 of its `state` (never stored in the clear) and taken once.
-- The request (PKCE verifier, client, discovery) is sealed with the tenant's data key.
CREATE TABLE pending_sign_ins (
    state_digest  TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    -- NULL: the local (single-user) workspace.
    user_id       TEXT,
    server_id     TEXT NOT NULL,
    sealed_json   TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX pending_sign_ins_expiry ON pending_sign_ins (expires_at_ms);
