//! Unit tests of the engine: each drives it step by step, with no model and no socket.

use super::*;
use crate::backend::Timings;
use crate::tools::{ToolError, ToolResult};
use serde_json::json;

pub(super) fn reply(text: &str) -> ChatReply {
    ChatReply {
        text: text.into(),
        given: 0,
        stop: StopReason::Finished,
        usage: Usage::default(),
        timings: Timings::default(),
        logprobs: Vec::new(),
    }
}

pub(super) fn calc() -> ToolSpec {
    ToolSpec::new(
        "calculator",
        "math",
        json!({"type": "object", "properties": {"expression": {"type": "string"}},
               "required": ["expression"]}),
    )
    .reading_only()
}

pub(super) fn weather() -> ToolSpec {
    ToolSpec::new(
        "get_weather",
        "Current weather for a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]}),
    )
    .reading_only()
}

/// The log-probabilities of a reply whose `kind` the model chose as "tool" with
/// probability `p` (and "final" for the rest).
pub(super) fn kind_logprobs(p: f64) -> Vec<crate::backend::TokenLogprob> {
    use crate::backend::TokenLogprob;
    vec![
        TokenLogprob {
            token: r#"{"kind":""#.into(),
            logprob: 0.0,
            top: vec![],
        },
        TokenLogprob {
            token: "tool".into(),
            logprob: p.ln(),
            top: vec![("tool".into(), p.ln()), ("final".into(), (1.0 - p).ln())],
        },
    ]
}

pub(super) fn engine(max: u32) -> Engine {
    Engine::new(
        vec![Message::system("sys")],
        "what is 2+2",
        vec![calc()],
        Config {
            max_iterations: max,
            ..Config::default()
        },
    )
}

/// The defaults with one check that is off by default turned on.
pub(super) fn with_check(name: &str) -> Config {
    let mut c = Config::default();
    c.checks.set(name, true).unwrap();
    c
}

fn engine_with_ctx(num_ctx: u32) -> Engine {
    Engine::new(vec![Message::system("sys")], "what is 2+2", vec![calc()], {
        let mut c = Config::default();
        c.options.num_ctx = Some(num_ctx);
        c
    })
}

pub(super) const CALL: &str =
    r#"{"kind":"tool_call","thought":"math","tool":"calculator","arguments":{"expression":"2+2"}}"#;
const ANSWER: &str = r#"{"kind":"final_answer","thought":"done","content":"4"}"#;

#[test]
fn call_then_answer() {
    let mut e = engine(10);
    assert_eq!(e.next_step(), Step::CallModel);
    e.model_replied(&reply(CALL));
    assert_eq!(
        e.next_step(),
        Step::CallTool {
            tool: "calculator".into(),
            arguments: json!({"expression": "2+2"}).as_object().unwrap().clone()
        }
    );
    e.tool_returned(Ok(ToolResult::ok("4")), Duration::from_millis(3));
    assert_eq!(e.next_step(), Step::CallModel);
    // The result, then the line that asks for the answer or the next step.
    assert_eq!(
        e.messages().last().unwrap().content,
        format!("4{}", crate::run::feedback::AFTER_RESULTS)
    );
    e.model_replied(&reply(ANSWER));
    assert_eq!(e.next_step(), Step::Done);
    assert!(
        matches!(e.ending(), Some(Ending::Answer { content, degraded: false, .. }) if content == "4")
    );
    assert_eq!(e.iterations(), 2);
    assert_eq!(e.steps()[0].observation, "4");
    assert_eq!(e.steps()[0].ms, 3);
}

/// A question in another language has its answer asked for in it, after the results;
/// `--answer-language off` leaves the line out.
#[test]
fn the_answer_is_asked_for_in_the_questions_language() {
    let after = |language: crate::AnswerLanguage| {
        let config = Config {
            answer_language: language,
            ..Config::default()
        };
        let question = "Ich kaufe 3 Bücher zu je 14.50 Euro. Was zahle ich insgesamt?";
        let mut e = Engine::new(vec![Message::system("sys")], question, vec![calc()], config);
        e.next_step();
        e.model_replied(&reply(CALL));
        e.next_step();
        e.tool_returned(Ok(ToolResult::ok("43.5")), Duration::ZERO);
        e.next_step();
        (
            e.answer_language().cloned(),
            e.messages().last().unwrap().content.clone(),
        )
    };
    let (named, text) = after(crate::AnswerLanguage::Auto);
    assert_eq!(named, Some(("German".to_string(), true)));
    assert_eq!(
        text,
        format!(
            "43.5{}\nWrite the answer in German, the language of the question.",
            crate::run::feedback::AFTER_RESULTS
        )
    );
    let (named, text) = after(crate::AnswerLanguage::Off);
    assert_eq!(named, None);
    assert_eq!(text, format!("43.5{}", crate::run::feedback::AFTER_RESULTS));
}

#[test]
fn invalid_replies_are_fed_back_then_give_up() {
    let mut e = engine(10);
    for attempt in 1..=2 {
        assert_eq!(e.next_step(), Step::CallModel);
        e.model_replied(&reply("I think it is 4"));
        let last = e.messages().last().unwrap();
        assert!(
            last.content.starts_with("Your last reply was not valid"),
            "{attempt}"
        );
    }
    assert_eq!(e.next_step(), Step::CallModel);
    e.model_replied(&reply(
        r#"{"kind":"tool_call","tool":"nope","arguments":{}}"#,
    ));
    assert_eq!(e.next_step(), Step::Done);
    match e.ending() {
        Some(Ending::InvalidReplies { detail: error }) => {
            assert!(error.contains("unknown tool \"nope\""), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.iterations(), 0);
}

#[test]
fn last_iteration_allows_only_an_answer() {
    let mut e = engine(2);
    e.next_step();
    assert!(e.schema().allows(crate::turn::Kind::ToolCall));
    e.model_replied(&reply(CALL));
    e.next_step();
    e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
    assert_eq!(e.next_step(), Step::CallModel);
    assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
}

/// [`engine`] with `nothing-new` off: the engine's own rules for a turn that brought
/// nothing, which stand when the check is off or a turn is only partly a repeat.
pub(super) fn engine_without_nothing_new() -> Engine {
    let mut config = Config::default();
    config.checks.set("nothing-new", false).unwrap();
    Engine::new(
        vec![Message::system("sys")],
        "what is 2+2",
        vec![calc()],
        config,
    )
}

#[test]
fn after_a_result_a_repeat_is_declined_unrun_and_the_model_answers_from_the_history_as_it_was() {
    let mut e = engine(10);
    e.next_step();
    e.model_replied(&reply(CALL));
    e.next_step();
    e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
    assert_eq!(e.next_step(), Step::CallModel);
    let before = e.messages().to_vec();
    e.model_replied(&reply(CALL));
    let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
    assert_eq!(
        line,
        "nothing-new: declined calculator: the same call as before; asking for an answer instead"
    );
    // Not run, not kept: the answer is asked on the history as it was.
    assert_eq!(e.next_step(), Step::CallModel);
    assert_eq!(e.messages(), &before[..]);
    assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
    e.model_replied(&reply(ANSWER));
    assert_eq!(e.next_step(), Step::Done);
    assert_eq!(e.steps().iter().filter(|s| s.tool.is_some()).count(), 1);
}

#[test]
fn a_repeated_call_reuses_the_result_and_the_next_turn_may_only_answer() {
    let mut e = engine_without_nothing_new();
    e.next_step();
    e.model_replied(&reply(CALL));
    e.next_step();
    e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
    assert_eq!(e.next_step(), Step::CallModel);
    assert!(e.schema().allows(crate::turn::Kind::ToolCall));
    e.model_replied(&reply(CALL));
    assert!(
        e.messages()
            .last()
            .unwrap()
            .content
            .contains("You already called")
    );
    assert_eq!(e.next_step(), Step::CallModel);
    assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
    assert!(
        e.drain_events()
            .iter()
            .any(|ev| matches!(ev, Event::CallingEnded { .. }))
    );
}

#[test]
fn infrastructure_failure_degrades_the_tool() {
    let mut e = engine(10);
    e.next_step();
    e.model_replied(&reply(CALL));
    e.next_step();
    e.tool_returned(
        Err(ToolError::Unreachable {
            url: "http://x".into(),
            mcp: false,
        }),
        Duration::ZERO,
    );
    assert_eq!(e.next_step(), Step::CallModel);
    assert!(
        !e.schema().allows(crate::turn::Kind::ToolCall),
        "no tool left"
    );
    assert!(
        e.messages()
            .last()
            .unwrap()
            .content
            .contains("unavailable now")
    );
    e.model_replied(&reply(ANSWER));
    assert!(matches!(
        e.ending(),
        Some(Ending::Answer { degraded: true, .. })
    ));
}

#[test]
fn clarify_without_answer_ends_the_run() {
    let mut e = engine(10);
    e.next_step();
    e.model_replied(&reply(
        r#"{"kind":"clarify","thought":"","question":"Which city?","missing_params":["city"]}"#,
    ));
    assert_eq!(
        e.next_step(),
        Step::AskUser {
            question: "Which city?".into(),
            missing_params: vec!["city".into()]
        }
    );
    e.user_answered(None);
    assert_eq!(e.next_step(), Step::Done);
    assert!(matches!(e.ending(), Some(Ending::Clarify { .. })));
}

#[test]
fn history_is_append_only_and_starts_with_the_prompt() {
    let mut e = engine(10);
    e.next_step();
    let before: Vec<Message> = e.messages().to_vec();
    e.model_replied(&reply(CALL));
    e.next_step();
    e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
    e.next_step();
    assert_eq!(&e.messages()[..before.len()], &before[..]);
    let (history, start) = e.into_history();
    assert_eq!(start, 1);
    assert_eq!(history[1].content, "what is 2+2");
}

#[test]
fn max_iterations() {
    let mut e = engine(1);
    e.next_step();
    e.model_replied(&reply(
        r#"{"kind":"clarify","thought":"","question":"?","missing_params":[]}"#,
    ));
    e.next_step();
    e.user_answered(Some("more".into()));
    assert_eq!(e.next_step(), Step::Done);
    assert_eq!(e.ending(), Some(&Ending::MaxIterations { iterations: 1 }));
}

#[test]
fn old_tool_results_are_shortened_near_the_context_window() {
    let mut e = engine_with_ctx(1000);
    e.next_step();
    e.model_replied(&reply(CALL));
    e.next_step();
    e.tool_returned(Ok(ToolResult::ok("x".repeat(3000))), Duration::ZERO);
    e.next_step();
    assert!(
        e.messages()[3]
            .content
            .ends_with("[shortened to fit the context window]")
    );
    assert_eq!(e.messages()[1].content, "what is 2+2");
}

#[test]
fn a_call_with_a_required_value_nobody_gave_becomes_a_question() {
    let mut e = Engine::new(
        vec![Message::system("sys")],
        "what's the weather like?",
        vec![weather()],
        with_check("invented-required"),
    );
    e.next_step();
    e.model_replied(&reply(
        r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"London"}}"#,
    ));
    let Step::AskUser {
        question,
        missing_params,
    } = e.next_step()
    else {
        panic!("expected a question, got {:?}", e.next_step());
    };
    assert_eq!(
        question,
        "What city should I use? (get_weather needs it, and you did not say.)"
    );
    assert_eq!(missing_params, ["city"]);
    assert!(e.messages().last().unwrap().content.contains("\"clarify\""));
    e.user_answered(Some("Paris".into()));
    e.next_step();
    e.model_replied(&reply(
        r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Paris"}}"#,
    ));
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

#[test]
fn a_prompt_that_filled_the_context_window_is_warned_about() {
    let mut e = engine_with_ctx(1000);
    let warnings = |e: &mut Engine| {
        e.drain_events()
            .into_iter()
            .filter_map(|ev| match ev {
                Event::Warning { message } => Some(message),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    e.next_step();
    let mut r = reply(CALL);
    r.usage.prompt_tokens = 900;
    r.usage.completion_tokens = 20;
    e.model_replied(&r);
    assert!(warnings(&mut e).is_empty());
    e.next_step();
    e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
    e.next_step();
    // Ollama reports what it evaluated after silently dropping the oldest messages:
    // a prompt at the window's size is the sign.
    let mut r = reply(ANSWER);
    r.usage.prompt_tokens = 990;
    r.usage.completion_tokens = 10;
    e.model_replied(&r);
    let w = warnings(&mut e);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("filled the context window (1000 tokens)"),
        "{}",
        w[0]
    );
    assert!(w[0].contains("raise num_ctx"));
}

#[test]
fn a_call_the_model_was_unsure_of_is_declined_and_an_answer_asked_for() {
    let mut e = Engine::new(
        vec![Message::system("sys")],
        "what is the capital of France",
        vec![calc()],
        Config::default(),
    );
    e.next_step();
    let before = e.messages().len();
    let mut unsure = reply(CALL);
    unsure.logprobs = kind_logprobs(0.3);
    e.model_replied(&unsure);
    let events = e.drain_events();
    assert!(
        events.iter().any(|ev| matches!(
            ev,
            Event::Check {
                action: crate::checks::CheckAction::Decline { .. },
                ..
            }
        )),
        "{events:?}"
    );
    assert_eq!(e.next_step(), Step::CallModel);
    assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
    assert_eq!(
        e.messages().len(),
        before,
        "the declined call is not in the history"
    );
    assert_eq!(e.iterations(), 0);
    e.model_replied(&reply(ANSWER));
    assert!(matches!(e.ending(), Some(Ending::Answer { .. })));
}

/// An engine whose turns may carry several calls.
fn several_calls_engine() -> Engine {
    Engine::new(
        vec![Message::system("sys")],
        "what is 2+2 and 3+3",
        vec![calc()],
        Config {
            max_calls_per_turn: 8,
            ..Config::default()
        },
    )
}

const TWO_SUMS: &str = r#"{"kind":"tool_calls","thought":"both","calls":[
    {"tool":"calculator","arguments":{"expression":"2+2"}},
    {"tool":"calculator","arguments":{"expression":"3+3"}}]}"#;

#[test]
fn several_calls_run_together_and_come_back_in_order_each_marked() {
    let mut e = several_calls_engine();
    e.next_step();
    e.model_replied(&reply(TWO_SUMS));
    let Step::CallTools { calls } = e.next_step() else {
        panic!("expected two calls");
    };
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].1["expression"], "3+3");
    e.tools_returned(vec![
        (Ok(ToolResult::ok("4")), Duration::from_millis(5)),
        (Err(ToolError::Config("down".into())), Duration::ZERO),
    ]);
    let tail: Vec<&str> = e.messages()[e.messages().len() - 2..]
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tail[0], "[call 1 of 2: calculator] 4");
    assert!(
        tail[1].starts_with("[call 2 of 2: calculator] "),
        "{}",
        tail[1]
    );
    assert_eq!(e.steps().len(), 2);
    assert!(e.steps()[0].ok && !e.steps()[1].ok);
    assert_eq!(e.steps()[0].ms, 5);
    assert_eq!(e.next_step(), Step::CallModel);
}
