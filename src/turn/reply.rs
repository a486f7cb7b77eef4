//! One model turn: what the model may say, and how its text becomes a [`Turn`].
//!
//! Every reply of the model is one JSON object of three kinds (see
//! `docs/ARCHITECTURE.md`, "The turn"). The types here are the source of truth: `schemas/call_schema.json` is
//! generated from them by schemars. Parsing is deliberately more tolerant than the schema:
//! it accepts the flat form (one object with every field, unused ones `null`),
//! `arguments` given as a JSON-encoded string, common aliases of field names, and text
//! around the object, so that an unconstrained backend still works.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::turn::repair::{self, Fix, Fixes, RepairError};

pub(crate) use super::placeholder::ANSWER_PLACEHOLDER;

/// The longest `thought` the schema allows. Unbounded strings let a small model fill them
/// with repetition until the token limit (measured with Gemma 3 270M, `docs/ARCHITECTURE.md`).
pub(crate) const THOUGHT_MAX: u64 = 400;
/// The longest tool name.
pub(crate) const TOOL_NAME_MAX: u64 = 64;
/// The longest final answer.
pub(crate) const CONTENT_MAX: u64 = 4000;
/// The longest clarifying question.
pub(crate) const QUESTION_MAX: u64 = 400;
/// The most missing parameters a clarify turn may list.
pub(crate) const MISSING_PARAMS_MAX: u64 = 8;
/// The longest name in `missing_params`.
pub(crate) const PARAM_NAME_MAX: u64 = 64;
/// The most calls one `tool_calls` turn may carry (the narrowed schema can lower it:
/// `max_calls_per_turn`).
pub(crate) const CALLS_MAX: u64 = 8;

/// One call of a [`Turn::ToolCalls`] turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// The model reads the schema's descriptions: words, not rustdoc's links.
#[schemars(inline, description = "One call of a tool_calls turn.")]
pub struct Call {
    /// The tool's name, exactly as listed.
    #[schemars(length(max = TOOL_NAME_MAX))]
    pub tool: String,
    /// The tool's arguments, an object matching its input schema.
    pub arguments: Map<String, Value>,
}

/// What the model said in one turn.
///
/// ```
/// use toolloop::turn::Turn;
///
/// let turn = Turn::parse(r#"{"kind": "final_answer", "thought": "easy", "content": "4"}"#)
///     .unwrap()
///     .turn;
/// assert_eq!(turn, Turn::FinalAnswer { thought: "easy".into(), content: "4".into() });
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[schemars(title = "CALL_SCHEMA")]
#[schemars(description = "One model turn: call a tool, give the final answer, or ask the user.")]
pub enum Turn {
    /// Call one tool with arguments.
    ToolCall {
        /// Brief reasoning before acting.
        #[schemars(length(max = THOUGHT_MAX))]
        thought: String,
        /// The tool's name, exactly as listed.
        #[schemars(length(max = TOOL_NAME_MAX))]
        tool: String,
        /// The tool's arguments, an object matching its input schema.
        arguments: Map<String, Value>,
    },
    /// Call several tools at once; they run side by side and their results come back in
    /// this order.
    ToolCalls {
        /// Brief reasoning before acting.
        #[schemars(length(max = THOUGHT_MAX))]
        thought: String,
        /// The calls.
        #[schemars(length(min = 1, max = CALLS_MAX))]
        calls: Vec<Call>,
    },
    /// End the run with an answer for the user.
    FinalAnswer {
        /// Brief reasoning before answering.
        #[schemars(length(max = THOUGHT_MAX))]
        thought: String,
        /// The answer shown to the user.
        #[schemars(length(max = CONTENT_MAX))]
        content: String,
    },
    /// Ask the user for information the request lacks.
    Clarify {
        /// Brief reasoning before asking.
        #[schemars(length(max = THOUGHT_MAX))]
        thought: String,
        /// The question for the user.
        #[schemars(length(max = QUESTION_MAX))]
        question: String,
        /// Names of the parameters that are missing.
        #[schemars(length(max = MISSING_PARAMS_MAX), inner(length(max = PARAM_NAME_MAX)))]
        missing_params: Vec<String>,
    },
}

/// The three kinds of turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// [`Turn::ToolCall`].
    ToolCall,
    /// [`Turn::ToolCalls`].
    ToolCalls,
    /// [`Turn::FinalAnswer`].
    FinalAnswer,
    /// [`Turn::Clarify`].
    Clarify,
}

impl Kind {
    /// The value of the `kind` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ToolCall => "tool_call",
            Kind::ToolCalls => "tool_calls",
            Kind::FinalAnswer => "final_answer",
            Kind::Clarify => "clarify",
        }
    }
}

/// A turn recovered from model text, with what it took to recover it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedTurn {
    /// The turn.
    pub turn: Turn,
    /// Repairs applied to the text and the object; empty for a clean reply.
    pub fixes: Fixes,
}

/// Why model text is not a turn. The message is written for the model: it is fed back to
/// it as the reason its reply was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// No JSON could be recovered at all.
    #[error("reply is not JSON ({0}); reply with one JSON object")]
    NotJson(RepairError),
    /// JSON was found but is not a turn.
    #[error("{0}")]
    Invalid(String),
}

impl Turn {
    /// The turn's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Turn::ToolCall { .. } => Kind::ToolCall,
            Turn::ToolCalls { .. } => Kind::ToolCalls,
            Turn::FinalAnswer { .. } => Kind::FinalAnswer,
            Turn::Clarify { .. } => Kind::Clarify,
        }
    }

    /// The turn's `thought`.
    pub fn thought(&self) -> &str {
        match self {
            Turn::ToolCall { thought, .. }
            | Turn::ToolCalls { thought, .. }
            | Turn::FinalAnswer { thought, .. }
            | Turn::Clarify { thought, .. } => thought,
        }
    }

    /// The turn as the canonical JSON object the schema describes.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Recovers a turn from the raw text of a model reply.
    ///
    /// Valid JSON is read directly. Otherwise the text is repaired (see
    /// [`crate::turn::repair`]); when it holds several objects, the first that reads as a turn
    /// wins. The error of the first candidate is returned when none does.
    ///
    /// ```
    /// use toolloop::turn::Turn;
    /// use toolloop::turn::repair::Fix;
    ///
    /// // The flat form (every field, unused ones null), truncated, in a code fence.
    /// let text = "```json\n{\"kind\": \"tool_call\", \"tool\": \"get_weather\", \
    ///             \"arguments\": {\"city\": \"Tokyo\"}, \"content\": null";
    /// let parsed = Turn::parse(text).unwrap();
    /// assert_eq!(parsed.turn.kind().as_str(), "tool_call");
    /// assert!(parsed.fixes.contains(Fix::Truncated));
    /// ```
    pub fn parse(text: &str) -> Result<ParsedTurn, TurnError> {
        if let Ok(value) = serde_json::from_str::<Value>(text.trim()) {
            let mut fixes = Fixes::default();
            let turn = Turn::from_value(value, &mut fixes).map_err(TurnError::Invalid)?;
            return Ok(ParsedTurn { turn, fixes });
        }
        // At most this many candidate objects are tried, so prose full of braces cannot
        // make parsing slow.
        const MAX_CANDIDATES: usize = 16;
        let mut fixes = Fixes::default();
        let cleaned = repair::strip_template_tokens(text, &mut fixes);
        let mut first_error: Option<TurnError> = None;
        let mut cursor = 0;
        for _ in 0..MAX_CANDIDATES {
            let Some(off) = cleaned[cursor..].find('{') else {
                break;
            };
            let start = cursor + off;
            let found = match repair::parse_from(&cleaned, start) {
                Ok(found) => found,
                Err(e) => {
                    first_error.get_or_insert(TurnError::NotJson(e));
                    break;
                }
            };
            cursor = found.end.max(start + 1);
            let mut turn_fixes = fixes;
            turn_fixes.extend(found.fixes);
            if !cleaned[..start].trim().is_empty() {
                turn_fixes.insert(Fix::SurroundingText);
            }
            let value = match repair::into_value(&found.text) {
                Ok(v) => v,
                Err(e) => {
                    first_error.get_or_insert(TurnError::NotJson(e));
                    continue;
                }
            };
            match Turn::from_value(value, &mut turn_fixes) {
                Ok(turn) => {
                    return Ok(ParsedTurn {
                        turn,
                        fixes: turn_fixes,
                    });
                }
                Err(msg) => {
                    first_error.get_or_insert(TurnError::Invalid(msg));
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        // No object at all: maybe a bare JSON string or array was returned.
        match repair::repair(text) {
            Ok(r) => {
                let mut fixes = r.fixes;
                Turn::from_value(r.value, &mut fixes)
                    .map(|turn| ParsedTurn { turn, fixes })
                    .map_err(TurnError::Invalid)
            }
            Err(e) => Err(TurnError::NotJson(e)),
        }
    }

    /// Reads a turn from a JSON value, accepting the canonical form, the flat form
    /// (every field, unused ones `null`) and common aliases. Adds what it had to change to `fixes`; the error message
    /// is meant for the model.
    pub fn from_value(value: Value, fixes: &mut Fixes) -> Result<Turn, String> {
        let Value::Object(mut obj) = value else {
            return Err(format!(
                "expected a JSON object with a \"kind\" field, got {}",
                type_name(&value)
            ));
        };
        let kind = match obj.get("kind") {
            Some(Value::String(k)) => match kind_alias(k) {
                Some(kind) => {
                    if kind.as_str() != k {
                        fixes.insert(Fix::InferredKind);
                    }
                    kind
                }
                None => {
                    return Err(format!(
                        "unknown kind {k:?}: use \"tool_call\", \"final_answer\" or \"clarify\""
                    ));
                }
            },
            Some(other) => {
                return Err(format!(
                    "\"kind\" must be a string (\"tool_call\", \"final_answer\" or \"clarify\"), got {}",
                    type_name(other)
                ));
            }
            None => {
                let kind = infer_kind(&obj).ok_or_else(|| {
                    "missing \"kind\": use \"tool_call\", \"final_answer\" or \"clarify\""
                        .to_string()
                })?;
                fixes.insert(Fix::InferredKind);
                kind
            }
        };
        let thought =
            take_text(&mut obj, &["thought", "thoughts", "reasoning"]).unwrap_or_default();
        match kind {
            Kind::ToolCall if obj.get("calls").is_some_and(Value::is_array) => {
                calls_of(&mut obj, thought, fixes)
            }
            Kind::ToolCall => {
                let Call { tool, arguments } = call_of(obj, fixes)?;
                Ok(Turn::ToolCall {
                    thought,
                    tool,
                    arguments,
                })
            }
            Kind::ToolCalls => calls_of(&mut obj, thought, fixes),
            Kind::FinalAnswer => {
                let content = take_text(&mut obj, &["content", "answer", "final_answer", "text"])
                    .ok_or("a final_answer needs \"content\": the answer for the user")?;
                Ok(Turn::FinalAnswer { thought, content })
            }
            Kind::Clarify => {
                let question = take_text(&mut obj, &["question", "content"])
                    .ok_or("a clarify turn needs \"question\": what to ask the user")?;
                let missing_params = match obj.remove("missing_params") {
                    Some(Value::Array(items)) => items
                        .into_iter()
                        .map(|v| match v {
                            Value::String(s) => s,
                            other => other.to_string(),
                        })
                        .collect(),
                    Some(Value::String(s)) if !s.is_empty() => vec![s],
                    _ => Vec::new(),
                };
                Ok(Turn::Clarify {
                    thought,
                    question,
                    missing_params,
                })
            }
        }
    }
}

/// One call from an object with its name and arguments (in any of the forms
/// [`Turn::from_value`] accepts).
fn call_of(mut obj: Map<String, Value>, fixes: &mut Fixes) -> Result<Call, String> {
    let tool = match take_first(&mut obj, &["tool", "name", "tool_name", "function"]) {
        Some(Value::String(t)) if !t.trim().is_empty() => t.trim().to_string(),
        Some(Value::Object(mut f)) => match f.remove("name") {
            // OpenAI-style {"function": {"name": ..., "arguments": ...}}.
            Some(Value::String(t)) => {
                if let Some(args) = f.remove("arguments") {
                    obj.insert("arguments".into(), args);
                }
                t
            }
            _ => return Err("a tool_call needs \"tool\": the tool's name".into()),
        },
        _ => return Err("a tool_call needs \"tool\": the tool's name".into()),
    };
    let arguments = match take_first(&mut obj, &["arguments", "args", "parameters", "input"]) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(Value::String(s)) => decode_arguments(&s, fixes)?,
        Some(other) => {
            return Err(format!(
                "\"arguments\" must be an object, got {}",
                type_name(&other)
            ));
        }
    };
    Ok(Call { tool, arguments })
}

/// The calls of a `tool_calls` turn (`calls`, or OpenAI's `tool_calls`).
fn calls_of(
    obj: &mut Map<String, Value>,
    thought: String,
    fixes: &mut Fixes,
) -> Result<Turn, String> {
    let items = match take_first(obj, &["calls", "tool_calls"]) {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => {
            return Err(
                "a tool_calls turn needs \"calls\": a list of {\"tool\", \"arguments\"}".into(),
            );
        }
    };
    let calls = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Object(o) => call_of(o, fixes).map_err(|e| format!("call {}: {e}", i + 1)),
            other => Err(format!(
                "call {} must be an object, got {}",
                i + 1,
                type_name(&other)
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Turn::ToolCalls { thought, calls })
}

fn kind_alias(k: &str) -> Option<Kind> {
    match k
        .trim()
        .to_ascii_lowercase()
        .replace(['-', ' '], "_")
        .as_str()
    {
        "tool_call" | "toolcall" | "tool" | "call" | "function_call" | "tool_use" | "action" => {
            Some(Kind::ToolCall)
        }
        "tool_calls" | "toolcalls" | "calls" | "parallel" => Some(Kind::ToolCalls),
        "final_answer" | "finalanswer" | "final" | "answer" | "response" => Some(Kind::FinalAnswer),
        "clarify" | "clarification" | "ask" | "question" => Some(Kind::Clarify),
        _ => None,
    }
}

/// Guesses the kind of an object that lacks one, from the fields that carry meaning.
fn infer_kind(obj: &Map<String, Value>) -> Option<Kind> {
    let has = |k: &str| obj.get(k).is_some_and(|v| !v.is_null());
    if has("calls") || has("tool_calls") {
        Some(Kind::ToolCalls)
    } else if has("tool") || has("tool_name") {
        Some(Kind::ToolCall)
    } else if has("question") {
        Some(Kind::Clarify)
    } else if has("content") || has("answer") || has("final_answer") {
        Some(Kind::FinalAnswer)
    } else {
        None
    }
}

/// Removes and returns the first of `names` present with a non-null value.
fn take_first(obj: &mut Map<String, Value>, names: &[&str]) -> Option<Value> {
    for name in names {
        match obj.remove(*name) {
            None | Some(Value::Null) => continue,
            Some(v) => return Some(v),
        }
    }
    None
}

/// Like [`take_first`], turning a non-string value into its JSON text.
fn take_text(obj: &mut Map<String, Value>, names: &[&str]) -> Option<String> {
    take_first(obj, names).map(|v| match v {
        Value::String(s) => s,
        other => other.to_string(),
    })
}

fn decode_arguments(s: &str, fixes: &mut Fixes) -> Result<Map<String, Value>, String> {
    if s.trim().is_empty() {
        fixes.insert(Fix::EncodedArguments);
        return Ok(Map::new());
    }
    match repair::repair(s) {
        Ok(r) => match r.value {
            Value::Object(m) => {
                fixes.insert(Fix::EncodedArguments);
                fixes.extend(r.fixes);
                Ok(m)
            }
            other => Err(format!(
                "\"arguments\" must be an object, got {}",
                type_name(&other)
            )),
        },
        Err(_) => Err("\"arguments\" must be an object, got a string".into()),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Turn {
        Turn::parse(text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .turn
    }

    #[test]
    fn canonical_tool_call() {
        let t = parse(r#"{"kind":"tool_call","thought":"t","tool":"calc","arguments":{"x":1}}"#);
        assert_eq!(
            t.to_value(),
            json!({"kind":"tool_call","thought":"t","tool":"calc","arguments":{"x":1}})
        );
    }

    #[test]
    fn several_calls_parse_in_the_schema_form_and_in_common_variants() {
        let want = Turn::ToolCalls {
            thought: String::new(),
            calls: vec![
                Call {
                    tool: "a".into(),
                    arguments: json!({"x": 1}).as_object().unwrap().clone(),
                },
                Call {
                    tool: "b".into(),
                    arguments: Map::new(),
                },
            ],
        };
        for text in [
            r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"a","arguments":{"x":1}},{"tool":"b","arguments":{}}]}"#,
            r#"{"kind":"tool_call","calls":[{"name":"a","arguments":"{\"x\": 1}"},{"tool":"b"}]}"#,
            r#"{"tool_calls":[{"function":{"name":"a","arguments":{"x":1}}},{"tool":"b","args":{}}]}"#,
        ] {
            assert_eq!(parse(text), want, "{text}");
        }
        let e = Turn::parse(r#"{"kind":"tool_calls","calls":[{"tool":"a"}, 3]}"#).unwrap_err();
        assert!(e.to_string().contains("call 2 must be an object"), "{e}");
    }

    #[test]
    fn the_flat_form_with_every_field() {
        let t = parse(
            r#"{"kind":"final_answer","tool":null,"arguments":null,"content":"hi",
                "thought":null,"question":null,"missing_params":null}"#,
        );
        assert_eq!(
            t,
            Turn::FinalAnswer {
                thought: String::new(),
                content: "hi".into()
            }
        );
    }

    #[test]
    fn arguments_as_encoded_string() {
        let p =
            Turn::parse(r#"{"kind":"tool_call","tool":"w","arguments":"{\"city\": \"Tokyo\"}"}"#)
                .unwrap();
        assert!(p.fixes.contains(Fix::EncodedArguments));
        assert_eq!(
            p.turn,
            Turn::ToolCall {
                thought: String::new(),
                tool: "w".into(),
                arguments: json!({"city": "Tokyo"}).as_object().unwrap().clone()
            }
        );
    }

    #[test]
    fn first_object_that_is_a_turn_wins() {
        let t = parse(r#"Example: {"a": 1}. Mine: {"kind": "final_answer", "content": "ok"}"#);
        assert_eq!(t.kind(), Kind::FinalAnswer);
    }

    #[test]
    fn kind_is_inferred() {
        let p = Turn::parse(r#"{"tool": "calc", "arguments": {}}"#).unwrap();
        assert_eq!(p.turn.kind(), Kind::ToolCall);
        assert!(p.fixes.contains(Fix::InferredKind));
    }

    #[test]
    fn errors_speak_to_the_model() {
        let e = Turn::parse(r#"{"kind": "dance"}"#).unwrap_err().to_string();
        assert!(e.contains("unknown kind \"dance\""), "{e}");
        let e = Turn::parse(r#"{"kind": "tool_call"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs \"tool\""), "{e}");
        let e = Turn::parse("I think the answer is four.")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not JSON"), "{e}");
    }

    #[test]
    fn fuzz_crash_an_em_space_after_a_bracket_does_not_panic() {
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fuzz/regressions/turn-array-then-em-space"
        ))
        .unwrap();
        let text = String::from_utf8_lossy(&bytes);
        // Not a turn, but an answer for the model rather than a panic.
        assert!(Turn::parse(&text).is_err());
    }
}
