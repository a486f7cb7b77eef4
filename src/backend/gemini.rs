//! Google's Gemini API: `POST {base}/models/{model}:streamGenerateContent?alt=sse`, the
//! turn's schema as `generationConfig.responseSchema` with `responseMimeType:
//! application/json`, streamed as server-sent events of `GenerateContentResponse`.
//!
//! `responseSchema` takes a subset of OpenAPI 3.0, not JSON Schema: types are upper-case
//! names, `nullable` stands for a `null` type, `enum` holds strings, `anyOf` stands for
//! `oneOf`, and there is no `$ref`, `const` or `additionalProperties`.
//! [`response_schema`] turns the turn's schema into that subset; what the subset cannot
//! say is left out, and the reply is still validated against the whole schema, as from
//! every server.
//!
//! The key goes in the `x-goog-api-key` header, never in the URL, so no error message or
//! log line that names the address can carry it.

use std::io::BufReader;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::{
    Backend, BackendError, ChatReply, ChatRequest, Fault, GenOptions, Retries, Role, StopReason,
    TextSink, Timings, Usage,
};
use crate::deadline::{Deadline, StopHandle};
use crate::http;

/// Where Google serves the Gemini API.
pub const GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The model asked for when the person names none.
pub(crate) const GEMINI_DEFAULT_MODEL: &str = "gemini-2.5-flash";

const MAX_LINE: usize = 8 << 20;

/// A model behind Google's Gemini API.
///
/// ```
/// use toolloop::backend::Gemini;
///
/// let backend = Gemini::new("https://generativelanguage.googleapis.com/v1beta",
///     "gemini-2.5-flash", Some("AIza-secret".into()));
/// // The key never shows in debug output or logs.
/// assert!(!format!("{backend:?}").contains("AIza-secret"));
/// ```
#[derive(Clone)]
pub struct Gemini {
    base: String,
    model: String,
    api_key: Option<String>,
    stop: Option<StopHandle>,
    agent: http::StoppableAgent,
    reached: Arc<AtomicBool>,
}

impl std::fmt::Debug for Gemini {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gemini")
            .field("base", &self.base)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Gemini {
    /// A backend for `model` (`gemini-2.5-flash`, or `models/gemini-2.5-flash`) at
    /// `base_url` ([`GEMINI_BASE_URL`]), with the API key.
    pub fn new(base_url: &str, model: impl Into<String>, api_key: Option<String>) -> Self {
        let model: String = model.into();
        Gemini {
            base: base_url.trim().trim_end_matches('/').to_string(),
            model: model.strip_prefix("models/").unwrap_or(&model).to_string(),
            api_key: api_key.filter(|k| !k.trim().is_empty()),
            stop: None,
            agent: http::StoppableAgent::default(),
            reached: Arc::default(),
        }
    }

    fn url(&self) -> String {
        format!(
            "{}/models/{}:streamGenerateContent?alt=sse",
            self.base, self.model
        )
    }

    fn key(&self) -> Result<&str, BackendError> {
        self.api_key.as_deref().ok_or_else(|| BackendError::MissingKey {
            server: "the Gemini API".into(),
            hint: "set GEMINI_API_KEY or give --key-file (a key from https://aistudio.google.com/apikey)"
                .into(),
        })
    }

    /// The JSON body of a request.
    pub fn request_body(&self, request: &ChatRequest<'_>) -> Value {
        let mut system: Vec<&str> = Vec::new();
        let mut contents: Vec<Value> = Vec::new();
        for m in request.messages {
            let (role, text) = match m.role {
                Role::System => {
                    system.push(&m.content);
                    continue;
                }
                Role::User => ("user", m.content.clone()),
                Role::Assistant => ("model", m.content.clone()),
                // The loop uses no native function calls, so a result is the user's text.
                Role::Tool => ("user", m.tool_result_as_user_text()),
            };
            // Turns of one role in a row go as one content of several parts.
            match contents.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(parts) = last["parts"].as_array_mut() {
                        parts.push(json!({"text": text}));
                    }
                }
                _ => contents.push(json!({"role": role, "parts": [{"text": text}]})),
            }
        }
        let mut body = Map::new();
        if !system.is_empty() {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system.join("\n\n")}]}),
            );
        }
        body.insert("contents".into(), Value::Array(contents));
        let mut config = generation_config(request.options);
        if let Some(schema) = request.schema {
            config.insert("responseMimeType".into(), json!("application/json"));
            config.insert("responseSchema".into(), response_schema(schema));
        }
        if !config.is_empty() {
            body.insert("generationConfig".into(), Value::Object(config));
        }
        Value::Object(body)
    }

    fn status_error(&self, status: u16, body: &[u8]) -> BackendError {
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let message = http::error_message(body);
        let reason = v["error"]["details"]
            .as_array()
            .and_then(|d| d.iter().find_map(|d| d["reason"].as_str()))
            .unwrap_or_default();
        // Google answers a bad key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
        if matches!(status, 401 | 403) || reason.starts_with("API_KEY") {
            return BackendError::Unauthorized {
                status,
                key: "GEMINI_API_KEY or --key-file",
                message,
            };
        }
        match status {
            400 => BackendError::BadRequest { message },
            404 => BackendError::ModelNotFound {
                model: self.model.clone(),
                hint: format!(
                    "check `--model` (for example {GEMINI_DEFAULT_MODEL}); the API lists its models at {}/models",
                    self.base
                ),
            },
            429 => BackendError::Quota { message },
            _ => BackendError::Server { status, message },
        }
    }

    fn stream_chat(
        &mut self,
        agent: &ureq::Agent,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let started = Instant::now();
        let key = self.key()?.to_string();
        let url = self.url();
        let bytes = serde_json::to_vec(&self.request_body(request)).unwrap_or_default();
        let not_running = || BackendError::NotRunning {
            server: "the Gemini API".into(),
            url: self.base.clone(),
            hint: "check the network, or `--base-url`".into(),
        };
        let mut retries = Retries::default();
        let resp = loop {
            let Some(budget) = http::budget(&deadline, request.options.request_timeout) else {
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
                .header("x-goog-api-key", &key)
                .send(&bytes[..]);
            let resp = match sent {
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
                        Err(Ok(failure)) => {
                            return Err(super::transport_error(
                                failure,
                                started,
                                &self.base,
                                not_running,
                            ));
                        }
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
            // A quota that frees only later than the deadline (a day's, say) is said at
            // once rather than waited for.
            let later = retry_delay(&body)
                .is_some_and(|d| deadline.remaining().is_some_and(|left| d > left));
            if let Some(wait) = retries
                .again(Fault::Status(status), true, &deadline)
                .filter(|_| !later)
            {
                log::warn!("{}", super::retrying(&self.base, status, &message, wait));
                if !super::pause(wait, self.stop.as_ref()) {
                    return Err(BackendError::Stopped);
                }
                continue;
            }
            return Err(match status {
                503 => BackendError::Busy { message },
                500..=599 => super::failed(status, message, &retries),
                _ => self.status_error(status, &body),
            });
        };
        let read_err = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::InvalidData => BackendError::InvalidResponse {
                detail: e.to_string(),
            },
            _ => super::transport_error(http::classify_io(&e), started, &self.base, not_running),
        };
        let mut reader = BufReader::new(resp.into_body().into_reader());
        let mut got = Collected::default();
        loop {
            let Some(line) = http::read_line(&mut reader, MAX_LINE).map_err(read_err)? else {
                // The stream ends with the connection; a reply that said why it ended is whole.
                return match got.finish.is_some() {
                    true => got.into_reply(started),
                    false => Err(BackendError::InvalidResponse {
                        detail: "the connection closed before the reply was complete".into(),
                    }),
                };
            };
            let line = std::str::from_utf8(&line).map_err(|_| BackendError::InvalidResponse {
                detail: "the reply is not valid UTF-8".into(),
            })?;
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue;
            };
            let v: Value =
                serde_json::from_str(data.trim()).map_err(|_| BackendError::InvalidResponse {
                    detail: format!("expected a JSON event, got {:?}", http::shorten(data, 120)),
                })?;
            if v.get("error").is_some() {
                return Err(BackendError::Stream {
                    message: http::error_message(data.as_bytes()),
                });
            }
            if got.absorb(&v, sink).is_break() {
                got.finish = Some("stopped".into());
                return got.into_reply(started);
            }
            if got.text.len() > super::MAX_REPLY {
                return Err(super::reply_too_large());
            }
            if deadline.is_expired() {
                return Err(BackendError::Timeout {
                    waited: started.elapsed(),
                });
            }
        }
    }
}

/// The wait Google asks for before the request is sent again (`RetryInfo.retryDelay`,
/// e.g. `"37s"`), when its error says.
fn retry_delay(body: &[u8]) -> Option<std::time::Duration> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let delay = v["error"]["details"]
        .as_array()?
        .iter()
        .find_map(|d| d["retryDelay"].as_str())?;
    let secs: f64 = delay.strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| std::time::Duration::from_secs_f64(secs))
}

fn generation_config(o: &GenOptions) -> Map<String, Value> {
    let mut c = Map::new();
    if let Some(v) = o.temperature {
        c.insert("temperature".into(), json!(v));
    }
    if let Some(v) = o.num_predict {
        c.insert("maxOutputTokens".into(), json!(v));
    }
    if let Some(v) = o.seed {
        c.insert("seed".into(), json!(v));
    }
    if let Some(v) = o.top_p {
        c.insert("topP".into(), json!(v));
    }
    if let Some(v) = o.top_k {
        c.insert("topK".into(), json!(v));
    }
    if !o.stop.is_empty() {
        c.insert("stopSequences".into(), json!(o.stop));
    }
    c
}

/// What the stream said so far.
#[derive(Default)]
struct Collected {
    text: String,
    finish: Option<String>,
    usage: Value,
    /// Why Google blocked the request or the reply, when it did.
    blocked: Option<String>,
}

impl Collected {
    fn absorb(&mut self, v: &Value, sink: TextSink<'_>) -> std::ops::ControlFlow<()> {
        if let Some(reason) = v["promptFeedback"]["blockReason"].as_str() {
            self.blocked = Some(reason.to_string());
            self.finish = Some(reason.to_string());
        }
        if v["usageMetadata"].is_object() {
            self.usage = v["usageMetadata"].clone();
        }
        let candidate = &v["candidates"][0];
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            // A thinking model's thoughts are not the reply.
            if part["thought"] == json!(true) {
                continue;
            }
            if let Some(piece) = part["text"].as_str().filter(|p| !p.is_empty()) {
                self.text.push_str(piece);
                if sink(piece).is_break() {
                    return std::ops::ControlFlow::Break(());
                }
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            if !matches!(reason, "STOP" | "MAX_TOKENS" | "FINISH_REASON_UNSPECIFIED") {
                self.blocked = Some(reason.to_string());
            }
            self.finish = Some(reason.to_string());
        }
        std::ops::ControlFlow::Continue(())
    }

    fn into_reply(self, started: Instant) -> Result<ChatReply, BackendError> {
        if let Some(reason) = self.blocked {
            return Err(BackendError::Blocked { reason });
        }
        let count = |k: &str| self.usage[k].as_u64();
        Ok(ChatReply {
            stop: match self.finish.as_deref() {
                Some("MAX_TOKENS") => StopReason::Length,
                Some("stopped") => StopReason::Stopped,
                _ => StopReason::Finished,
            },
            text: self.text,
            given: 0,
            usage: Usage {
                prompt_tokens: count("promptTokenCount").unwrap_or(0),
                cached_prompt_tokens: count("cachedContentTokenCount"),
                completion_tokens: count("candidatesTokenCount").unwrap_or(0)
                    + count("thoughtsTokenCount").unwrap_or(0),
            },
            timings: Timings {
                total: started.elapsed(),
                load: None,
                prompt: None,
                generation: None,
            },
            logprobs: Vec::new(),
        })
    }
}

/// The turn's JSON Schema in the OpenAPI subset `responseSchema` takes. `$ref`s are
/// written out (a recursive one is left open past a few levels), `oneOf` becomes `anyOf`,
/// a `null` among the types becomes `nullable`, `const` and non-string `enum`s become
/// string `enum`s, and keywords the subset lacks are left out: the reply is validated
/// against the whole schema all the same.
pub(crate) fn response_schema(schema: &Value) -> Value {
    convert(schema, schema, 0)
}

/// Past this depth a `$ref` is left open: a recursive schema has no end to write out.
const MAX_REF_DEPTH: u32 = 8;

fn convert(schema: &Value, root: &Value, depth: u32) -> Value {
    let Some(s) = schema.as_object() else {
        return json!({});
    };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = r
            .strip_prefix('#')
            .and_then(|pointer| root.pointer(pointer));
        return match (target, depth < MAX_REF_DEPTH) {
            (Some(t), true) => convert(t, root, depth + 1),
            _ => json!({}),
        };
    }
    let mut out = Map::new();
    for key in ["title", "description"] {
        if let Some(v) = s.get(key).filter(|v| v.is_string()) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(alternatives) = s
        .get("oneOf")
        .or_else(|| s.get("anyOf"))
        .and_then(Value::as_array)
    {
        let converted: Vec<Value> = alternatives
            .iter()
            .map(|a| convert(a, root, depth))
            .collect();
        out.insert("anyOf".into(), Value::Array(converted));
        return Value::Object(out);
    }
    if let Some(parts) = s.get("allOf").and_then(Value::as_array) {
        for part in parts {
            if let Value::Object(m) = convert(part, root, depth) {
                out.extend(m);
            }
        }
    }
    // The type: named, or told by `const` or `enum`.
    let fixed: Option<Vec<Value>> = match (s.get("const"), s.get("enum")) {
        (Some(c), _) => Some(vec![c.clone()]),
        (None, Some(Value::Array(values))) => Some(values.clone()),
        _ => None,
    };
    let mut nullable = false;
    let named: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut types: Vec<&str> = named
        .into_iter()
        .filter(|t| match *t == "null" {
            true => {
                nullable = true;
                false
            }
            false => true,
        })
        .collect();
    if let (true, Some(values)) = (types.is_empty(), &fixed) {
        types = values
            .iter()
            .filter_map(|v| match v {
                Value::String(_) => Some("string"),
                Value::Bool(_) => Some("boolean"),
                Value::Number(n) if n.is_i64() || n.is_u64() => Some("integer"),
                Value::Number(_) => Some("number"),
                _ => None,
            })
            .take(1)
            .collect();
    }
    if let [one] = types[..] {
        out.insert("type".into(), json!(one.to_ascii_uppercase()));
    } else if types.len() > 1 {
        // Several types: one alternative each.
        let alternatives: Vec<Value> = types
            .iter()
            .map(|t| json!({"type": t.to_ascii_uppercase()}))
            .collect();
        out.insert("anyOf".into(), Value::Array(alternatives));
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    if let Some(values) = fixed {
        let strings: Vec<Value> = values
            .iter()
            .filter(|v| !v.is_null() && !v.is_boolean())
            .map(|v| match v {
                Value::String(s) => json!(s),
                other => json!(other.to_string()),
            })
            .collect();
        if !strings.is_empty() {
            if types.first().is_some_and(|t| *t != "string") {
                out.insert("format".into(), json!("enum"));
            }
            out.insert("enum".into(), Value::Array(strings));
        }
    }
    if let Some(Value::Object(props)) = s.get("properties") {
        let converted: Map<String, Value> = props
            .iter()
            .map(|(k, v)| (k.clone(), convert(v, root, depth)))
            .collect();
        // Without an order Gemini writes the keys in alphabetical order; the turn's own
        // order ("kind" first) is what lets its reply be read as it streams.
        let order: Vec<Value> = props.keys().map(|k| json!(k)).collect();
        out.insert("properties".into(), Value::Object(converted));
        out.insert("propertyOrdering".into(), Value::Array(order));
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        out.insert("items".into(), convert(items, root, depth));
    }
    for key in [
        "required",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "pattern",
    ] {
        if let Some(v) = s.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    if s.get("format").and_then(Value::as_str) == Some("date-time") {
        out.insert("format".into(), json!("date-time"));
    }
    Value::Object(out)
}

impl Backend for Gemini {
    fn describe(&self) -> String {
        format!("gemini {} at {}", self.model, self.base)
    }

    fn identity(&self) -> Option<(String, String)> {
        Some((self.model.clone(), self.base.clone()))
    }

    fn preflight(&mut self, _deadline: Deadline) -> Result<(), BackendError> {
        // A missing key is said before the first request; a wrong one, by the first.
        self.key().map(|_| ())
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
    use super::*;

    #[test]
    fn the_turns_schema_becomes_the_openapi_subset_gemini_takes() {
        let schema = json!({"type": "object", "additionalProperties": false,
            "properties": {"kind": {"const": "tool_call"}, "n": {"type": ["integer", "null"]},
                           "unit": {"enum": [1, 2]}, "call": {"$ref": "#/$defs/call"},
                           "either": {"oneOf": [{"type": "string"}, {"type": "boolean"}]}},
            "required": ["kind"],
            "$defs": {"call": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2}}});
        assert_eq!(
            response_schema(&schema),
            json!({"type": "OBJECT",
            "properties": {
                "kind": {"type": "STRING", "enum": ["tool_call"]},
                "n": {"type": "INTEGER", "nullable": true},
                "unit": {"type": "INTEGER", "format": "enum", "enum": ["1", "2"]},
                "call": {"type": "ARRAY", "items": {"type": "STRING", "maxLength": 5}, "maxItems": 2},
                "either": {"anyOf": [{"type": "STRING"}, {"type": "BOOLEAN"}]}},
            "propertyOrdering": ["kind", "n", "unit", "call", "either"],
            "required": ["kind"]})
        );
    }

    #[test]
    fn a_recursive_ref_is_left_open_rather_written_out_for_ever() {
        let schema = json!({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node"});
        let converted = response_schema(&schema).to_string();
        assert!(converted.matches("OBJECT").count() <= MAX_REF_DEPTH as usize + 1);
    }

    #[test]
    fn the_delay_google_asks_for_is_read_from_its_error() {
        let body = br#"{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}"#;
        assert_eq!(retry_delay(body), Some(std::time::Duration::from_secs(37)));
        assert_eq!(retry_delay(b"{}"), None);
    }
}
