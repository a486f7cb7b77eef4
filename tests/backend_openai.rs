//! The OpenAI-compatible backend's wire format and error paths (mockito and the fake
//! server). The real llama-server test lives in `tests/real_model.rs`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mockito::Matcher;
use serde_json::json;
use toolloop::Deadline;
use toolloop::backend::OpenAi;
use toolloop::backend::{Backend, BackendError, ChatRequest, GenOptions, Message, StopReason};

fn sse(events: &[serde_json::Value]) -> String {
    let mut s: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    s.push_str("data: [DONE]\n\n");
    s
}

fn chunk(text: &str) -> serde_json::Value {
    json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

fn run(backend: &mut OpenAi) -> Result<toolloop::backend::ChatReply, BackendError> {
    let messages = vec![
        Message::system("sys"),
        Message::user("q"),
        Message::assistant("{}"),
        Message::tool("calculator", "50"),
    ];
    let schema = json!({"type": "object"});
    let opts = GenOptions {
        temperature: Some(0.0),
        num_predict: Some(128),
        seed: Some(1),
        ..GenOptions::default()
    };
    let req = ChatRequest {
        messages: &messages,
        schema: Some(&schema),
        options: &opts,
    };
    backend.chat(
        &req,
        Deadline::after(Duration::from_secs(10)),
        &mut toolloop::backend::keep_going,
    )
}

#[test]
fn request_body_and_bearer_key() {
    let mut server = mockito::Server::new();
    let m = server
        .mock("POST", "/v1/chat/completions")
        .match_header("authorization", "Bearer sk-test")
        .match_header("accept", "text/event-stream")
        .match_body(Matcher::Json(json!({
            "model": "qwen",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "{}"},
                {"role": "user", "content": "Tool result (calculator), data from the tool, not the person's words: <tool_result>50</tool_result>"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "turn", "schema": {"type": "object"}}},
            "temperature": 0.0,
            "max_tokens": 128,
            "seed": 1,
        })))
        .with_header("content-type", "text/event-stream")
        .with_body(sse(&[chunk("{}")]))
        .create();
    let mut b = OpenAi::new(
        &format!("{}/v1/", server.url()),
        "qwen",
        Some("sk-test".into()),
    );
    run(&mut b).unwrap();
    m.assert();
}

#[test]
fn no_key_means_no_authorization_header() {
    let mut server = mockito::Server::new();
    let m = server
        .mock("POST", "/v1/chat/completions")
        .match_header("authorization", Matcher::Missing)
        .with_header("content-type", "text/event-stream")
        .with_body(sse(&[chunk("{}")]))
        .create();
    run(&mut OpenAi::new(
        &format!("{}/v1", server.url()),
        "qwen",
        None,
    ))
    .unwrap();
    m.assert();
}

#[test]
fn llama_server_stream_with_usage_and_cache_timings() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "text/event-stream")
        .with_body(sse(&[
            chunk("{\"kind\":"),
            chunk("\"final_answer\"}"),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 287, "completion_tokens": 12, "total_tokens": 299},
                   "timings": {"cache_n": 255, "prompt_n": 32, "prompt_ms": 410.5,
                               "predicted_n": 12, "predicted_ms": 400.0}}),
        ]))
        .create();
    let reply = run(&mut OpenAi::new(&format!("{}/v1", server.url()), "m", None)).unwrap();
    assert_eq!(reply.text, r#"{"kind":"final_answer"}"#);
    assert_eq!(reply.stop, StopReason::Finished);
    assert_eq!(reply.usage.prompt_tokens, 287);
    assert_eq!(reply.usage.cached_prompt_tokens, Some(255));
    assert_eq!(reply.usage.completion_tokens, 12);
    assert_eq!(reply.timings.generation, Some(Duration::from_millis(400)));
}

/// llama-server left out of the content a backtick the model sampled first, while its
/// `logprobs` carried it (Qwen2.5-Coder 0.5B, everyday request "What is inflation, in
/// simple words?"): the tokens must still line up with the text, or p(tool) cannot be
/// read and the call is never questioned.
#[test]
fn a_sampled_token_missing_from_the_content_does_not_shift_the_probabilities() {
    let lp = |token: &str, top: serde_json::Value| json!({"token": token, "logprob": -0.1, "top_logprobs": top});
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "text/event-stream")
        .with_body(sse(&[
            json!({"choices": [{"index": 0, "delta": {"content": "{\"kind\": \""},
                   "logprobs": {"content": [lp("`", json!([])), lp("{\"kind\": \"", json!([]))]}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "tool_call\"}"},
                   "logprobs": {"content": [lp("tool_call\"}", json!([
                       {"token": "tool_call\"}", "logprob": -0.1},
                       {"token": "final_answer", "logprob": -2.0}]))]}}]}),
        ]))
        .create();
    let reply = run(&mut OpenAi::new(&format!("{}/v1", server.url()), "m", None)).unwrap();
    assert_eq!(reply.text, r#"{"kind": "tool_call"}"#);
    let p = toolloop::checks::tool_share(&reply).expect("p(tool) is read");
    let expected = (-0.1f64).exp() / ((-0.1f64).exp() + (-2.0f64).exp());
    assert!((p - expected).abs() < 1e-9, "{p}");
}

/// A request with `stop_once` ends at the first token whose log-probabilities satisfy it,
/// as the fit question does: llama-server streams the fence Qwen2.5-Coder 0.5B samples
/// first with no content but with its probabilities, and there the answer is read.
#[test]
fn a_reply_stops_once_its_probabilities_say_what_was_asked() {
    let lp = |token: &str, top: serde_json::Value| json!({"token": token, "logprob": -0.6, "top_logprobs": top});
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "text/event-stream")
        .with_body(sse(&[
            json!({"choices": [{"index": 0, "delta": {},
                   "logprobs": {"content": [lp("```", json!([
                       {"token": "Yes", "logprob": -0.6}, {"token": "No", "logprob": -1.1}]))]}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "{\"answer\": \"yes\"}"},
                   "logprobs": {"content": [lp("{\"answer\": \"yes\"}", json!([]))]}}]}),
        ]))
        .create();
    fn two_words(tokens: &[toolloop::backend::TokenLogprob]) -> bool {
        tokens.iter().any(|t| t.top.len() == 2)
    }
    let messages = vec![Message::user("q")];
    let opts = GenOptions {
        top_logprobs: Some(10),
        stop_once: Some(toolloop::backend::StopOnce(two_words)),
        ..GenOptions::default()
    };
    let req = ChatRequest {
        messages: &messages,
        schema: None,
        options: &opts,
    };
    let reply = OpenAi::new(&format!("{}/v1", server.url()), "m", None)
        .chat(
            &req,
            Deadline::after(Duration::from_secs(10)),
            &mut toolloop::backend::keep_going,
        )
        .unwrap();
    assert_eq!(reply.stop, StopReason::Stopped);
    assert_eq!(reply.logprobs.len(), 1);
    assert_eq!(reply.text, "");
    // No usage came: the tokens counted are the ones streamed.
    assert_eq!(reply.usage.completion_tokens, 1);
}

#[test]
fn finish_reason_length_is_truncation() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "text/event-stream")
        .with_body(sse(&[
            chunk("{\"kind\": \"final"),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        ]))
        .create();
    let reply = run(&mut OpenAi::new(&format!("{}/v1", server.url()), "m", None)).unwrap();
    assert_eq!(reply.stop, StopReason::Length);
}

#[test]
fn non_streaming_reply_is_read_too() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "application/json")
        .with_body(
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"a\":1}"},
                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 3,
                             "prompt_tokens_details": {"cached_tokens": 4}}})
            .to_string(),
        )
        .create();
    let reply = run(&mut OpenAi::new(&format!("{}/v1", server.url()), "m", None)).unwrap();
    assert_eq!(reply.text, "{\"a\":1}");
    assert_eq!(reply.usage.cached_prompt_tokens, Some(4));
}

#[test]
fn openai_error_body_shape() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_status(400)
        .with_body(r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#)
        .create();
    let err = run(&mut OpenAi::new(&format!("{}/v1", server.url()), "m", None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server rejected the request: the request exceeds the available context size"
    );
}

#[test]
fn unauthorized_points_at_the_key() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_status(401)
        .with_body(r#"{"error":{"message":"Invalid API Key","type":"authentication_error"}}"#)
        .create();
    let err = run(&mut OpenAi::new(
        &format!("{}/v1", server.url()),
        "m",
        Some("bad".into()),
    ))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server refused the credentials (HTTP 401): Invalid API Key; check OPENAI_API_KEY or --key-file"
    );
}

#[test]
fn unknown_model_404() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_status(404)
        .with_body(r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error"}}"#)
        .create();
    let err = run(&mut OpenAi::new(
        &format!("{}/v1", server.url()),
        "gpt-9",
        None,
    ))
    .unwrap_err();
    assert!(matches!(err, BackendError::ModelNotFound { .. }), "{err}");
    assert!(err.to_string().contains("/v1/models"), "{err}");
}

#[test]
fn wrong_base_url_404_says_so() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/chat/completions")
        .with_status(404)
        .with_body("Not Found")
        .create();
    let err = run(&mut OpenAi::new(&server.url(), "m", None)).unwrap_err();
    assert!(err.to_string().contains("usually ends in /v1"), "{err}");
}

#[test]
fn error_event_mid_stream() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "text/event-stream")
        .with_body(format!(
            "data: {}\n\ndata: {}\n\n",
            chunk("{"),
            json!({"error": {"message": "slot unavailable", "code": 503}})
        ))
        .create();
    let err = run(&mut OpenAi::new(&format!("{}/v1", server.url()), "m", None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server failed while replying: slot unavailable"
    );
}

#[test]
fn not_running_names_the_url() {
    let url = format!("{}/v1", common::dead_url());
    let err = run(&mut OpenAi::new(&url, "m", None)).unwrap_err();
    assert!(matches!(err, BackendError::NotRunning { .. }), "{err}");
    assert!(err.to_string().contains(&url), "{err}");
    let err = OpenAi::new(&url, "m", None)
        .preflight(Deadline::after(Duration::from_secs(5)))
        .unwrap_err();
    assert!(matches!(err, BackendError::NotRunning { .. }), "{err}");
}

/// A server that streams deltas without end used to grow the client to gigabytes within
/// the deadline; a streamed reply is capped like a whole one.
#[test]
fn an_endless_stream_is_cut_at_the_reply_cap() {
    let piece = "x".repeat(1 << 20);
    let event = format!("data: {}\n\n", chunk(&piece)).into_bytes();
    let fake = common::serve(vec![common::Act::Stream(
        "text/event-stream",
        vec![event; 70],
        Duration::ZERO,
    )]);
    let mut backend = OpenAi::new(&format!("{}/v1", fake.url), "m", None);
    match run(&mut backend) {
        Err(BackendError::InvalidResponse { detail }) => {
            assert!(detail.contains("larger than 64 MiB"), "{detail}")
        }
        other => panic!("{:?}", other.map(|r| r.text.len())),
    }
}

/// Every body posted to `/v1/chat/completions`, each answered with an empty object.
fn posted(server: &mut mockito::Server) -> (mockito::Mock, Arc<Mutex<Vec<serde_json::Value>>>) {
    let bodies: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let seen = Arc::clone(&bodies);
    let m = server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "text/event-stream")
        .with_body_from_request(move |req| {
            let body = serde_json::from_slice(req.body().unwrap()).unwrap();
            seen.lock().unwrap().push(body);
            sse(&[chunk("{}")]).into_bytes()
        })
        .create();
    (m, bodies)
}

/// One request of `b`, a question aside or a turn.
fn ask(b: &mut OpenAi, aside: bool) {
    ask_with(b, "q", aside);
}

/// One request of `b` whose message is `content`.
fn ask_with(b: &mut OpenAi, content: &str, aside: bool) {
    let messages = vec![Message::user(content)];
    let opts = GenOptions {
        aside,
        ..GenOptions::default()
    };
    let req = ChatRequest {
        messages: &messages,
        schema: None,
        options: &opts,
    };
    b.chat(
        &req,
        Deadline::after(Duration::from_secs(10)),
        &mut toolloop::backend::keep_going,
    )
    .unwrap();
}

/// A question aside (the fit question) goes to llama-server's last slot, learned from
/// `/props` once, so the slot holding the run's turns keeps them; a turn goes where the
/// server puts it.
#[test]
fn a_question_aside_goes_to_the_last_slot_of_a_server_that_has_several() {
    let mut server = mockito::Server::new();
    let props = server
        .mock("GET", "/props")
        .with_body(json!({"total_slots": 4, "chat_template": "…"}).to_string())
        .expect(1)
        .create();
    let (_m, bodies) = posted(&mut server);
    let mut b = OpenAi::new(&format!("{}/v1", server.url()), "qwen", None);
    ask(&mut b, true);
    // A clone shares what the first learned: `/props` is read once.
    ask(&mut b.clone(), true);
    ask(&mut b, false);
    props.assert();
    let field = |name: &str| -> Vec<_> {
        let bodies = bodies.lock().unwrap();
        bodies.iter().map(|b| b.get(name).cloned()).collect()
    };
    assert_eq!(field("id_slot"), [Some(json!(3)), Some(json!(3)), None]);
    // A question aside is evaluated whole, so its answer does not move with what the slot
    // had cached; a turn keeps the cache.
    assert_eq!(
        field("cache_prompt"),
        [Some(json!(false)), Some(json!(false)), None]
    );
}

/// Where llama-server answers `GET /slots`, a question aside names its slot only while
/// the server says that slot is idle: another process's requests are not counted by this
/// one, and questions that named a busy slot waited in line for it. A `/slots` that does
/// not answer names no slot.
///
/// Where the aside slot holds the latest task of the idle slots (the run's turn, which
/// llama-server put there because an earlier question aside left the same system prompt
/// in it), the question goes to the idle slot used longest ago, so that the turn keeps
/// its tokens.
#[test]
fn a_question_aside_names_an_idle_slot_that_does_not_hold_the_runs_turn() {
    let slot = |id: u32, busy: bool, task: Option<u64>| match task {
        Some(task) => json!({"id": id, "is_processing": busy, "id_task": task}),
        None => json!({"id": id, "is_processing": busy}),
    };
    for (slots, named) in [
        (
            Some(json!([slot(0, true, None), slot(1, false, None)])),
            Some(1),
        ),
        (
            Some(json!([slot(0, false, None), slot(1, true, None)])),
            None,
        ),
        (None, None),
        // The turn is in slot 0: the aside slot is the one to use.
        (
            Some(json!([slot(0, false, Some(9)), slot(1, false, Some(5))])),
            Some(1),
        ),
        // The turn is in the aside slot: the question goes elsewhere.
        (
            Some(json!([slot(0, false, Some(5)), slot(1, false, Some(9))])),
            Some(0),
        ),
        (
            Some(json!([
                slot(0, false, Some(5)),
                slot(1, false, None),
                slot(2, false, Some(9))
            ])),
            Some(1),
        ),
        // Another process's request is under way: the latest idle task is this run's.
        (
            Some(json!([slot(0, true, Some(12)), slot(1, false, Some(9))])),
            None,
        ),
        (
            Some(json!([
                slot(0, true, Some(12)),
                slot(1, false, Some(5)),
                slot(2, false, Some(9))
            ])),
            Some(1),
        ),
    ] {
        let mut server = mockito::Server::new();
        let n = slots
            .as_ref()
            .and_then(|s| s.as_array().map(Vec::len))
            .unwrap_or(2);
        let _props = server
            .mock("GET", "/props")
            .with_body(json!({"total_slots": n, "endpoint_slots": true}).to_string())
            .create();
        let s = server.mock("GET", "/slots");
        let _s = match &slots {
            Some(body) => s.with_body(body.to_string()).expect(1).create(),
            None => s.with_status(501).expect(1).create(),
        };
        let (_m, bodies) = posted(&mut server);
        let mut b = OpenAi::new(&format!("{}/v1", server.url()), "qwen", None);
        ask(&mut b, true);
        let body = bodies.lock().unwrap()[0].clone();
        assert_eq!(
            body.get("id_slot").cloned(),
            named.map(|n| json!(n)),
            "{slots:?}: {body}"
        );
        // A turn never asks whether the slot is free.
        ask(&mut b, false);
        _s.assert();
    }
}

/// A server without `/props` (vLLM, LM Studio, Ollama's `/v1`), or llama-server with one
/// slot, gets no `id_slot`.
#[test]
fn a_question_aside_names_no_slot_where_the_server_has_one_or_does_not_say() {
    for props in [None, Some(json!({"total_slots": 1}))] {
        let mut server = mockito::Server::new();
        let p = server.mock("GET", "/props");
        let _p = match &props {
            Some(body) => p.with_body(body.to_string()).create(),
            None => p.with_status(404).create(),
        };
        let (_m, bodies) = posted(&mut server);
        let mut b = OpenAi::new(&format!("{}/v1", server.url()), "qwen", None);
        ask(&mut b, true);
        let body = bodies.lock().unwrap()[0].clone();
        assert!(body.get("id_slot").is_none(), "{body}");
        // Only llama-server is sent its own `cache_prompt`.
        let llama = props.is_some();
        assert_eq!(body.get("cache_prompt").is_some(), llama, "{body}");
    }
}

/// While another request of the process to the server is under way, a question aside
/// names no slot: questions waiting for a named slot that was busy stalled llama-server.
#[test]
fn a_question_aside_names_no_slot_while_another_request_is_under_way() {
    let mut server = mockito::Server::new();
    let _props = server
        .mock("GET", "/props")
        .with_body(json!({"total_slots": 4}).to_string())
        .create();
    let bodies: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let seen = Arc::clone(&bodies);
    let _aside = server
        .mock("POST", "/v1/chat/completions")
        .match_body(Matcher::PartialJson(
            json!({"messages": [{"role": "user", "content": "aside"}]}),
        ))
        .with_header("content-type", "text/event-stream")
        .with_body_from_request(move |req| {
            seen.lock()
                .unwrap()
                .push(serde_json::from_slice(req.body().unwrap()).unwrap());
            sse(&[chunk("{}")]).into_bytes()
        })
        .create();
    let seen = Arc::clone(&bodies);
    let _turn = server
        .mock("POST", "/v1/chat/completions")
        .match_body(Matcher::PartialJson(
            json!({"messages": [{"role": "user", "content": "q"}]}),
        ))
        .with_header("content-type", "text/event-stream")
        .with_chunked_body(move |w| {
            // The turn is held open until the question aside has come.
            let waited = std::time::Instant::now();
            while seen.lock().unwrap().is_empty() && waited.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(10));
            }
            w.write_all(sse(&[chunk("{}")]).as_bytes())
        })
        .create();
    let base = format!("{}/v1", server.url());
    let turn = {
        let base = base.clone();
        std::thread::spawn(move || ask(&mut OpenAi::new(&base, "qwen", None), false))
    };
    std::thread::sleep(Duration::from_millis(300));
    let mut b = OpenAi::new(&base, "qwen", None);
    ask_with(&mut b, "aside", true);
    turn.join().unwrap();
    let body = bodies.lock().unwrap()[0].clone();
    assert!(body.get("id_slot").is_none(), "{body}");
    // Alone again, it names the slot.
    ask_with(&mut b, "aside", true);
    assert_eq!(bodies.lock().unwrap()[1]["id_slot"], 3);
}

/// One turn of `b` given the beginning `prefill`, its reply the text.
fn continue_with(b: &mut OpenAi, prefill: &str) -> String {
    let messages = vec![Message::user("Paris and Rome?")];
    let opts = GenOptions {
        prefill: Some(prefill.into()),
        ..GenOptions::default()
    };
    let req = ChatRequest {
        messages: &messages,
        schema: Some(&json!({"type": "object"})),
        options: &opts,
    };
    b.chat(
        &req,
        Deadline::after(Duration::from_secs(10)),
        &mut toolloop::backend::keep_going,
    )
    .unwrap()
    .text
}

/// A turn's beginning goes to llama-server as the assistant's message to continue, and
/// the reply's text begins with it whether or not the stream sends it again. Another
/// server would start the schema over after it, so it is asked for a whole reply.
#[test]
fn a_reply_is_continued_only_by_llama_server() {
    let begun = r#"{"calls":[{"city":"Paris"}"#;
    for (props, echoed) in [(true, false), (true, true), (false, false)] {
        let mut server = mockito::Server::new();
        let p = server.mock("GET", "/props");
        let _p = match props {
            true => p.with_body(json!({"total_slots": 1}).to_string()).create(),
            false => p.with_status(404).create(),
        };
        let rest = r#", {"city":"Rome"}]}"#;
        let streamed = match echoed {
            true => sse(&[chunk(begun), chunk(rest)]),
            false => sse(&[chunk(rest)]),
        };
        let _m = server
            .mock("POST", "/v1/chat/completions")
            .match_body(Matcher::AllOf(vec![
                Matcher::Regex(r#""role":"assistant""#.into()),
                Matcher::PartialJson(
                    json!({"continue_final_message": true, "add_generation_prompt": false}),
                ),
            ]))
            .with_header("content-type", "text/event-stream")
            .with_body(streamed)
            .expect(usize::from(props))
            .create();
        let whole = r#"{"calls":[{"city":"Paris"},{"city":"Rome"}]}"#;
        let _w = server
            .mock("POST", "/v1/chat/completions")
            .with_header("content-type", "text/event-stream")
            .with_body(sse(&[chunk(whole)]))
            .create();
        let mut b = OpenAi::new(&format!("{}/v1", server.url()), "qwen", None);
        let text = continue_with(&mut b, begun);
        match props {
            true => assert_eq!(text, format!("{begun}{rest}")),
            false => assert_eq!(text, whole),
        }
        _m.assert();
    }
}

/// A beginning the server's grammar refuses (llama-server answers 400 before it
/// generates) costs no turn: the whole reply is asked for instead.
#[test]
fn a_beginning_the_server_refuses_is_asked_for_whole() {
    let mut server = mockito::Server::new();
    let _p = server
        .mock("GET", "/props")
        .with_body(json!({"total_slots": 1}).to_string())
        .create();
    let refused = server
        .mock("POST", "/v1/chat/completions")
        .match_body(Matcher::Regex(r#""role":"assistant""#.into()))
        .with_status(400)
        .with_body(
            json!({"error": {"code": 400, "message": "Failed to initialize samplers: std::exception"}})
                .to_string(),
        )
        .expect(1)
        .create();
    let whole = r#"{"calls":[{"city":"Paris"},{"city":"Rome"}]}"#;
    let asked = server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "text/event-stream")
        .with_body(sse(&[chunk(whole)]))
        .expect(1)
        .create();
    let mut b = OpenAi::new(&format!("{}/v1", server.url()), "qwen", None);
    assert_eq!(continue_with(&mut b, r#"{"calls":[{"town""#), whole);
    refused.assert();
    asked.assert();
}

/// A server's `/props` (llama-server with one slot, or, where `llama` is false, a 404 as
/// another OpenAI-compatible server gives) and its model list; kept alive while the
/// returned mocks are.
fn served(server: &mut mockito::Server, llama: bool) -> [mockito::Mock; 2] {
    let p = server.mock("GET", "/props");
    let props = match llama {
        true => p.with_body(json!({"total_slots": 1}).to_string()).create(),
        false => p.with_status(404).create(),
    };
    let models = server
        .mock("GET", "/v1/models")
        .with_body(json!({"data": [{"id": "qwen"}]}).to_string())
        .create();
    [props, models]
}

/// A backend for `server` after its preflight, which reads whether it is llama-server.
fn preflighted(server: &mockito::Server) -> OpenAi {
    let mut b = OpenAi::new(&format!("{}/v1", server.url()), "qwen", None);
    b.preflight(Deadline::after(Duration::from_secs(10)))
        .unwrap();
    b
}

/// One streamed reply to a turn under `schema`, from a server that is llama-server or not:
/// on llama-server the request must ask for the timings with every token.
fn timed_reply(
    llama: bool,
    streamed: &str,
    messages: &[Message],
    schema: &toolloop::turn::schema::CallSchema,
    opts: &GenOptions,
) -> toolloop::backend::ChatReply {
    let mut server = mockito::Server::new();
    let _served = served(&mut server, llama);
    let timed = server
        .mock("POST", "/v1/chat/completions")
        .match_body(Matcher::PartialJson(json!({"timings_per_token": true})))
        .with_header("content-type", "text/event-stream")
        .with_body(streamed)
        .expect(usize::from(llama))
        .create();
    let _other = server
        .mock("POST", "/v1/chat/completions")
        .with_header("content-type", "text/event-stream")
        .with_body(streamed)
        .create();
    let reply = turn_reply(&server, messages, schema, opts);
    timed.assert();
    reply
}

/// One turn under `schema` asked of `server`'s backend after its preflight.
fn turn_reply(
    server: &mockito::Server,
    messages: &[Message],
    schema: &toolloop::turn::schema::CallSchema,
    opts: &GenOptions,
) -> toolloop::backend::ChatReply {
    let req = ChatRequest {
        messages,
        schema: Some(schema.as_value()),
        options: opts,
    };
    preflighted(server)
        .chat(
            &req,
            Deadline::after(Duration::from_secs(10)),
            &mut toolloop::backend::keep_going,
        )
        .unwrap()
}

/// A chunk of `text` with llama-server's timings after `predicted` tokens.
fn timed(text: &str, predicted: u64) -> serde_json::Value {
    let mut c = chunk(text);
    c["timings"] = json!({"prompt_n": 5, "cache_n": 300, "predicted_n": predicted});
    c
}

/// An answer's reply ends where its content closes, on llama-server: what the schema
/// forces after it (an empty thought, the object's close) is written by the client, not
/// generated a token at a time, and the counts come from the timings the server was
/// asked to send with every token. Another server writes the rest itself.
#[test]
fn an_answer_ends_where_its_content_closes_on_llama_server() {
    let whole = r#"{"kind": "final_answer", "content": "Paris", "thought": ""}"#;
    let streamed = sse(&[
        timed(r#"{"kind": "final_answer", "content": "Pa"#, 9),
        timed(r#"ris","#, 10),
        timed(r#" "thought": ""}"#, 15),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 305, "completion_tokens": 16}}),
    ]);
    let schema = toolloop::turn::schema::CallSchema::answer_only_deciding(
        toolloop::turn::schema::Decide::Probability,
    );
    let opts = GenOptions {
        answer_end: schema.answer_end(),
        ..GenOptions::default()
    };
    let messages = vec![Message::user("The capital of France?")];
    for llama in [true, false] {
        let reply = timed_reply(llama, &streamed, &messages, &schema, &opts);
        assert_eq!(reply.text, whole);
        assert_eq!(reply.stop, toolloop::backend::StopReason::Finished);
        let counted = (reply.usage.prompt_tokens, reply.usage.completion_tokens);
        match llama {
            true => assert_eq!(counted, (305, 10), "the counts at the content's end"),
            false => assert_eq!(counted, (305, 16)),
        }
    }
}

/// On llama-server a turn is sent begun at its kind (`{"kind": "`, what the schema forces
/// before the model's first choice): the text streamed to the sink and the reply's text
/// begin with it, `given` counts it, the model's probability for a call is read at the
/// first token it generated, and an answer so begun still ends where its content closes.
#[test]
fn a_turn_begun_at_its_kind_reads_the_kind_at_the_first_token_generated() {
    let lp = |token: &str, top: serde_json::Value| json!({"token": token, "logprob": -0.1, "top_logprobs": top});
    let mut server = mockito::Server::new();
    let _served = served(&mut server, true);
    let begun = r#"{"kind": ""#;
    let _m = server
        .mock("POST", "/v1/chat/completions")
        .match_body(Matcher::AllOf(vec![
            Matcher::PartialJson(json!({"continue_final_message": true})),
            Matcher::Regex(r#""role":"assistant","content":"\{\\"kind\\": \\"""#.into()),
        ]))
        .with_header("content-type", "text/event-stream")
        .with_body(sse(&[
            json!({"choices": [{"index": 0, "delta": {"content": "final"},
                   "logprobs": {"content": [lp("final", json!([
                       {"token": "final", "logprob": (0.75f64).ln()},
                       {"token": "tool", "logprob": (0.25f64).ln()}]))]}}],
                   "timings": {"prompt_n": 9, "cache_n": 300, "predicted_n": 1}}),
            json!({"choices": [{"index": 0, "delta": {"content": "_answer\", \"content\": \"Paris\","},
                   "logprobs": {"content": [lp("_answer\", \"content\": \"Paris\",", json!([]))]}}],
                   "timings": {"prompt_n": 9, "cache_n": 300, "predicted_n": 2}}),
            chunk(r#" "thought": ""}"#),
        ]))
        .expect(1)
        .create();
    let mut b = preflighted(&server);
    let schema = toolloop::turn::schema::CallSchema::answer_only_deciding(
        toolloop::turn::schema::Decide::Probability,
    );
    let opts = GenOptions {
        prefill: schema.beginning(),
        answer_end: schema.answer_end(),
        top_logprobs: Some(10),
        ..GenOptions::default()
    };
    let messages = vec![Message::user("The capital of France?")];
    let req = ChatRequest {
        messages: &messages,
        schema: Some(schema.as_value()),
        options: &opts,
    };
    let mut streamed = String::new();
    let reply = b
        .chat(
            &req,
            Deadline::after(Duration::from_secs(10)),
            &mut |piece: &str| {
                streamed.push_str(piece);
                std::ops::ControlFlow::Continue(())
            },
        )
        .unwrap();
    let whole = r#"{"kind": "final_answer", "content": "Paris", "thought": ""}"#;
    assert_eq!(reply.text, whole);
    assert_eq!(reply.given, begun.len());
    assert!(streamed.starts_with(begun), "{streamed}");
    assert_eq!(reply.generated_text(), &whole[begun.len()..]);
    let p = toolloop::checks::tool_share(&reply).expect("p(tool) is read");
    assert!((p - 0.25).abs() < 1e-9, "{p}");
    assert_eq!(
        reply.usage.completion_tokens, 2,
        "ended at the content's close"
    );
    _m.assert();
}

fn sse_act(text: &str) -> common::Act {
    common::Act::Respond(
        200,
        "text/event-stream",
        sse(&[
            chunk(text),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ])
        .into_bytes(),
    )
}

#[test]
fn a_server_that_restarts_between_requests_is_waited_for() {
    // llama-server refuses connections while it restarts and loads its model again; a run
    // that reached it before waits for it rather than ending.
    let fake = common::serve_restarting(
        sse_act("first"),
        Duration::from_millis(700),
        vec![sse_act("second")],
    );
    let mut b = OpenAi::new(&format!("{}/v1", fake.url), "m", None);
    assert_eq!(run(&mut b).unwrap().text, "first");
    let started = std::time::Instant::now();
    assert_eq!(run(&mut b).unwrap().text, "second");
    assert!(started.elapsed() >= Duration::from_millis(600));
}

#[test]
fn a_server_error_is_retried_twice_and_a_client_error_never() {
    let fail = |status: u16| {
        common::Act::Respond(
            status,
            "application/json",
            format!(r#"{{"error":{{"message":"failed {status}"}}}}"#).into_bytes(),
        )
    };
    let fake = common::serve(vec![fail(500), fail(502), sse_act("ok")]);
    let mut b = OpenAi::new(&format!("{}/v1", fake.url), "m", None);
    assert_eq!(run(&mut b).unwrap().text, "ok");
    assert_eq!(fake.requests.lock().unwrap().len(), 3);

    let fake = common::serve(vec![fail(500)]);
    let mut b = OpenAi::new(&format!("{}/v1", fake.url), "m", None);
    let err = run(&mut b).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server failed (HTTP 500): failed 500 (sent 3 times)"
    );
    assert_eq!(fake.requests.lock().unwrap().len(), 3);

    let fake = common::serve(vec![fail(422), sse_act("never")]);
    let mut b = OpenAi::new(&format!("{}/v1", fake.url), "m", None);
    assert!(matches!(run(&mut b), Err(BackendError::BadRequest { .. })));
    assert_eq!(fake.requests.lock().unwrap().len(), 1);
}

/// A turn's reply ends where its JSON object closes, on llama-server: the whitespace its
/// grammar lets follow (Qwen2.5-Coder 0.5B wrote `}\n` and twenty tokens of indent) is
/// neither waited for nor kept, and the counts are those at the close, from the timings
/// sent with every token. Another server's reply is read to its end.
#[test]
fn a_turns_reply_ends_where_its_object_closes_on_llama_server() {
    let call = r#"{"kind": "tool_call", "thought": "", "tool": "calculator", "arguments": {"expression": "2 * {3}"}}"#;
    let streamed = sse(&[
        // A brace inside a string closes nothing.
        timed(
            r#"{"kind": "tool_call", "thought": "", "tool": "calculator", "arguments": {"expression": "2 * {3}"#,
            20,
        ),
        timed("\"}", 21),
        timed("}\n", 22),
        timed("\t\t\t\t", 30),
        timed("\t\t\t\t", 42),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 305, "completion_tokens": 43}}),
    ]);
    let schema = toolloop::turn::schema::CallSchema::full();
    let messages = vec![Message::user("2 * {3}?")];
    for llama in [true, false] {
        let reply = timed_reply(llama, &streamed, &messages, &schema, &GenOptions::default());
        assert_eq!(reply.stop, toolloop::backend::StopReason::Finished);
        let counted = (reply.usage.prompt_tokens, reply.usage.completion_tokens);
        match llama {
            true => {
                assert_eq!(reply.text, call);
                assert_eq!(counted, (305, 22), "the counts at the object's close");
            }
            false => {
                assert_eq!(reply.text.trim_end(), call);
                assert_eq!(counted, (305, 43));
            }
        }
    }
}

/// After a turn's reply stopped at its object's close, the server still writes the task
/// until it sees the connection gone; a turn sent before it frees the slot goes to another
/// one and evaluates its whole prompt again. So where llama-server answers `GET /slots`, the
/// backend asks it until no slot is writing that reply (known by the prompt counts in its
/// timings and the tokens it wrote), and asks once where the writing slot is another task.
#[test]
fn a_reply_stopped_at_its_close_waits_until_its_slot_is_free() {
    let streamed = sse(&[
        timed(
            r#"{"kind": "final_answer", "content": "7", "thought": ""}"#,
            20,
        ),
        timed("\n\t\t", 22),
    ]);
    let slot = |processing: bool, evaluated: u64| {
        json!([
            {"id": 0, "is_processing": processing, "id_task": 40,
             "n_prompt_tokens_processed": evaluated, "n_prompt_tokens_cache": 300,
             "next_token": [{"n_decoded": 21}]},
            {"id": 1, "is_processing": false, "id_task": 12,
             "n_prompt_tokens_processed": 0, "n_prompt_tokens_cache": 0,
             "next_token": [{"n_decoded": 0}]},
        ])
        .to_string()
    };
    // The reply's task (5 evaluated, as `timed` says) is asked about until it is free;
    // another run's (6) once.
    for (evaluated, busy, free) in [(5, 2, 1), (6, 1, 0)] {
        let mut server = mockito::Server::new();
        let _props = server
            .mock("GET", "/props")
            .with_body(json!({"total_slots": 2, "endpoint_slots": true}).to_string())
            .create();
        let _models = server
            .mock("GET", "/v1/models")
            .with_body(json!({"data": [{"id": "qwen"}]}).to_string())
            .create();
        let _reply = server
            .mock("POST", "/v1/chat/completions")
            .with_header("content-type", "text/event-stream")
            .with_body(&streamed)
            .create();
        // mockito serves a mock until it has its hits, then the last one created.
        let writing = server
            .mock("GET", "/slots")
            .with_body(slot(true, evaluated))
            .expect(busy)
            .create();
        let free = server
            .mock("GET", "/slots")
            .with_body(slot(false, evaluated))
            .expect(free)
            .create();
        let messages = vec![Message::user("What is 3+4?")];
        let schema = toolloop::turn::schema::CallSchema::full();
        let reply = turn_reply(&server, &messages, &schema, &GenOptions::default());
        assert!(reply.text.ends_with('}'), "{:?}", reply.text);
        writing.assert();
        free.assert();
    }
}
