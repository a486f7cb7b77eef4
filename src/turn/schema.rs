//! CALL_SCHEMA: the JSON Schema every model turn is constrained to, and its narrowed
//! forms.
//!
//! The schema does two jobs. Sent as Ollama's `format` (or an OpenAI `response_format`),
//! llama.cpp turns it into a grammar, so the model *cannot* emit anything else; checked
//! with `jsonschema` afterwards, it catches what an unconstrained backend lets through and
//! explains the mistake to the model in one short line.
//!
//! llama.cpp's converter honours only some keywords (type, properties, required, enum,
//! const, oneOf/anyOf, items, min/maxItems, min/maxLength, pattern, local `$ref`), ignores
//! `properties` next to `oneOf`, and treats `additionalProperties` as false. So each kind
//! is its own object in a root `oneOf`, with `kind` as a `const`, and every free string
//! has a `maxLength`: a small model fills an unbounded string with repetition until the
//! token limit.
//!
//! Narrowing (the default) gives every tool its own `tool_call` variant with `tool` fixed
//! and the tool's own `inputSchema` as `arguments`, so the grammar makes an unknown tool or
//! a malformed argument impossible. On the last allowed iteration
//! [`CallSchema::answer_only`] leaves only `final_answer` and `clarify`.

use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::tool_spec::ToolSpec;
use crate::turn::{Kind, Turn, TurnError};
use crate::validate::{compile, describe_errors, truncate_chars};

use crate::turn::reply::ANSWER_PLACEHOLDER;
use crate::turn::tool_schema::prepare_arguments;

/// The static CALL_SCHEMA, generated from [`Turn`] by schemars. `schemas/call_schema.json`
/// holds the same text (see [`call_schema_json`]).
///
/// ```
/// let schema = toolloop::turn::schema::call_schema();
/// let kinds: Vec<&str> = schema["oneOf"].as_array().unwrap().iter()
///     .map(|v| v["properties"]["kind"]["const"].as_str().unwrap())
///     .collect();
/// assert_eq!(kinds, ["tool_call", "tool_calls", "final_answer", "clarify"]);
/// ```
pub fn call_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let schema = schemars::schema_for!(Turn);
        serde_json::to_value(&schema).unwrap_or(Value::Null)
    })
}

/// CALL_SCHEMA as the pretty-printed text stored in `schemas/call_schema.json`.
pub fn call_schema_json() -> String {
    let mut text = serde_json::to_string_pretty(call_schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// How much of the tool catalogue is written into the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Narrowing {
    /// The static schema: any tool name, any arguments object.
    Off,
    /// `tool` is an enum of the catalogue's names; arguments stay a free object.
    ToolNames,
    /// One `tool_call` variant per tool, with its `inputSchema` as `arguments`.
    #[default]
    PerTool,
}

/// How the model comes to its decision between calling a tool and answering.
///
/// Under the grammar the model commits at the first token where the kinds differ. With
/// `kind` first (`Direct`) that is the first thing it writes, before any reason; with
/// `thought` first (`Reason`) it writes one short reason, then the kind, so the decision
/// follows the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decide {
    /// `kind` first: the decision is the first token.
    Direct,
    /// `thought` first (at most `REASON_MAX` characters), then `kind`.
    Reason,
    /// `kind` first, and a call the model itself gave too little probability
    /// (`tool-probability`) is declined: the model is asked for an answer instead. The
    /// default, in the type and in [`crate::Config`] alike.
    #[default]
    Probability,
}

/// The longest `thought` the narrowed schema allows: one sentence, enough to say which
/// tool fits and why, short enough that a small model cannot ramble in it.
pub(crate) const REASON_MAX: u64 = 160;

impl Decide {
    /// Rewrites one variant's schema for this way of deciding: the `thought` bounded to
    /// [`REASON_MAX`]; under [`Decide::Reason`] the thought moved first, otherwise an
    /// answer's `content` moved before its thought, so the answer starts streaming at
    /// once (the decision is already made by then: it was the `kind`).
    ///
    /// Otherwise, too, an answer's `thought` is held to nothing (`""`). Written after the
    /// content it changes nothing the person gets, and a small model spent a good share of
    /// its tokens on it over whole questions. It stays in the schema
    /// because its comma ends the content: without it the model's likeliest end of the
    /// string, `",` as one token, is ruled out, and it wrote on ("5928" became "5928 is the
    /// product of 123.5 and 48, which equals 70240.0000").
    fn shape(self, variant: Value) -> Value {
        let Value::Object(mut v) = variant else {
            return variant;
        };
        let answer = self != Decide::Reason
            && v.get("properties")
                .and_then(Value::as_object)
                .is_some_and(is_answer);
        if let Some(Value::Object(props)) = v.get_mut("properties") {
            if let Some(t) = props.get_mut("thought") {
                t["maxLength"] = json!(if answer { 0 } else { REASON_MAX });
            }
            *props = self.ordered(std::mem::take(props));
        }
        Value::Object(v)
    }

    /// An object's keys in the order this way of deciding emits them.
    fn ordered(self, mut m: Map<String, Value>) -> Map<String, Value> {
        let first: &[&str] = match self {
            Decide::Reason => &["thought"],
            _ if is_answer(&m) => &["kind", "content"],
            _ => return m,
        };
        let mut ordered = Map::new();
        for key in first {
            if let Some(v) = m.shift_remove(*key) {
                ordered.insert((*key).to_string(), v);
            }
        }
        ordered.append(&mut m);
        ordered
    }

    /// A turn as JSON text with its keys in the order this way of deciding asks for: what
    /// the history shows the model of its own turn.
    pub fn canonical(self, turn: &Turn) -> String {
        match turn.to_value() {
            Value::Object(m) => Value::Object(self.ordered(m)).to_string(),
            v => v.to_string(),
        }
    }
}

/// Whether a turn's object, or a variant's `properties`, is a `final_answer`'s.
fn is_answer(m: &Map<String, Value>) -> bool {
    m.get("kind")
        .is_some_and(|k| k.as_str().or_else(|| k.get("const")?.as_str()) == Some("final_answer"))
}

#[derive(Debug, Clone)]
struct Variant {
    kind: Kind,
    /// The tool this variant is fixed to, for [`Narrowing::PerTool`].
    tool: Option<String>,
    validator: Option<std::sync::Arc<jsonschema::Validator>>,
    /// Whether the schema holds the `thought` to nothing, as an answer's
    /// ([`Decide::shape`]): a server that does not hold the model to the schema may still
    /// send one, and the turn is not refused for it.
    quiet: bool,
}

/// A CALL_SCHEMA for one request: the JSON to send and a validator for the reply.
///
/// ```
/// use serde_json::json;
/// use toolloop::turn::schema::{CallSchema, Narrowing};
/// use toolloop::tools::ToolSpec;
/// use toolloop::turn::Turn;
///
/// let tools = [ToolSpec::new("get_weather", "Weather for a city", json!({
///     "type": "object",
///     "properties": {"city": {"type": "string"}},
///     "required": ["city"],
/// }))];
/// let schema = CallSchema::for_tools(&tools, Narrowing::PerTool);
/// let call = Turn::parse(r#"{"kind": "tool_call", "thought": "", "tool": "get_weather",
///                            "arguments": {"town": "Oslo"}}"#).unwrap().turn;
/// let err = schema.check(&call).unwrap_err().to_string();
/// assert!(err.contains("city"), "{err}");
/// ```
#[derive(Debug, Clone)]
pub struct CallSchema {
    value: Value,
    variants: Vec<Variant>,
    tool_names: Vec<String>,
    /// The most calls a `tool_calls` turn may carry under this schema.
    max_calls: u64,
    /// The fewest; above 1 only a `tool_calls` turn is allowed ([`CallSchema::at_least`]).
    min_calls: u64,
}

impl CallSchema {
    /// The static schema: every kind, any tool, any arguments.
    pub fn full() -> Self {
        let variants = static_variants();
        Self::build(
            vec![
                variants.0.clone(),
                static_variant("tool_calls").clone(),
                variants.1.clone(),
                variants.2.clone(),
            ],
            vec![None, None, None, None],
            Map::new(),
            Vec::new(),
        )
    }

    /// The schema narrowed to a catalogue. With no tools there is nothing to call, so only
    /// `final_answer` and `clarify` remain (unless narrowing is [`Narrowing::Off`]).
    pub fn for_tools(tools: &[ToolSpec], narrowing: Narrowing) -> Self {
        Self::deciding(tools, narrowing, Decide::Direct)
    }

    /// [`CallSchema::for_tools`] laid out for a way of deciding.
    pub fn deciding(tools: &[ToolSpec], narrowing: Narrowing, decide: Decide) -> Self {
        Self::deciding_calls(tools, narrowing, decide, 1)
    }

    /// [`CallSchema::deciding`], with a `tool_calls` variant that carries up to
    /// `max_calls` calls in one turn (none when `max_calls` is 1). Each call is narrowed
    /// exactly as a single call is.
    pub fn deciding_calls(
        tools: &[ToolSpec],
        narrowing: Narrowing,
        decide: Decide,
        max_calls: u32,
    ) -> Self {
        if narrowing == Narrowing::Off {
            return Self::full();
        }
        let (call, answer, clarify) = static_variants();
        let mut items = Vec::new();
        let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        let mut schemas = Vec::new();
        let mut fixed = Vec::new();
        let mut defs = Map::new();
        match narrowing {
            _ if tools.is_empty() => {}
            Narrowing::ToolNames => {
                let mut v = call.clone();
                v["properties"]["tool"] = json!({"type": "string", "enum": names});
                items.push(call_item(&v));
                schemas.push(v);
                fixed.push(None);
            }
            _ => {
                for tool in tools {
                    let mut v = call.clone();
                    v["properties"]["tool"] = json!({"type": "string", "const": tool.name});
                    v["properties"]["arguments"] = prepare_arguments(tool, &mut defs);
                    items.push(call_item(&v));
                    schemas.push(v);
                    fixed.push(Some(tool.name.clone()));
                }
            }
        }
        if max_calls > 1 && !items.is_empty() {
            let mut v = static_variant("tool_calls").clone();
            v["properties"]["calls"]["items"] = json!({"oneOf": items});
            v["properties"]["calls"]["maxItems"] = json!(max_calls);
            // No minimum of two: held to two, Qwen 0.5B invented a second call for requests
            // that need one (the weather in Paris, then in London), which scored better on
            // BFCL's `parallel` but broke whole questions.
            schemas.push(v);
            fixed.push(None);
        }
        schemas.push(answer.clone());
        schemas.push(clarify.clone());
        fixed.push(None);
        fixed.push(None);
        let schemas = schemas.into_iter().map(|v| decide.shape(v)).collect();
        Self::build(schemas, fixed, defs, names)
    }

    /// Only `final_answer` and `clarify`: for the last allowed iteration, or when a model
    /// keeps repeating a call.
    pub fn answer_only() -> Self {
        Self::answer_only_deciding(Decide::Direct)
    }

    /// Only `final_answer` and `clarify`, laid out for a way of deciding.
    pub fn answer_only_deciding(decide: Decide) -> Self {
        // Built once per layout: compiling validators is most of what a run would
        // otherwise spend.
        static DIRECT: OnceLock<CallSchema> = OnceLock::new();
        static REASON: OnceLock<CallSchema> = OnceLock::new();
        let cell = match decide {
            Decide::Reason => &REASON,
            _ => &DIRECT,
        };
        cell.get_or_init(|| {
            let (_, answer, clarify) = static_variants();
            Self::build(
                vec![decide.shape(answer.clone()), decide.shape(clarify.clone())],
                vec![None, None],
                Map::new(),
                Vec::new(),
            )
        })
        .clone()
    }

    fn build(
        schemas: Vec<Value>,
        tools: Vec<Option<String>>,
        defs: Map<String, Value>,
        tool_names: Vec<String>,
    ) -> Self {
        let mut variants = Vec::with_capacity(schemas.len());
        for (schema, tool) in schemas.iter().zip(tools) {
            let kind = match schema["properties"]["kind"]["const"].as_str() {
                Some("tool_call") => Kind::ToolCall,
                Some("tool_calls") => Kind::ToolCalls,
                Some("final_answer") => Kind::FinalAnswer,
                _ => Kind::Clarify,
            };
            let mut standalone = schema.clone();
            if !defs.is_empty() {
                standalone["$defs"] = Value::Object(defs.clone());
            }
            let validator = match compile(&standalone) {
                Ok(v) => Some(v),
                Err(e) => {
                    log::warn!(
                        "schema of {} cannot be checked locally: {e}",
                        tool.as_deref().unwrap_or(kind.as_str())
                    );
                    None
                }
            };
            variants.push(Variant {
                kind,
                tool,
                validator,
                quiet: schema["properties"]["thought"]["maxLength"] == 0,
            });
        }
        let max_calls = schemas
            .iter()
            .find(|v| v["properties"]["kind"]["const"] == "tool_calls")
            .and_then(|v| v["properties"]["calls"]["maxItems"].as_u64())
            .unwrap_or(crate::turn::CALLS_MAX);
        let mut value = Map::new();
        value.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        value.insert("title".into(), json!("CALL_SCHEMA"));
        value.insert("oneOf".into(), Value::Array(schemas));
        if !defs.is_empty() {
            value.insert("$defs".into(), Value::Object(defs));
        }
        CallSchema {
            value: Value::Object(value),
            variants,
            tool_names,
            max_calls,
            min_calls: 1,
        }
    }

    /// This schema's several-calls form alone, held to at least `n` calls: for asking the
    /// model again for the calls it left out (the `more-calls` check). `None` when the
    /// schema has no such form or cannot carry `n`.
    pub fn at_least(&self, n: u64) -> Option<Self> {
        let mut several = self.several_form().filter(|_| n <= self.max_calls)?.clone();
        several["properties"]["calls"]["minItems"] = json!(n);
        let mut out = self.clone();
        out.value["oneOf"] = json!([several]);
        out.min_calls = n;
        Some(out)
    }

    /// Whether [`CallSchema::at_least`] can hold a turn to `n` calls.
    pub(crate) fn can_hold(&self, n: u64) -> bool {
        self.several_form().is_some() && n <= self.max_calls
    }

    fn several_form(&self) -> Option<&Value> {
        self.value["oneOf"]
            .as_array()?
            .iter()
            .find(|v| v["properties"]["kind"]["const"] == "tool_calls")
    }

    /// The schema to send to the model server.
    pub fn as_value(&self) -> &Value {
        &self.value
    }

    /// Whether a turn of `kind` is allowed by this schema.
    pub fn allows(&self, kind: Kind) -> bool {
        self.variants.iter().any(|v| v.kind == kind)
    }

    /// Checks a parsed turn against the schema. The rejection's text is one short line
    /// for the model: what is wrong and what is valid.
    pub fn check(&self, turn: &Turn) -> Result<(), Rejection> {
        if let Turn::FinalAnswer { content, .. } = turn
            && crate::turn::placeholder::is_placeholder(content)
        {
            return Err(Rejection::Placeholder);
        }
        let kind = turn.kind();
        if self.min_calls > 1 && kind != Kind::ToolCalls {
            return Err(Rejection::KindNotAllowed {
                kind,
                allowed: vec![Kind::ToolCalls],
            });
        }
        if !self.allows(kind) {
            let mut allowed: Vec<Kind> = self.variants.iter().map(|v| v.kind).collect();
            allowed.dedup();
            return Err(Rejection::KindNotAllowed { kind, allowed });
        }
        if let Turn::ToolCalls { thought, calls } = turn {
            let (min, max) = (self.min_calls, self.max_calls);
            if (calls.len() as u64) < min || calls.len() as u64 > max {
                return Err(Rejection::Schema(format!(
                    "a tool_calls turn carries {min} to {max} calls, not {}",
                    calls.len()
                )));
            }
            // Each call is checked as the single call it could have been, so a mistake
            // is named with its call and its own schema's words.
            for (i, c) in calls.iter().enumerate() {
                let one = Turn::ToolCall {
                    thought: thought.clone(),
                    tool: c.tool.clone(),
                    arguments: c.arguments.clone(),
                };
                self.check_call(&one).map_err(|r| match r {
                    Rejection::Schema(p) => Rejection::Schema(format!("call {}: {p}", i + 1)),
                    other => other,
                })?;
            }
            return Ok(());
        }
        self.check_call(turn)
    }

    fn check_call(&self, turn: &Turn) -> Result<(), Rejection> {
        let kind = turn.kind();
        let variant = match turn {
            Turn::ToolCall { tool, .. } => {
                if !self.tool_names.is_empty() && !self.tool_names.iter().any(|n| n == tool) {
                    return Err(Rejection::UnknownTool {
                        name: truncate_chars(tool, 64),
                        available: self.tool_names.clone(),
                    });
                }
                self.variants
                    .iter()
                    .find(|v| v.kind == kind && v.tool.as_deref().is_none_or(|t| t == tool))
            }
            _ => self.variants.iter().find(|v| v.kind == kind),
        };
        let Some((validator, quiet)) = variant.and_then(|v| Some((v.validator.as_ref()?, v.quiet)))
        else {
            return Ok(());
        };
        let mut value = turn.to_value();
        if quiet {
            value["thought"] = json!("");
        }
        match describe_errors(validator, &value, false) {
            None => Ok(()),
            Some(problems) => Err(Rejection::Schema(truncate_chars(&problems, 400))),
        }
    }
}

/// Why a reply was refused as a turn. Its text goes back to the model, so it says what is
/// wrong and what is valid, in one line.
///
/// ```
/// use toolloop::turn::schema::{CallSchema, Rejection};
/// use toolloop::turn::Turn;
///
/// let call = Turn::parse(r#"{"kind": "tool_call", "tool": "x", "arguments": {}}"#).unwrap().turn;
/// let r = CallSchema::answer_only().check(&call).unwrap_err();
/// assert!(matches!(r, Rejection::KindNotAllowed { .. }));
/// assert_eq!(r.to_string(), r#"kind "tool_call" is not allowed now; reply with kind "final_answer" or "clarify""#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// The text is not a turn at all.
    NotATurn(TurnError),
    /// A kind the schema does not allow now (a call on the last iteration).
    KindNotAllowed {
        /// The kind the model used.
        kind: Kind,
        /// The kinds it may use.
        allowed: Vec<Kind>,
    },
    /// A call of a tool the catalogue does not have.
    UnknownTool {
        /// The name the model used (cut to 64 characters).
        name: String,
        /// The tools there are.
        available: Vec<String>,
    },
    /// The turn breaks the schema: the first few problems, each with its path.
    Schema(String),
    /// An answer whose text is the prompt's placeholder for one, written back with its
    /// brackets or without, in either case: toolloop's own text, which no answer of the
    /// model's could be. Told why, the model writes it again, so it is not sent back as
    /// an error: the engine asks once more with the placeholder out of the prompt, and
    /// ends the run (`Ending::InvalidReplies`) on a second.
    Placeholder,
    /// An answer, or a question for the person, that writes back words of toolloop's own
    /// instructions to the model (`Answer directly without it.`): these. It ends the run
    /// as the placeholder does.
    Instruction(&'static str),
}

impl Rejection {
    /// Whether the reply wrote toolloop's own text back rather than anything of the
    /// model's: asked again, the models measured wrote it back again, so the run ends on
    /// it rather than spend requests (the placeholder after one more request with the
    /// prompt no longer showing it).
    pub fn ends_the_run(&self) -> bool {
        matches!(self, Rejection::Placeholder | Rejection::Instruction(_))
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::NotATurn(e) => write!(f, "{e}"),
            Rejection::KindNotAllowed { kind, allowed } => {
                let allowed: Vec<&str> = allowed.iter().map(|k| k.as_str()).collect();
                write!(
                    f,
                    "kind \"{}\" is not allowed now; reply with kind {}",
                    kind.as_str(),
                    quoted_list(&allowed, " or ")
                )
            }
            Rejection::UnknownTool { name, available } => write!(
                f,
                "unknown tool \"{name}\"; available tools: {}",
                quoted_list(available, ", ")
            ),
            Rejection::Schema(problems) => f.write_str(problems),
            Rejection::Placeholder => write!(
                f,
                "the answer was the prompt's placeholder, \"{ANSWER_PLACEHOLDER}\", written back: this model does not follow toolloop's prompt; try a larger one"
            ),
            Rejection::Instruction(words) => write!(
                f,
                "the reply wrote back toolloop's instruction to the model, \"{words}\", rather than an answer of its own"
            ),
        }
    }
}

fn quoted_list<S: AsRef<str>>(items: &[S], sep: &str) -> String {
    items
        .iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect::<Vec<_>>()
        .join(sep)
}

/// One item of a narrowed `calls` array: a single-call variant's `tool` and `arguments`.
fn call_item(variant: &Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "tool": variant["properties"]["tool"],
            "arguments": variant["properties"]["arguments"],
        },
        "required": ["tool", "arguments"],
        "additionalProperties": false,
    })
}

/// The variant of one kind in the static schema.
fn static_variant(kind: &str) -> &'static Value {
    static NULL: Value = Value::Null;
    call_schema()["oneOf"]
        .as_array()
        .and_then(|vs| {
            vs.iter()
                .find(|v| v["properties"]["kind"]["const"].as_str() == Some(kind))
        })
        .unwrap_or(&NULL)
}

/// The static schema's tool_call, final_answer and clarify variants.
fn static_variants() -> (&'static Value, &'static Value, &'static Value) {
    (
        static_variant("tool_call"),
        static_variant("final_answer"),
        static_variant("clarify"),
    )
}

mod beginning;
mod ending;
#[cfg(test)]
mod tests;
