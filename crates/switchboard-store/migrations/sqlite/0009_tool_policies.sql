-- Per-tool policies of a server, by upstream tool name: the tools the deferred view pins, and
-- who may call a tool (`{"pinned": [...], "allowed_callers": {"tool": ["direct", ...]}}`).
ALTER TABLE servers ADD COLUMN tool_policies_json TEXT NOT NULL DEFAULT '{}';
