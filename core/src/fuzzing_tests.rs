//! Regression tests: conversations the fuzz targets or the relay test found the client
//! mishandling, replayed through the same fake server ([`super::replay`]).

use std::cell::Cell;
use std::sync::Once;

use super::*;

/// 0x08 in an OK's or EOF's status: another result follows.
const MORE_RESULTS: u16 = 0x08;
const UTF8MB4_GENERAL_CI: u16 = 45;
const BINARY: u16 = 63;
const TYPE_VAR_STRING: u8 = 0xFD;

fn ok(out: &mut Vec<u8>, seq: u8, status: u16) {
    let mut payload = vec![0, 0, 0];
    payload.extend_from_slice(&status.to_le_bytes());
    payload.extend_from_slice(&[0, 0]);
    packet(out, seq, &payload);
}

fn eof(out: &mut Vec<u8>, seq: u8, status: u16) {
    let mut payload = vec![0xFE, 0, 0];
    payload.extend_from_slice(&status.to_le_bytes());
    packet(out, seq, &payload);
}

fn lenenc_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(s.len() as u8);
    out.extend_from_slice(s);
}

fn column(out: &mut Vec<u8>, seq: u8, name: &str, collation: u16) {
    let mut payload = Vec::new();
    for part in [&b"def"[..], b"", b"", b"", name.as_bytes(), b""] {
        lenenc_str(&mut payload, part);
    }
    payload.push(0x0C);
    payload.extend_from_slice(&collation.to_le_bytes());
    payload.extend_from_slice(&64u32.to_le_bytes());
    payload.push(TYPE_VAR_STRING);
    payload.extend_from_slice(&[0, 0, 0, 0, 0]);
    packet(out, seq, &payload);
}

/// A MariaDB login, then the setup's answer: the SET's OK and a result set of
/// `columns` (name, collation) with one text row of `values`.
fn setup_answer(columns: &[(&str, u16)], values: &[&[u8]]) -> Vec<u8> {
    let mut out = mariadb_login();
    // The setup's answer is numbered from its own command's 0.
    let mut seq = 1;
    let mut next = || {
        seq += 1;
        seq - 1
    };
    ok(&mut out, next(), MORE_RESULTS);
    packet(&mut out, next(), &[columns.len() as u8]);
    for (name, collation) in columns {
        column(&mut out, next(), name, *collation);
    }
    eof(&mut out, next(), 0);
    let mut row = Vec::new();
    for value in values {
        lenenc_str(&mut row, value);
    }
    packet(&mut out, next(), &row);
    eof(&mut out, next(), 0);
    out
}

const THREE: [(&str, u16); 3] = [("a", UTF8MB4_GENERAL_CI), ("b", UTF8MB4_GENERAL_CI), ("c", UTF8MB4_GENERAL_CI)];

#[test]
fn the_conversation_a_server_could_have_gets_to_the_next_step() {
    // The fake server and the builders above are right: a well-formed setup answer is
    // taken, and the client goes on to its query (whose answer never comes).
    let (reached, error) = replay(&setup_answer(&THREE, &[b"10.11.6-MariaDB", b"604800", b"x"]));
    assert_eq!(reached, Reached::SetUp, "{error:?}");
}

#[test]
fn a_text_row_with_more_values_than_columns_is_refused() {
    // Issue 30: five values for three columns were read as the first three, and the
    // client waited for the next row (forever, where the socket stayed open).
    let (reached, error) = replay(&setup_answer(&THREE, &[b"1", b"2", b"3", b"4", b"5"]));
    assert_eq!(reached, Reached::LoggedIn);
    let error = error.unwrap_or_default();
    assert!(error.contains("sent a row this client cannot read"), "{error}");
}

#[test]
fn invalid_utf8_in_a_utf8mb4_column_of_a_text_row_is_refused() {
    // Issue 30: taken as bytes, after which the client waited for the next row.
    let (reached, error) = replay(&setup_answer(&THREE, &[b"10.11", b"\xFF\xFE", b"x"]));
    assert_eq!(reached, Reached::LoggedIn);
    let error = error.unwrap_or_default();
    assert!(error.contains("sent a row this client cannot read"), "{error}");
}

#[test]
fn bytes_that_are_not_utf8_in_a_binary_column_are_taken_as_bytes() {
    let columns = [("a", UTF8MB4_GENERAL_CI), ("b", BINARY), ("c", UTF8MB4_GENERAL_CI)];
    let (reached, error) = replay(&setup_answer(&columns, &[b"10.11", b"\xFF\xFE", b"x"]));
    assert_eq!(reached, Reached::SetUp, "{error:?}");
}

thread_local! {
    static PANICKED: Cell<bool> = const { Cell::new(false) };
}

/// Whether `f` panicked on this thread, caught or not (a caught panic still aborts a
/// fuzz target, and a program built with `panic = "abort"`).
fn panics_within(f: impl FnOnce()) -> bool {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.with(|p| p.set(true));
            previous(info);
        }));
    });
    PANICKED.with(|p| p.set(false));
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    PANICKED.with(|p| p.get())
}

/// A MySQL greeting naming `sha256_password`, the key request's answer `key`.
fn sha256_login_with_key(key: &[u8]) -> Vec<u8> {
    const CAPABILITIES: u32 = 0x1 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x1_0000 | 0x2_0000 | 0x4_0000 | 0x8_0000;
    let mut greeting = vec![10];
    greeting.extend_from_slice(b"9.7.4\0");
    greeting.extend_from_slice(&9u32.to_le_bytes());
    greeting.extend_from_slice(b"abcdefgh\0");
    greeting.extend_from_slice(&(CAPABILITIES as u16).to_le_bytes());
    greeting.push(255);
    greeting.extend_from_slice(&2u16.to_le_bytes());
    greeting.extend_from_slice(&((CAPABILITIES >> 16) as u16).to_le_bytes());
    greeting.push(21);
    greeting.extend_from_slice(&[0; 10]);
    greeting.extend_from_slice(b"ijklmnopqrst\0sha256_password\0");
    let mut out = Vec::new();
    packet(&mut out, 0, &greeting);
    let mut more = vec![0x01];
    more.extend_from_slice(key);
    packet(&mut out, 2, &more);
    out
}

#[test]
fn a_public_key_cut_short_is_refused_without_a_panic() {
    // mysql_common's PublicKey::from_pem indexes past the end of a truncated DER
    // SEQUENCE (0x30 and nothing after it), a panic the client used to catch.
    let key = b"-----BEGIN PUBLIC KEY-----\nMA==\n-----END PUBLIC KEY-----\n";
    let mut outcome = (Reached::Done, None);
    assert!(!panics_within(|| outcome = replay(&sha256_login_with_key(key))), "the client panicked");
    assert_eq!(outcome.0, Reached::Nothing);
    let error = outcome.1.unwrap_or_default();
    assert!(error.contains("RSA public key this client cannot read"), "{error}");
}

/// The largest allocation each thread made since it last asked: a measuring pass-through
/// to the system allocator, in the core's unit tests only.
struct Measured;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // try_with: the thread's storage may be gone while it exits.
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl std::alloc::GlobalAlloc for Measured {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        note(layout.size());
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Measured = Measured;

/// The largest allocation `f` made on this thread.
fn largest_allocation_within(f: impl FnOnce()) -> usize {
    LARGEST.with(|largest| largest.set(0));
    f();
    LARGEST.with(Cell::get)
}

#[test]
fn a_switch_to_sha256_password_with_a_mangled_key_is_refused_without_a_panic() {
    // Found by wire_conversation in 115 runs against the client before the core read the
    // key: a MySQL greeting, a switch to sha256_password, a key whose BEGIN line is
    // mangled (mysql_common's from_pem: "valid PEM is mandatory here").
    let input = include_bytes!("../tests/fuzz-regressions/wire_conversation-rsa-key-base64-panic");
    let mut outcome = (Reached::Done, None);
    assert!(!panics_within(|| outcome = replay(input)), "the client panicked");
    assert_eq!(outcome.0, Reached::Nothing);
    let error = outcome.1.unwrap_or_default();
    assert!(error.contains("RSA public key this client cannot read"), "{error}");
}

#[test]
fn a_packet_claiming_megabytes_sets_none_aside_before_they_arrive() {
    // Found by wire_results in about 1000 runs against the client that sized a packet's
    // buffer by its header: a column definition claiming 14942213 bytes, of which a
    // few hundred follow (libFuzzer: out-of-memory, malloc(14942213)).
    let mut input = mariadb_login();
    input.extend_from_slice(include_bytes!("../tests/fuzz-regressions/wire_results-length-claim-alloc"));
    let mut outcome = (Reached::Done, None);
    let largest = largest_allocation_within(|| outcome = replay(&input));
    assert!(largest < 1024 * 1024, "the client allocated {largest} bytes");
    assert_eq!(outcome.0, Reached::LoggedIn, "{:?}", outcome.1);
}
