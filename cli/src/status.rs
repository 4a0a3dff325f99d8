//! `mysqllock status`: the table's rows, for people (aligned columns) or scripts (JSON).

use mysqllock_core::LockStatus;
use serde_json::json;

/// The column titles of the human-readable table.
const HEADER: [&str; 6] = ["NAME", "HOLDER", "HOST", "AGE_S", "TTL_LEFT_S", "STATE"];

/// Whether the row's holder still holds it: "alive" (its session holds the GET_LOCK),
/// "dead" (it does not: the next acquirer will reclaim the row), or "pending" (the row
/// was written but its GET_LOCK not taken yet).
fn state(row: &LockStatus) -> &'static str {
    match (row.acquired, row.holder_alive) {
        (false, _) => "pending",
        (true, true) => "alive",
        (true, false) => "dead",
    }
}

/// Whole seconds, rounded down, so that any expired lease shows a negative TTL.
fn seconds(s: f64) -> i64 {
    s.floor() as i64
}

/// Aligned columns under a header line, or "no locks held".
pub fn table(rows: &[LockStatus]) -> String {
    if rows.is_empty() {
        return "no locks held\n".to_owned();
    }
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.connection_id.to_string(),
                r.host.clone().unwrap_or_else(|| "-".to_owned()),
                seconds(r.age).to_string(),
                seconds(r.remaining).to_string(),
                state(r).to_owned(),
            ]
        })
        .collect();
    let header = HEADER.map(str::to_owned);
    let mut widths = [0; 6];
    for line in std::iter::once(&header).chain(&cells) {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in std::iter::once(&header).chain(&cells) {
        let padded: Vec<String> = line.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(padded.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A JSON array with one object per row; times in seconds as the database reports them.
pub fn json(rows: &[LockStatus]) -> String {
    let rows: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "connection_id": r.connection_id,
                "host": r.host,
                "created": r.created,
                "ttl": r.ttl,
                "age": r.age,
                "remaining_ttl": r.remaining,
                "state": state(r),
            })
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(rows))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    #[test]
    fn expired_lease_of_a_dead_holder_shows_negative_ttl() {
        let text = table(&[row(-0.3, true, false)]);
        let cells: Vec<&str> = text.lines().nth(1).unwrap_or_default().split_whitespace().collect();
        assert_eq!(cells, ["nightly", "42", "-", "60", "-1", "dead"]);
    }

    #[test]
    fn row_without_get_lock_is_pending() {
        assert_eq!(state(&row(10.0, false, false)), "pending");
        assert_eq!(state(&row(10.0, true, true)), "alive");
    }

    #[test]
    fn json_shows_an_invisible_host_as_null() {
        let parsed: serde_json::Value = serde_json::from_str(&json(&[row(5.0, true, true)])).expect("valid JSON");
        assert_eq!(parsed[0]["host"], serde_json::Value::Null);
        assert_eq!(parsed[0]["state"], "alive");
        assert_eq!(table(&[]), "no locks held\n");
        assert_eq!(json(&[]), "[]\n");
    }
}
