//! The shared HTTP plumbing: one `ureq` agent, per-call timeouts capped by the run's
//! deadline, and the few ways a call can fail that callers must tell apart (nobody
//! listening, out of time, anything else).

use std::io::{BufRead, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::deadline::{Deadline, OnStop, StopHandle};

/// The agent every HTTP call in the crate goes through: statuses are data, not errors,
/// and no timeout is set here because each call sets its own from the deadline.
pub(crate) fn agent() -> &'static ureq::Agent {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    AGENT.get_or_init(new_agent)
}

fn new_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .user_agent(concat!("toolloop/", env!("CARGO_PKG_VERSION")))
        .max_redirects(0)
        .build()
        .new_agent()
}

/// A backend's agent for requests its run's stop can cut off: while a request's guard
/// lives, stopping the run shuts the agent down, so a read blocked on a server that has
/// sent nothing yet (a model evaluating a long prompt) fails at once instead of at the
/// deadline. The backend's own, because shutting an agent down ends every request on it
/// and the shared one serves other runs; kept across the backend's requests, so their
/// connections are reused, and made anew after a stop has shut it.
#[derive(Debug, Default)]
pub(crate) struct StoppableAgent(Option<(ureq::Agent, Arc<AtomicBool>)>);

impl Clone for StoppableAgent {
    /// A clone has an agent of its own: one stop must not end another backend's requests.
    fn clone(&self) -> Self {
        StoppableAgent(None)
    }
}

impl StoppableAgent {
    /// The agent for one request, and the guard that keeps `stop` able to shut it; the
    /// shared agent, and no guard, without a stop handle.
    pub(crate) fn arm<'a>(
        &mut self,
        stop: Option<&'a StopHandle>,
    ) -> (ureq::Agent, Option<OnStop<'a>>) {
        let Some(stop) = stop else {
            return (agent().clone(), None);
        };
        // A stop shut the one kept (it fails every request from then on), whether or not
        // the handle was reset for another run since.
        if self
            .0
            .as_ref()
            .is_some_and(|(_, shut)| shut.load(Ordering::SeqCst))
        {
            self.0 = None;
        }
        let (agent, shut) = self.0.get_or_insert_with(|| (new_agent(), Arc::default()));
        let (to_shut, flag) = (agent.clone(), Arc::clone(shut));
        let armed = stop.on_stop(move || {
            flag.store(true, Ordering::SeqCst);
            to_shut.shutdown();
        });
        (agent.clone(), Some(armed))
    }
}

/// How a call failed below HTTP.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Connection refused or host unreachable: nothing is listening.
    Unreachable,
    /// The deadline (or the call's own timeout) passed.
    Timeout,
    /// Anything else: reset connection, protocol error, bad URL.
    Other(String),
}

pub(crate) fn classify(err: ureq::Error) -> Failure {
    match err {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => Failure::Unreachable,
        ureq::Error::Io(io) => classify_io(&io),
        other => Failure::Other(other.to_string()),
    }
}

pub(crate) fn classify_io(io: &std::io::Error) -> Failure {
    use std::io::ErrorKind::*;
    match io.kind() {
        ConnectionRefused | AddrNotAvailable | HostUnreachable | NetworkUnreachable => {
            Failure::Unreachable
        }
        TimedOut | WouldBlock => Failure::Timeout,
        // A server that crashed mid-call shows up as whichever of these the socket saw
        // first; "Broken pipe (os error 32)" tells a person nothing. The words are the
        // ones the backends use when a stream ends early, true before or during a reply.
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => Failure::Other(
            "the connection closed before the reply was complete (did the server crash?)"
                .to_string(),
        ),
        _ => {
            // ureq wraps its own timeout in an io::Error when it fires inside a body read.
            let text = io.to_string();
            if text.contains("timeout") || text.contains("timed out") {
                Failure::Timeout
            } else {
                Failure::Other(text)
            }
        }
    }
}

/// The time a call may take: its own limit, capped by what is left of the run. `None` when
/// nothing is left.
pub(crate) fn budget(deadline: &Deadline, own: Duration) -> Option<Duration> {
    let t = deadline.cap(own);
    (!t.is_zero()).then_some(t)
}

/// Reads one line (up to `\n`) of at most `cap` bytes. Returns `Ok(None)` at the end of
/// the stream; a longer line is an error rather than unbounded memory.
pub(crate) fn read_line<R: BufRead>(r: &mut R, cap: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let n = r
        .by_ref()
        .take(cap as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.len() > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a line of the reply is longer than {cap} bytes"),
        ));
    }
    Ok(Some(line))
}

/// Reads at most `cap` bytes of a body; returns the bytes and whether more were left.
pub(crate) fn read_capped<R: Read>(r: R, cap: usize) -> std::io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    r.take(cap as u64 + 1).read_to_end(&mut buf)?;
    let more = buf.len() > cap;
    buf.truncate(cap);
    Ok((buf, more))
}

/// The message of an error body: Ollama's `{"error": "..."}`, OpenAI's
/// `{"error": {"message": "..."}}`, or the text itself, shortened.
pub(crate) fn error_message(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let e = &v["error"];
        if let Some(s) = e.as_str() {
            return s.to_string();
        }
        if let Some(s) = e["message"].as_str() {
            return s.to_string();
        }
        if let Some(s) = v["message"].as_str() {
            return s.to_string();
        }
        if let Some(s) = v["detail"].as_str() {
            return s.to_string();
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_string();
    }
    shorten(text, 300)
}

/// `s` cut to at most `max` characters, with an ellipsis when cut.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
