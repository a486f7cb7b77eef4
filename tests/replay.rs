//! Real sessions, replayed offline: the raw replies Qwen2.5-Coder 0.5B gave through
//! llama-server (recorded by `tests/real_model.rs` with `TOOLLOOP_RECORD_DIR`) are fed to
//! the loop again, with the real built-in tools. The loop must reach the same answers by
//! the same steps.

use std::time::Duration;

use toolloop::Deadline;
use toolloop::backend::Scripted;
use toolloop::tools::Catalogue;
use toolloop::tools::{Builtin, BuiltinConfig};
use toolloop::{Orchestrator, StopKind};

fn replay(file: &str, question: &str) -> toolloop::Outcome {
    replay_with(file, question, &[])
}

/// A replay with these checks turned on besides the defaults.
fn replay_with(file: &str, question: &str, checks: &[&str]) -> toolloop::Outcome {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let model = Scripted::from_file(&path).unwrap();
    let builtin = Builtin::new(&BuiltinConfig {
        demo: true,
        ..Default::default()
    })
    .unwrap();
    let tools = Catalogue::load(vec![Box::new(builtin)], Deadline::none()).unwrap();
    // The thresholds the sessions were recorded with: an uncalibrated run then let a call
    // the model gave 0.9 or more go ahead unquestioned (today every call that shares no
    // word with the request is asked about, which these recordings hold no answer for).
    let recorded = toolloop::Config {
        tools: toolloop::ToolSetup::default(),
        thresholds: Some(toolloop::Thresholds {
            p_sure: 0.9,
            fit_min: 0.35,
            ..toolloop::Thresholds::default()
        }),
        ..toolloop::Config::default()
    };
    let mut builder = Orchestrator::builder()
        .settings(recorded)
        .backend(model)
        .catalogue(tools)
        .timeout(Duration::from_secs(10));
    for check in checks {
        builder = builder.check(check, true);
    }
    let mut o = builder.build().unwrap();
    o.run(question).unwrap()
}

fn tools_used(out: &toolloop::Outcome) -> Vec<&str> {
    out.steps.iter().filter_map(|s| s.tool.as_deref()).collect()
}

#[test]
fn recorded_calculator_session() {
    let out = replay("qwen_calc.jsonl", "How much is 123.5 * 48?");
    assert_eq!(out.stop_reason(), StopKind::Completed);
    assert_eq!(tools_used(&out), ["calculator"]);
    assert_eq!(out.steps[0].observation, "5928");
    assert_eq!(out.answer(), Some("5928"));
    assert!(
        out.usage.cached_prompt_tokens.unwrap() > 0,
        "recorded cache figures replay too"
    );
}

#[test]
fn recorded_weather_session() {
    let out = replay(
        "qwen_weather.jsonl",
        "What is the weather in Paris right now?",
    );
    assert_eq!(tools_used(&out), ["get_weather"]);
    assert!(out.answer().unwrap().contains("light rain"));
}

#[test]
fn recorded_needless_repeat_is_declined_and_the_model_answers() {
    // The model looked up the weather for a general-knowledge question, twice; the
    // second call was declined unrun (`nothing-new`) and the model then answered.
    // Recorded before the decision step (no log-probabilities in the recording, so the
    // loop takes each call as the model wrote it) and before grounding, kept for the
    // repeat it shows.
    let out = replay(
        "qwen_capital_repeat.jsonl",
        "What is the capital of France?",
    );
    assert_eq!(tools_used(&out), ["get_weather"]);
    assert_eq!(out.answer(), Some("Paris"));
    // The call and the answer; the declined turn is not one of the run's steps.
    assert_eq!(out.iterations, 2);
}

#[test]
fn recorded_call_with_a_city_nobody_named_becomes_a_question() {
    // The same recording with `invented-required` on: the model's `city: "Paris"` for a
    // question that names no city is not called; the person is asked which city.
    let out = replay_with(
        "qwen_capital_repeat.jsonl",
        "What is the capital of France?",
        &["invented-required"],
    );
    assert!(tools_used(&out).is_empty(), "{:?}", tools_used(&out));
    assert_eq!(out.stop_reason(), StopKind::ClarificationNeeded);
    assert!(out.answer().is_none());
}

#[test]
fn recorded_general_knowledge_question_is_answered_after_one_needless_call() {
    // Recorded with the uncalibrated defaults and a line after each result that asks for
    // the answer or the next step (`AFTER_RESULTS`): the model called get_weather for a
    // general-knowledge question at p(tool) 0.987, above the 0.9 "sure" level, so the
    // call ran unquestioned; then it answered, rightly, in the next turn. Before that
    // line it called get_weather again after the result (BENCHMARKS.md, "Whole questions").
    let out = replay("qwen_capital.jsonl", "What is the capital of France?");
    assert_eq!(tools_used(&out), ["get_weather"]);
    assert_eq!(out.stop_reason(), StopKind::Completed);
    assert_eq!(out.iterations, 2);
    assert!(
        out.answer().unwrap().contains("Paris"),
        "{:?}",
        out.answer()
    );
}
