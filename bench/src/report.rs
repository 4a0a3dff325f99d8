//! The one table: rows = figures, columns = PHP ext | Rust/C | raw PDO | raw mysql |
//! ratios | target | met.

use crate::impls::Kind;

/// A value per column; `None` = not measured.
pub type Cells = [Option<f64>; 4];

/// The column of a kind in the main table ([`Kind::ALL`] order).
pub fn idx(kind: Kind) -> usize {
    match kind {
        Kind::Ext => 0,
        Kind::Rust => 1,
        Kind::Pdo => 2,
        Kind::Mysql | Kind::ProtoA | Kind::ProtoB => 3,
    }
}

/// The columns of a table, and which two are held against which baseline column.
pub struct Layout {
    pub headers: [&'static str; 4],
    pub ratio_header: &'static str,
    /// (column, baseline column, name in verdicts), twice.
    pub checked: [(usize, usize, &'static str); 2],
}

/// The appendix: prototypes of the proposals against today's Rust path and the floor.
pub const PROTO: Layout = Layout {
    headers: ["P1 proto", "P2 proto", "Rust/C now", "raw mysql"],
    ratio_header: "ratio P1/raw, P2/raw",
    checked: [(0, 3, "P1"), (1, 3, "P2")],
};

/// The main table.
pub const MAIN: Layout = Layout {
    headers: ["PHP ext", "Rust/C", "raw PDO", "raw mysql"],
    ratio_header: "ratio ext/PDO, rust/mysql",
    checked: [(0, 2, "ext"), (1, 3, "rust")],
};

/// What a row is held against.
#[derive(Clone, Copy)]
pub enum Target {
    /// Information only, with the ratios.
    None,
    /// Information only, no ratios (they mean nothing for this row).
    Plain,
    /// The value itself, for ext and Rust: at most.
    AtMost(f64),
    /// ext/raw PDO and Rust/raw mysql: at most.
    RatioAtMost(f64),
    /// ext/raw PDO and Rust/raw mysql: at least.
    RatioAtLeast(f64),
    /// ext/raw PDO only: at most (the Rust ratio is shown for information).
    PhpRatioAtMost(f64),
}

pub struct Row {
    pub label: String,
    pub cells: [String; 4],
    pub ratio: String,
    pub target: String,
    pub met: String,
}

pub struct Table {
    layout: Layout,
    pub rows: Vec<Row>,
    /// The current figure's short name, for the list of unmet targets.
    figure: String,
    /// Some targets were evaluated and not met (for the summary line).
    pub unmet: Vec<String>,
}

impl Table {
    pub fn new(layout: Layout) -> Table {
        Table { layout, rows: Vec::new(), figure: String::new(), unmet: Vec::new() }
    }

    /// A row of numbers formatted by `fmt`, with ratios and the target evaluated.
    /// Targets are judged on the values as shown (`4.000` meets `<= 4`; `4.002` does not).
    pub fn num(&mut self, label: &str, cells: Cells, fmt: fn(f64) -> String, target: Target) {
        let shown = |v: f64| fmt(v).parse::<f64>().unwrap_or(v);
        let cells: Cells = cells.map(|c| c.map(shown));
        let [(c0, b0, n0), (c1, b1, n1)] = self.layout.checked;
        let ratio_of = |c: usize, b: usize| match (cells[c], cells[b]) {
            // A ratio to a floor at or below 0 (hand-off: raw waiters can be answered
            // before the releaser) means nothing.
            (Some(v), Some(b)) if b > 0.0 => format!("{:.2}", v / b).parse::<f64>().ok(),
            _ => None,
        };
        let (re, rr) = (ratio_of(c0, b0), ratio_of(c1, b1));
        let show_ratio = !matches!(target, Target::AtMost(_) | Target::Plain);
        let ratio = if show_ratio && (re.is_some() || rr.is_some()) {
            format!("{}, {}", opt(re, |r| format!("{r:.2}")), opt(rr, |r| format!("{r:.2}")))
        } else {
            "-".to_owned()
        };
        let (target_text, checks): (String, Vec<(&str, Option<bool>)>) = match target {
            Target::None | Target::Plain => ("-".to_owned(), vec![]),
            Target::AtMost(t) => (
                format!("<= {}", crate::status::trim_num(t)),
                vec![(n0, cells[c0].map(|v| v <= t)), (n1, cells[c1].map(|v| v <= t))],
            ),
            Target::RatioAtMost(t) => (
                format!("<= {}x raw", crate::status::trim_num(t)),
                vec![(n0, re.map(|r| r <= t)), (n1, rr.map(|r| r <= t))],
            ),
            Target::RatioAtLeast(t) => (
                format!(">= {}x raw", crate::status::trim_num(t)),
                vec![(n0, re.map(|r| r >= t)), (n1, rr.map(|r| r >= t))],
            ),
            Target::PhpRatioAtMost(t) => {
                (format!("{n0} <= {}x PDO", crate::status::trim_num(t)), vec![(n0, re.map(|r| r <= t))])
            }
        };
        let met = self.verdict(label, &checks);
        self.rows.push(Row {
            label: label.to_owned(),
            cells: cells.map(|c| opt(c, fmt)),
            ratio,
            target: target_text,
            met,
        });
    }

    /// A row of preformatted text; `met` given by the caller.
    pub fn text(&mut self, label: &str, cells: [String; 4], target: &str, checks: &[(&str, Option<bool>)]) {
        let met = if checks.is_empty() { "-".to_owned() } else { self.verdict(label, checks) };
        self.rows.push(Row { label: label.to_owned(), cells, ratio: "-".to_owned(), target: target.to_owned(), met });
    }

    fn verdict(&mut self, label: &str, checks: &[(&str, Option<bool>)]) -> String {
        if checks.is_empty() {
            return "-".to_owned();
        }
        let failed: Vec<&str> = checks.iter().filter(|(_, ok)| *ok == Some(false)).map(|(who, _)| *who).collect();
        let unknown = checks.iter().any(|(_, ok)| ok.is_none());
        if !failed.is_empty() {
            self.unmet.push(format!("{}: {} ({})", self.figure, label.trim(), failed.join(", ")));
            format!("NOT met ({})", failed.join(", "))
        } else if unknown {
            "n/a".to_owned()
        } else {
            "met".to_owned()
        }
    }

    /// A group heading (figure title) spanning the row; `short` names the figure in the
    /// list of unmet targets.
    pub fn heading(&mut self, short: &str, title: &str) {
        self.figure = short.to_owned();
        self.rows.push(Row {
            label: title.to_owned(),
            cells: Default::default(),
            ratio: String::new(),
            target: String::new(),
            met: String::new(),
        });
    }

    pub fn render(&self) -> String {
        let header = Row {
            label: "figure / metric".to_owned(),
            cells: self.layout.headers.map(str::to_owned),
            ratio: self.layout.ratio_header.to_owned(),
            target: "target".to_owned(),
            met: "met?".to_owned(),
        };
        let all: Vec<&Row> = std::iter::once(&header).chain(self.rows.iter()).collect();
        let cols = |r: &Row| -> Vec<String> {
            let mut v = vec![r.label.clone()];
            v.extend(r.cells.iter().cloned());
            v.extend([r.ratio.clone(), r.target.clone(), r.met.clone()]);
            v
        };
        let is_heading = |r: &Row| r.ratio.is_empty() && r.target.is_empty();
        let mut widths = [0usize; 8];
        for r in &all {
            if is_heading(r) {
                continue;
            }
            for (i, c) in cols(r).iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |r: &Row| -> String {
            cols(r)
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let pad = widths[i].saturating_sub(c.chars().count());
                    if (1..=5).contains(&i) {
                        format!("{}{c}", " ".repeat(pad))
                    } else {
                        format!("{c}{}", " ".repeat(pad))
                    }
                })
                .collect::<Vec<_>>()
                .join(" | ")
                .trim_end()
                .to_owned()
        };
        let total: usize = widths.iter().sum::<usize>() + 3 * (widths.len() - 1);
        let mut out = String::new();
        out.push_str(&line(&header));
        out.push('\n');
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            if is_heading(r) {
                out.push_str(&r.label);
            } else {
                out.push_str(&line(r));
            }
            out.push('\n');
        }
        out
    }
}

fn opt(v: Option<f64>, fmt: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_owned(), fmt)
}

pub fn f3(v: f64) -> String {
    format!("{v:.3}")
}

pub fn f2(v: f64) -> String {
    format!("{v:.2}")
}

pub fn f1(v: f64) -> String {
    format!("{v:.1}")
}

pub fn f0(v: f64) -> String {
    format!("{v:.0}")
}

/// Nanoseconds as microseconds with one decimal.
pub fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

/// Nanoseconds as milliseconds.
pub fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}
