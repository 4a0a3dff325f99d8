//! `mysqllock status`: the tables' rows, for people (aligned columns) or scripts (JSON):
//! the locks of `shared_locks`, then the leases of the lease mode's table; with
//! `--session`, session locks and their holders.

use mysqllock_core::{LeaseRow, LockStatus};
use serde_json::json;

use mysqllock_core::session_lock::Holder as SessionLock;

/// The column titles of the human-readable table.
const HEADER: [&str; COLUMNS] =
    ["NAME", "HOLDER", "TOKEN", "HOST", "PID", "ACQUIRED", "EXPIRES", "TTL_LEFT_S", "STATE"];
const COLUMNS: usize = 9;

/// What the table shows where the row does not tell.
const UNKNOWN: &str = "-";

/// Whether the row's holder still holds it: "alive" (its session holds the GET_LOCK),
/// "free" (it does not: it released the lock and left the row, or it ended; the next
/// acquirer takes the row over), or "pending" (the row
/// is taken without the GET_LOCK: being acquired, or kept by "at least" after release).
fn state(row: &LockStatus) -> &'static str {
    match (row.acquired, row.holder_alive) {
        (false, _) => "pending",
        (true, true) => "alive",
        (true, false) => "free",
    }
}

/// Whole seconds, rounded down, so that any expired lease shows a negative TTL.
fn seconds(s: f64) -> i64 {
    s.floor() as i64
}

/// The holder's machine: the host name it recorded, else its client address.
fn host(row: &LockStatus) -> String {
    row.hostname.clone().or_else(|| row.host.clone()).unwrap_or_else(|| UNKNOWN.to_owned())
}

fn or_unknown(value: Option<u64>) -> String {
    value.map_or_else(|| UNKNOWN.to_owned(), |v| v.to_string())
}

/// Unix seconds as a UTC time in one cell, `2025-01-31T02:00:00Z` (the seconds
/// themselves if the system cannot convert them).
fn utc(unix: i64) -> String {
    // 64 bits on every platform this runs on (Linux, 64-bit).
    let time = unix as libc::time_t;
    // SAFETY: a zeroed tm is valid plain data, overwritten by gmtime_r.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; gmtime_r is thread-safe.
    if unsafe { libc::gmtime_r(&time, &mut tm) }.is_null() {
        return unix.to_string();
    }
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

fn cells(r: &LockStatus) -> [String; COLUMNS] {
    [
        r.name.clone(),
        r.connection_id.to_string(),
        or_unknown(r.token),
        host(r),
        or_unknown(r.pid),
        utc(r.acquired_at()),
        utc(r.expires_at()),
        seconds(r.remaining).to_string(),
        state(r).to_owned(),
    ]
}

/// Aligned columns under a header line, or "no locks held".
pub fn table(rows: &[LockStatus]) -> String {
    if rows.is_empty() {
        return "no locks held\n".to_owned();
    }
    aligned(HEADER, rows.iter().map(cells))
}

/// The column titles of the leases' table.
const LEASE_HEADER: [&str; LEASE_COLUMNS] =
    ["RESOURCE", "OWNER", "TOKEN", "ACQUIRED", "EXPIRES", "TTL_LEFT_S", "STATE"];
const LEASE_COLUMNS: usize = 7;

/// A DATETIME as the lease table stores it (UTC, `2025-01-31 02:00:00.123456`) in one
/// cell: `2025-01-31T02:00:00Z`.
fn lease_time(stored: &str) -> String {
    let whole = stored.split('.').next().unwrap_or(stored);
    format!("{}Z", whole.replacen(' ', "T", 1))
}

/// "held" while the lease runs, "expired" once anyone may take it.
fn lease_state(row: &LeaseRow) -> &'static str {
    if row.is_live() {
        "held"
    } else {
        "expired"
    }
}

fn lease_cells(r: &LeaseRow) -> [String; LEASE_COLUMNS] {
    [
        r.resource.clone(),
        r.owner.clone(),
        or_unknown(r.token),
        lease_time(&r.acquired_at),
        lease_time(&r.expires_at),
        seconds(r.remaining).to_string(),
        lease_state(r).to_owned(),
    ]
}

/// What `status` prints: the locks' table, then, after a blank line, the leases' table
/// (each only when it has rows), or "no locks held" when neither has any.
pub fn tables(locks: &[LockStatus], leases: &[LeaseRow]) -> String {
    if leases.is_empty() {
        return table(locks);
    }
    let mut out = if locks.is_empty() { String::new() } else { table(locks) + "\n" };
    out.push_str(&aligned(LEASE_HEADER, leases.iter().map(lease_cells)));
    out
}

/// The columns of the session locks' table; KEY only where a name folds to another key.
const SESSION_HEADER: [&str; SESSION_COLUMNS] = ["NAME", "KEY", "HOLDER", "USER", "HOST", "COMMAND", "TIME_S"];
const SESSION_COLUMNS: usize = 7;

fn session_cells(l: &SessionLock) -> [String; SESSION_COLUMNS] {
    let text = |v: &Option<String>| v.clone().unwrap_or_else(|| UNKNOWN.to_owned());
    [
        l.name.clone(),
        l.key.clone(),
        l.holder.to_string(),
        text(&l.user),
        text(&l.host),
        text(&l.command),
        l.time.map_or_else(|| UNKNOWN.to_owned(), |t| t.to_string()),
    ]
}

/// Aligned columns under a header line, or `empty`; the KEY column only when some
/// lock's name is not its own key (a name given in capitals, with accents).
pub fn session_table(locks: &[SessionLock], empty: &str) -> String {
    if locks.is_empty() {
        return format!("{empty}\n");
    }
    if locks.iter().any(|l| l.name != l.key) {
        return aligned(SESSION_HEADER, locks.iter().map(session_cells));
    }
    aligned(without_key(SESSION_HEADER), locks.iter().map(|l| without_key(session_cells(l))))
}

fn without_key<T>([name, _key, holder, user, host, command, time]: [T; SESSION_COLUMNS]) -> [T; SESSION_COLUMNS - 1] {
    [name, holder, user, host, command, time]
}

/// A JSON array with one object per session lock (`"kind": "session"`): `name`, `key`
/// (the GET_LOCK name), `connection_id` of the holder, and its session's `user`,
/// `host`, `command` and `time` (seconds), `null` where the process list does not show
/// them.
pub fn session_json(locks: &[SessionLock]) -> String {
    let rows: Vec<_> = locks
        .iter()
        .map(|l| {
            json!({
                "kind": "session",
                "name": l.name,
                "key": l.key,
                "connection_id": l.holder,
                "user": l.user,
                "host": l.host,
                "command": l.command,
                "time": l.time,
            })
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(rows))
}

/// Lines of cells, each column as wide as its widest cell, under the header.
fn aligned<const N: usize>(header: [&str; N], rows: impl Iterator<Item = [String; N]>) -> String {
    let header = header.map(str::to_owned);
    let lines: Vec<[String; N]> = std::iter::once(header).chain(rows).collect();
    let mut widths = [0; N];
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &lines {
        let padded: Vec<String> = line.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(padded.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A JSON array with one object per row; times in seconds as the database reports
/// them (`created`, `acquired_at`, `expires_at`: Unix seconds), `null` where unknown.
/// Lock rows have `"kind": "lock"`; lease rows (after them) `"kind": "lease"`, with
/// `resource`, `owner`, `token`, `acquired_at` and `expires_at` (UTC text, as stored),
/// `remaining_ttl` and `state` ("held" or "expired").
pub fn json(rows: &[LockStatus], leases: &[LeaseRow]) -> String {
    let leases = leases.iter().map(|r| {
        json!({
            "kind": "lease",
            "resource": r.resource,
            "owner": r.owner,
            "token": r.token,
            "acquired_at": r.acquired_at,
            "expires_at": r.expires_at,
            "remaining_ttl": r.remaining,
            "state": lease_state(r),
        })
    });
    let rows: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "kind": "lock",
                "name": r.name,
                "connection_id": r.connection_id,
                "host": r.host,
                "created": r.created,
                "ttl": r.ttl,
                "age": r.age,
                "remaining_ttl": r.remaining,
                "state": state(r),
                "token": r.token,
                "hostname": r.hostname,
                "pid": r.pid,
                "acquired_at": r.acquired_at(),
                "expires_at": r.expires_at(),
            })
        })
        .chain(leases)
        .collect();
    format!("{}\n", serde_json::Value::Array(rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row on the original table: no token, host name or pid recorded.
    fn row(remaining: f64, acquired: bool, holder_alive: bool) -> LockStatus {
        LockStatus {
            name: "nightly".into(),
            connection_id: 42,
            host: None,
            created: 1_700_000_000,
            ttl: 60,
            age: 60.7,
            remaining,
            acquired,
            holder_alive,
            token: None,
            hostname: None,
            pid: None,
        }
    }

    fn upgraded_row() -> LockStatus {
        LockStatus {
            host: Some("10.0.0.12:50480".into()),
            token: Some(7),
            hostname: Some("web-01".into()),
            pid: Some(4242),
            ..row(5.0, true, true)
        }
    }

    fn second_line(text: &str) -> Vec<&str> {
        text.lines().nth(1).unwrap_or_default().split_whitespace().collect()
    }

    #[test]
    fn expired_lease_of_a_dead_holder_shows_negative_ttl() {
        let text = table(&[row(-0.3, true, false)]);
        assert_eq!(
            second_line(&text),
            ["nightly", "42", "-", "-", "-", "2023-11-14T22:13:20Z", "2023-11-14T22:14:20Z", "-1", "free"]
        );
    }

    #[test]
    fn recorded_host_name_wins_over_the_client_address() {
        let text = table(&[upgraded_row()]);
        assert_eq!(second_line(&text)[..5], ["nightly", "42", "7", "web-01", "4242"]);
        let anonymous = LockStatus { hostname: None, ..upgraded_row() };
        assert_eq!(second_line(&table(&[anonymous]))[3], "10.0.0.12:50480");
    }

    #[test]
    fn columns_line_up_under_the_header() {
        let text = table(&[row(5.0, true, true), upgraded_row()]);
        let lines: Vec<&str> = text.lines().collect();
        let column = lines[0].find("ACQUIRED");
        assert!(lines[1..].iter().all(|l| l.find("2023-") == column), "ACQUIRED not aligned:\n{text}");
    }

    #[test]
    fn row_without_get_lock_is_pending() {
        assert_eq!(state(&row(10.0, false, false)), "pending");
        assert_eq!(state(&row(10.0, true, true)), "alive");
    }

    #[test]
    fn json_shows_what_is_unknown_as_null() {
        let parsed: serde_json::Value = serde_json::from_str(&json(&[row(5.0, true, true)], &[])).expect("valid JSON");
        for key in ["host", "token", "hostname", "pid"] {
            assert_eq!(parsed[0][key], serde_json::Value::Null, "{key}");
        }
        assert_eq!(parsed[0]["state"], "alive");
        assert_eq!(
            (parsed[0]["acquired_at"].as_i64(), parsed[0]["expires_at"].as_i64()),
            (Some(1_700_000_000), Some(1_700_000_060))
        );
        assert_eq!(table(&[]), "no locks held\n");
        assert_eq!(json(&[], &[]), "[]\n");
    }

    fn lease(remaining: f64) -> LeaseRow {
        LeaseRow {
            resource: "report".into(),
            owner: "web-01:4242:00ff".into(),
            expires_at: "2025-01-31 02:00:30.250000".into(),
            acquired_at: "2025-01-31 02:00:00".into(),
            remaining,
            token: Some(9),
        }
    }

    #[test]
    fn leases_follow_the_locks_after_a_blank_line_under_their_own_header() {
        let text = tables(&[row(5.0, true, true)], &[lease(12.5)]);
        let sections: Vec<&str> = text.split("\n\n").collect();
        assert_eq!(sections.len(), 2, "{text}");
        assert!(sections[0].starts_with("NAME"), "{text}");
        let lines: Vec<&str> = sections[1].lines().collect();
        assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), LEASE_HEADER);
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["report", "web-01:4242:00ff", "9", "2025-01-31T02:00:00Z", "2025-01-31T02:00:30Z", "12", "held"]
        );
    }

    #[test]
    fn leases_alone_and_nothing_at_all() {
        let text = tables(&[], &[lease(-0.5)]);
        assert!(text.starts_with("RESOURCE") && text.contains("expired"), "{text}");
        assert_eq!(tables(&[], &[]), "no locks held\n");
        assert_eq!(tables(&[row(5.0, true, true)], &[]), table(&[row(5.0, true, true)]));
    }

    #[test]
    fn json_lists_leases_after_locks_with_their_kind() {
        let parsed: serde_json::Value =
            serde_json::from_str(&json(&[row(5.0, true, true)], &[lease(3.0)])).expect("valid JSON");
        assert_eq!((parsed[0]["kind"].as_str(), parsed[1]["kind"].as_str()), (Some("lock"), Some("lease")));
        assert_eq!(parsed[1]["owner"], "web-01:4242:00ff");
        assert_eq!(parsed[1]["token"], 9);
        assert_eq!(parsed[1]["state"], "held");
    }

    fn session_lock(name: &str, key: &str) -> SessionLock {
        SessionLock {
            name: name.into(),
            key: key.into(),
            holder: 42,
            user: Some("app".into()),
            host: None,
            command: Some("Sleep".into()),
            time: Some(7),
        }
    }

    #[test]
    fn session_locks_show_their_key_only_when_a_name_folds_to_another() {
        let plain = session_table(&[session_lock("nightly", "nightly")], "none");
        assert_eq!(second_line(&plain), ["nightly", "42", "app", "-", "Sleep", "7"]);
        assert!(!plain.contains("KEY"), "{plain}");
        let folded = session_table(&[session_lock("Nightly", "nightly")], "none");
        assert_eq!(second_line(&folded)[..3], ["Nightly", "nightly", "42"]);
        assert_eq!(session_table(&[], "no session locks held"), "no session locks held\n");
    }

    #[test]
    fn session_lock_json_has_null_where_the_process_list_is_silent() {
        let parsed: serde_json::Value =
            serde_json::from_str(&session_json(&[session_lock("Nightly", "nightly")])).expect("valid JSON");
        assert_eq!((parsed[0]["kind"].as_str(), parsed[0]["key"].as_str()), (Some("session"), Some("nightly")));
        assert_eq!(parsed[0]["connection_id"], 42);
        assert_eq!(parsed[0]["host"], serde_json::Value::Null);
    }
}
