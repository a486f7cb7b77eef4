//! toolloop makes small local models use tools reliably.
//!
//! Every model turn is constrained to a JSON schema ([`schema::call_schema`]): call a
//! tool, give the final answer, or ask the user. What comes back is repaired when it is
//! broken ([`repair`]), read as a [`turn::Turn`], checked against the schema narrowed to
//! the tools at hand ([`schema::CallSchema`]), and dispatched by the loop
//! ([`orchestrator`]) until there is an answer, a limit or the deadline.
//!
//! A whole run with a scripted model and a Rust closure as the tool:
//!
//! ```
//! use serde_json::json;
//! use toolloop::backend::scripted::Scripted;
//! use toolloop::deadline::Deadline;
//! use toolloop::orchestrator::{Orchestrator, StopKind};
//! use toolloop::tools::{Catalogue, ToolSpec, closure::FnTools};
//!
//! let mut tools = FnTools::new();
//! tools.add(
//!     ToolSpec::new("order_status", "Status of an order", json!({"type": "object",
//!         "properties": {"id": {"type": "integer"}}, "required": ["id"]})),
//!     |args| Ok(json!({"id": args["id"], "status": "shipped"})),
//! );
//! // A reply cut off by the token limit, in a code fence, then the answer.
//! let model = Scripted::new([
//!     "```json\n{\"kind\": \"tool_call\", \"thought\": \"look it up\", \"tool\": \"order_status\", \"arguments\": {\"id\": 7}",
//!     r#"{"kind": "final_answer", "thought": "done", "content": "Order 7 has shipped."}"#,
//! ]);
//! let mut o = Orchestrator::builder()
//!     .backend(model)
//!     .catalogue(Catalogue::load(vec![Box::new(tools)], Deadline::none())?)
//!     .build()?;
//! let outcome = o.run("Where is my order 7?")?;
//! assert_eq!(outcome.answer.as_deref(), Some("Order 7 has shipped."));
//! assert_eq!(outcome.stop_reason, StopKind::Completed);
//! assert_eq!(outcome.steps[0].observation, r#"{"id":7,"status":"shipped"}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With Ollama and the built-in tools (the README's "library in ten lines"):
//!
//! ```no_run
//! use toolloop::backend::ollama::Ollama;
//! use toolloop::deadline::Deadline;
//! use toolloop::orchestrator::Orchestrator;
//! use toolloop::tools::{ToolSetup, builtin::BuiltinConfig};
//!
//! let tools = ToolSetup { builtin: Some(BuiltinConfig::default()), ..Default::default() }
//!     .connect(Deadline::none())?;
//! let mut o = Orchestrator::builder().backend(Ollama::new("127.0.0.1", "gemma3:4b")).catalogue(tools).build()?;
//! let outcome = o.run("How much is 12.5 * 4?")?;
//! println!("{:?} after {} iterations", outcome.answer, outcome.iterations);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod backend;
pub mod deadline;
pub mod demo;
pub mod display;
pub mod engine;
pub mod eval;
pub mod events;
pub mod guardrails;
mod http;
pub mod orchestrator;
pub mod prompt;
pub mod repair;
pub mod schema;
pub mod server;
pub mod tools;
pub mod turn;
