//! The MCP client against real MCP servers: `@modelcontextprotocol/server-everything`
//! (npm) over stdio and a server built on the Python `mcp` package over Streamable HTTP,
//! both installed by `scripts/mcp-servers.sh`; plus a misbehaving stdio server
//! (`tests/fake_mcp.py`) for the faults. The tests that need Node or Python are ignored
//! in a plain `cargo test`, which counts them and says what they need;
//! `scripts/test-all.sh` installs it and runs them.

mod common;

use common::Killer;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use toolloop::Deadline;
use toolloop::tools::McpTools;
use toolloop::tools::{Catalogue, ToolError, ToolSource};

fn cache() -> PathBuf {
    std::env::var_os("TOOLLOOP_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/toolloop")
        })
}

/// A real server these tests were asked to run against is not installed.
fn missing(what: &str) -> Option<String> {
    panic!("{what} is not installed: run scripts/test-all.sh (or scripts/mcp-servers.sh)");
}

fn everything() -> Option<String> {
    if let Ok(cmd) = std::env::var("TOOLLOOP_MCP_EVERYTHING") {
        return Some(cmd);
    }
    let entry =
        cache().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if entry.is_file() {
        return Some(format!("node {} stdio", entry.display()));
    }
    missing("@modelcontextprotocol/server-everything")
}

fn mcp_python() -> Option<String> {
    if let Ok(p) = std::env::var("TOOLLOOP_MCP_PYTHON") {
        return Some(p);
    }
    let p = cache().join("mcp-venv/bin/python");
    if p.is_file() {
        return Some(p.display().to_string());
    }
    missing("the Python mcp package")
}

fn fake(mode: &str) -> String {
    format!(
        "python3 {}/tests/fake_mcp.py {mode}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn soon() -> Deadline {
    Deadline::after(Duration::from_secs(30))
}

#[test]
#[ignore = "needs Node and @modelcontextprotocol/server-everything: run scripts/test-all.sh"]
fn server_everything_over_stdio() {
    let Some(cmd) = everything() else { return };
    let server = McpTools::connect(&cmd, soon()).unwrap();
    let tools = Catalogue::load(vec![Box::new(server)], soon()).unwrap();
    let names = tools.names();
    assert!(names.contains(&"echo".to_string()), "{names:?}");
    assert!(names.contains(&"get-sum".to_string()), "{names:?}");
    // Its annotations say which tools only read: those may start early.
    assert!(tools.get("echo").unwrap().read_only());
    assert!(tools.get("get-sum").unwrap().read_only());
    if let Ok(toggle) = tools.get("toggle-simulated-logging") {
        assert!(!toggle.read_only(), "readOnlyHint: false");
    }
    let r = tools
        .call("echo", &args(json!({"message": "hello"})), soon())
        .unwrap();
    assert!(r.ok);
    assert!(r.to_model_text(1000).contains("hello"), "{r:?}");
    let r = tools
        .call("get-sum", &args(json!({"a": 2, "b": 40})), soon())
        .unwrap();
    assert!(r.to_model_text(1000).contains("42"), "{r:?}");
    // The catalogue checks arguments against the server's own schema.
    let err = tools
        .call("get-sum", &args(json!({"a": "two"})), soon())
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
}

#[test]
#[ignore = "needs Node and @modelcontextprotocol/server-everything: run scripts/test-all.sh"]
fn server_everything_unknown_tool_comes_back_as_a_tool_error() {
    let Some(cmd) = everything() else { return };
    let server = McpTools::connect(&cmd, soon()).unwrap();
    // Past the catalogue, straight to the server: it answers -32602 or isError.
    let r = server.call("no-such-tool", &Map::new(), soon()).unwrap();
    assert!(!r.ok);
    assert!(r.error.unwrap().to_lowercase().contains("no-such-tool"));
}

fn python_http_server(json_mode: bool) -> Option<(Killer, String)> {
    let python = mcp_python()?;
    let port = common::free_port();
    let mut cmd = Command::new(python);
    cmd.arg(format!(
        "{}/tests/mcp_http_server.py",
        env!("CARGO_MANIFEST_DIR")
    ))
    .arg(port.to_string());
    if json_mode {
        cmd.arg("json");
    }
    let mut child = Killer(cmd.spawn().unwrap());
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("the Python MCP server exited: {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the Python MCP server did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some((child, format!("http://127.0.0.1:{port}/mcp")))
}

fn python_server_round_trip(json_mode: bool) {
    let Some((_server, url)) = python_http_server(json_mode) else {
        return;
    };
    let client = McpTools::connect(&url, soon()).unwrap();
    let tools = Catalogue::load(vec![Box::new(client)], soon()).unwrap();
    assert_eq!(tools.names(), ["add", "fail", "greet", "nap"]);
    let r = tools
        .call("add", &args(json!({"a": 2, "b": 3})), soon())
        .unwrap();
    assert!(r.ok, "{r:?}");
    assert!(r.to_model_text(100).contains('5'), "{r:?}");
    let r = tools
        .call("greet", &args(json!({"name": "Ada"})), soon())
        .unwrap();
    assert!(r.to_model_text(100).contains("Hello, Ada!"), "{r:?}");
    let r = tools
        .call("fail", &args(json!({"reason": "out of paper"})), soon())
        .unwrap();
    // isError: true comes back as a tool error (this SDK hides the exception's text).
    assert!(!r.ok);
    assert!(
        r.to_model_text(200)
            .starts_with("error: Error executing tool fail"),
        "{r:?}"
    );
}

#[test]
#[ignore = "needs Python's mcp package: run scripts/test-all.sh"]
fn python_mcp_server_over_streamable_http_with_sse() {
    python_server_round_trip(false);
}

#[test]
#[ignore = "needs Python's mcp package: run scripts/test-all.sh"]
fn python_mcp_server_over_streamable_http_with_json() {
    python_server_round_trip(true);
}

#[test]
fn unreachable_http_server_names_the_url() {
    let url = format!(
        "http://{}/mcp",
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    );
    // The listener is dropped at the end of the statement above: nothing listens.
    let err = McpTools::connect(&url, soon()).unwrap_err();
    assert!(matches!(err, ToolError::Unreachable { .. }), "{err}");
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn a_server_that_exits_at_start_shows_its_stderr() {
    let err = McpTools::connect(&fake("exit_at_start"), soon()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ToolError::Exited { .. }), "{text}");
    assert!(text.contains("missing API_TOKEN"), "{text}");
}

#[test]
fn a_command_that_does_not_exist() {
    let err = McpTools::connect("/nonexistent/mcp-server --stdio", soon()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot start MCP server `/nonexistent/mcp-server --stdio`"),
        "{err}"
    );
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn a_crash_mid_call_is_an_exited_error() {
    let s = McpTools::connect(&fake("crash_on_call"), soon()).unwrap();
    let err = s
        .call("echo", &args(json!({"text": "x"})), soon())
        .unwrap_err();
    assert!(matches!(err, ToolError::Exited { .. }), "{err}");
    assert!(err.to_string().contains("index out of range"), "{err}");
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn a_server_that_never_answers_is_cut_by_the_deadline() {
    let mut s = McpTools::connect(&fake("hang_on_call"), soon()).unwrap();
    let started = Instant::now();
    let err = s
        .call(
            "echo",
            &Map::new(),
            Deadline::after(Duration::from_millis(500)),
        )
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_millis(1000));
    // Shutting down a hung server ends the process: close stdin, wait, kill.
    let started = Instant::now();
    s.shutdown();
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn a_server_that_never_answers_initialize_is_cut_by_the_deadline() {
    let started = Instant::now();
    let connected = McpTools::connect(
        &fake("silent_init"),
        Deadline::after(Duration::from_millis(800)),
    );
    let Err(err) = connected else {
        panic!("no connection without an answer to initialize");
    };
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(
        text.contains("fake_mcp.py"),
        "the message names the server: {text}"
    );
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn an_answer_with_another_calls_id_is_not_taken_for_this_call() {
    let s = McpTools::connect(&fake("wrong_id"), soon()).unwrap();
    // `echo` gets only an answer under another id: it waits for its own until the deadline.
    let err = s
        .call(
            "echo",
            &args(json!({"text": "x"})),
            Deadline::after(Duration::from_millis(600)),
        )
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    // `slow` gets the stray answer, then its own: its own is the result.
    let r = s.call("slow", &Map::new(), soon()).unwrap();
    assert_eq!(r.to_model_text(100), "");
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn a_flood_of_notifications_during_a_call_is_read_past() {
    let s = McpTools::connect(&fake("notify_flood"), soon()).unwrap();
    let started = Instant::now();
    let r = s
        .call("echo", &args(json!({"text": "after the flood"})), soon())
        .unwrap();
    assert_eq!(r.to_model_text(100), "after the flood");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn garbage_lines_and_notifications_on_stdout_are_skipped() {
    let s = McpTools::connect(&fake("garbage"), soon()).unwrap();
    let r = s
        .call("echo", &args(json!({"text": "still works"})), soon())
        .unwrap();
    assert_eq!(r.to_model_text(100), "still works");
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn heavy_stderr_does_not_block_the_server() {
    let s = McpTools::connect(&fake("stderr_flood"), soon()).unwrap();
    for _ in 0..3 {
        let r = s
            .call("echo", &args(json!({"text": "ok"})), soon())
            .unwrap();
        assert_eq!(r.to_model_text(100), "ok");
    }
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn tool_lists_are_followed_across_pages() {
    let mut s = McpTools::connect(&fake("paginate"), soon()).unwrap();
    let names: Vec<String> = s
        .list(soon())
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["echo", "slow"]);
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn a_ping_from_the_server_is_answered() {
    let s = McpTools::connect(&fake("ping_first"), soon()).unwrap();
    let r = s
        .call("echo", &args(json!({"text": "pong"})), soon())
        .unwrap();
    assert_eq!(r.to_model_text(100), "pong");
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn json_rpc_invalid_params_is_a_tool_error_for_the_model() {
    let s = McpTools::connect(&fake("unknown_tool_error"), soon()).unwrap();
    let r = s.call("echo", &Map::new(), soon()).unwrap();
    assert_eq!(r.to_model_text(100), "error: Unknown tool: echo");
}

#[test]
#[ignore = "needs python3 for tests/fake_mcp.py: run scripts/test-all.sh"]
fn the_process_is_gone_after_shutdown() {
    let mut s = McpTools::connect(&fake("ok"), soon()).unwrap();
    s.shutdown();
    let err = s.call("echo", &Map::new(), soon()).unwrap_err();
    assert!(matches!(err, ToolError::Exited { .. }), "{err}");
}

/// The calls of one turn, sent without waiting for each other over one session: three
/// 1-second operations take about a second, not three, and each reply reaches its own
/// caller.
fn overlapping_calls(tools: Catalogue, slow: (&str, Value), quick: Option<(&str, &str)>) {
    let tools = std::sync::Arc::new(tools);
    let calls: Vec<(String, Map<String, Value>)> = (0..3)
        .map(|_| (slow.0.to_string(), args(slow.1.clone())))
        .collect();
    let started = Instant::now();
    let results = tools.call_all(&calls, soon());
    let took = started.elapsed();
    for (r, _) in &results {
        assert!(r.as_ref().is_ok_and(|r| r.ok), "{r:?}");
    }
    assert!(
        took < Duration::from_millis(2500),
        "three 1 s calls took {took:?}"
    );
    if let Some((tool, field)) = quick {
        let calls: Vec<(String, Map<String, Value>)> = (0..8)
            .map(|i| {
                (
                    tool.to_string(),
                    args(json!({ field: format!("message {i}") })),
                )
            })
            .collect();
        let results = tools.call_all(&calls, soon());
        for (i, (r, _)) in results.iter().enumerate() {
            let text = r.as_ref().unwrap().to_model_text(200);
            assert!(
                text.contains(&format!("message {i}")),
                "call {i} got {text}"
            );
        }
    }
}

#[test]
#[ignore = "needs Node and @modelcontextprotocol/server-everything: run scripts/test-all.sh"]
fn calls_to_one_stdio_server_overlap_and_each_reply_finds_its_call() {
    let Some(cmd) = everything() else { return };
    let server = McpTools::connect(&cmd, soon()).unwrap();
    let tools = Catalogue::load(vec![Box::new(server)], soon()).unwrap();
    let slow = json!({"duration": 1, "steps": 1});
    overlapping_calls(
        tools,
        ("trigger-long-running-operation", slow),
        Some(("echo", "message")),
    );
}

#[test]
#[ignore = "needs Python's mcp package: run scripts/test-all.sh"]
fn calls_to_one_streamable_http_server_overlap() {
    let Some((_server, url)) = python_http_server(false) else {
        return;
    };
    let client = McpTools::connect(&url, soon()).unwrap();
    let tools = Catalogue::load(vec![Box::new(client)], soon()).unwrap();
    overlapping_calls(
        tools,
        ("nap", json!({"seconds": 1})),
        Some(("greet", "name")),
    );
}

/// A Streamable HTTP server that answers the handshake, then answers the call with an event stream that never ends: a keep-alive comment and a progress
/// notification every 50 ms, never the result.
fn endless_sse_server() -> common::Fake {
    use common::Act;
    let json = |v: Value| Act::Respond(200, "application/json", v.to_string().into_bytes());
    let init = json(json!({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}}, "serverInfo": {"name": "endless", "version": "1"}}}));
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": 1, "progress": 1}});
    let chunk = format!(": keep-alive\n\ndata: {progress}\n\n").into_bytes();
    let endless = Act::Stream(
        "text/event-stream",
        vec![chunk; 100_000],
        Duration::from_millis(50),
    );
    common::serve(vec![
        init,
        Act::Respond(202, "application/json", Vec::new()),
        endless,
    ])
}

#[test]
fn an_event_stream_that_never_ends_is_cut_at_the_deadline_and_closed() {
    let fake = endless_sse_server();
    let url = format!("{}/mcp", fake.url);
    let tools = McpTools::connect(&url, soon()).unwrap();
    let started = Instant::now();
    let err = tools
        .call(
            "echo",
            &Map::new(),
            Deadline::after(Duration::from_millis(700)),
        )
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    // The message names the server and the fault.
    let text = err.to_string();
    assert!(text.contains(&url) && text.contains("deadline"), "{text}");
    // The stream is let go: the server's next write finds the connection closed.
    let gone = Instant::now();
    while fake.cut.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            gone.elapsed() < Duration::from_secs(3),
            "the stream is still read"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
