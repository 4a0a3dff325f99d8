//! The line format workers (PHP scripts and this binary) report in:
//! `TAG key=value key=value ...` or `TAG number number ...`.

use std::collections::HashMap;

use crate::status::Snapshot;
use crate::Res;

#[derive(Debug, Default)]
pub struct Report {
    kv: HashMap<String, HashMap<String, String>>,
    lists: HashMap<String, Vec<i64>>,
}

impl Report {
    pub fn parse(text: &str) -> Report {
        let mut r = Report::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let Some(tag) = words.next() else { continue };
            let rest: Vec<&str> = words.collect();
            if rest.iter().any(|w| w.contains('=')) {
                let map = r.kv.entry(tag.to_owned()).or_default();
                for w in rest {
                    if let Some((k, v)) = w.split_once('=') {
                        map.insert(k.to_owned(), v.to_owned());
                    }
                }
            } else {
                let list = r.lists.entry(tag.to_owned()).or_default();
                list.extend(rest.iter().filter_map(|w| w.parse::<i64>().ok()));
            }
        }
        r
    }

    pub fn list(&self, tag: &str) -> Res<Vec<i64>> {
        self.lists.get(tag).cloned().ok_or_else(|| format!("the worker reported no {tag:?} line").into())
    }

    pub fn num(&self, tag: &str, key: &str) -> Res<i64> {
        self.kv
            .get(tag)
            .and_then(|m| m.get(key))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("the worker reported no {tag} {key}=").into())
    }

    pub fn snapshot(&self, tag: &str) -> Res<Snapshot> {
        let map = self.kv.get(tag).ok_or_else(|| format!("the worker reported no {tag:?} snapshot"))?;
        Ok(map.iter().map(|(k, v)| (k.clone(), v.parse().unwrap_or(0))).collect())
    }
}
