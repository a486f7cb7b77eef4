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
use crate::checks::{Acted, CheckAction, Finding};

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
    /// The answer will be asked for in this language, after the tools' results
    /// ([`crate::AnswerLanguage`]).
    AnswerLanguage {
        /// The language, named in English.
        language: String,
        /// Read off the question, rather than given by the person.
        detected: bool,
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
    /// (read as the calls stream in): the person sees what is being written. Nothing is
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
    /// A check acted: the engine did what `action` says (stopped the stream, declined
    /// the call, asked the model again or the person, held a call back, refused the
    /// answer). Every check's doings are this one event.
    Check {
        /// The check's name (`looping-reply`).
        check: String,
        /// What was done.
        #[serde(flatten)]
        action: CheckAction,
        /// Why, in the check's words, with its figures (`p 0.42 < 0.50`).
        why: String,
    },
    /// The model's figures for the call a turn makes, read at its choice of kind and at
    /// the tool's name, and what the checks read beside them. Whether a check then acted
    /// on them is a [`Event::Check`].
    Decision {
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
        /// first call's tool name begins .
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p_name: Option<f64>,
        /// Where the rest of that share went: the likeliest beginning of a name no tool on
        /// offer has .
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name_leaning: Option<crate::checks::Leaning>,
    },
    /// A call identical to an earlier one was not executed again.
    Repeat {
        /// The tool.
        tool: String,
        /// How many times it has been repeated.
        count: u32,
    },
    /// The engine's own rule, whatever the checks: every call of a turn brought a result the
    /// model was already shown (a repeat answered from memory, or the same text again), so
    /// the calling ends and the next turn may only answer.
    CallingEnded {
        /// The tools of the turn.
        tools: Vec<String>,
    },
    /// A call of a tool that is not read-only was asked about before it ran: whether it
    /// may, and who said so. A denied call is not run; the model is told the person did
    /// not allow it.
    Approval {
        /// The tool.
        tool: String,
        /// The arguments the model wrote.
        arguments: Map<String, Value>,
        /// Its class (`destructive`).
        class: String,
        /// Where the class came from.
        class_from: crate::tools::ClassSource,
        /// Whether it ran.
        allowed: bool,
        /// Who decided.
        by: crate::DecidedBy,
        /// The values the person did not say, as they were shown.
        #[serde(default, skip_serializing_if = "crate::Unsaid::is_empty")]
        unsaid: crate::Unsaid,
        /// The arguments the person had it run without (`crate::Answer::Without`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<String>,
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
    /// The checks the run turns on differ from the defaults by the model's family: said
    /// once, when the server has said which model file it runs (llama-server answers to
    /// any name), so that two models' runs are not compared unknowingly.
    FamilyDefaults {
        /// The family, as [`crate::checks::family_of`] reads it.
        family: String,
        /// The checks on by default that this family runs without.
        off: Vec<String>,
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
    /// not run: …`); none for every other event. The command line prints these without
    /// `-v`.
    pub fn check_line(&self) -> Option<String> {
        match self {
            Event::Check { check, action, why } => Some(action.line(check, why)),
            _ => None,
        }
    }

    /// What was decided of a call that asked, in one line (`approval: git_push
    /// (destructive) not run: nobody could be asked; --allow git_push or --yes runs
    /// it`); none for every other event. Printed without `-v`.
    pub fn approval_line(&self) -> Option<String> {
        let Event::Approval {
            tool,
            class,
            allowed,
            by,
            unsaid,
            left_out,
            ..
        } = self
        else {
            return None;
        };
        let line = match (allowed, by) {
            (true, by) if !left_out.is_empty() => format!(
                "{tool} ({class}) run without {}: allowed by {by}",
                left_out.join(", ")
            ),
            (true, by) => format!("{tool} ({class}) run: allowed by {by}"),
            (false, crate::DecidedBy::Nobody) => format!(
                "{tool} ({class}) not run: nobody could be asked; --allow {tool} or --yes runs it"
            ),
            (false, by) => format!("{tool} ({class}) not run: denied by {by}"),
        };
        Some(match unsaid.line() {
            Some(values) => format!("{line}; {values}"),
            None => line,
        })
    }
}

impl From<Acted> for Event {
    fn from(a: Acted) -> Self {
        Event::Check {
            check: a.check.to_string(),
            action: a.action,
            why: a.why,
        }
    }
}

impl Finding {
    /// The events for what a check found: the model's figures for a call, once read,
    /// and what a check did on them. `thresholds` says where the bars of a decline on
    /// the figures came from.
    pub(crate) fn events(self, thresholds: Option<&str>) -> Vec<Event> {
        match self {
            Finding::Decision { tool, judgement } => {
                let mut out = Vec::new();
                if let Some(p_tool) = judgement.p_tool {
                    out.push(Event::Decision {
                        tool: tool.clone(),
                        p_tool,
                        support: judgement.support,
                        own_numbers: judgement.own_numbers,
                        fit: judgement.fit,
                        p_several: judgement.p_several,
                        p_more: judgement.p_more,
                        p_name: judgement.p_name,
                        name_leaning: judgement.name_leaning.clone(),
                    });
                }
                if judgement.declined || !judgement.instead.is_empty() {
                    let mut why = judgement.reason.clone().unwrap_or_else(|| {
                        format!(
                            "p {:.2}, support {}",
                            judgement.p_tool.unwrap_or(1.0),
                            judgement
                                .support
                                .map_or("-".to_string(), |s| format!("{s:.2}"))
                        )
                    });
                    // A decline on the run's own record owes nothing to the thresholds.
                    if let (Some(t), false) = (thresholds, judgement.on_record) {
                        why.push_str(&format!(" ({t})"));
                    }
                    out.push(Event::Check {
                        check: judgement.by.unwrap_or("decision").to_string(),
                        action: CheckAction::Decline {
                            tool,
                            instead: judgement.instead,
                        },
                        why,
                    });
                }
                out
            }
            Finding::OnCall {
                check,
                tool,
                arguments,
                why,
                act,
                ..
            } => vec![Event::Check {
                check: check.to_string(),
                action: match act {
                    crate::checks::OnCall::Hold { .. } => CheckAction::Hold { tool, arguments },
                    crate::checks::OnCall::LeaveOut => CheckAction::LeaveOut { tool, arguments },
                },
                why,
            }],
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
