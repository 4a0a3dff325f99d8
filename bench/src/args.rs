//! `--key value` and `--flag` arguments, without a parser crate.

use crate::Res;

pub struct Args {
    pairs: Vec<(String, Option<String>)>,
}

impl Args {
    /// `flags` take no value; every other `--key` takes the next argument.
    pub fn parse(argv: &[String], flags: &[&str]) -> Res<Args> {
        let mut pairs = Vec::new();
        let mut it = argv.iter();
        while let Some(a) = it.next() {
            let Some(key) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a:?}").into());
            };
            if flags.contains(&key) {
                pairs.push((key.to_owned(), None));
            } else {
                let value = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
                pairs.push((key.to_owned(), Some(value.clone())));
            }
        }
        Ok(Args { pairs })
    }

    pub fn flag(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, v)| k == key && v.is_none())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == key).and_then(|(_, v)| v.as_deref())
    }

    pub fn req(&self, key: &str) -> Res<&str> {
        self.get(key).ok_or_else(|| format!("--{key} is required").into())
    }

    pub fn num<T: std::str::FromStr>(&self, key: &str) -> Res<T> {
        self.req(key)?.parse().map_err(|_| format!("--{key}: not a number").into())
    }

    /// `--dsn`, else `MYSQLLOCK_TEST_DSN` from the environment.
    pub fn dsn(&self) -> Res<String> {
        match self.get("dsn") {
            Some(d) => Ok(d.to_owned()),
            None => std::env::var("MYSQLLOCK_TEST_DSN")
                .map_err(|_| "--dsn is required (or MYSQLLOCK_TEST_DSN in the environment)".into()),
        }
    }
}
