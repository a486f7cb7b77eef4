//! The library's error: what stops a run from giving an [`crate::Outcome`], and the
//! errors [`crate::run_loop`] gives for the endings without an answer. Messages are short, lowercase, and say
//! what to do; settings are named in backticks (`` `timeout` ``), which the command line
//! turns into its flags.

use crate::backend::BackendError;
use crate::run::ending::{
    EXIT_CLARIFY, EXIT_INVALID, EXIT_MAX_ITERATIONS, EXIT_RUNTIME, EXIT_TIMEOUT,
};
use crate::run::engine::StepRecord;
use crate::tools::ToolError;

/// Why a run failed. Every variant carries the steps taken so far.
/// [`crate::Orchestrator::run`] returns only the infrastructure ones (the model's
/// endings are in its [`crate::Outcome`]), and [`crate::Outcome::into_answer`] the others.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OrchestratorError {
    /// No answer within the iterations.
    #[error(
        "no answer after {iterations} iterations; raise `max_iterations` or simplify the question"
    )]
    MaxIterationsReached {
        /// Iterations used.
        iterations: u32,
        /// Steps so far.
        steps: Vec<StepRecord>,
    },
    /// The run's deadline passed.
    #[error("no answer within {after}; raise `timeout` (small models on a CPU are slow)")]
    Timeout {
        /// The run's time limit, as `30s`.
        after: String,
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
    /// A tool failed and the run could not go on without it. toolloop itself degrades
    /// instead (the model answers without the tool); the variant is for callers of
    /// [`crate::run_loop`] that match on it.
    #[error("tool {tool} failed: {detail}")]
    ToolExecutionFailed {
        /// The tool.
        tool: String,
        /// What failed.
        detail: String,
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
    /// The person stopped the run ([`crate::deadline::StopHandle`]).
    #[error("stopped before an answer")]
    Cancelled {
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
            | OrchestratorError::Blocked { steps, .. }
            | OrchestratorError::Cancelled { steps } => steps,
            OrchestratorError::Config(_) => &[],
        }
    }

    /// The exit code the command line uses for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            OrchestratorError::MaxIterationsReached { .. } => EXIT_MAX_ITERATIONS,
            OrchestratorError::Timeout { .. } => EXIT_TIMEOUT,
            OrchestratorError::ClarificationNeeded { .. } => EXIT_CLARIFY,
            OrchestratorError::InvalidResponseFormat { .. } => EXIT_INVALID,
            _ => EXIT_RUNTIME,
        }
    }

    pub(crate) fn backend(error: BackendError, steps: Vec<StepRecord>) -> Self {
        match error {
            BackendError::ModelNotFound { model, hint } => {
                OrchestratorError::ModelNotFound { model, hint, steps }
            }
            error => OrchestratorError::Backend { error, steps },
        }
    }

    pub(crate) fn tools(error: ToolError) -> Self {
        OrchestratorError::Tools {
            error,
            steps: Vec::new(),
        }
    }
}
