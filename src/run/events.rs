//! What happens during a run, as events: for the `-v` trace, the `--transcript` file, a
//! progress display, or a library user's own observer.
//!
//! Every event is one JSON object (`{"event": "tool_call", ...}`). The transcript writes
//! each as one line and flushes it at once, so a run killed at any point leaves every
//! completed event on disk; a reader skips a cut last line.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::backend::{StopReason, Usage};
use crate::checks::Finding;

mod trace;
pub use trace::Trace;

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The run began.
    RunStarted {
        /// The person's question.
        query: String,
        /// The model backend.
        model: String,
        /// The tool names.
        tools: Vec<String>,
    },
    /// A request goes to the model.
    ModelRequest {
        /// The iteration (1-based).
        iteration: u32,
        /// How many messages the history holds.
        messages: usize,
        /// Whether only `final_answer`/`clarify` are allowed.
        answer_only: bool,
    },
    /// A piece of the reply as it streams in.
    ModelText {
        /// The text.
        text: String,
    },
    /// One call of a turn of several, as soon as the model has closed it
    /// ([`crate::turn::call_stream`]): the person sees what is being written. Nothing is
    /// run yet; the turn is judged, and its calls run, when the reply ends. A turn asked
    /// again that continues from its calls streams them first, so they are named again
    /// for that request.
    CallWritten {
        /// The tool it names, as written.
        tool: String,
        /// Its arguments, as written.
        arguments: Value,
    },
    /// A call of a tool that only reads, started as soon as the model wrote it
    /// ([`crate::Config::early_calls`]), before its turn is judged. When the turn makes
    /// the same call, its [`Event::ToolCall`] and [`Event::ToolResult`] follow as for any
    /// call, with the result already under way; otherwise [`Event::EarlyCallUnused`].
    CallSentEarly {
        /// The tool.
        tool: String,
        /// The arguments, as written.
        arguments: Map<String, Value>,
    },
    /// A call started early that its turn did not make (the turn was declined, asked
    /// again, or its call changed): the tool ran, and its result is let go.
    EarlyCallUnused {
        /// The tool.
        tool: String,
        /// The arguments it ran with.
        arguments: Map<String, Value>,
    },
    /// The model's whole reply.
    ModelReply {
        /// The raw text.
        text: String,
        /// Why generation stopped.
        stop: StopReason,
        /// Token counts.
        usage: Usage,
        /// Milliseconds the request took.
        ms: u64,
        /// The generated tokens by what they were spent on.
        #[serde(default)]
        generated: crate::run::budget::Generated,
    },
    /// The reply needed repairs.
    Repaired {
        /// What was fixed.
        fixes: Vec<String>,
    },
    /// The reply was rejected and the model is asked again.
    Invalid {
        /// Why, as told to the model.
        error: String,
        /// The how-many-th consecutive invalid reply.
        attempt: u32,
    },
    /// The model calls a tool.
    ToolCall {
        /// The iteration.
        iteration: u32,
        /// The model's reasoning.
        thought: String,
        /// The tool.
        tool: String,
        /// The arguments.
        arguments: Map<String, Value>,
    },
    /// A tool answered (or a repeated call was answered from the earlier result).
    ToolResult {
        /// The tool.
        tool: String,
        /// Whether it succeeded.
        ok: bool,
        /// The text the model sees.
        observation: String,
        /// Milliseconds the call took.
        ms: u64,
    },
    /// A piece of the final answer's text, decoded as the model writes it
    /// ([`crate::turn::answer_stream`]). Only for a reply that says it is a final answer; the
    /// pieces since the last [`Event::AnswerRetracted`] add up to the answer the run ends
    /// with.
    AnswerText {
        /// The new text.
        text: String,
    },
    /// The answer text shown so far is not the answer: the reply failed validation (the
    /// model is asked again), or the answer was blocked. What follows starts again.
    AnswerRetracted {
        /// Why.
        reason: String,
    },
    /// The reply repeated itself while it streamed: the generation was stopped and the
    /// reply cut after what came before the loop (`looping-reply`).
    Repetition {
        /// The check that found it.
        #[serde(default)]
        check: String,
        /// The word pair that repeated.
        phrase: String,
        /// Bytes of the reply kept.
        kept: usize,
    },
    /// Required arguments whose values nobody gave: the call was not made and the person
    /// is asked for them instead (`invented-required`).
    Invented {
        /// The check that asks.
        #[serde(default)]
        check: String,
        /// The tool.
        tool: String,
        /// The arguments asked for.
        arguments: Vec<String>,
    },
    /// The model's own probability of calling a tool, read at its choice of kind
    /// (`tool-probability`).
    Decision {
        /// The check that declined the call, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        check: Option<String>,
        /// The tool it called.
        tool: String,
        /// The share of probability it gave to calling a tool.
        p_tool: f64,
        /// The share of the question's words the tool's own text has
        /// (`tool-fit` reads it); none when the question has no content word.
        support: Option<f64>,
        /// Whether the call's values are the person's own numbers and nothing else, which
        /// counts for it as shared words do (`tool-fit`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        own_numbers: bool,
        /// The model's share of "yes" to the fit question (`tool-fit`), when it was asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fit: Option<f64>,
        /// The model's share of probability for several calls rather than one, when it
        /// chose between them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p_several: Option<f64>,
        /// The model's share for one more call where it closed its list of calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p_more: Option<f64>,
        /// The model's share of probability for the names it could write, where its
        /// first call's tool name begins (`crate::checks::name_share`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p_name: Option<f64>,
        /// Where the rest of that share went: the likeliest beginning of a name no tool on
        /// offer has (`crate::checks::name_leaning`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name_leaning: Option<crate::checks::Leaning>,
        /// Whether the call was declined: the model is asked again.
        declined: bool,
        /// Why it was declined: the figures against the thresholds (`p 0.62 < 0.80`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Where the thresholds came from (`calibrated for qwen2.5-coder-0.5b`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thresholds: Option<String>,
        /// When declined for another tool that fits the question's words better: the
        /// tools the model may choose from now. Empty: only an answer is asked for.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        instead: Vec<String>,
    },
    /// A call identical to an earlier one was not executed again.
    Repeat {
        /// The tool.
        tool: String,
        /// How many times it has been repeated.
        count: u32,
    },
    /// The model closed its list of calls while giving one more some weight: it is asked
    /// again, held to at least `at_least` calls (`more-calls`).
    MoreCalls {
        /// The check that asked.
        check: String,
        /// The calls the model made.
        made: usize,
        /// The model's share for one more call where it closed the list.
        p_more: f64,
        /// The fewest calls the turn asked again may carry.
        at_least: usize,
        /// The numbers of the request the calls left out (`numbers-left`); empty when
        /// `more-calls` asked.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left: Vec<f64>,
    },
    /// The reply to a turn asked again for more calls was not a valid turn: the turn
    /// before it is carried out as the model wrote it, and the model is not told.
    AskedAgainFailed {
        /// The check that had asked.
        check: String,
        /// Why the reply was not valid.
        error: String,
        /// The calls of the turn carried out instead.
        calls: usize,
    },
    /// A call the model added when asked again for more carries a required value nobody
    /// gave (`more-calls`), or uses none of the numbers the first turn left out
    /// (`numbers-left`): not run now. The model is told so with the other calls'
    /// results, and may make it once the value it needs is in.
    NotYet {
        /// The check that held it.
        check: String,
        /// The tool.
        tool: String,
        /// The required parameters whose values nobody gave; for `numbers-left`, the
        /// numbers left out.
        arguments: Vec<String>,
        /// Why it was not run, in the check's words.
        #[serde(default)]
        why: String,
    },
    /// A check refused the model's final answer (`example-copy`: it writes the prompt's
    /// example, which nobody in the conversation gave); the model is asked again, without
    /// the example in its prompt.
    AnswerRefused {
        /// The check.
        check: String,
        /// Why, in the check's words.
        why: String,
    },
    /// Every call of a turn brought a result the model was already shown (a repeat, or the
    /// same text again): the next turn may only answer.
    NothingNew {
        /// The tools of the turn.
        tools: Vec<String>,
    },
    /// A tool was declared unavailable after failing.
    Degraded {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The model asks the person.
    Clarify {
        /// The question.
        question: String,
        /// The missing parameters.
        missing_params: Vec<String>,
    },
    /// The person answered a clarifying question.
    ClarifyAnswer {
        /// The answer.
        answer: String,
    },
    /// Something a person should know.
    Warning {
        /// The message.
        message: String,
    },
    /// The run failed without an ending: the model server failed it (down, an error
    /// reply). Nothing follows; the caller gets the error.
    Failed {
        /// What went wrong, in words.
        error: String,
    },
    /// The run ended.
    Stopped {
        /// Why.
        stop_reason: crate::run::ending::StopKind,
        /// The answer, if any.
        answer: Option<String>,
        /// Why there is no answer, or why it was given without a tool, in words
        /// ([`crate::Ending::message`]): what the command line prints on stderr.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// Iterations used.
        iterations: u32,
        /// Milliseconds the run took.
        ms: u64,
        /// Where the run's tokens and seconds went.
        #[serde(default)]
        budget: crate::run::budget::Budget,
    },
}

impl Event {
    /// What a check did, in one line, for an event that says so (`more-calls: get_weather
    /// not run: …`); none for every other event, and for a
    /// decision that let the call go ahead. The command line prints these without `-v`.
    pub fn check_line(&self) -> Option<String> {
        Some(match self {
            Event::Repetition {
                check,
                phrase,
                kept,
            } => format!(
                "{check}: the reply kept repeating \"{}\"; stopped, {kept} bytes kept",
                // A paragraph that loops is named by its beginning.
                crate::http::shorten(phrase, 120)
            ),
            Event::Invented {
                check,
                tool,
                arguments,
            } => format!(
                "{check}: {tool}: {} not given by the person; asking for it instead of calling",
                arguments.join(", ")
            ),
            Event::NotYet {
                check, tool, why, ..
            } => format!("{check}: {tool} not run: {why}"),
            Event::AnswerRefused { check, why } => {
                format!("{check}: the answer was refused: {why}; asked again without the example")
            }
            Event::MoreCalls {
                check,
                made,
                at_least,
                left,
                ..
            } if !left.is_empty() => format!(
                "{check}: {made} call{} made that left out {} of the request; asking again for at least {at_least}",
                if *made == 1 { "" } else { "s" },
                left.iter()
                    .map(f64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Event::MoreCalls {
                check,
                made,
                p_more,
                at_least,
                ..
            } => format!(
                "{check}: {made} call{} made where the model gave one more p {p_more:.4}; asking again for at least {at_least}",
                if *made == 1 { "" } else { "s" }
            ),
            Event::AskedAgainFailed {
                check,
                error,
                calls,
            } => format!(
                "{check}: the reply asked for was not valid ({error}); going ahead with the {calls} call{} made first",
                if *calls == 1 { "" } else { "s" }
            ),
            Event::Decision {
                check,
                tool,
                p_tool,
                support,
                declined: true,
                instead,
                reason,
                thresholds,
                ..
            } => format!(
                "{}: declined {tool}: {}{}; {}",
                check.as_deref().unwrap_or("decision"),
                reason.clone().unwrap_or_else(|| format!(
                    "p {p_tool:.2}, support {}",
                    support.map_or("-".to_string(), |s| format!("{s:.2}"))
                )),
                thresholds
                    .as_ref()
                    .map_or(String::new(), |t| format!(" ({t})")),
                if instead.is_empty() {
                    "asking for an answer instead".to_string()
                } else {
                    format!("asking again among {}", instead.join(", "))
                }
            ),
            _ => return None,
        })
    }
}

impl From<Finding> for Event {
    fn from(f: Finding) -> Self {
        match f {
            Finding::Decision { tool, judgement } => Event::Decision {
                check: judgement.by.map(str::to_string),
                tool,
                p_tool: judgement.p_tool.unwrap_or(1.0),
                support: judgement.support,
                own_numbers: judgement.own_numbers,
                fit: judgement.fit,
                p_several: judgement.p_several,
                p_more: judgement.p_more,
                p_name: judgement.p_name,
                name_leaning: judgement.name_leaning,
                declined: judgement.declined || !judgement.instead.is_empty(),
                reason: judgement.reason,
                thresholds: None,
                instead: judgement.instead,
            },
            Finding::Held {
                check,
                tool,
                arguments,
                why,
                ..
            } => Event::NotYet {
                check: check.to_string(),
                tool,
                arguments,
                why,
            },
        }
    }
}

/// Sees every event of a run.
pub trait Observer: Send {
    /// Called for each event, in order.
    fn event(&mut self, event: &Event);
}

impl<F: FnMut(&Event) + Send> Observer for F {
    fn event(&mut self, event: &Event) {
        self(event)
    }
}

impl Observer for Box<dyn Observer> {
    fn event(&mut self, event: &Event) {
        (**self).event(event)
    }
}

/// Appends every event to a file as one JSON line (with `t_ms` since the run began),
/// flushed as it happens. Streamed text chunks are left out: the whole reply is there.
#[derive(Debug)]
pub struct Transcript {
    file: File,
    started: Instant,
    failed: bool,
}

impl Transcript {
    /// Opens (appending) or creates the file.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Transcript {
            file,
            started: Instant::now(),
            failed: false,
        })
    }

    /// Reads a transcript back: every complete line that parses; a cut or broken line is
    /// skipped with a warning, so a file from a killed run still reads.
    pub fn read(path: impl AsRef<Path>) -> std::io::Result<Vec<Value>> {
        let text = std::fs::read(path.as_ref())?;
        let text = String::from_utf8_lossy(&text);
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(line) {
                Ok(v) => out.push(v),
                Err(_) => log::warn!(
                    "{}: skipping line {} (incomplete or not JSON)",
                    path.as_ref().display(),
                    n + 1
                ),
            }
        }
        Ok(out)
    }
}

impl Observer for Transcript {
    fn event(&mut self, event: &Event) {
        if self.failed || matches!(event, Event::ModelText { .. } | Event::AnswerText { .. }) {
            return;
        }
        let mut v = serde_json::to_value(event).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert(
                "t_ms".into(),
                Value::from(self.started.elapsed().as_millis() as u64),
            );
        }
        let mut line = serde_json::to_string(&v).unwrap_or_default();
        line.push('\n');
        // One write per line: a kill between writes leaves whole lines only.
        if let Err(e) = self
            .file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.flush())
        {
            log::error!("transcript: {e}; no more events are written");
            self.failed = true;
        }
    }
}
