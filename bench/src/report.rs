//! The report: one table per database, or JSON rows
//! `{"db", "metric", "value", "unit", "ratio_to_floor"}`.

use std::fmt::Write as _;

/// A bound a figure must meet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// The ratio must be at most this.
    RatioAtMost(f64),
    /// The value must be at most this.
    ValueAtMost(f64),
    /// The value must be at least this.
    ValueAtLeast(f64),
}

impl Target {
    /// Whether `row` meets the target; `None` when the figure it needs is missing.
    #[must_use]
    pub fn holds(self, row: &Row) -> Option<bool> {
        match self {
            Self::RatioAtMost(max) => row.ratio_to_floor.map(|r| r <= max),
            Self::ValueAtMost(max) => row.value.is_finite().then_some(row.value <= max),
            Self::ValueAtLeast(min) => row.value.is_finite().then_some(row.value >= min),
        }
    }

    fn describe(self) -> String {
        match self {
            Self::RatioAtMost(max) => format!("ratio <= {max}"),
            Self::ValueAtMost(max) => format!("<= {max}"),
            Self::ValueAtLeast(min) => format!(">= {min}"),
        }
    }
}

/// One figure of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `postgres`, `mariadb` or `sqlite`.
    pub db: String,
    /// What was measured.
    pub metric: String,
    /// The median (or the single measurement).
    pub value: f64,
    /// `us/op`, `ops/s`, `stmt/s`, `count`, `x` (a ratio), ….
    pub unit: String,
    /// The value against its floor (median of the per-round ratios), if it has one.
    pub ratio_to_floor: Option<f64>,
    /// What the ratio is against (table only).
    pub floor: String,
    /// The target, if the issue sets one (table only).
    pub target: Option<Target>,
}

impl Row {
    /// A row without a floor or target.
    #[must_use]
    pub fn new(db: &str, metric: impl Into<String>, value: f64, unit: &str) -> Self {
        Self {
            db: db.to_owned(),
            metric: metric.into(),
            value,
            unit: unit.to_owned(),
            ratio_to_floor: None,
            floor: String::new(),
            target: None,
        }
    }

    /// Sets the ratio to the floor and names the floor.
    #[must_use]
    pub fn ratio(mut self, ratio: Option<f64>, floor: impl Into<String>) -> Self {
        self.ratio_to_floor = ratio;
        self.floor = floor.into();
        self
    }

    /// Sets the target.
    #[must_use]
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// `ok`, `MISSED`, `?` (figure missing) or empty (no target).
    #[must_use]
    pub fn verdict(&self) -> &'static str {
        match self.target.map(|t| t.holds(self)) {
            None => "",
            Some(Some(true)) => "ok",
            Some(Some(false)) => "MISSED",
            Some(None) => "?",
        }
    }
}

/// Three significant digits, without exponent for the magnitudes a benchmark produces.
///
/// ```
/// use shedlock_bench::report::sig3;
/// assert_eq!(sig3(1234.6), "1235");
/// assert_eq!(sig3(98.765), "98.8");
/// assert_eq!(sig3(1.0049), "1.00");
/// assert_eq!(sig3(0.0), "0");
/// ```
#[must_use]
pub fn sig3(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    #[allow(clippy::cast_possible_truncation)] // a small exponent
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = usize::try_from((2 - magnitude).max(0)).unwrap_or(0);
    format!("{value:.decimals$}")
}

/// The rows of each database as a table (in the order the databases first appear).
#[must_use]
pub fn table(rows: &[Row]) -> String {
    let mut dbs: Vec<&str> = Vec::new();
    for row in rows {
        if !dbs.contains(&row.db.as_str()) {
            dbs.push(&row.db);
        }
    }
    let mut out = String::new();
    for db in dbs {
        let cells: Vec<[String; 6]> = rows
            .iter()
            .filter(|r| r.db == db)
            .map(|r| {
                [
                    r.metric.clone(),
                    sig3(r.value),
                    r.unit.clone(),
                    r.ratio_to_floor
                        .map_or_else(String::new, |x| format!("{x:.3}")),
                    r.floor.clone(),
                    r.target
                        .map(|t| format!("{} {}", t.describe(), r.verdict()))
                        .unwrap_or_default(),
                ]
            })
            .collect();
        let header = [
            "metric",
            "value",
            "unit",
            "ratio",
            "floor (ratio is against)",
            "target",
        ];
        let mut widths = header.map(str::len);
        for row in &cells {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let _ = writeln!(out, "\n## {db}\n");
        let line = |cells: &[String; 6], out: &mut String| {
            let mut text = String::from("|");
            for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
                let pad = w - cell.chars().count();
                // Numbers right-aligned, text left-aligned.
                if i == 1 || i == 3 {
                    let _ = write!(text, " {}{cell} |", " ".repeat(pad));
                } else {
                    let _ = write!(text, " {cell}{} |", " ".repeat(pad));
                }
            }
            let _ = writeln!(out, "{}", text.trim_end());
        };
        line(&header.map(str::to_owned), &mut out);
        let rule = widths.map(|w| "-".repeat(w));
        let _ = writeln!(out, "|-{}-|", rule.join("-|-"));
        for row in &cells {
            line(row, &mut out);
        }
    }
    out
}

/// The rows as a JSON array, one object per line:
/// `{"db": .., "metric": .., "value": .., "unit": .., "ratio_to_floor": ..}`; a missing ratio
/// or a non-finite value is `null`.
///
/// ```
/// use shedlock_bench::report::{Row, json};
///
/// let rows = [Row::new("postgres", "select 1", 101.5, "us/op").ratio(Some(1.0), "select 1")];
/// let parsed: serde_json::Value = serde_json::from_str(&json(&rows))?;
/// assert_eq!(parsed[0]["ratio_to_floor"], 1.0);
/// assert_eq!(parsed[0]["unit"], "us/op");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[must_use]
pub fn json(rows: &[Row]) -> String {
    let lines: Vec<String> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "db": r.db,
                "metric": r.metric,
                "value": finite(r.value),
                "unit": r.unit,
                "ratio_to_floor": r.ratio_to_floor.and_then(finite),
            })
            .to_string()
        })
        .collect();
    format!("[\n  {}\n]\n", lines.join(",\n  "))
}

fn finite(value: f64) -> Option<f64> {
    value.is_finite().then(|| (value * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        vec![
            Row::new("postgres", "skip: provider", 120.0, "us/op")
                .ratio(Some(1.2), "skip statement")
                .target(Target::RatioAtMost(1.3)),
            Row::new("postgres", "errors", 0.0, "count").target(Target::ValueAtMost(0.0)),
            Row::new("sqlite", "cycle: provider", f64::NAN, "us/op")
                .ratio(Some(1.5), "cycle statements")
                .target(Target::RatioAtMost(1.1)),
            Row::new("sqlite", "latch", 1.0, "stmt/s").target(Target::ValueAtLeast(2.0)),
        ]
    }

    #[test]
    fn verdicts_follow_targets() {
        let r = rows();
        assert_eq!(r[0].verdict(), "ok");
        assert_eq!(r[1].verdict(), "ok");
        assert_eq!(r[2].verdict(), "MISSED");
        assert_eq!(r[3].verdict(), "MISSED");
        assert_eq!(Row::new("x", "y", 1.0, "z").verdict(), "");
        assert_eq!(Target::ValueAtMost(1.0).holds(&r[2]), None, "NaN value");
    }

    #[test]
    fn tables_group_by_database() {
        let t = table(&rows());
        let pg = t.find("## postgres").unwrap();
        let lite = t.find("## sqlite").unwrap();
        assert!(pg < lite);
        assert!(
            t.contains("| skip: provider |   120 | us/op | 1.200 | skip statement"),
            "{t}"
        );
        assert!(t.contains("ratio <= 1.3 ok"));
        assert!(t.contains("ratio <= 1.1 MISSED"));
        assert!(t.contains("| cycle: provider |     - |"), "{t}");
    }

    #[test]
    fn json_rows_have_exactly_the_five_keys() {
        let parsed: serde_json::Value = serde_json::from_str(&json(&rows())).unwrap();
        let array = parsed.as_array().unwrap();
        assert_eq!(array.len(), 4);
        for row in array {
            let mut keys: Vec<&str> = row
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort_unstable();
            assert_eq!(keys, ["db", "metric", "ratio_to_floor", "unit", "value"]);
        }
        assert_eq!(array[1]["ratio_to_floor"], serde_json::Value::Null);
        assert_eq!(array[2]["value"], serde_json::Value::Null, "NaN is null");
        assert_eq!(array[0]["ratio_to_floor"], 1.2);
    }
}
