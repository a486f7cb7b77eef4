//! Against a real llama-server running a real model (Qwen2.5-Coder 0.5B Instruct by
//! default), through the OpenAI-compatible backend. Ignored unless asked for, because it
//! needs the server:
//!
//! ```sh
//! pid=$(scripts/real-model.sh serve qwen 8091 2)
//! toolloop calibrate --backend openai --base-url http://127.0.0.1:8091/v1 --model qwen \
//!   --calibration /tmp/cal.json
//! TOOLLOOP_CALIBRATION=/tmp/cal.json TOOLLOOP_LLAMA_URL=http://127.0.0.1:8091/v1 \
//!   cargo test --test real_model -- --ignored
//! kill $pid
//! ```

use std::time::Duration;

use serde_json::json;
use toolloop::Deadline;
use toolloop::backend::OpenAi;
use toolloop::backend::{Backend, ChatRequest, GenOptions, Message};
use toolloop::tools::ToolSpec;
use toolloop::turn::Turn;
use toolloop::turn::schema::{CallSchema, Narrowing};

mod common;

/// The tests take turns on the server. It runs two slots (`scripts/real-model.sh serve qwen
/// PORT 2`): a run's turns in one, its fit questions in the other (`GenOptions::aside`).
/// A request from another test between two turns of a run would replace that run's cached
/// prompt: the cache test would then measure the other test, not toolloop.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERVER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERVER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn url() -> String {
    std::env::var("TOOLLOOP_LLAMA_URL").expect("set TOOLLOOP_LLAMA_URL to a llama-server /v1 URL")
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "calculator",
            "Exact arithmetic on an expression",
            json!({"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}),
        ),
        ToolSpec::new(
            "get_weather",
            "Current weather for a city",
            json!({"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}),
        ),
    ]
}

const SYSTEM: &str = "You answer by replying with one JSON object.\n\
Kinds: {\"kind\": \"tool_call\", \"thought\": ..., \"tool\": ..., \"arguments\": {...}} or \
{\"kind\": \"final_answer\", \"thought\": ..., \"content\": ...}.\n\
Use a tool whenever it gives a more reliable answer: live data, exact arithmetic.\n\
Tools:\n1. calculator(expression: string): exact arithmetic\n\
2. get_weather(city: string): current weather\n\
Example: user asks \"How much is 12.5 * 4?\" -> \
{\"kind\": \"tool_call\", \"thought\": \"exact product\", \"tool\": \"calculator\", \
\"arguments\": {\"expression\": \"12.5 * 4\"}}";

#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn schema_constrained_reply_is_valid_and_usage_and_cache_are_read() {
    let _turn = one_at_a_time();
    let tools = tools();
    let schema = CallSchema::for_tools(&tools, Narrowing::PerTool);
    let mut backend = OpenAi::new(&url(), "qwen", None);
    backend
        .preflight(Deadline::after(Duration::from_secs(10)))
        .unwrap();
    let options = GenOptions {
        num_predict: Some(200),
        ..GenOptions::default()
    };
    let mut messages = vec![
        Message::system(SYSTEM),
        Message::user("What is the weather in Paris right now?"),
    ];
    let deadline = Deadline::after(Duration::from_secs(120));
    let req = ChatRequest {
        messages: &messages,
        schema: Some(schema.as_value()),
        options: &options,
    };
    let mut streamed = String::new();
    let first = backend
        .chat(&req, deadline, &mut |p| {
            streamed.push_str(p);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    eprintln!("reply 1: {}\nusage 1: {:?}", first.text, first.usage);
    assert_eq!(streamed, first.text, "the stream carried the whole reply");
    // Under the grammar the reply is strict JSON valid under the narrowed schema.
    let value: serde_json::Value = serde_json::from_str(&first.text).unwrap();
    assert!(
        jsonschema::is_valid(schema.as_value(), &value),
        "{value} is not valid under the schema"
    );
    let turn = Turn::parse(&first.text).unwrap().turn;
    schema.check(&turn).unwrap();
    assert!(first.usage.prompt_tokens > 0);
    assert!(first.usage.completion_tokens > 0);

    // Same prefix, one more exchange: the server reuses its cache.
    messages.push(Message::assistant(first.text.clone()));
    messages.push(Message::tool(
        "get_weather",
        r#"{"city":"Paris","temp_c":18,"sky":"clear"}"#,
    ));
    let req = ChatRequest {
        messages: &messages,
        schema: Some(schema.as_value()),
        options: &options,
    };
    let second = backend
        .chat(&req, deadline, &mut toolloop::backend::keep_going)
        .unwrap();
    eprintln!("reply 2: {}\nusage 2: {:?}", second.text, second.usage);
    let turn = Turn::parse(&second.text).unwrap().turn;
    schema.check(&turn).unwrap();
    let cached = second
        .usage
        .cached_prompt_tokens
        .expect("llama-server reports cache_n");
    assert!(
        cached > 0,
        "no prompt tokens reused from the cache: {:?}",
        second.usage
    );
}

/// The loop with a real model: a question that needs the calculator, one that needs a
/// tool lookup, and one that needs no tool. Set `TOOLLOOP_RECORD_DIR` to keep the raw
/// replies as recordings (`tests/data/qwen_*.jsonl` came from here).
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn the_loop_answers_with_a_real_model() {
    let _turn = one_at_a_time();
    use toolloop::StopKind;
    use toolloop::backend::Recorder;

    // Each question with the tool it needs, what its answer holds, and the rounds of
    // calls it needs: the run may take one model turn per round plus one for the answer.
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, &'a [&'a str], u32);
    let cases: [Case; 4] = [
        (
            "calc",
            "How much is 123.5 * 48?",
            Some("calculator"),
            &["5928"],
            1,
        ),
        (
            "weather",
            "What is the weather in Paris right now?",
            Some("get_weather"),
            &["11", "rain"],
            1,
        ),
        (
            "two_cities",
            "What is the weather in Paris and in Tokyo right now?",
            Some("get_weather"),
            &["11", "rain", "18", "sunny"],
            1,
        ),
        (
            "capital",
            "What is the capital of France?",
            None,
            &["paris"],
            0,
        ),
    ];
    for (name, question, tool, expect, rounds) in cases {
        let backend: Box<dyn Backend> = match std::env::var("TOOLLOOP_RECORD_DIR") {
            Ok(dir) => {
                let path = std::path::Path::new(&dir).join(format!("qwen_{name}.jsonl"));
                let _ = std::fs::remove_file(&path);
                Box::new(Recorder::new(OpenAi::new(&url(), "qwen", None), path).unwrap())
            }
            Err(_) => Box::new(OpenAi::new(&url(), "qwen", None)),
        };
        let (out, _) = run_traced_with(backend, question);
        eprintln!("answer: {:?}", out.answer());
        assert_eq!(out.stop_reason(), StopKind::Completed, "{name}");
        let used: Vec<&str> = out.steps.iter().filter_map(|s| s.tool.as_deref()).collect();
        match tool {
            Some(t) => assert_eq!(
                used.first().copied(),
                Some(t),
                "{name}: tools used {used:?}"
            ),
            // Measured: Qwen 0.5B often calls current_time before a general-knowledge
            // answer; the answer is what is asserted, the needless call only reported.
            None if !used.is_empty() => eprintln!("{name}: needless tool calls {used:?}"),
            None => {}
        }
        let answer = out.answer().unwrap_or_default().to_lowercase();
        // The answer is drawn from the tool's result: it holds one of its facts.
        assert!(
            expect.is_empty() || expect.iter().any(|e| answer.contains(e)),
            "{name}: answer {answer:?} has none of {expect:?}"
        );
        // One turn per round of calls and one for the answer (measured: two each). Before
        // the line after results and `nothing-new`, Qwen called the calculator once more
        // on its own result and the weather again after its result, a turn each. A turn
        // declined or asked again is not one of the run's iterations; the requests are
        // in BENCHMARKS.md ("Whole questions"). A needless call on a question that needs
        // none is one round more.
        let needless = u32::from(tool.is_none() && !used.is_empty());
        assert!(
            out.iterations <= rounds + needless + 1,
            "{name}: {} model turns for {rounds} round(s) of calls",
            out.iterations
        );
    }
}

/// Calculator and demo weather only: tools whose results never change, so a greedy model
/// gives the same replies on every run (current_time would make each run differ).
fn deterministic_tools() -> toolloop::tools::Catalogue {
    use toolloop::tools::DEMO_WEATHER;
    use toolloop::tools::FnTools;
    let mut f = FnTools::new();
    let calc = tools().remove(0);
    let weather = tools().remove(1);
    f.add(calc.reading_only(), |a| {
        toolloop::tools::calculator::evaluate(a["expression"].as_str().unwrap_or(""))
            .map(|v| json!(v.to_string()))
            .map_err(|e| e.to_string())
    });
    f.add(weather.reading_only(), |a| {
        let all: serde_json::Value = serde_json::from_str(DEMO_WEATHER).unwrap();
        let city = a["city"].as_str().unwrap_or("");
        all.as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(city))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("no weather for {city:?}"))
    });
    toolloop::tools::Catalogue::load(vec![Box::new(f)], Deadline::none()).unwrap()
}

/// A run with the real model over the deterministic tools, with the trace printed.
fn run_traced(question: &str) -> (toolloop::Outcome, Vec<toolloop::Event>) {
    run_traced_with(Box::new(OpenAi::new(&url(), "qwen", None)), question)
}

fn run_traced_with(
    backend: Box<dyn Backend>,
    question: &str,
) -> (toolloop::Outcome, Vec<toolloop::Event>) {
    use std::sync::{Arc, Mutex};
    use toolloop::Trace;
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let trace = Arc::new(Mutex::new(Trace::collect()));
    let t = Arc::clone(&trace);
    let mut o = toolloop::Orchestrator::builder()
        .backend(backend)
        .catalogue(deterministic_tools())
        .timeout(Duration::from_secs(120))
        .observer(move |e: &toolloop::Event| {
            seen.lock().unwrap().push(e.clone());
            toolloop::Observer::event(&mut *t.lock().unwrap(), e)
        })
        .build()
        .unwrap();
    let out = o.run(question).unwrap();
    eprintln!("--- {question}");
    for line in trace.lock().unwrap().lines() {
        eprintln!("{line}");
    }
    let events = events.lock().unwrap().clone();
    (out, events)
}

/// The decision step with the model's calibrated thresholds (`.ci/run` calibrates first):
/// the three questions that need a tool get the right one first, and of three that need
/// none at least two are answered without a call. Measured on one slot: all three
/// declined, at fit 0.42–0.46 (read against the tool's own leaning) against a threshold
/// of 0.48; a borderline answer moves with the server's cache state by about 0.02, so
/// one may go through.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn tools_are_called_only_for_questions_that_need_one() {
    let _turn = one_at_a_time();
    let no_tool = [
        "What is the capital of France?",
        "Who wrote Romeo and Juliet?",
        "Translate 'thank you' into French.",
    ];
    let mut answered_alone = 0;
    for q in no_tool {
        let (out, _) = run_traced(q);
        let used: Vec<&str> = out.steps.iter().filter_map(|s| s.tool.as_deref()).collect();
        answered_alone += usize::from(used.is_empty());
        assert!(out.answer().is_some(), "{q}: {:?}", out.ending);
    }
    assert!(
        answered_alone >= 2,
        "only {answered_alone} of 3 answered without a tool"
    );
    let need_tool = [
        ("How much is 123.5 * 48?", "calculator"),
        ("What is the weather in Paris right now?", "get_weather"),
        ("What's the weather like in Tokyo today?", "get_weather"),
    ];
    for (q, tool) in need_tool {
        let (out, _) = run_traced(q);
        let first = out.steps.iter().find_map(|s| s.tool.as_deref());
        assert_eq!(first, Some(tool), "{q}");
    }
}

/// A question whose words point to the tool the model called gets that tool, not the one
/// it leaned to: "What time is it in Tokyo?" with the built-in tools and the demo weather.
/// Qwen writes `current_time` while giving 0.16, at the name's first token, to `weather`;
/// `leaned-tool` used to turn the call into the weather, and the person got the weather.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn a_time_question_gets_the_time_not_the_weather() {
    let _turn = one_at_a_time();
    let (tools, stderr) = demo_tools_called("What time is it in Tokyo?");
    assert_eq!(tools, ["current_time"], "{stderr}");
    assert!(!stderr.contains("leaned-tool"), "{stderr}");
}

/// A greeting gets an answer, not a tool: asked "Hi!" with the built-in tools and the
/// demo weather, Qwen writes `current_time(utc_offset: "+09:00")`, the clock's own
/// description example, and the fit question let it through; the person got the time
/// in Tokyo. `example-copy` declines it, and says so.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn a_greeting_gets_no_tool() {
    let _turn = one_at_a_time();
    let (tools, stderr) = demo_tools_called("Hi!");
    assert!(tools.is_empty(), "{tools:?} {stderr}");
    assert!(stderr.contains("example-copy"), "{stderr}");
}

/// The tools `toolloop ask QUESTION --builtin --demo` called on the test's server, in
/// order, and what it wrote to stderr.
fn demo_tools_called(question: &str) -> (Vec<String>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args(["ask", question, "--backend", "openai", "--base-url"])
        .arg(url())
        .args([
            "--model",
            "qwen",
            "--builtin",
            "--demo",
            "--timeout",
            "120",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let tools = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["tool"].as_str().map(String::from))
        .collect();
    (tools, stderr)
}

/// Asked about the weather in five languages, the model answers in each: the tool's
/// result is English JSON, and the line after it names the question's language
/// (`AnswerLanguage::Auto`). Without that line, 1 answer in 21 came in the question's
/// language (`scripts/whole-questions.sh` on `tests/data/whole/languages.jsonl`).
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn the_answer_comes_in_the_questions_language() {
    let _turn = one_at_a_time();
    let questions = [
        ("Wie ist das Wetter gerade in Paris?", "German"),
        ("Est-ce qu'il y a du vent à New York ?", "French"),
        ("¿Llueve ahora en Paris?", "Spanish"),
        ("東京の天気はどうですか？", "Japanese"),
        ("巴黎现在天气怎么样？", "Chinese"),
    ];
    let mut in_language = Vec::new();
    for (question, language) in questions {
        let (out, events) = run_traced(question);
        assert!(
            events.iter().any(|e| matches!(e, toolloop::Event::AnswerLanguage { language: l, detected: true } if l == language)),
            "{question}: the answer was not asked for in {language}"
        );
        let answer = out.answer().unwrap_or_default().to_string();
        // Judged by the same reading of a text's language the question had.
        let said = toolloop::AnswerLanguage::Auto
            .for_question(&answer)
            .map(|(l, _)| l);
        if said.as_deref() == Some(language) {
            in_language.push(question);
        } else {
            eprintln!("{question}: answered {answer:?}, read as {said:?}");
        }
    }
    assert!(
        in_language.len() >= 4,
        "only {in_language:?} answered in their language"
    );
}

/// Gemma 3 270M's first question, as a new user asks it: the weather in Tokyo, with the
/// calculator and the weather tool on offer, nothing calibrated. The model writes the
/// prompt's example call (`calculator` with `12.5 * 4`) and then the prompt's placeholder
/// as its answer; toolloop declines the copy and asks again among the tools the request
/// speaks to, then asks for the answer again with no placeholder to copy. The weather
/// tool runs and the answer comes from its result. The model here is the base model (the
/// only Gemma 3 270M on PyPI), which follows the prompt less well than Ollama's
/// instruction-tuned `gemma3:270m`.
#[test]
#[ignore = "needs a llama-server with Gemma 3 270M (TOOLLOOP_GEMMA_URL): run scripts/test-all.sh"]
fn gemmas_first_question_gets_the_weather_and_an_answer() {
    let _turn = one_at_a_time();
    let url = std::env::var("TOOLLOOP_GEMMA_URL")
        .expect("set TOOLLOOP_GEMMA_URL to a llama-server /v1 URL running Gemma 3 270M");
    let backend = Box::new(OpenAi::new(&url, "gemma3-270m", None));
    let (out, _) = run_traced_with(backend, "What is the weather in Tokyo?");
    let ran: Vec<(&str, String)> = out
        .steps
        .iter()
        .filter_map(|s| {
            Some((
                s.tool.as_deref()?,
                s.arguments.as_ref()?["city"].to_string(),
            ))
        })
        .collect();
    assert_eq!(
        ran.first(),
        Some(&("get_weather", "\"Tokyo\"".to_string())),
        "{ran:?}"
    );
    let answer = out
        .answer()
        .unwrap_or_else(|| panic!("no answer: {:?}", out.ending));
    let answer = answer.to_lowercase();
    assert!(
        answer.contains("sunny") || answer.contains("18"),
        "the answer is not from the result: {answer}"
    );
    assert!(!answer.contains("answer for the user"), "{answer}");
}

/// A tool's leaning (the fit question with no request) is asked by the first `toolloop
/// ask` that questions a call to it, and read from the leanings file by the next: two
/// processes asking the same questions make the same decisions, the second with one
/// request fewer for each tool the first asked about.
#[test]
#[ignore = "needs a llama-server and its calibration: see the module docs"]
fn a_later_ask_reads_the_tools_leaning_the_first_kept() {
    let _turn = one_at_a_time();
    let dir = std::env::temp_dir().join(format!("toolloop-leanings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kept = dir.join("leanings.json");
    // Questions a tool does not fit, put in words no tool's text shares: the model's call
    // is put to the fit question. On emptied slots Qwen calls `calculator` ("10") and
    // `get_weather` for these; for "What is the capital of France?" and "Wer hat Faust
    // geschrieben?" it wrote the clock's own example, which no fit question is asked about.
    let questions = ["How many legs does a spider have?", "Tell me a joke."];
    // For each question: its fit decisions, and the requests that were no model turn.
    let ask = |q: &str, pass: &str| -> (Vec<(String, f64)>, u64) {
        // As on a server just started: the model's first reply, and with it whether a
        // fit question is asked, does not move with what the tests before left in the
        // slots (a full run once got `current_time(utc_offset: "+09:00")` for both, which
        // `example-copy` declines before any fit question).
        empty_slots();
        // A transcript is appended to: one of its own for each run.
        let transcript = dir.join(format!("{pass}-{}.jsonl", q.len()));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args([
                "ask",
                q,
                "--backend",
                "openai",
                "--base-url",
                &url(),
                "--model",
                "qwen",
            ])
            .args([
                "--builtin",
                "--demo",
                "--timeout",
                "120",
                "--json",
                "--transcript",
            ])
            .arg(&transcript)
            .env("TOOLLOOP_LEANINGS", &kept)
            .output()
            .expect("run toolloop");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{q}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        let events: Vec<serde_json::Value> = std::fs::read_to_string(&transcript)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let fits = events
            .iter()
            .filter(|e| e["event"] == "decision" && e["fit"].is_f64())
            .map(|e| {
                (
                    e["tool"].as_str().unwrap().to_string(),
                    e["fit"].as_f64().unwrap(),
                )
            })
            .collect();
        let turns = events
            .iter()
            .filter(|e| e["event"] == "model_request")
            .count();
        let requests = json["budget"]["model_requests"].as_u64().unwrap();
        (fits, requests - turns as u64)
    };
    let first: Vec<_> = questions.iter().map(|q| ask(q, "first")).collect();
    let asked: std::collections::BTreeSet<&str> = first
        .iter()
        .flat_map(|(fits, _)| fits.iter().map(|(t, _)| t.as_str()))
        .collect();
    assert!(
        !asked.is_empty(),
        "no call was put to the fit question: {first:?}"
    );
    let fit_requests: u64 = first.iter().map(|(_, n)| n).sum();
    let decisions: usize = first.iter().map(|(fits, _)| fits.len()).sum();
    assert_eq!(
        fit_requests as usize,
        decisions + asked.len(),
        "each decision, and each tool's leaning once: {first:?}"
    );
    let text = std::fs::read_to_string(&kept).expect("the leanings were kept");
    for tool in &asked {
        assert!(
            text.contains(&format!("Tool: {tool} ")),
            "{tool}'s leaning: {text}"
        );
    }
    let second: Vec<_> = questions.iter().map(|q| ask(q, "second")).collect();
    for ((q, (fits, _)), (again, requests)) in questions.iter().zip(&first).zip(&second) {
        assert_eq!(
            again, fits,
            "{q}: the same decisions, read against the kept leaning"
        );
        assert_eq!(
            *requests as usize,
            again.len(),
            "{q}: no leaning asked again"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every request of a model's turn, after the first, reuses everything the server
/// evaluated for the turn before that the chat API can name again, and at least 95% of
/// all it evaluated: that prompt, and the reply as the model wrote it, which goes back
/// into the history as written or is continued in its list. Two requests send the turn
/// before's prompt without its reply, and reuse the prompt: a turn asked again after a
/// declined call (the model is not to see it), and a single call asked again for more in
/// the list form (its call, about 30 tokens, is evaluated again; continued as written
/// instead, the model added fewer calls). Read from llama-server's own `timings.cache_n`
/// and `prompt_n` on each request, over two runs: one of three turns or more (a call, a
/// second call that needs the first one's result, the answer), and one whose single call
/// `numbers-left` asks again for the calls after it. Several calls are on offer (the
/// default) and the fit questions come between the turns.
///
/// What the chat API cannot name again: the server keeps the reply as the tokens the
/// model sampled, and reads it back as the tokens its text splits into. Under the JSON
/// grammar the model sometimes samples a split the tokenizer would not make (`"}}` then
/// `,` where the text splits into `"}` and `},`), and the cache ends there: the rest of
/// that reply is evaluated again. The test asks `/tokenize` where that split comes, and
/// holds the reuse to it.
///
/// It needs two slots. On one, each fit question takes the turn's tokens out of the slot,
/// and the next turn gets back from the server's host-memory cache whichever saved prompt
/// keeps the larger share of its own tokens: after a turn asked again (the same prompt
/// without the reply its saved state ends in) that was once an earlier test's, and the
/// run reused 246 tokens where it held 266. On two, the server once put the turn in the
/// slot questions aside go to (an earlier test's fit question had left the same system
/// prompt there), and the fit question took it out the same way: the question now goes
/// to another idle slot where `GET /slots` shows the aside slot holding the latest task.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn the_prompt_cache_holds_across_every_request_of_a_run() {
    let _turn = one_at_a_time();
    let slots = props()["total_slots"].as_u64().unwrap_or(0);
    assert!(
        slots >= 2,
        "the server has {slots} slot(s): start it with two (`scripts/real-model.sh serve qwen PORT 2`)"
    );
    let seen = cache_over_a_run(
        "What is the weather in Paris right now? Then convert its temperature to \
         Fahrenheit with the calculator.",
    );
    assert!(seen.iter().filter(|s| !s.fit).count() >= 3);
    let seen = cache_over_a_run(ASKED_AGAIN);
    let turns: Vec<&Seen> = seen.iter().filter(|s| !s.fit).collect();
    let asked = turns.windows(2).find(|pair| {
        pair[1]
            .given
            .as_deref()
            .is_some_and(|g| g.contains("tool_calls"))
    });
    let Some([first, again]) = asked else {
        panic!("no call was asked again for the calls after it");
    };
    // The call asked again in the list form follows itself in the history, where the
    // 95% above holds it; sent without it, it was evaluated anew.
    assert!(
        again.messages > first.messages || first.text.contains("tool_calls"),
        "a single call asked again was sent without its reply"
    );
}

/// A request Qwen2.5-Coder 0.5B answers with one call where it needs two, and
/// `numbers-left` asks again for the rest.
const ASKED_AGAIN: &str = "What is 12*7 and what is 3+4?";

/// Runs `question`, holds each turn's reuse of the server's cache to what the turn before
/// left there, and gives back the requests as the server answered them.
fn cache_over_a_run(question: &str) -> Vec<Seen> {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let backend = Recording {
        inner: OpenAi::new(&url(), "qwen", None),
        seen: Arc::clone(&seen),
    };
    let (out, _) = run_traced_with(Box::new(backend), question);
    let seen = seen.lock().unwrap().clone();
    let turns: Vec<&Seen> = seen.iter().filter(|s| !s.fit).collect();
    assert!(turns.len() >= 2, "{} turns: {:?}", turns.len(), out.ending);
    for (i, s) in seen.iter().enumerate() {
        eprintln!(
            "request {i} ({}): {} prompt tokens, {} from the cache, {} generated",
            if s.fit { "fit question" } else { "turn" },
            s.usage.prompt_tokens,
            s.usage.cached_prompt_tokens.unwrap_or(0),
            s.usage.completion_tokens
        );
    }
    for pair in turns.windows(2) {
        let (first, next) = (pair[0], pair[1]);
        let before = first.usage.prompt_tokens + first.usage.completion_tokens;
        let cached = next
            .usage
            .cached_prompt_tokens
            .expect("llama-server reports cache_n");
        // A turn continued from a beginning it was given: the server evaluated that
        // beginning as prompt, and only the rest was written.
        let written_text = first.text[first.given.as_ref().map_or(0, String::len)..].to_string();
        let as_text = tokenize(&written_text);
        let same = first
            .written
            .iter()
            .zip(&as_text)
            .take_while(|(a, b)| a == b)
            .count();
        eprintln!(
            "a reply of {} tokens as written: its text splits the same way for the first {same}",
            first.written.len()
        );
        // The reply's last tokens (its closing brace, the end of turn) are written again
        // around it, by the chat template or by the calls that continue it; everything
        // before them comes back. That holds too where every token written splits the
        // same way again and the text reads as one token more at its end.
        let whole =
            same >= as_text.len() || (!first.written.is_empty() && same >= first.written.len());
        let nameable = if whole {
            before.saturating_sub(2)
        } else {
            first.usage.prompt_tokens + same as u64
        };
        // A turn asked again after a declined call (`tool-fit`, `nothing-new`) sends the
        // prompt of the turn before without its reply, which the model is not to see; the
        // server evaluates the prompt's last token anew whatever it holds. A turn of calls
        // asked again for more continues its reply, or follows it in the history.
        let continued = next
            .given
            .as_deref()
            .and_then(|g| g.strip_suffix(','))
            .is_some_and(|g| first.text.starts_with(g));
        let reply_dropped = next.messages == first.messages && !continued;
        let nameable = match reply_dropped {
            true => nameable.min(first.usage.prompt_tokens),
            false => nameable,
        };
        let least = nameable.min(next.usage.prompt_tokens.saturating_sub(1));
        assert!(
            cached >= least,
            "reused {cached} of the {before} tokens evaluated for the turn before, \
             {least} of which the chat API names again"
        );
        assert!(
            reply_dropped || cached as f64 >= 0.95 * before as f64,
            "reused {cached} of the {before} tokens evaluated for the turn before"
        );
        // Without the reply, all the request sends was evaluated before.
        assert!(
            !reply_dropped || cached as f64 >= 0.95 * next.usage.prompt_tokens as f64,
            "reused {cached} of the {} tokens sent, all evaluated for the turn before",
            next.usage.prompt_tokens
        );
    }
    seen
}

/// An answer's reply ends where its content closes: the same answer as the model writes
/// to the end, fewer tokens generated, and the prompt's counts still read, from the
/// timings llama-server sends with every token.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn an_answer_ends_where_its_content_closes() {
    use toolloop::turn::schema::Decide;
    let _turn = one_at_a_time();
    let schema = CallSchema::answer_only_deciding(Decide::Probability);
    let messages = [
        Message::system(
            "You answer by replying with one JSON object: \
             {\"kind\": \"final_answer\", \"content\": <the answer>, \"thought\": \"\"}",
        ),
        Message::user("What is the capital of France?"),
    ];
    let ask = |answer_end| {
        let options = GenOptions {
            num_predict: Some(64),
            temperature: Some(0.0),
            answer_end,
            ..GenOptions::default()
        };
        one_reply(&messages, &schema, &options)
    };
    let whole = ask(None);
    let ended = ask(schema.answer_end());
    let turn = |text: &str| Turn::parse(text).unwrap().turn;
    assert_eq!(turn(&ended.text), turn(&whole.text), "the same answer");
    assert!(
        ended.usage.completion_tokens + 4 <= whole.usage.completion_tokens,
        "{:?} against {:?}",
        ended.usage,
        whole.usage
    );
    assert!(ended.usage.prompt_tokens > 0, "{:?}", ended.usage);
}

/// A turn begun at its kind (`{"kind": "`, what the schema forces before the model's
/// first choice) is the turn the model writes whole: the same call, its probability for
/// calling read at the first token it generated, and those four tokens not generated.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn a_turn_begun_at_its_kind_is_the_turn_written_whole() {
    use toolloop::turn::schema::Decide;
    let _turn = one_at_a_time();
    let calculator = ToolSpec::new(
        "calculator",
        "Evaluates an arithmetic expression",
        json!({"type": "object", "properties": {"expression": {"type": "string"}},
               "required": ["expression"]}),
    );
    let schema = CallSchema::deciding(&[calculator], Narrowing::PerTool, Decide::Probability);
    let messages = [
        Message::system(
            "You call a tool by replying with one JSON object: \
             {\"kind\": \"tool_call\", \"thought\": \"<two words>\", \"tool\": <name>, \"arguments\": {...}}",
        ),
        Message::user("What is 123.5 times 48?"),
    ];
    let ask = |prefill| {
        let options = GenOptions {
            num_predict: Some(160),
            temperature: Some(0.0),
            top_logprobs: Some(10),
            prefill,
            ..GenOptions::default()
        };
        one_reply(&messages, &schema, &options)
    };
    let whole = ask(None);
    let begun = ask(schema.beginning());
    assert_eq!(begun.given, r#"{"kind": ""#.len());
    let turn = |text: &str| Turn::parse(text).unwrap().turn;
    assert_eq!(turn(&begun.text), turn(&whole.text), "the same turn");
    let p = |r: &toolloop::backend::ChatReply| {
        toolloop::checks::tool_share(r).expect("p(tool) is read")
    };
    eprintln!("p(tool): {} written whole, {} begun", p(&whole), p(&begun));
    assert!(
        begun.usage.completion_tokens + 3 <= whole.usage.completion_tokens,
        "{:?} against {:?}",
        begun.usage,
        whole.usage
    );
}

/// A turn asked again for one call more (`numbers-left`: one sum of two asked for) is
/// continued from the call it made: llama-server takes that call as the beginning of its
/// reply under the schema's grammar, the model writes only the call after it, and the
/// first call runs as it was written.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn a_turn_asked_again_continues_from_the_calls_made() {
    use std::sync::{Arc, Mutex};
    let _turn = one_at_a_time();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let backend = Recording {
        inner: OpenAi::new(&url(), "qwen", None),
        seen: Arc::clone(&seen),
    };
    let (out, events) = run_traced_with(Box::new(backend), "What is 2+2 and 3+3?");
    assert!(
        events.iter().any(|e| matches!(
            e,
            toolloop::Event::Check {
                action: toolloop::CheckAction::AskModel { .. },
                ..
            }
        )),
        "the first turn was not asked again: {:?}",
        out.steps
    );
    let seen = seen.lock().unwrap().clone();
    let continued = seen
        .iter()
        .find(|s| s.given.as_deref().is_some_and(|g| g.contains("\"calls\"")))
        .expect("the turn asked again was given its calls to continue");
    let given = continued.given.as_deref().unwrap();
    assert!(continued.text.starts_with(given), "{}", continued.text);
    let written: String = continued.written.concat();
    assert!(
        !written.contains("2+2") && !written.contains("2 + 2"),
        "the model wrote its first call again: {written}"
    );
    let first = &out.steps.iter().find(|s| s.tool.is_some()).unwrap();
    let expression = first.arguments.as_ref().unwrap()["expression"].to_string();
    assert!(given.contains(&expression), "{expression} not in {given}");
    let sums: Vec<_> = out.steps.iter().filter(|s| s.tool.is_some()).collect();
    assert!(sums.len() >= 2, "{:?}", out.steps);
}

/// One request of `messages` under `schema` to a fresh backend that has read whether
/// the server is llama-server (its preflight), and the reply.
fn one_reply(
    messages: &[Message],
    schema: &CallSchema,
    options: &GenOptions,
) -> toolloop::backend::ChatReply {
    let req = ChatRequest {
        messages,
        schema: Some(schema.as_value()),
        options,
    };
    let mut backend = OpenAi::new(&url(), "qwen", None);
    let deadline = Deadline::after(Duration::from_secs(120));
    backend.preflight(deadline).unwrap();
    let reply = backend
        .chat(&req, deadline, &mut toolloop::backend::keep_going)
        .unwrap();
    eprintln!("{}: {:?}", reply.text, reply.usage);
    reply
}

/// llama-server's `/props`.
fn props() -> serde_json::Value {
    let root = url()
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    let body = ureq::get(format!("{root}/props"))
        .call()
        .expect("llama-server's /props answers")
        .body_mut()
        .read_to_string()
        .expect("/props answers");
    serde_json::from_str(&body).expect("/props answers JSON")
}

/// Empties every slot's kept prompt (`scripts/real-model.sh` starts llama-server with
/// `--slot-save-path`, which its slot actions need), so that what follows is evaluated as
/// on a server just started. Which prompt a slot kept changes how a new one is split into
/// batches, and with it the last digits of the arithmetic: a borderline reply then moves
/// with whatever test ran before, not with toolloop.
fn empty_slots() {
    let root = url()
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    let slots = props()["total_slots"].as_u64().unwrap_or(1);
    for id in 0..slots {
        ureq::post(format!("{root}/slots/{id}?action=erase"))
            .send_empty()
            .unwrap_or_else(|e| {
                panic!(
                    "slot {id} could not be emptied ({e}): start llama-server with --slot-save-path"
                )
            });
    }
}

/// The tokens the server splits `text` into, as their text.
fn tokenize(text: &str) -> Vec<String> {
    let root = url()
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    let body = ureq::post(format!("{root}/tokenize"))
        .header("Content-Type", "application/json")
        .send(json!({"content": text, "with_pieces": true}).to_string())
        .expect("llama-server's /tokenize answers")
        .body_mut()
        .read_to_string()
        .expect("/tokenize answers");
    let body: serde_json::Value = serde_json::from_str(&body).expect("/tokenize answers JSON");
    body["tokens"]
        .as_array()
        .expect("/tokenize lists tokens")
        .iter()
        .map(|t| t["piece"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// One request as the server answered it.
#[derive(Clone)]
struct Seen {
    fit: bool,
    usage: toolloop::backend::Usage,
    /// The reply's text, and its tokens as the model sampled them.
    text: String,
    written: Vec<String>,
    /// The beginning the server was given to continue (`GenOptions::prefill`).
    given: Option<String>,
    /// The messages sent: a turn asked again sends those of the turn before.
    messages: usize,
}

/// A backend that notes each request's usage as the server reported it.
struct Recording {
    inner: OpenAi,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
}

impl Backend for Recording {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn identity(&self) -> Option<(String, String)> {
        self.inner.identity()
    }
    fn watch(&mut self, stop: &toolloop::StopHandle) {
        self.inner.watch(stop)
    }
    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: toolloop::backend::TextSink<'_>,
    ) -> Result<toolloop::backend::ChatReply, toolloop::BackendError> {
        let reply = self.inner.chat(request, deadline, sink)?;
        let fit = request
            .schema
            .is_some_and(|s| s["properties"].get("answer").is_some());
        self.seen.lock().unwrap().push(Seen {
            fit,
            usage: reply.usage,
            text: reply.text.clone(),
            written: reply.logprobs.iter().map(|t| t.token.clone()).collect(),
            given: Some(reply.text[..reply.given].to_string()).filter(|g| !g.is_empty()),
            messages: request.messages.len(),
        });
        Ok(reply)
    }
}

/// The web page with the real model: a question asked in headless Chromium, its steps
/// and the answer shown (`tests/web/e2e.cjs real`).
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn the_web_page_shows_a_real_models_run() {
    let _turn = one_at_a_time();
    use std::sync::Arc;
    use toolloop::serve::{Runs, WebServer};
    let make = || -> Result<Box<dyn Backend>, toolloop::OrchestratorError> {
        Ok(Box::new(OpenAi::new(&url(), "qwen", None)))
    };
    let config = toolloop::Config {
        model: "qwen".into(),
        timeout: Duration::from_secs(180),
        ..toolloop::Config::default()
    };
    let runs = Runs::new(
        Box::new(make),
        Arc::new(deterministic_tools()),
        config,
        1,
        4,
    );
    let web = WebServer::bind("127.0.0.1:0", runs).unwrap().spawn();
    if let Some(out) = common::browser::drive("real", web.url()) {
        eprintln!("{out}");
    }
}

/// A tool whose schema has a negated character class (`[^,]`): llama.cpp lets the model
/// write a bare quote there, and llama-server then failed the request with a 500 ("does
/// not match the expected peg-native format") for this very question. toolloop refuses
/// the quote in such classes (`tool_schema::quote_safe`), so the reply comes back valid.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn a_pattern_with_a_negated_class_gets_a_valid_reply() {
    let _turn = one_at_a_time();
    let tool = ToolSpec::new(
        "restaurant.find_nearby",
        "Locate nearby restaurants based on specific criteria like cuisine type.",
        json!({"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. Seattle, WA",
                         "pattern": "^[^,]+, [A-Z]{2}$"},
            "cuisine": {"type": "string", "description": "Preferred type of cuisine in restaurant."},
            "max_distance": {"type": "integer", "description": "Maximum distance (in miles). Default is 5."}},
            "required": ["location", "cuisine"]}),
    );
    let tools = [tool];
    let schema = CallSchema::for_tools(&tools, Narrowing::PerTool);
    let prompt = toolloop::turn::prompt::build_system_prompt(&tools, None);
    let messages = [
        Message::system(prompt),
        Message::user(
            "Find restaurants near me within 10 miles that offer Chinese cuisine in Seattle.",
        ),
    ];
    let options = GenOptions {
        temperature: Some(0.0),
        num_predict: Some(256),
        ..GenOptions::default()
    };
    let request = ChatRequest {
        messages: &messages,
        schema: Some(schema.as_value()),
        options: &options,
    };
    let mut backend = OpenAi::new(&url(), "qwen", None);
    let reply = backend
        .chat(
            &request,
            Deadline::after(Duration::from_secs(60)),
            &mut toolloop::backend::keep_going,
        )
        .expect("llama-server answers the request");
    let turn = Turn::parse(&reply.text).expect("a turn").turn;
    schema.check(&turn).expect("valid under the schema");
}

/// The same ten requests in English, German, French, Spanish and Japanese
/// (`tests/data/languages`: five need one of three tools, five need none), each run
/// through the loop with the model's calibrated thresholds until its first call or its
/// answer. Issue 27's aim, asserted as the issue words it: in every language at least 8
/// of 10 decisions are right and none is more than one below English; and at least three
/// of the five right calls go ahead (the decision works on meaning, not on the words of
/// the English tool descriptions, which declined every one outside English before).
/// With the fit question asking whether the tool is needed (`BENCHMARKS.md`, thirtieth
/// and thirty-first passes), on one slot and on the two slots and calibration of
/// `scripts/test-all.sh` alike: en 9, de 9, fr 10, es 10, ja 9, no right call declined by
/// `tool-fit` (German's umbrella and Japanese's division were the model's own copies of
/// an example, which `example-copy` declines; English's miss is a poem that called the
/// weather). Each case is asked on emptied slots ([`empty_slots`]): asked after whatever
/// the other tests left in them, a full run once got en 10 and ja 8 (Japanese's umbrella
/// copying `A1234`), and the same binary alone en 10 and ja 9; on emptied slots, twice, the
/// figures above. The bounds leave one decision's room a language: llama-server is built for
/// one instruction set (`scripts/real-model.sh`), so a CI machine's calibration and
/// answers are this machine's. Before the wording changed they were looser (at least 6,
/// within three), as the wording before gave en 9, de 9, fr 9, es 8, ja 8 and once es 6.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn every_language_keeps_its_right_calls_and_decides_near_english() {
    let _turn = one_at_a_time();
    use std::collections::BTreeMap;
    use toolloop::tools::FnTools;

    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/languages");
    let mut cases: Vec<(String, String, Option<String>, Vec<serde_json::Value>)> = Vec::new();
    let answers: BTreeMap<String, String> =
        std::fs::read_to_string(data.join("possible_answer/BFCL_v4_languages.json"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| {
                let tool = v["ground_truth"][0]
                    .as_object()
                    .unwrap()
                    .keys()
                    .next()
                    .unwrap();
                (v["id"].as_str().unwrap().to_string(), tool.clone())
            })
            .collect();
    for file in [
        "BFCL_v4_languages.json",
        "BFCL_v4_languages_irrelevance.json",
    ] {
        for line in std::fs::read_to_string(data.join(file)).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = v["id"].as_str().unwrap().to_string();
            let lang = id.split('_').rev().nth(1).unwrap().to_string();
            let question = v["question"][0][0]["content"].as_str().unwrap().to_string();
            let functions = v["function"].as_array().unwrap().clone();
            cases.push((lang, question, answers.get(&id).cloned(), functions));
        }
    }
    let mut right: BTreeMap<String, usize> = BTreeMap::new();
    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    for (lang, question, expected, functions) in &cases {
        // Each case as a person's first question: the same reply whatever ran before.
        empty_slots();
        let mut tools = FnTools::new();
        for f in functions {
            let mut params = f["parameters"].clone();
            params["type"] = json!("object");
            // Stand-ins for tools that read, as eval runs BFCL's: undeclared, they would be
            // taken to write, and judged by the stricter question for such calls.
            let spec = ToolSpec::new(
                f["name"].as_str().unwrap(),
                f["description"].as_str().unwrap(),
                params,
            )
            .reading_only();
            tools.add(spec, |_| Ok(json!("recorded")));
        }
        let stop = toolloop::StopHandle::default();
        let on_call = stop.clone();
        let first = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
        let seen = std::sync::Arc::clone(&first);
        let mut o = toolloop::Orchestrator::builder()
            .backend(Box::new(OpenAi::new(&url(), "qwen", None)))
            .source(tools)
            .timeout(Duration::from_secs(120))
            .stop_handle(stop)
            .observer(move |e: &toolloop::Event| {
                if let toolloop::Event::ToolCall { tool, .. } = e {
                    seen.lock().unwrap().get_or_insert(tool.clone());
                    on_call.stop();
                }
                if let Some(line) = e.check_line() {
                    eprintln!("  {line}");
                }
            })
            .build()
            .unwrap();
        let _ = o.run(question);
        let called = first.lock().unwrap().clone();
        let ok = called == *expected;
        eprintln!("{lang} {question:?}: called {called:?}, expected {expected:?}");
        *right.entry(lang.clone()).or_default() += usize::from(ok);
        if expected.is_some() {
            *calls.entry(lang.clone()).or_default() += usize::from(ok);
        }
    }
    eprintln!("right decisions of 10, per language: {right:?}; right calls of 5: {calls:?}");
    let english = right["en"];
    for (lang, n) in &right {
        assert!(
            calls[lang] >= 3,
            "{lang}: {} of 5 right calls went ahead ({calls:?})",
            calls[lang]
        );
        assert!(*n >= 8, "{lang}: {n} of 10 right ({right:?})");
        assert!(
            *n + 1 >= english,
            "{lang}: {n} of 10, more than one below English's {english} ({right:?})"
        );
    }
}

/// `toolloop calibrate` asked its questioned calls a second time and kept right calls by
/// a margin for how much the fit answer moved: the calibration these tests read says how
/// much, and its bar sits that far below the right calls it kept (`BENCHMARKS.md`, "A
/// margin for the fit's own noise"). Four at once it measured 0.007–0.012, two at once
/// 0.011–0.015; one at a time a few thousandths at most, since the question is evaluated
/// whole (`BENCHMARKS.md`, "The fit answer without the cache"). The bar also stays under
/// the floor of its right calls (`BENCHMARKS.md`, "A floor for right calls of other sets").
#[test]
#[ignore = "needs a llama-server and its calibration: see the module docs"]
fn calibration_measured_how_much_the_fit_answer_moves() {
    let path = std::env::var("TOOLLOOP_CALIBRATION").expect("set TOOLLOOP_CALIBRATION");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let entry = file["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["model"] == "qwen" && e["server"] == url())
        .expect("an entry for qwen at this server");
    let noise = entry["measured"]["fit_noise"]
        .as_f64()
        .expect("the spread was measured: enough calls were asked twice");
    // `scripts/test-all.sh` calibrates one case at a time, and llama-server evaluates a
    // fit question whole (`cache_prompt: false`): asked twice, it answers the same or
    // nearly (0.0006 and 0.003 in two CI runs, 2026-11-28). What a user depends on is
    // that the fit answer moves far less than right calls stand above needless ones
    // (0.515 against about 0.43 on the tuning half), and that calibration keeps right
    // calls by the spread it measured.
    assert!(
        (0.0..0.02).contains(&noise),
        "one fit answer's spread {noise}, one at a time"
    );
    let fit_min = entry["thresholds"]["fit_min"].as_f64().unwrap();
    assert!(fit_min > 0.0 && fit_min < 1.0, "{entry}");
    // One set's lowest right call is not another's: the bar stays under the floor drawn
    // from how the tuning half's right calls spread, and the floor is saved with it.
    let right = &entry["measured"]["right_fit"];
    let floor = right["floor"]
        .as_f64()
        .expect("the right calls' floor was saved");
    assert!(right["calls"].as_u64().unwrap() >= 5, "{entry}");
    assert!(fit_min <= floor, "bar {fit_min} above the floor {floor}");
}

/// A real llama-server given to the default (Ollama) backend: the message names the flags
/// for it, not `ollama pull`, and the run ends with a runtime error.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn a_llama_server_given_as_ollama_names_the_flags_that_reach_it() {
    let _turn = one_at_a_time();
    let host = url().trim_end_matches("/v1").to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args(["ask", "hi", "--builtin", "--ollama-host", &host])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is not Ollama: an OpenAI-compatible server answers there")
            && err.contains(&format!("--backend openai --base-url {host}/v1")),
        "{err}"
    );
    assert!(!err.contains("ollama pull"), "{err}");
}

/// The official `openai` (plain and streamed) and `ollama` clients, and the OpenAI Agents
/// SDK's own tool loop, through `toolloop proxy` in front of the real llama-server: each
/// asks for Oslo's weather, runs the `get_weather` call that comes back, sends its result
/// and gets an answer that uses it. The Agents SDK because it runs the whole loop itself
/// on Chat Completions with tools, through the official client, as a user's agent would.
#[test]
#[ignore = "needs a llama-server and Python's openai, ollama and openai-agents: run scripts/test-all.sh"]
fn official_clients_and_an_agent_framework_run_a_whole_loop_through_the_proxy() {
    let _turn = one_at_a_time();
    let python = std::env::var("TOOLLOOP_CLIENTS_PYTHON")
        .expect("set TOOLLOOP_CLIENTS_PYTHON (scripts/py-clients.sh)");
    let base = url();
    let args = [
        "--backend",
        "openai",
        "--base-url",
        &base,
        "--model",
        "qwen",
        "--timeout",
        "120",
    ];
    let (_proxy, addr) = common::serving("proxy", &args, false);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients.py");
    for mode in ["openai", "openai-stream", "ollama", "agents"] {
        let out = std::process::Command::new(&python)
            .args([script, mode, &format!("http://{addr}"), "qwen"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(v["calls"][0][0], "get_weather", "{mode}: {v}");
        assert!(
            v["calls"][0][1]["city"]
                .as_str()
                .is_some_and(|c| c.contains("Oslo")),
            "{mode}: {v}"
        );
        let answer = v["answer"].as_str().unwrap_or_default();
        assert!(
            answer.contains('4'),
            "{mode}: the answer uses the result: {v}"
        );
    }
}

/// A fresh install on this server finds the calibration toolloop ships for the Qwen file
/// it runs (by `/props`' `model_path`, its size and the SHA-256 of its first bytes), and a
/// person's own calibration stands over it.
#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn a_fresh_install_finds_the_calibration_shipped_for_the_qwen_file() {
    let _turn = one_at_a_time();
    let dir = std::env::temp_dir().join(format!("toolloop-shipped-{}", std::process::id()));
    let build = |calibration: std::path::PathBuf| {
        let config = toolloop::Config {
            calibration: Some(calibration),
            tools: toolloop::tools::ToolSetup::default(),
            ..Default::default()
        };
        let mut o = toolloop::Orchestrator::builder()
            .settings(config)
            .backend(OpenAi::new(&url(), "qwen", None))
            .build()
            .unwrap();
        o.preflight(Deadline::after(Duration::from_secs(10)))
            .unwrap();
        o.config().thresholds.clone().unwrap()
    };
    let t = build(dir.join("none.json"));
    assert!(
        t.calibrated_for
            .as_deref()
            .is_some_and(|c| c.starts_with("Qwen2.5-Coder 0.5B Instruct Q4_K_M")),
        "{:?} for {:?}",
        t,
        props()["model_path"]
    );
    let own = toolloop::Thresholds {
        fit_min: 0.3,
        calibrated_for: Some("qwen".into()),
        ..toolloop::Thresholds::default()
    };
    let mut file = toolloop::CalibrationFile::default();
    let path = dir.join("own.json");
    file.save(
        &path,
        toolloop::Calibration {
            model: "qwen".into(),
            server: url(),
            thresholds: own.clone(),
            data: "a test".into(),
            when: "now".into(),
            measured: json!({}),
        },
    )
    .unwrap();
    assert_eq!(build(path).fit_min, own.fit_min);
    let _ = std::fs::remove_dir_all(&dir);
}
