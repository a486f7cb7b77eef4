//! The tool server against hostile clients, over real sockets: what one request or one
//! slow tool could once do to `toolloop serve-tools` (issue 13) and must not any more.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use toolloop::serve::Bounds;
use toolloop::serve::{RunningServer, ToolServer};
use toolloop::tools::FnTools;
use toolloop::tools::ToolSpec;

use common::serve_tools;

/// Sends raw bytes and reads until the server closes or `wait` passes; the response text.
fn exchange(addr: &str, request: &[u8], wait: Duration) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    // The server may answer and close before it has read everything: that is a refusal,
    // not a failure of the test.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn health(addr: &str) -> String {
    exchange(
        addr,
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        Duration::from_secs(10),
    )
}

#[test]
fn a_declared_length_of_100_gb_does_not_kill_the_server() {
    let (mut server, addr) = serve_tools(&[]);
    let reply = exchange(
        &addr,
        b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n",
        Duration::from_secs(2),
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let reply = exchange(
        &addr,
        b"POST /tools/calculator HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n{",
        Duration::from_secs(10),
    );
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(health(&addr).starts_with("HTTP/1.1 200"));
    assert!(server.0.try_wait().unwrap().is_none(), "the server exited");
}

#[test]
fn a_header_past_64_kib_is_refused_and_the_server_goes_on() {
    let (mut server, addr) = serve_tools(&[]);
    let mut request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    request.extend(std::iter::repeat_n(b'a', 8 << 20));
    request.extend(b"\r\n\r\n");
    let reply = exchange(&addr, &request, Duration::from_secs(10));
    assert!(
        reply.is_empty() || reply.starts_with("HTTP/1.1 431"),
        "{reply}"
    );
    assert!(health(&addr).starts_with("HTTP/1.1 200"));
    assert!(server.0.try_wait().unwrap().is_none(), "the server exited");
}

fn gate_server(
    bounds: Bounds,
) -> (
    RunningServer,
    Arc<Mutex<mpsc::Receiver<()>>>,
    mpsc::Sender<()>,
) {
    let (open, gate) = mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(gate));
    let held = Arc::clone(&gate);
    let mut tools = FnTools::new();
    let schema = json!({"type": "object"});
    // `wait` returns when the test lets one call through; `fast` at once.
    tools.add(ToolSpec::new("wait", "waits", schema.clone()), move |_| {
        let _ = held.lock().unwrap().recv();
        Ok(json!("released"))
    });
    tools.add(ToolSpec::new("fast", "answers", schema), |_| {
        Ok(json!("fast"))
    });
    let server = ToolServer::bind_with("127.0.0.1:0", Box::new(tools), bounds)
        .unwrap()
        .spawn();
    (server, gate, open)
}

fn post(addr: &str, tool: &str) -> String {
    let request = format!(
        "POST /tools/{tool} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    exchange(addr, request.as_bytes(), Duration::from_secs(20))
}

#[test]
fn a_slow_tool_delays_only_its_own_caller() {
    let (server, _gate, open) = gate_server(Bounds::default());
    let addr = server.addr().to_string();
    // Six calls of `wait` hang in the tool; the server must still answer everything else.
    let waiting: Vec<_> = (0..6)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || post(&addr, "wait"))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert!(health(&addr).starts_with("HTTP/1.1 200"));
    let fast = post(&addr, "fast");
    assert!(
        fast.starts_with("HTTP/1.1 200") && fast.contains("\"fast\""),
        "{fast}"
    );
    for _ in 0..6 {
        open.send(()).unwrap();
    }
    for w in waiting {
        assert!(w.join().unwrap().contains("released"));
    }
}

#[test]
fn idle_and_trickling_connections_are_closed() {
    let bounds = Bounds {
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        ..Bounds::default()
    };
    let (server, _gate, _open) = gate_server(bounds);
    let addr = server.addr().to_string();
    // A connection that never sends anything is closed.
    let silent = exchange(&addr, b"", Duration::from_secs(8));
    assert!(
        silent.is_empty() || silent.starts_with("HTTP/1.1 408"),
        "{silent}"
    );
    // A keep-alive connection left idle after a request is closed too.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let closed = s.read_to_end(&mut out);
    assert!(closed.is_ok(), "still open after 8 s: {closed:?}");
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"));
    // A body that trickles is cut with a 408.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    s.write_all(b"POST /tools/fast HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
        .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
}
