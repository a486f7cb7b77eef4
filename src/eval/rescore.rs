//! Recorded `toolloop eval --json` reports judged again under today's checks, with no
//! model (`toolloop eval DATA --rescore REPORT.json`).
//!
//! A change to what toolloop does *after* the model's first reply (declining a call,
//! rewriting a date, grounding arguments) can be measured on replies already recorded:
//! each case's first reply is judged again by the checks with the recorded p(tool), as the
//! engine judges a reply, and the resulting calls scored. A run of all 840 cases of three
//! BFCL files takes most of an hour against the model; this takes a second. What the
//! model would have written when asked again cannot be replayed: a case whose first
//! reply is stopped now and was stopped then too keeps its recorded result, and one
//! stopped only now counts as making no call (the model, asked again, might have). A
//! list of calls asked again for one more (`more-calls`) is judged with its recorded
//! share for one more, so it is stopped now as it was then.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::{Call, Case, load, score_calls};
use crate::calibration::Thresholds;
use crate::checks::{CheckLevels, Checks, Evidence, TurnContext, Verdict};
use crate::message::{ChatReply, TokenLogprob};
use crate::turn::Turn;

/// What a run recorded of a case's first reply (`toolloop eval --json`): the shares of
/// probability the checks read, and the answer to the fit question when it was asked.
#[derive(Clone, Copy)]
struct Recorded<'a> {
    p_tool: f64,
    p_more: Option<f64>,
    /// `p_name`, and the likeliest name no tool has.
    name: Option<(f64, &'a str)>,
    fit: Option<f64>,
}

/// The recorded reply as a server gives it: the text, and at the token where the kind
/// begins, the recorded share of probability for a call against an answer; where the
/// first call's tool name begins, the recorded share for the names on offer (`name`:
/// `p_name`, and the likeliest name no tool has); where the list of calls closes, the
/// recorded share for one more call, when there is one (without it a list the run asked
/// again for more was judged as it first came, and its case reported as failing now;
/// without the name's share, `tool-fit` left out the calibrated weight for it, and calls
/// the run declined on it were let through).
fn reply_of(text: &str, recorded: &Recorded<'_>) -> ChatReply {
    let Recorded {
        p_tool,
        p_more,
        name,
        ..
    } = *recorded;
    let at = text
        .find("_call")
        .map_or(0, |i| i.saturating_sub("tool".len()));
    let (head, rest) = text.split_at(at);
    let p = p_tool.clamp(1e-9, 1.0 - 1e-9);
    let tok = |token: &str, logprob: f64, top| TokenLogprob {
        token: token.into(),
        logprob,
        top,
    };
    let close = crate::checks::calls_array_end(text)
        .filter(|&end| end > at + "tool_calls".len())
        .zip(p_more);
    let (rest, tail) = match close {
        Some((end, _)) => rest.split_at(end - at),
        None => (rest, ""),
    };
    let named = crate::checks::value_offset(text, "tool")
        .filter(|&i| i > at && i < at + rest.len())
        .zip(name);
    let (kind, called) = match named {
        Some((i, _)) => rest.split_at(i - at),
        None => (rest, ""),
    };
    let mut logprobs = vec![
        tok(head, 0.0, vec![]),
        tok(
            kind,
            p.ln(),
            vec![
                (kind.into(), p.ln()),
                ("final_answer".into(), (1.0 - p).ln()),
            ],
        ),
    ];
    if let Some((_, (p_name, leaning))) = named {
        let p_name = p_name.clamp(1e-12, 1.0 - 1e-12);
        logprobs.push(tok(
            called,
            p_name.ln(),
            vec![
                (called.into(), p_name.ln()),
                (format!("{leaning}\""), (1.0 - p_name).ln()),
            ],
        ));
    }
    if let Some((_, more)) = close {
        let more = more.clamp(1e-12, 1.0 - 1e-12);
        logprobs.push(tok(
            tail,
            (1.0 - more).ln(),
            vec![(tail.into(), (1.0 - more).ln()), (",".into(), more.ln())],
        ));
    }
    ChatReply {
        text: text.into(),
        logprobs,
        ..ChatReply::default()
    }
}

/// What today's checks make of a recorded first reply.
enum Replay {
    /// The reply was not a turn: what followed cannot be replayed.
    Unreadable,
    /// An answer or a question: no call.
    NoCall,
    /// The checks let these calls go.
    Calls(Vec<Call>),
    /// The checks declined the call or turned it into a question.
    Stopped,
}

/// The calls today's checks make from a recorded first reply.
fn replayed(
    case: &Case,
    text: &str,
    recorded: &Recorded<'_>,
    checks: &Checks,
    thresholds: Option<&Thresholds>,
) -> Replay {
    let Ok(parsed) = Turn::parse(text) else {
        return Replay::Unreadable;
    };
    let calls = match parsed.turn {
        Turn::ToolCall {
            tool, arguments, ..
        } => vec![(tool, arguments)],
        Turn::ToolCalls { calls, .. } => calls.into_iter().map(|c| (c.tool, c.arguments)).collect(),
        _ => return Replay::NoCall,
    };
    let said = Evidence::of([case.question.as_str()]);
    let reply = reply_of(text, recorded);
    let unsaid = crate::checks::unsaid(&case.tools, &calls, &said);
    let own_numbers = crate::checks::own_numbers(&calls, &said);
    let examples = crate::checks::example_copy::described_copies(&case.tools, &calls, &said);
    let left = crate::checks::numbers_left_out(&case.question, &calls);
    // The tools' classes as the run read them.
    let writes: Vec<String> = super::run_specs(case)
        .into_iter()
        .filter(|s| s.class().0.effect != crate::tools::Effect::ReadOnly)
        .map(|s| s.name)
        .collect();
    let ctx = TurnContext {
        question: &case.question,
        said: &said,
        specs: &case.tools,
        reply: &reply,
        thresholds,
        // A recorded fit is the score already.
        fit: recorded
            .fit
            .map(|yes| crate::checks::Fit { yes, base: None }),
        fit_tool: None,
        person: &[],
        earlier: &[],
        unsaid: &unsaid,
        own_numbers: &own_numbers,
        examples: &examples,
        // A recorded first turn: nothing was asked again.
        again: false,
        offered_by_words: false,
        leaned: false,
        added_from: None,
        left: &left,
        writes: &writes,
    };
    match checks.judge(&ctx, &calls, true).1 {
        Verdict::Go => Replay::Calls(
            calls
                .into_iter()
                .map(|(name, arguments)| Call { name, arguments })
                .collect(),
        ),
        _ => Replay::Stopped,
    }
}

/// Judges every case of `report` (the JSON of `toolloop eval --json`) again with the
/// checks `levels` leave on, against the BFCL files in `data`. Returns one line per case
/// whose result changed and a last line `REPORT: was -> now of N`.
pub(crate) fn rescore(
    data: &Path,
    report: &Path,
    levels: &CheckLevels,
    thresholds: Option<&Thresholds>,
) -> Result<String, String> {
    let text = std::fs::read_to_string(report).map_err(|e| format!("{}: {e}", report.display()))?;
    let r: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not an eval report: {e}", report.display()))?;
    let recorded = r["cases"].as_array().cloned().unwrap_or_default();
    let mut out = String::new();
    // A report of a folder holds several categories, each from a file of its own.
    let mut categories: Vec<&str> = recorded
        .iter()
        .filter_map(|c| c["category"].as_str())
        .collect();
    categories.dedup();
    if categories.is_empty() {
        let _ = writeln!(out, "{}: no cases", report.display());
        return Ok(out);
    }
    let mut cases = Vec::new();
    let mut files = Vec::new();
    for category in &categories {
        let file = if data.is_dir() {
            data.join(format!("BFCL_v4_{category}.json"))
        } else {
            data.to_path_buf()
        };
        if !files.contains(&file) {
            cases.extend(load(&file).map_err(|e| e.to_string())?);
            files.push(file);
        }
    }
    let checks = Checks::new(levels);
    let (mut was, mut now) = (0, 0);
    // Per half: tuning, then validation (`super::half`).
    let mut halves = [(0, 0, 0); 2];
    for c in &recorded {
        let Some(case) = cases.iter().find(|k| c["id"] == k.id.as_str()) else {
            continue;
        };
        let texts: Vec<&str> = c["texts"]
            .as_array()
            .map(|t| t.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let before = c["pass"].as_bool().unwrap_or(false);
        // Where the model's probability at the name went elsewhere, what it reached for;
        // a name no tool begins with stands in when none was recorded.
        let leaning = c["name_leaning"]["name"].as_str().unwrap_or("\u{0}");
        let recorded = Recorded {
            p_tool: c["p_tool"].as_f64().unwrap_or(1.0),
            p_more: c["p_more"].as_f64(),
            name: c["p_name"].as_f64().map(|p| (p, leaning)),
            // A fit question the run did not ask was not recorded: the check stands aside.
            fit: c["fit"].as_f64(),
        };
        let score = |calls: &[Call]| {
            score_calls(&case.category, calls, &case.functions, &case.ground_truth).is_ok()
        };
        let after = match texts
            .first()
            .map(|t| replayed(case, t, &recorded, &checks, thresholds))
        {
            Some(Replay::Calls(calls)) => score(&calls),
            // What the model wrote when asked again was recorded only if it was asked
            // then too; a call stopped only now counts as no call.
            Some(Replay::Stopped) if texts.len() > 1 => before,
            Some(Replay::Stopped) => score(&[]),
            Some(Replay::NoCall) if texts.len() == 1 => score(&[]),
            _ => before,
        };
        was += usize::from(before);
        now += usize::from(after);
        let h = &mut halves[usize::from(super::half(&case.id) == super::Half::Validation)];
        *h = (h.0 + usize::from(before), h.1 + usize::from(after), h.2 + 1);
        if after != before {
            let verdict = if after { "now passes" } else { "now fails" };
            let first = texts.first().unwrap_or(&"");
            let _ = writeln!(out, "  {}: {verdict}: {first}", case.id);
        }
    }
    if halves[0].2 + halves[1].2 == 0 {
        return Err(format!(
            "none of the {} cases of {} is in {}: give the data the report was run on",
            recorded.len(),
            report.display(),
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let [t, v] = halves;
    let _ = writeln!(
        out,
        "{}: {was} -> {now} of {} (tuning {} -> {} of {}, validation {} -> {} of {})",
        report.display(),
        recorded.len(),
        t.0,
        t.1,
        t.2,
        v.0,
        v.1,
        v.2
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A report of one everyday case, its first reply and whether the run passed it.
    fn report(texts: &[&str], p_more: f64, pass: bool) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "toolloop-rescore-{}-{p_more}-{pass}.json",
            std::process::id()
        ));
        let r = json!({"cases": [{
            "id": "everyday_parallel_0", "category": "everyday_parallel", "pass": pass,
            "texts": texts, "p_tool": 0.99, "p_more": p_more,
        }]});
        std::fs::write(&path, r.to_string()).unwrap();
        path
    }

    const ONE: &str = r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}]}"#;
    const TWO: &str = r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}, {"tool": "get_weather", "arguments": {"city": "Rome"}}]}"#;

    fn rescored(texts: &[&str], p_more: f64, pass: bool) -> String {
        let data = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/everyday/BFCL_v4_everyday_parallel.json");
        let path = report(texts, p_more, pass);
        let out = rescore(&data, &path, &CheckLevels::default(), None).unwrap();
        let _ = std::fs::remove_file(path);
        out
    }

    #[test]
    fn a_list_the_run_asked_again_for_more_keeps_its_recorded_result() {
        // The run asked the one-call list again (p_more above the bar) and passed on the
        // list that came back; today's checks would ask again too.
        let out = rescored(&[ONE, TWO], 0.01, true);
        assert!(
            out.ends_with("1 -> 1 of 1 (tuning 1 -> 1 of 1, validation 0 -> 0 of 0)\n"),
            "{out}"
        );
        // A list closed with no weight on one more is judged as it came: one call of two.
        let out = rescored(&[ONE], 0.0, false);
        assert!(out.contains("0 -> 0 of 1"), "{out}");
    }

    /// A call the run declined because the model's probability at its tool's name went
    /// elsewhere is declined when judged again: the recorded `p_name` is read with the
    /// calibrated weight for it. Before, the replayed reply carried no name and the call
    /// was let through, so every such case read as failing now.
    #[test]
    fn a_call_declined_on_its_name_stays_declined() {
        let path =
            std::env::temp_dir().join(format!("toolloop-rescore-name-{}.json", std::process::id()));
        // Not the description's own example ("e.g. Paris"), which `example-copy` declines
        // whatever the name's share.
        let call = r#"{"kind": "tool_call", "thought": "", "tool": "get_weather", "arguments": {"city": "Berlin"}}"#;
        let case = |p_name: f64| {
            json!({"id": "everyday_irrelevance_0", "category": "everyday_irrelevance",
                   "pass": true, "texts": [call], "p_tool": 0.95, "fit": 0.44,
                   "p_name": p_name, "name_leaning": {"name": "thanks", "p": 0.5}})
        };
        let t = Thresholds {
            p_min: 0.0,
            p_sure: 0.99,
            fit_min: 0.43,
            name_weight: 0.1,
            fit_against_leaning: true,
            ..Thresholds::default()
        };
        let data = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/everyday/BFCL_v4_everyday_irrelevance.json");
        let judged = |p_name: f64| {
            std::fs::write(&path, json!({"cases": [case(p_name)]}).to_string()).unwrap();
            rescore(&data, &path, &CheckLevels::default(), Some(&t)).unwrap()
        };
        // The name's share 0.05, 0.15 short of sure: 0.44 - 0.015 < 0.43, declined.
        let low = judged(0.05);
        // The model chose the name: 0.44 stands, and the needless call goes.
        let sure = judged(0.9);
        let _ = std::fs::remove_file(&path);
        assert!(
            low.ends_with("1 -> 1 of 1 (tuning 1 -> 1 of 1, validation 0 -> 0 of 0)\n"),
            "{low}"
        );
        assert!(sure.contains("everyday_irrelevance_0: now fails"), "{sure}");
    }

    /// A call to a tool whose hints say it writes is judged at the bar the run held it
    /// to: `git_commit` at a fit of 0.43 was declined, and stays so. Read as a tool that
    /// only reads, it passed the read bar and "now passed".
    #[test]
    fn a_call_that_writes_is_judged_at_the_bar_for_writes() {
        let path = std::env::temp_dir().join(format!(
            "toolloop-rescore-writes-{}.json",
            std::process::id()
        ));
        let call = r#"{"kind": "tool_call", "thought": "", "tool": "git_commit", "arguments": {"message": "fix typo in README"}}"#;
        let report = json!({"cases": [{"id": "writes_1", "category": "writes", "pass": false,
            "texts": [call], "p_tool": 0.9999, "fit": 0.43}]});
        std::fs::write(&path, report.to_string()).unwrap();
        let data =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/writes/BFCL_v4_writes.json");
        let out = rescore(
            &data,
            &path,
            &CheckLevels::default(),
            Some(&Thresholds::default()),
        );
        let _ = std::fs::remove_file(&path);
        let out = out.unwrap();
        assert!(
            out.ends_with("0 -> 0 of 1 (tuning 0 -> 0 of 0, validation 0 -> 0 of 1)\n"),
            "{out}"
        );
    }

    /// A report of a folder holds several categories: each case is judged against its
    /// own file. Before, only the first category's cases were found and the rest were
    /// left out of the figures without a word.
    #[test]
    fn every_category_of_a_folders_report_is_judged() {
        let path =
            std::env::temp_dir().join(format!("toolloop-rescore-two-{}.json", std::process::id()));
        let copied = r#"{"kind": "tool_call", "thought": "", "tool": "calculator", "arguments": {"expression": "12.5 * 4"}}"#;
        let r = json!({"cases": [
            {"id": "everyday_parallel_0", "category": "everyday_parallel", "pass": false,
             "texts": [ONE], "p_tool": 0.99, "p_more": 0.0},
            {"id": "everyday_irrelevance_0", "category": "everyday_irrelevance", "pass": false,
             "texts": [copied], "p_tool": 0.99},
        ]});
        std::fs::write(&path, r.to_string()).unwrap();
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/everyday");
        let out = rescore(&data, &path, &CheckLevels::default(), None).unwrap();
        let _ = std::fs::remove_file(path);
        // "Thanks, that's all for now!" answered with the prompt's example call: declined
        // by `example-copy`, so no call, which is right for a request that needs none.
        assert!(out.contains("everyday_irrelevance_0: now passes"), "{out}");
        assert!(
            out.ends_with("0 -> 1 of 2 (tuning 0 -> 1 of 2, validation 0 -> 0 of 0)\n"),
            "{out}"
        );
    }
}
