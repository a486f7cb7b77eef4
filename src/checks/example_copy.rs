//! `example-copy`: a turn whose calls carry the prompt's own example value, which the
//! person never said, is not run: the model is asked for its answer, or another tool,
//! instead.
//!
//! The prompt shows one example call, the calculator on `12.5 * 4` (`turn/prompt.rs`:
//! without an example the small models called no tool at all). Gemma 3 270M copies it:
//! on the five-language and numbers sets, whose tools include a calculator, 61 of its 70
//! first replies carried `12.5 * 4` (a weather question, an order's status, "hello"), and
//! on the seven-language set it set timers labelled `12.5 * 4` (`BENCHMARKS.md`,
//! "Examples copied"). Such a value is known to come from toolloop's own text, not from
//! the request: that is the evidence, not a guess from words. A request that says it
//! ("What is 12.5 times 4?") makes it the person's, and the call goes ahead.
//!
//! The examples tool descriptions give ("The artist or band, e.g. Queen", which Gemma
//! played for a timer and a train) are not counted: a right call often carries them as
//! the person said them another way (`"USD"` for "$250", `"km"` for "キロメートル"), and
//! the invariant lost such calls when they were.

use serde_json::{Map, Value};

use super::{Check, CheckInfo, Effect, Judgement, TurnContext};
use crate::turn::prompt::EXAMPLE_VALUE;

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "example-copy",
    default_on: true,
    effect: Effect::Declines,
    what: "declines a turn whose every call carries the prompt's own example value, where the person never said it",
    why: "a very small model copies the example it was shown into calls the request never asked for",
    example: "\"Wie spät ist es in Tokio?\" with a calculator among the tools: calculator(expression: \"12.5 * 4\") is the prompt's example: declined, the model answers",
    safety: "It acts only on a value equal to the example toolloop's own prompt shows, and only where the person's words do not ground it; it never changes a call. A right call carries the person's values, so it passes (`src/eval/invariant.rs`).",
    measured: "Invariant: every right call of BFCL (1,000), the everyday, language and scripts sets passes unchanged. Gemma 3 270M, validation halves, off -> on (live): five-language no-tool requests answered without a tool 1 -> 15 of 15, everyday ones 0 -> 7 of 15, right calls unchanged. Qwen 0.5B: nothing moved (it copied the example in 3 of 70 first replies, which tool-fit declined already). BENCHMARKS.md, \"Examples copied\".",
};

/// The `example-copy` check.
#[derive(Debug)]
pub struct ExampleCopy;

impl Check for ExampleCopy {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_calls(
        &self,
        ctx: &TurnContext<'_>,
        calls: &[(String, Map<String, Value>)],
        judgement: &mut Judgement,
    ) {
        if !ctx.earlier.is_empty() || calls.is_empty() {
            return;
        }
        let why: Option<Vec<String>> = calls
            .iter()
            .map(|(tool, arguments)| {
                copied(arguments, ctx.said)
                    .map(|name| format!("{tool}'s {name} is the prompt's example"))
            })
            .collect();
        if let Some(why) = why {
            let reason = format!("{}, which the request never says", why.join("; "));
            judgement.decline_on_record(INFO.name, reason);
        }
    }
}

/// The first argument whose value is the prompt's example and not said by the person.
fn copied(arguments: &Map<String, Value>, said: &super::Evidence) -> Option<String> {
    arguments
        .iter()
        .find(|(_, v)| v.as_str().is_some_and(|s| same(s, EXAMPLE_VALUE)) && !said.grounds(v))
        .map(|(name, _)| name.clone())
}

/// The same value, whatever the case and the spaces: "12.5*4" is "12.5 * 4".
fn same(a: &str, b: &str) -> bool {
    let squeeze = |s: &str| {
        s.chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    squeeze(a) == squeeze(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::Evidence;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_prompts_example_the_person_never_said_is_found_and_theirs_is_not() {
        let said = Evidence::of(["Поставь таймер на 25 минут."]);
        assert_eq!(
            copied(&args(json!({"minutes": 1, "label": "12.5*4"})), &said),
            Some("label".into())
        );
        let theirs = Evidence::of(["What is 12.5 times 4?"]);
        assert_eq!(
            copied(&args(json!({"expression": "12.5 * 4"})), &theirs),
            None
        );
        assert_eq!(
            copied(&args(json!({"expression": "12.5 * 40"})), &said),
            None
        );
    }
}
