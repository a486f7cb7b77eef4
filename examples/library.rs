//! The README's library example as a whole program: the built-in tools and one Rust
//! function as a tool, a question answered by the model Ollama serves.
//!
//! ```sh
//! cargo run --example library -- "Where is order 7?"
//! ```
//!
//! `OLLAMA_HOST` and `TOOLLOOP_MODEL` choose the server and the model, as for the command
//! line; `TOOLLOOP_BASE_URL` names an OpenAI-compatible server (llama-server, vLLM) to use
//! instead of Ollama. `tests/readme.rs` runs it against stand-ins for both.

use serde::Deserialize;
use std::process::ExitCode;
use toolloop::schemars::JsonSchema;
use toolloop::{Backend, BuiltinConfig, FnTool, Ollama, OpenAi, Orchestrator, ToolSetup};

/// The arguments of `order_status`: the model is held to their schema.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "toolloop::schemars")]
struct Order {
    /// The order number.
    id: u32,
}

fn main() -> ExitCode {
    let question = std::env::args().nth(1);
    match ask(question.as_deref().unwrap_or("How much is 12.5 * 4?")) {
        Ok(answer) => println!("{answer}"),
        // The message says what to do ("Ollama is not running at …: start it with …").
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn ask(question: &str) -> Result<String, Box<dyn std::error::Error>> {
    let model = std::env::var("TOOLLOOP_MODEL").unwrap_or_else(|_| "gemma3:4b".into());
    // An OpenAI-compatible server when TOOLLOOP_BASE_URL names one, else Ollama.
    let backend: Box<dyn Backend> = match std::env::var("TOOLLOOP_BASE_URL") {
        Ok(url) => Box::new(OpenAi::new(&url, &model, None)),
        Err(_) => {
            let host = std::env::var("OLLAMA_HOST").unwrap_or_else(|_| "127.0.0.1".into());
            Box::new(Ollama::new(&host, &model))
        }
    };
    // It only reads: its calls run unasked. A tool not declared so asks first.
    let order_status = FnTool::new("order_status", "Where an order is", |o: Order| {
        Ok(format!("order {} has shipped", o.id))
    })
    .reading_only();
    let mut o = Orchestrator::builder()
        .backend(backend)
        .tools(ToolSetup::builtin(BuiltinConfig::default()))
        .tool(order_status)
        .build()?;
    Ok(o.run(question)?.answer().unwrap_or("(no answer)").into())
}
