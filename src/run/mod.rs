//! One run, from the question to its ending: the engine's state machine and the blocking
//! driver around it, what the run remembers, what it tells the model, its events, and how
//! it ends.
//!
//! May import `turn/`, `checks/`, `backend/`, `tools/` and the leaf modules; never
//! `serve/`, `eval/` or `cli/`.

pub(crate) mod approval;
pub(crate) mod budget;
pub(crate) mod ending;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod feedback;
pub(crate) mod guardrails;
pub(crate) mod memory;
pub(crate) mod orchestrator;
pub(crate) mod outcome;
pub(crate) mod request;
