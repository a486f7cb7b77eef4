//! One model turn: what the model is asked (the call schema, the prompt, each tool's
//! argument schema made safe for the grammar) and what its reply becomes (repaired JSON,
//! a [`Turn`], the answer's text as it streams, a loop noticed in the stream).
//!
//! Pure: imports no backend, tool, check or run; only the leaf modules.

pub mod answer_stream;
pub(crate) mod call_stream;
pub(crate) mod language;
pub(crate) mod placeholder;
pub mod prompt;
pub(crate) mod question;
pub mod repair;
mod reply;
pub mod schema;
pub(crate) mod tool_schema;

pub use reply::*;
