//! The model's own probability that a tool should be called, read from its reply.
//!
//! Under the grammar the model commits to a kind at the first token of the `kind` value.
//! What it wrote there is only the most likely choice; the probabilities beside it say how
//! sure it was. A small model that calls a tool for every question still gives the answer
//! kinds some weight when no tool fits, and [`tool_share`] measures that weight: the
//! probability of the tokens that begin `tool_call`, over that of every kind's tokens,
//! at that one position. The loop declines a call whose share is below a threshold
//! measured on data (`BENCHMARKS.md`) and asks for an answer instead.
//!
//! Both llama-server and Ollama (0.12.11 and later) report the most likely tokens at each
//! position before the grammar filters them, so tokens that the grammar would refuse are
//! simply not counted.

use crate::checks::relevance;
use crate::config::Limits;
use crate::message::ChatReply;
use crate::run::events::Event;
use crate::tool_spec::ToolSpec;

const KINDS: [&str; 3] = ["tool_call", "final_answer", "clarify"];

/// Below this share of the question's content words in the tool's own text
/// ([`crate::checks::relevance::support`]), a call goes ahead only if the model was sure of it.
pub const MIN_SUPPORT: f64 = 0.2;
/// How sure the model must be of a call the question's words do not point to. Measured:
/// Qwen 0.5B gave calls that fit BFCL questions 0.77–0.999 and unfitting ones 0.58–0.999,
/// so only near-certainty overrides the missing words.
pub const SURE: f64 = 0.99;

/// Whether a call with the model's probability `p_tool` and the question's `support` for
/// the tool is declined: below `threshold` always; with low support unless [`SURE`].
///
/// ```
/// use toolloop::checks::decision::decline;
/// assert!(decline(0.95, Some(0.0), 0.5));
/// assert!(!decline(0.995, Some(0.0), 0.5));
/// assert!(!decline(0.95, Some(0.5), 0.5));
/// assert!(!decline(0.95, None, 0.5));
/// assert!(decline(0.3, Some(1.0), 0.5));
/// ```
pub fn decline(p_tool: f64, support: Option<f64>, threshold: f64) -> bool {
    p_tool < threshold || (support.is_some_and(|s| s < MIN_SUPPORT) && p_tool < SURE)
}

/// The [`Event::Decision`] for a reply that calls `tool`: the model's probability of the
/// call, the question's support for the tool, and whether the call is declined (never
/// without `limits.tool_threshold`); for a declined call, the tools to choose among
/// instead (none: answer). `None` when the reply carries no log-probabilities.
///
/// A call is also declined when the question's words point to other tools much more
/// strongly ([`MARGIN`]): those are named in `instead`, and the model is asked again with
/// only them (and the answer kinds) in view.
pub fn judge(
    reply: &ChatReply,
    tool: &str,
    specs: &[ToolSpec],
    question: &str,
    limits: &Limits,
) -> Option<(Event, Option<Vec<String>>)> {
    let p_tool = tool_share(reply)?;
    let threshold = limits.tool_threshold;
    let supports: Vec<(String, Option<f64>)> = specs
        .iter()
        .map(|s| (s.name.clone(), relevance::support(question, s)))
        .collect();
    let support = supports
        .iter()
        .find(|(n, _)| n == tool)
        .and_then(|(_, s)| *s);
    let best = supports.iter().filter_map(|(_, s)| *s).fold(0.0, f64::max);
    let declined_anyway = threshold.is_some_and(|t| decline(p_tool, support, t));
    // Other tools are offered when the question points to them much more, and also
    // whenever this call is declined while the question does point to another tool:
    // BFCL multiple_109 called `mutation_type.find` (support 0) for proteins in the
    // plasma membrane, beside `cellbio.get_proteins` (0.20), and was sent to answer.
    let instead: Vec<String> = match support {
        Some(own)
            if threshold.is_some()
                && best >= MIN_SUPPORT
                && (best >= own + MARGIN || (declined_anyway && best > own)) =>
        {
            supports
                .into_iter()
                .filter(|(_, s)| s.is_some_and(|s| s >= best - 0.05))
                .map(|(n, _)| n)
                .collect()
        }
        _ => Vec::new(),
    };
    let declined = !instead.is_empty() || declined_anyway;
    let event = Event::Decision {
        tool: tool.to_string(),
        p_tool,
        support,
        declined,
        instead: instead.clone(),
    };
    Some((event, declined.then_some(instead)))
}

/// How much more of the question another tool must cover for the model to be asked to
/// choose again among the tools that cover most of it.
pub const MARGIN: f64 = 0.25;

/// Where the value of `"kind"` begins in `text` (just after its opening quote).
fn kind_value_offset(text: &str) -> Option<usize> {
    let at = text.find("\"kind\"")? + "\"kind\"".len();
    let rest = &text[at..];
    let colon = rest.find(':')?;
    if !rest[..colon].trim().is_empty() {
        return None;
    }
    let after = &rest[colon + 1..];
    let quote = after.find('"')?;
    after[..quote]
        .trim()
        .is_empty()
        .then_some(at + colon + 1 + quote + 1)
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
/// use toolloop::checks::decision::tool_share;
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
    let mut start = 0;
    for t in &reply.logprobs {
        let end = start + t.token.len();
        if end > offset {
            let cut = offset.saturating_sub(start);
            let head = t.token.get(..cut)?;
            let mut p = [0.0f64; 3];
            let mut alternatives = t.top.clone();
            if !alternatives.iter().any(|(tok, _)| *tok == t.token) {
                alternatives.push((t.token.clone(), t.logprob));
            }
            for (tok, logprob) in &alternatives {
                // An alternative counts only when it writes the same text up to the value.
                let Some(rest) = tok.strip_prefix(head) else {
                    continue;
                };
                if let Some(k) = kind_of("", rest) {
                    p[k] += logprob.exp();
                }
            }
            let total: f64 = p.iter().sum();
            return (total > 0.0).then(|| p[0] / total);
        }
        start = end;
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
    fn no_logprobs_or_no_kind_says_nothing() {
        assert_eq!(tool_share(&reply("{\"kind\": \"tool_call\"}", &[])), None);
        assert_eq!(
            tool_share(&reply("{\"a\": 1}", &[("{\"a\": 1}", &[])])),
            None
        );
    }

    #[test]
    fn the_value_offset_allows_spaces_and_no_spaces() {
        assert_eq!(kind_value_offset("{\"kind\":\"x\"}"), Some(9));
        assert_eq!(kind_value_offset("{\"kind\" : \"x\"}"), Some(11));
        assert_eq!(kind_value_offset("{\"kind\": 5}"), None);
    }
}
