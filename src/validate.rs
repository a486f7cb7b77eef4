//! Compiling JSON Schemas and saying in one short line why a value fails one.
//!
//! Three places check values against a tool's input schema: the catalogue (before a
//! call), the tool server (before it runs a tool) and the narrowed CALL_SCHEMA (the whole
//! turn). Compiling a schema is the costly part, so compiled validators are shared by the
//! schema's text for as long as anyone holds one. The messages go back to a model, so
//! they are short and never quote a long value.
//!
//! This module is a leaf: it imports nothing from the crate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde_json::Value;

/// A compiled validator for `schema`, shared with every other holder of the same schema;
/// the error when `schema` is not a usable JSON Schema.
pub fn compile(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Weak<jsonschema::Validator>>>> = OnceLock::new();
    let key = schema.to_string();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().ok().and_then(|c| c.get(&key)?.upgrade()) {
        return Ok(v);
    }
    let v = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string())?);
    if let Ok(mut c) = cache.lock() {
        c.retain(|_, w| w.strong_count() > 0);
        c.insert(key, Arc::downgrade(&v));
    }
    Ok(v)
}

/// The first few ways `instance` fails `validator`, each as `path: message`, joined with
/// `; `; `None` when it is valid. Messages that would quote a long value (or any value,
/// with `masked`) say `value` instead, so the line stays short enough for a model.
pub fn describe_errors(
    validator: &jsonschema::Validator,
    instance: &Value,
    masked: bool,
) -> Option<String> {
    let problems: Vec<String> = validator
        .iter_errors(instance)
        .take(3)
        .map(|e| {
            let mut msg = if masked {
                e.masked().to_string()
            } else {
                e.to_string()
            };
            if msg.chars().count() > 160 {
                msg = truncate_chars(&e.masked().to_string(), 160);
            }
            let path = e.instance_path().as_str().to_string();
            if path.is_empty() {
                msg
            } else {
                format!("{path}: {msg}")
            }
        })
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// `s` cut to `max` characters, with `…` when cut.
pub fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_schema_is_compiled_once_while_held() {
        let schema = json!({"type": "object", "properties": {"zz_unique": {"type": "integer"}}});
        let a = compile(&schema).unwrap();
        let b = compile(&schema).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn errors_name_the_path() {
        let v =
            compile(&json!({"type": "object", "properties": {"n": {"type": "integer"}}})).unwrap();
        let e = describe_errors(&v, &json!({"n": "x"}), false).unwrap();
        assert!(e.starts_with("/n: "), "{e}");
        assert!(describe_errors(&v, &json!({"n": 1}), false).is_none());
    }
}
