-- A pending sign-in is claimed once by the process its redirect reaches (rather than deleted
-- there), which deletes it when the sign-in succeeds and writes why it failed otherwise, for the
-- process that started it to show in the server's state.
ALTER TABLE pending_sign_ins ADD COLUMN claimed BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE pending_sign_ins ADD COLUMN failure TEXT;
