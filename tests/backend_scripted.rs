//! Recording a real backend's replies and replaying them offline.

use std::time::Duration;

use mockito::Matcher;
use toolloop::Deadline;
use toolloop::backend::Ollama;
use toolloop::backend::{Backend, ChatRequest, GenOptions, Message, StopReason};
use toolloop::backend::{Recorder, Scripted, ScriptedReply};

fn ask(b: &mut dyn Backend) -> toolloop::backend::ChatReply {
    let messages = [Message::user("hi")];
    let opts = GenOptions::default();
    let req = ChatRequest {
        messages: &messages,
        schema: None,
        options: &opts,
    };
    b.chat(
        &req,
        Deadline::after(Duration::from_secs(5)),
        &mut toolloop::backend::keep_going,
    )
    .unwrap()
}

#[test]
fn a_recorded_session_replays_offline() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/api/show")
        .with_body(r#"{"capabilities":[]}"#)
        .create();
    server
        .mock("POST", "/api/chat")
        .match_body(Matcher::Any)
        .with_body(concat!(
            r#"{"message":{"content":"{\"kind\":\"final_answer\",\"content\":\"cut"},"done":false}"#,
            "\n",
            r#"{"done":true,"done_reason":"length","prompt_eval_count":9,"eval_count":20}"#,
            "\n"
        ))
        .create();
    let dir_guard = tempfile::tempdir().unwrap();
    let dir = dir_guard.path().to_path_buf();
    let path = dir.join("session.jsonl");
    let _ = std::fs::remove_file(&path);
    let live = {
        let mut rec = Recorder::new(Ollama::new(&server.url(), "gemma3:4b"), &path).unwrap();
        ask(&mut rec)
    };
    let mut replay = Scripted::from_file(&path).unwrap();
    let again = ask(&mut replay);
    assert_eq!(again.text, live.text);
    assert_eq!(again.stop, StopReason::Length);
    assert_eq!(again.usage, live.usage);
    assert_eq!(replay.remaining(), 0);
}

#[test]
fn a_partial_last_line_is_skipped_and_plain_strings_are_replies() {
    let dir_guard = tempfile::tempdir().unwrap();
    let dir = dir_guard.path().to_path_buf();
    let path = dir.join("cut.jsonl");
    std::fs::write(
        &path,
        "\"first\"\n{\"reply\": \"second\", \"stop\": \"length\"}\n{\"reply\": \"thi",
    )
    .unwrap();
    let mut s = Scripted::from_file(&path).unwrap();
    assert_eq!(s.remaining(), 2);
    assert_eq!(ask(&mut s).text, "first");
    assert_eq!(ask(&mut s).stop, StopReason::Length);
}

#[test]
fn a_broken_line_in_the_middle_is_an_error_naming_the_line() {
    let path = tempfile::Builder::new()
        .suffix(".jsonl")
        .tempfile()
        .unwrap()
        .into_temp_path();
    std::fs::write(&path, "\"ok\"\nnot json\n\"ok\"\n").unwrap();
    let err = Scripted::from_file(&path).unwrap_err().to_string();
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn scripted_reply_helpers() {
    let mut s = Scripted::from_replies([ScriptedReply::truncated("{\"a\": \"b")]);
    assert_eq!(ask(&mut s).stop, StopReason::Length);
}
