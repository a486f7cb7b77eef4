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
