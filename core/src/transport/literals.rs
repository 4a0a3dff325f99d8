//! Values written into a statement's text as literals: a statement's first run in a
//! session travels as one text-protocol query, where preparing it would cost a round
//! trip more (see [`inline`]), and the checks that make that safe.

use std::fmt::Write as _;

use crate::error::SessionError;
use crate::value::Value;

/// Writes `params` into `sql` at its `?` placeholders (outside quotes), as literals:
/// the statement then travels in one text-protocol round trip, where a prepared
/// statement costs a second one the first time, in every short-lived process.
///
/// Nothing a caller passes can change the statement: a string becomes a hexadecimal
/// literal (only hex digits reach the SQL) with the connection's character set as its
/// introducer, which makes it the very string a bound parameter would be (same bytes,
/// same character set, the same coercibility in comparisons, so an indexed column keeps
/// its collation); numbers are formatted from Rust integers and finite floats. The values
/// have passed [`super::statements::Statements::check`].
pub(super) fn inline(sql: &str, params: &[Value], charset: &str) -> String {
    let mut out = String::with_capacity(sql.len() + params.len() * 24);
    let mut copied = 0;
    for (at, value) in placeholders(sql).into_iter().zip(params) {
        out.push_str(&sql[copied..at]);
        // Set apart, so it never joins the token before it (`LIKE?`).
        out.push(' ');
        write_literal(&mut out, value, charset);
        copied = at + 1;
    }
    out.push_str(&sql[copied..]);
    out
}

/// Writes one value; a float must be finite (see [`super::statements::Statements::check`]).
pub(super) fn write_literal(out: &mut String, value: &Value, charset: &str) {
    let hex = |out: &mut String, bytes: &[u8]| {
        out.push_str("X'");
        for b in bytes {
            let _ = write!(out, "{b:02X}");
        }
        out.push('\'');
    };
    match value {
        Value::Null => out.push_str("NULL"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::UInt(u) => {
            let _ = write!(out, "{u}");
        }
        // With an exponent, which makes SQL read it as a DOUBLE, as a bound float is
        // (without one it would be a DECIMAL: 0.1 + 0.2 = 0.3 would hold).
        Value::Float(f) => {
            let _ = write!(out, "{f:e}");
        }
        Value::Text(s) => {
            let _ = write!(out, "_{charset} ");
            hex(out, s.as_bytes());
        }
        // A binary string, as a bound BLOB is.
        Value::Bytes(b) => {
            out.push_str("_binary ");
            hex(out, b);
        }
    }
}

/// The byte offsets of the `?` placeholders of `sql` as the server counts them: not in
/// quoted strings or identifiers (a backslash escapes the next character in a string),
/// not in comments (`#` and `-- ` to the end of the line, `/* */`; but the server runs
/// what `/*!` and `/*M!` hold, so those count).
pub(super) fn placeholders(sql: &str) -> Vec<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum In {
        Code,
        Quote(u8),
        Line,
        Block,
    }
    let bytes = sql.as_bytes();
    let mut at = Vec::new();
    let mut state = In::Code;
    let mut i = 0;
    while i < bytes.len() {
        let (b, next) = (bytes[i], bytes.get(i + 1).copied());
        match state {
            In::Quote(q) if b == b'\\' && q != b'`' => i += 1,
            In::Quote(q) if b == q => state = In::Code,
            In::Line if b == b'\n' => state = In::Code,
            In::Block if b == b'*' && next == Some(b'/') => {
                state = In::Code;
                i += 1;
            }
            In::Code => match b {
                b'\'' | b'"' | b'`' => state = In::Quote(b),
                b'?' => at.push(i),
                b'#' => state = In::Line,
                b'-' if next == Some(b'-') && !matches!(bytes.get(i + 2), Some(c) if !c.is_ascii_whitespace()) => {
                    state = In::Line
                }
                b'/' if next == Some(b'*') && !executable_comment(&bytes[i..]) => {
                    state = In::Block;
                    i += 1;
                }
                _ => {}
            },
            _ => {}
        }
        i += 1;
    }
    at
}

/// `/*!` (MySQL) and `/*M!` (MariaDB) open comments whose content the server runs.
pub(super) fn executable_comment(from: &[u8]) -> bool {
    from.starts_with(b"/*!") || from.starts_with(b"/*M!")
}

pub(super) fn placeholder_mismatch(sql: &str, given: usize) -> SessionError {
    SessionError::client(format!("{given} values for the placeholders of {sql:?}"))
}
