//! Every statement the protocol runs, built once per table. Lock names and numbers are
//! bound parameters (a session that writes a statement's values into its text, its first
//! run, does so through the transport's one literal writer); the interpolated text is the
//! validated, quoted table name and `KILL <integer>` in `Session::kill`.

use crate::config::Table;

/// The columns `mysqllock init --upgrade` adds to the original table. Each has a default,
/// so an INSERT that names the original five columns (the original package's) still works.
/// `token` is the fencing token: MyISAM keeps one AUTO_INCREMENT counter per table that
/// never hands out a value twice, also across restarts, when the column is the only one
/// in its index.
pub(crate) const UPGRADE_COLUMNS: [&str; 3] = ["token", "holder_host", "holder_pid"];

/// How many columns the original package's table has (`name`, `connection_id`,
/// `created`, `ttl`, `lock_acquired`): a table of this width has none of the upgrade's.
pub(crate) const ORIGINAL_COLUMNS: usize = 5;

/// The statements of the TTL-lease protocol for one table.
///
/// Wherever a statement names a GET_LOCK by the `name` column (`IS_USED_LOCK`,
/// `RELEASE_LOCK`), the column is `CAST(name AS CHAR)`: the server compares lock names
/// as bytes in the string's own character set, so the latin1 bytes of a stored `Fóo`
/// are not the lock `GET_LOCK(?)` took with the name bound in the connection's
/// character set. The cast converts to the connection's character set, as a bound name.
#[derive(Debug, Clone)]
pub(crate) struct Sql {
    /// The table has the upgrade's columns (see [`Sql::new`]).
    pub upgraded: bool,
    /// Claim the row and take GET_LOCK in one round trip. When GET_LOCK is busy the value
    /// is NULL, which a single-row INSERT refuses (error 1048) in every `sql_mode`, so
    /// success means "row and GET_LOCK are ours" without reading anything back (and
    /// without touching the session's `LAST_INSERT_ID()`, which a shared PDO user owns).
    /// GET_LOCK is evaluated even when the INSERT then fails on the unique key, so after
    /// a duplicate the session may hold the GET_LOCK: `inspect` tells.
    ///
    /// On an upgraded table the INSERT also records the holder's host name and pid, and
    /// the OK packet's insert id is the fencing token: no extra round trip.
    pub claim_trying: String,
    /// Claim the row without the GET_LOCK (`lock_acquired = 0`), when someone else holds it.
    pub claim_pending: String,
    /// Claim the row while already holding the GET_LOCK (never GET_LOCK twice: it is
    /// re-entrant and would need two releases).
    pub claim_holding: String,
    /// A waiter's claim, sent behind its sleep ([`Sql::queue_get_lock`]) in the same round
    /// trip: `lock_acquired` is NULL (error 1048, nothing written) unless this session
    /// holds the GET_LOCK, so the server writes the row the moment the previous owner
    /// lets go, without waking the client in between, and writes nothing when the sleep
    /// timed out or failed. Bound like [`Sql::claim_trying`].
    pub claim_if_granted: String,
    /// The row for a name (under whatever spelling), whether its owner still holds the
    /// GET_LOCK of the spelling it stored, and whether we hold the GET_LOCK of ours.
    /// Without a row (its owner released since the claim) the owner's column is not
    /// looked up: MySQL refuses `IS_USED_LOCK(NULL)` (error 3057), MariaDB answers NULL.
    /// `until_reclaimable`: seconds until `created + ttl < UNIX_TIMESTAMP()` turns true.
    pub inspect: String,
    /// Delete a row seen as reclaimable, re-checking the condition in the same statement
    /// and matching the exact row seen, so a newer owner's row is never touched.
    pub reclaim: String,
    /// Delete a row carrying our connection id that this session never created: it was
    /// left by an earlier server life whose session ids restarted at ours.
    pub reclaim_reused_id: String,
    pub get_lock_or_holder: String,
    /// Right before a KILL: does `holder` still have the GET_LOCK, and do we still own
    /// our row with at least a second of it left (so `holder` cannot be its owner)?
    pub still_stale_holder: String,
    /// Also restarts the lease: a takeover may have taken a while.
    pub mark_acquired: String,
    pub abandon_claim: String,
    pub wait_get_lock: String,
    /// A waiter's sleep on its own spelling: whether it was free before (so the locker
    /// learns whether the name is contended), then `GET_LOCK`.
    pub queue_get_lock: String,
    pub release_get_lock: String,
    /// Releases once if this session holds it: cleanup when we cannot know.
    pub release_if_mine: String,
    pub delete_own: String,
    /// Release in one round trip: delete our row and, in the same statement, release its
    /// GET_LOCK. The statement keeps the table locked until the row is gone, so a waiter
    /// woken by the release finds it gone. Matches nothing (and releases nothing) unless
    /// both halves are ours: the caller then sorts out what is left.
    pub release: String,
    /// [`Sql::release`] when the holder ends without releasing (request or process end,
    /// client free): deletes the row only while it is still marked `lock_acquired = 1`,
    /// the state in which the original package would reclaim it at once once the session
    /// is gone. A row marked 0 (by anyone) stays until its TTL, as the original leaves
    /// it: a session ending never frees such a row early.
    pub release_at_end: String,
    /// The lease's remaining time, counted to `created + ttl`: `created` is a whole
    /// second, so the true end may be up to a second later, never earlier. Callers
    /// asserting a minimum get the safe side.
    pub remaining: String,
    /// Extends a lease to `now + ttl` (never shortens it, never past `created + cap`),
    /// only while the given session owns the row and holds its GET_LOCK. Keeps `created`
    /// as the acquisition time, so a cap counts from there.
    pub renew: String,
    /// Sets a lease to end `ttl` seconds from now, sooner or later than it would have
    /// (Symfony's `putOffExpiration()`), on the same conditions as [`Sql::renew`]. Keeps
    /// `created`; counted from the same whole second as a renewal.
    pub set_remaining: String,
    /// After a renewal that changed nothing: is the lease still the given session's?
    pub owns: String,
    /// Release for "at least" leases: the row stays until `created + at_least` but no
    /// longer claims the GET_LOCK (`lock_acquired = 0`), so no acquirer reclaims it early
    /// as a dead holder's; the GET_LOCK is released in the same statement. Only while the
    /// lease is ours and that time is still ahead.
    pub linger: String,
    /// The table's shape: the `name` column's character set, whether it exists, and how
    /// many of the upgrade's columns are there.
    pub schema: String,
    /// Adds the upgrade's columns (one statement: all or nothing).
    pub upgrade: String,
    pub status_all: String,
    pub status_one: String,
    pub create: String,
}

impl Sql {
    /// `upgraded`: the table has [`UPGRADE_COLUMNS`]; the claims then bind two more
    /// parameters (host name, pid) and status reads them.
    pub fn new(table: &Table, upgraded: bool) -> Sql {
        let t = table.sql_name();
        let schema = if table.schema().is_some() { "?" } else { "DATABASE()" };
        let recorded = if upgraded { "l.token, l.holder_host, l.holder_pid" } else { "NULL, NULL, NULL" };
        let status = format!(
            "SELECT l.name, l.connection_id, l.created, l.ttl, l.lock_acquired, \
             l.created + l.ttl - UNIX_TIMESTAMP(NOW(6)), UNIX_TIMESTAMP(NOW(6)) - l.created, \
             IS_USED_LOCK(CAST(l.name AS CHAR)), p.HOST, {recorded} \
             FROM {t} AS l LEFT JOIN information_schema.PROCESSLIST AS p ON p.ID = l.connection_id"
        );
        let (columns, holder) = if upgraded { (", holder_host, holder_pid", ", ?, ?") } else { ("", "") };
        let claim = |acquired: &str| {
            format!(
                "INSERT INTO {t} (name, connection_id, created, ttl, lock_acquired{columns}) \
                 VALUES (?, CONNECTION_ID(), UNIX_TIMESTAMP(), ?, {acquired}{holder})"
            )
        };
        // RELEASE_LOCK last: it runs only for the row the other conditions matched.
        let release = |only: &str| {
            format!(
                "DELETE FROM {t} WHERE name = ? AND connection_id = CONNECTION_ID() {only}\
                 AND RELEASE_LOCK(CAST(name AS CHAR)) = 1"
            )
        };
        let names = UPGRADE_COLUMNS.map(|c| format!("'{c}'")).join(", ");
        Sql {
            upgraded,
            claim_trying: claim("IF(GET_LOCK(?, 0) = 1, 1, NULL)"),
            claim_pending: claim("0"),
            claim_holding: claim("1"),
            claim_if_granted: claim("IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, NULL)"),
            inspect: format!(
                "SELECT IS_USED_LOCK(?) <=> CONNECTION_ID(), l.name, l.connection_id, l.lock_acquired, \
                 l.created, l.ttl, l.created + l.ttl + 1 - UNIX_TIMESTAMP(NOW(6)), \
                 IF(l.name IS NULL, NULL, IS_USED_LOCK(CAST(l.name AS CHAR))) \
                 FROM (SELECT 1 AS one) AS probe LEFT JOIN {t} AS l ON l.name = ?"
            ),
            reclaim: format!(
                "DELETE FROM {t} WHERE name = ? AND connection_id = ? AND created = ? AND ttl = ? \
                 AND (created + ttl < UNIX_TIMESTAMP() \
                      OR (lock_acquired = 1 AND NOT (IS_USED_LOCK(CAST(name AS CHAR)) <=> connection_id)))"
            ),
            reclaim_reused_id: format!(
                "DELETE FROM {t} WHERE name = ? AND connection_id = CONNECTION_ID() AND created = ? AND ttl = ?"
            ),
            get_lock_or_holder: "SELECT GET_LOCK(?, ?), IS_USED_LOCK(?)".to_owned(),
            still_stale_holder: format!(
                "SELECT IS_USED_LOCK(?) <=> ?, EXISTS (SELECT 1 FROM {t} WHERE name = ? \
                 AND connection_id = CONNECTION_ID() AND created + ttl >= UNIX_TIMESTAMP() + 1)"
            ),
            mark_acquired: format!(
                "UPDATE {t} SET lock_acquired = 1, created = UNIX_TIMESTAMP() \
                 WHERE name = ? AND connection_id = CONNECTION_ID() AND lock_acquired = 0"
            ),
            abandon_claim: format!(
                "DELETE FROM {t} WHERE name = ? AND connection_id = CONNECTION_ID() AND lock_acquired = 0"
            ),
            wait_get_lock: "SELECT GET_LOCK(?, ?)".to_owned(),
            queue_get_lock: "SELECT IS_FREE_LOCK(?), GET_LOCK(?, ?)".to_owned(),
            release_get_lock: "SELECT RELEASE_LOCK(?)".to_owned(),
            release_if_mine: "SELECT IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), RELEASE_LOCK(?), 0)".to_owned(),
            delete_own: format!("DELETE FROM {t} WHERE name = ? AND connection_id = CONNECTION_ID()"),
            release: release(""),
            release_at_end: release("AND lock_acquired = 1 "),
            remaining: format!(
                "SELECT l.created + l.ttl - UNIX_TIMESTAMP(NOW(6)), IS_USED_LOCK(CAST(l.name AS CHAR)) <=> CONNECTION_ID() \
                 FROM {t} AS l WHERE l.name = ? AND l.connection_id = CONNECTION_ID()"
            ),
            renew: format!(
                "UPDATE {t} SET ttl = GREATEST(ttl, LEAST(UNIX_TIMESTAMP() - created + ?, ?)) \
                 WHERE name = ? AND connection_id = ? AND lock_acquired = 1 AND IS_USED_LOCK(CAST(name AS CHAR)) <=> connection_id"
            ),
            set_remaining: format!(
                "UPDATE {t} SET ttl = UNIX_TIMESTAMP() - created + ? \
                 WHERE name = ? AND connection_id = ? AND lock_acquired = 1 AND IS_USED_LOCK(CAST(name AS CHAR)) <=> connection_id"
            ),
            owns: format!(
                "SELECT COUNT(*) FROM {t} \
                 WHERE name = ? AND connection_id = ? AND lock_acquired = 1 AND IS_USED_LOCK(CAST(name AS CHAR)) <=> connection_id"
            ),
            linger: format!(
                "UPDATE {t} SET lock_acquired = 0, ttl = ? \
                 WHERE name = ? AND connection_id = CONNECTION_ID() AND lock_acquired = 1 \
                 AND created + ? > UNIX_TIMESTAMP() AND RELEASE_LOCK(CAST(name AS CHAR)) = 1"
            ),
            schema: format!(
                "SELECT MAX(IF(COLUMN_NAME = 'name', CHARACTER_SET_NAME, NULL)), \
                 COALESCE(SUM(COLUMN_NAME = 'name'), 0), COALESCE(SUM(COLUMN_NAME IN ({names})), 0) \
                 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {schema} AND TABLE_NAME = ?"
            ),
            upgrade: format!(
                "ALTER TABLE {t} ADD COLUMN token BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, \
                 ADD COLUMN holder_host VARCHAR(255) NULL DEFAULT NULL, \
                 ADD COLUMN holder_pid BIGINT UNSIGNED NULL DEFAULT NULL, ADD KEY token (token)"
            ),
            status_one: format!("{status} WHERE l.name = ?"),
            status_all: format!("{status} ORDER BY l.name"),
            create: table.create_sql().replacen("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1),
        }
    }
}

/// Session locks name their GET_LOCK by the key's UTF-8 bytes in hexadecimal, bound as
/// a parameter: plain ASCII, so neither the connection's character set nor PDO's quoting
/// can change the key, and one statement text serves every name (prepared once per
/// session, where the session prepares).
pub const SESSION_GET_LOCK: &str = "SELECT GET_LOCK(CONVERT(UNHEX(?) USING utf8mb4), ?)";
pub const SESSION_RELEASE_LOCK: &str = "SELECT RELEASE_LOCK(CONVERT(UNHEX(?) USING utf8mb4))";
pub const SESSION_HOLDER: &str = "SELECT IS_USED_LOCK(CONVERT(UNHEX(?) USING utf8mb4))";

/// `text`'s UTF-8 bytes in hexadecimal.
pub fn hex(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(2 * text.len());
    for b in text.bytes() {
        let _ = write!(out, "{b:02X}");
    }
    out
}
