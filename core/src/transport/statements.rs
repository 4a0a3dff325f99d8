//! What a session knows of each statement text it runs: how many `?` placeholders the
//! text has, counted the first time rather than on every run, and how the text travels
//! next (written in, prepared, or written in for good). A lock cycle runs the same two
//! or three texts over and over; each run looks its text up once and scans nothing
//! (a SharedLock cycle spent a third of its client instructions on scanning and hashing
//! its texts four times each: bench/RESULTS.md, "The statement texts").

use std::collections::HashMap;

use super::literals::{placeholder_mismatch, placeholders};
use super::wire::{self, Bound};
use crate::error::SessionError;
use crate::value::Value;

/// Prepared statements kept per session; lock statements are a handful of texts per
/// table, so this is only reached by a program using many tables.
pub(super) const PREPARED_AT_MOST: usize = 64;

/// Texts remembered at most: past it, those not prepared are forgotten (their next run
/// travels as text again, and they are counted again).
pub(super) const TEXTS_AT_MOST: usize = 4 * PREPARED_AT_MOST;

/// ER_UNSUPPORTED_PS: "This command is not supported in the prepared statement protocol yet".
const ER_UNSUPPORTED_PS: u16 = 1295;

/// How a text travels on its next run on the own client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Form {
    /// Never run: as text with its values written in, one round trip and nothing to
    /// prepare (a short-lived process runs most of its statements once).
    Text,
    /// Run once already: prepared now, then executed.
    Prepare,
    /// Prepared on this session: executed.
    Prepared,
    /// The server does not prepare it: written in every time.
    Unpreparable,
}

enum State {
    Text,
    Prepare,
    Prepared(wire::Prepared),
    Unpreparable,
}

struct Known {
    placeholders: usize,
    state: State,
}

/// The texts one session ran, by text.
#[derive(Default)]
pub(super) struct Statements {
    texts: HashMap<String, Known>,
}

impl Statements {
    /// Refuses, before anything is sent, what either protocol would get wrong: a value
    /// count that does not match the placeholders, and floats SQL has no literal for.
    /// Otherwise says how `sql` travels; a text seen for the first time is counted and
    /// remembered as [`Form::Text`].
    pub fn check(&mut self, sql: &str, params: &[Value]) -> Result<Form, SessionError> {
        let (count, form) = match self.texts.get(sql) {
            Some(known) => (known.placeholders, form(&known.state)),
            None => {
                let count = placeholders(sql).len();
                self.remember(sql, count, State::Text);
                (count, Form::Text)
            }
        };
        if params.len() != count {
            return Err(placeholder_mismatch(sql, params.len()));
        }
        match params.iter().find(|v| matches!(v, Value::Float(f) if !f.is_finite())) {
            Some(value) => Err(SessionError::client(format!("{value:?} is not an SQL value"))),
            None => Ok(form),
        }
    }

    /// `sql` ran as text: prepared from its next run on.
    pub fn ran(&mut self, sql: &str) {
        if let Some(known @ Known { state: State::Text, .. }) = self.texts.get_mut(sql) {
            known.state = State::Prepare;
        }
    }

    /// `sql` prepared on `conn` unless it is already (another prepared text closed first
    /// when [`PREPARED_AT_MOST`] are); false when the server does not prepare such a
    /// statement, which is then written in from now on.
    pub fn prepare(&mut self, conn: &mut wire::Connection, sql: &str, bound: Bound) -> Result<bool, SessionError> {
        match self.texts.get(sql).map(|k| &k.state) {
            Some(State::Prepared(_)) => return Ok(true),
            Some(State::Unpreparable) => return Ok(false),
            _ => {}
        }
        if self.prepared_count() >= PREPARED_AT_MOST {
            self.close_one_but(conn, sql, bound)?;
        }
        let state = match conn.prepare(sql, bound) {
            Ok(statement) => State::Prepared(statement),
            Err(e) if e.code == Some(ER_UNSUPPORTED_PS) => State::Unpreparable,
            Err(e) => return Err(e),
        };
        let preparable = matches!(state, State::Prepared(_));
        match self.texts.get_mut(sql) {
            Some(known) => known.state = state,
            // Forgotten since it was checked (other texts came in between).
            None => self.remember(sql, placeholders(sql).len(), state),
        }
        Ok(preparable)
    }

    /// The statement `sql` is prepared as, if it is.
    pub fn prepared(&self, sql: &str) -> Option<&wire::Prepared> {
        match self.texts.get(sql) {
            Some(Known { state: State::Prepared(statement), .. }) => Some(statement),
            _ => None,
        }
    }

    /// How many texts are prepared on the server (counted when one is to be prepared,
    /// which happens once per text).
    pub fn prepared_count(&self) -> usize {
        self.texts.values().filter(|known| matches!(known.state, State::Prepared(_))).count()
    }

    fn remember(&mut self, sql: &str, placeholders: usize, state: State) {
        if self.texts.len() >= TEXTS_AT_MOST {
            self.texts.retain(|_, known| matches!(known.state, State::Prepared(_)));
        }
        self.texts.insert(sql.to_owned(), Known { placeholders, state });
    }

    /// Closes a prepared statement other than `keep`'s; its text is prepared again when
    /// it next runs.
    fn close_one_but(&mut self, conn: &mut wire::Connection, keep: &str, bound: Bound) -> Result<(), SessionError> {
        let victim =
            self.texts.iter_mut().find(|(text, known)| *text != keep && matches!(known.state, State::Prepared(_)));
        let Some((_, known)) = victim else { return Ok(()) };
        let State::Prepared(statement) = std::mem::replace(&mut known.state, State::Prepare) else { return Ok(()) };
        conn.close(statement, bound)
    }
}

fn form(state: &State) -> Form {
    match state {
        State::Text => Form::Text,
        State::Prepare => Form::Prepare,
        State::Prepared(_) => Form::Prepared,
        State::Unpreparable => Form::Unpreparable,
    }
}
