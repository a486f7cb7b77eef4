//! The README's library example as a whole program: the built-in tools and one Rust
//! function as a tool, a question answered by the model Ollama serves.
//!
//! ```sh
//! cargo run --example library -- "Where is order 7?"
//! ```
//!
//! `OLLAMA_HOST` and `TOOLLOOP_MODEL` choose the server and the model, as for the command
//! line. `tests/readme.rs` runs it against a stand-in for Ollama.

use serde::Deserialize;
use toolloop::schemars::JsonSchema;
use toolloop::{BuiltinConfig, FnTool, Ollama, Orchestrator, ToolSetup};

/// The arguments of `order_status`: the model is held to their schema.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "toolloop::schemars")]
struct Order {
    /// The order number.
    id: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let host = std::env::var("OLLAMA_HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let model = std::env::var("TOOLLOOP_MODEL").unwrap_or_else(|_| "gemma3:4b".into());
    let question = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "How much is 12.5 * 4?".into());

    // It only reads: its calls run unasked. A tool not declared so asks first.
    let order_status = FnTool::new("order_status", "Where an order is", |o: Order| {
        Ok(format!("order {} has shipped", o.id))
    })
    .reading_only();
    let mut o = Orchestrator::builder()
        .backend(Ollama::new(&host, &model))
        .tools(ToolSetup::builtin(BuiltinConfig::default()))
        .tool(order_status)
        .build()?;
    let outcome = o.run(&question)?;
    println!("{}", outcome.answer().unwrap_or("(no answer)"));
    eprintln!(
        "{} iterations, {}",
        outcome.iterations,
        outcome.budget.line()
    );
    Ok(())
}
