//! What Ctrl-C and SIGTERM do to a run of `ask` or `chat`.
//!
//! The first signal while a run works stops it through its [`StopHandle`]: the run ends
//! as interrupted, so its transcript gets its closing event, its MCP servers are ended as
//! the orchestrator is dropped, and the process exits with 130. A second signal while the
//! run is still stopping, or one while nothing runs (the chat's prompt), exits at once
//! with 130. SIGTERM also ends a chat after its run has stopped, where Ctrl-C ends only
//! the run and the chat goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::deadline::StopHandle;

/// The exit code of a run ended by a signal.
pub(super) const EXIT_INTERRUPTED: u8 = 130;

/// The process ends on a signal: the MCP servers that a stopped run's calls still hold
/// are ended first.
pub(super) fn exit_code() -> std::process::ExitCode {
    crate::tools::end_stdio_servers();
    std::process::ExitCode::from(EXIT_INTERRUPTED)
}

/// The signals' hold on the runs of one process.
#[derive(Clone, Default)]
pub(super) struct Interrupts {
    working: Arc<AtomicBool>,
    stopping: Arc<AtomicBool>,
    terminated: Arc<AtomicBool>,
}

impl Interrupts {
    /// Takes Ctrl-C (and, on Unix, SIGTERM) for the runs `stop` stops. A handler that
    /// cannot be set leaves the signal's default (the process ends at once), said once.
    pub(super) fn install(stop: &StopHandle) -> Self {
        let me = Interrupts::default();
        let on_int = me.clone();
        let stop_int = stop.clone();
        if let Err(e) = ctrlc::set_handler(move || on_int.signalled(&stop_int)) {
            log::warn!("Ctrl-C will end the process at once, not the run first: {e}");
        }
        #[cfg(unix)]
        {
            let on_term = me.clone();
            let stop_term = stop.clone();
            match signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM]) {
                Ok(mut signals) => {
                    std::thread::spawn(move || {
                        for _ in signals.forever() {
                            on_term.terminated.store(true, Ordering::SeqCst);
                            on_term.signalled(&stop_term);
                        }
                    });
                }
                Err(e) => log::warn!("SIGTERM will end the process at once: {e}"),
            }
        }
        me
    }

    fn signalled(&self, stop: &StopHandle) {
        let working = self.working.load(Ordering::SeqCst);
        if working && !self.stopping.swap(true, Ordering::SeqCst) {
            stop.stop();
        } else {
            crate::tools::end_stdio_servers();
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    }

    /// A run begins (`true`) or has ended (`false`).
    pub(super) fn working(&self, on: bool) {
        self.stopping.store(false, Ordering::SeqCst);
        self.working.store(on, Ordering::SeqCst);
    }

    /// Whether SIGTERM came: the process is to end once its run has stopped.
    pub(super) fn terminated(&self) -> bool {
        self.terminated.load(Ordering::SeqCst)
    }
}
