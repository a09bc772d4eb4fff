-- Facts about the store itself. `vault_check` holds a value sealed with the vault key the store
-- was first opened with, so a process holding another key (a replica given a fresh key file,
-- say) is refused at open, before it writes anything the others cannot read.
CREATE TABLE store_meta (
    name  TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
