//! `tool-fit`: a call the model was unsure of is checked by meaning: the model is asked
//! a second, narrow question — is this tool needed to reply to this request, yes or no —
//! and the call is declined when its share of "yes" is below the threshold.
//!
//! Words cannot decide this: a request in German shares no word with an English tool
//! description, and a check that declined on shared words declined nearly every right call
//! made in another language. The model reads the request in whatever language it was
//! written, so the question is put to the same model on the same server, constrained to
//! `{"answer": "yes" | "no"}`, and only its probabilities at the answer are read. On
//! Qwen2.5-Coder 0.5B that share told right calls from needless ones far better than the
//! model's own probability of calling.
//!
//! The share is read against the tool's own leaning: the same question with the request
//! left empty ([`baseline_question`]), asked once per tool and kept for the orchestrator's
//! later runs ([`Baselines`]), and for later processes in a file ([`kept`]). A small model
//! says "yes" more readily for some tool descriptions than for others whatever is asked, by
//! as much as the whole gap between right and needless calls; set against that leaning
//! ([`against_baseline`]), one bar serves every tool.
//!
//! It costs one short request (about 90 prompt tokens and 6 generated), and one more the
//! first time a tool is asked about, asked only when the model's share of probability for
//! the call was below the calibrated "sure" level ([`crate::Thresholds`]) *and* either the
//! request shares no content word with the tool's own text ([`supported`]) or the call
//! carries a required value the person never said ([`unsaid`]). Shared words are evidence
//! for a call, and so are the request's own numbers, in any language: a call whose values
//! are those and nothing else (`"300 - 45"` for "Subtract 45 from 300, then halve it",
//! [`own_numbers`]) goes ahead unquestioned. A call that shares words is asked about all
//! the same when its values were made up: a needless call to a near-miss tool shares words
//! with the request ("Is tipping customary in Japan?" and `calculate_tip`) but has to
//! invent what the tool needs (`bill_amount: 12.5`), so such a call is asked about too, and
//! held to the same calibrated bar (a bar of its own was tried: on the tuning half it
//! overfitted). Missing words are no evidence against a call, and neither words nor values
//! decline one alone; the model's answer does. Nor are shared words evidence where they
//! chose the tools on offer: a call made when the model was asked again among the tools
//! that share a word with the request (after `example-copy` declined a copy of the
//! prompt's example) is asked about as if it shared none.
//!
//! The question asks whether the tool is *needed*. Of five wordings written before any
//! answer was read, the tuning half of the everyday set picked this one, and on the
//! validation halves of every set it told needless calls from right ones better than the
//! wording before it ("should the assistant call the tool?"), in other languages most of
//! all. A calibration made with another wording holds a bar on another scale and is not
//! used ([`crate::FIT_QUESTION`]).
//!
//! Nor does the name. Where the model's probability at its call's tool name went to
//! names no tool on offer has (`recipe`, the prompt's example `calculator`), it wanted a
//! tool the catalogue lacks and wrote the nearest one listed; its answer to the fit
//! question for that tool reads about as a right call's does. When calibration finds
//! that this tells needless calls apart on the tuning half, the score a questioned call
//! is held to is lowered by a calibrated weight ([`crate::Thresholds::name_weight`]) for
//! how far that share fell short, so a call with a middling answer is declined where the
//! model did not choose its name, and goes where it did.
//!
//! A call to a tool that changes something (any class but read-only, by the person's
//! settings or the tool's hints) needs more evidence: it is asked about however sure the
//! model was and whatever words it shares with the request, since a question about the
//! tool shares them too; the question asks whether the person asks for the call to be
//! carried out, and its bar is its own ([`WRITES_FIT_MIN`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub(crate) mod kept;

use serde_json::{Value, json};

use super::{Check, CheckInfo, Effect, Judgement, Reads, TurnContext, grounding, numbers, support};
use crate::message::{ChatReply, Message, TokenLogprob};
use crate::tool_spec::ToolSpec;

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "tool-fit",
    default_on: true,
    off_for: &[],
    reads: Reads::Reply,
    effect: Effect::Declines,
    what: "asks the model aside whether the tool is needed for the request when it was unsure of a call, and declines the call when the answer falls below the calibrated bar",
    why: "a small model under the narrowed schema calls some tool for nearly every question, and words cannot tell which calls fit in other languages",
    example: "\"Who write Don Quixote?\" with a music-composition tool: \"Is the tool needed?\" yes 0.53 against 0.64 for no request, fit 0.39 < 0.41: declined, the model answers",
    safety: "It only declines, never changes a value, and never questions a call to a tool that only reads when the request shares its words (unless those words chose the tools the model was asked again among), or, once calibrated, when the model was sure of it (p(tool) at or above the calibrated level); its thresholds are measured per model so that right calls pass (`toolloop calibrate`, or the calibration toolloop ships for a model file it measured); uncalibrated, every other call is asked about and declined below 0.40. A call to a tool that writes is always asked about, with a question of its own (does the person ask for it to be carried out?) and a bar of its own.",
};

/// The `tool-fit` check.
#[derive(Debug)]
pub struct ToolFit;

impl Check for ToolFit {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn wants_fit(&self, ctx: &TurnContext<'_>, tool: &str, judgement: &mut Judgement) -> bool {
        let (Some(t), Some(p)) = (ctx.thresholds, judgement.read_p_tool(ctx.reply)) else {
            return false;
        };
        let support = support(ctx, tool);
        questioned(ctx, t, p, tool, support)
    }

    fn judge_turn(&self, ctx: &TurnContext<'_>, tool: &str, judgement: &mut Judgement) {
        judgement.own_numbers |= has_own_numbers(ctx, tool);
        let (Some(t), Some(answers)) = (ctx.thresholds, ctx.fit) else {
            return;
        };
        let fit = answers.score();
        let Some(p) = judgement.read_p_tool(ctx.reply) else {
            return;
        };
        judgement.fit = Some(fit);
        let own = support(ctx, tool);
        judgement.support = judgement.support.or(own);
        let unsaid = has_unsaid(ctx, tool);
        let p_name = judgement.p_name;
        let writes = ctx.writes.iter().any(|w| w == tool);
        // A call to a tool that writes was asked the other question, whose bar is its own.
        let (score, bar) = match writes {
            true => (fit, WRITES_FIT_MIN),
            false => (t.fit_score(p, p_name, fit), t.fit_min),
        };
        if questioned(ctx, t, p, tool, own) && score < bar && !judgement.declined {
            judgement.declined = true;
            judgement.by.get_or_insert(self.info().name);
            // The terms to the places the score is shown at: "fit 0.43 -0.00 … = 0.427"
            // did not add up.
            let d = super::places(score, bar);
            let mut terms = String::new();
            if t.p_weight != 0.0 && !writes {
                let w = t.p_weight;
                terms += &format!(" {:+.d$} ({w} × (p {p:.d$} − 1))", w * (p - 1.0));
            }
            let w = t.name_weight;
            let short = w * crate::calibration::name_short(p_name);
            if let (Some(n), true, false) = (p_name, short != 0.0, writes) {
                // What the model reached for instead: why the name counted against the call.
                let leaning = match &judgement.name_leaning {
                    Some(l) => format!("; likeliest \"{}…\" {:.2}", l.name, l.p),
                    None => String::new(),
                };
                terms += &format!(
                    " {short:+.d$} ({w} × names on offer {n:.d$} short of {}{leaning})",
                    crate::calibration::NAME_SURE
                );
            }
            let score = match terms.is_empty() {
                true => format!("fit {}", super::below(score, bar)),
                false => format!("fit {fit:.d$}{terms} = {}", super::below(score, bar)),
            };
            let unsaid = if unsaid { ", a value nobody said" } else { "" };
            let base = match answers.base {
                Some(b) => format!(" (yes {:.2} against {b:.2} for no request)", answers.yes),
                None => String::new(),
            };
            // Asked because the tool writes, however sure the model was: say that instead
            // of a p below the sure level that it was not.
            // Where every call is asked about (a sure level above 1), the model's p says
            // nothing of why.
            let why = match (writes, t.p_sure > 1.0) {
                (true, _) => ", a tool that writes".to_string(),
                (false, true) => String::new(),
                (false, false) => format!(", p {}", super::below(p, t.p_sure)),
            };
            judgement.reason = Some(format!("{score}{base}{unsaid}{why}"));
        }
    }
}

/// Whether a call to `tool` at `p` is put to the fit question: as [`Thresholds::questions`]
/// says, or however sure the model was and whatever words the request shares with the tool
/// when the tool changes something (`ctx.writes`). A question about a tool that writes
/// ("what does git push --force do?") shares its words and draws a call the model is sure
/// of as readily as a request to run it does; only the model's answer tells them apart, and
/// a needless call that writes is a wrong entry in the person's world, not a wasted read.
fn questioned(
    ctx: &TurnContext<'_>,
    t: &crate::Thresholds,
    p: f64,
    tool: &str,
    support: Option<f64>,
) -> bool {
    let writes = ctx.writes.iter().any(|w| w == tool);
    (writes && p >= t.p_min) || t.questions(p, for_call(ctx, tool, support), has_unsaid(ctx, tool))
}

/// Whether this turn calls `tool` with a required value nobody said.
fn has_unsaid(ctx: &TurnContext<'_>, tool: &str) -> bool {
    ctx.unsaid.iter().any(|t| t == tool)
}

/// Whether this turn calls `tool` with the person's own numbers alone ([`own_numbers`]).
fn has_own_numbers(ctx: &TurnContext<'_>, tool: &str) -> bool {
    ctx.own_numbers.iter().any(|t| t == tool)
}

/// Whether the request gives evidence for calling `tool`, so that the call is questioned
/// only for a value nobody said: words it shares with the tool (`support`, [`supported`]),
/// unless those words chose the tools on offer, or the person's own numbers as the call's
/// only values.
fn for_call(ctx: &TurnContext<'_>, tool: &str, support: Option<f64>) -> bool {
    (supported(support) && !ctx.offered_by_words) || has_own_numbers(ctx, tool)
}

/// The tools of `calls` called with a required value the person never said (nor a tool
/// result gave): [`grounding::invented_required`], matched leniently, so that only a
/// value that shares not one word or number with the evidence counts. A model that fills
/// a tool's required parameters for a request that did not ask for the tool has to make
/// them up ("Is tipping customary in Japan?" gave `bill_amount: 12.5`); a right call
/// mostly carries what the person wrote. Such a call is put to the fit question even
/// when its tool shares words with the request.
pub(crate) fn unsaid(
    specs: &[ToolSpec],
    calls: &[(String, serde_json::Map<String, Value>)],
    said: &grounding::Evidence,
) -> Vec<String> {
    let mut tools: Vec<String> = calls
        .iter()
        .filter(|(tool, arguments)| {
            specs.iter().find(|s| s.name == *tool).is_some_and(|s| {
                !grounding::invented_required(arguments, &s.input_schema, said).is_empty()
            })
        })
        .map(|(tool, _)| tool.clone())
        .collect();
    tools.sort_unstable();
    tools.dedup();
    tools
}

/// The tools of `calls` whose values are numbers the person wrote and nothing else: each
/// value a number, or text of numbers and arithmetic signs (`"300 - 45"`, `"18% * 350 +
/// 12"`), at least one number in the call, every one of them in `said` as some language
/// writes it (`"3,5"`, "three"). Such a call carries the request's own numbers, which is
/// evidence for it as shared words are, and in any language: on Qwen2.5-Coder 0.5B's
/// recorded first calls of six sets, 16 such calls went to a right tool and 2 were
/// needless, while word problems put to the calculator ("Subtract 45 from 300, then halve
/// it", "7 tickets at 12.40 each") read fit 0.39–0.42 and were declined. A needless call
/// mostly has to find its numbers elsewhere ("How many days are in a leap year?" gave `"366
/// / 2"`), and is asked. What it costs: one that takes them from the request goes unasked,
/// as `str_to_int("5")` for "Find the integral of x^3 from 1 to 5" did, one of the 59 BFCL
/// `irrelevance` requests that write a number.
pub(crate) fn own_numbers(
    calls: &[(String, serde_json::Map<String, Value>)],
    said: &grounding::Evidence,
) -> Vec<String> {
    let own = |arguments: &serde_json::Map<String, Value>| {
        let mut count = 0;
        arguments
            .values()
            .all(|v| said_numbers(v, said, &mut count))
            && count > 0
    };
    let mut tools: Vec<String> = calls
        .iter()
        .filter(|(tool, _)| calls.iter().filter(|(t, _)| t == tool).all(|(_, a)| own(a)))
        .map(|(tool, _)| tool.clone())
        .collect();
    tools.sort_unstable();
    tools.dedup();
    tools
}

/// Whether `v` is made of numbers `said` holds and nothing else, counting them into
/// `count`. Letters are never part of it: `x^3` is not a number, and a word in an
/// expression (`350 grams / 6`) is not the person's number alone.
fn said_numbers(v: &Value, said: &grounding::Evidence, count: &mut usize) -> bool {
    const SIGNS: &str = " .,'+-−*/×÷^%()";
    match v {
        Value::Number(n) => {
            *count += 1;
            n.as_f64().is_some_and(|n| said.has_number(n))
        }
        Value::String(s) => {
            let s = numbers::halfwidth(s);
            if !s.chars().all(|c| c.is_ascii_digit() || SIGNS.contains(c)) {
                return false;
            }
            let written = numbers::written(&s);
            *count += written.len();
            written
                .iter()
                .all(|w| w.readings.iter().any(|&n| said.has_number(n)))
        }
        Value::Array(items) => {
            !items.is_empty() && items.iter().all(|i| said_numbers(i, said, count))
        }
        Value::Object(o) => o.values().all(|i| said_numbers(i, said, count)),
        Value::Bool(_) | Value::Null => false,
    }
}

/// How much of the request `tool`'s own text covers ([`support::support`]).
fn support(ctx: &TurnContext<'_>, tool: &str) -> Option<f64> {
    ctx.specs
        .iter()
        .find(|s| s.name == tool)
        .and_then(|s| support::support(ctx.question, s))
}

/// Whether a request with `support` shares enough content words with the tool (at least
/// [`support::MIN_SUPPORT`]): evidence *for* the call, so it is not questioned.
/// The absence of shared words is no evidence against it (a request in German shares
/// none with an English description); then the model is asked.
pub(crate) fn supported(support: Option<f64>) -> bool {
    support.is_some_and(|s| s >= support::MIN_SUPPORT)
}

/// The schema of the answer to the fit question.
pub(crate) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["answer"]
    })
}

/// The fit question about `spec` for `request`: a system line and one user message. Kept
/// in English whatever the request's language; the model reads both.
///
/// Of a tool that writes (`writes`) it asks whether the person asks for the call to be
/// carried out: whether the tool is *needed* is what a question about the tool ("what
/// does git push --force do?") and a request to run it have in common. Of four wordings
/// written before any answer was read, this one told the writes set's requests from its
/// questions best on its tuning half; its leaning is asked and kept apart from the other
/// wording's.
pub(crate) fn question(request: &str, spec: &ToolSpec, writes: bool) -> Vec<Message> {
    let (name, description) = (&spec.name, &spec.description);
    let asked = match writes {
        false => format!("Is the tool {name} needed to reply to this request?"),
        true => format!("Does the person ask for {name} to be carried out?"),
    };
    vec![
        Message::system("You judge whether a tool is needed for a request. Reply in JSON."),
        Message::user(format!(
            "Tool: {name} — {description}\nRequest: {request}\n{asked} Answer yes or no."
        )),
    ]
}

/// The fit a call to a tool that writes is held to, whether or not the model was
/// calibrated: its answer to the question for tools that write ([`question`]), against
/// that question's leaning with no request. Calibration measures calls to tools that read,
/// with the other wording, so its bar is on another scale. Chosen on the writes set's
/// tuning half, as the middle of the span of bars that scored the same there, so that a
/// fit that moves a little between runs does not cross it.
pub(crate) const WRITES_FIT_MIN: f64 = 0.45;

/// Room for the fit question's answer, `{"answer": "yes"}`: 6 to 14 tokens as servers space it.
const FIT_TOKENS: u32 = 16;
/// Alternatives read at the fit answer's token: "yes" and "no" in their spellings.
const FIT_TOP_LOGPROBS: u32 = 10;

/// The fit question about `spec` as a question aside: for `request`, or, when
/// `baseline`, for no request at all.
pub(crate) fn aside(request: &str, spec: &ToolSpec, baseline: bool, writes: bool) -> super::Aside {
    super::Aside {
        check: INFO.name,
        about: spec.name.clone(),
        baseline,
        writes,
        messages: if baseline {
            baseline_question(spec, writes)
        } else {
            question(request, spec, writes)
        },
        schema: schema(),
        num_predict: FIT_TOKENS,
        top_logprobs: FIT_TOP_LOGPROBS,
        stop_once: readable,
        unanswered: if baseline {
            "the call is judged on its bare \"yes\""
        } else {
            "the call is judged without it"
        },
    }
}

/// The fit questions for a turn that calls `tools`: each tool once, and its leaning for
/// no request where `leanings` does not know it yet.
pub(crate) fn asides(
    request: &str,
    tools: &[&ToolSpec],
    writes: &[String],
    leanings: &Baselines,
) -> Vec<super::Aside> {
    let mut out: Vec<super::Aside> = Vec::new();
    for spec in tools {
        if out.iter().any(|q| q.about == spec.name) {
            continue;
        }
        let w = writes.contains(&spec.name);
        out.push(aside(request, spec, false, w));
        if leanings.get(spec, w).is_none() {
            out.push(aside(request, spec, true, w));
        }
    }
    out
}

/// One fit answer in: its share of "yes" read, a tool's leaning kept, and the leaning's
/// question dropped from `rest` when the request's own got no answer to set against it.
pub(crate) fn answered(
    asked: &super::Aside,
    reply: Option<&ChatReply>,
    rest: &mut Vec<super::Aside>,
    specs: &[ToolSpec],
    leanings: &Baselines,
) -> Option<f64> {
    let yes = reply.and_then(read);
    if let (true, Some(yes), Some(spec)) = (
        asked.baseline,
        yes,
        specs.iter().find(|s| s.name == asked.about),
    ) {
        leanings.put(spec, asked.writes, yes);
    }
    if !asked.baseline && yes.is_none() {
        rest.retain(|q| !(q.baseline && q.about == asked.about));
    }
    yes
}

/// Every fit answer in: each tool's answer against its leaning; the best stands for the
/// turn, an unreadable one only when none was read.
pub(crate) fn best(
    answers: &[(super::Aside, Option<f64>)],
    specs: &[ToolSpec],
    leanings: &Baselines,
) -> super::Answered {
    let best = answers
        .iter()
        .filter(|(a, _)| !a.baseline)
        .map(|(a, yes)| {
            let spec = specs.iter().find(|s| s.name == a.about);
            let base = spec.and_then(|s| leanings.get(s, a.writes));
            (a.about.clone(), yes.map(|yes| Fit { yes, base }))
        })
        .max_by(|a, b| {
            let score = |f: &Option<Fit>| f.map_or(-1.0, |f| f.score());
            score(&a.1).total_cmp(&score(&b.1))
        });
    let (tool, fit) = best.unzip();
    super::Answered {
        fit: fit.flatten(),
        tool,
    }
}

/// The fit question about `spec` with the request left empty: what the model answers about
/// the tool whatever is asked. Qwen2.5-Coder 0.5B's share of "yes" to it ranged from 0.50
/// to 0.68 over BFCL's tools, as wide as the gap between its answers for a right call and
/// for a needless one, so a tool whose description draws a "yes" from it got one for
/// questions it does not fit, and one that draws a "no" lost right calls. Read beside the
/// answer for the request ([`against_baseline`]), the leaning of each tool drops out:
/// contextual calibration, after Zhao et al. 2021, "Calibrate Before Use".
pub(crate) fn baseline_question(spec: &ToolSpec, writes: bool) -> Vec<Message> {
    question("", spec, writes)
}

/// The model's answers to the fit question about one tool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Fit {
    /// Its share of "yes" for the request.
    pub yes: f64,
    /// Its share of "yes" for no request ([`baseline_question`]); `None` when that could
    /// not be read (a recorded answer, a server without probabilities): `yes` then
    /// stands alone.
    pub base: Option<f64>,
}

impl Fit {
    /// The fit of the call: [`against_baseline`], or the bare share without a baseline.
    pub(crate) fn score(&self) -> f64 {
        self.base
            .map_or(self.yes, |b| against_baseline(self.yes, b))
    }
}

/// The fit of a call: the share of "yes" for the request, `yes`, set against the share
/// for no request, `base`, in log-odds, and put back on a scale of 0 to 1: 0.5 when the
/// request moved the model's answer not at all, above when it drew more "yes".
pub(crate) fn against_baseline(yes: f64, base: f64) -> f64 {
    let logit = |p: f64| {
        let p = p.clamp(1e-6, 1.0 - 1e-6);
        (p / (1.0 - p)).ln()
    };
    1.0 / (1.0 + (logit(base) - logit(yes)).exp())
}

/// The answers to [`baseline_question`], by tool: they depend on the tool and the model
/// only, so each is asked once, not once per run. An orchestrator whose backend names its
/// model and server shares them with every other one of the process for the same model
/// ([`Baselines::of_model`]: `eval`'s cases, `web`'s sessions), and, given a leanings
/// file ([`crate::Config::leanings`]), with later processes ([`Baselines::kept_in`]: each
/// `toolloop ask`); one that does not name its model (a scripted backend) keeps its own.
#[derive(Debug, Clone, Default)]
pub(crate) struct Baselines {
    seen: Arc<Mutex<HashMap<String, f64>>>,
    kept: Option<Arc<kept::Kept>>,
}

/// The process's [`Baselines`] per model and server.
static BY_MODEL: std::sync::LazyLock<Mutex<HashMap<(String, String), Baselines>>> =
    std::sync::LazyLock::new(Default::default);

impl Baselines {
    /// The answers shared by every orchestrator of the process for `model` (its name and
    /// server, as `Backend::identity` gives them).
    pub(crate) fn of_model(model: (String, String)) -> Self {
        let mut all = BY_MODEL.lock().unwrap_or_else(|e| e.into_inner());
        all.entry(model).or_default().clone()
    }

    /// These answers, with those kept for `model` in the leanings file at `path` read in,
    /// and each new one written there.
    pub(crate) fn kept_in(self, path: &std::path::Path, model: (String, String)) -> Self {
        let kept = kept::Kept::new(path, model);
        let read = kept.read();
        if !read.is_empty() {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            for (key, share) in read {
                seen.entry(key).or_insert(share);
            }
        }
        Baselines {
            seen: self.seen,
            kept: Some(Arc::new(kept)),
        }
    }

    /// Forgets every model's answers, so that the next orchestrator asks them again:
    /// `toolloop calibrate` measures how much the fit moves between two runs.
    #[cfg(feature = "cli")]
    pub(crate) fn forget_all() {
        BY_MODEL.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Forgets the leanings kept for `model` in the file at `path`: `toolloop calibrate`
    /// measures the model afresh, and it may not be the model they were asked of.
    #[cfg(feature = "cli")]
    pub(crate) fn forget_kept(path: &std::path::Path, model: (String, String)) {
        kept::Kept::new(path, model).forget();
    }

    /// The question's text and its answer's schema: what the answer depends on besides
    /// the model, so that a question worded otherwise is asked afresh.
    fn key(spec: &ToolSpec, writes: bool) -> String {
        let mut key: Vec<String> = baseline_question(spec, writes)
            .into_iter()
            .map(|m| m.content)
            .collect();
        key.push(schema().to_string());
        key.join("\n")
    }

    /// The share of "yes" the model gave `spec` for no request, once asked.
    pub(crate) fn get(&self, spec: &ToolSpec, writes: bool) -> Option<f64> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(&Self::key(spec, writes)).copied()
    }

    /// Keeps the share of "yes" the model gave `spec` for no request.
    pub(crate) fn put(&self, spec: &ToolSpec, writes: bool, yes: f64) {
        let key = Self::key(spec, writes);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(key.clone(), yes);
        drop(seen);
        if let Some(kept) = &self.kept {
            kept.keep(&key, yes);
        }
    }
}

/// The share of "yes" in the model's answer to the fit question: read at the first token
/// where "yes" and "no" together carry most of the probability. `None` when the reply has
/// no log-probabilities or no such token.
///
/// Every token counts, one the server left out of the content too: Qwen2.5-Coder 0.5B's
/// answers begin with a code fence llama-server drops, and there the model gives "Yes" and
/// "No" in plain words most of its probability. Read inside the JSON instead, the
/// calibration declined fewer needless calls.
pub(crate) fn read(reply: &ChatReply) -> Option<f64> {
    read_tokens(&reply.logprobs)
}

/// Whether the share of "yes" can be read from `tokens` already: the fit question's
/// reply is stopped there ([`crate::backend::GenOptions::stop_once`]), since no later
/// token changes it.
pub(crate) fn readable(tokens: &[TokenLogprob]) -> bool {
    read_tokens(tokens).is_some()
}

/// [`read`] on the log-probabilities alone.
fn read_tokens(tokens: &[TokenLogprob]) -> Option<f64> {
    let starts = |tok: &str, c: char| {
        tok.trim()
            .trim_matches('"')
            .chars()
            .next()
            .is_some_and(|f| f.eq_ignore_ascii_case(&c))
    };
    for t in tokens {
        let mut alternatives = t.top.clone();
        if !alternatives.iter().any(|(tok, _)| *tok == t.token) {
            alternatives.push((t.token.clone(), t.logprob));
        }
        let share = |c: char| -> f64 {
            alternatives
                .iter()
                .filter(|(tok, _)| starts(tok, c))
                .map(|(_, lp)| lp.exp())
                .sum()
        };
        let (yes, no) = (share('y'), share('n'));
        if yes + no > 0.5 {
            return Some(yes / (yes + no));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::TokenLogprob;

    #[test]
    fn a_tools_leaning_is_shared_by_the_runs_of_one_model_and_no_other() {
        let spec = ToolSpec::new("clock", "time of day", json!({"type": "object"}));
        let model = |name: &str| (name.to_string(), "http://127.0.0.1:1/v1".to_string());
        Baselines::of_model(model("leaning-a")).put(&spec, false, 0.6);
        assert_eq!(
            Baselines::of_model(model("leaning-a")).get(&spec, false),
            Some(0.6)
        );
        assert_eq!(
            Baselines::of_model(model("leaning-b")).get(&spec, false),
            None
        );
        // Another description is another tool to the model.
        let other = ToolSpec::new("clock", "the time in a zone", json!({"type": "object"}));
        assert_eq!(
            Baselines::of_model(model("leaning-a")).get(&other, false),
            None
        );
    }

    #[test]
    fn the_fit_is_the_answer_set_against_the_leaning() {
        // No leaning: the answer as it is.
        assert!((against_baseline(0.7, 0.5) - 0.7).abs() < 1e-9);
        // As much "yes" as for no request: no evidence either way.
        assert!((against_baseline(0.58, 0.58) - 0.5).abs() < 1e-9);
        // Less than the tool draws anyway: below one half.
        assert!(against_baseline(0.55, 0.62) < 0.5);
    }

    fn tok(token: &str, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            token: token.into(),
            logprob: top
                .iter()
                .find(|(t, _)| *t == token)
                .map_or(-30.0, |(_, p)| p.ln()),
            top: top.iter().map(|(t, p)| (t.to_string(), p.ln())).collect(),
        }
    }

    #[test]
    fn the_share_of_yes_is_read_at_the_answer_token() {
        let reply = ChatReply {
            text: "{\"answer\": \"no\"}".into(),
            logprobs: vec![
                tok("{\"", &[("{\"", 1.0)]),
                tok("answer", &[("answer", 1.0)]),
                tok("\":", &[("\":", 1.0)]),
                tok(" \"", &[(" \"", 1.0)]),
                tok("no", &[("no", 0.6), ("yes", 0.3), ("No", 0.05)]),
                tok("\"}", &[("\"}", 1.0)]),
            ],
            ..ChatReply::default()
        };
        let fit = read(&reply).unwrap();
        assert!((fit - 0.3 / 0.95).abs() < 1e-9, "{fit}");
    }

    #[test]
    fn a_fence_the_server_left_out_of_the_content_is_where_the_answer_is_read() {
        // As Qwen2.5-Coder 0.5B answers on llama-server: a fence first, not in the text,
        // where the model gave the plain-words answer most of its probability.
        let reply = ChatReply {
            text: "{\n  \"answer\": \"no\"\n}".into(),
            logprobs: vec![
                tok(
                    "```",
                    &[("No", 0.46), ("Yes", 0.40), ("no", 0.07), ("yes", 0.05)],
                ),
                tok("{\n", &[("{\n", 1.0)]),
                tok(" ", &[(" ", 1.0)]),
                tok(" \"", &[(" \"", 1.0)]),
                tok("answer", &[("answer", 1.0)]),
                tok("\":", &[("\":", 1.0)]),
                tok(" \"", &[(" \"", 1.0)]),
                tok("no", &[("no", 0.6), ("yes", 0.3)]),
            ],
            ..ChatReply::default()
        };
        let fit = read(&reply).unwrap();
        assert!((fit - 0.45 / 0.98).abs() < 1e-9, "{fit}");
    }

    fn own(question: &str, arguments: Value) -> bool {
        let said = grounding::Evidence::of([question]);
        let calls = [("t".to_string(), arguments.as_object().unwrap().clone())];
        !own_numbers(&calls, &said).is_empty()
    }

    #[test]
    fn a_call_of_the_persons_own_numbers_is_told_from_one_that_found_its_numbers_elsewhere() {
        let e = |x: &str| json!({ "expression": x });
        assert!(own("Subtract 45 from 300, then halve it.", e("300 - 45")));
        assert!(own("Take 18% of 350 and add 12.", e("18% * 350 + 12.0")));
        assert!(own("Calcule 3,5 fois 8.", e("3,5 * 8")));
        assert!(own("Three friends share a 96.90 bill.", e("96.90 / 3")));
        assert!(own("１２０ドルを円に", json!({"amount": 120})));
        assert!(own("Add 2, 3 and 4", json!({"numbers": [2, 3, 4]})));
        assert!(own(
            "Find the integral of x^3 from 1 to 5",
            json!({"value": "5"})
        ));
        // A number nobody wrote, a word, a name or nothing numeric: asked as before.
        assert!(!own("How many days are in a leap year?", e("366 / 2")));
        assert!(!own("Bake 350 grams into 6 loaves", e("350 grams / 6")));
        assert!(!own("Integral of x^3 from 1 to 5", e("x^3")));
        assert!(!own(
            "Weather in Paris for 3 days",
            json!({"city": "Paris", "days": 3})
        ));
        assert!(!own("Is 17 prime?", json!({"strict": true})));
        assert!(!own("Hi", e("")));
        // Every call of the tool in the turn: one made-up number asks them all.
        let said = grounding::Evidence::of(["What is 2 + 2 and 5 * 5?"]);
        let calls = [
            ("calc".to_string(), e("2 + 2").as_object().unwrap().clone()),
            ("calc".to_string(), e("5 * 6").as_object().unwrap().clone()),
        ];
        assert!(own_numbers(&calls, &said).is_empty());
    }

    #[test]
    fn no_logprobs_read_nothing() {
        assert_eq!(read(&ChatReply::default()), None);
    }

    #[test]
    fn the_question_names_the_tool_and_carries_the_request_as_written() {
        let spec = ToolSpec::new("calculator", "Exact arithmetic", json!({"type": "object"}));
        let q = question("Wie viel ist 37 mal 89?", &spec, false);
        assert!(q[1].content.contains("calculator — Exact arithmetic"));
        assert!(q[1].content.contains("Wie viel ist 37 mal 89?"));
    }
}
