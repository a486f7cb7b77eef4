//! The README cannot rot: every `toolloop` command in its `sh` blocks is run here, against
//! fake servers standing in for Ollama and an OpenAI-compatible server, the real MCP
//! servers (an ignored test: `scripts/test-all.sh` installs them), and the real built-in
//! tool server. `cargo` commands are run
//! by `.ci/run`; `ollama` and `scripts/` lines need what this machine cannot have or are
//! run by `.ci/run` too. The library code is `examples/library.rs`, which is built and run.

mod common;
use common::{Killer, free_port};

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

/// The contents of every fenced block of `lang`.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match &mut cur {
            None if line.trim() == format!("```{lang}") => cur = Some(String::new()),
            Some(b) if line.trim() == "```" => {
                out.push(std::mem::take(b));
                cur = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    out
}

fn cache() -> PathBuf {
    std::env::var_os("TOOLLOOP_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/toolloop")
        })
}

#[test]
fn every_toolloop_command_in_the_readme_runs() {
    readme_commands(false);
}

#[test]
#[ignore = "needs Node and Python for the MCP servers: run scripts/test-all.sh"]
fn every_mcp_command_in_the_readme_runs() {
    readme_commands(true);
}

/// Runs the README's `toolloop` commands: those with `--mcp` when `mcp`, else the others.
fn readme_commands(mcp: bool) {
    let answer = serde_json::json!({"message": {"role": "assistant",
        "content": r#"{"kind":"final_answer","thought":"","content":"ok"}"#}, "done": false});
    let done = r#"{"message":{"content":""},"done":true,"done_reason":"stop"}"#;
    let ollama = common::serve(vec![
        common::Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
        common::Act::Respond(
            200,
            "application/x-ndjson",
            format!("{answer}\n{done}\n").into_bytes(),
        ),
    ]);
    let openai = common::serve(vec![common::Act::Respond(
        200,
        "application/json",
        serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": r#"{"kind":"final_answer","thought":"","content":"5928"}"#}}]})
        .to_string()
        .into_bytes(),
    )]);
    let everything =
        cache().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let python = cache().join("mcp-venv/bin/python");
    if mcp && !(everything.is_file() && python.is_file()) {
        panic!("the MCP servers are not installed: run scripts/test-all.sh");
    }
    let mut _mcp_http = None;
    let mcp_port = free_port();
    if mcp {
        _mcp_http = Some(Killer(
            Command::new(&python)
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/mcp_http_server.py"
                ))
                .arg(mcp_port.to_string())
                .spawn()
                .unwrap(),
        ));
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", mcp_port)).is_err() {
            assert!(started.elapsed() < std::time::Duration::from_secs(30));
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    let tools_port = free_port();
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_toolloop"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let calibration = std::env::temp_dir().join(format!(
        "toolloop-readme-calibration-{}.json",
        std::process::id()
    ));
    let mut ran = 0;
    for block in blocks(&readme(), "sh") {
        let mut script = String::from("set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n");
        let mut any = false;
        for line in block.lines() {
            let line = line.split("      #").next().unwrap().trim_end();
            let runs_toolloop = line.starts_with("toolloop ") || line.contains("| toolloop ");
            if !runs_toolloop {
                continue;
            }
            if line.contains("--mcp") != mcp {
                continue;
            }
            let mut cmd = line
                .replace("127.0.0.1:5000", &format!("127.0.0.1:{tools_port}"))
                .replace("http://127.0.0.1:8080/v1", &format!("{}/v1", openai.url))
                .replace(
                    "http://127.0.0.1:8000/mcp",
                    &format!("http://127.0.0.1:{mcp_port}/mcp"),
                )
                .replace(
                    "~/.cache/toolloop/bfcl",
                    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bfcl"),
                )
                .replace(
                    "npx -y @modelcontextprotocol/server-everything",
                    &format!("node {} stdio", everything.display()),
                );
            if cmd.starts_with("toolloop calibrate") {
                // The fake server reports no log-probabilities, so there is nothing to
                // measure: the command must run its flags and say that nothing was saved.
                cmd = format!("{cmd} 2>&1 | grep -q 'nothing was saved'");
            }
            if cmd.starts_with("toolloop chat") {
                cmd.push_str(" <<< /exit");
            }
            if cmd.starts_with("toolloop web") {
                // Served in the background on a free port; the page must come back.
                let port = free_port();
                cmd = format!(
                    "{cmd} --addr 127.0.0.1:{port} &\n\
                     for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done\n\
                     exec 3<>/dev/tcp/127.0.0.1/{port}\n\
                     printf 'GET / HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\nConnection: close\\r\\n\\r\\n' >&3\n\
                     grep -q '<title>toolloop</title>' <&3"
                );
            }
            if cmd.starts_with("toolloop proxy") {
                // Served in the background on a free port; a request must get its answer
                // in the client's shape.
                let port = free_port();
                let flags = cmd.split('#').next().unwrap_or_default().trim().to_string();
                cmd = format!(
                    "{flags} --addr 127.0.0.1:{port} &\n\
                     for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done\n\
                     exec 3<>/dev/tcp/127.0.0.1/{port}\n\
                     printf 'POST /v1/chat/completions HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\nContent-Length: 1\\r\\nConnection: close\\r\\n\\r\\n{{' >&3\n\
                     grep -q 'invalid_request_error' <&3"
                );
            }
            script.push_str(&cmd);
            script.push('\n');
            if cmd.ends_with('&') {
                script.push_str(&format!(
                    "for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/{tools_port}) 2>/dev/null && break; sleep 0.1; done\n"
                ));
            }
            any = true;
            ran += 1;
        }
        if !any {
            continue;
        }
        let mut child = Command::new("bash")
            .env("PATH", &path)
            .env("OLLAMA_HOST", &ollama.url)
            // Never the person's own calibration file, for reading or writing.
            .env("TOOLLOOP_CALIBRATION", &calibration)
            .env("TOOLLOOP_TOOLS", format!("http://127.0.0.1:{tools_port}"))
            .env_remove("TOOLLOOP_MODEL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a README block failed:\n{script}\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let least = if mcp { 1 } else { 8 };
    assert!(ran >= least, "only {ran} README commands found");
}

#[test]
fn the_library_code_is_the_example_that_is_built_and_run() {
    let snippet = blocks(&readme(), "rust").remove(0);
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/library.rs"))
            .unwrap();
    let code = &example[example.find("use serde::Deserialize;").unwrap()..];
    assert_eq!(
        snippet, code,
        "the README's library code is not examples/library.rs"
    );
    // And it says what the program's Cargo.toml needs.
    let readme = readme();
    assert!(
        readme.contains("`toolloop = { path = \"../toolloop\" }` and `serde` (with `derive`)"),
        "the README no longer says which dependencies the example needs"
    );
}

/// `examples/library.rs`, built by `cargo test` as every example is, against a stand-in
/// for Ollama: the model calls the Rust function, then answers from its result.
#[test]
fn the_library_example_runs() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_toolloop"))
        .parent()
        .unwrap()
        .join("examples/library");
    let ollama = common::fake_ollama(&[
        r#"{"kind":"tool_call","thought":"","tool":"order_status","arguments":{"id":7}}"#,
        r#"{"kind":"final_answer","thought":"","content":"Order 7 has shipped."}"#,
    ]);
    let out = Command::new(&exe)
        .arg("Where is order 7?")
        .env("OLLAMA_HOST", &ollama.url)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Order 7 has shipped.\n"
    );
    let asked = ollama.requests.lock().unwrap().join("\n");
    assert!(
        asked.contains("order 7 has shipped"),
        "the tool's result reached the model"
    );
}

/// The README's table of checks names every check with its default (and the model
/// families it is off for), and nothing else.
#[test]
fn the_readmes_checks_are_the_declared_ones() {
    let readme = readme();
    let mut rows: Vec<(String, String)> = readme
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let default = *cells.get(2)?;
            (default == "off" || default.starts_with("on"))
                .then(|| (name.to_string(), default.to_string()))
        })
        .collect();
    let mut declared: Vec<(String, String)> = toolloop::checks::all()
        .map(|c| {
            // The families a default is off for, named as a person writes them.
            let d = match (c.default_on, c.off_for) {
                (false, _) => "off".to_string(),
                (true, []) => "on".to_string(),
                (true, families) => {
                    let named: Vec<String> = families
                        .iter()
                        .map(|f| f[..1].to_uppercase() + &f[1..])
                        .collect();
                    format!("on (off for {})", named.join(", "))
                }
            };
            (c.name.to_string(), d)
        })
        .collect();
    rows.sort();
    declared.sort();
    assert_eq!(rows, declared);
}

/// `examples/offline.rs` needs no server: the scripted model's call runs the Rust
/// function and the answer comes back.
#[test]
fn the_offline_example_runs_with_no_server() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_toolloop"))
        .parent()
        .unwrap()
        .join("examples/offline");
    let out = Command::new(&exe)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Order 7 has shipped.\n"
    );
}

/// With nothing listening, the library example prints the message a person reads (what
/// is down and how to start it), not a Debug dump of the error.
#[test]
fn the_library_example_says_what_to_do_when_ollama_is_down() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_toolloop"))
        .parent()
        .unwrap()
        .join("examples/library");
    let out = Command::new(&exe)
        .env("OLLAMA_HOST", "http://127.0.0.1:1")
        .env_remove("TOOLLOOP_BASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: Ollama is not running at http://127.0.0.1:1"),
        "{stderr}"
    );
    assert!(!stderr.contains("Backend {"), "{stderr}");
}

/// `TOOLLOOP_BASE_URL` points the library example at an OpenAI-compatible server.
#[test]
fn the_library_example_runs_against_an_openai_compatible_server() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_toolloop"))
        .parent()
        .unwrap()
        .join("examples/library");
    // Every request (the model list, the chat) gets this one reply, as in the commands above.
    let server = common::serve(vec![common::Act::Respond(
        200,
        "application/json",
        serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": r#"{"kind":"final_answer","thought":"","content":"50"}"#}}]})
        .to_string()
        .into_bytes(),
    )]);
    let out = Command::new(&exe)
        .arg("How much is 12.5 * 4?")
        .env("TOOLLOOP_BASE_URL", format!("{}/v1", server.url))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "50\n");
}
