//! Calls on threads of their own: several side by side, and one started before its turn
//! was judged ([`Catalogue::start`]) whose result a later call takes. Apart from
//! `mod.rs` because this is where the threads, their channels and the deadline meet.

use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{CALL_GRACE, Catalogue, ToolError, ToolResult};
use crate::deadline::{Deadline, StopHandle};

impl Catalogue {
    /// Calls several tools side by side, each on a thread of its own and each bounded by
    /// `deadline`: a slow call delays only itself, and a call still running when the
    /// deadline passes is reported as timed out (its thread is left to finish; a Rust
    /// closure cannot be stopped from outside). The results come back in the order of
    /// `calls`, each with the time it took.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use serde_json::{Map, json};
    /// use toolloop::Deadline;
    /// use toolloop::tools::{Catalogue, ToolSpec};
    /// use toolloop::tools::FnTools;
    ///
    /// let mut f = FnTools::new();
    /// f.add(ToolSpec::new("echo", "echoes", json!({"type": "object"})), |a| Ok(json!(a)));
    /// let c = Arc::new(Catalogue::load(vec![Box::new(f)], Deadline::none())?);
    /// let calls = vec![("echo".to_string(), Map::new()), ("nope".to_string(), Map::new())];
    /// let results = c.call_all(&calls, Deadline::none());
    /// assert!(results[0].0.is_ok() && results[1].0.is_err());
    /// # Ok::<(), toolloop::tools::ToolError>(())
    /// ```
    pub fn call_all(
        self: &Arc<Self>,
        calls: &[(String, Map<String, Value>)],
        deadline: Deadline,
    ) -> Vec<(Result<ToolResult, ToolError>, Duration)> {
        self.call_all_or_stop(calls, deadline, &StopHandle::default())
    }

    /// [`Catalogue::call_all`], given up when `stop` is pulled: calls still running are
    /// reported as not answered (their threads finish on their own).
    pub fn call_all_or_stop(
        self: &Arc<Self>,
        calls: &[(String, Map<String, Value>)],
        deadline: Deadline,
        stop: &StopHandle,
    ) -> Vec<(Result<ToolResult, ToolError>, Duration)> {
        self.call_all_given(calls, Vec::new(), deadline, stop)
    }

    /// Starts one call on a thread of its own and returns at once: a call of a tool that
    /// only reads ([`super::ToolSpec::read_only`]), sent while the model is still writing its
    /// turn. Its result is taken by [`Catalogue::call_all_given`] when the turn makes the
    /// call, or let go when it does not.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use serde_json::{Map, json};
    /// use toolloop::{Deadline, StopHandle};
    /// use toolloop::tools::{Catalogue, FnTools, ToolSpec};
    ///
    /// let mut f = FnTools::new();
    /// f.add(ToolSpec::new("echo", "echoes", json!({"type": "object"})), |a| Ok(json!(a)));
    /// let c = Arc::new(Catalogue::load(vec![Box::new(f)], Deadline::none())?);
    /// let args = json!({"said": "hi"}).as_object().unwrap().clone();
    /// let early = c.start("echo", &args, Deadline::none());
    /// let calls = vec![("echo".to_string(), args)];
    /// let results = c.call_all_given(&calls, vec![Some(early)], Deadline::none(), &StopHandle::default());
    /// assert_eq!(results[0].0.as_ref().unwrap().content, json!({"said": "hi"}));
    /// # Ok::<(), toolloop::tools::ToolError>(())
    /// ```
    pub fn start(
        self: &Arc<Self>,
        tool: &str,
        args: &Map<String, Value>,
        deadline: Deadline,
    ) -> Started {
        let (tx, rx) = mpsc::channel();
        if let Err(e) = self.spawn_call(0, tool, args, deadline, tx.clone()) {
            let _ = tx.send((0, Err(e), Duration::ZERO));
        }
        Started { rx }
    }

    /// [`Catalogue::call_all_or_stop`], where `started[i]`, when there is one, is call
    /// `i` already under way ([`Catalogue::start`]): its result is waited for instead of
    /// calling again. `started` may be shorter than `calls`.
    pub fn call_all_given(
        self: &Arc<Self>,
        calls: &[(String, Map<String, Value>)],
        mut started: Vec<Option<Started>>,
        deadline: Deadline,
        stop: &StopHandle,
    ) -> Vec<(Result<ToolResult, ToolError>, Duration)> {
        let began = Instant::now();
        let (tx, rx) = mpsc::channel();
        let mut out: Vec<Option<(Result<ToolResult, ToolError>, Duration)>> =
            (0..calls.len()).map(|_| None).collect();
        started.resize_with(calls.len(), || None);
        for (i, ((tool, args), early)) in calls.iter().zip(started).enumerate() {
            let spawned = match early {
                // Its own channel, passed on under this call's place, so that one wait
                // below sees every call.
                Some(Started { rx: early }) => {
                    let tx = tx.clone();
                    std::thread::Builder::new()
                        .name(format!("toolloop-early-{tool}"))
                        .spawn(move || {
                            if let Ok((_, result, took)) = early.recv() {
                                let _ = tx.send((i, result, took));
                            }
                        })
                        .map(drop)
                        .map_err(|e| ToolError::Config(format!("cannot wait for the call: {e}")))
                }
                None => self.spawn_call(i, tool, args, deadline, tx.clone()),
            };
            if let Err(e) = spawned {
                out[i] = Some((Err(e), Duration::ZERO));
            }
        }
        drop(tx);
        while out.iter().any(Option::is_none) && !stop.is_stopped() {
            let wait = deadline.cap(StopHandle::POLL);
            match rx.recv_timeout(wait) {
                Ok((i, result, took)) => out[i] = Some((result, took)),
                Err(mpsc::RecvTimeoutError::Timeout) if !deadline.is_expired() => {}
                Err(_) => break,
            }
        }
        // The calls share the deadline, so at its end they give up too: a moment for them
        // to say so lets go of the catalogue they hold. Otherwise a program that exits
        // right after the run (`ask`) ends before the catalogue is dropped, and a stdio
        // MCP server that hung is never ended (it outlived toolloop).
        if deadline.is_expired() {
            let grace = Instant::now() + CALL_GRACE;
            while out.iter().any(Option::is_none) {
                let left = grace.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok((i, result, took)) => out[i] = Some((result, took)),
                    Err(_) => break,
                }
            }
        }
        out.into_iter()
            .zip(calls)
            .map(|(r, (tool, _))| {
                r.unwrap_or_else(|| {
                    let source_name = self
                        .entries
                        .get(tool)
                        .map(|e| self.sources[e.source].label())
                        .unwrap_or_default();
                    (Err(ToolError::Timeout { source_name }), began.elapsed())
                })
            })
            .collect()
    }

    /// Runs call `i` on a thread of its own, which says how it went on `tx`.
    fn spawn_call(
        self: &Arc<Self>,
        i: usize,
        tool: &str,
        args: &Map<String, Value>,
        deadline: Deadline,
        tx: Sent,
    ) -> Result<(), ToolError> {
        let me = Arc::clone(self);
        let (tool, args) = (tool.to_string(), args.clone());
        std::thread::Builder::new()
            .name(format!("toolloop-call-{tool}"))
            .spawn(move || {
                let t = Instant::now();
                let result = me.call(&tool, &args, deadline);
                // Let go of the catalogue before saying so: whoever gets the result
                // may be the last owner, whose drop ends the MCP servers.
                drop(me);
                let _ = tx.send((i, result, t.elapsed()));
            })
            .map(drop)
            .map_err(|e| ToolError::Config(format!("cannot start the call: {e}")))
    }
}

/// Where a call's thread says how it went: its place, its result, and the time it took.
type Sent = mpsc::Sender<(usize, Result<ToolResult, ToolError>, Duration)>;

/// A call under way, started by [`Catalogue::start`].
#[derive(Debug)]
pub struct Started {
    rx: mpsc::Receiver<(usize, Result<ToolResult, ToolError>, Duration)>,
}

impl Started {
    /// Waits up to `wait` for the call to end, and says whether it did. A call let go
    /// is given a moment, as a call at the deadline is, so that its thread lets go of
    /// the catalogue before a program that is ending drops it.
    pub fn settle(self, wait: Duration) -> bool {
        self.rx.recv_timeout(wait).is_ok()
    }
}
