//! `ungrounded-optional`: an optional argument whose value nobody gave is left out, and
//! the tool uses its own default.
//!
//! Under the narrowed schema a small model fills every optional parameter with something:
//! asked for "movies directed by Herbert Ross", Qwen 0.5B added `"genre": "Fantasy"`. A
//! value the person gave appears in what they wrote or in a tool's result; an invented
//! one does not ([`super::grounding`] says how values are matched).

use super::{CallUnderCheck, Check, CheckInfo, Effect, Finding, TurnContext, grounding};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "ungrounded-optional",
    default_on: false,
    effect: Effect::Drops,
    what: "leaves out an optional argument whose value nobody gave",
    why: "small models fill every optional parameter with a value of their own",
    example: "\"movies by Herbert Ross\" with `genre: \"Fantasy\"`: the call goes without `genre`",
    safety: "Unsafe: it drops a value the schema accepts when the person's words do not contain it (\"budget\" for `cheap` is dropped). Off by default.",
    measured: "Invariant: on, it breaks 1 of 60 everyday and 13 of 1,000 BFCL right calls. Qwen 0.5B, validation halves, on against off: everyday 2 made right, 0 wrong; BFCL 1 right, 0 wrong (invented optional values dropped). Gemma 3 270M: unchanged on the validation halves.",
};

/// The `ungrounded-optional` check.
#[derive(Debug)]
pub struct UngroundedOptional;

impl Check for UngroundedOptional {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_call(
        &self,
        ctx: &TurnContext<'_>,
        call: &mut CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        let dropped = grounding::ungrounded(call.arguments, &call.spec.input_schema, ctx.said);
        if !dropped.is_empty() {
            for name in &dropped {
                call.arguments.shift_remove(name);
            }
            findings.push(Finding::Dropped {
                check: INFO.name,
                tool: call.spec.name.clone(),
                arguments: dropped,
            });
        }
        None
    }
}
