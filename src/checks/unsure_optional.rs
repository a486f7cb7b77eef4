//! `unsure-optional`: an optional value the model hesitated to write and the person never
//! said is left out of the call.
//!
//! A small model fills every parameter it is shown: `seats: 2` for a taxi nobody said the
//! size of, `date: "2023-04-15"` for a flight asked about today, `vegetarian: false` for a
//! recipe. On a tool that writes, such a value is a wrong entry in the person's world. A
//! word list cannot tell these from values said in other words, so the evidence is the
//! model's own and the request's:
//!
//! - **the model's hesitation**: where it wrote the `,` before the optional key, the share
//!   of its probability that went to writing another key rather than closing the
//!   arguments (`}`). A value the person said is written without a doubt; one the model
//!   made up is often written where closing was a real choice. The bar, [`P_MORE_MIN`],
//!   was read off the tuning halves of three sets;
//! - **the value's span in the request**: a value whose words or number the request holds
//!   ([`super::grounding::Evidence::grounds`]) stays however the model hesitated, and so
//!   does a boolean or an object, which cannot be told from a default that way.
//!
//! Both must point the same way. It changes a call the model wrote, so it is an unsafe fix
//! and off by default: a value said in a way neither reading catches is lost, and the
//! tool then uses its own default.

use serde_json::{Map, Value};

use super::{CallUnderCheck, Check, CheckInfo, Effect, Finding, OnCall, Reads, TurnContext};
use crate::message::ChatReply;

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "unsure-optional",
    default_on: false,
    off_for: &[],
    reads: Reads::Reply,
    effect: Effect::LeavesOut,
    what: "leaves out of a call an optional value the model hesitated to write and the request does not hold",
    why: "a small model fills every optional parameter it is shown, with values nobody said: a date, a number of seats, a flag",
    example: "\"Bestel een taxi van Amsterdam Centraal naar Schiphol.\" gave `seats: 2` after a `,` the model wrote at 0.83 against closing the arguments: `seats` is left out, the tool's default stands",
    safety: "Unsafe: it changes the call. A value stays when the request holds its words or number, when it is a boolean or an object, or when the model wrote its key at 0.90 or more; a value said in other words and written with doubt is lost. Off by default.",
};

/// The share of probability for writing another key, at the `,` before an optional one,
/// below which the model is taken to have hesitated. On the tuning halves (Qwen2.5-Coder
/// 0.5B, a fresh install) no value the person said and the request does not hold was
/// written below it; one in two made-up values was.
pub(crate) const P_MORE_MIN: f64 = 0.90;

/// The `unsure-optional` check.
#[derive(Debug)]
pub struct UnsureOptional;

impl Check for UnsureOptional {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_call(
        &self,
        ctx: &TurnContext<'_>,
        call: &CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        // Only the model's own single call: the shares are read in its text.
        if call.index != 0 || ctx.added_from.is_some() {
            return None;
        }
        let required = crate::turn::tool_schema::required(&call.spec.input_schema);
        let mut left = Vec::new();
        let mut why = Vec::new();
        for (key, value) in call.arguments {
            if required.contains(&key.as_str()) || ctx.said.grounds(value) {
                continue;
            }
            let Some(p) = key_share(ctx.reply, call.arguments, key) else {
                continue;
            };
            if p < P_MORE_MIN {
                why.push(format!(
                    "{key} = {value} written at {} and not in the request",
                    super::below(p, P_MORE_MIN)
                ));
                left.push(key.clone());
            }
        }
        if !left.is_empty() {
            findings.push(Finding::OnCall {
                check: INFO.name,
                tool: call.spec.name.clone(),
                index: call.index,
                arguments: left,
                why: why.join("; "),
                act: OnCall::LeaveOut,
            });
        }
        None
    }
}

/// The share of probability the model gave to writing another key (`,`) rather than
/// closing the arguments (`}`) where it wrote the `,` before `key`, in a reply whose one
/// call has `arguments`. `None` when the reply's text does not hold them as one object at
/// the top of its `"arguments"`, `key` comes first, or neither choice is among the
/// alternatives reported there.
pub(crate) fn key_share(
    reply: &ChatReply,
    arguments: &Map<String, Value>,
    key: &str,
) -> Option<f64> {
    super::tool_probability::choice_share(reply, comma_before(&reply.text, arguments, key)?, '}')
}

/// Where, in `text`, the `,` before `key` is written inside the object of `"arguments"`,
/// when that object is exactly `arguments` (a repaired reply's text is not the model's).
fn comma_before(text: &str, arguments: &Map<String, Value>, key: &str) -> Option<usize> {
    // The key, not the word inside a string before it (a thought that says "arguments").
    let quoted = "\"arguments\"";
    let key_at = text
        .match_indices(quoted)
        .map(|(i, _)| i)
        .find(|&i| text[i + quoted.len()..].trim_start().starts_with(':'))?;
    let open = key_at + text[key_at..].find('{')?;
    let object = &text[open..];
    let mut stream = serde_json::Deserializer::from_str(object).into_iter::<Map<String, Value>>();
    let parsed = stream.next()?.ok()?;
    if parsed != *arguments {
        return None;
    }
    let end = open + stream.byte_offset();
    // The top-level keys of the object, each with the last non-space byte before it.
    let bytes = text.as_bytes();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut i = open;
    while i < end {
        let c = bytes[i];
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' if depth == 1 => {
                let rest = &text[i + 1..end];
                let close = rest.find('"')?;
                let after = rest[close + 1..].trim_start();
                if after.starts_with(':') && rest[..close] == *key {
                    let before = text[open..i].trim_end();
                    return before.ends_with(',').then(|| open + before.len() - 1);
                }
                in_string = true;
            }
            b'"' => in_string = true,
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::TokenLogprob;
    use serde_json::json;

    /// A reply of `pieces` as tokens, with `at` the one that writes the `,` and its
    /// alternatives.
    fn reply(pieces: &[&str], at: usize, top: &[(&str, f64)]) -> ChatReply {
        ChatReply {
            text: pieces.concat(),
            logprobs: pieces
                .iter()
                .enumerate()
                .map(|(i, t)| TokenLogprob {
                    token: t.to_string(),
                    logprob: if i == at { top[0].1.ln() } else { 0.0 },
                    top: match i == at {
                        true => top.iter().map(|(a, p)| (a.to_string(), p.ln())).collect(),
                        false => vec![],
                    },
                })
                .collect(),
            ..ChatReply::default()
        }
    }

    const TAXI: &[&str] = &[
        "{\"kind\": \"tool_call\", \"thought\": \"taxi\", \"tool\": \"book_taxi\", ",
        "\"arguments\": {\"pickup\": \"Centraal\", \"destination\": \"Schiphol",
        "\",",
        " \"seats\": 2}}",
    ];

    #[test]
    fn the_share_is_read_where_the_comma_before_the_key_was_written() {
        let r = reply(TAXI, 2, &[("\",", 0.8), ("\"}", 0.2)]);
        let args = json!({"pickup": "Centraal", "destination": "Schiphol", "seats": 2});
        let p = key_share(&r, args.as_object().unwrap(), "seats").unwrap();
        assert!((p - 0.8).abs() < 1e-9, "{p}");
        // The first key has no comma before it; a repaired reply's text is not read.
        assert_eq!(key_share(&r, args.as_object().unwrap(), "pickup"), None);
        let other = json!({"pickup": "Centraal", "destination": "Schiphol", "seats": 3});
        assert_eq!(key_share(&r, other.as_object().unwrap(), "seats"), None);
    }

    #[test]
    fn a_key_inside_a_nested_value_or_a_string_is_not_taken_for_the_call_s() {
        let text =
            "{\"arguments\": {\"q\": \"\\\"seats\\\": 1\", \"o\": {\"seats\": 1}, \"seats\": 2}}";
        let args = json!({"q": "\"seats\": 1", "o": {"seats": 1}, "seats": 2});
        let at = comma_before(text, args.as_object().unwrap(), "seats").unwrap();
        assert_eq!(&text[at..at + 12], ", \"seats\": 2");
    }
}
