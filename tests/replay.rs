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
    replay_grounded(file, question, false)
}

fn replay_grounded(file: &str, question: &str, ground: bool) -> toolloop::Outcome {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let model = Scripted::from_file(&path).unwrap();
    let builtin = Builtin::new(&BuiltinConfig {
        demo: true,
        ..Default::default()
    })
    .unwrap();
    let tools = Catalogue::load(vec![Box::new(builtin)], Deadline::none()).unwrap();
    let mut builder = Orchestrator::builder()
        .backend(model)
        .catalogue(tools)
        .timeout(Duration::from_secs(10));
    if ground {
        // Off by default: they turned right calls into questions (BENCHMARKS.md).
        for check in ["ungrounded-optional", "invented-required"] {
            builder = builder.check(check, true);
        }
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
fn recorded_needless_repeat_is_answered_from_the_earlier_result() {
    // The model looked up the weather for a general-knowledge question, twice; the
    // second call was not executed and the model then answered.
    // Recorded before the decision step (no log-probabilities in the recording, so the
    // loop takes each call as the model wrote it) and before grounding, kept for the
    // repeat it shows.
    let out = replay_grounded(
        "qwen_capital_repeat.jsonl",
        "What is the capital of France?",
        false,
    );
    assert_eq!(tools_used(&out), ["get_weather", "get_weather"]);
    assert!(
        out.steps[1]
            .observation
            .contains("You already called get_weather")
    );
    assert_eq!(out.answer(), Some("Paris"));
    assert_eq!(out.iterations, 3);
}

#[test]
fn recorded_call_with_a_city_nobody_named_becomes_a_question() {
    // The same recording with `invented-required` on: the model's `city: "Paris"` for a
    // question that names no city is not called; the person is asked which city.
    let out = replay_grounded(
        "qwen_capital_repeat.jsonl",
        "What is the capital of France?",
        true,
    );
    assert!(tools_used(&out).is_empty(), "{:?}", tools_used(&out));
    assert_eq!(out.stop_reason(), StopKind::ClarificationNeeded);
    assert!(out.answer().is_none());
}

#[test]
fn recorded_general_knowledge_question_is_answered_after_a_call_the_model_vouched_for() {
    // Recorded with the uncalibrated defaults: the model called get_weather for a
    // general-knowledge question at p(tool) 0.89, below the 0.9 "sure" level, and no word
    // of the question is in the tool's description, so it was asked whether the tool
    // fits; it said yes (tool-fit declines only on a no), so the call ran. Its repeat is
    // answered from memory, and the answer is the right one. Words alone no longer
    // decline a call (BENCHMARKS.md, "Deciding by meaning").
    let out = replay("qwen_capital.jsonl", "What is the capital of France?");
    assert_eq!(tools_used(&out), ["get_weather", "get_weather"]);
    assert_eq!(out.steps[1].ms, 0, "the repeat is answered from memory");
    assert_eq!(out.stop_reason(), StopKind::Completed);
    assert!(
        out.answer().unwrap().contains("Paris"),
        "{:?}",
        out.answer()
    );
}
