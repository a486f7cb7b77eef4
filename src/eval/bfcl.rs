//! The Berkeley Function Calling Leaderboard (BFCL) data and its AST scoring, for
//! `toolloop eval` ([`crate::eval`]).
//!
//! Each case is a question and the functions on offer. Scoring (BFCL's AST checker, for
//! single calls): the function name; every required parameter present; no parameter
//! outside the schema; each value of its declared type (an integer is accepted for a
//! float); each value among the possible answers (strings compared lower-cased with spaces
//! and `,./-_*^` removed); a parameter may be absent only if `""` is among its possible
//! answers. Irrelevance cases pass when no call is made.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::tools::ToolSpec;

/// One case of a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The case id, e.g. `simple_python_0`.
    pub id: String,
    /// The category, from the file name (`simple_python`, `multiple`, `irrelevance`).
    pub category: String,
    /// The person's question.
    pub question: String,
    /// The functions, converted to tools.
    pub tools: Vec<ToolSpec>,
    /// The functions as BFCL wrote them (their types decide the type check).
    pub functions: Vec<Value>,
    /// The possible answers: `{function: {param: [values]}}`; empty for irrelevance.
    pub ground_truth: Vec<Value>,
}

/// Why loading failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A file could not be read.
    #[error("{path}: {detail}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        detail: String,
    },
    /// A line is not a BFCL case.
    #[error("{path} line {line}: {detail}")]
    Format {
        /// The file.
        path: String,
        /// The line (1-based).
        line: usize,
        /// What is wrong.
        detail: String,
    },
}

/// Maps a BFCL parameter schema to JSON Schema: `dict`→object, `float`→number,
/// `tuple`→array, `any`→string; recursively.
pub fn to_json_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, val) in m {
                let val = match (k.as_str(), val) {
                    ("type", Value::String(t)) => Value::String(
                        match t.as_str() {
                            "dict" => "object",
                            "float" => "number",
                            "tuple" => "array",
                            "any" => "string",
                            other => other,
                        }
                        .to_string(),
                    ),
                    ("properties", Value::Object(props)) => Value::Object(
                        props
                            .iter()
                            .map(|(p, s)| (p.clone(), to_json_schema(s)))
                            .collect(),
                    ),
                    ("items", s) => to_json_schema(s),
                    // Python reprs of defaults are data, not schema.
                    ("default", _) => continue,
                    (_, other) => other.clone(),
                };
                out.insert(k.clone(), val);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn category_of(path: &Path) -> String {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("unknown");
    stem.strip_prefix("BFCL_v4_")
        .or_else(|| stem.strip_prefix("BFCL_v3_"))
        .unwrap_or(stem)
        .to_string()
}

fn read_lines(path: &Path) -> Result<Vec<(usize, Value)>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::Read {
        path: path.display().to_string(),
        detail: e.to_string(),
    })?;
    parse_lines(path, &text)
}

/// The JSON values of `text`, one a line, with their line numbers (`path` names it in
/// errors).
fn parse_lines(path: &Path, text: &str) -> Result<Vec<(usize, Value)>, EvalError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(line).map_err(|e| EvalError::Format {
            path: path.display().to_string(),
            line: n + 1,
            detail: e.to_string(),
        })?;
        out.push((n + 1, v));
    }
    Ok(out)
}

/// Loads a dataset file and its possible answers (`possible_answer/<same name>` beside
/// it; none for irrelevance). A directory loads every `BFCL_*.json` in it.
pub fn load(path: &Path) -> Result<Vec<Case>, EvalError> {
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| EvalError::Read {
                path: path.display().to_string(),
                detail: e.to_string(),
            })?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("BFCL_") && n.ends_with(".json"))
            })
            .collect();
        files.sort();
        let mut all = Vec::new();
        for f in files {
            all.extend(load(&f)?);
        }
        return Ok(all);
    }
    let answers_path = path
        .parent()
        .unwrap_or(Path::new("."))
        .join("possible_answer")
        .join(path.file_name().unwrap_or_default());
    let answers = match answers_path.is_file() {
        true => read_lines(&answers_path)?,
        false => Vec::new(),
    };
    cases_of(path, read_lines(path)?, answers)
}

/// The everyday set (`tests/data/everyday`), built into the binary: what `toolloop
/// calibrate` measures on when it is given no data.
pub fn everyday() -> Vec<Case> {
    macro_rules! set {
        ($($name:literal),*) => {[$(
            (
                concat!("BFCL_v4_everyday_", $name, ".json"),
                include_str!(concat!("../../tests/data/everyday/BFCL_v4_everyday_", $name, ".json")),
                include_str!(concat!("../../tests/data/everyday/possible_answer/BFCL_v4_everyday_", $name, ".json")),
            ),
        )*]};
    }
    let mut all = Vec::new();
    for (name, text, answers) in set!("simple", "multiple", "parallel") {
        let path = Path::new(name);
        let parsed = parse_lines(path, text)
            .and_then(|c| Ok((c, parse_lines(path, answers)?)))
            .and_then(|(c, a)| cases_of(path, c, a));
        all.extend(parsed.unwrap_or_default());
    }
    let irrelevance = include_str!("../../tests/data/everyday/BFCL_v4_everyday_irrelevance.json");
    let path = Path::new("BFCL_v4_everyday_irrelevance.json");
    let parsed = parse_lines(path, irrelevance).and_then(|c| cases_of(path, c, Vec::new()));
    all.extend(parsed.unwrap_or_default());
    all
}

/// The cases of the file at `path` from its lines and its possible answers' lines.
fn cases_of(
    path: &Path,
    lines: Vec<(usize, Value)>,
    answer_lines: Vec<(usize, Value)>,
) -> Result<Vec<Case>, EvalError> {
    let category = category_of(path);
    let mut answers = std::collections::HashMap::new();
    for (_, v) in answer_lines {
        if let Some(id) = v["id"].as_str() {
            answers.insert(id.to_string(), v["ground_truth"].clone());
        }
    }
    let mut cases = Vec::new();
    for (line, v) in lines {
        let err = |detail: &str| EvalError::Format {
            path: path.display().to_string(),
            line,
            detail: detail.to_string(),
        };
        let id = v["id"].as_str().ok_or_else(|| err("no id"))?.to_string();
        // `question` is a list of turns, each a list of messages; the last user message
        // of the first turn is the question.
        let question = v["question"][0]
            .as_array()
            .and_then(|msgs| {
                msgs.iter()
                    .rev()
                    .find(|m| m["role"] == "user")
                    .and_then(|m| m["content"].as_str())
            })
            .ok_or_else(|| err("no user question"))?
            .to_string();
        let functions: Vec<Value> = v["function"]
            .as_array()
            .ok_or_else(|| err("no function list"))?
            .clone();
        let tools = functions
            .iter()
            .map(|f| {
                let mut spec = ToolSpec::new(
                    f["name"].as_str().unwrap_or(""),
                    f["description"].as_str().unwrap_or(""),
                    to_json_schema(&f["parameters"]),
                );
                // Not BFCL's: a set of toolloop's own may say what a tool does, as MCP's
                // annotations do; BFCL's own sets say nothing and are run as read-only.
                if let Ok(hints) = serde_json::from_value(f["annotations"].clone()) {
                    spec.annotations = hints;
                }
                spec
            })
            .collect();
        let ground_truth = match answers.get(&id) {
            Some(Value::Array(gt)) => gt.clone(),
            _ => Vec::new(),
        };
        if ground_truth.is_empty() && !category.contains("irrelevance") {
            return Err(err("no possible answer for this case"));
        }
        cases.push(Case {
            id,
            category: category.clone(),
            question,
            tools,
            functions,
            ground_truth,
        });
    }
    Ok(cases)
}

/// A predicted call: the first `tool_call` of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The function name.
    pub name: String,
    /// The arguments.
    pub arguments: Map<String, Value>,
}

/// BFCL's string normalisation: lower case, without spaces and `,./-_*^`.
pub fn normalize(s: &str) -> String {
    s.to_lowercase()
        .chars()
        .filter(|c| !c.is_whitespace() && !",./-_*^".contains(*c))
        .collect()
}

/// The optional values of `call` that its possible answer in `ground_truth` (the first of
/// the same tool) does not accept: values nobody asked for, as `date: "2023-04-15"` for a
/// flight asked about today. A required value that is wrong is not counted: it is a wrong
/// call, not an added value. None for a tool no possible answer names.
pub(crate) fn unasked_optional(call: &Call, functions: &[Value], ground_truth: &[Value]) -> usize {
    let Some(want) = ground_truth.iter().find_map(|t| t.get(&call.name)) else {
        return 0;
    };
    let required: Vec<&Value> = functions
        .iter()
        .find(|f| f["name"] == call.name.as_str())
        .and_then(|f| f["parameters"]["required"].as_array())
        .map(|r| r.iter().collect())
        .unwrap_or_default();
    call.arguments
        .iter()
        .filter(|(k, _)| !required.iter().any(|r| *r == k.as_str()))
        .filter(|(k, v)| {
            !want[k.as_str()]
                .as_array()
                .is_some_and(|options| options.iter().any(|o| values_match(v, o)))
        })
        .count()
}

fn values_match(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::String(g), Value::String(w)) => normalize(g) == normalize(w),
        (Value::Number(g), Value::Number(w)) => g.as_f64() == w.as_f64(),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| values_match(a, b))
        }
        (Value::Object(g), Value::Object(w)) => {
            // Nested dicts: each possible-answer key holds a list of possible values.
            w.iter().all(|(k, options)| match (g.get(k), options) {
                (Some(v), Value::Array(opts)) => opts.iter().any(|o| values_match(v, o)),
                (None, Value::Array(opts)) => opts.iter().any(|o| o == ""),
                (Some(v), o) => values_match(v, o),
                (None, _) => false,
            }) && g.keys().all(|k| w.contains_key(k))
        }
        (g, w) => g == w,
    }
}

fn type_ok(v: &Value, bfcl_type: &str) -> bool {
    match bfcl_type {
        "integer" => v.is_i64() || v.is_u64(),
        "float" | "number" => v.is_number(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "array" | "tuple" => v.is_array(),
        "dict" | "object" => v.is_object(),
        _ => true,
    }
}

/// Scores a prediction. `Ok(())` passes; the error says which rule failed.
#[cfg(test)]
pub fn score(
    category: &str,
    call: Option<&Call>,
    functions: &[Value],
    ground_truth: &[Value],
) -> Result<(), String> {
    let calls: Vec<Call> = call.cloned().into_iter().collect();
    score_calls(category, &calls, functions, ground_truth)
}

/// Scores the calls of a case, as BFCL's checker does: none for `irrelevance`; otherwise
/// one call for each possible answer, matched in any order (`parallel`,
/// `parallel_multiple`), each passing the single-call rules.
pub fn score_calls(
    category: &str,
    calls: &[Call],
    functions: &[Value],
    ground_truth: &[Value],
) -> Result<(), String> {
    if category.contains("irrelevance") {
        return match calls.first() {
            None => Ok(()),
            Some(c) => Err(format!("called {} where no function fits", c.name)),
        };
    }
    if calls.is_empty() {
        return Err("no call was made".into());
    }
    if calls.len() != ground_truth.len() {
        return Err(format!(
            "{} calls made where {} were expected",
            calls.len(),
            ground_truth.len()
        ));
    }
    let mut used = vec![false; calls.len()];
    for truth in ground_truth {
        let mut first_error = None;
        let found = calls.iter().enumerate().position(|(i, c)| {
            if used[i] {
                return false;
            }
            match check_one(c, truth, functions) {
                Ok(()) => true,
                Err(e) => {
                    first_error.get_or_insert(e);
                    false
                }
            }
        });
        match found {
            Some(i) => used[i] = true,
            None => return Err(first_error.unwrap_or_else(|| "no call matches".into())),
        }
    }
    Ok(())
}

/// One call against one possible answer (BFCL's simple function checker).
fn check_one(call: &Call, truth: &Value, functions: &[Value]) -> Result<(), String> {
    let truth = truth.as_object().ok_or("no possible answer")?;
    let (want_name, want_params) = truth.iter().next().ok_or("empty possible answer")?;
    if &call.name != want_name {
        return Err(format!("called {} instead of {want_name}", call.name));
    }
    let function = functions
        .iter()
        .find(|f| f["name"] == call.name.as_str())
        .ok_or_else(|| format!("{} is not among the functions", call.name))?;
    let props = function["parameters"]["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let required = crate::turn::tool_schema::required(&function["parameters"]);
    for r in &required {
        if !call.arguments.contains_key(*r) {
            return Err(format!("required parameter {r} is missing"));
        }
    }
    let want_params = want_params.as_object().cloned().unwrap_or_default();
    for (k, v) in &call.arguments {
        let Some(schema) = props.get(k) else {
            return Err(format!("parameter {k} is not in the schema"));
        };
        // As BFCL's checker: a parameter the possible answer leaves out is one the
        // request did not ask for (`force: true` for "push main").
        if !want_params.contains_key(k) {
            return Err(format!("parameter {k} = {v} was not asked for"));
        }
        let t = schema["type"].as_str().unwrap_or("any");
        if !type_ok(v, t) {
            return Err(format!("parameter {k} should be of type {t}, got {v}"));
        }
    }
    for (k, options) in &want_params {
        let options = options.as_array().cloned().unwrap_or_default();
        match call.arguments.get(k) {
            None => {
                if !options.iter().any(|o| o == "") {
                    return Err(format!("parameter {k} is missing"));
                }
            }
            Some(v) => {
                if !options.iter().any(|o| values_match(v, o)) {
                    return Err(format!(
                        "parameter {k} = {v} is not among {}",
                        Value::Array(options)
                    ));
                }
            }
        }
    }
    Ok(())
}
