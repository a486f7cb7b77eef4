//! MCP's stdio transport, pipelined: several requests can be in flight over one server
//! process at once, and each reply goes to its caller by JSON-RPC id.
//!
//! A reader thread owns the server's stdout. Each line that answers a request is handed
//! to the caller waiting for that id; a `ping` from the server is answered on the spot;
//! notifications and garbage lines are skipped. Writing a request takes a short lock on
//! stdin, so the calls of one model turn reach the server without waiting for each
//! other's replies, and a slow call does not hold up a quick one.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::wire::{MAX_LINE, REQUEST_TIMEOUT, Reply, split_command, to_reply};
use crate::deadline::Deadline;
use crate::http;
use crate::tools::ToolError;

/// Who waits for which reply; `None` once the server's output has ended.
type Waiting = Arc<Mutex<Option<HashMap<u64, Sender<Value>>>>>;

/// Every server process this process started that is not yet dropped: a tool call a
/// stopped run let go of still holds its server, so a process that exits on a signal ends
/// them here ([`end_all`]) rather than leave them running.
static LIVE: Mutex<Vec<std::sync::Weak<Mutex<Child>>>> = Mutex::new(Vec::new());

/// Kills every stdio MCP server this process started that is still running.
#[cfg(feature = "cli")]
pub(crate) fn end_all() {
    let live = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|p| p.into_inner()));
    for child in live.iter().filter_map(std::sync::Weak::upgrade) {
        let mut child = child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// One server process spoken to over its stdin and stdout.
pub(super) struct StdioServer {
    pub(super) command: String,
    child: Arc<Mutex<Child>>,
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    waiting: Waiting,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// A request went unanswered past its time: the server is not reading its input, so
    /// at shutdown it is killed at once instead of being given time to exit.
    hung: AtomicBool,
}

fn write_line(stdin: &Mutex<Option<ChildStdin>>, msg: &Value) -> bool {
    let mut line = serde_json::to_vec(msg).unwrap_or_default();
    line.push(b'\n');
    let mut guard = stdin.lock().unwrap_or_else(|p| p.into_inner());
    match guard.as_mut() {
        Some(s) => s.write_all(&line).and_then(|_| s.flush()).is_ok(),
        None => false,
    }
}

impl StdioServer {
    pub(super) fn spawn(command: &str) -> Result<Self, ToolError> {
        let words = split_command(command);
        let Some((program, args)) = words.split_first() else {
            return Err(ToolError::Spawn {
                command: command.to_string(),
                detail: "empty command".into(),
            });
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ToolError::Spawn {
                command: command.to_string(),
                detail: e.to_string(),
            })?;
        let stdin = Arc::new(Mutex::new(child.stdin.take()));
        let waiting: Waiting = Arc::new(Mutex::new(Some(HashMap::new())));
        if let Some(out) = child.stdout.take() {
            let (stdin, waiting) = (Arc::clone(&stdin), Arc::clone(&waiting));
            let name = command.to_string();
            std::thread::spawn(move || route(BufReader::new(out), &stdin, &waiting, &name));
        }
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(err) = child.stderr.take() {
            let tail = Arc::clone(&tail);
            let name = command.to_string();
            std::thread::spawn(move || drain(BufReader::new(err), &tail, &name));
        }
        let child = Arc::new(Mutex::new(child));
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|c| c.strong_count() > 0);
        live.push(Arc::downgrade(&child));
        drop(live);
        Ok(StdioServer {
            command: command.to_string(),
            child,
            stdin,
            waiting,
            stderr_tail: tail,
            hung: AtomicBool::new(false),
        })
    }

    pub(super) fn exited(&self) -> ToolError {
        // Give the stderr thread a moment to collect the last words.
        std::thread::sleep(Duration::from_millis(50));
        let status = match self.child.lock().map(|mut c| c.try_wait()) {
            Ok(Ok(Some(s))) => format!("{s}"),
            _ => "closed its output".to_string(),
        };
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| {
                let last: Vec<String> = t.iter().rev().take(3).rev().cloned().collect();
                last.join(" | ")
            })
            .unwrap_or_default();
        ToolError::Exited {
            command: self.command.clone(),
            detail: if tail.is_empty() {
                status
            } else {
                format!("{status}; stderr: {}", http::shorten(&tail, 300))
            },
        }
    }

    pub(super) fn send(&self, msg: &Value) -> Result<(), ToolError> {
        if write_line(&self.stdin, msg) {
            Ok(())
        } else {
            Err(self.exited())
        }
    }

    /// Sends request `id` and waits for its reply only: other callers' replies go to them.
    pub(super) fn request(
        &self,
        msg: &Value,
        id: u64,
        deadline: Deadline,
        label: &str,
    ) -> Result<Reply, ToolError> {
        let (tx, rx) = channel();
        let open = match self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            Some(w) => w.insert(id, tx).is_none(),
            None => false,
        };
        if !open {
            return Err(self.exited());
        }
        let forget = || {
            if let Some(w) = self
                .waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
            {
                w.remove(&id);
            }
        };
        if let Err(e) = self.send(msg) {
            forget();
            return Err(e);
        }
        let started = Instant::now();
        let limit = deadline.cap(REQUEST_TIMEOUT);
        match rx.recv_timeout(limit.saturating_sub(started.elapsed())) {
            Ok(v) => Ok(to_reply(&v)),
            Err(RecvTimeoutError::Disconnected) => Err(self.exited()),
            Err(RecvTimeoutError::Timeout) => {
                forget();
                self.hung.store(true, Ordering::SeqCst);
                Err(ToolError::Timeout {
                    source_name: label.to_string(),
                })
            }
        }
    }

    pub(super) fn shutdown(&self) {
        // Closing stdin is how stdio servers are asked to exit; one that stopped answering
        // will not notice, and waiting for it would hold the run past its deadline.
        self.stdin.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let grace = if self.hung.load(Ordering::SeqCst) {
            Duration::ZERO
        } else {
            Duration::from_secs(2)
        };
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The reader thread: each reply to its caller, pings answered, the rest skipped. When
/// the server's output ends, every caller still waiting is told (their channel closes).
fn route(mut out: impl BufRead, stdin: &Mutex<Option<ChildStdin>>, waiting: &Waiting, name: &str) {
    while let Ok(Some(line)) = http::read_line(&mut out, MAX_LINE) {
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            log::warn!(
                "mcp `{name}`: ignoring a line that is not JSON-RPC: {:?}",
                http::shorten(&String::from_utf8_lossy(&line), 80)
            );
            continue;
        };
        if let Some(method) = v["method"].as_str() {
            if let Some(req_id) = v.get("id") {
                // A request from the server: answer ping, refuse the rest.
                let answer = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": req_id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": req_id,
                           "error": {"code": -32601, "message": "method not supported by toolloop"}})
                };
                write_line(stdin, &answer);
            }
            continue;
        }
        let caller = v["id"].as_u64().and_then(|id| {
            let mut w = waiting.lock().unwrap_or_else(|p| p.into_inner());
            w.as_mut().and_then(|w| w.remove(&id))
        });
        if let Some(tx) = caller {
            let _ = tx.send(v);
        }
    }
    waiting.lock().unwrap_or_else(|p| p.into_inner()).take();
}

/// The stderr thread: keeps the last lines for an error message, so a chatty server
/// cannot block on a full pipe.
fn drain(mut err: impl BufRead, tail: &Mutex<VecDeque<String>>, name: &str) {
    let mut line = Vec::new();
    loop {
        line.clear();
        match err.by_ref().take(64 << 10).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                log::debug!("[{name}] {text}");
                if let Ok(mut t) = tail.lock() {
                    if t.len() == 20 {
                        t.pop_front();
                    }
                    t.push_back(text);
                }
            }
        }
    }
}
