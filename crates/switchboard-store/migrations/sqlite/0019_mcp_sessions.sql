-- The Streamable HTTP sessions clients opened at /mcp, so that another replica (or this one,
-- restarted) can take a session over when its client comes back there: what the client's
-- `initialize` said (its protocol version, capabilities and name, as JSON; no credential), the
-- workspace it was opened in (`local`, or `<tenant>/<user>`), the only one it is resumed in,
-- and when a replica last heard its client (a session quiet for its idle time is forgotten).
CREATE TABLE mcp_sessions (
    id            TEXT PRIMARY KEY,
    workspace     TEXT NOT NULL,
    state_json    TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    seen_at_ms    BIGINT NOT NULL
);
CREATE INDEX mcp_sessions_seen ON mcp_sessions (seen_at_ms);
