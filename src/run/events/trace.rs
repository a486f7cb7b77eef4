//! The human trace of a run on stderr (`-v`): one line an event, in the order they happen.

use serde_json::Value;

use super::{Event, Observer};
use crate::backend::StopReason;

/// Writes the human trace to stderr: `[LLM]`, `[REPAIR]`, `[RETRY]`, `[ACT]`,
/// `[OBSERVE]`, `[DONE]` lines.
#[derive(Debug, Default)]
pub struct Trace {
    out: Vec<String>,
    to_stderr: bool,
}

impl Trace {
    /// A trace printed to stderr.
    pub fn stderr() -> Self {
        Trace {
            out: Vec::new(),
            to_stderr: true,
        }
    }

    /// A trace collected in memory (for tests): see [`Trace::lines`].
    pub fn collect() -> Self {
        Trace::default()
    }

    /// The lines collected so far.
    pub fn lines(&self) -> &[String] {
        &self.out
    }

    /// The trace line for an event, if it has one.
    pub fn line(event: &Event) -> Option<String> {
        let short = |s: &str| crate::http::shorten(&s.replace('\n', " "), 200);
        Some(match event {
            Event::AnswerLanguage { language, detected } => match detected {
                true => format!(
                    "[ANSWER] asked for in {language}, the question's language \
                     (--answer-language off leaves it to the model)"
                ),
                false => format!("[ANSWER] asked for in {language}"),
            },
            Event::ModelRequest {
                iteration,
                messages,
                answer_only,
            } => format!(
                "[LLM] iteration {iteration}: {messages} messages{}",
                if *answer_only { ", answer only" } else { "" }
            ),
            Event::CallWritten { tool, arguments } => {
                format!(
                    "[LLM] wrote a call: {tool} {}",
                    short(&arguments.to_string())
                )
            }
            Event::CallSentEarly { tool, arguments } => format!(
                "[TOOL] sent early, the tool only reads: {tool} {}",
                short(&Value::Object(arguments.clone()).to_string())
            ),
            Event::EarlyCallUnused { tool, arguments } => format!(
                "[TOOL] an early call its turn did not make, result let go: {tool} {}",
                short(&Value::Object(arguments.clone()).to_string())
            ),
            Event::ModelReply {
                text,
                stop,
                usage,
                ms,
                generated,
            } => format!(
                "[LLM] reply in {ms} ms ({} prompt{} / {} generated tokens: thought {}, arguments {}, answer {}{}): {}",
                usage.prompt_tokens,
                usage
                    .cached_prompt_tokens
                    .map(|c| format!(", {c} cached"))
                    .unwrap_or_default(),
                usage.completion_tokens,
                generated.thought,
                generated.arguments,
                generated.answer,
                if *stop == StopReason::Length {
                    ", cut at the token limit"
                } else {
                    ""
                },
                short(text)
            ),
            Event::FamilyDefaults { family, off } => {
                format!("[CHECKS] {}", crate::checks::family_note(family, off))
            }
            Event::Repaired { fixes } => format!("[REPAIR] {}", fixes.join(", ")),
            Event::Invalid { error, attempt } => format!("[RETRY] {attempt}: {}", short(error)),
            Event::ToolCall {
                tool,
                arguments,
                thought,
                ..
            } => format!(
                "[ACT] {tool} {}{}",
                Value::Object(arguments.clone()),
                if thought.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", short(thought))
                }
            ),
            Event::ToolResult {
                tool,
                ok,
                observation,
                ms,
            } => format!(
                "[OBSERVE] {tool} {} in {ms} ms: {}",
                if *ok { "ok" } else { "failed" },
                short(observation)
            ),
            Event::AnswerText { .. } => return None,
            Event::AnswerRetracted { reason } => {
                format!("[ANSWER] the answer shown so far is withdrawn: {reason}")
            }
            Event::Decision {
                tool,
                p_tool,
                support,
                own_numbers,
                ..
            } => format!(
                "[DECIDE] {tool}: p(tool) = {p_tool:.3}, support {}{}",
                support.map_or("-".to_string(), |s| format!("{s:.2}")),
                if *own_numbers {
                    ", the request's own numbers"
                } else {
                    ""
                },
            ),
            Event::Check { .. } => format!("[CHECK] {}", event.check_line()?),
            Event::Approval { arguments, .. } => format!(
                "[APPROVAL] {} {}",
                event.approval_line()?,
                short(&Value::Object(arguments.clone()).to_string())
            ),
            Event::Repeat { tool, count } => {
                format!("[OBSERVE] {tool}: repeated call #{count}, earlier result reused")
            }
            Event::Degraded { tool, reason } => {
                format!("[OBSERVE] {tool} is unavailable: {}", short(reason))
            }
            Event::CallingEnded { tools } => format!(
                "[OBSERVE] {}: results already shown; calling ends, asking for an answer",
                tools.join(", ")
            ),
            Event::Clarify { question, .. } => format!("[CLARIFY] {}", short(question)),
            Event::ClarifyAnswer { answer } => format!("[CLARIFY] answer: {}", short(answer)),
            Event::Warning { message } => format!("[WARN] {message}"),
            Event::Failed { error } => format!("[FAILED] {error}"),
            Event::Stopped {
                stop_reason,
                iterations,
                ms,
                budget,
                ..
            } => format!(
                "[DONE] {stop_reason} after {iterations} iterations in {ms} ms\n[BUDGET] {}",
                budget.line()
            ),
            Event::RunStarted { model, tools, .. } => {
                format!("[START] {model}; tools: {}", tools.join(", "))
            }
            Event::ModelText { .. } => return None,
        })
    }
}

impl Observer for Trace {
    fn event(&mut self, event: &Event) {
        if let Some(line) = Trace::line(event) {
            if self.to_stderr {
                eprintln!("{line}");
            } else {
                self.out.push(line);
            }
        }
    }
}
