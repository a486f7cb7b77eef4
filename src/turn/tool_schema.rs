//! A tool's own `inputSchema`, made ready to be a variant's `arguments` in the grammar.
//!
//! A tool's schema is written for validators, not for llama.cpp's grammar converter, and a
//! few of its words would hurt there: a `$ref` only resolves from the root, an unbounded
//! string lets a small model ramble until the token limit, and a negated character class
//! lets the model write a bare quote that breaks the JSON (`quote_safe`). Nothing a
//! description says in words goes into the grammar: a layout read from words ("city and
//! state") refused right values the tool takes ("Seattle", "Washington, D.C."), 20 of
//! BFCL's 1,000 right calls.

use serde_json::{Map, Value, json};

use crate::tool_spec::ToolSpec;

/// The longest string argument the narrowed schema allows where the tool's own schema
/// sets no bound.
pub(crate) const ARG_STRING_MAX: u64 = 1000;

/// The keywords with which a schema bounds its values itself: a string under one gets no
/// `maxLength` here, and its value is not rewritten by [`crate::checks`].
pub(crate) const SELF_CONSTRAINING: [&str; 4] = ["enum", "const", "pattern", "format"];

/// The names an object schema lists as `required` (`{"required": ["city"]}`: `city`);
/// none where it lists none. A tool's schema, and a BFCL function's `parameters`, are
/// read so everywhere.
pub(crate) fn required(schema: &Value) -> Vec<&str> {
    schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The values a parameter lists for itself: its `enum`, or its items' `enum` for an
/// array. The model can only pick among them, so they are the tool's own words
/// (relevance counts them as the tool's text; grounding does not ask them to be said).
pub(crate) fn listed_values(param: &Value) -> impl Iterator<Item = &Value> {
    [&param["enum"], &param["items"]["enum"]]
        .into_iter()
        .filter_map(Value::as_array)
        .flatten()
}

/// How far user-supplied schemas are walked when they are prepared; deeper parts are kept
/// as they are.
const WALK_DEPTH: usize = 64;

/// `pattern` with every negated character class also refusing `"` and `\`.
///
/// llama.cpp turns a pattern into grammar rules over the raw characters of the JSON
/// text, so `[^,]` lets the model write a bare `"` there: it closed the string early
/// (`"location": "Seattle", CJ"`) and llama-server, whose own parser then rejected the
/// reply, answered 500 "does not match the expected peg-native format" (with
/// `^[^,]+, [A-Z]{2}$`, often); with the quote and the backslash refused, never. A value
/// the pattern allowed with a quote in it is the only thing lost.
pub fn quote_safe(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        out.push(c);
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '[' if !in_class => {
                in_class = true;
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push_str("^\"\\\\");
                }
            }
            ']' if in_class => in_class = false,
            _ => {}
        }
    }
    out
}

/// Turns a tool's `inputSchema` into the `arguments` schema of its variant: an object
/// schema, its `$defs` hoisted to the root under a prefix (local `$ref`s only resolve from
/// the root), metadata that would confuse a validator dropped, and every unbounded string
/// given a `maxLength`.
pub(crate) fn prepare_arguments(tool: &ToolSpec, defs: &mut Map<String, Value>) -> Value {
    let mut schema = match &tool.input_schema {
        Value::Object(m) => Value::Object(m.clone()),
        _ => json!({"type": "object"}),
    };
    if let Value::Object(m) = &mut schema {
        m.remove("$schema");
        m.remove("$id");
        if !m.contains_key("type") {
            m.insert("type".into(), json!("object"));
        }
    }
    let prefix: String = tool
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>()
        + "__";
    let mut local = Map::new();
    if let Value::Object(m) = &mut schema {
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(d)) = m.remove(key) {
                local.extend(d);
            }
        }
    }
    rewrite(&mut schema, &prefix, 0);
    for (name, mut def) in local {
        rewrite(&mut def, &prefix, 0);
        defs.insert(format!("{prefix}{name}"), def);
    }
    schema
}

fn rewrite(schema: &mut Value, prefix: &str, depth: usize) {
    if depth > WALK_DEPTH {
        return;
    }
    match schema {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                let name = r
                    .strip_prefix("#/$defs/")
                    .or_else(|| r.strip_prefix("#/definitions/"));
                match name {
                    Some(name) => *r = format!("#/$defs/{prefix}{name}"),
                    // A reference to the tool's own root, or outside it, cannot be
                    // resolved once embedded: accept any value there.
                    None => {
                        m.remove("$ref");
                    }
                }
            }
            if let Some(Value::String(p)) = m.get_mut("pattern") {
                *p = quote_safe(p);
            }
            let is_string = m.get("type").and_then(Value::as_str) == Some("string");
            let bounded =
                m.contains_key("maxLength") || SELF_CONSTRAINING.iter().any(|k| m.contains_key(*k));
            if is_string && !bounded {
                m.insert("maxLength".into(), json!(ARG_STRING_MAX));
            }
            for (key, child) in m.iter_mut() {
                // Values of these keywords are data, not schemas.
                if matches!(
                    key.as_str(),
                    "enum" | "const" | "default" | "examples" | "required"
                ) {
                    continue;
                }
                rewrite(child, prefix, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items {
                rewrite(item, prefix, depth + 1);
            }
        }
        _ => {}
    }
}

/// The examples of this module's docs, as tests: its items are crate-private, so
/// rustdoc cannot run them.
#[cfg(test)]
mod examples {
    #[test]
    fn a_negated_class_refuses_the_quote() {
        use crate::turn::tool_schema::quote_safe;
        assert_eq!(quote_safe(r"^[^,]+$"), r#"^[^"\\,]+$"#);
        assert_eq!(quote_safe(r"^\[^x]$"), r"^\[^x]$");
        assert_eq!(quote_safe(r"^[a-z]+$"), r"^[a-z]+$");
    }
}
