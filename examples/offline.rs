//! The library with no server: a scripted model plays the two replies a model would
//! write, so the whole loop — the call checked, the Rust function run, its result in the
//! history, the answer — runs offline. Tests of code built on toolloop do the same.
//!
//! ```sh
//! cargo run --example offline
//! ```

use serde::Deserialize;
use std::process::ExitCode;
use toolloop::schemars::JsonSchema;
use toolloop::{FnTool, Orchestrator, Scripted};

/// The arguments of `order_status`.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "toolloop::schemars")]
struct Order {
    /// The order number.
    id: u32,
}

fn main() -> ExitCode {
    // What a model would write, turn by turn: a call, then an answer from its result.
    let model = Scripted::new([
        r#"{"kind": "tool_call", "thought": "", "tool": "order_status", "arguments": {"id": 7}}"#,
        r#"{"kind": "final_answer", "thought": "", "content": "Order 7 has shipped."}"#,
    ]);
    let order_status = FnTool::new("order_status", "Where an order is", |o: Order| {
        Ok(format!("order {} has shipped", o.id))
    })
    .reading_only();
    let run = Orchestrator::builder()
        .backend(model)
        .tool(order_status)
        .build()
        .and_then(|mut o| o.run("Where is order 7?"));
    match run {
        Ok(outcome) => {
            println!("{}", outcome.answer().unwrap_or("(no answer)"));
            eprintln!(
                "{} model turns, {}",
                outcome.iterations,
                outcome.budget.line()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
