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
            // What a user's own loop would read too: calls the model wrote as text.
            let calls = match calls.is_empty() {
                true => {
                    let names: Vec<&str> = case.tools.iter().map(|t| t.name.as_str()).collect();
                    calls_in_text(&text, &names)
                }
                false => calls,
            };
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

/// The calls a model wrote as text rather than as the server's `tool_calls`, in the forms
/// small models use and their users' loops read: Llama 3's `{"name": …, "parameters": …}`,
/// `{"name": …, "arguments": …}` (an object or a JSON string), OpenAI's
/// `{"function": {…}}` and `{"tool_calls": [...]}`, inside `<tool_call>` tags, in a code
/// fence, with text around them, one or a list or several in a row. Only names on offer
/// (`names`) count; broken JSON is read as toolloop's repair reads it.
pub(crate) fn calls_in_text(text: &str, names: &[&str]) -> Vec<Call> {
    let mut values = Vec::new();
    let mut at = 0;
    // A reply is short; eight values are more than any call list in one.
    while values.len() < 8 {
        let Some(start) = text[at..].find(['{', '[']).map(|i| at + i) else {
            break;
        };
        match crate::turn::repair::parse_from(text, start) {
            Ok(found) => {
                if let Ok(v) = serde_json::from_str::<Value>(&found.text) {
                    values.push(v);
                }
                at = found.end.max(start + 1);
            }
            Err(_) => at = start + 1,
        }
        if at >= text.len() {
            break;
        }
    }
    let mut calls = Vec::new();
    for v in &values {
        collect(v, names, &mut calls, 0);
    }
    calls
}

fn collect(v: &Value, names: &[&str], out: &mut Vec<Call>, depth: u8) {
    if depth > 3 {
        return;
    }
    match v {
        Value::Array(items) => {
            for item in items {
                collect(item, names, out, depth + 1);
            }
        }
        Value::Object(m) => {
            if let Some(list) = m.get("tool_calls") {
                return collect(list, names, out, depth + 1);
            }
            if let Some(f @ Value::Object(_)) = m.get("function") {
                return collect(f, names, out, depth + 1);
            }
            let name = m
                .get("name")
                .or_else(|| m.get("tool"))
                .and_then(Value::as_str)
                .filter(|n| names.contains(n));
            let Some(name) = name else { return };
            let arguments = match m.get("arguments").or_else(|| m.get("parameters")) {
                Some(Value::Object(a)) => a.clone(),
                Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_default(),
                _ => serde_json::Map::new(),
            };
            out.push(Call {
                name: name.to_string(),
                arguments,
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::calls_in_text;
    use serde_json::json;

    fn read(text: &str) -> Vec<(String, serde_json::Value)> {
        calls_in_text(text, &["get_weather", "calculator"])
            .into_iter()
            .map(|c| (c.name, serde_json::Value::Object(c.arguments)))
            .collect()
    }

    #[test]
    fn the_plain_text_forms_small_models_write_are_read_as_calls() {
        let oslo = vec![("get_weather".to_string(), json!({"city": "Oslo"}))];
        for text in [
            r#"{"name": "get_weather", "parameters": {"city": "Oslo"}}"#,
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
            "Sure!\n```json\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n```",
            r#"{"tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]}"#,
            r#"{'name': 'get_weather', 'parameters': {'city': 'Oslo'},"#,
        ] {
            assert_eq!(read(text), oslo, "{text}");
        }
        let two = read(
            r#"[{"name": "get_weather", "parameters": {"city": "Oslo"}}, {"name": "calculator", "parameters": {"expression": "2+2"}}]"#,
        );
        assert_eq!(two.len(), 2);
        let in_a_row = read(
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>\n<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1+1\"}}</tool_call>",
        );
        assert_eq!(in_a_row.len(), 2);
    }

    #[test]
    fn text_that_is_no_call_of_a_tool_on_offer_is_none() {
        assert!(read("It is sunny in Oslo.").is_empty());
        assert!(read(r#"{"name": "send_email", "arguments": {}}"#).is_empty());
        assert!(read(r#"{"city": "Oslo"}"#).is_empty());
    }
}
