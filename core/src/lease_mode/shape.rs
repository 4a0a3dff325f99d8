//! The table's shape (its columns, its engine), learned once per lock object: on MySQL
//! and MariaDB from information_schema, on SQLite from its pragmas.

use super::*;

/// What the table looks like: learned once per lock object, before its first statement.
#[derive(Debug, Clone)]
pub(super) struct Shape {
    /// The upgrade's `token` column and `DATETIME(6)` times are there.
    pub(super) upgraded: bool,
    pub(super) resource_chars: usize,
    pub(super) owner_chars: usize,
    pub(super) charset: Charset,
    /// How the decisive reads see every commit the cluster made before them.
    pub(super) sync: SyncRead,
}

/// The shape of a MySQL/MariaDB lease table and what the server is.
pub(super) fn mysql_shape<S: Session>(session: &mut S, table: &Table, name: Option<&str>) -> Result<Shape> {
    let topology = match session.topology() {
        Some(known) => known,
        None => topology::probe(|sql| session.execute(sql, &[])).map_err(|e| classify(e, name, table))?,
    };
    let schema = match table.schema() {
        Some(s) => Value::from(s),
        None => Value::Null,
    };
    // A read that decides too: a Group Replication member applies what another member
    // committed, DDL included, a little later, and a lock object that took an upgraded
    // table for a plain one would write without tokens (tests/tests/cluster.rs once got
    // a grant without a token through another member right after `upgrade_table()`).
    let sync = SyncRead::for_server(&topology);
    let out = sync
        .read(
            session,
            "SELECT t.ENGINE, \
             MAX(CASE WHEN c.COLUMN_NAME = 'token' THEN 1 ELSE 0 END), \
             MAX(CASE WHEN c.COLUMN_NAME = 'expires_at' THEN c.DATETIME_PRECISION END), \
             MAX(CASE WHEN c.COLUMN_NAME = 'resource' THEN c.CHARACTER_MAXIMUM_LENGTH END), \
             MAX(CASE WHEN c.COLUMN_NAME = 'owner' THEN c.CHARACTER_MAXIMUM_LENGTH END), \
             MAX(CASE WHEN c.COLUMN_NAME = 'resource' THEN c.CHARACTER_SET_NAME END), \
             MAX(CASE WHEN c.COLUMN_NAME = 'owner' THEN c.CHARACTER_SET_NAME END), \
             MAX(CASE WHEN c.COLUMN_NAME = 'resource' THEN c.COLUMN_KEY END) \
             FROM information_schema.TABLES AS t \
             JOIN information_schema.COLUMNS AS c ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME \
             WHERE t.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND t.TABLE_NAME = ? \
             GROUP BY t.ENGINE",
            &[schema, Value::from(table.name())],
        )
        .map_err(|e| classify(e, name, table))?;
    let Some(row) = out.rows.first() else {
        let missing = SessionError::server(1146, format!("Table '{}' doesn't exist", table.display_name()));
        return Err(missing_table(Dialect::MySql, table, missing));
    };
    let unusable = |reason: String| Error::UnusableTable { table: table.display_name(), reason };
    let engine = row.first().and_then(Value::as_text).unwrap_or_default();
    if !engine.eq_ignore_ascii_case("InnoDB") {
        return Err(unusable(format!(
            "its engine is {engine}, which is not transactional and not replicated by Galera; convert it: ALTER TABLE {} ENGINE=InnoDB",
            table.sql_name()
        )));
    }
    let (Some(resource_chars), Some(owner_chars)) =
        (row.get(3).and_then(Value::as_u64), row.get(4).and_then(Value::as_u64))
    else {
        return Err(unusable("it has no resource or owner column: is it the lease table?".into()));
    };
    // The upsert decides by the key: without one on resource, every acquire inserts and
    // two owners would both win.
    let key = row.get(7).and_then(Value::as_text).unwrap_or_default();
    if key != "PRI" && key != "UNI" {
        return Err(unusable(
            "its resource column is neither its primary key nor unique, so two owners could both acquire one resource"
                .into(),
        ));
    }
    let charsets: Vec<Charset> = [5, 6]
        .iter()
        .map(|&i| Charset::from_mysql_name(&row.get(i).and_then(Value::as_text).unwrap_or_default()))
        .collect();
    // Both columns are checked against the narrower set; in practice they share one.
    let charset = if charsets[0] == Charset::Unicode { charsets[1].clone() } else { charsets[0].clone() };
    let token = row.get(1).and_then(Value::as_i64) == Some(1);
    let micros = row.get(2).and_then(Value::as_i64).unwrap_or(0) >= 6;
    if token != micros {
        return Err(unusable(
            "it is half upgraded (a token column without DATETIME(6) times or the reverse): run `mysqllock init --lease --upgrade`"
                .into(),
        ));
    }
    Ok(Shape {
        upgraded: token,
        resource_chars: resource_chars as usize,
        owner_chars: owner_chars as usize,
        charset,
        sync,
    })
}

pub(super) fn sqlite_shape<S: Session>(session: &mut S, table: &Table, name: Option<&str>) -> Result<Shape> {
    let out = session
        .execute(&format!("PRAGMA table_info({})", table.sql_name()), &[])
        .map_err(|e| classify(e, name, table))?;
    if out.rows.is_empty() {
        let missing = SessionError::client(format!("no such table: {}", table.display_name()));
        return Err(missing_table(Dialect::Sqlite, table, missing));
    }
    let columns: Vec<String> = out.rows.iter().filter_map(|r| r.get(1).and_then(Value::as_text)).collect();
    for needed in ["resource", "owner", "expires_at", "acquired_at"] {
        if !columns.iter().any(|c| c == needed) {
            return Err(Error::UnusableTable {
                table: table.display_name(),
                reason: format!("it has no {needed} column: is it the lease table?"),
            });
        }
    }
    Ok(Shape {
        upgraded: false,
        resource_chars: 255,
        owner_chars: 255,
        charset: Charset::Unicode,
        sync: SyncRead::None,
    })
}
