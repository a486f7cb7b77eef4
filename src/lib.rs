//! toolloop makes small local models use tools reliably.
//!
//! Every model turn is constrained to a JSON schema ([`schema::call_schema`]): call a
//! tool, give the final answer, or ask the user. What comes back is repaired when it is
//! broken ([`repair`]), read as a [`turn::Turn`] and checked against the schema narrowed to
//! the tools at hand ([`schema::CallSchema`]), with an error message short enough to feed
//! back to the model.
//!
//! ```
//! use toolloop::schema::{CallSchema, Narrowing};
//! use toolloop::tools::ToolSpec;
//! use toolloop::turn::Turn;
//!
//! let tools = [ToolSpec::new(
//!     "calculator",
//!     "Exact arithmetic",
//!     serde_json::json!({"type": "object", "properties": {"expression": {"type": "string"}},
//!                        "required": ["expression"]}),
//! )];
//! let schema = CallSchema::for_tools(&tools, Narrowing::PerTool);
//!
//! // A reply cut off by the token limit, in a code fence, with single quotes.
//! let reply = "```json\n{'kind': 'tool_call', 'thought': 'exact product', \
//!              'tool': 'calculator', 'arguments': {'expression': '12.5 * 4'}";
//! let parsed = Turn::parse(reply)?;
//! schema.check(&parsed.turn).expect("a valid call");
//! assert_eq!(parsed.turn.kind().as_str(), "tool_call");
//! # Ok::<(), toolloop::turn::TurnError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod backend;
pub mod deadline;
pub mod demo;
pub mod display;
pub mod engine;
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
