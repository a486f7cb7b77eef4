//! The web server's state: conversations, the runs in them, and each run's events.
//!
//! A run is an ordinary blocking [`Orchestrator`] run on a thread of its own; its
//! observer appends every event to the run's log and wakes whoever streams it, and its
//! clarify handler waits for the person's answer to arrive over HTTP. Keeping the log
//! (not only forwarding events) lets a page that reconnects, or a second page, see the
//! run from its start, and is what the transcript download is made of.

use crate::checks::CheckLevels;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::backend::{Backend, Message};
use crate::config::Config;
use crate::deadline::{Deadline, StopHandle};
use crate::run::events::{Event, Observer};
use crate::run::orchestrator::{Orchestrator, OrchestratorError};
use crate::tools::Catalogue;

/// Makes the model backend for one run (each run has its own connection).
pub type MakeBackend = dyn Fn() -> Result<Box<dyn Backend>, OrchestratorError> + Send + Sync;

/// The most events one run keeps; a run is bounded by its iterations, so only a model
/// streaming an answer in very small pieces comes near it. Past it, answer pieces are
/// dropped (the `stopped` event still carries the whole answer).
const MAX_EVENTS: usize = 20_000;
/// Finished runs kept for their transcript, oldest forgotten first.
const KEEP_RUNS: usize = 64;

/// Why a run could not start.
#[derive(Debug, PartialEq, Eq)]
pub enum StartError {
    /// No such conversation.
    NoConversation,
    /// The conversation has a run in progress.
    Busy(String),
    /// As many runs as allowed are in progress.
    Full,
}

/// One run's log and controls.
pub struct Run {
    /// The run's id.
    pub id: String,
    /// The conversation it belongs to.
    pub conversation: String,
    log: Mutex<Log>,
    changed: watch::Sender<usize>,
    stop: StopHandle,
    answer: Condvar,
    /// Pages streaming the run's events now ([`Run::watched`]).
    watchers: AtomicUsize,
    /// How long a run may go on with nobody watching, after somebody was.
    grace: Duration,
}

#[derive(Default)]
struct Log {
    events: Vec<Value>,
    finished: bool,
    /// A clarifying question is waiting for the person.
    pending: bool,
    /// The person's answer, taken by the waiting clarify handler.
    answer: Option<String>,
    /// A call waits for the person's approval ([`Run::approve`]).
    approving: bool,
    /// The person's word on it, taken by the waiting approver.
    approval: Option<crate::Answer>,
}

impl Run {
    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, event: Value) {
        let n = {
            let mut log = self.lock();
            let piece = event["event"] == "answer_text";
            if log.events.len() >= MAX_EVENTS && piece {
                return;
            }
            log.events.push(event);
            log.events.len()
        };
        self.changed.send_replace(n);
    }

    /// The events from index `from` on, and whether the run has finished.
    pub fn events_from(&self, from: usize) -> (Vec<Value>, bool) {
        let log = self.lock();
        let from = from.min(log.events.len());
        (log.events[from..].to_vec(), log.finished)
    }

    /// Wakes when an event is added or the run finishes.
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.changed.subscribe()
    }

    /// Whether the run has finished.
    pub fn finished(&self) -> bool {
        self.lock().finished
    }

    /// Gives the person's answer to a pending clarifying question; false when none waits.
    pub fn answer(&self, text: String) -> bool {
        let mut log = self.lock();
        if !log.pending || log.finished {
            return false;
        }
        log.pending = false;
        log.answer = Some(text);
        self.answer.notify_all();
        true
    }

    /// Gives the person's word on the call waiting for approval; false when none waits.
    pub fn approve(&self, answer: crate::Answer) -> bool {
        let mut log = self.lock();
        if !log.approving || log.finished {
            return false;
        }
        log.approving = false;
        log.approval = Some(answer);
        self.answer.notify_all();
        true
    }

    /// Counts a page streaming the run's events while the guard lives. When the last
    /// one goes (the page was closed, the network dropped) and none comes back within
    /// the grace period, the run is stopped: a model nobody reads should not hold a
    /// place for the rest of its deadline. A reload, or `EventSource` reconnecting by
    /// itself, comes back well within it.
    pub fn watched(self: &Arc<Self>) -> Watching {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        Watching(Arc::clone(self))
    }

    /// Stops the run: the page is told at once, the run's thread ends at its next step.
    pub fn stop(&self) {
        self.stop.stop();
        self.answer.notify_all();
    }

    /// The run's transcript: its events as JSON lines, without the streamed pieces of
    /// the answer (the `--transcript` format).
    pub fn transcript(&self) -> String {
        let log = self.lock();
        let mut out = String::new();
        for e in log.events.iter().filter(|e| e["event"] != "answer_text") {
            out.push_str(&e.to_string());
            out.push('\n');
        }
        out
    }

    /// Waits for the person's answer until the run is stopped or the deadline passes.
    fn wait_for_answer(&self, deadline: Deadline) -> Option<String> {
        let mut log = self.lock();
        log.pending = true;
        self.wait(log, deadline, |l| l.answer.take(), |l| l.pending = false)
    }

    /// Shows the page the call waiting for approval (`approval_request`) and waits for
    /// the person's word until the run is stopped or the deadline passes (`None`: not
    /// run).
    fn wait_for_approval(
        &self,
        request: &crate::ApprovalRequest<'_>,
        deadline: Deadline,
    ) -> Option<crate::Answer> {
        let n = {
            let mut log = self.lock();
            // Waiting from the moment the page can see the call, so a word sent at once
            // is kept.
            log.approving = true;
            log.approval = None;
            log.events.push(json!({
                "event": "approval_request",
                "tool": request.tool,
                "arguments": request.arguments,
                "class": request.class.to_string(),
                "class_from": request.source,
                "unsaid": request.unsaid,
                // The words the terminal shows, so the page says the same.
                "unsaid_line": request.unsaid.line(),
            }));
            log.events.len()
        };
        self.changed.send_replace(n);
        let log = self.lock();
        self.wait(
            log,
            deadline,
            |l| l.approval.take(),
            |l| l.approving = false,
        )
    }

    /// Waits on the log until `take` has the person's word, the run is stopped or the
    /// deadline passes (then `give_up` clears the waiting flag).
    fn wait<T>(
        &self,
        mut log: MutexGuard<'_, Log>,
        deadline: Deadline,
        mut take: impl FnMut(&mut Log) -> Option<T>,
        give_up: impl FnOnce(&mut Log),
    ) -> Option<T> {
        loop {
            if let Some(t) = take(&mut log) {
                return Some(t);
            }
            if self.stop.is_stopped() || deadline.is_expired() {
                give_up(&mut log);
                return None;
            }
            let wait = deadline.cap(Duration::from_secs(3600));
            log = match self.answer.wait_timeout(log, wait) {
                Ok((l, _)) => l,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// Asks the person on the page whether a call may run ([`Run::wait_for_approval`]).
struct PageApprover {
    run: Arc<Run>,
    deadline: Deadline,
}

impl crate::Approver for PageApprover {
    fn approve(&mut self, request: &crate::ApprovalRequest<'_>) -> Option<crate::Answer> {
        self.run.wait_for_approval(request, self.deadline)
    }
}

/// A page streaming a run's events ([`Run::watched`]).
pub struct Watching(Arc<Run>);

impl Drop for Watching {
    fn drop(&mut self) {
        let run = &self.0;
        if run.watchers.fetch_sub(1, Ordering::SeqCst) != 1 || run.finished() {
            return;
        }
        let run = Arc::clone(run);
        // A thread of its own: this runs where the server drops a closed stream, which
        // must not wait. At most one per stream that closed, each ending after the grace.
        let _ = std::thread::Builder::new()
            .name("toolloop-web-abandoned".into())
            .spawn(move || {
                std::thread::sleep(run.grace);
                if run.watchers.load(Ordering::SeqCst) == 0 && !run.finished() {
                    log::info!(
                        "run {}: nobody has watched it for {:?}; stopped",
                        run.id,
                        run.grace
                    );
                    run.stop();
                }
            });
    }
}

/// Appends a run's events to its log, as the transcript writes them (with `t_ms`), and
/// with the answer rendered as safe HTML on `stopped` (`html`).
struct LogObserver {
    run: Arc<Run>,
    started: Instant,
}

impl Observer for LogObserver {
    fn event(&mut self, event: &Event) {
        if matches!(event, Event::ModelText { .. }) {
            return;
        }
        if let Event::Clarify { .. } = event {
            // Waiting from the moment the page can see the question, so an answer sent at
            // once is kept for the handler instead of refused.
            self.run.lock().pending = true;
        }
        let mut v = serde_json::to_value(event).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert(
                "t_ms".into(),
                Value::from(self.started.elapsed().as_millis() as u64),
            );
            if let Some(line) = event.check_line().or_else(|| event.approval_line()) {
                m.insert("line".into(), Value::from(line));
            }
            if let Event::Stopped {
                answer: Some(a), ..
            } = event
            {
                m.insert(
                    "html".into(),
                    Value::from(crate::serve::markdown::to_safe_html(a)),
                );
            }
            if let Event::ToolResult { observation, .. } = event
                && serde_json::from_str::<Value>(observation).is_err()
            {
                let html = crate::serve::markdown::to_safe_html(observation);
                m.insert("html".into(), Value::from(html));
            }
        }
        self.run.push(v);
    }
}

/// A conversation: its history and its runs.
struct Conversation {
    turns: Vec<Message>,
    runs: Vec<String>,
    busy: Option<String>,
    used: Instant,
}

/// Everything the web server serves from.
pub struct Runs {
    make_backend: Box<MakeBackend>,
    catalogue: Arc<Catalogue>,
    config: Config,
    max_runs: usize,
    max_conversations: usize,
    grace: Duration,
    active: AtomicUsize,
    state: Mutex<State>,
}

/// How long a run goes on after its last page stopped watching ([`Runs::with_grace`]).
const GRACE: Duration = Duration::from_secs(15);

#[derive(Default)]
struct State {
    conversations: HashMap<String, Conversation>,
    runs: HashMap<String, Arc<Run>>,
    finished: std::collections::VecDeque<String>,
}

impl Runs {
    /// The state for a server whose runs use `config`'s limits, the backend
    /// `make_backend` makes and the tools in `catalogue`; at most `max_runs` in progress
    /// and `max_conversations` kept (the least recently used idle one is forgotten).
    pub fn new(
        make_backend: Box<MakeBackend>,
        catalogue: Arc<Catalogue>,
        mut config: Config,
        max_runs: usize,
        max_conversations: usize,
    ) -> Self {
        // The tools are the shared catalogue; the config's own list is not connected again.
        config.tools = crate::tools::ToolSetup::default();
        Runs {
            make_backend,
            catalogue,
            config,
            max_runs: max_runs.max(1),
            max_conversations: max_conversations.max(1),
            grace: GRACE,
            active: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
        }
    }

    /// The state for what `config` names: its tools connected (within its timeout), its
    /// model server checked, a backend made from it for each run; 64 conversations kept.
    pub fn from_config(config: Config, max_runs: usize) -> Result<Self, OrchestratorError> {
        let deadline = Deadline::after(config.timeout);
        let catalogue = config
            .tools
            .connect(deadline)
            .map_err(OrchestratorError::tools)?;
        config
            .backend()
            .and_then(|mut b| b.preflight(deadline))
            .map_err(|e| OrchestratorError::backend(e, Vec::new()))?;
        let maker = config.clone();
        let make: Box<MakeBackend> = Box::new(move || {
            maker
                .backend()
                .map_err(|e| OrchestratorError::backend(e, Vec::new()))
        });
        Ok(Runs::new(make, Arc::new(catalogue), config, max_runs, 64))
    }

    /// How long a run goes on once no page watches it (15 seconds unless set).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tools.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// The model's name, as the server was told it.
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// The checks runs get unless a run sets its own.
    pub fn checks(&self) -> &CheckLevels {
        &self.config.checks
    }

    /// A new, empty conversation's id; `None` when every kept conversation is busy.
    pub fn new_conversation(&self) -> Option<String> {
        let mut state = self.lock();
        if state.conversations.len() >= self.max_conversations {
            let idle = state
                .conversations
                .iter()
                .filter(|(_, c)| c.busy.is_none())
                .min_by_key(|(_, c)| c.used)
                .map(|(id, _)| id.clone())?;
            state.conversations.remove(&idle);
        }
        let id = new_id();
        state.conversations.insert(
            id.clone(),
            Conversation {
                turns: Vec::new(),
                runs: Vec::new(),
                busy: None,
                used: Instant::now(),
            },
        );
        Some(id)
    }

    /// Forgets a conversation (its runs stop); false when there was none.
    pub fn forget(&self, id: &str) -> bool {
        let mut state = self.lock();
        let Some(c) = state.conversations.remove(id) else {
            return false;
        };
        if let Some(run) = c.busy.and_then(|r| state.runs.get(&r).cloned()) {
            run.stop();
        }
        true
    }

    /// A conversation as JSON: its turns, its runs and the run in progress.
    pub fn conversation(&self, id: &str) -> Option<Value> {
        let state = self.lock();
        let c = state.conversations.get(id)?;
        let turns: Vec<Value> = c
            .turns
            .iter()
            .map(|m| json!({"role": m.role, "content": m.content}))
            .collect();
        Some(json!({"id": id, "turns": turns, "runs": c.runs, "running": c.busy}))
    }

    /// A run by id.
    pub fn run(&self, id: &str) -> Option<Arc<Run>> {
        self.lock().runs.get(id).cloned()
    }

    /// Starts a run of `question` in a conversation, on a thread of its own.
    pub fn start(
        self: &Arc<Self>,
        conversation: &str,
        question: String,
        checks: Option<CheckLevels>,
    ) -> Result<Arc<Run>, StartError> {
        let mut state = self.lock();
        let c = state
            .conversations
            .get_mut(conversation)
            .ok_or(StartError::NoConversation)?;
        if let Some(busy) = &c.busy {
            return Err(StartError::Busy(busy.clone()));
        }
        // Counted under the state lock, so two requests cannot both take the last place.
        if self.active.load(Ordering::SeqCst) >= self.max_runs {
            return Err(StartError::Full);
        }
        self.active.fetch_add(1, Ordering::SeqCst);
        let (changed, _) = watch::channel(0);
        let run = Arc::new(Run {
            id: new_id(),
            conversation: conversation.to_string(),
            log: Mutex::new(Log::default()),
            changed,
            stop: StopHandle::default(),
            answer: Condvar::new(),
            watchers: AtomicUsize::new(0),
            grace: self.grace,
        });
        c.busy = Some(run.id.clone());
        c.runs.push(run.id.clone());
        c.used = Instant::now();
        let turns = c.turns.clone();
        state.runs.insert(run.id.clone(), Arc::clone(&run));
        drop(state);
        let (me, r) = (Arc::clone(self), Arc::clone(&run));
        let spawned = std::thread::Builder::new()
            .name("toolloop-web-run".into())
            .spawn(move || {
                // A panic in a tool or a bug must not leave the conversation busy and the
                // run's place taken for ever.
                let run =
                    std::panic::AssertUnwindSafe(|| me.execute(&r, &question, &turns, checks));
                let delta = std::panic::catch_unwind(run).unwrap_or_else(|_| {
                    let message = "the run failed inside toolloop (a panic; see the log)";
                    r.push(json!({"event": "error", "message": message}));
                    None
                });
                me.finish(&r, delta);
            });
        if let Err(e) = spawned {
            run.push(json!({"event": "error", "message": format!("cannot start the run: {e}")}));
            self.finish(&run, None);
        }
        Ok(run)
    }

    /// The run itself: a blocking orchestrator run; what it adds to the conversation's
    /// history when it answered.
    fn execute(
        &self,
        run: &Arc<Run>,
        question: &str,
        turns: &[Message],
        checks: Option<CheckLevels>,
    ) -> Option<Vec<Message>> {
        let deadline = Deadline::after(self.config.timeout);
        let mut config = self.config.clone();
        if let Some(levels) = checks {
            config.checks = levels;
        }
        let waiting = Arc::clone(run);
        let clarify = move |_: &str, _: &[String]| waiting.wait_for_answer(deadline);
        let built = (self.make_backend)().and_then(|backend| {
            Orchestrator::builder()
                .backend(backend)
                .settings(config)
                .shared_catalogue(Arc::clone(&self.catalogue))
                .observer(LogObserver {
                    run: Arc::clone(run),
                    started: Instant::now(),
                })
                .clarify_handler(clarify)
                .approver(PageApprover {
                    run: Arc::clone(run),
                    deadline,
                })
                .stop_handle(run.stop.clone())
                .preflight(false)
                .build()
        });
        match built.and_then(|mut o| o.run_with_deadline(question, turns, deadline)) {
            Ok(outcome) => outcome
                .answer()
                .is_some()
                .then(|| outcome.history_delta().to_vec()),
            Err(e) => {
                run.push(json!({"event": "error", "message": e.to_string()}));
                None
            }
        }
    }

    fn finish(&self, run: &Arc<Run>, delta: Option<Vec<Message>>) {
        let mut state = self.lock();
        if let Some(c) = state.conversations.get_mut(&run.conversation) {
            c.busy = None;
            c.used = Instant::now();
            if let Some(d) = delta {
                c.turns.extend(d);
            }
        }
        state.finished.push_back(run.id.clone());
        while state.finished.len() > KEEP_RUNS {
            if let Some(old) = state.finished.pop_front() {
                state.runs.remove(&old);
            }
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        drop(state);
        let n = {
            let mut log = run.lock();
            log.finished = true;
            log.pending = false;
            log.approving = false;
            log.events.len()
        };
        run.changed.send_replace(n + 1);
    }
}

/// An id nobody can guess from the ones before it: the standard library's randomly
/// keyed hasher over a counter and the time (no random-number crate for one id).
fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(COUNTER.fetch_add(1, Ordering::SeqCst));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:016x}", h.finish())
}
