//! `date-layout`: a date rewritten into the layout its parameter's description names.
//!
//! A tool often says in a parameter's description which layout it reads ("Must be in
//! MM-DD-YYYY format", "The date (month-day-year)"). Forced into the layout by a
//! `pattern`, Qwen 0.5B wrote "20-06-0100" for "June 1 2023" (`BENCHMARKS.md`); left
//! free, it writes the right date, but year first ("2023-06-01"). A year-first date, or
//! one that names its month, can be read only one way, so it is rewritten into the
//! documented layout. A date that reads two ways ("06-01-2023": June or January?) is left
//! as the model wrote it, and so is any value under a schema that constrains it itself.

use std::sync::LazyLock;

use chrono::{Datelike, NaiveDate};
use regex::Regex;
use serde_json::Value;

use super::{CallUnderCheck, Check, CheckInfo, Effect, Finding, TurnContext};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "date-layout",
    default_on: false,
    effect: Effect::Rewrites,
    what: "rewrites a date into the layout its parameter's description names",
    why: "small models write dates year first whatever layout the tool documents",
    example: "`date: \"2023-06-01\"` for a parameter \"in the format mm-dd-yyyy\" becomes `\"06-01-2023\"`",
    safety: "Unsafe: the evidence is the description's words, not the schema; a value the schema accepts is rewritten. Off by default: turn it on for tools that document a date layout only in words.",
    measured: "Invariant: breaks no right call. Qwen 0.5B, validation halves, on against off: unchanged (everyday and BFCL).",
};

/// The `date-layout` check.
#[derive(Debug)]
pub struct DateLayout;

impl Check for DateLayout {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_call(
        &self,
        _ctx: &TurnContext<'_>,
        call: &mut CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        let rewrites: Vec<(String, String)> = call
            .arguments
            .iter()
            .filter(|(name, _)| !call.constrained(name))
            .filter_map(|(name, v)| {
                let description = call.param(name)["description"].as_str().unwrap_or_default();
                let date = date_in_layout(v.as_str()?, description)?;
                Some((name.clone(), date))
            })
            .collect();
        for (name, date) in rewrites {
            let why = "the layout its description names".to_string();
            call.rewrite(INFO.name, &name, Value::String(date), why, findings);
        }
        None
    }
}

/// One part of a date layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Four digits (`YYYY`; `YYY` is read as a slip for it).
    Year,
    /// Two digits (`YY`).
    ShortYear,
    /// Two digits (`MM`).
    Month,
    /// Two digits (`DD`).
    Day,
}

/// A date layout a description names: its parts in order and the one separator between
/// them. Has a year and a month; the day may be missing (`MM-YYYY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    parts: Vec<Part>,
    sep: char,
}

/// Candidates for a layout in a description: two or three groups of y, m and d letters
/// (or the words year, month, day) joined by `-`, `/` or `.`. [`Layout::named_in`]
/// keeps only real ones.
static LAYOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:[ymd]{2,4}|year|month|day)(?:[-/.](?:[ymd]{2,4}|year|month|day)){1,2}\b")
        .expect("a valid pattern")
});

/// A date the model wrote year first: `2023-06-01`, `2023/6/1`, `2023-06`.
static YEAR_FIRST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\d{4})([-/.])(\d{1,2})(?:([-/.])(\d{1,2}))?$").expect("a valid pattern")
});

/// Layouts with the month's name, which chrono reads whole or abbreviated.
const NAMED_MONTH: [&str; 6] = [
    "%B %d, %Y",
    "%B %d %Y",
    "%d %B %Y",
    "%d %B, %Y",
    "%B %e, %Y",
    "%e %B %Y",
];

impl Layout {
    /// The layout `description` names, if it names exactly one kind.
    pub fn named_in(description: &str) -> Option<Layout> {
        let mut found = LAYOUT
            .find_iter(description)
            .filter_map(|m| parse(m.as_str()));
        let first = found.next()?;
        // Two different layouts in one description ("yyyy-mm-dd or mm/dd/yyyy"): the tool
        // reads either, and the model's may be one of them.
        found.all(|l| l == first).then_some(first)
    }

    /// `date` written in this layout.
    fn write(&self, date: NaiveDate) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Year => format!("{:04}", date.year()),
                Part::ShortYear => format!("{:02}", date.year().rem_euclid(100)),
                Part::Month => format!("{:02}", date.month()),
                Part::Day => format!("{:02}", date.day()),
            })
            .collect();
        parts.join(&self.sep.to_string())
    }

    /// Whether `value` already has this layout's shape (its digits in the right places,
    /// whatever they say).
    fn fits(&self, value: &str) -> bool {
        let pieces: Vec<&str> = value.split(self.sep).collect();
        pieces.len() == self.parts.len()
            && pieces.iter().zip(&self.parts).all(|(piece, part)| {
                let n = piece.len();
                piece.chars().all(|c| c.is_ascii_digit())
                    && match part {
                        Part::Year => n == 4,
                        _ => (1..=2).contains(&n),
                    }
            })
    }
}

fn parse(text: &str) -> Option<Layout> {
    let sep = text.chars().find(|c| "-/.".contains(*c))?;
    let mut parts = Vec::new();
    for group in text.split(sep) {
        let group = group.to_ascii_lowercase();
        let part = match group.as_str() {
            "yyyy" | "yyy" | "year" => Part::Year,
            "yy" => Part::ShortYear,
            "mm" | "month" => Part::Month,
            "dd" | "day" => Part::Day,
            // Another separator inside a group, or a letter run that is no part.
            _ => return None,
        };
        if parts.contains(&part) || (part == Part::ShortYear && parts.contains(&Part::Year)) {
            return None;
        }
        parts.push(part);
    }
    let has = |p: Part| parts.contains(&p);
    ((has(Part::Year) || has(Part::ShortYear)) && has(Part::Month)).then_some(Layout { parts, sep })
}

/// The date `value` says, when it can be read only one way: year first, or with the
/// month's name; and whether it names a day. A year and month alone ("2023-06", "April
/// 2022") give the first of the month, which only a layout without a day may use.
fn read(value: &str) -> Option<(NaiveDate, bool)> {
    let value = value.trim();
    if let Some(c) = YEAR_FIRST.captures(value) {
        if c.get(4).is_some_and(|s| s.as_str() != &c[2]) {
            return None;
        }
        let day = c.get(5).map_or(Some(1), |d| d.as_str().parse().ok())?;
        let date = NaiveDate::from_ymd_opt(c[1].parse().ok()?, c[3].parse().ok()?, day)?;
        return Some((date, c.get(5).is_some()));
    }
    // chrono lets a space in the format match no space at all, so "April 2022" read as
    // April 20 of the year 22 under "%B %d %Y" (BFCL simple_python_286 was sent as
    // "04-0022"). A named date must have its parts apart and a four-digit year.
    let parts: Vec<&str> = value
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|p| !p.is_empty())
        .collect();
    let year_written = parts
        .iter()
        .any(|p| p.len() == 4 && p.chars().all(|c| c.is_ascii_digit()));
    if !year_written {
        return None;
    }
    if parts.len() == 2 {
        return NaiveDate::parse_from_str(&format!("1 {}", parts.join(" ")), "%d %B %Y")
            .ok()
            .map(|d| (d, false));
    }
    (parts.len() == 3)
        .then(|| {
            NAMED_MONTH
                .iter()
                .find_map(|f| NaiveDate::parse_from_str(value, f).ok())
        })
        .flatten()
        .map(|d| (d, true))
}

/// `text` in the layout `description` names, when it is an unambiguous date in another.
fn date_in_layout(text: &str, description: &str) -> Option<String> {
    let layout = Layout::named_in(description)?;
    if layout.fits(text) {
        return None;
    }
    let (date, has_day) = read(text)?;
    // A day the model never wrote is not made up for a layout that has one.
    (has_day || !layout.parts.contains(&Part::Day)).then(|| layout.write(date))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_needs_a_year_and_a_month_and_one_kind() {
        assert!(Layout::named_in("Must be in MM-DD-YYYY format.").is_some());
        assert!(Layout::named_in("Specific season in format 'YYYY-YYYY'.").is_none());
        assert!(Layout::named_in("The date.").is_none());
    }
}
