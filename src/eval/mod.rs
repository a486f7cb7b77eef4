//! `toolloop eval`: a tool-calling dataset in the Berkeley Function Calling Leaderboard
//! (BFCL) format ([`crate::eval::bfcl`]), run through the real loop and scored with BFCL's AST
//! rules.
//!
//! The functions are described to the model but never executed: the first `tool_call` is
//! the prediction, and a `final_answer` or `clarify` means "no call". The engine
//! ([`crate::run::engine`]) is driven directly, so everything the loop does to a turn — repair,
//! validation, feedback on an invalid reply — happens exactly as in a real run.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::backend::{Backend, BackendError, ChatRequest, GenOptions, Message};
pub mod bfcl;
use crate::config::Limits;
use crate::deadline::Deadline;
use crate::run::engine::{Engine, Step};
use crate::run::events::Event;
use crate::turn::prompt::system_prompt;
use crate::turn::schema::{Decide, Narrowing};
pub use bfcl::{Call, Case, EvalError, load, normalize, score, score_calls, to_json_schema};

/// How much of the schema is sent with each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Constraint {
    /// One `tool_call` variant per function with its own parameters (toolloop's default).
    #[default]
    Narrowed,
    /// No schema at all: the model writes free text; the repairer and the loop's
    /// validation are all that is left.
    Off,
}

/// The result of one case.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// The category.
    pub category: String,
    /// Whether it passed.
    pub pass: bool,
    /// Why it failed.
    pub reason: Option<String>,
    /// The prediction: the first call made.
    pub call: Option<Call>,
    /// Every call of the turn that made it (several for `parallel` cases).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Call>,
    /// Model replies that were rejected as invalid.
    pub invalid_turns: u32,
    /// Model replies in all.
    pub replies: u32,
    /// Model turns used.
    pub iterations: u32,
    /// Milliseconds the case took.
    pub ms: u64,
    /// Tokens the model generated for the case, over all its replies.
    #[serde(default)]
    pub tokens: u64,
    /// A backend failure, if the case could not run.
    pub error: Option<String>,
    /// The model's replies, as it wrote them.
    #[serde(default)]
    pub texts: Vec<String>,
    /// The model's share of probability for its first tool call, where it was read.
    #[serde(default)]
    pub p_tool: Option<f64>,
}

/// Counts the invalid replies among `events` and keeps the first tool-call probability.
fn tally(events: Vec<Event>, invalid: &mut u32, p_tool: &mut Option<f64>) {
    for e in events {
        match e {
            Event::Invalid { .. } => *invalid += 1,
            Event::Decision { p_tool: p, .. } => {
                p_tool.get_or_insert(p);
            }
            _ => {}
        }
    }
}

/// Runs `cases` on one thread per backend, each case on whichever backend is free (a
/// server with that many slots answers them in parallel). `done` sees each result as it
/// arrives; the results come back in the order of `cases`.
pub fn run_all(
    backends: Vec<Box<dyn Backend>>,
    cases: &[Case],
    run: &RunSettings,
    mut done: impl FnMut(&CaseResult),
) -> Vec<CaseResult> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut results: Vec<Option<CaseResult>> = vec![None; cases.len()];
    std::thread::scope(|scope| {
        for mut b in backends {
            let (tx, next) = (tx.clone(), &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    let r = run_case(b.as_mut(), case, run);
                    if tx.send((i, r)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            done(&r);
            results[i] = Some(r);
        }
    });
    results.into_iter().flatten().collect()
}

/// An OpenAI-compatible server asked with its own tool calling, for the baseline a
/// person has without toolloop ([`native_case`]).
#[derive(Debug, Clone)]
pub struct NativeTarget {
    /// The base URL, ending in `/v1`.
    pub base_url: String,
    /// The model name sent.
    pub model: String,
}

/// How each case of an eval runs.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Ask the server with its native tool calling instead of through the loop.
    pub native: Option<NativeTarget>,
    /// The most tool calls one turn may carry.
    pub max_calls_per_turn: u32,
    /// Generation options.
    pub options: GenOptions,
    /// How much of the schema is sent.
    pub constraint: Constraint,
    /// The time limit of one case.
    pub timeout: Duration,
    /// How the model decides between a tool and an answer.
    pub decide: Decide,
    /// Leave out optional arguments the person never gave.
    pub ground_arguments: bool,
    /// Under [`Decide::Probability`], decline calls below this share.
    pub tool_threshold: f64,
}

/// Runs one case through the loop.
pub fn run_case(backend: &mut dyn Backend, case: &Case, run: &RunSettings) -> CaseResult {
    if let Some(target) = &run.native {
        return native_case(target, case, run);
    }
    let (options, constraint) = (&run.options, run.constraint);
    let started = Instant::now();
    let deadline = Deadline::after(run.timeout);
    let limits = Limits {
        max_iterations: 3,
        num_ctx: options.num_ctx,
        narrowing: Narrowing::PerTool,
        decide: run.decide,
        ground_arguments: run.ground_arguments,
        tool_threshold: (run.decide == Decide::Probability).then_some(run.tool_threshold),
        max_calls_per_turn: run.max_calls_per_turn,
        ..Limits::default()
    };
    let prompt = system_prompt(&case.tools, None, run.decide, limits.max_calls_per_turn);
    let mut engine = Engine::new(
        vec![Message::system(prompt)],
        &case.question,
        case.tools.clone(),
        limits,
    );
    let mut calls: Vec<Call> = Vec::new();
    let mut invalid = 0;
    let mut replies = 0;
    let mut texts = Vec::new();
    let mut p_tool = None;
    let mut error = None;
    loop {
        match engine.next_step() {
            Step::CallModel => {
                if deadline.is_expired() {
                    error = Some("timed out".to_string());
                    break;
                }
                let request = ChatRequest {
                    messages: engine.messages(),
                    schema: match constraint {
                        Constraint::Narrowed => Some(engine.schema().as_value()),
                        Constraint::Off => None,
                    },
                    options,
                };
                match crate::turn::repetition::watched_chat(backend, &request, deadline, |_| {
                    std::ops::ControlFlow::Continue(())
                }) {
                    Ok((reply, _)) => {
                        replies += 1;
                        texts.push(reply.text.clone());
                        engine.model_replied(&reply);
                    }
                    Err(BackendError::Timeout { .. }) => {
                        error = Some("timed out".to_string());
                        break;
                    }
                    Err(e) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
            Step::CallTool { tool, arguments } => {
                calls.push(Call {
                    name: tool,
                    arguments,
                });
                break;
            }
            Step::CallTools { calls: several } => {
                calls.extend(
                    several
                        .into_iter()
                        .map(|(name, arguments)| Call { name, arguments }),
                );
                break;
            }
            Step::AskUser { .. } | Step::Done => break,
        }
        tally(engine.drain_events(), &mut invalid, &mut p_tool);
    }
    tally(engine.drain_events(), &mut invalid, &mut p_tool);
    CaseResult {
        invalid_turns: invalid,
        replies,
        iterations: engine.iterations(),
        ms: started.elapsed().as_millis() as u64,
        tokens: engine.usage().completion_tokens,
        texts,
        p_tool,
        ..CaseResult::scored(case, calls, error)
    }
}

impl CaseResult {
    /// A case's verdict on its calls (or on the error that kept it from running), with
    /// the figures of the run left for the caller to fill in.
    fn scored(case: &Case, calls: Vec<Call>, error: Option<String>) -> Self {
        let verdict = match &error {
            Some(e) => Err(format!("could not run: {e}")),
            None => score_calls(&case.category, &calls, &case.functions, &case.ground_truth),
        };
        CaseResult {
            id: case.id.clone(),
            category: case.category.clone(),
            pass: verdict.is_ok(),
            reason: verdict.err(),
            call: calls.first().cloned(),
            calls,
            error,
            ..CaseResult::default()
        }
    }
}

/// Per-category figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The category.
    pub category: String,
    /// Cases run.
    pub cases: usize,
    /// Cases passed.
    pub passed: usize,
    /// passed / cases.
    pub accuracy: f64,
    /// Rejected replies / all replies.
    pub invalid_turn_rate: f64,
    /// Mean model turns per case.
    pub mean_iterations: f64,
    /// Mean milliseconds per case.
    pub mean_ms: f64,
    /// Mean generated tokens per case.
    #[serde(default)]
    pub mean_tokens: f64,
}

/// Sums results up by category (sorted), plus an `all` row.
pub fn summarize(results: &[CaseResult]) -> Vec<Summary> {
    let mut cats: Vec<String> = results.iter().map(|r| r.category.clone()).collect();
    cats.sort();
    cats.dedup();
    cats.push("all".to_string());
    cats.into_iter()
        .map(|c| {
            let rs: Vec<&CaseResult> = results
                .iter()
                .filter(|r| c == "all" || r.category == c)
                .collect();
            let n = rs.len().max(1) as f64;
            let replies: u32 = rs.iter().map(|r| r.replies).sum();
            let invalid: u32 = rs.iter().map(|r| r.invalid_turns).sum();
            let passed = rs.iter().filter(|r| r.pass).count();
            Summary {
                category: c,
                cases: rs.len(),
                passed,
                accuracy: passed as f64 / n,
                invalid_turn_rate: if replies == 0 {
                    0.0
                } else {
                    invalid as f64 / replies as f64
                },
                mean_iterations: rs.iter().map(|r| r.iterations as f64).sum::<f64>() / n,
                mean_ms: rs.iter().map(|r| r.ms as f64).sum::<f64>() / n,
                mean_tokens: rs.iter().map(|r| r.tokens as f64).sum::<f64>() / n,
            }
        })
        .collect()
}

/// The cases to run: only `category` when given (an error when it has none), and at most
/// `limit` cases of each category, spread evenly over its file.
pub fn select(
    mut cases: Vec<Case>,
    category: Option<&str>,
    limit: Option<usize>,
) -> Result<Vec<Case>, String> {
    if let Some(cat) = category {
        cases.retain(|c| c.category == cat);
        if cases.is_empty() {
            return Err(format!("no case of category {cat}"));
        }
    }
    if let Some(n) = limit {
        // Evenly spread over each category's file, not its first n: BFCL files are
        // ordered by topic, so the first cases are not a sample of the rest.
        let mut total = std::collections::HashMap::<String, usize>::new();
        for c in &cases {
            *total.entry(c.category.clone()).or_default() += 1;
        }
        let mut seen = std::collections::HashMap::<String, usize>::new();
        cases.retain(|c| {
            let i = seen.entry(c.category.clone()).or_default();
            let t = total[&c.category];
            // Case i is kept when it is the k-th pick, k*t/n, for some k below n.
            let keep = (0..n.min(t)).any(|k| k * t / n.min(t) == *i);
            *i += 1;
            keep
        });
    }
    Ok(cases)
}

/// The summary as the text table `toolloop eval` prints.
pub fn table(summary: &[Summary]) -> String {
    let mut out = format!(
        "{:<16} {:>6} {:>9} {:>13} {:>10} {:>9} {:>11}\n",
        "category", "cases", "accuracy", "invalid turns", "iterations", "s/case", "tokens/case"
    );
    for s in summary {
        out.push_str(&format!(
            "{:<16} {:>6} {:>8.1}% {:>12.1}% {:>10.2} {:>9.2} {:>11.1}\n",
            s.category,
            s.cases,
            s.accuracy * 100.0,
            s.invalid_turn_rate * 100.0,
            s.mean_iterations,
            s.mean_ms / 1000.0,
            s.mean_tokens
        ));
    }
    out
}

/// The report as JSON: the summary rows and every case.
pub fn report_json(results: &[CaseResult]) -> Value {
    json!({"summary": summarize(results), "cases": results})
}

#[cfg(test)]
mod tests;

/// One case through the server's native tool calling: the functions as OpenAI `tools`,
/// one request, the calls read from `message.tool_calls` as an OpenAI client reads them
/// (no repair, no loop). This is the baseline `BENCHMARKS.md` compares toolloop with.
pub fn native_case(target: &NativeTarget, case: &Case, run: &RunSettings) -> CaseResult {
    let started = Instant::now();
    let tools: Vec<Value> = case
        .tools
        .iter()
        .map(|t| {
            serde_json::json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}})
        })
        .collect();
    let body = serde_json::json!({
        "model": target.model,
        "messages": [{"role": "user", "content": case.question}],
        "tools": tools,
        "temperature": run.options.temperature.unwrap_or(0.0),
        "max_tokens": run.options.num_predict.unwrap_or(256),
        "stream": false,
    });
    let reply = crate::http::agent()
        .post(format!("{}/chat/completions", target.base_url))
        .config()
        .timeout_global(Some(run.timeout))
        .http_status_as_error(false)
        .build()
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .map_err(|e| e.to_string())
        .and_then(|r| {
            let (bytes, _) = crate::http::read_capped(r.into_body().into_reader(), 16 << 20)
                .map_err(|e| e.to_string())?;
            serde_json::from_slice::<Value>(&bytes).map_err(|e| e.to_string())
        });
    let (calls, text, tokens, error) = match reply {
        Err(e) => (Vec::new(), String::new(), 0, Some(e)),
        Ok(v) => {
            let message = &v["choices"][0]["message"];
            let calls = message["tool_calls"]
                .as_array()
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            let f = &c["function"];
                            let arguments = match &f["arguments"] {
                                Value::String(s) => serde_json::from_str(s).unwrap_or_default(),
                                Value::Object(m) => m.clone(),
                                _ => serde_json::Map::new(),
                            };
                            Call {
                                name: f["name"].as_str().unwrap_or_default().to_string(),
                                arguments,
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            let text = message["content"].as_str().unwrap_or_default().to_string();
            let tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
            let error = v["error"].is_object().then(|| v["error"].to_string());
            (calls, text, tokens, error)
        }
    };
    CaseResult {
        replies: 1,
        iterations: 1,
        ms: started.elapsed().as_millis() as u64,
        tokens,
        texts: vec![text],
        ..CaseResult::scored(case, calls, error)
    }
}
