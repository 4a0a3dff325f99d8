//! One cold start of a native session: a fresh process connects, runs one statement and
//! exits, printing how it logged in. For timing the connection alone, e.g. on a MySQL
//! started by scripts/mysql.sh (bench/cold.sh times the whole stack, on MariaDB):
//!
//! ```text
//! cargo build --release -p mysqllock-core --example connect_once
//! perf stat -r 50 target/release/examples/connect_once "$MYSQLLOCK_TEST_DSN" >/dev/null
//! ```

use mysqllock_core::{Config, MysqlSession, Session};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dsn = std::env::args().nth(1).ok_or("usage: connect_once mysql://user:password@host:port/database")?;
    let mut session = MysqlSession::connect(&Config::from_url(&dsn)?)?;
    session.execute("SELECT 1", &[])?;
    println!("{:?}", session.authentication());
    Ok(())
}
