//! The final answer's text, decoded from the model's reply while it streams.
//!
//! The model writes a JSON turn; the person wants the answer, not the JSON, and on a CPU
//! a 200-token answer takes five to eight seconds to write. [`AnswerStream`] reads the
//! reply piece by piece and gives back the decoded text of the top-level `content` string
//! once `kind` says `final_answer` (before that it holds the text back: with `thought`
//! first, `content` could come before `kind`, and a `tool_call` or a `clarify` prints
//! nothing).
//!
//! It is a small state machine over characters, so the work for each piece is
//! proportional to the piece: it never re-parses what came before, whatever the escape
//! sequences or multi-byte characters split across pieces. Whether the whole reply is a
//! valid turn is decided afterwards by the repairer and the schema, as for any reply; the
//! caller compares what was shown with the answer that results
//! (`crate::run::orchestrator`). Text that could still be the prompt's placeholder for
//! an answer, which the schema refuses, is held until it is not; so, where `example-copy`
//! is on ([`AnswerStream::holding_example`], [`AnswerStream::holding_descriptions`]), is
//! text that could be turning into the prompt's example expression or a tool's
//! description, which that check refuses as an answer.

use crate::turn::placeholder::may_be_placeholder;
use crate::turn::prompt::{as_words, example_in, example_may_begin, is_description};
#[cfg(doc)]
use crate::turn::reply::ANSWER_PLACEHOLDER;

/// Where the scanner is inside the JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Outside any string.
    Structure,
    /// Inside a string; `escape` after a backslash; `hex` collects a `\u` escape.
    Str,
    Escape,
    Hex,
}

/// What the string being read is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A key of the top-level object.
    Key,
    /// The value of the top-level `kind`.
    Kind,
    /// The value of the top-level `content`.
    Content,
    /// Anything else.
    Other,
}

/// Decodes the answer text out of a streamed reply.
///
/// ```
/// use toolloop::turn::answer_stream::AnswerStream;
///
/// let mut s = AnswerStream::default();
/// let mut shown = String::new();
/// for piece in [r#"{"kind": "final_an"#, r#"swer", "thought": "", "content": "Caf"#, r#"\u00e9 \"ok\""}"#] {
///     shown.push_str(&s.feed(piece));
/// }
/// assert_eq!(shown, "Café \"ok\"");
///
/// let mut call = AnswerStream::default();
/// assert_eq!(call.feed(r#"{"kind": "tool_call", "content": "no"}"#), "");
/// ```
#[derive(Debug)]
pub struct AnswerStream {
    at: At,
    role: Role,
    depth: u32,
    /// At depth 1, whether the next string is a key (after `{` or `,`) or a value.
    expect_key: bool,
    key: String,
    kind: String,
    /// Decoded content not shown yet (while the kind is unknown).
    held: String,
    hex: String,
    /// A high surrogate waiting for its low half.
    high: Option<u16>,
    /// `Some(true)` once the kind is `final_answer`, `Some(false)` once it is another.
    is_answer: Option<bool>,
    shown: usize,
    /// Answer text held while all of it could still be the prompt's placeholder
    /// ([`ANSWER_PLACEHOLDER`]), which the schema refuses as an answer; `None` once it
    /// cannot be.
    doubted: Option<String>,
    /// Answer text held while it could be turning into the prompt's example expression
    /// ([`AnswerStream::holding_example`]); `None` when such text is not held.
    example: Option<String>,
    /// The tools' descriptions, as words ([`as_words`]), an answer is held against
    /// ([`AnswerStream::holding_descriptions`]).
    descriptions: Vec<String>,
    /// The answer's text so far while all of it could still be one of `descriptions`;
    /// `None` once it cannot, or when none is held against.
    describing: Option<String>,
    /// Answer text held while `describing`.
    described: String,
    /// Bytes of the reply read so far.
    read: usize,
    /// Where the answer's content string closed: the byte just after its quote.
    ended: Option<usize>,
}

impl Default for AnswerStream {
    fn default() -> Self {
        AnswerStream {
            at: At::Structure,
            role: Role::Other,
            depth: 0,
            expect_key: false,
            key: String::new(),
            kind: String::new(),
            held: String::new(),
            hex: String::new(),
            high: None,
            is_answer: None,
            shown: 0,
            doubted: Some(String::new()),
            example: None,
            descriptions: Vec::new(),
            describing: None,
            described: String::new(),
            read: 0,
            ended: None,
        }
    }
}

/// The longest key or kind kept: longer ones are not `kind` or `content` anyway.
const SHORT: usize = 32;

impl AnswerStream {
    /// A stream that also holds answer text while it could be turning into the prompt's
    /// example expression (`12.5 * 4`), and from there on once it is written whole:
    /// `example-copy` refuses such an answer where nobody gave 12.5, and a refused answer
    /// is withdrawn, so it is better never shown. Held text an accepted answer keeps is
    /// given with the rest once the reply is judged (`crate::run::orchestrator`).
    ///
    /// ```
    /// use toolloop::turn::answer_stream::AnswerStream;
    ///
    /// let mut s = AnswerStream::holding_example();
    /// let shown: String = [r#"{"kind": "final_answer", "content": "Sure: 12."#, r#"5 * 4 = 50"}"#]
    ///     .iter()
    ///     .map(|p| s.feed(p))
    ///     .collect();
    /// assert_eq!(shown, "Sure: ");
    /// ```
    pub fn holding_example() -> Self {
        AnswerStream {
            example: Some(String::new()),
            ..AnswerStream::default()
        }
    }

    /// Also holds answer text while all of it could still be one of `descriptions` (the
    /// tools'), and once it is one whole: `example-copy` refuses an answer that is a
    /// tool's description word for word, so it is better never shown.
    ///
    /// ```
    /// use toolloop::turn::answer_stream::AnswerStream;
    ///
    /// let clock = ["The current date and time, in UTC."];
    /// let feed = |pieces: &[&str]| {
    ///     let mut s = AnswerStream::default().holding_descriptions(clock);
    ///     pieces.iter().map(|p| s.feed(p)).collect::<String>()
    /// };
    /// let begin = r#"{"kind": "final_answer", "content": "The current "#;
    /// assert_eq!(feed(&[begin, r#"date and time, in UTC"}"#]), "");
    /// assert_eq!(feed(&[begin]), "");
    /// assert_eq!(feed(&[begin, "temperature"]), "The current temperature");
    /// ```
    pub fn holding_descriptions<'a>(
        mut self,
        descriptions: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        self.descriptions = descriptions
            .into_iter()
            .map(as_words)
            .filter(|d| d.split(' ').count() >= 3)
            .collect();
        self.describing = (!self.descriptions.is_empty()).then(String::new);
        self
    }

    /// Takes the next piece of the reply; the answer text it completes (often empty).
    pub fn feed(&mut self, piece: &str) -> String {
        let mut out = String::new();
        for c in piece.chars() {
            self.read += c.len_utf8();
            self.step(c, &mut out);
        }
        if self.is_answer == Some(true) && !self.held.is_empty() {
            out.insert_str(0, &std::mem::take(&mut self.held));
        }
        let describing = self.describing.as_mut().map(|so_far| {
            so_far.push_str(&out);
            so_far.clone()
        });
        if let Some(doubted) = &mut self.doubted {
            doubted.push_str(&std::mem::take(&mut out));
            if !may_be_placeholder(doubted) {
                out = self.doubted.take().unwrap_or_default();
            }
        }
        if let Some(pending) = &mut self.example {
            pending.push_str(&std::mem::take(&mut out));
            // Once the content has closed, what was held cannot grow into the example.
            out = release(pending, self.ended.is_some());
        }
        if let Some(so_far) = describing {
            self.described.push_str(&std::mem::take(&mut out));
            let words = as_words(&so_far);
            let closed = self.ended.is_some();
            let may_be = self.descriptions.iter().any(|d| match closed {
                true => is_description(&so_far, d),
                false => d.starts_with(&words),
            });
            if !may_be {
                self.describing = None;
                out = std::mem::take(&mut self.described);
            }
        }
        self.shown += out.len();
        out
    }

    /// Bytes of answer text given out so far.
    pub fn shown(&self) -> usize {
        self.shown
    }

    /// Whether the reply has said it is a final answer.
    pub fn is_answer(&self) -> bool {
        self.is_answer == Some(true)
    }

    /// Where the final answer's `content` string closed in the reply read so far: the
    /// byte just after its closing quote. `None` before that, and for a reply that is not
    /// a final answer or whose kind came after its content.
    pub fn ended(&self) -> Option<usize> {
        self.ended
    }

    fn text(&mut self, c: char, out: &mut String) {
        match self.role {
            Role::Key if self.key.len() < SHORT => self.key.push(c),
            Role::Kind if self.kind.len() < SHORT => self.kind.push(c),
            Role::Content => match self.is_answer {
                Some(true) => out.push(c),
                None => self.held.push(c),
                Some(false) => {}
            },
            _ => {}
        }
    }

    fn step(&mut self, c: char, out: &mut String) {
        match self.at {
            At::Structure => self.structure(c),
            At::Str => match c {
                '"' => self.end_string(),
                '\\' => self.at = At::Escape,
                c => {
                    self.flush_high(out);
                    self.text(c, out);
                }
            },
            At::Escape => {
                self.at = At::Str;
                let decoded = match c {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'u' => {
                        self.at = At::Hex;
                        self.hex.clear();
                        return;
                    }
                    other => other,
                };
                self.flush_high(out);
                self.text(decoded, out);
            }
            At::Hex => {
                self.hex.push(c);
                if self.hex.len() < 4 {
                    return;
                }
                self.at = At::Str;
                let Ok(unit) = u16::from_str_radix(&self.hex, 16) else {
                    return;
                };
                match (self.high.take(), unit) {
                    (None, 0xD800..=0xDBFF) => self.high = Some(unit),
                    (Some(h), 0xDC00..=0xDFFF) => {
                        let cp =
                            0x10000 + ((u32::from(h) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                        self.text(char::from_u32(cp).unwrap_or('\u{FFFD}'), out);
                    }
                    (high, unit) => {
                        if high.is_some() {
                            self.text('\u{FFFD}', out);
                        }
                        let c = char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}');
                        self.text(c, out);
                    }
                }
            }
        }
    }

    /// A lone high surrogate followed by anything but its low half.
    fn flush_high(&mut self, out: &mut String) {
        if self.high.take().is_some() {
            self.text('\u{FFFD}', out);
        }
    }

    fn structure(&mut self, c: char) {
        match c {
            '{' | '[' => {
                self.depth += 1;
                self.expect_key = self.depth == 1 && c == '{';
            }
            '}' | ']' => {
                self.depth = self.depth.saturating_sub(1);
                self.expect_key = false;
            }
            ',' if self.depth == 1 => self.expect_key = true,
            ':' if self.depth == 1 => self.expect_key = false,
            '"' => {
                self.at = At::Str;
                self.role = match (self.depth, self.expect_key, self.key.as_str()) {
                    (1, true, _) => {
                        self.key.clear();
                        Role::Key
                    }
                    (1, false, "kind") => {
                        self.kind.clear();
                        Role::Kind
                    }
                    (1, false, "content") => Role::Content,
                    _ => Role::Other,
                };
            }
            _ => {}
        }
    }

    fn end_string(&mut self) {
        self.at = At::Structure;
        if self.role == Role::Content && self.is_answer == Some(true) && self.ended.is_none() {
            self.ended = Some(self.read);
        }
        if self.role == Role::Kind {
            let answer = self.kind == "final_answer";
            self.is_answer = Some(answer);
            if !answer {
                self.held.clear();
            }
        }
        if self.role != Role::Key && self.depth == 1 {
            self.key.clear();
        }
        self.role = Role::Other;
    }
}

/// Where the final answer's `content` closes in `text`, a reply as far as it came: the
/// byte just after the string's closing quote ([`AnswerStream::ended`]). What the schema
/// forces after it is written by nobody's choice, so an answer's reply may end there
/// (`crate::backend::GenOptions::answer_end`).
///
/// ```
/// use toolloop::turn::answer_stream::content_end;
///
/// let text = r#"{"kind": "final_answer", "content": "Paris \"et\" Lyon","#;
/// assert_eq!(content_end(text), Some(text.len() - 1));
/// assert_eq!(content_end(r#"{"kind": "final_answer", "content": "Par"#), None);
/// assert_eq!(content_end(r#"{"kind": "tool_call", "content": "x","#), None);
/// ```
pub fn content_end(text: &str) -> Option<usize> {
    let mut s = AnswerStream::default();
    s.feed(text);
    s.ended()
}

/// Of `pending` answer text, what may be shown now: all of it but what runs from where
/// it writes the prompt's example (held until the reply is judged), or the tail that
/// could still grow into the example while the content is still `open`. Read again on
/// each piece, so that `12.5 * 4` that goes on as `12.5 * 45` is let go.
fn release(pending: &mut String, closed: bool) -> String {
    let at = example_in(pending)
        .map(|r| r.start)
        .or_else(|| example_may_begin(pending).filter(|_| !closed));
    match at {
        Some(i) => {
            let kept = pending.split_off(i);
            std::mem::replace(pending, kept)
        }
        None => std::mem::take(pending),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(pieces: &[&str]) -> String {
        let mut s = AnswerStream::default();
        pieces.iter().map(|p| s.feed(p)).collect()
    }

    /// Every way of cutting the reply in two gives the same text.
    fn every_cut(reply: &str, want: &str) {
        let chars: Vec<(usize, char)> = reply.char_indices().collect();
        for (i, _) in chars {
            assert_eq!(all(&[&reply[..i], &reply[i..]]), want, "cut at {i}");
        }
        let one_by_one: Vec<String> = reply.chars().map(String::from).collect();
        let refs: Vec<&str> = one_by_one.iter().map(String::as_str).collect();
        assert_eq!(all(&refs), want);
    }

    /// What a stream `make` gives shows of `reply` cut in two at each character, each
    /// different text once.
    fn held_at_every_cut(make: impl Fn() -> AnswerStream, reply: &str) -> Vec<String> {
        let mut cuts = Vec::new();
        for (i, _) in reply.char_indices() {
            let mut s = make();
            cuts.push(s.feed(&reply[..i]) + &s.feed(&reply[i..]));
        }
        cuts.dedup();
        cuts
    }

    #[test]
    fn escapes_and_multibyte_characters_split_anywhere() {
        every_cut(
            r#"{"kind": "final_answer", "thought": "a \"b\" c", "content": "Tokyo: 18 °C\n\"sunny\" \u00e9 \ud83d\ude00 日本 \\ end"}"#,
            "Tokyo: 18 °C\n\"sunny\" é 😀 日本 \\ end",
        );
    }

    #[test]
    fn the_prompts_placeholder_for_an_answer_is_never_shown() {
        every_cut(
            r#"{"kind": "final_answer", "content": "<the answer for the user>", "thought": "<brief reasoning>"}"#,
            "",
        );
        every_cut(
            r#"{"kind": "final_answer", "content": "The answer for the user.", "thought": ""}"#,
            "",
        );
        // Its words and more are an answer, shown whole.
        every_cut(
            r#"{"kind": "final_answer", "content": "The answer for the user is 50."}"#,
            "The answer for the user is 50.",
        );
        // Text that only begins like it is shown once it parts from it, whole.
        every_cut(
            r#"{"kind": "final_answer", "content": "<the answer is 4>"}"#,
            "<the answer is 4>",
        );
        every_cut(
            r#"{"kind": "final_answer", "content": "<b>4</b>"}"#,
            "<b>4</b>",
        );
    }

    #[test]
    fn the_prompts_example_is_held_from_where_it_could_begin() {
        let shown = |reply: &str| held_at_every_cut(AnswerStream::holding_example, reply);
        // However the reply is cut, nothing from the example on is shown.
        let copy = r#"{"kind": "final_answer", "content": "Tampereessa on 12.5 × 4 = 50"}"#;
        assert_eq!(shown(copy), ["Tampereessa on "]);
        // Text that only begins like it is shown once it parts from it.
        for answer in [
            "It is 12.50 euros",
            "112.5 * 4 = 450",
            "Sure, 12 eggs",
            "Take 4 * 12",
            "12.5 * 45 = 562.5",
        ] {
            let reply = format!(r#"{{"kind": "final_answer", "content": "{answer}"}}"#);
            assert_eq!(shown(&reply), [answer], "{answer}");
        }
        // A stream that does not hold it shows it as written.
        assert_eq!(all(&[copy]), "Tampereessa on 12.5 × 4 = 50");
    }

    /// An answer that is a tool's description word for word is never shown, however the
    /// reply is cut; one that only begins like it is shown whole, and one that stops
    /// part-way is shown once its content closes.
    #[test]
    fn a_tools_description_is_held_while_the_answer_could_be_it() {
        let clock = "The current date and time, in UTC or at a UTC offset.";
        let stream = || AnswerStream::holding_example().holding_descriptions([clock, "Short one."]);
        let shown = |reply: &str| held_at_every_cut(stream, reply);
        for copy in [
            clock,
            "the current date and time,  in UTC or at a UTC offset",
        ] {
            let reply = format!(r#"{{"kind": "final_answer", "content": "{copy}"}}"#);
            assert_eq!(shown(&reply), [""], "{copy}");
        }
        for answer in [
            "The current temperature in Paris is 11°C.",
            "The current date and time, in UTC",
            "The current date and time, in UTC or at a UTC offset. It is 14:00.",
            "Short one.",
        ] {
            let reply = format!(r#"{{"kind": "final_answer", "content": "{answer}"}}"#);
            assert_eq!(shown(&reply), [answer], "{answer}");
        }
    }

    #[test]
    fn content_before_kind_is_held_until_the_kind_is_known() {
        every_cut(
            r#"{"thought": "x", "content": "held", "kind": "final_answer"}"#,
            "held",
        );
        assert_eq!(
            all(&[r#"{"content": "secret", "kind": "clarify", "question": "?"}"#]),
            ""
        );
    }

    #[test]
    fn nested_content_keys_and_other_kinds_show_nothing() {
        assert_eq!(
            all(&[
                r#"{"kind": "tool_call", "tool": "t", "arguments": {"content": "no", "kind": "final_answer"}}"#
            ]),
            ""
        );
        assert_eq!(
            all(&[r#"{"kind": "final_answer", "meta": {"content": "no"}, "content": "yes"}"#]),
            "yes"
        );
    }

    #[test]
    fn a_lone_surrogate_becomes_a_replacement_character() {
        assert_eq!(
            all(&[r#"{"kind": "final_answer", "content": "a\ud83db"}"#]),
            "a\u{FFFD}b"
        );
    }
}
