//! Ollama's native API: `POST /api/chat` with `format` set to the schema, streamed as
//! NDJSON.
//!
//! Facts this module is built around (read from Ollama's source; `docs/ARCHITECTURE.md`
//! lists them):
//! Gemma 3 has no native tool calling, so the schema goes in `format` and becomes a
//! grammar; the gemma3 template drops `tool` messages, so tool results go as user text
//! unless `POST /api/show` reports the `tools` capability; errors are `{"error": "..."}`,
//! a missing model is a 404, a busy server a 503, and inside a stream an error can arrive
//! as a line after a 200.

use std::io::BufReader;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{
    Backend, BackendError, ChatReply, ChatRequest, Fault, GenOptions, Message, Retries, Role,
    StopReason, TextSink, Timings, TokenLogprob, Usage,
};
use crate::deadline::{Deadline, StopHandle};
use crate::http::{self, Failure};

/// Ollama's default address.
pub const DEFAULT_HOST: &str = "http://127.0.0.1:11434";

/// The longest line of a streamed reply we accept.
const MAX_LINE: usize = 8 << 20;

mod host;

pub use host::parse_host;

/// A model served by Ollama.
///
/// ```no_run
/// use toolloop::backend::{Backend, ChatRequest, GenOptions, Message};
/// use toolloop::backend::Ollama;
/// use toolloop::Deadline;
///
/// let mut ollama = Ollama::new("http://127.0.0.1:11434", "gemma3:4b");
/// let messages = [Message::user("Say hi")];
/// let request = ChatRequest { messages: &messages, schema: None, options: &GenOptions::default() };
/// let reply = ollama.chat(&request, Deadline::after(std::time::Duration::from_secs(30)), &mut toolloop::backend::keep_going)?;
/// println!("{}", reply.text);
/// # Ok::<(), toolloop::backend::BackendError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Ollama {
    base: String,
    model: String,
    /// Whether the model's template renders `tool` messages; probed once.
    tool_role: Option<bool>,
    /// The SHA-256 of the model's weights, from the same `POST /api/show`.
    weights: Option<String>,
    /// The run's stop handle ([`Backend::watch`]), and the agent whose requests it cuts off.
    stop: Option<StopHandle>,
    agent: http::StoppableAgent,
    /// Whether the server answered this backend (or a clone) before: a refused connection
    /// then means it restarts, and is waited for ([`Retries::again`]).
    reached: Arc<AtomicBool>,
}

impl Ollama {
    /// A backend for `model` at `host` (any `OLLAMA_HOST` form, see `parse_host`).
    pub fn new(host: &str, model: impl Into<String>) -> Self {
        Ollama {
            base: parse_host(host),
            model: model.into(),
            tool_role: None,
            weights: None,
            stop: None,
            agent: http::StoppableAgent::default(),
            reached: Arc::default(),
        }
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Whether tool results go to the model as `role: tool` messages (only when the model
    /// reports the `tools` capability). `None` until probed.
    pub fn tool_role(&self) -> Option<bool> {
        self.tool_role
    }

    fn not_running(&self) -> BackendError {
        BackendError::NotRunning {
            server: "Ollama".into(),
            url: self.base.clone(),
            hint: "start it with `ollama serve`, or set OLLAMA_HOST / `ollama_host`".into(),
        }
    }

    /// The model is missing: what to pull, and the models the server has (`GET /api/tags`).
    fn model_missing(&self, deadline: &Deadline) -> BackendError {
        let have = self
            .get_json("/api/tags", deadline)
            .and_then(|(status, v)| {
                let names: Vec<&str> = v["models"]
                    .as_array()?
                    .iter()
                    .filter_map(|m| m["name"].as_str())
                    .collect();
                (status == 200).then(|| match names.is_empty() {
                    true => "; the server has no model yet".to_string(),
                    false => format!("; the server has {}", names.join(", ")),
                })
            });
        BackendError::ModelNotFound {
            model: self.model.clone(),
            hint: format!(
                "run `ollama pull {}`{}",
                self.model,
                have.unwrap_or_default()
            ),
        }
    }

    /// A short `GET` of a JSON document (a few seconds, within the deadline): its status
    /// and body, or `None` when nothing JSON came back.
    fn get_json(&self, path: &str, deadline: &Deadline) -> Option<(u16, Value)> {
        let budget = http::budget(deadline, Duration::from_secs(5))?;
        let resp = http::agent()
            .get(&format!("{}{path}", self.base))
            .config()
            .timeout_global(Some(budget))
            .http_status_as_error(false)
            .build()
            .call()
            .ok()?;
        let status = resp.status().as_u16();
        let (body, _) = http::read_capped(resp.into_body().into_reader(), 1 << 20).ok()?;
        Some((status, serde_json::from_slice(&body).ok()?))
    }

    /// What answers at the base URL, asked after a reply Ollama never gives (an error
    /// that is not Ollama's `{"error": "..."}`, an HTML page): `None` when `/api/version`
    /// says it is Ollama after all, else the error that says what is there and what to do.
    fn not_ollama(&self, status: u16, deadline: &Deadline) -> Option<BackendError> {
        if let Some((200, v)) = self.get_json("/api/version", deadline)
            && v["version"].is_string()
        {
            return None;
        }
        let url = self.base.clone();
        if let Some((200, v)) = self.get_json("/v1/models", deadline)
            && let Some(models) = v["data"].as_array()
        {
            let ids: Vec<&str> = models.iter().filter_map(|m| m["id"].as_str()).collect();
            let model = ids.first().copied().unwrap_or("NAME");
            return Some(BackendError::NotOllama {
                answered: format!(
                    "an OpenAI-compatible server answers there (models: {})",
                    if ids.is_empty() {
                        "none listed".into()
                    } else {
                        ids.join(", ")
                    }
                ),
                hint: format!("use `--backend openai --base-url {url}/v1 --model {model}`"),
                url,
            });
        }
        Some(BackendError::NotOllama {
            answered: format!("a web server that is not Ollama answered with HTTP {status}"),
            hint: "point --ollama-host (or OLLAMA_HOST) at Ollama, by default \
                   http://127.0.0.1:11434"
                .into(),
            url,
        })
    }

    fn failure(&self, f: Failure, started: Instant) -> BackendError {
        super::transport_error(f, started, &self.base, || self.not_running())
    }

    /// Sends a JSON body, retrying while the server says it is busy.
    fn post(
        &self,
        agent: &ureq::Agent,
        path: &str,
        body: &Value,
        deadline: &Deadline,
        own: Duration,
    ) -> Result<ureq::http::Response<ureq::Body>, BackendError> {
        let url = format!("{}{}", self.base, path);
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        let started = Instant::now();
        let mut retries = Retries::default();
        loop {
            let Some(budget) = http::budget(deadline, own) else {
                return Err(BackendError::Timeout {
                    waited: started.elapsed(),
                });
            };
            let sent = agent
                .post(&url)
                .config()
                .timeout_global(Some(budget))
                .build()
                .header("Content-Type", "application/json")
                .send(&bytes[..]);
            let resp = match sent {
                Ok(resp) => resp,
                Err(e) => {
                    let base = (self.base.as_str(), self.reached.load(Ordering::Relaxed));
                    match super::after_unsent(
                        &mut retries,
                        http::classify(e),
                        base,
                        deadline,
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
                return Ok(resp);
            }
            let (body, _) =
                http::read_capped(resp.into_body().into_reader(), 64 << 10).unwrap_or_default();
            // Ollama says every error as `{"error": "..."}`; anything else is another server,
            // whose page is not shown: what it is and what to do are.
            let ollama_said =
                serde_json::from_slice::<Value>(&body).is_ok_and(|v| v["error"].is_string());
            if !ollama_said
                && ![429, 503].contains(&status)
                && let Some(e) = self.not_ollama(status, deadline)
            {
                return Err(e);
            }
            let message = http::error_message(&body);
            match status {
                404 => return Err(self.model_missing(deadline)),
                400 => return Err(BackendError::BadRequest { message }),
                401 | 403 => {
                    return Err(BackendError::Unauthorized {
                        status,
                        // toolloop sends Ollama no key: a refusal comes from something in front.
                        key: "what stands in front of Ollama (toolloop sends it no key)",
                        message,
                    });
                }
                _ => match retries.again(Fault::Status(status), true, deadline) {
                    Some(wait) => {
                        log::warn!("{}", super::retrying(&self.base, status, &message, wait));
                        if !super::pause(wait, self.stop.as_ref()) {
                            return Err(BackendError::Stopped);
                        }
                    }
                    None if matches!(status, 429 | 503) => {
                        return Err(BackendError::Busy { message });
                    }
                    None => return Err(super::failed(status, message, &retries)),
                },
            }
        }
    }

    /// Asks `POST /api/show` whether the model reports the `tools` capability.
    fn probe(&mut self, agent: &ureq::Agent, deadline: &Deadline) -> Result<bool, BackendError> {
        if let Some(known) = self.tool_role {
            return Ok(known);
        }
        let resp = self.post(
            agent,
            "/api/show",
            &json!({"model": self.model}),
            deadline,
            Duration::from_secs(30),
        );
        let has_tools = match resp {
            Ok(resp) => {
                let (body, _) =
                    http::read_capped(resp.into_body().into_reader(), 32 << 20).unwrap_or_default();
                // An HTML page where Ollama answers JSON: a web server that answers anything.
                if body.trim_ascii_start().starts_with(b"<")
                    && let Some(e) = self.not_ollama(200, deadline)
                {
                    return Err(e);
                }
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                self.weights = v["modelfile"].as_str().and_then(weights_digest);
                v["capabilities"]
                    .as_array()
                    .is_some_and(|caps| caps.iter().any(|c| c == "tools"))
            }
            Err(
                e @ (BackendError::NotRunning { .. }
                | BackendError::NotOllama { .. }
                | BackendError::ModelNotFound { .. }
                | BackendError::Timeout { .. }),
            ) => return Err(e),
            // An older server without /api/show, or one that fails it: the safe choice
            // is user-role text, which every template renders.
            Err(e) => {
                log::warn!("capability probe failed ({e}); tool results go as user text");
                false
            }
        };
        self.tool_role = Some(has_tools);
        Ok(has_tools)
    }

    /// The JSON body of `POST /api/chat`.
    pub fn request_body(&self, request: &ChatRequest<'_>, tool_role: bool) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| wire_message(m, tool_role))
            .collect();
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), json!(true));
        if let Some(schema) = request.schema {
            body.insert("format".into(), schema.clone());
        }
        let options = wire_options(request.options);
        if !options.is_empty() {
            body.insert("options".into(), Value::Object(options));
        }
        if let Some(k) = &request.options.keep_alive {
            body.insert("keep_alive".into(), json!(k));
        }
        // Ollama 0.12.11 and later; older servers ignore the fields.
        if let Some(n) = request.options.top_logprobs {
            body.insert("logprobs".into(), json!(true));
            body.insert("top_logprobs".into(), json!(n));
        }
        Value::Object(body)
    }

    /// One `/api/chat` request on `agent`, its reply read line by line as it streams.
    fn stream_chat(
        &mut self,
        agent: &ureq::Agent,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let started = Instant::now();
        let tool_role = self.probe(agent, &deadline)?;
        let body = self.request_body(request, tool_role);
        let resp = self.post(
            agent,
            "/api/chat",
            &body,
            &deadline,
            request.options.request_timeout,
        )?;
        let mut reader = BufReader::new(resp.into_body().into_reader());
        let mut text = String::new();
        let mut pieces = 0;
        let mut logprobs = Vec::new();
        loop {
            let line = match http::read_line(&mut reader, MAX_LINE) {
                Ok(Some(line)) => line,
                Ok(None) => {
                    return Err(BackendError::InvalidResponse {
                        detail: "the connection closed before the reply was complete".into(),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Err(BackendError::InvalidResponse {
                        detail: e.to_string(),
                    });
                }
                Err(e) => return Err(self.failure(http::classify_io(&e), started)),
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line = std::str::from_utf8(&line).map_err(|_| BackendError::InvalidResponse {
                detail: "the reply is not valid UTF-8".into(),
            })?;
            let chunk: Value =
                serde_json::from_str(line).map_err(|_| BackendError::InvalidResponse {
                    detail: format!("expected a JSON line, got {:?}", http::shorten(line, 120)),
                })?;
            if let Some(err) = chunk.get("error") {
                let message = err
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| err.to_string());
                return Err(BackendError::Stream { message });
            }
            if let Some(piece) = chunk["message"]["content"].as_str()
                && !piece.is_empty()
            {
                text.push_str(piece);
                pieces += 1;
                if text.len() > super::MAX_REPLY {
                    return Err(super::reply_too_large());
                }
                if sink(piece).is_break() {
                    return Ok(stopped(text, pieces, logprobs, started));
                }
            }
            if let Some(tokens) = chunk["logprobs"].as_array() {
                logprobs.extend(tokens.iter().map(super::token_logprob));
                if request
                    .options
                    .stop_once
                    .is_some_and(|stop| stop.reached(&logprobs))
                {
                    return Ok(stopped(text, pieces, logprobs, started));
                }
            }
            if chunk["done"] == true {
                let stop = match chunk["done_reason"].as_str() {
                    Some("length") => StopReason::Length,
                    _ => StopReason::Finished,
                };
                return Ok(ChatReply {
                    text,
                    given: 0,
                    stop,
                    usage: Usage {
                        prompt_tokens: chunk["prompt_eval_count"].as_u64().unwrap_or(0),
                        cached_prompt_tokens: None,
                        completion_tokens: chunk["eval_count"].as_u64().unwrap_or(0),
                    },
                    timings: Timings {
                        total: started.elapsed(),
                        load: nanos(&chunk["load_duration"]),
                        prompt: nanos(&chunk["prompt_eval_duration"]),
                        generation: nanos(&chunk["eval_duration"]),
                    },
                    logprobs,
                });
            }
            if deadline.is_expired() {
                return Err(BackendError::Timeout {
                    waited: started.elapsed(),
                });
            }
        }
    }
}

fn wire_message(m: &Message, tool_role: bool) -> Value {
    match m.role {
        Role::Tool if tool_role => json!({
            "role": "tool",
            "content": m.content,
            "tool_name": m.tool_name.as_deref().unwrap_or("tool"),
        }),
        Role::Tool => json!({"role": "user", "content": m.tool_result_as_user_text()}),
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Assistant => json!({"role": "assistant", "content": m.content}),
    }
}

fn wire_options(o: &GenOptions) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(v) = o.temperature {
        m.insert("temperature".into(), json!(v));
    }
    if let Some(v) = o.num_ctx {
        m.insert("num_ctx".into(), json!(v));
    }
    if let Some(v) = o.num_predict {
        m.insert("num_predict".into(), json!(v));
    }
    if let Some(v) = o.seed {
        m.insert("seed".into(), json!(v));
    }
    if let Some(v) = o.top_k {
        m.insert("top_k".into(), json!(v));
    }
    if let Some(v) = o.top_p {
        m.insert("top_p".into(), json!(v));
    }
    if !o.stop.is_empty() {
        m.insert("stop".into(), json!(o.stop));
    }
    m
}

/// A reply the sink or `stop_once` stopped: the server sent no counts, and each streamed
/// line carries one token.
fn stopped(text: String, pieces: u64, logprobs: Vec<TokenLogprob>, started: Instant) -> ChatReply {
    ChatReply {
        text,
        given: 0,
        stop: StopReason::Stopped,
        usage: Usage {
            completion_tokens: pieces.max(logprobs.len() as u64),
            ..Usage::default()
        },
        timings: Timings {
            total: started.elapsed(),
            ..Timings::default()
        },
        logprobs,
    }
}

/// The digest of the weights a Modelfile names: the blob `sha256-<hex>` on its first
/// `FROM` line that names one (a line `# FROM gemma3:270m` is a comment).
fn weights_digest(modelfile: &str) -> Option<String> {
    modelfile.lines().find_map(|line| {
        let from = line.trim().strip_prefix("FROM ")?;
        let hex = &from[from.rfind("sha256-")? + "sha256-".len()..];
        let hex = hex.trim();
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| hex.to_ascii_lowercase())
    })
}

fn nanos(v: &Value) -> Option<Duration> {
    v.as_u64().map(Duration::from_nanos)
}

impl Backend for Ollama {
    fn describe(&self) -> String {
        format!("ollama {} at {}", self.model, self.base)
    }

    fn identity(&self) -> Option<(String, String)> {
        Some((self.model.clone(), self.base.clone()))
    }

    fn preflight(&mut self, deadline: Deadline) -> Result<(), BackendError> {
        self.probe(http::agent(), &deadline).map(|_| ())
    }

    /// The weights' digest from `POST /api/show`: Ollama keeps a model's GGUF file as the
    /// blob `sha256-<hex>` and names it on the `FROM` line of the model's Modelfile. Read
    /// from the preflight's answer; `None` before it.
    fn model_file(&self) -> Option<super::ModelFile> {
        self.weights.clone().map(super::ModelFile::Sha256)
    }

    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let stop = self.stop.clone();
        let (agent, _armed) = self.agent.arm(stop.as_ref());
        let result = self.stream_chat(&agent, request, deadline, sink);
        super::unless_stopped(result, stop.as_ref())
    }

    fn watch(&mut self, stop: &StopHandle) {
        self.stop = Some(stop.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::parse_host;

    #[test]
    fn the_weights_digest_is_read_off_the_modelfiles_from_line() {
        let hex = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
        let modelfile = format!(
            "# Modelfile generated by \"ollama show\"\n# FROM gemma3:270m\n\n\
             FROM /root/.ollama/models/blobs/sha256-{hex}\nTEMPLATE \"\"\"{{{{ .Prompt }}}}\"\"\"\n"
        );
        assert_eq!(super::weights_digest(&modelfile).as_deref(), Some(hex));
        // A model built from a name, not a blob, names no digest.
        assert_eq!(super::weights_digest("FROM gemma3:270m\n"), None);
        assert_eq!(super::weights_digest("FROM /x/sha256-abc\n"), None);
    }

    #[test]
    fn host_forms_match_ollamas_client() {
        for (input, want) in [
            ("", "http://127.0.0.1:11434"),
            ("   ", "http://127.0.0.1:11434"),
            ("1.2.3.4", "http://1.2.3.4:11434"),
            (":1234", "http://127.0.0.1:1234"),
            ("1.2.3.4:1234", "http://1.2.3.4:1234"),
            ("example.com", "http://example.com:11434"),
            ("example.com:1234", "http://example.com:1234"),
            ("http://example.com", "http://example.com:80"),
            ("https://example.com", "https://example.com:443"),
            (
                "https://example.com:8443/ollama/",
                "https://example.com:8443/ollama",
            ),
            ("0.0.0.0", "http://127.0.0.1:11434"),
            ("0.0.0.0:8000", "http://127.0.0.1:8000"),
            ("::1", "http://[::1]:11434"),
            ("[::1]", "http://[::1]:11434"),
            ("[::1]:1337", "http://[::1]:1337"),
            ("example.com:99999", "http://example.com:11434"),
            ("example.com:abc", "http://example.com:11434"),
            ("ollama.com", "https://ollama.com:443"),
        ] {
            assert_eq!(parse_host(input), want, "OLLAMA_HOST={input:?}");
        }
    }
}
