//! The repair corpus: inputs that small models really produce, each with the value it must
//! come back as (`tests/data/repair_corpus.jsonl`, one case a line). `mode: "value"` cases
//! go through `repair`, `mode: "turn"` cases through `Turn::parse`.

use serde_json::Value;
use toolloop::turn::Turn;
use toolloop::turn::repair::{repair, repair_to_string};

fn cases() -> Vec<Value> {
    include_str!("data/repair_corpus.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("corpus line is JSON"))
        .collect()
}

#[test]
fn corpus_is_large_and_covers_every_failure_mode() {
    let cases = cases();
    assert!(cases.len() >= 200, "only {} cases", cases.len());
    let bullets: std::collections::BTreeSet<&str> =
        cases.iter().filter_map(|c| c["bullet"].as_str()).collect();
    for b in [
        "valid",
        "fence",
        "prose",
        "template",
        "truncation",
        "closers",
        "extra_closers",
        "single_quotes",
        "smart_quotes",
        "unquoted_keys",
        "commas",
        "comments",
        "python",
        "nonfinite",
        "control",
        "inner_quotes",
        "encoded_arguments",
        "several_objects",
        "flat_form",
        "nothing",
        "deep",
    ] {
        assert!(bullets.contains(b), "no case for {b}");
    }
}

#[test]
fn every_corpus_case_repairs_to_its_expected_value() {
    let mut failures = Vec::new();
    for (line, case) in cases().iter().enumerate() {
        let input = case["input"].as_str().unwrap();
        let label = format!("line {} ({}): {input:?}", line + 1, case["bullet"]);
        if case["mode"] == "turn" {
            match Turn::parse(input) {
                Ok(p) if p.turn.to_value() == case["expected"] => {}
                Ok(p) => failures.push(format!("{label}\n   got {}", p.turn.to_value())),
                Err(e) => failures.push(format!("{label}\n   error {e}")),
            }
            continue;
        }
        if case["error"] == true {
            if let Ok(r) = repair(input) {
                failures.push(format!("{label}\n   expected an error, got {}", r.value));
            }
            if repair_to_string(input).is_ok() {
                failures.push(format!("{label}\n   repair_to_string did not fail"));
            }
            continue;
        }
        match repair(input) {
            Ok(r) if r.value == case["expected"] => {}
            Ok(r) => failures.push(format!("{label}\n   got {}", r.value)),
            Err(e) => failures.push(format!("{label}\n   error {e}")),
        }
        // The text form must say the same thing.
        match repair_to_string(input) {
            Ok((text, _)) => match serde_json::from_str::<Value>(&text) {
                Ok(v) if v == case["expected"] => {}
                other => failures.push(format!("{label}\n   text form {text:?} -> {other:?}")),
            },
            Err(e) => failures.push(format!("{label}\n   text form error {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
