//! `tool-probability`: a call the model itself gave too little probability is declined,
//! and the model is asked for an answer instead.
//!
//! Under the grammar the model commits to a kind at the first token of the `kind` value.
//! What it wrote there is only the most likely choice; the probabilities beside it say how
//! sure it was. A small model that calls a tool for every question still gives the answer
//! kinds some weight when no tool fits, and [`tool_share`] measures that weight: the
//! probability of the tokens that begin `tool_call`, over that of every kind's tokens, at
//! that one position. The loop declines a call whose share is below a threshold measured on
//! data and asks for an answer instead.
//!
//! Both llama-server and Ollama (0.12.11 and later) report the most likely tokens at each
//! position before the grammar filters them, so tokens that the grammar would refuse are
//! simply not counted.

use super::{Check, CheckInfo, Effect, Judgement, Reads, TurnContext};
use crate::message::ChatReply;

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "tool-probability",
    default_on: true,
    off_for: &[],
    reads: Reads::Reply,
    effect: Effect::Declines,
    what: "declines a call whose share of the model's probability is below the threshold",
    why: "a small model under the narrowed schema calls some tool for nearly every question",
    example: "\"Tell me a joke\" answered with a call at p(tool) 0.31 < 0.50: the model is asked to answer",
    safety: "It reads the model's own probability and only declines, never changes a value: the declined model is asked again. Its threshold is measured per model (`toolloop calibrate`); uncalibrated, 0.5.",
};

/// The `tool-probability` check.
#[derive(Debug)]
pub struct ToolProbability;

impl Check for ToolProbability {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_turn(&self, ctx: &TurnContext<'_>, _tool: &str, judgement: &mut Judgement) {
        let Some(p) = judgement.read_p_tool(ctx.reply) else {
            return;
        };
        let Some(t) = ctx.thresholds else {
            return;
        };
        if p < t.p_min {
            judgement.declined = true;
            judgement.by.get_or_insert(self.info().name);
            judgement.reason = Some(format!("p {}", super::below(p, t.p_min)));
        }
    }
}

impl Judgement {
    /// The model's share of probability for the call ([`tool_share`]), read once.
    pub fn read_p_tool(&mut self, reply: &ChatReply) -> Option<f64> {
        if self.p_tool.is_none() {
            self.p_tool = tool_share(reply);
        }
        self.p_tool
    }
}

const KINDS: [&str; 3] = ["tool_call", "final_answer", "clarify"];

/// Where the value of `"kind"` begins in `text` (just after its opening quote).
fn kind_value_offset(text: &str) -> Option<usize> {
    value_offset(text, "kind")
}

/// Where the string value of the first key `key` begins in `text` (just after its
/// opening quote). A quoted `key` inside a string value is escaped (`\"tool\"`), so it
/// is never taken for the key.
pub(crate) fn value_offset(text: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    let mut from = 0;
    while let Some(i) = text[from..].find(&quoted) {
        let at = from + i + quoted.len();
        let rest = &text[at..];
        if let Some(colon) = rest.find(':')
            && rest[..colon].trim().is_empty()
        {
            let after = &rest[colon + 1..];
            let quote = after.find('"')?;
            return after[..quote]
                .trim()
                .is_empty()
                .then_some(at + colon + 1 + quote + 1);
        }
        from = at;
    }
    None
}

/// The share of probability the model gave, at the token where its first call's tool name
/// begins, to the names of the tools on offer (`names`), the only ones the schema lets it
/// write. Where most of it went to names no tool has (`recipe` for `find_recipe`, or the
/// prompt's example `calculator` where no calculator is listed), the name written was
/// picked from what was left: on three held-back sets, under 0.2 the tool was the right one
/// 11 times in 27, at 0.2 or more 33 times in 39. Recorded (the `Decision` event, `toolloop
/// eval`'s `p_name`), and weighed by `tool-fit` where calibration found it tells needless
/// calls apart ([`crate::Thresholds::name_weight`]). `None` when the reply has no call or
/// no log-probabilities, or the name was given (a turn continued from its calls).
pub(crate) fn name_share(reply: &ChatReply, names: &[&str]) -> Option<f64> {
    let p: f64 = name_choices(reply)?
        .iter()
        .filter(|(value, _)| !value.is_empty() && names.iter().any(|n| n.starts_with(value)))
        .map(|(_, p)| p)
        .sum();
    Some(p.min(1.0))
}

/// What the model could have written where its first call's tool name begins: each
/// alternative's beginning of a name (up to its closing quote) and its probability.
/// `None` as for [`name_share`].
fn name_choices(reply: &ChatReply) -> Option<Vec<(String, f64)>> {
    let offset = value_offset(&reply.text, "tool")?;
    let choices = choices_at(reply, offset)?;
    Some(
        choices
            .into_iter()
            .map(|(rest, logprob)| {
                let value = rest.split('"').next().unwrap_or_default().to_string();
                (value, logprob.exp())
            })
            .collect(),
    )
}

/// Where the model's probability went instead, at the token where its first call's tool
/// name begins: the likeliest beginning of a name that no tool on offer (`names`) begins
/// with, and the model's probability for it. A token can be part of a name
/// (`rem`), so this is the beginning of what the model would have written (`ping` for a
/// request to be reminded, where `set_reminder` is on offer; `calculator`, the prompt's
/// example, where no calculator is). Shown in the decline line where the name counted
/// against the call, and recorded on every judged call, so a person can see what the
/// model reached for. `None` as for [`name_share`], or when every name the server
/// reported begins a listed name.
pub(crate) fn name_leaning(reply: &ChatReply, names: &[&str]) -> Option<Leaning> {
    name_choices(reply)?
        .into_iter()
        .filter_map(|(value, p)| {
            // A listed name after a space (` calculator`) is the same choice, which the
            // schema does not let it write that way: not where the probability went.
            let value = value.trim();
            let listed = names.iter().any(|n| n.starts_with(value));
            (!value.is_empty() && !listed).then(|| Leaning {
                name: value.to_string(),
                p,
            })
        })
        .max_by(|a, b| a.p.total_cmp(&b.p))
}

/// A beginning of a tool name the model gave probability to, where no tool on offer
/// begins so.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Leaning {
    /// The name's beginning, as the token wrote it (`ping`, `rem`, `calculator`).
    pub name: String,
    /// The model's probability for that token.
    pub p: f64,
}

/// The kind a token continues, given the part of the value written before it.
fn kind_of(before: &str, token: &str) -> Option<usize> {
    let value = format!("{before}{token}");
    let value = value.split('"').next().unwrap_or_default();
    if value.is_empty() {
        return None;
    }
    KINDS
        .iter()
        .position(|k| k.starts_with(value) || value.starts_with(k))
}

/// The share of probability the model gave to calling a tool at the token where it chose
/// the kind: `p(tool_call) / (p(tool_call) + p(final_answer) + p(clarify))`, from the
/// alternatives the server reported there. `None` when the reply carries no
/// log-probabilities, or the kinds cannot be told apart in them.
///
/// ```
/// use toolloop::backend::{ChatReply, TokenLogprob};
/// use toolloop::checks::tool_share;
///
/// let text = r#"{"kind": "tool_call", "tool": "x", "arguments": {}}"#;
/// let tok = |t: &str| TokenLogprob { token: t.into(), logprob: -0.1, top: vec![] };
/// let mut logprobs = vec![tok(r#"{"kind": ""#)];
/// logprobs.push(TokenLogprob {
///     token: "tool".into(),
///     logprob: 0.6f64.ln(),
///     top: vec![("tool".into(), 0.6f64.ln()), ("final".into(), 0.2f64.ln()), ("hello".into(), 0.2f64.ln())],
/// });
/// logprobs.push(tok(r#"_call", "tool": "x", "arguments": {}}"#));
/// let reply = ChatReply { text: text.into(), logprobs, ..ChatReply::default() };
/// assert!((tool_share(&reply).unwrap() - 0.75).abs() < 1e-9);
/// ```
pub fn tool_share(reply: &ChatReply) -> Option<f64> {
    let offset = kind_value_offset(&reply.text)?;
    let mut p = [0.0f64; 3];
    for (rest, logprob) in choices_at(reply, offset)? {
        if let Some(k) = kind_of("", &rest) {
            p[k] += logprob.exp();
        }
    }
    let total: f64 = p.iter().sum();
    (total > 0.0).then(|| p[0] / total)
}

/// What the model could have written from `offset` of its reply on: the alternatives the
/// server reported at the token that reaches past `offset`, each that writes the same
/// text before `offset` as that token does, with that text taken off. `None` when no
/// token reaches there, or the text at `offset` was given to the model (a turn continued
/// from its calls): then it was not the model's choice.
fn choices_at(reply: &ChatReply, offset: usize) -> Option<Vec<(String, f64)>> {
    let mut start = Some(reply.given).filter(|&given| given <= offset)?;
    for t in reply.text_tokens() {
        let end = start + t.token.len();
        if end > offset {
            let head = t.token.get(..offset.saturating_sub(start))?;
            return Some(
                alternatives(t)
                    .into_iter()
                    .filter_map(|(tok, logprob)| {
                        Some((tok.strip_prefix(head)?.to_string(), logprob))
                    })
                    .collect(),
            );
        }
        start = end;
    }
    None
}

/// The tokens the server reported at a position, the one written among them.
fn alternatives(t: &crate::message::TokenLogprob) -> Vec<(String, f64)> {
    let mut all = t.top.clone();
    if !all.iter().any(|(tok, _)| *tok == t.token) {
        all.push((t.token.clone(), t.logprob));
    }
    all
}

/// The share of probability the model gave to calling several tools (`tool_calls`) rather
/// than one (`tool_call`), at the token where it chose between them: the one that writes
/// the `s` after `tool_call`. `None` when the turn is not a call, the reply carries no
/// log-probabilities, or the two cannot be told apart in them.
pub fn several_share(reply: &ChatReply) -> Option<f64> {
    let start = kind_value_offset(&reply.text)?;
    let value = &reply.text[start..];
    if !value.starts_with("tool_call") {
        return None;
    }
    let boundary = start + "tool_call".len();
    let mut at = Some(reply.given).filter(|&given| given <= boundary)?;
    for t in reply.text_tokens() {
        let end = at + t.token.len();
        if end > boundary {
            // The part of the kind's value written before this token, or the part of the
            // token before the value (which an alternative must share to count).
            let (before, head) = match at >= start {
                true => (reply.text.get(start..at)?, ""),
                false => ("", reply.text.get(at..start)?),
            };
            let mut p = [0.0f64; 2];
            for (tok, logprob) in &alternatives(t) {
                let Some(rest) = tok.strip_prefix(head) else {
                    continue;
                };
                let v = format!("{before}{rest}");
                if v.starts_with("tool_calls") {
                    p[1] += logprob.exp();
                } else if v == "tool_call" || v.starts_with("tool_call\"") {
                    // A token that ends the value at `tool_call` (`_call`, with the quote to
                    // follow) is the single call: a tokenizer that has `_calls` writes the
                    // plural in one piece.
                    p[0] += logprob.exp();
                }
            }
            let total = p[0] + p[1];
            return (total > 0.0).then(|| p[1] / total);
        }
        at = end;
    }
    None
}

/// Where the list of calls of a `tool_calls` turn closes: the offset of the `]` that ends
/// the value of the top-level key `"calls"`.
pub(crate) fn calls_array_end(text: &str) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let (mut key_start, mut array_at) = (None, None);
    let bytes = text.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    in_string = false;
                    // A key of the turn object itself: remember whether it is "calls".
                    let is_calls = depth == 1 && key_start.is_some_and(|k| &text[k..i] == "calls");
                    let colon = text[i + 1..].trim_start().starts_with(':');
                    if is_calls && colon && array_at.is_none() {
                        array_at = Some(depth);
                    }
                }
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                key_start = Some(i + 1);
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if c == b']' && array_at == Some(depth) {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The share of probability the model gave to writing one more call (`,`) rather than
/// closing its `tool_calls` array (`]`), at the token where it closed it. `None` when the
/// turn has no such array, the reply carries no log-probabilities, or neither choice is
/// among the alternatives reported there.
pub fn more_share(reply: &ChatReply) -> Option<f64> {
    choice_share(reply, calls_array_end(&reply.text)?, ']')
}

/// The share of probability the model gave to writing `,` (one more item) rather than
/// `close` at byte `pos` of its reply, where it wrote one of them, read at the token that
/// covers `pos`. `None` when the reply carries no log-probabilities there, or neither
/// choice is among the alternatives reported.
pub(crate) fn choice_share(reply: &ChatReply, pos: usize, close: char) -> Option<f64> {
    let mut at = Some(reply.given).filter(|&given| given <= pos)?;
    for t in reply.text_tokens() {
        let next = at + t.token.len();
        if next > pos {
            // What this token wrote before `pos` (a `}`, a closing quote, spaces); an
            // alternative counts when it writes the same, then `,` or `close` after any
            // spaces.
            let head = reply.text.get(at..pos)?;
            let mut p = [0.0f64; 2];
            for (tok, logprob) in &alternatives(t) {
                let Some(rest) = tok.strip_prefix(head) else {
                    continue;
                };
                match rest.trim_start().chars().next() {
                    Some(',') => p[1] += logprob.exp(),
                    Some(c) if c == close => p[0] += logprob.exp(),
                    _ => {}
                }
            }
            let total = p[0] + p[1];
            return (total > 0.0).then(|| p[1] / total);
        }
        at = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::TokenLogprob;

    fn reply(text: &str, tokens: &[(&str, &[(&str, f64)])]) -> ChatReply {
        ChatReply {
            text: text.into(),
            logprobs: tokens
                .iter()
                .map(|(t, top)| TokenLogprob {
                    token: t.to_string(),
                    logprob: top
                        .iter()
                        .find(|(a, _)| a == t)
                        .map(|(_, p)| p.ln())
                        .unwrap_or(-30.0),
                    top: top.iter().map(|(a, p)| (a.to_string(), p.ln())).collect(),
                })
                .collect(),
            ..ChatReply::default()
        }
    }

    #[test]
    fn a_token_that_carries_the_quote_is_split_at_the_value() {
        let text = "{\"kind\": \"final_answer\", \"content\": \"x\"}";
        let r = reply(
            text,
            &[
                ("{\"kind\":", &[]),
                (
                    " \"final",
                    &[(" \"final", 0.5), (" \"tool", 0.3), (" \"clar", 0.1)],
                ),
                ("_answer\", \"content\": \"x\"}", &[]),
            ],
        );
        assert!((tool_share(&r).unwrap() - 0.3 / 0.9).abs() < 1e-9);
    }

    #[test]
    fn the_share_of_several_calls_is_read_where_the_s_is_chosen() {
        let text = r#"{"kind": "tool_calls", "calls": []}"#;
        let r = reply(
            text,
            &[
                (r#"{"kind": ""#, &[]),
                ("tool", &[("tool", 0.99)]),
                ("_call", &[("_call", 0.99)]),
                ("s", &[("s", 0.7), ("\",", 0.3)]),
                (r#"", "calls": []}"#, &[]),
            ],
        );
        assert!((several_share(&r).unwrap() - 0.7).abs() < 1e-9);
        // One token for the whole kind: its alternatives are compared whole.
        let r = reply(
            text,
            &[
                (r#"{"kind": ""#, &[]),
                ("tool_calls", &[("tool_calls", 0.4), ("tool_call", 0.6)]),
                (r#"", "calls": []}"#, &[]),
            ],
        );
        // A token that ends at "tool_call" is the single call.
        assert!((several_share(&r).unwrap() - 0.4).abs() < 1e-9);
        let single = r#"{"kind": "tool_call", "tool": "x"}"#;
        let r = reply(
            single,
            &[
                (r#"{"kind": "tool_call"#, &[]),
                ("\", \"", &[("\", \"", 0.9), ("s", 0.1)]),
                (r#"tool": "x"}"#, &[]),
            ],
        );
        assert!((several_share(&r).unwrap() - 0.1).abs() < 1e-9);
    }

    #[test]
    fn the_share_of_one_more_call_is_read_where_the_array_closes() {
        let text = r#"{"kind": "tool_calls", "thought": "a [list", "calls": [{"tool": "x", "arguments": {"a": "]"}}]}"#;
        let close = text.rfind(']').unwrap();
        let r = reply(
            text,
            &[
                (&text[..close - 2], &[]),
                // `}}` then the choice, in a token that also carries the `}` before it.
                ("}", &[("}", 0.99)]),
                ("}]", &[("}]", 0.6), ("},", 0.3), ("} ,", 0.1)]),
                ("}", &[]),
            ],
        );
        assert!((more_share(&r).unwrap() - 0.4).abs() < 1e-9);
        // A turn of one call, or no log-probabilities: nothing to say.
        let one = r#"{"kind": "tool_call", "tool": "x", "arguments": {}}"#;
        assert_eq!(more_share(&reply(one, &[(one, &[])])), None);
        assert_eq!(more_share(&reply(text, &[])), None);
    }

    #[test]
    fn no_logprobs_or_no_kind_says_nothing() {
        assert_eq!(tool_share(&reply("{\"kind\": \"tool_call\"}", &[])), None);
        assert_eq!(
            tool_share(&reply("{\"a\": 1}", &[("{\"a\": 1}", &[])])),
            None
        );
    }

    #[test]
    fn the_share_of_the_listed_names_is_read_where_the_first_name_begins() {
        let names = ["find_recipe", "book_taxi"];
        // A list of calls, a thought that quotes the key, and the name's first token
        // carrying the quote before it: only alternatives that write the same quote and
        // then the beginning of a listed name count.
        let text = r#"{"kind": "tool_calls", "thought": "a \"tool\": \"x\"", "calls": [{"tool": "book_taxi", "arguments": {}}]}"#;
        let name = text.find("book_taxi").unwrap();
        let r = reply(
            text,
            &[
                (&text[..name - 2], &[]),
                (
                    " \"book",
                    &[
                        (" \"recipe", 0.5),
                        (" \"book", 0.2),
                        (" \"find", 0.1),
                        (" \"booking", 0.1),
                        ("book", 0.05),
                    ],
                ),
                (&text[name + 4..], &[]),
            ],
        );
        assert!((name_share(&r, &names).unwrap() - 0.3).abs() < 1e-9);
        // A name the model was given (a turn continued from its calls) was not its choice.
        let mut given = r.clone();
        given.given = name + 2;
        given.logprobs.clear();
        given.logprobs.push(TokenLogprob {
            token: text[name + 2..].into(),
            logprob: 0.0,
            top: vec![],
        });
        assert_eq!(name_share(&given, &names), None);
        // An answer has no name to read.
        let answer = r#"{"kind": "final_answer", "content": "x"}"#;
        assert_eq!(name_share(&reply(answer, &[(answer, &[])]), &names), None);
    }

    #[test]
    fn the_leaning_is_the_likeliest_name_no_tool_on_offer_begins() {
        let names = ["find_recipe", "book_taxi"];
        let text = r#"{"kind": "tool_call", "thought": "", "tool": "book_taxi", "arguments": {}}"#;
        let name = text.find("book_taxi").unwrap();
        let at = |top: &[(&str, f64)]| {
            let head = &text[..name];
            let tail = &text[name + 4..];
            let r = reply(text, &[(head, &[]), ("book", top), (tail, &[])]);
            name_leaning(&r, &names)
        };
        // `booking` begins no listed name; `find` and `book` do, however likely.
        let l = at(&[
            ("find", 0.6),
            ("booking", 0.2),
            ("book", 0.1),
            ("taxi", 0.05),
        ])
        .unwrap();
        assert_eq!(l.name, "booking");
        assert!((l.p - 0.2).abs() < 1e-9);
        // Only listed names, with a space before one, or a space alone: nothing to show.
        assert_eq!(at(&[("book", 0.7), (" find", 0.2), (" ", 0.1)]), None);
    }

    #[test]
    fn the_value_offset_allows_spaces_and_no_spaces() {
        assert_eq!(kind_value_offset("{\"kind\":\"x\"}"), Some(9));
        assert_eq!(kind_value_offset("{\"kind\" : \"x\"}"), Some(11));
        assert_eq!(kind_value_offset("{\"kind\": 5}"), None);
    }
}

/// The examples of the name readers' docs, as tests: the readers are crate-private, so
/// rustdoc cannot run them.
#[cfg(test)]
mod examples {
    use super::{name_leaning, name_share};
    use crate::backend::{ChatReply, TokenLogprob};

    /// A call of `tool` whose name the model began with `first` (probability `p`) where it
    /// also weighed `others`.
    fn naming(tool: &str, first: &str, p: f64, others: &[(&str, f64)]) -> ChatReply {
        let tok = |t: &str| TokenLogprob {
            token: t.into(),
            logprob: -0.1,
            top: vec![],
        };
        let mut top: Vec<(String, f64)> = others
            .iter()
            .map(|(t, p)| (t.to_string(), p.ln()))
            .collect();
        top.push((first.into(), p.ln()));
        let head = r#"{"kind": "tool_call", "thought": "", "tool": ""#;
        let tail = r#"", "arguments": {}}"#;
        let rest = format!("{}{tail}", &tool[first.len()..]);
        ChatReply {
            text: format!("{head}{tool}{tail}"),
            logprobs: vec![
                tok(head),
                TokenLogprob {
                    token: first.into(),
                    logprob: p.ln(),
                    top,
                },
                tok(&rest),
            ],
            ..ChatReply::default()
        }
    }

    #[test]
    fn the_share_of_the_names_on_offer_is_read_where_the_name_begins() {
        let reply = naming(
            "book_taxi",
            "book",
            0.15,
            &[("recipe", 0.2), ("find", 0.05)],
        );
        let share = name_share(&reply, &["find_recipe", "book_taxi"]).unwrap();
        assert!((share - 0.2).abs() < 1e-9);
    }

    #[test]
    fn where_the_probability_went_is_the_likeliest_name_not_on_offer() {
        let reply = naming(
            "set_reminder",
            "set",
            0.05,
            &[("ping", 0.4), ("timer", 0.1)],
        );
        let leaning = name_leaning(&reply, &["set_reminder"]).unwrap();
        assert_eq!(leaning.name, "ping");
        assert!((leaning.p - 0.4).abs() < 1e-9);
    }
}
