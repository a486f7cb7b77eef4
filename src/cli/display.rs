//! What a person sees on stderr while a run goes: a spinner with the elapsed time while
//! the model thinks (only on a terminal), each tool call and a short result as they
//! happen (`[Tool Call: name]` / `[Tool Result: name]`), warnings, and with
//! `-v` the full `[LLM]`/`[ACT]`/`[OBSERVE]` trace. Colour only on a terminal and never
//! when `NO_COLOR` is set. stdout is left to the answer.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::run::events::{Event, Observer, Trace};

/// Whether stderr gets colour: a terminal that is not `TERM=dumb`, and `NO_COLOR` unset
/// (no-color.org).
pub fn use_color() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
        && std::io::stderr().is_terminal()
}

/// The progress display of a run.
#[derive(Debug)]
pub struct Progress {
    spinner: Option<ProgressBar>,
    color: bool,
    verbose: bool,
    terminal: bool,
    chars: usize,
    /// The calls of the reply under way that the model has closed, by tool.
    written: Vec<String>,
}

impl Progress {
    /// A display on stderr; `verbose` adds the full trace.
    pub fn new(verbose: bool) -> Self {
        Progress {
            spinner: None,
            color: use_color(),
            verbose,
            terminal: std::io::stderr().is_terminal(),
            chars: 0,
            written: Vec::new(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn line(&self, text: String) {
        match &self.spinner {
            Some(s) => s.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(s) = self.spinner.take() {
            s.finish_and_clear();
        }
    }
}

fn short(v: &str, n: usize) -> String {
    crate::http::shorten(&v.replace('\n', " "), n)
}

impl Observer for Progress {
    fn event(&mut self, event: &Event) {
        if self.verbose
            && !matches!(event, Event::ModelText { .. })
            && let Some(line) = Trace::line(event)
        {
            self.line(self.paint("2", &line));
        }
        match event {
            Event::ModelRequest { iteration, .. } => {
                self.chars = 0;
                self.written.clear();
                if self.terminal {
                    let s = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                    s.set_style(
                        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    s.set_message(format!("model is thinking (step {iteration})"));
                    s.enable_steady_tick(Duration::from_millis(100));
                    self.spinner = Some(s);
                }
            }
            Event::ModelText { text } => {
                self.chars += text.chars().count();
                if let Some(s) = &self.spinner {
                    let calls = match self.written.len() {
                        0 => String::new(),
                        _ => format!("; wrote {}", self.written.join(", ")),
                    };
                    s.set_message(format!(
                        "model is writing ({} characters{calls})",
                        self.chars
                    ));
                }
            }
            Event::CallWritten { tool, .. } => self.written.push(tool.clone()),
            Event::ModelReply { .. } | Event::AnswerText { .. } => self.stop_spinner(),
            Event::AnswerRetracted { reason } if !self.verbose => {
                self.line(self.paint("33", &format!("[Withdrawn] the answer above: {reason}")));
            }
            Event::ToolCall {
                tool, arguments, ..
            } if !self.verbose => {
                let head = self.paint("36", &format!("[Tool Call: {tool}]"));
                let args = short(&Value::Object(arguments.clone()).to_string(), 200);
                self.line(format!("{head} {args}"));
            }
            Event::ToolResult {
                tool,
                ok,
                observation,
                ..
            } if !self.verbose => {
                let head = if *ok {
                    self.paint("32", &format!("[Tool Result: {tool}]"))
                } else {
                    self.paint("31", &format!("[Tool Result: {tool}]"))
                };
                self.line(format!("{head} {}", short(observation, 200)));
            }
            Event::Repaired { fixes } if !self.verbose => {
                self.line(self.paint("2", &format!("[Repair] {}", fixes.join(", "))));
            }
            Event::Invalid { error, .. } if !self.verbose => {
                self.line(self.paint(
                    "33",
                    &format!("[Retry] the reply was not valid: {}", short(error, 200)),
                ));
            }
            Event::Degraded { tool, reason } if !self.verbose => {
                self.line(self.paint(
                    "33",
                    &format!("[Unavailable: {tool}] {}", short(reason, 200)),
                ));
            }
            // A line toolloop adds to what the model reads: said, -v or not.
            Event::AnswerLanguage { .. } if !self.verbose => {
                let line = Trace::line(event).unwrap_or_default();
                self.line(self.paint("2", &line.replace("[ANSWER] ", "[Answer] ")));
            }
            // The loop narrowed the next turn to an answer: said, as a check's change is.
            Event::CallingEnded { .. } if !self.verbose => {
                let line = Trace::line(event).unwrap_or_default();
                self.line(self.paint("2", line.trim_start_matches("[OBSERVE] ")));
            }
            // The tool ran for a call the model then did not make: said, -v or not.
            Event::EarlyCallUnused { tool, arguments } if !self.verbose => {
                let args = short(&Value::Object(arguments.clone()).to_string(), 200);
                self.line(self.paint(
                    "2",
                    &format!(
                        "[Early call: {tool}] {args} ran while the turn was written; the turn did not make it, so its result is let go"
                    ),
                ));
            }
            Event::Warning { message } if !self.verbose => {
                self.line(self.paint("33", &format!("[Warning] {message}")));
            }
            // A failed run has no `stopped` event: the spinner must not go on drawing over
            // the error and the next prompt.
            Event::Stopped { .. } | Event::Failed { .. } => self.stop_spinner(),
            // Whatever a check did to a call is shown, -v or not: a value the model
            // wrote and the tool never saw must not go unseen.
            _ if !self.verbose => {
                if let Some(line) = event.check_line() {
                    self.line(self.paint("35", &format!("[Check] {line}")));
                }
                if let Some(line) = event.approval_line() {
                    self.line(self.paint("33", &format!("[Approval] {line}")));
                }
            }
            _ => {}
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_spinner();
    }
}

/// Writes the final answer to stdout as the model writes it ([`Event::AnswerText`]); a
/// withdrawn answer ([`Event::AnswerRetracted`]) ends its line, and the answer that
/// follows starts on a new one. Clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct AnswerOut(Arc<Mutex<AnswerState>>);

#[derive(Debug, Default)]
struct AnswerState {
    /// Text is on the current line.
    open: bool,
    failed: Option<std::io::Error>,
}

impl AnswerOut {
    /// Ends the answer's line, if text was written, and reports the first failed write.
    pub fn finish(&self) -> std::io::Result<()> {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = state.failed.take() {
            return Err(e);
        }
        if std::mem::take(&mut state.open) {
            let mut out = std::io::stdout().lock();
            writeln!(out).and_then(|_| out.flush())?;
        }
        Ok(())
    }

    fn write(&self, text: &str, open: bool) {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if state.failed.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        match write!(out, "{text}").and_then(|_| out.flush()) {
            Ok(()) => state.open = open,
            Err(e) => state.failed = Some(e),
        }
    }
}

impl Observer for AnswerOut {
    fn event(&mut self, event: &Event) {
        match event {
            Event::AnswerText { text } => self.write(text, true),
            Event::AnswerRetracted { .. } => {
                let open = self.0.lock().is_ok_and(|s| s.open);
                if open {
                    self.write("\n", false);
                }
            }
            _ => {}
        }
    }
}

/// Prints the tool catalogue: one line per tool, or `{"tools": [...]}` as JSON.
/// Each tool's class and where it came from.
pub fn print_tools(
    specs: &[crate::tools::ToolSpec],
    permissions: &crate::Permissions,
    json: bool,
) -> std::io::Result<()> {
    use std::io::Write;
    let classes = |s: &crate::tools::ToolSpec| permissions.class_of(s);
    let mut out = std::io::stdout().lock();
    if json {
        let tools: Vec<serde_json::Value> = specs
            .iter()
            .map(|s| {
                let mut v = serde_json::json!(s);
                let (class, source) = classes(s);
                v["class"] = serde_json::json!(class.to_string());
                v["class_from"] = serde_json::json!(source);
                v
            })
            .collect();
        let text = serde_json::to_string_pretty(&serde_json::json!({ "tools": tools }))
            .unwrap_or_default();
        writeln!(out, "{text}")?;
    } else {
        for s in specs {
            let params: Vec<String> = s.input_schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            // Said, because a tool that is not read-only asks before each call, and a
            // read-only one's calls start while the model is still writing.
            let (class, source) = classes(s);
            writeln!(
                out,
                "{}({})  {}  [{class}; {source}]",
                s.name,
                params.join(", "),
                s.description
            )?;
        }
    }
    out.flush()
}
