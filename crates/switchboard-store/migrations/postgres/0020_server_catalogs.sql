-- Each server's last known catalog (its tools, disabled ones included, resources, templates and
-- prompts, as the server listed them; JSON), so a server that is down, or not connected yet,
-- keeps its tools listed and searchable, and a daemon that connects servers on first use
-- (`serve --lazy`) serves them before connecting. Kept per workspace (`local`, or
-- `<tenant>/<user>`): a shared server lists to each user what their own credentials show.
-- Gone with its server.
CREATE TABLE server_catalogs (
    server_id    TEXT NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    workspace    TEXT NOT NULL,
    catalog_json TEXT NOT NULL,
    listed_at_ms BIGINT NOT NULL,
    PRIMARY KEY (server_id, workspace)
);
