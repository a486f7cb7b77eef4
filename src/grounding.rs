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
//! The check is lexical on purpose: it must be cheap, predictable and explainable in the
//! trace (`[GROUND] dropped ...`). A boolean cannot be checked this way and is kept.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::backend::{Message, Role};
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
                if let Ok(n) = w.parse::<f64>() {
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
    arguments
        .iter()
        .filter(|(k, v)| !required.contains(&k.as_str()) && !evidence.grounds(v))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Removes the ungrounded optional arguments of a call of `spec`, with the person's
/// messages and the tool results in `history` as the evidence, and names them.
pub fn drop_ungrounded(
    arguments: &mut Map<String, Value>,
    spec: Option<&ToolSpec>,
    history: &[Message],
) -> Vec<String> {
    let Some(spec) = spec else {
        return Vec::new();
    };
    let said = history
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Tool))
        .map(|m| m.content.as_str());
    let dropped = ungrounded(arguments, &spec.input_schema, &Evidence::of(said));
    for name in &dropped {
        arguments.shift_remove(name);
    }
    dropped
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
}
