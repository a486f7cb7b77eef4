//! The loop as a small state machine that does no I/O (rig's pattern).
//!
//! [`Engine::next_step`] says what to do — call the model, call a tool, ask the person, or stop
//! — and the caller feeds the result back ([`Engine::model_replied`],
//! [`Engine::tool_returned`], [`Engine::user_answered`]). The blocking driver in
//! [`crate::run::orchestrator`] is a short loop around it; tests drive it with no model and
//! no socket.
//!
//! The rules it keeps, in the order a run meets them:
//! - every reply is repaired and checked against the schema; an invalid one goes back to
//!   the model with the reason, at most `max_invalid_retries` times in a row;
//! - the schema is narrowed to the tools still available, and on the last iteration (or
//!   after a call repeated `max_repeats` times) only `final_answer`/`clarify` are allowed;
//! - a call identical to an earlier one is answered from the earlier result ([`crate::run::memory`]),
//!   and a turn whose calls all brought results the model was already shown ends the
//!   calling: the next turn may only answer;
//! - a tool that fails for infrastructure reasons, or reports errors `max_tool_failures`
//!   times in a row, is declared unavailable and the model is told to answer without it
//!   (`tool_failure_degraded`);
//! - the history only grows, so the server's prompt cache is reused, except when it nears
//!   the context window ([`crate::run::feedback::ContextGuard`]).

use std::collections::BTreeSet;
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::checks::{Acted, Aside, CheckAction, Checks, Verdict};
use crate::config::Config;
use crate::message::{ChatReply, Message, StopReason, Usage};
use crate::run::budget::{Budget, Generated};
use crate::run::ending::Ending;
use crate::run::events::Event;
use crate::run::feedback::{self, ContextGuard};
use crate::run::memory::{CallKey, Failures, Repeats};
use crate::tool_spec::ToolSpec;
use crate::turn::Turn;
use crate::turn::placeholder::ANSWER_PLACEHOLDER;
use crate::turn::repair::Fix;
use crate::turn::schema::{CallSchema, Rejection};

/// The calls of `turn`, each its tool and arguments (none for an answer or a question).
fn calls_of(turn: &Turn) -> Vec<Call> {
    match turn {
        Turn::ToolCall {
            tool, arguments, ..
        } => vec![(tool.clone(), arguments.clone())],
        Turn::ToolCalls { calls, .. } => calls
            .iter()
            .map(|c| (c.tool.clone(), c.arguments.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

/// What the caller should do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Send [`Engine::messages`] to the model with [`Engine::schema`].
    CallModel,
    /// Call this tool with these arguments; answer with [`Engine::tool_returned`].
    CallTool {
        /// The tool's name.
        tool: String,
        /// The arguments, already checked against the narrowed schema.
        arguments: Map<String, Value>,
    },
    /// Call these tools, side by side; answer with [`Engine::tools_returned`], the results
    /// in the same order.
    CallTools {
        /// Each call's tool and arguments, checked like a single call's.
        calls: Vec<(String, Map<String, Value>)>,
    },
    /// Put a check's question aside ([`Engine::aside`]) to the model, constrained to its
    /// schema and with log-probabilities; answer with [`Engine::aside_replied`]. Its text
    /// is not part of the run's history.
    AskAside,
    /// Ask the person; answer with [`Engine::user_answered`].
    AskUser {
        /// The model's question.
        question: String,
        /// The parameters it said are missing.
        missing_params: Vec<String>,
    },
    /// The run is over: see [`Engine::ending`].
    Done,
}

/// One action of the model, as recorded in the outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The model turn it belongs to (1-based).
    pub iteration: u32,
    /// The model's stated reason.
    pub thought: String,
    /// The tool called; `None` for an answer or a question.
    pub tool: Option<String>,
    /// The arguments of the call.
    pub arguments: Option<Map<String, Value>>,
    /// What the model was shown as the result; for an answer or a question, its text.
    pub observation: String,
    /// Whether the tool succeeded.
    pub ok: bool,
    /// Milliseconds the tool took (0 for a repeat answered from memory).
    pub ms: u64,
}

/// A tool and its arguments.
type Call = (String, Map<String, Value>);

/// One call of the turn being carried out.
#[derive(Debug)]
struct Pending {
    tool: String,
    arguments: Map<String, Value>,
    key: CallKey,
    /// Its entry in the steps.
    step: usize,
    /// The answer given without running the tool (a repeat, an unavailable tool), or
    /// the tool's result once it ran.
    answered: Option<(String, bool)>,
    ran: bool,
    /// Held back by a check: told to the model as an answer, shown as not run.
    held: bool,
}

/// Where the run is.
#[derive(Debug)]
enum State {
    /// The model is to be asked next (or the iterations are used up).
    Thinking,
    /// The calls of a turn are waiting for their results.
    Calling { calls: Vec<Pending> },
    /// A question is waiting for the person.
    Asking {
        question: String,
        missing_params: Vec<String>,
    },
    /// A turn of calls waits for the model's answers to the checks' questions aside
    /// before it is judged.
    AskingAside {
        reply: Box<ChatReply>,
        turn: Box<Turn>,
        repaired: bool,
        /// The questions still to ask, the next first.
        questions: Vec<Aside>,
        /// The answers so far, each as the check that asked read it.
        answers: Vec<(Aside, Option<f64>)>,
    },
    /// Over.
    Done(Ending),
}

/// The loop's state.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    checks: Checks,
    state: State,
    specs: Vec<ToolSpec>,
    unavailable: BTreeSet<String>,
    /// The first turn's schema, the one after results and the answer-only one.
    prepared: std::sync::Arc<Prepared>,
    /// What the next request may write.
    next: Next,
    /// The turn's calls a check held back: place, and what the model is told instead.
    held: Vec<(usize, String)>,
    guard: ContextGuard,
    history: Vec<Message>,
    run_start: usize,
    iterations: u32,
    invalid_streak: u32,
    /// Calls cut at the token limit so far: after the first, requests get twice the room
    /// (`num_predict`); a second ends the run.
    cut_calls: u32,
    repeats: Repeats,
    failures: Failures,
    steps: Vec<StepRecord>,
    events: Vec<Event>,
    usage: Usage,
    /// Requests and tokens so far; the driver adds the seconds.
    budget: Budget,
    /// The successful results shown to the model in this run.
    shown: BTreeSet<String>,
    /// Before or after the first results.
    stage: Stage,
    /// The language the answer is asked for in after results, and whether it was read
    /// off the question ([`crate::AnswerLanguage`]).
    answer_in: Option<(String, bool)>,
}

/// Where the run is in its calling: the schema of its turns follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// No result in yet: a turn may carry several calls.
    First,
    /// Results are in: one call per turn from now on ([`Engine::settle`]).
    AfterResults,
}

/// What the next model request may write, beside the stage's own schema.
#[derive(Debug)]
enum Next {
    /// The stage's schema.
    Stage,
    /// After a declined call: the tools that fit better (none: only an answer).
    Among {
        schema: CallSchema,
        /// Whether the request's words chose them; else the model's own leaning did
        /// (`leaned-tool`).
        by_words: bool,
    },
    /// A turn a check asked again for more calls, held to the schema given; the turn is
    /// carried out as it was if the reply fails.
    AskedAgain(Box<retry::AskedAgain>, CallSchema),
    /// Only an answer, for the rest of the run: calling brought nothing new, a call was
    /// repeated too often, or an answer was refused and asked for again.
    AnswerOnly,
}

impl Engine {
    /// Back to the stage's schema after a turn is carried out; an answer-only run stays so.
    fn next_as_stage(&mut self) {
        if !matches!(self.next, Next::AnswerOnly) {
            self.next = Next::Stage;
        }
    }

    /// Only an answer from now on.
    fn answer_only_from_now(&mut self) {
        self.next = Next::AnswerOnly;
    }

    /// The turn asked again for more calls that is waiting for its reply, taken out:
    /// the reply is judged against it, or it is carried out in the reply's stead.
    fn take_asked_again(&mut self) -> Option<retry::AskedAgain> {
        match std::mem::replace(&mut self.next, Next::Stage) {
            Next::AskedAgain(first, _) => Some(*first),
            other => {
                self.next = other;
                None
            }
        }
    }
}

impl Engine {
    /// A run over `history` (which holds the system prompt and any earlier turns) for
    /// `query`, with the tools in `specs`.
    #[cfg(test)]
    pub fn new(history: Vec<Message>, query: &str, specs: Vec<ToolSpec>, config: Config) -> Self {
        let prepared = std::sync::Arc::new(Prepared::new(&specs, &config));
        Self::with_schema(history, query, specs, config, prepared)
    }

    /// Like [`Engine::new`], with what depends only on `specs` and `config` prepared once
    /// for every run over one catalogue (building the schemas compiles validators).
    pub fn with_schema(
        mut history: Vec<Message>,
        query: &str,
        specs: Vec<ToolSpec>,
        config: Config,
        prepared: std::sync::Arc<Prepared>,
    ) -> Self {
        let run_start = history.len();
        history.push(Message::user(query));
        let answer_in = config.answer_language.for_question(query);
        Engine {
            guard: ContextGuard::new(config.options.num_ctx),
            checks: Checks::new(&config.checks),
            config,
            state: State::Thinking,
            specs,
            unavailable: BTreeSet::new(),
            prepared,
            next: Next::Stage,
            held: Vec::new(),
            history,
            run_start,
            iterations: 0,
            invalid_streak: 0,
            cut_calls: 0,
            repeats: Repeats::default(),
            failures: Failures::default(),
            steps: Vec::new(),
            events: Vec::new(),
            usage: Usage::default(),
            budget: Budget::default(),
            shown: BTreeSet::new(),
            stage: Stage::First,
            answer_in,
        }
    }

    /// The language the answer is asked for in after results, and whether it was read
    /// off the question: said once as the run starts ([`Event::AnswerLanguage`]).
    pub fn answer_language(&self) -> Option<&(String, bool)> {
        self.answer_in.as_ref()
    }

    /// What to do now.
    pub fn next_step(&mut self) -> Step {
        match &self.state {
            State::Done(_) => Step::Done,
            State::Calling { calls } => {
                let mut run: Vec<Call> = calls
                    .iter()
                    .filter(|c| c.answered.is_none())
                    .map(|c| (c.tool.clone(), c.arguments.clone()))
                    .collect();
                match run.len() {
                    1 => {
                        let (tool, arguments) = run.remove(0);
                        Step::CallTool { tool, arguments }
                    }
                    _ => Step::CallTools { calls: run },
                }
            }
            State::AskingAside { .. } => Step::AskAside,
            State::Asking {
                question,
                missing_params,
            } => Step::AskUser {
                question: question.clone(),
                missing_params: missing_params.clone(),
            },
            State::Thinking if self.iterations >= self.config.max_iterations => {
                self.state = State::Done(Ending::MaxIterations {
                    iterations: self.iterations,
                });
                Step::Done
            }
            State::Thinking => {
                if let Some(message) = self.guard.fit(&mut self.history) {
                    self.events.push(Event::Warning { message });
                }
                self.events.push(Event::ModelRequest {
                    iteration: self.iterations + 1,
                    messages: self.history.len(),
                    answer_only: self.answer_only(),
                });
                Step::CallModel
            }
        }
    }

    fn answer_only(&self) -> bool {
        matches!(self.next, Next::AnswerOnly) || self.iterations + 1 >= self.config.max_iterations
    }

    /// The schema for the next model request.
    pub fn schema(&self) -> &CallSchema {
        match (&self.next, self.stage) {
            _ if self.answer_only() => &self.prepared.answer,
            (Next::Among { schema, .. } | Next::AskedAgain(_, schema), _) => schema,
            (_, Stage::AfterResults) => self.prepared.after_results(),
            (_, Stage::First) => &self.prepared.first,
        }
    }

    /// The history to send.
    pub fn messages(&self) -> &[Message] {
        &self.history
    }

    /// Feeds the model's reply back.
    pub fn model_replied(&mut self, reply: &ChatReply) {
        self.usage.add(&reply.usage);
        let generated = Generated::of_turn(reply);
        self.budget.requested(&reply.usage, generated);
        self.events.push(Event::ModelReply {
            text: reply.text.clone(),
            stop: reply.stop,
            usage: reply.usage,
            ms: reply.timings.total.as_millis() as u64,
            generated,
        });
        if let Some(message) = self.guard.check(&reply.usage) {
            self.events.push(Event::Warning { message });
        }
        // Asked again for more calls: a reply that fails leaves the turn before it.
        let mut parsed = match Turn::parse(&reply.text) {
            Ok(p) => p,
            Err(e) => {
                return match self.take_asked_again() {
                    Some(first) => self.fall_back(first, e.to_string()),
                    None => self.invalid(&reply.text, reply.stop, Rejection::NotATurn(e)),
                };
            }
        };
        if !parsed.fixes.is_empty() {
            let fixes = parsed.fixes.to_vec().into_iter().map(|f| f.to_string());
            self.events.push(Event::Repaired {
                fixes: fixes.collect(),
            });
        }
        if let Turn::FinalAnswer { content, .. } = &mut parsed.turn
            && let Some(own) = feedback::before_instruction(content, &self.history)
        {
            let dropped = content.len() - own.len();
            *content = own.to_string();
            self.events.push(Event::Repaired {
                fixes: vec![format!(
                    "ended the answer before the instruction of toolloop's it wrote back ({dropped} bytes dropped)"
                )],
            });
        }
        let rejected =
            (self.schema().check(&parsed.turn).err()).or_else(|| feedback::echoed(&parsed.turn));
        // A reply stopped before its end (the token limit, a loop) and closed by the
        // repairer is cut, and so is a call that was still open there: what the repairer
        // closed is not what the model wrote.
        let cut = reply.stop != StopReason::Finished
            && parsed.fixes.contains(Fix::Truncated)
            && retry::cut_inside_a_call(&reply.text, &parsed.turn);
        if (rejected.is_some() || cut)
            && let Some(first) = self.take_asked_again()
        {
            let error = rejected.map_or("the reply was cut at the token limit".into(), |r| {
                r.to_string()
            });
            return self.fall_back(first, error);
        }
        if let Some(rejection) = rejected {
            // A valid call on the last iteration is not a format error: the iterations
            // are used up (`MaxIterationsReached` for `run_loop`).
            let last = self.iterations + 1 >= self.config.max_iterations;
            let valid =
                !rejection.ends_the_run() && self.prepared.first.check(&parsed.turn).is_ok();
            if last && !matches!(self.next, Next::AnswerOnly) && valid {
                self.iterations += 1;
                let iterations = self.iterations;
                self.state = State::Done(Ending::MaxIterations { iterations });
            } else {
                self.invalid(&reply.text, reply.stop, rejection);
            }
            return;
        }
        if cut && let Some(tool) = first_tool(&parsed.turn) {
            return self.cut_call(&reply.text, tool, reply.stop);
        }
        let mut turn = parsed.turn;
        if reply.stop == StopReason::Stopped
            && let Turn::FinalAnswer { content, .. } = &mut turn
            && let Some(whole) = retry::whole_sentences(content)
        {
            let dropped = content.len() - whole.len();
            *content = whole.to_string();
            self.events.push(Event::Repaired {
                fixes: vec![format!(
                    "ended the answer at its last whole sentence ({dropped} bytes of the sentence the loop began dropped)"
                )],
            });
        }
        self.accept(reply, turn, !parsed.fixes.is_empty(), None);
    }

    /// A turn that passed the schema: the checks judge its calls or its answer
    /// ([`crate::checks`]); then it goes into the history and is carried out.
    fn accept(
        &mut self,
        reply: &ChatReply,
        mut turn: Turn,
        repaired: bool,
        answered: Option<crate::checks::Answered>,
    ) {
        let answer = !matches!(turn, Turn::ToolCall { .. } | Turn::ToolCalls { .. });
        if answer && self.refuse_answer(&reply.text, &turn) {
            return;
        }
        let mut calls = calls_of(&turn);
        let mut verdict = Verdict::Go;
        // A turn asked for again is judged against the one it extends, once.
        let asked = self.take_asked_again();
        if !calls.is_empty() {
            match self.judge(reply, turn, repaired, &calls, asked.as_ref(), answered) {
                Some((back, v)) => (turn, verdict) = (back, v),
                None => return,
            }
            // As the checks left them: a check may have left optional values out.
            calls = calls_of(&turn);
        }
        self.carry_out(reply, turn, repaired, calls, verdict);
    }

    /// A turn the checks let through (`calls` as they left them): into the history, and
    /// carried out.
    fn carry_out(
        &mut self,
        reply: &ChatReply,
        turn: Turn,
        repaired: bool,
        calls: Vec<Call>,
        verdict: Verdict,
    ) {
        let thought = turn.thought().to_string();
        self.invalid_streak = 0;
        self.next_as_stage();
        self.iterations += 1;
        let text = self.history_text(reply, &turn, repaired);
        self.history.push(Message::assistant(text));
        match turn {
            Turn::FinalAnswer { thought, content } => {
                let truncated = reply.stop == StopReason::Length;
                if truncated {
                    self.events.push(Event::Warning {
                        message: "the answer was cut at the token limit; raise num_predict".into(),
                    });
                }
                self.record(thought, None, content.clone(), true);
                self.state = State::Done(Ending::Answer {
                    content,
                    degraded: !self.unavailable.is_empty(),
                    truncated,
                });
            }
            Turn::Clarify {
                thought,
                question,
                missing_params,
            } => self.ask(thought, question, missing_params),
            Turn::ToolCall { .. } | Turn::ToolCalls { .. } => match verdict {
                Verdict::Ask {
                    check,
                    tool,
                    missing,
                } => self.ask_instead(thought, check, tool, missing),
                _ => {
                    let held = std::mem::take(&mut self.held);
                    self.tool_calls(thought, calls, held)
                }
            },
        }
    }

    /// A turn as it goes into the history: the model's own text whenever it is JSON, so
    /// the server's cache holds all of it; text that is not JSON (cut, a template token)
    /// goes back in the canonical form.
    fn history_text(&self, reply: &ChatReply, turn: &Turn, repaired: bool) -> String {
        match !repaired || serde_json::from_str::<IgnoredAny>(&reply.text).is_ok() {
            true => reply.text.clone(),
            false => self.config.decide.canonical(turn),
        }
    }

    fn ask(&mut self, thought: String, question: String, missing_params: Vec<String>) {
        self.record(thought, None, question.clone(), true);
        self.events.push(Event::Clarify {
            question: question.clone(),
            missing_params: missing_params.clone(),
        });
        self.state = State::Asking {
            question,
            missing_params,
        };
    }

    /// A call with invented required values becomes the question for them; the history
    /// shows the question, so the model resumes from it with the person's answer.
    fn ask_instead(
        &mut self,
        thought: String,
        check: &'static str,
        tool: String,
        invented: Vec<String>,
    ) {
        let question = feedback::ask_for(&tool, &invented);
        self.events.push(Event::from(Acted {
            check,
            why: format!("{} not given by the person", invented.join(", ")),
            action: CheckAction::AskPerson {
                tool,
                arguments: invented.clone(),
            },
        }));
        let turn = Turn::Clarify {
            thought: thought.clone(),
            question: question.clone(),
            missing_params: invented.clone(),
        };
        if let Some(last) = self.history.last_mut() {
            *last = Message::assistant(self.config.decide.canonical(&turn));
        }
        self.ask(thought, question, invented);
    }

    fn record(&mut self, thought: String, call: Option<Call>, observation: String, ok: bool) {
        let (tool, arguments) = call.unzip();
        let iteration = self.iterations;
        self.steps.push(StepRecord {
            iteration,
            thought,
            tool,
            arguments,
            observation,
            ok,
            ms: 0,
        });
    }

    /// Ends the run at `calls`, for the caller to run ([`Ending::ToolCalls`]): the turn's
    /// calls as the checks let them through, none of them run here.
    pub(crate) fn hand_back(&mut self, calls: Vec<Call>) {
        self.state = State::Done(Ending::ToolCalls { calls });
    }

    /// Feeds the person's answer to a clarifying question back; `None` (nobody to ask,
    /// or no answer) ends the run with the question.
    pub fn user_answered(&mut self, answer: Option<String>) {
        let State::Asking {
            question,
            missing_params,
        } = std::mem::replace(&mut self.state, State::Thinking)
        else {
            return;
        };
        match answer {
            Some(a) => {
                self.events.push(Event::ClarifyAnswer { answer: a.clone() });
                self.history.push(Message::user(a));
            }
            None => {
                self.state = State::Done(Ending::Clarify {
                    question,
                    missing_params,
                })
            }
        }
    }

    /// The deadline (a run limit of `limit`) passed: end the run, unless it already ended.
    pub fn timed_out(&mut self, limit: Duration) {
        if !matches!(self.state, State::Done(_)) {
            self.state = State::Done(Ending::Timeout {
                limit_ms: limit.as_millis() as u64,
            });
        }
    }

    /// The person stopped the run.
    pub fn cancelled(&mut self) {
        if !matches!(self.state, State::Done(_)) {
            self.state = State::Done(Ending::Cancelled);
        }
    }

    /// A guardrail stopped the run.
    pub fn block(&mut self, reason: String) {
        self.state = State::Done(Ending::Blocked { reason });
    }

    fn invalid(&mut self, raw: &str, stop: StopReason, rejection: Rejection) {
        self.invalid_streak += 1;
        let error = rejection.to_string();
        // Once: the prompt shows no placeholder after this. Told what to write instead,
        // Gemma 3 270M wrote it again every time; shown none, it wrote an answer.
        if matches!(rejection, Rejection::Placeholder)
            && self.change_prompt(crate::turn::prompt::without_placeholder)
        {
            let error = format!(
                "the answer was the prompt's placeholder, \"{ANSWER_PLACEHOLDER}\", written \
                 back; asked again with no text to copy in the prompt's answer form"
            );
            let attempt = self.invalid_streak;
            self.events.push(Event::Invalid { error, attempt });
            return;
        }
        // Told what to write instead, Gemma 3 270M wrote the placeholder again 49 times of
        // 49: asking again would only cost the requests.
        let hopeless = rejection.ends_the_run();
        if !hopeless {
            let attempt = self.invalid_streak;
            let error = error.clone();
            self.events.push(Event::Invalid { error, attempt });
        }
        if hopeless || self.invalid_streak > self.config.max_invalid_retries {
            self.state = State::Done(Ending::InvalidReplies { detail: error });
        } else {
            self.history
                .extend(feedback::invalid_reply(raw, stop, &error));
        }
    }

    /// Events since the last call, in order.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// How the run ended, once [`Step::Done`].
    pub fn ending(&self) -> Option<&Ending> {
        match &self.state {
            State::Done(e) => Some(e),
            _ => None,
        }
    }

    /// Model turns used.
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The steps so far.
    pub fn steps(&self) -> &[StepRecord] {
        &self.steps
    }

    /// Token usage so far.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Model requests and tokens so far, by what they were spent on (the seconds are the
    /// driver's to add).
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// The whole history and the index where this run's part begins.
    pub fn into_history(self) -> (Vec<Message>, usize) {
        (self.history, self.run_start)
    }
}

/// The schema narrowed to the tools `keep` names.
fn schema_of(specs: &[ToolSpec], keep: impl Fn(&str) -> bool, config: &Config) -> CallSchema {
    let kept: Vec<ToolSpec> = specs.iter().filter(|s| keep(&s.name)).cloned().collect();
    CallSchema::deciding_calls(
        &kept,
        config.narrowing,
        config.decide,
        config.max_calls_per_turn,
    )
}

mod calls;
pub(crate) use calls::Prepared;
mod decide;
mod retry;

#[cfg(test)]
mod tests;

/// The tool of a turn's first call, if it calls one.
fn first_tool(turn: &Turn) -> Option<String> {
    match turn {
        Turn::ToolCall { tool, .. } => Some(tool.clone()),
        Turn::ToolCalls { calls, .. } => calls.first().map(|c| c.tool.clone()),
        _ => None,
    }
}
