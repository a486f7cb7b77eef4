//! Every OpenAI-compatible server: llama.cpp's llama-server, vLLM, LM Studio, Ollama's
//! `/v1`. One implementation for all (rig's pattern): `POST {base}/chat/completions` with
//! `response_format: {"type": "json_schema", ...}`, streamed as server-sent events.
//!
//! llama-server adds `timings` to its replies; `timings.cache_n` says how many prompt
//! tokens were reused from its cache, which is how the append-only history is seen to pay
//! off.

use std::io::BufReader;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{
    Backend, BackendError, ChatReply, ChatRequest, Fault, GenOptions, Message, Retries, Role,
    StopReason, TextSink, Timings, TokenLogprob, Usage,
};
use crate::deadline::{Deadline, StopHandle};
use crate::http::{self, Failure};

mod slots;

use slots::{InFlight, Props};

const MAX_LINE: usize = 8 << 20;

/// A model behind an OpenAI-compatible API.
///
/// ```
/// use toolloop::backend::OpenAi;
///
/// let backend = OpenAi::new("http://127.0.0.1:8080/v1", "qwen", Some("sk-secret".into()));
/// // The key never shows in debug output or logs.
/// assert!(!format!("{backend:?}").contains("sk-secret"));
/// ```
#[derive(Clone)]
pub struct OpenAi {
    base: String,
    model: String,
    api_key: Option<String>,
    /// The run's stop handle, which cuts a request off ([`Backend::watch`]).
    stop: Option<StopHandle>,
    /// The agent of the requests the stop handle can cut off.
    agent: http::StoppableAgent,
    /// What llama-server's `/props` says, read before the first question aside
    /// ([`GenOptions::aside`]). Shared by clones, so a process asks once.
    props: Arc<OnceLock<Props>>,
    /// The model file `/props` named (`model_path`), learned with `props`.
    model_path: Arc<OnceLock<Option<std::path::PathBuf>>>,
    /// Whether the server answered this backend (or a clone) before: a refused connection
    /// then means it restarts, and is waited for ([`Retries::again`]).
    reached: Arc<AtomicBool>,
}

impl std::fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAi")
            .field("base", &self.base)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl OpenAi {
    /// A backend for `model` at `base_url` (e.g. `http://127.0.0.1:8080/v1`), sending
    /// `Authorization: Bearer KEY` when a key is given.
    pub fn new(base_url: &str, model: impl Into<String>, api_key: Option<String>) -> Self {
        OpenAi {
            base: base_url.trim().trim_end_matches('/').to_string(),
            model: model.into(),
            api_key: api_key.filter(|k| !k.trim().is_empty()),
            stop: None,
            agent: http::StoppableAgent::default(),
            props: Arc::default(),
            model_path: Arc::default(),
            reached: Arc::default(),
        }
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn not_running(&self) -> BackendError {
        BackendError::NotRunning {
            server: "the model server".into(),
            url: self.base.clone(),
            hint: "start it (for example `llama-server -m MODEL.gguf --port 8080`) or check `base_url`"
                .into(),
        }
    }

    fn failure(&self, f: Failure, started: Instant) -> BackendError {
        super::transport_error(f, started, &self.base, || self.not_running())
    }

    fn status_error(&self, status: u16, message: String) -> BackendError {
        match status {
            400 | 422 => BackendError::BadRequest { message },
            401 | 403 => BackendError::Unauthorized {
                status,
                key: "OPENAI_API_KEY or --key-file",
                message,
            },
            404 if message.to_lowercase().contains("model") => BackendError::ModelNotFound {
                model: self.model.clone(),
                hint: format!(
                    "check `model`; the server lists its models at {}/models",
                    self.base
                ),
            },
            404 => BackendError::Server {
                status,
                message: format!(
                    "{message} (is `base_url` right? it usually ends in /v1, e.g. http://127.0.0.1:8080/v1)"
                ),
            },
            _ => BackendError::Server { status, message },
        }
    }

    /// The JSON body of `POST {base}/chat/completions`, as sent when a question aside
    /// may name its slot.
    pub fn request_body(&self, request: &ChatRequest<'_>) -> Value {
        let aside = self.props.get().and_then(|p| p.aside).map(|a| a.id);
        self.body(request, aside)
    }

    /// The body; `slot`: the slot a question aside names (no other request of this
    /// process to the server is under way, and the server did not say the slot is busy).
    fn body(&self, request: &ChatRequest<'_>, slot: Option<u32>) -> Value {
        let mut messages: Vec<Value> = request.messages.iter().map(wire_message).collect();
        let given = self.continued(request);
        if let Some(prefill) = given {
            messages.push(json!({"role": "assistant", "content": prefill}));
        }
        let mut body = Map::new();
        if given.is_some() {
            // Said outright, so that a server started with `--no-prefill-assistant`
            // continues the message too rather than answer it with a turn of its own.
            body.insert("continue_final_message".into(), json!(true));
            body.insert("add_generation_prompt".into(), json!(false));
        }
        body.insert("model".into(), json!(self.model));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        if let Some(schema) = request.schema {
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "turn", "schema": schema}}),
            );
        }
        add_options(&mut body, request.options);
        let props = self.props.get().copied().unwrap_or_default();
        if let (true, Some(slot)) = (request.options.aside, slot) {
            body.insert("id_slot".into(), json!(slot));
        }
        if self.ends_answer(request).is_some() || self.ends_turn(request) {
            // A reply stopped at its answer's end still says what the server evaluated:
            // without this, its counts come only with the last chunk.
            body.insert("timings_per_token".into(), json!(true));
        }
        if request.options.aside && props.llama {
            // The whole prompt evaluated each time: read at one token, the fit answer moved
            // with how much of its prompt the slot had cached (a "yes" of 0.47, 0.48 or
            // 0.50 for one question with 73, 33 or 43 tokens cached, 0.52 every time
            // without), and the decision's bar sits within that spread of the calls it
            // tells apart.
            body.insert("cache_prompt".into(), json!(false));
        }
        Value::Object(body)
    }

    /// The reply's beginning sent for the server to continue ([`GenOptions::prefill`]):
    /// only to llama-server, which feeds an assistant message that ends the conversation
    /// to the schema's grammar before it generates (`continue_final_message`, and its
    /// `prefill_assistant`, on by default). Another server would start the schema over
    /// after the beginning.
    fn continued<'r>(&self, request: &'r ChatRequest<'_>) -> Option<&'r str> {
        let llama = self.props.get().is_some_and(|p| p.llama);
        request.options.prefill.as_deref().filter(|_| llama)
    }

    /// Whether the reply is stopped where its JSON object closes: a turn held to its
    /// schema on llama-server, whose grammar lets only whitespace follow the object's close
    /// (`space ::= | " " | "\n" [ \t]{0,20}`). Qwen2.5-Coder 0.5B wrote `}\n` and twenty
    /// more tokens of indent there before its end of turn: a step of the model each, and
    /// tokens the next request, which sends the reply without them, cannot reuse from the
    /// server's cache. A question aside has its own stop ([`GenOptions::stop_once`]).
    fn ends_turn(&self, request: &ChatRequest<'_>) -> bool {
        let llama = self.props.get().is_some_and(|p| p.llama);
        llama && request.schema.is_some() && !request.options.aside
    }

    /// Where an answer's reply is stopped and completed ([`GenOptions::answer_end`]):
    /// only on llama-server, which sends its counts with every token when asked (known
    /// from `/props`, read at the preflight or before a question aside).
    fn ends_answer<'r>(&self, request: &'r ChatRequest<'_>) -> Option<&'r super::AnswerEnd> {
        let llama = self.props.get().is_some_and(|p| p.llama);
        request.options.answer_end.as_ref().filter(|_| llama)
    }
}
/// Tool results go as user text: the loop does not use the server's native tool calls,
/// so there is no `tool_call_id` a `tool` message could answer.
fn wire_message(m: &Message) -> Value {
    match m.role {
        Role::Tool => json!({"role": "user", "content": m.tool_result_as_user_text()}),
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Assistant => json!({"role": "assistant", "content": m.content}),
    }
}

fn add_options(body: &mut Map<String, Value>, o: &GenOptions) {
    if let Some(v) = o.temperature {
        body.insert("temperature".into(), json!(v));
    }
    if let Some(v) = o.num_predict {
        body.insert("max_tokens".into(), json!(v));
    }
    if let Some(v) = o.seed {
        body.insert("seed".into(), json!(v));
    }
    if let Some(v) = o.top_p {
        body.insert("top_p".into(), json!(v));
    }
    if let Some(v) = o.top_k {
        body.insert("top_k".into(), json!(v));
    }
    if !o.stop.is_empty() {
        body.insert("stop".into(), json!(o.stop));
    }
    if let Some(n) = o.top_logprobs {
        body.insert("logprobs".into(), json!(true));
        body.insert("top_logprobs".into(), json!(n));
    }
}

/// What the stream said so far.
#[derive(Default)]
struct Collected {
    text: String,
    finish: Option<String>,
    usage: Option<Value>,
    timings: Option<Value>,
    logprobs: Vec<TokenLogprob>,
    /// Content deltas received: one token each from llama-server.
    pieces: u64,
    /// The beginning the server was given to continue, which `text` starts with.
    given: usize,
    /// Stop where the reply's JSON object closes ([`OpenAi::ends_turn`]).
    close_ends: bool,
    /// Whether the reply was stopped at its end (its object's close or its answer's),
    /// where the server may still be writing more.
    cut: bool,
}

/// The byte after the JSON object `text` begins with, once it has closed (serde_json
/// reads the first value of a stream and says where it ended); `None` while it is open.
fn object_end(text: &str) -> Option<usize> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<serde::de::IgnoredAny>();
    match values.next() {
        Some(Ok(_)) => Some(values.byte_offset()),
        _ => None,
    }
}

impl Collected {
    /// Takes one chunk; `Break` when the sink or `stop_once` stopped the stream.
    fn absorb(
        &mut self,
        chunk: &Value,
        sink: TextSink<'_>,
        (stop_once, end): (Option<super::StopOnce>, Option<&super::AnswerEnd>),
    ) -> ControlFlow<()> {
        let choice = &chunk["choices"][0];
        let piece = choice["delta"]["content"]
            .as_str()
            .or_else(|| choice["message"]["content"].as_str());
        // A server that sends the beginning it was given again sends it first.
        let piece = piece.map(|p| match self.pieces {
            0 => p.strip_prefix(&self.text[..self.given]).unwrap_or(p),
            _ => p,
        });
        if let Some(piece) = piece
            && !piece.is_empty()
        {
            self.text.push_str(piece);
            self.pieces += 1;
            if sink(piece).is_break() {
                self.finish = Some("stopped".into());
                return ControlFlow::Break(());
            }
        }
        if let Some(tokens) = choice["logprobs"]["content"].as_array() {
            self.logprobs
                .extend(tokens.iter().map(super::token_logprob));
            if stop_once.is_some_and(|stop| stop.reached(&self.logprobs)) {
                self.finish = Some("stopped".into());
                return ControlFlow::Break(());
            }
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            self.finish = Some(f.to_string());
        }
        if chunk["usage"].is_object() {
            self.usage = Some(chunk["usage"].clone());
        }
        if chunk["timings"].is_object() {
            self.timings = Some(chunk["timings"].clone());
        }
        if self.close_ends
            && piece.is_some_and(|p| p.contains('}'))
            && let Some(at) = object_end(&self.text)
        {
            self.cut = true;
            self.text.truncate(at);
            self.finish = Some("stop".into());
            return ControlFlow::Break(());
        }
        // The answer's content can close only on a quote.
        if let Some(end) = end
            && piece.is_some_and(|p| p.contains('"'))
            && let Some(whole) = end.complete(&self.text)
        {
            self.cut = true;
            self.text = whole;
            self.finish = Some("stop".into());
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// The beginning the server was given to continue: the reply's text starts with it,
    /// and it goes to `sink` first, as if the model had written it, so that whatever
    /// reads the text as it streams reads the whole of it. `Break` when the sink stopped.
    fn begin(&mut self, given: &str, sink: TextSink<'_>) -> ControlFlow<()> {
        self.text.push_str(given);
        self.given = given.len();
        if given.is_empty() || sink(given).is_continue() {
            return ControlFlow::Continue(());
        }
        self.finish = Some("stopped".into());
        ControlFlow::Break(())
    }

    /// The reply.
    fn into_reply(self, started: Instant) -> ChatReply {
        let usage = self.usage.unwrap_or(Value::Null);
        let timings = self.timings.unwrap_or(Value::Null);
        let cached = timings["cache_n"]
            .as_u64()
            .or_else(|| usage["prompt_tokens_details"]["cached_tokens"].as_u64());
        let prompt_tokens = usage["prompt_tokens"].as_u64().unwrap_or_else(|| {
            timings["prompt_n"].as_u64().unwrap_or(0) + timings["cache_n"].as_u64().unwrap_or(0)
        });
        let completion_tokens = usage["completion_tokens"]
            .as_u64()
            .or_else(|| timings["predicted_n"].as_u64())
            .unwrap_or(self.pieces.max(self.logprobs.len() as u64));
        let ms = |v: &Value| {
            v.as_f64()
                .map(|m| Duration::from_secs_f64(m.max(0.0) / 1000.0))
        };
        ChatReply {
            text: self.text,
            given: self.given,
            stop: match self.finish.as_deref() {
                Some("length") => StopReason::Length,
                Some("stopped") => StopReason::Stopped,
                _ => StopReason::Finished,
            },
            usage: Usage {
                prompt_tokens,
                cached_prompt_tokens: cached,
                completion_tokens,
            },
            timings: Timings {
                total: started.elapsed(),
                load: None,
                prompt: ms(&timings["prompt_ms"]),
                generation: ms(&timings["predicted_ms"]),
            },
            logprobs: self.logprobs,
        }
    }
}

/// A line for a model name the server does not list at `/models` (a `/models` body in
/// OpenAI's shape), naming what it lists. llama-server answers to any name with the one
/// model it loaded, so the name sent would otherwise go unremarked; vLLM refuses it.
fn other_model(asked: &str, models: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(models).ok()?;
    let ids: Vec<&str> = v["data"]
        .as_array()?
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    if ids.is_empty() || ids.contains(&asked) {
        return None;
    }
    let listed = ids
        .iter()
        .take(5)
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "the server lists {listed}, not '{asked}'; toolloop asks for '{asked}' (name the \
         server's with --model {})",
        ids[0]
    ))
}

/// Whether `line` is said for the first time in this process. Calibration, eval and the
/// web page each run a preflight per case or question, against the same server under the
/// same name: a person saw the same warning once per case.
fn first_time(line: &str) -> bool {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if said.iter().any(|s| s == line) {
        return false;
    }
    said.push(line.to_string());
    true
}

fn stream_error(v: &Value) -> Option<String> {
    let e = v.get("error")?;
    Some(
        e.as_str()
            .or_else(|| e["message"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string()),
    )
}

impl Backend for OpenAi {
    fn describe(&self) -> String {
        format!("{} at {}", self.model, self.base)
    }

    fn identity(&self) -> Option<(String, String)> {
        Some((self.model.clone(), self.base.clone()))
    }

    /// llama-server's `model_path`, as `/props` said it at the preflight (or before the
    /// first question aside); `None` before, and from another server.
    fn model_file(&self) -> Option<super::ModelFile> {
        let path = self.model_path.get()?.clone()?;
        Some(super::ModelFile::Path(path))
    }

    fn preflight(&mut self, deadline: Deadline) -> Result<(), BackendError> {
        let started = Instant::now();
        let Some(budget) = http::budget(&deadline, Duration::from_secs(10)) else {
            return Err(BackendError::Timeout {
                waited: Duration::ZERO,
            });
        };
        let mut req = http::agent()
            .get(format!("{}/models", self.base))
            .config()
            .timeout_global(Some(budget))
            .build();
        if let Some(key) = &self.api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        match req.call() {
            Ok(resp) if matches!(resp.status().as_u16(), 401 | 403) => {
                let status = resp.status().as_u16();
                let (body, _) =
                    http::read_capped(resp.into_body().into_reader(), 64 << 10).unwrap_or_default();
                Err(BackendError::Unauthorized {
                    status,
                    key: "OPENAI_API_KEY or --key-file",
                    message: http::error_message(&body),
                })
            }
            // Servers differ in what they serve at /models; only "nobody there" and
            // "not allowed" are worth stopping for before the first request. A server
            // that answered says here whether it is llama-server, before any turn: an
            // answer's reply ends early only where that is known
            // ([`GenOptions::answer_end`]), and a turn is not the place to wait for it.
            Ok(resp) => {
                if resp.status().as_u16() == 200 {
                    let (body, _) = http::read_capped(resp.into_body().into_reader(), 256 << 10)
                        .unwrap_or_default();
                    if let Some(line) = other_model(&self.model, &body)
                        && first_time(&format!("{} {line}", self.base))
                    {
                        log::warn!("{line}");
                    }
                }
                self.learn_props(http::agent(), &deadline);
                Ok(())
            }
            Err(e) => match http::classify(e) {
                Failure::Unreachable => Err(self.not_running()),
                Failure::Timeout => Err(BackendError::Timeout {
                    waited: started.elapsed(),
                }),
                Failure::Other(detail) => {
                    log::warn!("{}/models: {detail}", self.base);
                    Ok(())
                }
            },
        }
    }

    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let stop = self.stop.clone();
        let (agent, _armed) = self.agent.arm(stop.as_ref());
        let mut result = self.stream_chat(&agent, request, deadline, sink);
        // A beginning the server's grammar does not take is refused before anything is
        // generated (llama-server: HTTP 400, "Failed to initialize samplers"): the whole
        // reply is asked for instead, as from a server that cannot continue one.
        if let Err(BackendError::BadRequest { message }) = &result
            && self.continued(request).is_some()
        {
            log::warn!(
                "{} would not continue the reply it was given ({message}); asking for a whole reply",
                self.base
            );
            let options = GenOptions {
                prefill: None,
                ..request.options.clone()
            };
            let whole = ChatRequest {
                options: &options,
                ..*request
            };
            result = self.stream_chat(&agent, &whole, deadline, sink);
        }
        super::unless_stopped(result, stop.as_ref())
    }

    fn watch(&mut self, stop: &StopHandle) {
        self.stop = Some(stop.clone());
    }
}

impl OpenAi {
    /// One `/chat/completions` request on `agent`, its reply read as it streams.
    fn stream_chat(
        &mut self,
        agent: &ureq::Agent,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let started = Instant::now();
        if request.options.aside || request.options.prefill.is_some() {
            self.learn_props(agent, &deadline);
        }
        let given = self.continued(request);
        let (_flight, alone) = InFlight::enter(&self.base);
        let slot = match request.options.aside && alone {
            true => self.aside_slot(agent, &deadline),
            false => None,
        };
        let url = format!("{}/chat/completions", self.base);
        let bytes = serde_json::to_vec(&self.body(request, slot)).unwrap_or_default();
        let mut retries = Retries::default();
        let resp = loop {
            let Some(budget) = http::budget(&deadline, request.options.request_timeout) else {
                return Err(BackendError::Timeout {
                    waited: started.elapsed(),
                });
            };
            let mut req = agent
                .post(&url)
                .config()
                .timeout_global(Some(budget))
                .build()
                .header("Content-Type", "application/json")
                .header("Accept", "text/event-stream");
            if let Some(key) = &self.api_key {
                req = req.header("Authorization", format!("Bearer {key}"));
            }
            let resp = match req.send(&bytes[..]) {
                Ok(resp) => resp,
                Err(e) => {
                    let base = (self.base.as_str(), self.reached.load(Ordering::Relaxed));
                    match super::after_unsent(
                        &mut retries,
                        http::classify(e),
                        base,
                        &deadline,
                        self.stop.as_ref(),
                    ) {
                        Ok(()) => continue,
                        Err(Ok(failure)) => return Err(self.failure(failure, started)),
                        Err(Err(stopped)) => return Err(stopped),
                    }
                }
            };
            self.reached.store(true, Ordering::Relaxed);
            let status = resp.status().as_u16();
            if status == 200 {
                break resp;
            }
            let (body, _) =
                http::read_capped(resp.into_body().into_reader(), 64 << 10).unwrap_or_default();
            let message = http::error_message(&body);
            if let Some(wait) = retries.again(Fault::Status(status), true, &deadline) {
                log::warn!("{}", super::retrying(&self.base, status, &message, wait));
                if !super::pause(wait, self.stop.as_ref()) {
                    return Err(BackendError::Stopped);
                }
                continue;
            }
            return Err(match status {
                429 | 503 => BackendError::Busy { message },
                500..=599 => super::failed(status, message, &retries),
                _ => self.status_error(status, message),
            });
        };
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.contains("event-stream"));
        let mut reader = BufReader::new(resp.into_body().into_reader());
        let end = self.ends_answer(request);
        let mut got = Collected {
            close_ends: self.ends_turn(request),
            ..Collected::default()
        };
        if got.begin(given.unwrap_or_default(), sink).is_break() {
            return Ok(got.into_reply(started));
        }
        let read_err = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                BackendError::InvalidResponse {
                    detail: e.to_string(),
                }
            } else {
                self.failure(http::classify_io(&e), started)
            }
        };
        if !is_sse {
            // A server that ignores `stream` answers with one JSON object.
            let (body, more) = http::read_capped(reader, super::MAX_REPLY).map_err(read_err)?;
            if more {
                return Err(super::reply_too_large());
            }
            let text = std::str::from_utf8(&body).map_err(|_| BackendError::InvalidResponse {
                detail: "the reply is not valid UTF-8".into(),
            })?;
            let v: Value =
                serde_json::from_str(text).map_err(|_| BackendError::InvalidResponse {
                    detail: format!("expected JSON, got {:?}", http::shorten(text, 120)),
                })?;
            if let Some(message) = stream_error(&v) {
                return Err(BackendError::Stream { message });
            }
            // One object: nothing is left to stop.
            let _ = got.absorb(&v, sink, (None, None));
            return Ok(got.into_reply(started));
        }
        loop {
            let line = match http::read_line(&mut reader, MAX_LINE).map_err(read_err)? {
                Some(line) => line,
                None if got.finish.is_some() => return Ok(got.into_reply(started)),
                None => {
                    return Err(BackendError::InvalidResponse {
                        detail: "the connection closed before the reply was complete".into(),
                    });
                }
            };
            let line = std::str::from_utf8(&line).map_err(|_| BackendError::InvalidResponse {
                detail: "the reply is not valid UTF-8".into(),
            })?;
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() || line.starts_with(':') {
                continue;
            }
            let (field, data) = line.split_once(':').unwrap_or((line, ""));
            let data = data.strip_prefix(' ').unwrap_or(data);
            match field {
                "data" if data.trim() == "[DONE]" => return Ok(got.into_reply(started)),
                "data" | "error" => {
                    let v: Value =
                        serde_json::from_str(data).map_err(|_| BackendError::InvalidResponse {
                            detail: format!(
                                "expected a JSON event, got {:?}",
                                http::shorten(data, 120)
                            ),
                        })?;
                    if let Some(message) = stream_error(&v) {
                        return Err(BackendError::Stream { message });
                    }
                    if field == "error" {
                        return Err(BackendError::Stream {
                            message: v.to_string(),
                        });
                    }
                    if got
                        .absorb(&v, sink, (request.options.stop_once, end))
                        .is_break()
                    {
                        if got.cut {
                            // Closed first: the server stops the task once it cannot write.
                            drop(reader);
                            if let Some(timings) = &got.timings {
                                self.await_release(agent, timings, got.pieces, &deadline);
                            }
                        }
                        return Ok(got.into_reply(started));
                    }
                    if got.text.len() > super::MAX_REPLY {
                        return Err(super::reply_too_large());
                    }
                }
                _ => {}
            }
            if deadline.is_expired() {
                return Err(BackendError::Timeout {
                    waited: started.elapsed(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{first_time, other_model};

    #[test]
    fn a_warning_is_said_once_a_process() {
        assert!(first_time(
            "http://127.0.0.1:1/v1 the server lists 'a', not 'b'"
        ));
        assert!(!first_time(
            "http://127.0.0.1:1/v1 the server lists 'a', not 'b'"
        ));
        assert!(first_time(
            "http://127.0.0.1:2/v1 the server lists 'a', not 'b'"
        ));
    }

    #[test]
    fn a_model_name_the_server_does_not_list_is_said_with_the_one_it_does() {
        let llama = br#"{"object":"list","data":[{"id":"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf","object":"model"}]}"#;
        let line = other_model("gemma3:4b", llama).unwrap();
        assert!(
            line.contains("--model qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
            "{line}"
        );
        assert!(line.contains("'gemma3:4b'"), "{line}");
        // A name it lists, or a list it does not give, says nothing.
        assert_eq!(
            other_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", llama),
            None
        );
        assert_eq!(other_model("m", br#"{"data":[]}"#), None);
        assert_eq!(other_model("m", b"not json"), None);
    }
}
