-- Envelope encryption: each tenant's secrets are sealed with a data key of the tenant's, and the
-- data keys are sealed ("wrapped") with the master key. A new version is added when a tenant's key
-- is rotated; older versions stay, so values they sealed still open until they are sealed again.
-- Values sealed before this migration (with the master key itself) open as they did.
CREATE TABLE tenant_keys (
    tenant        TEXT NOT NULL,
    version       BIGINT NOT NULL,
    wrapped       TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, version)
);
