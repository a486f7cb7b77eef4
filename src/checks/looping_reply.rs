//! `looping-reply`: a reply that repeats itself is stopped while it streams.
//!
//! A small model sometimes loops until the token limit: "The Godfather, The Godfather II,
//! … The Godfather XV" (512 tokens, 24 s), or an array argument of
//! `"heating systems", "heating systems", …` to the end of `num_predict`. Every token after
//! the loop starts is time the person waits for nothing. So the streamed text is watched:
//! once one pair of words fills a large share of the last words, the generation is stopped
//! and the text is cut after the first of those pairs (what came before the loop is kept;
//! the repairer closes what the cut left open).
//!
//! The measure is word pairs, not exact repetition, because the loops are not exact (the
//! numerals of the Godfather list change); it looks only at a fixed window of recent words,
//! so each new piece costs the same however long the reply is.
//!
//! A loop of more words than a pair and one more is caught as an exact repetition: the same
//! run of 4 to [`CYCLE_MAX`] words [`CYCLE_REPEATS`] times in a row. Small models write
//! those too: Gemma 3 270M the same call again and again (`calculate_tip` with the same
//! bill until the token limit), Qwen2.5-Coder 0.5B a list of five vegetables over and over,
//! both models a sentence of an answer; 37 of the 1,372 replies recorded in this round's
//! evaluations ran on that way, none of them a right call. A run of more words, up to a
//! paragraph ([`LONG_CYCLE_MAX`]), counts when it comes [`LONG_CYCLE_REPEATS`] times in a
//! row.
//!
//! A loop inside one word has no pairs: "Tampereessa on 1000000…" to the token limit
//! (Qwen, 242 zeros), `"expression": "12.5 * 4.0000…"` (Gemma). The same letter or
//! digit [`CHAR_RUN`] times in a row counts too: in the recorded replies every such run
//! was of zeros and went on to the token limit. A line of `-` or `=` is left alone: an
//! answer may draw one.

use std::collections::HashMap;
use std::ops::Range;

use super::{Check, CheckInfo, Effect, Reads};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "looping-reply",
    default_on: true,
    off_for: &[],
    reads: Reads::Stream,
    effect: Effect::Cuts,
    what: "stops a reply that repeats itself and cuts it where the loop began; an answer so cut ends at its last whole sentence",
    why: "small models can loop until the token limit, and the person waits for nothing",
    example: "`[\"heating systems\", \"heating systems\", ...]` is cut after the first; the same two calls written over and over are cut after their first time; the repairer closes the array",
    safety: "It acts on the reply's own text, never on a value the model finished: it cuts only where a phrase repeats enough times that the model is stuck. On by default.",
};

/// The `looping-reply` check.
#[derive(Debug)]
pub struct LoopingReply;

impl Check for LoopingReply {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn watch(&self) -> Option<Box<dyn StreamWatch>> {
        Some(Box::new(Repetition::default()))
    }
}

/// Watches a streaming reply: each piece of text as it arrives; a [`Loop`] stops the
/// generation and cuts the reply at [`Loop::keep`].
pub trait StreamWatch: Send {
    /// Takes the next piece; `Some` when the reply must stop.
    fn feed(&mut self, piece: &str) -> Option<Loop>;
}

impl StreamWatch for Repetition {
    fn feed(&mut self, piece: &str) -> Option<Loop> {
        Repetition::feed(self, piece)
    }
}

/// How many recent words are looked at.
pub const WINDOW: usize = 64;
/// How many times in a row one word pair must occur to count as a loop.
pub const REPEATS: usize = 12;
/// The most words from one occurrence of the pair to the next in a loop: the pair and
/// one word that changes ("The Godfather XIV, The Godfather XV").
pub const PERIOD: usize = 3;

/// The most words a loop caught as an exact repetition repeats: two calls of a tool with
/// two short arguments each.
pub const CYCLE_MAX: usize = 16;
/// How many times in a row a run of words must repeat exactly to count as a loop.
pub const CYCLE_REPEATS: usize = 4;
/// The most words a long loop repeats: a paragraph of five sentences. Qwen2.5-Coder 0.5B,
/// given the weather of two cities, answered with five sentences about five (three of
/// them made up) and wrote the same 66 words again and again to the token limit: 26 s.
pub const LONG_CYCLE_MAX: usize = 96;
/// How many times in a row a run of more than [`CYCLE_MAX`] words must repeat exactly to
/// count as a loop. Fewer than a short run's: the same 17 words or more, word for word,
/// three times over, is no sentence a person asked for (none of 389 replies recorded on
/// Qwen did it but that one).
pub const LONG_CYCLE_REPEATS: usize = 3;

/// How many times in a row one letter or digit must come to count as a loop: more than
/// an id or a hash made of one digit would need (an all-zero address is 40).
pub const CHAR_RUN: usize = 64;

/// Watches a streamed reply for a loop.
#[derive(Debug, Default)]
pub struct Repetition {
    text: String,
    /// The last character, how many times in a row it came, and where that run starts.
    run: Option<(char, usize, usize)>,
    /// Where each word seen so far starts and ends, up to the last complete word.
    words: Vec<Range<usize>>,
    /// How far `text` has been split into words.
    scanned: usize,
    tripped: bool,
}

/// A loop found in the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// The word pair that repeats, lower-cased.
    pub phrase: String,
    /// How many bytes of the reply to keep: up to the end of the pair's first occurrence
    /// in the window.
    pub keep: usize,
}

impl Loop {
    /// What was done on it, once the reply was cut to `kept` bytes.
    pub(crate) fn acted(&self, kept: usize) -> super::Acted {
        super::Acted {
            check: INFO.name,
            action: super::CheckAction::StopStream { kept },
            // A paragraph that loops is named by its beginning.
            why: format!(
                "the reply kept repeating \"{}\"",
                crate::http::shorten(&self.phrase, 120)
            ),
        }
    }
}

impl Repetition {
    /// Adds a piece of the reply; a loop the first time one is found.
    pub fn feed(&mut self, piece: &str) -> Option<Loop> {
        if self.tripped {
            return None;
        }
        let at = self.text.len();
        self.text.push_str(piece);
        if let Some(found) = self.char_run(at) {
            self.tripped = true;
            return Some(found);
        }
        let before = self.words.len();
        self.scan();
        if self.words.len() == before || self.words.len() < 2 * REPEATS {
            return None;
        }
        let found = self.check();
        self.tripped = found.is_some();
        found
    }

    /// A letter or digit come [`CHAR_RUN`] times in a row in the text from `at` on (with
    /// the run it continues): the reply is cut after its first.
    fn char_run(&mut self, at: usize) -> Option<Loop> {
        for (i, c) in self.text[at..].char_indices() {
            let run = match self.run {
                Some((last, n, start)) if last == c => (c, n + 1, start),
                _ => (c, 1, at + i),
            };
            self.run = Some(run);
            if run.1 >= CHAR_RUN && c.is_alphanumeric() {
                return Some(Loop {
                    phrase: c.to_string().repeat(8),
                    keep: run.2 + c.len_utf8(),
                });
            }
        }
        None
    }

    /// Splits the new text into words, leaving a word that may continue in the next piece.
    fn scan(&mut self) {
        let mut start = None;
        let mut end = self.scanned;
        for (i, c) in self.text[self.scanned..].char_indices() {
            let at = self.scanned + i;
            if c.is_alphanumeric() {
                start.get_or_insert(at);
            } else {
                if let Some(s) = start.take() {
                    self.words.push(s..at);
                }
                end = at + c.len_utf8();
            }
        }
        self.scanned = end;
        // Only the window, and the long loop's, are ever looked at again.
        let kept = WINDOW.max(LONG_CYCLE_MAX * LONG_CYCLE_REPEATS);
        if self.words.len() > 2 * kept {
            self.words.drain(..self.words.len() - kept);
        }
    }

    fn check(&self) -> Option<Loop> {
        // Lower-cased once for every rule: this runs on every piece of the stream. The
        // long loop's words reach furthest back; the others read the last `WINDOW`.
        let long = &self.words[self
            .words
            .len()
            .saturating_sub(LONG_CYCLE_MAX * LONG_CYCLE_REPEATS)..];
        let all: Vec<String> = long
            .iter()
            .map(|r| self.text[r.clone()].to_lowercase())
            .collect();
        let from = long.len().saturating_sub(WINDOW);
        let (window, words) = (&long[from..], &all[from..]);
        let mut at: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, pair) in words.windows(2).enumerate() {
            at.entry((&pair[0], &pair[1])).or_default().push(i);
        }
        at.into_iter()
            .filter_map(|(pair, places)| Some((pair, close_run(&places)?)))
            .min_by_key(|(_, first)| *first)
            .map(|((a, b), first)| Loop {
                phrase: format!("{a} {b}"),
                keep: window[first + 1].end,
            })
            .or_else(|| self.cycle(window, words, PERIOD + 1..=CYCLE_MAX, CYCLE_REPEATS))
            .or_else(|| {
                self.cycle(
                    long,
                    &all,
                    CYCLE_MAX + 1..=LONG_CYCLE_MAX,
                    LONG_CYCLE_REPEATS,
                )
            })
    }

    /// A run of words (of a length in `lengths`) the window ends with `times` times over,
    /// cut after its first occurrence (traced back as far as the repetition goes, so that
    /// what came before it, a first call with other values, is kept).
    fn cycle(
        &self,
        window: &[Range<usize>],
        words: &[String],
        lengths: std::ops::RangeInclusive<usize>,
        times: usize,
    ) -> Option<Loop> {
        let n = words.len();
        lengths
            .take_while(|p| p * times <= n)
            .find(|&p| (n - p * times..n - p).all(|i| words[i] == words[i + p]))
            .map(|p| {
                // "heating systems heating systems" repeats a pair: cut after the pair.
                let repeats = |d: usize| (n - p..n - d).all(|i| words[i] == words[i + d]);
                let p = (1..p).find(|&d| p % d == 0 && repeats(d)).unwrap_or(p);
                let mut start = n - p * times;
                while start > 0 && words[start - 1] == words[start - 1 + p] {
                    start -= 1;
                }
                // What closes the last word's value goes with it: `96}}` of a call, not
                // `96`, which the repairer would take for a number cut short.
                let end = window[start + p - 1].end;
                let closers = self.text[end..]
                    .find(|c| !matches!(c, '"' | '\'' | '}' | ']' | ')'))
                    .unwrap_or(self.text.len() - end);
                Loop {
                    phrase: words[start..start + p].join(" "),
                    keep: end + closers,
                }
            })
    }
}

/// Where a run of [`REPEATS`] occurrences starts whose neighbours are at most
/// [`PERIOD`] words apart. A loop repeats the same few words; a template list
/// ("day 1: 11 C, day 2: 12 C, …") repeats a pair too, but with its own words between.
fn close_run(places: &[usize]) -> Option<usize> {
    let mut start = *places.first()?;
    let mut run = 1;
    for w in places.windows(2) {
        if w[1] - w[0] <= PERIOD {
            run += 1;
        } else {
            start = w[1];
            run = 1;
        }
        if run >= REPEATS {
            return Some(start);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pieces: &[&str]) -> Option<(Loop, String)> {
        let mut w = Repetition::default();
        for p in pieces {
            if let Some(l) = w.feed(p) {
                let kept = w.text[..l.keep].to_string();
                return Some((l, kept));
            }
        }
        None
    }

    #[test]
    fn one_character_over_and_over_is_a_loop_and_an_id_of_one_digit_is_not() {
        let start = r#"{"kind": "final_answer", "content": "Tampereessa on 1"#;
        let zeros = "0".repeat(200);
        let text = format!("{start}{zeros}");
        let pieces: Vec<&str> = text
            .as_bytes()
            .chunks(3)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let (l, kept) = run(&pieces).expect("a loop");
        assert_eq!(kept, format!("{start}0"));
        assert_eq!(l.phrase, "00000000");
        let address = format!(
            r#"{{"address": "0x{}", "note": "{}{}"}}"#,
            "0".repeat(40),
            " ".repeat(100),
            "-".repeat(100)
        );
        assert_eq!(run(&[&address]), None);
    }

    #[test]
    fn a_list_whose_numerals_change_is_still_a_loop() {
        let numerals = [
            "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII", "XIV",
            "XV", "XVI", "XVII", "XVIII", "XIX", "XX", "XXI", "XXII",
        ];
        let mut pieces = vec!["My favourites are The Godfather".to_string()];
        pieces.extend(numerals.iter().map(|n| format!(", The Godfather {n}")));
        let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let (l, kept) = run(&pieces).expect("a loop");
        assert_eq!(l.phrase, "the godfather");
        assert!(
            kept.starts_with("My favourites are The Godfather"),
            "{kept}"
        );
    }

    /// Qwen2.5-Coder 0.5B's answer after the weather of Paris and Tokyo, as it streamed:
    /// five sentences, then the same five to the token limit.
    #[test]
    fn a_paragraph_written_again_and_again_is_a_loop() {
        let start = r#"{"kind": "final_answer", "content": "The weather in Tokyo is sunny with a temperature of 18 degrees Celsius and a humidity of 55%. "#;
        let paragraph = "The temperature in Paris is 11 degrees Celsius and the humidity is \
            82%. The temperature in New York is 20 degrees Celsius and the humidity is 45%. \
            The temperature in Sydney is 22 degrees Celsius and the humidity is 50%. The \
            temperature in Oslo is 21 degrees Celsius and the humidity is 45%. The \
            temperature in Tokyo is 18 degrees Celsius and the humidity is 55%. ";
        let text = format!("{start}{}", paragraph.repeat(8));
        let pieces: Vec<&str> = text.split_inclusive(' ').collect();
        let (l, kept) = run(&pieces).expect("a loop");
        // Stopped on its third time, and cut after the first: what came before is kept.
        assert!(kept.len() < start.len() + 2 * paragraph.len(), "{kept}");
        assert!(kept.starts_with(start), "{kept}");
        assert!(kept.contains("Oslo is 21 degrees"), "{kept}");
        assert!(
            !kept[start.len()..].contains("55%. The temperature in Paris"),
            "{kept}"
        );
        assert!(l.phrase.split(' ').count() > CYCLE_MAX, "{}", l.phrase);
        // The line a person reads names it by its beginning.
        let line = crate::run::events::Event::from(l.acted(kept.len()))
            .check_line()
            .unwrap();
        assert!(line.chars().count() < 220, "{line}");
    }

    #[test]
    fn a_paragraph_said_twice_is_not_a_loop() {
        // A person may be told the same thing twice; three times word for word is a loop.
        let paragraph = "Your order A1234 left the warehouse in Leipzig on Monday and is \
            expected at your door on Thursday between nine and twelve in the morning. ";
        let text = format!(
            "Here is the status. {}{}Anything else?",
            paragraph, paragraph
        );
        assert_eq!(run(&text.split_inclusive(' ').collect::<Vec<_>>()), None);
        // Nor a long list of calls with values of their own.
        let calls = (0..40)
            .map(|i| format!(r#"{{"tool": "get_weather", "arguments": {{"city": "City {i}", "unit": "celsius"}}}}, "#))
            .collect::<String>();
        assert_eq!(run(&[&calls]), None);
    }

    #[test]
    fn ordinary_prose_and_varied_lists_are_not_loops() {
        let prose = "The weather in Paris is mild today, with a light breeze from the west \
            and a few clouds in the afternoon. Tomorrow brings rain in the morning, clearing \
            by noon; the weekend looks sunny and warm, good for a walk along the river or a \
            visit to the gardens. Temperatures stay between twelve and eighteen degrees, and \
            the wind drops on Sunday. Take an umbrella on Monday morning if you go out early.";
        assert_eq!(run(&prose.split_inclusive(' ').collect::<Vec<_>>()), None);
        assert_eq!(
            run(&["So it goes, and it goes on. ".repeat(3).as_str()]),
            None
        );
        let days = (1..=40)
            .map(|d| format!("day {d}: {} C, ", 10 + d % 7))
            .collect::<String>();
        assert_eq!(run(&[&days]), None);
    }

    #[test]
    fn the_same_call_over_and_over_is_cut_after_its_first_time() {
        let first = r#"{"kind": "tool_calls", "calls": [{"tool": "calculate_tip", "arguments": {"bill_amount": 120, "people": 4}}"#;
        let again =
            r#", {"tool": "calculate_tip", "arguments": {"bill_amount": 120, "people": 1000000}}"#;
        let mut pieces = vec![first];
        pieces.extend([again; 10]);
        let (l, kept) = run(&pieces).expect("a loop");
        assert_eq!(
            l.phrase,
            "tool calculate tip arguments bill amount 120 people 1000000"
        );
        // The first call, with other values, and the first of the repeated ones are kept,
        // closed.
        assert_eq!(kept, format!("{first}{again}"));
    }

    #[test]
    fn a_sentence_an_answer_repeats_is_cut_after_its_first_time() {
        let sentence = "The sea is a vast expanse of water stretching to the horizon. ";
        let answer = format!("Here is a poem. {}", sentence.repeat(6));
        let (l, kept) = run(&answer.split_inclusive(' ').collect::<Vec<_>>()).expect("a loop");
        assert_eq!(l.phrase.split(' ').count(), 12);
        assert_eq!(
            kept,
            "Here is a poem. The sea is a vast expanse of water stretching to the horizon"
        );
    }

    #[test]
    fn calls_whose_values_change_or_a_run_said_three_times_are_not_loops() {
        let calls: String = ["Paris", "Tokyo", "Berlin", "Madrid", "Rome", "Oslo"]
            .iter()
            .map(|c| format!(r#"{{"tool": "get_weather", "arguments": {{"city": "{c}"}}}}, "#))
            .collect();
        assert_eq!(run(&[&calls]), None);
        let thrice = "one two three four five. ".repeat(3);
        assert_eq!(
            run(&[&format!(
                "{thrice} and then something else entirely, as people write"
            )]),
            None
        );
    }

    #[test]
    fn a_word_split_across_pieces_counts_once() {
        let mut w = Repetition::default();
        w.feed("hea");
        w.feed("ting sys");
        w.feed("tems ");
        assert_eq!(w.words.len(), 2);
        assert_eq!(&w.text[w.words[0].clone()], "heating");
    }
}

/// The examples of this module's docs, as tests: its items are crate-private, so
/// rustdoc cannot run them.
#[cfg(test)]
mod examples {
    #[test]
    fn a_loop_is_cut_where_it_begins() {
        use crate::checks::looping_reply::Repetition;

        let mut watch = Repetition::default();
        let mut stopped = None;
        let head = r#"{"materials": ["bed", "floor""#;
        assert!(watch.feed(head).is_none());
        for _ in 0..40 {
            if let Some(loop_) = watch.feed(r#", "heating systems""#) {
                stopped = Some(loop_);
                break;
            }
        }
        let loop_ = stopped.expect("the loop is noticed");
        assert_eq!(loop_.phrase, "heating systems");
        assert_eq!(
            &watch.text[..loop_.keep],
            r#"{"materials": ["bed", "floor", "heating systems""#
        );
    }
}
