//! The loop end to end, with the scripted model and our real built-in tool server on
//! 127.0.0.1: the seed's four scenarios (one iteration, max iterations, timeout, tool
//! error) and every behaviour the loop promises.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use toolloop::Deadline;
use toolloop::backend::{Role, StopReason, Usage};
use toolloop::backend::{Scripted, ScriptedReply, SeenRequests};
use toolloop::serve::{RunningServer, ToolServer};
use toolloop::tools::FnTools;
use toolloop::tools::HttpTools;
use toolloop::tools::{Builtin, BuiltinConfig};
use toolloop::tools::{Catalogue, ToolSpec};
use toolloop::{Action, Guardrails};
use toolloop::{CheckAction, Event, Trace, Transcript};
use toolloop::{Ending, StopKind};
use toolloop::{Orchestrator, OrchestratorBuilder, OrchestratorError};

fn server() -> RunningServer {
    let tools = Builtin::new(&BuiltinConfig {
        demo: true,
        ..Default::default()
    })
    .unwrap();
    ToolServer::bind("127.0.0.1:0", Box::new(tools))
        .unwrap()
        .spawn()
}

fn catalogue(server: &RunningServer) -> Catalogue {
    Catalogue::load(
        vec![Box::new(HttpTools::new(server.url()))],
        Deadline::none(),
    )
    .unwrap()
}

fn builder(model: Scripted, server: &RunningServer) -> OrchestratorBuilder {
    Orchestrator::builder()
        .backend(model)
        .catalogue(catalogue(server))
        .timeout(Duration::from_secs(10))
}

fn call(tool: &str, args: serde_json::Value) -> String {
    json!({"kind": "tool_call", "thought": format!("use {tool}"), "tool": tool, "arguments": args})
        .to_string()
}

fn answer(text: &str) -> String {
    json!({"kind": "final_answer", "thought": "done", "content": text}).to_string()
}

fn events() -> (Arc<Mutex<Vec<Event>>>, impl FnMut(&Event) + Send + 'static) {
    let store = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&store);
    (store, move |e: &Event| s.lock().unwrap().push(e.clone()))
}

#[test]
fn seed_scenario_one_iteration() {
    let s = server();
    let mut o = builder(Scripted::new([answer("Hello!")]), &s)
        .build()
        .unwrap();
    let out = o.run("Say hello").unwrap();
    assert_eq!(out.answer(), Some("Hello!"));
    assert_eq!(out.stop_reason(), StopKind::Completed);
    assert_eq!(out.iterations, 1);
    assert_eq!(out.history_delta().len(), 2, "question and answer");
    assert_eq!(out.history_delta()[0].content, "Say hello");
}

/// The first system prompt a run sends, with `tools` and the date set to `today`.
fn first_system_prompt(tools: FnTools, today: toolloop::Today) -> (String, String) {
    let model = Scripted::new([answer("Tuesday.")]);
    let seen: SeenRequests = model.seen();
    let mut o = Orchestrator::builder()
        .backend(model)
        .catalogue(Catalogue::load(vec![Box::new(tools)], Deadline::none()).unwrap())
        .today(today)
        .build()
        .unwrap();
    o.run("What day is it tomorrow?").unwrap();
    let sent = seen.lock().unwrap()[0][0].clone();
    assert_eq!(sent.role, Role::System);
    (sent.content, o.system_prompt().to_string())
}

fn tool_with(param: &str, description: &str) -> FnTools {
    let mut f = FnTools::new();
    f.add(
        ToolSpec::new(
            "lookup",
            "Looks something up",
            json!({"type": "object", "properties": {param: {"type": "string", "description": description}}}),
        )
        .reading_only(),
        |_| Ok(json!("found")),
    );
    f
}

/// A person says "tomorrow": a tool that takes a date can only get the day if the model
/// is told today's. A catalogue with no such tool is sent its prompt as it was built.
#[test]
fn the_model_is_told_the_day_it_is_where_a_tool_takes_a_date() {
    let day = toolloop::Today::On(chrono::NaiveDate::from_ymd_opt(2026, 12, 7).unwrap());
    let line = "\nToday is Monday, 2026-12-07; tomorrow is Tuesday, 2026-12-08.\n";
    for tool in [
        tool_with("date", "The day."),
        tool_with("when", "The day, as YYYY-MM-DD."),
    ] {
        let (sent, built) = first_system_prompt(tool, day);
        assert_eq!(sent, format!("{built}{line}"));
    }
    let (sent, built) = first_system_prompt(tool_with("date", "The day."), toolloop::Today::Off);
    assert_eq!(sent, built);
    let (sent, built) = first_system_prompt(tool_with("city", "The city."), day);
    assert_eq!(sent, built);
    assert!(!sent.contains("Today is"));
}

#[test]
fn tool_call_over_http_then_answer_from_the_result() {
    let s = server();
    let model = Scripted::new([
        call("calculator", json!({"expression": "12.5 * 4"})),
        answer("12.5 * 4 = 50"),
    ]);
    let seen = model.seen();
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("How much is 12.5 * 4?").unwrap();
    assert_eq!(out.answer(), Some("12.5 * 4 = 50"));
    assert_eq!(out.iterations, 2);
    let step = &out.steps[0];
    assert_eq!(step.tool.as_deref(), Some("calculator"));
    assert_eq!(step.observation, "50");
    assert!(step.ok);
    let second = &seen.lock().unwrap()[1];
    let last = second.last().unwrap();
    // The result, then the line that asks for the answer or the next step.
    assert_eq!(last.role, Role::Tool);
    assert!(
        last.content
            .starts_with("50\nIf this answers the question, reply with final_answer"),
        "{}",
        last.content
    );
    assert_eq!(last.tool_name.as_deref(), Some("calculator"));
}

/// The budget says when the first call went off: after the model's first reply, before
/// its answer; a run that calls nothing has no such time.
#[test]
fn the_budget_says_when_the_first_call_went_off() {
    let s = server();
    let model = Scripted::new([
        call("calculator", json!({"expression": "12.5 * 4"})),
        answer("12.5 * 4 = 50"),
    ])
    .with_delay(Duration::from_millis(200));
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("How much is 12.5 * 4?").unwrap();
    let first = out.budget.first_call_ms.expect("a call was made");
    assert_eq!(out.budget.first_calls, 1);
    assert!(first >= 200, "after the first reply: {first} ms");
    assert!(
        first < out.budget.model_ms,
        "before the answer: {:?}",
        out.budget
    );
    assert!(
        out.budget.line().contains("first call at 0."),
        "{}",
        out.budget.line()
    );
    let mut o = builder(Scripted::new([answer("Hello!")]), &s)
        .build()
        .unwrap();
    let out = o.run("Say hello").unwrap();
    assert_eq!(
        (out.budget.first_call_ms, out.budget.first_calls),
        (None, 0)
    );
    assert!(!out.budget.line().contains("first call"));
}

/// The budget says how much of the model's time went to the checks' questions aside, so a
/// person reading it can tell the fit question's cost from the model's turns.
#[test]
fn the_budget_says_what_the_questions_aside_took() {
    let s = server();
    // A call whose tool shares no word with the request is put to the fit question. The
    // call is Qwen's, recorded with the probabilities the question is asked on.
    let recorded = std::fs::read_to_string("tests/data/qwen_capital.jsonl").unwrap();
    let first: ScriptedReply = serde_json::from_str(recorded.lines().next().unwrap()).unwrap();
    let model = Scripted::from_replies([
        first,
        ScriptedReply::text("yes"),
        ScriptedReply::text(answer("Paris")),
    ])
    .with_delay(Duration::from_millis(100));
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("What is the capital of France?").unwrap();
    let b = out.budget;
    assert_eq!(b.model_requests, 3, "{b:?}");
    assert!(b.aside_ms >= 100, "the question aside: {b:?}");
    assert!(b.model_ms >= b.aside_ms + 200, "and two turns: {b:?}");
    assert!(b.line().contains("s of it questions aside"), "{}", b.line());
    // A run with no question aside says nothing of them.
    let mut o = builder(Scripted::new([answer("Hello!")]), &s)
        .build()
        .unwrap();
    let out = o.run("Say hello").unwrap();
    assert_eq!(out.budget.aside_ms, 0);
    assert!(!out.budget.line().contains("aside"));
}

#[test]
fn seed_scenario_max_iterations_carries_the_steps() {
    let s = server();
    let model = Scripted::new([
        call("calculator", json!({"expression": "1 + 1"})),
        r#"{"kind":"clarify","thought":"","question":"Which numbers?","missing_params":[]}"#
            .to_string(),
    ]);
    let mut o = builder(model, &s)
        .max_iterations(2)
        .clarify_handler(|_: &str, _: &[String]| Some("any".to_string()))
        .build()
        .unwrap();
    let out = o.run("Add 1 and 1, and some more numbers").unwrap();
    assert_eq!(out.stop_reason(), StopKind::MaxIterations);
    let err = out.into_answer().unwrap_err();
    assert!(
        matches!(
            err,
            OrchestratorError::MaxIterationsReached { iterations: 2, .. }
        ),
        "{err}"
    );
    assert_eq!(err.steps().len(), 2);
    assert_eq!(err.steps()[0].observation, "2");
}

#[test]
fn seed_scenario_timeout_ends_within_the_deadline() {
    let s = server();
    let model = Scripted::new([answer("late")]).with_delay(Duration::from_secs(5));
    let mut o = builder(model, &s)
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    let started = Instant::now();
    let out = o.run("anything").unwrap();
    assert_eq!(out.stop_reason(), StopKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(
        out.into_answer(),
        Err(OrchestratorError::Timeout { .. })
    ));
}

#[test]
fn seed_scenario_tool_error_goes_back_to_the_model() {
    let s = server();
    let model = Scripted::new([
        call("get_weather", json!({"city": "Atlantis"})),
        answer("I have no weather for Atlantis."),
    ]);
    let seen = model.seen();
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("Weather in Atlantis?").unwrap();
    assert_eq!(out.stop_reason(), StopKind::Completed);
    assert!(!out.steps[0].ok);
    assert!(
        out.steps[0]
            .observation
            .starts_with("error: no weather for \"Atlantis\"")
    );
    assert!(
        seen.lock().unwrap()[1]
            .last()
            .unwrap()
            .content
            .starts_with("error: no weather")
    );
}

#[test]
fn invalid_reply_is_fed_back_and_the_model_recovers() {
    let s = server();
    let (log, observer) = events();
    let model = Scripted::new(["The weather is nice.".to_string(), answer("Sunny.")]);
    let seen = model.seen();
    let mut o = builder(model, &s).observer(observer).build().unwrap();
    let out = o.run("Weather?").unwrap();
    assert_eq!(out.answer(), Some("Sunny."));
    let feedback = seen.lock().unwrap()[1].last().unwrap().content.clone();
    assert!(
        feedback.starts_with("Your last reply was not valid: reply is not JSON"),
        "{feedback}"
    );
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::Invalid { attempt: 1, .. }))
    );
}

#[test]
fn a_reply_that_repeats_itself_is_stopped_and_kept_up_to_the_loop() {
    let s = server();
    let (log, observer) = events();
    let numerals = [
        "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII",
    ];
    let list: String = numerals
        .iter()
        .map(|n| format!(", The Godfather {n}"))
        .collect();
    let looping = answer(&format!("Try The Godfather{list}{}", list.repeat(20)));
    let model = Scripted::new([looping.clone()]);
    let mut o = builder(model, &s).observer(observer).build().unwrap();
    let out = o.run("Which films should I watch?").unwrap();
    assert_eq!(out.stop_reason(), StopKind::Completed);
    assert_eq!(out.answer(), Some("Try The Godfather"));
    let log = log.lock().unwrap();
    let streamed: usize = log
        .iter()
        .filter_map(|e| match e {
            Event::ModelText { text } => Some(text.len()),
            _ => None,
        })
        .sum();
    assert!(
        streamed < looping.len() / 4,
        "the stream went on: {streamed} of {} bytes",
        looping.len()
    );
    assert!(
        log.iter()
            .any(|e| matches!(e, Event::Check { action: CheckAction::StopStream { .. }, why, .. } if why.contains("\"the godfather\"")))
    );
}

#[test]
fn the_same_calls_written_over_and_over_are_run_once_each() {
    let s = server();
    let (log, observer) = events();
    let two = [("calculator", "36 + 48"), ("calculator", "60 + 96")]
        .map(|(tool, e)| json!({"tool": tool, "arguments": {"expression": e}}));
    let calls: Vec<_> = two.iter().cycle().take(16).cloned().collect();
    let looping = json!({"kind": "tool_calls", "thought": "", "calls": calls}).to_string();
    let model = Scripted::new([looping, answer("84 and 156")]);
    let mut o = builder(model, &s).observer(observer).build().unwrap();
    let out = o.run("What are 36 + 48 and 60 + 96?").unwrap();
    assert_eq!(out.answer(), Some("84 and 156"));
    let run: Vec<&str> = out
        .steps
        .iter()
        .filter(|s| s.tool.is_some())
        .map(|s| s.observation.as_str())
        .collect();
    assert_eq!(run, ["84", "156"]);
    assert!(log.lock().unwrap().iter().any(|e| matches!(
        e,
        Event::Check { action: CheckAction::StopStream { .. }, why, .. } if why.contains("\"tool calculator arguments")
    )));
}

/// A model too small to follow the kinds copies the prompt's placeholder for an answer
/// (Gemma 3 270M, nearly every answer, and again every time it was told not to): it is
/// never shown nor taken as the answer. The model is asked again once, on the same
/// history, with a prompt whose answer form shows no text to copy, and said so; the
/// answer it then writes is the run's.
#[test]
fn the_prompts_placeholder_is_never_taken_and_asked_again_without_it() {
    let s = server();
    let (log, observer) = events();
    let model = Scripted::new([answer("<the answer for the user>"), answer("Sunny.")]);
    let seen = model.seen();
    let mut o = builder(model, &s).observer(observer).build().unwrap();
    let out = o.run("Weather?").unwrap();
    assert_eq!(out.answer(), Some("Sunny."));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen[0][0].content.contains("<the answer for the user>"));
    assert!(!seen[1][0].content.contains("<the answer for the user>"));
    assert!(seen[1][0].content.contains(r#""content": ..."#));
    assert_eq!(seen[1].len(), seen[0].len(), "the history as it was");
    let log = log.lock().unwrap();
    let shown: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            Event::AnswerText { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(!shown.concat().contains("answer for the user"), "{shown:?}");
    assert!(log.iter().any(|e| matches!(
        e,
        Event::Invalid { error, .. } if error.contains("placeholder") && error.contains("asked again")
    )));
}

/// Written again with no placeholder in the prompt to copy, the model's placeholder ends
/// the run at once, saying why: asked again, it would only cost requests.
#[test]
fn the_placeholder_written_twice_ends_the_run() {
    let s = server();
    let model = Scripted::new([
        answer("<the answer for the user>"),
        answer("the answer for the user"),
        answer("Sunny."),
    ]);
    let seen = model.seen();
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("Weather?").unwrap();
    assert_eq!(out.stop_reason(), StopKind::InvalidReplies);
    assert_eq!(out.answer(), None);
    assert_eq!(seen.lock().unwrap().len(), 2);
    let err = out.into_answer().unwrap_err().to_string();
    assert!(
        err.contains("placeholder") && err.contains("try a larger one"),
        "{err}"
    );
}

/// A list a run and its test share.
type Shared<T> = std::sync::Arc<std::sync::Mutex<Vec<T>>>;

/// A run whose calculator fails three times (the tool is then unavailable) and whose
/// model then answers `first` (and "2100 g" if asked again): its outcome, its events and
/// the requests the model saw.
fn answered_after_three_failures(
    first: &str,
) -> (
    toolloop::Outcome,
    Shared<Event>,
    Shared<Vec<toolloop::Message>>,
) {
    let s = server();
    let (log, observer) = events();
    let model = Scripted::new([
        call("calculator", json!({"expression": "350 grams / 6 loaves"})),
        call("calculator", json!({"expression": "g * 4"})),
        call("calculator", json!({"expression": "g / 4"})),
        answer(first),
        answer("2100 g"),
    ]);
    let seen = model.seen();
    let mut o = builder(model, &s).observer(observer).build().unwrap();
    let out = o
        .run("350 g of flour per loaf: how much for 6 loaves?")
        .unwrap();
    (out, log, seen)
}

/// After a tool failed three times, Qwen2.5-Coder 0.5B answered with toolloop's own
/// notice to it, "Answer directly without it." included: that is toolloop's text, not an
/// answer, so it is not taken as one, what streamed of it is withdrawn, and the run ends
/// saying why rather than ask a model that wrote it back again.
#[test]
fn toolloops_instruction_written_back_is_not_taken_as_the_answer() {
    let (out, log, seen) = answered_after_three_failures(
        "error: calculator is unavailable now. Answer directly without it.",
    );
    assert_eq!(out.stop_reason(), StopKind::InvalidReplies);
    assert_eq!(out.answer(), None);
    assert_eq!(seen.lock().unwrap().len(), 4, "not asked again");
    let err = out.into_answer().unwrap_err().to_string();
    assert!(
        err.contains("toolloop's instruction") && err.contains("Answer directly without it."),
        "{err}"
    );
    let log = log.lock().unwrap();
    let shown = log
        .iter()
        .rposition(|e| matches!(e, Event::AnswerText { .. }));
    let withdrawn = log
        .iter()
        .rposition(|e| matches!(e, Event::AnswerRetracted { .. }));
    assert!(shown.is_none() || withdrawn > shown, "{log:?}");
}

/// An answer of the model's own that goes on to write back toolloop's notice keeps its
/// own sentences, and says so: refused whole, the run ended with no answer (Qwen2.5-Coder
/// 0.5B gave the weather it had, then the advice of a call that was not run).
#[test]
fn an_answer_keeps_its_own_sentences_before_an_instruction_written_back() {
    let (out, log, seen) = answered_after_three_failures(
        "6 loaves need 2,100 g of flour. Answer directly without it.",
    );
    assert_eq!(out.answer(), Some("6 loaves need 2,100 g of flour."));
    assert_eq!(seen.lock().unwrap().len(), 4, "not asked again");
    let log = log.lock().unwrap();
    assert!(
        log.iter().any(|e| matches!(e, Event::Repaired { fixes }
            if fixes.iter().any(|f| f.contains("instruction")))),
        "{log:?}"
    );
}

/// Two calculations asked for, both made, and an answer that gives one of them.
fn two_results_then(answers: [&str; 2]) -> (toolloop::Outcome, Vec<Event>, usize) {
    let s = server();
    let model = Scripted::new([
        call("calculator", json!({"expression": "14 * 3"})),
        call("calculator", json!({"expression": "81 / 9"})),
        answer(answers[0]),
        answer(answers[1]),
    ]);
    let seen = model.seen();
    let (log, sink) = events();
    let mut o = builder(model, &s).observer(sink).build().unwrap();
    let out = o.run("What is 14 * 3 and what is 81 / 9?").unwrap();
    let log = log.lock().unwrap().clone();
    let asked = seen.lock().unwrap().len();
    (out, log, asked)
}

#[test]
fn an_answer_that_leaves_out_a_result_is_asked_for_again_once() {
    let refused = |log: &[Event]| {
        log.iter()
            .filter(|e| {
                matches!(e, Event::Check { action: CheckAction::RefuseAnswer { told: true }, check, .. }
                    if check == "every-result")
            })
            .count()
    };
    let (out, log, asked) = two_results_then(["14 * 3 = 42", "14 * 3 = 42 and 81 / 9 = 9"]);
    assert_eq!(out.answer(), Some("14 * 3 = 42 and 81 / 9 = 9"));
    assert_eq!((asked, refused(&log)), (4, 1), "{log:?}");
    // The answer shown as it streamed is withdrawn, saying which check refused it.
    assert!(
        log.iter()
            .any(|e| matches!(e, Event::AnswerRetracted { reason }
            if reason.starts_with("every-result refused it"))),
        "{log:?}"
    );
    // Once a run: a second answer that leaves it out too stands.
    let (out, log, asked) = two_results_then(["42", "It is 42."]);
    assert_eq!(out.answer(), Some("It is 42."));
    assert_eq!((asked, refused(&log)), (4, 1), "{log:?}");
    // An answer that gives both is taken at once.
    let (out, _, asked) = two_results_then(["42 and 9", "unused"]);
    assert_eq!((out.answer(), asked), (Some("42 and 9"), 3));
}

/// Two calculations in one turn, and an answer with the second's result alone, whose
/// expression happens to hold the first's result: that result is still owed, since a
/// call written beside it could not have taken it in.
#[test]
fn an_answer_leaving_out_a_result_its_turn_mates_numbers_hold_is_asked_for_again() {
    let s = server();
    let turn = json!({"kind": "tool_calls", "thought": "", "calls": [
        {"tool": "calculator", "arguments": {"expression": "15% * 80"}},
        {"tool": "calculator", "arguments": {"expression": "12 * 12"}},
    ]});
    let model = Scripted::new([turn.to_string(), answer("144"), answer("12 and 144")]);
    let seen = model.seen();
    let (log, sink) = events();
    let mut o = builder(model, &s).observer(sink).build().unwrap();
    let out = o.run("What's 15% of 80 and what's 12 squared?").unwrap();
    assert_eq!(out.answer(), Some("12 and 144"));
    assert_eq!(seen.lock().unwrap().len(), 3);
    let log = log.lock().unwrap();
    assert!(
        log.iter().any(|e| matches!(e, Event::Check { check, action: CheckAction::RefuseAnswer { told: true }, why }
            if check == "every-result" && why.contains("15% * 80"))),
        "{log:?}"
    );
}

#[test]
fn a_call_that_copies_the_prompts_example_beside_a_right_one_is_held() {
    let s = server();
    let turn = json!({"kind": "tool_calls", "thought": "", "calls": [
        {"tool": "get_weather", "arguments": {"city": "Paris"}},
        {"tool": "calculator", "arguments": {"expression": "2 * (12.5 * 4)"}},
    ]});
    let model = Scripted::new([turn.to_string(), answer("It is 11 °C in Paris.")]);
    let seen = model.seen();
    let (log, sink) = events();
    let mut o = builder(model, &s).observer(sink).build().unwrap();
    let out = o
        .run("Check the weather in Paris, then use the calculator to double its temperature.")
        .unwrap();
    assert_eq!(out.answer(), Some("It is 11 °C in Paris."));
    // Held: recorded as not run, with what the model was told.
    let ran: Vec<_> = (out.steps.iter())
        .filter_map(|s| Some((s.tool.clone()?, s.ok)))
        .collect();
    assert_eq!(
        ran,
        [("get_weather".into(), true), ("calculator".into(), false)]
    );
    let log = log.lock().unwrap();
    assert!(
        log.iter().any(
            |e| matches!(e, Event::Check { check, action: CheckAction::Hold { tool, .. }, .. }
            if check == "example-copy" && tool == "calculator")
        ),
        "{log:?}"
    );
    // The model reads why beside the weather, and may call it again with the result.
    let history = &seen.lock().unwrap()[1];
    assert!(
        history.iter().any(|m| m
            .content
            .contains("not run: nobody gave expression for calculator")),
        "{history:?}"
    );
}

#[test]
fn three_invalid_replies_are_an_invalid_response_format_error() {
    let s = server();
    let model = Scripted::new(["no", "still no", "never"]);
    let mut o = builder(model, &s).build().unwrap();
    let err = o.run("Weather?").unwrap().into_answer().unwrap_err();
    assert!(
        matches!(err, OrchestratorError::InvalidResponseFormat { .. }),
        "{err}"
    );
}

#[test]
fn unknown_tool_and_bad_arguments_get_feedback_listing_what_is_valid() {
    let s = server();
    let model = Scripted::new([
        call("weather", json!({"city": "Oslo"})),
        call("get_weather", json!({"town": "Oslo"})),
        call("get_weather", json!({"city": "Oslo"})),
        answer("Snow in Oslo."),
    ]);
    let seen = model.seen();
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("Weather in Oslo?").unwrap();
    assert_eq!(out.answer(), Some("Snow in Oslo."));
    let seen = seen.lock().unwrap();
    let first = &seen[1].last().unwrap().content;
    assert!(
        first.contains("unknown tool \"weather\"; available tools: \"calculator\", \"current_time\", \"get_weather\""),
        "{first}"
    );
    let second = &seen[2].last().unwrap().content;
    assert!(second.contains("city"), "{second}");
}

#[test]
fn a_truncated_reply_is_repaired() {
    let s = server();
    let (log, observer) = events();
    let model = Scripted::from_replies([ScriptedReply::truncated(
        r#"{"kind": "final_answer", "thought": "weather", "content": "It is sunny in Tok"#,
    )]);
    let mut o = builder(model, &s).observer(observer).build().unwrap();
    let out = o.run("Weather in Tokyo?").unwrap();
    assert_eq!(out.answer(), Some("It is sunny in Tok"));
    let log = log.lock().unwrap();
    assert!(log.iter().any(
        |e| matches!(e, Event::Repaired { fixes } if fixes.iter().any(|f| f.contains("truncated")))
    ));
    assert!(
        log.iter()
            .any(|e| matches!(e, Event::Warning { message } if message.contains("token limit")))
    );
}

#[test]
fn an_identical_call_is_not_executed_again() {
    let count = Arc::new(Mutex::new(0));
    let c = Arc::clone(&count);
    let mut f = FnTools::new();
    f.add(
        ToolSpec::new(
            "lookup",
            "Order status",
            json!({"type": "object",
            "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
        )
        .reading_only(),
        move |_| {
            *c.lock().unwrap() += 1;
            Ok(json!("shipped"))
        },
    );
    let model = Scripted::new([
        call("lookup", json!({"id": 7})),
        call("lookup", json!({"id": 7})),
        answer("Order 7 has shipped."),
    ]);
    let seen = model.seen();
    let mut o = Orchestrator::builder()
        .backend(model)
        .catalogue(Catalogue::load(vec![Box::new(f)], Deadline::none()).unwrap())
        .build()
        .unwrap();
    let out = o.run("Status of order 7?").unwrap();
    assert_eq!(out.answer(), Some("Order 7 has shipped."));
    assert_eq!(*count.lock().unwrap(), 1);
    // Declined unrun (`nothing-new`): the answer is asked on the history as it was.
    let seen = seen.lock().unwrap();
    assert_eq!(seen[2], seen[1]);
}

#[test]
fn a_tool_server_that_dies_mid_run_degrades_to_a_direct_answer() {
    // A real `toolloop serve-tools` process, killed after the tools were listed.
    let (mut child, addr) = common::serve_tools(&["--demo"]);
    let cat = Catalogue::load(
        vec![Box::new(HttpTools::new(&format!("http://{addr}")))],
        Deadline::none(),
    )
    .unwrap();
    let _ = child.0.kill();
    let _ = child.0.wait();
    let model = Scripted::new([
        call("get_weather", json!({"city": "Paris"})),
        answer("I cannot check the weather right now."),
    ]);
    let seen: SeenRequests = model.seen();
    let mut o = Orchestrator::builder()
        .backend(model)
        .catalogue(cat)
        .build()
        .unwrap();
    let out = o.run("Weather in Paris?").unwrap();
    assert_eq!(out.stop_reason(), StopKind::ToolFailureDegraded);
    assert_eq!(out.answer(), Some("I cannot check the weather right now."));
    let last = seen.lock().unwrap()[1].last().unwrap().content.clone();
    assert!(
        last.contains("is not reachable") && last.contains("unavailable now"),
        "{last}"
    );
}

#[test]
fn clarify_is_answered_by_the_handler_and_the_run_resumes() {
    let s = server();
    let model = Scripted::new([
        r#"{"kind":"clarify","thought":"","question":"Which city?","missing_params":["city"]}"#
            .to_string(),
        call("get_weather", json!({"city": "Tokyo"})),
        answer("18 °C and sunny in Tokyo."),
    ]);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let a = Arc::clone(&asked);
    let mut o = builder(model, &s)
        .clarify_handler(move |q: &str, missing: &[String]| {
            a.lock().unwrap().push((q.to_string(), missing.to_vec()));
            Some("Tokyo".to_string())
        })
        .build()
        .unwrap();
    let out = o.run("What's the weather?").unwrap();
    assert_eq!(out.stop_reason(), StopKind::Completed);
    assert_eq!(
        asked.lock().unwrap()[0],
        ("Which city?".to_string(), vec!["city".to_string()])
    );
    assert!(
        out.history
            .iter()
            .any(|m| m.role == Role::User && m.content == "Tokyo")
    );
}

#[test]
fn clarify_without_a_handler_ends_with_the_question() {
    let s = server();
    let model = Scripted::new([
        r#"{"kind":"clarify","thought":"","question":"Which city?","missing_params":["city"]}"#,
    ]);
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("What's the weather?").unwrap();
    assert_eq!(out.stop_reason(), StopKind::ClarificationNeeded);
    let Ending::Clarify {
        question,
        missing_params,
    } = &out.ending
    else {
        panic!("{:?}", out.ending)
    };
    assert_eq!(question, "Which city?");
    assert_eq!(missing_params, &["city"]);
}

#[test]
fn guardrails_block_input_and_warn_on_output() {
    let s = server();
    let g = Guardrails::default()
        .block_pattern("secrets", r"(?i)password", Action::Block)
        .unwrap()
        .block_pattern("shouting", r"[A-Z]{10,}", Action::Warn)
        .unwrap();
    let model = Scripted::new([answer("never sent")]);
    let seen = model.seen();
    let mut o = builder(model, &s).guardrails(g.clone()).build().unwrap();
    let out = o.run("What is the admin password?").unwrap();
    assert_eq!(out.stop_reason(), StopKind::Blocked);
    assert!(seen.lock().unwrap().is_empty(), "the model never saw it");

    let (log, observer) = events();
    let model = Scripted::new([answer("THISISVERYLOUD")]);
    let mut o = builder(model, &s)
        .guardrails(g)
        .observer(observer)
        .build()
        .unwrap();
    let out = o.run("Say something").unwrap();
    assert_eq!(out.stop_reason(), StopKind::Completed);
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::Warning { message } if message.contains("shouting")))
    );
}

#[test]
fn history_is_append_only_so_the_prompt_cache_is_reused() {
    let s = server();
    let model = Scripted::new([
        call("calculator", json!({"expression": "2 ** 10"})),
        call("get_weather", json!({"city": "Oslo"})),
        answer("1024, and snow in Oslo."),
    ]);
    let seen = model.seen();
    let mut o = builder(model, &s).build().unwrap();
    o.run("2**10 and Oslo weather?").unwrap();
    let seen = seen.lock().unwrap();
    for pair in seen.windows(2) {
        assert_eq!(
            &pair[1][..pair[0].len()],
            &pair[0][..],
            "an earlier message changed"
        );
    }
    assert_eq!(seen[0][0].role, Role::System);
}

#[test]
fn trace_and_transcript_record_every_event() {
    let s = server();
    let dir_guard = tempfile::tempdir().unwrap();
    let dir = dir_guard.path().to_path_buf();
    let path = dir.join("run.jsonl");
    let _ = std::fs::remove_file(&path);
    let trace = Arc::new(Mutex::new(Trace::collect()));
    let t = Arc::clone(&trace);
    let model = Scripted::new([
        call("calculator", json!({"expression": "6 * 7"})),
        answer("42"),
    ]);
    let mut o = builder(model, &s)
        .observer(Transcript::open(&path).unwrap())
        .observer(move |e: &Event| toolloop::Observer::event(&mut *t.lock().unwrap(), e))
        .build()
        .unwrap();
    o.run("6 times 7?").unwrap();
    let lines: Vec<String> = trace.lock().unwrap().lines().to_vec();
    let tags: Vec<&str> = lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(
        tags,
        [
            "[START]",
            "[LLM]",
            "[LLM]",
            "[ACT]",
            "[OBSERVE]",
            "[LLM]",
            "[LLM]",
            "[DONE]"
        ],
        "{lines:#?}"
    );
    let events = Transcript::read(&path).unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "model_request",
            "model_reply",
            "tool_call",
            "tool_result",
            "model_request",
            "model_reply",
            "stopped"
        ]
    );
    assert_eq!(events.last().unwrap()["stop_reason"], "completed");
    assert!(events.iter().all(|e| e["t_ms"].is_u64()));
}

/// The transcript once said `max_iterations` for a run that ended on invalid replies:
/// the ending was translated by hand in two places.
#[test]
fn a_transcript_of_a_run_that_ended_on_invalid_replies_says_so() {
    let s = server();
    let dir_guard = tempfile::tempdir().unwrap();
    let dir = dir_guard.path().to_path_buf();
    let path = dir.join("run.jsonl");
    let _ = std::fs::remove_file(&path);
    let model = Scripted::new(["no", "still no", "never"]);
    let mut o = builder(model, &s)
        .observer(Transcript::open(&path).unwrap())
        .build()
        .unwrap();
    let out = o.run("Weather?").unwrap();
    assert_eq!(out.stop_reason(), StopKind::InvalidReplies);
    let events = Transcript::read(&path).unwrap();
    let stopped = events.last().unwrap();
    assert_eq!(stopped["event"], "stopped");
    assert_eq!(stopped["stop_reason"], "invalid_replies");
    assert_eq!(out.to_json()["stop_reason"], "invalid_replies");
}

#[test]
fn usage_is_summed_over_the_run() {
    let s = server();
    let usage = Usage {
        prompt_tokens: 100,
        cached_prompt_tokens: Some(80),
        completion_tokens: 10,
    };
    let model = Scripted::from_replies([
        ScriptedReply {
            reply: call("calculator", json!({"expression": "1+1"})),
            stop: StopReason::Finished,
            usage,
            logprobs: Vec::new(),
            given: 0,
        },
        ScriptedReply {
            reply: answer("2"),
            stop: StopReason::Finished,
            usage,
            logprobs: Vec::new(),
            given: 0,
        },
    ]);
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("1+1?").unwrap();
    assert_eq!(
        out.usage,
        Usage {
            prompt_tokens: 200,
            cached_prompt_tokens: Some(160),
            completion_tokens: 20
        }
    );
}

#[test]
fn a_missing_model_is_an_error_with_the_pull_hint() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/api/show")
        .with_status(404)
        .with_body(r#"{"error":"model 'gemma3:4b' not found"}"#)
        .create();
    let mut o = Orchestrator::builder()
        .backend(toolloop::backend::Ollama::new(&server.url(), "gemma3:4b"))
        .build()
        .unwrap();
    let err = o.run("hi").unwrap_err();
    assert_eq!(
        err.to_string(),
        "model 'gemma3:4b' not found: run `ollama pull gemma3:4b`"
    );
}

/// A model file toolloop measured is decided by the bars measured for it on a fresh
/// install: Ollama names the file by its SHA-256 on the Modelfile's `FROM` line.
#[test]
fn a_model_file_toolloop_measured_gets_its_shipped_calibration() {
    let modelfile = |hex: &str| {
        json!({
            "modelfile": format!("# FROM qwen2.5-coder:0.5b\nFROM /root/.ollama/models/blobs/sha256-{hex}\n"),
            "capabilities": ["completion"]
        })
        .to_string()
    };
    // No calibration of the person's own.
    let none = std::env::temp_dir().join(format!("toolloop-none-{}.json", std::process::id()));
    let build = |url: &str| {
        let config = toolloop::Config {
            calibration: Some(none.clone()),
            tools: toolloop::tools::ToolSetup::default(),
            ..Default::default()
        };
        let mut o = Orchestrator::builder()
            .settings(config)
            .backend(toolloop::backend::Ollama::new(url, "qwen2.5-coder:0.5b"))
            .build()
            .unwrap();
        // The server names the file in its answer to the preflight.
        o.preflight(toolloop::Deadline::after(Duration::from_secs(5)))
            .unwrap();
        o
    };
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/api/show")
        .with_body(modelfile(
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ))
        .create();
    let o = build(&server.url());
    let t = o.config().thresholds.clone().unwrap();
    assert!(
        t.calibrated_for
            .as_deref()
            .is_some_and(|c| c.starts_with("Qwen2.5-Coder 0.5B Instruct Q4_K_M")),
        "{t:?}"
    );
    assert!(t.fit_min > 0.40, "{t:?}");
    // Another file of the same name gets the defaults.
    let mut other = mockito::Server::new();
    other
        .mock("POST", "/api/show")
        .with_body(modelfile(&"ab".repeat(32)))
        .create();
    let o = build(&other.url());
    assert_eq!(
        o.config().thresholds.clone().unwrap(),
        toolloop::Thresholds::default()
    );
}

#[test]
fn run_loop_fails_clearly_when_the_tool_server_is_down() {
    let config = toolloop::Config {
        tools: toolloop::tools::ToolSetup {
            http: vec!["http://127.0.0.1:9".into()],
            ..Default::default()
        },
        timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let err = toolloop::run_loop("hi", &config).unwrap_err();
    assert!(
        err.to_string()
            .contains("tool server at http://127.0.0.1:9 is not reachable"),
        "{err}"
    );
}

fn sleepy(model: Scripted, nap: Duration, timeout: Duration) -> Orchestrator {
    let mut tools = FnTools::new();
    tools.add(
        ToolSpec::new(
            "slow",
            "answers slowly",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
        .reading_only(),
        move |args| {
            std::thread::sleep(nap);
            Ok(json!(args["n"]))
        },
    );
    Orchestrator::builder()
        .backend(model)
        .source(tools)
        .timeout(timeout)
        .max_calls_per_turn(3)
        .build()
        .unwrap()
}

const THREE_SLOW: &str = r#"{"kind": "tool_calls", "thought": "", "calls": [
    {"tool": "slow", "arguments": {"n": 1}}, {"tool": "slow", "arguments": {"n": 2}},
    {"tool": "slow", "arguments": {"n": 3}}]}"#;

#[test]
fn three_calls_of_a_slow_tool_run_side_by_side() {
    let model = Scripted::new([THREE_SLOW.to_string(), answer("1, 2 and 3.")]);
    let seen = model.seen();
    let mut o = sleepy(model, Duration::from_secs(1), Duration::from_secs(30));
    let started = Instant::now();
    let out = o.run("Numbers 1, 2 and 3 please").unwrap();
    let took = started.elapsed();
    assert_eq!(out.answer(), Some("1, 2 and 3."));
    assert_eq!(out.steps.len(), 4);
    // One after another they would take 3 s.
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    let second = seen.lock().unwrap()[1].clone();
    let results: Vec<&str> = second
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        results,
        [
            "[call 1 of 3: slow] 1",
            "[call 2 of 3: slow] 2",
            "[call 3 of 3: slow] 3\nIf this answers the question, reply with final_answer; if \
             the question asks for another step, call the tool for it."
        ]
    );
}

/// While the model writes a turn of several calls, each is shown once it is closed, in
/// the order written and before any of them runs.
#[test]
fn each_call_of_a_turn_is_shown_as_soon_as_it_is_written() {
    let model = Scripted::new([THREE_SLOW.to_string(), answer("1, 2 and 3.")]);
    let (store, observer) = events();
    let mut tools = FnTools::new();
    tools.add(
        ToolSpec::new(
            "slow",
            "answers",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        )
        .reading_only(),
        |args| Ok(json!(args["n"])),
    );
    let mut o = Orchestrator::builder()
        .backend(model)
        .source(tools)
        .max_calls_per_turn(3)
        .observer(observer)
        .build()
        .unwrap();
    o.run("Numbers 1, 2 and 3 please").unwrap();
    let seen: Vec<String> = store
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::CallWritten { tool, arguments } => Some(format!("written {tool} {arguments}")),
            Event::ToolCall { .. } => Some("run".into()),
            Event::ModelReply { .. } => Some("reply".into()),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen[..7],
        [
            r#"written slow {"n":1}"#,
            r#"written slow {"n":2}"#,
            r#"written slow {"n":3}"#,
            "reply",
            "run",
            "run",
            "run"
        ],
        "{seen:?}"
    );
    assert_eq!(seen[7..], ["reply"], "the answer writes no call");
}

#[test]
fn a_call_that_hangs_does_not_hold_the_run_past_its_deadline() {
    let model = Scripted::new([THREE_SLOW.to_string(), answer("never")]);
    let mut o = sleepy(model, Duration::from_secs(60), Duration::from_secs(2));
    let started = Instant::now();
    let out = o.run("Numbers 1, 2 and 3 please").unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.stop_reason(), StopKind::Timeout);
    assert!(out.steps.iter().all(|s| !s.ok), "{:?}", out.steps);
}

#[test]
fn the_stop_handle_ends_a_run_held_in_a_tool_at_once_and_says_so() {
    let model = Scripted::new([THREE_SLOW.to_string(), answer("never")]);
    let mut o = sleepy(model, Duration::from_secs(60), Duration::from_secs(120));
    let stop = o.stop_handle();
    let presser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stop.stop();
    });
    let started = Instant::now();
    let out = o.run("Numbers 1, 2 and 3 please").unwrap();
    presser.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.stop_reason(), StopKind::Cancelled);
    assert_eq!(out.answer(), None);
    assert!(matches!(
        out.into_answer(),
        Err(toolloop::OrchestratorError::Cancelled { .. })
    ));
}

#[test]
fn a_reply_cut_by_the_stop_handle_is_not_taken_as_the_answer() {
    // The answer streams slowly; the stop comes in the middle of it.
    let model = Scripted::new([answer("one two three four five six seven eight nine ten")])
        .with_delay(Duration::from_millis(20));
    let mut o = Orchestrator::builder().backend(model).build().unwrap();
    let stop = o.stop_handle();
    let presser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        stop.stop();
    });
    let out = o.run("Count to ten").unwrap();
    presser.join().unwrap();
    assert_eq!(out.stop_reason(), StopKind::Cancelled);
    assert_eq!(out.answer(), None);
}

/// Tools that only record what they were called with, for tests that must show a call
/// never reached its tool.
fn recording_tools() -> (Arc<Mutex<Vec<String>>>, Catalogue) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut f = FnTools::new();
    for (name, param) in [("run_sql", "query"), ("delete_file", "path")] {
        let s = Arc::clone(&seen);
        f.add(
            ToolSpec::new(
                name,
                "Runs what it is given",
                json!({"type": "object", "properties": {param: {"type": "string"}}, "required": [param]}),
            ).reading_only(),
            move |args| {
                s.lock().unwrap().push(serde_json::Value::Object(args.clone()).to_string());
                Ok(json!("done"))
            },
        );
    }
    (
        seen,
        Catalogue::load(vec![Box::new(f)], Deadline::none()).unwrap(),
    )
}

fn cut(text: &str) -> ScriptedReply {
    ScriptedReply {
        reply: text.into(),
        stop: StopReason::Length,
        usage: Usage::default(),
        logprobs: Vec::new(),
        given: 0,
    }
}

#[test]
fn a_call_cut_at_the_token_limit_inside_a_value_is_never_run() {
    // `DELETE FROM orders WHERE` cut before its condition: repaired, it would delete
    // every order. Asked again with twice the room, the model writes the whole call.
    let (seen, tools) = recording_tools();
    let whole = r#"{"kind":"tool_call","thought":"","tool":"run_sql","arguments":{"query":"DELETE FROM orders WHERE id = 7"}}"#;
    let model = Scripted::from_replies([
        cut(
            r#"{"kind":"tool_call","thought":"","tool":"run_sql","arguments":{"query":"DELETE FROM orders WHERE"#,
        ),
        ScriptedReply {
            reply: whole.into(),
            ..cut(whole)
        },
        ScriptedReply {
            stop: StopReason::Finished,
            ..cut(&answer("Deleted."))
        },
    ]);
    let requests = model.seen_options();
    let mut o = Orchestrator::builder()
        .backend(model)
        .catalogue(tools)
        .build()
        .unwrap();
    let out = o.run("Delete order 7").unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [r#"{"query":"DELETE FROM orders WHERE id = 7"}"#]
    );
    assert_eq!(out.answer(), Some("Deleted."));
    let limits: Vec<_> = requests
        .lock()
        .unwrap()
        .iter()
        .map(|o| o.num_predict)
        .collect();
    assert_eq!(limits[1], limits[0].map(|n| n * 2), "{limits:?}");
}

#[test]
fn a_call_cut_twice_ends_the_run_unrun_with_its_own_exit_code() {
    let (seen, tools) = recording_tools();
    let model = Scripted::from_replies([
        cut(
            r#"{"kind":"tool_call","thought":"","tool":"delete_file","arguments":{"path":"/home/me/pro"#,
        ),
        cut(
            r#"{"kind":"tool_call","thought":"","tool":"delete_file","arguments":{"path":"/home/me/projects/old"#,
        ),
    ]);
    let mut o = Orchestrator::builder()
        .backend(model)
        .catalogue(tools)
        .build()
        .unwrap();
    let out = o.run("Delete my old projects folder").unwrap();
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    assert_eq!(out.stop_reason(), StopKind::CutOff);
    assert_eq!(out.stop_reason().exit_code(), 6);
    let message = out.ending.message().unwrap();
    assert!(
        message.contains("delete_file was cut off at the token limit"),
        "{message}"
    );
}

#[test]
fn a_reply_cut_after_its_arguments_closed_is_still_run() {
    // Only the turn's own closer is missing: the call is whole, as the model wrote it.
    let (seen, tools) = recording_tools();
    let model = Scripted::from_replies([
        cut(
            r#"{"kind":"tool_call","thought":"","tool":"run_sql","arguments":{"query":"SELECT 1"}"#,
        ),
        ScriptedReply {
            stop: StopReason::Finished,
            ..cut(&answer("1"))
        },
    ]);
    let mut o = Orchestrator::builder()
        .backend(model)
        .catalogue(tools)
        .build()
        .unwrap();
    let out = o.run("Select one").unwrap();
    assert_eq!(*seen.lock().unwrap(), [r#"{"query":"SELECT 1"}"#]);
    assert_eq!(out.answer(), Some("1"));
}

#[test]
fn a_reply_cut_while_its_arguments_were_open_is_asked_again() {
    // The query is a whole string, but another argument could have followed it: the
    // call was cut, and only the one written again whole is run.
    let (seen, tools) = recording_tools();
    let model = Scripted::from_replies([
        cut(r#"{"kind":"tool_call","thought":"","tool":"run_sql","arguments":{"query":"SELECT 1""#),
        ScriptedReply {
            stop: StopReason::Finished,
            ..cut(
                r#"{"kind":"tool_call","thought":"","tool":"run_sql","arguments":{"query":"SELECT 2"}}"#,
            )
        },
        ScriptedReply {
            stop: StopReason::Finished,
            ..cut(&answer("2"))
        },
    ]);
    let mut o = Orchestrator::builder()
        .backend(model)
        .catalogue(tools)
        .build()
        .unwrap();
    let out = o.run("Select two").unwrap();
    assert_eq!(*seen.lock().unwrap(), [r#"{"query":"SELECT 2"}"#]);
    assert_eq!(out.answer(), Some("2"));
}

/// A run the model server fails ends with a `failed` event, the last one: a display
/// stops its spinner on it, and a transcript says why the run has no `stopped` event.
#[test]
fn a_run_the_server_fails_ends_with_a_failed_event() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let mut o = Orchestrator::builder()
        .backend(Scripted::new(Vec::<String>::new()))
        .observer(move |e: &Event| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let err = o.run("hello").unwrap_err();
    let events = events.lock().unwrap();
    match events.last() {
        Some(Event::Failed { error }) => assert_eq!(*error, err.to_string()),
        other => panic!("{other:?}"),
    }
}

/// A right matrix with rows of zeros reads as a loop to `looping-reply`, which stops the
/// stream there; closed by the repairer, the call would be `[[2.0]]`, a call nobody wrote.
/// It is never run, by any path: not early while it streams, not once the reply is in.
/// Asked again, the model writes it the same way, and the run ends saying why.
#[test]
fn a_call_cut_where_it_seemed_to_repeat_is_never_run() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&ran);
    let mut tools = FnTools::new();
    tools.add(
        ToolSpec::new(
            "matrix_rank",
            "The rank of a matrix",
            json!({"type": "object", "required": ["matrix"], "properties": {
                "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}}}),
        )
        .reading_only(),
        move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(json!(1))
        },
    );
    let rows = [
        "[2.0, 0, 0, 0]",
        "[0, 0, 0, 0]",
        "[0, 0, 0, 0]",
        "[0, 0, 0, 0]",
    ];
    let matrix = format!(
        r#"{{"kind": "tool_call", "thought": "", "tool": "matrix_rank", "arguments": {{"matrix": [{}]}}}}"#,
        rows.join(", ")
    );
    let (log, observer) = events();
    let mut o = Orchestrator::builder()
        .backend(Scripted::new([matrix.clone(), matrix]))
        .source(tools)
        .timeout(Duration::from_secs(10))
        .observer(observer)
        .build()
        .unwrap();
    let out = o
        .run("What is the rank of [[2,0,0,0],[0,0,0,0],[0,0,0,0],[0,0,0,0]]?")
        .unwrap();
    let log = log.lock().unwrap();
    assert!(
        log.iter().any(|e| matches!(
            e,
            Event::Check {
                action: CheckAction::StopStream { .. },
                ..
            }
        )),
        "the loop check did not cut it, so this test shows nothing: {log:?}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the cut call ran");
    assert!(
        out.steps.iter().all(|s| s.tool.is_none()),
        "{:?}",
        out.steps
    );
    assert_eq!(out.stop_reason(), StopKind::CutOff);
    assert_eq!(out.stop_reason().exit_code(), 6);
    let why = out.ending.message().unwrap();
    assert!(why.contains("repeat itself"), "{why}");
}

/// A call that carries the prompt's example ("12.5 * 4" for a weather question, as Gemma
/// 3 270M writes) is declined, and the model is asked again once, with the example out of
/// the prompt, among the tools whose text shares a word with the request: the weather
/// tool is called and the question answered from its result.
#[test]
fn a_call_that_copies_the_prompts_example_is_asked_again_without_it() {
    let s = server();
    let model = Scripted::new([
        call("calculator", json!({"expression": "12.5 * 4"})),
        call("get_weather", json!({"city": "Tokyo"})),
        answer("Sunny and 18°C in Tokyo."),
    ]);
    let seen = model.seen();
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("What is the weather in Tokyo?").unwrap();
    assert_eq!(out.answer(), Some("Sunny and 18°C in Tokyo."));
    let tools: Vec<_> = out.steps.iter().filter_map(|s| s.tool.clone()).collect();
    assert_eq!(tools, ["get_weather"], "the copied call never ran");
    let seen = seen.lock().unwrap();
    let example = "user asks \"How much is 12.5 * 4?\"";
    assert!(seen[0][0].content.contains(example));
    for request in &seen[1..] {
        assert!(
            !request[0].content.contains(example),
            "the example is out of the prompt from the asking again on"
        );
    }
}

/// "Thanks" answered with the prompt's example and then with a tool's description, as
/// Qwen2.5-Coder 0.5B did in four languages: each answer is refused once, the second
/// with the tools out of the prompt, neither is shown, and the model's own reply is the
/// answer.
#[test]
fn an_answer_that_writes_back_a_tools_description_is_asked_for_without_the_tools() {
    let s = server();
    let model = Scripted::new([
        answer("12.5 * 4 = 50"),
        answer(
            "The current date and time, in UTC or at a UTC offset; only for questions about \
             the date or time.",
        ),
        answer("You're welcome!"),
    ]);
    let seen = model.seen();
    let (log, observer) = events();
    let mut o = builder(model, &s).observer(observer).build().unwrap();
    let out = o.run("Thanks, that's all I needed.").unwrap();
    assert_eq!(out.answer(), Some("You're welcome!"));
    // Neither copy was shown while it streamed, so nothing was withdrawn.
    let log = log.lock().unwrap();
    let shown: String = log
        .iter()
        .filter_map(|e| match e {
            Event::AnswerText { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, "You're welcome!");
    assert!(
        !log.iter()
            .any(|e| matches!(e, Event::AnswerRetracted { .. }))
    );
    let refused: Vec<_> = out.checks.iter().filter_map(|e| e.check_line()).collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[1].contains("current_time's description"),
        "{refused:?}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen[1][0].content.contains("current_time"));
    assert!(
        !seen[2][0].content.contains("current_time") && !seen[2][0].content.contains("Tools:"),
        "the last answer was asked for without the tools: {}",
        seen[2][0].content
    );
}

/// With no tool that shares a word with the request, the copied call is declined for an
/// answer, as before.
#[test]
fn a_copied_call_for_a_request_no_tool_speaks_to_gets_an_answer() {
    let s = server();
    let model = Scripted::new([
        call("calculator", json!({"expression": "12.5 * 4"})),
        answer("Hello!"),
    ]);
    let mut o = builder(model, &s).build().unwrap();
    let out = o.run("Good morning!").unwrap();
    assert_eq!(out.answer(), Some("Hello!"));
    assert!(out.steps.iter().all(|s| s.tool.is_none()));
}
