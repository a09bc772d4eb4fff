-- Server definitions. Secret header and env values inside transport_json are sealed by the vault.
CREATE TABLE servers (
    id                  TEXT PRIMARY KEY NOT NULL,
    display_name        TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    transport_json      TEXT NOT NULL,
    timeouts_json       TEXT NOT NULL,
    enabled             INTEGER NOT NULL DEFAULT 1,
    disabled_tools_json TEXT NOT NULL DEFAULT '[]',
    created_at_ms       INTEGER NOT NULL,
    updated_at_ms       INTEGER NOT NULL
);

-- What the era probe found behind a server's URL, so it runs once, not on every connect.
CREATE TABLE server_probes (
    server_id        TEXT PRIMARY KEY NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    target           TEXT NOT NULL,
    detected         TEXT NOT NULL,
    protocol_version TEXT,
    probed_at_ms     INTEGER NOT NULL
);
