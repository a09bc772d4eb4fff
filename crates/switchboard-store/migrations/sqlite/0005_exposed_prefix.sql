-- The prefix of a server's exposed tool and prompt names and resource URIs.
-- NULL means the server id; an empty string means names pass through unchanged.
ALTER TABLE servers ADD COLUMN exposed_prefix TEXT;
