//! `several-calls`: a turn of several calls the model was not sure it wanted several of is
//! asked again as one call; the rest can follow once its result is in.
//!
//! With the `tool_calls` form offered, a small model also writes it for a request that
//! needs one call, and then has to add a second call nobody asked for — the same call
//! with another value, or another tool of the list (Qwen2.5-Coder 0.5B on BFCL's
//! `simple_python` and `multiple`, `BENCHMARKS.md`, "Several calls by default"). Which
//! form it chose is one token: the `s` after `tool_call`. The probability it gave that
//! token ([`super::tool_probability::several_share`]) says how sure it was; below the
//! threshold the turn is not run and the model is asked again with one call allowed. A
//! request that needs several calls then takes one turn per call, as with the form off.

use super::{Check, CheckInfo, Effect, Judgement, TurnContext, tool_probability};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "several-calls",
    default_on: true,
    effect: Effect::Declines,
    what: "asks again for one call when the model gave a turn of several calls too little probability of being several",
    why: "offered the several-call form, a small model writes it for requests that need one call and adds a call nobody asked for",
    example: "\"Find 5 Thai restaurants in Manhattan\" written as two calls at p(several) 0.41 < 0.80: asked again, one call",
    safety: "It only asks again, never changes or drops a call: the model writes the turn anew with one call allowed. A turn the model was sure was several goes ahead.",
    measured: "Invariant: stands aside (no probabilities). Qwen 0.5B, BFCL, validation halves: BENCHMARKS.md, \"Several calls by default\".",
};

/// The `several-calls` check.
#[derive(Debug)]
pub struct SeveralCalls;

impl Check for SeveralCalls {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_turn(&self, ctx: &TurnContext<'_>, _tool: &str, judgement: &mut Judgement) {
        let (Some(t), Some(p)) = (ctx.thresholds, judgement.p_several) else {
            return;
        };
        if tool_probability::is_several(ctx.reply) && p < t.p_several && !judgement.declined {
            judgement.one_call = true;
            judgement.by.get_or_insert(self.info().name);
            judgement.reason = Some(format!("p(several) {p:.2} < {:.2}", t.p_several));
        }
    }
}
