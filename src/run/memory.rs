//! What a run remembers about its tool calls: which calls were made, so that a repeat is
//! answered from the earlier result instead of calling the tool again, and how many times
//! in a row each tool failed, so that a broken tool is declared unavailable.
//!
//! Small models repeat a call they already made when they do not know how to go on (the
//! recorded Qwen sessions under `tests/data` show it); calling the tool again costs time
//! and, for a tool with side effects, does harm. Keys compare the arguments as JSON with
//! sorted keys, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are one call.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// One tool call as the run compares it: the tool and its arguments, canonically.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallKey {
    tool: String,
    arguments: String,
}

impl CallKey {
    /// The key of `tool` called with `arguments`.
    pub fn new(tool: &str, arguments: &Map<String, Value>) -> Self {
        let mut canonical = String::new();
        write_sorted(&Value::Object(arguments.clone()), &mut canonical);
        CallKey {
            tool: tool.to_string(),
            arguments: canonical,
        }
    }
}

/// JSON text with object keys sorted at every depth.
fn write_sorted(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_sorted(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Successful calls of this run and how often each was asked for again.
#[derive(Debug, Default)]
pub struct Repeats {
    seen: HashMap<CallKey, (u32, String)>,
}

impl Repeats {
    /// Remembers what a successful call showed the model.
    pub fn record(&mut self, key: CallKey, observation: String) {
        self.seen.insert(key, (0, observation));
    }

    /// For a call made before: counts the repeat and gives the count (1 for the first
    /// repeat) and the earlier observation.
    pub fn repeat(&mut self, key: &CallKey) -> Option<(u32, &str)> {
        let (count, earlier) = self.seen.get_mut(key)?;
        *count += 1;
        Some((*count, earlier.as_str()))
    }
}

/// Tool-reported failures in a row, per tool.
#[derive(Debug, Default)]
pub struct Failures {
    streak: HashMap<String, u32>,
}

impl Failures {
    /// The tool worked: its streak starts over.
    pub fn succeeded(&mut self, tool: &str) {
        self.streak.remove(tool);
    }

    /// The tool reported an error: the failures in a row so far, this one included.
    pub fn failed(&mut self, tool: &str) -> u32 {
        let n = self.streak.entry(tool.to_string()).or_insert(0);
        *n += 1;
        *n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(tool: &str, v: Value) -> CallKey {
        CallKey::new(tool, v.as_object().unwrap())
    }

    #[test]
    fn nested_key_order_does_not_matter_but_values_do() {
        let a = key("t", json!({"x": {"b": [1, {"d": 1, "c": 2}], "a": 0}}));
        let b = key("t", json!({"x": {"a": 0, "b": [1, {"c": 2, "d": 1}]}}));
        assert_eq!(a, b);
        assert_ne!(
            a,
            key("t", json!({"x": {"a": 1, "b": [1, {"c": 2, "d": 1}]}}))
        );
        assert_ne!(
            a,
            key("u", json!({"x": {"a": 0, "b": [1, {"c": 2, "d": 1}]}}))
        );
    }

    #[test]
    fn repeats_count_from_one_and_keep_the_observation() {
        let mut r = Repeats::default();
        let k = key("t", json!({}));
        assert!(r.repeat(&k).is_none());
        r.record(k.clone(), "42".into());
        assert_eq!(r.repeat(&k), Some((1, "42")));
        assert_eq!(r.repeat(&k), Some((2, "42")));
    }

    #[test]
    fn a_success_ends_the_failure_streak() {
        let mut f = Failures::default();
        assert_eq!(f.failed("t"), 1);
        assert_eq!(f.failed("t"), 2);
        f.succeeded("t");
        assert_eq!(f.failed("t"), 1);
        assert_eq!(f.failed("u"), 1);
    }
}

/// The examples of this module's docs, as tests: its items are crate-private, so
/// rustdoc cannot run them.
#[cfg(test)]
mod examples {
    #[test]
    fn call_keys_ignore_key_order() {
        use crate::run::memory::CallKey;
        use serde_json::json;

        let a = json!({"city": "Oslo", "unit": "c"});
        let b = json!({"unit": "c", "city": "Oslo"});
        assert_eq!(
            CallKey::new("get_weather", a.as_object().unwrap()),
            CallKey::new("get_weather", b.as_object().unwrap()),
        );
    }
}
