-- The audit log: every tool call, configuration change, sign-in and approval decision, newest
-- with the highest id. Arguments are kept as the daemon's setting says (a digest, redacted, or
-- not at all); records older than the retention setting are deleted. Ids rise with time, so
-- old records are found from the lowest id up, and recent ones from the highest down: no index
-- on the time, which every record would pay for.
CREATE TABLE audit_log (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms           BIGINT NOT NULL,
    tenant          TEXT NOT NULL,
    kind            TEXT NOT NULL,
    actor           TEXT NOT NULL,
    door            TEXT,
    endpoint        TEXT,
    client          TEXT,
    server          TEXT,
    tool            TEXT,
    outcome         TEXT NOT NULL,
    duration_ms     BIGINT,
    arguments_json  TEXT,
    detail_json     TEXT
);
CREATE INDEX audit_log_by_tenant ON audit_log (tenant, id);
