-- Each tool's approved definition (its name, title, description, schemas and annotations, as
-- canonical JSON, and their SHA-256): the one first seen, or the one an admin accepted
-- (`accepted_by` names them; empty for a first sighting). A tool whose definition differs is
-- announced, and held back from clients when its server says so. Gone with its server.
CREATE TABLE tool_definitions (
    server_id        TEXT NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    tool             TEXT NOT NULL,
    sha256           TEXT NOT NULL,
    definition_json  TEXT NOT NULL,
    approved_at_ms   BIGINT NOT NULL,
    accepted_by      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (server_id, tool)
);
