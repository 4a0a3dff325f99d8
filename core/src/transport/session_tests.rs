//! The session's tests: literals, the setup, the statements, against the test server.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report
use super::super::literals::placeholders;
use super::super::statements::{PREPARED_AT_MOST, TEXTS_AT_MOST};
use super::*;

fn config() -> Config {
    let dsn = std::env::var("MYSQLLOCK_TEST_DSN")
        .expect("MYSQLLOCK_TEST_DSN is not set: start a server with scripts/mariadb.sh or scripts/mysql.sh");
    Config::from_url(&dsn).unwrap()
}

/// Whether the test server is MariaDB (`MYSQLLOCK_TEST_SERVER`, written by
/// scripts/mariadb.sh and scripts/mysql.sh): some answers differ by server.
fn on_mariadb() -> bool {
    match std::env::var("MYSQLLOCK_TEST_SERVER").as_deref() {
        Ok("mariadb") => true,
        Ok("mysql") => false,
        other => panic!("MYSQLLOCK_TEST_SERVER is {other:?}, not mariadb or mysql: export DIR/env of scripts/mariadb.sh or scripts/mysql.sh"),
    }
}

fn session() -> MysqlSession {
    MysqlSession::connect(&config()).unwrap()
}

/// A counter of `SHOW SESSION STATUS` on `conn`: what the session has run so far.
fn session_status(conn: &mut wire::Connection, counter: &str, bound: Bound) -> u64 {
    let sets = query_sets(conn, &format!("SHOW SESSION STATUS LIKE '{counter}'"), bound).unwrap();
    sets.first().and_then(|rows| rows.first()?.get(1)?.as_u64()).unwrap()
}

#[test]
fn greetings_of_mariadb_look_like_mariadb_and_mysqls_do_not() {
    for (text, mariadb) in
        [("5.5.5-10.11.19-MariaDB-0+deb12u1", true), ("11.4.2-MariaDB", true), ("8.0.36", false), ("5.7.44-log", false)]
    {
        assert_eq!(looks_mariadb(version_of(text)), mariadb, "{text}");
    }
    assert_eq!(version_of("5.7.44-log"), (5, 7, 44));
}

#[test]
fn a_session_logs_in_with_the_servers_default_plugin() {
    // mysql_native_password on MariaDB, caching_sha2_password on MySQL.
    let session = session();
    let native = session.authentication() == Authentication::NativePassword;
    assert_eq!(native, on_mariadb(), "{:?}", session.authentication());
}

#[test]
fn the_short_setup_probes_learn_what_the_full_probe_learns() {
    let config = config();
    let set = session_settings(&config.charset);
    let bound = Bound::connect(config.connect_deadline(), config.read_timeout, config.write_timeout);
    let (mut conn, mariadb, _) = open(&config, bound, &set, None).unwrap();
    assert_eq!(mariadb, on_mariadb(), "the greeting tells MariaDB from MySQL");
    if !mariadb {
        // MySQL's short probe: what the full probe learns, on a standalone MySQL.
        let count = |conn: &mut wire::Connection, what: &str| session_status(conn, what, bound);
        let selects_before = count(&mut conn, "Com_select");
        let shown_before = count(&mut conn, "Com_show_variables");
        let learned = setup(&mut conn, false, None, &set, None, bound).unwrap();
        let selects = count(&mut conn, "Com_select") - selects_before;
        let shown = count(&mut conn, "Com_show_variables") - shown_before;
        assert_eq!(shown, 0, "the setup read every variable (SHOW VARIABLES): the MySQL probe was not used");
        // The plugin is asked about only where Group Replication could run.
        let possible = query_sets(&mut conn, "SELECT @@global.gtid_mode = 'ON' AND @@global.log_bin", bound).unwrap();
        let possible = possible.first().and_then(|rows| rows.first()?.first()?.as_u64()).unwrap();
        assert_eq!(selects, 1 + possible, "the setup's SELECTs, where a member is possible: {possible}");
        let (full_rows, full_wait) = full_probe(&mut conn, bound).unwrap();
        assert_eq!(Topology::from_probe(&learned.topology), Topology::from_probe(&full_rows));
        assert!(!Topology::from_probe(&learned.topology).is_cluster());
        assert_eq!(learned.wait_timeout, full_wait);
        return;
    }
    let Learned { topology: short_rows, wait_timeout: short_wait, .. } =
        setup(&mut conn, true, None, &set, None, bound).unwrap();
    let (full_rows, full_wait) = full_probe(&mut conn, bound).unwrap();
    assert_eq!(short_rows.len(), 2, "the MariaDB probe was not used: {full_rows:?}");
    assert_eq!(Topology::from_probe(&short_rows), Topology::from_probe(&full_rows));
    assert!(Topology::from_probe(&short_rows).mariadb);
    assert_eq!(short_wait, full_wait);
}

#[test]
fn a_server_that_could_run_group_replication_is_settled_by_asking_its_plugin() {
    // The test servers run without the binary log, so their own probe never asks: this
    // answer says GTIDs and the binary log are on, and the plugin (absent) is asked.
    let config = config();
    let bound = Bound::connect(config.connect_deadline(), config.read_timeout, config.write_timeout);
    let (mut conn, _, _) = open(&config, bound, &session_settings(&config.charset), None).unwrap();
    let text = |s: &str| Value::Text(s.into());
    let selects = |conn: &mut wire::Connection| session_status(conn, "Com_select", bound);
    let before = selects(&mut conn);
    let answer = vec![vec![text("9.7.4-2"), text("(Debian)"), text("604800"), text("1")]];
    let (rows, wait_timeout) = mysql_topology(&mut conn, answer, bound).unwrap();
    assert_eq!(selects(&mut conn) - before, 1, "the plugin was not asked, or the full probe ran as well");
    assert_eq!(rows, vec![vec![text("version"), text("9.7.4-2")]], "settled as standalone by the plugin's answer");
    assert_eq!(wait_timeout, Some(604800.0));
}

#[test]
fn only_a_mysql_with_no_word_of_a_cluster_is_settled_by_the_short_probe() {
    let text = |s: &str| Value::Text(s.into());
    let says =
        |version: &str, comment: &str, possible: Value| mysql_probe_says(&text(version), &text(comment), &possible);
    // GTIDs or the binary log off: no Group Replication member, whatever its plugin.
    assert_eq!(says("9.7.4-2", "(Debian)", text("0")), MysqlProbe::Standalone);
    assert_eq!(says("8.0.36", "MySQL Community Server - GPL", Value::Int(0)), MysqlProbe::Standalone);
    // Both on (MySQL 9.7's defaults): the plugin is asked.
    assert_eq!(says("9.7.4-2", "(Debian)", text("1")), MysqlProbe::AskThePlugin);
    assert_eq!(says("8.0.36", "MySQL Community Server - GPL", Value::Int(1)), MysqlProbe::AskThePlugin);
    // A Galera build, or an answer that cannot be read: the full probe decides.
    let pxc = "Percona XtraDB Cluster (GPL), Release rel27, WSREP version 26.1.4.3";
    assert_eq!(says("8.0.35-27", pxc, text("0")), MysqlProbe::Unsettled);
    assert_eq!(says("8.0.36", "MySQL Community Server - GPL, wsrep_26.18", text("0")), MysqlProbe::Unsettled);
    assert_eq!(says("8.0.36", "Galera Cluster for MySQL", text("1")), MysqlProbe::Unsettled);
    for unreadable in [Value::Null, text("ON"), Value::Int(2), Value::Int(-1)] {
        assert_eq!(says("8.0.36", "(Debian)", unreadable.clone()), MysqlProbe::Unsettled, "{unreadable:?}");
    }
    assert_eq!(mysql_probe_says(&Value::Null, &text("(Debian)"), &text("0")), MysqlProbe::Unsettled);
}

#[test]
fn a_session_learns_the_lock_tables_width_in_its_setup() {
    let config = config();
    let mut admin = session();
    admin.execute(&config.table.create_sql().replacen("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1), &[]).unwrap();
    let learned = MysqlSession::connect_learning(&config, &config.table).unwrap();
    assert_eq!(learned.lock_table_columns(), Some(5), "the original table has five columns");
    assert_eq!(session().lock_table_columns(), None, "a session that did not look knows nothing");
    // A missing table: the setup runs again without the probe, and the width stays unknown.
    let missing = crate::config::Table::new("no_such_lock_table", config.table.quote_style()).unwrap();
    let mut unknown = MysqlSession::connect_learning(&config, &missing).unwrap();
    assert_eq!(unknown.lock_table_columns(), None);
    assert!(unknown.execute("SELECT @@session.wait_timeout", &[]).unwrap().first(0).as_f64().unwrap() > 28_800.0);
}

#[test]
fn the_setups_look_at_the_lock_table_reads_no_row() {
    // A table with many rows left in it (killed holders, names never taken again) must not
    // make every connect slower: the look is for the columns, not the rows.
    let config = config();
    let table =
        crate::config::Table::new(&format!("probe_rows_{}", std::process::id()), config.table.quote_style()).unwrap();
    let mut admin = session();
    admin.execute(&format!("DROP TABLE IF EXISTS {}", table.sql_name()), &[]).unwrap();
    admin.execute(&table.create_sql(), &[]).unwrap();
    let rows: Vec<String> = (0..300).map(|i| format!("('left-{i}', 0, 0, 60, 1)")).collect();
    let insert = format!(
        "INSERT INTO {} (name, connection_id, created, ttl, lock_acquired) VALUES {}",
        table.sql_name(),
        rows.join(", ")
    );
    assert_eq!(admin.execute(&insert, &[]).unwrap().affected_rows, 300);

    let mut learned = MysqlSession::connect_learning(&config, &table).unwrap();
    assert_eq!(learned.lock_table_columns(), Some(5));
    // Rows read by a table scan so far; SHOW STATUS reads some itself, as much each time.
    let mut scanned = || -> u64 {
        let outcome = learned.execute("SHOW SESSION STATUS LIKE 'Handler_read_rnd_next'", &[]).unwrap();
        outcome.first(1).as_u64().unwrap()
    };
    let (first, second) = (scanned(), scanned());
    let by_setup = first.saturating_sub(second - first);
    admin.execute(&format!("DROP TABLE {}", table.sql_name()), &[]).unwrap();
    assert!(by_setup < 300, "the setup read {by_setup} rows of a table of 300 to learn its width");
}

#[test]
fn a_session_knows_its_raised_wait_timeout_without_asking() {
    let mut session = session();
    let asked = session.execute("SELECT @@session.wait_timeout", &[]).unwrap().first(0).as_f64();
    assert_eq!(session.wait_timeout(), asked);
    assert!(asked.unwrap() >= f64::from(IDLE_SECONDS));
}

#[test]
fn a_session_knows_its_own_connection_id() {
    let mut session = session();
    let asked = session.execute("SELECT CONNECTION_ID()", &[]).unwrap().first(0).as_u64();
    assert_eq!(asked, Some(session.connection_id()));
}

#[test]
fn values_come_back_exactly_written_in_and_bound() {
    let mut session = session();
    let text = "it's \\ a \"?\" `x` ü 🔒 \0 end";
    let params = [
        Value::from(text),
        Value::Text(String::new()),
        Value::Bytes(vec![0, 0x27, 0x5C, 0xFF]),
        Value::Int(i64::MIN),
        Value::UInt(u64::MAX),
        Value::Float(0.000_125),
        Value::Null,
    ];
    // The first run travels as text, the later ones prepared.
    for run in 0..3 {
        let out = session.execute("SELECT ?, ?, ?, ?, ?, ?, ?", &params).unwrap();
        let row = &out.rows[0];
        assert_eq!(row[0], Value::from(text), "run {run}");
        assert_eq!(row[1], Value::Text(String::new()), "run {run}");
        assert_eq!(row[2], Value::Bytes(vec![0, 0x27, 0x5C, 0xFF]), "run {run}");
        assert_eq!(row[3].as_i64(), Some(i64::MIN), "run {run}");
        assert_eq!(row[4].as_text().as_deref(), Some("18446744073709551615"), "run {run}");
        assert_eq!(row[5].as_f64(), Some(0.000_125), "run {run}");
        assert!(row[6].is_null(), "run {run}");
    }
}

#[test]
fn a_written_in_value_means_what_the_bound_one_means() {
    let mut session = session();
    // A float is a DOUBLE (as a DECIMAL, 0.1 + 0.2 would equal 0.3); bytes are a
    // binary string (compared byte by byte, not in the connection's collation).
    let sql = "SELECT ? + 0.2 = 0.3, ? = 'a', ? = 'A', ? LIKE 'x%'";
    let params = [Value::Float(0.1), Value::Bytes(b"A".to_vec()), Value::Bytes(b"A".to_vec()), Value::from("xy")];
    for run in ["written in", "bound"] {
        let row = session.execute(sql, &params).unwrap().rows.remove(0);
        let flags: Vec<_> = row.iter().map(Value::as_i64).collect();
        assert_eq!(flags, [Some(0), Some(0), Some(1), Some(1)], "{run}");
    }
    assert_eq!(session.statements.prepared_count(), 1, "the second run prepares, the third reuses");
}

#[test]
fn results_read_the_same_as_text_and_prepared() {
    let mut session = session();
    let sql = "SELECT ? + 0, CAST(7 AS UNSIGNED), -5, CAST(-3 AS SIGNED) * 1000000000000, 2.5e0, 1.25, \
               DATE('2024-02-03'), TIMESTAMP('2024-02-03 04:05:06.000007'), CAST('2024-02-03 04:05:06' AS DATETIME), \
               TIME('-25:01:02'), CONNECTION_ID(), NULL, 'x'";
    let runs: Vec<Vec<Option<String>>> = (0..2)
        .map(|_| session.execute(sql, &[Value::Int(1)]).unwrap().rows[0].iter().map(Value::as_text).collect())
        .collect();
    assert_eq!(runs[0], runs[1], "text first, prepared second");
    let id = session.connection_id().to_string();
    let expected = [
        Some("1"),
        Some("7"),
        Some("-5"),
        Some("-3000000000000"),
        Some("2.5"),
        Some("1.25"),
        Some("2024-02-03"),
        Some("2024-02-03 04:05:06.000007"),
        Some("2024-02-03 04:05:06"),
        Some("-25:01:02"),
        Some(id.as_str()),
        None,
        Some("x"),
    ];
    assert_eq!(runs[1].iter().map(Option::as_deref).collect::<Vec<_>>(), expected);
}

#[test]
fn a_written_in_string_compares_like_a_bound_one() {
    // Coercibility: the column's collation decides, so a latin1 case-insensitive
    // column matches another spelling, written in or bound, through its index.
    let mut session = session();
    session
        .execute(
            "CREATE TEMPORARY TABLE spellings (n VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_swedish_ci, KEY (n))",
            &[],
        )
        .unwrap();
    session.execute("INSERT INTO spellings VALUES ('Fóo'), ('bar')", &[]).unwrap();
    // The first run of a statement writes its values in, the second binds them. What number
    // a parameter's coercibility is differs between servers (4 on MariaDB 10.11 and MySQL,
    // 6 on MariaDB 11.8): the written-in string must have the bound one's.
    let mut coercibility = Vec::new();
    for run in ["written in", "bound"] {
        let out = session.execute("SELECT COUNT(*) FROM spellings WHERE n = ?", &[Value::from("FÓO")]).unwrap();
        assert_eq!(out.first(0).as_i64(), Some(1), "{run}");
        let of_x = session.execute("SELECT COERCIBILITY(?), 1", &[Value::from("x")]).unwrap();
        coercibility.push(of_x.first(0).as_i64());
    }
    assert_eq!(coercibility[0], coercibility[1], "written in: as coercible as a parameter");
    assert!(coercibility[0].is_some());
    let plan = session.execute("EXPLAIN SELECT n FROM spellings WHERE n = ?", &[Value::from("x")]).unwrap();
    // MariaDB's plan is a table (key = n); MySQL 9's default is a tree of text.
    let uses_n = |v: &Value| v.as_text().is_some_and(|t| t == "n" || t.contains(" on spellings using n "));
    assert!(plan.rows[0].iter().any(uses_n), "the index is used: {plan:?}");
}

#[test]
fn question_marks_in_strings_and_comments_are_not_placeholders() {
    let cases = [
        ("SELECT '?', \"?\", ? AS `?`", 1),
        ("SELECT 'it\\'s ?', ?", 1),
        ("SELECT ? -- why?\n, ?", 2),
        ("SELECT ? # why?\n, ?", 2),
        ("SELECT ? /* why? */, ?", 2),
        ("SELECT ?--1", 1),
        ("SELECT ? /*! , ? */", 2),
        ("SELECT ? /*M!100000 , ? */", 2),
        ("SELECT `a\\`, ?", 1),
    ];
    for (sql, count) in cases {
        assert_eq!(placeholders(sql).len(), count, "{sql}");
    }
    let mut session = session();
    let sql = "SELECT 'it\\'s ?', ? /* ? */ -- ?\n";
    for run in ["written in", "bound"] {
        let row = session.execute(sql, &[Value::Int(7)]).unwrap().rows.remove(0);
        assert_eq!(
            row.iter().map(Value::as_text).collect::<Vec<_>>(),
            [Some("it's ?".into()), Some("7".into())],
            "{run}"
        );
    }
}

#[test]
fn an_error_in_the_middle_of_the_rows_leaves_the_session_usable() {
    let mut session = session();
    let e = session
        .execute(
            "SELECT IF(seq = 3, (SELECT 1 UNION SELECT 2), seq) \
         FROM (SELECT 1 AS seq UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5) AS s",
            &[],
        )
        .unwrap_err();
    assert_eq!((e.code, e.lost), (Some(1242), false), "{e:?}");
    assert_eq!(session.execute("SELECT ?", &[Value::Int(5)]).unwrap().first(0).as_i64(), Some(5));
}

#[test]
fn a_placeholder_count_mismatch_is_an_error_not_a_statement() {
    let mut session = session();
    // Each statement once written in, then prepared.
    session.execute("SELECT ?, ?", &[Value::Int(1), Value::Int(2)]).unwrap();
    session.execute("SELECT ?", &[Value::Int(1)]).unwrap();
    for _ in 0..2 {
        for (sql, params) in [("SELECT ?, ?", vec![Value::Int(1)]), ("SELECT ?", vec![Value::Int(1), Value::Int(2)])] {
            let e = session.execute(sql, &params).unwrap_err();
            assert!(!e.lost && e.code.is_none(), "{e:?}");
        }
        let e = session.execute("SELECT ?", &[Value::Float(f64::NAN)]).unwrap_err();
        assert!(!e.lost && e.message.contains("NaN"), "{e:?}");
    }
    assert_eq!(session.execute("SELECT 1", &[]).unwrap().first(0).as_i64(), Some(1), "the session must stay usable");
}

#[test]
fn past_its_limit_a_session_closes_a_prepared_statement_for_the_next() {
    let mut session = session();
    let bound = session.conn.bound(Deadline::now());
    let texts: Vec<String> = (0..PREPARED_AT_MOST + 6).map(|i| format!("SELECT ? + {i}")).collect();
    let closed = session_status(&mut session.conn, "Com_stmt_close", bound);
    // Written in, prepared, executed: every run answers, whatever was closed meanwhile.
    for round in 0..3 {
        for (i, sql) in texts.iter().enumerate() {
            let answer = session.execute(sql, &[Value::Int(round)]).unwrap().first(0).as_i64();
            assert_eq!(answer, Some(round + i as i64), "{sql}, run {round}");
        }
    }
    assert_eq!(session.statements.prepared_count(), PREPARED_AT_MOST);
    let closed = session_status(&mut session.conn, "Com_stmt_close", bound) - closed;
    assert!(closed >= 6, "{closed} statements closed on the server for {} prepared", texts.len());
}

#[test]
fn a_text_forgotten_past_the_limit_travels_as_text_again() {
    let mut session = session();
    let bound = session.conn.bound(Deadline::now());
    let texts: Vec<String> = (0..TEXTS_AT_MOST + 1).map(|i| format!("SELECT ? + {i}")).collect();
    for sql in &texts {
        session.execute(sql, &[Value::Int(1)]).unwrap();
    }
    let prepares = session_status(&mut session.conn, "Com_stmt_prepare", bound);
    // Run once before the others pushed it out: its next run is a first run again.
    assert_eq!(session.execute(&texts[0], &[Value::Int(1)]).unwrap().first(0).as_i64(), Some(1));
    assert_eq!(session_status(&mut session.conn, "Com_stmt_prepare", bound), prepares, "prepared a forgotten text");
    // The last one is still known: prepared on its second run.
    let last = texts.last().unwrap();
    assert_eq!(session.execute(last, &[Value::Int(1)]).unwrap().first(0).as_i64(), Some(1 + TEXTS_AT_MOST as i64));
    assert_eq!(session_status(&mut session.conn, "Com_stmt_prepare", bound), prepares + 1);
}

#[test]
fn statements_run_together_return_each_outcome_first_as_text_then_prepared() {
    let mut session = session();
    let statements: [(&str, &[Value]); 3] = [
        ("SET @mysqllock_t = ?", &[Value::Int(1)]),
        ("SELECT @mysqllock_t + ?", &[Value::Int(1)]),
        ("SELECT ? UNION SELECT ?", &[Value::from("a"), Value::from("b")]),
    ];
    for run in ["text", "prepared"] {
        let outcomes = session.execute_pipelined(&statements, Deadline::now()).unwrap();
        assert_eq!(outcomes.len(), 3, "{run}");
        assert_eq!(outcomes[1].first(0).as_i64(), Some(2), "{run}");
        assert_eq!(outcomes[2].rows, vec![vec![Value::from("a")], vec![Value::from("b")]], "{run}");
    }
    // The second run went prepared, all three statements in one write.
    assert!(statements.iter().all(|(sql, _)| session.statements.prepared(sql).is_some()));
}

#[test]
fn statements_run_together_report_the_first_error_and_stay_in_step() {
    let mut session = session();
    // The first fails as it runs (an unsigned subtraction below zero), not when prepared.
    let statements: [(&str, &[Value]); 3] = [
        ("SELECT CAST(? AS UNSIGNED) - 1", &[Value::Int(0)]),
        ("SET @mysqllock_u = ?", &[Value::Int(9)]),
        ("SELECT @mysqllock_u + ?", &[Value::Int(0)]),
    ];
    session.execute("SET @mysqllock_u = ?", &[Value::Int(1)]).unwrap();
    // As text, the first time: the server stops at the failing statement.
    let e = session.execute_pipelined(&statements, Deadline::now()).unwrap_err();
    assert_eq!((e.code, e.lost), (Some(1690), false), "{e:?}");
    assert_eq!(session.execute("SELECT @mysqllock_u", &[]).unwrap().first(0).as_i64(), Some(1));
    // Prepared and pipelined: the statements after it run all the same, their answers are
    // read, and the session stays in step; the first error is the one reported.
    let e = session.execute_pipelined(&statements, Deadline::now()).unwrap_err();
    assert_eq!((e.code, e.lost), (Some(1690), false), "{e:?}");
    assert!(statements.iter().all(|(sql, _)| session.statements.prepared(sql).is_some()));
    assert_eq!(session.execute("SELECT @mysqllock_u", &[]).unwrap().first(0).as_i64(), Some(9));
    assert_eq!(session.execute("SELECT ?", &[Value::Int(7)]).unwrap().first(0).as_i64(), Some(7));
}

#[test]
fn a_killed_session_reports_itself_lost() {
    let mut victim = session();
    let mut killer = session();
    killer.kill(victim.connection_id()).unwrap();
    let e = victim.execute("SELECT 1", &[]).unwrap_err();
    assert!(e.lost, "{e:?}");
    assert!(victim.execute("SELECT 1", &[]).unwrap_err().lost);
}

#[test]
fn an_account_on_the_second_plugin_connects_through_the_own_client() {
    let dsn = std::env::var("MYSQLLOCK_TEST_ED25519_DSN")
        .expect("MYSQLLOCK_TEST_ED25519_DSN is not set: start the server with scripts/mariadb.sh or scripts/mysql.sh");
    let mut session = MysqlSession::connect(&Config::from_url(&dsn).unwrap()).unwrap();
    // MariaDB: ed25519. MySQL 9.7 has no ed25519: its env file names a
    // sha256_password account.
    let (path, user) = match on_mariadb() {
        true => (Authentication::Ed25519, "locker_ed@127.0.0.1"),
        false => (Authentication::Sha256Password, "locker_sha@127.0.0.1"),
    };
    assert_eq!(session.authentication(), path);
    let user_row = session.execute("SELECT CURRENT_USER(), ?", &[Value::from("ü'?")]).unwrap();
    assert_eq!(user_row.rows[0], vec![Value::from(user), Value::from("ü'?")]);
    assert!(session.wait_timeout().unwrap() >= f64::from(IDLE_SECONDS), "the setup must run on this path too");
}

#[test]
fn a_server_that_accepts_but_never_greets_fails_within_the_connect_timeout() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut config = config();
    config.host = "127.0.0.1".into();
    config.port = silent.local_addr().unwrap().port();
    config.connect_timeout = std::time::Duration::from_millis(300);
    let started = std::time::Instant::now();
    let e = MysqlSession::connect(&config).err().expect("a silent server must not give a session");
    assert!(matches!(e, Error::Connect { .. }), "{e:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "waited {:?}", started.elapsed());
    drop(silent);
}

#[test]
fn a_wrong_password_is_refused_with_the_servers_error() {
    let mut config = config();
    config.password = Some("certainly-not-the-password".into());
    match MysqlSession::connect(&config) {
        Err(Error::Connect { source, .. }) => assert_eq!(source.code, Some(1045), "{source:?}"),
        other => panic!("expected access denied, got {:?}", other.err()),
    }
}
