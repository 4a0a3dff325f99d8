//! The values statements bind and return, and what one statement produced: the data
//! every layer above shares, depending on nothing.

/// A parameter or result value. Deliberately small: the protocol binds names (text),
/// numbers, and reads back integers, decimals and strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Value {
    /// The value as an integer, whatever form the driver returned it in
    /// (drivers return `DECIMAL` and sometimes integers as text).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::UInt(v) => i64::try_from(*v).ok(),
            Value::Float(v) if v.is_finite() => Some(*v as i64),
            Value::Text(s) => s.trim().parse().ok().or_else(|| s.trim().parse::<f64>().ok().map(|f| f as i64)),
            Value::Bytes(b) => Value::Text(String::from_utf8_lossy(b).into_owned()).as_i64(),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        self.as_i64().and_then(|v| u64::try_from(v).ok())
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(*v as f64),
            Value::UInt(v) => Some(*v as f64),
            Value::Float(v) => Some(*v),
            Value::Text(s) => s.trim().parse().ok(),
            Value::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
            Value::Null => None,
        }
    }

    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Text(s) => Some(s.clone()),
            Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Int(v) => Some(v.to_string()),
            Value::UInt(v) => Some(v.to_string()),
            Value::Float(v) => Some(v.to_string()),
            Value::Null => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::UInt(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

/// What one statement produced. `affected_rows` and `last_insert_id` are read only after
/// statements that return no rows (writes): a session may leave them 0 after a `SELECT`,
/// and the protocol never asks then.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub rows: Vec<Vec<Value>>,
    pub affected_rows: u64,
    /// The OK packet's insert id; the protocol reports GET_LOCK's result through
    /// `LAST_INSERT_ID(expr)` so an INSERT needs no second round trip.
    pub last_insert_id: u64,
    /// How many columns the statement's result set has, 0 for a statement without one: a
    /// `LIMIT 0` query answers with its columns and no row (the lock table's width).
    pub columns: usize,
}

impl Outcome {
    /// Column `col` of the first row, `Value::Null` when absent.
    pub fn first(&self, col: usize) -> &Value {
        self.rows.first().and_then(|r| r.get(col)).unwrap_or(&Value::Null)
    }
}
