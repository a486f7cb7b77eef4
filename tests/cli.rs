//! The `toolloop` binary, run as a user runs it.

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

mod tools {
    use super::*;
    use std::time::{Duration, Instant};

    struct Killer(std::process::Child);
    impl Drop for Killer {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn serve_tools_then_list_them_over_http() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let _server = Killer(
            Command::new(env!("CARGO_BIN_EXE_toolloop"))
                .args(["serve-tools", "--addr", &addr, "--demo"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let started = Instant::now();
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
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
    fn builtin_tools_listed_in_text() {
        let out = toolloop(&["tools", "--builtin"], b"");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.split('(').next().unwrap())
                .collect::<Vec<_>>(),
            ["calculator", "current_time"]
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
