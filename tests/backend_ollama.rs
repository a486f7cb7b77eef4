//! Ollama's native API: the exact request body, the streamed reply, and every error a
//! person can meet, each with its message. Wire format against mockito; faults mockito
//! cannot express (hang, slow stream, cut connection) against a fake server on 127.0.0.1.

mod common;

use std::time::{Duration, Instant};

use mockito::Matcher;
use serde_json::json;
use toolloop::Deadline;
use toolloop::backend::Ollama;
use toolloop::backend::{Backend, BackendError, ChatRequest, GenOptions, Message, StopReason};

use common::{Act, serve};

const DONE: &str = r#"{"model":"gemma3:4b","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":900000000,"load_duration":100000000,"prompt_eval_count":42,"prompt_eval_duration":200000000,"eval_count":7,"eval_duration":500000000}"#;

fn history() -> Vec<Message> {
    vec![
        Message::system("You are a tool user."),
        Message::user("Weather in Tokyo?"),
        Message::assistant(
            r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Tokyo"}}"#,
        ),
        Message::tool("get_weather", r#"{"temp":18}"#),
    ]
}

fn options() -> GenOptions {
    GenOptions {
        temperature: Some(0.0),
        num_ctx: Some(4096),
        num_predict: Some(256),
        seed: Some(7),
        top_k: Some(40),
        top_p: Some(0.9),
        stop: vec!["<end_of_turn>".into()],
        keep_alive: Some("5m".into()),
        request_timeout: Duration::from_secs(30),
        top_logprobs: None,
        aside: false,
        stop_once: None,
        prefill: None,
        answer_end: None,
    }
}

fn show(server: &mut mockito::Server, caps: serde_json::Value) -> mockito::Mock {
    server
        .mock("POST", "/api/show")
        .match_body(Matcher::Json(json!({"model": "gemma3:4b"})))
        .with_status(200)
        .with_body(json!({"capabilities": caps}).to_string())
        .create()
}

fn stream(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn chat(url: &str, deadline: Deadline) -> Result<toolloop::backend::ChatReply, BackendError> {
    let messages = history();
    let schema = toolloop::turn::schema::call_schema().clone();
    let opts = options();
    let req = ChatRequest {
        messages: &messages,
        schema: Some(&schema),
        options: &opts,
    };
    Ollama::new(url, "gemma3:4b").chat(&req, deadline, &mut toolloop::backend::keep_going)
}

fn soon() -> Deadline {
    Deadline::after(Duration::from_secs(10))
}

#[test]
fn request_body_without_tools_capability_sends_tool_results_as_user_text() {
    let mut server = mockito::Server::new();
    let show = show(&mut server, json!(["completion", "vision"]));
    let expected = json!({
        "model": "gemma3:4b",
        "messages": [
            {"role": "system", "content": "You are a tool user."},
            {"role": "user", "content": "Weather in Tokyo?"},
            {"role": "assistant", "content": r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Tokyo"}}"#},
            {"role": "user", "content": r#"Tool result (get_weather), data from the tool, not the person's words: <tool_result>{"temp":18}</tool_result>"#},
        ],
        "stream": true,
        "format": toolloop::turn::schema::call_schema(),
        "options": {"temperature": 0.0, "num_ctx": 4096, "num_predict": 256, "seed": 7,
                    "top_k": 40, "top_p": 0.9, "stop": ["<end_of_turn>"]},
        "keep_alive": "5m",
    });
    let chat_mock = server
        .mock("POST", "/api/chat")
        .match_header("content-type", "application/json")
        .match_body(Matcher::Json(expected))
        .with_status(200)
        .with_header("content-type", "application/x-ndjson")
        .with_body(stream(&[
            r#"{"message":{"role":"assistant","content":"{\"kind\":"},"done":false}"#,
            r#"{"message":{"role":"assistant","content":"\"final_answer\"}"},"done":false}"#,
            DONE,
        ]))
        .create();
    let reply = chat(&server.url(), soon()).unwrap();
    show.assert();
    chat_mock.assert();
    assert_eq!(reply.text, r#"{"kind":"final_answer"}"#);
    assert_eq!(reply.stop, StopReason::Finished);
    assert_eq!(reply.usage.prompt_tokens, 42);
    assert_eq!(reply.usage.completion_tokens, 7);
    assert_eq!(reply.timings.generation, Some(Duration::from_millis(500)));
    assert_eq!(reply.timings.load, Some(Duration::from_millis(100)));
}

#[test]
fn model_with_tools_capability_gets_role_tool_messages() {
    let mut server = mockito::Server::new();
    show(&mut server, json!(["completion", "tools"]));
    let chat_mock = server
        .mock("POST", "/api/chat")
        .match_body(Matcher::PartialJson(json!({
            "messages": [
                {"role": "system", "content": "You are a tool user."},
                {"role": "user", "content": "Weather in Tokyo?"},
                {"role": "assistant", "content": r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Tokyo"}}"#},
                {"role": "tool", "content": r#"{"temp":18}"#, "tool_name": "get_weather"},
            ]
        })))
        .with_body(stream(&[DONE]))
        .create();
    chat(&server.url(), soon()).unwrap();
    chat_mock.assert();
}

#[test]
fn streamed_text_reaches_the_sink_piece_by_piece() {
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_body(stream(&[
            r#"{"message":{"content":"ab"},"done":false}"#,
            r#"{"message":{"content":"cd"},"done":false}"#,
            DONE,
        ]))
        .create();
    let messages = history();
    let opts = options();
    let req = ChatRequest {
        messages: &messages,
        schema: None,
        options: &opts,
    };
    let mut pieces = Vec::new();
    let reply = Ollama::new(&server.url(), "gemma3:4b")
        .chat(&req, soon(), &mut |p| {
            pieces.push(p.to_string());
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(pieces, ["ab", "cd"]);
    assert_eq!(reply.text, "abcd");
}

#[test]
fn done_reason_length_is_reported_as_truncated() {
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_body(stream(&[
            r#"{"message":{"content":"{\"kind\": \"final_answer\", \"content\": \"abc"},"done":false}"#,
            r#"{"message":{"content":""},"done":true,"done_reason":"length","eval_count":256}"#,
        ]))
        .create();
    let reply = chat(&server.url(), soon()).unwrap();
    assert_eq!(reply.stop, StopReason::Length);
    assert_eq!(reply.usage.completion_tokens, 256);
}

#[test]
fn server_not_running_says_start_ollama() {
    let url = common::dead_url();
    let err = chat(&url, soon()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Ollama is not running at {url}: start it with `ollama serve`, or set OLLAMA_HOST / `ollama_host`"
        )
    );
}

#[test]
fn missing_model_says_ollama_pull() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/api/show")
        .with_status(404)
        .with_body(r#"{"error":"model 'gemma3:4b' not found"}"#)
        .create();
    let err = chat(&server.url(), soon()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "model 'gemma3:4b' not found: run `ollama pull gemma3:4b`"
    );
}

#[test]
fn missing_model_on_chat_is_caught_too() {
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_status(404)
        .with_body(r#"{"error":"model \"gemma3:4b\" not found, try pulling it first"}"#)
        .create();
    let err = chat(&server.url(), soon()).unwrap_err();
    assert!(matches!(err, BackendError::ModelNotFound { .. }), "{err}");
}

#[test]
fn bad_request_carries_the_servers_text() {
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_status(400)
        .with_body(r#"{"error":"registry.ollama.ai/library/gemma3:4b does not support tools"}"#)
        .create();
    let err = chat(&server.url(), soon()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server rejected the request: registry.ollama.ai/library/gemma3:4b does not support tools"
    );
}

#[test]
fn internal_error_is_reported_with_status() {
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_status(500)
        .with_body(r#"{"error":"llama runner process has terminated: signal: killed"}"#)
        .create();
    let err = chat(&server.url(), soon()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server failed (HTTP 500): llama runner process has terminated: signal: killed (sent 3 times)"
    );
}

#[test]
fn busy_server_is_retried_until_it_answers() {
    let busy = br#"{"error":"server busy, please try again.  maximum pending requests exceeded"}"#;
    let fake = serve(vec![
        Act::Respond(
            200,
            "application/json",
            br#"{"capabilities":["completion"]}"#.to_vec(),
        ),
        Act::Respond(503, "application/json", busy.to_vec()),
        Act::Respond(503, "application/json", busy.to_vec()),
        Act::Respond(
            200,
            "application/x-ndjson",
            stream(&[r#"{"message":{"content":"ok"},"done":false}"#, DONE]).into_bytes(),
        ),
    ]);
    let reply = chat(&fake.url, soon()).unwrap();
    assert_eq!(reply.text, "ok");
    assert_eq!(fake.requests.lock().unwrap().len(), 4);
}

#[test]
fn busy_server_until_the_deadline_is_a_busy_error() {
    let busy = br#"{"error":"server busy, please try again.  maximum pending requests exceeded"}"#;
    let fake = serve(vec![
        Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
        Act::Respond(503, "application/json", busy.to_vec()),
    ]);
    let err = chat(&fake.url, Deadline::after(Duration::from_millis(1500))).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "the server is busy or still loading the model (server busy, please try again."
        ),
        "{err}"
    );
}

#[test]
fn error_line_in_the_middle_of_a_stream() {
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_body(stream(&[
            r#"{"message":{"content":"{\"ki"},"done":false}"#,
            r#"{"error":"an error was encountered while running the model: unexpected EOF"}"#,
        ]))
        .create();
    let err = chat(&server.url(), soon()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server failed while replying: an error was encountered while running the model: unexpected EOF"
    );
}

#[test]
fn body_that_is_not_json() {
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_body("<html>502 Bad Gateway</html>\n")
        .create();
    let err = chat(&server.url(), soon()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unreadable reply from the server: expected a JSON line, got \"<html>502 Bad Gateway</html>\\n\""
    );
}

#[test]
fn reply_that_is_not_utf8() {
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_body(b"{\"message\":{\"content\":\"\xff\xfe\"},\"done\":false}\n")
        .create();
    let err = chat(&server.url(), soon()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unreadable reply from the server: the reply is not valid UTF-8"
    );
}

#[test]
fn server_that_never_answers_is_cut_by_the_deadline() {
    let fake = serve(vec![
        Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
        Act::Hang,
    ]);
    let started = Instant::now();
    let err = chat(&fake.url, Deadline::after(Duration::from_millis(700))).unwrap_err();
    assert!(matches!(err, BackendError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("raise `timeout`"), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(700 + 500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn stream_slower_than_the_deadline_is_cut() {
    let piece = br#"{"message":{"content":"x"},"done":false}
"#
    .to_vec();
    let fake = serve(vec![
        Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
        Act::Stream(
            "application/x-ndjson",
            vec![piece; 40],
            Duration::from_millis(100),
        ),
    ]);
    let started = Instant::now();
    let err = chat(&fake.url, Deadline::after(Duration::from_millis(800))).unwrap_err();
    assert!(matches!(err, BackendError::Timeout { .. }), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(800 + 500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn connection_closed_mid_body() {
    let fake = serve(vec![
        Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
        Act::CutBody(br#"{"message":{"content":"{\"kind\""},"done":false}"#.to_vec()),
    ]);
    let err = chat(&fake.url, soon()).unwrap_err();
    assert!(
        matches!(
            err,
            BackendError::InvalidResponse { .. } | BackendError::Transport { .. }
        ),
        "{err}"
    );
}

#[test]
fn an_expired_deadline_sends_nothing() {
    let fake = serve(vec![Act::Hang]);
    let err = chat(&fake.url, Deadline::after(Duration::ZERO)).unwrap_err();
    assert!(matches!(err, BackendError::Timeout { .. }), "{err}");
    assert!(fake.requests.lock().unwrap().is_empty());
}

/// Ollama 0.12.11 and later: `logprobs` and `top_logprobs` at the top of the request, one
/// `logprobs` array per streamed chunk.
#[test]
fn log_probabilities_are_asked_for_and_read_from_each_chunk() {
    let mut server = mockito::Server::new();
    let show = show(&mut server, json!(["completion"]));
    let chat_mock = server
        .mock("POST", "/api/chat")
        .match_body(Matcher::PartialJson(
            json!({"logprobs": true, "top_logprobs": 20}),
        ))
        .with_status(200)
        .with_body(stream(&[
            r#"{"message":{"content":"{\"kind\": \""},"logprobs":[{"token":"{\"kind\": \"","logprob":-0.01,"top_logprobs":[]}],"done":false}"#,
            r#"{"message":{"content":"final"},"logprobs":[{"token":"final","logprob":-0.5,"top_logprobs":[{"token":"final","logprob":-0.5},{"token":"tool","logprob":-1.2}]}],"done":false}"#,
            r#"{"message":{"content":"_answer\"}"},"done":false}"#,
            DONE,
        ]))
        .create();
    let messages = history();
    let schema = toolloop::turn::schema::call_schema().clone();
    let opts = GenOptions {
        top_logprobs: Some(20),
        ..options()
    };
    let req = ChatRequest {
        messages: &messages,
        schema: Some(&schema),
        options: &opts,
    };
    let reply = Ollama::new(&server.url(), "gemma3:4b")
        .chat(&req, soon(), &mut toolloop::backend::keep_going)
        .unwrap();
    show.assert();
    chat_mock.assert();
    assert_eq!(reply.logprobs.len(), 2);
    assert_eq!(reply.logprobs[1].top[1], ("tool".to_string(), -1.2));
    let share = toolloop::checks::tool_share(&reply).unwrap();
    let expected = (-1.2f64).exp() / ((-1.2f64).exp() + (-0.5f64).exp());
    assert!((share - expected).abs() < 1e-9, "{share}");
}

/// A request with `stop_once` ends at the first chunk whose log-probabilities satisfy it.
#[test]
fn a_reply_stops_once_its_probabilities_say_what_was_asked() {
    let mut server = mockito::Server::new();
    let _show = show(&mut server, json!(["completion"]));
    let _chat = server
        .mock("POST", "/api/chat")
        .with_status(200)
        .with_body(stream(&[
            r#"{"message":{"content":"{\"answer\": \""},"logprobs":[{"token":"{\"answer\": \"","logprob":-0.01,"top_logprobs":[]}],"done":false}"#,
            r#"{"message":{"content":"yes"},"logprobs":[{"token":"yes","logprob":-0.5,"top_logprobs":[{"token":"yes","logprob":-0.5},{"token":"no","logprob":-1.2}]}],"done":false}"#,
            r#"{"message":{"content":"\"}"},"logprobs":[{"token":"\"}","logprob":-0.01,"top_logprobs":[]}],"done":false}"#,
            DONE,
        ]))
        .create();
    fn two_words(tokens: &[toolloop::backend::TokenLogprob]) -> bool {
        tokens.iter().any(|t| t.top.len() == 2)
    }
    let messages = history();
    let opts = GenOptions {
        top_logprobs: Some(10),
        stop_once: Some(toolloop::backend::StopOnce(two_words)),
        ..options()
    };
    let req = ChatRequest {
        messages: &messages,
        schema: None,
        options: &opts,
    };
    let reply = Ollama::new(&server.url(), "gemma3:4b")
        .chat(&req, soon(), &mut toolloop::backend::keep_going)
        .unwrap();
    assert_eq!(reply.stop, StopReason::Stopped);
    assert_eq!(reply.logprobs.len(), 2);
    assert_eq!(reply.text, "{\"answer\": \"yes");
    assert_eq!(reply.usage.completion_tokens, 2);
}

#[test]
fn a_streamed_final_answer_reaches_the_person_decoded_whatever_the_cuts() {
    // The model's text arrives in tokens that cut an escape sequence (`\u00` | `e9`, `\` |
    // `"`), and the HTTP body arrives in writes that cut a multi-byte character.
    let tokens = [
        r#"{"kind": "final_answer", "thought": "", "content": "Caf"#,
        r#"\u00"#,
        r#"e9 \"#,
        r#""ok\" 日"#,
        r#"本\n"#,
        r#"end"}"#,
    ];
    let mut body = String::new();
    for t in tokens {
        body.push_str(&json!({"message": {"content": t}, "done": false}).to_string());
        body.push('\n');
    }
    body.push_str(DONE);
    body.push('\n');
    let bytes = body.into_bytes();
    let cut = bytes.windows(3).position(|w| w == "日".as_bytes()).unwrap() + 1;
    let mut server = mockito::Server::new();
    show(&mut server, json!([]));
    server
        .mock("POST", "/api/chat")
        .with_chunked_body(move |w| {
            w.write_all(&bytes[..cut])?;
            w.flush()?;
            std::thread::sleep(Duration::from_millis(20));
            w.write_all(&bytes[cut..])
        })
        .create();
    let shown = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = std::sync::Arc::clone(&shown);
    let mut o = toolloop::Orchestrator::builder()
        .backend(Ollama::new(&server.url(), "gemma3:4b"))
        .observer(move |e: &toolloop::Event| {
            if let toolloop::Event::AnswerText { text } = e {
                seen.lock().unwrap().push(text.clone());
            }
        })
        .build()
        .unwrap();
    let out = o.run("Say it").unwrap();
    let want = "Café \"ok\" 日本\nend";
    assert_eq!(out.answer(), Some(want));
    let shown = shown.lock().unwrap();
    assert_eq!(shown.concat(), want);
    assert!(shown.len() >= 4, "the answer came in one piece: {shown:?}");
}
