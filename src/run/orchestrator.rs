//! The blocking driver around [`crate::run::engine::Engine`], and the public API: the
//! one-call [`run_loop`], the [`Orchestrator`] built with [`OrchestratorBuilder`] for the
//! full form, and a [`Conversation`] that keeps history across turns.
//!
//! The driver is a short loop: ask the engine what to do, do it (model, tool,
//! person) within what is left of the deadline, feed the result back, until done. How the
//! run ended is the engine's [`Ending`]; this module only adds the output guardrail and
//! the `stopped` event.

use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendError, ChatRequest, GenOptions, Message, keep_going};
use crate::checks::{CheckAction, Checks};
use crate::config::Config;
use crate::deadline::{Deadline, StopHandle};
use crate::run::budget::Budget;
use crate::run::ending::Ending;
use crate::run::engine::Prepared;
use crate::run::engine::{Engine, Step};
pub use crate::run::error::OrchestratorError;
use crate::run::events::{Event, Observer};
use crate::run::guardrails::{Guardrails, Verdict};
pub use crate::run::outcome::Outcome;
use crate::run::request::watched_chat;
use crate::tools::{Catalogue, ToolSpec};
use crate::turn::answer_stream::AnswerStream;
use crate::turn::call_stream::CallStream;

/// A round of calls a caller made and carried out before handing the run over
/// ([`Orchestrator::run_after_rounds`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Round {
    /// Each call's tool and arguments.
    pub calls: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
    /// Each call's result text and whether it succeeded, in the order of `calls`.
    pub results: Vec<(String, bool)>,
}

/// A model, its tools and the run's policies, ready to answer questions.
///
/// ```
/// use toolloop::{Orchestrator, Scripted, StopKind};
///
/// let model = Scripted::new([r#"{"kind": "final_answer", "thought": "", "content": "Hello!"}"#]);
/// let mut o = Orchestrator::builder().backend(model).build()?;
/// let outcome = o.run("Say hello")?;
/// assert_eq!(outcome.answer(), Some("Hello!"));
/// assert_eq!(outcome.stop_reason(), StopKind::Completed);
/// # Ok::<(), toolloop::OrchestratorError>(())
/// ```
pub struct Orchestrator {
    backend: Box<dyn Backend>,
    /// What each request is sent with ([`Config::request_options`]).
    options: GenOptions,
    specs: Vec<ToolSpec>,
    /// Shared by every run: a clone per run was a deep copy of each schema.
    prepared: std::sync::Arc<Prepared>,
    catalogue: std::sync::Arc<Catalogue>,
    config: Config,
    observers: Vec<Box<dyn Observer>>,
    clarify: Option<Box<dyn ClarifyHandler>>,
    /// Who is asked before a call that is not read-only runs.
    approver: Option<Box<dyn crate::Approver>>,
    /// The tools the person said "always" for in the run under way.
    always: std::collections::HashSet<String>,
    guardrails: Guardrails,
    prompt: String,
    preflight_done: bool,
    /// Whether [`Event::FamilyDefaults`] was said (or had nothing to say).
    family_said: bool,
    stop: StopHandle,
    /// The checks that watch each reply as it streams.
    checks: Checks,
    /// What the checks did in the run under way, for its [`Outcome::checks`].
    checked: Vec<Event>,
    /// The calls asked about in the run under way, for its [`Outcome::approvals`].
    approved: Vec<Event>,
    /// Whether calls are handed back to the caller ([`Ending::ToolCalls`]) instead of
    /// run: `toolloop proxy`'s client runs its own tools.
    pub(crate) hand_back: bool,
}

/// `levels` with each check's default for the model file `backend`'s server says it runs,
/// where it names one (else as they were): what a run turns on, and what `doctor` says.
pub(crate) fn served_levels(
    levels: &crate::CheckLevels,
    backend: &dyn crate::backend::Backend,
) -> crate::CheckLevels {
    let mut levels = levels.clone();
    if let Some(file) = crate::backend::served_file(backend) {
        levels.for_model(&file);
    }
    levels
}

impl Orchestrator {
    /// Checks now that the model server is up and has the model (otherwise done before
    /// the first run), so a conversation can say so before the person types; with no
    /// calibration of the person's own, takes the one toolloop ships for the model file
    /// the server names, if it measured that file ([`crate::Thresholds::shipped`]).
    pub fn preflight(&mut self, deadline: Deadline) -> Result<(), OrchestratorError> {
        if !self.preflight_done {
            self.backend
                .preflight(deadline)
                .map_err(|e| OrchestratorError::backend(e, Vec::new()))?;
            self.preflight_done = true;
        }
        self.find_shipped();
        self.follow_served_file();
        Ok(())
    }

    /// Takes the calibration toolloop ships for the model file the server runs
    /// ([`crate::Thresholds::shipped`]) where the settings hold none of the person's own;
    /// whether it did. Asked after the preflight, whose answer names the file (Ollama's
    /// `/api/show`, llama-server's `/props`), so it costs no request of its own there.
    fn find_shipped(&mut self) -> bool {
        let backend = self.backend.as_ref();
        (self.config.thresholds.as_mut()).is_some_and(|t| t.take_shipped(backend))
    }

    /// Each check's default from now on is the one for the family of the model file the
    /// server says it runs, where it names one: a Qwen that llama-server served while
    /// toolloop asked for its default name, `gemma3:4b`, ran with Gemma's defaults while
    /// its calibration, found by the same file, was Qwen's. The defaults that differ are
    /// said once ([`Event::FamilyDefaults`]), after the preflight: before it, a
    /// llama-server's file is not known.
    fn follow_served_file(&mut self) {
        let levels = served_levels(&self.config.checks, self.backend.as_ref());
        if levels != self.config.checks {
            self.checks = Checks::new(&levels);
            self.config.checks = levels;
        }
        if self.preflight_done && !self.family_said {
            self.family_said = true;
            if let Some((family, off)) = self.config.checks.off_for_family() {
                self.emit(&Event::FamilyDefaults {
                    family: family.to_string(),
                    off: off.iter().map(|c| c.to_string()).collect(),
                });
            }
        }
    }

    /// The system prompt every run starts from.
    pub fn system_prompt(&self) -> &str {
        &self.prompt
    }

    /// The tools.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// Stops the run in progress (and every later one: make a new orchestrator, or give
    /// each run its own handle with [`OrchestratorBuilder::stop_handle`]).
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// The settings runs use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Answers one question from a fresh history, within the configured timeout.
    pub fn run(&mut self, query: &str) -> Result<Outcome, OrchestratorError> {
        let deadline = Deadline::after(self.config.timeout);
        self.run_with_deadline(query, &[], deadline)
    }

    /// Answers one question after `earlier` turns (without the system prompt), within
    /// `deadline`. A model's ending (an answer, a question, a limit) is `Ok`; a failure
    /// of the model server or the tools is `Err`.
    pub fn run_with_deadline(
        &mut self,
        query: &str,
        earlier: &[Message],
        deadline: Deadline,
    ) -> Result<Outcome, OrchestratorError> {
        self.run_after_rounds(query, earlier, Vec::new(), deadline)
    }

    /// Like [`Orchestrator::run_with_deadline`], with `rounds` of calls for `query` that
    /// were made and carried out before (by `toolloop proxy`'s client): they go into the
    /// history as this run's own first turns ([`Engine::replay`]), and the run goes on
    /// from their results.
    pub(crate) fn run_after_rounds(
        &mut self,
        query: &str,
        earlier: &[Message],
        rounds: Vec<Round>,
        deadline: Deadline,
    ) -> Result<Outcome, OrchestratorError> {
        let started = Instant::now();
        self.checked.clear();
        self.approved.clear();
        self.always.clear();
        self.emit(&Event::RunStarted {
            query: query.to_string(),
            model: self.backend.describe(),
            tools: self.catalogue.names(),
        });
        // A blocked request is judged before the server is asked anything; any other
        // waits for the preflight, whose answer names the model file the run's
        // calibration and check defaults are read for, so the engine starts with them.
        let verdict = self.guardrails.check_input(query);
        if !matches!(verdict, Verdict::Block(_)) {
            self.preflight(deadline)?;
        }
        let mut history = Vec::with_capacity(earlier.len() + 8);
        history.push(Message::system(crate::turn::prompt::dated(
            &self.prompt,
            &self.specs,
            self.config.today.date(),
        )));
        history.extend_from_slice(earlier);
        let mut engine = Engine::with_schema(
            history,
            query,
            self.specs.clone(),
            self.config.clone(),
            self.prepared.clone(),
        );
        for round in rounds {
            engine.replay(round.calls, round.results);
        }
        // What replaying recorded (the calls, their results) was the caller's, not news.
        engine.drain_events();
        if let Some((language, detected)) = engine.answer_language() {
            self.emit(&Event::AnswerLanguage {
                language: language.clone(),
                detected: *detected,
            });
        }
        match verdict {
            Verdict::Pass => {}
            Verdict::Warn(w) => self.emit(&Event::Warning { message: w }),
            Verdict::Block(reason) => engine.block(reason),
        }
        let mut run = Run {
            deadline,
            started,
            limit: deadline.span().unwrap_or(self.config.timeout),
            waited: Waited::default(),
            early: EarlyCalls::new(&self.specs, &self.config.permissions),
            most_early: match self.config.early_calls {
                true => self.config.max_calls_per_turn as usize,
                false => 0,
            },
        };
        loop {
            if self.stop.is_stopped() {
                engine.cancelled();
            }
            let step = engine.next_step();
            self.flush(&mut engine);
            match step {
                Step::Done => break,
                Step::CallModel | Step::AskAside if deadline.is_expired() => {
                    engine.timed_out(run.limit)
                }
                Step::CallModel => self.ask_model(&mut engine, &mut run)?,
                Step::AskAside => self.ask_aside(&mut engine, &mut run),
                // One call is a list of one here: it may have been started early too.
                Step::CallTool { tool, arguments } => {
                    self.call_tools(vec![(tool, arguments)], &mut engine, &mut run)
                }
                Step::CallTools { calls } => self.call_tools(calls, &mut engine, &mut run),
                Step::AskUser {
                    question,
                    missing_params,
                } => self.ask_person(&mut engine, &mut run, &question, &missing_params),
            }
        }
        for e in run.early.let_go(true) {
            self.emit(&e);
        }
        Ok(self.finish(engine, started, &run.waited))
    }

    /// The model's turn: the request built from the engine's history and schema, the
    /// reply streamed (its calls started early, its answer shown as it comes), and the
    /// reply fed back. A server that fails ends the run with its error.
    fn ask_model(&mut self, engine: &mut Engine, run: &mut Run) -> Result<(), OrchestratorError> {
        // A turn asked again for more: the calls it made stand, so those of
        // tools that only read go off now, not once the reply streams them.
        for (tool, arguments) in engine.calls_standing() {
            let at = run.started.elapsed();
            let call = (tool.as_str(), arguments);
            if let Some(e) =
                run.early
                    .start(&self.catalogue, call, run.most_early, run.deadline, at)
            {
                self.emit(&e);
            }
        }
        // More room after a call was cut at the token limit.
        let options = GenOptions {
            num_predict: engine.num_predict().or(self.options.num_predict),
            prefill: engine.prefill(),
            answer_end: engine.schema().answer_end(),
            ..self.options.clone()
        };
        let request = ChatRequest {
            messages: engine.messages(),
            schema: Some(engine.schema().as_value()),
            options: &options,
        };
        let observers = &mut self.observers;
        let mut answer = match self.checks.judges_answers() {
            true => AnswerStream::holding_example()
                .holding_descriptions(self.specs.iter().map(|s| s.description.as_str())),
            false => AnswerStream::default(),
        };
        let mut written = CallStream::default();
        let mut shown = String::new();
        let stream_answer = !self.guardrails.may_block_output();
        let stop = &self.stop;
        let catalogue = &self.catalogue;
        let sink = |text: &str| {
            let mut events = vec![Event::ModelText {
                text: text.to_string(),
            }];
            let piece = answer.feed(text);
            if stream_answer && !piece.is_empty() {
                shown.push_str(&piece);
                events.push(Event::AnswerText { text: piece });
            }
            for call in written.feed(text) {
                events.push(Event::CallWritten {
                    tool: CallStream::tool(&call).unwrap_or_default().to_string(),
                    arguments: call.get("arguments").cloned().unwrap_or_default(),
                });
                let at = run.started.elapsed();
                events.extend(
                    run.early
                        .offer(catalogue, &call, run.most_early, run.deadline, at),
                );
            }
            for e in &events {
                observers.iter_mut().for_each(|o| o.event(e));
            }
            match stop.is_stopped() {
                true => std::ops::ControlFlow::Break(()),
                false => std::ops::ControlFlow::Continue(()),
            }
        };
        let asked = Instant::now();
        let replied = watched_chat(
            &mut self.backend,
            &request,
            run.deadline,
            &self.checks,
            sink,
        );
        run.waited.model += asked.elapsed();
        match replied {
            // A reply cut by the stop button is not read: repaired, half an
            // answer would pass for the answer.
            Ok(_) | Err(_) if self.stop.is_stopped() => engine.cancelled(),
            Ok((reply, found)) => {
                if let Some(l) = found {
                    self.emit(&Event::from(l.acted(reply.text.len())));
                }
                engine.model_replied(&reply);
                let events = self.flush(engine);
                let refused = events.iter().find_map(|e| match e {
                    Event::Check {
                        check,
                        action: CheckAction::RefuseAnswer { .. },
                        ..
                    } => Some(check.as_str()),
                    _ => None,
                });
                self.settle_answer(engine, &shown, refused);
            }
            Err(BackendError::Timeout { .. }) => engine.timed_out(run.limit),
            Err(e) => {
                self.flush(engine);
                for e in run.early.let_go(true) {
                    self.emit(&e);
                }
                let error = OrchestratorError::backend(e, engine.steps().to_vec());
                self.emit(&Event::Failed {
                    error: error.to_string(),
                });
                return Err(error);
            }
        }
        Ok(())
    }

    /// A check's question aside: asked constrained to its schema with log-probabilities,
    /// its reply fed back; a server that fails leaves the question unanswered.
    fn ask_aside(&mut self, engine: &mut Engine, run: &mut Run) {
        // The engine asks aside only with a question waiting; were none, it
        // goes on as with a question unanswered rather than asking again.
        let Some(aside) = engine.aside().cloned() else {
            engine.aside_replied(None);
            return;
        };
        let options = GenOptions {
            num_predict: Some(aside.num_predict),
            top_logprobs: Some(aside.top_logprobs),
            temperature: Some(0.0),
            aside: true,
            stop_once: Some(crate::backend::StopOnce(aside.stop_once)),
            ..self.options.clone()
        };
        let request = ChatRequest {
            messages: &aside.messages,
            schema: Some(&aside.schema),
            options: &options,
        };
        let asked = Instant::now();
        let replied = self.backend.chat(&request, run.deadline, &mut keep_going);
        run.waited.model += asked.elapsed();
        run.waited.aside += asked.elapsed();
        match replied {
            _ if self.stop.is_stopped() => engine.cancelled(),
            Ok(reply) => engine.aside_replied(Some(&reply)),
            Err(BackendError::Timeout { .. }) => engine.timed_out(run.limit),
            Err(e) => {
                let message = format!(
                    "{}'s question aside got no answer ({e}); {}",
                    aside.check, aside.unanswered
                );
                self.emit(&Event::Warning { message });
                engine.aside_replied(None);
            }
        }
    }

    /// The model's question to the person, and the answer fed back.
    fn ask_person(
        &mut self,
        engine: &mut Engine,
        run: &mut Run,
        question: &str,
        missing_params: &[String],
    ) {
        let asked = Instant::now();
        let answer = self
            .clarify
            .as_mut()
            .and_then(|h| h.ask(question, missing_params))
            .filter(|a| !a.trim().is_empty());
        run.waited.person += asked.elapsed();
        match self.stop.is_stopped() {
            true => engine.cancelled(),
            false => engine.user_answered(answer),
        }
    }

    /// Runs a turn's calls side by side, taking those already started early; or hands
    /// them back to a caller that runs its own tools.
    fn call_tools(
        &mut self,
        calls: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
        engine: &mut Engine,
        run: &mut Run,
    ) {
        if self.hand_back {
            return engine.hand_back(calls);
        }
        let (early, waited, deadline) = (&mut run.early, &mut run.waited, run.deadline);
        let called = Instant::now();
        let (taken, sent) = early.take(&calls);
        for e in early.let_go(false) {
            self.emit(&e);
        }
        // A call taken from early on went off when it was started.
        let now = run.started.elapsed();
        waited
            .first_call
            .get_or_insert(sent.map_or(now, |s| s.min(now)));
        let results = self.call_approved(&calls, taken, deadline, engine.messages());
        waited.tools += called.elapsed();
        // Recorded even when the deadline passed during the call, so the step shows how
        // long it took and why it failed.
        engine.tools_returned(results);
        if deadline.is_expired() {
            engine.timed_out(run.limit);
        }
        // The results are shown before the next step is chosen, so an observer that
        // stops the run on them (the eval's) stops it before another request is sent.
        self.flush(engine);
    }

    /// Runs the calls that may run, each in its place; one that may not comes back as
    /// a tool error saying so ([`crate::run::approval`]). A call of a tool that only
    /// reads is not asked about.
    fn call_approved(
        &mut self,
        calls: &[(String, serde_json::Map<String, serde_json::Value>)],
        mut taken: Vec<Option<crate::tools::Started>>,
        deadline: Deadline,
        history: &[crate::Message],
    ) -> Vec<(
        Result<crate::ToolResult, crate::ToolError>,
        std::time::Duration,
    )> {
        // For each call, what the gate said: it runs (without the values named, where
        // the person left some out), or the text the model is told of it not running.
        let mut gated: Vec<Result<Vec<String>, String>> = Vec::with_capacity(calls.len());
        // The calls as they will run: the person may have one run without values they
        // did not write.
        let mut calls = calls.to_vec();
        // Its own handle on the shared catalogue, so a spec is read in place while the
        // gate holds the approver.
        let catalogue = std::sync::Arc::clone(&self.catalogue);
        for (tool, arguments) in &mut calls {
            let Ok(spec) = catalogue.get(tool) else {
                gated.push(Ok(Vec::new()));
                continue;
            };
            let mut gate = Gate {
                permissions: &self.config.permissions,
                approver: self.approver.as_deref_mut(),
                always: &mut self.always,
            };
            // Read only where someone may be asked: a call of a tool that only reads is
            // not, and a run of many calls reads each request's words once a call.
            let unsaid = match self.config.permissions.reads_only(spec) {
                true => approval::Unsaid::default(),
                false => approval::Unsaid::of(spec, arguments, history),
            };
            let Some(d) = gate.decide(spec, arguments, &unsaid) else {
                gated.push(Ok(Vec::new()));
                continue;
            };
            let ((class, source), allowed, by) = (d.class, d.allowed, d.by);
            self.emit(&Event::Approval {
                tool: tool.clone(),
                arguments: arguments.clone(),
                class: class.to_string(),
                class_from: source,
                allowed,
                by,
                unsaid: unsaid.clone(),
                left_out: d.left_out.clone(),
            });
            // The model's call stays in the history as it wrote it; the tool's result is
            // that of the call as it ran, and says so (`ran_without`).
            if allowed && !d.left_out.is_empty() {
                *arguments = unsaid.without(arguments);
            }
            gated.push(match allowed {
                true => Ok(d.left_out),
                false => Err(approval::denied_text(tool, class, by)),
            });
        }
        taken.resize_with(calls.len(), || None);
        let (run, kept): (Vec<_>, Vec<_>) = calls
            .into_iter()
            .zip(taken)
            .zip(&gated)
            .filter(|(_, g)| g.is_ok())
            .map(|(c, _)| c)
            .unzip();
        let mut ran = self
            .catalogue
            .call_all_given(&run, kept, deadline, &self.stop)
            .into_iter();
        gated
            .into_iter()
            .map(|g| match g {
                Err(text) => (Ok(crate::ToolResult::err(text)), std::time::Duration::ZERO),
                Ok(left_out) => {
                    let (result, took) = ran.next().unwrap_or((
                        Err(crate::ToolError::Config(
                            "no result came back for this call".into(),
                        )),
                        std::time::Duration::ZERO,
                    ));
                    (result.map(|r| approval::ran_without(r, &left_out)), took)
                }
            })
            .collect()
    }

    fn emit(&mut self, event: &Event) {
        if event.check_line().is_some() {
            self.checked.push(event.clone());
        }
        if event.approval_line().is_some() {
            self.approved.push(event.clone());
        }
        self.observers.iter_mut().for_each(|o| o.event(event));
    }

    /// After each reply: makes the answer text shown as it streamed add up to the answer
    /// the engine took (an answer the stream could not decode, a repaired one, is given
    /// whole), or withdraws it when the reply was refused, so the person is never left
    /// with half an answer and no word why.
    fn settle_answer(&mut self, engine: &Engine, shown: &str, refused_by: Option<&str>) {
        if self.guardrails.may_block_output() {
            return;
        }
        let answer = match engine.ending() {
            Some(Ending::Answer { content, .. }) => content.as_str(),
            _ if shown.is_empty() => return,
            // A run that ends on it (toolloop's own words written back, the deadline): what
            // ended it is said next.
            ended => {
                let reason = match (ended, refused_by) {
                    (Some(_), _) => "the run ended without an answer".to_string(),
                    (None, Some(check)) => {
                        format!("{check} refused it; the model is asked for its answer again")
                    }
                    (None, None) => {
                        "the reply was not a valid answer; the model is asked again".to_string()
                    }
                };
                return self.emit(&Event::AnswerRetracted { reason });
            }
        };
        match answer.strip_prefix(shown) {
            Some("") => {}
            Some(rest) => self.emit(&Event::AnswerText {
                text: rest.to_string(),
            }),
            None => {
                self.emit(&Event::AnswerRetracted {
                    reason: "the repaired answer differs from the text shown".into(),
                });
                self.emit(&Event::AnswerText {
                    text: answer.to_string(),
                });
            }
        }
    }

    /// Emits the engine's events, and gives them back for what the caller reads in them.
    fn flush(&mut self, engine: &mut Engine) -> Vec<Event> {
        let events = engine.drain_events();
        for e in &events {
            self.emit(e);
        }
        events
    }

    /// The outcome of a finished engine, after the output guardrail, with the `stopped`
    /// event.
    fn finish(&mut self, mut engine: Engine, started: Instant, waited: &Waited) -> Outcome {
        self.flush(&mut engine);
        let iterations = engine.iterations();
        let mut ending = engine
            .ending()
            .cloned()
            .unwrap_or(Ending::MaxIterations { iterations });
        if let Some(answer) = ending.answer() {
            match self.guardrails.check_output(answer) {
                Verdict::Pass => {}
                Verdict::Warn(message) => self.emit(&Event::Warning { message }),
                Verdict::Block(reason) => ending = Ending::Blocked { reason },
            }
            // Held back while it was written (a guardrail could block it): shown now.
            if let (Some(text), true) = (ending.answer(), self.guardrails.may_block_output()) {
                self.emit(&Event::AnswerText {
                    text: text.to_string(),
                });
            }
        }
        let elapsed = started.elapsed();
        let budget = waited.budget(&engine, elapsed);
        self.emit(&Event::Stopped {
            stop_reason: ending.kind(),
            answer: ending.answer().map(str::to_string),
            message: ending.message(),
            iterations,
            ms: elapsed.as_millis() as u64,
            budget,
        });
        let steps = engine.steps().to_vec();
        let usage = engine.usage();
        let (history, delta_start) = engine.into_history();
        Outcome {
            ending,
            steps,
            iterations,
            history,
            delta_start,
            usage,
            elapsed,
            budget,
            checks: std::mem::take(&mut self.checked),
            approvals: std::mem::take(&mut self.approved),
        }
    }
}

/// The driver's own record of the run under way, beside the engine's: its clock, what it
/// waited for, and the calls started while a reply was still streaming.
struct Run {
    deadline: Deadline,
    started: Instant,
    /// The run's whole span, which an ending for want of time names.
    limit: Duration,
    waited: Waited,
    early: EarlyCalls,
    /// How many calls of a reply may start before it ends (0: none).
    most_early: usize,
}

/// The wall time a run spent waiting for others: the model, the tools, the person.
#[derive(Default)]
struct Waited {
    model: Duration,
    /// The part of `model` spent on questions aside.
    aside: Duration,
    tools: Duration,
    person: Duration,
    /// When the first tool call was sent off, from the run's start.
    first_call: Option<Duration>,
}

impl Waited {
    /// The run's budget: the engine's requests and tokens, these waits, and the rest of
    /// `elapsed` as toolloop's own time.
    fn budget(&self, engine: &Engine, elapsed: Duration) -> Budget {
        let ms = |d: Duration| d.as_millis() as u64;
        let mut b = engine.budget();
        (b.model_ms, b.tool_ms, b.person_ms) = (ms(self.model), ms(self.tools), ms(self.person));
        b.aside_ms = ms(self.aside);
        b.own_ms = ms(elapsed.saturating_sub(self.model + self.tools + self.person));
        b.first_call_ms = self.first_call.map(ms);
        b.first_calls = u32::from(self.first_call.is_some());
        b
    }
}

mod builder;
mod conversation;
mod early;
use crate::run::approval::{self, Gate};
pub use builder::{ClarifyHandler, OrchestratorBuilder, run_loop};
pub use conversation::Conversation;
use early::EarlyCalls;
