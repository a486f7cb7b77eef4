//! `toolloop proxy` through the real binary over real sockets: both APIs' shapes, plain
//! and streamed, a loop of call, result and answer, requests without tools passed through,
//! and the errors a client gets, against a scripted upstream that speaks llama-server's
//! streaming format. The official Python clients against a real llama-server are in
//! `tests/real_model.rs`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{Act, Fake, Killer, serve};
use serde_json::{Value, json};

/// An upstream reply in llama-server's SSE whose content is `text`.
fn upstream(text: &str) -> Act {
    let chunk =
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    let last = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 40, "completion_tokens": 12}});
    Act::Respond(
        200,
        "text/event-stream",
        format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n").into_bytes(),
    )
}

const CALL: &str =
    r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Oslo"}}"#;
const ANSWER: &str = r#"{"kind":"final_answer","thought":"","content":"It is 4°C in Oslo."}"#;

fn weather() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
}

/// The proxy in front of `upstream`, with `extra` flags, as on a fresh install; killed
/// when dropped.
fn proxy(upstream: &str, extra: &[&str]) -> (Killer, String) {
    let base = format!("{upstream}/v1");
    let mut args = vec!["--backend", "openai", "--model", "m", "--base-url", &base];
    args.extend_from_slice(extra);
    common::serving("proxy", &args, true)
}

/// A raw HTTP request to `addr`: the status, the headers (lowercase names) and the body.
fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        head.to_ascii_lowercase(),
        if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    )
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

fn post(addr: &str, path: &str, body: &Value) -> (u16, String, String) {
    http(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// The JSON body of the last request the upstream got.
fn last_sent(fake: &Fake) -> Value {
    let requests = fake.requests.lock().unwrap();
    let raw = requests.last().expect("the upstream got a request");
    serde_json::from_str(raw.split_once("\r\n\r\n").unwrap().1).unwrap()
}

fn ask_weather(stream: bool) -> Value {
    json!({"model": "m", "stream": stream,
           "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
           "tools": [weather()]})
}

#[test]
fn a_call_comes_back_as_tool_calls_with_an_id_and_arguments_the_schema_accepts() {
    let fake = serve(vec![upstream(CALL)]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let (status, _, body) = post(&addr, "/v1/chat/completions", &ask_weather(false));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = &choice["message"]["tool_calls"][0];
    assert!(call["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Oslo"}));
    assert_eq!(v["object"], "chat.completion");
    // The upstream was asked toolloop's turn: the schema narrowed to the client's tool.
    let sent = last_sent(&fake);
    assert!(
        sent["response_format"].to_string().contains("get_weather"),
        "{sent}"
    );
}

#[test]
fn a_streamed_call_names_its_tool_in_its_first_chunk_and_its_arguments_in_pieces() {
    let fake = serve(vec![upstream(CALL)]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let mut asked = ask_weather(true);
    asked["stream_options"] = json!({"include_usage": true});
    let (status, head, body) = post(&addr, "/v1/chat/completions", &asked);
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    let events: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(events.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let first = &chunks[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(first["function"]["name"], "get_weather");
    assert!(first["id"].as_str().is_some());
    let args: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"city": "Oslo"})
    );
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "tool_calls")
    );
    assert!(
        chunks.last().unwrap()["usage"]["total_tokens"]
            .as_u64()
            .is_some()
    );
}

#[test]
fn a_result_sent_back_becomes_the_history_and_the_answer_comes_as_content() {
    let fake = serve(vec![upstream(ANSWER)]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let body = json!({"model": "m", "tools": [weather()], "messages": [
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "4°C, light rain"},
    ]});
    let (status, _, text) = post(&addr, "/v1/chat/completions", &body);
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["choices"][0]["message"]["content"], "It is 4°C in Oslo.");
    let sent = last_sent(&fake).to_string();
    assert!(sent.contains("4°C, light rain"), "{sent}");
    assert!(sent.contains("get_weather"), "{sent}");
}

#[test]
fn ollama_clients_get_ndjson_by_default_with_arguments_as_an_object() {
    let fake = serve(vec![upstream(CALL)]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let (status, head, body) = post(&addr, "/api/chat", &ask_weather(true));
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("application/x-ndjson"), "{head}");
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = lines
        .iter()
        .find_map(|l| l["message"]["tool_calls"].as_array())
        .expect("a line with the calls");
    assert_eq!(call[0]["function"]["arguments"], json!({"city": "Oslo"}));
    assert_eq!(lines.last().unwrap()["done"], true);
    // Not streamed when told so: one object.
    let mut whole = ask_weather(false);
    whole["stream"] = json!(false);
    let (status, _, body) = post(&addr, "/api/chat", &whole);
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["message"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
}

#[test]
fn a_request_without_tools_passes_through_unchanged() {
    let reply = br#"{"id":"up-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
    let fake = serve(vec![Act::Respond(200, "application/json", reply.to_vec())]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "Say hi"}], "logit_bias": {"1": 2}});
    let (status, _, text) = post(&addr, "/v1/chat/completions", &body);
    assert_eq!(status, 200);
    assert_eq!(text.as_bytes(), reply);
    assert_eq!(last_sent(&fake), body);
}

#[test]
fn bad_requests_get_the_clients_error_shape() {
    let fake = serve(vec![upstream(CALL)]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let (status, _, body) = http(&addr, "POST", "/v1/chat/completions", &[], b"{not json");
    assert_eq!(status, 400);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    let (status, _, body) = post(
        &addr,
        "/v1/chat/completions",
        &json!({"messages": "hi", "tools": [weather()]}),
    );
    assert_eq!(status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["param"],
        "messages"
    );
    let mut choice = ask_weather(false);
    choice["tool_choice"] = json!("sometimes");
    let (status, _, body) = post(&addr, "/v1/chat/completions", &choice);
    assert_eq!(status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["param"],
        "tool_choice"
    );
    // Ollama's shape on /api.
    let (status, _, body) = http(&addr, "POST", "/api/chat", &[], b"[");
    assert_eq!(status, 400);
    assert!(
        serde_json::from_str::<Value>(&body).unwrap()["error"].is_string(),
        "{body}"
    );
    // Another site's page, or a name that is not the address served.
    let (status, _, _) = http(
        &addr,
        "POST",
        "/v1/chat/completions",
        &[("Origin", "http://evil.example")],
        b"{}",
    );
    assert_eq!(status, 403);
}

#[test]
fn an_upstream_that_is_down_is_a_502_naming_it() {
    let dead = common::dead_url();
    let (_p, addr) = proxy(&dead, &["--timeout", "5"]);
    let (status, _, body) = post(&addr, "/v1/chat/completions", &ask_weather(false));
    assert_eq!(status, 502, "{body}");
    assert!(body.contains(&dead), "{body}");
    let (status, _, body) = post(
        &addr,
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(status, 502, "{body}");
    assert!(body.contains(&dead), "{body}");
}

#[test]
fn an_address_beyond_loopback_needs_a_key_and_a_key_is_checked() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args(["proxy", "--addr", "0.0.0.0:0"])
        .env_remove("TOOLLOOP_PROXY_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--api-key"));
    let fake = serve(vec![upstream(CALL)]);
    let (_p, addr) = proxy(&fake.url, &["--api-key", "s3cret"]);
    let (status, _, _) = post(&addr, "/v1/chat/completions", &ask_weather(false));
    assert_eq!(status, 401);
    let (status, _, _) = http(
        &addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
        ],
        ask_weather(false).to_string().as_bytes(),
    );
    assert_eq!(status, 200);
}

#[test]
fn the_model_details_say_it_can_call_tools() {
    let fake = serve(vec![Act::Respond(
        200,
        "application/json",
        br#"{"data":[{"id":"qwen"}]}"#.to_vec(),
    )]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let (status, _, body) = post(&addr, "/api/show", &json!({"model": "qwen"}));
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(
        v["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("tools")),
        "{v}"
    );
    let (status, _, body) = http(&addr, "GET", "/api/tags", &[], b"");
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["models"][0]["name"],
        "qwen"
    );
    let (status, _, body) = http(&addr, "GET", "/v1/models", &[], b"");
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"data":[{"id":"qwen"}]}"#)
    );
}

#[test]
fn a_client_that_leaves_mid_stream_stops_the_upstream_request() {
    // An answer the upstream writes slowly, a few characters every 100 ms for 8 seconds.
    let text = format!(
        r#"{{"kind":"final_answer","thought":"","content":"{}"}}"#,
        "word ".repeat(80)
    );
    let chunks: Vec<Vec<u8>> = text
        .as_bytes()
        .chunks(5)
        .map(|piece| {
            let piece = String::from_utf8_lossy(piece);
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
            format!("data: {chunk}\n\n").into_bytes()
        })
        .collect();
    let fake = serve(vec![Act::Stream(
        "text/event-stream",
        chunks,
        Duration::from_millis(100),
    )]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let mut s = TcpStream::connect(&addr).unwrap();
    let body = ask_weather(true).to_string();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read until the answer has begun to stream, then go away.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    while !String::from_utf8_lossy(&seen).contains("\"content\":\"word") {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the stream ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    drop(s);
    // Well before the upstream's 8 seconds are up, it has been cut off.
    let started = std::time::Instant::now();
    while fake.cut.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "the upstream request went on"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The answer's `content` in a plain or streamed OpenAI response.
fn content_of(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        Err(_) => body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|e| serde_json::from_str::<Value>(e).ok())
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(String::from)
            })
            .collect(),
    }
}

#[test]
fn an_answer_ends_before_the_clients_stop_sequence_and_the_turn_is_not_cut_by_it() {
    let fake = serve(vec![upstream(ANSWER)]);
    let (_p, addr) = proxy(&fake.url, &[]);
    for stream in [false, true] {
        let mut body = ask_weather(stream);
        body["stop"] = json!(["°C"]);
        let (status, _, text) = post(&addr, "/v1/chat/completions", &body);
        assert_eq!(status, 200, "{text}");
        assert_eq!(content_of(&text), "It is 4", "stream: {stream}: {text}");
        // The turn's JSON would end at the stop: the upstream is never given it.
        assert!(last_sent(&fake).get("stop").is_none());
    }
}

#[test]
fn an_answer_that_does_not_follow_the_clients_format_is_written_again_under_it() {
    let json_answer = r#"{"city":"Oslo","celsius":4}"#;
    // The first connection is the backend's look at `/props`, before the turn.
    let fake = serve(vec![
        upstream(ANSWER),
        upstream(ANSWER),
        upstream(json_answer),
    ]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"},
        "celsius": {"type": "number"}}, "required": ["city", "celsius"]});
    let mut body = ask_weather(true);
    body["response_format"] =
        json!({"type": "json_schema", "json_schema": {"name": "w", "schema": schema}});
    let (status, _, text) = post(&addr, "/v1/chat/completions", &body);
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_of(&text), json_answer, "{text}");
    // The second request carries the client's schema as the reply's.
    let sent = last_sent(&fake);
    assert_eq!(
        sent["response_format"]["json_schema"]["schema"], schema,
        "{sent}"
    );
    // A format that is no JSON Schema is the client's error.
    body["response_format"] =
        json!({"type": "json_schema", "json_schema": {"schema": {"type": 5}}});
    let (status, _, text) = post(&addr, "/v1/chat/completions", &body);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("response_format"), "{text}");
}

#[test]
fn an_ollama_format_shapes_the_answer_and_keep_alive_is_read() {
    // An answer already in the format needs no second request.
    let json_answer = r#"{"kind":"final_answer","thought":"","content":"{\"celsius\": 4}"}"#;
    let fake = serve(vec![upstream(json_answer)]);
    let (_p, addr) = proxy(&fake.url, &[]);
    let mut body = ask_weather(false);
    body["format"] = json!({"type": "object", "properties": {"celsius": {"type": "number"}}});
    body["keep_alive"] = json!(300);
    let (status, _, text) = post(&addr, "/api/chat", &body);
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["message"]["content"], "{\"celsius\": 4}", "{text}");
    let lines: Vec<String> = fake
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.lines().next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("chat/completions"))
            .count(),
        1,
        "{lines:?}"
    );
}
