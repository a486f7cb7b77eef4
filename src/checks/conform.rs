//! Values written the way their tool documents them.
//!
//! The model never sees a tool's schema, only the prompt's one-line summary of it, and
//! a small model writes values the way it has seen them most, whatever the tool says:
//!
//! - **Dates.** A tool often says in a parameter's description which layout it reads
//!   ("Must be in MM-DD-YYYY format", "The date (month-day-year)"). Forced into the
//!   layout by a `pattern`, Qwen 0.5B wrote "20-06-0100" for "June 1 2023"
//!   (`BENCHMARKS.md`); left free, it writes the right date, but year first
//!   ("2023-06-01"). A year-first date, or one that names its month, can be read only
//!   one way, so it is rewritten into the documented layout. A date that reads two ways
//!   ("06-01-2023": June or January?) is left as the model wrote it.
//! - **Percentages.** Asked for "an annual rate of 8%", the model passes `8`. A tool
//!   that takes a rate as a float wants the fraction: over BFCL's right answers, a
//!   percentage the person wrote goes to a float parameter as the fraction (0.08) 54
//!   times and as written twice, unless the parameter says it takes a percentage. So
//!   a number the person wrote only as a percentage, passed as written to a `number`
//!   parameter whose name and description do not say "percent", becomes the fraction;
//!   one that says "decimal" or "fraction" always does. Integers are left alone.
//! - **Numbers said in words.** "A payout of 50 million USD" came back as `500000000`,
//!   "8.5 million square kilometers" as `850000000`: spelling out a size word, the model
//!   miscounts the zeros. A number nobody said that differs from one said with a size
//!   word ("million", "bn", "$1.2M") only by a power of ten (10 to 1000) is that number.
//! - **Repeats.** The model copies a whole phrase into a name and its parts into the
//!   parameters beside it: `league: "2021 La Liga"` with `season: "2021"`, `product:
//!   "organic bananas"` with `organic: true`. The name loses, at its start or end, the
//!   words that are another argument's value.
//!
//! Any value under a schema that constrains it itself (`enum`, `const`, `pattern`,
//! `format`) is left to that. Every change is an event in the trace
//! ([`crate::run::events::Event::Reformatted`]), so the person sees what the tool was given.

use std::sync::LazyLock;

use chrono::{Datelike, NaiveDate};
use regex::Regex;
use serde_json::{Map, Value, json};

use crate::checks::grounding::{self, Evidence};
use crate::run::events::Event;
use crate::tool_spec::ToolSpec;
use crate::turn::tool_schema::SELF_CONSTRAINING;

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
    ///
    /// ```
    /// use toolloop::checks::conform::Layout;
    /// assert!(Layout::named_in("Must be in MM-DD-YYYY format.").is_some());
    /// assert!(Layout::named_in("Specific season in format 'YYYY-YYYY'.").is_none());
    /// assert!(Layout::named_in("The date.").is_none());
    /// ```
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

/// Why a value was rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// A date, into the layout the parameter's description names.
    DateLayout,
    /// A percentage the person wrote, as the fraction the parameter takes.
    Percent,
    /// Words at the start or end of a name that are another argument's value.
    Repeats(String),
    /// A number said with a word for its size, written with too many or too few zeros.
    Zeros,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Why::DateLayout => "the layout its description names",
            Why::Percent => "the person wrote a percentage; the tool takes a fraction",
            Why::Zeros => "the person said it in words; the zeros were miscounted",
            Why::Repeats(other) => return write!(f, "the words cut are already {other}'s value"),
        })
    }
}

/// One rewritten argument.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The argument.
    pub argument: String,
    /// What the model wrote.
    pub from: Value,
    /// What the tool is called with.
    pub to: Value,
    /// Why.
    pub why: Why,
}

/// Rewrites the arguments of a call whose values the tool documents another way than the
/// model wrote them (see the module docs); `said` is what the person wrote. Returns each
/// change.
///
/// ```
/// use serde_json::json;
/// use toolloop::checks::conform::conform;
/// use toolloop::checks::grounding::Evidence;
///
/// let schema = json!({"type": "object", "properties": {
///     "date": {"type": "string", "description": "The date, in the format mm-dd-yyyy."},
///     "rate": {"type": "number", "description": "The annual interest rate."}}});
/// let said = Evidence::of(["UV index for Tokyo on June 1 2023, and 5% interest"]);
/// let mut args = json!({"date": "2023-06-01", "rate": 5}).as_object().unwrap().clone();
/// let changes = conform(&mut args, &schema, &said);
/// assert_eq!(args["date"], "06-01-2023");
/// assert_eq!(args["rate"], 0.05);
/// assert_eq!(changes.len(), 2);
/// ```
pub fn conform(arguments: &mut Map<String, Value>, schema: &Value, said: &Evidence) -> Vec<Change> {
    let mut changes = Vec::new();
    for (name, value) in arguments.iter_mut() {
        let param = &schema["properties"][name.as_str()];
        if SELF_CONSTRAINING.iter().any(|k| param.get(*k).is_some()) {
            continue;
        }
        let description = param["description"].as_str().unwrap_or_default();
        let rewritten = match value {
            Value::String(text) => {
                date_in_layout(text, description).map(|d| (Value::String(d), Why::DateLayout))
            }
            Value::Number(n) => fraction(name, param, n.as_f64(), said)
                .map(|f| (json!(f), Why::Percent))
                .or_else(|| {
                    let m = said.miscounted(n.as_f64()?)?;
                    let whole = m.fract() == 0.0 && m.abs() < 9e15;
                    Some((if whole { json!(m as i64) } else { json!(m) }, Why::Zeros))
                }),
            _ => None,
        };
        if let Some((to, why)) = rewritten {
            let from = std::mem::replace(value, to.clone());
            changes.push(Change {
                argument: name.clone(),
                from,
                to,
                why,
            });
        }
    }
    changes.extend(strip_repeats(arguments, schema));
    changes
}

/// Where a word of a name starts and ends, and the word lower-cased.
static WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[\p{L}\p{N}]+").expect("a valid pattern"));

/// Small words left hanging where a repeat was cut off ("Act of" from "Act of 2013").
const CONNECTORS: [&str; 9] = ["of", "in", "for", "at", "on", "from", "the", "a", "an"];

/// Names that carry another argument's value at their start or end lose it: asked for
/// "the 2021 La Liga season", Qwen 0.5B wrote `league: "2021 La Liga"` beside `season:
/// "2021"`; likewise `"C sharp major"` beside `scale_type: "major"`, `"Criminal Law
/// Amendment Act of 2013"` beside `amendment_year: 2013`, `"organic bananas"` beside
/// `organic: true` (BFCL simple_python 321, 299, 159, 372). The tool is given each fact
/// once, where its schema asks for it. Over BFCL's right answers a string holds another
/// argument's value 17 times in 2,249, nearly all in formulas (`"x**3"` beside `end_x:
/// 3`), which are left alone: only plain names (letters, digits, spaces and `-',.&`)
/// are cut, never to nothing, and only by a value of three characters or more.
fn strip_repeats(arguments: &mut Map<String, Value>, schema: &Value) -> Vec<Change> {
    let others: Vec<(String, Vec<String>)> = arguments
        .iter()
        .flat_map(|(name, v)| repeatable(name, v).into_iter().map(|ws| (name.clone(), ws)))
        .collect();
    let mut changes = Vec::new();
    for (name, value) in arguments.iter_mut() {
        let param = &schema["properties"][name.as_str()];
        let Value::String(text) = value else { continue };
        let plain = text
            .chars()
            .all(|c| c.is_alphanumeric() || " -',.&".contains(c));
        if !plain || SELF_CONSTRAINING.iter().any(|k| param.get(*k).is_some()) {
            continue;
        }
        let Some((other, rest)) = others
            .iter()
            .filter(|(o, _)| o != name)
            .find_map(|(o, ws)| without_repeat(text, ws).map(|rest| (o, rest)))
        else {
            continue;
        };
        let from = std::mem::replace(value, Value::String(rest.clone()));
        changes.push(Change {
            argument: name.clone(),
            from,
            to: Value::String(rest),
            why: Why::Repeats(other.clone()),
        });
    }
    changes
}

/// The words of argument `name`'s value that another name may repeat: a string of three
/// characters or more, a whole number, each such string of an array, and the name of a
/// boolean that is true (`organic`).
fn repeatable(name: &str, v: &Value) -> Vec<Vec<String>> {
    let texts: Vec<String> = match v {
        Value::String(s) => vec![s.clone()],
        Value::Number(n) if n.is_i64() || n.is_u64() => vec![n.to_string()],
        Value::Bool(true) => vec![name.replace('_', " ")],
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    texts
        .iter()
        .filter(|t| t.chars().count() >= 3 || v.is_number())
        .map(|t| {
            WORD.find_iter(t)
                .map(|m| m.as_str().to_lowercase())
                .collect()
        })
        .filter(|ws: &Vec<String>| !ws.is_empty())
        .collect()
}

/// `text` without `repeat` (lower-cased words) at its start or end, and without the
/// small words that then hang at the cut; `None` when it has no such repeat or nothing
/// but small words would be left.
fn without_repeat(text: &str, repeat: &[String]) -> Option<String> {
    let spans: Vec<(usize, usize, String)> = WORD
        .find_iter(text)
        .map(|m| (m.start(), m.end(), m.as_str().to_lowercase()))
        .collect();
    let words: Vec<&str> = spans.iter().map(|(_, _, w)| w.as_str()).collect();
    let (n, len) = (repeat.len(), words.len());
    if n >= len {
        return None;
    }
    let (mut from, mut to) = if words[..n] == *repeat {
        (n, len)
    } else if words[len - n..] == *repeat {
        (0, len - n)
    } else {
        return None;
    };
    if from > 0 {
        while from < to && CONNECTORS.contains(&words[from]) {
            from += 1;
        }
    } else {
        while to > from && CONNECTORS.contains(&words[to - 1]) {
            to -= 1;
        }
    }
    (from < to).then(|| text[spans[from].0..spans[to - 1].1].to_string())
}

/// The step between a model's call and the tool: `arguments` rewritten the way `spec`
/// documents them ([`conform`], an [`Event::Reformatted`] each), then grounded in `said`
/// ([`grounding::ground`]). Returns the events and the required arguments nobody gave,
/// which the caller asks the person for. The engine and `examples/rescore.rs` both call
/// this, so a replay measures what a run does.
pub fn conform_and_ground(
    arguments: &mut Map<String, Value>,
    spec: Option<&ToolSpec>,
    said: &Evidence,
) -> (Vec<Event>, Vec<String>) {
    let Some(spec) = spec else {
        return (Vec::new(), Vec::new());
    };
    let mut events: Vec<Event> = conform(arguments, &spec.input_schema, said)
        .into_iter()
        .map(|c| Event::Reformatted {
            tool: spec.name.clone(),
            argument: c.argument,
            from: c.from,
            to: c.to,
            why: c.why.to_string(),
        })
        .collect();
    let (dropped, invented) = grounding::ground(arguments, spec, said);
    events.extend(dropped);
    (events, invented)
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

/// The fraction for `n` when the person wrote it only as a percentage and the parameter
/// takes a fraction (see the module docs).
fn fraction(name: &str, param: &Value, n: Option<f64>, said: &Evidence) -> Option<f64> {
    let n = n.filter(|n| *n != 0.0 && said.said_only_as_percent(*n))?;
    let types = match &param["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.contains(&"number") || types.contains(&"integer") {
        return None;
    }
    let text = format!(
        "{name} {}",
        param["description"].as_str().unwrap_or_default()
    )
    .to_lowercase();
    let says_fraction = text.contains("decimal") || text.contains("fraction");
    (says_fraction || !text.contains("percent")).then_some(n / 100.0)
}

#[cfg(test)]
mod tests;
