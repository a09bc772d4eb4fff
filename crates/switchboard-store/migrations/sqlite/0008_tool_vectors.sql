-- Sentence embeddings of tools, for tool search's semantic stage: computing them takes tens of
-- milliseconds a tool, so a daemon restart or a one-shot `switchboard search` reuses them. Keyed
-- by the encoder model's name and the SHA-256 of the exact text encoded; `vector` is the
-- little-endian f32 components. Derived data only: deleting rows costs time, never information.
CREATE TABLE tool_vectors (
    model TEXT NOT NULL,
    text_sha256 BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_sha256)
);
