//! The invariant every check must keep: **a right call passes unchanged**. A scripted model
//! plays each case's ground-truth call (the first possible value of each argument, an
//! optional one left out where BFCL allows that); the call the loop dispatches must pass
//! BFCL's own checker against that ground truth. A check that changes, drops or refuses a
//! right call breaks it, whatever it gains elsewhere. The scripted model gives no
//! probabilities, so the two checks that decide whether to call at all stand aside here:
//! this is the invariant of the checks on values (and of the schema, the repairer and the
//! driver); the decision is measured on real models.
//!
//! Run over the everyday set shipped in `tests/data/everyday` on every `cargo test`, and
//! over BFCL's non-live categories with a ground truth when they are fetched
//! (`scripts/bfcl-data.sh`; `.ci/run` does, and runs the ignored test).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{Case, EvalSettings, SharedBackend, load, run_case};
use crate::backend::Scripted;
use crate::config::Config;

/// The first of an argument's possible values, as a model would write it; none where
/// the first is "" (BFCL's "may be left out": a right call leaves it out). A dict's
/// values are possible values again, key by key, as BFCL's checker reads them.
fn first_option(options: &Value) -> Option<Value> {
    let first = options.as_array()?.first()?;
    (first != "").then(|| written(first))
}

fn written(value: &Value) -> Value {
    match value {
        Value::Object(keys) => Value::Object(
            keys.iter()
                .filter_map(|(k, options)| Some((k.clone(), first_option(options)?)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(written).collect()),
        other => other.clone(),
    }
}

/// The ground-truth calls of `case`, each argument at its first possible value.
fn right_calls(case: &Case) -> Vec<(&String, Map<String, Value>)> {
    case.ground_truth
        .iter()
        .filter_map(|t| t.as_object()?.iter().next())
        .map(|(tool, args)| {
            let arguments = args
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(name, options)| Some((name.clone(), first_option(options)?)))
                .collect();
            (tool, arguments)
        })
        .collect()
}

/// The reply that makes `calls`, as a model writes it: one call in the single form,
/// several in the list form.
fn reply_of(calls: Vec<(&String, Map<String, Value>)>) -> String {
    let calls: Vec<Value> = calls
        .into_iter()
        .map(|(tool, arguments)| json!({"tool": tool, "arguments": arguments}))
        .collect();
    if let [one] = calls.as_slice() {
        json!({"kind": "tool_call", "thought": "", "tool": one["tool"], "arguments": one["arguments"]})
            .to_string()
    } else {
        json!({"kind": "tool_calls", "thought": "", "calls": calls}).to_string()
    }
}

/// The reply that makes exactly the ground-truth calls of `case`, as a model writes it.
fn right_reply(case: &Case) -> String {
    reply_of(right_calls(case))
}

/// The other right replies BFCL accepts for `case`: the right reply with one argument of
/// one call at another of its possible values ("Leeds" or "leeds", `150` or `150.0`, a
/// date in another layout, an optional value given or left out), one reply per value. A
/// model that writes any of them is as right as one that writes the first.
fn other_forms(case: &Case) -> Vec<String> {
    let mut forms = Vec::new();
    for (index, truth) in case.ground_truth.iter().enumerate() {
        let Some((_, Value::Object(arguments))) = truth.as_object().and_then(|t| t.iter().next())
        else {
            continue;
        };
        for (name, options) in arguments {
            for option in options.as_array().into_iter().flatten().skip(1) {
                let mut calls = right_calls(case);
                match option {
                    Value::String(s) if s.is_empty() => calls[index].1.shift_remove(name),
                    _ => calls[index].1.insert(name.clone(), written(option)),
                };
                forms.push(reply_of(calls));
            }
        }
    }
    forms
}

/// The case run under `run` with a scripted model that replies `reply`, then answers.
fn play(case: &Case, reply: &str, run: &EvalSettings) -> super::CaseResult {
    let backend = SharedBackend::new(Box::new(Scripted::new([
        reply.to_string(),
        r#"{"kind": "final_answer", "thought": "", "content": "done"}"#.to_string(),
    ])));
    run_case(&backend, case, run)
}

/// Whether the call `reply` makes reaches the tool as BFCL's checker accepts it for
/// `case`, under `run`.
fn passes(case: &Case, reply: &str, run: &EvalSettings) -> bool {
    play(case, reply, run).pass
}

fn settings(config: &Config) -> EvalSettings {
    let mut config = config.clone();
    // Parallel cases carry several calls; the cap is BFCL's widest case.
    config.max_calls_per_turn = 8;
    EvalSettings {
        config,
        constraint: super::Constraint::Narrowed,
        native: None,
    }
}

/// The cases whose right call the loop did not pass through, each with BFCL's reason.
fn broken(cases: &[Case], config: &Config) -> Vec<(String, String)> {
    let run = settings(config);
    cases
        .iter()
        .filter(|c| !c.ground_truth.is_empty())
        .filter_map(|case| {
            let reply = right_reply(case);
            let r = play(case, &reply, &run);
            (!r.pass).then(|| {
                let why = r.reason.unwrap_or_default();
                let blame = blame(case, &reply, &run);
                (case.id.clone(), format!("{why} [{blame}]; played {reply}"))
            })
        })
        .collect()
}

/// The other forms of right calls ([`other_forms`]) that the loop with every check off
/// passes through and the loop under `config` does not: what the checks alone broke. A
/// form the bare loop refuses too is one the tool's own schema refuses (BFCL accepts
/// `"bronze"` where the schema's enum says `"Bronze"`, and `null` for an integer).
fn broken_forms(cases: &[Case], config: &Config) -> (usize, Vec<(String, String)>) {
    let run = settings(config);
    let mut bare = run.clone();
    bare.config.checks.set_all(false);
    let mut tried = 0;
    let mut broken = Vec::new();
    for case in cases.iter().filter(|c| !c.ground_truth.is_empty()) {
        for reply in other_forms(case) {
            tried += 1;
            if !passes(case, &reply, &run) && passes(case, &reply, &bare) {
                let blame = blame(case, &reply, &run);
                broken.push((case.id.clone(), format!("[{blame}]; played {reply}")));
            }
        }
    }
    (tried, broken)
}

/// The checks each of which, turned off alone, lets `reply` for `case` through.
fn blame(case: &Case, reply: &str, run: &EvalSettings) -> String {
    let mut names = Vec::new();
    for check in crate::checks::all() {
        let mut run = run.clone();
        let _ = run.config.checks.set(check.name, false);
        if passes(case, reply, &run) {
            names.push(check.name);
        }
    }
    if names.is_empty() {
        let mut run = run.clone();
        run.config.checks.set_all(false);
        let backend = SharedBackend::new(Box::new(Scripted::new([reply.to_string()])));
        if run_case(&backend, case, &run).pass {
            "several checks together".into()
        } else {
            "fails with every check off".into()
        }
    } else {
        names.join(", ")
    }
}

fn everyday() -> Vec<Case> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/everyday")).unwrap()
}

fn bfcl_dir() -> PathBuf {
    std::env::var_os("TOOLLOOP_BFCL").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            Path::new(&home).join(".cache/toolloop/bfcl")
        },
        PathBuf::from,
    )
}

/// BFCL's non-live categories that have a right call, fetched by `scripts/bfcl-data.sh`.
fn bfcl_with_answers() -> Vec<Case> {
    let dir = bfcl_dir();
    let mut cases = Vec::new();
    for category in ["simple_python", "multiple", "parallel", "parallel_multiple"] {
        cases.extend(load(&dir.join(format!("BFCL_v4_{category}.json"))).unwrap());
    }
    cases
}

fn report(broken: &[(String, String)], of: usize) -> String {
    let mut s = format!(
        "{} of {of} right calls did not reach the tool as written:\n",
        broken.len()
    );
    for (id, why) in broken {
        s.push_str(&format!("  {id}: {why}\n"));
    }
    s
}

/// BFCL cases whose listed right call fails the case's own function schema, so no loop
/// that validates a call can pass it on: the data's fault, not a check's.
const BFCL_EXCEPTIONS: [(&str, &str); 4] = [
    (
        "simple_python_200",
        "the answer leaves out fuel_efficiency, which the function requires",
    ),
    (
        "parallel_multiple_21",
        "x and y are the strings \"data['sales']\", the function takes arrays of floats",
    ),
    (
        "parallel_multiple_26",
        "the answer passes type, which the function does not have",
    ),
    (
        "parallel_multiple_94",
        "sort_list takes integers, the answer sorts fruit names",
    ),
];

/// Holds a set shipped in `tests/data` to the invariant, and to having at least `least`
/// cases with a right call (a set that lost its answers would pass with none).
fn holds_for(cases: &[Case], least: usize) {
    let with_truth = cases.iter().filter(|c| !c.ground_truth.is_empty()).count();
    assert!(with_truth >= least, "{with_truth}");
    let broken = broken(cases, &Config::default());
    assert!(broken.is_empty(), "{}", report(&broken, with_truth));
}

#[test]
fn every_right_call_of_the_everyday_set_reaches_the_tool_unchanged() {
    holds_for(&everyday(), 60);
}

#[test]
#[ignore = "needs BFCL data: run scripts/bfcl-data.sh (or set TOOLLOOP_BFCL)"]
fn every_right_call_of_bfcl_reaches_the_tool_unchanged() {
    let mut cases = bfcl_with_answers();
    cases.retain(|c| !BFCL_EXCEPTIONS.iter().any(|(id, _)| c.id == *id));
    assert_eq!(cases.len(), 1000 - BFCL_EXCEPTIONS.len());
    let broken = broken(&cases, &Config::default());
    assert!(broken.is_empty(), "{}", report(&broken, cases.len()));
}

fn languages() -> Vec<Case> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/languages")).unwrap()
}

/// Seven languages in six more scripts (Russian, Chinese, Korean, Polish, Turkish,
/// Hindi, Arabic) and tools of other domains, written after the sets above had been
/// tuned on: a set no rule was fitted to.
fn scripts() -> Vec<Case> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scripts")).unwrap()
}

/// Eight more languages (Italian, Portuguese, Dutch, Vietnamese, Indonesian, Greek,
/// Hebrew, Swedish), three more tools, and optional values said and unsaid: written
/// before any run of the prompt line about optional arguments it measures.
fn domains() -> Vec<Case> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/domains")).unwrap()
}

/// Seven languages again none of the sets above uses (English in other words, Czech,
/// Finnish, Thai, Swahili, Hungarian, Romanian) and three tools of errands (money, a
/// reminder, a pharmacy): written as a held-back set for the decision, before any run on
/// it.
fn errands() -> Vec<Case> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/errands")).unwrap()
}

/// Eight languages saying "today", "tomorrow" and "the day after tomorrow" to a
/// calendar, trains and flights, the days written out as of 2026-12-07: the dates a
/// right call carries are ones the person never wrote. Not among [`shipped_sets`]: a
/// person asked to approve such a call is told the date is not in what they wrote, and
/// rightly, since they wrote "tomorrow".
fn dates() -> Vec<Case> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dates")).unwrap()
}

#[test]
fn every_right_call_of_the_language_sets_reaches_the_tool_unchanged() {
    holds_for(&languages(), 45);
    holds_for(&scripts(), 21);
    holds_for(&domains(), 24);
    holds_for(&errands(), 21);
    holds_for(&dates(), 20);
}

/// A right call is right in every form BFCL accepts, not only the first one listed: a
/// check that rewrote `150.0` to `150`, a town's name as the request declines it
/// (`Brně` for Brno) or an optional value the person did give would break it as surely.
#[test]
fn every_accepted_form_of_a_right_call_of_the_shipped_sets_reaches_the_tool_unchanged() {
    let mut cases = everyday();
    for set in [languages(), scripts(), domains(), errands()] {
        cases.extend(set);
    }
    let (tried, broken) = broken_forms(&cases, &Config::default());
    assert!(tried >= 200, "{tried}");
    assert!(broken.is_empty(), "{}", report(&broken, tried));
}

#[test]
#[ignore = "needs BFCL data: run scripts/bfcl-data.sh (or set TOOLLOOP_BFCL)"]
fn every_accepted_form_of_a_right_call_of_bfcl_reaches_the_tool_unchanged() {
    let (tried, broken) = broken_forms(&bfcl_with_answers(), &Config::default());
    assert!(tried >= 1500, "{tried}");
    assert!(broken.is_empty(), "{}", report(&broken, tried));
}

/// `tool-fit` puts a call that carries a required value nobody said to the fit
/// question, where a right call can be lost at the bar's edge. A right call in another
/// language carries the request's names as the request writes them ("上海" inside
/// "从上海到北京", "Kraków" for "z Krakowa") or as the model writes them out in another
/// script ("Moscow" for "из Москвы"): neither is a value nobody said.
///
/// One is known to be missed, and left: a name whose ending changes inside its stem
/// ("v Brně" for Brno). Matching it would take a rule that calls any word with the same
/// first letters said; such a call is put to the fit question, and the model's answer
/// decides, only where its tool also shares a word with the request.
/// What the checks take the person to have said in `case`: its words and its numbers,
/// spelled out ones too.
fn heard(case: &Case) -> crate::checks::Evidence {
    let mut said = crate::checks::Evidence::of([case.question.as_str()]);
    said.spelled(&case.question);
    said
}

#[test]
fn the_values_of_a_right_call_count_as_said_in_every_script() {
    const MISSED: [&str; 1] = ["errands_cs_5"];
    let mut wrong = Vec::new();
    for case in languages()
        .iter()
        .chain(&scripts())
        .chain(&domains())
        .chain(&errands())
    {
        let said = heard(case);
        for (tool, call) in right_calls(case) {
            let spec = case.tools.iter().find(|s| s.name == *tool).unwrap();
            let unsaid = crate::checks::invented_required(&call, &spec.input_schema, &said);
            match (unsaid.is_empty(), MISSED.contains(&case.id.as_str())) {
                (false, false) => wrong.push(format!("{}: {unsaid:?} of {call:?} unsaid", case.id)),
                (true, true) => wrong.push(format!(
                    "{}: {call:?} now counts as said: take it off MISSED",
                    case.id
                )),
                _ => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The checks that decide stand aside above (no probabilities), but two of them read
/// the request's numbers: `tool-fit` puts a call with a value nobody said to the fit
/// question, and `numbers-left` asks a call that left a number out again. A right call
/// written from a number as its language writes it ("19,99 €", "1.500", "１２０ドル")
/// must give neither a reason. (The everyday set also says values in words, "a quarter
/// of an hour" for 15, which no reading of digits finds.)
#[test]
fn the_numbers_of_a_right_call_count_as_said_in_every_language() {
    let mut wrong = Vec::new();
    for case in &languages() {
        let Some(Value::Object(call)) = serde_json::from_str::<Value>(&right_reply(case))
            .ok()
            .filter(|r| r["kind"] == "tool_call")
            .map(|r| r["arguments"].clone())
        else {
            continue;
        };
        let said = crate::checks::Evidence::of([case.question.as_str()]);
        for (name, v) in &call {
            let number = v.is_number()
                || v.as_str()
                    .is_some_and(|s| s.chars().any(|c| c.is_ascii_digit()));
            if number && !said.grounds(v) {
                wrong.push(format!("{}: {name} = {v} not said", case.id));
            }
        }
        let tool = case.ground_truth[0]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap();
        let left = crate::checks::numbers_left_out(&case.question, &[(tool.clone(), call)]);
        if !left.is_empty() {
            wrong.push(format!("{}: {left:?} left out", case.id));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `unsure-optional` (off by default) leaves out an optional value the model hesitated
/// over only when the request does not hold it. The scripted model above gives no
/// probabilities, so it never acts there; this is the worst case instead, a model that
/// hesitated at every key: the right calls' optional values it could then leave out.
/// Three of the shipped sets' 32 are said in a way the request's reading does not hold:
/// "budget" for `price: "cheap"`, and seat counts in words of languages the number
/// reading lacks ("dua", "fyra"). Qwen wrote those three keys at 0.93 or above, over the
/// bar, so they ran unchanged; a hesitant model would lose them, which is why the check is
/// opt-in.
#[test]
fn a_right_calls_optional_values_are_held_by_the_request_but_for_those_said_in_other_words() {
    let mut exposed = Vec::new();
    let mut optional = 0;
    for case in everyday()
        .iter()
        .chain(&languages())
        .chain(&scripts())
        .chain(&domains())
        .chain(&errands())
    {
        let said = heard(case);
        for (tool, call) in right_calls(case) {
            let spec = case.tools.iter().find(|s| s.name == *tool).unwrap();
            let required = &spec.input_schema["required"];
            for (name, value) in &call {
                let is_required = required
                    .as_array()
                    .is_some_and(|r| r.iter().any(|n| n == name));
                if is_required || *value == Value::String(String::new()) {
                    continue;
                }
                optional += 1;
                if !said.grounds(value) {
                    exposed.push(format!("{} {name}={value}", case.id));
                }
            }
        }
    }
    assert_eq!(optional, 32);
    assert_eq!(
        exposed,
        [
            "everyday_simple_22 price=\"cheap\"",
            "domains_id_13 seats=2",
            "domains_sv_22 seats=4"
        ]
    );
}

/// Every set shipped in `tests/data` with right calls: everyday, the language sets, the
/// held-back ones and the writes.
fn shipped_sets() -> Vec<Case> {
    let mut cases = everyday();
    let writes = load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/writes")).unwrap();
    for set in [languages(), scripts(), domains(), errands(), writes] {
        cases.extend(set);
    }
    cases
}

/// Of the right calls in `cases`, how many a person asked to approve them would be shown
/// a value as not in what they wrote ([`crate::Unsaid`]), and of how many.
fn named_right_calls(cases: &[Case]) -> (usize, usize) {
    let (mut named, mut calls) = (0, 0);
    for case in cases {
        let history = [crate::Message::user(case.question.clone())];
        for (tool, args) in right_calls(case) {
            let Some(spec) = case.tools.iter().find(|s| &s.name == tool) else {
                continue;
            };
            calls += 1;
            named += usize::from(!crate::Unsaid::of(spec, &args, &history).is_empty());
        }
    }
    (named, calls)
}

/// A right call's values are named as not written only where they were said another way
/// ("full brightness" for 100, "a quarter of an hour" for 15): at most one right call in
/// ten, so that the names beside a call stay worth reading.
#[test]
fn few_right_calls_of_the_shipped_sets_are_shown_a_value_nobody_wrote() {
    let cases = shipped_sets();
    let (named, calls) = named_right_calls(&cases);
    assert!(calls >= 190, "{calls}");
    assert!(named * 10 <= calls, "{named} of {calls} right calls");
}

#[test]
#[ignore = "needs BFCL data: run scripts/bfcl-data.sh (or set TOOLLOOP_BFCL)"]
fn few_right_calls_of_bfcl_are_shown_a_value_nobody_wrote() {
    let (named, calls) = named_right_calls(&bfcl_with_answers());
    assert!(calls >= 1700, "{calls}");
    assert!(named * 10 <= calls, "{named} of {calls} right calls");
}

/// The right calls of `cases` that carry a required value that is its description's
/// example, which the request does not hold ([`crate::checks::example_copy::described_copies`]):
/// what `guessed-tool` would decline where the model also barely named the tool.
fn copied_examples(cases: &[Case]) -> (Vec<String>, usize) {
    let (mut found, mut calls) = (Vec::new(), 0);
    for case in cases {
        let said = heard(case);
        let right: Vec<(String, Map<String, Value>)> = right_calls(case)
            .into_iter()
            .map(|(t, a)| (t.clone(), a))
            .collect();
        calls += right.len();
        for (tool, example) in
            crate::checks::example_copy::described_copies(&case.tools, &right, &said)
        {
            found.push(format!("{}: {tool} ({example})", case.id));
        }
    }
    (found, calls)
}

/// A right call carries what the person said; where that is the tool's own example, the
/// person said it (`"USD"` for "US dollars", `"New York City, NY"` for "New York"), so
/// no right call counts as a copy of its description's example.
#[test]
fn no_right_call_of_the_shipped_sets_copies_its_descriptions_example() {
    let cases = shipped_sets();
    let (found, calls) = copied_examples(&cases);
    assert!(calls >= 190, "{calls}");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
#[ignore = "needs BFCL data: run scripts/bfcl-data.sh (or set TOOLLOOP_BFCL)"]
fn no_right_call_of_bfcl_copies_its_descriptions_example() {
    let (found, calls) = copied_examples(&bfcl_with_answers());
    assert!(calls >= 1700, "{calls}");
    assert!(found.is_empty(), "{}", found.join("\n"));
}
