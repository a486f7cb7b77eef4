//! Unit tests of the BFCL loader and scorer.

use super::*;
use crate::tool_spec::ToolSpec;
use std::time::Duration;

use serde_json::{Map, json};

fn f() -> Vec<Value> {
    vec![
        json!({"name": "math.area", "parameters": {"type": "dict", "properties": {
        "base": {"type": "float"}, "height": {"type": "integer"},
        "unit": {"type": "string"}, "tags": {"type": "array"}},
        "required": ["base", "height"]}}),
    ]
}

fn truth() -> Vec<Value> {
    vec![
        json!({"math.area": {"base": [10.0], "height": [5], "unit": ["square meters", ""],
                              "tags": [["a", "b"], ""]}}),
    ]
}

fn call(args: Value) -> Call {
    Call {
        name: "math.area".into(),
        arguments: args.as_object().unwrap().clone(),
    }
}

fn s(args: Value) -> Result<(), String> {
    score("simple_python", Some(&call(args)), &f(), &truth())
}

#[test]
fn a_right_call_with_dotted_name_passes() {
    assert_eq!(s(json!({"base": 10.0, "height": 5})), Ok(()));
}

#[test]
fn an_integer_is_accepted_for_a_float_but_not_the_reverse() {
    assert_eq!(s(json!({"base": 10, "height": 5})), Ok(()));
    assert!(
        s(json!({"base": 10.0, "height": 5.0}))
            .unwrap_err()
            .contains("type integer")
    );
}

#[test]
fn strings_are_normalised() {
    assert_eq!(
        s(json!({"base": 10, "height": 5, "unit": "Square-Meters."})),
        Ok(())
    );
    assert!(s(json!({"base": 10, "height": 5, "unit": "feet"})).is_err());
}

#[test]
fn optional_parameters_may_be_absent_only_with_an_empty_possible_answer() {
    assert_eq!(s(json!({"base": 10, "height": 5})), Ok(()));
    let strict = vec![json!({"math.area": {"base": [10.0], "height": [5], "unit": ["cm"]}})];
    let e = score(
        "simple_python",
        Some(&call(json!({"base": 10, "height": 5}))),
        &f(),
        &strict,
    )
    .unwrap_err();
    assert_eq!(e, "parameter unit is missing");
}

/// As BFCL's own checker: an optional value the possible answer leaves out was not asked
/// for, however the schema allows it (`force: true` for "push main").
#[test]
fn a_parameter_the_possible_answer_leaves_out_fails() {
    let without_tags = vec![json!({"math.area": {"base": [10.0], "height": [5], "unit": [""]}})];
    let scored = |args| score("simple_python", Some(&call(args)), &f(), &without_tags);
    assert_eq!(scored(json!({"base": 10, "height": 5})), Ok(()));
    assert_eq!(
        scored(json!({"base": 10, "height": 5, "tags": ["a"]})).unwrap_err(),
        r#"parameter tags = ["a"] was not asked for"#
    );
}

#[test]
fn missing_required_and_unknown_parameters_fail() {
    assert_eq!(
        s(json!({"base": 10})).unwrap_err(),
        "required parameter height is missing"
    );
    assert_eq!(
        s(json!({"base": 10, "height": 5, "color": "red"})).unwrap_err(),
        "parameter color is not in the schema"
    );
}

#[test]
fn wrong_value_and_wrong_function_fail() {
    assert!(
        s(json!({"base": 11, "height": 5}))
            .unwrap_err()
            .contains("not among")
    );
    let other = Call {
        name: "area".into(),
        arguments: Map::new(),
    };
    assert_eq!(
        score("simple_python", Some(&other), &f(), &truth()).unwrap_err(),
        "called area instead of math.area"
    );
    assert_eq!(
        score("simple_python", None, &f(), &truth()).unwrap_err(),
        "no call was made"
    );
}

#[test]
fn arrays_compare_element_by_element() {
    assert_eq!(
        s(json!({"base": 10, "height": 5, "tags": ["A", "b"]})),
        Ok(())
    );
    assert!(s(json!({"base": 10, "height": 5, "tags": ["b", "a"]})).is_err());
}

#[test]
fn irrelevance_passes_only_without_a_call() {
    assert_eq!(score("irrelevance", None, &f(), &[]), Ok(()));
    assert!(score("irrelevance", Some(&call(json!({}))), &f(), &[]).is_err());
}

#[test]
fn bfcl_types_become_json_schema() {
    let t = ToolSpec::new("x", "", to_json_schema(&f()[0]["parameters"]));
    assert_eq!(t.input_schema["type"], "object");
    assert_eq!(t.input_schema["properties"]["base"]["type"], "number");
}

#[test]
fn a_limit_spreads_over_each_half_of_the_file() {
    let case = |i: usize| Case {
        id: format!("c_{i}"),
        category: "c".into(),
        question: String::new(),
        tools: Vec::new(),
        functions: Vec::new(),
        ground_truth: Vec::new(),
    };
    let picked: Vec<String> = select((0..10).map(case).collect(), None, Some(3))
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    // Two from the tuning half (even numbers: c_0, c_4 of 0..8), one from the other.
    assert_eq!(picked, ["c_0", "c_1", "c_4"]);
    assert_eq!(
        select((0..2).map(case).collect(), None, Some(5))
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn the_native_baseline_sends_openai_tools_and_reads_tool_calls() {
    let mut server = mockito::Server::new();
    let m = server
        .mock("POST", "/v1/chat/completions")
        .match_body(mockito::Matcher::PartialJson(json!({
            "messages": [{"role": "user", "content": "Area of 10 by 5, twice"}],
            "tools": [{"type": "function", "function": {"name": "math.area"}}],
            "stream": false,
        })))
        .with_body(
            json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"type": "function", "function": {"name": "math.area", "arguments": "{\"base\": 10, \"height\": 5}"}},
                {"type": "function", "function": {"name": "math.area", "arguments": {"base": 10.0, "height": 5}}}
            ]}}], "usage": {"completion_tokens": 31}})
            .to_string(),
        )
        .create();
    let case = Case {
        id: "parallel_0".into(),
        category: "parallel".into(),
        question: "Area of 10 by 5, twice".into(),
        tools: vec![ToolSpec::new(
            "math.area",
            "Area",
            json!({"type": "object"}),
        )],
        functions: f(),
        ground_truth: vec![truth()[0].clone(), truth()[0].clone()],
    };
    let config = Config {
        timeout: Duration::from_secs(10),
        ..Config::default()
    };
    let target = NativeTarget {
        base_url: format!("{}/v1", server.url()),
        model: "m".into(),
    };
    let r = native_case(&target, &case, &config);
    m.assert();
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.tokens, 31);
    assert!(r.pass, "{:?}", r.reason);
}

/// The example of the function it tests, which `eval` being crate-private keeps out of
/// the docs.
#[test]
fn a_bfcl_schema_maps_to_json_schema() {
    use serde_json::json;
    let s = crate::eval::to_json_schema(&json!({"type": "dict", "properties": {
        "x": {"type": "float"}, "t": {"type": "tuple", "items": {"type": "any"}}}}));
    assert_eq!(
        s,
        json!({"type": "object", "properties": {
        "x": {"type": "number"}, "t": {"type": "array", "items": {"type": "string"}}}})
    );
}

/// The example of the function it tests, which `eval` being crate-private keeps out of
/// the docs.
#[test]
fn a_call_passes_with_an_int_for_a_float_and_an_optional_left_out() {
    use crate::eval::{Call, score};
    use serde_json::json;

    let functions = [json!({"name": "area", "parameters": {"type": "dict",
        "properties": {"base": {"type": "float"}, "unit": {"type": "string"}}, "required": ["base"]}})];
    let truth = [json!({"area": {"base": [10.0], "unit": ["cm", ""]}})];
    let call = Call {
        name: "area".into(),
        arguments: json!({"base": 10}).as_object().unwrap().clone(),
    };
    assert_eq!(
        score("simple_python", Some(&call), &functions, &truth),
        Ok(())
    );
}

/// The example of the function it tests, which `eval` being crate-private keeps out of
/// the docs.
#[test]
fn parallel_calls_match_in_any_order_and_all_are_needed() {
    use crate::eval::{Call, score_calls};
    use serde_json::json;

    let functions = [json!({"name": "w", "parameters": {"type": "dict",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}})];
    let truth = [
        json!({"w": {"city": ["Oslo"]}}),
        json!({"w": {"city": ["Rome"]}}),
    ];
    let call = |c: &str| Call {
        name: "w".into(),
        arguments: json!({"city": c}).as_object().unwrap().clone(),
    };
    assert_eq!(
        score_calls(
            "parallel",
            &[call("Rome"), call("Oslo")],
            &functions,
            &truth
        ),
        Ok(())
    );
    assert!(score_calls("parallel", &[call("Rome")], &functions, &truth).is_err());
}

#[test]
fn the_halves_are_fixed_by_the_case_number() {
    use super::{Half, half};
    assert_eq!(half("simple_python_12"), Half::Tuning);
    assert_eq!(half("simple_python_13"), Half::Validation);
    assert_eq!(half("everyday_parallel_1"), Half::Validation);
    assert_eq!(half("no-number"), Half::Tuning);
}

#[test]
fn calls_that_finished_out_of_order_are_scored_in_the_order_the_model_wrote_them() {
    let c = |company: &str, date: &str| Call {
        name: "get_stock_price".into(),
        arguments: json!({"company_name": company, "date": date})
            .as_object()
            .unwrap()
            .clone(),
    };
    let written = [
        c("Microsoft", "2022-01-01"),
        c("Microsoft", "2022-02-01"),
        c("Apple", "2022-01-01"),
    ];
    let finished = vec![written[2].clone(), written[0].clone(), written[1].clone()];
    assert_eq!(in_written_order(finished, &written), written.to_vec());
    // A call that ran but was never announced is kept, last.
    let stray = c("IBM", "2022-03-01");
    let got = in_written_order(vec![stray.clone(), written[0].clone()], &written[..1]);
    assert_eq!(got, vec![written[0].clone(), stray]);
}

/// A `parallel` case of the weather in two cities, and the eval's prediction for it from
/// the model's scripted `replies`.
fn predicted(replies: Vec<crate::backend::ScriptedReply>) -> CaseResult {
    let weather = json!({"name": "get_weather", "parameters": {"type": "dict",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}});
    let case = Case {
        id: "parallel_0".into(),
        category: "parallel".into(),
        question: "The weather in Paris and in Rome?".into(),
        tools: vec![ToolSpec::new(
            "get_weather",
            "Weather for a city",
            json!({"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}),
        )],
        functions: vec![weather],
        ground_truth: vec![
            json!({"get_weather": {"city": ["Paris"]}}),
            json!({"get_weather": {"city": ["Rome"]}}),
        ],
    };
    let model = crate::backend::Scripted::from_replies(replies);
    let mut results = run_all(
        vec![Box::new(model)],
        &[case],
        &EvalSettings::default(),
        |_| {},
    );
    results.remove(0)
}

/// The calls of the first turn that calls are the prediction, in the order written; the
/// run stops there (the answer after them is never asked for), and its first call is
/// timed.
#[test]
fn a_case_is_the_calls_of_its_first_calling_turn() {
    use crate::backend::ScriptedReply;
    let r = predicted(vec![
        ScriptedReply::text(
            r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}, {"tool": "get_weather", "arguments": {"city": "Rome"}}]}"#,
        ),
        ScriptedReply::text(r#"{"kind": "final_answer", "thought": "", "content": "Sunny."}"#),
    ]);
    let cities: Vec<&Value> = r.calls.iter().map(|c| &c.arguments["city"]).collect();
    assert_eq!(cities, ["Paris", "Rome"], "{r:?}");
    assert!(r.pass, "{r:?}");
    assert_eq!(r.replies, 1, "stopped at the first calls");
    assert!(r.budget.first_call_ms.is_some());
}

/// A call started early that its turn did not make is not part of the prediction: the
/// reply cut at the token limit after Paris, asked again, calls Rome only.
#[test]
fn an_early_call_the_turn_did_not_make_is_not_predicted() {
    use crate::backend::ScriptedReply;
    let r = predicted(vec![
        ScriptedReply::truncated(
            r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}, {"tool": "get_weather", "arguments": {"city"#,
        ),
        ScriptedReply::text(
            r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "get_weather", "arguments": {"city": "Rome"}}]}"#,
        ),
    ]);
    let cities: Vec<&Value> = r.calls.iter().map(|c| &c.arguments["city"]).collect();
    assert_eq!(cities, ["Rome"], "{r:?}");
    assert!(!r.pass);
}

/// A case `id` (its category the id's first word) asking `question` with the calculator
/// offered, right when the calls match `ground_truth` (none: no call is right).
fn calculator_case(id: &str, question: &str, ground_truth: Vec<serde_json::Value>) -> Case {
    Case {
        id: id.into(),
        category: id.split('_').next().unwrap_or_default().into(),
        question: question.into(),
        tools: vec![ToolSpec::new(
            "calculator",
            "Evaluate an arithmetic expression.",
            json!({"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}),
        )],
        functions: vec![json!({"name": "calculator", "parameters": {"type": "dict",
            "properties": {"expression": {"type": "string"}}, "required": ["expression"]}})],
        ground_truth,
    }
}

/// `case` run once with default settings against a model that gives `replies`.
fn run_one(case: Case, replies: Vec<crate::backend::ScriptedReply>) -> CaseResult {
    let model = crate::backend::Scripted::from_replies(replies);
    run_all(
        vec![Box::new(model)],
        &[case],
        &EvalSettings::default(),
        |_| {},
    )
    .remove(0)
}

/// A case that made no call says which check kept it from calling: the lines `ask`
/// prints are the case's `checks`.
#[test]
fn a_case_records_what_the_checks_did() {
    use crate::backend::ScriptedReply;
    let case = calculator_case("irrelevance_0", "What is the capital of France?", vec![]);
    let r = run_one(
        case,
        vec![
            ScriptedReply::text(
                r#"{"kind": "tool_call", "thought": "", "tool": "calculator", "arguments": {"expression": "12.5 * 4"}}"#,
            ),
            ScriptedReply::text(r#"{"kind": "final_answer", "thought": "", "content": "Paris."}"#),
        ],
    );
    assert!(r.pass, "{r:?}");
    assert_eq!(
        r.checks,
        [
            "example-copy: declined calculator: calculator's expression is the prompt's example, which the request never says; asking for an answer instead"
        ]
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["checks"][0], r.checks[0].as_str());
}

#[test]
fn a_case_records_where_the_models_name_probability_went() {
    use crate::backend::{ScriptedReply, TokenLogprob};
    let case = calculator_case(
        "simple_0",
        "What is 2 + 3?",
        vec![json!({"calculator": {"expression": ["2 + 3"]}})],
    );
    let text = r#"{"kind": "tool_call", "thought": "", "tool": "calculator", "arguments": {"expression": "2 + 3"}}"#;
    let tok = |t: &str, top: &[(&str, f64)]| TokenLogprob {
        token: t.into(),
        logprob: top
            .iter()
            .find(|(a, _)| *a == t)
            .map_or(-0.01, |(_, p)| p.ln()),
        top: top.iter().map(|(a, p)| (a.to_string(), p.ln())).collect(),
    };
    // The model wrote `calculator`, and gave most of its probability there to `math`,
    // which no tool on offer begins.
    let mut call = ScriptedReply::text(text);
    call.logprobs = vec![
        tok(r#"{"kind": ""#, &[]),
        tok("tool", &[("tool", 0.95), ("final", 0.05)]),
        tok(r#"_call", "thought": "", "tool": ""#, &[]),
        tok("calc", &[("math", 0.7), ("calc", 0.25)]),
        tok(r#"ulator", "arguments": {"expression": "2 + 3"}}"#, &[]),
    ];
    let r = run_one(
        case,
        vec![
            call,
            ScriptedReply::text(r#"{"kind": "final_answer", "thought": "", "content": "5"}"#),
        ],
    );
    assert!(r.pass, "{r:?}");
    assert!((r.p_name.unwrap() - 0.25).abs() < 1e-9, "{r:?}");
    let leaning = r.name_leaning.as_ref().expect("recorded");
    assert_eq!(leaning.name, "math");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["name_leaning"]["name"], "math");
}

/// An optional value the ground truth does not accept is counted, one it accepts or one
/// it lets be left out is not, and a wrong required value is a wrong call, not counted.
#[test]
fn optional_values_nobody_asked_for_are_counted() {
    let count = |args| bfcl::unasked_optional(&call(args), &f(), &truth());
    assert_eq!(count(json!({"base": 10, "height": 5})), 0);
    assert_eq!(
        count(json!({"base": 10, "height": 5, "unit": "square meters"})),
        0
    );
    assert_eq!(count(json!({"base": 10, "height": 5, "unit": "feet"})), 1);
    assert_eq!(
        count(json!({"base": 11, "height": 5, "unit": "feet", "tags": ["c"]})),
        2
    );
}
