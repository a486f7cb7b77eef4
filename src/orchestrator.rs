//! The blocking driver around [`crate::engine::Engine`], and the public API: seed 003's
//! one-call [`run_loop`], the [`Orchestrator`] built with [`OrchestratorBuilder`] for the
//! full form, and a [`Conversation`] that keeps history across turns.
//!
//! The driver is seed 003's flow diagram: ask the engine what to do, do it (model, tool,
//! person) within what is left of the deadline, feed the result back, until done.

use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::ollama::Ollama;
use crate::backend::{Backend, BackendError, ChatRequest, GenOptions, Message, Usage};
use crate::deadline::Deadline;
use crate::engine::{End, Engine, Limits, Step, StepRecord};
use crate::events::{Event, Observer};
use crate::guardrails::{Guardrails, Verdict};
use crate::prompt::build_system_prompt;
use crate::schema::{CallSchema, Narrowing};
use crate::tools::{Catalogue, ToolError, ToolSetup, ToolSpec};

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopKind {
    /// The model answered.
    Completed,
    /// The model asked a question nobody answered.
    ClarificationNeeded,
    /// No answer within the iterations.
    MaxIterations,
    /// The deadline passed.
    Timeout,
    /// A tool became unavailable and the model answered without it.
    ToolFailureDegraded,
    /// A guardrail stopped the run.
    Blocked,
}

impl fmt::Display for StopKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopKind::Completed => "completed",
            StopKind::ClarificationNeeded => "clarification_needed",
            StopKind::MaxIterations => "max_iterations",
            StopKind::Timeout => "timeout",
            StopKind::ToolFailureDegraded => "tool_failure_degraded",
            StopKind::Blocked => "blocked",
        })
    }
}

/// What a run gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The answer, when the model gave one.
    pub answer: Option<String>,
    /// Why the run stopped.
    pub stop_reason: StopKind,
    /// The clarifying question, for `clarification_needed`.
    pub question: Option<String>,
    /// The parameters the model said are missing, for `clarification_needed`.
    pub missing_params: Vec<String>,
    /// Why a guardrail stopped the run, for `blocked`.
    pub blocked_reason: Option<String>,
    /// Every action of the model.
    pub steps: Vec<StepRecord>,
    /// Model turns used.
    pub iterations: u32,
    /// The whole history, system prompt first.
    pub history: Vec<Message>,
    /// Where this run's part of the history begins (seed 000's `history_delta` is
    /// `history[delta_start..]`).
    pub delta_start: usize,
    /// Token usage summed over the run.
    pub usage: Usage,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl Outcome {
    /// The part of the history this run added.
    pub fn history_delta(&self) -> &[Message] {
        &self.history[self.delta_start.min(self.history.len())..]
    }

    /// The answer, or the error seed 003 raises for each other ending.
    pub fn into_answer(self) -> Result<String, OrchestratorError> {
        match (self.stop_reason, self.answer) {
            (StopKind::Completed | StopKind::ToolFailureDegraded, Some(a)) => Ok(a),
            (StopKind::ClarificationNeeded, _) => Err(OrchestratorError::ClarificationNeeded {
                question: self.question.unwrap_or_default(),
                missing_params: self.missing_params,
                steps: self.steps,
            }),
            (StopKind::Timeout, _) => Err(OrchestratorError::Timeout {
                after: self.elapsed,
                steps: self.steps,
            }),
            (StopKind::Blocked, _) => Err(OrchestratorError::Blocked {
                reason: self.blocked_reason.unwrap_or_default(),
                steps: self.steps,
            }),
            _ => Err(OrchestratorError::MaxIterationsReached {
                iterations: self.iterations,
                steps: self.steps,
            }),
        }
    }
}

/// Why a run failed. Every variant carries the steps taken so far.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OrchestratorError {
    /// No answer within the iterations.
    #[error(
        "no answer after {iterations} iterations; raise --max-iterations or simplify the question"
    )]
    MaxIterationsReached {
        /// Iterations used.
        iterations: u32,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// The run's deadline passed.
    #[error("no answer within {after:?}; raise --timeout (small models on a CPU are slow)")]
    Timeout {
        /// How long the run took.
        after: Duration,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// The model kept replying with something that is not a valid turn.
    #[error("the model's replies were not valid turns: {detail}")]
    InvalidResponseFormat {
        /// The last validation error.
        detail: String,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// A tool failed and the run could not go on without it.
    #[error("tool {tool} failed: {detail}")]
    ToolExecutionFailed {
        /// The tool.
        tool: String,
        /// What failed.
        detail: String,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// The model is not on the server.
    #[error("model '{model}' not found: {hint}")]
    ModelNotFound {
        /// The model.
        model: String,
        /// What to do.
        hint: String,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// The model server failed.
    #[error("{error}")]
    Backend {
        /// The failure.
        error: BackendError,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// The tools could not be listed or reached.
    #[error("{error}")]
    Tools {
        /// The failure.
        error: ToolError,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// The model asked a question and nobody was there to answer.
    #[error("the model needs more information: {question}")]
    ClarificationNeeded {
        /// The question.
        question: String,
        /// The missing parameters.
        missing_params: Vec<String>,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// A guardrail stopped the run.
    #[error("blocked: {reason}")]
    Blocked {
        /// Why.
        reason: String,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// The configuration is wrong.
    #[error("configuration: {0}")]
    Config(String),
}

impl OrchestratorError {
    /// The steps taken before the failure.
    pub fn steps(&self) -> &[StepRecord] {
        match self {
            OrchestratorError::MaxIterationsReached { steps, .. }
            | OrchestratorError::Timeout { steps, .. }
            | OrchestratorError::InvalidResponseFormat { steps, .. }
            | OrchestratorError::ToolExecutionFailed { steps, .. }
            | OrchestratorError::ModelNotFound { steps, .. }
            | OrchestratorError::Backend { steps, .. }
            | OrchestratorError::Tools { steps, .. }
            | OrchestratorError::ClarificationNeeded { steps, .. }
            | OrchestratorError::Blocked { steps, .. } => steps,
            OrchestratorError::Config(_) => &[],
        }
    }

    fn backend(error: BackendError, steps: Vec<StepRecord>) -> Self {
        match error {
            BackendError::ModelNotFound { model, hint } => {
                OrchestratorError::ModelNotFound { model, hint, steps }
            }
            error => OrchestratorError::Backend { error, steps },
        }
    }
}

/// Answers the model's clarifying questions (the CLI asks the person at the terminal).
pub trait ClarifyHandler: Send {
    /// Returns the answer, or `None` when there is none.
    fn ask(&mut self, question: &str, missing_params: &[String]) -> Option<String>;
}

impl<F: FnMut(&str, &[String]) -> Option<String> + Send> ClarifyHandler for F {
    fn ask(&mut self, question: &str, missing_params: &[String]) -> Option<String> {
        self(question, missing_params)
    }
}

/// Seed 003's settings, with its defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// The model (default `gemma3:4b`).
    pub model: String,
    /// Ollama's address (default `http://localhost:11434`).
    pub ollama_host: String,
    /// Where the tools come from (default: the HTTP tool API at `http://localhost:5000`).
    pub tools: ToolSetup,
    /// The most model turns (default 10).
    pub max_iterations: u32,
    /// One deadline for the whole run (default 30 s).
    pub timeout: Duration,
    /// Generation options.
    pub options: GenOptions,
    /// Extra instructions appended to the system prompt.
    pub system: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            model: "gemma3:4b".into(),
            ollama_host: "http://localhost:11434".into(),
            tools: ToolSetup {
                http: vec!["http://localhost:5000".into()],
                ..ToolSetup::default()
            },
            max_iterations: 10,
            timeout: Duration::from_secs(30),
            options: GenOptions::default(),
            system: None,
        }
    }
}

/// Seed 003's one call: asks Ollama's model, with the configured tools, and returns the
/// answer.
///
/// ```no_run
/// use toolloop::orchestrator::{run_loop, Config};
///
/// let answer = run_loop("What is the weather in Tokyo?", &Config::default())?;
/// println!("{answer}");
/// # Ok::<(), toolloop::orchestrator::OrchestratorError>(())
/// ```
pub fn run_loop(query: &str, config: &Config) -> Result<String, OrchestratorError> {
    let deadline = Deadline::after(config.timeout);
    let tools = config
        .tools
        .connect(deadline)
        .map_err(|error| OrchestratorError::Tools {
            error,
            steps: Vec::new(),
        })?;
    let mut orchestrator = Orchestrator::builder()
        .backend(Ollama::new(&config.ollama_host, &config.model))
        .catalogue(tools)
        .max_iterations(config.max_iterations)
        .timeout(config.timeout)
        .options(config.options.clone())
        .system(config.system.clone())
        .build()?;
    orchestrator
        .run_with_deadline(query, &[], deadline)?
        .into_answer()
}

/// Builds an [`Orchestrator`].
pub struct OrchestratorBuilder {
    backend: Option<Box<dyn Backend>>,
    catalogue: Catalogue,
    limits: Limits,
    timeout: Duration,
    options: GenOptions,
    observers: Vec<Box<dyn Observer>>,
    clarify: Option<Box<dyn ClarifyHandler>>,
    guardrails: Guardrails,
    system: Option<String>,
    preflight: bool,
}

impl OrchestratorBuilder {
    /// The model backend (required).
    pub fn backend(mut self, backend: impl Backend + 'static) -> Self {
        self.backend = Some(Box::new(backend));
        self
    }

    /// A boxed model backend.
    pub fn boxed_backend(mut self, backend: Box<dyn Backend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// The tools (default: none).
    pub fn catalogue(mut self, catalogue: Catalogue) -> Self {
        self.catalogue = catalogue;
        self
    }

    /// The most model turns (default 10).
    pub fn max_iterations(mut self, n: u32) -> Self {
        self.limits.max_iterations = n;
        self
    }

    /// One deadline for each run (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Generation options.
    pub fn options(mut self, options: GenOptions) -> Self {
        self.limits.num_ctx = options.num_ctx;
        self.options = options;
        self
    }

    /// Limits and policies beyond the iterations.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How the schema is narrowed to the catalogue (default: one variant per tool).
    pub fn narrowing(mut self, narrowing: Narrowing) -> Self {
        self.limits.narrowing = narrowing;
        self
    }

    /// Sees every event.
    pub fn observer(mut self, observer: impl Observer + 'static) -> Self {
        self.observers.push(Box::new(observer));
        self
    }

    /// A boxed observer.
    pub fn boxed_observer(mut self, observer: Box<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Answers clarifying questions; without one, a question ends the run.
    pub fn clarify_handler(mut self, handler: impl ClarifyHandler + 'static) -> Self {
        self.clarify = Some(Box::new(handler));
        self
    }

    /// A boxed clarify handler.
    pub fn boxed_clarify_handler(mut self, handler: Box<dyn ClarifyHandler>) -> Self {
        self.clarify = Some(handler);
        self
    }

    /// Guardrails on the query and the answer.
    pub fn guardrails(mut self, guardrails: Guardrails) -> Self {
        self.guardrails = guardrails;
        self
    }

    /// Extra instructions appended to the system prompt.
    pub fn system(mut self, system: Option<String>) -> Self {
        self.system = system;
        self
    }

    /// Whether to check the server and model before the first run (default true).
    pub fn preflight(mut self, on: bool) -> Self {
        self.preflight = on;
        self
    }

    /// Builds it; a backend is required.
    pub fn build(self) -> Result<Orchestrator, OrchestratorError> {
        let backend = self
            .backend
            .ok_or_else(|| OrchestratorError::Config("no model backend was given".into()))?;
        if self.limits.max_iterations == 0 {
            return Err(OrchestratorError::Config(
                "max_iterations must be at least 1".into(),
            ));
        }
        let specs = self.catalogue.specs();
        let prompt = build_system_prompt(&specs, self.system.as_deref());
        let schema = CallSchema::for_tools(&specs, self.limits.narrowing);
        Ok(Orchestrator {
            backend,
            specs,
            schema,
            catalogue: self.catalogue,
            limits: self.limits,
            timeout: self.timeout,
            options: self.options,
            observers: self.observers,
            clarify: self.clarify,
            guardrails: self.guardrails,
            prompt,
            preflight_done: !self.preflight,
        })
    }
}

/// A model, its tools and the run's policies, ready to answer questions.
///
/// ```
/// use toolloop::backend::scripted::Scripted;
/// use toolloop::orchestrator::{Orchestrator, StopKind};
///
/// let model = Scripted::new([r#"{"kind": "final_answer", "thought": "", "content": "Hello!"}"#]);
/// let mut o = Orchestrator::builder().backend(model).build()?;
/// let outcome = o.run("Say hello")?;
/// assert_eq!(outcome.answer.as_deref(), Some("Hello!"));
/// assert_eq!(outcome.stop_reason, StopKind::Completed);
/// # Ok::<(), toolloop::orchestrator::OrchestratorError>(())
/// ```
pub struct Orchestrator {
    backend: Box<dyn Backend>,
    specs: Vec<ToolSpec>,
    schema: CallSchema,
    catalogue: Catalogue,
    limits: Limits,
    timeout: Duration,
    options: GenOptions,
    observers: Vec<Box<dyn Observer>>,
    clarify: Option<Box<dyn ClarifyHandler>>,
    guardrails: Guardrails,
    prompt: String,
    preflight_done: bool,
}

impl Orchestrator {
    /// A builder with the seed's defaults.
    pub fn builder() -> OrchestratorBuilder {
        OrchestratorBuilder {
            backend: None,
            catalogue: Catalogue::new(),
            limits: Limits::default(),
            timeout: Duration::from_secs(30),
            options: GenOptions::default(),
            observers: Vec::new(),
            clarify: None,
            guardrails: Guardrails::default(),
            system: None,
            preflight: true,
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

    /// Answers one question from a fresh history.
    pub fn run(&mut self, query: &str) -> Result<Outcome, OrchestratorError> {
        let deadline = Deadline::after(self.timeout);
        self.run_with_deadline(query, &[], deadline)
    }

    /// Answers one question after `earlier` turns (without the system prompt), within
    /// `deadline`.
    pub fn run_with_deadline(
        &mut self,
        query: &str,
        earlier: &[Message],
        deadline: Deadline,
    ) -> Result<Outcome, OrchestratorError> {
        let started = Instant::now();
        let mut history = Vec::with_capacity(earlier.len() + 8);
        history.push(Message::system(self.prompt.clone()));
        history.extend_from_slice(earlier);
        let mut engine = Engine::with_schema(
            history,
            query,
            self.specs.clone(),
            self.limits.clone(),
            self.schema.clone(),
        );
        self.emit(&Event::RunStarted {
            query: query.to_string(),
            model: self.backend.describe(),
            tools: self.catalogue.names(),
        });
        match self.guardrails.check_input(query) {
            Verdict::Pass => {}
            Verdict::Warn(w) => self.emit(&Event::Warning { message: w }),
            Verdict::Block(reason) => engine.block(reason),
        }
        if !self.preflight_done && engine.end().is_none() {
            self.backend
                .preflight(deadline)
                .map_err(|e| OrchestratorError::backend(e, Vec::new()))?;
            self.preflight_done = true;
        }
        loop {
            let step = engine.next_step();
            self.flush(&mut engine);
            match step {
                Step::Done => break,
                Step::CallModel => {
                    if deadline.is_expired() {
                        engine.timed_out();
                        continue;
                    }
                    let request = ChatRequest {
                        messages: engine.messages(),
                        schema: Some(engine.schema().as_value()),
                        options: &self.options,
                    };
                    let observers = &mut self.observers;
                    let mut sink = |text: &str| {
                        let e = Event::ModelText {
                            text: text.to_string(),
                        };
                        for o in observers.iter_mut() {
                            o.event(&e);
                        }
                    };
                    match self.backend.chat(&request, deadline, &mut sink) {
                        Ok(reply) => engine.model_replied(&reply),
                        Err(BackendError::Timeout { .. }) => engine.timed_out(),
                        Err(e) => {
                            self.flush(&mut engine);
                            return Err(OrchestratorError::backend(e, engine.steps().to_vec()));
                        }
                    }
                }
                Step::CallTool { tool, arguments } => {
                    let t = Instant::now();
                    let result = self.catalogue.call(&tool, &arguments, deadline);
                    if deadline.is_expired() {
                        engine.timed_out();
                    } else {
                        engine.tool_returned(result, t.elapsed());
                    }
                }
                Step::AskUser {
                    question,
                    missing_params,
                } => {
                    let answer = self
                        .clarify
                        .as_mut()
                        .and_then(|h| h.ask(&question, &missing_params))
                        .filter(|a| !a.trim().is_empty());
                    engine.user_answered(answer);
                }
            }
        }
        self.finish(engine, started)
    }

    fn emit(&mut self, event: &Event) {
        for o in self.observers.iter_mut() {
            o.event(event);
        }
    }

    fn flush(&mut self, engine: &mut Engine) {
        for e in engine.drain_events() {
            self.emit(&e);
        }
    }

    fn finish(
        &mut self,
        mut engine: Engine,
        started: Instant,
    ) -> Result<Outcome, OrchestratorError> {
        self.flush(&mut engine);
        let end = engine.end().cloned().unwrap_or(End::MaxIterations);
        let iterations = engine.iterations();
        let steps = engine.steps().to_vec();
        let usage = engine.usage();
        let (history, delta_start) = engine.into_history();
        let mut outcome = Outcome {
            answer: None,
            stop_reason: StopKind::Completed,
            question: None,
            missing_params: Vec::new(),
            blocked_reason: None,
            steps,
            iterations,
            history,
            delta_start,
            usage,
            elapsed: started.elapsed(),
        };
        match end {
            End::Answer {
                content, degraded, ..
            } => match self.guardrails.check_output(&content) {
                Verdict::Block(reason) => {
                    outcome.stop_reason = StopKind::Blocked;
                    outcome.blocked_reason = Some(reason);
                }
                verdict => {
                    if let Verdict::Warn(w) = verdict {
                        self.emit(&Event::Warning { message: w });
                    }
                    outcome.answer = Some(content);
                    outcome.stop_reason = if degraded {
                        StopKind::ToolFailureDegraded
                    } else {
                        StopKind::Completed
                    };
                }
            },
            End::Clarify {
                question,
                missing_params,
            } => {
                outcome.stop_reason = StopKind::ClarificationNeeded;
                outcome.question = Some(question);
                outcome.missing_params = missing_params;
            }
            End::MaxIterations => outcome.stop_reason = StopKind::MaxIterations,
            End::Timeout => outcome.stop_reason = StopKind::Timeout,
            End::Blocked { reason } => {
                outcome.stop_reason = StopKind::Blocked;
                outcome.blocked_reason = Some(reason);
            }
            End::Invalid { error } => {
                self.emit(&Event::Stopped {
                    stop_reason: StopKind::MaxIterations,
                    answer: None,
                    iterations,
                    ms: outcome.elapsed.as_millis() as u64,
                });
                return Err(OrchestratorError::InvalidResponseFormat {
                    detail: error,
                    steps: outcome.steps,
                });
            }
        }
        self.emit(&Event::Stopped {
            stop_reason: outcome.stop_reason,
            answer: outcome.answer.clone(),
            iterations,
            ms: outcome.elapsed.as_millis() as u64,
        });
        Ok(outcome)
    }
}

/// A conversation: each question sees the earlier questions and answers.
///
/// ```
/// use toolloop::backend::scripted::Scripted;
/// use toolloop::orchestrator::{Conversation, Orchestrator};
///
/// let model = Scripted::new([
///     r#"{"kind": "final_answer", "thought": "", "content": "Nice to meet you, Ada."}"#,
///     r#"{"kind": "final_answer", "thought": "", "content": "Your name is Ada."}"#,
/// ]);
/// let seen = model.seen();
/// let mut chat = Conversation::new(Orchestrator::builder().backend(model).build()?);
/// chat.ask("I am Ada.")?;
/// chat.ask("What is my name?")?;
/// // The second request carried the first exchange.
/// assert_eq!(seen.lock().unwrap()[1][1].content, "I am Ada.");
/// # Ok::<(), toolloop::orchestrator::OrchestratorError>(())
/// ```
pub struct Conversation {
    orchestrator: Orchestrator,
    turns: Vec<Message>,
}

impl Conversation {
    /// A new conversation.
    pub fn new(orchestrator: Orchestrator) -> Self {
        Conversation {
            orchestrator,
            turns: Vec::new(),
        }
    }

    /// Asks one question in the context of the earlier ones. Only completed exchanges are
    /// kept in the history.
    pub fn ask(&mut self, query: &str) -> Result<Outcome, OrchestratorError> {
        let deadline = Deadline::after(self.orchestrator.timeout);
        let outcome = self
            .orchestrator
            .run_with_deadline(query, &self.turns, deadline)?;
        if outcome.answer.is_some() {
            self.turns.extend_from_slice(outcome.history_delta());
        }
        Ok(outcome)
    }

    /// Forgets the earlier turns.
    pub fn reset(&mut self) {
        self.turns.clear();
    }

    /// The earlier turns (without the system prompt).
    pub fn turns(&self) -> &[Message] {
        &self.turns
    }

    /// The orchestrator.
    pub fn orchestrator(&self) -> &Orchestrator {
        &self.orchestrator
    }
}
