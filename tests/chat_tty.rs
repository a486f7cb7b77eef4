//! toolloop in a real terminal (tmux), as a person sees it: `chat` typed at the prompt
//! with a clarifying question answered in the middle, colour and `NO_COLOR`, and the
//! spinner while a slow model thinks. Needs tmux, so the tests are ignored in a plain
//! `cargo test`, which counts them; `scripts/test-all.sh` installs tmux and runs them.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached session `chat` of `cols` x `rows` running `command`, on a tmux server
    /// of its own (`name` and the test's pid), so tests never share one.
    fn start(name: &str, command: &str, cols: u16, rows: u16) -> Tmux {
        let tmux = Tmux {
            socket: format!("toolloop-{name}-{}", std::process::id()),
        };
        let (x, y) = (cols.to_string(), rows.to_string());
        let out = tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            "chat",
            "-x",
            &x,
            "-y",
            &y,
            command,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .cmd(&["capture-pane", "-p", "-t", "chat", "-S", "-200"])
                .stdout,
        )
        .into_owned()
    }

    fn wait_for(&self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "waited for {text:?}; the screen shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn type_line(&self, line: &str) {
        self.cmd(&["send-keys", "-t", "chat", "-l", line]);
        self.cmd(&["send-keys", "-t", "chat", "Enter"]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// Whether tmux is here: the tests were asked to run, so it must be.
fn have_tmux() -> bool {
    let here = Command::new("tmux").arg("-V").output().is_ok();
    assert!(here, "tmux is not installed: run scripts/test-all.sh");
    here
}

use common::ollama_reply as reply;

#[test]
#[ignore = "needs tmux: run scripts/test-all.sh"]
fn chat_in_a_terminal_with_a_clarify_in_the_middle() {
    if !have_tmux() {
        return;
    }
    let fake = common::serve(vec![
        common::Act::Respond(
            200,
            "application/json",
            br#"{"capabilities":["completion"]}"#.to_vec(),
        ),
        reply(
            r#"{"kind":"clarify","thought":"","question":"Which city?","missing_params":["city"]}"#,
        ),
        reply(
            r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Tokyo"}}"#,
        ),
        reply(
            r#"{"kind":"final_answer","thought":"","content":"It is 18 °C and sunny in Tokyo."}"#,
        ),
        reply(r#"{"kind":"final_answer","thought":"","content":"You asked about Tokyo."}"#),
    ]);
    let command = format!(
        "{} chat --ollama-host {} --builtin --demo",
        env!("CARGO_BIN_EXE_toolloop"),
        fake.url
    );
    let tmux = Tmux::start("chat", &command, 160, 50);

    tmux.wait_for("you>");
    tmux.type_line("What's the weather?");
    tmux.wait_for("? Which city? (missing: city)");
    tmux.wait_for("answer>");
    tmux.type_line("Tokyo");
    let screen = tmux.wait_for("It is 18 °C and sunny in Tokyo.");
    assert!(screen.contains("[Tool Call: get_weather]"), "{screen}");

    // The conversation remembers the first exchange.
    tmux.type_line("Which city did I ask about?");
    tmux.wait_for("You asked about Tokyo.");
    tmux.type_line("/tools");
    tmux.wait_for("get_weather(city: string)");
    tmux.type_line("/exit");
    let started = Instant::now();
    while tmux.cmd(&["has-session", "-t", "chat"]).status.success() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "chat did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let requests = fake.requests.lock().unwrap();
    // Request 3 carried the person's answer; request 5 carried the whole first exchange.
    assert!(
        requests[2].contains(r#"{"role":"user","content":"Tokyo"}"#),
        "{}",
        requests[2]
    );
    assert!(
        requests[4].contains("It is 18 °C and sunny in Tokyo."),
        "{}",
        requests[4]
    );
}

#[test]
#[ignore = "needs tmux: run scripts/test-all.sh"]
fn colour_on_a_terminal_and_never_with_no_color() {
    if !have_tmux() {
        return;
    }
    for (env, want_colour) in [("", true), ("NO_COLOR=1 ", false)] {
        let command = format!("env {env}{} demo; sleep 30", env!("CARGO_BIN_EXE_toolloop"));
        let tmux = Tmux::start(&format!("colour-{want_colour}"), &command, 160, 50);
        tmux.wait_for("64.4 °F.");
        let raw =
            String::from_utf8_lossy(&tmux.cmd(&["capture-pane", "-p", "-e", "-t", "chat"]).stdout)
                .into_owned();
        assert_eq!(raw.contains("\u{1b}["), want_colour, "env {env:?}:\n{raw}");
    }
}

#[test]
#[ignore = "needs tmux: run scripts/test-all.sh"]
fn the_spinner_shows_while_a_slow_model_thinks() {
    if !have_tmux() {
        return;
    }
    // A model that takes its time: each streamed piece of the reply after a pause.
    let piece = |content: &str| {
        format!(
            "{}\n",
            serde_json::json!({"message": {"role": "assistant", "content": content}, "done": false})
        )
        .into_bytes()
    };
    let ollama = common::serve(vec![
        common::Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
        common::Act::Stream(
            "application/x-ndjson",
            vec![
                piece(r#"{"kind":"final_answer","thought":"","#),
                piece(r#""content":"Slow but "#),
                piece(r#"sure."}"#),
                br#"{"message":{"content":""},"done":true,"done_reason":"stop"}"#.to_vec(),
            ],
            Duration::from_millis(1200),
        ),
    ]);
    let command = format!(
        "{} ask 'Take your time' --no-tools --ollama-host {}; sleep 30",
        env!("CARGO_BIN_EXE_toolloop"),
        ollama.url
    );
    let tmux = Tmux::start("spinner", &command, 120, 20);
    // Before the first piece: thinking, with the time elapsed.
    let screen = tmux.wait_for("model is thinking (step 1)");
    assert!(
        screen
            .lines()
            .any(|l| l.contains("model is thinking (step 1) ") && l.trim_end().ends_with('s')),
        "no elapsed time on the spinner line:\n{screen}"
    );
    // While pieces arrive: how much has been written.
    tmux.wait_for("model is writing (");
    // Then the answer, and the spinner is gone.
    let screen = tmux.wait_for("Slow but sure.");
    assert!(!screen.contains("model is"), "{screen}");
}

/// Ctrl-C while the model writes stops that run, not the chat: the prompt comes back,
/// the conversation goes on, and /exit leaves as usual.
#[test]
#[ignore = "needs tmux: run scripts/test-all.sh"]
fn ctrl_c_while_the_model_writes_stops_the_run_and_keeps_the_chat() {
    have_tmux();
    let piece = |content: &str| {
        format!(
            "{}\n",
            serde_json::json!({"message": {"role": "assistant", "content": content}, "done": false})
        )
        .into_bytes()
    };
    let mut slow = vec![piece(r#"{"kind":"final_answer","thought":""#)];
    slow.extend((0..30).map(|_| piece(" and on")));
    let ollama = common::serve(vec![
        common::Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
        common::Act::Stream("application/x-ndjson", slow, Duration::from_millis(500)),
    ]);
    let command = format!(
        "{} chat --no-tools --ollama-host {}; echo chat-ended-$?; sleep 30",
        env!("CARGO_BIN_EXE_toolloop"),
        ollama.url
    );
    let tmux = Tmux::start("ctrlc", &command, 120, 30);
    tmux.wait_for("you>");
    tmux.type_line("Tell me a long story");
    tmux.wait_for("model is writing (");
    let pressed = Instant::now();
    tmux.cmd(&["send-keys", "-t", "chat", "C-c"]);
    let screen = tmux.wait_for("stopped before an answer");
    assert!(pressed.elapsed() < Duration::from_secs(3), "{screen}");
    assert!(!screen.contains("chat-ended"), "the chat ended:\n{screen}");
    // The prompt is back: the chat goes on, and /exit leaves it.
    let prompts = |s: &str| s.matches("you>").count();
    let started = Instant::now();
    while prompts(&tmux.screen()) < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux.type_line("/exit");
    tmux.wait_for("chat-ended-0");
}

/// Ctrl-C while the model has sent nothing yet (a server reading a long prompt): the
/// request is cut off and the prompt is back at once, not at the deadline.
#[test]
#[ignore = "needs tmux: run scripts/test-all.sh"]
fn ctrl_c_while_the_model_has_sent_nothing_stops_the_run_at_once() {
    have_tmux();
    let ollama = common::serve(vec![
        common::Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
        common::Act::Hang,
    ]);
    let command = format!(
        "{} chat --no-tools --timeout 60 --ollama-host {}; echo chat-ended-$?; sleep 30",
        env!("CARGO_BIN_EXE_toolloop"),
        ollama.url
    );
    let tmux = Tmux::start("ctrlc-pending", &command, 120, 30);
    tmux.wait_for("you>");
    tmux.type_line("Tell me a long story");
    tmux.wait_for("model is thinking (");
    std::thread::sleep(Duration::from_millis(500));
    let pressed = Instant::now();
    tmux.cmd(&["send-keys", "-t", "chat", "C-c"]);
    let screen = tmux.wait_for("stopped before an answer");
    assert!(pressed.elapsed() < Duration::from_secs(3), "{screen}");
    assert!(!screen.contains("chat-ended"), "the chat ended:\n{screen}");
    tmux.type_line("/exit");
    tmux.wait_for("chat-ended-0");
}

/// A call of a tool that may change things asks at the terminal, naming the flag the
/// person never turned on: Ctrl-C is no, and the chat goes on; "w" runs it without that
/// flag.
#[test]
#[ignore = "needs tmux: run scripts/test-all.sh"]
fn a_call_that_writes_asks_at_the_terminal_and_ctrl_c_is_no() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    if !have_tmux() {
        return;
    }
    let deleted = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&deleted);
    let mut tools = toolloop::tools::FnTools::new();
    tools.add(
        toolloop::tools::ToolSpec::new(
            "delete_all",
            "Delete every record",
            serde_json::json!({"type": "object", "properties": {"force": {"type": "boolean"}}}),
        ),
        move |args| {
            // Counted only when it ran without the flag nobody asked for.
            if !args.contains_key("force") {
                d.fetch_add(1, Ordering::SeqCst);
            }
            Ok(serde_json::json!("deleted"))
        },
    );
    let server = toolloop::serve::ToolServer::bind("127.0.0.1:0", Box::new(tools))
        .unwrap()
        .spawn();
    let call =
        r#"{"kind":"tool_call","thought":"","tool":"delete_all","arguments":{"force":true}}"#;
    let fake = common::serve(vec![
        common::Act::Respond(
            200,
            "application/json",
            br#"{"capabilities":["completion"]}"#.to_vec(),
        ),
        reply(call),
        reply(r#"{"kind":"final_answer","thought":"","content":"Nothing was deleted."}"#),
        reply(call),
        reply(r#"{"kind":"final_answer","thought":"","content":"Everything is deleted."}"#),
    ]);
    let command = format!(
        "env TOOLLOOP_PERMISSIONS=/nonexistent/toolloop-permissions.json {} chat --ollama-host {} --tools {}",
        env!("CARGO_BIN_EXE_toolloop"),
        fake.url,
        server.url()
    );
    let tmux = Tmux::start("approve", &command, 160, 50);
    tmux.wait_for("you>");
    tmux.type_line("Delete everything");
    let screen =
        tmux.wait_for("run it? [y]es, [n]o, [a]lways delete_all in this run, [w]ithout force:");
    assert!(screen.contains("delete_all (destructive;"), "{screen}");
    assert!(screen.contains("\"force\": true"), "{screen}");
    assert!(screen.contains("not in what you wrote: force"), "{screen}");
    tmux.cmd(&["send-keys", "-t", "chat", "C-c"]);
    tmux.wait_for("Nothing was deleted.");
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        0,
        "a call Ctrl-C said no to ran"
    );
    tmux.wait_for("you>");
    tmux.type_line("Delete everything, really");
    tmux.wait_for("[w]ithout force:");
    tmux.type_line("w");
    tmux.wait_for("Everything is deleted.");
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}
