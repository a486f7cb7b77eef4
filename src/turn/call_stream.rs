//! The calls of a turn of several, each as soon as the model has closed it, read from the
//! reply while it streams.
//!
//! A turn of several calls is written one call after another, and on a CPU each takes a
//! second or two: a person asking for the weather in three cities waits three times as long
//! for the turn as for its first call. [`CallStream`] reads the reply piece by piece and
//! gives back each element of the top-level `calls` list once its object closes, so that
//! the person sees which calls are written while the model writes the rest. It judges
//! nothing: whether the turn is valid, and which of its calls run, is decided on the whole
//! reply afterwards, as for any reply.
//!
//! Written by hand, like [`super::answer_stream`]: a JSON parser takes whole values, and
//! this needs to know where in an unfinished one the text has come to. It is a state
//! machine over bytes, so each piece costs what it is long; quotes, backslashes and
//! brackets are ASCII and never part of a multi-byte character, so a piece cut inside one
//! changes nothing.

use serde_json::Value;

/// Where the scanner is inside the JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum At {
    /// Outside any string.
    #[default]
    Structure,
    /// Inside a string.
    Str,
    /// Inside a string, after a backslash.
    Escape,
}

/// Finds the calls of a `tool_calls` turn as they are written.
#[derive(Debug, Default)]
pub struct CallStream {
    at: At,
    /// How many objects and lists are open.
    depth: u32,
    /// At the top level, the next string is a key.
    key_next: bool,
    /// The top-level key being read, while one is.
    reading_key: bool,
    key: Vec<u8>,
    /// Inside the top-level `calls` list.
    in_calls: bool,
    /// The text of the call being written, from its `{`.
    call: Option<Vec<u8>>,
}

impl CallStream {
    /// Feeds the next piece of the reply; returns each call whose object closed in it,
    /// as the model wrote it (a call that is not valid JSON on its own is left out).
    pub fn feed(&mut self, piece: &str) -> Vec<Value> {
        let mut closed = Vec::new();
        for &b in piece.as_bytes() {
            if let Some(call) = &mut self.call {
                call.push(b);
            }
            match self.at {
                At::Escape => self.at = At::Str,
                At::Str => match b {
                    b'\\' => self.at = At::Escape,
                    b'"' => {
                        self.at = At::Structure;
                        self.reading_key = false;
                    }
                    _ if self.reading_key => self.key.push(b),
                    _ => {}
                },
                At::Structure => self.structure(b, &mut closed),
            }
        }
        closed
    }

    fn structure(&mut self, b: u8, closed: &mut Vec<Value>) {
        match b {
            b'"' => {
                self.at = At::Str;
                if self.depth == 1 && self.key_next {
                    self.key_next = false;
                    self.reading_key = true;
                    self.key.clear();
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                match (b, self.depth) {
                    (b'{', 1) => self.key_next = true,
                    (b'[', 2) if self.key == b"calls" => self.in_calls = true,
                    (b'{', 3) if self.in_calls => self.call = Some(vec![b'{']),
                    _ => {}
                }
            }
            b'}' | b']' => {
                if b == b'}'
                    && self.depth == 3
                    && let Some(text) = self.call.take()
                    && let Ok(v @ Value::Object(_)) = serde_json::from_slice(&text)
                {
                    closed.push(v);
                }
                if b == b']' && self.depth == 2 {
                    self.in_calls = false;
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b',' if self.depth == 1 => self.key_next = true,
            _ => {}
        }
    }

    /// The tool a written call names (`tool`, or `name` as some models write it).
    pub fn tool(call: &Value) -> Option<&str> {
        call.get("tool")
            .or_else(|| call.get("name"))
            .and_then(Value::as_str)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_call_comes_out_once_it_is_closed() {
        let mut s = super::CallStream::default();
        let mut written = Vec::new();
        for piece in [
            r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "get_weather", "argu"#,
            r#"ments": {"city": "Paris"}}, {"tool": "get_weather", "#,
            r#""arguments": {"city": "Rome"}}]}"#,
        ] {
            written.extend(s.feed(piece));
        }
        assert_eq!(written.len(), 2);
        assert_eq!(written[0]["arguments"]["city"], "Paris");
        assert_eq!(super::CallStream::tool(&written[1]), Some("get_weather"));
    }

    use super::*;

    const TURN: &str = r#"{"kind": "tool_calls", "thought": "two cities, \"calls\": [{}]", "calls": [{"tool": "get_weather", "arguments": {"city": "São Paulo", "note": "a } and a \" and [x]"}}, {"tool": "calculator", "arguments": {"expression": "2*3"}}]}"#;

    fn tools(calls: &[Value]) -> Vec<&str> {
        calls.iter().filter_map(CallStream::tool).collect()
    }

    #[test]
    fn every_call_comes_once_whatever_the_pieces() {
        // Cut at every byte that starts a character: each call, once, in order, whole.
        let cuts: Vec<usize> = (0..=TURN.len())
            .filter(|&i| TURN.is_char_boundary(i))
            .collect();
        for &cut in &cuts {
            let mut s = CallStream::default();
            let mut calls = s.feed(&TURN[..cut]);
            calls.extend(s.feed(&TURN[cut..]));
            assert_eq!(tools(&calls), ["get_weather", "calculator"], "cut at {cut}");
            assert_eq!(calls[0]["arguments"]["note"], "a } and a \" and [x]");
            assert_eq!(calls[0]["arguments"]["city"], "São Paulo");
        }
        // One byte at a time (a character cut in the middle goes in its bytes' pieces).
        let mut s = CallStream::default();
        let mut calls = Vec::new();
        let mut at = 0;
        while at < TURN.len() {
            let next = (at + 1..=TURN.len())
                .find(|&i| TURN.is_char_boundary(i))
                .unwrap();
            calls.extend(s.feed(&TURN[at..next]));
            at = next;
        }
        assert_eq!(tools(&calls), ["get_weather", "calculator"]);
    }

    #[test]
    fn a_call_is_given_when_it_closes_not_before() {
        let mut s = CallStream::default();
        let first_closes = TURN.find("}}, {").unwrap() + 2;
        assert!(s.feed(&TURN[..first_closes - 1]).is_empty());
        assert_eq!(
            tools(&s.feed(&TURN[first_closes - 1..first_closes])),
            ["get_weather"]
        );
        assert!(s.feed(&TURN[first_closes..TURN.len() - 3]).is_empty());
        assert_eq!(tools(&s.feed(&TURN[TURN.len() - 3..])), ["calculator"]);
    }

    #[test]
    fn other_turns_and_other_lists_give_nothing() {
        for text in [
            r#"{"kind": "tool_call", "thought": "", "tool": "calculator", "arguments": {"expression": "2+2"}}"#,
            r#"{"kind": "final_answer", "thought": "", "content": "calls: [{\"tool\": \"x\"}]"}"#,
            r#"{"kind": "clarify", "question": "which?", "missing_params": ["city"]}"#,
            r#"{"kind": "tool_calls", "thought": "", "other": [{"tool": "x", "arguments": {}}]}"#,
            r#"{"kind": "tool_calls", "calls": [{"tool": "x", "arguments": {"calls": [{"tool": "y"}]}}"#,
        ] {
            let mut s = CallStream::default();
            let calls = s.feed(text);
            assert!(calls.len() <= 1, "{text}: {calls:?}");
            assert!(tools(&calls).iter().all(|t| *t == "x"), "{text}: {calls:?}");
            if !text.contains(r#""tool_calls", "calls""#) {
                assert!(calls.is_empty(), "{text}: {calls:?}");
            }
        }
    }

    #[test]
    fn a_call_cut_off_or_broken_is_left_out() {
        let mut s = CallStream::default();
        assert!(
            s.feed(r#"{"kind": "tool_calls", "calls": [{"tool": "a", "argu"#)
                .is_empty()
        );
        let mut s = CallStream::default();
        let calls =
            s.feed(r#"{"kind": "tool_calls", "calls": [{"tool": "a" "b"}, {"tool": "c"}]}"#);
        assert_eq!(tools(&calls), ["c"]);
    }
}
