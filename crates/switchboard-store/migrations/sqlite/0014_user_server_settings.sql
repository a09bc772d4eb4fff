-- A user's own settings for a server their tenant shares (their credentials for it as headers or
-- environment values, the tools they pin), sealed as one document with the tenant's data key.
-- Read over the shared definition in the user's workspace.
CREATE TABLE user_server_settings (
    tenant          TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    server_name     TEXT NOT NULL,
    settings_sealed TEXT NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (tenant, user_id, server_name)
);
