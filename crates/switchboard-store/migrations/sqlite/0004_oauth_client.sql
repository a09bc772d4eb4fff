-- OAuth client credentials the user configured for a server (client id, secret, issuer),
-- sealed as one document; NULL when none are configured.
ALTER TABLE servers ADD COLUMN oauth_client_sealed TEXT;
