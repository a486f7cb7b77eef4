//! What a run gave: its [`Ending`], the steps, the history and the usage, and the forms a
//! caller wants of it — the answer or an error ([`Outcome::into_answer`]), and
//! the `--json` object ([`Outcome::to_json`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::backend::{Message, Usage};
use crate::run::budget::Budget;
use crate::run::ending::{Ending, StopKind, seconds};
use crate::run::engine::StepRecord;
use crate::run::error::OrchestratorError;
use crate::run::events::Event;

/// What a run gave: how it ended, and everything that happened on the way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// How the run ended: the answer, or why there is none.
    pub ending: Ending,
    /// Every action of the model.
    pub steps: Vec<StepRecord>,
    /// Model turns used.
    pub iterations: u32,
    /// The whole history, system prompt first.
    pub history: Vec<Message>,
    /// Where this run's part of the history begins ([`Outcome::history_delta`] is
    /// `history[delta_start..]`).
    pub delta_start: usize,
    /// Token usage summed over the run.
    pub usage: Usage,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Where the run's tokens and seconds went.
    #[serde(default)]
    pub budget: Budget,
    /// What the checks did: every call they changed, declined or turned into a question,
    /// and every reply they cut, as the events that said so ([`Event::check_line`]).
    #[serde(default)]
    pub checks: Vec<Event>,
    /// Every call that was asked about before it ran ([`Event::Approval`]): whether it
    /// ran, and who said so.
    #[serde(default)]
    pub approvals: Vec<Event>,
}

impl Outcome {
    /// The answer, when the model gave one.
    pub fn answer(&self) -> Option<&str> {
        self.ending.answer()
    }

    /// Why the run stopped.
    pub fn stop_reason(&self) -> StopKind {
        self.ending.kind()
    }

    /// The part of the history this run added.
    pub fn history_delta(&self) -> &[Message] {
        &self.history[self.delta_start.min(self.history.len())..]
    }

    /// The answer, or an error for each other ending (what [`crate::run_loop`] returns).
    pub fn into_answer(self) -> Result<String, OrchestratorError> {
        let steps = self.steps;
        Err(match self.ending {
            Ending::Answer { content, .. } => return Ok(content),
            Ending::Clarify {
                question,
                missing_params,
            } => OrchestratorError::ClarificationNeeded {
                question,
                missing_params,
                steps,
            },
            Ending::MaxIterations { iterations } => {
                OrchestratorError::MaxIterationsReached { iterations, steps }
            }
            Ending::Timeout { limit_ms } => OrchestratorError::Timeout {
                after: seconds(limit_ms),
                steps,
            },
            Ending::Blocked { reason } => OrchestratorError::Blocked { reason, steps },
            Ending::InvalidReplies { detail } => {
                OrchestratorError::InvalidResponseFormat { detail, steps }
            }
            Ending::Cancelled => OrchestratorError::Cancelled { steps },
            // Only an orchestrator built to hand calls back ends so; it has no answer.
            Ending::CutOff { .. } | Ending::ToolCalls { .. } => {
                OrchestratorError::InvalidResponseFormat {
                    detail: self.ending.message().unwrap_or_default(),
                    steps,
                }
            }
        })
    }

    /// The outcome as the command line's `--json` prints it: `answer`, `stop_reason`,
    /// `iterations`, `steps`, `usage`, `ms`, `budget` (where the tokens and seconds went:
    /// [`Budget`]), `checks` (what each check did: its event with
    /// a `line` in words), and what the ending carries (`question` and `missing_params`,
    /// `blocked_reason`, or `error`).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "answer": self.answer(),
            "stop_reason": self.stop_reason(),
            "iterations": self.iterations,
            "steps": self.steps,
            "usage": self.usage,
            "ms": self.elapsed.as_millis() as u64,
            "budget": self.budget,
            "checks": self.checks.iter().map(|e| {
                let mut v = json!(e);
                v["line"] = json!(e.check_line());
                v
            }).collect::<Vec<_>>(),
            "approvals": self.approvals.iter().map(|e| {
                let mut v = json!(e);
                v["line"] = json!(e.approval_line());
                v
            }).collect::<Vec<_>>(),
        });
        match &self.ending {
            Ending::Clarify {
                question,
                missing_params,
            } => {
                v["question"] = json!(question);
                v["missing_params"] = json!(missing_params);
            }
            Ending::Blocked { reason } => v["blocked_reason"] = json!(reason),
            Ending::InvalidReplies { .. } | Ending::CutOff { .. } => {
                v["error"] = json!(self.ending.message())
            }
            _ => {}
        }
        v
    }
}
