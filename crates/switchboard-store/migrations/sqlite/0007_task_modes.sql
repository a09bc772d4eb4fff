-- How calls of a server's tools become tasks (the tasks extension), by upstream tool name:
-- a JSON object of tool name to "forbidden" | "optional" | "required"; tools not listed are
-- optional.
ALTER TABLE servers ADD COLUMN task_modes_json TEXT NOT NULL DEFAULT '{}';
