//! `toolloop web` through real sockets: the API's contract (a run's events as SSE, a
//! clarify answered, a stop, the transcript), the guards (Host, Origin, body and run
//! caps), and the page itself in a real headless Chromium driven by playwright-core
//! (`tests/web/e2e.cjs`; `scripts/browser.sh` installs both). The browser test is ignored
//! in a plain `cargo test`, which counts it; `scripts/test-all.sh` installs a browser and
//! runs it.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolloop::backend::Backend;
use toolloop::serve::{RunningWeb, Runs, WebServer};
use toolloop::tools::FnTools;
use toolloop::{Catalogue, Config, Deadline, FnTool, OrchestratorError, Scripted};

mod common;
use common::browser::drive;

#[derive(Deserialize, JsonSchema)]
struct City {
    /// The city.
    city: String,
}

#[derive(Deserialize, JsonSchema)]
struct Query {
    /// What to look up.
    query: String,
    /// How many answers at most.
    #[allow(dead_code)]
    limit: Option<u32>,
}

/// A tool result that tries to run script in the page.
const HOSTILE_RESULT: &str = "Weather **report** <img src=x onerror=\"window.pwned=1\"> \
                              [details](javascript:window.pwned=2)";
/// An answer that tries the same.
const HOSTILE_ANSWER: &str = "It is **sunny** in Paris. <img src=x onerror=\"window.pwned=3\"> \
                              [more](javascript:window.pwned=4) <script>window.pwned=5</script>";

/// A run's script that stands for a model server which accepts the request and never
/// answers (a real socket, not a script).
const HANG: &str = "<the model never answers>";

/// Marks a scripted reply the model was sure was a call: it comes with the probabilities
/// of its kind, as a real server's, so the checks that read them act on it.
const SURE: &str = "<sure> ";

/// The scripted reply `text`, with the model's probabilities when it starts with [`SURE`].
fn scripted_reply(text: String) -> toolloop::backend::ScriptedReply {
    use toolloop::backend::{ScriptedReply, TokenLogprob};
    let Some(text) = text.strip_prefix(SURE) else {
        return ScriptedReply::text(text);
    };
    let (p, lead) = (0.999_f64, r#"{"kind":""#);
    assert!(text.starts_with(lead), "{text}");
    ScriptedReply {
        logprobs: vec![
            TokenLogprob {
                token: lead.into(),
                logprob: 0.0,
                top: vec![],
            },
            TokenLogprob {
                token: "tool".into(),
                logprob: p.ln(),
                top: vec![("tool".into(), p.ln()), ("final".into(), (1.0 - p).ln())],
            },
        ],
        ..ScriptedReply::text(text)
    }
}

fn call(tool: &str, args: Value) -> String {
    json!({"kind": "tool_call", "thought": "", "tool": tool, "arguments": args}).to_string()
}

fn answer(text: &str) -> String {
    json!({"kind": "final_answer", "content": text, "thought": ""}).to_string()
}

fn clarify(question: &str) -> String {
    json!({"kind": "clarify", "thought": "", "question": question, "missing_params": ["city"]})
        .to_string()
}

/// A web server whose runs take their model, in order, from `scripts` (one script per
/// run), with a weather tool, a hostile tool and a tool that hangs for a minute.
fn start(scripts: Vec<Vec<String>>, max_runs: usize) -> RunningWeb {
    let queue = Arc::new(Mutex::new(VecDeque::from(scripts)));
    let hanging = common::serve(vec![common::Act::Hang]);
    let make = move || -> Result<Box<dyn Backend>, OrchestratorError> {
        let script = queue.lock().unwrap().pop_front().unwrap_or_default();
        if script == [HANG] {
            let base = format!("{}/v1", hanging.url);
            return Ok(Box::new(toolloop::OpenAi::new(&base, "m", None)));
        }
        Ok(Box::new(
            Scripted::from_replies(script.into_iter().map(scripted_reply))
                .with_delay(Duration::from_millis(150)),
        ))
    };
    start_with(Box::new(make), max_runs, |runs| runs)
}

/// The same tools with the model `make` makes, the state shaped by `shape`.
fn start_with(
    make: Box<toolloop::serve::MakeBackend>,
    max_runs: usize,
    shape: impl FnOnce(Runs) -> Runs,
) -> RunningWeb {
    let mut tools = FnTools::new();
    tools
        .push(
            FnTool::new("get_weather", "Current weather for a city", |c: City| {
                Ok(json!({"city": c.city, "sky": "sunny", "temperature_c": 21}))
            })
            .with_examples(["What is the weather in Paris?"])
            .reading_only(),
        )
        .push(FnTool::new(
            "weather_report",
            "A written weather report",
            |_: City| Ok(HOSTILE_RESULT),
        ))
        .push(FnTool::new(
            "slow_lookup",
            "Looks something up, slowly",
            |q: Query| {
                std::thread::sleep(Duration::from_secs(60));
                Ok(format!("late for {}", q.query))
            },
        ));
    let mut catalogue = Catalogue::new();
    catalogue
        .add_source(Box::new(tools), Deadline::none())
        .unwrap();
    let config = Config {
        model: "scripted".into(),
        timeout: Duration::from_secs(120),
        ..Config::default()
    };
    let runs = Runs::new(make, Arc::new(catalogue), config, max_runs, 8);
    WebServer::bind("127.0.0.1:0", shape(runs)).unwrap().spawn()
}

fn host(web: &RunningWeb) -> String {
    web.url().trim_start_matches("http://").to_string()
}

/// One HTTP/1.1 request over a fresh socket; returns the status and the body.
fn raw(web: &RunningWeb, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(host(web)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn request(web: &RunningWeb, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let h = host(web);
    let text = body.map(Value::to_string).unwrap_or_default();
    let (status, body) = raw(
        web,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: {h}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        ),
    );
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn new_conversation(web: &RunningWeb) -> String {
    let (status, c) = request(web, "POST", "/api/conversations", None);
    assert_eq!(status, 201, "{c}");
    c["id"].as_str().unwrap().to_string()
}

fn ask(web: &RunningWeb, conversation: &str, question: &str) -> (u16, Value) {
    request(
        web,
        "POST",
        &format!("/api/conversations/{conversation}/runs"),
        Some(&json!({ "question": question })),
    )
}

/// Reads a run's SSE stream until the server ends it (after the run has finished),
/// calling `on` with each event.
fn stream(web: &RunningWeb, run: &str, mut on: impl FnMut(&Value)) -> Vec<Value> {
    let mut s = TcpStream::connect(host(web)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let h = host(web);
    write!(
        s,
        "GET /api/runs/{run}/events HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reader = std::io::BufReader::new(s);
    let mut events = Vec::new();
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) > 0 {
        // Chunked framing lines are not `data:` lines; only those are read.
        if let Some(data) = line.trim_end().strip_prefix("data: ")
            && let Ok(v) = serde_json::from_str::<Value>(data)
        {
            on(&v);
            events.push(v);
        }
        line.clear();
    }
    events
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["event"].as_str()).collect()
}

#[test]
fn a_run_streams_its_steps_in_order_and_its_transcript_downloads() {
    let web = start(
        vec![vec![
            call("get_weather", json!({"city": "Paris"})),
            answer(HOSTILE_ANSWER),
        ]],
        4,
    );
    let c = new_conversation(&web);
    let (status, run) = ask(&web, &c, "What is the weather in Paris?");
    assert_eq!(status, 202, "{run}");
    let run = run["run"].as_str().unwrap().to_string();
    let events = stream(&web, &run, |_| {});
    let k = kinds(&events);
    let pos = |name: &str| k.iter().position(|e| *e == name).unwrap_or(usize::MAX);
    assert!(pos("run_started") < pos("model_request"), "{k:?}");
    assert!(pos("tool_call") < pos("tool_result"), "{k:?}");
    assert!(pos("tool_result") < pos("answer_text"), "{k:?}");
    assert_eq!(k.last(), Some(&"stopped"), "{k:?}");
    let stopped = events.last().unwrap();
    assert_eq!(stopped["answer"], HOSTILE_ANSWER);
    // The answer comes with HTML the page may insert: rendered, nothing active left.
    let html = stopped["html"].as_str().unwrap();
    assert!(html.contains("<strong>sunny</strong>"), "{html}");
    for bad in ["onerror", "javascript:", "<script", "<img"] {
        assert!(!html.contains(bad), "{html}");
    }
    // The streamed pieces add up to the answer.
    let streamed: String = events
        .iter()
        .filter(|e| e["event"] == "answer_text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(streamed, HOSTILE_ANSWER);
    // The transcript: every event but the streamed pieces, one JSON object per line.
    let (status, text) = raw(
        &web,
        &format!(
            "GET /api/runs/{run}/transcript HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            host(&web)
        ),
    );
    assert_eq!(status, 200);
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "tool_call" && l["tool"] == "get_weather")
    );
    assert!(lines.iter().all(|l| l["event"] != "answer_text"));
    assert!(lines.iter().all(|l| l["t_ms"].is_u64()));
    // The conversation kept the exchange.
    let (_, conv) = request(&web, "GET", &format!("/api/conversations/{c}"), None);
    assert_eq!(conv["turns"][0]["content"], "What is the weather in Paris?");
    assert!(conv["running"].is_null(), "{conv}");
}

/// A run that ends without an answer says why in its own words, as the command line does
/// on stderr: the page shows it under the kind of ending.
#[test]
fn a_run_without_an_answer_says_why_when_it_stops() {
    // Written twice: the second time (the prompt no longer shows it) ends the run.
    let placeholder = || answer("<the answer for the user>");
    let web = start(vec![vec![placeholder(), placeholder()]], 4);
    let c = new_conversation(&web);
    let (_, run) = ask(&web, &c, "What is the weather in Paris?");
    let events = stream(&web, run["run"].as_str().unwrap(), |_| {});
    let stopped = events.last().unwrap();
    assert_eq!(stopped["stop_reason"], "invalid_replies", "{stopped}");
    let message = stopped["message"].as_str().unwrap_or_default();
    assert!(message.contains("placeholder"), "{stopped}");
}

#[test]
fn a_clarify_waits_for_the_answer_and_the_run_resumes_with_it() {
    let web = start(
        vec![vec![
            clarify("Which city?"),
            call("get_weather", json!({"city": "Oslo"})),
            answer("It is sunny in Oslo."),
        ]],
        4,
    );
    let c = new_conversation(&web);
    let (_, run) = ask(&web, &c, "What is the weather?");
    let run = run["run"].as_str().unwrap().to_string();
    // Nothing waits yet for an answer: refused.
    let early = request(
        &web,
        "POST",
        &format!("/api/runs/{run}/answer"),
        Some(&json!({"answer": "Oslo"})),
    );
    assert_eq!(early.0, 409, "{}", early.1);
    let mut answered = false;
    let events = stream(&web, &run, |e| {
        if e["event"] == "clarify" && !answered {
            let path = format!("/api/runs/{run}/answer");
            let (status, body) = request(&web, "POST", &path, Some(&json!({"answer": "Oslo"})));
            assert_eq!(status, 202, "{body}");
            answered = true;
        }
    });
    let k = kinds(&events);
    assert!(
        k.windows(2).any(|w| w == ["clarify", "clarify_answer"]),
        "{k:?}"
    );
    assert_eq!(events.last().unwrap()["answer"], "It is sunny in Oslo.");
}

#[test]
fn stop_ends_a_run_held_in_a_hanging_tool_at_once() {
    let web = start(
        vec![vec![call("slow_lookup", json!({"query": "anything"}))]],
        4,
    );
    let c = new_conversation(&web);
    let (_, run) = ask(&web, &c, "Look up anything");
    let run = run["run"].as_str().unwrap().to_string();
    let mut stopped_at = None;
    let events = stream(&web, &run, |e| {
        if e["event"] == "tool_call" {
            let (status, _) = request(&web, "POST", &format!("/api/runs/{run}/stop"), None);
            assert_eq!(status, 202);
            stopped_at = Some(Instant::now());
        }
    });
    let took = stopped_at.expect("the tool was called").elapsed();
    assert!(took < Duration::from_secs(10), "the stop took {took:?}");
    assert_eq!(events.last().unwrap()["stop_reason"], "cancelled");
    // The conversation is free for the next question.
    let (_, conv) = request(&web, "GET", &format!("/api/conversations/{c}"), None);
    assert!(conv["running"].is_null(), "{conv}");
}

/// A web server whose model accepts each request and never answers (a model server
/// evaluating a prompt longer than the run's deadline), and whose runs are stopped one
/// second after the last page stopped watching them.
fn start_hanging() -> (RunningWeb, common::Fake) {
    let model = common::serve(vec![common::Act::Hang]);
    (start_before(&model), model)
}

/// A web server whose runs ask `model` (an OpenAI-compatible server) and are stopped one
/// second after the last page stopped watching them.
fn start_before(model: &common::Fake) -> RunningWeb {
    let base = format!("{}/v1", model.url);
    let make = move || -> Result<Box<dyn Backend>, OrchestratorError> {
        Ok(Box::new(toolloop::OpenAi::new(&base, "m", None)))
    };
    start_with(Box::new(make), 4, |runs| {
        runs.with_grace(Duration::from_secs(1))
    })
}

/// A page watching `run`'s events: the open connection, once the server has begun to
/// answer, and what it sent first.
fn watch(web: &RunningWeb, run: &str) -> (TcpStream, String) {
    let mut page = TcpStream::connect(host(web)).unwrap();
    let h = host(web);
    write!(
        page,
        "GET /api/runs/{run}/events HTTP/1.1\r\nHost: {h}\r\n\r\n"
    )
    .unwrap();
    let mut seen = [0u8; 512];
    let n = page.read(&mut seen).unwrap();
    (page, String::from_utf8_lossy(&seen[..n]).into_owned())
}

/// Waits until the conversation has no run in progress; how long that took.
fn until_idle(web: &RunningWeb, conversation: &str) -> Duration {
    let started = Instant::now();
    loop {
        let (_, c) = request(
            web,
            "GET",
            &format!("/api/conversations/{conversation}"),
            None,
        );
        if c["running"].is_null() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still running: {c}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn stop_ends_a_run_waiting_on_the_model_at_once() {
    let (web, _model) = start_hanging();
    let c = new_conversation(&web);
    let (_, run) = ask(&web, &c, "What is the weather in Paris?");
    let run = run["run"].as_str().unwrap().to_string();
    let mut stopped_at = None;
    let events = stream(&web, &run, |e| {
        if e["event"] == "model_request" {
            std::thread::sleep(Duration::from_millis(300));
            let (status, _) = request(&web, "POST", &format!("/api/runs/{run}/stop"), None);
            assert_eq!(status, 202);
            stopped_at = Some(Instant::now());
        }
    });
    let took = stopped_at.expect("the model was asked").elapsed();
    assert!(took < Duration::from_secs(2), "the stop took {took:?}");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "stopped", "{last}");
    assert_eq!(last["stop_reason"], "cancelled", "{last}");
    assert!(!kinds(&events).contains(&"error"), "{:?}", kinds(&events));
    // What was done so far is in the transcript.
    let (_, body) = raw(
        &web,
        &format!(
            "GET /api/runs/{run}/transcript HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            host(&web)
        ),
    );
    assert!(
        body.contains("\"model_request\"") && body.contains("\"cancelled\""),
        "{body}"
    );
    until_idle(&web, &c);
}

#[test]
fn a_run_nobody_watches_any_more_is_stopped_after_the_grace_period() {
    let (web, _model) = start_hanging();
    let c = new_conversation(&web);
    let (_, run) = ask(&web, &c, "What is the weather in Paris?");
    let run = run["run"].as_str().unwrap().to_string();
    // A page watches the run, then goes away mid-run.
    let (page, first) = watch(&web, &run);
    assert!(first.contains("200"));
    std::thread::sleep(Duration::from_millis(300));
    drop(page);
    let idle = until_idle(&web, &c);
    assert!(
        idle < Duration::from_secs(5),
        "the run went on {idle:?} after the page left"
    );
    let events = stream(&web, &run, |_| {});
    assert_eq!(events.last().unwrap()["stop_reason"], "cancelled");
}

/// A page that leaves mid-stream stops its run, and the run lets go of the model's reply
/// (a request left open upstream would hold one of the model server's slots).
#[test]
fn a_page_that_leaves_mid_stream_lets_go_of_the_models_reply() {
    // A model that streams a reply of blanks, one every 50 ms, for minutes.
    let blank = json!({"choices": [{"index": 0, "delta": {"content": " "}}]});
    let model = common::serve(vec![common::Act::Stream(
        "text/event-stream",
        vec![format!("data: {blank}\n\n").into_bytes(); 10_000],
        Duration::from_millis(50),
    )]);
    let web = start_before(&model);
    let c = new_conversation(&web);
    let (_, run) = ask(&web, &c, "What is the weather in Paris?");
    let run = run["run"].as_str().unwrap().to_string();
    let (page, _) = watch(&web, &run);
    std::thread::sleep(Duration::from_millis(500));
    let cut = || model.cut.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(cut(), 0, "the reply was let go while the page watched");
    drop(page);
    until_idle(&web, &c);
    let started = Instant::now();
    while cut() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the run stopped but still reads the model's reply"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_page_that_comes_back_within_the_grace_period_keeps_the_run() {
    let (web, _model) = start_hanging();
    let c = new_conversation(&web);
    let (_, run) = ask(&web, &c, "What is the weather in Paris?");
    let run = run["run"].as_str().unwrap().to_string();
    // Reloaded: the old page goes, the new one watches at once.
    drop(watch(&web, &run));
    let _reloaded = watch(&web, &run);
    std::thread::sleep(Duration::from_secs(3));
    let (_, conv) = request(&web, "GET", &format!("/api/conversations/{c}"), None);
    assert_eq!(conv["running"], run.as_str(), "{conv}");
    request(&web, "POST", &format!("/api/runs/{run}/stop"), None);
}

#[test]
fn runs_beyond_the_cap_are_refused_with_503_and_one_per_conversation() {
    let hang = || vec![call("slow_lookup", json!({"query": "x"}))];
    let web = start(vec![hang(), hang(), hang()], 2);
    let (a, b, c) = (
        new_conversation(&web),
        new_conversation(&web),
        new_conversation(&web),
    );
    let first = ask(&web, &a, "one");
    assert_eq!(first.0, 202);
    let busy = ask(&web, &a, "again");
    assert_eq!(busy.0, 409, "{}", busy.1);
    assert_eq!(busy.1["run"], first.1["run"]);
    let second = ask(&web, &b, "two");
    assert_eq!(second.0, 202);
    let third = ask(&web, &c, "three");
    assert_eq!(third.0, 503, "{}", third.1);
    // A stopped run frees its place.
    let run = first.1["run"].as_str().unwrap().to_string();
    request(&web, "POST", &format!("/api/runs/{run}/stop"), None);
    stream(&web, &run, |_| {});
    let again = ask(&web, &c, "three");
    assert_eq!(again.0, 202, "{}", again.1);
    for r in [&second.1["run"], &again.1["run"]] {
        request(
            &web,
            "POST",
            &format!("/api/runs/{}/stop", r.as_str().unwrap()),
            None,
        );
    }
}

#[test]
fn requests_for_another_host_or_from_another_site_are_refused() {
    let web = start(vec![], 4);
    let h = host(&web);
    let get = |headers: &str| {
        raw(
            &web,
            &format!("GET /api/tools HTTP/1.1\r\n{headers}Connection: close\r\n\r\n"),
        )
        .0
    };
    assert_eq!(get(&format!("Host: {h}\r\n")), 200);
    let port = h.rsplit(':').next().unwrap();
    assert_eq!(get(&format!("Host: localhost:{port}\r\n")), 200);
    // DNS rebinding: a name that resolves here, but is not this server's.
    assert_eq!(get(&format!("Host: evil.example:{port}\r\n")), 403);
    assert_eq!(get(""), 403);
    // Cross-site requests, with and without the browser's fetch metadata.
    assert_eq!(
        get(&format!("Host: {h}\r\nOrigin: http://evil.example\r\n")),
        403
    );
    assert_eq!(get(&format!("Host: {h}\r\nOrigin: null\r\n")), 403);
    assert_eq!(
        get(&format!("Host: {h}\r\nSec-Fetch-Site: cross-site\r\n")),
        403
    );
    assert_eq!(get(&format!("Host: {h}\r\nOrigin: http://{h}\r\n")), 200);
    // A form post from another site cannot start a run.
    let c = new_conversation(&web);
    let body = "question=rm+-rf";
    let (status, _) = raw(
        &web,
        &format!(
            "POST /api/conversations/{c}/runs HTTP/1.1\r\nHost: {h}\r\nOrigin: http://evil.example\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert_eq!(status, 403);
    // No CORS, and the page's headers.
    let mut s = TcpStream::connect(&h).unwrap();
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    let head = page.split("\r\n\r\n").next().unwrap().to_lowercase();
    assert!(!head.contains("access-control-allow-origin"), "{head}");
    assert!(
        head.contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    assert!(page.contains("<script src=\"/app.js\""));
}

#[test]
fn bodies_past_the_cap_and_empty_questions_are_refused() {
    let web = start(vec![], 4);
    let c = new_conversation(&web);
    let h = host(&web);
    // Declared far past the cap: refused from the header, nothing read.
    let (status, _) = raw(
        &web,
        &format!(
            "POST /api/conversations/{c}/runs HTTP/1.1\r\nHost: {h}\r\n\
             Content-Type: application/json\r\nContent-Length: 100000000000\r\n\
             Connection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 413);
    let long = "x".repeat(20_000);
    assert_eq!(ask(&web, &c, &long).0, 413);
    assert_eq!(ask(&web, &c, "   ").0, 400);
    let (status, body) = request(
        &web,
        "POST",
        "/api/conversations/nope/runs",
        Some(&json!({"question": "hi"})),
    );
    assert_eq!(status, 404, "{body}");
    let (status, _) = raw(
        &web,
        &format!(
            "POST /api/conversations/{c}/runs HTTP/1.1\r\nHost: {h}\r\n\
             Content-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
        ),
    );
    assert_eq!(status, 415);
    // And the server is still there.
    assert_eq!(request(&web, "GET", "/api/tools", None).0, 200);
}

#[test]
fn tools_and_conversations_are_listed_and_forgotten() {
    let web = start(vec![], 4);
    let (status, tools) = request(&web, "GET", "/api/tools", None);
    assert_eq!(status, 200);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["get_weather", "slow_lookup", "weather_report"]);
    assert_eq!(tools["model"], "scripted");
    let c = new_conversation(&web);
    assert_eq!(
        request(&web, "DELETE", &format!("/api/conversations/{c}"), None).0,
        204
    );
    assert_eq!(
        request(&web, "GET", &format!("/api/conversations/{c}"), None).0,
        404
    );
}

// ---- the page in a real browser ----

#[test]
#[ignore = "needs Chromium, Node and playwright-core: run scripts/test-all.sh"]
fn in_the_browser_steps_appear_in_order_and_nothing_from_the_model_runs() {
    // The seven runs of `tests/web/e2e.cjs scripted`, once at a desktop's size and once
    // at a phone's.
    let runs = || {
        vec![
            vec![
                call("weather_report", json!({"city": "Paris"})),
                answer(HOSTILE_ANSWER),
            ],
            vec![
                clarify("Which city?"),
                call("get_weather", json!({"city": "Oslo"})),
                answer("It is sunny in **Oslo**, 21 °C."),
            ],
            // Values the person never said: the card names them, and offers to run the call
            // without the optional one.
            vec![call("slow_lookup", json!({"query": "42", "limit": 7}))],
            vec![HANG.to_string()],
            // One call where the request names two places: `numbers-left` asks again,
            // the reply to that is no turn, and the first call goes ahead.
            vec![
                format!(
                    r#"{SURE}{{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{{"city":"75001"}}}}"#
                ),
                "I cannot write that as JSON".to_string(),
                answer("Sunny at 75001."),
            ],
            // Two calls of a tool that only reads: each is named as it is written, and
            // started before the turn ends.
            vec![
                r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"get_weather","arguments":{"city":"Paris"}},{"tool":"get_weather","arguments":{"city":"Rome"}}]}"#.to_string(),
                answer("Sunny in Paris and in Rome."),
            ],
            // toolloop's own instruction written back as the answer.
            vec![answer(
                "error: calculator is unavailable now. Answer directly without it.",
            )],
        ]
    };
    let web = start([runs(), runs()].concat(), 4);
    for size in ["scripted", "scripted:phone"] {
        if let Some(out) = drive(size, web.url()) {
            eprintln!("{out}");
        }
    }
}

#[test]
fn every_path_in_the_openapi_document_is_served() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/web_api.openapi.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let web = start(vec![], 4);
    let mut n = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in ["get", "post", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let concrete = path.replace("{id}", "unknown");
            let (status, body) = request(&web, &method.to_uppercase(), &concrete, None);
            // Unknown ids are a 404 of the route itself, never the fallback's.
            assert_ne!(body["error"], "no such page or API path", "{method} {path}");
            assert!(status < 500 || status == 503, "{method} {path}: {status}");
            n += 1;
        }
    }
    assert_eq!(n, 10);
}

#[test]
fn a_run_that_panics_ends_with_an_error_and_frees_its_conversation() {
    let make = || -> Result<Box<dyn Backend>, OrchestratorError> { panic!("a bug") };
    let runs = Runs::new(
        Box::new(make),
        Arc::new(Catalogue::new()),
        Config::default(),
        1,
        4,
    );
    let web = WebServer::bind("127.0.0.1:0", runs).unwrap().spawn();
    let c = new_conversation(&web);
    for _ in 0..2 {
        // The only place is given back each time.
        let (status, run) = ask(&web, &c, "hello");
        assert_eq!(status, 202, "{run}");
        let events = stream(&web, run["run"].as_str().unwrap(), |_| {});
        let last = events.last().unwrap();
        assert_eq!(last["event"], "error");
        assert!(
            last["message"].as_str().unwrap().contains("panic"),
            "{last}"
        );
    }
}

#[test]
fn bound_to_every_interface_an_ip_address_is_a_host_but_a_name_is_not() {
    let runs = Runs::new(
        Box::new(|| -> Result<Box<dyn Backend>, OrchestratorError> { unreachable!() }),
        Arc::new(Catalogue::new()),
        Config::default(),
        1,
        4,
    );
    let web = WebServer::bind("0.0.0.0:0", runs).unwrap().spawn();
    let port = web.url().rsplit(':').next().unwrap().to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    let mut get = |host: &str| {
        write!(s, "GET /api/tools HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).unwrap();
        // Read the rest of this response before the next request on the connection.
        let mut rest = Vec::new();
        let mut byte = [0u8; 1];
        while !rest.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).unwrap();
            rest.push(byte[0]);
        }
        let text = String::from_utf8_lossy(&rest).to_lowercase();
        let len: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        s.read_exact(&mut body).unwrap();
        String::from_utf8_lossy(&head[9..12]).into_owned()
    };
    assert_eq!(get(&format!("192.168.1.5:{port}")), "200");
    assert_eq!(get(&format!("localhost:{port}")), "200");
    assert_eq!(get(&format!("evil.example:{port}")), "403");
    assert_eq!(get("192.168.1.5:1"), "403");
}

#[test]
fn a_run_sets_its_own_checks_and_the_page_is_told_the_servers() {
    // An answer that writes the prompt's own example: with example-copy turned off for
    // this run only, it stands; with the server's defaults it is refused and the event
    // names the check.
    let web = start(
        vec![
            vec![answer("12.5 * 4 = 50")],
            vec![answer("12.5 * 4 = 50"), answer("Rain.")],
        ],
        4,
    );
    let (status, tools) = request(&web, "GET", "/api/tools", None);
    assert_eq!(status, 200);
    let checks = tools["checks"].as_array().unwrap();
    let copy = checks.iter().find(|c| c["name"] == "example-copy").unwrap();
    assert_eq!(copy["on"], true, "{copy}");

    let c = new_conversation(&web);
    let (status, run) = request(
        &web,
        "POST",
        &format!("/api/conversations/{c}/runs"),
        Some(&json!({"question": "What's the weather like?", "checks": {"example-copy": false}})),
    );
    assert_eq!(status, 202, "{run}");
    let id = run["run"].as_str().unwrap().to_string();
    let events = stream(&web, &id, |_| {});
    assert!(
        !events.iter().any(|e| e["action"] == "refuse_answer"),
        "{:?}",
        kinds(&events)
    );

    // The next run, with the server's defaults, refuses the copied answer.
    let c = new_conversation(&web);
    let (_, run) = ask(&web, &c, "What's the weather like?");
    let events = stream(&web, run["run"].as_str().unwrap(), |_| {});
    let refused = events.iter().find(|e| e["action"] == "refuse_answer");
    assert_eq!(
        refused.map(|e| &e["check"]),
        Some(&json!("example-copy")),
        "{events:?}"
    );

    let (status, e) = request(
        &web,
        "POST",
        &format!("/api/conversations/{c}/runs"),
        Some(&json!({"question": "hi", "checks": {"no-such-check": true}})),
    );
    assert_eq!(status, 400);
    assert!(
        e["error"].as_str().unwrap().contains("no check is called"),
        "{e}"
    );
}

/// A call of a tool that may change things waits on the page: the run shows the call,
/// nothing runs until the person says yes, and the run goes on with the result.
#[test]
fn a_call_that_may_change_things_waits_for_approval_on_the_page() {
    let web = start(
        vec![vec![
            call("weather_report", json!({"city": "Oslo"})),
            answer("Here is the report."),
        ]],
        4,
    );
    let c = new_conversation(&web);
    // The person names no city: the page is shown that they did not say Oslo.
    let (_, run) = ask(&web, &c, "Write me a weather report");
    let run = run["run"].as_str().unwrap().to_string();
    let path = format!("/api/runs/{run}/approve");
    // Nothing waits yet: refused; a word other than yes, no or always: refused.
    let early = request(&web, "POST", &path, Some(&json!({"answer": "yes"})));
    assert_eq!(early.0, 409, "{}", early.1);
    let mut approved = false;
    let events = stream(&web, &run, |e| {
        if e["event"] == "approval_request" && !approved {
            assert_eq!(e["tool"], "weather_report");
            assert_eq!(e["arguments"]["city"], "Oslo");
            assert_eq!(e["class"], "destructive");
            assert_eq!(e["unsaid"]["nowhere"], json!(["city"]), "{e}");
            let bad = request(&web, "POST", &path, Some(&json!({"answer": "sure"})));
            assert_eq!(bad.0, 400, "{}", bad.1);
            let (status, body) = request(&web, "POST", &path, Some(&json!({"answer": "yes"})));
            assert_eq!(status, 202, "{body}");
            approved = true;
        }
    });
    let k = kinds(&events);
    assert!(
        k.windows(2).any(|w| w == ["approval_request", "approval"]),
        "{k:?}"
    );
    let decided = events.iter().find(|e| e["event"] == "approval").unwrap();
    assert_eq!(decided["allowed"], true);
    assert_eq!(decided["by"], "person");
    let result = events.iter().find(|e| e["event"] == "tool_result").unwrap();
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(events.last().unwrap()["answer"], "Here is the report.");
}
