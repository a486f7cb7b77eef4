//! `toolloop chat` driven as a person would: in a real terminal (tmux), typing at the
//! prompt, with a clarifying question in the middle answered at the prompt. Needs tmux;
//! without it the test says so and passes, except under CI, where it must run.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
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

fn reply(content: &str) -> common::Act {
    let line =
        serde_json::json!({"message": {"role": "assistant", "content": content}, "done": false});
    let done = r#"{"message":{"content":""},"done":true,"done_reason":"stop","prompt_eval_count":50,"eval_count":9}"#;
    common::Act::Respond(
        200,
        "application/x-ndjson",
        format!("{line}\n{done}\n").into_bytes(),
    )
}

#[test]
fn chat_in_a_terminal_with_a_clarify_in_the_middle() {
    if Command::new("tmux").arg("-V").output().is_err() {
        if std::env::var_os("CI").is_some() {
            panic!("tmux is not installed");
        }
        eprintln!("SKIPPED: tmux is not installed");
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
    let tmux = Tmux {
        socket: format!("toolloop-test-{}", std::process::id()),
    };
    let command = format!(
        "{} chat --ollama-host {} --builtin --demo",
        env!("CARGO_BIN_EXE_toolloop"),
        fake.url
    );
    let out = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "chat",
        "-x",
        "160",
        "-y",
        "50",
        &command,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

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
fn colour_on_a_terminal_and_never_with_no_color() {
    if Command::new("tmux").arg("-V").output().is_err() {
        if std::env::var_os("CI").is_some() {
            panic!("tmux is not installed");
        }
        return;
    }
    for (env, want_colour) in [("", true), ("NO_COLOR=1 ", false)] {
        let tmux = Tmux {
            socket: format!("toolloop-colour-{}-{want_colour}", std::process::id()),
        };
        let command = format!("env {env}{} demo; sleep 30", env!("CARGO_BIN_EXE_toolloop"));
        tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            "chat",
            "-x",
            "160",
            "-y",
            "50",
            &command,
        ]);
        tmux.wait_for("64.4 °F.");
        let raw =
            String::from_utf8_lossy(&tmux.cmd(&["capture-pane", "-p", "-e", "-t", "chat"]).stdout)
                .into_owned();
        assert_eq!(raw.contains("\u{1b}["), want_colour, "env {env:?}:\n{raw}");
    }
}
