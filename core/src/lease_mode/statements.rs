//! The statements, per dialect and table shape. Names and numbers are bound parameters;
//! the interpolated text is the validated, quoted table name.

use super::{Dialect, LOST, PAST_DATETIME_END, STILL_MINE, TAKEN_OVER};
use crate::config::Table;

/// Exact owner comparison: the column's collation may fold case and trailing spaces
/// (even `_bin` collations pad), and two owners must never be taken for one. Both
/// sides become utf8mb4 bytes, whatever the connection's or the column's character
/// set, and bytes compare without padding.
fn owner_is(param: &str) -> String {
    format!("CAST(CONVERT(owner USING utf8mb4) AS BINARY) = CAST(CONVERT({param} USING utf8mb4) AS BINARY)")
}

/// `(now, expired, live, interval unit)` for the table's time precision. A
/// whole-second `expires_at` holds `floor(now) + ttl` and stays live through that
/// second, so a lease never lasts less than its TTL.
fn clock(upgraded: bool) -> (&'static str, &'static str, &'static str, &'static str) {
    if upgraded {
        ("UTC_TIMESTAMP(6)", "expires_at <= UTC_TIMESTAMP(6)", "expires_at > UTC_TIMESTAMP(6)", "MICROSECOND")
    } else {
        ("UTC_TIMESTAMP()", "expires_at < UTC_TIMESTAMP()", "expires_at >= UTC_TIMESTAMP()", "SECOND")
    }
}

pub fn acquire(dialect: Dialect, table: &Table, upgraded: bool) -> String {
    let t = table.sql_name();
    match dialect {
        Dialect::Sqlite => {
            let q = table.quote_style().quote(table.name());
            format!(
                "INSERT INTO {t} (resource, owner, expires_at, acquired_at) \
                 VALUES (?, ?, datetime('now', ?), datetime('now')) \
                 ON CONFLICT(resource) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, \
                 acquired_at = CASE WHEN {q}.expires_at < datetime('now') THEN excluded.acquired_at ELSE {q}.acquired_at END \
                 WHERE {q}.expires_at < datetime('now') OR {q}.owner = excluded.owner"
            )
        }
        Dialect::MySql => {
            let (now, expired, _, unit) = clock(upgraded);
            // Update assignments run left to right, each seeing the columns already
            // assigned: the verdict and acquired_at read the original row, owner
            // changes only on an expired row, and expires_at then follows owner.
            let mine = owner_is("?");
            if upgraded {
                format!(
                    "INSERT INTO {t} (resource, owner, expires_at, acquired_at, token) \
                     VALUES (?, ?, {now} + INTERVAL ? {unit}, {now}, \
                     LAST_INSERT_ID(CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000) AS UNSIGNED))) \
                     ON DUPLICATE KEY UPDATE \
                     acquired_at = IF(LAST_INSERT_ID(IF({expired}, token + 1, IF({mine}, token, {LOST}))) <> {LOST} AND {expired}, {now}, acquired_at), \
                     token = IF({expired}, token + 1, token), \
                     owner = IF({expired}, ?, owner), \
                     expires_at = IF({mine}, {now} + INTERVAL ? {unit}, expires_at)"
                )
            } else {
                format!(
                    "INSERT INTO {t} (resource, owner, expires_at, acquired_at) \
                     VALUES (?, ?, {now} + INTERVAL ? {unit}, {now}) \
                     ON DUPLICATE KEY UPDATE \
                     acquired_at = IF(LAST_INSERT_ID(IF({expired}, {TAKEN_OVER}, IF({mine}, {STILL_MINE}, {LOST}))) = {TAKEN_OVER}, {now}, acquired_at), \
                     owner = IF({expired}, ?, owner), \
                     expires_at = IF({mine}, {now} + INTERVAL ? {unit}, expires_at)"
                )
            }
        }
    }
}

pub fn release(dialect: Dialect, table: &Table, upgraded: bool) -> String {
    end(dialect, table, upgraded, true)
}

/// [`release`] whoever the owner is.
pub fn force_release(dialect: Dialect, table: &Table, upgraded: bool) -> String {
    end(dialect, table, upgraded, false)
}

/// Ends the live lease on a resource (`?`), of the owner bound second if `of_owner`.
fn end(dialect: Dialect, table: &Table, upgraded: bool, of_owner: bool) -> String {
    let t = table.sql_name();
    match dialect {
        Dialect::Sqlite => {
            let mine = if of_owner { " AND owner = ?" } else { "" };
            format!("DELETE FROM {t} WHERE resource = ?{mine} AND expires_at >= datetime('now')")
        }
        Dialect::MySql => {
            let (now, _, live, _) = clock(upgraded);
            let mine = if of_owner { format!(" AND {}", owner_is("?")) } else { String::new() };
            if upgraded {
                // The row stays, ended now, so the next acquisition's token counts on.
                format!("UPDATE {t} SET expires_at = {now} WHERE resource = ?{mine} AND {live}")
            } else {
                format!("DELETE FROM {t} WHERE resource = ?{mine} AND {live}")
            }
        }
    }
}

pub fn renew(dialect: Dialect, table: &Table, upgraded: bool) -> String {
    let t = table.sql_name();
    match dialect {
        Dialect::Sqlite => format!(
            "UPDATE {t} SET expires_at = datetime('now', ?) WHERE resource = ? AND owner = ? AND expires_at >= datetime('now')"
        ),
        Dialect::MySql => {
            let (now, _, live, unit) = clock(upgraded);
            let mine = owner_is("?");
            // The verdict comes back as the OK packet's insert id: a renewal within
            // the same second changes nothing, so affected rows cannot tell. A new end
            // past the DATETIME range (NULL) keeps the row as it is: an UPDATE in a
            // non-strict sql_mode would store a zero date instead of failing.
            let verdict = if upgraded { "token" } else { "1" };
            format!(
                "UPDATE {t} SET expires_at = \
                 IF(LAST_INSERT_ID(IF({now} + INTERVAL ? {unit} IS NULL, {PAST_DATETIME_END}, {verdict})) = {PAST_DATETIME_END}, \
                 expires_at, {now} + INTERVAL ? {unit}) \
                 WHERE resource = ? AND {mine} AND {live}"
            )
        }
    }
}

pub fn is_held(dialect: Dialect, table: &Table, upgraded: bool) -> String {
    let t = table.sql_name();
    match dialect {
        Dialect::Sqlite => {
            format!("SELECT COUNT(*) FROM {t} WHERE resource = ? AND expires_at >= datetime('now')")
        }
        Dialect::MySql => {
            let (_, _, live, _) = clock(upgraded);
            format!("SELECT COUNT(*) FROM {t} WHERE resource = ? AND {live}")
        }
    }
}

/// The resources of the live leases matching a `LIKE` pattern (`?`, escaped with `!`,
/// see [`like_escaped`]).
pub fn held_with_prefix(dialect: Dialect, table: &Table, upgraded: bool) -> String {
    let t = table.sql_name();
    match dialect {
        Dialect::Sqlite => format!(
            "SELECT resource FROM {t} WHERE resource LIKE ? ESCAPE '!' AND expires_at >= datetime('now') ORDER BY resource"
        ),
        Dialect::MySql => {
            let (_, _, live, _) = clock(upgraded);
            format!("SELECT resource FROM {t} WHERE resource LIKE ? ESCAPE '!' AND {live} ORDER BY resource")
        }
    }
}

/// `text` with `LIKE`'s wildcards (and the escape character `!` itself) escaped by `!`,
/// for a pattern that matches it literally.
pub fn like_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    for c in text.chars() {
        if matches!(c, '!' | '%' | '_') {
            out.push('!');
        }
        out.push(c);
    }
    out
}

/// The owner of the live lease on a resource.
pub fn owner(dialect: Dialect, table: &Table, upgraded: bool) -> String {
    let t = table.sql_name();
    match dialect {
        Dialect::Sqlite => format!("SELECT owner FROM {t} WHERE resource = ? AND expires_at >= datetime('now')"),
        Dialect::MySql => {
            let (_, _, live, _) = clock(upgraded);
            format!("SELECT owner FROM {t} WHERE resource = ? AND {live}")
        }
    }
}

/// Whether the owner bound second holds the live lease on a resource.
pub fn is_held_by(dialect: Dialect, table: &Table, upgraded: bool) -> String {
    let t = table.sql_name();
    match dialect {
        Dialect::Sqlite => {
            format!("SELECT COUNT(*) FROM {t} WHERE resource = ? AND owner = ? AND expires_at >= datetime('now')")
        }
        Dialect::MySql => {
            let (_, _, live, _) = clock(upgraded);
            format!("SELECT COUNT(*) FROM {t} WHERE resource = ? AND {} AND {live}", owner_is("?"))
        }
    }
}

pub fn rows(dialect: Dialect, table: &Table, upgraded: bool, one: bool) -> String {
    let t = table.sql_name();
    let filter = if one { " WHERE resource = ?" } else { "" };
    match dialect {
        Dialect::Sqlite => format!(
            "SELECT resource, owner, expires_at, acquired_at, \
             (julianday(expires_at) - julianday('now')) * 86400.0 + 1.0, NULL FROM {t}{filter} ORDER BY resource"
        ),
        Dialect::MySql => {
            // Remaining time to the end of the lease: a whole-second expires_at stays
            // live through its second.
            let (remaining, token) = if upgraded {
                ("TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1e6", "token")
            } else {
                ("TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1e6 + 1", "NULL")
            };
            format!(
                "SELECT resource, owner, CAST(expires_at AS CHAR), CAST(acquired_at AS CHAR), {remaining}, {token} \
                 FROM {t}{filter} ORDER BY resource"
            )
        }
    }
}

/// The table as `Nene\Kit\DistributedLock` documents it, InnoDB made explicit (the
/// lease mode refuses a table that is not transactional).
pub fn create(dialect: Dialect, table: &Table) -> String {
    let t = table.sql_name();
    let body = format!(
        "CREATE TABLE {t} (\n  resource VARCHAR(255) PRIMARY KEY,\n  owner VARCHAR(255) NOT NULL,\n  expires_at DATETIME NOT NULL,\n  acquired_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP\n)"
    );
    match dialect {
        Dialect::Sqlite => body,
        Dialect::MySql => format!("{body} ENGINE=InnoDB"),
    }
}

/// Inserts no row (the condition is false for every unsigned value) but evaluates
/// `LAST_INSERT_ID(?)` once, whose argument the OK packet then carries as the insert
/// id. `DO`, `SET` and `SELECT` would leave the client's insert id at 0 instead, and
/// an `UPDATE` carries it only when a row matches.
pub fn give_back_insert_id(table: &Table) -> String {
    format!(
        "INSERT INTO {} (resource, owner, expires_at, acquired_at) \
         SELECT NULL, NULL, NULL, NULL FROM DUAL WHERE LAST_INSERT_ID(CAST(? AS UNSIGNED)) < 0",
        table.sql_name()
    )
}

/// Adds the fencing token (existing rows start at 1) and microsecond times.
pub fn upgrade(table: &Table) -> String {
    format!(
        "ALTER TABLE {} MODIFY expires_at DATETIME(6) NOT NULL, \
         MODIFY acquired_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), \
         ADD COLUMN token BIGINT UNSIGNED NOT NULL DEFAULT 1",
        table.sql_name()
    )
}
