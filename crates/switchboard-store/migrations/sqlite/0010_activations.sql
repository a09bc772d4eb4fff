-- Which servers and tools are on, per layer: `app`, `user:<id>` or `thread:<id>`; the JSON is a
-- switchboard_core::Activation ({"servers": {...}, "tools": {...}}). A layer that says nothing
-- has no row.
CREATE TABLE activations (
    scope TEXT PRIMARY KEY NOT NULL,
    activation_json TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
