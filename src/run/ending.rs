//! How a run ends: one type, with its message and its exit code beside it.
//!
//! The engine decides the [`Ending`]; the outcome carries it; the `stopped` event and the
//! transcript name its [`StopKind`]; the command line prints its message and exits with its
//! code. Nothing translates one description of an ending into another, so they cannot
//! disagree.
//!
//! The policy: an ending the *model* caused (it answered, asked, ran out of iterations or
//! time, kept replying with invalid turns, was blocked by a guardrail) is an [`Ending`]
//! inside an `Ok` outcome, because the steps, history and usage are worth having; a fault
//! of the *infrastructure* (server down, model missing, tool API unreachable) is an `Err`.
//! The one-call API ([`crate::run_loop`]) turns every ending but an answer into its error
//! (`Outcome::into_answer` in the orchestrator module).
//!
//! This module is a leaf: it imports nothing from the crate.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Exit code for an answer (the command line's contract).
pub const EXIT_OK: u8 = 0;
/// Exit code for a runtime error: server down, model missing, a guardrail blocked the run,
/// the run was stopped.
pub const EXIT_RUNTIME: u8 = 1;
/// Exit code for a usage error (a bad flag or value).
#[cfg(feature = "cli")]
pub const EXIT_USAGE: u8 = 2;
/// Exit code when no answer came within the iterations.
pub const EXIT_MAX_ITERATIONS: u8 = 3;
/// Exit code when the deadline passed.
pub const EXIT_TIMEOUT: u8 = 4;
/// Exit code when the model asked a question and nobody was there to answer.
pub const EXIT_CLARIFY: u8 = 5;
/// Exit code when the model's call was cut at the token limit, again after a re-ask with
/// more room, and so was not run.
pub const EXIT_CUT_OFF: u8 = 6;
/// Exit code when the model's replies stayed invalid after every re-ask (no valid turn).
pub const EXIT_INVALID: u8 = 7;

/// Why a run stopped, as a word: `stop_reason` in `--json`, the outcome and the
/// `stopped` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopKind {
    /// The model answered.
    Completed,
    /// A tool became unavailable and the model answered without it.
    ToolFailureDegraded,
    /// The model asked a question nobody answered.
    ClarificationNeeded,
    /// No answer within the iterations.
    MaxIterations,
    /// The deadline passed.
    Timeout,
    /// A guardrail stopped the run.
    Blocked,
    /// The model kept replying with something that is not a valid turn.
    InvalidReplies,
    /// The person stopped the run ([`crate::deadline::StopHandle`]).
    Cancelled,
    /// The model's call was cut before its arguments ended twice (at the token limit,
    /// or where it began to repeat itself); it was not run.
    CutOff,
    /// The model's calls were handed back to the caller to run (`toolloop proxy`, whose
    /// client runs its own tools).
    ToolCalls,
}

impl StopKind {
    /// The word used in JSON and the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            StopKind::Completed => "completed",
            StopKind::ToolFailureDegraded => "tool_failure_degraded",
            StopKind::ClarificationNeeded => "clarification_needed",
            StopKind::MaxIterations => "max_iterations",
            StopKind::Timeout => "timeout",
            StopKind::Blocked => "blocked",
            StopKind::InvalidReplies => "invalid_replies",
            StopKind::Cancelled => "cancelled",
            StopKind::CutOff => "cut_off",
            StopKind::ToolCalls => "tool_calls",
        }
    }

    /// The command line's exit code for this ending.
    ///
    /// ```
    /// use toolloop::StopKind;
    /// assert_eq!(StopKind::Completed.exit_code(), 0);
    /// assert_eq!(StopKind::Timeout.exit_code(), 4);
    /// ```
    pub fn exit_code(self) -> u8 {
        match self {
            StopKind::Completed | StopKind::ToolFailureDegraded | StopKind::ToolCalls => EXIT_OK,
            StopKind::MaxIterations => EXIT_MAX_ITERATIONS,
            StopKind::Timeout => EXIT_TIMEOUT,
            StopKind::ClarificationNeeded => EXIT_CLARIFY,
            StopKind::CutOff => EXIT_CUT_OFF,
            StopKind::InvalidReplies => EXIT_INVALID,
            StopKind::Blocked | StopKind::Cancelled => EXIT_RUNTIME,
        }
    }

    /// Whether a run that stopped this way has an answer.
    pub fn answered(self) -> bool {
        matches!(self, StopKind::Completed | StopKind::ToolFailureDegraded)
    }
}

impl fmt::Display for StopKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ended, with what each ending carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stop_reason", rename_all = "snake_case")]
pub enum Ending {
    /// `final_answer` arrived.
    Answer {
        /// The answer.
        content: String,
        /// Whether a tool had been declared unavailable before it.
        degraded: bool,
        /// Whether the answer was cut by the token limit.
        truncated: bool,
    },
    /// `clarify` with nobody to answer.
    Clarify {
        /// The model's question.
        question: String,
        /// The parameters it said are missing.
        missing_params: Vec<String>,
    },
    /// No answer within the iterations.
    MaxIterations {
        /// Model turns used.
        iterations: u32,
    },
    /// The deadline passed.
    Timeout {
        /// The run's time limit in milliseconds.
        limit_ms: u64,
    },
    /// A guardrail stopped the run.
    Blocked {
        /// Why.
        reason: String,
    },
    /// Too many invalid replies in a row.
    InvalidReplies {
        /// What was wrong with the last one.
        detail: String,
    },
    /// The person stopped the run.
    Cancelled,
    /// A call cut before its arguments ended, twice: not run.
    CutOff {
        /// The tool the cut call was for.
        tool: String,
        /// The token limit of the last request, where known.
        num_predict: Option<u32>,
        /// Whether the last cut was where the reply began to repeat itself, not the
        /// token limit.
        looped: bool,
    },
    /// The calls the model made, checked, handed back for the caller to run
    /// ([`StopKind::ToolCalls`]).
    ToolCalls {
        /// Each call's tool and arguments, in the order the model wrote them.
        calls: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
    },
}

impl Ending {
    /// The word for this ending.
    pub fn kind(&self) -> StopKind {
        match self {
            Ending::Answer { degraded: true, .. } => StopKind::ToolFailureDegraded,
            Ending::Answer { .. } => StopKind::Completed,
            Ending::Clarify { .. } => StopKind::ClarificationNeeded,
            Ending::MaxIterations { .. } => StopKind::MaxIterations,
            Ending::Timeout { .. } => StopKind::Timeout,
            Ending::Blocked { .. } => StopKind::Blocked,
            Ending::InvalidReplies { .. } => StopKind::InvalidReplies,
            Ending::Cancelled => StopKind::Cancelled,
            Ending::CutOff { .. } => StopKind::CutOff,
            Ending::ToolCalls { .. } => StopKind::ToolCalls,
        }
    }

    /// The answer, for the endings that have one.
    pub fn answer(&self) -> Option<&str> {
        match self {
            Ending::Answer { content, .. } => Some(content),
            _ => None,
        }
    }

    /// What a person should be told about an ending without a clean answer, in the
    /// library's words (a command line adds its own flag names).
    ///
    /// ```
    /// use toolloop::Ending;
    /// let e = Ending::MaxIterations { iterations: 10 };
    /// assert_eq!(e.message().unwrap(), "no answer after 10 iterations");
    /// ```
    pub fn message(&self) -> Option<String> {
        Some(match self {
            Ending::Answer {
                degraded: false, ..
            } => return None,
            Ending::Answer { .. } => "a tool was unavailable; the model answered without it".into(),
            Ending::Clarify {
                question,
                missing_params,
            } => {
                let missing = if missing_params.is_empty() {
                    String::new()
                } else {
                    format!(" (missing: {})", missing_params.join(", "))
                };
                format!("the model needs more information: {question}{missing}")
            }
            Ending::MaxIterations { iterations } => {
                format!("no answer after {iterations} iterations")
            }
            Ending::Timeout { limit_ms } => format!("no answer within {}", seconds(*limit_ms)),
            Ending::Blocked { reason } => format!("blocked: {reason}"),
            Ending::InvalidReplies { detail } => {
                format!("the model's replies were not valid turns: {detail}")
            }
            Ending::Cancelled => "stopped before an answer".into(),
            Ending::ToolCalls { calls } => {
                let names: Vec<&str> = calls.iter().map(|(t, _)| t.as_str()).collect();
                format!("calls handed back to run: {}", names.join(", "))
            }
            Ending::CutOff {
                tool, looped: true, ..
            } => format!(
                "the call of {tool} was cut twice before its arguments ended, the last time \
                 where it began to repeat itself; it was not run. Turn `looping-reply` off \
                 if the repetition is what the call needs"
            ),
            Ending::CutOff {
                tool, num_predict, ..
            } => format!(
                "the call of {tool} was cut off at the token limit{}, twice; it was not run. \
                 Raise `num_predict`",
                num_predict.map_or(String::new(), |n| format!(" ({n} tokens)"))
            ),
        })
    }
}

/// `1.5s`, `30s`: milliseconds as the seconds a person typed.
pub fn seconds(ms: u64) -> String {
    let s = ms as f64 / 1000.0;
    if (s - s.round()).abs() < 0.05 {
        format!("{}s", s.round())
    } else {
        format!("{s:.1}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_serializes_to_its_word() {
        for k in [
            StopKind::Completed,
            StopKind::ToolFailureDegraded,
            StopKind::ClarificationNeeded,
            StopKind::MaxIterations,
            StopKind::Timeout,
            StopKind::Blocked,
            StopKind::InvalidReplies,
            StopKind::CutOff,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }

    #[test]
    fn only_answers_exit_zero() {
        assert_eq!(StopKind::ToolFailureDegraded.exit_code(), EXIT_OK);
        assert_eq!(StopKind::InvalidReplies.exit_code(), EXIT_INVALID);
        assert_eq!(StopKind::Blocked.exit_code(), EXIT_RUNTIME);
        assert_eq!(StopKind::ClarificationNeeded.exit_code(), EXIT_CLARIFY);
        assert_eq!(StopKind::MaxIterations.exit_code(), EXIT_MAX_ITERATIONS);
    }

    #[test]
    fn timeout_message_says_the_seconds_a_person_typed() {
        assert_eq!(
            Ending::Timeout { limit_ms: 1500 }.message().unwrap(),
            "no answer within 1.5s"
        );
        assert_eq!(
            Ending::Timeout { limit_ms: 1003 }.message().unwrap(),
            "no answer within 1s"
        );
    }
}
