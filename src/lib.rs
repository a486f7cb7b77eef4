//! toolloop makes small local models use tools reliably.
//!
//! Every model turn is constrained to a JSON schema ([`turn::schema::call_schema`]): call a
//! tool, give the final answer, or ask the person. What comes back is repaired when it is
//! broken ([`turn::repair`]), read as a [`turn::Turn`], checked against the schema narrowed to
//! the tools at hand ([`turn::schema::CallSchema`]), and dispatched by the loop
//! ([`Orchestrator`]) until there is an answer, a limit or the deadline. How a run ended
//! is one [`Ending`]. `docs/ARCHITECTURE.md` follows one question through the modules.
//!
//! A whole run with a scripted model and a Rust function as the tool:
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use toolloop::{FnTool, Orchestrator, Scripted, StopKind};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Order {
//!     /// The order number.
//!     id: u32,
//! }
//!
//! // A reply cut off by the token limit, in a code fence, then the answer.
//! let model = Scripted::new([
//!     "```json\n{\"kind\": \"tool_call\", \"thought\": \"look it up\", \"tool\": \"order_status\", \"arguments\": {\"id\": 7}",
//!     r#"{"kind": "final_answer", "thought": "done", "content": "Order 7 has shipped."}"#,
//! ]);
//! let mut o = Orchestrator::builder()
//!     .backend(model)
//!     .tool(
//!         FnTool::new("order_status", "Status of an order", |o: Order| {
//!             Ok(serde_json::json!({"id": o.id, "status": "shipped"}))
//!         })
//!         .reading_only(),
//!     )
//!     .build()?;
//! let outcome = o.run("Where is my order 7?")?;
//! assert_eq!(outcome.answer(), Some("Order 7 has shipped."));
//! assert_eq!(outcome.stop_reason(), StopKind::Completed);
//! assert_eq!(outcome.steps[0].observation, r#"{"id":7,"status":"shipped"}"#);
//! # Ok::<(), toolloop::OrchestratorError>(())
//! ```
//!
//! With Ollama and the built-in tools, the README's example:
//!
//! ```no_run
//! use toolloop::{BuiltinConfig, Ollama, Orchestrator, ToolSetup};
//!
//! let mut o = Orchestrator::builder()
//!     .backend(Ollama::new("127.0.0.1", "gemma3:4b"))
//!     .tools(ToolSetup::builtin(BuiltinConfig::default()))
//!     .build()?;
//! let outcome = o.run("How much is 12.5 * 4?")?;
//! println!("{:?} after {} iterations", outcome.answer(), outcome.iterations);
//! # Ok::<(), toolloop::OrchestratorError>(())
//! ```
//!
//! Cargo features: `server` (the HTTP tool server, [`serve`]), `web` (the web page and
//! its run API), `sqlite` (the built-in `sql_query` tool), `eval` (`toolloop eval`) and
//! `cli` (the command line, which needs all the others), all on by default;
//! `default-features = false` leaves the loop, the backends, the checks and the tool
//! clients.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

// std's `eprintln!` and `eprint!` panic when stderr is closed or its reader went away
// (`toolloop demo -v 2>&1 | head -1`, `2>&-`), and a panic there exits 101 with a trace.
// These shadow them for the whole crate (macros defined here are in scope in every module
// below): a line that cannot be written is dropped, as ripgrep does with its messages.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
// Only the command line writes a prompt without a line end.
#[cfg(feature = "cli")]
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

pub mod backend;
mod calibration;
pub mod checks;
#[cfg(feature = "cli")]
mod cli;
/// The command line's entry point, for the `toolloop` binary alone: the command line is
/// built into the library (it reads the library's internals), and is no part of its API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub use cli::main as cli_main;
mod config;
mod deadline;
// Driven by the command line only (nothing of it is public), so built without `cli` it
// is compiled and checked but unused.
#[cfg(feature = "eval")]
#[cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]
mod eval;
mod http;
mod message;
mod run;
#[cfg(feature = "server")]
pub mod serve;
mod tool_spec;
pub mod tools;
pub mod turn;
mod validate;

pub use backend::{Backend, BackendError, GenOptions, Message};
pub use backend::{Ollama, OpenAi, Scripted};
pub use calibration::{Calibration, CalibrationFile, Thresholds, leanings_path};
pub use checks::{CheckAction, CheckInfo, CheckLevels};
pub use config::{AnswerLanguage, BackendKind, Config, Today};
pub use deadline::{Deadline, StopHandle};
pub use run::approval::{Answer, ApprovalRequest, Approver, DecidedBy, Permissions, Unsaid};
pub use run::budget::{Budget, Generated};
pub use run::ending::{Ending, StopKind};
pub use run::events::{Event, Observer, Trace, Transcript};
pub use run::guardrails::{Action, Guardrails, Verdict};
pub use run::orchestrator::{
    ClarifyHandler, Conversation, Orchestrator, OrchestratorBuilder, OrchestratorError, Outcome,
    run_loop,
};
/// The `schemars` toolloop derives tool schemas with: a [`FnTool`]'s argument type derives
/// `JsonSchema` from this one (`#[schemars(crate = "toolloop::schemars")]`), so its version
/// always matches.
pub use schemars;
pub use tools::{BuiltinConfig, FnTool};
pub use tools::{Catalogue, ToolError, ToolResult, ToolSetup, ToolSource, ToolSpec};
