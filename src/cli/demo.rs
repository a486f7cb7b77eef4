//! The offline demo: a real run with everything but the model real. The built-in tool
//! server starts on a free port of 127.0.0.1 in-process, the loop talks to it over HTTP,
//! and a scripted model (`demo/script.jsonl`) plays a session that shows each part: a
//! clarifying question answered, a failing tool the model recovers from, a tool call and
//! its result, a reply cut at the token limit that the repairer fixes, and the answer.

use std::time::Duration;

use crate::backend::scripted::Scripted;
use crate::run::events::Observer;
use crate::run::orchestrator::{Orchestrator, OrchestratorError, Outcome};
use crate::serve::tool_server::ToolServer;
use crate::tools::builtin::{Builtin, BuiltinConfig};
use crate::tools::http::HttpTools;

/// The question the demo asks.
pub const QUESTION: &str = "What's the weather like, and how warm is that in Fahrenheit?";
/// What the demo's "person" answers when asked which city.
pub const CLARIFY_ANSWER: &str = "Tokyo";
/// The scripted model's replies.
pub const SCRIPT: &str = include_str!("../../demo/script.jsonl");

/// Runs the demo. `say` receives the lines a person would see of the clarifying exchange
/// (the question and the typed answer).
pub fn run(
    observer: Box<dyn Observer>,
    mut say: Box<dyn FnMut(String) + Send>,
    delay_ms: u64,
) -> Result<Outcome, OrchestratorError> {
    let config_err = |e: crate::tools::ToolError| OrchestratorError::Tools {
        error: e,
        steps: Vec::new(),
    };
    let tools = Builtin::new(&BuiltinConfig {
        demo: true,
        ..BuiltinConfig::default()
    })
    .map_err(config_err)?;
    let server = ToolServer::bind("127.0.0.1:0", Box::new(tools))
        .map_err(config_err)?
        .spawn();
    let model = Scripted::from_jsonl(SCRIPT, "demo/script.jsonl")
        .map_err(|error| OrchestratorError::Backend {
            error,
            steps: Vec::new(),
        })?
        .with_delay(Duration::from_millis(delay_ms));
    let mut orchestrator = Orchestrator::builder()
        .backend(model)
        .source(HttpTools::new(server.url()))
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(20))
        .observer(observer)
        .clarify_handler(move |question: &str, _: &[String]| {
            say(format!("? {question}"));
            say(format!("> {CLARIFY_ANSWER}"));
            Some(CLARIFY_ANSWER.to_string())
        })
        .build()?;
    let outcome = orchestrator.run(QUESTION);
    drop(orchestrator);
    drop(server);
    outcome
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_answers_with_the_tools_result() {
        let observer = Box::new(|_: &crate::run::events::Event| {});
        let outcome = super::run(observer, Box::new(|_| {}), 0).unwrap();
        assert!(outcome.answer().unwrap().contains("64.4"));
    }
}
