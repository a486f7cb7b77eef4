//! What `toolloop proxy` reads from a client and writes back, in both APIs it speaks:
//! OpenAI's `POST /v1/chat/completions` and Ollama's `POST /api/chat`. Pure functions from
//! JSON to a [`Request`] and from an [`Ending`] to JSON, so every shape is tested without
//! a socket.
//!
//! The two APIs differ in small ways that matter to clients: OpenAI's `arguments` are a
//! JSON *string* and each call has an `id` its result names (`tool_call_id`); Ollama's are
//! an object and results follow their calls in order (newer clients add `tool_name`).

use serde_json::{Map, Value, json};

use crate::message::Message;
use crate::run::ending::Ending;
use crate::tool_spec::ToolSpec;

/// Which API a request came in on; errors and replies take its shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /api/chat`.
    Ollama,
}

/// A client's request with tools, read into what a run takes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Request {
    /// The model the client named (empty: none).
    pub model: String,
    /// The tools on offer.
    pub tools: Vec<ToolSpec>,
    /// `tool_choice` read: which calls the client allows.
    pub choice: Choice,
    /// The client's system messages, joined: the person's part of the system prompt.
    pub system: Option<String>,
    /// The turns before the last user message.
    pub earlier: Vec<Message>,
    /// The last user message: the request the run answers.
    pub query: String,
    /// The calls made since `query` and their results, a round per assistant message.
    pub rounds: Vec<crate::run::orchestrator::Round>,
    /// Whether the reply streams.
    pub stream: bool,
    /// `stream_options.include_usage` (OpenAI).
    pub include_usage: bool,
    /// Sampling the client set.
    pub temperature: Option<f64>,
    /// The most tokens a reply may have (`max_tokens`, `max_completion_tokens`,
    /// Ollama's `options.num_predict`).
    pub max_tokens: Option<u32>,
    /// The seed (`seed`, Ollama's `options.seed`).
    pub seed: Option<u64>,
    /// `parallel_tool_calls: false`: one call per turn.
    pub one_call: bool,
    /// Stop sequences (`stop`, Ollama's `options.stop`): the answer's text ends before
    /// the first of them. They never reach the turn itself, whose JSON they would cut.
    pub stop: Vec<String>,
    /// The schema an answer must follow (`response_format`, Ollama's `format`); `None`:
    /// free text.
    pub format: Option<Value>,
    /// How long Ollama keeps the model loaded (`keep_alive`), for an Ollama upstream.
    pub keep_alive: Option<String>,
}

/// Which calls a request allows (`tool_choice`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The model decides (`auto`, the default).
    #[default]
    Auto,
    /// No call: an answer only.
    None,
    /// A call is wanted: the checks that decline calls for an answer do not.
    Required,
    /// This tool only.
    Named(String),
}

/// A request the client got wrong: the message, and the field it is about.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadRequest {
    pub message: String,
    pub param: Option<&'static str>,
}

fn bad(message: impl Into<String>, param: &'static str) -> BadRequest {
    BadRequest {
        message: message.into(),
        param: Some(param),
    }
}

/// Whether a body asks for tools: only such a request is toolloop's; any other passes
/// through to the upstream unchanged.
pub(crate) fn has_tools(body: &Value) -> bool {
    body["tools"].as_array().is_some_and(|t| !t.is_empty())
}

/// The text of a message's `content`: a string, or OpenAI's list of parts (their text).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A call's arguments as an object: OpenAI sends a JSON string, Ollama an object.
fn arguments_of(v: &Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m.clone(),
        Value::String(s) => match serde_json::from_str(s) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        },
        _ => Map::new(),
    }
}

/// Reads a client's body on `api`.
pub(crate) fn read(body: &Value, api: Api) -> Result<Request, BadRequest> {
    let Some(object) = body.as_object() else {
        return Err(BadRequest {
            message: "the body must be a JSON object".into(),
            param: None,
        });
    };
    let messages = match object.get("messages") {
        Some(Value::Array(m)) => m,
        Some(_) => return Err(bad("`messages` must be a list", "messages")),
        None => return Err(bad("`messages` is required", "messages")),
    };
    let tools = read_tools(object.get("tools"))?;
    let choice = read_choice(object.get("tool_choice"), &tools)?;
    let options = &body["options"];
    let mut request = Request {
        model: object
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        tools,
        choice,
        stream: match api {
            Api::OpenAi => body["stream"].as_bool().unwrap_or(false),
            // Ollama streams unless told not to.
            Api::Ollama => body["stream"].as_bool().unwrap_or(true),
        },
        include_usage: body["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false),
        temperature: body["temperature"]
            .as_f64()
            .or_else(|| options["temperature"].as_f64()),
        max_tokens: body["max_completion_tokens"]
            .as_u64()
            .or_else(|| body["max_tokens"].as_u64())
            .or_else(|| options["num_predict"].as_u64())
            .map(|n| n.min(u32::MAX as u64) as u32),
        seed: body["seed"].as_u64().or_else(|| options["seed"].as_u64()),
        one_call: body["parallel_tool_calls"] == json!(false),
        stop: read_stop(match api {
            Api::OpenAi => &body["stop"],
            Api::Ollama => &options["stop"],
        })?,
        format: match api {
            Api::OpenAi => read_response_format(&body["response_format"])?,
            Api::Ollama => read_format(&body["format"])?,
        },
        keep_alive: match &body["keep_alive"] {
            Value::String(s) => Some(s.clone()),
            // Ollama reads a number as seconds; a negative one keeps the model for good.
            Value::Number(n) => Some(format!("{n}s")),
            _ => None,
        },
        ..Request::default()
    };
    read_messages(messages, &mut request)?;
    Ok(request)
}

/// Stop sequences: one string or a list of them.
fn read_stop(stop: &Value) -> Result<Vec<String>, BadRequest> {
    match stop {
        Value::Null => Ok(Vec::new()),
        Value::String(s) if s.is_empty() => Ok(Vec::new()),
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(list) => list
            .iter()
            .map(|s| match s.as_str() {
                Some(s) if !s.is_empty() => Ok(s.to_string()),
                _ => Err(bad("each stop sequence must be a non-empty string", "stop")),
            })
            .collect(),
        _ => Err(bad("`stop` must be a string or a list of strings", "stop")),
    }
}

/// OpenAI's `response_format`: `text` (free), `json_object` (any object) or
/// `json_schema` with its `schema`.
fn read_response_format(format: &Value) -> Result<Option<Value>, BadRequest> {
    let param = "response_format";
    match format["type"].as_str() {
        None if format.is_null() => Ok(None),
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("json_schema") => match &format["json_schema"]["schema"] {
            Value::Null => Err(bad("json_schema.schema is required", param)),
            schema => compiled(schema, param).map(Some),
        },
        _ => Err(bad(
            "response_format.type must be text, json_object or json_schema",
            param,
        )),
    }
}

/// Ollama's `format`: `"json"` or a JSON Schema.
fn read_format(format: &Value) -> Result<Option<Value>, BadRequest> {
    match format {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) if s == "json" => Ok(Some(json!({"type": "object"}))),
        Value::Object(_) => compiled(format, "format").map(Some),
        _ => Err(bad("`format` must be \"json\" or a JSON Schema", "format")),
    }
}

fn compiled(schema: &Value, param: &'static str) -> Result<Value, BadRequest> {
    match jsonschema::validator_for(schema) {
        Ok(_) => Ok(schema.clone()),
        Err(e) => Err(bad(format!("{param} is not a JSON Schema: {e}"), param)),
    }
}

/// Whether `text` is JSON that `schema` accepts: an answer that already is needs no
/// second request.
pub(crate) fn follows(text: &str, schema: &Value) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    jsonschema::validator_for(schema).is_ok_and(|v| v.is_valid(&value))
}

/// The request as a plain conversation, the rounds' calls and results in it, for a
/// request that writes the answer under the client's format.
pub(crate) fn conversation(request: &Request) -> Vec<Message> {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(Message::system(system.clone()));
    }
    messages.extend(request.earlier.iter().cloned());
    messages.push(Message::user(request.query.clone()));
    for round in &request.rounds {
        let calls: Vec<(String, Call)> = round
            .calls
            .iter()
            .map(|c| (String::new(), c.clone()))
            .collect();
        messages.push(Message::assistant(turn_text(&calls)));
        for ((tool, _), (result, _)) in round.calls.iter().zip(&round.results) {
            messages.push(Message::tool(tool, result.clone()));
        }
    }
    messages
}

/// The client's stop sequences applied to an answer's text as it streams: a piece is let
/// through once no stop sequence can begin in it, and nothing from the first one on.
#[derive(Debug, Default)]
pub(crate) struct StopCut {
    stops: Vec<String>,
    seen: String,
    sent: usize,
    cut: bool,
}

impl StopCut {
    pub(crate) fn new(stops: &[String]) -> StopCut {
        StopCut {
            stops: stops.to_vec(),
            ..StopCut::default()
        }
    }

    /// Takes the next piece of the answer; returns what may be sent now.
    pub(crate) fn push(&mut self, piece: &str) -> String {
        if self.cut {
            return String::new();
        }
        self.seen.push_str(piece);
        let until = match self.first_stop(&self.seen) {
            Some(at) => {
                self.cut = true;
                at
            }
            // Held back: a tail that a stop sequence could begin with.
            None => self.seen.len() - self.open_tail(),
        };
        let out = self.seen[self.sent..until.max(self.sent)].to_string();
        self.sent = until.max(self.sent);
        out
    }

    /// The whole answer, ended before its first stop sequence.
    pub(crate) fn whole(&self, text: &str) -> String {
        match self.first_stop(text) {
            Some(at) => text[..at].to_string(),
            None => text.to_string(),
        }
    }

    fn first_stop(&self, text: &str) -> Option<usize> {
        self.stops
            .iter()
            .filter_map(|s| text.find(s.as_str()))
            .min()
    }

    /// The longest end of what was seen that begins some stop sequence, in bytes.
    fn open_tail(&self) -> usize {
        let seen = self.seen.as_str();
        self.stops
            .iter()
            .flat_map(|stop| {
                stop.char_indices()
                    .skip(1)
                    .map(|(i, _)| &stop[..i])
                    .filter(|prefix| seen.ends_with(prefix))
                    .map(str::len)
            })
            .max()
            .unwrap_or(0)
    }
}

/// The tools of a request: OpenAI's `{"type": "function", "function": {…}}`, which
/// Ollama takes too.
fn read_tools(tools: Option<&Value>) -> Result<Vec<ToolSpec>, BadRequest> {
    let list = match tools {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(bad("`tools` must be a list", "tools")),
    };
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(list.len());
    for (i, tool) in list.iter().enumerate() {
        let function = tool.get("function").unwrap_or(tool);
        let name = function["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            return Err(bad(format!("tools[{i}] has no function name"), "tools"));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(bad(format!("tools[{i}]: {name} is listed twice"), "tools"));
        }
        let parameters = match &function["parameters"] {
            Value::Null => json!({"type": "object", "properties": {}}),
            p => p.clone(),
        };
        if let Err(e) = jsonschema::validator_for(&parameters) {
            return Err(bad(
                format!("tools[{i}] ({name}): its parameters are not a JSON Schema: {e}"),
                "tools",
            ));
        }
        specs.push(ToolSpec::new(
            name,
            function["description"].as_str().unwrap_or_default(),
            parameters,
        ));
    }
    Ok(specs)
}

fn read_choice(choice: Option<&Value>, tools: &[ToolSpec]) -> Result<Choice, BadRequest> {
    let named = |name: &str| match tools.iter().any(|t| t.name == name) {
        true => Ok(Choice::Named(name.to_string())),
        false => Err(bad(
            format!("tool_choice names {name}, which is not among the tools"),
            "tool_choice",
        )),
    };
    match choice {
        None | Some(Value::Null) => Ok(Choice::Auto),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(Choice::Auto),
            "none" => Ok(Choice::None),
            "required" => Ok(Choice::Required),
            other => Err(bad(
                format!("tool_choice {other:?} is none of auto, none, required or a function"),
                "tool_choice",
            )),
        },
        Some(v) => match v["function"]["name"].as_str() {
            Some(name) => named(name),
            None => Err(bad(
                "tool_choice must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": …}}",
                "tool_choice",
            )),
        },
    }
}

/// The messages, split at the last user message: what came before, the request, and the
/// rounds of calls and results since.
fn read_messages(messages: &[Value], request: &mut Request) -> Result<(), BadRequest> {
    let role = |m: &Value| m["role"].as_str().unwrap_or_default().to_string();
    let last_user = messages
        .iter()
        .rposition(|m| role(m) == "user")
        .ok_or_else(|| bad("`messages` has no user message", "messages"))?;
    let mut system: Vec<String> = Vec::new();
    // Earlier calls, by id, so a tool message says which tool it answers.
    let mut named: Vec<(String, String)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let content = text_of(&m["content"]);
        match role(m).as_str() {
            "system" | "developer" => system.push(content),
            "user" if i < last_user => request.earlier.push(Message::user(content)),
            "user" => request.query = content,
            "assistant" => {
                let calls = calls_of(m);
                for (id, (tool, _)) in &calls {
                    named.push((id.clone(), tool.clone()));
                }
                if i < last_user {
                    request
                        .earlier
                        .push(Message::assistant(match calls.is_empty() {
                            true => content,
                            false => turn_text(&calls),
                        }));
                } else if !calls.is_empty() {
                    request.rounds.push(crate::run::orchestrator::Round {
                        calls: calls.into_iter().map(|(_, c)| c).collect(),
                        results: Vec::new(),
                    });
                }
            }
            "tool" => {
                let tool = m["tool_name"]
                    .as_str()
                    .or_else(|| m["name"].as_str())
                    .map(str::to_string)
                    .or_else(|| {
                        let id = m["tool_call_id"].as_str()?;
                        named.iter().find(|(i, _)| i == id).map(|(_, t)| t.clone())
                    })
                    .unwrap_or_default();
                if i < last_user {
                    request.earlier.push(Message::tool(&tool, content));
                } else if let Some(round) = request.rounds.last_mut() {
                    round.results.push((content, true));
                } else {
                    return Err(bad(
                        format!("messages[{i}] is a tool result with no call before it"),
                        "messages",
                    ));
                }
            }
            other => {
                return Err(bad(
                    format!("messages[{i}] has role {other:?}: system, user, assistant or tool"),
                    "messages",
                ));
            }
        }
    }
    request.system = (!system.is_empty()).then(|| system.join("\n\n"));
    Ok(())
}

/// A call's tool and arguments.
type Call = (String, Map<String, Value>);

/// An assistant message's calls, each with its id (Ollama's have none: one is made).
fn calls_of(m: &Value) -> Vec<(String, Call)> {
    m["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let f = &c["function"];
                    let name = f["name"].as_str()?.to_string();
                    let id = c["id"]
                        .as_str()
                        .map_or_else(|| format!("call_{i}"), str::to_string);
                    Some((id, (name, arguments_of(&f["arguments"]))))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Earlier calls as the model would have written them, so the history reads as its own.
fn turn_text(calls: &[(String, Call)]) -> String {
    let call = |(tool, arguments): &Call| json!({"tool": tool, "arguments": arguments});
    match calls {
        [(_, one)] => {
            let mut v = call(one);
            v["kind"] = json!("tool_call");
            v["thought"] = json!("");
            v.to_string()
        }
        _ => json!({
            "kind": "tool_calls",
            "thought": "",
            "calls": calls.iter().map(|(_, c)| call(c)).collect::<Vec<_>>(),
        })
        .to_string(),
    }
}

/// What the reply says, from the run's ending: text, calls, or why there is neither.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// An answer or the model's question back: `content`, finish `stop`.
    Text(String),
    /// Calls for the client to run: finish `tool_calls`.
    Calls(Vec<(String, Map<String, Value>)>),
    /// Neither: a timeout, the iterations used up, replies that stayed invalid. An error
    /// for the client: the HTTP status and the message.
    Failed(u16, String),
}

impl Reply {
    /// The reply for `ending`.
    pub(crate) fn of(ending: &Ending) -> Reply {
        match ending {
            Ending::Answer { content, .. } => Reply::Text(content.clone()),
            Ending::Clarify { question, .. } => Reply::Text(question.clone()),
            Ending::ToolCalls { calls } => Reply::Calls(calls.clone()),
            Ending::Timeout { .. } => Reply::Failed(504, ending.message().unwrap_or_default()),
            other => Reply::Failed(502, other.message().unwrap_or_default()),
        }
    }
}

/// A call id unique enough for a client to match results by: the response's id and the
/// call's place in it.
pub(crate) fn call_id(response: &str, index: usize) -> String {
    format!("call_{}_{index}", response.trim_start_matches("chatcmpl-"))
}

/// OpenAI's `tool_calls` for `calls` (arguments as a JSON string).
pub(crate) fn openai_calls(response: &str, calls: &[(String, Map<String, Value>)]) -> Value {
    Value::Array(
        calls
            .iter()
            .enumerate()
            .map(|(i, (tool, arguments))| {
                json!({
                    "index": i,
                    "id": call_id(response, i),
                    "type": "function",
                    "function": {"name": tool, "arguments": Value::Object(arguments.clone()).to_string()},
                })
            })
            .collect(),
    )
}

/// Ollama's `tool_calls` for `calls` (arguments as an object).
pub(crate) fn ollama_calls(calls: &[(String, Map<String, Value>)]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|(tool, arguments)| json!({"function": {"name": tool, "arguments": arguments}}))
            .collect(),
    )
}

/// The token counts of a run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tokens {
    pub prompt: u64,
    pub completion: u64,
}

/// A whole OpenAI `chat.completion` for `reply` (not `Failed`).
pub(crate) fn openai_completion(
    id: &str,
    model: &str,
    created: u64,
    reply: &Reply,
    tokens: Tokens,
    checks: &[String],
) -> Value {
    let (message, finish) = match reply {
        Reply::Calls(calls) => (
            json!({"role": "assistant", "content": null, "tool_calls": openai_calls(id, calls)}),
            "tool_calls",
        ),
        Reply::Text(text) | Reply::Failed(_, text) => {
            (json!({"role": "assistant", "content": text}), "stop")
        }
    };
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "usage": usage(tokens),
        "toolloop": {"checks": checks},
    })
}

fn usage(tokens: Tokens) -> Value {
    json!({
        "prompt_tokens": tokens.prompt,
        "completion_tokens": tokens.completion,
        "total_tokens": tokens.prompt + tokens.completion,
    })
}

/// One `chat.completion.chunk` with `delta` and `finish`.
pub(crate) fn openai_chunk(
    id: &str,
    model: &str,
    created: u64,
    delta: Value,
    finish: Option<&str>,
) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
    })
}

/// The chunks that carry `calls` once the run handed them back: per call, one with its
/// index, id and name, then its arguments in two pieces, as OpenAI streams them.
pub(crate) fn openai_call_chunks(
    id: &str,
    model: &str,
    created: u64,
    calls: &[(String, Map<String, Value>)],
) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, (tool, arguments)) in calls.iter().enumerate() {
        let call = json!({
            "index": i,
            "id": call_id(id, i),
            "type": "function",
            "function": {"name": tool, "arguments": ""},
        });
        let mut delta = json!({"tool_calls": [call]});
        if i == 0 {
            delta["role"] = json!("assistant");
            delta["content"] = Value::Null;
        }
        out.push(openai_chunk(id, model, created, delta, None));
        let text = Value::Object(arguments.clone()).to_string();
        let mid = text
            .char_indices()
            .map(|(at, _)| at)
            .nth(text.chars().count() / 2)
            .unwrap_or(text.len());
        for piece in [&text[..mid], &text[mid..]] {
            if piece.is_empty() {
                continue;
            }
            let delta = json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]});
            out.push(openai_chunk(id, model, created, delta, None));
        }
    }
    out
}

/// The last chunk with usage only (`stream_options.include_usage`).
pub(crate) fn openai_usage_chunk(id: &str, model: &str, created: u64, tokens: Tokens) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage(tokens),
    })
}

/// An Ollama `/api/chat` object: a piece of content (`done` false), or the last one.
pub(crate) fn ollama_message(model: &str, content: &str, calls: Option<Value>) -> Value {
    let mut message = json!({"role": "assistant", "content": content});
    if let Some(calls) = calls {
        message["tool_calls"] = calls;
    }
    json!({"model": model, "created_at": now_rfc3339(), "message": message, "done": false})
}

/// Ollama's closing object: `done` with its reason and counts.
pub(crate) fn ollama_done(model: &str, tokens: Tokens, took_ns: u64, checks: &[String]) -> Value {
    json!({
        "model": model,
        "created_at": now_rfc3339(),
        "message": {"role": "assistant", "content": ""},
        "done": true,
        "done_reason": "stop",
        "total_duration": took_ns,
        "prompt_eval_count": tokens.prompt,
        "eval_count": tokens.completion,
        "toolloop": {"checks": checks},
    })
}

/// A whole Ollama reply (`stream: false`).
pub(crate) fn ollama_whole(
    model: &str,
    reply: &Reply,
    tokens: Tokens,
    took_ns: u64,
    checks: &[String],
) -> Value {
    let mut done = ollama_done(model, tokens, took_ns, checks);
    match reply {
        Reply::Calls(calls) => done["message"]["tool_calls"] = ollama_calls(calls),
        Reply::Text(text) | Reply::Failed(_, text) => done["message"]["content"] = json!(text),
    }
    done
}

/// The time now as Ollama writes it (`2024-07-22T20:33:28.123456Z`).
pub(crate) fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    chrono::DateTime::from_timestamp(now.as_secs() as i64, now.subsec_nanos())
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// An error in the client's API's shape: `{"error": {"message", "type", "param"}}` on
/// `/v1`, `{"error": "…"}` on `/api`.
pub(crate) fn error_body(api: Api, status: u16, message: &str, param: Option<&str>) -> Value {
    match api {
        Api::OpenAi => json!({"error": {
            "message": message,
            "type": match status {
                400 | 413 | 422 => "invalid_request_error",
                401 | 403 => "authentication_error",
                404 => "not_found_error",
                _ => "api_error",
            },
            "param": param,
            "code": null,
        }}),
        Api::Ollama => json!({"error": message}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Value {
        json!({"type": "function", "function": {
            "name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
    }

    #[test]
    fn a_whole_openai_loop_reads_into_a_request_its_rounds_and_results() {
        let body = json!({
            "model": "qwen",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "4°C"},
            ],
            "tools": [weather()],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_completion_tokens": 200,
        });
        let r = read(&body, Api::OpenAi).unwrap();
        assert_eq!(r.system.as_deref(), Some("Be brief."));
        assert_eq!(r.query, "Weather in Oslo?");
        assert_eq!(r.earlier.len(), 2);
        assert_eq!(r.rounds.len(), 1);
        assert_eq!(r.rounds[0].calls[0].0, "get_weather");
        assert_eq!(r.rounds[0].calls[0].1["city"], "Oslo");
        assert_eq!(r.rounds[0].results, vec![("4°C".to_string(), true)]);
        assert!(r.stream && r.include_usage);
        assert_eq!(r.max_tokens, Some(200));
        assert!(!r.one_call);
        let mut one = body.clone();
        one["parallel_tool_calls"] = json!(false);
        assert!(read(&one, Api::OpenAi).unwrap().one_call);
        assert_eq!(r.tools[0].name, "get_weather");
    }

    #[test]
    fn ollama_streams_unless_told_not_to_and_takes_arguments_as_an_object() {
        let body = json!({
            "model": "gemma3:270m",
            "messages": [
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
                {"role": "tool", "content": "4°C", "tool_name": "get_weather"},
            ],
            "tools": [weather()],
            "options": {"num_predict": 64, "seed": 7, "temperature": 0.1},
        });
        let r = read(&body, Api::Ollama).unwrap();
        assert!(r.stream);
        assert_eq!(r.rounds[0].calls[0].1["city"], "Oslo");
        assert_eq!((r.max_tokens, r.seed), (Some(64), Some(7)));
        assert_eq!(r.temperature, Some(0.1));
    }

    #[test]
    fn bad_requests_name_the_field() {
        let cases = [
            (json!([]), None),
            (json!({"messages": "hi"}), Some("messages")),
            (json!({"messages": []}), Some("messages")),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"description": "no name"}}]}),
                Some("tools"),
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 12}}}]}),
                Some("tools"),
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [weather()], "tool_choice": "sometimes"}),
                Some("tool_choice"),
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [weather()], "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
                Some("tool_choice"),
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "x"}]}),
                Some("messages"),
            ),
        ];
        for (body, param) in cases {
            let e = read(&body, Api::OpenAi).unwrap_err();
            assert_eq!(e.param, param, "{body}: {}", e.message);
        }
    }

    #[test]
    fn calls_come_back_with_unique_ids_and_arguments_as_json_text() {
        let mut args = Map::new();
        args.insert("city".into(), json!("Oslo"));
        let calls = vec![
            ("get_weather".to_string(), args.clone()),
            ("get_weather".to_string(), args),
        ];
        let v = openai_completion(
            "chatcmpl-x1",
            "m",
            1,
            &Reply::Calls(calls.clone()),
            Tokens::default(),
            &[],
        );
        let out = &v["choices"][0];
        assert_eq!(out["finish_reason"], "tool_calls");
        let tc = out["message"]["tool_calls"].as_array().unwrap();
        assert_ne!(tc[0]["id"], tc[1]["id"]);
        let args: Value =
            serde_json::from_str(tc[0]["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["city"], "Oslo");
        // Streamed: the name in the first chunk of each call, the arguments in pieces that
        // add up to the whole.
        let chunks = openai_call_chunks("chatcmpl-x1", "m", 1, &calls);
        let first = &chunks[0]["choices"][0]["delta"];
        assert_eq!(first["tool_calls"][0]["function"]["name"], "get_weather");
        let joined: String = chunks
            .iter()
            .filter(|c| c["choices"][0]["delta"]["tool_calls"][0]["index"] == 0)
            .filter_map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            })
            .collect();
        assert_eq!(joined, r#"{"city":"Oslo"}"#);
        let o = ollama_whole("m", &Reply::Calls(calls), Tokens::default(), 1, &[]);
        assert_eq!(
            o["message"]["tool_calls"][0]["function"]["arguments"]["city"],
            "Oslo"
        );
        assert_eq!(o["done"], true);
    }

    #[test]
    fn errors_take_the_clients_shape() {
        let v = error_body(Api::OpenAi, 400, "bad", Some("messages"));
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["param"], "messages");
        assert_eq!(
            error_body(Api::Ollama, 400, "bad", None),
            json!({"error": "bad"})
        );
    }

    #[test]
    fn the_time_is_written_as_ollama_writes_it() {
        let t = now_rfc3339();
        assert_eq!(t.len(), "2024-07-22T20:33:28.123456Z".len(), "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
    }

    #[test]
    fn a_stop_sequence_holds_back_only_what_could_begin_it() {
        let mut cut = StopCut::new(&["END".to_string()]);
        assert_eq!(cut.push("It is 4 E"), "It is 4 ");
        assert_eq!(cut.push("xactly"), "Exactly");
        assert_eq!(cut.push(" E"), " ");
        assert_eq!(cut.push("ND and more"), "");
        assert_eq!(cut.push(" still more"), "");
        assert_eq!(
            cut.whole("It is 4 Exactly END and more"),
            "It is 4 Exactly "
        );
        // No stop sequence: everything goes at once, whole or not.
        let mut none = StopCut::new(&[]);
        assert_eq!(none.push("añ"), "añ");
        assert_eq!(none.whole("añ"), "añ");
    }

    #[test]
    fn stop_and_formats_are_read_in_both_apis() {
        let mut body = json!({"messages": [{"role": "user", "content": "x"}], "stop": "\n\n",
            "response_format": {"type": "json_object"}});
        let r = read(&body, Api::OpenAi).unwrap();
        assert_eq!(r.stop, vec!["\n\n".to_string()]);
        assert_eq!(r.format, Some(json!({"type": "object"})));
        body["response_format"] = json!({"type": "text"});
        assert_eq!(read(&body, Api::OpenAi).unwrap().format, None);
        body["response_format"] = json!({"type": "yaml"});
        assert_eq!(
            read(&body, Api::OpenAi).unwrap_err().param,
            Some("response_format")
        );
        body["stop"] = json!([1]);
        assert_eq!(read(&body, Api::OpenAi).unwrap_err().param, Some("stop"));
        let ollama = json!({"messages": [{"role": "user", "content": "x"}], "format": "json",
            "options": {"stop": ["###"]}, "keep_alive": "10m"});
        let r = read(&ollama, Api::Ollama).unwrap();
        assert_eq!(r.stop, vec!["###".to_string()]);
        assert_eq!(r.format, Some(json!({"type": "object"})));
        assert_eq!(r.keep_alive.as_deref(), Some("10m"));
        let forever = json!({"messages": [{"role": "user", "content": "x"}], "keep_alive": -1});
        assert_eq!(
            read(&forever, Api::Ollama).unwrap().keep_alive.as_deref(),
            Some("-1s")
        );
    }

    #[test]
    fn an_answer_follows_a_format_only_as_json_the_schema_accepts() {
        let schema = json!({"type": "object", "required": ["a"]});
        assert!(follows(r#"{"a": 1}"#, &schema));
        assert!(!follows(r#"{"b": 1}"#, &schema));
        assert!(!follows("a: 1", &schema));
    }
}
