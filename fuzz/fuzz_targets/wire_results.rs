//! What a server answers after a good login: a MariaDB greeting (mysql_native_password,
//! so the setup query travels with the handshake response) and its OK are fixed, and the
//! input is everything after them: the setup's results, a query's, a prepared
//! statement's definitions and two executions' binary rows.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|answers: &[u8]| {
    mysqllock_fuzz::ignore_sigpipe();
    let mut server = mysqllock_core::fuzzing::mariadb_login();
    server.extend_from_slice(answers);
    let _ = mysqllock_core::fuzzing::replay(&server);
});
