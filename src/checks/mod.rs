//! The checks between the model's reply and the tool: whether a turn should call a tool
//! at all, and whether each call's values are the ones the person gave.
//!
//! Each check is a file of its own that declares a [`CheckInfo`] (its name, whether it is
//! on by default, what it does, why, an example), the way clippy declares a lint, and
//! implements `Check`. The engine knows none of them by name: it asks `Checks`, built
//! from the run's [`CheckLevels`], to watch the stream and to judge a turn, and reads the
//! `Finding`s and the `Verdict` that come back. The order is `ALL`'s:
//!
//! 1. while the reply streams: `looping-reply`;
//! 2. once per turn that calls a tool: `nothing-new`, `example-copy` and `cut-number` on
//!    all of its calls, then `tool-probability`, `tool-fit` (which may first have the
//!    engine put its question to the model), then `more-calls` and `numbers-left`;
//! 3. on each call, in the order of the calls: `example-copy` and `cut-number` hold back
//!    a call, beside others, that carries what they decline; `more-calls` and
//!    `numbers-left` hold back a call the asking added on a value nobody gave;
//!    `invented-required` (off by default) turns a call into a question for a required
//!    value nobody gave; `unsure-optional` (off by default) leaves out an optional value
//!    the model hesitated over and the request does not hold;
//! 4. on a final answer: `example-copy` (an answer that writes the prompt's example),
//!    then `every-result` (an answer that gives one call's result and leaves out
//!    another's).
//!
//! No check changes a value the model wrote: a check lets a call through as written,
//! declines it, holds it back, or asks the model again or the person. The one exception,
//! leaving an optional value out, is an unsafe fix and off by default.
//!
//! Pure: imports no backend, tool or run; only `turn/` and the leaf modules.

pub(crate) mod cut_number;
#[cfg(any(feature = "cli", test))]
pub(crate) mod doc;
pub(crate) mod every_result;
pub(crate) mod example_copy;
pub(crate) mod grounding;
pub(crate) mod guessed_tool;
pub(crate) mod invented_required;
pub(crate) mod leaned_tool;
mod levels;
pub(crate) mod looping_reply;
pub(crate) mod more_calls;
pub(crate) mod nothing_new;
pub(crate) mod numbers;
pub(crate) mod numbers_left;
pub(crate) mod support;
pub(crate) mod tool_fit;
pub(crate) mod tool_probability;
pub(crate) mod unsure_optional;
pub(crate) mod words;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::calibration::Thresholds;
use crate::message::{ChatReply, Message};
use crate::tool_spec::ToolSpec;
pub(crate) use grounding::Evidence;
#[cfg(test)]
pub(crate) use grounding::invented_required;
pub(crate) use levels::family_note;
pub use levels::{CheckLevels, all, family_of};
pub(crate) use looping_reply::{Loop, StreamWatch};
#[cfg(test)]
pub(crate) use more_calls::told as held_for_nobodys_value;
pub(crate) use nothing_new::Earlier;
#[cfg(feature = "eval")]
pub(crate) use numbers_left::left as numbers_left_out;
/// The tools' own leanings towards "yes", kept per model ([`tool_fit`]).
pub(crate) use tool_fit::Baselines as Leanings;
#[cfg(feature = "eval")]
pub(crate) use tool_fit::Fit;
pub(crate) use tool_fit::{own_numbers, unsaid};
#[cfg(test)]
pub(crate) use tool_fit::{question as fit_question, schema as fit_schema};

/// Whether the request's words point to `spec`: the share of its content words that the
/// tool's own text has is high enough for `tool-fit` to take the call as supported.
pub(crate) fn words_support(request: &str, spec: &ToolSpec) -> bool {
    tool_fit::supported(support::support(request, spec))
}
pub use tool_probability::Leaning;
pub use tool_probability::tool_share;
#[cfg(feature = "eval")]
pub(crate) use tool_probability::{calls_array_end, value_offset};

/// What a check does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Stops the generation and cuts the reply.
    Cuts,
    /// Declines the call: the model is asked again, for an answer or among other tools.
    Declines,
    /// Turns the call into a question for the person.
    Asks,
    /// Asks the model again for one call more.
    AsksForMore,
    /// Leaves values out of the call.
    LeavesOut,
    /// Refuses the final answer: the model is asked again for one.
    RefusesAnswer,
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Effect::Cuts => "cuts the reply",
            Effect::Declines => "declines the call",
            Effect::Asks => "asks the person",
            Effect::AsksForMore => "asks the model for one call more",
            Effect::LeavesOut => "leaves values out of the call",
            Effect::RefusesAnswer => "refuses the answer and asks the model again",
        })
    }
}

/// What the engine did on a check's word: the same few actions whichever check asked,
/// carried by [`crate::Event::Check`] with the check's name. A gate added later (the
/// person's approval of a call) acts through these too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CheckAction {
    /// The reply's generation was stopped and the reply cut.
    StopStream {
        /// Bytes of the reply kept.
        kept: usize,
    },
    /// The turn's call is not made: the model is asked again for an answer, or among
    /// `instead`.
    Decline {
        /// The tool the turn called.
        tool: String,
        /// The tools the model may choose among now; empty: only an answer.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        instead: Vec<String>,
    },
    /// The turn is not carried out yet: the model is asked again, held to at least
    /// `at_least` calls.
    AskModel {
        /// The calls the turn made.
        made: usize,
        /// The fewest calls the reply asked for may carry.
        at_least: usize,
    },
    /// The reply the model was asked for was not a valid turn: the turn before it is
    /// carried out as the model wrote it.
    KeepTurn {
        /// The calls of the turn carried out.
        calls: usize,
    },
    /// One call is not run now; the model is told why beside the other calls' results.
    Hold {
        /// The tool.
        tool: String,
        /// What the check found in the call: arguments nobody gave, numbers left out.
        arguments: Vec<String>,
    },
    /// The call is not made: the person is asked for the values nobody gave instead.
    AskPerson {
        /// The tool.
        tool: String,
        /// The arguments asked for.
        arguments: Vec<String>,
    },
    /// The final answer is refused; the model is asked again for an answer.
    RefuseAnswer {
        /// Whether the model is told why (its answer stays in the history); otherwise
        /// it is asked again as if it had not answered.
        #[serde(default)]
        told: bool,
    },
    /// The call is made without these optional arguments: the tool's defaults stand.
    LeaveOut {
        /// The tool.
        tool: String,
        /// The arguments left out.
        arguments: Vec<String>,
    },
}

impl CheckAction {
    /// The one line for what was done, given the check's reason.
    pub fn line(&self, check: &str, why: &str) -> String {
        let s = |n: usize| if n == 1 { "" } else { "s" };
        match self {
            CheckAction::StopStream { kept } => {
                format!("{check}: {why}; stopped, {kept} bytes kept")
            }
            CheckAction::Decline { tool, instead } => format!(
                "{check}: declined {tool}: {why}; {}",
                if instead.is_empty() {
                    "asking for an answer instead".to_string()
                } else {
                    format!("asking again among {}", instead.join(", "))
                }
            ),
            CheckAction::AskModel { at_least, .. } => {
                format!("{check}: {why}; asking again for at least {at_least}")
            }
            CheckAction::KeepTurn { calls } => format!(
                "{check}: {why}; going ahead with the {calls} call{} made first",
                s(*calls)
            ),
            CheckAction::Hold { tool, .. } => format!("{check}: {tool} not run: {why}"),
            CheckAction::AskPerson { tool, .. } => {
                format!("{check}: {tool}: {why}; asking for it instead of calling")
            }
            CheckAction::LeaveOut { tool, arguments } => {
                format!(
                    "{check}: {tool}: {why}; called without {}",
                    arguments.join(", ")
                )
            }
            CheckAction::RefuseAnswer { told } => format!(
                "{check}: the answer was refused: {why}; {}",
                match told {
                    true => "asked again, told so",
                    false => "asked again",
                }
            ),
        }
    }
}

/// A check's action with its name and its reason: what becomes a
/// [`crate::Event::Check`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Acted {
    /// The check.
    pub check: &'static str,
    /// What was done.
    pub action: CheckAction,
    /// Why, in the check's words, with its figures.
    pub why: String,
}

/// What a check reads to decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The reply's text as it streams.
    Stream,
    /// The parsed reply: its calls or its answer, and the model's probabilities.
    Reply,
    /// One call's values against the person's words.
    Call,
    /// The run's record: the calls made and their results.
    Record,
}

impl std::fmt::Display for Reads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reads::Stream => "the reply as it streams",
            Reads::Reply => "the parsed reply and the model's probabilities",
            Reads::Call => "each call's values",
            Reads::Record => "the run's record",
        })
    }
}

/// A check's declaration: its name, its default, and its doc in clippy's sections. The
/// list `toolloop checks` prints and `docs/checks.md` are made from these alone
/// (`checks::doc`).
#[derive(Debug)]
pub struct CheckInfo {
    /// The name a person sets it by (`tool-probability`).
    pub name: &'static str,
    /// Whether it runs unless the person turns it off.
    pub default_on: bool,
    /// Model families (read from the model's name: [`family_of`]) for which a check on by
    /// default is off by default: measured there to cost requests and gain no right call
    /// (`safety` says what was measured).
    pub off_for: &'static [&'static str],
    /// What it reads.
    pub reads: Reads,
    /// What it does when it fires.
    pub effect: Effect,
    /// What it does, in one line.
    pub what: &'static str,
    /// Why it exists: what the model did without it.
    pub why: &'static str,
    /// A reply or call it changes, and what it becomes.
    pub example: &'static str,
    /// Why its default is safe: what evidence it acts on, and whether a right call can
    /// come out changed (`src/eval/invariant.rs` tests that none does by default).
    pub safety: &'static str,
}

/// A question a check puts to the model aside: one constrained request outside the run's
/// history, read for the model's probabilities. The engine asks it as one step
/// (`Step::AskAside`) whichever check it is for, and hands the reply back to that check.
#[derive(Debug, Clone)]
pub(crate) struct Aside {
    /// The check that asks.
    pub check: &'static str,
    /// What the question is about: a tool of the turn.
    pub about: String,
    /// Whether it is the question with no request, whose answer is the tool's own
    /// leaning rather than the request's.
    pub baseline: bool,
    /// Whether the tool it is about changes something ([`TurnContext::writes`]): its
    /// question is worded for that, and its leaning kept apart.
    pub writes: bool,
    /// The question's messages.
    pub messages: Vec<Message>,
    /// The schema its answer is held to.
    pub schema: Value,
    /// Room for the answer, in tokens.
    pub num_predict: u32,
    /// Alternatives read at each token.
    pub top_logprobs: u32,
    /// Where the answer can be read, so its reply may stop there.
    pub stop_once: fn(&[crate::message::TokenLogprob]) -> bool,
    /// What the person is told when the question gets no answer (after "got no answer
    /// (the error); ").
    pub unanswered: &'static str,
}

/// The model's answers aside about a turn, once every question was answered: the fit
/// that stands for the turn, and the tool it is about.
#[derive(Debug)]
pub(crate) struct Answered {
    /// The share of "yes", against the tool's leaning where that is known; `None` where
    /// it could not be read.
    pub fit: Option<tool_fit::Fit>,
    /// The tool it is about.
    pub tool: Option<String>,
}

/// The questions aside the checks want answered before they judge a turn that calls
/// `tools` for `request`.
pub(crate) fn asides(
    request: &str,
    tools: &[&ToolSpec],
    writes: &[String],
    leanings: &Leanings,
) -> Vec<Aside> {
    tool_fit::asides(request, tools, writes, leanings)
}

/// One answer aside in (`None`: it could not be had), read by the check that asked; the
/// questions still to ask, `rest`, may shrink. Its reading comes back.
pub(crate) fn aside_answered(
    asked: &Aside,
    reply: Option<&ChatReply>,
    rest: &mut Vec<Aside>,
    specs: &[ToolSpec],
    leanings: &Leanings,
) -> Option<f64> {
    match asked.check {
        n if n == tool_fit::INFO.name => tool_fit::answered(asked, reply, rest, specs, leanings),
        _ => None,
    }
}

/// Every answer aside in: what they say about the turn, for its judging.
pub(crate) fn asides_answered(
    answers: &[(Aside, Option<f64>)],
    specs: &[ToolSpec],
    leanings: &Leanings,
) -> Answered {
    tool_fit::best(answers, specs, leanings)
}

/// What the checks see of a turn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnContext<'a> {
    /// The person's question that started the run.
    pub question: &'a str,
    /// What the person and the tools said in the run ([`Evidence`]).
    pub said: &'a Evidence,
    /// The tools on offer.
    pub specs: &'a [ToolSpec],
    /// The model's reply, with its per-token probabilities when the server gave them.
    pub reply: &'a ChatReply,
    /// The thresholds calls are declined by; `None`: decide as the model did.
    pub thresholds: Option<&'a Thresholds>,
    /// The model's answers to the fit question about the call's tool ([`tool_fit`]),
    /// once asked; `None` before, or when the server gave no probabilities.
    pub fit: Option<tool_fit::Fit>,
    /// The tool the fit answer is about (of a turn of several tools: the one that fit best).
    pub fit_tool: Option<&'a str>,
    /// The person's own messages in this run: the question and any answers to questions
    /// back, never tool results nor toolloop's feedback.
    pub person: &'a [&'a str],
    /// The calls of this run that came back, in order; empty before the first result.
    pub earlier: &'a [Earlier<'a>],
    /// The tools of this turn called with a required value nobody said
    /// ([`tool_fit::unsaid`]).
    pub unsaid: &'a [String],
    /// The tools of this turn called with the person's own numbers and nothing else
    /// ([`tool_fit::own_numbers`]).
    pub own_numbers: &'a [String],
    /// The tools of this turn called with a required value that is the description's
    /// example, which the request does not hold (a word in another script than the
    /// request's counted as unsaid), each with the example
    /// ([`example_copy::described_copies`]).
    pub examples: &'a [(String, String)],
    /// Whether the turn is past asking again: it answers being asked again (for more
    /// calls, or among the tools that share the request's words), or its schema can hold
    /// no call more. It is carried out as it comes, call by call.
    pub again: bool,
    /// Whether the turn answers being asked again among the tool the model reached for
    /// ([`leaned_tool`]). That asking chose a tool, not how many calls: the turn may still
    /// be asked for more (a request for two cities' weather), and is not asked again
    /// for its tool.
    pub leaned: bool,
    /// Whether the turn answers being asked again among the tools whose text shares a
    /// word with the request (a declined call's `instead`): those words chose what was
    /// on offer, so they are no evidence for the call ([`tool_fit`] asks it all the same).
    pub offered_by_words: bool,
    /// Where the turn answers being asked for more calls ([`more_calls`]): how many calls
    /// the turn before made. The calls from there on are the ones the asking added.
    pub added_from: Option<usize>,
    /// The numbers the request wrote that the turn's first calls (those before
    /// `added_from`, else all) left out while carrying some of its others
    /// ([`numbers_left::left`]).
    pub left: &'a [f64],
    /// The tools on offer whose calls change something, by the person's settings or the
    /// tool's own hints (every class but read-only): a call to one needs the model's
    /// answer to the fit question however sure it was ([`tool_fit`]).
    pub writes: &'a [String],
}

/// What the checks see of a final answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AnswerContext<'a> {
    /// The answer's text.
    pub content: &'a str,
    /// What the person and the tools said in the run ([`Evidence`]).
    pub said: &'a Evidence,
    /// The calls of this run that came back, in order.
    pub earlier: &'a [Earlier<'a>],
    /// The run's system prompt, where its history begins with one.
    pub system: Option<&'a str>,
    /// The person's own messages in the run.
    pub person: &'a [&'a str],
    /// The tools on offer.
    pub specs: &'a [ToolSpec],
}

/// How a final answer is refused: the model is asked again for an answer (only an
/// answer: it chose to answer), on the history changed as this says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// Why, in the check's words.
    pub why: String,
    /// The system prompt for the rest of the run, where the answer copied something of
    /// it that is taken out.
    pub prompt: Option<String>,
    /// What the model is told after its answer, which stays in the history; `None`: the
    /// answer is dropped and the model asked again on the history as it was.
    pub told: Option<String>,
}

/// [`tool_probability::name_share`] and [`tool_probability::name_leaning`] over the
/// names of the tools on offer, read together into `judgement`.
fn read_names(ctx: &TurnContext<'_>, judgement: &mut Judgement) {
    let names: Vec<&str> = ctx.specs.iter().map(|s| s.name.as_str()).collect();
    judgement.p_name = tool_probability::name_share(ctx.reply, &names);
    judgement.name_leaning = tool_probability::name_leaning(ctx.reply, &names);
}

/// `value < bar` for a decline line, with the fewest decimals ([`places`]) that show the
/// one below the other: a call declined at p 0.9989 against a bar of 0.999 read
/// "p 1.00 < 1.00" with two.
pub(crate) fn below(value: f64, bar: f64) -> String {
    let d = places(value, bar);
    format!("{value:.d$} < {bar:.d$}")
}

/// The fewest decimals, two to six, at which `value` and `bar` read apart and a bar under
/// 1 does not read as 1 (a "sure" level of 0.99999 read "p 0.99 < 1.00"); six where none
/// does. A line's terms that add up to `value` use them too.
pub(crate) fn places(value: f64, bar: f64) -> usize {
    (2..=6)
        .find(|&d| {
            let shown = format!("{bar:.d$}");
            format!("{value:.d$}") != shown && (bar >= 1.0 || shown.parse::<f64>() != Ok(1.0))
        })
        .unwrap_or(6)
}

/// One call under check: its tool, its arguments and its place in the turn.
#[derive(Debug)]
pub(crate) struct CallUnderCheck<'a> {
    /// The tool's spec.
    pub spec: &'a ToolSpec,
    /// The arguments as the model wrote them.
    pub arguments: &'a Map<String, Value>,
    /// Its place among the turn's calls.
    pub index: usize,
}

/// What the turn-level checks found out about a call, for the [`Finding::Decision`].
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Judgement {
    /// The model's share of probability for calling a tool, once read.
    pub p_tool: Option<f64>,
    /// How much of the question the tool's own text covers.
    pub support: Option<f64>,
    /// The fit of the call ([`tool_fit::Fit::score`]), when the question was asked.
    pub fit: Option<f64>,
    /// Whether the call's values are the person's own numbers and nothing else
    /// ([`tool_fit::own_numbers`]): evidence for it, as shared words are.
    pub own_numbers: bool,
    /// Why the call was declined, with the figures and thresholds (`p 0.42 < 0.50`).
    pub reason: Option<String>,
    /// Whether the call is declined.
    pub declined: bool,
    /// The check that declined it.
    pub by: Option<&'static str>,
    /// The tools the model should choose among instead (none: answer).
    pub instead: Vec<String>,
    /// For a turn of several calls: the model's share of probability for several rather
    /// than one ([`tool_probability::several_share`]).
    pub p_several: Option<f64>,
    /// The model's share of probability for the names of the tools on offer, where its
    /// first call's tool name begins ([`tool_probability::name_share`]).
    pub p_name: Option<f64>,
    /// Where the rest of that probability went: the likeliest name's beginning no tool on
    /// offer has ([`tool_probability::name_leaning`]).
    pub name_leaning: Option<tool_probability::Leaning>,
    /// For a turn of several calls: the model's share for one more call where it closed
    /// the list ([`tool_probability::more_share`]).
    pub p_more: Option<f64>,
    /// Whether the model is asked again for one call more ([`more_calls`]).
    pub more: bool,
    /// The check that asked for one call more, when not `more-calls`.
    pub more_by: Option<&'static str>,
    /// The request's numbers the calls left out, when [`numbers_left`] asked: the calls
    /// the asking adds are held to them.
    pub more_left: Vec<f64>,
    /// Whether the call was declined on the run's own record ([`nothing_new`]) rather
    /// than on the model's figures against thresholds.
    pub on_record: bool,
    /// Whether the call copied toolloop's own prompt (its example): the model is asked
    /// again with the example taken out of the prompt.
    pub copied_prompt: bool,
    /// Whether `instead` is the tool the model reached for ([`leaned_tool`]), not the
    /// tools that share the request's words: its choice, so a call among them is judged
    /// as any other.
    pub leaned: bool,
}

impl Judgement {
    /// Declines the turn on the run's own record or toolloop's own text, not on the
    /// model's figures against thresholds: `by` the check, for `reason`.
    pub(crate) fn decline_on_record(&mut self, by: &'static str, reason: String) {
        self.declined = true;
        self.on_record = true;
        self.by.get_or_insert(by);
        self.reason = Some(reason);
    }
}

/// Something a check did, for the trace and the transcript.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Finding {
    /// The turn-level checks judged a call.
    Decision {
        /// The tool called.
        tool: String,
        /// What they found.
        judgement: Judgement,
    },
    /// A check acted on one call of the turn, by name of some of its arguments: held
    /// it back, or left some of its values out.
    OnCall {
        /// The check that acted.
        check: &'static str,
        /// The tool.
        tool: String,
        /// Its place among the turn's calls.
        index: usize,
        /// The arguments the action is about: the required ones whose values nobody gave
        /// (`more-calls`), the numbers the call leaves out (`numbers-left`), the optional
        /// ones left out (`unsure-optional`).
        arguments: Vec<String>,
        /// Why, in words, with the figures.
        why: String,
        /// What is done with the call.
        act: OnCall,
    },
}

impl Finding {
    /// `check` holds `call`: it is not run now, and the model reads `told` beside the
    /// other calls' results.
    pub(crate) fn hold(
        check: &'static str,
        call: &CallUnderCheck<'_>,
        arguments: Vec<String>,
        why: String,
        told: String,
    ) -> Self {
        Finding::OnCall {
            check,
            tool: call.spec.name.clone(),
            index: call.index,
            arguments,
            why,
            act: OnCall::Hold { told },
        }
    }
}

/// What a check does with one call ([`Finding::OnCall`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OnCall {
    /// Not run now: the model is told this beside the other calls' results.
    Hold {
        /// What the model is told in place of its result.
        told: String,
    },
    /// Run without the arguments named.
    LeaveOut,
}

/// What the engine does with a turn after the checks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Carry the calls out, as the checks left them.
    Go,
    /// Do not call: ask the model again among these tools (none: for an answer).
    Decline {
        /// The tools to choose among.
        instead: Vec<String>,
        /// The call copied the prompt's example: it is taken out of the prompt for the
        /// rest of the run.
        copied_prompt: bool,
        /// `instead` is the tool the model reached for ([`Judgement::leaned`]).
        leaned: bool,
    },
    /// Do not call yet: ask the model again for at least this many calls.
    More {
        /// The fewest calls the turn asked again may carry.
        at_least: usize,
        /// The model's share for one more call, where it closed its list.
        p_more: f64,
        /// The check that asked.
        by: &'static str,
        /// The request's numbers the calls left out (`numbers-left`; empty otherwise).
        left: Vec<f64>,
    },
    /// Do not call: ask the person for these arguments of this tool.
    Ask {
        /// The check that asks.
        check: &'static str,
        /// The tool.
        tool: String,
        /// The arguments nobody gave.
        missing: Vec<String>,
    },
}

/// One check. Every hook has a default that does nothing, so a check implements only the
/// stage it works at.
pub(crate) trait Check: Sync {
    /// Its declaration.
    fn info(&self) -> &'static CheckInfo;

    /// A watcher for the reply as it streams, if the check works there.
    fn watch(&self) -> Option<Box<dyn StreamWatch>> {
        None
    }

    /// Whether the check needs the model's answer to the fit question ([`tool_fit`])
    /// before it can judge this turn.
    fn wants_fit(&self, _ctx: &TurnContext<'_>, _tool: &str, _judgement: &mut Judgement) -> bool {
        false
    }

    /// Judges a turn by all of its calls, before anything else about it (and before the
    /// fit question).
    fn judge_calls(
        &self,
        _ctx: &TurnContext<'_>,
        _calls: &[(String, Map<String, Value>)],
        _judgement: &mut Judgement,
    ) {
    }

    /// Judges a turn that calls `tool` (the turn's first call stands for all of them).
    fn judge_turn(&self, _ctx: &TurnContext<'_>, _tool: &str, _judgement: &mut Judgement) {}

    /// Judges a final answer: how it is refused (the model is asked again for an answer),
    /// or `None`.
    fn judge_answer(&self, _ctx: &AnswerContext<'_>) -> Option<Refusal> {
        None
    }

    /// Whether it implements `judge_answer`, so that an answer's text is held while it
    /// streams where it could turn out to be what the check refuses.
    fn judges_answers(&self) -> bool {
        false
    }

    /// Judges one call: may hold it back (a [`Finding::OnCall`]), or return the arguments
    /// to ask the person for instead; never changes it.
    fn judge_call(
        &self,
        _ctx: &TurnContext<'_>,
        _call: &CallUnderCheck<'_>,
        _findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        None
    }
}

/// Every check, in the order they run.
pub(crate) static ALL: &[&dyn Check] = &[
    &looping_reply::LoopingReply,
    &nothing_new::NothingNew,
    &example_copy::ExampleCopy,
    &cut_number::CutNumber,
    &leaned_tool::LeanedTool,
    &tool_probability::ToolProbability,
    &tool_fit::ToolFit,
    &guessed_tool::GuessedTool,
    &more_calls::MoreCalls,
    &numbers_left::NumbersLeft,
    &invented_required::InventedRequired,
    &unsure_optional::UnsureOptional,
    &every_result::EveryResult,
];

/// The checks of a run: those of [`ALL`] that its [`CheckLevels`] leave on, in order.
#[derive(Clone)]
pub(crate) struct Checks {
    on: Vec<&'static dyn Check>,
}

impl std::fmt::Debug for Checks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.on.iter().map(|c| c.info().name))
            .finish()
    }
}

impl Checks {
    /// The checks `levels` leave on.
    pub fn new(levels: &CheckLevels) -> Self {
        Checks {
            on: ALL
                .iter()
                .copied()
                .filter(|c| levels.is_on(c.info().name))
                .collect(),
        }
    }

    /// The numbers of `question` that a turn of one call left out, where `numbers-left`
    /// is on to ask for them (empty otherwise).
    pub fn left_out(&self, question: &str, calls: &[(String, Map<String, Value>)]) -> Vec<f64> {
        let on = self
            .on
            .iter()
            .any(|c| c.info().name == numbers_left::INFO.name);
        if on {
            numbers_left::left(question, calls)
        } else {
            Vec::new()
        }
    }

    /// The watchers for a streaming reply.
    pub fn watchers(&self) -> Vec<Box<dyn StreamWatch>> {
        self.on.iter().filter_map(|c| c.watch()).collect()
    }

    /// The first check on that refuses the final answer `content`, and why.
    pub fn judge_answer(&self, ctx: &AnswerContext<'_>) -> Option<(&'static str, Refusal)> {
        self.on
            .iter()
            .find_map(|c| c.judge_answer(ctx).map(|r| (c.info().name, r)))
    }

    /// Whether a check on judges answers, so that their text is held while it streams
    /// where it could turn out to be what such a check refuses
    /// ([`crate::turn::answer_stream::AnswerStream::holding_example`]).
    pub fn judges_answers(&self) -> bool {
        self.on.iter().any(|c| c.judges_answers())
    }

    /// What the checks that judge a turn by all of its calls found: a judgement that
    /// declines it, or `None`.
    fn judge_calls(
        &self,
        ctx: &TurnContext<'_>,
        calls: &[(String, Map<String, Value>)],
    ) -> Option<Judgement> {
        let mut judgement = Judgement::default();
        for c in &self.on {
            c.judge_calls(ctx, calls, &mut judgement);
        }
        judgement.declined.then_some(judgement)
    }

    /// Whether a check declines the turn of `calls` whatever the model would answer to
    /// the fit question, so that the question need not be put.
    pub fn declines_calls(
        &self,
        ctx: &TurnContext<'_>,
        calls: &[(String, Map<String, Value>)],
    ) -> bool {
        self.judge_calls(ctx, calls).is_some()
    }

    /// Whether a check on needs the fit question answered before it judges a turn
    /// (unless it is answered already).
    pub fn wants_fit(&self, ctx: &TurnContext<'_>, tool: &str) -> bool {
        let mut judgement = Judgement::default();
        ctx.fit.is_none()
            && self
                .on
                .iter()
                .any(|c| c.wants_fit(ctx, tool, &mut judgement))
    }

    /// Judges a turn's calls: the checks that judge the turn by all of its calls (a
    /// decline there is the verdict), the turn-level checks on the tool that stands for
    /// the turn ([`support::turn_tool`]; neither when `judge_turn` is false: only an answer was
    /// allowed), then each call's checks in the order of the calls. Stops at the first
    /// verdict that is not [`Verdict::Go`].
    pub fn judge(
        &self,
        ctx: &TurnContext<'_>,
        calls: &[(String, Map<String, Value>)],
        judge_turn: bool,
    ) -> (Vec<Finding>, Verdict) {
        let mut findings = Vec::new();
        let turn = support::turn_tool(ctx, calls).filter(|_| judge_turn);
        if let Some(tool) = &turn
            && let Some(mut judgement) = self.judge_calls(ctx, calls)
        {
            judgement.p_tool = tool_probability::tool_share(ctx.reply);
            read_names(ctx, &mut judgement);
            let tool = tool.clone();
            let verdict = Verdict::Decline {
                instead: judgement.instead.clone(),
                copied_prompt: judgement.copied_prompt,
                leaned: judgement.leaned,
            };
            findings.push(Finding::Decision { tool, judgement });
            return (findings, verdict);
        }
        if let Some(tool) = &turn {
            // Read first: `tool-fit` holds a call the model named without choosing it
            // to a higher score.
            let mut judgement = Judgement::default();
            read_names(ctx, &mut judgement);
            for c in &self.on {
                c.judge_turn(ctx, tool, &mut judgement);
            }
            let declined = judgement.declined || !judgement.instead.is_empty();
            let instead = judgement.instead.clone();
            let copied_prompt = judgement.copied_prompt;
            let leaned = judgement.leaned;
            let more = judgement.more;
            let more_by = judgement.more_by;
            let left = std::mem::take(&mut judgement.more_left);
            judgement.p_several = tool_probability::several_share(ctx.reply);
            // Read once: `more-calls`, when on, has read it already.
            if judgement.p_more.is_none() {
                judgement.p_more = tool_probability::more_share(ctx.reply);
            }
            let p_more = judgement.p_more.unwrap_or(0.0);
            if judgement.p_tool.is_some() || declined {
                findings.push(Finding::Decision {
                    tool: tool.clone(),
                    judgement,
                });
            }
            if declined {
                return (
                    findings,
                    Verdict::Decline {
                        instead,
                        copied_prompt,
                        leaned,
                    },
                );
            }
            if more {
                let at_least = calls.len() + 1;
                let by = more_by.unwrap_or(more_calls::INFO.name);
                return (
                    findings,
                    Verdict::More {
                        at_least,
                        p_more,
                        by,
                        left,
                    },
                );
            }
        }
        for (index, (tool, arguments)) in calls.iter().enumerate() {
            let Some(spec) = ctx.specs.iter().find(|s| s.name == *tool) else {
                continue;
            };
            let call = CallUnderCheck {
                spec,
                arguments,
                index,
            };
            for c in &self.on {
                if let Some(missing) = c.judge_call(ctx, &call, &mut findings) {
                    let tool = tool.clone();
                    let check = c.info().name;
                    return (
                        findings,
                        Verdict::Ask {
                            check,
                            tool,
                            missing,
                        },
                    );
                }
            }
        }
        (findings, Verdict::Go)
    }
}

impl Default for Checks {
    fn default() -> Self {
        Checks::new(&CheckLevels::default())
    }
}
