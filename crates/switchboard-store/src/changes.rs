//! Hearing of other processes' writes as they commit.
//!
//! On PostgreSQL every replica listens on one channel, where the migrations' triggers name each
//! changed table at commit; a daemon then reads the store again at once instead of at its next
//! poll. SQLite has no such channel across processes, so there a daemon only polls
//! ([`Store::fingerprint`](crate::Store::fingerprint)); it polls on PostgreSQL too, which
//! covers notifications lost while the listening connection was being re-established.

use sqlx::postgres::PgListener;

use crate::db::{CHANGES_CHANNEL, Db};
use crate::{Store, StoreError};

/// Notifications of committed writes to a shared store.
pub struct ChangeWatch {
    listener: PgListener,
}

impl std::fmt::Debug for ChangeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChangeWatch(..)")
    }
}

impl ChangeWatch {
    /// Waits for the next change, and returns the changed table's name; `None` when the
    /// listening connection was lost and re-established, so changes may have been missed (read
    /// everything again).
    pub async fn changed(&mut self) -> Result<Option<String>, StoreError> {
        Ok(self
            .listener
            .try_recv()
            .await?
            .map(|note| note.payload().to_owned()))
    }
}

impl Store {
    /// A watch on other processes' writes, on engines that can announce them (PostgreSQL);
    /// `None` on SQLite, whose readers poll.
    pub async fn watch_changes(&self) -> Result<Option<ChangeWatch>, StoreError> {
        let Db::Postgres(pool) = &self.db else {
            return Ok(None);
        };
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(CHANGES_CHANNEL).await?;
        Ok(Some(ChangeWatch { listener }))
    }
}
