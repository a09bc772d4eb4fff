-- The commands the operator approves for tenants and members (the only stdio servers they may
-- run), each sealed as one document with the default tenant's data key: its environment values
-- may be credentials of the operator's.
CREATE TABLE approved_commands (
    name          TEXT PRIMARY KEY,
    sealed_json   TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);

CREATE TRIGGER approved_commands_changed AFTER INSERT OR UPDATE OR DELETE ON approved_commands
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_announce_change();
