//! The decision step, driven without sockets: calls questioned, declined and let go.

use serde_json::json;

use super::super::Step;
use super::super::tests::{CALL, calc, engine, kind_logprobs, reply};
use super::*;
use crate::checks::CheckAction;
use crate::config::Config;
use crate::message::Message;
use crate::run::events::Event;
use crate::tool_spec::ToolSpec;

/// A request and a call that is right but not the person's numbers alone: "die Hälfte"
/// is the model's `/2`. Where the model was unsure of it, it is asked about; a call of the
/// person's own numbers is not (`a_call_of_the_persons_own_numbers_is_not_questioned`).
const HALF_Q: &str = "Wie viel ist die Hälfte von 8?";
const HALF: &str =
    r#"{"kind":"tool_call","thought":"math","tool":"calculator","arguments":{"expression":"8/2"}}"#;

fn half_engine() -> Engine {
    Engine::new(
        vec![Message::system("sys")],
        HALF_Q,
        vec![calc()],
        Config::default(),
    )
}

/// An engine for `question` whose model replied `call`, unsure of calling (p(tool) 0.8).
fn unsure_of(question: &str, call: &str, config: Config) -> Engine {
    unsure_with(vec![calc()], question, call, config)
}

/// The same with `tools` on offer.
fn unsure_with(tools: Vec<ToolSpec>, question: &str, call: &str, config: Config) -> Engine {
    let (mut e, unsure) = turn_at(0.8, tools, question, call, config);
    e.model_replied(&unsure);
    e
}

/// An engine for `question` with `tools`, and the model's reply `call` with p(tool) `p`,
/// not yet fed back: a test may add to its probabilities first.
fn turn_at(
    p: f64,
    tools: Vec<ToolSpec>,
    question: &str,
    call: &str,
    config: Config,
) -> (Engine, ChatReply) {
    let mut e = Engine::new(vec![Message::system("sys")], question, tools, config);
    e.next_step();
    let mut reply = reply(call);
    reply.logprobs = kind_logprobs(p);
    (e, reply)
}

#[test]
fn a_call_of_the_persons_own_numbers_is_not_questioned() {
    // Unsure of "2+2" for "2 plus 2", as of "8/2" for the half of 8: only the second is
    // asked about. The first goes ahead, and its decision says why.
    let mut e = unsure_of("Wie viel ist 2 plus 2?", CALL, Config::default());
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
    let events = e.drain_events();
    let own = events.iter().find_map(|ev| match ev {
        Event::Decision { own_numbers, .. } => Some(*own_numbers),
        _ => None,
    });
    assert_eq!(own, Some(true));
    assert!(!events.iter().any(|ev| matches!(ev, Event::Check { .. })));
    let trace = events
        .iter()
        .filter_map(crate::run::events::Trace::line)
        .find(|l| l.starts_with("[DECIDE]"));
    assert!(
        trace.is_some_and(|l| l.ends_with("the request's own numbers")),
        "{events:?}"
    );
    let mut e = unsure_of(HALF_Q, HALF, Config::default());
    assert_eq!(e.next_step(), Step::AskAside);
}

/// The answer to the fit question with a share of "yes" of `yes`.
fn fit_answer(yes: f64) -> ChatReply {
    use crate::backend::TokenLogprob;
    let mut r = reply(r#"{"answer": "no"}"#);
    r.logprobs = vec![TokenLogprob {
        token: "no".into(),
        logprob: (1.0 - yes).ln(),
        top: vec![("no".into(), (1.0 - yes).ln()), ("yes".into(), yes.ln())],
    }];
    r
}

/// The messages of the question aside waiting, if one is.
fn question(e: &Engine) -> Vec<Message> {
    e.aside().map(|a| a.messages.clone()).unwrap_or_default()
}

/// Answers the fit question with `yes` and, when the tool's leaning is asked next,
/// that with `base`.
fn answer(e: &mut Engine, yes: f64, base: f64) {
    assert!(!e.aside().is_some_and(|a| a.baseline));
    e.aside_replied(Some(&fit_answer(yes)));
    let leaning = question(e)
        .get(1)
        .is_some_and(|m| m.content.contains("Request: \n"));
    // The orchestrator's warning when it fails says which question it was.
    assert_eq!(e.aside().is_some_and(|a| a.baseline), leaning);
    if leaning {
        e.aside_replied(Some(&fit_answer(base)));
    }
}

#[test]
fn a_call_the_model_was_unsure_of_is_questioned_and_a_no_declines_it() {
    let mut e = unsure_of(HALF_Q, HALF, Config::default());
    assert_eq!(e.next_step(), Step::AskAside);
    let asked = question(&e);
    assert!(asked[1].content.contains("calculator — math"), "{asked:?}");
    assert!(asked[1].content.contains(HALF_Q));
    e.aside_replied(Some(&fit_answer(0.2)));
    // Then the same question with no request: the tool's own leaning.
    assert_eq!(e.next_step(), Step::AskAside);
    assert!(question(&e)[1].content.contains("Request: \n"));
    e.aside_replied(Some(&fit_answer(0.5)));
    let events = e.drain_events();
    let fit = events.iter().find_map(|ev| match ev {
        Event::Decision { fit, .. } => Some(fit.map(|f| (f * 100.0).round())),
        _ => None,
    });
    let by = events.iter().find_map(|ev| match ev {
        Event::Check {
            check,
            action: CheckAction::Decline { .. },
            ..
        } => Some(check.clone()),
        _ => None,
    });
    let declined = fit.zip(by.map(Some));
    assert_eq!(
        declined,
        Some((Some(20.0), Some("tool-fit".into()))),
        "{events:?}"
    );
    let line = events.iter().find_map(Event::check_line).unwrap();
    assert!(
        line.starts_with(
            "tool-fit: declined calculator: fit 0.20 < 0.40 (yes 0.20 against 0.50 for no \
             request) (not calibrated"
        ),
        "{line}"
    );
    assert_eq!(e.next_step(), Step::CallModel);
    assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
}

#[test]
fn a_turn_asked_again_for_more_is_not_decided_on_again() {
    // Unsure of its one call, the model is asked the fit question and says yes; asked
    // for one more, the turn it writes goes ahead without a second question.
    let mut e = unsure_of(
        "Die Hälfte von 8 und von 6?",
        HALF,
        super::super::tests::with_check("numbers-left"),
    );
    assert_eq!(e.next_step(), Step::AskAside);
    answer(&mut e, 0.9, 0.5);
    assert_eq!(e.next_step(), Step::CallModel);
    let mut two = reply(
        r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"calculator","arguments":{"expression":"8/2"}},{"tool":"calculator","arguments":{"expression":"6/2"}}]}"#,
    );
    two.logprobs = kind_logprobs(0.8);
    e.model_replied(&two);
    assert!(matches!(e.next_step(), Step::CallTools { calls } if calls.len() == 2));
}

#[test]
fn a_yes_to_the_fit_question_lets_the_call_through_unchanged() {
    let mut e = half_engine();
    e.next_step();
    let mut unsure = reply(HALF);
    unsure.logprobs = kind_logprobs(0.8);
    e.model_replied(&unsure);
    assert_eq!(e.next_step(), Step::AskAside);
    answer(&mut e, 0.7, 0.5);
    assert_eq!(
        e.next_step(),
        Step::CallTool {
            tool: "calculator".into(),
            arguments: json!({"expression": "8/2"}).as_object().unwrap().clone()
        }
    );
    // No answer to the question at all (the server failed it): judged without it.
    let mut e = half_engine();
    e.next_step();
    e.model_replied(&unsure);
    e.aside_replied(None);
    // Nothing to set against the tool's leaning, so that is not asked.
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

/// A tip tool and a request that shares its words, answered with `call`.
fn tip_turn(question: &str, call: &str) -> Engine {
    let tip = ToolSpec::new(
        "calculate_tip",
        "Calculate the tip on a restaurant bill",
        json!({"type": "object", "properties": {"bill_amount": {"type": "number"}},
               "required": ["bill_amount"]}),
    )
    .reading_only();
    unsure_with(vec![tip], question, call, Config::default())
}

#[test]
fn a_call_with_a_value_nobody_said_is_questioned_though_its_tool_shares_words() {
    let invented = r#"{"kind":"tool_call","thought":"","tool":"calculate_tip","arguments":{"bill_amount":30}}"#;
    let mut e = tip_turn(
        "Is a tip on a restaurant bill customary in Japan?",
        invented,
    );
    assert_eq!(e.next_step(), Step::AskAside);
    answer(&mut e, 0.2, 0.5);
    let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
    assert!(
        line.starts_with(
            "tool-fit: declined calculate_tip: fit 0.20 < 0.40 (yes 0.20 against 0.50 for \
             no request), a value nobody said"
        ),
        "{line}"
    );
    // The same words, with the bill the person gave: it goes ahead unquestioned.
    let said = r#"{"kind":"tool_call","thought":"","tool":"calculate_tip","arguments":{"bill_amount":84}}"#;
    let mut e = tip_turn("Calculate the tip on a restaurant bill of $84.", said);
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

/// A German request for two things, with two tools whose English text it shares no
/// word with, and a turn that calls both.
fn two_tool_turn() -> Engine {
    let clock = ToolSpec::new(
        "clock",
        "time of day",
        json!({"type": "object", "properties": {"zone": {"type": "string"}}}),
    )
    .reading_only();
    let config = Config {
        max_calls_per_turn: 8,
        ..Config::default()
    };
    let mut e = Engine::new(
        vec![Message::system("sys")],
        "Wie spät ist es in Berlin, und wie viel ist die Hälfte von 8?",
        vec![calc(), clock],
        config,
    );
    e.next_step();
    let mut unsure = reply(
        r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"clock","arguments":{"zone":"Europe/Berlin"}},{"tool":"calculator","arguments":{"expression":"8/2"}}]}"#,
    );
    unsure.logprobs = kind_logprobs(0.8);
    e.model_replied(&unsure);
    e
}

#[test]
fn a_turn_of_several_tools_is_asked_about_each_and_goes_ahead_when_one_fits() {
    let mut e = two_tool_turn();
    assert_eq!(e.next_step(), Step::AskAside);
    assert!(question(&e)[1].content.contains("Tool: clock"));
    answer(&mut e, 0.2, 0.5);
    assert_eq!(e.next_step(), Step::AskAside);
    assert!(question(&e)[1].content.contains("Tool: calculator"));
    answer(&mut e, 0.7, 0.5);
    match e.next_step() {
        Step::CallTools { calls } => assert_eq!(calls.len(), 2),
        other => panic!("{other:?}"),
    }
    let fit = e.drain_events().iter().find_map(|ev| match ev {
        Event::Decision { tool, fit, .. } => Some((tool.clone(), fit.map(|f| (f * 100.0).round()))),
        _ => None,
    });
    assert_eq!(fit, Some(("calculator".into(), Some(70.0))));
}

#[test]
fn a_turn_of_several_tools_is_declined_only_when_none_fits() {
    let mut e = two_tool_turn();
    e.next_step();
    answer(&mut e, 0.2, 0.5);
    e.next_step();
    answer(&mut e, 0.3, 0.5);
    assert_eq!(e.next_step(), Step::CallModel);
    assert!(!e.schema().allows(crate::turn::Kind::ToolCalls));
}

#[test]
fn the_fit_answer_is_read_against_the_tools_own_leaning_asked_once() {
    // Runs of one orchestrator share what was learnt of each tool.
    let schemas = std::sync::Arc::new(super::super::Prepared::new(&[calc()], &Config::default()));
    let run = || {
        let mut e = Engine::with_schema(
            vec![Message::system("sys")],
            HALF_Q,
            vec![calc()],
            Config::default(),
            schemas.clone(),
        );
        e.next_step();
        let mut unsure = reply(HALF);
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        assert_eq!(e.next_step(), Step::AskAside);
        e
    };
    // "Yes" at 0.5 where the tool draws 0.7 with no request at all: the request
    // moved the model towards "no", and the call is declined.
    let mut e = run();
    answer(&mut e, 0.5, 0.7);
    let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
    assert!(
        line.starts_with("tool-fit: declined calculator: fit 0.30 < 0.40"),
        "{line}"
    );
    // The next run asks the question only, and 0.8 against 0.7 goes ahead.
    let mut e = run();
    e.aside_replied(Some(&fit_answer(0.8)));
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

#[test]
fn a_tools_leaning_kept_in_the_file_is_not_asked_by_the_next_process() {
    let dir = std::env::temp_dir().join(format!("toolloop-leaning-{}", std::process::id()));
    let path = dir.join("leanings.json");
    let _ = std::fs::remove_dir_all(&dir);
    // Each process starts with nothing learnt but what the file keeps.
    let process = || {
        let model = ("qwen".to_string(), "http://127.0.0.1:8080/v1".to_string());
        let mut prepared = super::super::Prepared::new(&[calc()], &Config::default());
        prepared.fit_baselines = prepared.fit_baselines.clone().kept_in(&path, model);
        let (q, specs) = (HALF_Q, vec![calc()]);
        let sys = vec![Message::system("sys")];
        let mut e = Engine::with_schema(sys, q, specs, Config::default(), prepared.into());
        e.next_step();
        let mut unsure = reply(HALF);
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        assert_eq!(e.next_step(), Step::AskAside);
        e
    };
    answer(&mut process(), 0.5, 0.7);
    // The next process asks about the request only, and reads the answer against the
    // leaning the first one kept: 0.5 against 0.7 is declined again.
    let mut next = process();
    next.aside_replied(Some(&fit_answer(0.5)));
    assert!(!next.aside().is_some_and(|a| a.baseline));
    let line = next
        .drain_events()
        .iter()
        .find_map(Event::check_line)
        .unwrap();
    assert!(line.starts_with("tool-fit: declined calculator: fit 0.30 < 0.40"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_call_the_model_was_sure_of_is_never_questioned() {
    let mut e = engine(10);
    e.next_step();
    let mut sure = reply(CALL);
    sure.logprobs = kind_logprobs(0.95);
    e.model_replied(&sure);
    // An answer nobody asked for changes nothing.
    e.aside_replied(None);
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

#[test]
fn calibrated_thresholds_are_named_in_the_decline_line() {
    let config = Config {
        thresholds: Some(crate::Thresholds {
            p_min: 0.85,
            calibrated_for: Some("qwen2.5-coder-0.5b".into()),
            ..crate::Thresholds::default()
        }),
        ..Config::default()
    };
    let mut e = Engine::new(vec![Message::system("sys")], "hi", vec![calc()], config);
    e.next_step();
    let mut unsure = reply(CALL);
    unsure.logprobs = kind_logprobs(0.62);
    e.model_replied(&unsure);
    let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
    assert_eq!(
        line,
        "tool-probability: declined calculator: p 0.62 < 0.85 (calibrated for \
         qwen2.5-coder-0.5b); asking for an answer instead"
    );
}

/// [`turn_at`] calibrated with `thresholds`, the calculator asked `HALF_Q` and the model
/// replying `HALF`.
fn halving_at(p: f64, thresholds: crate::Thresholds) -> (Engine, ChatReply) {
    let config = Config {
        thresholds: Some(thresholds),
        ..Config::default()
    };
    turn_at(p, vec![calc()], HALF_Q, HALF, config)
}

#[test]
fn a_call_the_model_named_without_choosing_it_is_held_to_more() {
    // Calibrated with a weight on the name: the same call and the same fit answers,
    // once with the model's probability at the name on `calculator`, once on a
    // name no tool has. Only the second is declined, and its line says why.
    let run = |top_name: &str| {
        let (mut e, mut unsure) = halving_at(
            0.8,
            crate::Thresholds {
                fit_min: 0.45,
                name_weight: 0.04,
                calibrated_for: Some("m".into()),
                ..crate::Thresholds::default()
            },
        );
        unsure.logprobs.extend([
            tok(r#"_call","thought":"math","tool":""#, vec![]),
            tok(
                "calc",
                vec![
                    (top_name.into(), 0.9f64.ln()),
                    ("calc".into(), 0.05f64.ln()),
                ],
            ),
            tok(r#"ulator","arguments":{"expression":"8/2"}}"#, vec![]),
        ]);
        e.model_replied(&unsure);
        assert_eq!(e.next_step(), Step::AskAside);
        // Fit 0.47: above the bar, below it less the whole weight.
        answer(&mut e, 0.47, 0.5);
        e.drain_events().iter().find_map(Event::check_line)
    };
    assert_eq!(run("calc"), None, "the name was the model's choice");
    let line = run("recipe").expect("declined");
    assert!(
        line.starts_with(
            "tool-fit: declined calculator: fit 0.47 -0.03 (0.04 × names on offer \
             0.05 short of 0.2; likeliest \"recipe…\" 0.90) = 0.44 < 0.45"
        ),
        "{line}"
    );
}

#[test]
fn a_decline_lines_terms_add_up_to_its_score_and_a_sure_level_under_one_reads_so() {
    // A calibration like Qwen's: a "sure" level of 0.99999, a weight on p(tool) and a bar
    // of 0.428. A call at p 0.99 whose fit reads 0.429 falls short by the weight's 0.002.
    let (mut e, unsure) = halving_at(
        0.99,
        crate::Thresholds {
            p_sure: 0.99999,
            fit_min: 0.428,
            p_weight: 0.2,
            calibrated_for: Some("qwen".into()),
            ..crate::Thresholds::default()
        },
    );
    e.model_replied(&unsure);
    assert_eq!(e.next_step(), Step::AskAside);
    answer(&mut e, 0.5, 0.571);
    let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
    assert!(
        line.starts_with(
            "tool-fit: declined calculator: fit 0.429 -0.002 (0.2 × (p 0.990 − 1)) = 0.427 \
             < 0.428 (yes 0.50 against 0.57 for no request), p 0.99000 < 0.99999 \
             (calibrated for qwen)"
        ),
        "{line}"
    );
}

#[test]
fn a_call_whose_tool_shares_the_requests_words_is_not_questioned() {
    let weather = ToolSpec::new(
        "get_weather",
        "Current weather for a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    )
    .reading_only();
    let mut e = Engine::new(
        vec![Message::system("sys")],
        "What's the weather in Oslo?",
        vec![weather],
        Config::default(),
    );
    e.next_step();
    let mut unsure = reply(
        r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Oslo"}}"#,
    );
    unsure.logprobs = kind_logprobs(0.8);
    e.model_replied(&unsure);
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

/// A tool that declares nothing: taken to write, as MCP's defaults say.
fn git_push() -> ToolSpec {
    ToolSpec::new(
        "git_push",
        "Push a branch to the remote repository.",
        json!({"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]}),
    )
}

const PUSH_Q: &str = "What does git push do to the main branch on the remote?";
const PUSH: &str =
    r#"{"kind":"tool_call","thought":"","tool":"git_push","arguments":{"branch":"main"}}"#;

#[test]
fn a_call_that_writes_is_questioned_however_sure_the_model_was() {
    // Sure of the call (p 0.99) and sharing words with the tool: a tool that reads would
    // go ahead unquestioned; one that writes waits for the model's answer aside.
    let (mut e, sure) = turn_at(0.99, vec![git_push()], PUSH_Q, PUSH, Config::default());
    e.model_replied(&sure);
    assert_eq!(e.next_step(), Step::AskAside);
    answer(&mut e, 0.2, 0.5);
    let line = e.drain_events().iter().find_map(Event::check_line);
    assert!(
        line.as_deref()
            .is_some_and(|l| l.contains("a tool that writes")),
        "{line:?}"
    );
    assert_eq!(e.next_step(), Step::CallModel);
    assert!(!e.schema().allows(crate::turn::Kind::ToolCall));

    let read = git_push().reading_only();
    let (mut e, sure) = turn_at(0.99, vec![read], PUSH_Q, PUSH, Config::default());
    e.model_replied(&sure);
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

#[test]
fn a_call_that_writes_and_fits_goes_ahead_after_its_answer() {
    let q = "Push the main branch to the remote.";
    let (mut e, sure) = turn_at(0.99, vec![git_push()], q, PUSH, Config::default());
    e.model_replied(&sure);
    assert_eq!(e.next_step(), Step::AskAside);
    answer(&mut e, 0.9, 0.5);
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

#[test]
fn the_persons_class_for_a_tool_decides_whether_its_calls_are_questioned() {
    let mut config = Config::default();
    config
        .permissions
        .classes
        .insert("git_push".into(), crate::tool_spec::ToolClass::READ_ONLY);
    let (mut e, sure) = turn_at(0.99, vec![git_push()], PUSH_Q, PUSH, config);
    e.model_replied(&sure);
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

/// "A taxi, Centraal → Schiphol" and a call that adds `seats: 2` after a `,` the model
/// wrote at 0.8 against closing the arguments.
fn taxi_turn(config: Config) -> (Engine, Step) {
    let taxi = ToolSpec::new(
        "book_taxi",
        "Book a taxi",
        json!({"type": "object", "properties": {
            "pickup": {"type": "string"}, "destination": {"type": "string"},
            "seats": {"type": "integer"}}, "required": ["pickup", "destination"]}),
    )
    .reading_only();
    // Not "to": in Danish and Norwegian it says 2, which would make `seats: 2` said.
    let question = "Taxi Centraal → Schiphol.";
    let mut e = Engine::new(vec![Message::system("sys")], question, vec![taxi], config);
    e.next_step();
    let pieces = [
        r#"{"kind":"tool_call","thought":"taxi","tool":"book_taxi","#,
        r#""arguments":{"pickup":"Centraal","destination":"Schiphol"#,
        r#"","#,
        r#""seats":2}}"#,
    ];
    let mut r = reply(&pieces.concat());
    r.logprobs = pieces
        .iter()
        .map(|t| crate::backend::TokenLogprob {
            token: t.to_string(),
            logprob: 0.0,
            top: match *t == "\"," {
                true => vec![("\",".into(), 0.8f64.ln()), ("\"}".into(), 0.2f64.ln())],
                false => vec![],
            },
        })
        .collect();
    e.model_replied(&r);
    let step = e.next_step();
    (e, step)
}

#[test]
fn an_optional_value_the_model_hesitated_over_and_nobody_said_is_left_out_when_asked_to() {
    let mut config = Config::default();
    config.checks.set("unsure-optional", true).unwrap();
    let (mut e, step) = taxi_turn(config);
    let Step::CallTool { arguments, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        serde_json::Value::Object(arguments),
        json!({"pickup": "Centraal", "destination": "Schiphol"})
    );
    let lines: Vec<String> = e
        .drain_events()
        .iter()
        .filter_map(Event::check_line)
        .collect();
    assert!(
        lines.iter().any(|l| l
            == "unsure-optional: book_taxi: seats = 2 written at 0.80 < 0.90 and not in the request; called without seats"),
        "{lines:?}"
    );
    // Off, as by default, the call is the model's.
    let (_, step) = taxi_turn(Config::default());
    let Step::CallTool { arguments, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(arguments["seats"], 2);
}

/// The check that declined the turn, and the tools it asked again among.
fn declined_by(events: &[Event]) -> Option<(String, Vec<String>)> {
    events.iter().find_map(|ev| match ev {
        Event::Check {
            check,
            action: CheckAction::Decline { instead, .. },
            ..
        } => Some((check.clone(), instead.clone())),
        _ => None,
    })
}

/// A call copied from the prompt's example is declined and the model asked again among
/// the tools whose text shares a word with the request. Those words chose what was on
/// offer, so they are no evidence for the call made then: it is put to the fit question,
/// where the same call made first would go ahead on them.
#[test]
fn a_call_among_tools_offered_for_their_words_is_still_questioned() {
    let weather = ToolSpec::new(
        "get_weather",
        "Current weather for a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )
    .reading_only();
    let question = "What is the weather in Tokyo?";
    let copied = r#"{"kind":"tool_call","thought":"","tool":"calculator","arguments":{"expression":"12.5 * 4"}}"#;
    let call =
        r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Tokyo"}}"#;
    let tools = vec![calc(), weather];
    let mut e = unsure_with(tools.clone(), question, copied, Config::default());
    let declined = declined_by(&e.drain_events());
    assert_eq!(
        declined,
        Some(("example-copy".to_string(), vec!["get_weather".to_string()]))
    );
    assert_eq!(e.next_step(), Step::CallModel);
    let mut again = reply(call);
    again.logprobs = kind_logprobs(0.8);
    e.model_replied(&again);
    assert_eq!(e.next_step(), Step::AskAside);
    // Made first, the same call shares "weather" with the request and goes ahead.
    let mut first = unsure_with(tools, question, call, Config::default());
    assert!(matches!(first.next_step(), Step::CallTool { .. }));
}

/// A reply calling `tool` whose name the model began with `first` at probability `p`,
/// beside `leaning` at `p_leaning`; sure of calling (p(tool) 0.99).
fn naming(call: &str, first: &str, p: f64, leaning: &str, p_leaning: f64) -> ChatReply {
    use crate::backend::TokenLogprob;
    let tok = |t: &str| TokenLogprob {
        token: t.into(),
        logprob: -0.01,
        top: vec![],
    };
    let head = r#"{"kind":""#;
    let at = call.find(r#""tool":""#).unwrap() + r#""tool":""#.len();
    let mut r = reply(call);
    r.logprobs = vec![
        tok(head),
        TokenLogprob {
            token: "tool".into(),
            logprob: 0.99f64.ln(),
            top: vec![
                ("tool".into(), 0.99f64.ln()),
                ("final".into(), 0.01f64.ln()),
            ],
        },
        tok(&call[head.len() + 4..at]),
        TokenLogprob {
            token: first.into(),
            logprob: p.ln(),
            top: vec![(first.into(), p.ln()), (leaning.into(), p_leaning.ln())],
        },
        tok(&call[at + first.len()..]),
    ];
    r
}

fn clock() -> ToolSpec {
    ToolSpec::new(
        "current_time",
        "The current date and time at a UTC offset",
        json!({"type": "object", "properties": {"utc_offset": {"type": "string"}}}),
    )
    .reading_only()
}

/// A first turn of `question`, with the calculator, the clock and the weather on offer,
/// whose reply `call` began the tool's name `current` at `p` beside `leaning` at
/// `p_leaning`.
fn clock_called(question: &str, call: &str, p: f64, leaning: &str, p_leaning: f64) -> Engine {
    clock_called_with(clock(), question, call, p, leaning, p_leaning)
}

/// [`clock_called`] with a clock of the test's own.
fn clock_called_with(
    clock: ToolSpec,
    question: &str,
    call: &str,
    p: f64,
    leaning: &str,
    p_leaning: f64,
) -> Engine {
    let tools = vec![calc(), clock, super::super::tests::weather()];
    let mut e = Engine::new(
        vec![Message::system("sys")],
        question,
        tools,
        Config::default(),
    );
    e.next_step();
    e.model_replied(&naming(call, "current", p, leaning, p_leaning));
    e
}

/// Where the model began the tool's name with a word of another tool's name alone
/// (`weather`), the call it was turned to is not made: it is asked again, among that
/// tool, and the call it then makes is judged as its own choice, not put to the fit
/// question for words that chose it.
#[test]
fn a_call_the_model_leaned_away_from_is_asked_again_among_the_tool_it_reached_for() {
    // The request shares "weather" with the tool: were the tool offered for that word,
    // its call would be put to the fit question all the same.
    let question = "Is the weather warm in Sydney?";
    let called = r#"{"kind":"tool_call","thought":"","tool":"current_time","arguments":{"utc_offset":"+10:00"}}"#;
    let mut e = clock_called(question, called, 0.6, "weather", 0.3);
    let events = e.drain_events();
    assert_eq!(
        declined_by(&events),
        Some(("leaned-tool".to_string(), vec!["get_weather".to_string()]))
    );
    // Said as it happens, -v or not (the line the command line and the web page print).
    let line = events.iter().find_map(Event::check_line).unwrap();
    assert!(
        line.contains("0.30 to `weather`") && line.ends_with("asking again among get_weather"),
        "{line}"
    );
    assert_eq!(e.next_step(), Step::CallModel);
    let call =
        r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Sydney"}}"#;
    let mut again = reply(call);
    again.logprobs = kind_logprobs(0.99);
    e.model_replied(&again);
    assert!(matches!(e.next_step(), Step::CallTool { .. }));

    // Below the bar, or towards a word no single tool's name has, the call goes ahead.
    for (leaning, p) in [("weather", 0.02), ("wea", 0.3)] {
        let mut e = clock_called(question, called, 0.6, leaning, p);
        let checks: Vec<_> = e
            .drain_events()
            .into_iter()
            .filter(|ev| matches!(ev, Event::Check { .. }))
            .collect();
        assert!(checks.is_empty(), "{leaning} {p}: {checks:?}");
    }
}

/// Where the request's words point to the tool called and not to the one the model
/// leaned to, the words and its choice agree: "What time is it in Tokyo?" and
/// `current_time`, beside 0.16 on `weather`, is called as written.
#[test]
fn a_call_the_requests_words_point_to_is_not_asked_again_for_a_leaning() {
    let called = r#"{"kind":"tool_call","thought":"","tool":"current_time","arguments":{"utc_offset":"+09:00"}}"#;
    let run = |question: &str| {
        let mut e = clock_called(question, called, 0.8, "weather", 0.16);
        (declined_by(&e.drain_events()), e.next_step())
    };
    let (declined, step) = run("What time is it in Tokyo?");
    assert_eq!(declined, None);
    assert!(
        matches!(step, Step::CallTool { ref tool, .. } if tool == "current_time"),
        "{step:?}"
    );
    // Words that point to neither: the leaning decides, as before.
    let (declined, _) = run("How warm is it in Tokyo?");
    assert_eq!(
        declined,
        Some(("leaned-tool".to_string(), vec!["get_weather".to_string()]))
    );
}

/// A number at the 16 digits llama.cpp's grammar allows is where the grammar stopped the
/// model, not a value: the turn is declined for an answer however sure the model was,
/// and the person sees why. The same call with the person's own amount goes ahead.
#[test]
fn a_number_the_grammar_cut_is_declined_for_an_answer() {
    let convert = ToolSpec::new(
        "convert_currency",
        "Convert money from one currency to another",
        json!({"type": "object", "properties": {
            "amount": {"type": "number"}, "from_currency": {"type": "string"},
            "to_currency": {"type": "string"}},
            "required": ["amount", "from_currency", "to_currency"]}),
    )
    .reading_only();
    let call = |amount: &str| {
        format!(
            r#"{{"kind":"tool_call","thought":"","tool":"convert_currency","arguments":{{"amount":{amount},"from_currency":"EUR","to_currency":"GBP"}}}}"#
        )
    };
    let question = "Convert 250 euros to pounds";
    let (mut e, sure) = turn_at(
        0.99,
        vec![convert.clone()],
        question,
        &call("1000000000000000"),
        Config::default(),
    );
    e.model_replied(&sure);
    let events = e.drain_events();
    assert_eq!(
        declined_by(&events),
        Some(("cut-number".to_string(), vec![]))
    );
    let lines: Vec<String> = events.iter().filter_map(Event::check_line).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cut-number: declined convert_currency")
                && l.contains("amount 1000000000000000 has the 16 digits the grammar allows")),
        "{lines:?}"
    );
    assert_eq!(e.next_step(), Step::CallModel);
    let (mut e, sure) = turn_at(
        0.99,
        vec![convert],
        question,
        &call("250"),
        Config::default(),
    );
    e.model_replied(&sure);
    assert!(matches!(e.next_step(), Step::CallTool { .. }));
}

/// A token of a reply, at -0.1, with the likeliest tokens `top` beside it.
fn tok(text: &str, top: Vec<(String, f64)>) -> crate::backend::TokenLogprob {
    crate::backend::TokenLogprob {
        token: text.into(),
        logprob: -0.1,
        top,
    }
}

/// A taxi for "Who painted the Mona Lisa?" (asked in Italian), its name written with the
/// share `p_name` for the names on offer, with `arguments`: what `guessed-tool` decided,
/// once the fit question, if asked, was answered yes.
fn taxi_guess(question: &str, arguments: &str, p_name: f64) -> Option<(String, Vec<String>)> {
    let taxi = ToolSpec::new(
        "book_taxi",
        "Order a taxi.",
        json!({"type": "object", "properties": {
            "pickup": {"type": "string"}, "destination": {"type": "string"}},
            "required": ["pickup", "destination"]}),
    )
    .reading_only();
    guess(taxi, "book", question, arguments, p_name)
}

/// A call of `spec` for `question` with `arguments`, the tool's name begun with `head`
/// at the share `p_name` for the names on offer: what declined it, once the fit question,
/// if asked, was answered yes.
fn guess(
    spec: ToolSpec,
    head: &str,
    question: &str,
    arguments: &str,
    p_name: f64,
) -> Option<(String, Vec<String>)> {
    let tool = spec.name.clone();
    let call =
        format!(r#"{{"kind":"tool_call","thought":"","tool":"{tool}","arguments":{arguments}}}"#);
    let (mut e, mut r) = turn_at(0.8, vec![calc(), spec], question, &call, Config::default());
    r.logprobs.extend([
        tok(r#"_call","thought":"","tool":""#, vec![]),
        tok(
            head,
            vec![
                ("restaurant".into(), (1.0 - p_name).ln()),
                (head.into(), p_name.ln()),
            ],
        ),
        tok(
            &format!(r#"{}","arguments":{arguments}}}"#, &tool[head.len()..]),
            vec![],
        ),
    ]);
    e.model_replied(&r);
    if e.next_step() == Step::AskAside {
        answer(&mut e, 0.9, 0.5);
    }
    declined_by(&e.drain_events())
}

/// A barely named call whose value is the tool's own example, in a request written in
/// another script that does not name it, is declined; the lenient reading alone counts a
/// Latin word as said there. A request that writes the name keeps the call.
#[test]
fn a_barely_named_call_of_the_tools_own_example_is_declined_in_any_script() {
    let music = || {
        ToolSpec::new(
            "play_music",
            "Play music.",
            json!({"type": "object", "properties": {
                "artist": {"type": "string", "description": "The artist or band, e.g. Queen."}},
                "required": ["artist"]}),
        )
        .reading_only()
    };
    let queen = r#"{"artist":"Queen"}"#;
    let joke = "Расскажи мне анекдот.";
    assert_eq!(
        guess(music(), "play", joke, queen, 0.01),
        Some(("guessed-tool".to_string(), Vec::new()))
    );
    assert_eq!(guess(music(), "play", "Включи Queen.", queen, 0.01), None);
    assert_eq!(
        guess(music(), "play", joke, queen, 0.9),
        None,
        "the model chose it"
    );
}

/// A call whose tool the model barely named and which makes up a required value is
/// declined, and the model asked for its answer; one whose name it chose, or whose
/// values the person said, is left to the other checks.
#[test]
fn a_barely_named_call_with_a_value_nobody_said_is_declined() {
    let mona = "Chi ha dipinto la Gioconda?";
    let guessed = r#"{"pickup":"Gioconda","destination":"Piazza"}"#;
    assert_eq!(
        taxi_guess(mona, guessed, 0.25),
        Some(("guessed-tool".to_string(), Vec::new()))
    );
    assert_eq!(
        taxi_guess(mona, guessed, 0.9),
        None,
        "the model chose the name"
    );
    let said = "Chiamami un taxi dalla stazione Termini a Fiumicino.";
    let theirs = r#"{"pickup":"Termini","destination":"Fiumicino"}"#;
    assert_eq!(taxi_guess(said, theirs, 0.25), None, "the person said both");
}

/// A call whose only value is its tool's own example, to a tool the request's words do
/// not point to, carries nothing of the request: the demo clock's `+09:00` for "Hi!" is
/// declined for an answer, and the person sees why. The same call for "What time is it
/// in Tokyo?" is the model's reading of Tokyo, and runs; where the model leaned to the
/// weather's name, `leaned-tool` asks again among that tool.
#[test]
fn a_call_of_its_tools_example_alone_is_declined_for_a_greeting_and_run_for_a_time_question() {
    let clock = ToolSpec::new(
        "current_time",
        "The current date and time, in UTC or at a UTC offset",
        json!({"type": "object", "properties": {"utc_offset": {"type": "string",
               "description": "e.g. +09:00; UTC when absent"}}}),
    )
    .reading_only();
    let called = r#"{"kind":"tool_call","thought":"","tool":"current_time","arguments":{"utc_offset":"+09:00"}}"#;
    let run = |question: &str| {
        let (mut e, mut sure) = turn_at(
            0.95,
            vec![calc(), clock.clone()],
            question,
            called,
            Config::default(),
        );
        sure.logprobs = kind_logprobs(0.95);
        e.model_replied(&sure);
        let events = e.drain_events();
        let line = events.iter().find_map(Event::check_line);
        (declined_by(&events), line, e.next_step())
    };
    let (declined, line, step) = run("Hi!");
    assert_eq!(declined.map(|d| d.0), Some("example-copy".to_string()));
    let line = line.unwrap();
    assert!(
        line.contains("utc_offset is its description's example (+09:00)"),
        "{line}"
    );
    assert_eq!(step, Step::CallModel);
    let (declined, _, step) = run("What time is it in Tokyo?");
    assert_eq!(declined, None);
    assert!(
        matches!(step, Step::CallTool { ref tool, .. } if tool == "current_time"),
        "{step:?}"
    );
    // Where the model leaned to another tool's name, that tool is asked again among, as
    // for any call: the temperature in Tokyo is the weather's, not an answer's.
    let question = "What's the temperature in Tokyo?";
    let mut e = clock_called_with(clock, question, called, 0.7, "weather", 0.2);
    assert_eq!(
        declined_by(&e.drain_events()),
        Some(("leaned-tool".to_string(), vec!["get_weather".to_string()]))
    );
}
