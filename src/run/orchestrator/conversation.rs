//! [`Conversation`]: the history kept across questions, over one [`Orchestrator`].

use super::{Orchestrator, OrchestratorError, Outcome};
use crate::backend::Message;
use crate::deadline::Deadline;

/// A conversation: each question sees the earlier questions and answers.
///
/// ```
/// use toolloop::{Conversation, Orchestrator, Scripted};
///
/// let model = Scripted::new([
///     r#"{"kind": "final_answer", "thought": "", "content": "Nice to meet you, Ada."}"#,
///     r#"{"kind": "final_answer", "thought": "", "content": "Your name is Ada."}"#,
/// ]);
/// let seen = model.seen();
/// let mut chat = Conversation::new(Orchestrator::builder().backend(model).build()?);
/// chat.ask("I am Ada.")?;
/// chat.ask("What is my name?")?;
/// // The second request carried the first exchange.
/// assert_eq!(seen.lock().unwrap()[1][1].content, "I am Ada.");
/// # Ok::<(), toolloop::OrchestratorError>(())
/// ```
pub struct Conversation {
    orchestrator: Orchestrator,
    turns: Vec<Message>,
}

impl Conversation {
    /// A new conversation.
    pub fn new(orchestrator: Orchestrator) -> Self {
        Conversation {
            orchestrator,
            turns: Vec::new(),
        }
    }

    /// Asks one question in the context of the earlier ones. Only completed exchanges are
    /// kept in the history.
    pub fn ask(&mut self, query: &str) -> Result<Outcome, OrchestratorError> {
        let deadline = Deadline::after(self.orchestrator.config.timeout);
        let outcome = self
            .orchestrator
            .run_with_deadline(query, &self.turns, deadline)?;
        if outcome.answer().is_some() {
            self.turns.extend_from_slice(outcome.history_delta());
        }
        Ok(outcome)
    }

    /// Forgets the earlier turns.
    pub fn reset(&mut self) {
        self.turns.clear();
    }

    /// The earlier turns (without the system prompt).
    pub fn turns(&self) -> &[Message] {
        &self.turns
    }

    /// The orchestrator.
    pub fn orchestrator(&self) -> &Orchestrator {
        &self.orchestrator
    }
}
