//! Ctrl-C (SIGINT) and SIGTERM during `ask` and during a `chat` run: the run stops, its
//! transcript gets its closing event, its MCP servers are ended, and the process exits
//! with the documented 130, each within a few seconds of the signal.

mod common;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Act, serve};

/// An Ollama that answers `/api/show` and then never answers a chat.
fn hanging_model() -> common::Fake {
    serve(vec![
        Act::Respond(200, "application/json", common::SHOW.to_vec()),
        Act::Hang,
    ])
}

/// Waits until the fake has seen `n` requests (the chat is under way).
fn wait_requests(fake: &common::Fake, n: usize) {
    let started = Instant::now();
    while fake.requests.lock().unwrap().len() < n {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no request came"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// The exit code within 10 s of the signal, and how long it took.
fn ended(child: &mut Child) -> (Option<i32>, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("still running 10 s after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn last_event(transcript: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(transcript).unwrap();
    let last = text.lines().last().expect("an empty transcript");
    serde_json::from_str(last).unwrap()
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("toolloop-signals-{name}-{}", std::process::id()))
}

#[test]
fn ctrl_c_during_ask_stops_the_run_closes_its_transcript_and_exits_130() {
    for sig in ["INT", "TERM"] {
        let model = hanging_model();
        let transcript = temp(&format!("ask-{sig}.jsonl"));
        let _ = std::fs::remove_file(&transcript);
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args([
                "ask",
                "hello",
                "--no-tools",
                "--timeout",
                "60",
                "--ollama-host",
            ])
            .arg(&model.url)
            .arg("--transcript")
            .arg(&transcript)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_requests(&model, 2);
        signal(&child, sig);
        let (code, took) = ended(&mut child);
        let mut stderr = String::new();
        let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr);
        assert_eq!(code, Some(130), "SIG{sig}: {stderr}");
        assert!(took < Duration::from_secs(5), "SIG{sig}: {took:?}");
        let last = last_event(&transcript);
        assert_eq!(last["event"], "stopped", "SIG{sig}: {last}");
        assert_eq!(last["stop_reason"], "cancelled", "SIG{sig}: {last}");
        let _ = std::fs::remove_file(&transcript);
    }
}

#[test]
fn sigterm_during_a_chat_run_ends_the_chat_with_its_transcript_closed() {
    let model = hanging_model();
    let transcript = temp("chat.jsonl");
    let _ = std::fs::remove_file(&transcript);
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args(["chat", "--no-tools", "--timeout", "60", "--ollama-host"])
        .arg(&model.url)
        .arg("--transcript")
        .arg(&transcript)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.as_mut().unwrap().write_all(b"hello\n").unwrap();
    wait_requests(&model, 2);
    signal(&child, "TERM");
    let (code, took) = ended(&mut child);
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(last_event(&transcript)["event"], "stopped");
    let _ = std::fs::remove_file(&transcript);
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn a_signal_during_an_mcp_call_ends_the_mcp_server_too() {
    for sig in ["INT", "TERM"] {
        let call = r#"{"kind":"tool_call","thought":"","tool":"slow","arguments":{}}"#;
        let model = serve(vec![
            Act::Respond(200, "application/json", common::SHOW.to_vec()),
            common::ollama_reply(call),
        ]);
        // The marker (an argument the fake ignores) finds the server's process afterwards.
        let marker = format!("toolloop-signal-{sig}-{}", std::process::id());
        let mcp = format!(
            "python3 {}/tests/fake_mcp.py hang_on_call {marker}",
            env!("CARGO_MANIFEST_DIR")
        );
        let transcript = temp(&format!("mcp-{sig}.jsonl"));
        let _ = std::fs::remove_file(&transcript);
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args(["ask", "Run slow", "--timeout", "60", "--mcp", &mcp])
            .args(["--ollama-host", &model.url, "--transcript"])
            .arg(&transcript)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The call is under way once the transcript shows it.
        let started = Instant::now();
        while !std::fs::read_to_string(&transcript)
            .unwrap_or_default()
            .contains("\"tool_call\"")
        {
            assert!(started.elapsed() < Duration::from_secs(20), "no call came");
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(&child, sig);
        let (code, took) = ended(&mut child);
        assert_eq!(code, Some(130), "SIG{sig}");
        assert!(took < Duration::from_secs(5), "SIG{sig}: {took:?}");
        assert_eq!(last_event(&transcript)["event"], "stopped", "SIG{sig}");
        let left = Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        assert!(left.trim().is_empty(), "SIG{sig}: left running: {left}");
        let _ = std::fs::remove_file(&transcript);
    }
}
