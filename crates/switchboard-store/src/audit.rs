//! The audit log's table ([`switchboard_core::audit`]): records appended in batches, read a page
//! at a time newest first with filters, and deleted once older than the retention setting.
//!
//! Records carry their tenant; a workspace's queries read only its tenant's, the operator's
//! (the local workspace) every tenant's unless it names one.

use switchboard_core::audit::{AuditError, AuditKind, AuditQuery, AuditRecord, KeptJson};
use switchboard_core::{Role, Workspace};

use crate::db::on_db;
use crate::{Store, StoreError};

/// A record's row: every column but the id in the order [`Store::append_audit`] binds them.
type Row = (
    i64,
    i64,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    Option<i64>,
    Option<String>,
    Option<String>,
);

/// The columns a query reads, in [`Row`]'s order.
const COLUMNS: &str = "id, at_ms, tenant, kind, actor, door, endpoint, client, server, tool, \
                       outcome, duration_ms, arguments_json, detail_json";

/// The record of `row`; `None` (with a warning) for a row of a kind this build does not know.
/// Kept JSON that does not decode is shown as the text it is.
fn record_of(row: Row) -> Option<AuditRecord> {
    let id = row.0;
    let Ok(kind) = row.3.parse::<AuditKind>() else {
        tracing::warn!(
            id,
            kind = row.3,
            "skipping an audit record of an unknown kind"
        );
        return None;
    };
    let json = |text: Option<String>| text.map(KeptJson::from_stored);
    Some(AuditRecord {
        id: Some(id),
        at_ms: u64::try_from(row.1).unwrap_or(0),
        kind,
        tenant: row.2,
        actor: row.4,
        door: row.5,
        endpoint: row.6,
        client: row.7,
        server: row.8,
        tool: row.9,
        outcome: row.10,
        duration_ms: row.11.and_then(|ms| u64::try_from(ms).ok()),
        arguments: json(row.12),
        detail: json(row.13),
    })
}

fn as_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// How many records one INSERT writes: a batch is written 32 at a time, then 8, then one at a
/// time (the last size must be 1).
const ROWS_PER_INSERT: [usize; 3] = [32, 8, 1];

/// The columns a record writes, in the order [`bind_record`] binds them.
const INSERTED: [&str; 13] = [
    "at_ms",
    "tenant",
    "kind",
    "actor",
    "door",
    "endpoint",
    "client",
    "server",
    "tool",
    "outcome",
    "duration_ms",
    "arguments_json",
    "detail_json",
];

/// `INSERT INTO audit_log (...) VALUES (...), ...` for `rows` records. SQLite gets anonymous
/// `?` parameters: for each numbered one (`$n`) the driver asks SQLite its name, which SQLite
/// finds by a walk of the statement's names, about 750 instructions a parameter measured here
/// (13 a record); PostgreSQL takes only `$n`.
fn insert_sql(rows: usize, numbered: bool) -> String {
    let columns = INSERTED.len();
    let values: Vec<String> = (0..rows)
        .map(|row| {
            let parameters: Vec<String> = (1..=columns)
                .map(|column| match numbered {
                    true => format!("${}", row * columns + column),
                    false => "?".to_owned(),
                })
                .collect();
            format!("({})", parameters.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO audit_log ({}) VALUES {}",
        INSERTED.join(", "),
        values.join(", ")
    )
}

/// Binds `record`'s columns (in [`INSERTED`]'s order) to `query`, whichever engine's it is. The
/// record is moved in: SQLite's driver hands a statement's values to its worker thread as owned
/// values, and would copy every borrowed string to do so.
macro_rules! bind_record {
    ($query:expr, $record:expr) => {{
        let record: AuditRecord = $record;
        $query
            .bind(as_i64(record.at_ms))
            .bind(record.tenant)
            .bind(record.kind.as_str())
            .bind(record.actor)
            .bind(record.door)
            .bind(record.endpoint)
            .bind(record.client)
            .bind(record.server)
            .bind(record.tool)
            .bind(record.outcome)
            .bind(record.duration_ms.map(as_i64))
            .bind(record.arguments.map(KeptJson::into_string))
            .bind(record.detail.map(KeptJson::into_string))
    }};
}

impl Store {
    /// Appends `records` in one transaction, as few statements as the sizes of
    /// [`ROWS_PER_INSERT`] make them (32 rows, then 8, then one at a time): each statement's
    /// text never changes, so it is prepared once and kept by the connection. Parsing a
    /// statement of however many rows a batch has cost SQLite more than running one many times;
    /// running one a row cost a round trip to the driver's worker and a step each.
    pub async fn append_audit(
        &self,
        records: impl IntoIterator<Item = AuditRecord, IntoIter: ExactSizeIterator + Send>,
    ) -> Result<(), StoreError> {
        let mut records = records.into_iter();
        if records.len() == 0 {
            return Ok(());
        }
        use std::sync::LazyLock;
        static SQLITE: LazyLock<Vec<String>> =
            LazyLock::new(|| ROWS_PER_INSERT.map(|rows| insert_sql(rows, false)).to_vec());
        static POSTGRES: LazyLock<Vec<String>> =
            LazyLock::new(|| ROWS_PER_INSERT.map(|rows| insert_sql(rows, true)).to_vec());
        let statements = match &self.db {
            crate::db::Db::Sqlite(_) => &*SQLITE,
            crate::db::Db::Postgres(_) => &*POSTGRES,
        };
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            for (rows, sql) in ROWS_PER_INSERT.iter().zip(statements.iter()) {
                while records.len() >= *rows {
                    let mut query = sqlx::query(sql.as_str());
                    for record in records.by_ref().take(*rows) {
                        query = bind_record!(query, record);
                    }
                    query.execute(&mut *tx).await?;
                }
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// A page of the audit log as this workspace may read it, newest first: a tenant admin's
    /// reads their tenant's records, the local workspace (the operator's) every tenant's unless
    /// `query` names one; a member's reads none.
    pub async fn audit_page(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let limit = query
            .page_size()
            .map_err(|e: AuditError| StoreError::Invalid(e.to_string()))?;
        let tenant = match self.workspace() {
            Workspace::Local => query.tenant.clone(),
            Workspace::User(principal) if principal.role == Role::Admin => {
                Some(principal.tenant.as_str().to_owned())
            }
            Workspace::User(_) => {
                return Err(StoreError::Forbidden(
                    "only the tenant's admins read its audit log".to_owned(),
                ));
            }
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM audit_log
             WHERE ($1 IS NULL OR tenant = $1) AND ($2 IS NULL OR kind = $2)
               AND ($3 IS NULL OR actor = $3) AND ($4 IS NULL OR server = $4)
               AND ($5 IS NULL OR tool = $5) AND ($6 IS NULL OR outcome = $6)
               AND ($7 IS NULL OR endpoint = $7) AND ($8 IS NULL OR at_ms >= $8)
               AND ($9 IS NULL OR at_ms < $9) AND ($10 IS NULL OR id < $10)
             ORDER BY id DESC LIMIT $11"
        );
        let rows: Vec<Row> = on_db!(&self.db, pool => sqlx::query_as(&sql)
            .bind(tenant)
            .bind(query.kind.map(AuditKind::as_str))
            .bind(query.actor.as_deref())
            .bind(query.server.as_deref())
            .bind(query.tool.as_deref())
            .bind(query.outcome.as_deref())
            .bind(query.endpoint.as_deref())
            .bind(query.since.map(as_i64))
            .bind(query.until.map(as_i64))
            .bind(query.before)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await)?;
        Ok(rows.into_iter().filter_map(record_of).collect())
    }

    /// Deletes the records from before `before_ms`, and then the oldest beyond the newest
    /// `keep_at_most`; how many it deleted. Every tenant's: retention is the daemon's. Ids rise
    /// with time, so the old records are those below the first id at or after `before_ms`,
    /// found by reading up from the oldest (the table keeps no index on the time).
    pub async fn prune_audit(&self, before_ms: u64, keep_at_most: u64) -> Result<u64, StoreError> {
        let first_kept: Option<i64> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT id FROM audit_log WHERE at_ms >= $1 ORDER BY id LIMIT 1",
        )
        .bind(as_i64(before_ms))
        .fetch_optional(pool)
        .await)?;
        // None at or after it: every record is older.
        let old = on_db!(&self.db, pool => sqlx::query("DELETE FROM audit_log WHERE id < $1")
        .bind(first_kept.unwrap_or(i64::MAX))
        .execute(pool)
        .await
        .map(|done| done.rows_affected()))?;
        let newest: Option<i64> = on_db!(&self.db, pool => sqlx::query_scalar(
            "SELECT MAX(id) FROM audit_log",
        )
        .fetch_one(pool)
        .await)?;
        let beyond = match newest {
            Some(newest) => on_db!(&self.db, pool => sqlx::query(
                "DELETE FROM audit_log WHERE id <= $1",
            )
            .bind(newest.saturating_sub(as_i64(keep_at_most)))
            .execute(pool)
            .await
            .map(|done| done.rows_affected()))?,
            None => 0,
        };
        Ok(old + beyond)
    }
}
