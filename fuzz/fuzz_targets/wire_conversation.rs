//! The server's whole side of a conversation, from the greeting on: the handshake, auth
//! switches and more-data steps (caching_sha2_password, sha256_password's RSA key,
//! ed25519), OK/ERR/EOF, column definitions, text and binary rows, length-encoded
//! integers and strings, fed to the real client over a Unix socket.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|server: &[u8]| {
    mysqllock_fuzz::ignore_sigpipe();
    let _ = mysqllock_core::fuzzing::replay(server);
});
