-- Who is refreshing a grant right now. Processes sharing the store (a daemon and a CLI command)
-- take the lease before a refresh, so only one presents a refresh token at a time and the
-- other reads the rotated tokens instead of replaying a retired one. A lease expires by itself,
-- so a process that died holding it blocks nobody for long.
CREATE TABLE oauth_grant_leases (
    server_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    PRIMARY KEY (server_id, principal)
);
