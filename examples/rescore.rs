//! Rescores recorded `toolloop eval --json` reports with today's rules, with no model.
//!
//! A change to what toolloop does *after* the model's first reply (declining a call,
//! rewriting a date, grounding arguments) can be measured on replies already recorded:
//! each case's first reply is judged again by today's checks (`toolloop::checks`) with
//! the recorded p(tool), as the engine judges a reply, and the resulting call scored. A run of all 840
//! cases of three BFCL files takes most of an hour against the model; this takes a
//! second. Cases whose recorded run took more than one reply (a declined call asked
//! again, say) are kept as recorded: what the model would have written the second time
//! cannot be replayed. `BENCHMARKS.md` says which figures come from here.
//!
//!     cargo run --release --example rescore -- ~/.cache/toolloop/bfcl target/eval/*.json

use std::path::Path;

use serde_json::Value;
use toolloop::checks::{Checks, Evidence, TurnContext, Verdict};
use toolloop::eval::{Call, Case, load, score_calls};
use toolloop::message::{ChatReply, TokenLogprob};
use toolloop::turn::Turn;

/// The recorded reply as a server gives it: the text, and at the token where the kind
/// begins, the recorded share of probability for a call against an answer.
fn reply_of(text: &str, p_tool: f64) -> ChatReply {
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
    ChatReply {
        text: text.into(),
        logprobs: vec![
            tok(head, 0.0, vec![]),
            tok(
                rest,
                p.ln(),
                vec![
                    (rest.into(), p.ln()),
                    ("final_answer".into(), (1.0 - p).ln()),
                ],
            ),
        ],
        ..ChatReply::default()
    }
}

/// The calls today's checks make from a recorded first reply.
fn replayed(case: &Case, text: &str, p_tool: f64, checks: &Checks) -> Vec<Call> {
    let Ok(parsed) = Turn::parse(text) else {
        return Vec::new();
    };
    let Turn::ToolCall {
        tool, arguments, ..
    } = parsed.turn
    else {
        return Vec::new();
    };
    let said = Evidence::of([case.question.as_str()]);
    let reply = reply_of(text, p_tool);
    let ctx = TurnContext {
        question: &case.question,
        said: &said,
        specs: &case.tools,
        reply: &reply,
        threshold: toolloop::Config::default().threshold(),
    };
    let mut calls = vec![(tool, arguments)];
    match checks.judge(&ctx, &mut calls, true).1 {
        Verdict::Go => calls
            .into_iter()
            .map(|(name, arguments)| Call { name, arguments })
            .collect(),
        _ => Vec::new(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((data, reports)) = args.split_first() else {
        eprintln!("usage: rescore BFCL_DIR REPORT.json...");
        std::process::exit(2);
    };
    let checks = Checks::default();
    for report in reports {
        let r: Value = serde_json::from_str(&std::fs::read_to_string(report)?)?;
        let recorded = r["cases"].as_array().cloned().unwrap_or_default();
        let Some(category) = recorded.first().and_then(|c| c["category"].as_str()) else {
            continue;
        };
        let cases = load(&Path::new(data).join(format!("BFCL_v4_{category}.json")))?;
        let (mut was, mut now) = (0, 0);
        for c in &recorded {
            let Some(case) = cases.iter().find(|k| c["id"] == k.id.as_str()) else {
                continue;
            };
            let texts: Vec<&str> = c["texts"]
                .as_array()
                .map(|t| t.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let before = c["pass"].as_bool().unwrap_or(false);
            let after = match texts.as_slice() {
                [text] => {
                    let p_tool = c["p_tool"].as_f64().unwrap_or(1.0);
                    let calls = replayed(case, text, p_tool, &checks);
                    score_calls(category, &calls, &case.functions, &case.ground_truth).is_ok()
                }
                _ => before,
            };
            was += usize::from(before);
            now += usize::from(after);
            if after != before {
                let verdict = if after { "now passes" } else { "now fails" };
                println!("  {}: {verdict}: {}", case.id, texts.first().unwrap_or(&""));
            }
        }
        println!("{report}: {was} -> {now} of {}", recorded.len());
    }
    Ok(())
}
