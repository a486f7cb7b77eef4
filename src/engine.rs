//! The loop as a small state machine that does no I/O (rig's pattern).
//!
//! [`Engine::next_step`] says what to do — call the model, call a tool, ask the person, or stop
//! — and the caller feeds the result back ([`Engine::model_replied`],
//! [`Engine::tool_returned`], [`Engine::user_answered`]). The blocking driver in
//! [`crate::orchestrator`] is a dozen lines around it; tests drive it with no model and
//! no socket.
//!
//! The rules it keeps, in the order of seed 003's flow:
//! - every reply is repaired and checked against the schema; an invalid one goes back to
//!   the model with the reason, at most `max_invalid_retries` times in a row;
//! - the schema is narrowed to the tools still available, and on the last iteration (or
//!   after a call repeated three times) only `final_answer`/`clarify` are allowed;
//! - a call identical to an earlier one is answered from the earlier result;
//! - a tool that fails for infrastructure reasons, or reports errors three times in a row,
//!   is declared unavailable and the model is told to answer without it
//!   (`tool_failure_degraded`);
//! - the history only grows, so the server's prompt cache is reused, except when it nears
//!   the context window: then old tool results are shortened first.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::backend::{ChatReply, Message, Role, StopReason, Usage};
use crate::events::Event;
use crate::schema::{CallSchema, Narrowing};
use crate::tools::{ToolError, ToolResult, ToolSpec};
use crate::turn::Turn;

/// Limits and policies of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// The most model turns (seed 003: 10).
    pub max_iterations: u32,
    /// Invalid replies in a row before `InvalidResponseFormat` (default 2 retries).
    pub max_invalid_retries: u32,
    /// Repeats of one identical call before only an answer is allowed (default 3).
    pub max_repeats: u32,
    /// Tool-reported errors in a row before the tool is declared unavailable (default 3).
    pub max_tool_failures: u32,
    /// The cap on a tool result as text for the model (characters).
    pub result_cap: usize,
    /// The context window in tokens, to keep the history inside it.
    pub num_ctx: Option<u32>,
    /// How the schema is narrowed to the catalogue.
    pub narrowing: Narrowing,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_iterations: 10,
            max_invalid_retries: 2,
            max_repeats: 3,
            max_tool_failures: 3,
            result_cap: crate::tools::DEFAULT_RESULT_CAP,
            num_ctx: Some(8192),
            narrowing: Narrowing::PerTool,
        }
    }
}

/// What the caller should do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Send [`Engine::messages`] to the model with [`Engine::schema`].
    CallModel,
    /// Call this tool.
    CallTool {
        /// The tool.
        tool: String,
        /// Its arguments.
        arguments: Map<String, Value>,
    },
    /// Ask the person; answer with [`Engine::user_answered`].
    AskUser {
        /// The question.
        question: String,
        /// The missing parameters.
        missing_params: Vec<String>,
    },
    /// The run is over.
    Done,
}

/// One action of the model, as recorded in the outcome (seed 002's steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The iteration it belongs to.
    pub iteration: u32,
    /// The model's reasoning.
    pub thought: String,
    /// The tool called, if any.
    pub tool: Option<String>,
    /// The arguments.
    pub arguments: Option<Map<String, Value>>,
    /// What the model was shown as a result, or the answer / question.
    pub observation: String,
    /// Whether the step succeeded.
    pub ok: bool,
    /// Milliseconds the tool took.
    pub ms: u64,
}

/// How a run ended, before the driver turns it into an outcome or an error.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// `final_answer` arrived.
    Answer {
        /// The content.
        content: String,
        /// Whether a tool had been declared unavailable.
        degraded: bool,
        /// Whether the answer was cut by the token limit.
        truncated: bool,
    },
    /// `clarify` with nobody to answer.
    Clarify {
        /// The question.
        question: String,
        /// The missing parameters.
        missing_params: Vec<String>,
    },
    /// No answer within the iterations.
    MaxIterations,
    /// Too many invalid replies in a row.
    Invalid {
        /// The last validation error.
        error: String,
    },
    /// The deadline passed.
    Timeout,
    /// A guardrail stopped it.
    Blocked {
        /// Why.
        reason: String,
    },
}

#[derive(Debug, Clone)]
struct PendingCall {
    tool: String,
    arguments: Map<String, Value>,
    key: String,
}

/// The loop's state.
#[derive(Debug)]
pub struct Engine {
    limits: Limits,
    specs: Vec<ToolSpec>,
    unavailable: BTreeSet<String>,
    schema: CallSchema,
    answer_schema: CallSchema,
    history: Vec<Message>,
    run_start: usize,
    iterations: u32,
    invalid_streak: u32,
    forced_answer: bool,
    pending_call: Option<PendingCall>,
    pending_question: Option<(String, Vec<String>)>,
    calls: HashMap<String, (u32, String)>,
    failures: HashMap<String, u32>,
    degraded: bool,
    steps: Vec<StepRecord>,
    events: Vec<Event>,
    usage: Usage,
    end: Option<End>,
}

impl Engine {
    /// A run over `history` (which holds the system prompt and any earlier turns) for
    /// `query`, with the tools in `specs`.
    pub fn new(history: Vec<Message>, query: &str, specs: Vec<ToolSpec>, limits: Limits) -> Self {
        let schema = CallSchema::for_tools(&specs, limits.narrowing);
        Self::with_schema(history, query, specs, limits, schema)
    }

    /// Like [`Engine::new`], with the schema for `specs` already built (it is the same for
    /// every run over one catalogue, and building it compiles validators).
    pub fn with_schema(
        mut history: Vec<Message>,
        query: &str,
        specs: Vec<ToolSpec>,
        limits: Limits,
        schema: CallSchema,
    ) -> Self {
        let run_start = history.len();
        history.push(Message::user(query));
        Engine {
            limits,
            specs,
            unavailable: BTreeSet::new(),
            schema,
            answer_schema: CallSchema::answer_only(),
            history,
            run_start,
            iterations: 0,
            invalid_streak: 0,
            forced_answer: false,
            pending_call: None,
            pending_question: None,
            calls: HashMap::new(),
            failures: HashMap::new(),
            degraded: false,
            steps: Vec::new(),
            events: Vec::new(),
            usage: Usage::default(),
            end: None,
        }
    }

    /// What to do now.
    pub fn next_step(&mut self) -> Step {
        if self.end.is_some() {
            return Step::Done;
        }
        if let Some(call) = &self.pending_call {
            return Step::CallTool {
                tool: call.tool.clone(),
                arguments: call.arguments.clone(),
            };
        }
        if let Some((question, missing_params)) = &self.pending_question {
            return Step::AskUser {
                question: question.clone(),
                missing_params: missing_params.clone(),
            };
        }
        if self.iterations >= self.limits.max_iterations {
            self.end = Some(End::MaxIterations);
            return Step::Done;
        }
        self.fit_context();
        self.events.push(Event::ModelRequest {
            iteration: self.iterations + 1,
            messages: self.history.len(),
            answer_only: self.answer_only(),
        });
        Step::CallModel
    }

    fn answer_only(&self) -> bool {
        self.forced_answer || self.iterations + 1 >= self.limits.max_iterations
    }

    /// The schema for the next model request.
    pub fn schema(&self) -> &CallSchema {
        if self.answer_only() {
            &self.answer_schema
        } else {
            &self.schema
        }
    }

    /// The history to send.
    pub fn messages(&self) -> &[Message] {
        &self.history
    }

    /// Feeds the model's reply back.
    pub fn model_replied(&mut self, reply: &ChatReply) {
        self.usage.add(&reply.usage);
        self.events.push(Event::ModelReply {
            text: reply.text.clone(),
            stop: reply.stop,
            usage: reply.usage,
            ms: reply.timings.total.as_millis() as u64,
        });
        if let Some(ctx) = self.limits.num_ctx
            && reply.usage.prompt_tokens + reply.usage.completion_tokens >= u64::from(ctx)
        {
            self.events.push(Event::Warning {
                message: format!(
                    "the prompt filled the context window ({ctx} tokens): the server may have \
                     dropped the oldest messages; raise num_ctx"
                ),
            });
        }
        let parsed = match Turn::parse(&reply.text) {
            Ok(p) => p,
            Err(e) => return self.invalid(&reply.text, reply.stop, e.to_string()),
        };
        if !parsed.fixes.is_empty() {
            self.events.push(Event::Repaired {
                fixes: parsed
                    .fixes
                    .to_vec()
                    .iter()
                    .map(|f| f.to_string())
                    .collect(),
            });
        }
        if let Err(e) = self.schema().check(&parsed.turn) {
            // A valid call on the last iteration is not a format error: the iterations
            // are used up (seed 003's MaxIterationsReached).
            let last = self.iterations + 1 >= self.limits.max_iterations;
            if last && !self.forced_answer && self.schema.check(&parsed.turn).is_ok() {
                self.iterations += 1;
                self.end = Some(End::MaxIterations);
                return;
            }
            return self.invalid(&reply.text, reply.stop, e);
        }
        self.invalid_streak = 0;
        self.iterations += 1;
        let turn = parsed.turn;
        // The canonical form, not the raw text: byte-stable, and it shows the model the
        // format it should use.
        let canonical = serde_json::to_string(&turn).unwrap_or_default();
        self.history.push(Message::assistant(canonical));
        match turn {
            Turn::FinalAnswer { thought, content } => {
                let truncated = reply.stop == StopReason::Length;
                if truncated {
                    self.events.push(Event::Warning {
                        message: "the answer was cut at the token limit; raise num_predict".into(),
                    });
                }
                self.steps.push(StepRecord {
                    iteration: self.iterations,
                    thought,
                    tool: None,
                    arguments: None,
                    observation: content.clone(),
                    ok: true,
                    ms: 0,
                });
                self.end = Some(End::Answer {
                    content,
                    degraded: self.degraded,
                    truncated,
                });
            }
            Turn::Clarify {
                thought,
                question,
                missing_params,
            } => {
                self.steps.push(StepRecord {
                    iteration: self.iterations,
                    thought,
                    tool: None,
                    arguments: None,
                    observation: question.clone(),
                    ok: true,
                    ms: 0,
                });
                self.events.push(Event::Clarify {
                    question: question.clone(),
                    missing_params: missing_params.clone(),
                });
                self.pending_question = Some((question, missing_params));
            }
            Turn::ToolCall {
                thought,
                tool,
                arguments,
            } => self.tool_call(thought, tool, arguments),
        }
    }

    fn tool_call(&mut self, thought: String, tool: String, arguments: Map<String, Value>) {
        self.events.push(Event::ToolCall {
            iteration: self.iterations,
            thought: thought.clone(),
            tool: tool.clone(),
            arguments: arguments.clone(),
        });
        let key = format!("{tool}\u{0}{}", Value::Object(arguments.clone()));
        if let Some((count, earlier)) = self.calls.get_mut(&key) {
            *count += 1;
            let count = *count;
            let observation = format!(
                "{earlier}\n(You already called {tool} with these arguments; this is the same \
                 result. Use it to answer.)"
            );
            self.events.push(Event::Repeat {
                tool: tool.clone(),
                count,
            });
            if count >= self.limits.max_repeats {
                self.forced_answer = true;
            }
            self.observe(thought, &tool, Some(arguments), observation, true, 0);
            return;
        }
        if self.unavailable.contains(&tool) {
            let observation = format!("error: {tool} is unavailable. Answer directly without it.");
            self.observe(thought, &tool, Some(arguments), observation, false, 0);
            return;
        }
        self.steps.push(StepRecord {
            iteration: self.iterations,
            thought,
            tool: Some(tool.clone()),
            arguments: Some(arguments.clone()),
            observation: String::new(),
            ok: false,
            ms: 0,
        });
        self.pending_call = Some(PendingCall {
            tool,
            arguments,
            key,
        });
    }

    /// Records an observation that needed no tool call.
    fn observe(
        &mut self,
        thought: String,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        observation: String,
        ok: bool,
        ms: u64,
    ) {
        self.events.push(Event::ToolResult {
            tool: tool.to_string(),
            ok,
            observation: observation.clone(),
            ms,
        });
        self.history.push(Message::tool(tool, observation.clone()));
        self.steps.push(StepRecord {
            iteration: self.iterations,
            thought,
            tool: Some(tool.to_string()),
            arguments,
            observation,
            ok,
            ms,
        });
    }

    /// Feeds a tool's result back. `Err` of the infrastructure kind makes the tool
    /// unavailable for the rest of the run.
    pub fn tool_returned(&mut self, result: Result<ToolResult, ToolError>, took: Duration) {
        let Some(call) = self.pending_call.take() else {
            return;
        };
        let ms = took.as_millis() as u64;
        let tool = call.tool.clone();
        let (observation, ok, degrade) = match result {
            Ok(r) => {
                let text = r.to_model_text(self.limits.result_cap);
                let failures = self.failures.entry(tool.clone()).or_insert(0);
                if r.ok {
                    *failures = 0;
                    self.calls.insert(call.key, (0, text.clone()));
                    (text, true, None)
                } else {
                    *failures += 1;
                    let degrade = (*failures >= self.limits.max_tool_failures)
                        .then(|| format!("it failed {failures} times in a row"));
                    (text, false, degrade)
                }
            }
            Err(ToolError::UnknownTool { name, available }) => (
                format!(
                    "error: unknown tool \"{name}\". Available tools: {}",
                    available.join(", ")
                ),
                false,
                None,
            ),
            Err(ToolError::InvalidArguments { message, .. }) => {
                let expected = self
                    .specs
                    .iter()
                    .find(|s| s.name == tool)
                    .map(crate::prompt::signature)
                    .unwrap_or_default();
                (
                    format!("error: invalid arguments: {message}. Expected: {expected}"),
                    false,
                    None,
                )
            }
            Err(e) => (format!("error: {e}"), false, Some(e.to_string())),
        };
        if let Some(step) = self.steps.last_mut() {
            step.observation = observation.clone();
            step.ok = ok;
            step.ms = ms;
        }
        self.events.push(Event::ToolResult {
            tool: tool.clone(),
            ok,
            observation: observation.clone(),
            ms,
        });
        match degrade {
            None => self.history.push(Message::tool(&tool, observation)),
            Some(reason) => {
                self.degraded = true;
                self.unavailable.insert(tool.clone());
                let available: Vec<ToolSpec> = self
                    .specs
                    .iter()
                    .filter(|s| !self.unavailable.contains(&s.name))
                    .cloned()
                    .collect();
                self.schema = CallSchema::for_tools(&available, self.limits.narrowing);
                self.events.push(Event::Degraded {
                    tool: tool.clone(),
                    reason,
                });
                self.history.push(Message::tool(
                    &tool,
                    format!(
                        "{observation}\n{tool} is unavailable now. Answer directly without it."
                    ),
                ));
            }
        }
    }

    /// Feeds the person's answer to a clarifying question back; `None` (nobody to ask,
    /// or no answer) ends the run with the question.
    pub fn user_answered(&mut self, answer: Option<String>) {
        let Some((question, missing_params)) = self.pending_question.take() else {
            return;
        };
        match answer {
            Some(a) => {
                self.events.push(Event::ClarifyAnswer { answer: a.clone() });
                self.history.push(Message::user(a));
            }
            None => {
                self.end = Some(End::Clarify {
                    question,
                    missing_params,
                })
            }
        }
    }

    /// The deadline passed: end the run.
    pub fn timed_out(&mut self) {
        self.pending_call = None;
        self.end.get_or_insert(End::Timeout);
    }

    /// A guardrail stopped the run.
    pub fn block(&mut self, reason: String) {
        self.end = Some(End::Blocked { reason });
    }

    fn invalid(&mut self, raw: &str, stop: StopReason, error: String) {
        self.invalid_streak += 1;
        self.events.push(Event::Invalid {
            error: error.clone(),
            attempt: self.invalid_streak,
        });
        if self.invalid_streak > self.limits.max_invalid_retries {
            self.end = Some(End::Invalid { error });
            return;
        }
        // The model sees what it said (shortened) and why it was refused.
        self.history
            .push(Message::assistant(crate::http::shorten(raw.trim(), 500)));
        let cut = if stop == StopReason::Length {
            " Your reply was cut off at the token limit: keep \"thought\" short."
        } else {
            ""
        };
        self.history.push(Message::user(format!(
            "Your last reply was not valid: {error}.{cut} Reply with exactly one JSON object."
        )));
    }

    /// Shortens the oldest tool results when the history nears the context window. The
    /// system prompt and the person's question are never touched.
    fn fit_context(&mut self) {
        let Some(ctx) = self.limits.num_ctx else {
            return;
        };
        // About 3 characters a token for mixed JSON and prose, with room for the reply.
        let budget = (ctx as usize).saturating_mul(3) * 4 / 5;
        let size = |h: &[Message]| h.iter().map(|m| m.content.len() + 16).sum::<usize>();
        if size(&self.history) <= budget {
            return;
        }
        let mut shortened = 0;
        for i in 0..self.history.len() {
            if size(&self.history) <= budget {
                break;
            }
            let m = &mut self.history[i];
            if m.role == Role::Tool && m.content.len() > 300 {
                m.content = format!(
                    "{}…[shortened to fit the context window]",
                    crate::http::shorten(&m.content, 200)
                );
                shortened += 1;
            }
        }
        if shortened > 0 {
            self.events.push(Event::Warning {
                message: format!(
                    "the history neared the context window: {shortened} old tool results were shortened"
                ),
            });
        }
    }

    /// Events since the last call, in order.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// How the run ended, once [`Step::Done`].
    pub fn end(&self) -> Option<&End> {
        self.end.as_ref()
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

    /// The whole history and the index where this run's part begins.
    pub fn into_history(self) -> (Vec<Message>, usize) {
        (self.history, self.run_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Timings;
    use serde_json::json;

    fn reply(text: &str) -> ChatReply {
        ChatReply {
            text: text.into(),
            stop: StopReason::Finished,
            usage: Usage::default(),
            timings: Timings::default(),
        }
    }

    fn calc() -> ToolSpec {
        ToolSpec::new(
            "calculator",
            "math",
            json!({"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}),
        )
    }

    fn engine(max: u32) -> Engine {
        Engine::new(
            vec![Message::system("sys")],
            "what is 2+2",
            vec![calc()],
            Limits {
                max_iterations: max,
                ..Limits::default()
            },
        )
    }

    fn engine_with_ctx(num_ctx: u32) -> Engine {
        Engine::new(
            vec![Message::system("sys")],
            "q",
            vec![calc()],
            Limits {
                num_ctx: Some(num_ctx),
                ..Limits::default()
            },
        )
    }

    const CALL: &str = r#"{"kind":"tool_call","thought":"math","tool":"calculator","arguments":{"expression":"2+2"}}"#;
    const ANSWER: &str = r#"{"kind":"final_answer","thought":"done","content":"4"}"#;

    #[test]
    fn call_then_answer() {
        let mut e = engine(10);
        assert_eq!(e.next_step(), Step::CallModel);
        e.model_replied(&reply(CALL));
        assert_eq!(
            e.next_step(),
            Step::CallTool {
                tool: "calculator".into(),
                arguments: json!({"expression": "2+2"}).as_object().unwrap().clone()
            }
        );
        e.tool_returned(Ok(ToolResult::ok("4")), Duration::from_millis(3));
        assert_eq!(e.next_step(), Step::CallModel);
        assert_eq!(e.messages().last().unwrap().content, "4");
        e.model_replied(&reply(ANSWER));
        assert_eq!(e.next_step(), Step::Done);
        assert!(
            matches!(e.end(), Some(End::Answer { content, degraded: false, .. }) if content == "4")
        );
        assert_eq!(e.iterations(), 2);
        assert_eq!(e.steps()[0].observation, "4");
        assert_eq!(e.steps()[0].ms, 3);
    }

    #[test]
    fn invalid_replies_are_fed_back_then_give_up() {
        let mut e = engine(10);
        for attempt in 1..=2 {
            assert_eq!(e.next_step(), Step::CallModel);
            e.model_replied(&reply("I think it is 4"));
            let last = e.messages().last().unwrap();
            assert!(
                last.content.starts_with("Your last reply was not valid"),
                "{attempt}"
            );
        }
        assert_eq!(e.next_step(), Step::CallModel);
        e.model_replied(&reply(
            r#"{"kind":"tool_call","tool":"nope","arguments":{}}"#,
        ));
        assert_eq!(e.next_step(), Step::Done);
        match e.end() {
            Some(End::Invalid { error }) => {
                assert!(error.contains("unknown tool \"nope\""), "{error}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.iterations(), 0);
    }

    #[test]
    fn last_iteration_allows_only_an_answer() {
        let mut e = engine(2);
        e.next_step();
        assert!(e.schema().allows(crate::turn::Kind::ToolCall));
        e.model_replied(&reply(CALL));
        e.next_step();
        e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
    }

    #[test]
    fn identical_calls_reuse_the_result_and_the_third_repeat_forces_an_answer() {
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&reply(CALL));
        e.next_step();
        e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
        for n in 1..=3 {
            assert_eq!(e.next_step(), Step::CallModel, "repeat {n}");
            assert!(e.schema().allows(crate::turn::Kind::ToolCall));
            e.model_replied(&reply(CALL));
            assert!(
                e.messages()
                    .last()
                    .unwrap()
                    .content
                    .contains("You already called")
            );
        }
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
    }

    #[test]
    fn infrastructure_failure_degrades_the_tool() {
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&reply(CALL));
        e.next_step();
        e.tool_returned(
            Err(ToolError::Unreachable {
                url: "http://x".into(),
            }),
            Duration::ZERO,
        );
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(
            !e.schema().allows(crate::turn::Kind::ToolCall),
            "no tool left"
        );
        assert!(
            e.messages()
                .last()
                .unwrap()
                .content
                .contains("unavailable now")
        );
        e.model_replied(&reply(ANSWER));
        assert!(matches!(e.end(), Some(End::Answer { degraded: true, .. })));
    }

    #[test]
    fn clarify_without_answer_ends_the_run() {
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&reply(
            r#"{"kind":"clarify","thought":"","question":"Which city?","missing_params":["city"]}"#,
        ));
        assert_eq!(
            e.next_step(),
            Step::AskUser {
                question: "Which city?".into(),
                missing_params: vec!["city".into()]
            }
        );
        e.user_answered(None);
        assert_eq!(e.next_step(), Step::Done);
        assert!(matches!(e.end(), Some(End::Clarify { .. })));
    }

    #[test]
    fn history_is_append_only_and_starts_with_the_prompt() {
        let mut e = engine(10);
        e.next_step();
        let before: Vec<Message> = e.messages().to_vec();
        e.model_replied(&reply(CALL));
        e.next_step();
        e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
        e.next_step();
        assert_eq!(&e.messages()[..before.len()], &before[..]);
        let (history, start) = e.into_history();
        assert_eq!(start, 1);
        assert_eq!(history[1].content, "what is 2+2");
    }

    #[test]
    fn max_iterations() {
        let mut e = engine(1);
        e.next_step();
        e.model_replied(&reply(
            r#"{"kind":"clarify","thought":"","question":"?","missing_params":[]}"#,
        ));
        e.next_step();
        e.user_answered(Some("more".into()));
        assert_eq!(e.next_step(), Step::Done);
        assert_eq!(e.end(), Some(&End::MaxIterations));
    }

    #[test]
    fn old_tool_results_are_shortened_near_the_context_window() {
        let mut e = engine_with_ctx(1000);
        e.next_step();
        e.model_replied(&reply(CALL));
        e.next_step();
        e.tool_returned(Ok(ToolResult::ok("x".repeat(3000))), Duration::ZERO);
        e.next_step();
        assert!(
            e.messages()[3]
                .content
                .ends_with("[shortened to fit the context window]")
        );
        assert_eq!(e.messages()[1].content, "q");
    }

    #[test]
    fn a_prompt_that_filled_the_context_window_is_warned_about() {
        let mut e = engine_with_ctx(1000);
        let warnings = |e: &mut Engine| {
            e.drain_events()
                .into_iter()
                .filter_map(|ev| match ev {
                    Event::Warning { message } => Some(message),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        e.next_step();
        let mut r = reply(CALL);
        r.usage.prompt_tokens = 900;
        r.usage.completion_tokens = 20;
        e.model_replied(&r);
        assert!(warnings(&mut e).is_empty());
        e.next_step();
        e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
        e.next_step();
        // Ollama reports what it evaluated after silently dropping the oldest messages:
        // a prompt at the window's size is the sign.
        let mut r = reply(ANSWER);
        r.usage.prompt_tokens = 990;
        r.usage.completion_tokens = 10;
        e.model_replied(&r);
        let w = warnings(&mut e);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("filled the context window (1000 tokens)"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("raise num_ctx"));
    }
}
