//! A model that replays replies: written in code for tests, or recorded from a real
//! session (`--record FILE`) and replayed offline, so a real model's behaviour becomes a
//! test that needs no server.
//!
//! A recording is JSON Lines, one reply a line:
//! `{"reply": "<raw text>", "stop": "finished", "usage": {...}}`. A line that is just a
//! JSON string is a reply that finished normally.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{
    Backend, BackendError, ChatReply, ChatRequest, GenOptions, Message, StopReason, TextSink,
    Timings, TokenLogprob, Usage,
};
use crate::deadline::Deadline;

/// One reply of a script or recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedReply {
    /// The raw text the model produced.
    pub reply: String,
    /// Why it stopped.
    #[serde(default = "finished")]
    pub stop: StopReason,
    /// Token counts, as the server reported them.
    #[serde(default)]
    pub usage: Usage,
    /// The log-probabilities of the opening tokens, where the model chose the kind of
    /// its turn (`RECORDED_LOGPROBS` at most), so a replay decides as the run did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<TokenLogprob>,
    /// How many bytes the reply begins with that the server was given to continue
    /// ([`ChatReply::given`]): its log-probabilities begin after them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub given: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How many opening tokens' log-probabilities a recording keeps: the kind is chosen
/// within the first few, and the rest would make each line hundreds of entries long.
pub const RECORDED_LOGPROBS: usize = 12;

fn finished() -> StopReason {
    StopReason::Finished
}

impl ScriptedReply {
    /// A reply that finished normally.
    pub fn text(reply: impl Into<String>) -> Self {
        ScriptedReply {
            reply: reply.into(),
            stop: StopReason::Finished,
            usage: Usage::default(),
            logprobs: Vec::new(),
            given: 0,
        }
    }

    /// A reply cut off by the token limit.
    pub fn truncated(reply: impl Into<String>) -> Self {
        ScriptedReply {
            stop: StopReason::Length,
            ..Self::text(reply)
        }
    }
}

/// The messages of every request a [`Scripted`] backend received, for assertions.
pub type SeenRequests = Arc<Mutex<Vec<Vec<Message>>>>;

/// A backend that answers from a list of replies, in order.
///
/// ```
/// use toolloop::backend::{Backend, ChatRequest, GenOptions, Message};
/// use toolloop::backend::Scripted;
/// use toolloop::Deadline;
///
/// let mut model = Scripted::new([r#"{"kind": "final_answer", "thought": "", "content": "hi"}"#]);
/// let messages = [Message::user("hello")];
/// let req = ChatRequest { messages: &messages, schema: None, options: &GenOptions::default() };
/// let reply = model.chat(&req, Deadline::none(), &mut toolloop::backend::keep_going).unwrap();
/// assert!(reply.text.contains("hi"));
/// assert!(model.chat(&req, Deadline::none(), &mut toolloop::backend::keep_going).is_err()); // script exhausted
/// ```
#[derive(Debug, Clone)]
pub struct Scripted {
    replies: VecDeque<ScriptedReply>,
    used: usize,
    delay: Duration,
    seen: SeenRequests,
    options: Arc<Mutex<Vec<GenOptions>>>,
}

impl Scripted {
    /// Replies given as raw texts.
    pub fn new<S: Into<String>>(replies: impl IntoIterator<Item = S>) -> Self {
        Self::from_replies(replies.into_iter().map(ScriptedReply::text))
    }

    /// Replies with stop reasons and usage.
    pub fn from_replies(replies: impl IntoIterator<Item = ScriptedReply>) -> Self {
        Scripted {
            replies: replies.into_iter().collect(),
            used: 0,
            delay: Duration::ZERO,
            seen: SeenRequests::default(),
            options: Arc::default(),
        }
    }

    /// Replays a recording (JSON Lines, see the module docs).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, BackendError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| BackendError::Recording {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::from_jsonl(&text, &path.display().to_string())
    }

    /// Replays a recording given as text; `name` is used in error messages.
    pub fn from_jsonl(text: &str, name: &str) -> Result<Self, BackendError> {
        let err = |detail: String| BackendError::Recording {
            path: name.to_string(),
            detail,
        };
        let total = text.lines().count();
        let mut replies = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let reply = match serde_json::from_str::<serde_json::Value>(line) {
                Ok(serde_json::Value::String(s)) => ScriptedReply::text(s),
                Ok(v) => {
                    serde_json::from_value(v).map_err(|e| err(format!("line {}: {e}", n + 1)))?
                }
                // A line cut by a crash while recording: everything before it is kept.
                Err(_) if n + 1 == total => {
                    log::warn!("{name}: ignoring an incomplete last line");
                    continue;
                }
                Err(e) => return Err(err(format!("line {}: {e}", n + 1))),
            };
            replies.push(reply);
        }
        Ok(Self::from_replies(replies))
    }

    /// Waits this long before each reply, as a slow model would.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// A handle on the messages of every request received so far.
    pub fn seen(&self) -> SeenRequests {
        Arc::clone(&self.seen)
    }

    /// A handle on the generation options of every request received so far.
    pub fn seen_options(&self) -> Arc<Mutex<Vec<GenOptions>>> {
        Arc::clone(&self.options)
    }

    /// Replies not used yet.
    pub fn remaining(&self) -> usize {
        self.replies.len()
    }
}

impl Backend for Scripted {
    fn describe(&self) -> String {
        "scripted model".into()
    }

    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let started = Instant::now();
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(request.messages.to_vec());
        }
        if let Ok(mut options) = self.options.lock() {
            options.push(request.options.clone());
        }
        if !self.delay.is_zero() {
            let wait = deadline.cap(self.delay);
            std::thread::sleep(wait);
            if wait < self.delay {
                return Err(BackendError::Timeout {
                    waited: started.elapsed(),
                });
            }
        }
        let Some(next) = self.replies.pop_front() else {
            return Err(BackendError::ScriptExhausted { used: self.used });
        };
        self.used += 1;
        // Stream in pieces, as a server would.
        let mut rest = next.reply.as_str();
        while !rest.is_empty() {
            let mut cut = rest.len().min(24);
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let stop = sink(&rest[..cut]).is_break();
            rest = &rest[cut..];
            if stop {
                let sent = next.reply.len() - rest.len();
                return Ok(ChatReply {
                    text: next.reply[..sent].to_string(),
                    given: next.given.min(sent),
                    stop: StopReason::Stopped,
                    usage: next.usage,
                    timings: Timings {
                        total: started.elapsed(),
                        ..Timings::default()
                    },
                    logprobs: next.logprobs,
                });
            }
        }
        Ok(ChatReply {
            text: next.reply,
            given: next.given,
            stop: next.stop,
            usage: next.usage,
            timings: Timings {
                total: started.elapsed(),
                ..Timings::default()
            },
            logprobs: next.logprobs,
        })
    }
}

/// Wraps a backend and appends every reply it gives to a recording file, one line each,
/// flushed at once, so the session can be replayed with [`Scripted::from_file`].
#[derive(Debug)]
pub struct Recorder<B> {
    inner: B,
    file: File,
    path: PathBuf,
}

impl<B: Backend> Recorder<B> {
    /// Records `inner`'s replies to `path` (appending).
    pub fn new(inner: B, path: impl AsRef<Path>) -> Result<Self, BackendError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| BackendError::Recording {
                path: path.display().to_string(),
                detail: e.to_string(),
            })?;
        Ok(Recorder { inner, file, path })
    }
}

impl<B: Backend> Backend for Recorder<B> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn identity(&self) -> Option<(String, String)> {
        self.inner.identity()
    }

    fn model_file(&self) -> Option<super::ModelFile> {
        self.inner.model_file()
    }

    fn preflight(&mut self, deadline: Deadline) -> Result<(), BackendError> {
        self.inner.preflight(deadline)
    }

    fn watch(&mut self, stop: &crate::deadline::StopHandle) {
        self.inner.watch(stop)
    }

    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        let reply = self.inner.chat(request, deadline, sink)?;
        let line = ScriptedReply {
            reply: reply.text.clone(),
            given: reply.given,
            stop: reply.stop,
            usage: reply.usage,
            logprobs: reply
                .logprobs
                .iter()
                .take(RECORDED_LOGPROBS)
                .cloned()
                .collect(),
        };
        let mut text = serde_json::to_string(&line).unwrap_or_default();
        text.push('\n');
        self.file
            .write_all(text.as_bytes())
            .and_then(|_| self.file.flush())
            .map_err(|e| BackendError::Recording {
                path: self.path.display().to_string(),
                detail: e.to_string(),
            })?;
        Ok(reply)
    }
}
