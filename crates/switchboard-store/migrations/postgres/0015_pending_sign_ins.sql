-- Sign-ins started through the admin API and waiting for their redirect (ten minutes at most),
-- kept here rather than in one process's memory so that the redirect may reach any replica.
-- A row is found by the SHA-256 of its `state` (never stored in the clear) and taken once.
-- The request (PKCE verifier, client, discovery), the server's row and URL when it started, are
-- sealed with the tenant's data key, bound to the row's state, tenant, user and server.
-- `browser_digest` is the SHA-256 of the cookie the starting browser holds, if it holds one: a
-- redirect arriving in another browser is only completed once its person confirms.
CREATE TABLE pending_sign_ins (
    state_digest  TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    -- NULL: the local (single-user) workspace.
    user_id       TEXT,
    server_id     TEXT NOT NULL,
    sealed_json   TEXT NOT NULL,
    browser_digest TEXT,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX pending_sign_ins_expiry ON pending_sign_ins (expires_at_ms);
