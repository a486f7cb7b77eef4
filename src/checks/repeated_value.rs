//! `repeated-value`: a name that carries another argument's value at its start or end
//! loses it.
//!
//! The model copies a whole phrase into a name and its parts into the parameters beside
//! it: `league: "2021 La Liga"` with `season: "2021"`, `product: "organic bananas"` with
//! `organic: true`. The name loses, at its start or end, the words that are another
//! argument's value.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{CallUnderCheck, Check, CheckInfo, Effect, Finding, TurnContext};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "repeated-value",
    default_on: false,
    effect: Effect::Rewrites,
    what: "cuts another argument's value from the start or end of a name",
    why: "small models copy a whole phrase into a name and its parts into the parameters beside it",
    example: "`league: \"2021 La Liga\"` beside `season: \"2021\"` becomes `league: \"La Liga\"`",
    safety: "Unsafe: it judges a name by another argument's value, so a title that ends with a name can be cut. Off by default.",
    measured: "Invariant: breaks no right call. Qwen 0.5B, validation halves, on against off: everyday unchanged; BFCL 1 made right, 0 wrong.",
};

/// The `repeated-value` check.
#[derive(Debug)]
pub struct RepeatedValue;

impl Check for RepeatedValue {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_call(
        &self,
        _ctx: &TurnContext<'_>,
        call: &mut CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        strip_repeats(call, findings);
        None
    }
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
fn strip_repeats(call: &mut CallUnderCheck<'_>, findings: &mut Vec<Finding>) {
    let others: Vec<(String, Vec<String>)> = call
        .arguments
        .iter()
        .flat_map(|(name, v)| repeatable(name, v).into_iter().map(|ws| (name.clone(), ws)))
        .collect();
    let cuts: Vec<(String, String, String)> = call
        .arguments
        .iter()
        .filter(|(name, _)| !call.constrained(name))
        .filter_map(|(name, value)| {
            let text = value.as_str()?;
            let plain = text
                .chars()
                .all(|c| c.is_alphanumeric() || " -',.&".contains(c));
            if !plain {
                return None;
            }
            others
                .iter()
                .filter(|(o, _)| o != name)
                .find_map(|(o, ws)| without_repeat(text, ws).map(|rest| (o, rest)))
                .map(|(other, rest)| (name.clone(), rest, other.clone()))
        })
        .collect();
    for (name, rest, other) in cuts {
        let why = format!("the words cut are already {other}'s value");
        call.rewrite(INFO.name, &name, Value::String(rest), why, findings);
    }
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
