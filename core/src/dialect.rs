//! Which database a session talks to.

/// Which database a session talks to: the SQL the lease statements are written in, and
/// whose numbering a [`SessionError`](crate::SessionError)'s code is in. SQLite is there
/// for tests that craft rows (an in-memory PDO, as the original class documents);
/// MySQL/MariaDB is production.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    #[default]
    MySql,
    Sqlite,
}
