//! Optional arguments the person never gave are dropped before a call.
//!
//! Under the narrowed schema a small model fills every optional parameter with something:
//! asked for "movies directed by Herbert Ross", Qwen 0.5B added `"genre": "Fantasy"`; on
//! BFCL most of its wrong calls were right but for an invented optional value
//! (`"method": "integral"`, `"mission": "Mission 1"`, `"mu0": 9.81`). A value the person
//! gave appears in what they wrote or in a tool's result; an invented one does not. So an
//! optional argument whose value appears nowhere in the run's evidence (the person's
//! messages and the tool results, never the system prompt) is left out, and the tool uses
//! its own default. Required arguments are never touched: the schema demands them.
//!
//! toolloop's own feedback on a refused reply is not evidence: it quotes the model's
//! values back.
//!
//! The check is lexical on purpose: it must be cheap, predictable and explainable in the
//! trace (`[GROUND] dropped ...`). A boolean cannot be checked this way and is kept.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::backend::{Message, Role};
use crate::events::Event;
use crate::feedback;
use crate::tools::ToolSpec;

/// The words and numbers of the run's evidence, for [`ungrounded`].
#[derive(Debug, Default, Clone)]
pub struct Evidence {
    words: HashSet<String>,
    numbers: Vec<f64>,
}

impl Evidence {
    /// The evidence of these texts.
    pub fn of<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut e = Evidence::default();
        for text in texts {
            for w in words(text) {
                if let Some(n) = w.parse::<f64>().ok().or_else(|| number_word(&w)) {
                    e.numbers.push(n);
                }
                e.words.insert(w);
            }
        }
        e
    }

    fn has_number(&self, n: f64) -> bool {
        self.numbers
            .iter()
            .any(|m| (m - n).abs() <= 1e-9 * m.abs().max(n.abs()).max(1.0))
    }

    /// Whether `v` is something the evidence says: every word of a string, a number that
    /// appears, every element of an array. Booleans and objects cannot be told apart from
    /// a default this way and count as said.
    pub fn grounds(&self, v: &Value) -> bool {
        match v {
            Value::String(s) => {
                let ws = words(s);
                !ws.is_empty() && ws.iter().all(|w| self.words.contains(w))
            }
            Value::Number(n) => n.as_f64().is_some_and(|n| self.has_number(n)),
            Value::Array(items) => !items.is_empty() && items.iter().all(|i| self.grounds(i)),
            Value::Null => false,
            Value::Bool(_) | Value::Object(_) => true,
        }
    }
}

/// The number a word names: "two tickets" gives the model `2` (BFCL's
/// `num_tickets: 2` was dropped as invented before this).
fn number_word(w: &str) -> Option<f64> {
    const SMALL: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    const TENS: [&str; 7] = [
        "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    if let Some(i) = SMALL.iter().position(|s| *s == w) {
        return Some(i as f64);
    }
    if let Some(i) = TENS.iter().position(|s| *s == w) {
        return Some(30.0 + 10.0 * i as f64);
    }
    match w {
        "once" | "single" => Some(1.0),
        "twice" | "pair" | "couple" | "double" => Some(2.0),
        "dozen" => Some(12.0),
        "hundred" => Some(100.0),
        "thousand" => Some(1000.0),
        _ => None,
    }
}

/// Lower-cased runs of letters and digits; a decimal point inside a number stays.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let in_number = c == '.'
            && cur.chars().last().is_some_and(|p| p.is_ascii_digit())
            && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
        if c.is_alphanumeric() || in_number {
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The optional arguments of a call (those not in the schema's `required`) that the
/// evidence does not ground.
///
/// ```
/// use serde_json::json;
/// use toolloop::grounding::{Evidence, ungrounded};
///
/// let schema = json!({"type": "object", "required": ["city"],
///     "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}});
/// let args = json!({"city": "Oslo", "unit": "fahrenheit"});
/// let said = Evidence::of(["What's the weather in Oslo?"]);
/// assert_eq!(ungrounded(args.as_object().unwrap(), &schema, &said), ["unit"]);
/// let said = Evidence::of(["Weather in Oslo, in Fahrenheit please"]);
/// assert!(ungrounded(args.as_object().unwrap(), &schema, &said).is_empty());
/// ```
pub fn ungrounded(
    arguments: &Map<String, Value>,
    schema: &Value,
    evidence: &Evidence,
) -> Vec<String> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // A tool that marks nothing required (common among MCP servers) leaves the model to
    // say what it wants; and a long string is the model's own composition (a query, a
    // message), not a setting it picked.
    if required.is_empty() {
        return Vec::new();
    }
    arguments
        .iter()
        .filter(|(k, v)| !required.contains(&k.as_str()) && !composed(v) && !evidence.grounds(v))
        .map(|(k, _)| k.clone())
        .collect()
}

/// A string of more than [`SETTING_WORDS`] words: text the model wrote, not a value it
/// chose for a setting.
fn composed(v: &Value) -> bool {
    v.as_str().is_some_and(|s| words(s).len() > SETTING_WORDS)
}

/// The most words a string argument has when it is a setting (`"kilometers"`,
/// `"Mission 1"`, `"Los Angeles, CA"`) rather than composed text.
const SETTING_WORDS: usize = 4;

/// Removes the ungrounded optional arguments of a call of `spec`, with the person's
/// messages and the tool results in `history` as the evidence; the
/// [`Event::Ungrounded`] that names them, when there were any.
pub fn drop_ungrounded(
    arguments: &mut Map<String, Value>,
    spec: Option<&ToolSpec>,
    history: &[Message],
) -> Option<Event> {
    let spec = spec?;
    let said = history
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Tool) && !feedback::is_feedback(m))
        .map(|m| m.content.as_str());
    let dropped = ungrounded(arguments, &spec.input_schema, &Evidence::of(said));
    for name in &dropped {
        arguments.shift_remove(name);
    }
    (!dropped.is_empty()).then(|| Event::Ungrounded {
        tool: spec.name.clone(),
        arguments: dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_match_by_value_and_decimals_stay_whole() {
        let e = Evidence::of(["Invest 5000 at 4.5% for 3 years"]);
        assert!(e.grounds(&json!(5000)));
        assert!(e.grounds(&json!(5000.0)));
        assert!(e.grounds(&json!(4.5)));
        assert!(!e.grounds(&json!(5)));
        assert!(!e.grounds(&json!(9.81)));
        assert!(Evidence::of(["Get me two tickets"]).grounds(&json!(2)));
    }

    #[test]
    fn strings_need_every_word_and_arrays_every_element() {
        let e = Evidence::of([
            "Find concerts in Los Angeles",
            "{\"venues\": [\"Hollywood Bowl\"]}",
        ]);
        assert!(e.grounds(&json!("los angeles")));
        assert!(e.grounds(&json!("Hollywood Bowl")));
        assert!(!e.grounds(&json!("Los Angeles, CA")));
        assert!(!e.grounds(&json!([])));
        assert!(!e.grounds(&json!(["Los Angeles", "Paris"])));
        assert!(e.grounds(&json!(true)));
        assert!(!e.grounds(&Value::Null));
    }

    #[test]
    fn composed_text_and_tools_without_required_arguments_are_left_alone() {
        let said = Evidence::of(["Say something nice"]);
        let none_required = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let args = json!({"text": "hi"});
        assert!(ungrounded(args.as_object().unwrap(), &none_required, &said).is_empty());
        let schema = json!({"type": "object", "required": ["to"],
            "properties": {"to": {"type": "string"}, "body": {"type": "string"}, "tone": {"type": "string"}}});
        let args = json!({"to": "Ann", "body": "Thank you so much for the lovely flowers", "tone": "warm"});
        assert_eq!(
            ungrounded(args.as_object().unwrap(), &schema, &said),
            ["tone"]
        );
    }
}
