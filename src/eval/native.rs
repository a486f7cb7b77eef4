//! The baseline a person has without toolloop: one case through the server's own tool
//! calling.

use std::time::Instant;

use serde_json::Value;

use super::{Call, Case, CaseResult, NativeTarget};
use crate::config::Config;
use crate::run::budget::Budget;

/// One case through the server's native tool calling: the functions as OpenAI `tools`, one
/// request, the calls read from `message.tool_calls` as an OpenAI client reads them (no
/// repair, no loop). This is the baseline toolloop is compared with.
pub fn native_case(target: &NativeTarget, case: &Case, config: &Config) -> CaseResult {
    let started = Instant::now();
    let tools: Vec<Value> = case
        .tools
        .iter()
        .map(|t| {
            serde_json::json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}})
        })
        .collect();
    let body = serde_json::json!({
        "model": target.model,
        "messages": [{"role": "user", "content": case.question}],
        "tools": tools,
        "temperature": config.options.temperature.unwrap_or(0.0),
        "max_tokens": config.options.num_predict.unwrap_or(256),
        "stream": false,
    });
    let reply = crate::http::agent()
        .post(format!("{}/chat/completions", target.base_url))
        .config()
        .timeout_global(Some(config.timeout))
        .http_status_as_error(false)
        .build()
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .map_err(|e| e.to_string())
        .and_then(|r| {
            let (bytes, _) = crate::http::read_capped(r.into_body().into_reader(), 16 << 20)
                .map_err(|e| e.to_string())?;
            serde_json::from_slice::<Value>(&bytes).map_err(|e| e.to_string())
        });
    let ms = started.elapsed().as_millis() as u64;
    let mut budget = Budget::default();
    let (calls, text, tokens, error) = match reply {
        Err(e) => (Vec::new(), String::new(), 0, Some(e)),
        Ok(v) => {
            let message = &v["choices"][0]["message"];
            let calls: Vec<Call> = message["tool_calls"]
                .as_array()
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            let f = &c["function"];
                            let arguments = match &f["arguments"] {
                                Value::String(s) => serde_json::from_str(s).unwrap_or_default(),
                                Value::Object(m) => m.clone(),
                                _ => serde_json::Map::new(),
                            };
                            Call {
                                name: f["name"].as_str().unwrap_or_default().to_string(),
                                arguments,
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            let text = message["content"].as_str().unwrap_or_default().to_string();
            let tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
            let error = v["error"].is_object().then(|| v["error"].to_string());
            // The one request, in the same terms as a run's budget. Its calls come with
            // its reply: that is when they could first be sent off, whether the server
            // parsed them or left them in the text as JSON with a "name" (Qwen2.5-Coder
            // writes them so, fenced, and its server does not read them).
            let called = error.is_none() && (!calls.is_empty() || text.contains("\"name\""));
            let reused = v["timings"]["cache_n"].as_u64();
            let prompt = v["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
            budget = Budget {
                model_requests: 1,
                prompt_evaluated: prompt.saturating_sub(reused.unwrap_or(0)),
                prompt_reused: reused,
                model_ms: ms,
                first_call_ms: called.then_some(ms),
                first_calls: u32::from(called),
                ..Budget::default()
            };
            (calls, text, tokens, error)
        }
    };
    CaseResult {
        replies: 1,
        iterations: 1,
        ms,
        tokens,
        texts: vec![text],
        budget,
        ..CaseResult::scored(case, calls, error)
    }
}
