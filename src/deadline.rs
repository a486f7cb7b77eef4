//! One deadline for a whole run.
//!
//! The seed's `timeout` is not per request: it bounds the run. Every model and tool call
//! asks the [`Deadline`] how long it may take, so a hung server cannot hold a run past its
//! end by more than the time it takes to notice a socket timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
/// generation is then cancelled) and, while tools run, within [`StopHandle::POLL`].
///
/// ```
/// use toolloop::StopHandle;
///
/// let stop = StopHandle::default();
/// let button = stop.clone();
/// button.stop();
/// assert!(stop.is_stopped());
/// ```
#[derive(Debug, Clone, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// How often waiting for tools checks whether the run was stopped.
    pub const POLL: Duration = Duration::from_millis(50);

    /// Asks the run to stop.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`StopHandle::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Makes the handle usable for another run: a run that starts stopped ends at once.
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
