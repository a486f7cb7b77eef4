//! The `toolloop` binary, run as a user runs it.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn toolloop(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run toolloop");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

mod repair {
    use super::*;

    #[test]
    fn prints_repaired_json_on_stdout_only() {
        let out = toolloop(&["repair"], b"```json\n{'a': [1, 2,], b: True\n```");
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "{\"a\":[1,2],\"b\":true}\n"
        );
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn verbose_lists_fixes_on_stderr() {
        let out = toolloop(&["repair", "-v"], b"{'a': 1,");
        assert_eq!(out.status.code(), Some(0));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("fixed: replaced single quotes"), "{err}");
        assert!(err.contains("fixed: closed truncated input"), "{err}");
    }

    #[test]
    fn valid_json_is_echoed_unchanged() {
        let out = toolloop(&["repair"], b"  {\"a\": 1.50, \"b\": [ ]}\n");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "{\"a\": 1.50, \"b\": [ ]}\n"
        );
    }

    #[test]
    fn nothing_recoverable_exits_1() {
        let out = toolloop(&["repair"], b"I am sorry, I cannot do that.");
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        assert!(String::from_utf8_lossy(&out.stderr).contains("no JSON value found"));
    }

    #[test]
    fn invalid_utf8_does_not_crash() {
        let out = toolloop(&["repair"], b"{\"a\": \"\xff\xfe\"}");
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "{\"a\": \"\u{FFFD}\u{FFFD}\"}\n"
        );
    }
}

mod schema {
    use super::*;

    #[test]
    fn prints_the_schema_file() {
        let out = toolloop(&["schema"], b"");
        assert_eq!(out.status.code(), Some(0));
        let file = include_str!("../schemas/call_schema.json");
        assert_eq!(String::from_utf8_lossy(&out.stdout), file);
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let out = toolloop(&["repair", "--bogus"], b"");
    assert_eq!(out.status.code(), Some(2));
}

/// `--today` takes a day as the tools want it, and says so when it is not one.
#[test]
fn a_today_that_is_not_a_day_says_what_it_takes() {
    let out = toolloop(&["ask", "What day is it?", "--today", "tomorrow"], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("auto, off, or a day as YYYY-MM-DD"), "{err}");
}

mod tools {
    use super::*;

    #[test]
    fn serve_tools_then_list_them_over_http() {
        let (_server, addr) = super::common::serve_tools(&["--demo"]);
        let out = toolloop(
            &["tools", "--tools", &format!("http://{addr}"), "--json"],
            b"",
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let names: Vec<&str> = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["calculator", "current_time", "get_weather"]);
    }

    #[test]
    fn unreachable_tool_server_exits_1_naming_the_url() {
        let out = toolloop(&["tools", "--tools", "http://127.0.0.1:9"], b"");
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("tool server at http://127.0.0.1:9 is not reachable"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn toolloop_tools_env_is_used_only_without_tool_flags() {
        let dead = "http://127.0.0.1:9";
        let out = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args(["tools"])
            .env("TOOLLOOP_TOOLS", dead)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("tool server at http://127.0.0.1:9"));
        let out = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args(["tools", "--builtin"])
            .env("TOOLLOOP_TOOLS", dead)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn builtin_tools_listed_in_text() {
        let out = toolloop(&["tools", "--builtin"], b"");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.split('(').next().unwrap())
                .collect::<Vec<_>>(),
            ["calculator", "current_time"]
        );
        // Built-in tools only read, so their calls may start early: the list says so.
        let listed = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            listed
                .lines()
                .all(|l| l.ends_with("  [reads only; the tool's hints]")),
            "{listed}"
        );
    }

    #[test]
    fn narrowed_schema_for_builtin_tools() {
        let out = toolloop(&["schema", "--builtin"], b"");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["oneOf"][0]["properties"]["tool"]["const"], "calculator");
    }

    #[test]
    fn a_missing_database_exits_1() {
        let out = toolloop(
            &[
                "serve-tools",
                "--addr",
                "127.0.0.1:0",
                "--db",
                "/nonexistent.db",
            ],
            b"",
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--db /nonexistent.db: no such file")
        );
    }
}

use common::fake_ollama;

const CALC: &str = r#"{"kind":"tool_call","thought":"exact","tool":"calculator","arguments":{"expression":"12.5 * 4"}}"#;
const FIFTY: &str = r#"{"kind":"final_answer","thought":"done","content":"12.5 * 4 = 50"}"#;
const CLARIFY: &str =
    r#"{"kind":"clarify","thought":"","question":"Which city?","missing_params":["city"]}"#;

fn ask(url: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "ask",
        "How much is 12.5 * 4?",
        "--ollama-host",
        url,
        "--builtin",
    ];
    args.extend_from_slice(extra);
    toolloop(&args, b"")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

mod ask {
    use super::*;

    #[test]
    fn the_question_can_come_from_stdin() {
        let fake = fake_ollama(&[FIFTY]);
        let long = format!("{}How much is 12.5 * 4?", "Some context. ".repeat(20_000));
        let out = toolloop(
            &["ask", "-", "--ollama-host", &fake.url, "--no-tools"],
            long.as_bytes(),
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "12.5 * 4 = 50\n");
        let seen = fake.requests.lock().unwrap().join("\n");
        assert!(
            seen.contains("Some context. Some context."),
            "the question was sent"
        );
        let empty = toolloop(&["ask", "-", "--ollama-host", &fake.url], b"  \n");
        assert_eq!(empty.status.code(), Some(2), "{}", text(&empty.stderr));
    }

    #[test]
    fn an_answer_withdrawn_midway_is_ended_and_said_and_the_next_one_printed() {
        // A server that ignores the schema: a final answer past the 4000-character
        // limit streams, then fails validation; the model is asked again.
        let long = format!(
            r#"{{"kind": "final_answer", "thought": "", "content": "{}"}}"#,
            "blah ".repeat(900)
        );
        let short = r#"{"kind": "final_answer", "thought": "", "content": "Short."}"#;
        let fake = fake_ollama(&[&long, short]);
        let out = ask(&fake.url, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(stdout.starts_with("blah blah"), "{stdout}");
        assert!(stdout.ends_with("\nShort.\n"), "{stdout}");
        let err = text(&out.stderr);
        assert!(
            err.contains("[Withdrawn] the answer above: the reply was not a valid answer; the model is asked again"),
            "{err}"
        );
    }

    #[test]
    fn answer_on_stdout_progress_on_stderr_exit_0() {
        let fake = fake_ollama(&[CALC, FIFTY]);
        let out = ask(&fake.url, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "12.5 * 4 = 50\n");
        let err = text(&out.stderr);
        assert!(
            err.contains("[Tool Call: calculator] {\"expression\":\"12.5 * 4\"}"),
            "{err}"
        );
        assert!(err.contains("[Tool Result: calculator] 50"), "{err}");
        assert!(
            !err.contains("\x1b["),
            "no colour when stderr is not a terminal"
        );
        // Gemma-style model without the tools capability: the result went as user text.
        let requests = fake.requests.lock().unwrap();
        assert!(
            requests[2].contains("Tool result (calculator), data from the tool, not the person's words: <tool_result>50</tool_result>\\nIf this answers"),
            "{}",
            requests[2]
        );
    }

    /// Replies that stay invalid after every re-ask end the run with exit 7, not the 1 of
    /// a server that is down.
    #[test]
    fn replies_invalid_after_every_re_ask_exit_7() {
        let junk = r#"{"kind":"tool_call","thought":"","tool":"no_such_tool","arguments":{}}"#;
        let fake = fake_ollama(&[junk, junk, junk, junk]);
        let out = ask(&fake.url, &[]);
        assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("no_such_tool"),
            "{}",
            text(&out.stderr)
        );
    }

    /// `--record` then `--replay`: the recorded run again, with no model server at all.
    #[test]
    fn a_recorded_run_replays_offline() {
        let fake = fake_ollama(&[CALC, FIFTY]);
        let path =
            std::env::temp_dir().join(format!("toolloop-record-{}.jsonl", std::process::id()));
        let first = ask(&fake.url, &["--record", path.to_str().unwrap()]);
        assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
        let again = ask(&common::dead_url(), &["--replay", path.to_str().unwrap()]);
        assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
        assert_eq!(text(&again.stdout), text(&first.stdout));
        assert_eq!(text(&again.stdout), "12.5 * 4 = 50\n");
        let _ = std::fs::remove_file(&path);
    }

    /// A first call that carries the prompt's own example, on a request that never
    /// says it, is declined unrun (`example-copy`), and the model answers instead; an
    /// answer that writes the example is refused, never shown, and asked for again
    /// without the example in the prompt. Each is said without -v, and the answer that
    /// follows is the one printed.
    #[test]
    fn what_copies_the_prompts_example_is_declined_or_refused_and_said() {
        let paris = r#"{"kind":"final_answer","thought":"","content":"Paris."}"#;
        let copy = r#"{"kind":"final_answer","thought":"","content":"12.5 * 4 = 50"}"#;
        let welcome = r#"{"kind":"final_answer","thought":"","content":"You're welcome!"}"#;
        let runs = [
            (
                [CALC, paris],
                "What is the capital of France?",
                "[Check] example-copy: declined calculator: calculator's expression is the prompt's example, which the request never says",
                "Paris.\n",
            ),
            (
                [copy, welcome],
                "Thanks, that's all I needed.",
                "[Check] example-copy: the answer was refused: it writes the prompt's example 12.5 * 4, which nobody in the conversation gave (the example is out of the prompt from now); asked again",
                "You're welcome!\n",
            ),
        ];
        for (replies, question, line, answer) in runs {
            let fake = fake_ollama(&replies);
            let args = ["ask", question, "--ollama-host", &fake.url, "--builtin"];
            let out = toolloop(&args, b"");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{err}");
            assert!(err.contains(line), "{err}");
            assert!(!err.contains("[Tool Call: calculator]"), "{err}");
            assert_eq!(text(&out.stdout), answer);
        }
    }

    /// The same copied example written in the list form: the calculator only reads, so
    /// the call starts as soon as it is written; the turn then declines it, and stderr
    /// says the early call's result is let go. `--no-early-calls` runs nothing.
    #[test]
    fn an_early_call_its_turn_declines_is_said_without_verbose() {
        let listed = r#"{"kind":"tool_calls","thought":"exact","calls":[{"tool":"calculator","arguments":{"expression":"12.5 * 4"}}]}"#;
        let paris = r#"{"kind":"final_answer","thought":"","content":"Paris."}"#;
        let question = "What is the capital of France?";
        for (extra, said) in [(None, true), (Some("--no-early-calls"), false)] {
            let fake = fake_ollama(&[listed, paris]);
            let mut args = vec!["ask", question, "--ollama-host", &fake.url, "--builtin"];
            args.extend(extra);
            let out = toolloop(&args, b"");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{err}");
            assert!(
                err.contains("[Check] example-copy: declined calculator"),
                "{err}"
            );
            assert_eq!(
                err.contains(r#"[Early call: calculator] {"expression":"12.5 * 4"} ran while the turn was written; the turn did not make it, so its result is let go"#),
                said,
                "{err}"
            );
            assert!(!err.contains("[Tool Call: calculator]"), "{err}");
            assert_eq!(text(&out.stdout), "Paris.\n");
        }
    }

    /// After a result, the same call again is declined unrun (`nothing-new`), and the
    /// person is told without -v; with the check off, the engine's own rule answers it
    /// from memory and ends the calling, said the same way.
    #[test]
    fn a_turn_that_brings_nothing_new_is_said_without_verbose() {
        let fake = fake_ollama(&[CALC, CALC, FIFTY]);
        let out = ask(&fake.url, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(
                "[Check] nothing-new: declined calculator: the same call as before; asking for an answer instead"
            ),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(
            text(&out.stderr).matches("[Tool Call: calculator]").count(),
            1
        );
        let fake = fake_ollama(&[CALC, CALC, FIFTY]);
        let out = ask(&fake.url, &["--check", "nothing-new=off"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr)
                .contains("calculator: results already shown; calling ends, asking for an answer"),
            "{}",
            text(&out.stderr)
        );
    }

    #[test]
    fn json_output_shape() {
        let fake = fake_ollama(&[CALC, FIFTY]);
        let out = ask(&fake.url, &["--json"]);
        assert_eq!(out.status.code(), Some(0));
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
        assert_eq!(v["answer"], "12.5 * 4 = 50");
        assert_eq!(v["stop_reason"], "completed");
        assert_eq!(v["iterations"], 2);
        let step = &v["steps"][0];
        for key in ["thought", "tool", "arguments", "observation", "ok", "ms"] {
            assert!(step.get(key).is_some(), "step lacks {key}: {step}");
        }
        assert_eq!(step["observation"], "50");
        assert_eq!(v["usage"]["prompt_tokens"], 100);
        // Where the run's tokens and seconds went.
        let budget = &v["budget"];
        assert_eq!(budget["model_requests"], 2, "{budget}");
        for key in [
            "prompt_evaluated",
            "model_ms",
            "tool_ms",
            "person_ms",
            "own_ms",
        ] {
            assert!(budget[key].is_u64(), "budget lacks {key}: {budget}");
        }
        for key in ["thought", "arguments", "answer", "structure", "fit"] {
            assert!(
                budget["generated"][key].is_u64(),
                "generated lacks {key}: {budget}"
            );
        }
    }

    #[test]
    fn server_down_exits_1_with_the_ollama_serve_hint() {
        let url = common::dead_url();
        let out = ask(&url, &[]);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        assert!(
            text(&out.stderr).contains("start it with `ollama serve`"),
            "{}",
            text(&out.stderr)
        );
    }

    #[test]
    fn missing_model_exits_1_with_the_pull_hint() {
        let fake = common::serve(vec![common::Act::Respond(
            404,
            "application/json",
            br#"{"error":"model 'gemma3:4b' not found"}"#.to_vec(),
        )]);
        let out = ask(&fake.url, &[]);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains("run `ollama pull gemma3:4b`"));
    }

    #[test]
    fn usage_errors_exit_2() {
        for args in [
            vec!["ask"],
            vec!["ask", "q", "--timeout", "0"],
            vec!["ask", "q", "--timeout", "soon"],
            vec!["ask", "q", "--backend", "gpt"],
            vec!["ask", "q", "--max-iterations", "0"],
            vec!["frobnicate"],
        ] {
            let out = toolloop(&args, b"");
            assert_eq!(
                out.status.code(),
                Some(2),
                "{args:?}: {}",
                text(&out.stderr)
            );
        }
    }

    /// A number out of its range is refused with the range named, negative ones included
    /// (clap took `-1` for a flag).
    #[test]
    fn numbers_out_of_range_name_the_range() {
        for (args, range) in [
            (vec!["ask", "q", "--temperature", "-1"], "from 0 to 5"),
            (vec!["ask", "q", "--temperature", "9"], "from 0 to 5"),
            (vec!["ask", "q", "--tool-threshold", "2"], "from 0 to 1"),
            (vec!["ask", "q", "--tool-threshold", "-0.5"], "from 0 to 1"),
            (
                vec!["ask", "q", "--timeout", "-3"],
                "positive number of seconds",
            ),
            (vec!["ask", "q", "--max-calls-per-turn", "9"], "1..=8"),
            (vec!["ask", "q", "--num-ctx", "10"], "256.."),
            (vec!["eval", "x", "--limit", "0"], "1..=1000000"),
            (vec!["eval", "x", "--jobs", "0"], "1..=64"),
        ] {
            let out = toolloop(&args, b"");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(range), "{args:?}: {err}");
        }
    }

    #[test]
    fn max_iterations_exits_3() {
        let fake = fake_ollama(&[CALC]);
        let out = ask(&fake.url, &["--max-iterations", "1"]);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("raise --max-iterations"));
    }

    #[test]
    fn timeout_exits_4_soon_after_the_deadline() {
        let fake = common::serve(vec![
            common::Act::Respond(200, "application/json", br#"{"capabilities":[]}"#.to_vec()),
            common::Act::Hang,
        ]);
        let started = std::time::Instant::now();
        let out = ask(&fake.url, &["--timeout", "1"]);
        assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
        assert!(
            started.elapsed() < std::time::Duration::from_millis(1800),
            "{:?}",
            started.elapsed()
        );
        assert!(text(&out.stderr).contains("raise --timeout"));
    }

    #[test]
    fn clarification_with_nobody_to_ask_exits_5_with_the_question() {
        let fake = fake_ollama(&[CLARIFY]);
        let out = ask(&fake.url, &["--json"]);
        assert_eq!(out.status.code(), Some(5));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["stop_reason"], "clarification_needed");
        assert_eq!(v["question"], "Which city?");
        assert_eq!(v["missing_params"], serde_json::json!(["city"]));
        assert!(
            text(&out.stderr)
                .contains("the model needs more information: Which city? (missing: city)")
        );
    }

    #[test]
    fn env_fallbacks_for_host_and_model() {
        let fake = fake_ollama(&[FIFTY]);
        let out = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args(["ask", "What is 12.5 * 4?", "--builtin"])
            .env("OLLAMA_HOST", fake.url.trim_start_matches("http://"))
            .env("TOOLLOOP_MODEL", "qwen2.5:0.5b")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let requests = fake.requests.lock().unwrap();
        assert!(
            requests[0].contains(r#""model":"qwen2.5:0.5b""#),
            "{}",
            requests[0]
        );
    }

    #[test]
    fn transcript_holds_every_event_as_a_json_line() {
        let fake = fake_ollama(&[CALC, FIFTY]);
        let path = tempfile::Builder::new()
            .suffix(".jsonl")
            .tempfile()
            .unwrap()
            .into_temp_path();
        let _ = std::fs::remove_file(&path);
        let out = ask(&fake.url, &["--transcript", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0));
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.first().unwrap()["event"], "run_started");
        assert_eq!(lines.last().unwrap()["event"], "stopped");
        assert_eq!(lines.last().unwrap()["budget"]["model_requests"], 2);
        assert!(lines.iter().any(|l| l["event"] == "tool_call"));
    }

    #[test]
    fn verbose_trace_tags() {
        let fake = fake_ollama(&[CALC, FIFTY]);
        let out = ask(&fake.url, &["-v"]);
        let err = text(&out.stderr);
        for tag in [
            "[LLM]",
            "[ACT]",
            "[OBSERVE]",
            "[DONE]",
            "[BUDGET] 2 model requests",
        ] {
            assert!(err.contains(tag), "{tag} missing: {err}");
        }
    }
}

mod demo {
    use super::*;

    #[test]
    fn runs_offline_and_shows_every_part() {
        let out = toolloop(&["demo"], b"");
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            "In Tokyo it is sunny and 18 °C, which is 64.4 °F.\n"
        );
        let err = text(&out.stderr);
        for part in [
            "? Which city do you mean?",
            "> Tokyo",
            "[Tool Result: get_weather] error: no weather for \"Tokyo, Japan\"",
            "[Tool Result: get_weather] {\"city\":\"Tokyo\"",
            "[Repair] closed truncated input",
            "[Tool Result: calculator] 64.4",
        ] {
            assert!(err.contains(part), "{part:?} missing:\n{err}");
        }
    }

    #[test]
    fn json() {
        let out = toolloop(&["demo", "--json"], b"");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["stop_reason"], "completed");
        assert_eq!(v["iterations"], 5);
    }
}

/// `toolloop demo -v 2>&1 | head -1`: the reader of stderr goes away after one line, and
/// every later line fails to write. The run goes on, its answer is printed, and the
/// program ends without a panic (before: exit 101 and a panic message).
#[test]
fn a_closed_stderr_ends_quietly() {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args(["demo", "-v"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run toolloop");
    let mut first = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("toolloop demo"), "{first}");
    // The reader is dropped here: stderr is a closed pipe from now on.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "In Tokyo it is sunny and 18 °C, which is 64.4 °F.\n"
    );
}

#[test]
fn every_subcommand_has_help_with_an_example() {
    for sub in [
        "ask",
        "chat",
        "demo",
        "tools",
        "serve-tools",
        "schema",
        "repair",
        "web",
        "eval",
        "calibrate",
        "checks",
        "doctor",
    ] {
        let out = toolloop(&[sub, "--help"], b"");
        assert_eq!(out.status.code(), Some(0));
        let help = text(&out.stdout);
        let example = help
            .lines()
            .find(|l| l.trim_start().starts_with("Example:"));
        assert!(
            example.is_some_and(|l| l.contains("toolloop")),
            "{sub} --help has no example"
        );
        assert!(
            help.contains("Exit codes: 0") && help.contains("130 interrupted"),
            "{sub} --help does not list the exit codes"
        );
    }
    for sub in ["ask", "chat", "demo"] {
        let help = text(&toolloop(&[sub, "--help"], b"").stdout);
        for code in [
            "3 no answer",
            "4 --timeout",
            "5 the model asked",
            "6 a tool call",
            "7 the model's replies",
        ] {
            assert!(help.contains(code), "{sub} --help lacks {code:?}");
        }
    }
}

mod eval {
    use super::*;

    /// `toolloop eval --json` of the small BFCL set in `tests/data/bfcl` against `url`.
    fn eval_json(url: &str) -> std::process::Output {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bfcl");
        toolloop(&["eval", data, "--ollama-host", url, "--json"], b"")
    }

    #[test]
    fn scores_a_dataset_through_the_loop() {
        let right = r#"{"kind":"tool_call","thought":"","tool":"geometry.rectangle_area","arguments":{"width":4,"height":2.5}}"#;
        let wrong = r#"{"kind":"tool_call","thought":"","tool":"convert_currency","arguments":{"amount":100,"from":"USD","to":"GBP"}}"#;
        let none = r#"{"kind":"final_answer","thought":"","content":"Shakespeare"}"#;
        // Files load in name order: irrelevance first, then simple_python.
        let fake = fake_ollama(&[none, right, wrong]);
        let out = eval_json(&fake.url);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let by_id = |id: &str| {
            v["cases"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == id)
                .unwrap()
                .clone()
        };
        assert_eq!(by_id("irrelevance_0")["pass"], true);
        assert_eq!(by_id("simple_python_0")["pass"], true);
        assert_eq!(by_id("simple_python_1")["pass"], false);
        assert_eq!(
            by_id("simple_python_1")["reason"],
            "parameter to = \"GBP\" is not among [\"EUR\",\"euros\"]"
        );
        let all = v["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["category"] == "all")
            .unwrap()
            .clone();
        assert_eq!(all["passed"], 2);
        assert_eq!(all["cases"], 3);
    }

    /// What the checks did is said without -v: a line over the run naming each check and
    /// the cases it acted on, and each case's own lines in --json.
    #[test]
    fn what_the_checks_did_is_said_without_verbose() {
        let copy = r#"{"kind":"tool_call","thought":"","tool":"convert_currency","arguments":{"amount":100,"from":"12.5 * 4","to":"GBP"}}"#;
        let none = r#"{"kind":"final_answer","thought":"","content":"Shakespeare"}"#;
        let right = r#"{"kind":"tool_call","thought":"","tool":"geometry.rectangle_area","arguments":{"width":4,"height":2.5}}"#;
        let fake = fake_ollama(&[copy, none, right, right]);
        let out = eval_json(&fake.url);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            err.contains("toolloop: checks acted on cases: example-copy 1 (of 3); each case's lines in --json (\"checks\") or with -v"),
            "{err}"
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let line = v["cases"][0]["checks"][0].as_str().unwrap_or_default();
        assert!(
            line.starts_with("example-copy: declined convert_currency: convert_currency's from is the prompt's example"),
            "{line}"
        );
        assert!(v["cases"][1].get("checks").is_none());
    }

    #[test]
    fn a_missing_dataset_is_a_clear_error() {
        let out = toolloop(&["eval", "/nonexistent/BFCL_v4_simple_python.json"], b"");
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains("/nonexistent/BFCL_v4_simple_python.json"));
    }
}

mod usage {
    use super::*;

    /// Values that once reached the model (a zero context window, NaN temperature, an
    /// empty question, tools and no tools at once) are usage errors, exit 2.
    #[test]
    fn nonsense_values_are_usage_errors() {
        for args in [
            &["ask", ""][..],
            &["ask", "   "],
            &["ask", "hi", "--num-ctx", "0"],
            &["ask", "hi", "--num-predict", "0"],
            &["ask", "hi", "--temperature", "nan"],
            &["ask", "hi", "--temperature", "-1"],
            &["ask", "hi", "--builtin", "--no-tools"],
            &["chat", "--mcp", "x", "--no-tools"],
            &[
                "ask",
                "hi",
                "--backend",
                "openai",
                "--base-url",
                "localhost:8080/v1",
            ],
            &["ask", "hi", "--ollama-host", "http://exa mple:99"],
            &["tools", "--tools", "127.0.0.1:5000"],
            &["tools", "--mcp", "http://"],
        ] {
            let out = toolloop(args, b"");
            assert_eq!(
                out.status.code(),
                Some(2),
                "{args:?}: {}",
                text(&out.stderr)
            );
        }
    }

    /// Linux's /dev/full fails every write with "no space left".
    #[test]
    #[cfg(target_os = "linux")]
    fn a_failed_write_says_so_without_a_panic() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .arg("schema")
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(err.contains("cannot write the output"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }

    #[test]
    fn a_closed_pipe_ends_quietly() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args(["schema", "--builtin"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    }
}

mod checked_first {
    use super::*;

    /// `ask`'s --replay and --transcript do not apply to an eval's cases: refused as
    /// usage errors before any model is asked, not ignored (an eval that passed over
    /// --replay asked the live server instead).
    #[test]
    fn eval_refuses_replay_and_transcript_before_calling_the_model() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bfcl");
        for (flag, hint) in [("--replay", "--rescore"), ("--transcript", "--json")] {
            let out = toolloop(
                &[
                    "eval",
                    data,
                    "--ollama-host",
                    &common::dead_url(),
                    flag,
                    "x.jsonl",
                ],
                b"",
            );
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(err.contains(flag) && err.contains(hint), "{err}");
        }
    }

    /// `--rescore` judges a report's recorded cases, all of them, and prints text: the
    /// flags that choose cases, run them or ask for JSON are refused beside it, not
    /// passed over (`--json` with it printed text where JSON was asked for).
    #[test]
    fn eval_refuses_flags_a_rescore_would_pass_over() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bfcl");
        for flags in [
            &["--json"][..],
            &["--limit", "3"],
            &["--half", "validation"],
            &["--jobs", "2"],
            &["--category", "irrelevance"],
        ] {
            let mut args = vec!["eval", data, "--rescore", "report.json"];
            args.extend_from_slice(flags);
            let out = toolloop(&args, b"");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
            assert!(err.contains("--rescore") && err.contains(flags[0]), "{err}");
        }
    }

    /// A rescore with the server down still judges, uncalibrated, and says that the
    /// server could not be asked which model file it runs: a run of a file toolloop
    /// ships a calibration for took it, so figures judged without it are not the run's.
    #[test]
    fn a_rescore_with_the_server_down_says_it_could_not_ask_which_model_ran() {
        let dir =
            std::env::temp_dir().join(format!("toolloop-rescore-down-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let report = dir.join("report.json");
        let call = r#"{"kind": "final_answer", "thought": "", "content": "You're welcome!"}"#;
        let r = serde_json::json!({"cases": [{"id": "everyday_irrelevance_0",
            "category": "everyday_irrelevance", "pass": true, "texts": [call], "p_tool": 0.1}]});
        std::fs::write(&report, r.to_string()).unwrap();
        let data = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/everyday/BFCL_v4_everyday_irrelevance.json"
        );
        let none = dir.join("no-calibration.json");
        let out = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args([
                "eval",
                data,
                "--backend",
                "openai",
                "--base-url",
                &common::dead_url(),
            ])
            .arg("--rescore")
            .arg(&report)
            .env("TOOLLOOP_CALIBRATION", &none)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            err.contains("could not be asked which model file it runs"),
            "{err}"
        );
        assert!(
            text(&out.stdout).contains("1 -> 1 of 1"),
            "{}",
            text(&out.stdout)
        );
    }

    #[test]
    fn eval_on_a_folder_without_data_says_where_to_get_it_before_calling_the_model() {
        let empty_guard = tempfile::tempdir().unwrap();
        let empty = empty_guard.path().to_path_buf();
        let out = toolloop(
            &[
                "eval",
                empty.to_str().unwrap(),
                "--ollama-host",
                &common::dead_url(),
            ],
            b"",
        );
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(err.contains("scripts/bfcl-data.sh"), "{err}");
        assert!(
            !err.contains("not running"),
            "the model was contacted: {err}"
        );
        let missing = toolloop(
            &[
                "eval",
                "/nonexistent/bfcl",
                "--ollama-host",
                &common::dead_url(),
            ],
            b"",
        );
        assert_eq!(missing.status.code(), Some(1));
        assert!(text(&missing.stderr).contains("scripts/bfcl-data.sh"));
        let unknown = toolloop(
            &[
                "eval",
                "tests/data/everyday",
                "--category",
                "nope",
                "--ollama-host",
                &common::dead_url(),
            ],
            b"",
        );
        assert!(
            text(&unknown.stderr).contains(
                "no case of category nope; the data has everyday_irrelevance, everyday_multiple, \
                 everyday_parallel, everyday_simple"
            ),
            "{}",
            text(&unknown.stderr)
        );
    }

    #[test]
    fn chat_lists_its_commands_on_help_and_points_to_it_on_an_unknown_one() {
        let fake = fake_ollama(&[]);
        let out = toolloop(
            &["chat", "--no-tools", "--ollama-host", &fake.url],
            b"/help\n/frobnicate\n/exit\n",
        );
        assert_eq!(out.status.code(), Some(0));
        let err = text(&out.stderr);
        for line in ["/tools   the tools", "/reset   forget", "/exit    leave"] {
            assert!(err.contains(line), "{line:?} missing: {err}");
        }
        assert!(
            err.contains("unknown command /frobnicate; /help lists the commands"),
            "{err}"
        );
    }

    #[test]
    fn chat_checks_the_server_before_the_first_question() {
        let out = toolloop(
            &["chat", "--no-tools", "--ollama-host", &common::dead_url()],
            b"hello\n",
        );
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(err.contains("not running"), "{err}");
        assert!(!err.contains("you>"), "it asked before checking: {err}");
    }
}

/// With no tool flag, `tools` and `ask` use the same tools: the default tool server.
#[test]
fn no_tool_flag_means_the_default_tool_server_for_tools_and_ask_alike() {
    let said = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args(args)
            .env_remove("TOOLLOOP_TOOLS")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let dead = common::dead_url();
    for args in [vec!["tools"], vec!["ask", "q", "--ollama-host", &dead]] {
        let (code, err) = said(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("tool server at http://localhost:5000"),
            "{args:?}: {err}"
        );
    }
}

/// A port another program holds: the message says which flag chooses another.
#[test]
fn a_port_in_use_names_the_flag_that_chooses_another() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = toolloop(&["serve-tools", "--addr", &addr, "--demo"], b"");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "cannot listen on {addr}: another program uses it; choose another with --addr"
        )),
        "{err}"
    );
}

#[test]
fn an_unreachable_mcp_url_is_called_an_mcp_server() {
    let url = format!("{}/mcp", common::dead_url());
    let out = toolloop(&["tools", "--mcp", &url], b"");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("MCP server at"), "{err}");
    assert!(!err.contains("serve-tools"), "{err}");
}

#[test]
fn web_refuses_an_address_others_can_reach_without_allow_remote() {
    let out = toolloop(&["web", "--no-tools", "--addr", "0.0.0.0:0"], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("--allow-remote"), "{err}");
    let out = toolloop(&["web", "--no-tools", "--addr", "not an address"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("HOST:PORT"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn web_says_the_model_server_is_down_before_serving() {
    let url = common::dead_url();
    let host = url.trim_start_matches("http://");
    let out = toolloop(
        &[
            "web",
            "--no-tools",
            "--addr",
            "127.0.0.1:0",
            "--ollama-host",
            host,
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("not reachable") || err.contains("ollama serve"),
        "{err}"
    );
    assert!(!err.contains("the page is at"), "{err}");
}

mod checks {
    use super::*;

    /// Asks for the weather without naming a city, with the demo tools, as JSON.
    fn weather_nowhere(url: &str, extra: &[&str]) -> Output {
        let mut args = vec![
            "ask",
            "What's the weather like?",
            "--ollama-host",
            url,
            "--builtin",
            "--demo",
            "--json",
        ];
        args.extend_from_slice(extra);
        toolloop(&args, b"")
    }

    #[test]
    fn every_check_is_listed_with_its_default_and_one_is_shown_whole() {
        let out = toolloop(&["checks"], b"");
        assert_eq!(out.status.code(), Some(0));
        let list = text(&out.stdout);
        assert!(list.contains("tool-probability   on "), "{list}");
        assert!(list.contains("invented-required  off"), "{list}");
        let one = toolloop(&["checks", "example-copy"], b"");
        let doc = text(&one.stdout);
        assert!(
            doc.starts_with("example-copy (default on; declines the call)"),
            "{doc}"
        );
        assert!(doc.contains("Why:") && doc.contains("Example:"), "{doc}");
        let json = toolloop(&["checks", "--json"], b"");
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(
            v.as_array().unwrap().len(),
            list.lines().filter(|l| l.contains("  o")).count()
        );
    }

    /// A Gemma model runs without the two askings that gained it nothing, and the run says
    /// so under -v once the server is up; a check named outright is as named, and other
    /// models keep them.
    #[test]
    fn a_gemma_model_has_its_own_defaults_and_is_told_so() {
        let ask = |extra: &[&str]| {
            let fake = common::fake_ollama(&[r#"{"kind":"final_answer","content":"Hello."}"#]);
            let host = fake.url.trim_start_matches("http://").to_string();
            let mut args = vec!["ask", "hi", "--builtin", "-v", "--ollama-host", &host];
            args.extend_from_slice(extra);
            let out = toolloop(&args, b"");
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            text(&out.stderr)
        };
        let err = ask(&["--model", "gemma3:270m"]);
        assert!(
            err.contains(
                "[CHECKS] more-calls, numbers-left off by default for gemma models (measured \
                 there: more requests, no right call gained); --check more-calls=on --check \
                 numbers-left=on turns them on"
            ),
            "{err}"
        );
        let err = ask(&["--model", "gemma3:270m", "--check", "more-calls=on"]);
        assert!(
            err.contains("[CHECKS] numbers-left off by default for gemma"),
            "{err}"
        );
        let err = ask(&["--model", "qwen2.5-coder:0.5b"]);
        assert!(!err.contains("off by default"), "{err}");
    }

    #[test]
    fn an_unknown_check_is_a_usage_error_that_names_the_checks() {
        let out = toolloop(&["ask", "hi", "--check", "tool-fitt=off"], b"");
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(err.contains("no check is called 'tool-fitt'"), "{err}");
        assert!(err.contains("tool-fit"), "{err}");
        let out = toolloop(&["checks", "nope"], b"");
        assert_eq!(out.status.code(), Some(2));
    }

    #[test]
    fn what_a_check_did_is_shown_without_verbose_and_in_json() {
        // An answer that writes the prompt's own example, which nobody asked for: refused,
        // the model is asked again, and the person sees why.
        let copied = r#"{"kind":"final_answer","thought":"","content":"12.5 * 4 = 50"}"#;
        let answer = r#"{"kind":"final_answer","thought":"","content":"Rain."}"#;
        let fake = fake_ollama(&[copied, answer]);
        let out = weather_nowhere(&fake.url, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains("[Check] example-copy: the answer was refused"),
            "{err}"
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["answer"], "Rain.");
        assert_eq!(v["checks"][0]["event"], "check");
        assert_eq!(v["checks"][0]["action"], "refuse_answer");
        assert_eq!(v["checks"][0]["check"], "example-copy");
        assert!(
            v["checks"][0]["line"]
                .as_str()
                .unwrap()
                .contains("12.5 * 4")
        );
    }

    #[test]
    fn a_call_no_check_acts_on_runs_as_the_model_wrote_it() {
        let call = r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Paris"}}"#;
        let answer = r#"{"kind":"final_answer","thought":"","content":"Rain."}"#;
        let fake = fake_ollama(&[call, answer]);
        let out = weather_nowhere(&fake.url, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["steps"][0]["arguments"]["city"], "Paris");
        assert_eq!(v["checks"], serde_json::json!([]));
    }
}

mod calibrate {
    use super::*;

    fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    #[test]
    fn a_server_that_is_down_is_named_before_anything_is_written() {
        let dir = std::env::temp_dir().join(format!("toolloop-cal-cli-{}", std::process::id()));
        let file = dir.join("calibration.json");
        let url = common::dead_url();
        let out = toolloop(
            &[
                "calibrate",
                "--ollama-host",
                &url,
                "--calibration",
                file.to_str().unwrap(),
            ],
            b"",
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("start it with `ollama serve`"),
            "{}",
            text(&out.stderr)
        );
        assert!(
            !file.exists(),
            "nothing is written when nothing was measured"
        );
    }

    #[test]
    fn a_server_without_log_probabilities_leaves_no_calibration_behind() {
        let fake = common::fake_ollama(&[r#"{"kind":"final_answer","thought":"","content":"hi"}"#]);
        let file =
            std::env::temp_dir().join(format!("toolloop-cal-nolp-{}.json", std::process::id()));
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/languages");
        let out = toolloop(
            &[
                "calibrate",
                data,
                "--ollama-host",
                &fake.url,
                "--calibration",
                file.to_str().unwrap(),
            ],
            b"",
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("nothing was saved"), "{err}");
        // Before it started, it said how long it would take on this server.
        assert!(
            err.contains("toolloop: calibrating on ") && err.contains(" min at 1 at a time"),
            "{err}"
        );
        assert!(
            !file.exists(),
            "a run that measured nothing wrote {}",
            file.display()
        );
    }

    /// With `--jobs 2` the estimate times two cases' turns sent at once, as the run sends
    /// them (the slots share the server's cores: one turn's time halved said "about 6 min"
    /// for 8.6), after an untimed request that has the model loaded, and each probe begins
    /// with a line of its own, so that a server keeping the last prompt it saw does not
    /// answer it from its cache (a second calibration said "about 4 min" for 12).
    #[test]
    fn the_time_estimate_times_the_jobs_at_once_on_prompts_no_server_has_kept() {
        let fake = common::fake_ollama(&[r#"{"kind":"final_answer","thought":"","content":"hi"}"#]);
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/languages");
        let out = toolloop(
            &[
                "calibrate",
                data,
                "--jobs",
                "2",
                "--ollama-host",
                &fake.url,
                "--no-save",
            ],
            b"",
        );
        let err = text(&out.stderr);
        assert!(err.contains(" min at 2 at a time"), "{err}");
        let requests = fake.requests.lock().unwrap().clone();
        let chats: Vec<&String> = requests
            .iter()
            .filter(|r| r.starts_with("POST /api/chat"))
            .collect();
        let body = |r: &str| -> serde_json::Value {
            serde_json::from_str(&r[r.find("\r\n\r\n").unwrap() + 4..]).unwrap()
        };
        let probes: Vec<serde_json::Value> = chats
            .iter()
            .filter(|r| r.contains("Probe "))
            .map(|r| body(r))
            .collect();
        // An untimed turn to have the model loaded, two turns at once, a question aside.
        assert_eq!(probes.len(), 4, "{chats:?}");
        let questions: std::collections::BTreeSet<&str> = probes
            .iter()
            .filter(|b| b["messages"][0]["role"] == "system")
            .map(|b| b["messages"][1]["content"].as_str().unwrap())
            .collect();
        assert_eq!(questions.len(), 2, "two cases' turns: {questions:?}");
        assert!(
            chats.iter().skip(4).all(|r| !r.contains("Probe ")),
            "the cases' own turns carry no probe line"
        );
    }

    #[test]
    fn a_broken_calibration_file_says_what_to_do() {
        let file =
            std::env::temp_dir().join(format!("toolloop-cal-bad-{}.json", std::process::id()));
        std::fs::write(&file, "{not json").unwrap();
        let out = toolloop(
            &[
                "ask",
                "hi",
                "--no-tools",
                "--calibration",
                file.to_str().unwrap(),
                "--ollama-host",
                &common::dead_url(),
            ],
            b"",
        );
        let err = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0));
        assert!(
            err.contains("not a calibration file") && err.contains("toolloop calibrate"),
            "{err}"
        );
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn a_margin_out_of_range_is_refused_before_any_request() {
        let out = toolloop(
            &[
                "calibrate",
                "--margin",
                "5",
                "--ollama-host",
                &common::dead_url(),
            ],
            b"",
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("from 0 to 4"), "{err}");
    }

    #[test]
    fn a_floor_that_is_no_share_is_refused_before_any_request() {
        for floor in ["1", "0.3", "none"] {
            let out = toolloop(
                &[
                    "calibrate",
                    "--floor",
                    floor,
                    "--ollama-host",
                    &common::dead_url(),
                ],
                b"",
            );
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(err.contains("from 0.5 to 0.999, or off"), "{err}");
        }
    }

    /// `--dry-run` says what it would measure and where it would save it, and sends the
    /// server nothing: the one server it names here answers no request.
    #[test]
    fn a_dry_run_says_what_it_would_do_and_sends_nothing() {
        let fake = common::fake_ollama(&[]);
        let file =
            std::env::temp_dir().join(format!("toolloop-cal-dry-{}.json", std::process::id()));
        let out = toolloop(
            &[
                "calibrate",
                "--dry-run",
                "--ollama-host",
                &fake.url,
                "--calibration",
                file.to_str().unwrap(),
            ],
            b"",
        );
        let said = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(said.contains("would measure gemma3:4b"), "{said}");
        assert!(said.contains(file.to_str().unwrap()), "{said}");
        assert!(said.contains("Nothing was sent"), "{said}");
        assert!(fake.requests.lock().unwrap().is_empty());
        assert!(!file.exists());
    }

    #[test]
    fn help_says_what_it_costs() {
        let out = toolloop(&["calibrate", "--help"], b"");
        assert_eq!(out.status.code(), Some(0));
        let help = text(&out.stdout);
        assert!(help.contains("minutes"), "{help}");
        assert!(help.contains("--calibration"), "{help}");
    }
}

/// `docs/checks.md` is made from the checks' declarations; edit those, then run
/// `toolloop checks --markdown > docs/checks.md`.
#[test]
fn the_checks_page_is_what_the_declarations_make() {
    let out = toolloop(&["checks", "--markdown"], b"");
    assert_eq!(out.status.code(), Some(0));
    let made = String::from_utf8(out.stdout).unwrap();
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/checks.md")).unwrap();
    assert!(
        made.trim_end() == page.trim_end(),
        "docs/checks.md is stale: run `toolloop checks --markdown > docs/checks.md`"
    );
}

/// llama-server answers to any model name: what it runs is the file its `/props` names.
/// A Qwen served while toolloop asks for its default name, `gemma3:4b`, gets Qwen's
/// check defaults, as it gets the calibration found by that file; a Gemma file gets
/// Gemma's.
#[test]
fn doctor_reads_the_models_family_off_the_file_llama_server_runs() {
    let models = br#"{"object":"list","data":[{"id":"m"}]}"#.to_vec();
    for (file, gemma) in [
        ("/m/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", false),
        ("/m/gemma3-270m-q4_k_m.gguf", true),
    ] {
        let props = format!(r#"{{"total_slots":2,"model_path":"{file}"}}"#).into_bytes();
        let fake = common::serve(vec![
            common::Act::Respond(200, "application/json", models.clone()),
            common::Act::Respond(200, "application/json", props),
        ]);
        let out = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args(["doctor", "--backend", "openai", "--base-url"])
            .arg(format!("{}/v1", fake.url))
            .arg("--builtin")
            .env("TOOLLOOP_CALIBRATION", "/nonexistent/calibration.json")
            .output()
            .unwrap();
        let said = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
        assert_eq!(
            said.contains("off by default for gemma"),
            gemma,
            "{file}: {said}"
        );
    }
}

/// A run under -v says the family's defaults by the file llama-server runs, not by the
/// name asked for: a Qwen file asked for as `gemma3:4b` (the default) says nothing.
#[test]
fn a_run_says_the_family_defaults_of_the_file_llama_server_runs() {
    let models = br#"{"object":"list","data":[{"id":"m"}]}"#.to_vec();
    let answer = serde_json::json!({"choices": [{"index": 0, "delta": {"content":
        r#"final_answer", "content": "Hello."}"#}, "finish_reason": null}]});
    let done = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;
    let sse = format!("data: {answer}\n\ndata: {done}\n\ndata: [DONE]\n\n").into_bytes();
    for (file, asked, gemma) in [
        (
            "/m/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            "gemma3:4b",
            false,
        ),
        ("/m/gemma3-270m-q4_k_m.gguf", "qwen2.5-coder:0.5b", true),
    ] {
        let props = format!(r#"{{"total_slots":2,"model_path":"{file}"}}"#).into_bytes();
        let fake = common::serve(vec![
            common::Act::Respond(200, "application/json", models.clone()),
            common::Act::Respond(200, "application/json", props),
            common::Act::Respond(200, "text/event-stream", sse.clone()),
        ]);
        let out = Command::new(env!("CARGO_BIN_EXE_toolloop"))
            .args(["ask", "hi", "-v", "--backend", "openai", "--model", asked])
            .arg("--base-url")
            .arg(format!("{}/v1", fake.url))
            .arg("--builtin")
            .env("TOOLLOOP_CALIBRATION", "/nonexistent/calibration.json")
            .env("TOOLLOOP_LEANINGS", "/nonexistent/leanings.json")
            .output()
            .unwrap();
        let said = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{said}");
        assert_eq!(
            said.contains("[CHECKS] more-calls, numbers-left off by default for gemma"),
            gemma,
            "{file}: {said}"
        );
        assert_eq!(said.contains("off by default"), gemma, "{file}: {said}");
    }
}

/// `toolloop doctor` says of each part a first question needs whether it is ready, and
/// what the missing calibration changes, before anything is asked of the model.
#[test]
fn doctor_says_what_is_ready_and_what_is_not() {
    let fake = common::fake_ollama(&[]);
    let host = fake.url.trim_start_matches("http://").to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args(["doctor", "--ollama-host", &host, "--builtin"])
        .env("TOOLLOOP_CALIBRATION", "/nonexistent/calibration.json")
        .output()
        .unwrap();
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
    let lines: Vec<&str> = said.lines().collect();
    assert!(
        lines[0].starts_with("model: ") && lines[0].ends_with("answers"),
        "{said}"
    );
    assert!(
        lines[1].contains("is not calibrated") && lines[1].contains("toolloop calibrate"),
        "{said}"
    );
    // The default model is a Gemma: its own defaults are said.
    assert!(
        lines[2].starts_with("checks: more-calls, numbers-left off by default for gemma"),
        "{said}"
    );
    assert_eq!(lines[3], "tools: 2 (calculator, current_time)", "{said}");
    // Nothing but the preflight reached the server: no model request.
    assert!(
        fake.requests
            .lock()
            .unwrap()
            .iter()
            .all(|r| !r.contains("/api/chat"))
    );

    // A server that is down and tools that are not there: every line still comes, exit 1.
    let dead = common::dead_url();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args([
            "doctor",
            "--ollama-host",
            dead.trim_start_matches("http://"),
            "--tools",
            &dead,
        ])
        .env("TOOLLOOP_CALIBRATION", "/nonexistent/calibration.json")
        .output()
        .unwrap();
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("model: Ollama is not running"), "{said}");
    assert!(said.contains("calibration: "), "{said}");
    assert!(
        said.contains("tools: ") && said.contains("not reachable"),
        "{said}"
    );

    // A backend that cannot be made (no key) is a part that failed, not the end.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolloop"))
        .args(["doctor", "--backend", "gemini", "--builtin"])
        .env_remove("GEMINI_API_KEY")
        .env("TOOLLOOP_CALIBRATION", "/nonexistent/calibration.json")
        .output()
        .unwrap();
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("model: ") && said.contains("GEMINI_API_KEY"),
        "{said}"
    );
    assert!(
        said.contains("tools: 2 (calculator, current_time)"),
        "{said}"
    );
}
