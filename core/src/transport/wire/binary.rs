//! The binary protocol of prepared statements: preparing, executing with bound
//! parameters, and reading binary rows (the types lock statements meet, temporal values
//! shown as the text protocol shows them).

use super::*;

/// Column and parameter types of the binary protocol that this client reads or sends
/// specially; every other type travels as a length-encoded string.
pub(super) const TYPE_TINY: u8 = 0x01;
pub(super) const TYPE_SHORT: u8 = 0x02;
pub(super) const TYPE_LONG: u8 = 0x03;
pub(super) const TYPE_FLOAT: u8 = 0x04;
pub(super) const TYPE_DOUBLE: u8 = 0x05;
pub(super) const TYPE_NULL: u8 = 0x06;
pub(super) const TYPE_TIMESTAMP: u8 = 0x07;
pub(super) const TYPE_LONGLONG: u8 = 0x08;
pub(super) const TYPE_INT24: u8 = 0x09;
pub(super) const TYPE_DATE: u8 = 0x0A;
pub(super) const TYPE_TIME: u8 = 0x0B;
pub(super) const TYPE_DATETIME: u8 = 0x0C;
pub(super) const TYPE_YEAR: u8 = 0x0D;
pub(super) const TYPE_BLOB: u8 = 0xFC;
pub(super) const TYPE_VAR_STRING: u8 = 0xFD;
pub(super) const UNSIGNED_FLAG: u16 = 0x20;

impl Connection {
    /// Prepares `sql` on the server (one round trip) under `bound`.
    pub fn prepare(&mut self, sql: &str, bound: Bound) -> Result<Prepared, SessionError> {
        let mut x = self.start(bound)?;
        x.command(COM_STMT_PREPARE, sql.as_bytes())?;
        let packet = x.read_packet()?;
        if packet.first() == Some(&0xFF) {
            return Err(server_error(&packet));
        }
        let mut c = Cursor::new(&packet);
        let (Some(0x00), Some(id), Some(columns), Some(params)) = (c.u8(), c.u32(), c.u16(), c.u16()) else {
            return Err(x.malformed("a prepare response"));
        };
        for count in [params, columns] {
            if count > 0 {
                for _ in 0..count {
                    x.read_packet()?;
                }
                if !is_eof(&x.read_packet()?) {
                    return Err(x.malformed("the end of a prepared statement's definitions"));
                }
            }
        }
        Ok(Prepared { id, params: usize::from(params) })
    }

    /// Runs a prepared statement with `params` bound (binary protocol) under `bound`.
    pub fn execute(&mut self, statement: &Prepared, params: &[Value], bound: Bound) -> Answer {
        let mut x = self.start(bound)?;
        let body = execute_body(statement, params)?;
        x.command(COM_STMT_EXECUTE, &body)?;
        x.read_results(true)
    }

    /// Runs prepared statements one after the other in one round trip under `bound`:
    /// every COM_STMT_EXECUTE goes out in one write, and the answers are read in order.
    /// The server takes each command after it answered the one before, whatever that
    /// answer was, so a statement runs even when one before it failed; each statement's
    /// answer is returned. Only a lost connection ends it early.
    pub fn execute_pipelined(
        &mut self,
        statements: &[(&Prepared, &[Value])],
        bound: Bound,
    ) -> Result<Vec<Answer>, SessionError> {
        let mut x = self.start(bound)?;
        let mut requests = Vec::new();
        // Each answer is numbered on from its own command's packets, which start at 0.
        let mut answer_seqs = Vec::with_capacity(statements.len());
        for (statement, params) in statements {
            answer_seqs.push(frame_command(&mut requests, COM_STMT_EXECUTE, &execute_body(statement, params)?));
        }
        x.send(&requests)?;
        let mut answers = Vec::with_capacity(statements.len());
        for seq in answer_seqs {
            x.seq = seq;
            let answer = x.read_results(true);
            if answer.is_err() && x.broken {
                return Err(answer.err().unwrap_or_else(|| SessionError::lost("the connection was lost")));
            }
            answers.push(answer);
        }
        Ok(answers)
    }

    /// Frees a prepared statement on the server (no answer comes); the write under `bound`.
    pub fn close(&mut self, statement: Prepared, bound: Bound) -> Result<(), SessionError> {
        self.start(bound)?.command(COM_STMT_CLOSE, &statement.id.to_le_bytes())
    }
}

/// The body of a COM_STMT_EXECUTE of `statement` with `params` bound.
fn execute_body(statement: &Prepared, params: &[Value]) -> Result<Vec<u8>, SessionError> {
    if params.len() != statement.params {
        let message = format!("{} values for {} placeholders", params.len(), statement.params);
        return Err(SessionError::client(message));
    }
    let mut body = Vec::with_capacity(16 + params.len() * 16);
    body.extend_from_slice(&statement.id.to_le_bytes());
    body.push(0); // no cursor
    body.extend_from_slice(&1u32.to_le_bytes()); // iteration count
    if !params.is_empty() {
        let mut nulls = vec![0u8; params.len().div_ceil(8)];
        let mut types = Vec::with_capacity(params.len() * 2);
        let mut values = Vec::new();
        for (i, value) in params.iter().enumerate() {
            let (kind, unsigned) = match value {
                Value::Null => {
                    nulls[i / 8] |= 1 << (i % 8);
                    (TYPE_NULL, false)
                }
                Value::Int(v) => {
                    values.extend_from_slice(&v.to_le_bytes());
                    (TYPE_LONGLONG, false)
                }
                Value::UInt(v) => {
                    values.extend_from_slice(&v.to_le_bytes());
                    (TYPE_LONGLONG, true)
                }
                Value::Float(v) => {
                    values.extend_from_slice(&v.to_le_bytes());
                    (TYPE_DOUBLE, false)
                }
                Value::Text(text) => {
                    put_lenenc_bytes(&mut values, text.as_bytes());
                    (TYPE_VAR_STRING, false)
                }
                // A BLOB parameter is a binary string, as a written-in `_binary X'..'`.
                Value::Bytes(bytes) => {
                    put_lenenc_bytes(&mut values, bytes);
                    (TYPE_BLOB, false)
                }
            };
            types.extend_from_slice(&[kind, if unsigned { 0x80 } else { 0 }]);
        }
        body.extend_from_slice(&nulls);
        body.push(1); // types follow
        body.extend_from_slice(&types);
        body.extend_from_slice(&values);
    }
    Ok(body)
}

/// A statement prepared on this connection's server session.
#[derive(Debug)]
pub(crate) struct Prepared {
    id: u32,
    params: usize,
}

/// What a row needs to know of a column.
pub(super) struct Column {
    kind: u8,
    unsigned: bool,
    /// Fractional digits of a temporal column (as the text protocol would show them).
    decimals: u8,
    /// The collation id of the column's values as sent (binary is 63).
    collation: u16,
}

/// A column definition: six length-encoded strings (catalog, schema, table, original
/// table, name, original name), then the fixed fields.
pub(super) fn parse_column(packet: &[u8]) -> Option<Column> {
    let mut c = Cursor::new(packet);
    for _ in 0..6 {
        let len = usize::try_from(c.lenenc()?).ok()?;
        c.bytes(len)?;
    }
    c.lenenc()?; // length of the fixed fields
    let collation = c.u16()?;
    c.u32()?; // display length
    let kind = c.u8()?;
    let flags = c.u16()?;
    let decimals = c.u8()?;
    Some(Column { kind, unsigned: flags & UNSIGNED_FLAG != 0, decimals, collation })
}

/// A text column of collation `collation`, for tests of rows.
#[cfg(test)]
pub(super) fn text_column(collation: u16) -> Column {
    Column { kind: TYPE_VAR_STRING, unsigned: false, decimals: 0, collation }
}

/// A string value of `column`: text when it is UTF-8, bytes when it is not and the
/// column's character set does not claim it is (binary, latin1...), `None` when the
/// column's character set is utf8mb3 or utf8mb4 and the bytes are not UTF-8.
pub(super) fn string_value(bytes: &[u8], column: &Column) -> Option<Value> {
    match String::from_utf8(bytes.to_vec()) {
        Ok(s) => Some(Value::Text(s)),
        Err(_) if is_utf8_collation(column.collation) => None,
        Err(e) => Some(Value::Bytes(e.into_bytes())),
    }
}

/// Whether a collation id is one of utf8mb3's or utf8mb4's, on MariaDB 10.11 or MySQL 9.7
/// (`information_schema.COLLATIONS` of both, read 2026-11-28; neither uses the other's
/// ids for another character set). An id not listed (a newer server's) is taken as not
/// UTF-8: its values that are not UTF-8 come back as bytes, as before.
pub(super) fn is_utf8_collation(id: u16) -> bool {
    const MYSQL_0900_GAPS: [u16; 6] = [272, 276, 295, 299, 301, 302];
    match id {
        33 | 45 | 46 | 76 | 83 | 192..=215 | 223..=247 => true,
        255..=323 => !MYSQL_0900_GAPS.contains(&id),
        576..=578 | 608..=610 | 1057 | 1069 | 1070 | 1107 | 1216 | 1238 | 1248 | 1270 => true,
        _ => false,
    }
}

/// A binary-protocol row: a 0x00 header, a NULL bitmap offset by two bits, then each
/// non-NULL value in its type's encoding, and nothing after them.
pub(super) fn parse_binary_row(packet: &[u8], columns: &[Column]) -> Option<Vec<Value>> {
    let mut c = Cursor::new(packet);
    if c.u8()? != 0x00 {
        return None;
    }
    let nulls = c.bytes((columns.len() + 9) / 8)?;
    let mut row = Vec::with_capacity(columns.len());
    for (i, column) in columns.iter().enumerate() {
        let bit = i + 2;
        if nulls[bit / 8] & (1 << (bit % 8)) != 0 {
            row.push(Value::Null);
            continue;
        }
        let int = |c: &mut Cursor, width: usize| -> Option<Value> {
            let b = c.bytes(width)?;
            let raw = b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
            let shift = 64 - 8 * width as u32;
            Some(match column.unsigned {
                true => Value::UInt(raw),
                false => Value::Int(((raw << shift) as i64) >> shift),
            })
        };
        row.push(match column.kind {
            TYPE_TINY => int(&mut c, 1)?,
            TYPE_SHORT | TYPE_YEAR => int(&mut c, 2)?,
            TYPE_LONG | TYPE_INT24 => int(&mut c, 4)?,
            TYPE_LONGLONG => int(&mut c, 8)?,
            // Through its own shortest text, so 1.1 reads as 1.1 (as in the text protocol),
            // not as the f32's exact value widened.
            TYPE_FLOAT => Value::Float(f32::from_le_bytes(c.bytes(4)?.try_into().ok()?).to_string().parse().ok()?),
            TYPE_DOUBLE => Value::Float(f64::from_le_bytes(c.bytes(8)?.try_into().ok()?)),
            TYPE_DATE => Value::Text(binary_datetime(&mut c, None)?),
            TYPE_DATETIME | TYPE_TIMESTAMP => Value::Text(binary_datetime(&mut c, Some(column.decimals))?),
            TYPE_TIME => Value::Text(binary_time(&mut c, column.decimals)?),
            // Not `string_value`: the columns of a prepared statement are described at
            // prepare time, before the parameters' types are known, and MySQL 9.7 labels
            // `SELECT ?` utf8mb4 and then sends a bound BLOB's bytes as they are.
            _ => {
                let len = usize::try_from(c.lenenc()?).ok()?;
                match String::from_utf8(c.bytes(len)?.to_vec()) {
                    Ok(s) => Value::Text(s),
                    Err(e) => Value::Bytes(e.into_bytes()),
                }
            }
        });
    }
    c.rest().is_empty().then_some(row)
}

/// Microseconds as the text protocol shows them with `decimals` fractional digits
/// (0-6; anything else, such as an expression's "not fixed", shows all six when there is
/// a fraction).
pub(crate) fn fraction(micros: u32, decimals: u8) -> String {
    match decimals {
        0 => String::new(),
        1..=6 => format!(".{micros:06}")[..=usize::from(decimals)].to_owned(),
        _ if micros == 0 => String::new(),
        _ => format!(".{micros:06}"),
    }
}

/// A binary DATE (`decimals` None) or DATETIME/TIMESTAMP as the text protocol shows it.
pub(super) fn binary_datetime(c: &mut Cursor, decimals: Option<u8>) -> Option<String> {
    let len = usize::from(c.u8()?);
    let b = c.bytes(len)?;
    let (year, month, day) = match len {
        0 => (0, 0, 0),
        _ => (u16::from_le_bytes([b[0], *b.get(1)?]), *b.get(2)?, *b.get(3)?),
    };
    let date = format!("{year:04}-{month:02}-{day:02}");
    let Some(decimals) = decimals else {
        return Some(date);
    };
    let (hour, minute, second) = if len >= 7 { (b[4], b[5], b[6]) } else { (0, 0, 0) };
    let micros = if len >= 11 { u32::from_le_bytes([b[7], b[8], b[9], b[10]]) } else { 0 };
    Some(format!("{date} {hour:02}:{minute:02}:{second:02}{}", fraction(micros, decimals)))
}

/// A binary TIME as the text protocol shows it (hours past 24 included).
pub(super) fn binary_time(c: &mut Cursor, decimals: u8) -> Option<String> {
    let len = usize::from(c.u8()?);
    let b = c.bytes(len)?;
    if len < 8 {
        return Some(format!("00:00:00{}", fraction(0, decimals)));
    }
    let days = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
    let hours = days * 24 + u32::from(b[5]);
    let sign = if b[0] == 1 { "-" } else { "" };
    let micros = if len >= 12 { u32::from_le_bytes([b[8], b[9], b[10], b[11]]) } else { 0 };
    Some(format!("{sign}{hours:02}:{:02}:{:02}{}", b[6], b[7], fraction(micros, decimals)))
}

pub(super) fn put_lenenc_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len() as u64;
    match len {
        0..=0xFA => out.push(len as u8),
        0xFB..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(len as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&len.to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&len.to_le_bytes());
        }
    }
    out.extend_from_slice(bytes);
}
