//! One deadline for a whole run.
//!
//! `timeout` is not per request: it bounds the run. Every model and tool call
//! asks the [`Deadline`] how long it may take, so a hung server cannot hold a run past its
//! end by more than the time it takes to notice a socket timeout.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The moment a run must end by, or none.
///
/// ```
/// use std::time::Duration;
/// use toolloop::Deadline;
///
/// let d = Deadline::after(Duration::from_secs(30));
/// assert!(d.cap(Duration::from_secs(60)) <= Duration::from_secs(30));
/// assert!(!d.is_expired());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    at: Option<Instant>,
    span: Option<Duration>,
}

impl Deadline {
    /// A deadline `d` from now.
    pub fn after(d: Duration) -> Self {
        Deadline {
            at: Instant::now().checked_add(d),
            span: Some(d),
        }
    }

    /// No deadline at all.
    pub fn none() -> Self {
        Deadline {
            at: None,
            span: None,
        }
    }

    /// Time left, or `None` without a deadline. Zero once it has passed.
    pub fn remaining(&self) -> Option<Duration> {
        self.at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.remaining() == Some(Duration::ZERO)
    }

    /// The smaller of `own` (a call's own timeout) and the time left.
    pub fn cap(&self, own: Duration) -> Duration {
        match self.remaining() {
            Some(left) => left.min(own),
            None => own,
        }
    }

    /// The whole span the deadline was set for (`d` of [`Deadline::after`]), for messages
    /// that say "no answer within 30s".
    pub fn span(&self) -> Option<Duration> {
        self.span
    }

    /// The instant itself, if any.
    pub fn instant(&self) -> Option<Instant> {
        self.at
    }
}

/// Ends a run before its deadline, from another thread (a stop button).
///
/// The run notices at its next step, at the next piece of a streaming reply (the
/// generation is then cancelled) and, while tools run, within [`StopHandle::POLL`]. A
/// model request still waiting for its first byte (a server evaluating a long prompt)
/// is cut off at once when the backend was given the handle ([`crate::Backend::watch`];
/// the Ollama and OpenAI-compatible backends take it).
///
/// ```
/// use toolloop::StopHandle;
///
/// let stop = StopHandle::default();
/// let button = stop.clone();
/// button.stop();
/// assert!(stop.is_stopped());
/// ```
#[derive(Clone, Default)]
pub struct StopHandle(Arc<Shared>);

#[derive(Default)]
struct Shared {
    stopped: AtomicBool,
    /// What [`StopHandle::stop`] does besides setting the flag: one action for each
    /// request in flight (shutting its connection), keyed so that the request's guard
    /// can take its action back when the request ends by itself.
    on_stop: Mutex<Vec<(u64, OnStopAction)>>,
    next: AtomicU64,
}

type OnStopAction = Box<dyn FnOnce() + Send>;

impl std::fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StopHandle")
            .field(&self.is_stopped())
            .finish()
    }
}

impl StopHandle {
    /// How often waiting for tools checks whether the run was stopped.
    pub const POLL: Duration = Duration::from_millis(50);

    /// Asks the run to stop.
    pub fn stop(&self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        let actions = std::mem::take(&mut *self.actions());
        actions.into_iter().for_each(|(_, act)| act());
    }

    /// Whether [`StopHandle::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::SeqCst)
    }

    /// Makes the handle usable for another run: a run that starts stopped ends at once.
    pub fn reset(&self) {
        self.0.stopped.store(false, Ordering::SeqCst);
    }

    /// Runs `act` when the run is stopped while the returned guard lives (at once when it
    /// already is); dropping the guard takes `act` back.
    pub(crate) fn on_stop(&self, act: impl FnOnce() + Send + 'static) -> OnStop<'_> {
        let key = self.0.next.fetch_add(1, Ordering::SeqCst);
        self.actions().push((key, Box::new(act)));
        // A stop between the caller's last look and the push above ran the actions
        // before this one was there.
        if self.is_stopped() {
            let act = self.take(key);
            act.into_iter().for_each(|act| act());
        }
        OnStop { stop: self, key }
    }

    fn actions(&self) -> std::sync::MutexGuard<'_, Vec<(u64, OnStopAction)>> {
        self.0.on_stop.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, key: u64) -> Option<OnStopAction> {
        let mut actions = self.actions();
        let at = actions.iter().position(|(k, _)| *k == key)?;
        Some(actions.remove(at).1)
    }
}

/// Keeps an action of [`StopHandle::on_stop`] armed; dropped, it is taken back.
pub(crate) struct OnStop<'a> {
    stop: &'a StopHandle,
    key: u64,
}

impl Drop for OnStop<'_> {
    fn drop(&mut self) {
        drop(self.stop.take(self.key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn an_action_runs_once_on_stop_and_not_after_its_guard_is_dropped() {
        let stop = StopHandle::default();
        let ran = Arc::new(AtomicUsize::new(0));
        let count = |ran: &Arc<AtomicUsize>| {
            let ran = Arc::clone(ran);
            move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }
        };
        drop(stop.on_stop(count(&ran)));
        let armed = stop.on_stop(count(&ran));
        stop.stop();
        stop.stop();
        drop(armed);
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        // Armed after the stop: it runs at once.
        let _late = stop.on_stop(count(&ran));
        assert_eq!(ran.load(Ordering::SeqCst), 2);
    }
}
