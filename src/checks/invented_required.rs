//! `invented-required`: a call whose required value nobody gave becomes a question for
//! the person.
//!
//! A required argument cannot be left out, and an invented one is the mark of a call the
//! question did not ask for: on BFCL `irrelevance` Qwen 0.5B answered "What's the latest
//! trend in technology?" with `region: "world"`. Required values are matched leniently
//! ([`super::grounding::invented_required`]), because a wrong question costs the person
//! a reply.

use super::{CallUnderCheck, Check, CheckInfo, Effect, Finding, Reads, TurnContext, grounding};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "invented-required",
    default_on: false,
    off_for: &[],
    reads: Reads::Call,
    effect: Effect::Asks,
    what: "asks the person for a required value nobody gave instead of calling",
    why: "a required value the model made up is the mark of a call the question did not ask for",
    example: "\"latest trend in technology?\" with `region: \"world\"`: the person is asked for `region`",
    safety: "Unsafe: it turns a right call into a question when a value was said in other words (\"a quarter of an hour\" for 15 minutes). Off by default.",
};

/// The `invented-required` check.
#[derive(Debug)]
pub struct InventedRequired;

impl Check for InventedRequired {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_call(
        &self,
        ctx: &TurnContext<'_>,
        call: &CallUnderCheck<'_>,
        _findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        let invented =
            grounding::invented_required(call.arguments, &call.spec.input_schema, ctx.said);
        (!invented.is_empty()).then_some(invented)
    }
}
