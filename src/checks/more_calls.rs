//! `more-calls`: a first turn whose list of calls the model closed while it still gave
//! one more call some weight is asked again, held to one call more.
//!
//! Offered several calls in a turn, Qwen2.5-Coder 0.5B writes the list form for requests
//! that ask for several things and then often closes the list after the first call. Where
//! it closes it, the probabilities beside the `]` tell the two apart: for a request that
//! needs one call the model gave one more call (`,`) at most a few hundred-thousandths, for
//! one that needs more it mostly gave it a few ten-thousandths and up
//! ([`super::tool_probability::more_share`]). A turn above [`MIN_MORE`] is asked again with
//! the schema's list held to at least one call more, which the model then writes.
//!
//! A turn with the single-call form (`tool_call`) is left alone: the model was sure there
//! was one thing to call, and the probabilities there carry no sign of a second.
//!
//! What the asking adds is held to the schema's evidence: a call added after the first
//! turn's calls whose required value shares nothing with what the person wrote (the
//! lenient match of `invented-required`) is not run, and the model is told why with the
//! other results (`Event::NotYet`). Asked for one more, Qwen wrote a step that needed the
//! first call's result at once, on a value of its own: the prompt example's `12.5 * 4`
//! for a temperature not yet known.

use super::{CallUnderCheck, Check, CheckInfo, Effect, Finding, Judgement, Reads, TurnContext};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "more-calls",
    default_on: true,
    off_for: &["gemma"],
    reads: Reads::Reply,
    effect: Effect::AsksForMore,
    what: "asks again for one call more when the model closed its list of calls while giving another some weight",
    why: "a small model often closes a list of calls after the first where the request asks for several",
    example: "\"What moves can a Pikachu learn? Also, check if Bulbasaur can learn Solar Beam\" answered with one call, p(one more) 0.0075 ≥ 0.00013: asked again for at least two",
    safety: "It reads the model's own probability and never changes a call: the model writes at least one call more, held to it by the schema; on llama-server it continues after the calls it made, which stand as written, and elsewhere it writes them again. Only a first turn in the list form is asked again, once. A request whose second step needs the first one's result is its known risk: asked again, a small model may write that step at once with a value of its own. So a call added by the asking whose required value nobody gave is not run: the model is told so with the other calls' results and may make it once the value is in. Turn the check off where calls depend on each other. Off by default for Gemma models: Gemma 3 270M, with it and numbers-left off, made as many right calls on the validation halves of BFCL parallel, parallel_multiple and everyday, in half the seconds on the BFCL sets.",
};

/// The least share the model must have given one more call, where it closed its list, for
/// the turn to be asked again. Chosen on the tuning halves of BFCL `parallel`,
/// `parallel_multiple`, `simple_python` and `multiple`: the geometric middle of the gap
/// between the highest share of a right one-call list and the lowest of a list that
/// needed more.
pub const MIN_MORE: f64 = 1.3e-4;

/// The `more-calls` check.
#[derive(Debug)]
pub struct MoreCalls;

impl Check for MoreCalls {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_turn(&self, ctx: &TurnContext<'_>, _tool: &str, judgement: &mut Judgement) {
        let Some(p) = super::tool_probability::more_share(ctx.reply) else {
            return;
        };
        judgement.p_more = Some(p);
        // Once: the turn asked again is carried out as it comes back.
        if p >= MIN_MORE && !ctx.again && !judgement.declined && judgement.instead.is_empty() {
            judgement.more = true;
        }
    }

    /// Holds a call the asking added whose required value nobody gave.
    fn judge_call(
        &self,
        ctx: &TurnContext<'_>,
        call: &CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        let from = ctx.added_from?;
        if call.index < from {
            return None;
        }
        let nobodys =
            super::grounding::invented_required(call.arguments, &call.spec.input_schema, ctx.said);
        if !nobodys.is_empty() {
            let tool = &call.spec.name;
            let names = nobodys.join(", ");
            let why = format!("{names} given by nobody; it waits for the other calls' results");
            findings.push(Finding::hold(
                INFO.name,
                call,
                nobodys,
                why,
                told(tool, &names),
            ));
        }
        None
    }
}

/// What the model is told of a call the asking added on a value nobody gave.
pub(crate) fn told(tool: &str, names: &str) -> String {
    format!(
        "not run: nobody gave {names} for {tool}. If it needs the results above, call {tool} \
         again with the values they give."
    )
}
