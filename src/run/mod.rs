//! One run, from the question to its ending: the engine's state machine and the blocking
//! driver around it, what the run remembers, what it tells the model, its events, and how
//! it ends.
//!
//! May import `turn/`, `checks/`, `backend/`, `tools/` and the leaf modules; never
//! `serve/`, `eval/` or `cli/`.

pub mod ending;
pub mod engine;
pub mod error;
pub mod events;
pub mod feedback;
pub mod guardrails;
pub mod memory;
pub mod orchestrator;
pub mod outcome;
pub mod request;
