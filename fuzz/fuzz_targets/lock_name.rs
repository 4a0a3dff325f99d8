//! A lock name as a caller passes it: the shape checks, the session key's Unicode
//! folding, and the check against each character set the `name` column may have.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|name: &str| {
    mysqllock_core::fuzzing::lock_name(name);
});
