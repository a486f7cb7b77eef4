//! A call of a tool that only reads starts as soon as the model has written it, while the
//! rest of its turn is written; the turn is judged as before, and a call it does not make
//! is let go and said (`Config::early_calls`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use toolloop::backend::ScriptedReply;
use toolloop::backend::{ChatReply, ChatRequest, StopReason, TextSink};
use toolloop::tools::{FnTools, ToolSpec};
use toolloop::{Backend, BackendError, Deadline, Event, Orchestrator, Scripted};

const FIRST: &str =
    r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "lookup", "arguments": {"n": 1}},"#;
const REST: &str = r#" {"tool": "lookup", "arguments": {"n": 2}}]}"#;
const ANSWER: &str = r#"{"kind": "final_answer", "thought": "", "content": "1 and 2."}"#;

/// Writes its first call, then waits (up to `wait`) for a tool to have run before it
/// writes the rest of the turn; then answers. Says whether the tool ran while it waited.
struct Paused {
    ran: Receiver<()>,
    wait: Duration,
    ran_while_writing: Arc<Mutex<Option<bool>>>,
    turns: usize,
}

impl Backend for Paused {
    fn describe(&self) -> String {
        "paused".into()
    }

    fn chat(
        &mut self,
        _request: &ChatRequest<'_>,
        _deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        self.turns += 1;
        let text = match self.turns {
            1 => {
                let _ = sink(FIRST);
                let ran = self.ran.recv_timeout(self.wait).is_ok();
                *self.ran_while_writing.lock().unwrap() = Some(ran);
                let _ = sink(REST);
                format!("{FIRST}{REST}")
            }
            _ => {
                let _ = sink(ANSWER);
                ANSWER.to_string()
            }
        };
        Ok(ChatReply {
            text,
            stop: StopReason::Finished,
            ..ChatReply::default()
        })
    }
}

fn lookup(read_only: bool, ran: Sender<()>, calls: Arc<AtomicUsize>) -> FnTools {
    let spec = ToolSpec::new(
        "lookup",
        "Looks a number up",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    );
    let mut tools = FnTools::new();
    let ran = Mutex::new(ran);
    tools.add(
        if read_only { spec.reading_only() } else { spec },
        move |args| {
            calls.fetch_add(1, Ordering::SeqCst);
            let _ = ran.lock().unwrap().send(());
            Ok(json!(format!("number {}", args["n"])))
        },
    );
    tools
}

struct Run {
    events: Vec<Event>,
    calls: usize,
    ran_while_writing: bool,
    outcome: toolloop::Outcome,
}

fn run(read_only: bool, early_calls: bool) -> Run {
    let (tx, rx) = channel();
    let ran_while_writing = Arc::new(Mutex::new(None));
    let calls = Arc::new(AtomicUsize::new(0));
    let store = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&store);
    let config = toolloop::Config {
        early_calls,
        max_calls_per_turn: 2,
        tools: Default::default(),
        ..Default::default()
    };
    let mut o = Orchestrator::builder()
        .settings(config)
        .backend(Paused {
            ran: rx,
            // Long where the tool should run meanwhile (a loaded machine is slow to start
            // its thread); where it should not, a second shows it did not.
            wait: Duration::from_secs(if read_only && early_calls { 10 } else { 1 }),
            ran_while_writing: Arc::clone(&ran_while_writing),
            turns: 0,
        })
        .source(lookup(read_only, tx, Arc::clone(&calls)))
        // The person allows a tool that may change things each time they are asked.
        .approver(|_: &toolloop::ApprovalRequest<'_>| toolloop::Answer::Yes)
        .observer(move |e: &Event| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let outcome = o.run("Look up 1 and 2").unwrap();
    let ran_while_writing = ran_while_writing.lock().unwrap().unwrap();
    let events = store.lock().unwrap().clone();
    Run {
        events,
        calls: calls.load(Ordering::SeqCst),
        ran_while_writing,
        outcome,
    }
}

fn kinds(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::CallWritten { arguments, .. } => Some(format!("written {arguments}")),
            Event::CallSentEarly { arguments, .. } => {
                Some(format!("sent early {}", json!(arguments)))
            }
            Event::EarlyCallUnused { arguments, .. } => {
                Some(format!("let go {}", json!(arguments)))
            }
            Event::ModelReply { .. } => Some("reply".into()),
            Event::ToolCall { arguments, .. } => Some(format!("call {}", json!(arguments))),
            Event::ToolResult { observation, .. } => Some(format!("result {observation}")),
            _ => None,
        })
        .collect()
}

/// The first call runs while the model still writes the second; each call runs once, and
/// the turn's results are the tool's, as without early calls.
#[test]
fn a_read_only_call_runs_while_the_rest_of_its_turn_is_written() {
    let r = run(true, true);
    assert!(r.ran_while_writing, "{:?}", kinds(&r.events));
    assert_eq!(r.calls, 2, "each call ran once");
    assert_eq!(
        kinds(&r.events)[..9],
        [
            r#"written {"n":1}"#,
            r#"sent early {"n":1}"#,
            r#"written {"n":2}"#,
            r#"sent early {"n":2}"#,
            "reply",
            r#"call {"n":1}"#,
            r#"call {"n":2}"#,
            "result number 1",
            "result number 2",
        ]
    );
    assert_eq!(r.outcome.answer(), Some("1 and 2."));
    let steps: Vec<&str> = (r.outcome.steps.iter())
        .filter(|s| s.tool.is_some())
        .map(|s| s.observation.as_str())
        .collect();
    assert_eq!(steps, ["number 1", "number 2"]);
    assert!(r.outcome.budget.first_call_ms.is_some());
}

/// A tool that may change things waits for its whole turn to be judged.
#[test]
fn a_tool_that_may_change_things_waits_for_its_turn() {
    let r = run(false, true);
    assert!(!r.ran_while_writing);
    assert_eq!(r.calls, 2);
    let k = kinds(&r.events);
    assert!(!k.iter().any(|e| e.starts_with("sent early")), "{k:?}");
    assert_eq!(r.outcome.answer(), Some("1 and 2."));
}

/// `early_calls: false` (`--no-early-calls`) waits for the turn whatever the tool.
#[test]
fn early_calls_turned_off_wait_for_the_turn() {
    let r = run(true, false);
    assert!(!r.ran_while_writing);
    assert_eq!(r.calls, 2);
    assert!(!kinds(&r.events).iter().any(|e| e.starts_with("sent early")));
}

/// A turn that is not carried out (cut at the token limit inside its second call, so the
/// model is asked again and answers instead): the call started early ran, its result is
/// let go, and the run says so.
#[test]
fn an_early_call_its_turn_does_not_make_is_let_go_and_said() {
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, _rx) = channel();
    let model = Scripted::from_replies([
        ScriptedReply::truncated(
            r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "lookup", "arguments": {"n": 41}}, {"tool": "lookup", "arguments": {"n"#,
        ),
        ScriptedReply::text(r#"{"kind": "final_answer", "thought": "", "content": "No number."}"#),
    ]);
    let store = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&store);
    let mut o = Orchestrator::builder()
        .backend(model)
        .source(lookup(true, tx, Arc::clone(&calls)))
        .observer(move |e: &Event| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let out = o.run("Look a number up for me").unwrap();
    let events = store.lock().unwrap().clone();
    let k = kinds(&events);
    assert!(
        out.steps.iter().all(|s| s.tool.is_none()),
        "{:?}",
        out.steps
    );
    assert_eq!(out.answer(), Some("No number."), "{k:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "{k:?}");
    assert!(k.contains(&r#"sent early {"n":41}"#.to_string()), "{k:?}");
    assert_eq!(
        k.last().map(String::as_str),
        Some(r#"let go {"n":41}"#),
        "{k:?}"
    );
    assert!(!k.iter().any(|e| e.starts_with("call ")), "{k:?}");
}

const SINGLE: &str =
    r#"{"kind": "tool_call", "thought": "", "tool": "lookup", "arguments": {"n": 1}}"#;

/// Writes one call in the single-call form, sure it calls; asked again with the calls
/// made as the reply's beginning (`numbers-left`: "2" was left out), waits (up to 10 s)
/// for a tool to have run before it writes the call after them, as llama-server does
/// while it reads the beginning; then answers.
struct Continues {
    ran: Receiver<()>,
    ran_before_more: Arc<Mutex<Option<bool>>>,
    given: Arc<Mutex<Option<String>>>,
    turns: usize,
}

impl Backend for Continues {
    fn describe(&self) -> String {
        "continues".into()
    }

    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        _deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        use toolloop::backend::TokenLogprob;
        self.turns += 1;
        let sure = vec![
            TokenLogprob {
                token: r#"{"kind": ""#.into(),
                logprob: 0.0,
                top: vec![],
            },
            TokenLogprob {
                token: "tool".into(),
                logprob: 0.999f64.ln(),
                top: vec![
                    ("tool".into(), 0.999f64.ln()),
                    ("final".into(), 0.001f64.ln()),
                ],
            },
        ];
        let (text, given, logprobs) = match (self.turns, request.options.prefill.clone()) {
            (1, _) => {
                let _ = sink(SINGLE);
                (SINGLE.to_string(), 0, sure)
            }
            (2, Some(given)) => {
                let ran = self.ran.recv_timeout(Duration::from_secs(10)).is_ok();
                *self.ran_before_more.lock().unwrap() = Some(ran);
                *self.given.lock().unwrap() = Some(given.clone());
                let _ = sink(&given);
                let _ = sink(REST);
                (format!("{given}{REST}"), given.len(), Vec::new())
            }
            _ => {
                let _ = sink(ANSWER);
                (ANSWER.to_string(), 0, Vec::new())
            }
        };
        Ok(ChatReply {
            text,
            given,
            logprobs,
            stop: StopReason::Finished,
            ..ChatReply::default()
        })
    }
}

/// A turn of one call asked again for the number it left out: the call it made stands
/// whatever the asking brings, so it goes off as the turn is asked for again, not once
/// the continuation streams it back; it runs once, and the turn's results are the tool's.
#[test]
fn a_call_asked_again_for_more_goes_off_at_the_asking() {
    let (tx, rx) = channel();
    let ran_before_more = Arc::new(Mutex::new(None));
    let given = Arc::new(Mutex::new(None));
    let calls = Arc::new(AtomicUsize::new(0));
    let store = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&store);
    let config = toolloop::Config {
        max_calls_per_turn: 2,
        tools: Default::default(),
        ..Default::default()
    };
    let mut o = Orchestrator::builder()
        .settings(config)
        .backend(Continues {
            ran: rx,
            ran_before_more: Arc::clone(&ran_before_more),
            given: Arc::clone(&given),
            turns: 0,
        })
        .source(lookup(true, tx, Arc::clone(&calls)))
        .observer(move |e: &Event| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let out = o.run("Look up 1 and 2").unwrap();
    let k = kinds(&store.lock().unwrap());
    let given = given.lock().unwrap().clone();
    assert!(
        given.as_deref().is_some_and(|g| g.contains(r#""n": 1"#)),
        "asked again with {given:?}: {k:?}"
    );
    assert_eq!(*ran_before_more.lock().unwrap(), Some(true), "{k:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "each call ran once: {k:?}");
    let steps: Vec<&str> = (out.steps.iter())
        .filter(|s| s.tool.is_some())
        .map(|s| s.observation.as_str())
        .collect();
    assert_eq!(steps, ["number 1", "number 2"], "{k:?}");
    assert!(!k.iter().any(|e| e.starts_with("let go")), "{k:?}");
    assert_eq!(out.answer(), Some("1 and 2."));
}
