//! `toolloop eval`: a tool-calling dataset in the Berkeley Function Calling Leaderboard
//! (BFCL) format ([`crate::eval::bfcl`]), run through the real loop and scored with BFCL's AST
//! rules.
//!
//! The functions are described to the model but never executed: the first `tool_call` is
//! the prediction, and a `final_answer` or `clarify` means "no call". Each case runs
//! through the same driver as `ask` ([`crate::Orchestrator`]), with the case's functions
//! as tools that record the call and stop the run, so everything the loop does to a turn
//! (repair, validation, the checks, feedback on an invalid reply) happens exactly as in a
//! real run, and the prompt lists the tools as a person's run does (sorted by name).
//!
//! May import the run, the turn, backends, tools and the leaf modules; never `serve/` or
//! `cli/`. Behind the `eval` feature, which the command line needs; nothing of it is
//! public: a library user who wants these figures runs `toolloop eval`.

pub(crate) mod bfcl;
pub(crate) mod calibrate;
#[cfg(test)]
mod invariant;
mod native;
mod report;
mod rescore;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::backend::{Backend, BackendError, ChatReply, ChatRequest, TextSink};
use crate::config::Config;
use crate::deadline::{Deadline, StopHandle};
use crate::run::ending::StopKind;
use crate::run::events::Event;
use crate::run::orchestrator::Orchestrator;
use crate::tool_spec::ToolSpec;
use crate::tools::{ToolError, ToolResult, ToolSetup, ToolSource};
use crate::turn::schema::Narrowing;
pub use bfcl::{Call, Case, everyday, load, score_calls};
#[cfg(test)]
use bfcl::{score, to_json_schema};
pub use native::native_case;
pub use report::{Half, half, report_json, select, summarize, table};
pub(crate) use rescore::rescore;

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
    /// The model's share of "yes" to the fit question about that call, where it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<f64>,
    /// The model's share of probability for several calls rather than one, where it chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_several: Option<f64>,
    /// The model's share for one more call where it closed its list of calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_more: Option<f64>,
    /// The model's share of probability for the names it could write, where its first
    /// call's tool name begins ([`crate::checks::name_share`]): under 0.2, the schema
    /// picked the name from what the model left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_name: Option<f64>,
    /// Where the rest of that share went: the likeliest beginning of a name no tool on
    /// offer has ([`crate::checks::name_leaning`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_leaning: Option<crate::checks::Leaning>,
    /// Where the case's tokens and seconds went (up to its first calls: the case ends
    /// there).
    #[serde(default)]
    pub budget: crate::run::budget::Budget,
    /// What the checks did in the case, a line each as `ask` prints them (`example-copy:
    /// declined get_order_status: …`): a case that made no call says why here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// For each of `calls`, the parameters whose values the request does not hold: what
    /// a person asked to approve such a call is told they did not write
    /// ([`crate::Unsaid`]). Empty when every value was said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsaid: Vec<Vec<String>>,
    /// Optional values of its calls that the ground truth does not accept: values
    /// nobody asked for ([`bfcl::unasked_optional`]).
    #[serde(default)]
    pub unasked_optional: usize,
}

/// Runs `cases` on one thread per backend, each case on whichever backend is free (a
/// server with that many slots answers them in parallel). `done` sees each result as it
/// arrives; the results come back in the order of `cases`.
pub fn run_all(
    backends: Vec<Box<dyn Backend>>,
    cases: &[Case],
    run: &EvalSettings,
    mut done: impl FnMut(&CaseResult),
) -> Vec<CaseResult> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut results: Vec<Option<CaseResult>> = vec![None; cases.len()];
    std::thread::scope(|scope| {
        for b in backends {
            let (tx, next) = (tx.clone(), &next);
            scope.spawn(move || {
                let b = SharedBackend::new(match run.constraint {
                    Constraint::Narrowed => b,
                    Constraint::Off => Box::new(Unconstrained(b)),
                });
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    let r = run_case(&b, case, run);
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

/// How each case of an eval runs: the run's [`Config`], as `ask` reads it, with at most
/// three model turns and the schema narrowed per tool; or the server's own tool calling.
#[derive(Debug, Clone, Default)]
pub struct EvalSettings {
    /// The settings of each case's run.
    pub config: Config,
    /// Ask the server with its native tool calling instead of through the loop.
    pub native: Option<NativeTarget>,
    /// How much of the schema is sent.
    pub constraint: Constraint,
}

/// The case's functions as a tool source that never runs them: a call is recorded, and
/// the run is stopped once its first calls have come back (`run_case`'s observer), so the
/// first turn that calls is the prediction. Recording changes nothing, so the functions
/// are offered as tools that only read: a call may start while its turn is written
/// ([`crate::Config::early_calls`]), as it would with a person's read-only tools, and the
/// eval measures when it went off. An early call its turn did not make is taken off the
/// record again.
struct Recorder {
    specs: Vec<ToolSpec>,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl ToolSource for Recorder {
    fn label(&self) -> String {
        "eval".into()
    }

    fn list(&mut self, _deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError> {
        Ok(self.specs.clone())
    }

    fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        _deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(Call {
                name: name.to_string(),
                arguments: arguments.clone(),
            });
        }
        Ok(ToolResult::ok("recorded"))
    }
}

/// What a case's run showed, read from its events.
#[derive(Debug, Default)]
struct Tally {
    invalid: u32,
    replies: u32,
    texts: Vec<String>,
    p_tool: Option<f64>,
    fit: Option<f64>,
    p_several: Option<f64>,
    p_more: Option<f64>,
    p_name: Option<f64>,
    name_leaning: Option<crate::checks::Leaning>,
    checks: Vec<String>,
}

/// A backend that sends no schema, for [`Constraint::Off`].
struct Unconstrained(Box<dyn Backend>);

impl Backend for Unconstrained {
    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        on_text: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let free = ChatRequest {
            schema: None,
            ..*request
        };
        self.0.chat(&free, deadline, on_text)
    }

    fn watch(&mut self, stop: &StopHandle) {
        self.0.watch(stop)
    }

    fn describe(&self) -> String {
        self.0.describe()
    }

    fn identity(&self) -> Option<(String, String)> {
        self.0.identity()
    }

    fn model_file(&self) -> Option<crate::backend::ModelFile> {
        self.0.model_file()
    }
}

/// One backend shared by the runs of one worker, case after case (each run owns a
/// handle; only one runs at a time).
#[derive(Clone)]
pub struct SharedBackend(Arc<Mutex<Box<dyn Backend>>>);

impl SharedBackend {
    /// Shares `backend`.
    pub fn new(backend: Box<dyn Backend>) -> Self {
        SharedBackend(Arc::new(Mutex::new(backend)))
    }
}

impl Backend for SharedBackend {
    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        on_text: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let mut b = self.0.lock().unwrap_or_else(|e| e.into_inner());
        b.chat(request, deadline, on_text)
    }

    fn watch(&mut self, stop: &StopHandle) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).watch(stop)
    }

    fn describe(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).describe()
    }

    fn identity(&self) -> Option<(String, String)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).identity()
    }

    fn model_file(&self) -> Option<crate::backend::ModelFile> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .model_file()
    }
}

/// Runs one case through the loop, as `ask` runs a question, with the case's functions
/// as tools that record the call instead of running.
pub fn run_case(backend: &SharedBackend, case: &Case, run: &EvalSettings) -> CaseResult {
    if let Some(target) = &run.native {
        return native_case(target, case, &run.config);
    }
    let started = Instant::now();
    let mut config = run.config.clone();
    config.max_iterations = 3;
    config.narrowing = Narrowing::PerTool;
    config.tools = ToolSetup::default();
    config.system = None;
    // The recorder runs nothing, so every call may go ahead: what is measured is what the
    // model and the checks decided, not what a person would have said.
    config.permissions.yes = true;
    let stop = StopHandle::default();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let seen = Arc::clone(&tally);
    // The calls in the order the model wrote them (their events come before they run).
    let written = Arc::new(Mutex::new(Vec::new()));
    let write = Arc::clone(&written);
    // Early calls the turn did not make.
    let unused = Arc::new(Mutex::new(Vec::new()));
    let unuse = Arc::clone(&unused);
    let built = Orchestrator::builder()
        .settings(config)
        .backend(backend.clone())
        .preflight(false)
        .stop_handle(stop.clone())
        .source(Recorder {
            specs: run_specs(case),
            calls: Arc::clone(&calls),
        })
        .observer(move |e: &Event| {
            let Ok(mut t) = seen.lock() else { return };
            t.checks.extend(e.check_line());
            match e {
                Event::ToolCall {
                    tool, arguments, ..
                } => {
                    if let Ok(mut w) = write.lock() {
                        w.push(Call {
                            name: tool.clone(),
                            arguments: arguments.clone(),
                        });
                    }
                }
                // The first calls came back: they are the prediction.
                Event::ToolResult { .. } => stop.stop(),
                Event::EarlyCallUnused { tool, arguments } => {
                    if let Ok(mut u) = unuse.lock() {
                        u.push(Call {
                            name: tool.clone(),
                            arguments: arguments.clone(),
                        });
                    }
                }
                Event::Invalid { .. } => t.invalid += 1,
                Event::ModelReply { text, .. } => {
                    t.replies += 1;
                    t.texts.push(text.clone());
                }
                Event::Decision {
                    p_tool,
                    fit,
                    p_several,
                    p_more,
                    p_name,
                    name_leaning,
                    ..
                } if t.p_tool.is_none() => {
                    t.p_tool = Some(*p_tool);
                    t.fit = *fit;
                    t.p_several = *p_several;
                    t.p_more = *p_more;
                    t.p_name = *p_name;
                    t.name_leaning = name_leaning.clone();
                }
                _ => {}
            }
        })
        .build();
    let mut o = match built {
        Ok(o) => o,
        Err(e) => return CaseResult::scored(case, Vec::new(), Some(e.to_string())),
    };
    let outcome = o.run(&case.question);
    let (error, iterations, tokens, budget) = match &outcome {
        Ok(out) if out.ending.kind() == StopKind::Timeout => (
            Some("timed out".to_string()),
            out.iterations,
            out.usage.completion_tokens,
            out.budget,
        ),
        Ok(out) => (
            None,
            out.iterations,
            out.usage.completion_tokens,
            out.budget,
        ),
        Err(e) => (Some(e.to_string()), 0, 0, Default::default()),
    };
    let mut calls = std::mem::take(&mut *calls.lock().unwrap_or_else(|e| e.into_inner()));
    for u in std::mem::take(&mut *unused.lock().unwrap_or_else(|e| e.into_inner())) {
        if let Some(i) = calls.iter().position(|c| *c == u) {
            calls.remove(i);
        }
    }
    let written = std::mem::take(&mut *written.lock().unwrap_or_else(|e| e.into_inner()));
    let calls = in_written_order(calls, &written);
    let t = std::mem::take(&mut *tally.lock().unwrap_or_else(|e| e.into_inner()));
    CaseResult {
        invalid_turns: t.invalid,
        replies: t.replies,
        iterations,
        ms: started.elapsed().as_millis() as u64,
        tokens,
        texts: t.texts,
        p_tool: t.p_tool,
        fit: t.fit,
        p_several: t.p_several,
        p_more: t.p_more,
        p_name: t.p_name,
        name_leaning: t.name_leaning,
        budget,
        checks: t.checks,
        ..CaseResult::scored(case, calls, error)
    }
}

/// The tools of `case` as a case runs them: with their hints' class where a set of
/// toolloop's own gives hints, else as tools that only read (BFCL's own sets say nothing
/// of what a function changes).
pub(crate) fn run_specs(case: &Case) -> Vec<crate::tools::ToolSpec> {
    case.tools
        .iter()
        .cloned()
        .map(|s| match s.annotations.is_empty() {
            true => s.reading_only(),
            false => s,
        })
        .collect()
}

/// The calls that ran, in the order the model wrote them. The calls of one turn run side
/// by side and are recorded as each finishes, and BFCL's matching of several calls is
/// greedy: `parallel_178` accepts either company for its first answer, so the order the
/// threads finished in decided whether a right turn scored (seen under load, in CI).
fn in_written_order(ran: Vec<Call>, written: &[Call]) -> Vec<Call> {
    let mut left: Vec<Option<Call>> = ran.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(left.len());
    for w in written {
        if let Some(slot) = left.iter_mut().find(|c| c.as_ref() == Some(w)) {
            out.extend(slot.take());
        }
    }
    out.extend(left.into_iter().flatten());
    out
}

impl CaseResult {
    /// A case's verdict on its calls (or on the error that kept it from running), with
    /// the figures of the run left for the caller to fill in.
    fn scored(case: &Case, calls: Vec<Call>, error: Option<String>) -> Self {
        let verdict = match &error {
            Some(e) => Err(format!("could not run: {e}")),
            None => score_calls(&case.category, &calls, &case.functions, &case.ground_truth),
        };
        let asked = [crate::Message::user(case.question.clone())];
        let mut unsaid: Vec<Vec<String>> = calls
            .iter()
            .map(|c| match case.tools.iter().find(|s| s.name == c.name) {
                Some(spec) => crate::Unsaid::of(spec, &c.arguments, &asked).nowhere,
                None => Vec::new(),
            })
            .collect();
        if unsaid.iter().all(Vec::is_empty) {
            unsaid.clear();
        }
        let unasked_optional = calls
            .iter()
            .map(|c| bfcl::unasked_optional(c, &case.functions, &case.ground_truth))
            .sum();
        CaseResult {
            id: case.id.clone(),
            category: case.category.clone(),
            pass: verdict.is_ok(),
            reason: verdict.err(),
            call: calls.first().cloned(),
            calls,
            error,
            unsaid,
            unasked_optional,
            ..CaseResult::default()
        }
    }
}

#[cfg(test)]
mod tests;
