//! Lock names: what the `name` column can store exactly.
//!
//! Two different names must never share a row by accident. The column is
//! `varchar(64)` in the table's character set (latin1 for the original table), and a
//! character the set cannot represent would be stored as `?` (or refused, depending on
//! `sql_mode`). So names are checked against the column's real character set before
//! any statement runs.

use crate::error::{Error, Result};

/// The longest name the original table (`varchar(64)`) and MySQL's GET_LOCK accept.
pub const MAX_NAME_CHARS: usize = 64;

/// The character set of the `name` column, as far as the check needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Charset {
    /// MySQL's `latin1`, which is Windows-1252 (plus five C1 controls).
    Latin1,
    Ascii,
    /// `utf8` / `utf8mb3`: the Basic Multilingual Plane only.
    Utf8Mb3,
    /// `utf8mb4`, `binary`: every character.
    Unicode,
    /// Something else: the server is asked to round-trip each name.
    Other(String),
}

impl Charset {
    pub fn from_mysql_name(name: &str) -> Charset {
        match name.to_ascii_lowercase().as_str() {
            "latin1" => Charset::Latin1,
            "ascii" => Charset::Ascii,
            "utf8" | "utf8mb3" => Charset::Utf8Mb3,
            "utf8mb4" | "binary" => Charset::Unicode,
            other => Charset::Other(other.to_owned()),
        }
    }

    /// Whether the character set represents `c` exactly; `None` when only the server
    /// can tell.
    pub fn stores(&self, c: char) -> Option<bool> {
        Some(match self {
            Charset::Latin1 => is_latin1(c),
            Charset::Ascii => c.is_ascii(),
            Charset::Utf8Mb3 => (c as u32) <= 0xFFFF,
            Charset::Unicode => true,
            Charset::Other(_) => return None,
        })
    }

    pub fn mysql_name(&self) -> &str {
        match self {
            Charset::Latin1 => "latin1",
            Charset::Ascii => "ascii",
            Charset::Utf8Mb3 => "utf8mb3",
            Charset::Unicode => "utf8mb4",
            Charset::Other(s) => s,
        }
    }
}

/// Windows-1252 as MySQL's latin1 maps it: ASCII, U+0080..U+00FF except the 27 code
/// points that 0x80..0x9F carry instead, and those 27 characters.
fn is_latin1(c: char) -> bool {
    const CP1252_EXTRAS: [char; 27] = [
        '€', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 'Ž', '‘', '’', '“', '”', '•', '–', '—', '˜', '™',
        'š', '›', 'œ', 'ž', 'Ÿ',
    ];
    match c as u32 {
        0..=0x7F | 0xA0..=0xFF => true,
        // the five bytes Windows-1252 leaves undefined map to the C1 controls
        0x81 | 0x8D | 0x8F | 0x90 | 0x9D => true,
        _ => CP1252_EXTRAS.contains(&c),
    }
}

/// The checks every lock name passes before it reaches SQL.
pub fn validate_shape(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name", "it is empty"));
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(Error::invalid(
            "lock name",
            format!(
                "\"{}…\" has {chars} characters; at most {MAX_NAME_CHARS} fit the table and GET_LOCK",
                name.chars().take(20).collect::<String>()
            ),
        ));
    }
    Ok(())
}

/// The GET_LOCK name a session lock called `name` takes.
///
/// A session lock has no row whose collation would make `Invoices` and `invoices` one
/// lock, and servers disagree on GET_LOCK names (MariaDB compares their bytes, MySQL
/// lowercases them). So the name is folded here, identically for every client and
/// server: lowercased (`ß` as `ss` and final `ς` as `σ`, as Unicode's full case folding
/// has it), decomposed (NFKD) and stripped of combining marks. Spellings that differ only
/// in case, accents or Unicode normal form are one lock, and a plain
/// lowercase ASCII name is its own key, the very lock `GET_LOCK('that-name', ...)` takes
/// in scripts that call it by hand.
///
/// Refused: empty names, names over [`MAX_NAME_CHARS`] characters, and names whose
/// folded form is longer than that (ligatures such as `ﬃ` unfold into several letters),
/// since MySQL refuses GET_LOCK names over 64 characters.
pub fn session_key(name: &str) -> Result<String> {
    use unicode_normalization::char::is_combining_mark;
    use unicode_normalization::UnicodeNormalization;

    validate_shape(name)?;
    if name.is_ascii() {
        // Nothing to decompose: the common case costs one pass.
        return Ok(name.to_ascii_lowercase());
    }
    let mut lowered = String::with_capacity(name.len());
    for c in name.chars().flat_map(char::to_lowercase) {
        match c {
            'ß' => lowered.push_str("ss"),
            'ς' => lowered.push('σ'),
            c => lowered.push(c),
        }
    }
    let key: String = lowered.nfkd().filter(|c| !is_combining_mark(*c)).collect();
    let chars = key.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(Error::invalid(
            "lock name",
            format!("\"{name}\" folds to {chars} characters (\"{key}\"); GET_LOCK takes at most {MAX_NAME_CHARS}"),
        ));
    }
    if key.is_empty() {
        return Err(Error::invalid("lock name", format!("\"{name}\" consists of combining marks only")));
    }
    Ok(key)
}

/// Whether every character set the `name` column may have stores `name` exactly: ASCII
/// letters, digits, space and the punctuation that even the 7-bit national sets (swe7)
/// keep. Such names need no look at the table's character set before they are used.
pub fn is_portable(name: &str) -> bool {
    name.chars().all(|c| c.is_ascii_alphanumeric() || " !\"#$%&'()*+,-./:;<=>?_".contains(c))
}

/// Checks `name` against a known character set; `Ok(false)` when the server must decide.
pub fn validate_for(name: &str, charset: &Charset) -> Result<bool> {
    validate_shape(name)?;
    for c in name.chars() {
        match charset.stores(c) {
            Some(true) => {}
            Some(false) => return Err(unstorable(name, charset.mysql_name(), Some(c))),
            None => return Ok(false),
        }
    }
    Ok(true)
}

pub(crate) fn unstorable(name: &str, charset: &str, c: Option<char>) -> Error {
    let what = match c {
        Some(c) => format!("character {c:?} (U+{:04X})", c as u32),
        None => "some character".to_owned(),
    };
    Error::invalid(
        "lock name",
        format!("\"{name}\": {what} cannot be stored exactly in the table's {charset} name column, so two different names could share one lock"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin1_takes_west_european_text_and_refuses_the_rest() {
        assert!(validate_for("Müller-Größe €5", &Charset::Latin1).unwrap());
        for bad in ["日本", "Ā", "emoji🙂", "Łódź"] {
            assert!(validate_for(bad, &Charset::Latin1).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn empty_and_overlong_names_are_refused() {
        assert!(validate_shape("").is_err());
        assert!(validate_shape(&"x".repeat(65)).is_err());
        assert!(validate_shape(&"é".repeat(64)).is_ok());
    }

    #[test]
    fn portable_names_are_plain_ascii_that_every_character_set_keeps() {
        assert!(is_portable("invoices:2026-11/run_1 #3"));
        for other in ["Müller", "a[1]", "user@host", "back\\slash", "tab\t", "~home", "a{b}"] {
            assert!(!is_portable(other), "{other:?} taken for portable");
        }
    }

    #[test]
    fn session_keys_fold_case_accents_and_normal_form_into_one_lock() {
        let key = session_key("Müller-Größe").unwrap();
        for variant in ["MÜLLER-GRÖSSE", "muller-grosse", "Mu\u{308}ller-Gro\u{308}sse", "MULLER-grösse"] {
            assert_eq!(session_key(variant).unwrap(), key, "{variant}");
        }
        assert_ne!(session_key("invoices-a").unwrap(), session_key("invoices-b").unwrap());
    }

    #[test]
    fn a_plain_lowercase_ascii_name_is_its_own_session_key() {
        assert_eq!(session_key("cron:invoices_2026-11").unwrap(), "cron:invoices_2026-11");
    }

    #[test]
    fn session_keys_longer_than_get_lock_takes_are_refused() {
        assert!(session_key(&"x".repeat(65)).is_err());
        assert_eq!(session_key(&"É".repeat(64)).unwrap(), "e".repeat(64));
        let unfolds = "\u{FB03}".repeat(30);
        let error = session_key(&unfolds).unwrap_err().to_string();
        assert!(error.contains("folds to 90 characters"), "{error}");
    }

    #[test]
    fn utf8mb3_refuses_astral_characters() {
        assert!(validate_for("🙂", &Charset::Utf8Mb3).is_err());
        assert!(validate_for("日本", &Charset::Utf8Mb3).unwrap());
    }
}
