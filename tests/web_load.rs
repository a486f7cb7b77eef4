//! `toolloop web` as a process, from the attack run (issue 73): two hundred clients at
//! once and a 50 MB body. Its threads and peak memory are read from `/proc`, so the
//! bounds hold for the server alone, not for this test's own threads.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Act, Killer};
use serde_json::{Value, json};

const ANSWER: &str = r#"{"kind":"final_answer","thought":"","content":"Hello there."}"#;

/// A model server that streams every reply in three pieces 100 ms apart, so that runs
/// started together are in progress together.
fn slow_upstream() -> common::Fake {
    let piece = |v: Value| format!("data: {v}\n\n").into_bytes();
    let chunks = vec![
        piece(json!({"choices": [{"index": 0, "delta": {"content": ANSWER}}]})),
        piece(
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 40, "completion_tokens": 12}}),
        ),
        b"data: [DONE]\n\n".to_vec(),
    ];
    common::serve(vec![Act::Stream(
        "text/event-stream",
        chunks,
        Duration::from_millis(100),
    )])
}

/// `toolloop web` with no tools in front of `upstream`, as on a fresh install.
fn web(upstream: &common::Fake, max_runs: &str) -> (Killer, String) {
    let base = format!("{}/v1", upstream.url);
    let args = [
        "--backend",
        "openai",
        "--base-url",
        &base,
        "--model",
        "m",
        "--no-tools",
        "--max-runs",
        max_runs,
    ];
    common::serving("web", &args, true)
}

/// A field of `/proc/PID/status` (`Threads`, `VmHWM` in kB).
fn status_field(server: &Killer, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.0.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// One request on a fresh connection: the status and the body.
fn request(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_string())
}

/// The first JSON object in a (possibly chunked) body.
fn json_in(body: &str) -> Value {
    let start = body.find('{').unwrap_or(0);
    let end = body.rfind('}').map_or(body.len(), |e| e + 1);
    serde_json::from_str(&body[start..end]).unwrap_or(Value::Null)
}

/// The last event of a run's stream, read until the server ends it.
fn last_event(addr: &str, run: &str) -> Value {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET /api/runs/{run}/events HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut last = Value::Null;
    for line in BufReader::new(s).lines() {
        let Ok(line) = line else { break };
        if let Some(v) = line
            .strip_prefix("data: ")
            .and_then(|d| serde_json::from_str::<Value>(d).ok())
        {
            last = v;
        }
    }
    last
}

/// Waits until the server's thread count is back to `to` or below; the count then.
fn threads_settle(server: &Killer, to: u64) -> u64 {
    let started = Instant::now();
    loop {
        let now = status_field(server, "Threads");
        if now <= to || started.elapsed() > Duration::from_secs(10) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn two_hundred_clients_at_once_get_a_run_or_a_clear_no_and_nothing_is_left_behind() {
    let upstream = slow_upstream();
    let (server, addr) = web(&upstream, "64");
    let threads_before = status_field(&server, "Threads");
    let outcomes: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..200)
            .map(|_| {
                scope.spawn(|| {
                    let (status, c) = request(&addr, "POST", "/api/conversations", "");
                    // With every kept conversation running, a new one is a clear 503 too.
                    if status == 503 {
                        return (status, json_in(&c));
                    }
                    assert_eq!(status, 201, "{c}");
                    let c = json_in(&c)["id"].as_str().unwrap().to_string();
                    let (status, run) = request(
                        &addr,
                        "POST",
                        &format!("/api/conversations/{c}/runs"),
                        r#"{"question": "Say hello."}"#,
                    );
                    let run = json_in(&run);
                    match run["run"].as_str() {
                        Some(id) if status == 202 => (status, last_event(&addr, id)),
                        _ => (status, run),
                    }
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let accepted: Vec<_> = outcomes.iter().filter(|(s, _)| *s == 202).collect();
    // Past the 64 conversations kept, the least recently used idle one is forgotten: a
    // client whose conversation went so is told to start a new one.
    for (status, body) in &outcomes {
        let forgotten = *status == 404
            && body["error"]
                .as_str()
                .is_some_and(|e| e.contains("start a new one"));
        assert!(matches!(status, 202 | 503) || forgotten, "{status} {body}");
    }
    assert!(
        !accepted.is_empty() && accepted.len() < 200,
        "{} of 200 accepted with --max-runs 64",
        accepted.len()
    );
    for (_, last) in &accepted {
        assert_eq!(last["event"], "stopped", "{last}");
        assert_eq!(last["answer"], "Hello there.", "{last}");
    }
    // Every run's thread and every stream's task is gone once the runs are.
    let threads_after = threads_settle(&server, threads_before);
    assert!(
        threads_after <= threads_before,
        "{threads_before} threads before the clients, {threads_after} after"
    );
    let (status, _) = request(&addr, "GET", "/api/tools", "");
    assert_eq!(status, 200);
    let peak_mb = status_field(&server, "VmHWM") / 1024;
    assert!(peak_mb < 100, "the server peaked at {peak_mb} MB");
}

#[test]
fn a_50_mb_body_without_a_length_is_refused_without_being_held() {
    let upstream = slow_upstream();
    let (server, addr) = web(&upstream, "4");
    let (_, c) = request(&addr, "POST", "/api/conversations", "");
    let c = json_in(&c)["id"].as_str().unwrap().to_string();
    let peak_before = status_field(&server, "VmHWM");
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /api/conversations/{c}/runs HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    // 50 chunks of 1 MB of one JSON string; the server may answer and close before the
    // end, which the writes then meet as a reset: a refusal, not a failure of the test.
    let mb = vec![b'x'; 1 << 20];
    let _ = s.write_all(b"7\r\n{\"q\": \"\r\n");
    for _ in 0..50 {
        if write!(s, "{:x}\r\n", mb.len()).is_err()
            || s.write_all(&mb).is_err()
            || s.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let _ = s.write_all(b"2\r\n\"}\r\n0\r\n\r\n");
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.is_empty() || reply.starts_with("HTTP/1.1 413"),
        "{reply}"
    );
    let grown_mb = status_field(&server, "VmHWM").saturating_sub(peak_before) / 1024;
    assert!(grown_mb < 20, "the server's peak grew by {grown_mb} MB");
    // Nothing was started, and the server goes on.
    let (status, conv) = request(&addr, "GET", &format!("/api/conversations/{c}"), "");
    assert_eq!(status, 200);
    assert!(json_in(&conv)["running"].is_null(), "{conv}");
    assert!(
        upstream
            .requests
            .lock()
            .unwrap()
            .iter()
            .all(|r| !r.contains("chat/completions"))
    );
}
