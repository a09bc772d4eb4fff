-- Whether a user signs in with the team's identity provider: recorded from its tokens, or linked
-- on purpose by the operator. A token naming a user made in Switchboard that is not linked is
-- refused, so nobody takes over another's workspace and sign-ins by holding a provider account
-- with the same id. Users made before this, with no API key, were recorded from tokens.
ALTER TABLE users ADD COLUMN identity_provider BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE users SET identity_provider = TRUE
WHERE NOT EXISTS (
    SELECT 1 FROM api_keys WHERE api_keys.tenant = users.tenant AND api_keys.user_id = users.id
);
