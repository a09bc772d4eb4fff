-- URLs may carry credentials (userinfo, API keys in the query), so they are now sealed inside
-- transport_json and the probe cache is keyed by a SHA-256 digest of the URL instead of the URL.
-- Cached probe results are only an optimisation: drop them and let the next connect probe again.
DROP TABLE server_probes;
CREATE TABLE server_probes (
    server_id        TEXT PRIMARY KEY NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    target_digest    TEXT NOT NULL,
    detected         TEXT NOT NULL,
    protocol_version TEXT,
    probed_at_ms     INTEGER NOT NULL
);
