//! Where a run's tokens and seconds went: how many requests reached the model, how much
//! of each prompt the server evaluated and how much it reused from its cache, what the
//! generated tokens were spent on, and how the wall time splits between the model, the
//! tools, the person and toolloop itself.
//!
//! A small model on a laptop spends seconds on every token, so "the run took 9 s" says
//! nothing about what to cut; these figures do. `--json` and the transcript carry them per
//! run, `toolloop eval` per category, `-v` per model reply.

use serde::{Deserialize, Serialize};

use crate::message::{ChatReply, Usage};

/// Generated tokens by what they were spent on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generated {
    /// The `thought` of every turn.
    pub thought: u64,
    /// The arguments of calls (`arguments`, and `calls` of a turn of several).
    pub arguments: u64,
    /// The text of an answer or of a question to the person (`content`, `question`,
    /// `missing_params`).
    pub answer: u64,
    /// The rest of a turn: keys, the kind, tool names, punctuation.
    pub structure: u64,
    /// Answers to the fit question (`tool-fit`).
    pub fit: u64,
}

impl Generated {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.thought + self.arguments + self.answer + self.structure + self.fit
    }

    /// Adds another reply's counts.
    pub fn add(&mut self, other: &Generated) {
        self.thought += other.thought;
        self.arguments += other.arguments;
        self.answer += other.answer;
        self.structure += other.structure;
        self.fit += other.fit;
    }

    /// A turn's generated tokens by field. With per-token log-probabilities (which the
    /// decision step asks for) each token counts where it begins in the text; without,
    /// the server's count is shared out by the characters of each field.
    pub fn of_turn(reply: &ChatReply) -> Generated {
        let spans = field_spans(&reply.text);
        let mut counts = [0u64; 4];
        let spelled = reply.text_tokens();
        let tokens: usize = spelled.iter().map(|t| t.token.len()).sum();
        let spells_from = |mut at: usize| {
            spelled.iter().all(|t| {
                let here = reply.text.get(at..at + t.token.len()) == Some(t.token.as_str());
                at += t.token.len();
                here
            })
        };
        // The tokens spell the text after the beginning the server was given
        // ([`crate::backend::GenOptions::prefill`]); an answer completed with what its
        // schema forces ([`crate::backend::GenOptions::answer_end`]) has text after them.
        // A reply that does not say what it was given is tried from either end.
        let from = match reply.text.len().saturating_sub(tokens) {
            0 => Some(0),
            unsaid => [reply.given, 0, unsaid]
                .into_iter()
                .find(|&at| spells_from(at)),
        };
        if let (false, Some(from)) = (spelled.is_empty(), from) {
            let mut at = from;
            for t in spelled {
                counts[part_at(&spans, at)] += 1;
                at += t.token.len();
            }
        } else {
            let mut chars = [0u64; 4];
            for (i, c) in reply.text.char_indices() {
                if !c.is_whitespace() {
                    chars[part_at(&spans, i)] += 1;
                }
            }
            let all: u64 = chars.iter().sum::<u64>().max(1);
            let n = reply.usage.completion_tokens;
            for p in 0..3 {
                counts[p] = n * chars[p] / all;
            }
            counts[3] = n - counts[..3].iter().sum::<u64>();
        }
        Generated {
            thought: counts[THOUGHT],
            arguments: counts[ARGUMENTS],
            answer: counts[ANSWER],
            structure: counts[STRUCTURE],
            fit: 0,
        }
    }
}

const THOUGHT: usize = 0;
const ARGUMENTS: usize = 1;
const ANSWER: usize = 2;
const STRUCTURE: usize = 3;

/// The part of a turn that a top-level key's value belongs to.
fn part_of(key: &str) -> usize {
    match key {
        "thought" => THOUGHT,
        "arguments" | "calls" => ARGUMENTS,
        "content" | "question" | "missing_params" => ANSWER,
        _ => STRUCTURE,
    }
}

fn part_at(spans: &[(usize, usize, usize)], at: usize) -> usize {
    spans
        .iter()
        .find(|(start, end, _)| (*start..*end).contains(&at))
        .map_or(STRUCTURE, |s| s.2)
}

/// The byte spans of the values of a turn's top-level keys, with the part each belongs to.
/// Written by hand: a JSON parser gives values, not where they are in the text, and a turn
/// may be broken (cut at the token limit), where this still finds the spans it can.
fn field_spans(text: &str) -> Vec<(usize, usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let (mut depth, mut i) = (0usize, 0usize);
    let mut key: Option<String> = None;
    let mut value_start: Option<(usize, usize)> = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let end = (i + 1).min(bytes.len());
                if depth == 1 && value_start.is_none() {
                    key = Some(text[start + 1..end.saturating_sub(1).max(start + 1)].to_string());
                }
            }
            b':' if depth == 1 => {
                if let Some(k) = key.take() {
                    value_start = Some((i + 1, part_of(&k)));
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                if depth == 1
                    && let Some((start, part)) = value_start.take()
                {
                    spans.push((start, i, part));
                }
                depth = depth.saturating_sub(1);
            }
            b',' if depth == 1 => {
                if let Some((start, part)) = value_start.take() {
                    spans.push((start, i, part));
                }
            }
            _ => {}
        }
        i += 1;
    }
    if let Some((start, part)) = value_start {
        spans.push((start, text.len(), part));
    }
    spans
}

/// Where one run's tokens and seconds went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// Requests sent to the model: its turns, the re-asks after an invalid reply and the
    /// fit questions.
    pub model_requests: u32,
    /// Prompt tokens the server evaluated anew.
    pub prompt_evaluated: u64,
    /// Prompt tokens the server reused from its cache, where it says (llama-server does;
    /// Ollama does not).
    pub prompt_reused: Option<u64>,
    /// Tokens generated, by what they were spent on.
    pub generated: Generated,
    /// Milliseconds waiting for the model.
    pub model_ms: u64,
    /// The part of `model_ms` spent on the checks' questions aside (the fit question, a
    /// tool's leaning), which a person would otherwise take for the model's turns.
    #[serde(default)]
    pub aside_ms: u64,
    /// Milliseconds waiting for tools (calls of one turn run side by side: their wall time).
    pub tool_ms: u64,
    /// Milliseconds waiting for the person to answer a question.
    pub person_ms: u64,
    /// Milliseconds in toolloop itself: the rest of the run's wall time (building
    /// prompts, repairing and checking replies, the checks).
    pub own_ms: u64,
    /// Milliseconds from the run's start to its first tool call sent off: how long a
    /// person waits before anything happens. `None` when the run called no tool. Over
    /// several runs ([`Budget::add`]) the sum, and [`Budget::first_calls`] how many runs
    /// it sums.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_call_ms: Option<u64>,
    /// How many runs [`Budget::first_call_ms`] sums: 1 for a run that called a tool.
    #[serde(default)]
    pub first_calls: u32,
}

impl Budget {
    /// Counts one model request and its usage.
    pub fn requested(&mut self, usage: &Usage, generated: Generated) {
        self.model_requests += 1;
        let reused = usage.cached_prompt_tokens.unwrap_or(0);
        self.prompt_evaluated += usage.prompt_tokens.saturating_sub(reused);
        if let Some(c) = usage.cached_prompt_tokens {
            *self.prompt_reused.get_or_insert(0) += c;
        }
        self.generated.add(&generated);
    }

    /// Adds another budget (for totals over several runs); `own_ms` too.
    pub fn add(&mut self, other: &Budget) {
        self.model_requests += other.model_requests;
        self.prompt_evaluated += other.prompt_evaluated;
        if let Some(c) = other.prompt_reused {
            *self.prompt_reused.get_or_insert(0) += c;
        }
        self.generated.add(&other.generated);
        self.model_ms += other.model_ms;
        self.aside_ms += other.aside_ms;
        self.tool_ms += other.tool_ms;
        self.person_ms += other.person_ms;
        self.own_ms += other.own_ms;
        if let Some(ms) = other.first_call_ms {
            *self.first_call_ms.get_or_insert(0) += ms;
        }
        self.first_calls += other.first_calls;
    }

    /// Seconds to the first call, on average over the runs that made one.
    ///
    /// ```
    /// use toolloop::Budget;
    /// let mut total = Budget::default();
    /// total.add(&Budget { first_call_ms: Some(3000), first_calls: 1, ..Budget::default() });
    /// total.add(&Budget::default()); // a run that answered without a tool
    /// total.add(&Budget { first_call_ms: Some(5000), first_calls: 1, ..Budget::default() });
    /// assert_eq!(total.first_call_s(), Some(4.0));
    /// ```
    pub fn first_call_s(&self) -> Option<f64> {
        let ms = self.first_call_ms?;
        Some(ms as f64 / 1000.0 / f64::from(self.first_calls.max(1)))
    }

    /// One line in words, as `-v` and `eval` print it.
    ///
    /// ```
    /// use toolloop::Budget;
    /// let b = Budget { model_requests: 2, prompt_evaluated: 300, model_ms: 4200, ..Budget::default() };
    /// assert!(b.line().starts_with("2 model requests"));
    /// ```
    pub fn line(&self) -> String {
        let g = &self.generated;
        let reused = self
            .prompt_reused
            .map(|r| format!(", {r} reused"))
            .unwrap_or_default();
        let aside = match self.aside_ms {
            0 => String::new(),
            ms => format!(" ({:.1} s of it questions aside)", ms as f64 / 1000.0),
        };
        let first = self
            .first_call_s()
            .map(|s| format!("; first call at {s:.1} s"))
            .unwrap_or_default();
        format!(
            "{} model requests; prompt {} evaluated{reused}; generated {} (thought {}, arguments {}, \
             answer {}, structure {}, fit {}); model {:.1} s{aside}, tools {:.1} s, person {:.1} s, \
             toolloop {:.2} s{first}",
            self.model_requests,
            self.prompt_evaluated,
            g.total(),
            g.thought,
            g.arguments,
            g.answer,
            g.structure,
            g.fit,
            self.model_ms as f64 / 1000.0,
            self.tool_ms as f64 / 1000.0,
            self.person_ms as f64 / 1000.0,
            self.own_ms as f64 / 1000.0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::TokenLogprob;

    fn tokens(pieces: &[&str]) -> ChatReply {
        ChatReply {
            text: pieces.concat(),
            usage: Usage {
                completion_tokens: pieces.len() as u64,
                ..Usage::default()
            },
            logprobs: pieces
                .iter()
                .map(|p| TokenLogprob {
                    token: p.to_string(),
                    logprob: 0.0,
                    top: Vec::new(),
                })
                .collect(),
            ..ChatReply::default()
        }
    }

    #[test]
    fn each_token_counts_for_the_field_it_begins_in() {
        let r = tokens(&[
            "{\"",
            "kind",
            "\": \"",
            "tool_call",
            "\", \"",
            "thought",
            "\": \"",
            "add",
            " them",
            "\", \"",
            "tool",
            "\": \"",
            "calc",
            "\", \"",
            "arguments",
            "\": {\"",
            "a",
            "\": ",
            "1",
            "}}",
        ]);
        let g = Generated::of_turn(&r);
        assert_eq!((g.thought, g.arguments, g.answer), (3, 4, 0), "{g:?}");
        assert_eq!(g.total(), 20);
    }

    #[test]
    fn without_tokens_the_count_is_shared_by_characters() {
        let text = r#"{"kind": "final_answer", "thought": "xxxxxxxxxx", "content": "yyyyyyyyyy"}"#;
        let r = ChatReply {
            text: text.into(),
            usage: Usage {
                completion_tokens: 30,
                ..Usage::default()
            },
            ..ChatReply::default()
        };
        let g = Generated::of_turn(&r);
        assert_eq!(g.thought, g.answer, "{g:?}");
        assert!(g.thought > 0 && g.structure > g.thought, "{g:?}");
        assert_eq!(g.total(), 30);
    }

    /// The beginning a server was given to continue was not generated: only the calls
    /// after it count.
    #[test]
    fn a_continued_turn_counts_only_what_the_model_wrote() {
        let mut r = tokens(&[
            " {\"",
            "tool",
            "\": \"",
            "calc",
            "\", \"",
            "arguments",
            "\": {\"",
            "a",
            "\": ",
            "2",
            "}}]}",
        ]);
        r.text.insert_str(0, r#"{"kind": "tool_calls", "thought": "two sums", "calls": [{"tool": "calc", "arguments": {"a": 1}},"#);
        let g = Generated::of_turn(&r);
        assert_eq!((g.thought, g.arguments, g.total()), (0, 11, 11), "{g:?}");
    }

    #[test]
    fn an_answer_completed_with_its_forced_end_counts_only_what_the_model_wrote() {
        let mut r = tokens(&[
            "{\"", "kind", "\":", " \"", "final", "_answer", "\",", " \"", "content", "\":", " \"",
            "Paris", "\",",
        ]);
        r.text.push_str(r#" "thought": ""}"#);
        let g = Generated::of_turn(&r);
        assert_eq!((g.answer, g.total()), (3, 13), "{g:?}");
    }

    #[test]
    fn a_cut_turn_counts_what_it_has() {
        let r = tokens(&["{\"thought\": \"", "long", " long", " long"]);
        assert_eq!(Generated::of_turn(&r).thought, 3);
    }

    #[test]
    fn reused_prompt_tokens_are_not_counted_as_evaluated() {
        let mut b = Budget::default();
        let usage = Usage {
            prompt_tokens: 500,
            cached_prompt_tokens: Some(450),
            completion_tokens: 20,
        };
        b.requested(&usage, Generated::default());
        b.requested(&usage, Generated::default());
        assert_eq!(
            (b.model_requests, b.prompt_evaluated, b.prompt_reused),
            (2, 100, Some(900))
        );
    }
}
