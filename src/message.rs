//! What passes between the loop and a model, whatever the server: the history's
//! messages and a normalised reply with why it stopped, its token counts, durations and
//! per-token probabilities. A leaf: backends fill these in, the turn and the checks read
//! them, and neither needs the other.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person (and, for most models, tool results written as text).
    User,
    /// The model.
    Assistant,
    /// A tool's result. Backends decide how the model gets to see it: Ollama's gemma3
    /// template silently drops `tool` messages, so most models receive it as user text.
    Tool,
}

/// One message of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: String,
    /// For [`Role::Tool`]: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
    /// A tool result for the model.
    pub fn tool(name: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: Role::Tool,
            content: content.into(),
            tool_name: Some(name.into()),
        }
    }
    fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_name: None,
        }
    }

    /// A tool result as user-role text, for models whose template has no tool role:
    /// `Tool result (get_weather): {...}`.
    pub fn tool_result_as_user_text(&self) -> String {
        format!(
            "Tool result ({}): {}",
            self.tool_name.as_deref().unwrap_or("tool"),
            self.content
        )
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished (end of turn or a stop sequence).
    #[default]
    Finished,
    /// The token limit was hit: the reply is truncated and goes to the repairer.
    Length,
    /// The caller stopped the stream (the reply was repeating itself,
    /// `crate::checks::looping_reply`): the reply is cut and goes to the repairer.
    Stopped,
}

/// Token counts of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens evaluated for this request.
    pub prompt_tokens: u64,
    /// Prompt tokens reused from the server's cache, where the server says
    /// (llama-server's `timings.cache_n`).
    pub cached_prompt_tokens: Option<u64>,
    /// Tokens generated.
    pub completion_tokens: u64,
}

impl Usage {
    /// Adds another request's counts.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        if let Some(c) = other.cached_prompt_tokens {
            *self.cached_prompt_tokens.get_or_insert(0) += c;
        }
    }
}

/// Where the time of one request went, as far as the server says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// Wall time of the request, measured here.
    pub total: Duration,
    /// Time the server spent loading the model.
    pub load: Option<Duration>,
    /// Time spent evaluating the prompt.
    pub prompt: Option<Duration>,
    /// Time spent generating.
    pub generation: Option<Duration>,
}

/// One generated token with the model's log-probability of it and of its most likely
/// alternatives at that position (before the grammar filtered them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text.
    pub token: String,
    /// Its natural-log probability.
    pub logprob: f64,
    /// The most likely tokens at this position, with their log-probabilities.
    pub top: Vec<(String, f64)>,
}

/// A model's reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatReply {
    /// The raw text, exactly as the model produced it.
    pub text: String,
    /// Why generation stopped.
    pub stop: StopReason,
    /// Token counts.
    pub usage: Usage,
    /// Durations.
    pub timings: Timings,
    /// Per-token log-probabilities, when they were asked for (`GenOptions::top_logprobs`)
    /// and the server gives them.
    pub logprobs: Vec<TokenLogprob>,
}
