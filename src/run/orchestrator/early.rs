//! Calls started as soon as the model has written them ([`crate::Config::early_calls`]).
//!
//! A turn is judged whole, once its reply has ended: the decision, `nothing-new` and the
//! calls a turn asked again adds all read every call of it. Which calls run is left to
//! that judgement, unchanged. What changes is when a call of a tool that only reads
//! ([`crate::tools::ToolSpec::read_only`]) begins: as soon as its object closes in the
//! stream ([`crate::turn::call_stream`]), while the model writes the rest, or, for the
//! calls a turn asked again for more already made, as the asking begins
//! ([`crate::run::engine::Engine::calls_standing`]: a call in the single-call form closes only
//! at its reply's end, and would wait for the continuation to stream it back). When the turn
//! then makes that call (the same tool, the same arguments, after the checks), the result
//! already under way is taken; otherwise it is let go, and the person is told. A tool that
//! reads only changes nothing by running, so a call the turn did not make costs its time
//! and no more. Tools that change things are never started early.
//!

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::deadline::Deadline;
use crate::run::events::Event;
use crate::tools::{Catalogue, Started};
use crate::turn::call_stream::CallStream;

/// How long a call let go at the end of a run is waited for, so that its thread lets go
/// of the catalogue before a program that ends with the run drops it (an MCP server's
/// process is ended by that drop).
const LET_GO_WAIT: Duration = Duration::from_millis(500);

/// The calls of a run started early and not yet taken by a turn.
#[derive(Default)]
pub(super) struct EarlyCalls {
    sent: Vec<Sent>,
    /// The tools whose calls may start early: those that only read, by the person's
    /// permissions over the tools' hints.
    reading: std::collections::HashSet<String>,
}

struct Sent {
    tool: String,
    arguments: Map<String, Value>,
    /// From the run's start.
    at: Duration,
    started: Started,
}

impl Sent {
    /// Whether this is the call of `tool` with `arguments`.
    fn is(&self, tool: &str, arguments: &Map<String, Value>) -> bool {
        self.tool == tool && &self.arguments == arguments
    }
}

impl EarlyCalls {
    /// Early calls of the tools of `specs` that only read by `permissions`.
    pub(super) fn new(specs: &[crate::tools::ToolSpec], permissions: &crate::Permissions) -> Self {
        EarlyCalls {
            sent: Vec::new(),
            reading: specs
                .iter()
                .filter(|s| permissions.reads_only(s))
                .map(|s| s.name.clone())
                .collect(),
        }
    }

    /// Starts the call `written` (an element of a turn's `calls`, as
    /// [`CallStream::feed`] gives it) as [`EarlyCalls::start`] does.
    pub(super) fn offer(
        &mut self,
        catalogue: &Arc<Catalogue>,
        written: &Value,
        most: usize,
        deadline: Deadline,
        at: Duration,
    ) -> Option<Event> {
        let tool = CallStream::tool(written)?;
        let arguments = written.get("arguments")?.as_object()?;
        self.start(catalogue, (tool, arguments), most, deadline, at)
    }

    /// Starts the call of `tool` with `arguments` when the tool only reads, the
    /// arguments meet its schema, the same call is not under way already, and fewer than
    /// `most` are. The event that says so, when it started.
    pub(super) fn start(
        &mut self,
        catalogue: &Arc<Catalogue>,
        (tool, arguments): (&str, &Map<String, Value>),
        most: usize,
        deadline: Deadline,
        at: Duration,
    ) -> Option<Event> {
        let reads_only = self.reading.contains(tool) && catalogue.get(tool).is_ok();
        if !reads_only
            || self.sent.len() >= most
            || self.sent.iter().any(|s| s.is(tool, arguments))
            || catalogue.check_arguments(tool, arguments).is_err()
            || deadline.is_expired()
        {
            return None;
        }
        self.sent.push(Sent {
            tool: tool.to_string(),
            arguments: arguments.clone(),
            at,
            started: catalogue.start(tool, arguments, deadline),
        });
        Some(Event::CallSentEarly {
            tool: tool.to_string(),
            arguments: arguments.clone(),
        })
    }

    /// For each of `calls`, the early call of the same tool and arguments, taken (each
    /// serves one call); with when the first of those taken was sent.
    pub(super) fn take(
        &mut self,
        calls: &[(String, Map<String, Value>)],
    ) -> (Vec<Option<Started>>, Option<Duration>) {
        let mut first: Option<Duration> = None;
        let taken = calls
            .iter()
            .map(|(tool, arguments)| {
                let i = self.sent.iter().position(|s| s.is(tool, arguments))?;
                let sent = self.sent.remove(i);
                first = Some(first.map_or(sent.at, |f| f.min(sent.at)));
                Some(sent.started)
            })
            .collect();
        (taken, first)
    }

    /// The calls no turn took: each let go, with the event that says so. At the end of
    /// a run (`settle`), each is given a moment to end first.
    pub(super) fn let_go(&mut self, settle: bool) -> Vec<Event> {
        let until = std::time::Instant::now() + LET_GO_WAIT;
        std::mem::take(&mut self.sent)
            .into_iter()
            .map(|s| {
                if settle {
                    s.started
                        .settle(until.saturating_duration_since(std::time::Instant::now()));
                }
                Event::EarlyCallUnused {
                    tool: s.tool,
                    arguments: s.arguments,
                }
            })
            .collect()
    }
}
