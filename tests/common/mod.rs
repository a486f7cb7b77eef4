//! Helpers shared by the integration tests: a tiny HTTP server on 127.0.0.1 that plays a
//! script of canned responses and faults (hang, slow stream, cut connection), for the
//! failure paths mockito cannot express.
#![allow(dead_code)]

pub mod browser;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What the server does with one connection.
#[derive(Clone, Debug)]
pub enum Act {
    /// Answer with a status, content type and body.
    Respond(u16, &'static str, Vec<u8>),
    /// Send headers and these chunks of body with a pause before each, then finish.
    Stream(&'static str, Vec<Vec<u8>>, Duration),
    /// Read the request and never answer (until the test ends).
    Hang,
    /// Send headers promising a body, part of it, and close the connection.
    CutBody(Vec<u8>),
    /// Close this connection unanswered and stop listening: the server has died, and
    /// every later connection is refused.
    Die,
}

/// A running fake server.
pub struct Fake {
    pub url: String,
    /// The raw requests received (request line, headers, body).
    pub requests: Arc<Mutex<Vec<String>>>,
    /// How many streamed replies the other end stopped reading before their end.
    pub cut: Arc<std::sync::atomic::AtomicUsize>,
}

/// Serves `acts` to successive connections; the last act repeats.
pub fn serve(acts: Vec<Act>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    let cut = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cuts = Arc::clone(&cut);
    thread::spawn(move || {
        for (i, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { break };
            let act = acts[i.min(acts.len() - 1)].clone();
            if matches!(act, Act::Die) {
                break;
            }
            let seen = Arc::clone(&seen);
            let cuts = Arc::clone(&cuts);
            thread::spawn(move || handle(stream, act, seen, cuts));
        }
    });
    Fake { url, requests, cut }
}

/// A server that answers one connection with `first`, then stops listening for `gap` (each
/// connection meanwhile refused, as while a model server restarts), then plays `then` at
/// the same address.
pub fn serve_restarting(first: Act, gap: Duration, then: Vec<Act>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}");
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    let cut = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cuts = Arc::clone(&cut);
    thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            handle(stream, first, Arc::clone(&seen), Arc::clone(&cuts));
        }
        drop(listener);
        thread::sleep(gap);
        let listener = TcpListener::bind(addr).unwrap();
        for (i, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { break };
            let act = then[i.min(then.len() - 1)].clone();
            let seen = Arc::clone(&seen);
            let cuts = Arc::clone(&cuts);
            thread::spawn(move || handle(stream, act, seen, cuts));
        }
    });
    Fake { url, requests, cut }
}

fn handle(
    mut stream: TcpStream,
    act: Act,
    seen: Arc<Mutex<Vec<String>>>,
    cut: Arc<std::sync::atomic::AtomicUsize>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    head.push_str(&String::from_utf8_lossy(&body));
    seen.lock().unwrap().push(head);
    match act {
        Act::Respond(status, ct, body) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
        }
        Act::Stream(ct, chunks, pause) => {
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            );
            for chunk in chunks {
                thread::sleep(pause);
                let _ = write!(stream, "{:x}\r\n", chunk.len());
                let _ = stream.write_all(&chunk);
                if stream.write_all(b"\r\n").is_err() || stream.flush().is_err() {
                    cut.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    return;
                }
                let _ = stream.flush();
            }
            let _ = stream.write_all(b"0\r\n\r\n");
        }
        Act::Hang => thread::sleep(Duration::from_secs(60)),
        Act::Die => {}
        Act::CutBody(part) => {
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\r\n",
                part.len() + 1000
            );
            let _ = stream.write_all(&part);
            let _ = stream.flush();
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// An address on 127.0.0.1 where nothing listens: port 1, which no test's server can be
/// given (they bind port 0, from the ephemeral range). A port freed by a listener could be
/// handed to another test's server while a refused connection is being retried.
pub fn dead_url() -> String {
    "http://127.0.0.1:1".to_string()
}

/// A child process killed (and reaped) when the test lets go of it, pass or fail.
pub struct Killer(pub std::process::Child);

impl Drop for Killer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections at `addr` (10 s at most).
pub fn wait_for(addr: &str) {
    let started = std::time::Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nothing listens at {addr}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// A real `toolloop serve-tools` process with these extra flags on a free port, once it
/// accepts connections; the process ends with the returned guard. Gives the guard and
/// `host:port`.
pub fn serve_tools(extra: &[&str]) -> (Killer, String) {
    serving("serve-tools", extra, false)
}

/// `toolloop COMMAND --addr 127.0.0.1:PORT EXTRA…` serving on a free port, killed when
/// dropped; `fresh`: as on a fresh install (no calibration, leanings or permissions file).
pub fn serving(command: &str, extra: &[&str], fresh: bool) -> (Killer, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolloop"));
    cmd.args([command, "--addr", &addr])
        .args(extra)
        .stderr(std::process::Stdio::null());
    if fresh {
        cmd.env("TOOLLOOP_CALIBRATION", "/nonexistent/cal.json")
            .env("TOOLLOOP_LEANINGS", "/nonexistent/leanings.json")
            .env("TOOLLOOP_PERMISSIONS", "/nonexistent/permissions.json");
    }
    let guard = Killer(cmd.spawn().unwrap());
    wait_for(&addr);
    (guard, addr)
}

/// Ollama's `/api/show` answer for a model without native tool calling.
pub const SHOW: &[u8] = br#"{"capabilities":["completion"]}"#;

/// One streamed Ollama `/api/chat` reply carrying `content`.
pub fn ollama_reply(content: &str) -> Act {
    let line =
        serde_json::json!({"message": {"role": "assistant", "content": content}, "done": false});
    let done = r#"{"message":{"content":""},"done":true,"done_reason":"stop","prompt_eval_count":50,"eval_count":9}"#;
    Act::Respond(
        200,
        "application/x-ndjson",
        format!("{line}\n{done}\n").into_bytes(),
    )
}

/// An Ollama that answers `/api/show` and then each `/api/chat` with the next reply.
pub fn fake_ollama(replies: &[&str]) -> Fake {
    let mut acts = vec![Act::Respond(200, "application/json", SHOW.to_vec())];
    acts.extend(replies.iter().map(|r| ollama_reply(r)));
    serve(acts)
}
